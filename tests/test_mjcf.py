"""MJCF models through MuJoCo's compiler: q and v are MuJoCo's qpos and qvel; inverse dynamics,
mass matrix, forward dynamics and body poses equal MuJoCo's on the models pip packages bundle."""
import glob
import os
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.constraints import Coupling, FixedTendon
from screwdyn.model import joints as J

mujoco = pytest.importorskip("mujoco")


def _bundled_models():
    """The MJCF files of dm_control's suite and locomotion walkers and gymnasium's MuJoCo
    environments, as installed (those MuJoCo compiles)."""
    site = os.path.dirname(os.path.dirname(mujoco.__file__))
    patterns = ("dm_control/suite/*.xml", "gymnasium/envs/mujoco/assets/*.xml",
                "dm_control/locomotion/walkers/assets/**/*.xml")
    found = []
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(site, pattern), recursive=True)):
            try:
                m = mujoco.MjModel.from_xml_path(path)
            except ValueError:
                continue  # assets only (common.xml), or includes a file that is not shipped
            if m.nv:
                found.append(path)
    return found


MODELS = _bundled_models()


def _relative(a, b):
    return np.max(np.abs(a - b), initial=0.0) / max(1.0, np.max(np.abs(b), initial=0.0))


def _mujoco_dynamics(m, qpos, qvel, qacc):
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.qacc[:] = qpos, qvel, qacc
    mujoco.mj_fwdPosition(m, d)
    mujoco.mj_fwdVelocity(m, d)
    rne = np.zeros(m.nv)
    mujoco.mj_rne(m, d, 1, rne)
    M = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, M)
    return d, rne, M


def _load(path, **options):
    """The model with its fixed tendons and equalities; one with a tendon screwdyn does not
    model (spatial, limited: tests/test_mjcf_constraints.py) is refused, naming it, and loads
    without it under unsupported="ignore"."""
    try:
        return sd.load_mjcf(path, **options)
    except sd.ModelError as e:
        assert "<tendon name=" in str(e) and "not modelled" in str(e)
        return sd.load_mjcf(path, unsupported="ignore", **options)


@pytest.mark.skipif(not MODELS, reason="no MJCF models installed (dm_control, gymnasium)")
@pytest.mark.parametrize("path", MODELS, ids=[os.path.relpath(p, os.path.dirname(p) + "/..")
                                              for p in MODELS])
def test_bundled_mjcf_models_equal_mujoco(path):
    """With armature off, inverse dynamics equals mj_rne (with acceleration); with MuJoCo's
    armature, the mass matrix equals mj_fullM; every body's pose equals xpos, xmat; all at
    MuJoCo's own qpos, qvel, qacc, to 1e-9 relative."""
    m = mujoco.MjModel.from_xml_path(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        bare = _load(path, armature=False)
        model = _load(path)
    assert (model.nq, model.nv) == (m.nq, m.nv)
    rng = np.random.default_rng(0)
    for _ in range(3):
        qpos = sd.random_configuration(model, rng)
        qvel, qacc = rng.normal(size=m.nv), rng.normal(size=m.nv)
        d, rne, M = _mujoco_dynamics(m, qpos, qvel, qacc)
        assert _relative(sd.inverse_dynamics(bare, d.qpos, d.qvel, d.qacc), rne) < 1e-9
        assert _relative(sd.mass_matrix(model, d.qpos), M) < 1e-9
        T = sd.forward_kinematics(model, d.qpos)
        for i in range(1, m.nbody):
            name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) or f"body{i}"
            k = model.link_index(name)
            assert np.abs(T[k, :3, 3] - d.xpos[i]).max() < 1e-9
            assert np.abs(T[k, :3, :3] - d.xmat[i].reshape(3, 3)).max() < 1e-9
    _assert_starts_as_mujoco(model, m)


def _assert_starts_as_mujoco(model, m):
    """model.q0 is MuJoCo's qpos0 and puts every body where MjData starts it (mj_forward at
    qpos0: xpos, xquat, to 1e-9); the keyframes are key_qpos by name (unnamed: key{k})."""
    assert model.q0.shape == (m.nq,) and np.array_equal(model.q0, m.qpos0)
    assert not model.q0.flags.writeable
    d = mujoco.MjData(m)  # MuJoCo starts at qpos0
    assert np.array_equal(d.qpos, m.qpos0)
    mujoco.mj_forward(m, d)
    T = np.asarray(sd.forward_kinematics(model, model.q0))
    for i in range(1, m.nbody):
        k = model.link_index(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i) or f"body{i}")
        assert np.abs(T[k, :3, 3] - d.xpos[i]).max() < 1e-9
        R = np.zeros(9)
        mujoco.mju_quat2Mat(R, d.xquat[i])
        assert np.abs(T[k, :3, :3] - R.reshape(3, 3)).max() < 1e-9
    expected = {"qpos0": m.qpos0}
    for k in range(m.nkey):
        expected[mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_KEY, k) or f"key{k}"] = m.key_qpos[k]
    configurations = model.reference_configurations
    assert sorted(configurations) == sorted(expected)
    for name, qpos in expected.items():
        assert np.array_equal(configurations[name], qpos), name


def test_keyframes_are_named_configurations():
    """<key> elements (one named, one not) are reference configurations by name; q0 stays
    qpos0; the mapping and its arrays are read-only; a hinge's ref and a free body's pose are
    qpos0."""
    xml = JOINTS.replace("</worldbody>", """</worldbody>
  <keyframe>
    <key name="crouch" qpos="0 0 0.5 1 0 0 0  0.7071068 0 0.7071068 0  0.3 -0.2 0.1"/>
    <key qpos="1 2 3 0 1 0 0  1 0 0 0  -0.5 0.5 0"/>
  </keyframe>""")
    m = mujoco.MjModel.from_xml_string(xml)
    assert m.nkey == 2
    model = sd.from_mujoco(m)
    _assert_starts_as_mujoco(model, m)
    configurations = model.reference_configurations
    assert list(configurations) == ["qpos0", "crouch", "key1"]
    assert np.array_equal(configurations["crouch"], m.key_qpos[0])
    assert np.array_equal(configurations["key1"], m.key_qpos[1])
    assert configurations["key1"][:3].tolist() == [1.0, 2.0, 3.0]
    # the file's values: the torso's pos and (normalised) quat, hinge_a's and the slide's ref
    assert np.allclose(model.q0[:3], [0.1, 0.2, 1.0], atol=0, rtol=0)
    quat = np.array([0.9, 0.1, 0.3, -0.2])
    assert np.abs(model.q0[3:7] - quat / np.linalg.norm(quat)).max() < 1e-12
    assert model.q0[11] == 0.4 and model.q0[12] == 0.0 and model.q0[13] == 0.05
    with pytest.raises(TypeError):
        configurations["crouch"] = model.neutral
    with pytest.raises(ValueError):
        configurations["crouch"][0] = 1.0
    # at a keyframe, the bodies are where MuJoCo puts them
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    T = np.asarray(sd.forward_kinematics(model, configurations["crouch"]))
    for i in range(1, m.nbody):
        k = model.link_index(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, i))
        assert np.abs(T[k, :3, 3] - d.xpos[i]).max() < 1e-9
        assert np.abs(T[k, :3, :3] - d.xmat[i].reshape(3, 3)).max() < 1e-9


def test_hinge_with_ref_starts_at_ref():
    """A hinge with ref (a fixed base): q0 is ref, and the body's pose at q0 is the XML's
    (pos, euler), MuJoCo's at qpos0; neutral (q = 0) turns it by -ref."""
    xml = """<mujoco><compiler angle="radian"/><worldbody>
      <body name="arm" pos="0.1 -0.2 0.3" euler="0.2 -0.1 0.4">
        <joint name="elbow" axis="0 1 0" ref="0.7" pos="0.05 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02"/>
      </body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    model = sd.from_mujoco(m)
    assert model.q0.tolist() == [0.7] and model.neutral.tolist() == [0.0]
    _assert_starts_as_mujoco(model, m)
    k = model.link_index("arm")
    T = np.asarray(sd.forward_kinematics(model, model.q0))[k]
    quat, R = np.zeros(4), np.zeros(9)
    mujoco.mju_euler2Quat(quat, np.array([0.2, -0.1, 0.4]), "xyz")  # MJCF's default eulerseq
    mujoco.mju_quat2Mat(R, quat)
    assert np.abs(T[:3, 3] - [0.1, -0.2, 0.3]).max() < 1e-12
    assert np.abs(T[:3, :3] - R.reshape(3, 3)).max() < 1e-12
    T0 = np.asarray(sd.forward_kinematics(model, model.neutral))[k]
    assert np.abs(T0[:3, :3] - T[:3, :3]).max() > 0.1  # q = 0 is another pose


def test_unsupported_ignore_keeps_the_layout_and_qpos0(tmp_path):
    """Dropping a tendon leaves q as qpos: q0 is qpos0."""
    xml = JOINTS.replace("</worldbody>", "</worldbody><tendon><fixed name='t' "
                         "armature='0.1'><joint joint='hinge_a' coef='1'/></fixed></tendon>")
    m = mujoco.MjModel.from_xml_string(xml)
    path = tmp_path / "heavy.xml"
    path.write_text(xml)
    model = sd.load_mjcf(path, unsupported="ignore")
    assert model.tendons == ()
    _assert_starts_as_mujoco(model, m)


JOINTS = """<mujoco model="joints">
  <compiler angle="radian"/>
  <option gravity="0.3 -0.2 -9.7"/>
  <default><joint armature="0.01"/><geom density="800"/></default>
  <worldbody>
    <body name="torso" pos="0.1 0.2 1.0" quat="0.9 0.1 0.3 -0.2">
      <freejoint name="root"/>
      <geom type="box" size="0.2 0.1 0.05"/>
      <body name="upper" pos="0.2 0 0" euler="0.1 0.2 0.3">
        <joint name="ball" type="ball" pos="0 0.05 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <body name="lower" pos="0.3 0 0">
          <joint name="hinge_a" type="hinge" axis="0 1 0" pos="0.02 0 0.01" ref="0.4"
                 range="-1 1" limited="true"/>
          <joint name="hinge_b" type="hinge" axis="1 0 1" pos="0 0.03 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.25" size="0.025"/>
          <body name="slider" pos="0 0 -0.25">
            <joint name="slide" type="slide" axis="0 0.3 1" ref="0.05" range="-0.1 0.2"
                   limited="true"/>
            <geom type="sphere" size="0.04"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_every_mujoco_joint_type_and_reference(tmp_path):
    """free, ball, two hinges on one body (with anchors off the body's origin and a reference
    angle), a slide with a reference: q = qpos, v = qvel; ID, M, FD and poses equal MuJoCo's;
    the model's gravity is opt.gravity; limits from range."""
    path = tmp_path / "joints.xml"
    path.write_text(JOINTS)
    m = mujoco.MjModel.from_xml_path(str(path))
    model = sd.load_mjcf(path)
    bare = sd.load_mjcf(path, armature=False)
    assert model.gravity == (0.3, -0.2, -9.7)
    assert model.joint_names == ("root", "ball", "hinge_a", "hinge_b", "slide")
    assert [type(j) for j in model.joints] == [J.MuJoCoFree, J.Spherical, J.Revolute, J.Revolute,
                                               J.Prismatic]
    assert model.lower_position_limit[11] == -1 and model.upper_position_limit[13] == 0.2
    assert model.armature.tolist() == m.dof_armature.tolist() and model.armature[-1] == 0.01
    rng = np.random.default_rng(1)
    for _ in range(3):
        qpos = sd.random_configuration(model, rng)
        qvel, qacc = rng.normal(size=m.nv), rng.normal(size=m.nv)
        d, rne, M = _mujoco_dynamics(m, qpos, qvel, qacc)
        assert _relative(sd.inverse_dynamics(bare, qpos, qvel, qacc), rne) < 1e-10
        assert _relative(sd.mass_matrix(model, qpos), M) < 1e-10
        for algebra in ("cga", "dq"):
            assert _relative(sd.inverse_dynamics(bare, qpos, qvel, qacc, algebra=algebra),
                             rne) < 1e-10
        # forward dynamics is MuJoCo's qacc with no constraint or passive force
        m.opt.disableflags |= (mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
                               | mujoco.mjtDisableBit.mjDSBL_PASSIVE
                               if hasattr(mujoco.mjtDisableBit, "mjDSBL_PASSIVE") else
                               mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
                               | mujoco.mjtDisableBit.mjDSBL_SPRING
                               | mujoco.mjtDisableBit.mjDSBL_DAMPER)
        d.qfrc_applied[:] = tau = rng.normal(size=m.nv)
        mujoco.mj_forward(m, d)
        assert _relative(sd.forward_dynamics(model, qpos, qvel, tau), d.qacc) < 1e-9
    # integrating q as MuJoCo does: data.qpos after mj_integratePos
    qpos = sd.random_configuration(model, rng)
    qvel = rng.normal(size=m.nv)
    moved = qpos.copy()
    mujoco.mj_integratePos(m, moved, qvel, 0.01)
    assert _relative(sd.integrate(model, qpos, 0.01 * qvel), moved) < 1e-12


def test_mjcf_simulates_like_mujoco_without_contact():
    """A passive rollout from MuJoCo's qpos and qvel (no contact, no constraint) with RK4 at
    dt = 1 ms stays with MuJoCo's RK4 for 0.5 s."""
    xml = JOINTS.replace('<freejoint name="root"/>', "")
    m = mujoco.MjModel.from_xml_string(xml.replace("<option", '<option integrator="RK4"'
                                                   ' timestep="0.001"'))
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    model = sd.from_mujoco(m)
    d = mujoco.MjData(m)
    d.qpos[:] = sd.random_configuration(model, 3)
    d.qvel[:] = np.random.default_rng(3).normal(size=m.nv)
    traj = sd.simulate(model, d.qpos.copy(), d.qvel.copy(), None, t_final=0.5, dt=1e-3)
    for _ in range(500):
        mujoco.mj_step(m, d)
    assert np.abs(traj.q[-1] - d.qpos).max() < 1e-6


def test_from_mujoco_model_object_and_bad_files(tmp_path):
    m = mujoco.MjModel.from_xml_string(JOINTS)
    assert sd.from_mujoco(m).nv == m.nv
    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><body><joint type='hinge'/><geom size='x'/></body>"
                   "</worldbody></mujoco>")
    with pytest.raises(sd.ModelError, match="bad.xml: MuJoCo cannot compile it"):
        sd.load_mjcf(bad)
    with pytest.raises(sd.ModelError, match="cannot read MJCF file"):
        sd.load_mjcf(tmp_path / "missing.xml")
    tendon = tmp_path / "tendon.xml"
    tendon.write_text(JOINTS.replace("</worldbody>", "</worldbody><tendon><fixed name='t'>"
                                     "<joint joint='hinge_a' coef='1'/><joint joint='hinge_b' "
                                     "coef='-1'/></fixed></tendon><equality><joint "
                                     "joint1='hinge_a' joint2='hinge_b'/></equality>"))
    model = sd.load_mjcf(tendon)  # a fixed tendon and a joint equality are modelled
    assert model.nv == m.nv
    assert model.tendons == (FixedTendon("t", ("hinge_a", "hinge_b"), (1.0, -1.0)),)
    assert model.constraints == (Coupling("hinge_a", "hinge_b", (0.0, 1.0, 0.0, 0.0, 0.0),
                                          (0.4, 0.0), name="equality0", refsafe=True),)
    limited = tmp_path / "limited.xml"  # its length limits and friction are modelled too
    limited.write_text(tendon.read_text().replace("<fixed name='t'>", "<fixed name='t' "
                                                  "limited='true' range='-1 1' "
                                                  "frictionloss='0.1'>"))
    assert sd.load_mjcf(limited).tendons == (FixedTendon(
        "t", ("hinge_a", "hinge_b"), (1.0, -1.0), lower=-1.0, upper=1.0, frictionloss=0.1),)
    heavy = tmp_path / "heavy.xml"
    heavy.write_text(tendon.read_text().replace("<fixed name='t'>", "<fixed name='t' "
                                                "armature='0.1'>"))
    with pytest.raises(sd.ModelError, match='MJCF <tendon name="t">: its armature.*not '
                                            'modelled.*unsupported="ignore"'):
        sd.load_mjcf(heavy)
    ignored = sd.load_mjcf(heavy, unsupported="ignore")
    assert ignored.nv == m.nv and ignored.tendons == ()
    assert ignored.constraints == model.constraints  # the joint equality does not need t


def test_gravity_disabled_in_the_file_is_zero_gravity():
    xml = JOINTS.replace('<option gravity="0.3 -0.2 -9.7"/>',
                         '<option gravity="0 0 -9.81"><flag gravity="disable"/></option>')
    assert sd.from_mujoco(mujoco.MjModel.from_xml_string(xml)).gravity == (0.0, 0.0, 0.0)


def test_a_medium_is_said_not_to_act():
    """A file with a medium (<option density> or viscosity: MuJoCo's fluid forces) loads with a
    UserWarning naming the file and what is left out; without one, no warning."""
    for option in ('density="1.2"', 'viscosity="0.1"', 'density="1000" viscosity="0.001"'):
        xml = JOINTS.replace('<option gravity="0.3 -0.2 -9.7"/>',
                             f'<option gravity="0.3 -0.2 -9.7" {option}/>')
        with pytest.warns(UserWarning, match="in.xml: MuJoCo's fluid forces .* are not "
                                             "modelled: screwdyn's dynamics and simulations "
                                             "are in vacuum"):
            sd.from_mujoco(mujoco.MjModel.from_xml_string(xml), source="in.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sd.from_mujoco(mujoco.MjModel.from_xml_string(JOINTS))


_SPRUNG = [p for p in MODELS if os.path.basename(p) in ("cheetah.xml", "humanoid.xml")]


@pytest.mark.skipif(not _SPRUNG, reason="dm_control and gymnasium are not installed")
@pytest.mark.parametrize("path", _SPRUNG, ids=[os.path.relpath(p, os.path.dirname(
    os.path.dirname(os.path.dirname(p)))) for p in _SPRUNG])
def test_joint_springs_simulate_like_mujocos(path):
    """joint_springs=True reads MuJoCo's joint springs (stiffness, springref: dm_control's
    cheetah has 6 of 60 to 240 N m/rad, the humanoids 14 to 19): a passive rollout from a
    random state (no contact, limits or actuation), RK4 at 1 ms, equals mj_step's RK4 after
    0.5 s to 1e-9 (rad, m), with MuJoCo's damping too (joint_damping=True), and its energy
    balance holds with the springs' elastic energy; without them it is off by 0.1 or more.
    By default the tendons are the file's, and so with springs disabled in the file."""
    m = mujoco.MjModel.from_xml_path(path)
    bit = mujoco.mjtDisableBit
    m.opt.disableflags |= bit.mjDSBL_CONTACT | bit.mjDSBL_LIMIT | bit.mjDSBL_ACTUATION
    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_RK4, 1e-3
    stiff = np.flatnonzero(m.jnt_stiffness)
    assert len(stiff) >= 6
    rng = np.random.default_rng(0)
    qpos = m.qpos0 + 0.1 * rng.normal(size=m.nq)
    qvel = rng.normal(size=m.nv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        files = sd.from_mujoco(m).tendons
        model = sd.from_mujoco(m, joint_springs=True, joint_damping=True)
    assert len(files) == m.ntendon and model.tendons[:m.ntendon] == files
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in stiff]
    springs = model.tendons[m.ntendon:]
    assert [t.name for t in springs] == [f"spring:{n}" for n in names]
    for t, j in zip(springs, stiff):
        assert (t.joints, t.coefficients, t.stiffness, t.spring_length) == \
            ((names[list(stiff).index(j)],), (1.0,), m.jnt_stiffness[j],
             m.qpos_spring[m.jnt_qposadr[j]])
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos, qvel
    mujoco.mj_normalizeQuat(m, d.qpos)  # the free joint's quaternion
    qpos = d.qpos.copy()
    for _ in range(500):
        mujoco.mj_step(m, d)
    traj = sd.simulate(model, qpos, qvel, None, t_final=0.5, dt=1e-3)
    assert np.abs(traj.q[-1] - d.qpos).max() < 1e-9
    assert np.max(traj.energy_drift()) < 1e-6 * np.max(traj.energy_scale())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        bare = sd.simulate(sd.from_mujoco(m, joint_damping=True), qpos, qvel, None,
                           t_final=0.5, dt=1e-3)
    assert np.abs(bare.q[-1] - d.qpos).max() > 0.1
    m.opt.disableflags |= bit.mjDSBL_SPRING
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        assert len(sd.from_mujoco(m, joint_springs=True).tendons) == m.ntendon


@pytest.mark.skipif(not _SPRUNG, reason="dm_control and gymnasium are not installed")
@pytest.mark.parametrize("path", _SPRUNG, ids=[os.path.relpath(p, os.path.dirname(
    os.path.dirname(os.path.dirname(p)))) for p in _SPRUNG])
def test_semi_implicit_euler_is_mujocos_euler_with_its_damping(path):
    """MuJoCo's default integrator, Euler, integrates joint damping implicitly, and so does
    semi-implicit Euler: the passive rollout of test_joint_springs_simulate_like_mujocos at
    1 ms (damping, springs) equals mj_step's Euler to 1e-12 (rad, m, rad/s, m/s) after
    0.5 s; with explicit damping it was off by 2e-4 to 7e-4. dm_control's manipulator
    (its fingers' damping 134 times their inertia over 1 ms) runs 0.5 s at 1 ms, its
    velocities bounded; with explicit damping it diverged at step 4."""
    m = mujoco.MjModel.from_xml_path(path)
    bit = mujoco.mjtDisableBit
    m.opt.disableflags |= bit.mjDSBL_CONTACT | bit.mjDSBL_LIMIT | bit.mjDSBL_ACTUATION
    m.opt.integrator, m.opt.timestep = mujoco.mjtIntegrator.mjINT_EULER, 1e-3
    rng = np.random.default_rng(0)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = m.qpos0 + 0.1 * rng.normal(size=m.nq), rng.normal(size=m.nv)
    mujoco.mj_normalizeQuat(m, d.qpos)
    qpos, qvel = d.qpos.copy(), d.qvel.copy()
    for _ in range(500):
        mujoco.mj_step(m, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        model = sd.from_mujoco(m, joint_springs=True, joint_damping=True)
    traj = sd.simulate(model, qpos, qvel, None, t_final=0.5, dt=1e-3,
                       integrator="semi_implicit_euler")
    assert np.abs(traj.q[-1] - d.qpos).max() < 1e-12
    assert np.abs(traj.qd[-1] - d.qvel).max() < 1e-12
    manipulator = [p for p in MODELS if p.endswith("suite/manipulator.xml")]
    if manipulator:
        arm = sd.load_mjcf(manipulator[0], joint_damping=True)
        M = sd.mass_matrix(arm, arm.q0)
        assert (1e-3 * arm.damping / np.diag(M)).max() > 100
        traj = sd.simulate(arm, arm.q0, None, None, t_final=0.5, dt=1e-3,
                           integrator="semi_implicit_euler")
        assert np.abs(traj.qd).max() < 10.0


def test_a_ball_joints_spring_is_refused():
    """A ball joint's stiffness (a spring towards springref's orientation) is not modelled:
    with joint_springs=True, a ModelError names the joint; unsupported="ignore" drops it."""
    xml = """<mujoco><worldbody><body><joint name="shoulder" type="ball" stiffness="2"/>
      <geom size="0.1" pos="0 0 -0.3" mass="1"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(sd.ModelError, match=r'<joint name="shoulder">: its stiffness \(2\) on '
                                            r'a ball joint .* not modelled.*unsupported'):
        sd.from_mujoco(m, joint_springs=True)
    assert sd.from_mujoco(m, joint_springs=True, unsupported="ignore").tendons == ()
