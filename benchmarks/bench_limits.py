"""Joint limits as constraints beside MuJoCo's: gymnasium's ant on its floor.

    python benchmarks/bench_limits.py [--repeat 3] [--seconds 2]

The scene: gymnasium's ``ant.xml`` (its ankles start at 0, past their 30-70 deg ranges; joint
damping 1), put in an ``sd.Scene`` with its floor, falling and settling with no control,
semi-implicit Euler at dt = 1 ms, one state, the native backend. screwdyn: on rigid contact
(``impedance=1``), the limits as springs (``joint_limits=True``) and as rigid constraints
solved with the contact (``sd.RigidLimits()``); then as the file has them, soft as MuJoCo's
(``Scene.build()``'s default: its geoms' solimp; ``sd.RigidLimits.from_mjcf``: its joints'
solreflimit and solimplimit), with 30 sweeps (the default) and 200, with the elliptic cone
(screwdyn's default) and MuJoCo's pyramidal one (the file's: MuJoCo's default). MuJoCo:
``mj_step`` with the file's options but Euler at 1 ms (its soft contacts and limits). Reports
milliseconds a step (the median of ``--repeat`` runs, compilation excluded), the real-time
factor, and the torso's height and the ankles' angles at the end: what the limits hold.
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
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    import gymnasium
    import mujoco

    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets",
                        "ant.xml")
    scene = sd.Scene("ant")
    scene.add_robot(sd.load_mjcf(path, joint_damping=True))
    print(f"{'gymnasium ant, ' + str(args.seconds) + ' s at dt = 1 ms':<66}{'ms/step':>9}"
          f"{'RTF':>8}{'height m':>10}  ankles rad", flush=True)

    def row(name, wall, steps, height, ankles):
        print(f"{name:<66}{1e3 * wall / steps:>9.4f}{steps * 1e-3 / wall:>8.3g}"
              f"{height:>10.3f}  {np.round(np.abs(ankles), 3)}", flush=True)

    rigid, own = {"impedance": 1.0}, sd.RigidLimits.from_mjcf(path)
    cases = (("screwdyn, limits as springs (JointLimits), rigid contact", rigid, True),
             ("screwdyn, RigidLimits(), rigid contact", rigid, sd.RigidLimits()),
             ("screwdyn, the file's soft contact and limits, 30 sweeps", {}, own),
             ("screwdyn, the file's soft contact and limits, 200 sweeps",
              {"iterations": 200}, own),
             ("screwdyn, the same, MuJoCo's pyramidal cone, 30 sweeps",
              {"cone": "pyramidal"}, own),
             ("screwdyn, the same, MuJoCo's pyramidal cone, 200 sweeps",
              {"cone": "pyramidal", "iterations": 200}, own))
    for name, solver, limits in cases:
        model, contact, q0 = scene.build(**solver)
        walls = []
        for _ in range(args.repeat + 1):  # the first call compiles
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                traj = sd.simulate(model, q0, t_final=args.seconds, dt=1e-3, contact=contact,
                                   integrator="semi_implicit_euler", joint_limits=limits)
            walls.append(traj.meta["wall_time"])
        steps = traj.n_samples - 1
        row(name, np.median(walls[1:]), steps, traj.q[-1, 2], traj.q[-1, 8::2])
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.timestep, m.opt.integrator = 1e-3, mujoco.mjtIntegrator.mjINT_EULER
    walls = []
    steps = int(round(args.seconds / 1e-3))
    for _ in range(args.repeat):
        d = mujoco.MjData(m)
        t0 = time.perf_counter()
        for _ in range(steps):
            mujoco.mj_step(m, d)
        walls.append(time.perf_counter() - t0)
    row("MuJoCo mj_step (Euler), its soft contacts and limits", np.median(walls), steps,
        d.qpos[2], d.qpos[8::2])


if __name__ == "__main__":
    main()
