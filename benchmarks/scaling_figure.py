"""The scaling figure of docs/scaling.md: measured throughput against workers, and the model of
docs/scaling.md drawn from the measured overheads.

    python benchmarks/rollouts.py --plot docs/scaling.svg   # from benchmarks/results/rollouts.json
"""
import numpy as np


NETWORK = 1.25e9  # bytes/s of a 10 Gbit/s link: results of actors on other nodes


def model_parameters(data):
    """The model's inputs from a benchmarks/rollouts.py JSON: seconds per chunk on one worker
    (from the CPU time per rollout of the serial rows: what one idle core takes, whatever the
    load was), the driver's seconds per chunk (task overhead, and the transfer of results)."""
    args, summary, overhead = data["info"]["args"], data["summary"], data["overhead"]
    C = args["chunk_size"]
    t_chunk = C * summary["serial x1"]["cpu_ms_per_rollout_median"] / 1e3
    samples = round(args["t_final"] / (args["dt"] * args["record_every"])) + 1
    nq = nv = 6  # the Puma
    chunk_bytes = C * samples * (nq + 3 * nv + 2) * 8
    out = {"C": C, "t_chunk": t_chunk, "chunk_bytes": chunk_bytes, "engines": {}}
    for name in ("processes", "ray"):
        if name not in overhead:
            continue
        task = overhead[name]["overhead_per_task_s"]
        rate = data["transfer"][f"{name}_MB_per_s"] * 1e6
        out["engines"][name] = {"task_s": task, "bytes_per_s": rate,
                                "driver_memory_s": task + chunk_bytes / rate,
                                "driver_dataset_s": task}
        if name == "ray":
            out["engines"][name]["driver_network_s"] = task + chunk_bytes / NETWORK
    return out


def throughput(workers, t_chunk, driver_s, C):
    """Rollouts per second of W workers fed by one driver: each worker does a chunk in t_chunk,
    the driver handles a chunk in driver_s."""
    workers = np.asarray(workers, dtype=float)
    return C * np.minimum(workers / t_chunk, 1.0 / driver_s)


def draw(data, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = model_parameters(data)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    W = np.unique(np.round(np.logspace(0, np.log10(2048), 200)))
    ax.plot(W, throughput(W, p["t_chunk"], 1e-12, p["C"]), color="0.7", lw=1,
            label="ideal: workers x one idle core (from CPU time per rollout)")
    colors = {"processes": "tab:blue", "ray": "tab:orange"}
    for name, e in p["engines"].items():
        c = colors[name]
        ax.plot(W, throughput(W, p["t_chunk"], e["driver_memory_s"], p["C"]), color=c, ls="--",
                label=f"model, {name}, results in memory")
        ax.plot(W, throughput(W, p["t_chunk"], e["driver_dataset_s"], p["C"]), color=c, ls=":",
                label=f"model, {name}, shards written by workers")
        if "driver_network_s" in e:
            ax.plot(W, throughput(W, p["t_chunk"], e["driver_network_s"], p["C"]), color=c,
                    ls="-.", label=f"model, {name}, results in memory over 10 Gbit/s")
        rows = [r for r in data["rows"] if r["engine"] == name]
        ax.plot([r["workers"] for r in rows], [r["rollouts_per_s"] for r in rows], "o", color=c,
                label=f"measured, {name} (this machine, 2 cores)")
    serial = [r for r in data["rows"] if r["engine"] == "serial"]
    ax.plot([1] * len(serial), [r["rollouts_per_s"] for r in serial], "k^",
            label="measured, serial")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("workers (one CPU each)")
    ax.set_ylabel("Puma 560 rollouts of 1 s per second")
    args = data["info"]["args"]
    ax.set_title(f"sd.rollouts: RK4, dt = {args['dt']} s, chunks of {args['chunk_size']}, "
                 f"every {args['record_every']}th sample kept", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    return path
