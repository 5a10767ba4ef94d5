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
                                          (0.4, 0.0), name="equality0"),)
    limited = tmp_path / "limited.xml"
    limited.write_text(tendon.read_text().replace("<fixed name='t'>", "<fixed name='t' "
                                                  "limited='true' range='-1 1'>"))
    with pytest.raises(sd.ModelError, match='MJCF <tendon name="t">: its length limits.*not '
                                            'modelled.*unsupported="ignore"'):
        sd.load_mjcf(limited)
    ignored = sd.load_mjcf(limited, unsupported="ignore")
    assert ignored.nv == m.nv and ignored.tendons == ()
    assert ignored.constraints == model.constraints  # the joint equality does not need t


def test_gravity_disabled_in_the_file_is_zero_gravity():
    xml = JOINTS.replace('<option gravity="0.3 -0.2 -9.7"/>',
                         '<option gravity="0 0 -9.81"><flag gravity="disable"/></option>')
    assert sd.from_mujoco(mujoco.MjModel.from_xml_string(xml)).gravity == (0.0, 0.0, 0.0)
