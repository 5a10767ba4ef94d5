"""Spatial tendons through sites (MJCF ``<tendon><spatial>``, ``SpatialTendon``): their lengths
and Jacobians against MuJoCo's ``ten_length`` and ``ten_velocity`` in the three algebras, their
springs, dampers and length limits in simulations against ``mj_step`` (dm_control's
ball_in_cup, whose string goes taut), and what is refused."""
import warnings

import numpy as np
import pytest

import screwdyn as sd
from conftest import as_mujoco_models_it
from screwdyn.constraints import Coupling, SpatialTendon
from screwdyn.sim.spatial_tendons import SpatialTendons

mujoco = pytest.importorskip("mujoco")
_BIT = mujoco.mjtDisableBit

# a block on an x rail tied to a post 1 m away along y: at q0 its string has no rate along the
# rail (MuJoCo's tendon_invweight0 is 0, as gymnasium-robotics' coupled cheetahs' string)
SIDEWAYS = """<mujoco><option timestep="0.001"/><worldbody>
  <site name="post" pos="0 1 0"/>
  <body name="block"><joint name="x" type="slide" axis="1 0 0" damping="0.5"/>
    <geom type="box" size="0.05 0.05 0.05" mass="2"/><site name="ring"/></body></worldbody>
  <tendon><spatial name="tie" limited="true" range="0 1.05" stiffness="3" springlength="1">
    <site site="post"/><site site="ring"/></spatial></tendon></mujoco>"""

# a string from a site on the world through two links of a chain (hinges about different
# axes, a slide) to a free box: every kind of motion moves its sites
ROPE = """<mujoco><option timestep="0.001"/><worldbody>
  <site name="anchor" pos="0.1 0.2 1.2"/>
  <body name="a" pos="0 0 1"><joint name="h1" type="hinge" axis="0 1 0"/>
    <joint name="h2" type="hinge" axis="1 0 0"/>
    <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/><site name="s1" pos="0.2 0.05 0"/>
    <body name="b" pos="0.4 0 0"><joint name="h3" type="hinge" axis="0 0 1"/>
      <joint name="sl" type="slide" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/><site name="s2" pos="0.3 0 0.05"/>
    </body></body>
  <body name="box" pos="0.5 0.5 1"><freejoint/><geom type="box" size="0.05 0.05 0.05"/>
    <site name="s3" pos="0.05 0 0"/></body>
</worldbody>
<tendon><spatial name="rope" {attrs}>
  <site site="anchor"/><site site="s1"/><site site="s2"/><site site="s3"/></spatial></tendon>
</mujoco>"""


def _states(m, rng, count):
    for _ in range(count):
        q = m.qpos0.copy()
        q[:4] += rng.normal(size=4) * 0.4
        q[4:7] += rng.normal(size=3) * 0.1
        quaternion = rng.normal(size=4)
        q[7:] = quaternion / np.linalg.norm(quaternion)
        yield q, rng.normal(size=m.nv)


@pytest.mark.parametrize("algebra", ["spatial", "dq", "cga"])
def test_length_and_rate_are_mujocos(algebra):
    """The rope's length and its rate J_L qd equal MuJoCo's ten_length and ten_velocity to
    1e-14 at random states (the box turned anyhow), in every algebra."""
    m = mujoco.MjModel.from_xml_string(ROPE.format(attrs=""))
    model = sd.from_mujoco(m)
    (rope,) = model.spatial_tendons
    assert [link for link, _ in rope.sites] == ["world", "a", "b", "box"]
    paths = SpatialTendons(model, model.spatial_tendons, algebra)
    d = mujoco.MjData(m)
    for q, qd in _states(m, np.random.default_rng(3), 4):
        d.qpos[:], d.qvel[:] = q, qd
        mujoco.mj_forward(m, d)
        L, J = paths.at(q)
        assert abs(L[0] - d.ten_length[0]) < 1e-14
        assert abs(J[0] @ qd - d.ten_velocity[0]) < 1e-14 * max(1.0, abs(d.ten_velocity[0]))


def _mj_run(m, steps):
    d = mujoco.MjData(m)
    out, lengths = [d.qpos.copy()], []
    for _ in range(steps):
        mujoco.mj_step(m, d)
        out.append(d.qpos.copy())
        lengths.append(d.ten_length[0])
    return np.array(out), np.array(lengths)


@pytest.mark.parametrize("backend", ["numpy", "native", "jax"])
def test_spring_damper_and_limit_as_mujoco(tmp_path, backend):
    """The rope with a spring (30 N/m about 0.9 m), a damper (2 N s/m) and a length limit of
    1.3 m, which it reaches: the chain and the box swing 0.5 s under gravity as mj_step's
    (Euler 1 ms, its Newton solver converged) to 1e-10 (free box included), and while the
    string is slack the elastic energy the run records is the spring's, 1/2 k (L - L0)^2."""
    path = tmp_path / "rope.xml"
    path.write_text(ROPE.format(
        attrs='stiffness="30" damping="2" springlength="0.9" limited="true" range="0 1.3"'))
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    m.opt.solver, m.opt.tolerance, m.opt.iterations = mujoco.mjtSolver.mjSOL_NEWTON, 1e-15, 1000
    m.opt.disableflags |= _BIT.mjDSBL_CONTACT
    reference, lengths = _mj_run(m, 500)
    assert lengths.max() > 1.3  # the limit acts
    model = sd.from_mujoco(m)
    traj = sd.simulate(model, m.qpos0, None, None, 0.5, 1e-3, integrator="semi_implicit_euler",
                       joint_limits=sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0,
                                                              iterations=200),
                       backend=backend)
    np.testing.assert_allclose(traj.q, reference, rtol=0, atol=1e-10)
    paths = SpatialTendons(model, model.spatial_tendons)
    L = np.array([paths.at(q)[0][0] for q in traj.q])
    slack = L < 1.3
    assert slack.sum() > 100
    np.testing.assert_allclose(traj.elastic[slack], 0.5 * 30 * (L[slack] - 0.9) ** 2,
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("backend", ["numpy", "native", "jax"])
def test_ball_in_cup_as_mujoco(backend):
    """dm_control's ball_in_cup (the ball on a 0.3 m string from the cup), the cup driven 1 s
    by its two motors: the string goes taut (MuJoCo's tendon limit acts; 0.3066 m at most)
    and the run is mj_step's to 1e-12 with MuJoCo's Newton solver converged (9e-17
    measured), with the file's contact (the ball reaches the floor)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m, run = as_mujoco_models_it("dm_control", "ball_in_cup")
    m.opt.solver, m.opt.tolerance, m.opt.iterations = mujoco.mjtSolver.mjSOL_NEWTON, 1e-15, 1000
    assert [t.name for t in run["model"].spatial_tendons] == ["string"]
    d = mujoco.MjData(m)
    reference, lengths = [d.qpos.copy()], []
    for k in range(1000):
        d.ctrl[:] = np.sin(7e-3 * k), np.cos(5e-3 * k)
        mujoco.mj_step(m, d)
        reference.append(d.qpos.copy())
        lengths.append(d.ten_length[0])
    assert max(lengths) > 0.3  # taut

    def controls(t):
        xp = sd.controllers.array_namespace(t)
        return xp.stack([xp.sin(7 * t), xp.cos(5 * t)], -1)

    driven = sd.controllers.MjcfActuators(run["model"], run["path"], controls)
    traj = sd.simulate(run["model"], run["q0"], None, driven, 1.0, 1e-3, contact=run["contact"],
                       joint_limits=run["joint_limits"], joint_friction=run["joint_friction"],
                       integrator="semi_implicit_euler", backend=backend)
    np.testing.assert_allclose(traj.q, np.array(reference), rtol=0, atol=1e-12)


def test_a_string_without_rate_at_q0_as_mujoco(tmp_path):
    """A string whose rate is zero at the model's q0 (MuJoCo's tendon_invweight0 = 0, which
    RigidLimits.from_mjcf passes on as the row's inverse weight: a hard row, R = 1e-15 in
    MuJoCo) stops a damped block sent along its rail at 1 m/s as mj_step does (Euler 1 ms,
    PGS converged) to 1e-12 over 1 s. (MuJoCo's Newton solver, warm-started, stops short on
    this row: 1.1e-4 m/s off its own PGS, CG and cold-started Newton answers at the second
    step of contact, which agree with each other and with screwdyn's.)"""
    path = tmp_path / "sideways.xml"
    path.write_text(SIDEWAYS)
    m = mujoco.MjModel.from_xml_path(str(path))
    assert m.tendon_invweight0[0] == 0.0
    m.opt.solver, m.opt.tolerance, m.opt.iterations = mujoco.mjtSolver.mjSOL_PGS, 1e-15, 1000
    d = mujoco.MjData(m)
    d.qvel[0] = 1.0
    reference, lengths = [d.qpos.copy()], []
    for _ in range(1000):
        mujoco.mj_step(m, d)
        reference.append(d.qpos.copy())
        lengths.append(d.ten_length[0])
    assert max(lengths) > 1.05  # taut
    limits = sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0)
    assert dict(limits.inverse_weights)["tie"] == 0.0
    traj = sd.simulate(sd.load_mjcf(path, joint_damping=True), m.qpos0, [1.0], None, 1.0, 1e-3,
                       joint_limits=limits, integrator="semi_implicit_euler")
    np.testing.assert_allclose(traj.q, np.array(reference), rtol=0, atol=1e-12)


def test_a_scene_prefixes_the_sites_links():
    """A robot added to a scene with a prefix keeps its string, on the prefixed links."""
    m = mujoco.MjModel.from_xml_string(ROPE.format(attrs='limited="true" range="0 1.3"'))
    scene = sd.Scene("two")
    scene.add_robot(sd.from_mujoco(m), prefix="left/", shapes=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no shapes: no contact
        model, _, _ = scene.build()
    (rope,) = model.spatial_tendons
    assert rope.name == "left/rope"
    assert [link for link, _ in rope.sites] == ["left/world", "left/a", "left/b", "left/box"]


def test_bad_spatial_tendons_are_refused(tmp_path):
    """A string of one site, on a link the model has not, a coupling or an actuator naming
    it, its limit simulated by springs (JointLimits): each a clear error; a spatial tendon
    wrapped around a geom, with frictionloss, or in an equality: a ModelError naming the MJCF
    element (unsupported="ignore" drops it)."""
    m = mujoco.MjModel.from_xml_string(ROPE.format(attrs='limited="true" range="0 1.3"'))
    model = sd.from_mujoco(m)
    with pytest.raises(sd.ModelError, match="'short': it needs at least two sites"):
        SpatialTendon("short", [("a", (0, 0, 0))])
    with pytest.raises(sd.ModelError, match="'s': site 0's point must be 3 finite"):
        SpatialTendon("s", [("a", (0, 0)), ("b", (0, 0, 0))])
    with pytest.raises(sd.ModelError, match="'s': site 1's link 'nowhere' is no link"):
        model.with_constraints(tendons=[SpatialTendon("s", [("a", (0, 0, 0)),
                                                              ("nowhere", (0, 0, 0))])])
    with pytest.raises(sd.ModelError, match="'rope' is a spatial tendon"):
        model.with_constraints(Coupling("rope", "h1"))
    pulled = tmp_path / "pulled.xml"
    pulled.write_text(ROPE.format(attrs="").replace(
        "</mujoco>", '<actuator><motor name="pull" tendon="rope"/></actuator></mujoco>'))
    with pytest.raises(sd.ModelError, match='name="pull".*its transmission'):
        sd.controllers.MjcfActuators(sd.load_mjcf(pulled), pulled, np.zeros(1))
    with pytest.raises(ValueError, match="spatial tendons with length limits.*RigidLimits"):
        sd.simulate(model, m.qpos0, None, None, 0.01, 1e-3, joint_limits=True)
    sd.simulate(model, m.qpos0, None, None, 0.01, 1e-3, joint_limits=False)  # none enforced
    wrapped = ROPE.format(attrs="").replace(
        '<site site="s1"/>', '<geom geom="drum"/><site site="s1"/>').replace(
        '<site name="anchor"', '<geom name="drum" type="cylinder" size="0.02 0.05" '
        'pos="0 0.2 1.2"/><site name="anchor"')
    with pytest.raises(sd.ModelError, match='<tendon name="rope">: a spatial tendon\'s '
                                            'wrapping around geoms'):
        sd.from_mujoco(mujoco.MjModel.from_xml_string(wrapped))
    held = mujoco.MjModel.from_xml_string(ROPE.format(attrs="").replace(
        "</mujoco>", '<equality><tendon name="fixed" tendon1="rope"/></equality></mujoco>'))
    with pytest.raises(sd.ModelError, match='<equality><tendon name="fixed">: an equality on a '
                                            'spatial tendon'):
        sd.from_mujoco(held)
    assert sd.from_mujoco(held, unsupported="ignore").constraints == ()
    rubbing = mujoco.MjModel.from_xml_string(ROPE.format(attrs='frictionloss="0.1"'))
    with pytest.raises(sd.ModelError, match="a spatial tendon's frictionloss"):
        sd.from_mujoco(rubbing)
    assert sd.from_mujoco(rubbing, unsupported="ignore").spatial_tendons == ()
