"""Speed of a simulation with ground contact, beside MuJoCo on the same robot.

    python benchmarks/bench_contact.py [--batch 1000] [--repeat 3] [--backends native,jax]

The scene: ANYmal B (example-robot-data) standing on the ground under joint PD (kp 300, kd 10),
1 s at dt = 1 ms. screwdyn: the compiled rollout (``sd.simulate``: the native backend, the step
in machine code, and the JAX backend, one XLA loop), RK4 and semi-implicit Euler, one state and
a batch; ``RigidContact`` (the constraint solver) on its four feet, and the penalty
``GroundContact`` with contact points from all its collision geometry (boxes, cylinders,
spheres: 492 points) and from its four feet only. MuJoCo: ``mj_step`` (its default Euler
integrator, soft contacts between the same primitive geoms and a plane, position actuators kp 300
and joint damping 10 for the PD) on the same URDF loaded by MuJoCo's compiler, one state, and
``mujoco.rollout`` for the batch. Reports the real-time factor (simulated time per wall-clock
second, compilation excluded) and steps per second, the median of ``--repeat`` runs, with the
machine's load average at the start and the end (the CPUs may be shared).
"""
import argparse
import os
import sys
import tempfile
import time
import warnings
import xml.etree.ElementTree as ET

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
import contact_validation as scenes  # noqa: E402

import screwdyn as sd  # noqa: E402
from screwdyn import controllers  # noqa: E402
from screwdyn.execution.rollout import optimise_all as optimise_rollouts  # noqa: E402


def mujoco_anymal(path, kp=300.0, kd=10.0):
    """The ANYmal URDF compiled by MuJoCo, with a free base, a floor and PD actuators."""
    import mujoco

    tree = ET.parse(path)
    robot = tree.getroot()
    for link in robot.iter("link"):
        for visual in link.findall("visual"):
            link.remove(visual)
        inertia = link.find("inertial/inertia")
        if link.get("name") == "base" and inertia is not None:
            # a dummy 1e-6 kg with off-diagonal moments as large as its diagonal ones, which
            # MuJoCo refuses: its off-diagonal moments set to zero (no effect at 1e-6 kg)
            for key in ("ixy", "ixz", "iyz"):
                inertia.set(key, "0")
    robot.insert(0, ET.fromstring('<mujoco><compiler discardvisual="true" fusestatic="false" '
                                  'balanceinertia="true"/></mujoco>'))
    folder = tempfile.mkdtemp()
    urdf = os.path.join(folder, "anymal.urdf")
    tree.write(urdf)
    m = mujoco.MjModel.from_xml_path(urdf)
    mjcf = os.path.join(folder, "anymal.xml")
    mujoco.mj_saveLastXML(mjcf, m)
    tree = ET.parse(mjcf)
    root = tree.getroot()
    world = root.find("worldbody")
    base = world.find("body")
    base.insert(0, ET.Element("freejoint", name="root"))
    world.insert(0, ET.Element("geom", type="plane", size="10 10 0.1", friction="0.8 0.005 "
                                                                                 "0.0001"))
    actuators = ET.SubElement(root, "actuator")
    for joint in base.iter("joint"):
        joint.set("damping", str(kd))
        ET.SubElement(actuators, "position", joint=joint.get("name"), kp=str(kp))
    tree.write(mjcf)
    return mujoco.MjModel.from_xml_path(mjcf)


def time_mujoco(q0_screwdyn, batch, repeat):
    import mujoco
    from mujoco import rollout

    m = mujoco_anymal(os.path.join(scenes._erd_robots(), scenes.ANYMAL))
    m.opt.timestep = 1e-3
    d = mujoco.MjData(m)
    qpos = np.r_[q0_screwdyn[:3], q0_screwdyn[6], q0_screwdyn[3:6], q0_screwdyn[7:]]
    ctrl = q0_screwdyn[7:]
    single = []
    for _ in range(repeat):
        mujoco.mj_resetData(m, d)
        d.qpos[:] = qpos
        d.ctrl[:] = ctrl
        t0 = time.perf_counter()
        for _ in range(1000):
            mujoco.mj_step(m, d)
        single.append(time.perf_counter() - t0)
        drift = abs(d.qpos[2] - qpos[2])
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state = np.empty(mujoco.mj_stateSize(m, spec))
    mujoco.mj_resetData(m, d)
    d.qpos[:] = qpos
    mujoco.mj_getState(m, d, state, spec)
    states = np.tile(state, (batch, 1))
    controls = np.tile(ctrl, (batch, 1000, 1))
    datas = [mujoco.MjData(m) for _ in range(os.cpu_count() or 1)]
    many = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        rollout.rollout(m, datas, states, controls)
        many.append(time.perf_counter() - t0)
    return np.median(single), np.median(many), drift


def time_screwdyn(model, q0, contact, integrator, batch, repeat, backend):
    pd = controllers.JointPD(model, kp=300.0, kd=10.0, q_ref=q0, gravity_compensation=True)
    out = {}
    for n in (None, batch):
        start = q0 if n is None else np.tile(q0, (n, 1))
        walls, compile_time = [], None
        for _ in range(repeat + 1):  # the first call compiles
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                traj = sd.simulate(model, start, None, pd, 1.0, 1e-3, contact=contact,
                                   integrator=integrator, backend=backend)
            walls.append(traj.meta["wall_time"])
            compile_time = compile_time or traj.meta["compile_time"]
            optimise_rollouts()  # the timed runs: the code a long run gets (level 2)
        out[n] = (np.median(walls[1:]), compile_time, np.abs(traj.q[..., 2] - q0[2]).max())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--backends", default="native,jax",
                        help="comma-separated screwdyn backends (native, jax, numpy)")
    parser.add_argument("--contacts", default="rigid,penalty",
                        help="comma-separated contact models: rigid (RigidContact, the feet), "
                             "penalty (GroundContact)")
    parser.add_argument("--skip-all-points", action="store_true",
                        help="only the feet (the whole collision geometry compiles slowly)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
          f"({os.cpu_count()} CPUs)")
    model = scenes.anymal()
    q0 = scenes.anymal_standing_pose(model, sd.GroundContact(mu=0.8))
    cases = [("feet (4 points)", dict(links=["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"]))]
    if not args.skip_all_points:
        cases.append(("all collision geometry", {}))
    print(f"{'ANYmal standing, 1 s at dt = 1 ms':<60}{'RTF':>9}{'steps/s':>12}"
          f"{f'batch {args.batch} steps/s':>24}{'compile s':>11}{'max sag mm':>12}", flush=True)

    def row(name, rtf, steps, bsteps, comp, sag):
        print(f"{name:<60}{rtf:>9.3g}{steps:>12.3g}{bsteps:>24.3g}"
              f"{'' if comp is None else round(comp, 1)!s:>11}{1e3 * sag:>12.3g}", flush=True)

    if "rigid" in args.contacts.split(","):
        # the constraint solver: its projected Gauss-Seidel is unrolled into the program
        # (30 sweeps over P points: code grows as P^2), so the feet only
        feet = dict(links=["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"])
        for integrator in ("semi_implicit_euler", "rk4"):
            contact = sd.RigidContact(mu=0.8, **feet)
            for backend in args.backends.split(","):
                name = f"screwdyn {backend} {integrator}, RigidContact, feet"
                result = time_screwdyn(model, q0, contact, integrator, args.batch,
                                       args.repeat, backend)
                wall, compile_time, sag = result[None]
                bwall, _, _ = result[args.batch]
                row(name, 1.0 / wall, 1000 / wall, 1000 * args.batch / bwall, compile_time, sag)
    for label, where in (cases if "penalty" in args.contacts.split(",") else ()):
        # semi-implicit Euler at 1 ms is at its stability limit on ANYmal's feet with the
        # default contact damping (simulate warns, and the run diverges after 0.3 s): it runs
        # with dissipation 0.3 s/m, which it keeps stable
        for integrator, extra, note in (("rk4", {}, ""),
                                        ("semi_implicit_euler", {"dissipation": 0.3},
                                         ", dissipation 0.3")):
            contact = sd.GroundContact(mu=0.8, **where, **extra)
            for backend in args.backends.split(","):
                name = f"screwdyn {backend} {integrator}, {label}{note}"
                try:
                    result = time_screwdyn(model, q0, contact, integrator, args.batch,
                                           args.repeat, backend)
                except sd.SimulationError as e:
                    print(f"{name}: {e}", flush=True)
                    continue
                wall, compile_time, sag = result[None]
                bwall, _, _ = result[args.batch]
                row(name, 1.0 / wall, 1000 / wall, 1000 * args.batch / bwall, compile_time, sag)
    wall, bwall, sag = time_mujoco(q0, args.batch, args.repeat)
    row("MuJoCo mj_step (Euler), same robot", 1.0 / wall, 1000 / wall,
        1000 * args.batch / bwall, None, sag)
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
