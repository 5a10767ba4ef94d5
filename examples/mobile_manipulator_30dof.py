"""A 30-DoF holonomic branched mobile manipulator of 3 subsystems (the branched-robot paper's second
validation), driven along a trajectory and compared with an independent simulator, Pinocchio's
articulated-body algorithm integrated step by step; then the same with the left arm a black box
fed from sensor data.

    base       3  x, y (prismatic), yaw: a holonomic base         (built in code)
    └── torso 14  the PR2's torso lift, right arm (7) and right   (example-robot-data URDF, its
        │         gripper (6); its 134 kg base, casters and        head and laser tilt joints
        │         wheels ride on the chassis                       locked)
        └── left_arm 13  the PR2's left arm and gripper, cut from the same URDF at its shoulder

1. Torques: the composed inverse dynamics (dual quaternions, the paper's W_i at the centres of
   mass) along a reference trajectory, against Pinocchio's RNEA on the same robot built by
   Pinocchio from the URDF (``pinocchio.appendModel`` onto the base).
2. Motion: both simulators run the same joint-space controller (feedforward table plus PD) with
   semi-implicit Euler at dt: ``sd.simulate`` on the assembly (forward dynamics across the
   connection points), and Pinocchio's ``aba`` and ``integrate`` in a Python loop.
3. Black box: along Pinocchio's run, the wrench at the left shoulder (what a six-axis sensor
   there reads: the arm's load on the torso, from Pinocchio's RNEA) is logged to a CSV file; the
   left arm becomes a ``BlackBox`` driven by that log, and the 17 remaining joints are simulated
   again and compared with Pinocchio's run, which had the real arm.

Writes docs/mobile_manipulator_30dof.png and docs/mobile_manipulator_black_box.png and prints
the table of the README's composition section.

Run: python examples/mobile_manipulator_30dof.py   (needs example-robot-data, pinocchio,
matplotlib; about a minute)
"""
import pathlib
import re
import tempfile
import time
import warnings
from importlib import metadata

import numpy as np

import screwdyn as sd
from pinocchio_reference import PinocchioState
from screwdyn.composition import Assembly, BlackBox, WrenchLog

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
LOCKED = ("head_pan_joint", "head_tilt_joint", "laser_tilt_mount_joint")
SHOULDER = "l_shoulder_pan_joint"  # where the left arm is cut off and the sensor sits


def example_robot_data(relative):
    """The path of an example-robot-data file."""
    robots = metadata.distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots")
    return str(robots / relative)


def pr2_urdf(urdf=example_robot_data):
    """The PR2's URDF text with its head and laser tilt joints locked (made fixed)."""
    with open(urdf("pr2_description/urdf/pr2.urdf")) as f:
        text = f.read()
    for joint in LOCKED:
        text, count = re.subn(rf'(<joint name="{joint}" type=")(revolute|continuous)"',
                              r'\1fixed"', text)
        assert count == 1, joint
    return text


def planar_base():
    """x and y rails and a yaw joint; the carriages get a little mass so that every joint moves
    some inertia (forward dynamics stays defined whatever is mounted)."""
    b = sd.ModelBuilder("base")
    b.add_link("ground")
    for name in ("x_carriage", "y_carriage"):
        b.add_link(name, mass=0.5, inertia=np.diag([1e-3, 1e-3, 1e-3]))
    side, height = 0.65, 0.3  # a 60 kg box
    b.add_link("chassis", mass=60.0, com=(0, 0, height / 2), inertia=60.0 / 12 * np.diag(
        [side ** 2 + height ** 2, side ** 2 + height ** 2, 2 * side ** 2]))
    b.add_joint("x", "prismatic", "ground", "x_carriage", axis=(1, 0, 0))
    b.add_joint("y", "prismatic", "x_carriage", "y_carriage", axis=(0, 1, 0))
    b.add_joint("yaw", "revolute", "y_carriage", "chassis", axis=(0, 0, 1))
    return b.build()


def build(urdf=example_robot_data):
    """The 30-DoF mobile manipulator: base, torso (with the right arm), left arm."""
    with warnings.catch_warnings():  # a few of the PR2's inertias are inconsistent: loaded anyway
        warnings.simplefilter("ignore", sd.InertiaWarning)
        pr2 = sd.load_urdf(pr2_urdf(urdf))
    parts = Assembly.split(pr2, {"left_arm": SHOULDER}, name="torso")
    robot = Assembly(planar_base(), name="base")
    robot.attach(parts["torso"].model, parent="base", link="chassis", name="torso")
    arm = parts["left_arm"]
    robot.attach(arm.model, parent="torso", link=arm.link, placement=arm.placement,
                 name="left_arm")
    return robot


# -- the independent simulator: Pinocchio ------------------------------------------------------------
class PinocchioRobot:
    """The same robot built by Pinocchio: the base joint by joint, the PR2 parsed from the URDF
    text and appended on the chassis; ``state`` maps screwdyn's q and v to Pinocchio's."""

    def __init__(self, robot, urdf=example_robot_data):
        import pinocchio as pin

        self.pin = pin
        base = pin.Model()
        joint = 0
        for name, kind in (("x", pin.JointModelPX()), ("y", pin.JointModelPY()),
                           ("yaw", pin.JointModelRZ())):
            joint = base.addJoint(joint, kind, pin.SE3.Identity(), f"base/{name}")
            b = robot["base"].model.bodies[robot["base"].model.joint_index(name)]
            base.appendBodyToJoint(joint, pin.Inertia(b.mass, np.array(b.com),
                                                      np.reshape(b.inertia, (3, 3))),
                                   pin.SE3.Identity())
        base.addFrame(pin.Frame("base/chassis", joint, pin.SE3.Identity(), pin.FrameType.BODY))
        pr2 = pin.buildModelFromXML(pr2_urdf(urdf))
        self.model = pin.appendModel(base, pr2, base.getFrameId("base/chassis"),
                                     pin.SE3.Identity())
        self.data = self.model.createData()
        self.state = PinocchioState(pin, self.model, robot.configuration_model, lambda name:
                                    name if name.startswith("base/") else name.split("/", 1)[1])
        self.order = self.state.order
        self.shoulder = self.model.getJointId(SHOULDER)

    def rnea(self, q, qd, qdd):
        """Joint forces in screwdyn's order."""
        state = self.state
        return self.pin.rnea(self.model, self.data, state.q(q), state.v(qd), state.v(qdd))[
            self.order]

    def shoulder_wrench(self):
        """The wrench the left arm exerts on the torso at its connection point (the shoulder
        joint's frame at q = 0), [force; torque] in that frame, after an ``rnea`` call: a
        force/torque sensor's reading. Pinocchio's f[j] is the wrench the torso applies to the
        arm, in the joint's frame after its motion."""
        pin, j = self.pin, self.shoulder
        motion = self.model.jointPlacements[j].inverse() * self.data.liMi[j]
        return -motion.act(self.data.f[j]).vector

    def simulate(self, q0, qd0, controller, duration, dt, log_shoulder=False):
        """Semi-implicit Euler with Pinocchio's ABA: qd += dt qdd; q = q (+) dt qd. Returns t,
        q, qd, the joint forces and accelerations (screwdyn's order) and, if asked, the shoulder
        wrench at every step."""
        pin, model, data = self.pin, self.model, self.data
        steps = int(round(duration / dt))
        state = self.state
        qp, vp = state.q(q0), state.v(qd0)
        T, Q, QD, TAU, A, W = [], [], [], [], [], []
        for k in range(steps + 1):
            t = k * dt
            q, qd = state.q_back(qp), vp[self.order]
            tau = controller(t, q, qd)
            a = pin.aba(model, data, qp, vp, state.v(tau))
            T.append(t), Q.append(q), QD.append(qd), TAU.append(tau), A.append(a[self.order])
            if log_shoulder:
                pin.rnea(model, data, qp, vp, a)
                W.append(self.shoulder_wrench())
            vp = vp + dt * a
            qp = pin.integrate(model, qp, dt * vp)
        return tuple(np.array(x) for x in (T, Q, QD, TAU, A, W))


# -- the experiment ------------------------------------------------------------------------------------
def reference(robot, seed=2):
    """Sinusoids about a nominal pose for every joint (the base moves too): q, qd, qdd of t."""
    rng = np.random.default_rng(seed)
    nominal = np.zeros(robot.nq)
    nominal[robot["torso"].q_slice.start] = 0.15  # torso lift
    amplitude = rng.uniform(0.05, 0.25, robot.nv)
    w, phase = 2 * np.pi * rng.uniform(0.2, 0.5, robot.nv), rng.uniform(0, 2 * np.pi, robot.nv)

    def at(t):
        t = np.asarray(t, dtype=float)[..., None]
        s, c = np.sin(w * t + phase), np.cos(w * t + phase)
        return nominal + amplitude * s, amplitude * w * c, -amplitude * w * w * s

    return at


def controller(robot, ref, times):
    """tau = tau_ff(t) + Kp (q_r - q) + Kd (qd_r - qd): the feedforward is the composed inverse
    dynamics along the reference at the step times; the gains put every joint near 8 rad/s
    (Kp = w^2 M_ii, Kd = 2 w M_ii with M the composed mass matrix at the start)."""
    q_r, qd_r, qdd_r = ref(times)
    tau_ff = robot.inverse_dynamics(q_r, qd_r, qdd_r)
    M = robot.mass_matrix(q_r[0])
    w = 8.0
    kp, kd = w * w * np.diag(M), 2 * w * np.diag(M)
    dt = times[1] - times[0]

    def tau(t, q, qd):
        k = int(round(t / dt))
        return tau_ff[k] + kp * (q_r[k] - q) + kd * (qd_r[k] - qd)

    return tau


def run(duration=2.0, dt=2e-3, urdf=example_robot_data, log_path=None):
    """The three comparisons; returns their numbers and series (see the module)."""
    robot = build(urdf)
    pin_robot = PinocchioRobot(robot, urdf)
    times = np.arange(int(round(duration / dt)) + 1) * dt
    ref = reference(robot)
    q_r, qd_r, qdd_r = ref(times)
    out = {"robot": robot, "times": times}

    # 1. torques along the reference
    start = time.perf_counter()
    tau = robot.inverse_dynamics(q_r, qd_r, qdd_r)
    out["composed_time"] = time.perf_counter() - start
    start = time.perf_counter()
    tau_pin = np.array([pin_robot.rnea(*x) for x in zip(q_r, qd_r, qdd_r)])
    out["pinocchio_time"] = time.perf_counter() - start
    out["tau"], out["tau_pin"] = tau, tau_pin
    out["torque_error"] = np.abs(tau - tau_pin).max()
    out["torque_scale"] = np.abs(tau_pin).max()

    # 2. motion under the same controller
    law = controller(robot, ref, times)
    q0, qd0 = q_r[0], qd_r[0]
    start = time.perf_counter()
    traj = sd.simulate(robot, q0, qd0, law, duration, dt, integrator="semi_implicit_euler",
                       backend="numpy")
    out["simulate_time"] = time.perf_counter() - start
    T, Q_pin, QD_pin, TAU_pin, A_pin, W = pin_robot.simulate(q0, qd0, law, duration, dt,
                                                             log_shoulder=True)
    out["q"], out["q_pin"] = traj.q, Q_pin
    out["motion_error"] = np.abs(traj.q - Q_pin).max()
    out["tracking_error"] = np.abs(traj.q - q_r).max()

    # 3. the left arm as a black box driven by the shoulder sensor's log
    log_path = log_path or pathlib.Path(tempfile.mkdtemp()) / "left_shoulder_ft.csv"
    WrenchLog(T, W, name="left shoulder F/T log").save(log_path)
    boxed = robot.replaced("left_arm", BlackBox(WrenchLog.load(log_path), name="left_arm"))
    kept = np.concatenate([np.arange(s.v_slice.start, s.v_slice.stop) for s in boxed.models
                           if s.name != "left_arm"])  # the robot's indices of boxed's joints
    tau_box = boxed.inverse_dynamics(Q_pin[:, kept], QD_pin[:, kept], A_pin[:, kept], time=T)
    out["black_box_torque_error"] = np.abs(tau_box - TAU_pin[:, kept]).max()

    def law_kept(t, q, qd):
        full_q, full_qd = q_r[int(round(t / dt))].copy(), qd_r[int(round(t / dt))].copy()
        full_q[kept], full_qd[kept] = q, qd
        return law(t, full_q, full_qd)[kept]

    boxed_traj = sd.simulate(boxed, q0[kept], qd0[kept], law_kept, duration, dt,
                             integrator="semi_implicit_euler", backend="numpy")
    out["boxed"], out["kept"], out["log"] = boxed_traj, kept, WrenchLog.load(log_path)
    out["black_box_error"] = np.abs(boxed_traj.q - Q_pin[:, kept]).max()
    out["log_path"] = log_path
    return out


def figures(out, docs=DOCS):
    """docs/mobile_manipulator_30dof.png and docs/mobile_manipulator_black_box.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    robot, t = out["robot"], out["times"]
    names = robot.joint_names
    shown = [names.index(n) for n in ("base/x", "torso/torso_lift_joint",
                                      "torso/r_shoulder_lift_joint", "left_arm/l_elbow_flex_joint")]
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for k in shown:
        line, = axes[0].plot(t, out["tau"][:, k], label=names[k])
        axes[0].plot(t[::25], out["tau_pin"][::25, k], "o", ms=3, color=line.get_color())
        axes[1].plot(t, out["q"][:, k], color=line.get_color())
        axes[1].plot(t[::25], out["q_pin"][::25, k], "o", ms=3, color=line.get_color())
    axes[0].set_ylabel("joint force [N, N m]")
    axes[0].set_title("30-DoF mobile manipulator, 3 subsystems: screwdyn (lines, composed) and "
                      "Pinocchio (dots)", fontsize=9)
    axes[0].legend(fontsize=7, ncol=2)
    axes[1].set_ylabel("joint position [m, rad]")
    axes[2].semilogy(t, np.abs(out["tau"] - out["tau_pin"]).max(axis=1) + 1e-18,
                     label="|tau - tau_Pinocchio| (RNEA along the reference)")
    axes[2].semilogy(t, np.abs(out["q"] - out["q_pin"]).max(axis=1) + 1e-18,
                     label="|q - q_Pinocchio| (simulations, semi-implicit Euler)")
    axes[2].set_ylabel("largest difference")
    axes[2].set_xlabel("t [s]")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(docs / "mobile_manipulator_30dof.png", dpi=110)
    plt.close(fig)

    kept, boxed, log = out["kept"], out["boxed"], out["log"]
    fig, axes = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    for k, label in enumerate(("fx", "fy", "fz")):
        axes[0].plot(log.times, log.wrenches[:, k], label=label)
    for k, label in enumerate(("tx", "ty", "tz")):
        axes[0].plot(log.times, log.wrenches[:, 3 + k], "--", label=label)
    axes[0].set_ylabel("shoulder F/T log [N, N m]")
    axes[0].set_title("left arm as a black box, driven by the wrench logged at its shoulder in "
                      "Pinocchio's run", fontsize=9)
    axes[0].legend(fontsize=7, ncol=6)
    for k in shown[:3]:
        line, = axes[1].plot(t, boxed.q[:, list(kept).index(k)], label=names[k])
        axes[1].plot(t[::25], out["q_pin"][::25, k], "o", ms=3, color=line.get_color())
    axes[1].set_ylabel("joint position [m, rad]")
    axes[1].legend(fontsize=7)
    axes[2].semilogy(t, np.abs(boxed.q - out["q_pin"][:, kept]).max(axis=1) + 1e-18)
    axes[2].set_ylabel("largest |q - q_Pinocchio|")
    axes[2].set_xlabel("t [s]")
    fig.tight_layout()
    fig.savefig(docs / "mobile_manipulator_black_box.png", dpi=110)
    plt.close(fig)


def main():
    out = run()
    robot = out["robot"]
    print(robot, [(s.name, s.model.nv) for s in robot.subsystems])
    print("| comparison | largest difference | scale |")
    print("|---|---|---|")
    print(f"| torques along the reference, composed (dq) vs Pinocchio RNEA | "
          f"{out['torque_error']:.1e} N m | {out['torque_scale']:.0f} N m |")
    print(f"| motion over {out['times'][-1]:g} s, sd.simulate(assembly) vs Pinocchio ABA | "
          f"{out['motion_error']:.1e} | tracking error {out['tracking_error']:.1e} |")
    print(f"| torques along Pinocchio's run, left arm a black box fed from its shoulder F/T "
          f"log | {out['black_box_torque_error']:.1e} N m | |")
    print(f"| motion with the left arm a black box fed from its shoulder F/T log | "
          f"{out['black_box_error']:.1e} | |")
    print(f"composed ID of {len(out['times'])} states: {out['composed_time'] * 1e3:.0f} ms "
          f"(batched); Pinocchio RNEA, a Python loop: {out['pinocchio_time'] * 1e3:.0f} ms; "
          f"sd.simulate on the assembly (numpy): {out['simulate_time']:.1f} s")
    figures(out)


if __name__ == "__main__":
    main()
