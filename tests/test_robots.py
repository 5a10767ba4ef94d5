"""The bundled robots: they load with the expected joints, their dynamics are consistent, and the
stripped URDF copies agree with Pinocchio loading the original example-robot-data files.
(The DH robots are checked against the Robotics Toolbox in test_dh.py.)"""
import math
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.model import robots

PANDA_ARM = tuple(f"panda_joint{i}" for i in range(1, 8))
EXPECTED = {
    "puma560": tuple(f"joint{i}" for i in range(1, 7)),
    "stanford": tuple(f"joint{i}" for i in range(1, 7)),
    "panda": PANDA_ARM + ("panda_finger_joint1", "panda_finger_joint2"),
    "ur5": ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint",
            "wrist_2_joint", "wrist_3_joint"),
    "dual_arm": ("torso_yaw",) + tuple("left_" + j for j in PANDA_ARM)
                + tuple("right_" + j for j in PANDA_ARM),
}
ORIGINALS = {"panda": "panda_description/urdf/panda.urdf",
             "ur5": "ur_description/urdf/ur5_robot.urdf"}


def test_names():
    assert set(robots.names()) == set(EXPECTED)
    with pytest.raises(ValueError, match="no bundled robot 'r2d2'; bundled: puma560"):
        robots.load("r2d2")


@pytest.mark.parametrize("name", EXPECTED)
def test_robot_loads_and_is_consistent(name):
    model = robots.load(name)
    assert robots.load(name) is model  # cached, immutable
    assert model.joint_names == EXPECTED[name]
    assert model.nq == model.nv == len(EXPECTED[name])
    assert model.total_mass > 1
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.5, 1.5, (4, model.nq))
    qd, qdd = rng.normal(size=(2, 4, model.nv))
    M = sd.mass_matrix(model, q)
    assert np.allclose(M, np.swapaxes(M, -1, -2), rtol=0, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(M) > 1e-6)
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    assert np.allclose(sd.forward_dynamics(model, q, qd, tau), qdd, rtol=0, atol=1e-8)
    assert np.allclose(np.einsum("kij,kj->ki", M, qdd) + sd.bias_forces(model, q, qd), tau,
                       rtol=0, atol=1e-9)


def test_dh_robots_carry_their_table():
    for name, prismatic in (("puma560", ()), ("stanford", (2,))):
        model = robots.load(name)
        assert model.dh_convention == "standard" and len(model.dh) == 6
        assert [i for i, b in enumerate(model.bodies) if b.joint_model.type_name == "prismatic"] == list(prismatic)
        assert np.all(model.armature > 0) and np.all(model.damping == 0)
    for name in ("panda", "ur5", "dual_arm"):
        assert robots.load(name).dh == ()


def test_dual_arm_is_two_pandas_on_a_torso():
    """Each arm's link poses are the bundled panda's, moved by the torso yaw and the mount."""
    dual, panda = robots.load("dual_arm"), robots.load("panda")
    assert [b.parent for b in dual.bodies][:2] == [-1, 0]
    assert dual.bodies[dual.joint_index("right_panda_joint1")].parent == 0  # a branch
    rng = np.random.default_rng(1)
    yaw, left, right = rng.uniform(-2, 2), rng.uniform(-2, 2, 7), rng.uniform(-2, 2, 7)
    T = sd.forward_kinematics(dual, np.concatenate([[yaw], left, right]))
    for prefix, side, arm in (("left_", 1, left), ("right_", -1, right)):
        T_arm = sd.forward_kinematics(panda, np.concatenate([arm, [0.0, 0.0]]))
        T_mount = _rot_z(yaw) @ _translate(0, 0, 0.5) @ _translate(0, side * 0.2, 0.6) \
            @ _rot_x(-side * math.pi / 2)
        for i, link in enumerate(panda.link_names):
            assert np.allclose(T[dual.link_index(prefix + link)], T_mount @ T_arm[i], atol=1e-12)


@pytest.fixture(scope="module")
def pin():
    return pytest.importorskip("pinocchio")


def _original(relative):
    """An example-robot-data URDF, or skip."""
    try:
        root = metadata.distribution("example-robot-data").locate_file(
            "cmeel.prefix/share/example-robot-data/robots")
    except metadata.PackageNotFoundError:
        pytest.skip("example-robot-data is not installed")
    path = Path(root) / relative
    if not path.exists():
        pytest.skip(f"{path} not found")
    return path


@pytest.mark.parametrize("name", ORIGINALS)
def test_stripped_urdf_matches_pinocchio_on_the_original(pin, name):
    reference = pin.buildModelFromUrdf(str(_original(ORIGINALS[name])))
    _compare_with_pinocchio(pin, robots.load(name), reference)


def test_dual_arm_matches_pinocchio(pin):
    reference = pin.buildModelFromXML(robots._dual_arm_urdf())
    _compare_with_pinocchio(pin, robots.load("dual_arm"), reference)


def _compare_with_pinocchio(pin, model, reference):
    """Inverse dynamics, mass matrix and every link frame at random states (joints matched by
    name); Pinocchio's gravity is (0, 0, -9.81), our default."""
    data = reference.createData()
    assert sorted(reference.names[1:]) == sorted(model.joint_names)
    order = [reference.joints[reference.getJointId(j)].idx_v for j in model.joint_names]
    rng = np.random.default_rng(2)
    for _ in range(3):
        q, (qd, qdd) = rng.uniform(-1.5, 1.5, model.nq), rng.normal(size=(2, model.nv))
        q_pin, qd_pin, qdd_pin = (np.zeros(model.nv) for _ in range(3))
        q_pin[order], qd_pin[order], qdd_pin[order] = q, qd, qdd
        tau_pin = pin.rnea(reference, data, q_pin, qd_pin, qdd_pin)[order]
        M_pin = pin.crba(reference, data, q_pin)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        assert np.allclose(sd.inverse_dynamics(model, q, qd, qdd), tau_pin, rtol=1e-10,
                           atol=1e-10)
        assert np.allclose(sd.mass_matrix(model, q), M_pin[np.ix_(order, order)], rtol=1e-10,
                           atol=1e-12)
        pin.framesForwardKinematics(reference, data, q_pin)
        T = sd.forward_kinematics(model, q)
        for i, link in enumerate(model.link_names):
            frame = data.oMf[reference.getFrameId(link, pin.BODY)].homogeneous
            assert np.allclose(T[i], frame, atol=1e-12), link


def _rot_z(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def _rot_x(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])


def _translate(x, y, z):
    T = np.eye(4)
    T[:3, 3] = (x, y, z)
    return T
