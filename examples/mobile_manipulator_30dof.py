"""A holonomic mobile manipulator of 3 subsystems (the branched-robot paper's second validation):
a planar base, the PR2's upper body, and a payload in its right gripper known only as a black box.

    base      3  x, y (prismatic), yaw                          (built in code)
    └── pr2  30  torso lift, head, laser tilt, two 7-DoF arms,  (example-robot-data URDF; its
        │        two 6-joint grippers                            base, casters and wheels,
        │                                                        134 kg welded to its root, ride
        │                                                        on the planar base's chassis)
        └── payload  a black box: a 2 kg tool whose wrench on the gripper is computed from the
                     gripper frame's twist and twist derivative, in dual quaternions

Run: python examples/mobile_manipulator_30dof.py   (needs: pip install example-robot-data)
"""
import time
import warnings
from importlib import metadata

import numpy as np

import screwdyn as sd
from screwdyn.algebra import dualquat as dq
from screwdyn.composition import Assembly, BlackBox

PAYLOAD = dict(mass=2.0, com=np.array([0.08, 0.0, 0.01]), inertia=np.diag([0.004, 0.006, 0.005]))


def example_robot_data(relative):
    """The path of an example-robot-data file."""
    robots = metadata.distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots")
    return str(robots / relative)


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


def payload_wrench(twist, twist_derivative):
    """The wrench a rigid payload exerts on the frame holding it (the note's Newton-Euler wrench at
    the centre of mass, zeta_c = II(xidot_c) + cross(xi_c, II(xi_c)), moved to the frame and
    negated: the holder feels the reaction), from the frame's twist and twist derivative."""
    x_c = dq.from_matrix(np.block([[np.eye(3), PAYLOAD["com"][:, None]], [np.zeros((1, 3)), 1]]))
    xi_c = dq.Ad(dq.conj(x_c), dq.twist(twist))  # the payload's twist at its centre of mass
    xidot_c = dq.Ad(dq.conj(x_c), dq.twist(twist_derivative))

    def II(h):  # II(omega + eps v) = m v + eps I omega
        return np.concatenate([PAYLOAD["mass"] * h[..., 3:], h[..., :3] @ PAYLOAD["inertia"]], -1)

    return -dq.Ad(x_c, II(xidot_c) + dq.cross(xi_c, II(xi_c)))


def build(urdf=example_robot_data, payload=True):
    """The mobile manipulator; ``urdf(relative)`` locates the example-robot-data files."""
    with warnings.catch_warnings():  # a few of the PR2's inertias are inconsistent: loaded anyway
        warnings.simplefilter("ignore", sd.InertiaWarning)
        pr2 = sd.load_urdf(urdf("pr2_description/urdf/pr2.urdf"))
    robot = Assembly(planar_base(), name="base")
    robot.attach(pr2, parent="base", link="chassis", name="pr2")
    if payload:
        robot.attach(BlackBox(payload_wrench), parent="pr2", link="r_gripper_tool_frame",
                     name="payload")
    return robot


def main():
    robot, bare = build(), build(payload=False)
    flat = bare.to_model()  # the robot without its black box, as one model
    print(robot, "\n", flat)
    rng = np.random.default_rng(1)
    N = 10_000
    q = np.stack([sd.random_configuration(flat, s) for s in range(N)])
    qd, qdd = rng.normal(size=(N, flat.nv)), rng.normal(size=(N, flat.nv))

    tau_bare, tau_flat = bare.inverse_dynamics(q, qd, qdd), sd.inverse_dynamics(flat, q, qd, qdd)
    print(f"assembly vs flat model: max relative difference "
          f"{np.abs(tau_bare - tau_flat).max() / np.abs(tau_flat).max():.1e}")

    rest = np.zeros(robot.nv)
    extra = robot.inverse_dynamics(q[0], rest, rest) - bare.inverse_dynamics(q[0], rest, rest)
    shoulder = robot.joint_names.index("pr2/r_shoulder_lift_joint")
    print(f"holding the {PAYLOAD['mass']} kg payload at rest costs the right shoulder lift "
          f"{extra[shoulder]:+.2f} N m")
    state = robot.connection_points(q[0], qd[0], qdd[0])["payload"]
    print(f"the payload's wrench on the gripper in state 0: {np.round(state.wrench, 3)}")

    for label, run in (("assembly + payload (dq)", lambda: robot.inverse_dynamics(q, qd, qdd)),
                       ("assembly (dq)", lambda: bare.inverse_dynamics(q, qd, qdd)),
                       ("flat model (dq)",
                        lambda: sd.inverse_dynamics(flat, q, qd, qdd, algebra="dq"))):
        start = time.perf_counter()
        run()
        print(f"{label:24s} {N} states: {(time.perf_counter() - start) * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
