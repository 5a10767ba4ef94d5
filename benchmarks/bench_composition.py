"""Dual quaternions and modular composition: timings at 10,000 states, ratios printed.

1. inverse dynamics in dual quaternions over the spatial algebra (target: within 1.5x);
2. an assembly's inverse dynamics (the paper's scheme) over its flat model's (target: 1.3x).

Each time is the best of several runs of the contenders in turn, in CPU time of this process
(on a shared machine wall-clock times swing by 2x). With 10,000 states every intermediate array
is 80-480 kB, and glibc's malloc by default hands freed heap tops back to the system and takes
them again page by page; how often depends on the allocation pattern, and on small models it can
double one contender's time. The benchmark therefore asks glibc to keep its heap (``mallopt``),
for all contenders alike; ``--system-malloc`` measures with the defaults instead. Run:
    python benchmarks/bench_composition.py [--states 10000] [--repeat 7] [--system-malloc]
Needs example-robot-data (the examples' robots).
"""
import argparse
import ctypes
import ctypes.util
import importlib.util
import pathlib
import time
import warnings

import numpy as np

import screwdyn as sd

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def keep_heap():
    """glibc: no trimming of the heap top, no mmap for large arrays (M_TRIM_THRESHOLD,
    M_MMAP_THRESHOLD); False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return bool(libc.mallopt(-1, 1 << 30) and libc.mallopt(-3, 1 << 30))
    except (OSError, AttributeError, TypeError):
        return False


def best_times(contenders, repeat):
    """{label: best seconds}, the contenders run in turn ``repeat`` times (after one warm-up)."""
    best = {label: np.inf for label in contenders}
    for run in contenders.values():
        run()
    for _ in range(repeat):
        for label, run in contenders.items():
            start = time.process_time()
            run()
            best[label] = min(best[label], time.process_time() - start)
    return best


def states(model, N, seed=0):
    rng = np.random.default_rng(seed)
    q = np.stack([sd.random_configuration(model, s) for s in range(N)])
    return q, rng.normal(size=(N, model.nv)), rng.normal(size=(N, model.nv))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--system-malloc", action="store_true",
                        help="leave glibc's malloc thresholds at their defaults")
    args = parser.parse_args()
    print("malloc:", "system defaults" if args.system_malloc or not keep_heap()
          else "glibc keeps its heap (mallopt)")
    N = args.states
    branched, mobile = example("branched_24dof"), example("mobile_manipulator_30dof")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        assemblies = {"branched 24 DoF (8 subsystems)": branched.build(),
                      "mobile 33 DoF (2 subsystems)": mobile.build(payload=False)}
        panda = sd.load_urdf(branched.example_robot_data("panda_description/urdf/panda.urdf"))
        talos = sd.load_urdf(branched.example_robot_data("talos_data/robots/talos_reduced.urdf"),
                             floating_base=True)

    print(f"inverse dynamics, {N} states: dual quaternions / spatial algebra")
    models = {"panda (9)": panda, "talos, floating (38)": talos,
              **{name: asm.to_model() for name, asm in assemblies.items()}}
    for name, model in models.items():
        q, qd, qdd = states(model, N)
        t = best_times({alg: lambda alg=alg: sd.inverse_dynamics(model, q, qd, qdd, algebra=alg)
                        for alg in ("spatial", "dq")}, args.repeat)
        print(f"  {name:32s} spatial {t['spatial'] * 1e3:7.1f} ms   dq {t['dq'] * 1e3:7.1f} ms"
              f"   ratio {t['dq'] / t['spatial']:.2f}")

    print(f"inverse dynamics, {N} states: assembly / its flat model (same algebra)")
    for name, asm in assemblies.items():
        flat = asm.to_model()
        q, qd, qdd = states(flat, N)
        for alg in ("dq", "spatial"):
            t = best_times({
                "assembly": lambda: asm.inverse_dynamics(q, qd, qdd, algebra=alg),
                "flat": lambda: sd.inverse_dynamics(flat, q, qd, qdd, algebra=alg)}, args.repeat)
            print(f"  {name:32s} {alg:8s} flat {t['flat'] * 1e3:7.1f} ms   assembly "
                  f"{t['assembly'] * 1e3:7.1f} ms   ratio {t['assembly'] / t['flat']:.2f}")


if __name__ == "__main__":
    main()
