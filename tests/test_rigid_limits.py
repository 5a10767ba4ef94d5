"""Joint limits as constraints (issue 24): ``RigidLimits`` against MuJoCo's own limits
(``mj_step``, Euler, the same dt), a rigid stop that holds a load where the springs of
``JointLimits`` sag or diverge, limits solved together with the ground contact (gymnasium's
ant stands on its stops) and with equality constraints, the same numbers on every backend,
and the bad inputs."""
import warnings
from dataclasses import replace

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.model.impedance import step_time_constant

from conftest import bundled_mjcf, soft_sink

ARM = """<mujoco model="stops">
  <option timestep="0.001" integrator="Euler"/>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" range="-30 60" limited="true"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03" mass="1"/>
      <body name="fore" pos="0.5 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" range="-10 10" limited="true"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="0.5"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    """A two-link arm, horizontal at rest, that falls onto its stops (the shoulder's 60 deg,
    the elbow's -10 deg, then +10 deg); the file, for MuJoCo too."""
    path = tmp_path_factory.mktemp("stops") / "arm.xml"
    path.write_text(ARM)
    return path


def _fall(model, backend="numpy", t_final=2.0, **kw):
    return sd.simulate(model, np.zeros(model.nq), np.zeros(model.nv), None, t_final, 1e-3,
                       integrator="semi_implicit_euler", backend=backend,
                       joint_limits=kw.pop("joint_limits", sd.RigidLimits()), **kw)


def _mujoco(path, samples):
    """(samples, nq): MuJoCo's qpos from rest, ``mj_step`` with the file's options."""
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    qpos = []
    for _ in range(samples):
        qpos.append(d.qpos.copy())
        mujoco.mj_step(m, d)
    return np.array(qpos)


def test_arm_falls_onto_its_stops_as_in_mujoco(arm):
    """Until a joint reaches a limit the run is MuJoCo's Euler to rounding; afterwards each
    joint comes to rest *on* its stop (MuJoCo's soft limits, solimp, sag 0.6-0.75 mrad into
    them), and the energy balance holds."""
    model = sd.load_mjcf(str(arm))
    traj = _fall(model)
    reference = _mujoco(arm, traj.n_samples)
    lower, upper = model.lower_position_limit, model.upper_position_limit
    past = np.flatnonzero(np.any((reference > upper) | (reference < lower), axis=1))[0]
    assert past > 90  # the elbow reaches -10 deg at 0.099 s
    np.testing.assert_allclose(traj.q[:past], reference[:past], atol=1e-12)
    np.testing.assert_allclose(traj.q[-1], upper, atol=1e-9)  # on both stops
    np.testing.assert_allclose(traj.qd[-1], 0.0, atol=1e-9)
    np.testing.assert_allclose(reference[-1], upper, atol=1e-3)  # MuJoCo's sag
    assert np.all(reference[-1] > upper)
    assert traj.energy_drift() < 5e-3  # semi-implicit Euler's first order
    # the stops took energy out (an inelastic stop, dampratio 1), and gave none
    assert traj.dissipated()[-1] > 0.1 * traj.energy_scale()
    assert traj.meta["joint_limits"] == {"kind": "rigid", "rows": 4, "timeconst": 0.02,
                                         "dampratio": 1.0, "impedance": 1.0, "own": 0,
                                         "invweight0": False}


def test_a_stop_holds_where_springs_sag_or_diverge(arm):
    """The springs of JointLimits trade sag (10 Hz: 2-3 mrad past the stop under the arm's
    weight) for a step they need: at 200 Hz they diverge at 1 ms. A RigidLimits stop holds
    the load at the limit whatever the time constant of its return."""
    model = sd.load_mjcf(str(arm))
    upper = model.upper_position_limit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the stability warning of the stiff springs
        soft = _fall(model, joint_limits=sd.JointLimits(frequency=10.0))
        with pytest.raises(sd.SimulationError, match="diverged"):
            _fall(model, joint_limits=sd.JointLimits(frequency=200.0))
    assert np.all(soft.q[-1] - upper > 1e-3)
    for timeconst in (0.005, 0.02, 0.05):
        traj = _fall(model, joint_limits=sd.RigidLimits(timeconst=timeconst))
        np.testing.assert_allclose(traj.q[-1], upper, atol=1e-6)


@pytest.mark.parametrize("backend", ["native", "jax"])
def test_backends_agree(arm, backend):
    """The native program and JAX's loop give numpy's run of the arm onto its stops (its
    positions and the stops' stabilisation energy) to 1e-9."""
    if backend == "jax":
        pytest.importorskip("jax")
    model = sd.load_mjcf(str(arm))
    reference = _fall(model, t_final=0.5)
    traj = _fall(model, backend=backend, t_final=0.5)
    np.testing.assert_allclose(traj.q, reference.q, atol=1e-9)
    np.testing.assert_allclose(traj.elastic, reference.elastic, atol=1e-9)


def test_rollout_differentiates_through_the_stops(arm):
    """``sd.sim.rollout`` (a pure JAX function) is ``simulate``'s run, and jax.grad of where
    the arm is after 0.3 s (its elbow on a stop since 0.1 s) with respect to where it starts
    is the central difference's to 1e-7."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    model = sd.load_mjcf(str(arm))

    def final(q0):
        qs, _ = sd.sim.rollout(model, q0, jnp.zeros(2), None, 300, 1e-3,
                               integrator="semi_implicit_euler",
                               joint_limits=sd.RigidLimits())
        return qs[-1].sum()

    with jax.enable_x64(True):
        q0 = jnp.array([0.1, 0.0])
        reference = _fall(model, t_final=0.3)
        assert float(final(jnp.zeros(2))) == pytest.approx(reference.q[-1].sum(), abs=1e-9)
        gradient = np.asarray(jax.grad(final)(q0))
        e = 1e-6
        central = [(float(final(q0 + e * np.eye(2)[i])) - float(final(q0 - e * np.eye(2)[i])))
                   / (2 * e) for i in range(2)]
    np.testing.assert_allclose(gradient, central, atol=1e-7)


def test_limits_with_equality_constraints(arm):
    """A joint equality (elbow = shoulder / 6) and the stops: the constraint is kept while
    the shoulder is held on its 60 deg stop, the elbow following to exactly 10 deg."""
    coupled = ARM.replace("</worldbody>", """</worldbody>
  <equality><joint joint1="elbow" joint2="shoulder" polycoef="0 0.1666666666666667 0 0 0"/>
  </equality>""")
    path = arm.parent / "coupled.xml"
    path.write_text(coupled)
    model = sd.load_mjcf(str(path))
    traj = _fall(model)
    np.testing.assert_allclose(traj.q[:, 1], traj.q[:, 0] / 6.0, atol=1e-6)
    np.testing.assert_allclose(traj.q[-1], model.upper_position_limit, atol=1e-6)


def _mujoco_ant(path, steps, impedance=None, impratio=None):
    """MuJoCo's ant (the file, Euler at 1 ms; its geoms' solimp a constant ``impedance`` and
    its ``impratio`` where given): (qpos (steps + 1, nq)) from qpos0."""
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.timestep, m.opt.integrator = 1e-3, mujoco.mjtIntegrator.mjINT_EULER
    if impedance is not None:
        m.geom_solimp[:, :2] = impedance
    if impratio is not None:
        m.opt.impratio = impratio
    d = mujoco.MjData(m)
    qpos = [d.qpos.copy()]
    for _ in range(steps):
        mujoco.mj_step(m, d)
        qpos.append(d.qpos.copy())
    return np.array(qpos)


def test_the_ant_stands_on_its_stops():
    """gymnasium's ant (its ankles' ranges, 30-70 deg, keep it off its belly; it starts at 0,
    past them) in a scene with its ground, on rigid contact (impedance=1): with RigidLimits
    its fall onto its stops is MuJoCo's (landing, 0.2 s: the same heights and ankles to a few
    mm and mrad), and it stands at 0.60 m at 1 s (MuJoCo 0.55 m: its soft contacts and limits
    sag). With the springs of JointLimits its ankles give and it sinks to 0.37 m. As the file
    has them (the geoms' solimp and margins, Scene.build()'s default, the file's pyramidal
    cone, and RigidLimits.from_mjcf), its landing is MuJoCo's as closely, and it stands within
    1 cm of MuJoCo's at 2 s (0.552 m, MuJoCo 0.547 m; its feet rest 2 cm above the floor: the
    two geoms' margins add). Given MuJoCo's inverse weights too (invweight0=True), its margins
    (margin=0: a row enters the solve where MuJoCo's does) and 200 sweeps, its whole 2 s is
    mj_step's to 1e-9 (9e-12 measured), its four legs sharing its weight (ankles 0.913 rad
    each at 2 s), and alike with a constant soft contact (impedance 0.9, MuJoCo's geoms given
    the same): its feet's soft friction (impratio 1) creeps outwards as MuJoCo's does, the
    body sinking 7.7 mm from 1 s to 2 s in both; with impratio 100 neither sinks by 1 mm."""
    path = bundled_mjcf("gymnasium", "ant")
    if path is None:
        pytest.skip("gymnasium is not installed")
    robot = sd.load_mjcf(path, joint_damping=True)
    scene = sd.Scene("ant")
    scene.add_robot(robot)
    model, contact, q0 = scene.build(impedance=1.0)
    traj = sd.simulate(model, q0, t_final=1.0, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler", joint_limits=sd.RigidLimits())
    own_model, own_contact, _ = scene.build(cone="pyramidal")
    own = sd.simulate(own_model, q0, t_final=2.0, dt=1e-3, contact=own_contact,
                      integrator="semi_implicit_euler",
                      joint_limits=sd.RigidLimits.from_mjcf(path))
    reference = _mujoco_ant(path, 2000)
    for run in (traj, own):
        assert run.q[200, 2] == pytest.approx(reference[200, 2], abs=2e-3)
        np.testing.assert_allclose(run.q[200, 7:], reference[200, 7:], atol=5e-3)
    assert traj.q[-1, 2] > 0.55
    assert traj.energy_drift() < 0.05
    assert own.q[-1, 2] == pytest.approx(reference[-1, 2], abs=1e-2)
    # on rigid contacts the ant's weight on its four legs is indeterminate: the sweeps settle
    # it on one diagonal pair (its ankles 1.11 and 0.54 rad); MuJoCo's soft contacts share it
    # among the four
    assert np.ptp(np.abs(traj.q[-1, 8::2])) > 0.1
    mujocos = dict(cone="pyramidal", iterations=200, invweight0=True, margin=0.0)
    limits = sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0)
    sinking = {}
    for impedance, impratio in ((None, None), (0.9, 1.0), (0.9, 100.0)):
        options = {} if impedance is None else {"impedance": impedance, "impratio": impratio}
        soft_model, soft_contact, _ = scene.build(**options, **mujocos)
        soft = sd.simulate(soft_model, q0, t_final=2.0, dt=1e-3, contact=soft_contact,
                           integrator="semi_implicit_euler", joint_limits=limits)
        expected = _mujoco_ant(path, 2000, impedance=impedance, impratio=impratio)
        sinking[impratio] = [z[1000, 2] - z[2000, 2] for z in (soft.q, expected)]
        if impratio != 100.0:  # 200 sweeps converge (impratio 100: stiffer friction, not)
            np.testing.assert_allclose(soft.q, expected, rtol=0, atol=1e-9)
            assert np.ptp(np.abs(soft.q[[1000, 2000], 8::2]), axis=-1).max() < 1e-6
    assert sinking[1.0][0] == pytest.approx(7.7e-3, abs=1e-4)
    assert max(sinking[100.0]) < 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        springs = sd.simulate(model, q0, t_final=1.0, dt=1e-3, contact=contact,
                              integrator="semi_implicit_euler", joint_limits=True)
    assert springs.q[-1, 2] < 0.45


def test_impedance_is_mujocos_soft_limit(arm):
    """With impedance 0.9 the arm falls onto its stops as MuJoCo's with solimplimit
    "0.9 0.9 0.001" (a constant impedance) within 4 mrad, and rests 0.9 and 1.3 mrad into them
    as MuJoCo's (2% apart: MuJoCo takes a limit's compliance from its inverse inertia at
    qpos0, dof_invweight0, here from the current one). With invweight0=True (the computed
    dof_invweight0, or MuJoCo's own read by from_mjcf) the whole fall is mj_step's to 1e-9
    rad, on numpy and native code."""
    path = arm.parent / "soft.xml"
    path.write_text(ARM.replace('limited="true"', 'limited="true" solimplimit="0.9 0.9 0.001"'))
    model = sd.load_mjcf(str(path))
    traj = _fall(model, joint_limits=sd.RigidLimits(impedance=0.9))
    reference = _mujoco(path, traj.n_samples)
    np.testing.assert_allclose(traj.q, reference, atol=4e-3)
    upper = model.upper_position_limit
    np.testing.assert_allclose(traj.q[-1] - upper, reference[-1] - upper, rtol=0.03)
    assert np.all(traj.q[-1] - upper > 5e-4)
    for limits in (sd.RigidLimits(impedance=0.9, invweight0=True),
                   sd.RigidLimits.from_mjcf(path, invweight0=True)):
        for backend in ("numpy", "native"):
            np.testing.assert_allclose(_fall(model, backend, joint_limits=limits).q, reference,
                                       rtol=0, atol=1e-9, err_msg=backend)


SLIDER = """<mujoco model="slider">
  <option timestep="0.001" integrator="Euler"/>
  <worldbody>
    <body name="block" pos="0 0 1">
      <joint name="lift" type="slide" axis="0 0 1" range="0 1" limited="true" SOLIMP/>
      <geom type="box" size="0.1 0.1 0.1" mass="2"/>
    </body>
  </worldbody>
</mujoco>"""


@pytest.mark.parametrize("solimp", [(0.9, 0.95, 0.001, 0.5, 2.0), (0.5, 0.99, 0.02, 0.2, 4.0)])
def test_an_impedance_that_grows_past_the_limit_is_mujocos(tmp_path, solimp):
    """A 2 kg block on a vertical slider falls 0.05 m onto its lower stop, with
    ``RigidLimits(impedance=solimp)`` and MuJoCo's solimplimit the same (its default, and a
    softer one): q(t) is mj_step's to 1e-9 m over 1 s, and it rests where the stop's
    compliance holds its weight, r = g (1 - d(r)) (dmax timeconst / d(r))^2 with MuJoCo's
    sigmoid d(r) (``conftest.soft_sink``, to 1e-9 m). A slider's inverse inertia is MuJoCo's
    dof_invweight0 exactly, so the two agree where the arm's
    (``test_impedance_is_mujocos_soft_limit``) differ."""
    path = tmp_path / "slider.xml"
    path.write_text(SLIDER.replace("SOLIMP", f'solimplimit="{" ".join(map(str, solimp))}"'))
    model = sd.load_mjcf(str(path))
    traj = sd.simulate(model, [0.05], [0.0], None, 1.0, 1e-3, integrator="semi_implicit_euler",
                       joint_limits=sd.RigidLimits(impedance=solimp))
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    d.qpos[0] = 0.05
    reference = []
    for _ in range(traj.n_samples):
        reference.append(d.qpos[0])
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(traj.q[:, 0], reference, atol=1e-9)
    assert -traj.q[-1, 0] == pytest.approx(soft_sink(9.81, 0.02, solimp), abs=1e-9)
    for bad, match in (((0.9, 1.5), "dmax"), ((0.9, 0.95, 0.001, 0.0), "midpoint"),
                       ("soft", "RigidLimits.impedance")):
        with pytest.raises(ValueError, match=match):
            sd.RigidLimits(impedance=bad)


TWO_SLIDERS = """<mujoco model="two sliders">
  <option timestep="0.001" integrator="Euler"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="a" type="slide" axis="0 0 1" range="0 1" limited="true"
             solreflimit="0.01 1.5" solimplimit="0.8 0.95 0.002"/>
      <geom type="box" size="0.1 0.1 0.1" mass="2"/>
    </body>
    <body name="b" pos="1 0 1">
      <joint name="b" type="slide" axis="0 0 1" range="0 1" limited="true"
             solreflimit="-4000 -100"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
    </body>
    <body name="c" pos="2 0 1">
      <joint name="c" type="slide" axis="0 0 1" range="0 1" limited="true"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
    </body>
  </worldbody>
</mujoco>"""


def test_each_joints_own_limit_softness_from_the_file(tmp_path):
    """``RigidLimits.from_mjcf`` reads each limited joint's solreflimit and solimplimit: three
    blocks on sliders fall 5 cm onto their stops, one with its own time constant, damping
    ratio and impedance, one with a direct (-stiffness, -damping) solreflimit, one with
    MuJoCo's defaults (0.02 s, 1; 0.9 to 0.95 over 1 mm): each is mj_step's to 1e-9 m over
    1 s, where one RigidLimits for all is 1e-4 m away. The summary counts the joints with
    their own. Bad input: a joint the model lacks (ModelError naming it), a field not a
    JointLimit's, a bad time constant (ValueError naming the joint and the field)."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "sliders.xml"
    path.write_text(TWO_SLIDERS)
    model = sd.load_mjcf(str(path))
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    d.qpos[:] = 0.05
    reference = []
    for _ in range(1001):
        reference.append(d.qpos.copy())
        mujoco.mj_step(m, d)
    limits = sd.RigidLimits.from_mjcf(path)
    assert [name for name, _ in limits.joints] == ["a", "b", "c"]
    runs = {}
    for label, setting in (("file", limits), ("one", sd.RigidLimits(impedance=(0.9, 0.95)))):
        runs[label] = sd.simulate(model, [0.05] * 3, None, None, 1.0, 1e-3,
                                  integrator="semi_implicit_euler", joint_limits=setting)
    np.testing.assert_allclose(runs["file"].q, reference, atol=1e-9)
    assert np.abs(runs["one"].q - reference).max() > 1e-4
    assert runs["file"].meta["joint_limits"]["own"] == 3
    for joints, error, match in (
            ({"d": {"timeconst": 0.01}}, sd.ModelError, "'d', not a joint of model"),
            ({"a": {"stiffness": 1.0}}, ValueError, r"RigidLimits.joints\['a'\] must be"),
            ({"a": {"timeconst": -1.0}}, ValueError, r"RigidLimits.joints\['a'\].timeconst")):
        with pytest.raises(error, match=match):
            sd.simulate(model, [0.05] * 3, None, None, 0.01, 1e-3,
                        joint_limits=sd.RigidLimits(joints=joints))


@pytest.mark.parametrize("file_dt,dt,flag", [
    (0.008, 0.0005, ""), (0.001, 0.008, ""), (0.001, 0.008, '<flag refsafe="disable"/>')],
    ids=["shorter_step", "longer_step", "refsafe_disabled"])
def test_refsafe_takes_the_simulations_step_not_the_files(tmp_path, file_dt, dt, flag):
    """MuJoCo's refsafe makes a solreflimit's time constant at least 2 timesteps of the step
    it runs, whatever the file's ``<option timestep>``: the three sliders (a's 0.01 s, b's
    direct solreflimit, never refsafe, c's 0.02 s) simulated at another step than the file's
    are mj_step's at that step to 1e-9 m over 1 s: at 0.5 ms in a file of 8 ms (a keeps its
    0.01 s, where the file's 2 timesteps would be 0.016 s), at 8 ms in a file of 1 ms (a's
    becomes 0.016 s), and at 8 ms with refsafe disabled (a keeps 0.01 s). Taken at the file's
    timestep instead, the first two are 1e-5 m or more away."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "sliders.xml"
    path.write_text(TWO_SLIDERS.replace('timestep="0.001" integrator="Euler"/>',
                                        f'timestep="{file_dt}" integrator="Euler">{flag}'
                                        '</option>'))
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.timestep = dt
    d = mujoco.MjData(m)
    d.qpos[:] = 0.05
    reference = []
    for _ in range(int(round(1.0 / dt)) + 1):
        reference.append(d.qpos.copy())
        mujoco.mj_step(m, d)
    model = sd.load_mjcf(str(path))
    limits = sd.RigidLimits.from_mjcf(path)
    assert [j.refsafe for _, j in limits.joints] == [not flag, False, not flag]
    assert [j.timeconst for _, j in limits.joints][::2] == [0.01, 0.02]  # the file's own
    at_file_step = replace(limits, joints=tuple(
        (name, j._replace(timeconst=step_time_constant(j.timeconst, file_dt, j.refsafe),
                          refsafe=False)) for name, j in limits.joints))
    runs = [sd.simulate(model, [0.05] * 3, None, None, 1.0, dt,
                        integrator="semi_implicit_euler", joint_limits=setting)
            for setting in (limits, at_file_step)]
    np.testing.assert_allclose(runs[0].q, reference, atol=1e-9)
    if not flag:
        assert np.abs(runs[1].q - reference).max() > 1e-5


def test_a_slider_hitting_its_stop_follows_the_closed_form():
    """A 2 kg cart on a rail (no gravity) reaching its 0.1 m stop at 1 m/s: the stop's
    stabilisation is the critically damped x = v t exp(-t / timeconst), so the cart passes it
    by at most v timeconst / e = 7.36 mm and leaves when the stop's force falls to zero
    (t = 2 timeconst) at exp(-2) v = 0.135 m/s (``restitution_of(1)``), as MuJoCo's
    do; RK4 at 1 ms, within 2%."""
    b = sd.ModelBuilder("slider")
    b.add_link("base")
    b.add_link("cart", mass=2.0, inertia=np.eye(3) * 0.01)
    b.add_joint("rail", "prismatic", "base", "cart", axis=(1, 0, 0),
                limits={"lower": -1.0, "upper": 0.1})
    traj = sd.simulate(b.build(), [0.0], [1.0], None, 0.5, 1e-3, integrator="rk4",
                       gravity=(0, 0, 0), joint_limits=sd.RigidLimits())
    assert traj.q[:, 0].max() - 0.1 == pytest.approx(0.02 / np.e, rel=0.02)
    assert -traj.qd[-1, 0] == pytest.approx(sd.sim.contact_solver.restitution_of(1.0),
                                            rel=0.02)
    assert np.exp(-2) == pytest.approx(sd.sim.contact_solver.restitution_of(1.0 - 1e-9))


def test_a_model_without_limits():
    """RigidLimits on a model none of whose joints has a limit (a free cube): nothing to
    solve, the run is the one without limits, and its record says so (0 limits)."""
    b = sd.ModelBuilder("cube")
    b.add_link("cube", mass=1.0, inertia=np.eye(3) * 0.01)
    cube = b.build(floating_base=True)
    q0, qd0 = [0, 0, 1.0, 0, 0, 0, 1], [0.5, 0, 0, 0, 0, 2.0]
    traj = sd.simulate(cube, q0, qd0, None, 0.2, 1e-3, joint_limits=sd.RigidLimits())
    free = sd.simulate(cube, q0, qd0, None, 0.2, 1e-3)
    np.testing.assert_array_equal(traj.q, free.q)
    assert traj.meta["joint_limits"]["rows"] == 0


def test_bad_input(arm):
    for kw, field in (({"timeconst": 0.0}, "timeconst"), ({"dampratio": -1.0}, "dampratio"),
                      ({"impedance": 0.0}, "impedance"),
                      ({"iterations": 0}, "iterations"), ({"margin": -1.0}, "margin"),
                      ({"regularization": float("nan")}, "regularization"),
                      ({"invweight0": "yes"}, "invweight0"),
                      ({"inverse_weights": {"elbow": -1.0}}, r"inverse_weights\['elbow'\]")):
        with pytest.raises(ValueError, match=f"RigidLimits.{field}"):
            sd.RigidLimits(**kw)
    with pytest.raises(ValueError, match="a JointLimits or a RigidLimits"):
        sd.sim.Settings(joint_limits="rigid")
    assembly = sd.Assembly(sd.load_mjcf(str(arm)), name="arm")
    with pytest.raises(ValueError, match="assembly.to_model"):
        _fall(assembly)


# ARM whose shoulder has no stop and whose elbow's is far: a tendon stops them
TENDON_ARM = ARM.replace('model="stops"', 'model="tendon_stop"').replace(
    ' range="-30 60" limited="true"', "").replace('range="-10 10"', 'range="-90 90"').replace(
    "</mujoco>", """  <tendon>
    <fixed name="reach" limited="true" range="-0.3 {upper}" {softness}>
      <joint joint="shoulder" coef="1"/><joint joint="elbow" coef="0.5"/>
    </fixed>
  </tendon>
</mujoco>""")


@pytest.mark.parametrize("softness", ["", 'solreflimit="0.05 0.7" solimplimit="0.95 0.99 0.01"'],
                         ids=["defaults", "own"])
def test_a_limited_tendon_stops_its_joints_as_in_mujoco(tmp_path, softness):
    """A fixed tendon's length limits (MJCF ``<fixed limited="true" range=...>``: the
    robotiq and jaco grippers' finger couplings) are rows of J = c beside the joints': an arm
    with no stop of its own falls until shoulder + elbow / 2 reaches 0.6 rad, and the run is
    mj_step's to 1e-9 over 1 s with the file's solreflimit and solimplimit (its defaults or its
    own) and MuJoCo's tendon_invweight0 (``RigidLimits.from_mjcf``; the computed inverse
    weight, c M^-1 c^T at q0, is MuJoCo's to 1e-12). With stiff springs (``JointLimits``) the
    tendon rests within 2% of its range past the limit; without limits it falls through."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "tendon.xml"
    path.write_text(TENDON_ARM.format(upper=0.6, softness=softness))
    model = sd.load_mjcf(str(path))
    (tendon,) = model.tendons
    assert (tendon.lower, tendon.upper) == (-0.3, 0.6)
    reference = _mujoco(path, 1001)
    limits = sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0)
    traj = sd.simulate(model, np.zeros(2), None, None, 1.0, 1e-3,
                       integrator="semi_implicit_euler", joint_limits=limits)
    length = traj.q @ np.array([1.0, 0.5])
    assert length.max() > 0.6 and abs(length[-1] - 0.6) < 0.02  # it reached the stop
    np.testing.assert_allclose(traj.q, reference, rtol=0, atol=1e-9)
    m = mujoco.MjModel.from_xml_path(str(path))
    rows = sd.sim.limit_constraints.LimitRows(model, sd.RigidLimits(invweight0=True))
    assert rows.joint_names == ("elbow", "elbow", "reach", "reach")
    np.testing.assert_allclose(rows.weights[2:], m.tendon_invweight0[0], rtol=1e-12)
    springs = sd.simulate(model, np.zeros(2), None, None, 1.0, 1e-3, joint_limits=True)
    assert abs(springs.q[-1] @ np.array([1.0, 0.5]) - 0.6) < 0.02 * 0.9
    free = sd.simulate(model, np.zeros(2), None, None, 1.0, 1e-3, joint_limits=False)
    assert (free.q @ np.array([1.0, 0.5])).max() > 1.0


def test_a_tendon_limit_on_every_backend(tmp_path):
    """The tendon's rows give the same numbers on numpy, native code and JAX."""
    path = tmp_path / "tendon.xml"
    path.write_text(TENDON_ARM.format(upper=0.6, softness=""))
    model = sd.load_mjcf(str(path))
    runs = [sd.simulate(model, np.zeros(2), None, None, 0.5, 1e-3, backend=backend,
                        integrator="semi_implicit_euler", joint_limits=sd.RigidLimits()).q
            for backend in ("numpy", "native", "jax")]
    assert np.abs(runs[0] @ np.array([1.0, 0.5])).max() > 0.59
    for other in runs[1:]:
        np.testing.assert_allclose(other, runs[0], rtol=0, atol=1e-12)


def test_bad_tendon_limits():
    """A tendon's limits must be numbers with lower <= upper, its friction a finite number
    >= 0: a ModelError naming it."""
    for lower, upper in ((1.0, 0.0), (np.nan, 1.0), ("a", 1.0), (np.inf, np.inf)):
        with pytest.raises(sd.ModelError, match="fixed tendon 't': its length limits"):
            sd.constraints.FixedTendon("t", ["a"], [1.0], lower=lower, upper=upper)
    for force in (-1.0, np.inf, np.nan):
        with pytest.raises(sd.ModelError, match="fixed tendon 't': frictionloss must be "
                                                "finite and >= 0"):
            sd.constraints.FixedTendon("t", ["a"], [1.0], frictionloss=force)


SLIDER_TENDON = """<mujoco model="dry_tendon">
  <option timestep="0.001" integrator="Euler"/>
  <worldbody>
    <body name="block" pos="0 0 1">
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <tendon><fixed name="rope" frictionloss="{force}"><joint joint="z" coef="2"/></fixed></tendon>
</mujoco>"""


@pytest.mark.parametrize("friction", ["stick_slip", "sign"])
def test_a_tendons_dry_friction(tmp_path, friction):
    """A fixed tendon's frictionloss (MJCF; robosuite's jaco gripper's thumb coupling) acts
    along the tendon as the joints' Coulomb friction does (``joint_friction=``): a 1 kg block
    on a vertical slider whose tendon L = 2 z has a dry friction of 2 N slides down at
    g - 2 x 2 N / 1 kg = 5.81 m/s^2 exactly from the second step on (in the first, from rest,
    the spring has no deflection yet, and "sign" no velocity: a step of free fall, as for a
    joint's friction): its velocity is that closed form's to 1e-12, and its drop over 0.5 s
    mj_step's (MuJoCo's friction row, saturated from the first step) to 3e-3 of it (that
    first step's 4 mm/s, 2.75e-3 measured); with
    5 N > m g / 2 the stick-slip spring holds it (within 1e-3 m; "sign" cannot hold a joint
    at rest, as documented). The loader reads it."""
    mujoco = pytest.importorskip("mujoco")
    for force, slides in ((2.0, True), (5.0, False)):
        path = tmp_path / f"dry{force}.xml"
        path.write_text(SLIDER_TENDON.format(force=force))
        model = sd.load_mjcf(str(path))
        assert model.tendons[0].frictionloss == force
        traj = sd.simulate(model, np.zeros(1), None, None, 0.5, 1e-3,
                           integrator="semi_implicit_euler",
                           joint_friction=sd.sim.settings.JointFriction(model=friction))
        if slides:
            np.testing.assert_allclose(traj.qdd[1:, 0], -(9.81 - 2 * force), rtol=0,
                                       atol=1e-12)
            k = np.arange(1, len(traj.t))  # after k steps: one of g, k - 1 of 5.81 m/s^2
            np.testing.assert_allclose(-traj.qd[1:, 0], 1e-3 * (9.81 + (k - 1) * 5.81),
                                       rtol=1e-12)
            drop = 0.5 * (9.81 - 2 * force) * traj.t ** 2
            reference = _mujoco(path, len(traj.t))
            np.testing.assert_allclose(traj.q, reference, rtol=0, atol=3e-3 * drop[-1])
        elif friction == "stick_slip":
            assert np.abs(traj.q).max() < 1e-3


def test_a_limits_margin_stops_it_inside_its_range(arm, tmp_path):
    """An MJCF joint's limit margin makes MuJoCo's limit act that far inside the range: the
    arm whose shoulder has margin 0.1 rad rests on its stop at 60 deg - 0.1 rad, as mj_step
    has it to 1e-9 over 2 s with 200 sweeps (RigidLimits.from_mjcf reads it as the
    JointLimit's inset; the default 30 leave 1e-9 where both joints rest on their stops)."""
    path = tmp_path / "margin.xml"
    path.write_text(ARM.replace('range="-30 60" limited="true"',
                                'range="-30 60" limited="true" margin="0.1"'))
    limits = sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0, iterations=200)
    assert dict(limits.joints)["shoulder"].inset == pytest.approx(0.1)
    assert dict(limits.joints)["elbow"].inset == 0.0
    model = sd.load_mjcf(str(path))
    traj = _fall(model, joint_limits=limits)
    np.testing.assert_allclose(traj.q, _mujoco(path, len(traj.t)), rtol=0, atol=1e-9)
    assert abs(traj.q[-1, 0] - (np.radians(60) - 0.1)) < 2e-3  # on the stop, less its sag
    with pytest.raises(ValueError, match=r"RigidLimits.joints\['shoulder'\].inset must be "
                                         ">= 0"):
        sd.RigidLimits(joints={"shoulder": {"inset": -0.1}})
