"""Modular composition (the branched-robot paper): assemblies against their flat model and against
Pinocchio's appendModel, black boxes (measured, callable, parent), nesting, bad input."""
import importlib.util
import pathlib
from dataclasses import replace

import numpy as np
import pytest

import screwdyn as sd
from conftest import erd_urdf, random_state, random_tree
from screwdyn.algebra import dualquat as dq
from screwdyn.composition import Assembly, BlackBox, ConnectionState

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
G = 9.81
NO_BASE = (0.0, (0.0, 0.0, 0.0), (0.0,) * 9)  # a Model.base_inertia: nothing welded to the base


def _example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


branched = _example("branched_24dof")
mobile = _example("mobile_manipulator_30dof")


def _rel(a, b):
    return np.abs(np.asarray(a) - b).max() / max(np.abs(b).max(), 1e-300)


def _state(robot, seed, batch=()):
    """Random (q, qd, qdd) of an assembly's size (through its flat model)."""
    return random_state(robot.to_model(), seed, batch)


@pytest.fixture(scope="module")
def robot24():
    return branched.build(erd_urdf)


@pytest.fixture(scope="module")
def mobile_robot():
    return mobile.build(erd_urdf)


# -- the paper's validations ----------------------------------------------------------------------
def test_24dof_robot_of_8_subsystems(robot24):
    assert (robot24.nv, len(robot24.subsystems)) == (24, 8)
    assert robot24["head/camera"].parent == "head/neck"  # the nested head assembly
    assert robot24.joint_names == robot24.to_model().joint_names


@pytest.mark.parametrize("algebra", ["dq", "spatial"])
def test_24dof_assembly_equals_flat_model(robot24, algebra):
    flat = robot24.to_model()
    q, qd, qdd = _state(robot24, 0, batch=(2, 3))
    rng = np.random.default_rng(0)
    f_ext = {name: rng.normal(size=(2, 3, robot24[name].model.nlinks, 6))
             for name in ("torso", "left_gripper", "head/camera")}
    flat_f_ext = np.zeros((2, 3, flat.nlinks, 6))
    for name, F in f_ext.items():
        for k, link in enumerate(robot24[name].model.link_names):
            flat_f_ext[:, :, flat.link_index(f"{name}/{link}")] = F[:, :, k]
    gravity = [0.5, -1.0, -9.0]
    tau = robot24.inverse_dynamics(q, qd, qdd, f_ext=f_ext, gravity=gravity, algebra=algebra)
    assert tau.shape == (2, 3, 24)
    expected = sd.inverse_dynamics(flat, q, qd, qdd, f_ext=flat_f_ext, gravity=gravity)
    assert _rel(tau, expected) < 1e-10


def test_24dof_matches_pinocchio_append_model(robot24):
    pin = pytest.importorskip("pinocchio")
    ur5 = erd_urdf("ur_description/urdf/ur5_robot.urdf")
    reference = _pinocchio_assembly(pin, robot24, {"left_arm": ur5, "right_arm": ur5})
    _compare_with_pinocchio(pin, robot24, reference, seeds=range(3))


def test_mobile_manipulator_of_3_subsystems(mobile_robot):
    assert (mobile_robot.nv, len(mobile_robot.subsystems)) == (33, 3)
    assert mobile_robot["payload"].black_box is not None


def test_mobile_manipulator_without_payload_equals_flat_model(mobile_robot):
    bare = _without_payload(mobile_robot)
    flat = bare.to_model()
    q, qd, qdd = random_state(flat, 1, batch=(4,))
    assert _rel(bare.inverse_dynamics(q, qd, qdd), sd.inverse_dynamics(flat, q, qd, qdd)) < 1e-10
    assert _rel(bare.mass_matrix(q), sd.mass_matrix(flat, q)) < 1e-10


def test_mobile_manipulator_with_black_box_payload_matches_pinocchio(mobile_robot):
    """The payload is a black box to screwdyn (a callable wrench); Pinocchio gets its inertia,
    appended to the gripper like a model without joints."""
    pin = pytest.importorskip("pinocchio")
    reference = _pinocchio_assembly(pin, _without_payload(mobile_robot),
                                    {"pr2": erd_urdf("pr2_description/urdf/pr2.urdf")})
    payload = pin.Model()
    payload.inertias[0] = pin.Inertia(mobile.PAYLOAD["mass"], mobile.PAYLOAD["com"],
                                      mobile.PAYLOAD["inertia"])
    frame = reference.getFrameId("pr2/r_gripper_tool_frame", pin.BODY)
    reference = pin.appendModel(reference, payload, frame, pin.SE3.Identity())
    _compare_with_pinocchio(pin, mobile_robot, reference, seeds=range(3),
                            flat=_without_payload(mobile_robot).to_model())


def _without_payload(robot):
    bare = Assembly(robot["base"].model, name="base")
    bare.attach(robot["pr2"].model, parent="base", link="chassis", name="pr2")
    return bare


# -- links welded to a subsystem's base ------------------------------------------------------------
def _ur5_on_torso(ur5):
    robot = Assembly(branched.torso(), name="torso")
    robot.attach(ur5, parent="torso", link="chest", placement=_T((0.05, 0.2, 0.3), 1.0),
                 name="arm")
    return robot


@pytest.mark.parametrize("algebra", ["dq", "spatial"])
def test_links_welded_to_a_subsystems_base_load_its_parent(algebra):
    """A UR5's base_link (4 kg, welded to its root) rides on the torso's moving chest: it loads
    the waist joints as in the flat model and in Pinocchio (the real URDF, inertias intact), and
    leaves the arm's own torques alone."""
    pin = pytest.importorskip("pinocchio")
    path = erd_urdf("ur_description/urdf/ur5_robot.urdf")
    ur5 = sd.load_urdf(path)
    assert ur5.base_inertia[0] == 4.0
    robot, massless = _ur5_on_torso(ur5), _ur5_on_torso(replace(ur5, base_inertia=NO_BASE))
    flat = robot.to_model()
    assert flat.total_mass == pytest.approx(massless.to_model().total_mass + 4.0, abs=1e-12)
    q, qd, qdd = _state(robot, 11, batch=(5,))
    tau = robot.inverse_dynamics(q, qd, qdd, algebra=algebra)
    assert _rel(tau, sd.inverse_dynamics(flat, q, qd, qdd)) < 1e-12
    bare = massless.inverse_dynamics(q, qd, qdd, algebra=algebra)
    arm, waist = robot["arm"].v_slice, robot["torso"].v_slice
    assert _rel(tau[..., arm], bare[..., arm]) < 1e-12
    assert np.abs(tau[..., waist] - bare[..., waist]).max(axis=0).min() > 0.1  # N m: it loads both
    _compare_with_pinocchio(pin, robot, _pinocchio_assembly(pin, robot, {"arm": path}),
                            seeds=range(3))
    # at rest, the arm's wrench on the chest is its weight, base_link included
    rest = np.zeros_like(qd)
    state = robot.connection_points(q, rest, rest, algebra=algebra)["arm"]
    weight = np.einsum("bji,j->bi", state.pose[:, :3, :3], [0, 0, -(ur5.total_mass + 4.0) * G])
    np.testing.assert_allclose(state.wrench[:, :3], weight, atol=1e-10)


def test_links_welded_to_the_roots_base_stay_with_the_world():
    """The root's base links are fixed to the world: they load no joint, the flat model keeps them
    as its base inertia (in the world frame), and they weigh on the world at the root's point."""
    ur5 = sd.load_urdf(erd_urdf("ur_description/urdf/ur5_robot.urdf"))
    place = _T((0.3, -0.2, 0.5), 0.4)
    robot = Assembly(ur5, placement=place)
    flat = robot.to_model()
    mass, com, inertia = flat.base_inertia
    assert mass == 4.0 and flat.total_mass == ur5.total_mass
    np.testing.assert_allclose(com, place[:3, :3] @ ur5.base_inertia[1] + place[:3, 3], atol=1e-15)
    R = place[:3, :3]
    np.testing.assert_allclose(np.reshape(inertia, (3, 3)),
                               R @ np.reshape(ur5.base_inertia[2], (3, 3)) @ R.T, atol=1e-15)
    q, qd, qdd = random_state(ur5, 12, batch=(3,))
    assert _rel(robot.inverse_dynamics(q, qd, qdd),
                sd.inverse_dynamics(ur5, q, qd, qdd, gravity=R.T @ [0, 0, -G])) < 1e-12
    rest = np.zeros_like(qd)
    wrench = robot.connection_points(q, rest, rest)["ur5"].wrench
    np.testing.assert_allclose(wrench[:, :3], np.broadcast_to(
        R.T @ [0, 0, -(ur5.total_mass + 4.0) * G], (3, 3)), atol=1e-10)


# -- black boxes -----------------------------------------------------------------------------------
def test_black_box_with_measured_wrench_leaves_the_other_torques_exact(robot24):
    q, qd, qdd = _state(robot24, 2, batch=(5,))
    wrench = robot24.connection_points(q, qd, qdd)["right_gripper"].wrench
    boxed = robot24.replaced("right_gripper", BlackBox(wrench))
    assert boxed.nv == 21
    tau = boxed.inverse_dynamics(*(branched.keep(robot24, boxed, x) for x in (q, qd, qdd)))
    expected = branched.keep(robot24, boxed, robot24.inverse_dynamics(q, qd, qdd))
    assert _rel(tau, expected) < 1e-12
    wrong = robot24.replaced("right_gripper", BlackBox(np.zeros(6)))
    assert _rel(wrong.inverse_dynamics(*(branched.keep(robot24, wrong, x) for x in (q, qd, qdd))),
                expected) > 1e-3  # the wrench matters
    # and so does the gripper's adapter plate, welded to its base: the wrench carries it
    gripper = robot24["right_gripper"].model
    assert gripper.base_inertia[0] > 0
    plateless = robot24.replaced("right_gripper", replace(gripper, base_inertia=NO_BASE))
    short = robot24.replaced("right_gripper", BlackBox(
        plateless.connection_points(q, qd, qdd)["right_gripper"].wrench))
    assert _rel(short.inverse_dynamics(*(branched.keep(robot24, short, x) for x in (q, qd, qdd))),
                expected) > 1e-4


def test_black_box_with_callable_wrench_of_the_real_subsystem(robot24):
    """The callable runs the real gripper on the moving connection point it is given: an assembly
    rooted at a black box that imposes that motion."""
    q, qd, qdd = _state(robot24, 3, batch=(4,))
    gripper = robot24["right_gripper"]
    parts = q[..., gripper.q_slice], qd[..., gripper.v_slice], qdd[..., gripper.v_slice]
    seen = []

    def wrench(twist, twist_derivative):
        seen.append(twist.shape)
        mount = BlackBox(points={"flange": (np.eye(4), twist, twist_derivative)}, name="mount")
        alone = Assembly(mount)
        alone.attach(gripper.model, parent="mount", link="flange", name="gripper")
        return alone.connection_points(*parts)["gripper"].wrench

    boxed = robot24.replaced("right_gripper", BlackBox(wrench))
    tau = boxed.inverse_dynamics(*(branched.keep(robot24, boxed, x) for x in (q, qd, qdd)))
    expected = branched.keep(robot24, boxed, robot24.inverse_dynamics(q, qd, qdd))
    assert seen == [(4, 6)]
    assert gripper.model.base_inertia[0] > 0  # its adapter plate moves with the mount it is given
    assert _rel(tau, expected) < 1e-12


def test_black_box_parent_imposes_pose_twist_and_derivative(robot24):
    """The left UR5 becomes a black box known by its wrench on the torso (its 4 kg base_link,
    welded to its base, included) and the motion of its flange, where the real left gripper stays
    attached."""
    q, qd, qdd = _state(robot24, 4, batch=(3,))
    states = robot24.connection_points(q, qd, qdd)
    at_gripper = states["left_gripper"]
    P = robot24["left_gripper"].placement  # flange -> gripper connection point
    x = dq.from_matrix(P)
    move = lambda h: dq.twist_vector(dq.Ad(x, dq.twist(h)))  # noqa: E731 (gripper point -> flange)
    flange = (at_gripper.pose @ np.linalg.inv(P), move(at_gripper.twist),
              move(at_gripper.twist_derivative))
    arm = BlackBox(states["left_arm"].wrench, points={"tool0": flange})
    boxed = robot24.replaced("left_arm", arm)
    kept = [branched.keep(robot24, boxed, x) for x in (q, qd, qdd)]
    expected = branched.keep(robot24, boxed, robot24.inverse_dynamics(q, qd, qdd))
    assert _rel(boxed.inverse_dynamics(*kept), expected) < 1e-12
    boxed_states = boxed.connection_points(*kept)
    for field in ("pose", "twist", "twist_derivative", "wrench"):
        np.testing.assert_allclose(getattr(boxed_states["left_gripper"], field),
                                   getattr(at_gripper, field), atol=1e-10)


def test_force_torque_sensor_reading_of_a_held_payload():
    """A UR5 holds a 2 kg payload at rest; the black box is fed the reading of a sensor at the
    flange reporting the load on it (the payload's weight, in the sensor frame, about its origin).
    Reference: the UR5 URDF with the payload welded to tool0."""
    path = erd_urdf("ur_description/urdf/ur5_robot.urdf")
    m, c = 2.0, np.array([0.03, -0.02, 0.1])
    with open(path) as f:
        text = f.read()
    holding = sd.load_urdf(text.replace("</robot>", f"""
      <link name="payload"><inertial><origin xyz="{c[0]} {c[1]} {c[2]}"/><mass value="{m}"/>
        <inertia ixx="0.01" iyy="0.02" izz="0.015" ixy="0" ixz="0" iyz="0"/></inertial></link>
      <joint name="grasp" type="fixed"><parent link="tool0"/><child link="payload"/></joint>
    </robot>"""))
    ur5 = sd.load_urdf(path)
    q = sd.random_configuration(ur5, 7)
    R_world_sensor = sd.forward_kinematics(ur5, q)[ur5.link_index("tool0"), :3, :3]
    force = R_world_sensor.T @ np.array([0, 0, -m * G])  # what the payload puts on the sensor
    reading = np.concatenate([force, np.cross(c, force)])
    robot = Assembly(ur5)
    robot.attach(BlackBox(reading, name="payload"), parent="ur5", link="tool0")
    rest = np.zeros(6)
    expected = sd.inverse_dynamics(holding, q, rest, rest)
    assert _rel(robot.inverse_dynamics(q, rest, rest), expected) < 1e-12
    state = robot.connection_points(q, rest, rest)["payload"]
    np.testing.assert_allclose(state.twist_derivative[:3], R_world_sensor.T @ [0, 0, G],
                               atol=1e-12)  # at rest: -g, gravity folded in
    # the payload's callable wrench (the mobile example's, in dual quaternions) in motion
    _, qd, qdd = random_state(ur5, 8)
    moving = Assembly(ur5)
    moving.attach(BlackBox(mobile.payload_wrench, name="payload"), parent="ur5", link="tool0")
    reference = sd.load_urdf(text.replace("</robot>", _payload_urdf(mobile.PAYLOAD)))
    expected = sd.inverse_dynamics(reference, q, qd, qdd)
    assert _rel(moving.inverse_dynamics(q, qd, qdd), expected) < 1e-12


def _payload_urdf(p):
    (ixx, ixy, ixz), (_, iyy, iyz), (_, _, izz) = p["inertia"]
    return f"""<link name="payload"><inertial><origin xyz="{' '.join(map(str, p['com']))}"/>
      <mass value="{p['mass']}"/><inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" ixy="{ixy}"
      ixz="{ixz}" iyz="{iyz}"/></inertial></link>
      <joint name="grasp" type="fixed"><parent link="tool0"/><child link="payload"/></joint>
    </robot>"""


# -- structure, connection points, other dynamics --------------------------------------------------
def _two_trees():
    robot = Assembly(random_tree(0, 5, floating_base=True), name="body",
                     placement=_T((0, 0, 1), 0.3))
    robot.attach(random_tree(1, 4), parent="body", link="l2", placement=_T((0.1, 0.2, 0.3), 1.0),
                 name="limb")
    robot.attach(random_tree(2, 4, floating_base=True), parent="limb", link="base",
                 placement=_T((0.2, 0, 0), -0.7), name="drone")  # on a link welded to limb's base
    robot.attach(random_tree(6, 3), parent="limb", link="base", placement=_T((0, 0.1, 0), -0.2),
                 name="stub")  # there too, with 1 kg welded to its own base (so has limb's)
    return robot


def _T(xyz, angle):
    from scipy.spatial.transform import Rotation

    T = np.eye(4)
    T[:3, :3], T[:3, 3] = Rotation.from_rotvec(angle * np.array([0.6, 0.0, 0.8])).as_matrix(), xyz
    return T


@pytest.mark.parametrize("algebra", ["dq", "spatial", "cga"])
def test_floating_bases_and_links_welded_to_a_base(algebra):
    """Every algebra composes: floating-base subsystems, subsystems on a link welded to another's
    base, links welded to subsystems' bases riding on a moving parent."""
    if algebra == "cga":
        pytest.importorskip("screwdyn.algebra.cga")
    robot = _two_trees()
    flat = robot.to_model()
    q, qd, qdd = random_state(flat, 5, batch=(3,))
    assert _rel(robot.inverse_dynamics(q, qd, qdd, algebra=algebra),
                sd.inverse_dynamics(flat, q, qd, qdd)) < 1e-10
    tau = sd.inverse_dynamics(flat, q, qd, qdd)
    assert _rel(robot.forward_dynamics(q, qd, tau, algebra=algebra), qdd) < 1e-9


def test_mass_matrix_columns_are_computed_without_gravity(robot24):
    """Pitfall 2 of the note: Newton-Euler columns with gravity on would each carry g(q)."""
    q, _, _ = _state(robot24, 6, batch=(2,))
    M = robot24.mass_matrix(q)
    assert _rel(M, sd.mass_matrix(robot24.to_model(), q)) < 1e-10
    assert np.abs(sd.gravity_torques(robot24.to_model(), q)).max() > 1  # gravity would show


def test_nested_assembly_is_its_subsystems_attached_one_by_one(robot24):
    direct = Assembly(branched.torso(), name="torso")
    for s in robot24.subsystems[1:]:
        direct.attach(s.model, parent=s.parent, link=s.link, placement=s.placement, name=s.name)
    q, qd, qdd = _state(robot24, 7)
    assert _rel(direct.inverse_dynamics(q, qd, qdd), robot24.inverse_dynamics(q, qd, qdd)) < 1e-14


def test_connection_points_against_flat_kinematics(robot24):
    flat = robot24.to_model()
    q, qd, _ = _state(robot24, 8, batch=(2,))
    rest = np.zeros_like(qd)
    states = robot24.connection_points(q, qd, rest, gravity=[0, 0, 0])
    fk = sd.forward_kinematics(flat, q)
    assert all(isinstance(state, ConnectionState) for state in states.values())
    for name in ("left_gripper", "head/camera"):
        s = robot24[name]
        link = flat.link_index(f"{s.parent}/{s.link}")
        pose = fk[:, link] @ s.placement
        np.testing.assert_allclose(states[name].pose, pose, atol=1e-12)
        J = sd.jacobian(flat, q, link, frame="local")  # the link's twist, moved to the point
        V = np.einsum("bij,bj->bi", J, qd)
        x = dq.conj(dq.from_matrix(s.placement))
        np.testing.assert_allclose(states[name].twist, dq.twist_vector(dq.Ad(x, dq.twist(V))),
                                   atol=1e-10)
    # at rest, a leaf's wrench on its parent is its weight, and the root's on the world the
    # robot's, the links welded to their bases included (the gripper's plate, the torso's pelvis)
    static = robot24.connection_points(q, rest, rest)
    for name, mass in [(name, robot24[name].model.total_mass + robot24[name].model.base_inertia[0])
                       for name in ("lidar", "left_gripper")] + [
                           ("torso", flat.total_mass + flat.base_inertia[0])]:
        R = static[name].pose[:, :3, :3]
        np.testing.assert_allclose(static[name].wrench[:, :3],
                                   np.einsum("bji,j->bi", R, [0, 0, -mass * G]), atol=1e-9)


def test_jit_equals_numpy(robot24):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    q, qd, qdd = _state(robot24, 9, batch=(3,))
    expected = robot24.inverse_dynamics(q, qd, qdd)
    traced = jax.jit(robot24.inverse_dynamics)(*map(jax.numpy.asarray, (q, qd, qdd)))
    assert isinstance(traced, jax.Array)
    assert _rel(np.asarray(traced), expected) < 1e-12


def test_parent_given_as_the_model_attached():
    body, limb = random_tree(0, 3), random_tree(1, 2)
    robot = Assembly(body)
    first = robot.attach(limb, parent=body, link="l1", name="first")
    robot.attach(limb, parent=first, link="l0", name="second")
    assert robot["second"].parent == "first"
    with pytest.raises(sd.ModelError, match="attached as 2 subsystems"):
        robot.attach(random_tree(2, 2), parent=limb, link="l0", name="third")


def test_split_slices_and_names(robot24):
    tau = np.arange(24.0)
    parts = robot24.split_v(tau)
    assert list(parts) == [s.name for s in robot24.models]
    assert np.array_equal(np.concatenate(list(parts.values())), tau)
    assert robot24["left_gripper"].v_slice == slice(8, 11)
    assert robot24["left_gripper"].joint_names[1] == "left_gripper/finger_left"


# -- bad input -------------------------------------------------------------------------------------
def test_bad_attachments_name_the_subsystem_and_connection_point(robot24):
    arm = random_tree(3, 3)
    robot = Assembly(random_tree(4, 3), name="torso")
    with pytest.raises(sd.ModelError, match=r"'arm'.*'torso'/'shoulder'.*no link 'shoulder'"):
        robot.attach(arm, parent="torso", link="shoulder", name="arm")
    shear = np.eye(4)
    shear[0, 1] = 0.3
    with pytest.raises(sd.ModelError, match=r"'arm' at connection point 'torso'/'l1'.*not a rigid"):
        robot.attach(arm, parent="torso", link="l1", placement=shear, name="arm")
    mirror = np.diag([1.0, 1.0, -1.0, 1.0])
    with pytest.raises(sd.ModelError, match="not a rigid"):
        robot.attach(arm, parent="torso", link="l1", placement=mirror, name="arm")
    with pytest.raises(sd.ModelError, match="no subsystem named 'hand'"):
        robot.attach(arm, parent="hand", link="l1", name="arm")
    with pytest.raises(sd.ModelError, match="cycle"):
        robot.attach(robot, parent="torso", link="l1", name="again")
    robot.attach(arm, parent="torso", link="l1", name="arm")
    with pytest.raises(sd.ModelError, match="already attached"):
        robot.attach(arm, parent="torso", link="l1", name="arm")
    with pytest.raises(sd.ModelError, match="needs the wrench"):
        robot.attach(BlackBox(), parent="arm", link="l0", name="tool")
    robot.attach(BlackBox(np.zeros(6), points={"tip": (np.eye(4),) + (np.zeros(6),) * 2}),
                 parent="arm", link="l0", name="tool")
    with pytest.raises(sd.ModelError, match="black box 'tool' has no connection point 'flange'"):
        robot.attach(arm, parent="tool", link="flange", name="arm2")
    with pytest.raises(sd.ModelError, match="black box"):
        robot.to_model()
    with pytest.raises(sd.ModelError, match="black box"):
        robot.mass_matrix(np.zeros(robot.nq))


def test_black_box_wrench_of_the_wrong_shape():
    robot = Assembly(random_tree(4, 3), name="torso")
    robot.attach(BlackBox(lambda V, A: np.zeros(V.shape[:-1] + (3,))), parent="torso", link="l2",
                 name="tool")
    q, qd, qdd = random_state(random_tree(4, 3), 0, batch=(2,))
    with pytest.raises(ValueError, match=r"black box 'tool' at connection point 'torso'/'l2': "
                                         r"wrench must have shape \(\.\.\., 6\)"):
        robot.inverse_dynamics(q, qd, qdd)
    measured = robot.replaced("tool", BlackBox(np.zeros((3, 6))))
    with pytest.raises(ValueError, match="'tool'.*batch shape"):
        measured.inverse_dynamics(q, qd, qdd)
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., 3\)"):
        robot.inverse_dynamics(q[..., :2], qd, qdd)
    with pytest.raises(sd.ModelError, match="f_ext: no subsystem with links named 'tool'"):
        robot.inverse_dynamics(q, qd, qdd, f_ext={"tool": np.zeros((1, 6))})


# -- the Pinocchio reference: pinocchio.appendModel over the same subsystems -----------------------
def _pinocchio_assembly(pin, robot, urdfs):
    """``robot`` rebuilt with pinocchio.appendModel: each subsystem's model parsed by Pinocchio
    from its URDF (``urdfs[name]``) or else converted from its screwdyn Model, names prefixed
    ``name/``. Universe inertias are kept: appendModel adds the inertia of the links a part welds
    to its base to the parent's body it is mounted on (the root's stays with the world)."""
    model = pin.Model()
    for s in robot.subsystems:
        part = pin.buildModelFromUrdf(urdfs[s.name]) if s.name in urdfs else _pinocchio_model(
            pin, s.model)
        for i in range(1, part.njoints):
            part.names[i] = f"{s.name}/{part.names[i]}"
        for i, frame in enumerate(part.frames):
            frame.name = f"{s.name}/{frame.name}"
            part.frames[i] = frame
        frame = 0 if s.parent is None else model.getFrameId(f"{s.parent}/{s.link}", pin.BODY)
        model = pin.appendModel(model, part, frame, pin.SE3(s.placement))
    return model


def _pinocchio_model(pin, model):
    """A screwdyn Model built in code, as a Pinocchio model (joints, inertias, link frames)."""
    out, joints = pin.Model(), []
    mass, com, inertia = model.base_inertia
    out.inertias[0] = pin.Inertia(mass, np.array(com), np.reshape(inertia, (3, 3)))
    for b in model.bodies:
        kind = (pin.JointModelPrismaticUnaligned if isinstance(b.joint_model, sd.model.joints.Prismatic)
                else pin.JointModelRevoluteUnaligned)
        joints.append(out.addJoint(0 if b.parent < 0 else joints[b.parent],
                                   kind(np.array(b.joint_model.axis)),
                                   pin.SE3(np.reshape(b.rotation, (3, 3)), np.array(b.translation)),
                                   b.joint))
        out.appendBodyToJoint(joints[-1], pin.Inertia(b.mass, np.array(b.com),
                                                      np.reshape(b.inertia, (3, 3))),
                              pin.SE3.Identity())
    for link in model.links:
        placement = pin.SE3(np.reshape(link.rotation, (3, 3)), np.array(link.translation))
        out.addFrame(pin.Frame(link.name, 0 if link.body < 0 else joints[link.body], placement,
                               pin.FrameType.BODY))
    return out


def _compare_with_pinocchio(pin, robot, reference, seeds, flat=None):
    flat = flat or robot.to_model()
    data = reference.createData()
    for seed in seeds:
        q, qd, qdd = random_state(flat, seed)
        qp, vp, ap, order = _pinocchio_state(pin, reference, flat, q, qd, qdd)
        tau = pin.rnea(reference, data, qp, vp, ap)[order]
        assert _rel(robot.inverse_dynamics(q, qd, qdd), tau) < 1e-9
        if not any(s.black_box for s in robot.subsystems):
            M = pin.crba(reference, data, qp)
            M = np.triu(M) + np.triu(M, 1).T
            assert _rel(robot.mass_matrix(q), M[np.ix_(order, order)]) < 1e-9


def _pinocchio_state(pin, reference, flat, q, qd, qdd):
    """Pinocchio's q, v, a of a screwdyn state, joints matched by name (continuous joints take
    cos, sin in Pinocchio), and the Pinocchio index of each screwdyn velocity."""
    qp, vp, ap = pin.neutral(reference), np.zeros(reference.nv), np.zeros(reference.nv)
    order = np.zeros(flat.nv, dtype=int)
    for b, qs, vs in zip(flat.bodies, flat.q_slices, flat.v_slices):
        joint = reference.joints[reference.getJointId(b.joint)]
        angle = joint.nq == 2 and b.nq == 1
        qp[joint.idx_q:joint.idx_q + joint.nq] = [np.cos(q[qs][0]), np.sin(q[qs][0])] if angle \
            else q[qs]
        order[vs] = np.arange(joint.idx_v, joint.idx_v + joint.nv)
        vp[order[vs]], ap[order[vs]] = qd[vs], qdd[vs]
    return qp, vp, ap, order
