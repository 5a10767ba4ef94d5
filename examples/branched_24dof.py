"""A fixed-base branched robot of 24 DoF composed of 8 subsystems (the branched-robot paper's first
validation): its inverse dynamics by modular composition against Featherstone's RNEA in Pinocchio
(accuracy and time per call), every subsystem's W_i evaluated in its own process (and Ray actor)
from serialized connection-point data, and subsystems, nested or not, replaced by black boxes.

    torso         2  waist yaw, waist pitch                        (built in code)
    ├── left_arm      6  UR5                                       (example-robot-data URDF)
    │   └── left_gripper  3  wrist roll, two prismatic fingers     (code)
    ├── right_arm     6  UR5
    │   └── right_gripper 3
    ├── head          an assembly of its own:
    │   ├── neck      2  pan, tilt                                 (code)
    │   └── camera    1  prismatic zoom slide                      (code)
    └── lidar         1  continuous spin, on the torso's back      (code)

Run: python examples/branched_24dof.py   (needs example-robot-data and pinocchio; Ray optional)
"""
import time
from importlib import metadata

import numpy as np

import screwdyn as sd
from pinocchio_reference import PinocchioState, pinocchio_assembly
from screwdyn.composition import Assembly, BlackBox
from screwdyn.model.builder import rpy_to_matrix


def example_robot_data(relative):
    """The path of an example-robot-data file."""
    robots = metadata.distribution("example-robot-data").locate_file(
        "cmeel.prefix/share/example-robot-data/robots")
    return str(robots / relative)


def transform(xyz=(0, 0, 0), rpy=(0, 0, 0)):
    """The 4x4 placement of a connection point: URDF-style origin."""
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = rpy_to_matrix(rpy), xyz
    return T


def box(builder, name, mass, size, com=(0, 0, 0)):
    """A link with the inertia of a solid box of ``size`` centred at ``com``."""
    a, b, c = size
    builder.add_link(name, mass=mass, com=com,
                     inertia=mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b]))


def torso():
    b = sd.ModelBuilder("torso")
    box(b, "pelvis", 8.0, (0.3, 0.25, 0.1), com=(0, 0, 0.05))  # welded to the world: no joint
    # moves it (its inertia is the model's base_inertia), so it loads no joint of the robot
    box(b, "waist", 4.0, (0.25, 0.2, 0.15), com=(0, 0, 0.07))
    box(b, "chest", 15.0, (0.3, 0.4, 0.45), com=(0.02, 0, 0.22))
    b.add_joint("waist_yaw", "revolute", "pelvis", "waist", xyz=(0, 0, 0.8), axis=(0, 0, 1))
    b.add_joint("waist_pitch", "revolute", "waist", "chest", xyz=(0, 0, 0.15), axis=(0, 1, 0))
    return b.build()


def gripper():
    """An adapter plate, welded to the gripper's base (it rides on the arm's flange and loads the
    arm, though no joint of the gripper moves it), and a wrist roll carrying a palm and two
    parallel fingers on prismatic joints."""
    b = sd.ModelBuilder("gripper")
    box(b, "mount", 0.25, (0.08, 0.08, 0.01), com=(0, 0, 0.005))
    box(b, "palm", 0.6, (0.08, 0.12, 0.06), com=(0, 0, 0.03))
    box(b, "finger_left", 0.08, (0.02, 0.01, 0.06), com=(0, 0, 0.03))
    box(b, "finger_right", 0.08, (0.02, 0.01, 0.06), com=(0, 0, 0.03))
    b.add_joint("roll", "revolute", "mount", "palm", axis=(0, 0, 1))
    b.add_joint("finger_left", "prismatic", "palm", "finger_left", xyz=(0, 0.02, 0.06),
                axis=(0, 1, 0))
    b.add_joint("finger_right", "prismatic", "palm", "finger_right", xyz=(0, -0.02, 0.06),
                axis=(0, -1, 0))
    return b.build()


def neck():
    b = sd.ModelBuilder("neck")
    b.add_link("mount")
    box(b, "pan_link", 0.4, (0.06, 0.06, 0.08), com=(0, 0, 0.04))
    box(b, "head", 2.5, (0.2, 0.22, 0.2), com=(0.03, 0, 0.1))
    b.add_joint("pan", "revolute", "mount", "pan_link", axis=(0, 0, 1))
    b.add_joint("tilt", "revolute", "pan_link", "head", xyz=(0, 0, 0.08), axis=(0, 1, 0))
    return b.build()


def camera():
    b = sd.ModelBuilder("camera")
    b.add_link("mount")
    box(b, "lens", 0.3, (0.06, 0.06, 0.1), com=(0.05, 0, 0))
    b.add_joint("zoom", "prismatic", "mount", "lens", axis=(1, 0, 0))
    return b.build()


def lidar():
    b = sd.ModelBuilder("lidar")
    b.add_link("mount")
    box(b, "rotor", 0.8, (0.1, 0.1, 0.07), com=(0.005, 0, 0.035))
    b.add_joint("spin", "continuous", "mount", "rotor", axis=(0, 0, 1))
    return b.build()


def head():
    """A neck with a camera: an assembly used as one subsystem of the robot."""
    h = Assembly(neck(), name="neck")
    h.attach(camera(), parent="neck", link="head", placement=transform((0.11, 0, 0.1)))
    return h


def build(urdf=example_robot_data):
    """The 24-DoF robot; ``urdf(relative)`` locates the example-robot-data files."""
    ur5 = sd.load_urdf(urdf("ur_description/urdf/ur5_robot.urdf"))
    robot = Assembly(torso(), name="torso")
    for side, y in (("left", 1), ("right", -1)):
        arm = robot.attach(ur5, parent="torso", link="chest", name=f"{side}_arm",
                           placement=transform((0, 0.2 * y, 0.35), (-y * np.pi / 2, 0, 0)))
        robot.attach(gripper(), parent=arm, link="tool0", name=f"{side}_gripper",
                     placement=transform((0, 0, 0.01), (0, 0, np.pi / 2)))
    robot.attach(head(), parent="torso", link="chest", name="head",
                 placement=transform((0, 0, 0.46), (0, 0.1, 0)))
    robot.attach(lidar(), parent="torso", link="chest", name="lidar",
                 placement=transform((-0.17, 0, 0.3), (0, -np.pi / 2, 0)))
    return robot


def pinocchio_twin(robot, urdf=example_robot_data):
    """The robot rebuilt by Pinocchio (``pinocchio.appendModel``; the UR5s parsed by Pinocchio
    from their URDF) and the map of its states (``pinocchio_reference``)."""
    import pinocchio as pin

    ur5 = urdf("ur_description/urdf/ur5_robot.urdf")
    reference = pinocchio_assembly(pin, robot, {"left_arm": ur5, "right_arm": ur5})
    return reference, PinocchioState(pin, reference, robot.to_model())


def accuracy(robot, states=1000, urdf=example_robot_data):
    """The composed inverse dynamics (dual quaternions: every subsystem's W_i at the centres of
    mass) against Pinocchio's RNEA at random states: (largest |difference| N m, largest
    |tau| N m)."""
    import pinocchio as pin

    reference, state = pinocchio_twin(robot, urdf)
    data = reference.createData()
    q, qd, qdd = random_states(robot, states)
    tau = robot.inverse_dynamics(q, qd, qdd, algebra="dq")
    expected = np.array([pin.rnea(reference, data, state.q(a), state.v(b), state.v(c))[
        state.order] for a, b, c in zip(q, qd, qdd)])
    return float(np.abs(tau - expected).max()), float(np.abs(expected).max())


def random_states(robot, n, seed=0):
    flat = robot.configuration_model
    rng = np.random.default_rng(seed)
    q = np.stack([sd.random_configuration(flat, seed + k) for k in range(n)])
    return q, rng.normal(size=(n, flat.nv)), rng.normal(size=(n, flat.nv))


def time_per_call(robot, states=10_000, repeat=5, urdf=example_robot_data):
    """{method: (seconds per call, seconds per state)}: Pinocchio's RNEA (one state per call,
    C++), the composed inverse dynamics of the assembly on numpy (one state, and a batch), the
    flat model's RNEA (spatial algebra, batch), and the assembly under jax.jit (one state, and
    a batch). Best of ``repeat``."""
    import pinocchio as pin

    reference, state = pinocchio_twin(robot, urdf)
    data = reference.createData()
    q, qd, qdd = random_states(robot, states)
    flat = robot.to_model()
    one = [x[0] for x in (q, qd, qdd)]
    pin_one = (state.q(one[0]), state.v(one[1]), state.v(one[2]))
    runs = {
        "Pinocchio rnea, one state (C++)": (lambda: pin.rnea(reference, data, *pin_one), 1, 2000),
        "assembly, numpy, one state": (lambda: robot.inverse_dynamics(*one, algebra="dq"), 1,
                                       20),
        f"assembly, numpy, {states} states": (lambda: robot.inverse_dynamics(q, qd, qdd,
                                                                             algebra="dq"),
                                              states, 1),
        f"flat model (spatial), numpy, {states} states": (
            lambda: sd.inverse_dynamics(flat, q, qd, qdd), states, 1),
    }
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        jitted = jax.jit(robot.inverse_dynamics)
        one_j = [jax.numpy.asarray(x) for x in one]
        many_j = [jax.numpy.asarray(x) for x in (q, qd, qdd)]
        jitted(*one_j).block_until_ready(), jitted(*many_j).block_until_ready()  # compile
        runs["assembly, jax.jit, one state"] = (lambda: jitted(*one_j).block_until_ready(), 1,
                                                200)
        runs[f"assembly, jax.jit, {states} states"] = (
            lambda: jitted(*many_j).block_until_ready(), states, 3)
    except ImportError:
        pass
    out = {}
    for label, (run, n, loops) in runs.items():
        run()
        best = np.inf
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(loops):
                run()
            best = min(best, (time.perf_counter() - start) / loops)
        out[label] = (best, best / n)
    return out


def distributed(robot, engines=("processes", "ray"), states=100):
    """{engine: True when the torques computed with every subsystem in its own process (or Ray
    actor), from serialized connection-point data only, equal the in-process ones bit for bit}
    (engines that are not installed are left out)."""
    from screwdyn.composition.distributed import DistributedAssembly

    q, qd, qdd = random_states(robot, states, seed=1)
    tau = robot.inverse_dynamics(q, qd, qdd, algebra="dq")
    out = {}
    for engine in engines:
        if engine == "ray":
            try:
                import ray  # noqa: F401
            except ImportError:
                continue
        with DistributedAssembly(robot, engine, algebra="dq") as workers:
            out[engine] = bool(np.array_equal(workers.inverse_dynamics(q, qd, qdd), tau))
    return out


def main():
    robot = build()
    flat = robot.to_model()
    print(robot, "\n", flat)
    error, scale = accuracy(robot)
    print(f"composed ID (dq) vs Pinocchio RNEA, 1000 random states: largest difference "
          f"{error:.1e} N m (largest torque {scale:.0f} N m)")
    for engine, same in distributed(robot).items():
        print(f"every subsystem's W_i in its own {engine} worker, connection-point data only: "
              f"{'bit for bit equal' if same else 'DIFFERENT'}")

    # the right gripper as a black box: only its wrench at the connection point is known, e.g.
    # from a force/torque sensor on the UR5's flange; here, the real gripper's
    q, qd, qdd = random_states(robot, 100)
    wrench = robot.connection_points(q, qd, qdd)["right_gripper"].wrench
    boxed = robot.replaced("right_gripper", BlackBox(wrench))
    tau = robot.inverse_dynamics(q, qd, qdd)
    tau_boxed = boxed.inverse_dynamics(*(keep(robot, boxed, x) for x in (q, qd, qdd)))
    print(f"right gripper as a black box: the other {boxed.nv} joint forces differ by "
          f"{np.abs(tau_boxed - keep(robot, boxed, tau)).max():.1e} N m at most")
    # the whole head (a nested assembly: neck and camera) as one black box
    head = robot.replaced("head", BlackBox(robot.connection_points(q, qd, qdd)["head/neck"].wrench))
    tau_head = head.inverse_dynamics(*(keep(robot, head, x) for x in (q, qd, qdd)))
    print(f"head assembly as one black box: the other {head.nv} joint forces differ by "
          f"{np.abs(tau_head - keep(robot, head, tau)).max():.1e} N m at most")
    print("| inverse dynamics, 24 DoF | per call | per state |")
    print("|---|---|---|")
    for label, (call, state) in time_per_call(robot).items():
        print(f"| {label} | {call * 1e6:,.0f} us | {state * 1e6:,.2f} us |")


def keep(robot, part, x):
    """The entries of x (q-sized or v-sized, of ``robot``) that belong to the subsystems of
    ``part``, an assembly made from ``robot`` (``replaced``)."""
    split = robot.split_q(x) if x.shape[-1] == robot.nq else robot.split_v(x)
    return np.concatenate([split[s.name] for s in part.models], axis=-1)


if __name__ == "__main__":
    main()
