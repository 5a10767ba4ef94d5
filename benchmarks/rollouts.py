"""sd.rollouts against the number of workers: throughput of "processes" and "ray", the cost of
one task, the rate results travel at, side by side in one run.

    python benchmarks/rollouts.py                      # 10,000 Puma rollouts of 1 s (~15 min)
    python benchmarks/rollouts.py --n 2000 --repeat 1  # a quick look
    python benchmarks/rollouts.py --plot docs/scaling.svg

For each repetition (interleaved, so that a change in the machine's load hits every row alike):
for each engine and worker count, in a fresh Python process, an engine is opened (timed: workers
start, import JAX and compile the rollout on a first small job) and then runs the job on warm
workers (timed: the throughput). The serial engine is the one-process reference. Then the
per-task overhead (many one-step chunks of one rollout on one warm worker: the job's wall time
less the time the worker spent in its chunks, per task) and the transfer rate (an array of a
chunk's size sent back through the engine's channel: a pipe, Ray's object store) are measured.

A row with W workers runs on W CPUs (its processes pinned to the first W with
``sched_setaffinity``, which workers and Ray's processes inherit; the serial row on one): without
it, one worker's job also uses part of a second core (the driver receiving results while the
worker computes, JAX's threads), and "1 worker" would not mean one core. ``--no-pin`` turns it
off. The CPU time every process of the job used (this one and all below it: workers, Ray's own
processes) is measured too: per rollout, it says what the engine costs whatever else the machine
runs, where the wall-clock speed-up depends on the load left by others (reported).

The job: the bundled Puma 560 (Corke's parameters), random initial configurations
(``RandomStates``, at rest), zero torque, RK4 at dt = 1 ms for 1 s, every 10th sample kept
(``--record-every``), chunks of 256 rollouts, results in memory (``--dataset``: written to a
Parquet dataset in a temporary folder instead). Prints a table and writes JSON (every number,
versions, load averages before and after each measurement).
"""
import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

import screwdyn as sd  # noqa: E402
from screwdyn.rollouts import ProcessEngine, RandomStates, SerialEngine  # noqa: E402


def make_engine(name, workers):
    if name == "serial":
        return SerialEngine()
    if name == "processes":
        return ProcessEngine(workers)
    from screwdyn.rollouts import RayEngine

    return RayEngine(workers)


def job(model, engine, n, args, out=None, seed=0, chunk_size=None, t_final=None):
    return sd.rollouts(model, RandomStates(model), None, None, t_final or args.t_final, args.dt,
                       n=n, seed=seed, engine=engine, chunk_size=chunk_size or args.chunk_size,
                       record_every=args.record_every, out=out, progress=False)


def _tree_cpu_seconds():
    """CPU seconds (user + system) used so far by this process and every process below it
    (worker processes; Ray's raylet, object store and actors when this process started Ray).
    Linux /proc; the CPU a job costs, whatever else the machine runs."""
    tick = os.sysconf("SC_CLK_TCK")
    parents, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    mine, changed = {os.getpid()}, True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                changed = True
    return sum(cpu.get(pid, 0.0) for pid in mine)


def measure_throughput(model, name, workers, args):
    """Open an engine, warm it (start + compile), run the job; returns a dict of timings."""
    row = {"engine": name, "workers": workers, "load_before": os.getloadavg()[0]}
    t0 = time.perf_counter()
    engine = make_engine(name, workers)
    folder = tempfile.mkdtemp(prefix="screwdyn-bench-") if args.dataset else None
    try:
        warm = job(model, engine, args.chunk_size * workers, args, seed=10**6)
        row["startup_s"] = time.perf_counter() - t0
        t1, cpu = time.perf_counter(), _tree_cpu_seconds()
        result = job(model, engine, args.n, args, out=None if folder is None else
                     os.path.join(folder, "ds"))
        row["wall_s"] = time.perf_counter() - t1
        row["cpu_s"] = _tree_cpu_seconds() - cpu
        run = result.meta["run"] if folder is None else result.run
        row["failed"] = run["failed"]
        del result, warm
    finally:
        engine.close()
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
    steps = round(args.t_final / args.dt)
    row["rollouts_per_s"] = args.n / row["wall_s"]
    row["cpu_ms_per_rollout"] = 1e3 * row["cpu_s"] / args.n
    row["steps_per_s"] = args.n * steps / row["wall_s"]
    row["load_after"] = os.getloadavg()[0]
    return row


def measure_overhead(model, name, args, tasks=300):
    """Seconds per task that are not the chunk's own work, on one warm worker: tasks of one
    one-step rollout (chunk_size 1); the job's wall time less the time the worker spent in its
    chunks, per task (the part of the engine's overhead that is not hidden behind work)."""
    engine = make_engine(name, 1)
    try:
        job(model, engine, 4, args, chunk_size=1, t_final=args.dt)  # warm
        t0 = time.perf_counter()
        run = job(model, engine, tasks, args, chunk_size=1, t_final=args.dt, seed=1)
        wall = time.perf_counter() - t0
        busy = run.meta["run"]["busy_time"]
        return {"wall_per_task_s": wall / tasks, "work_per_task_s": busy / tasks,
                "overhead_per_task_s": (wall - busy) / tasks}
    finally:
        engine.close()


def measure_transfer(name, megabytes=48, repeat=5):
    """MB/s of an array of ``megabytes`` coming back from a worker through the engine's channel
    (a multiprocessing pipe for processes, the object store for Ray)."""
    payload = np.random.default_rng(0).normal(size=megabytes * (1 << 20) // 8)
    if name == "processes":
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_echo, args=(child,), daemon=True)
        p.start()
        times = []
        for _ in range(repeat):
            parent.send(payload.nbytes)
            t0 = time.perf_counter()
            back = parent.recv()
            times.append(time.perf_counter() - t0)
        parent.send(None)
        p.join()
        assert back.nbytes == payload.nbytes
    else:
        import ray

        @ray.remote(num_cpus=1)
        class Source:
            def make(self, nbytes):
                return np.ones(nbytes // 8)

        source = Source.remote()
        ray.get(source.make.remote(8))
        times = []
        for _ in range(repeat):
            ref = source.make.remote(payload.nbytes)
            ray.wait([ref])  # made; now the transfer to this process
            t0 = time.perf_counter()
            back = ray.get(ref)
            back = np.array(back)  # out of the object store into this process's memory
            times.append(time.perf_counter() - t0)
        ray.kill(source)
    return payload.nbytes / 1e6 / min(times)


def _echo(conn):
    while True:
        nbytes = conn.recv()
        if nbytes is None:
            return
        data = np.ones(nbytes // 8)
        conn.send(data)


def measure_in_child(kind, name, workers, args):
    """One measurement in a fresh Python process (Ray is started there only for Ray's rows, and
    nothing of an earlier row stays warm); returns its JSON."""
    argv = [sys.executable, os.path.abspath(__file__), "--child", f"{kind}:{name}:{workers}",
            "--n", str(args.n), "--t-final", str(args.t_final), "--dt", str(args.dt),
            "--record-every", str(args.record_every), "--chunk-size", str(args.chunk_size)]
    if args.dataset:
        argv.append("--dataset")
    if not args.pin:
        argv.append("--no-pin")
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} {name} x{workers} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def child(spec, args):
    """The measurement ``spec`` ("throughput:ray:2", "overhead:processes:1", "transfer:ray:1")
    in this process; prints its JSON."""
    kind, name, workers = spec.split(":")
    if args.pin and hasattr(os, "sched_setaffinity"):  # W workers on W cores (inherited)
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:int(workers)])
    model = sd.robots.load("puma560")
    if name == "ray":
        import ray

        from screwdyn.rollouts.ray_engine import start_local_ray  # listens on 127.0.0.1 only

        start_local_ray(ray, num_cpus=int(workers) + 1 if kind == "transfer" else int(workers),
                        include_dashboard=False, log_to_driver=False)
    if kind == "throughput":
        result = measure_throughput(model, name, int(workers), args)
    elif kind == "overhead":
        result = measure_overhead(model, name, args)
    else:
        result = {"MB_per_s": measure_transfer(name)}
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10000, help="rollouts per job")
    parser.add_argument("--t-final", type=float, default=1.0)
    parser.add_argument("--dt", type=float, default=1e-3)
    parser.add_argument("--record-every", type=int, default=10)
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--engines", default="serial,processes,ray")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dataset", action="store_true", help="write a Parquet dataset")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="do not pin a row with W workers to W CPUs")
    parser.add_argument("--json", default=os.path.join(HERE, "results", "rollouts.json"))
    parser.add_argument("--plot", help="draw the scaling figure from --json (no measuring)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args)
    if args.plot:
        from scaling_figure import draw  # benchmarks/scaling_figure.py

        with open(args.json) as f:
            draw(json.load(f), args.plot)
        return None
    engines = args.engines.split(",")
    counts = [int(w) for w in args.workers.split(",")]
    info = {"python": platform.python_version(), "screwdyn": sd.__version__,
            "numpy": np.__version__, "cpus": os.cpu_count(), "args": vars(args),
            "load_average_start": os.getloadavg()}
    for package in ("jax", "ray", "pyarrow"):
        try:
            info[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    rows = []
    print(f"{args.n} Puma 560 rollouts of {args.t_final} s (RK4, dt = {args.dt} s, every "
          f"{args.record_every}th sample kept, chunks of {args.chunk_size}"
          f"{', written to a dataset' if args.dataset else ', in memory'}"
          f"{'; W workers pinned to W CPUs' if args.pin else ''}); load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; each row in a fresh process")
    for rep in range(args.repeat):
        for name in engines:
            for workers in ([1] if name == "serial" else counts):
                row = measure_in_child("throughput", name, workers, args)
                row["repeat"] = rep
                rows.append(row)
                print(f"  [{rep}] {name:<10} x{workers}: {row['wall_s']:7.2f} s, "
                      f"{row['rollouts_per_s']:7.1f} rollouts/s, {row['steps_per_s']:.3g} "
                      f"steps/s, {row['cpu_ms_per_rollout']:.2f} CPU ms/rollout, "
                      f"{row['cpu_s'] / row['wall_s']:.2f} cores busy (start "
                      f"{row['startup_s']:.1f} s; load {row['load_before']:.2f} -> "
                      f"{row['load_after']:.2f})", flush=True)
    summary = {}
    for name in engines:
        for workers in ([1] if name == "serial" else counts):
            mine = [r for r in rows if r["engine"] == name and r["workers"] == workers]
            summary[f"{name} x{workers}"] = {
                "rollouts_per_s_median": statistics.median(r["rollouts_per_s"] for r in mine),
                "wall_s_median": statistics.median(r["wall_s"] for r in mine),
                "startup_s_median": statistics.median(r["startup_s"] for r in mine),
                "cpu_ms_per_rollout_median": statistics.median(r["cpu_ms_per_rollout"]
                                                               for r in mine)}
    print("\nmedians (speed-up: throughput over the same engine's 1 worker, and over serial; "
          "CPU: CPU time per rollout of every process of the job, over serial's)")
    serial = summary.get("serial x1", {}).get("rollouts_per_s_median")
    for key, s in summary.items():
        name = key.split(" ")[0]
        one = summary.get(f"{name} x1", {}).get("rollouts_per_s_median")
        vs_one = s["rollouts_per_s_median"] / one if one else float("nan")
        vs_serial = s["rollouts_per_s_median"] / serial if serial else float("nan")
        s["speedup_vs_1_worker"], s["speedup_vs_serial"] = vs_one, vs_serial
        cpu = s["cpu_ms_per_rollout_median"]
        base = summary.get("serial x1", s)["cpu_ms_per_rollout_median"]
        s["cpu_vs_serial"] = cpu / base
        print(f"  {key:<14} {s['rollouts_per_s_median']:7.1f} rollouts/s  {vs_one:5.2f}x  "
              f"{vs_serial:5.2f}x   CPU {cpu:.2f} ms/rollout ({cpu / base:.2f}x)   (wall "
              f"{s['wall_s_median']:.2f} s, start {s['startup_s_median']:.1f} s)")
    overhead = {name: measure_in_child("overhead", name, 1, args) for name in engines}
    transfer = {f"{name}_MB_per_s": measure_in_child("transfer", name, 1, args)["MB_per_s"]
                for name in engines if name != "serial"}
    print("\nper task of one one-step rollout: " + ", ".join(
        f"{n} {1e3 * o['wall_per_task_s']:.2f} ms ({1e3 * o['work_per_task_s']:.2f} ms in the "
        f"chunk, {1e3 * o['overhead_per_task_s']:.2f} ms overhead)" for n, o in overhead.items()))
    print("results travel back at " + ", ".join(f"{k.split('_')[0]} {v:.0f} MB/s"
                                                 for k, v in transfer.items()))
    info["load_average_end"] = os.getloadavg()
    out = {"info": info, "rows": rows, "summary": summary, "overhead": overhead,
           "transfer": transfer}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.json}; load average {os.getloadavg()}")
    return None


if __name__ == "__main__":
    main()
