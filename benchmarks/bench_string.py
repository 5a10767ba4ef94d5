"""A spatial tendon beside MuJoCo's: dm_control's ball_in_cup, its ball on a 0.3 m string.

    python benchmarks/bench_string.py [--repeat 3] [--seconds 10]

The cup is driven by its two motors (controls sin 7t and cos 5t), so that the string goes
taut again and again and the ball reaches the floor. screwdyn: the file as ``Scene`` and
``RigidLimits.from_mjcf`` have it (MuJoCo's soft contacts and tendon limit, its inverse
weights), semi-implicit Euler at dt = 1 ms, one state, the native backend, with 30 sweeps (the
default) and 200. MuJoCo: ``mj_step`` with the file's options (Newton's solver) but Euler at
1 ms, and converged (tolerance 1e-15). Reports milliseconds a step (the median of ``--repeat``
runs, compilation excluded), the real-time factor and the largest difference of q from the
converged ``mj_step`` over the run.
"""
import argparse
import os
import time
import warnings

import numpy as np

import screwdyn as sd


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    import dm_control
    import mujoco

    path = os.path.join(os.path.dirname(dm_control.__file__), "suite", "ball_in_cup.xml")
    steps = int(round(args.seconds / 1e-3))

    def controls(t):
        xp = sd.controllers.array_namespace(t)
        return xp.stack([xp.sin(7 * t), xp.cos(5 * t)], -1)

    def mujoco_run(converged):
        m = mujoco.MjModel.from_xml_path(path)
        m.opt.timestep, m.opt.integrator = 1e-3, mujoco.mjtIntegrator.mjINT_EULER
        if converged:
            m.opt.tolerance, m.opt.iterations = 1e-15, 1000
        d = mujoco.MjData(m)
        out = np.empty((steps + 1, m.nq))
        out[0] = d.qpos
        start = time.perf_counter()
        for k in range(steps):
            d.ctrl[:] = controls(k * 1e-3)
            mujoco.mj_step(m, d)
            out[k + 1] = d.qpos
        return time.perf_counter() - start, out

    _, reference = mujoco_run(converged=True)
    print(f"{'ball_in_cup, ' + str(args.seconds) + ' s at dt = 1 ms':<44}{'ms/step':>9}"
          f"{'RTF':>8}{'|q - mj_step converged|':>25}", flush=True)

    def row(name, wall, q):
        print(f"{name:<44}{1e3 * wall / steps:>9.4f}{args.seconds / wall:>8.1f}"
              f"{np.abs(q - reference).max():>25.2e}", flush=True)

    for converged in (False, True):
        runs = [mujoco_run(converged) for _ in range(args.repeat)]
        row("MuJoCo mj_step" + (", converged" if converged else ""),
            float(np.median([w for w, _ in runs])), runs[0][1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        robot = sd.load_mjcf(path, joint_damping=True, joint_springs=True)
    scene = sd.Scene("ball_in_cup")
    scene.add_robot(robot)
    for iterations in (30, 200):
        model, contact, q0 = scene.build(cone="pyramidal", invweight0=True, margin=0.0,
                                         iterations=iterations)
        limits = sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0)
        driven = sd.controllers.MjcfActuators(model, path, controls)
        options = dict(contact=contact, joint_limits=limits, integrator="semi_implicit_euler",
                       backend="native")
        sd.simulate(model, q0, None, driven, 0.01, 1e-3, **options)  # compiles
        walls, q = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            traj = sd.simulate(model, q0, None, driven, args.seconds, 1e-3, **options)
            walls.append(time.perf_counter() - start)
            q = traj.q
        row(f"screwdyn, {iterations} sweeps", float(np.median(walls)), q)


if __name__ == "__main__":
    main()
