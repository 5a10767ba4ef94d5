"""An MJCF file's actuators (issue 24: MuJoCo's models driven as their authors meant):
``controllers.MjcfActuators`` applies motors, position and velocity servos and general
actuators of affine gain and bias on joints and fixed tendons, with their control, force and
joint-force ranges and their activation dynamics (filters, integrators), as ``mj_step`` does:
trajectories under time-varying controls equal MuJoCo's to rounding on every backend, and
bundled robots driven on their floors equal ``mj_step``'s; a batch of controls; the bad
inputs."""
import warnings

import numpy as np
import pytest

import screwdyn as sd

from conftest import as_mujoco_models_it, bundled_mjcf

def _arm(name, shoulder, actuators):
    """An MJCF arm (shoulder and elbow hinges, a slider, a fixed tendon over the hinges)
    named ``name``, the shoulder joint's extra attributes ``shoulder``, its ``actuators``."""
    return f"""<mujoco model="{name}">
  <option timestep="0.001" integrator="Euler"/>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0" {shoulder}/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03" mass="1"/>
      <body name="fore" pos="0.5 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="0.5"/>
        <body name="slider" pos="0.4 0 0">
          <joint name="ext" type="slide" axis="1 0 0"/>
          <geom type="box" size="0.05 0.05 0.05" mass="0.3"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="sum"><joint joint="shoulder" coef="1"/><joint joint="elbow" coef="0.5"/></fixed>
  </tendon>
  <actuator>{actuators}
  </actuator>
</mujoco>"""


SERVOS = _arm("servos", 'damping="0.5" actuatorfrcrange="-5 5" actuatorfrclimited="true"', """
    <position name="pos" joint="elbow" kp="40" kv="2" ctrlrange="-1 1" forcerange="-6 6"/>
    <motor name="mot" joint="shoulder" gear="3" ctrlrange="-2 2"/>
    <velocity name="vel" joint="ext" kv="10"/>
    <general name="gen" tendon="sum" gaintype="affine" gainprm="2 0.5 0.1" biastype="affine"
             biasprm="0.3 -1 -0.2"/>""")


def controls(t):
    """The four actuators' controls at time t (s), array-generic (traced on every backend):
    the motor's exceeds its range +-2 half the time, the servo's swings inside its own."""
    xp = sd.controllers.array_namespace(t)
    return xp.stack([0.8 * xp.sin(3.0 * t), 1.5 * xp.cos(2.0 * t) + 1.0, 0.3 + 0.0 * t,
                     xp.sin(t)], axis=-1)


@pytest.fixture(scope="module")
def servos(tmp_path_factory):
    path = tmp_path_factory.mktemp("servos") / "servos.xml"
    path.write_text(SERVOS)
    return path


def _stepped(m, steps, ctrl):
    mujoco = pytest.importorskip("mujoco")
    d = mujoco.MjData(m)
    out = [d.qpos.copy()]
    for k in range(steps):
        d.ctrl[:] = ctrl(k * m.opt.timestep)
        mujoco.mj_step(m, d)
        out.append(d.qpos.copy())
    return np.array(out)


@pytest.mark.parametrize("backend", ["numpy", "native", "jax"])
def test_servos_motors_and_tendons_as_mujoco(servos, backend):
    """An arm driven 1 s by a position servo (kp 40, kv 2, its force within +-6 N m), a
    motor of gear 3 (its control clamped to +-2, the shoulder's total actuator force to +-5
    N m), a velocity servo on a slider and a general actuator of affine gain and bias on a
    fixed tendon, under time-varying controls, is mj_step's (Euler, 1 ms, d.ctrl set before
    each step) to 1e-12 on numpy, native code and JAX (4e-16 measured), the clamps active."""
    mujoco = pytest.importorskip("mujoco")
    model = sd.load_mjcf(str(servos), joint_damping=True)
    actuators = sd.controllers.MjcfActuators(model, servos, ctrl=controls)
    assert actuators.actuators.names == ("pos", "mot", "vel", "gen")
    reference = _stepped(mujoco.MjModel.from_xml_path(str(servos)), 1000,
                         lambda t: controls(np.float64(t)))
    traj = sd.simulate(model, model.q0, None, actuators, 1.0, 1e-3, backend=backend,
                       integrator="semi_implicit_euler")
    assert np.ptp(traj.q, axis=0).min() > 0.5
    np.testing.assert_allclose(traj.q, reference, rtol=0, atol=1e-12)
    tau, force = actuators.forces(traj.t, traj.q, traj.qd)
    assert np.isclose(np.abs(force[:, 0]).max(), 6.0)  # the servo's force range
    assert np.abs(force[:, 1]).max() == 2.0  # the motor's control range (its gear 3 on tau)
    assert np.isclose(np.abs(tau[:, 0]).max(), 5.0)  # the shoulder's actuatorfrcrange


ACTIVATIONS = _arm("activations", 'damping="0.2"', """
    <general name="filter" joint="elbow" dyntype="filter" dynprm="0.05" gainprm="40"
             biastype="affine" biasprm="0 -40 -2" ctrlrange="-1 1"/>
    <motor name="mot" joint="shoulder" gear="3" ctrlrange="-2 2"/>
    <general name="exact" tendon="sum" dyntype="filterexact" dynprm="0.02" gainprm="5"/>
    <general name="integrator" joint="ext" dyntype="integrator" gainprm="20" biastype="affine"
             biasprm="0 -20 -3" actlimited="true" actrange="-0.2 0.3"/>""")


@pytest.mark.parametrize("backend", ["numpy", "native", "jax"])
def test_activation_dynamics_as_mujoco(tmp_path, backend):
    """Actuators with activations (a filter of 0.05 s on a servo, a filterexact of 0.02 s on
    a tendon, an integrator whose activation is clamped to [-0.2, 0.3], beside a plain
    motor) driven 1 s by time-varying controls: the activations are mj_step's d.act (Euler,
    1 ms) to 1e-15 (``next_state``), the forces at a state its actuator_force, and the
    trajectory (``simulate`` carrying the activations) mj_step's to 1e-12 on numpy, native
    code and JAX (7e-16 measured)."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "activations.xml"
    path.write_text(ACTIVATIONS)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    reference, activations = [d.qpos.copy()], [d.act.copy()]
    for k in range(1000):
        d.ctrl[:] = controls(np.float64(k * 1e-3))
        mujoco.mj_step(m, d)
        reference.append(d.qpos.copy())
        activations.append(d.act.copy())
    activations = np.array(activations)
    assert activations[:, 0].max() > 0.7 and activations[:, 2].max() == 0.3  # clamped
    model = sd.load_mjcf(str(path), joint_damping=True)
    actuators = sd.controllers.MjcfActuators(model, path, ctrl=controls)
    assert actuators.state_size == m.na == 3
    state, ours = actuators.initial_state(), [actuators.initial_state()]
    for k in range(1000):
        state = actuators.next_state(k * 1e-3, np.zeros(3), np.zeros(3), state, 1e-3)
        ours.append(state)
    np.testing.assert_allclose(ours, activations, rtol=0, atol=1e-15)
    q, qd, act = np.array([0.1, 0.2, 0.05]), np.array([0.3, -0.2, 0.1]), [0.3, 0.1, -0.1]
    d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = q, qd, act, controls(np.float64(0.5))
    mujoco.mj_forward(m, d)
    np.testing.assert_allclose(actuators.forces(0.5, q, qd, np.array(act))[1],
                               d.actuator_force, rtol=0, atol=1e-12)
    traj = sd.simulate(model, model.q0, None, actuators, 1.0, 1e-3, backend=backend,
                       integrator="semi_implicit_euler")
    assert np.ptp(traj.q, axis=0).min() > 0.05
    np.testing.assert_allclose(traj.q, reference, rtol=0, atol=1e-12)
    np.testing.assert_allclose(actuators.activations(traj), activations, rtol=0, atol=1e-15)


def test_the_activations_along_a_run(tmp_path):
    """``activations(traj)``: MuJoCo's d.act at every recorded sample of a run recorded
    every 5 steps, to 1e-15, and with them ``forces`` gives its actuator_force there to
    1e-9; zero activations at the start of every rollout of a batch."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "activations.xml"
    path.write_text(ACTIVATIONS)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    act = [d.act.copy()]
    for k in range(300):
        d.ctrl[:] = controls(np.float64(k * 1e-3))
        mujoco.mj_step(m, d)
        if (k + 1) % 5 == 0:
            act.append(d.act.copy())
    model = sd.load_mjcf(str(path), joint_damping=True)
    actuators = sd.controllers.MjcfActuators(model, path, ctrl=controls)
    traj = sd.simulate(model, model.q0, None, actuators, 0.3, 1e-3, record_every=5,
                       integrator="semi_implicit_euler")
    ours = actuators.activations(traj)
    assert ours.shape == (61, 3)
    np.testing.assert_allclose(ours, act, rtol=0, atol=1e-15)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:], d.act[:] = traj.q[30], traj.qd[30], ours[30]
    d.ctrl[:] = controls(np.float64(traj.t[30]))
    mujoco.mj_forward(m, d)
    np.testing.assert_allclose(actuators.forces(traj.t[30], traj.q[30], traj.qd[30],
                                                ours[30])[1], d.actuator_force, rtol=0,
                               atol=1e-9)
    batch = sd.simulate(model, np.zeros((2, 3)), None, actuators, 0.05, 1e-3,
                        integrator="semi_implicit_euler")
    two = actuators.activations(batch)
    assert two.shape == (2, 51, 3) and not two[:, 0].any()
    np.testing.assert_allclose(two[0], two[1], rtol=0, atol=0)


def test_a_batch_with_activations(tmp_path):
    """Three rollouts of the activations' arm under three constant controls, in one batch:
    each equals its own run to 1e-12 (the activations carried per rollout)."""
    pytest.importorskip("mujoco")
    path = tmp_path / "activations.xml"
    path.write_text(ACTIVATIONS)
    model = sd.load_mjcf(str(path), joint_damping=True)
    ctrl = np.array([[0.5, 1.0, 0.3, 1.0], [-0.5, 0.0, -0.3, -1.0], [1.0, -1.0, 0.1, 0.5]])
    batch = sd.simulate(model, np.zeros((3, 3)), None,
                        sd.controllers.MjcfActuators(model, path, ctrl), 0.3, 1e-3,
                        integrator="semi_implicit_euler")
    for i in range(3):
        one = sd.simulate(model, np.zeros(3), None,
                          sd.controllers.MjcfActuators(model, path, ctrl[i]), 0.3, 1e-3,
                          integrator="semi_implicit_euler")
        np.testing.assert_allclose(batch.q[i], one.q, rtol=0, atol=1e-12)
    assert np.ptp(batch.q[:, -1, 2]) > 0.01  # the three differ


def test_a_servo_at_zero_control_holds_its_joint_at_zero(servos):
    """Without ctrl, every control is 0, as MuJoCo's d.ctrl: the position servo pulls the
    elbow towards 0 (and so on, as mj_step to 1e-12)."""
    mujoco = pytest.importorskip("mujoco")
    model = sd.load_mjcf(str(servos), joint_damping=True)
    reference = _stepped(mujoco.MjModel.from_xml_path(str(servos)), 500, lambda t: 0.0)
    traj = sd.simulate(model, model.q0, None, sd.controllers.MjcfActuators(model, servos),
                       0.5, 1e-3, integrator="semi_implicit_euler")
    np.testing.assert_allclose(traj.q, reference, rtol=0, atol=1e-12)


def test_a_batch_of_controls(servos):
    """ctrl (3, nu) with 3 initial states: each rollout is the one with its own controls."""
    model = sd.load_mjcf(str(servos), joint_damping=True)
    ctrl = np.array([[0.5, 1.0, 0.2, -0.3], [-0.5, -3.0, 0.0, 0.4], [0.0, 0.0, 1.0, 1.0]])
    q0 = np.zeros((3, model.nq))
    batch = sd.simulate(model, q0, None, sd.controllers.MjcfActuators(model, servos, ctrl),
                        0.3, 1e-3, integrator="semi_implicit_euler")
    for i in range(3):
        one = sd.simulate(model, q0[i], None,
                          sd.controllers.MjcfActuators(model, servos, ctrl[i]), 0.3, 1e-3,
                          integrator="semi_implicit_euler")
        np.testing.assert_allclose(batch.q[i], one.q, rtol=0, atol=1e-12)


@pytest.mark.parametrize("package, name, atol", [
    ("dm_control", "cheetah", 1e-12), ("gymnasium", "walker2d_v5", 1e-11),
    ("dm_control", "finger", 1e-12), ("gymnasium", "ant", 1e-7),
    ("gymnasium", "inverted_double_pendulum", 1e-12)])
def test_bundled_robots_driven_as_mujoco(package, name, atol):
    """A bundled robot driven 1 s by random constant controls within its ranges, on its floor,
    with its stops, damping, springs and dry friction as MuJoCo has them (Scene.build with
    invweight0 and margin 0, RigidLimits.from_mjcf, RigidFriction.from_mjcf, 200 sweeps), is
    mj_step's: the cheetah and finger to 4e-16, the walker 4e-13, the ant 1.3e-8 (its four
    feet on the floor: projected Gauss-Seidel's convergence, as undriven). The double
    pendulum's cart reaches its rail's stop, whose MJCF margin 0.01 makes MuJoCo stop it 1 cm
    inside its range (``JointLimit.inset``): to 4e-15 (0.05 before the margin was read)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the double pendulum's shapes cannot touch
        m, run = as_mujoco_models_it(package, name)
    lo, hi = m.actuator_ctrlrange.T
    u = np.random.default_rng(0).uniform(lo, hi)
    reference = _stepped(m, 1000, lambda t: u)
    driven = sd.controllers.MjcfActuators(run["model"], run["path"], u)
    traj = sd.simulate(run["model"], run["q0"], None, driven, 1.0, 1e-3,
                       contact=run["contact"], joint_limits=run["joint_limits"],
                       joint_friction=run["joint_friction"], integrator="semi_implicit_euler")
    assert np.ptp(reference, axis=0).max() > 0.5  # driven, it moves
    np.testing.assert_allclose(traj.q, reference, rtol=0, atol=atol)



@pytest.mark.parametrize("package, name, seconds, atol", [
    ("gymnasium", "humanoid", 1.0, 1e-9), ("gymnasium", "humanoidstandup", 1.0, 1e-9),
    ("dm_control", "quadruped", 0.3, 1e-8)])
def test_driven_as_mujoco_with_its_solver_converged(package, name, seconds, atol):
    """gymnasium's humanoids driven 1 s by random constant controls (17 motors, gears 25 to
    400): on their floor, their limbs touching each other (humanoidstandup starts with its
    hands 1.35 cm into its hips and thighs, its knees 2 degrees past their stops, and is
    pressed apart from step 0), with armature, damping, springs and fixed tendons; and
    dm_control's quadruped, whose 12 servos (on its yaw joints and on fixed tendons) are
    filters of 0.1 s (activation dynamics), walking on its floor. With MuJoCo's Newton solver
    converged (the humanoids' files ask for 50 sweeps of PGS, whose residue leaves 4e-5 and
    1.4e-3 at 1 s), the trajectories are mj_step's to 1e-9 (measured 3e-13, 3e-10); the
    quadruped's 0.3 s to 1e-8 (2e-10; at 1 s 1.1e-5 with 300 sweeps, 4e-9 with 1000: the
    sweeps' convergence on its four feet)."""
    mujoco = pytest.importorskip("mujoco")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # humanoidstandup's arms start in the floor
        m, run = as_mujoco_models_it(package, name)
    m.opt.solver, m.opt.tolerance, m.opt.iterations = mujoco.mjtSolver.mjSOL_NEWTON, 1e-15, 1000
    lo, hi = m.actuator_ctrlrange.T
    u = np.random.default_rng(0).uniform(lo, hi)
    steps = int(round(seconds / 1e-3))
    reference = _stepped(m, steps, lambda t: u)
    driven = sd.controllers.MjcfActuators(run["model"], run["path"], u)
    assert driven.state_size == m.na
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the penetration at the start, as MuJoCo's
        traj = sd.simulate(run["model"], run["q0"], None, driven, seconds, 1e-3,
                           contact=run["contact"], joint_limits=run["joint_limits"],
                           joint_friction=run["joint_friction"],
                           integrator="semi_implicit_euler")
    assert np.ptp(reference, axis=0).max() > 0.3  # driven, it moves
    np.testing.assert_allclose(traj.q, reference, rtol=0, atol=atol)


REFUSED = [
    ('<muscle name="m" joint="a" lengthrange="-1 1"/>', "its activation dynamics"),
    ('<general name="m" joint="a" dyntype="filter" dynprm="0.1" actearly="true"/>',
     "its actearly"),
    ('<motor name="m" site="s"/>', "its transmission"),
    ('<motor name="m" joint="b"/>', "its transmission"),
    ('<motor name="m" joint="a" armature="0.1"/>', "its armature"),
]


@pytest.mark.parametrize("actuator, what", REFUSED)
def test_what_is_not_modelled_is_refused(tmp_path, actuator, what):
    """A muscle, a filter's actearly, a site transmission, a ball joint, an actuator's own
    armature: a ModelError naming the file, the actuator and what is not modelled."""
    pytest.importorskip("mujoco")
    path = tmp_path / "refused.xml"
    path.write_text(f"""<mujoco><worldbody><body><joint name="a" axis="0 1 0"/>
      <geom size="0.1" mass="1"/><site name="s"/>
      <body pos="0 0 -0.3"><joint name="b" type="ball"/><geom size="0.1" mass="1"/></body>
      </body></worldbody><actuator>{actuator}</actuator></mujoco>""")
    model = sd.load_mjcf(str(path))
    with pytest.raises(sd.ModelError, match=f'refused.xml: MJCF <actuator name="m">: .*{what}'
                                            ".* is not modelled"):
        sd.controllers.MjcfActuators(model, path)


def test_bad_controls(servos):
    """Controls of the wrong shape: a ValueError naming the expected shape and the
    actuators."""
    model = sd.load_mjcf(str(servos))
    for ctrl in (1.0, [1.0, 2.0], np.zeros((2, 3))):
        with pytest.raises(ValueError, match=r"ctrl must have shape \(\.\.\., 4\): one control "
                                             r"per actuator of .*servos.xml \(pos, mot, vel, "
                                             r"gen\)"):
            sd.controllers.MjcfActuators(model, servos, ctrl)


def test_bad_activations(tmp_path):
    """Activations of the wrong shape, to the forces or to next_state: a ValueError naming
    the expected shape and the actuators that have them."""
    pytest.importorskip("mujoco")
    path = tmp_path / "activations.xml"
    path.write_text(ACTIVATIONS)
    actuators = sd.controllers.MjcfActuators(sd.load_mjcf(str(path)), path, [0.1] * 4)
    q = qd = np.zeros(3)
    for state in (0.0, np.zeros(2), np.zeros((5, 4))):
        for call in (lambda: actuators(0.0, q, qd, state),
                     lambda: actuators.next_state(0.0, q, qd, state, 1e-3)):
            with pytest.raises(ValueError, match=r"state must have shape \(\.\.\., 3\): one "
                                                 r"activation per actuator with activation "
                                                 r"dynamics of .*activations.xml \(filter, "
                                                 r"exact, integrator\)"):
                call()


@pytest.mark.slow
def test_the_dog_driven_as_mujoco():
    """dm_control's dog (87 coordinates, 38 actuators, each a filter of 0.05 s: 38
    activations, on joints and fixed tendons) driven 0.3 s by random controls within their
    ranges, contact off, its stops, springs and damping as MuJoCo has them (300 sweeps of
    the limits): mj_step's (Newton converged) to 1e-8 (2e-9 measured; 1e-3 at the limits'
    default 30 sweeps)."""
    mujoco = pytest.importorskip("mujoco")
    path = bundled_mjcf("dm_control", "dog")
    if path is None:
        pytest.skip("dm_control is not installed")
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    m.opt.timestep, m.opt.integrator = 1e-3, mujoco.mjtIntegrator.mjINT_EULER
    m.opt.solver, m.opt.tolerance, m.opt.iterations = mujoco.mjtSolver.mjSOL_NEWTON, 1e-15, 1000
    lo, hi = m.actuator_ctrlrange.T
    u = np.random.default_rng(0).uniform(lo, hi)
    reference = _stepped(m, 300, lambda t: u)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the file's deprecations, MuJoCo's own
        dog = sd.from_mujoco(m, joint_damping=True, joint_springs=True, joint_friction=True,
                             soft_equalities=True)
    driven = sd.controllers.MjcfActuators(dog, path, u)
    assert driven.state_size == m.na == 38
    traj = sd.simulate(dog, dog.q0, None, driven, 0.3, 1e-3, integrator="semi_implicit_euler",
                       joint_limits=sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0,
                                                             iterations=300),
                       joint_friction=sd.RigidFriction.from_mjcf(path, invweight0=True))
    assert np.ptp(reference, axis=0).max() > 1.0
    np.testing.assert_allclose(traj.q, reference, rtol=0, atol=1e-8)


def test_gradients_through_the_activations(tmp_path):
    """jax.grad of where the activations' arm ends after 0.1 s (``sim.rollout``), with
    respect to its four controls (three through activations), equals central differences
    to 1e-7; the rollout equals ``simulate`` to 1e-12."""
    pytest.importorskip("mujoco")
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from screwdyn.sim import rollout

    path = tmp_path / "activations.xml"
    path.write_text(ACTIVATIONS)
    model = sd.load_mjcf(str(path), joint_damping=True)

    def end(c):
        driven = sd.controllers.MjcfActuators(model, path, lambda t: c + 0.0 * t)
        return rollout(model, jnp.zeros(3), jnp.zeros(3), driven, 100, 1e-3,
                       integrator="semi_implicit_euler")[0][-1]

    with jax.enable_x64(True):
        c = jnp.array([0.5, 1.0, 0.3, 0.8])
        ran = sd.simulate(model, np.zeros(3), None,
                          sd.controllers.MjcfActuators(model, path, np.asarray(c)), 0.1, 1e-3,
                          integrator="semi_implicit_euler")
        np.testing.assert_allclose(np.asarray(end(c)), ran.q[-1], rtol=0, atol=1e-12)
        grad = np.asarray(jax.grad(lambda c: end(c)[0])(c))
        h = 1e-6
        central = [(float(end(c + h * e)[0]) - float(end(c - h * e)[0])) / (2 * h)
                   for e in np.eye(4)]
    assert np.abs(grad).min() > 1e-4  # every control moves the shoulder
    np.testing.assert_allclose(grad, central, rtol=0, atol=1e-7)
