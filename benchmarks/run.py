"""screwdyn side by side with Pinocchio, Robotics Toolbox and pygafro, in one process and one run.

    python benchmarks/run.py            # full run (a few minutes on 2 cores)
    python benchmarks/run.py --quick    # fewer sizes and repetitions (about a minute)

Prints per-state times (microseconds) of inverse dynamics (ID), forward dynamics (FD) and the mass
matrix (M) for the Panda, the UR5, the Talos humanoid on a floating base and a 100-link chain:
Pinocchio called once per state from Python (the baseline), screwdyn on numpy batches, screwdyn
compiled with JAX for batches and for one state (``screwdyn.compiled.compile``), in each algebra,
and Robotics Toolbox and pygafro where they have the robot. Speed-ups are Pinocchio's time over
ours (``2.0x``: twice as fast). Then the scaling of cost with the number of links (chains of 10 to
200 links, with a linear fit) and with the batch size, and the peak memory of a million Panda
states. Writes ``benchmark.json`` and ``benchmark.png`` to ``--out`` (default
``benchmarks/results``). A reference library that is not installed is reported as missing.
"""
import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

import screwdyn as sd  # noqa: E402
from screwdyn.algebra import get_algebra  # noqa: E402

FUNCTIONS = ("inverse_dynamics", "forward_dynamics", "mass_matrix")
SHORT = {"inverse_dynamics": "ID", "forward_dynamics": "FD", "mass_matrix": "M"}
JAX_MAX_BODIES = 12  # larger trees take minutes of XLA compilation: --jax-large includes them


# -- optional libraries ---------------------------------------------------------------------------
def optional(name):
    try:
        return __import__(name)
    except Exception as error:  # noqa: BLE001 (any import failure means: not available)
        return f"missing ({type(error).__name__}: {error})"


def versions(libs):
    out = {"python": platform.python_version(), "numpy": np.__version__,
           "screwdyn": sd.__version__, "machine": platform.machine(),
           "cpus": os.cpu_count(), "load_average": os.getloadavg()}
    for key, lib in libs.items():
        out[key] = lib if isinstance(lib, str) else getattr(lib, "__version__", "installed")
    return out


def robots_dir():
    for base in sys.path:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(path):
            return path
    return None


def chain_urdf(n):
    """A chain of n links on revolute joints about z, y, x in turn (Pinocchio and screwdyn read
    the same text)."""
    axes = ("0 0 1", "0 1 0", "1 0 0")
    parts = ['<robot name="chain%d">' % n,
             '<link name="base"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" '
             'izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>']
    parent = "base"
    for i in range(n):
        parts.append(
            f'<link name="l{i}"><inertial><origin xyz="0.05 0 0.1"/><mass value="1"/>'
            '<inertia ixx="0.02" iyy="0.02" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>'
            f'<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
            f'<origin xyz="0 0 0.2"/><axis xyz="{axes[i % 3]}"/>'
            '<limit lower="-3" upper="3" effort="100" velocity="10"/></joint>')
        parent = f"l{i}"
    parts.append("</robot>")
    return "".join(parts)


def load_robots(names, pin):
    """name -> dict(model, pin_model or None, source, note)."""
    root = robots_dir()
    files = {"panda": ("panda_description/urdf/panda.urdf", False),
             "ur5": ("ur_description/urdf/ur5_robot.urdf", False),
             "talos": ("talos_data/robots/talos_reduced.urdf", True)}
    out = {}
    for name in names:
        if name.startswith("chain"):
            text, floating = chain_urdf(int(name[5:])), False
            source = f"generated {name[5:]}-link chain"
        else:
            if root is None and name in ("panda", "ur5"):
                text, floating = sd.robots.path(name), False  # the bundled copy
            elif root is None:
                print(f"  {name}: example-robot-data missing, skipped")
                continue
            else:
                relative, floating = files[name]
                text = os.path.join(root, relative)
            source = os.path.basename(str(text))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = sd.load_urdf(text, floating_base=floating, joint_order="name")
        pin_model = None
        if not isinstance(pin, str):
            root_joint = pin.JointModelFreeFlyer() if floating else None
            if text.lstrip().startswith("<"):
                pin_model = (pin.buildModelFromXML(text, root_joint) if root_joint
                             else pin.buildModelFromXML(text))
            else:
                pin_model = (pin.buildModelFromUrdf(text, root_joint) if root_joint
                             else pin.buildModelFromUrdf(text))
        out[name] = {"model": model, "pin": pin_model, "source": source, "floating": floating}
    return out


# -- timing ---------------------------------------------------------------------------------------
def best(fn, repeat, number=1):
    """Best of ``repeat`` runs of ``number`` calls: seconds per call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def states(model, N, seed=0):
    rng = np.random.default_rng(seed)
    q = np.stack([sd.random_configuration(model, int(s)) for s in rng.integers(1 << 30, size=N)])
    return q, rng.normal(size=(N, model.nv)), rng.normal(size=(N, model.nv))


def time_pinocchio(pin, pm, q, qd, u, repeat):
    data = pm.createData()
    calls = {"inverse_dynamics": lambda i: pin.rnea(pm, data, q[i], qd[i], u[i]),
             "forward_dynamics": lambda i: pin.aba(pm, data, q[i], qd[i], u[i]),
             "mass_matrix": lambda i: pin.crba(pm, data, q[i])}
    n = len(q)
    out = {}
    for f, call in calls.items():
        def loop(call=call):
            for i in range(n):
                call(i)
        out[f] = best(loop, repeat) / n * 1e6
    return out


def check_against_pinocchio(pin, pm, model, q, qd, u):
    """Largest |tau_screwdyn - tau_pinocchio| over a few states (the models must be the same)."""
    data = pm.createData()
    if [pm.names[i] for i in range(1, pm.njoints)] != list(model.joint_names) or pm.nq != model.nq:
        return None
    ours = sd.inverse_dynamics(model, q[:5], qd[:5], u[:5])
    return float(max(np.abs(ours[i] - pin.rnea(pm, data, q[i], qd[i], u[i])).max()
                     for i in range(5)))


def time_numpy(model, algebra, q, qd, u, repeat, native=False):
    """The public call on a numpy batch: on the numpy path, or (``native``) on the native path
    of the execution plan, with its optimised programs compiled first."""
    calls = {"inverse_dynamics": lambda: sd.inverse_dynamics(model, q, qd, u, algebra=algebra),
             "forward_dynamics": lambda: sd.forward_dynamics(model, q, qd, u, algebra=algebra),
             "mass_matrix": lambda: sd.mass_matrix(model, q, algebra=algebra)}
    previous = sd.execution.use_native(native)
    try:
        if native:
            for f in calls:
                sd.plan(model, f, algebra).compile()
        return {f: best(call, 2 * repeat - 1) / len(q) * 1e6 for f, call in calls.items()}
    finally:
        sd.execution.use_native(previous)


def time_jax(model, algebra, q, qd, u, repeat, single_repeat):
    """Batched (device arrays in) and single-state (numpy in, numpy out) compiled programs."""
    import jax.numpy as jnp

    from screwdyn.compiled import compile as sd_compile

    out = {}
    N = len(q)
    for f in FUNCTIONS:
        entry = {}
        batched = sd_compile(model, f, algebra=algebra, batch_shape=(N,), backend="jax")
        args = [jnp.asarray(a) for a in (q, qd, u)[:len(batched.input_names)]]
        entry["batched_us"] = best(lambda: batched(*args).block_until_ready(), 2 * repeat + 1,
                                   3) / N * 1e6
        entry["batched_compile_s"] = batched.compile_time
        single = sd_compile(model, f, algebra=algebra, numpy=True, backend="jax")
        one = [np.asarray(a[0]) for a in (q, qd, u)[:len(single.input_names)]]
        entry["single_us"] = best(lambda: single(*one), single_repeat, 200) * 1e6
        jax_one = [jnp.asarray(a) for a in one]
        raw = sd_compile(model, f, algebra=algebra, backend="jax")
        entry["single_jax_in_us"] = best(lambda: raw(*jax_one).block_until_ready(),
                                         single_repeat, 200) * 1e6
        entry["single_compile_s"] = single.compile_time
        out[f] = entry
        del batched, single, raw
        gc.collect()
    return out


def time_rtb(rtb, name, repeat, n_states=300):
    models = {"panda": "Panda", "ur5": "UR5"}
    if isinstance(rtb, str) or name not in models:
        return None
    robot = getattr(rtb.models.DH, models[name])()
    n = robot.n
    rng = np.random.default_rng(1)
    q, qd, u = (rng.normal(size=(n_states, n)) for _ in range(3))
    calls = {"inverse_dynamics": lambda i: robot.rne(q[i], qd[i], u[i]),
             "forward_dynamics": lambda i: robot.accel(q[i], qd[i], u[i]),
             "mass_matrix": lambda i: robot.inertia(q[i])}
    out = per_state_loops(calls, n_states, repeat)
    try:
        out["inverse_dynamics_batched"] = best(lambda: robot.rne(q, qd, u), repeat) / n_states * 1e6
    except Exception as error:  # noqa: BLE001
        out["errors"] = out.get("errors", []) + [f"rne batched: {error}"]
    out["model"] = f"rtb.models.DH.{models[name]} ({n} joints, DH parameters)"
    return out


def per_state_loops(calls, n_states, repeat):
    """Per-state time of each call(i) looped over the states; a failure is recorded, not hidden."""
    out = {}
    for f, call in calls.items():
        def loop(call=call):
            for i in range(n_states):
                call(i)
        try:
            out[f] = best(loop, repeat) / n_states * 1e6
        except Exception as error:  # noqa: BLE001 (a reference library's own failure)
            out.setdefault("errors", []).append(f"{SHORT[f]}: {type(error).__name__}: {error}")
    return out


def time_gafro(gafro, name, repeat, n_states=300):
    classes = {"panda": "FrankaEmikaRobot", "ur5": "UR5"}
    if isinstance(gafro, str) or name not in classes:
        return None
    robot = getattr(gafro, classes[name])()
    n = len(robot.getRandomConfiguration())
    rng = np.random.default_rng(2)
    q, qd, u = (rng.normal(size=(n_states, n)) for _ in range(3))
    calls = {"inverse_dynamics": lambda i: robot.getJointTorques(q[i], qd[i], u[i], 9.81),
             "forward_dynamics": lambda i: robot.getJointAccelerations(q[i], qd[i], u[i]),
             "mass_matrix": lambda i: robot.getMassMatrix(list(q[i]))}
    out = per_state_loops(calls, n_states, repeat)
    out["model"] = f"pygafro.{classes[name]} ({n} joints)"
    return out


# -- scaling --------------------------------------------------------------------------------------
def linear_fit(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    r2 = 1 - (residual ** 2).sum() / ((y - y.mean()) ** 2).sum()
    exponent = np.polyfit(np.log(x), np.log(y), 1)[0]
    return {"us_per_link": float(slope), "intercept_us": float(intercept), "r2": float(r2),
            "loglog_exponent": float(exponent)}


def dof_scaling(pin, sizes, N, repeat):
    rows = []
    for n in sizes:
        robot = load_robots([f"chain{n}"], pin)[f"chain{n}"]
        model = robot["model"]
        q, qd, u = states(model, N, seed=n)
        row = {"links": n}
        for f in ("inverse_dynamics", "forward_dynamics"):
            call = getattr(sd, f)
            row[f"numpy_{SHORT[f]}"] = best(lambda: call(model, q, qd, u), repeat) / N * 1e6
        if robot["pin"] is not None:
            p = time_pinocchio(pin, robot["pin"], q[:500], qd[:500], u[:500], repeat)
            row["pinocchio_ID"], row["pinocchio_FD"] = p["inverse_dynamics"], p["forward_dynamics"]
        rows.append(row)
        print(f"  {n:4d} links: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()
                                               if k != "links") + " us/state", flush=True)
    fits = {key: linear_fit([r["links"] for r in rows], [r[key] for r in rows])
            for key in rows[0] if key != "links"}
    return {"rows": rows, "fits": fits}


def batch_scaling(pin, robot, sizes, repeat, use_jax):
    model = robot["model"]
    rows = []
    for N in sizes:
        q, qd, u = states(model, N, seed=N)
        row = {"batch": N}
        reps = max(repeat, min(50, 20000 // N))
        for f in ("inverse_dynamics", "forward_dynamics"):
            call = getattr(sd, f)
            previous = sd.execution.use_native(False)
            row[f"numpy_{SHORT[f]}"] = best(lambda: call(model, q, qd, u), reps) / N * 1e6
            sd.execution.use_native(True)
            sd.plan(model, f).compile()
            row[f"native_{SHORT[f]}"] = best(lambda: call(model, q, qd, u), reps) / N * 1e6
            sd.execution.use_native(previous)
            if use_jax:
                import jax.numpy as jnp

                from screwdyn.compiled import compile as sd_compile

                g = sd_compile(model, f, batch_shape=(N,), backend="jax")
                args = [jnp.asarray(a) for a in (q, qd, u)]
                row[f"jax_{SHORT[f]}"] = best(lambda: g(*args).block_until_ready(), reps) / N * 1e6
        rows.append(row)
        print(f"  batch {N:7d}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()
                                              if k != "batch") + " us/state", flush=True)
    return rows


MEMORY_SCRIPT = r"""
import sys, time, tracemalloc
import numpy as np
sys.path.insert(0, sys.argv[1])
import screwdyn as sd
from screwdyn import dynamics
from screwdyn.execution import plan
from screwdyn.model import robots


def rss_mb(field):  # this process's own memory (ru_maxrss would include the parent's before exec)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024


model = robots.load("panda")
N = int(sys.argv[2])
rng = np.random.default_rng(0)
q = rng.uniform(-1, 1, (N, model.nq))
qd, qdd = rng.normal(size=(2, N, model.nv))
inputs_mb = (q.nbytes + qd.nbytes + qdd.nbytes) / 1e6
sd.inverse_dynamics(model, q[:10], qd[:10], qdd[:10])
rss0 = rss_mb("VmRSS")
tracemalloc.start()
start = time.perf_counter()
tau = sd.inverse_dynamics(model, q, qd, qdd)
seconds = time.perf_counter() - start
peak = tracemalloc.get_traced_memory()[1] / 1e6
tracemalloc.stop()
print({"states": N, "tracemalloc_peak_mb": peak, "result_mb": tau.nbytes / 1e6,
       "inputs_mb": inputs_mb, "rss_before_call_mb": rss0, "peak_rss_mb": rss_mb("VmHWM"),
       "seconds": seconds,
       "chunk_states": plan.chunk_size(model, dynamics.FUNCTIONS["inverse_dynamics"])})
"""


def memory_peak(N):
    """Peak memory of inverse dynamics for N Panda states, in a fresh process (clean RSS)."""
    src = os.path.join(HERE, "..", "src")
    result = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, src, str(N)],
                            capture_output=True, text=True, timeout=600)
    if result.returncode:
        return {"error": result.stderr[-500:]}
    import ast

    return ast.literal_eval(result.stdout.strip().splitlines()[-1])


# -- report ---------------------------------------------------------------------------------------
def fmt(t, reference=None):
    if t is None:
        return "-"
    text = f"{t:8.2f}"
    if reference:
        text += f" ({reference / t:4.1f}x)"
    return text


def print_robot_table(name, info, rows):
    model = info["model"]
    print(f"\n{name}: nq={model.nq}, nv={model.nv}, {model.nbodies} bodies ({info['source']}); "
          "us per state, (speed-up over Pinocchio)")
    pin_row = next((r for r in rows if r["impl"] == "pinocchio"), None)
    print(f"  {'implementation':<44}" + "".join(f"{SHORT[f]:>17}" for f in FUNCTIONS))
    for r in rows:
        cells = []
        for f in FUNCTIONS:
            ref = pin_row["us"].get(f) if pin_row and r is not pin_row else None
            cells.append(f"{fmt(r['us'].get(f), ref):>17}")
        print(f"  {r['label']:<44}" + "".join(cells))
    for r in rows:
        if r.get("note"):
            print(f"    {r['label']}: {r['note']}")


def plot(results, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib missing: no plot"
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.5))
    panda = [r for r in results["tables"].get("panda", [])
             if all(r["us"].get(f) for f in FUNCTIONS)]
    ax = axes[0]
    width = 0.8 / max(len(panda), 1)
    for k, r in enumerate(panda):
        ax.bar(np.arange(3) + k * width, [r["us"][f] for f in FUNCTIONS], width, label=r["label"])
    ax.set_xticks(np.arange(3) + 0.4 - width / 2, [SHORT[f] for f in FUNCTIONS])
    ax.set_yscale("log")
    ax.set_ylabel("us per state")
    ax.set_title("Panda: per-state time")
    ax.legend(fontsize=6)
    scaling = results.get("dof_scaling")
    ax = axes[1]
    if scaling:
        links = [r["links"] for r in scaling["rows"]]
        for key in scaling["rows"][0]:
            if key != "links":
                ax.plot(links, [r[key] for r in scaling["rows"]], "o-", label=key)
    ax.set_xlabel("links in the chain")
    ax.set_ylabel("us per state")
    ax.set_title("Cost against DoF")
    ax.legend(fontsize=7)
    ax = axes[2]
    batch = results.get("batch_scaling")
    if batch:
        sizes = [r["batch"] for r in batch]
        for key in batch[0]:
            if key != "batch":
                ax.plot(sizes, [r[key] for r in batch], "o-", label=key)
        pin_row = next((r for r in results["tables"].get("panda", []) if r["impl"] == "pinocchio"),
                       None)
        if pin_row:
            for f, style in (("inverse_dynamics", "--"), ("forward_dynamics", ":")):
                ax.axhline(pin_row["us"][f], color="k", linestyle=style,
                           label=f"pinocchio {SHORT[f]} (per-state loop)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("states per call")
    ax.set_ylabel("us per state")
    ax.set_title("Panda: cost against batch size")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    parser.add_argument("--out", default=os.path.join(HERE, "results"), help="output folder")
    parser.add_argument("--robots", default="panda,ur5,talos,chain100")
    parser.add_argument("--algebras", default="spatial,cga,dq")
    parser.add_argument("--jax-large", action="store_true",
                        help=f"also compile JAX programs for trees of more than {JAX_MAX_BODIES} "
                             "bodies (minutes of XLA compilation each)")
    parser.add_argument("--no-jax", action="store_true")
    parser.add_argument("--sync-dispatch", action="store_true",
                        help="jax_cpu_enable_async_dispatch=False: lower single-call latency")
    args = parser.parse_args(argv)
    quick = args.quick
    repeat = 2 if quick else 3
    N = 2000 if quick else 10000
    started = time.perf_counter()

    libs = {"pinocchio": optional("pinocchio"), "roboticstoolbox": optional("roboticstoolbox"),
            "pygafro": optional("pygafro"), "jax": "disabled (--no-jax)" if args.no_jax
            else optional("jax")}
    jax = libs["jax"]
    if not isinstance(jax, str):
        jax.config.update("jax_enable_x64", True)
        if args.sync_dispatch:
            jax.config.update("jax_cpu_enable_async_dispatch", False)
            libs["jax"] = f"{jax.__version__} (synchronous CPU dispatch)"
    pin, rtb, gafro = libs["pinocchio"], libs["roboticstoolbox"], libs["pygafro"]
    algebras = []
    for a in args.algebras.split(","):
        try:
            get_algebra(a)
            algebras.append(a)
        except ValueError:
            print(f"algebra {a!r} is not available: skipped")
    results = {"environment": versions(libs), "quick": quick, "batch": N, "tables": {},
               "gpu": "not measured: no GPU on this machine (JAX runs on CPU)"}
    print("screwdyn benchmark" + (" (quick)" if quick else ""))
    for key, value in results["environment"].items():
        print(f"  {key}: {value}")
    print(f"  GPU: {results['gpu']}")

    robots = load_robots(args.robots.split(","), pin)
    for name, info in robots.items():
        model = info["model"]
        n_states = N
        q, qd, u = states(model, n_states)
        rows = []
        if info["pin"] is not None:
            pm = info["pin"]
            rows.append({"impl": "pinocchio",
                         "label": f"pinocchio {pin.__version__} (per-state loop)",
                         "us": time_pinocchio(pin, pm, q[:2000], qd[:2000], u[:2000], repeat),
                         "max_abs_error_ID": check_against_pinocchio(pin, pm, model, q, qd, u)})
        else:
            rows.append({"impl": "pinocchio", "label": "pinocchio", "us": {}, "note": pin})
        for a in algebras:
            rows.append({"impl": "native", "algebra": a,
                         "label": f"screwdyn native batched (public call), {a}",
                         "us": time_numpy(model, a, q, qd, u, repeat, native=True),
                         "batch": n_states})
        for a in algebras:
            rows.append({"impl": "numpy", "algebra": a, "label": f"screwdyn numpy batched, {a}",
                         "us": time_numpy(model, a, q, qd, u, repeat), "batch": n_states})
        if isinstance(jax, str):
            rows.append({"impl": "jax", "label": "screwdyn JAX", "us": {}, "note": jax})
        elif model.nbodies > JAX_MAX_BODIES and not args.jax_large:
            rows.append({"impl": "jax", "label": "screwdyn JAX (batched and single)", "us": {},
                         "note": f"skipped: {model.nbodies} bodies; XLA compiles the unrolled "
                                 "recursion in tens of seconds to minutes (--jax-large)"})
        else:
            for a in (algebras if not quick else algebras[:1]):
                timing = time_jax(model, a, q, qd, u, repeat, 3 if quick else 7)
                rows.append({"impl": "jax_batched", "algebra": a, "batch": n_states,
                             "label": f"screwdyn JAX batched, {a}",
                             "us": {f: timing[f]["batched_us"] for f in FUNCTIONS},
                             "compile_s": {f: timing[f]["batched_compile_s"] for f in FUNCTIONS}})
                rows.append({"impl": "jax_single", "algebra": a,
                             "label": f"screwdyn JAX single (compiled), {a}",
                             "us": {f: timing[f]["single_us"] for f in FUNCTIONS},
                             "us_jax_arrays_in": {f: timing[f]["single_jax_in_us"]
                                                  for f in FUNCTIONS},
                             "compile_s": {f: timing[f]["single_compile_s"] for f in FUNCTIONS}})
        for lib, timer in (("roboticstoolbox", time_rtb), ("pygafro", time_gafro)):
            timing = timer(libs[lib], name, repeat)
            if timing is not None:
                note = timing.pop("model") + "; not the same model parameters"
                errors = timing.pop("errors", [])
                if errors:
                    note += "; failed: " + "; ".join(errors)
                rows.append({"impl": lib, "label": f"{lib} (per-state loop)", "us": timing,
                             "note": note})
            elif isinstance(libs[lib], str):
                rows.append({"impl": lib, "label": lib, "us": {}, "note": libs[lib]})
        results["tables"][name] = rows
        print_robot_table(name, info, rows)
        for r in rows:
            if r.get("compile_s"):
                print(f"    {r['label']}: compile " + ", ".join(
                    f"{SHORT[f]} {t:.1f} s" for f, t in r["compile_s"].items()))
        if rows[0].get("max_abs_error_ID") is not None:
            print(f"    ID agrees with Pinocchio to {rows[0]['max_abs_error_ID']:.1e}")

    n_chain = 4096 if quick else 8192
    print("\nCost against DoF (chains, numpy batches of %d states; Pinocchio per-state loop)"
          % n_chain)
    sizes = [10, 50, 100] if quick else [10, 20, 50, 100, 200]
    results["dof_scaling"] = dof_scaling(pin, sizes, n_chain, repeat)
    for key, fit in results["dof_scaling"]["fits"].items():
        print(f"  {key:<14} {fit['us_per_link']:.3f} us per link (+{fit['intercept_us']:.2f}), "
              f"R^2 {fit['r2']:.4f}, log-log exponent {fit['loglog_exponent']:.2f}")

    if "panda" in robots:
        print("\nCost against batch size (Panda)")
        sizes = [1, 100, 10000] if quick else [1, 10, 100, 1000, 10000, 100000]
        results["batch_scaling"] = batch_scaling(pin, robots["panda"], sizes, repeat,
                                                 not isinstance(jax, str))

    states_memory = 200_000 if quick else 1_000_000
    print(f"\nMemory: inverse dynamics of {states_memory} Panda states (numpy, fresh process)")
    results["memory"] = memory_peak(states_memory)
    print("  " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                           for k, v in results["memory"].items()))

    results["environment"]["load_average_end"] = os.getloadavg()
    results["seconds"] = time.perf_counter() - started
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "benchmark.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    picture = plot(results, os.path.join(args.out, "benchmark.png"))
    print(f"\nwrote {os.path.join(args.out, 'benchmark.json')} and {picture} "
          f"in {results['seconds']:.0f} s (load average {results['environment']['load_average']}"
          f" -> {results['environment']['load_average_end']})")


if __name__ == "__main__":
    main()
