"""Modular composition (the branched-robot paper): assemblies against their flat model and against
Pinocchio's appendModel, W_i per subsystem (in this process, in separate processes, in Ray),
black boxes (measured, logged, callable, nested, parent), reconfiguration, splitting a model,
bad input."""
from dataclasses import replace

import numpy as np
import pytest

import screwdyn as sd
from conftest import erd_urdf, random_state, random_tree
from screwdyn.algebra import dualquat as dq
from screwdyn.composition import Assembly, BlackBox, ConnectionState, WrenchLog

import branched_24dof as branched  # noqa: E402  (the examples, see conftest)
import mobile_manipulator_30dof as mobile  # noqa: E402
import reconfigurable_modules as modules  # noqa: E402
from pinocchio_reference import PinocchioState, pinocchio_assembly  # noqa: E402

G = 9.81
NO_BASE = (0.0, (0.0, 0.0, 0.0), (0.0,) * 9)  # a Model.base_inertia: nothing welded to the base


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


@pytest.mark.parametrize("algebra", ["dq", "spatial", "cga"])
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
    assert _rel(tau, expected) < 1e-12


def test_24dof_matches_pinocchio_append_model(robot24):
    pin = pytest.importorskip("pinocchio")
    ur5 = erd_urdf("ur_description/urdf/ur5_robot.urdf")
    reference = pinocchio_assembly(pin, robot24, {"left_arm": ur5, "right_arm": ur5})
    _compare_with_pinocchio(pin, robot24, reference, seeds=range(3))


def test_mobile_manipulator_is_30_dof_of_3_subsystems_and_matches_pinocchio(mobile_robot):
    """The PR2 cut at its left shoulder, on a holonomic base; Pinocchio parses the same URDF text
    and appends it to its own base (``mobile.PinocchioRobot``): inverse dynamics and the mass
    matrix at random states."""
    pytest.importorskip("pinocchio")
    assert (mobile_robot.nv, len(mobile_robot.subsystems)) == (30, 3)
    assert [s.model.nv for s in mobile_robot.subsystems] == [3, 14, 13]
    twin = mobile.PinocchioRobot(mobile_robot, erd_urdf)
    pin = twin.pin
    for seed in range(2):
        q, qd, qdd = random_state(mobile_robot.configuration_model, seed)
        assert _rel(mobile_robot.inverse_dynamics(q, qd, qdd), twin.rnea(q, qd, qdd)) < 1e-12
        M = pin.crba(twin.model, twin.data, twin.state.q(q))
        M = (np.triu(M) + np.triu(M, 1).T)[np.ix_(twin.order, twin.order)]
        assert _rel(mobile_robot.mass_matrix(q), M) < 1e-12


PAYLOAD = dict(mass=2.0, com=np.array([0.08, 0.0, 0.01]), inertia=np.diag([0.004, 0.006, 0.005]))


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


def test_callable_black_box_payload_matches_pinocchio():
    """A payload in a UR5's gripper is a black box to screwdyn (a callable wrench, in dual
    quaternions); Pinocchio gets its inertia, appended to the flange like a model without
    joints."""
    pin = pytest.importorskip("pinocchio")
    path = erd_urdf("ur_description/urdf/ur5_robot.urdf")
    robot = Assembly(sd.load_urdf(path), name="arm")
    robot.attach(BlackBox(payload_wrench, name="payload"), parent="arm", link="tool0")
    bare = Assembly(robot["arm"].model, name="arm")
    reference = pinocchio_assembly(pin, bare, {"arm": path})
    payload = pin.Model()
    payload.inertias[0] = pin.Inertia(PAYLOAD["mass"], PAYLOAD["com"], PAYLOAD["inertia"])
    reference = pin.appendModel(reference, payload, reference.getFrameId("arm/tool0", pin.BODY),
                                pin.SE3.Identity())
    _compare_with_pinocchio(pin, robot, reference, seeds=range(3), flat=bare.to_model())


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
    _compare_with_pinocchio(pin, robot, pinocchio_assembly(pin, robot, {"arm": path}),
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
    moving.attach(BlackBox(payload_wrench, name="payload"), parent="ur5", link="tool0")
    reference = sd.load_urdf(text.replace("</robot>", _payload_urdf(PAYLOAD)))
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


# -- W_i: every subsystem on its own ---------------------------------------------------------------
def _compose_in_public(robot, q, qd, qdd, algebra="dq"):
    """Whole-body torques from every subsystem's W_i called on its own, in the public layout: the
    two sweeps of the paper with only connection-point arrays passed between the calls."""
    functions = {s.name: robot.function(s.name, algebra) for s in robot.models}
    g = robot.connection_points(q, qd, qdd)[robot.subsystems[0].name].twist_derivative
    passes, wrench, tau = {}, {}, {}
    for s in robot.subsystems:
        twist, derivative = (None, g) if s.parent is None else passes[s.parent].motion[s.name]
        passes[s.name] = functions[s.name].forward(q[..., s.q_slice], qd[..., s.v_slice],
                                                   qdd[..., s.v_slice], twist, derivative)
    children = robot.children()
    for s in reversed(robot.subsystems):
        tau[s.name], wrench[s.name] = functions[s.name].backward(
            passes[s.name], {c.name: wrench[c.name] for c in children[s.name]})
    return np.concatenate([tau[s.name] for s in robot.models], axis=-1), wrench


@pytest.mark.parametrize("algebra", ["dq", "spatial", "cga"])
def test_whole_body_torques_are_the_subsystems_w_i_composed_bit_for_bit(robot24, algebra):
    q, qd, qdd = _state(robot24, 20, batch=(7,))
    tau, wrench = _compose_in_public(robot24, q, qd, qdd, algebra)
    assert np.array_equal(tau, robot24.inverse_dynamics(q, qd, qdd, algebra=algebra))
    states = robot24.connection_points(q, qd, qdd, algebra=algebra)
    for name in ("left_gripper", "head/neck", "lidar"):
        assert np.array_equal(wrench[name], states[name].wrench)
    assert _rel(tau, sd.inverse_dynamics(robot24.to_model(), q, qd, qdd)) < 1e-12


def test_w_i_of_one_subsystem_from_the_paper_inputs_only(robot24):
    """The right UR5 alone: its joint state, the twist and twist derivative at its connection
    point and the wrench of its successor (the gripper) give its torques and the wrench it
    passes to the torso, as in the whole robot; it has no other input."""
    q, qd, qdd = _state(robot24, 21, batch=(3,))
    states = robot24.connection_points(q, qd, qdd)
    arm = robot24["right_arm"]
    W = robot24.function("right_arm")
    assert [n for n, _, _ in W.successors] == ["right_gripper"]
    tau, wrench = W(q[..., arm.q_slice], qd[..., arm.v_slice], qdd[..., arm.v_slice],
                    states["right_arm"].twist, states["right_arm"].twist_derivative,
                    {"right_gripper": states["right_gripper"].wrench})
    assert _rel(tau, robot24.inverse_dynamics(q, qd, qdd)[..., arm.v_slice]) < 1e-13
    assert _rel(wrench, states["right_arm"].wrench) < 1e-13
    import pickle

    assert pickle.loads(pickle.dumps(W)).successors == W.successors  # it can travel
    with pytest.raises(ValueError, match="'right_arm'.*no wrench given for its successors "
                                         r"\['right_gripper'\]"):
        W(q[..., arm.q_slice], qd[..., arm.v_slice], qdd[..., arm.v_slice], None,
          states["right_arm"].twist_derivative, {})
    with pytest.raises(sd.ModelError, match="'right_gripper' is a black box: it has no W_i"):
        boxed = robot24.replaced("right_gripper", BlackBox(np.zeros(6), name="tool"))
        boxed.function("right_gripper")


def test_every_subsystem_in_its_own_process_from_serialized_data_bit_for_bit(robot24):
    """One spawned Python process per subsystem with a model, receiving only npz bytes of its
    joint state and of the motion and wrenches at its connection points."""
    from screwdyn.composition.distributed import DistributedAssembly

    q, qd, qdd = _state(robot24, 22, batch=(20,))
    with DistributedAssembly(robot24, "processes") as workers:
        assert len(workers.engine.workers) == len(robot24.models) == 8
        tau = workers.inverse_dynamics(q, qd, qdd)
    assert np.array_equal(tau, robot24.inverse_dynamics(q, qd, qdd))


@pytest.mark.slow  # starting Ray takes 15 to 40 s here
def test_every_subsystem_as_a_ray_actor_bit_for_bit(robot24):
    pytest.importorskip("ray")
    from screwdyn.composition.distributed import DistributedAssembly

    q, qd, qdd = _state(robot24, 23, batch=(20,))
    with DistributedAssembly(robot24, "ray") as workers:
        tau = workers.inverse_dynamics(q, qd, qdd)
    assert np.array_equal(tau, robot24.inverse_dynamics(q, qd, qdd))


# -- black boxes: nested, logged, measured independently -------------------------------------------
def test_a_nested_assembly_replaced_by_one_black_box(robot24):
    """The head (an assembly: neck and camera) becomes one black box at the neck's connection
    point, fed the wrench the real head exerts there: the other 21 torques are exact."""
    q, qd, qdd = _state(robot24, 24, batch=(4,))
    wrench = robot24.connection_points(q, qd, qdd)["head/neck"].wrench
    boxed = robot24.replaced("head", BlackBox(wrench, name="head"))
    assert "head" in boxed.names and "head/neck" not in boxed.names and boxed.nv == 21
    assert boxed["head"].parent == "torso" and "head" not in boxed.groups
    kept = [branched.keep(robot24, boxed, x) for x in (q, qd, qdd)]
    expected = branched.keep(robot24, boxed, robot24.inverse_dynamics(q, qd, qdd))
    assert _rel(boxed.inverse_dynamics(*kept), expected) < 1e-12
    assert "head" in robot24.groups and robot24.nv == 24  # the original is untouched


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_black_box_driven_by_a_force_torque_log_along_a_trajectory(robot24, tmp_path, suffix):
    """The right gripper's wrench on the flange, logged along a trajectory (what a sensor there
    would record) and saved as CSV or npz; the black box reads the log at the states' times."""
    T = np.linspace(0.0, 1.0, 41)
    q, qd, qdd = (np.sin(np.outer(T, np.arange(1, 25) * 0.7) + k) for k in range(3))
    logged = robot24.connection_points(q, qd, qdd)["right_gripper"].wrench
    path = tmp_path / f"flange_ft{suffix}"
    WrenchLog(T, logged, name="flange F/T").save(path)
    boxed = robot24.replaced("right_gripper", BlackBox(WrenchLog.load(path)))
    kept = [branched.keep(robot24, boxed, x) for x in (q, qd, qdd)]
    expected = branched.keep(robot24, boxed, robot24.inverse_dynamics(q, qd, qdd))
    assert _rel(boxed.inverse_dynamics(*kept, time=T), expected) < 1e-12
    between = boxed.inverse_dynamics(*(x[:2] for x in kept), time=[T[0], (T[0] + T[1]) / 2])
    assert np.allclose(WrenchLog.load(path).at((T[0] + T[1]) / 2), (logged[0] + logged[1]) / 2)
    assert between.shape == (2, 21)
    with pytest.raises(ValueError, match=r"black box 'right_gripper' at connection point "
                                         r"'right_arm'/'tool0'.*covers t = 0 to 1 s.*to 1\.5 s"):
        boxed.inverse_dynamics(*kept, time=T * 1.5)  # the log is shorter than the trajectory
    with pytest.raises(ValueError, match="'right_gripper'.*pass the times of the states"):
        boxed.inverse_dynamics(*kept)


def test_wrench_logs_reject_bad_files(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("t,fx,fy,fz\n0,1,2,3\n")
    with pytest.raises(ValueError, match="header must name the columns t, fx, fy, fz, tx"):
        WrenchLog.load(bad)
    with pytest.raises(ValueError, match="times must increase strictly; sample 2"):
        WrenchLog([0.0, 1.0, 1.0], np.zeros((3, 6)))
    with pytest.raises(ValueError, match=r"sample 1 \(t = 1.0\) is not finite"):
        WrenchLog([0.0, 1.0], [[0.0] * 6, [np.nan] + [0.0] * 5])
    with pytest.raises(ValueError, match=r"wrenches must have shape \(2, 6\)"):
        WrenchLog([0.0, 1.0], np.zeros((2, 3)))


def test_black_box_fed_by_an_independent_measurement(robot24):
    """The right gripper's wrench is measured in a separate simulation of the hidden subsystem
    alone: Pinocchio's RNEA of the gripper on a free-flying base that moves as the flange does
    (the flange's pose, twist and acceleration taken from Pinocchio's model of the whole
    robot). Nothing of screwdyn's gripper model enters; the other 21 torques equal Pinocchio's
    whole-robot RNEA."""
    pin = pytest.importorskip("pinocchio")
    from pinocchio_reference import pinocchio_model

    ur5 = erd_urdf("ur_description/urdf/ur5_robot.urdf")
    whole = pinocchio_assembly(pin, robot24, {"left_arm": ur5, "right_arm": ur5})
    data, state = whole.createData(), PinocchioState(pin, whole, robot24.to_model())
    hidden = pin.Model()
    flyer = hidden.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "flyer")
    hidden.addFrame(pin.Frame("point", flyer, pin.SE3.Identity(), pin.FrameType.BODY))
    hidden = pin.appendModel(hidden, pinocchio_model(pin, robot24["right_gripper"].model),
                             hidden.getFrameId("point"), pin.SE3.Identity())
    hidden_data = hidden.createData()
    s = robot24["right_gripper"]
    point = whole.addFrame(pin.Frame("right_gripper_point", whole.frames[whole.getFrameId(
        "right_arm/tool0")].parentJoint, whole.frames[whole.getFrameId(
            "right_arm/tool0")].placement * pin.SE3(s.placement), pin.FrameType.OP_FRAME))
    data = whole.createData()
    boxes, expected, kept_states = [], [], []
    for seed in range(3):
        q, qd, qdd = _state(robot24, 30 + seed)
        qp, vp, ap = state.q(q), state.v(qd), state.v(qdd)
        tau = pin.rnea(whole, data, qp, vp, ap)[state.order]
        pin.forwardKinematics(whole, data, qp, vp, ap)
        pin.updateFramePlacements(whole, data)
        pose = data.oMf[point]
        v = pin.getFrameVelocity(whole, data, point, pin.LOCAL).vector
        a = pin.getFrameAcceleration(whole, data, point, pin.LOCAL).vector
        g_q = np.concatenate([pose.translation, pin.Quaternion(pose.rotation).coeffs(),
                              q[s.q_slice]])  # the gripper's own joints follow their state
        measured = -pin.rnea(hidden, hidden_data, g_q, np.concatenate([v, qd[s.v_slice]]),
                             np.concatenate([a, qdd[s.v_slice]]))[:6]
        boxes.append(measured)
        expected.append(tau)
        kept_states.append((q, qd, qdd))
    boxed = robot24.replaced("right_gripper", BlackBox(np.array(boxes)))
    q, qd, qdd = (np.array(x) for x in zip(*kept_states))
    kept = [branched.keep(robot24, boxed, x) for x in (q, qd, qdd)]
    assert _rel(boxed.inverse_dynamics(*kept), branched.keep(robot24, boxed,
                                                             np.array(expected))) < 1e-12


# -- reconfiguration ----------------------------------------------------------------------------------
def _fingerprint(robot):
    """Everything that defines an assembly's structure."""
    return (robot.name, robot.nq, robot.nv, robot.version,
            [(s.name, s.parent, s.link, s.q_slice, s.v_slice, s.body, s.mount, id(s.item))
             for s in robot.subsystems], robot.groups, {n: [c.name for c in cs]
                                                       for n, cs in robot.children().items()})


def test_attach_touches_no_other_subsystem():
    """Attaching a module adds its record and leaves every other record as it was (the same
    objects): its cost is the module's, whatever the robot's size."""
    robot = modules.chain(50)
    before = {s.name: s for s in robot.subsystems}
    new = robot.attach(modules.MODULE, parent="m49", link="tip", name="extra")
    assert all(robot[name] is record for name, record in before.items())
    assert (new.q_slice, new.v_slice) == (slice(100, 102), slice(100, 102))
    assert modules.agreement(robot) < 1e-12
    calls = modules.attach_calls((10, 200))  # Python calls made by one attach: no loop over
    assert calls[10] == calls[200] < 100  # the robot's modules


def test_detach_reattach_and_replace_on_a_built_robot():
    for what, difference in modules.reconfigure():
        assert difference < 1e-12, what
    robot = modules.chain(6)
    tail = robot.detach("m3")  # m3, m4, m5
    assert robot.names == ("m0", "m1", "m2") and tail.names == ("m3", "m4", "m5")
    assert tail["m3"].parent is None and tail.nv == 6
    robot.attach(tail, parent="m0", link="tip", name="arm")  # a branch of three, now a group
    assert robot.groups["arm"] == ("arm/m3", "arm/m4", "arm/m5")
    assert modules.agreement(robot) < 1e-12
    stiff = replace(modules.MODULE, bodies=tuple(replace(b, armature=0.1)
                                                 for b in modules.MODULE.bodies), _hash_cache=[])
    first = robot["m2"]
    robot.replace("arm/m4", stiff)  # in place; arm/m5 stays attached to its tip
    assert robot["arm/m5"].parent == "arm/m4" and robot["m2"] is first
    assert robot.groups["arm"] == ("arm/m3", "arm/m4", "arm/m5")
    assert modules.agreement(robot) < 1e-12
    assert robot.to_model().armature.tolist().count(0.1) == 2


def test_bad_reconfigurations_name_the_subsystem_and_change_nothing(robot24):
    robot = robot24.copy()
    unchanged = _fingerprint(robot)
    robot.attach(branched.camera(), parent="torso", link="chest", name="rig/camera")
    unchanged = _fingerprint(robot)
    nested = Assembly(branched.neck(), name="neck")  # its second subsystem's name is taken
    nested.attach(branched.camera(), parent="neck", link="head", name="camera")
    bad = [
        (lambda: robot.detach("torso"), r"cannot detach 'torso': it is the root"),
        (lambda: robot.detach("elbow"), r"no subsystem or group named 'elbow'"),
        (lambda: robot.attach(branched.lidar(), parent="torso", link="knee", name="lidar2"),
         r"'lidar2' at connection point 'torso'/'knee'.*no link 'knee'"),
        (lambda: robot.attach(branched.lidar(), parent="lidar", link="rotor", name="lidar"),
         r"'lidar' at connection point 'lidar'/'rotor': a subsystem attached to itself is a "
         r"cycle"),
        (lambda: robot.attach(robot, parent="torso", link="chest", name="again"), "cycle"),
        (lambda: robot.attach(branched.lidar(), parent="torso", link="chest", name="head"),
         r"'head' is already attached"),  # a group's name
        (lambda: robot.attach(nested, parent="torso", link="chest", name="rig"),
         r"'rig/camera' at connection point 'rig/neck'/'head': a subsystem named 'rig/camera' "
         r"is already attached"),
        (lambda: robot.attach(BlackBox(np.full(6, np.nan)), parent="lidar", link="rotor",
                              name="sensor"),
         r"'sensor' at connection point 'lidar'/'rotor': black box wrench is not finite"),
        (lambda: robot.attach(BlackBox(np.zeros((4, 5))), parent="lidar", link="rotor",
                              name="sensor"),
         r"'sensor'.*black box wrench must have shape \(\.\.\., 6\)"),
        (lambda: robot.replace("right_arm", BlackBox(np.zeros(6), name="arm")),
         r"'right_gripper' at connection point 'right_arm'/'tool0': black box 'right_arm' has "
         r"no connection point 'tool0'"),
        (lambda: robot.replace("right_arm", branched.lidar()),
         r"'right_gripper' at connection point 'right_arm'/'tool0': the replacement of "
         r"'right_arm' \(model 'lidar'\) has no link 'tool0'"),
    ]
    for change, message in bad:
        with pytest.raises(sd.ModelError, match=message):
            change()
        assert _fingerprint(robot) == unchanged, message


# -- a flat model cut into subsystems ----------------------------------------------------------------
def test_split_model_is_the_model():
    model = random_tree(5, 9, floating_base=True)
    robot = Assembly.split(model, {"arm": "j0", "hand": "j5"}, name="body")
    assert robot["hand"].parent == "arm" and robot["arm"].parent == "body"
    assert sorted(robot.configuration_model.link_names) == sorted(
        f"{s.name}/{link}" for s in robot.subsystems for link in s.model.link_names)
    order = [model.joint_names.index(j.split("/", 1)[1]) for j in robot.joint_names]
    qi, vi = (np.concatenate([np.arange(model_slices[i].start, model_slices[i].stop)
                              for i in order]) for model_slices in (model.q_slices,
                                                                    model.v_slices))
    q, qd, qdd = random_state(model, 3, batch=(4,))
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    assert _rel(robot.inverse_dynamics(q[..., qi], qd[..., vi], qdd[..., vi]), tau[..., vi]) \
        < 1e-12
    with pytest.raises(sd.ModelError, match="subsystem 'x': model 'random5' has no moving joint "
                                            "'elbow'"):
        Assembly.split(model, {"x": "elbow"})


# -- the Pinocchio reference: pinocchio.appendModel over the same subsystems -----------------------
def _compare_with_pinocchio(pin, robot, reference, seeds, flat=None):
    """Inverse dynamics (and, without black boxes, the mass matrix) against Pinocchio's."""
    flat = flat or robot.to_model()
    data = reference.createData()
    state = PinocchioState(pin, reference, flat)
    for seed in seeds:
        q, qd, qdd = random_state(flat, seed)
        tau = pin.rnea(reference, data, state.q(q), state.v(qd), state.v(qdd))[state.order]
        assert _rel(robot.inverse_dynamics(q, qd, qdd), tau) < 1e-12
        if not any(s.black_box for s in robot.subsystems):
            M = pin.crba(reference, data, state.q(q))
            M = np.triu(M) + np.triu(M, 1).T
            assert _rel(robot.mass_matrix(q), M[np.ix_(state.order, state.order)]) < 1e-12
