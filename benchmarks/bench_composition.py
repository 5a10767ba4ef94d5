"""Dual quaternions and modular composition: timings, ratios printed.

1. inverse dynamics in dual quaternions (the paper's Newton-Euler at the centres of mass) over
   the spatial algebra (target: within 1.5x), numpy batches and, with --jax, jax.jit batches;
2. an assembly's inverse dynamics (the subsystems' W_i composed) over its flat model's RNEA;
3. an assembly's forward dynamics (articulated bodies across the connection points) over its
   flat model's ABA, in the same algebra;
4. the time to attach one module to robots of 10 to 1,000 modules.

Each time is the best of several runs of the contenders in turn, in CPU time of this process
(on a shared machine wall-clock times swing by 2x). With 10,000 states every intermediate array
is 80-480 kB, and glibc's malloc by default hands freed heap tops back to the system and takes
them again page by page; how often depends on the allocation pattern, and on small models it can
double one contender's time. The benchmark therefore asks glibc to keep its heap (``mallopt``),
for all contenders alike; ``--system-malloc`` measures with the defaults instead. Run:
    python benchmarks/bench_composition.py [--states 10000] [--repeat 7] [--jax] [--system-malloc]
Needs example-robot-data (the examples' robots).
"""
import argparse
import ctypes
import ctypes.util
import pathlib
import sys
import time
import warnings

import numpy as np

import screwdyn as sd

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))


def keep_heap():
    """glibc: no trimming of the heap top, no mmap for large arrays (M_TRIM_THRESHOLD,
    M_MMAP_THRESHOLD); False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return bool(libc.mallopt(-1, 1 << 30) and libc.mallopt(-3, 1 << 30))
    except (OSError, AttributeError, TypeError):
        return False


def best_times(contenders, repeat, clock=time.process_time):
    """{label: best seconds}, the contenders run in turn ``repeat`` times (after one warm-up)."""
    best = {label: np.inf for label in contenders}
    for run in contenders.values():
        run()
    for _ in range(repeat):
        for label, run in contenders.items():
            start = clock()
            run()
            best[label] = min(best[label], clock() - start)
    return best


def states(model, N, seed=0):
    rng = np.random.default_rng(seed)
    q = np.stack([sd.random_configuration(model, s) for s in range(N)])
    return q, rng.normal(size=(N, model.nv)), rng.normal(size=(N, model.nv))


def robots():
    """The models and assemblies measured."""
    import branched_24dof
    import mobile_manipulator_30dof

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        assemblies = {"branched 24 DoF (8 subsystems)": branched_24dof.build(),
                      "mobile 30 DoF (3 subsystems)": mobile_manipulator_30dof.build()}
        erd = branched_24dof.example_robot_data
        models = {"panda (9)": sd.load_urdf(erd("panda_description/urdf/panda.urdf")),
                  "ur5 (6)": sd.load_urdf(erd("ur_description/urdf/ur5_robot.urdf")),
                  "talos, floating (38)": sd.load_urdf(erd("talos_data/robots/talos_reduced.urdf"),
                                                       floating_base=True)}
    models.update({name: asm.to_model() for name, asm in assemblies.items()})
    return models, assemblies


def jax_times(models, N, repeat):
    """jax.jit batches: {model: (spatial s, dq s)}."""
    import jax

    jax.config.update("jax_enable_x64", True)
    out = {}
    for name, model in models.items():
        q, qd, qdd = (jax.numpy.asarray(a) for a in states(model, N))
        run = {}
        for alg in ("spatial", "dq"):
            f = jax.jit(lambda q, qd, qdd, alg=alg: sd.inverse_dynamics(model, q, qd, qdd,
                                                                       algebra=alg))
            f(q, qd, qdd).block_until_ready()
            run[alg] = lambda f=f: f(q, qd, qdd).block_until_ready()
        t = best_times(run, repeat, clock=time.perf_counter)
        out[name] = (t["spatial"], t["dq"])
    return out


def compare(assemblies, N, repeat, algebras, function):
    """Print the times of ``function`` on each assembly and on its flat model, and the ratio."""
    for name, asm in assemblies.items():
        flat = asm.to_model()
        q, qd, third = states(flat, N)  # qdd, or tau
        for alg in algebras:
            t = best_times({
                "assembly": lambda: getattr(asm, function)(q, qd, third, algebra=alg),
                "flat": lambda: getattr(sd, function)(flat, q, qd, third, algebra=alg)}, repeat)
            print(f"  {name:32s} {alg:8s} flat {t['flat'] * 1e3:7.1f} ms   assembly "
                  f"{t['assembly'] * 1e3:7.1f} ms   ratio {t['assembly'] / t['flat']:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--jax", action="store_true", help="also time jax.jit batches")
    parser.add_argument("--system-malloc", action="store_true",
                        help="leave glibc's malloc thresholds at their defaults")
    args = parser.parse_args()
    print("malloc:", "system defaults" if args.system_malloc or not keep_heap()
          else "glibc keeps its heap (mallopt)")
    N = args.states
    models, assemblies = robots()

    print(f"\n1. inverse dynamics, {N} states, numpy: dual quaternions (centres of mass) / spatial")
    for name, model in models.items():
        q, qd, qdd = states(model, N)
        t = best_times({alg: lambda alg=alg: sd.inverse_dynamics(model, q, qd, qdd, algebra=alg)
                        for alg in ("spatial", "dq")}, args.repeat)
        print(f"  {name:32s} spatial {t['spatial'] * 1e3:7.1f} ms   dq {t['dq'] * 1e3:7.1f} ms"
              f"   ratio {t['dq'] / t['spatial']:.2f}")
    if args.jax:
        print(f"   the same, jax.jit, {N} states")
        for name, (spatial, dq) in jax_times(models, N, args.repeat).items():
            print(f"  {name:32s} spatial {spatial * 1e3:7.1f} ms   dq {dq * 1e3:7.1f} ms"
                  f"   ratio {dq / spatial:.2f}")

    print(f"\n2. inverse dynamics, {N} states: assembly (W_i composed) / flat model, same algebra")
    compare(assemblies, N, args.repeat, ("dq", "spatial"), "inverse_dynamics")
    print(f"\n3. forward dynamics, {N} states: assembly (across the points) / flat model's ABA")
    compare(assemblies, N, args.repeat, ("spatial", "dq"), "forward_dynamics")

    import reconfigurable_modules

    print("\n4. attaching one 2-DoF module (median of 21, garbage collector paused)")
    for n, (attach, flat) in reconfigurable_modules.attach_cost().items():
        print(f"  {n:5d} modules: attach {attach * 1e6:6.0f} us   (to_model: {flat * 1e3:7.1f} ms)")


if __name__ == "__main__":
    main()
