"""The joint-torque regressor against Pinocchio's computeJointTorqueRegressor, side by side.

Panda of example-robot-data (9 bodies, 90 parameters), one process, interleaved repetitions,
medians:

- single state: ``sd.inverse_dynamics_regressor`` (numpy, one state) and Pinocchio's call;
- batch: one call on a numpy batch of N states (per state) against a Pinocchio loop;
- JAX: ``jax.jit`` of the regressor on a batch (x64), per state, compile time printed apart.

Run: python benchmarks/regressor.py [--batch 1000] [--repeat 7] [--no-jax]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import screwdyn as sd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))


def best_of(f, repeat, inner):
    """The median over ``repeat`` runs of the time of one call (each run: ``inner`` calls)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            f()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-jax", action="store_true")
    args = parser.parse_args()
    import pinocchio as pin
    from conftest import erd_urdf, pin_configuration, random_state

    path = erd_urdf("panda_description/urdf/panda.urdf")
    model = sd.load_urdf(path, joint_order="name")
    pm = pin.buildModelFromUrdf(path)
    data = pm.createData()
    N = args.batch
    q, qd, qdd = random_state(model, 0, batch=(N,))
    pq = np.stack([pin_configuration(model, pm, x) for x in q])
    Y = sd.inverse_dynamics_regressor(model, q, qd, qdd)
    err = max(np.abs(Y[k] - pin.computeJointTorqueRegressor(pm, data, pq[k], qd[k], qdd[k])).max()
              for k in range(0, N, max(1, N // 20)))
    rows = {}
    single = {
        "pinocchio computeJointTorqueRegressor": lambda: pin.computeJointTorqueRegressor(
            pm, data, pq[0], qd[0], qdd[0]),
        "screwdyn numpy, spatial": lambda: sd.inverse_dynamics_regressor(model, q[0], qd[0],
                                                                         qdd[0]),
    }
    batch = {
        "pinocchio loop": lambda: [pin.computeJointTorqueRegressor(pm, data, pq[k], qd[k], qdd[k])
                                   for k in range(N)],
    }
    for algebra in ("spatial", "cga", "dq"):
        batch[f"screwdyn numpy batched, {algebra}"] = (
            lambda a=algebra: sd.inverse_dynamics_regressor(model, q, qd, qdd, algebra=a))
    compile_s = None
    if not args.no_jax:
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        f = jax.jit(lambda q, qd, qdd: sd.inverse_dynamics_regressor(model, q, qd, qdd))
        jq, jqd, jqdd = jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd)
        start = time.perf_counter()
        f(jq, jqd, jqdd).block_until_ready()
        compile_s = time.perf_counter() - start
        assert np.abs(np.asarray(f(jq, jqd, jqdd)) - Y).max() < 1e-10
        batch["screwdyn JAX jit batched, spatial"] = lambda: f(jq, jqd, jqdd).block_until_ready()
    for name in single:
        rows[name] = []
    for name in batch:
        rows[name] = []
    for _ in range(args.repeat):  # interleaved: every row sees the same machine load
        for name, g in single.items():
            rows[name].append(best_of(g, 1, 200 if "pinocchio" in name else 20))
        for name, g in batch.items():
            rows[name].append(best_of(g, 1, 1) / N)
    print(f"Panda (example-robot-data), {model.nbodies} bodies, Y {Y.shape[1:]}; "
          f"max |Y - Pinocchio| = {err:.1e}; load average {os.getloadavg()[0]:.1f}")
    pin_single = statistics.median(rows["pinocchio computeJointTorqueRegressor"])
    pin_loop = statistics.median(rows["pinocchio loop"])
    print(f"{'':44}{'us per state':>14}{'vs Pinocchio':>14}")
    for name, times in rows.items():
        t = statistics.median(times)
        ref = pin_single if name in single else pin_loop
        label = name + (" (single state)" if name in single else f" (N={N})")
        print(f"{label:58}{t * 1e6:>10.2f}{ref / t:>12.2f}x")
    if compile_s is not None:
        print(f"JAX jit compile + first call (N={N}): {compile_s:.1f} s")


if __name__ == "__main__":
    main()
