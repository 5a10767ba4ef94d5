"""Batched dynamics on an accelerator: one million Panda states through ``sd.compile``.

    python benchmarks/gpu.py                       # 1,000,000 states, float64, every algebra
    python benchmarks/gpu.py --states 100000 --float32 --json out.json   # x64 off: float32

Runs on whatever device JAX picks (the GPU when jax[cuda] is installed; the CPU otherwise, where
a smaller ``--states`` is kinder). For each function and algebra it reports the compile time and
the best of ``--repeat`` timed calls after compilation (inputs already on the device, the result
waited for with ``block_until_ready``), and checks the first 200 states against screwdyn's numpy
path, so a fast wrong answer cannot pass for a result.
"""
import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # run from a checkout

FUNCTIONS = ("inverse_dynamics", "forward_dynamics", "mass_matrix")
ALGEBRAS = ("spatial", "cga", "dq")


def device_states(model, N, dtype, seed=0):
    """N random states made on the device: angles uniform in [-pi, pi], qd and qdd normal."""
    import jax
    import jax.numpy as jnp

    if model.nq != model.nv:
        raise ValueError("device_states draws angles only: use a model without a floating base")
    kq, kv, ka = jax.random.split(jax.random.PRNGKey(seed), 3)
    q = jax.random.uniform(kq, (N, model.nq), dtype, -jnp.pi, jnp.pi)
    return q, jax.random.normal(kv, (N, model.nv), dtype), jax.random.normal(ka, (N, model.nv),
                                                                             dtype)


def measure(model, name, algebra, args, repeat):
    import screwdyn as sd

    N = args[0].shape[0]
    f = sd.compile(model, name, algebra=algebra, batch_shape=(N,), dtype=args[0].dtype,
                   backend="jax")
    inputs = args[:len(f.input_names)]
    result = f(*inputs).block_until_ready()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f(*inputs).block_until_ready()
        times.append(time.perf_counter() - start)
    check = [np.asarray(a[:200], dtype=float) for a in inputs]
    reference = getattr(sd, name)(model, *check, algebra=algebra)
    got = np.asarray(result[:200], dtype=float)
    error = float(np.max(np.abs(got - reference)) / max(1.0, float(np.max(np.abs(reference)))))
    return {"function": name, "algebra": algebra, "states": N, "compile_s": f.compile_time,
            "best_ms": min(times) * 1e3, "median_ms": float(np.median(times)) * 1e3,
            "ns_per_state": min(times) / N * 1e9, "max_rel_error_vs_numpy": error}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--float32", action="store_true",
                        help="compute in float32 (jax_enable_x64 off) instead of float64")
    parser.add_argument("--checkpoints", choices=("auto", "always", "never"), default="auto",
                        help="cut XLA's fusions at every body: for trees of more than "
                             "screwdyn.execution.plan.CHECKPOINT_BODIES bodies (auto), or "
                             "always, never")
    parser.add_argument("--functions", default=",".join(FUNCTIONS), help="comma-separated")
    parser.add_argument("--algebras", default=",".join(ALGEBRAS), help="comma-separated")
    parser.add_argument("--json", help="write the results here")
    options = parser.parse_args(argv)

    import jax

    jax.config.update("jax_enable_x64", not options.float32)
    import warnings

    import jax.numpy as jnp

    import screwdyn as sd

    from screwdyn.execution import plan

    if options.checkpoints != "auto":
        plan.CHECKPOINT_BODIES = -1 if options.checkpoints == "always" else 1 << 30
    model = sd.robots.load("panda")
    device = jax.devices()[0]
    print(f"JAX {jax.__version__} on {device.platform}: {device.device_kind}; "
          f"Panda, nq = {model.nq}, {options.states:,} states, checkpoints {options.checkpoints}")
    dtype = jnp.float32 if options.float32 else jnp.float64
    states = device_states(model, options.states, dtype)
    results = []
    cases = [(name, algebra) for name in options.functions.split(",")
             for algebra in options.algebras.split(",")]
    for name, algebra in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sd.Float32Warning)
            row = measure(model, name, algebra, states, options.repeat)
        row["dtype"] = jnp.dtype(dtype).name
        results.append(row)
        print(f"  {name:17s} {algebra:8s} {row['dtype']:8s} compile {row['compile_s']:5.1f} s"
              f"  best {row['best_ms']:8.2f} ms  median {row['median_ms']:8.2f} ms"
              f"  ({row['ns_per_state']:.2f} ns/state)  error {row['max_rel_error_vs_numpy']:.1e}",
              flush=True)
    if options.json:
        info = {"jax": jax.__version__, "device": device.device_kind,
                "checkpoints": options.checkpoints,
                "platform": device.platform, "python": platform.python_version()}
        Path(options.json).write_text(json.dumps({"info": info, "results": results}, indent=1))


if __name__ == "__main__":
    main()
