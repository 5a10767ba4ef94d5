"""Dry friction as constraints (issue 24): ``RigidFriction``, MuJoCo's friction loss rows of
the joints (MJCF frictionloss) and of the fixed tendons, solved with the dynamics. Coulomb's
closed forms (a block that slides loses exactly its friction force, one loaded below its
friction stays put), MuJoCo's soft friction's creep in closed form, mj_step with the
friction solved together with the contact and the limits, the same numbers on every backend,
the energy it dissipates, and the bad inputs."""
import os

import numpy as np
import pytest

import screwdyn as sd

from conftest import bundled_mjcf

# a 1 kg block on a vertical slider: the joint's own frictionloss and a tendon L = 2 z's
SLIDER = """<mujoco model="dry">
  <option timestep="0.001" integrator="Euler"/>
  <worldbody>
    <body name="block" pos="0 0 1">
      <joint name="z" type="slide" axis="0 0 1" frictionloss="{joint}"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <tendon><fixed name="rope" frictionloss="{tendon}"><joint joint="z" coef="2"/></fixed></tendon>
</mujoco>"""

# a cart with dry friction on a limited rail, its pole (dry friction too) swinging onto the
# floor: contact, limits and friction in one solve
CART = """<mujoco model="dry_cart">
  <option timestep="0.001" integrator="Euler"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="cart" pos="0 0 0.5">
      <joint name="x" type="slide" axis="1 0 0" frictionloss="2" range="-0.3 0.3" limited="true"/>
      <geom type="box" size="0.1 0.1 0.05" mass="2" contype="0" conaffinity="0"/>
      <body name="pole">
        <joint name="swing" type="hinge" axis="0 1 0" frictionloss="0.3"/>
        <geom type="capsule" fromto="0 0 0 0.6 0 0" size="0.04" mass="0.5"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""

G = 9.81


def _file(tmp_path, text, name):
    path = tmp_path / f"{name}.xml"
    path.write_text(text)
    return path


def _stepped(path, steps, qvel=None, converged=False):
    """(steps + 1, nq): MuJoCo's qpos, ``mj_step`` with the file's options (``converged``: its
    Newton solver run to 1e-15 rather than its default tolerance 1e-8)."""
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(str(path))
    if converged:
        m.opt.tolerance, m.opt.iterations = 1e-15, 1000
    d = mujoco.MjData(m)
    if qvel is not None:
        d.qvel[:] = qvel
    out = [d.qpos.copy()]
    for _ in range(steps):
        mujoco.mj_step(m, d)
        out.append(d.qpos.copy())
    return np.array(out)


def _slide(model, friction, backend="numpy", t_final=0.5):
    return sd.simulate(model, np.zeros(1), None, None, t_final, 1e-3, backend=backend,
                       integrator="semi_implicit_euler", joint_friction=friction)


@pytest.mark.parametrize("joint, tendon", [(3.0, 0.0), (0.0, 1.5), (1.0, 1.0)])
def test_a_sliding_block_loses_exactly_its_friction(tmp_path, joint, tendon):
    """A block sliding down against 3 N of dry friction (its joint's 3 N, its tendon's 1.5 N
    along L = 2 z, or 1 N + 2 x 1 N) falls at g - 3 N / 1 kg from the first step on (the row
    saturates at once: no step of free fall, unlike the stick-slip spring), its velocity
    Coulomb's closed form to 1e-12 and its path mj_step's to 1e-12, with the rigid rows and
    with the file's soft ones. The passive work channel holds the friction's work, -3 N
    times the distance semi-implicit Euler's power takes (its velocities' trapezoid, the
    integrator's stages), to 1e-12, and the energy balance closes to Euler's own error
    (2e-3 of the energy exchanged, as without friction)."""
    path = _file(tmp_path, SLIDER.format(joint=joint, tendon=tendon), "slider")
    model = sd.load_mjcf(str(path), joint_friction=True)
    reference = _stepped(path, 500)
    for friction in (sd.RigidFriction(), sd.RigidFriction.from_mjcf(path, invweight0=True)):
        traj = _slide(model, friction)
        np.testing.assert_allclose(traj.qd[:, 0], -(G - 3.0) * traj.t, rtol=0, atol=1e-12)
        np.testing.assert_allclose(traj.q, reference, rtol=0, atol=1e-12)
        drop = -traj.q[-1, 0]
        assert drop > 0.8
        np.testing.assert_allclose(traj.work_passive, 3.0 * np.concatenate(
            [[0.0], np.cumsum(0.5 * (traj.qd[1:, 0] + traj.qd[:-1, 0]) * np.diff(traj.t))]),
            rtol=0, atol=1e-12)
        assert traj.energy_drift() < 3e-3


def test_a_block_held_by_its_friction(tmp_path):
    """A block whose friction exceeds its weight (5 N along L = 2 z: 10 N > 9.81 N) stays put
    with the rigid rows (RigidFriction(): its position 0 to 1e-15), where the sign law cannot
    hold it. MuJoCo's rows are soft (solimpfriction's dmin 0.9): the block creeps at
    v = (1 - d) / d a0 / b along the tendon (a0 = -2 g what the load gives it, b = 2 / (dmax
    timeconst)), that closed form to 1e-9 after 0.5 s, and its path is mj_step's to 1e-12."""
    path = _file(tmp_path, SLIDER.format(joint=0.0, tendon=5.0), "held")
    model = sd.load_mjcf(str(path), joint_friction=True)
    rigid = _slide(model, sd.RigidFriction())
    assert np.abs(rigid.q).max() < 1e-15 and np.abs(rigid.qd).max() < 1e-15
    sign = _slide(model, sd.JointFriction(model="sign"))
    assert np.abs(sign.q).max() > 1e-3
    soft = _slide(model, sd.RigidFriction.from_mjcf(path, invweight0=True))
    np.testing.assert_allclose(soft.q, _stepped(path, 500), rtol=0, atol=1e-12)
    d, dmax, timeconst = 0.9, 0.95, 0.02  # MuJoCo's default solimpfriction, solreffriction
    creep = (1 - d) / d * (-2 * G) / (2 / (dmax * timeconst))  # along L = 2 z
    np.testing.assert_allclose(2 * soft.qd[-1, 0], creep, rtol=1e-9)


def test_friction_with_contact_and_limits_as_in_mujoco(tmp_path):
    """The cart's dry friction, its rail's stop and its pole's contact with the floor are one
    solve, as in MuJoCo: 1 s (the pole lands at 0.35 s, the cart slides to 0.25 m against
    2 N and stops) equals mj_step's to 1e-9 with MuJoCo's Newton solver converged (8e-10
    measured), to 1e-7 at its default tolerance (4e-8); the stick-slip springs leave it by 2
    mm (their first step of free motion from rest, then their deflection)."""
    path = _file(tmp_path, CART, "cart")
    qvel = np.array([1.5, 0.0])
    model, contact, q0 = _cart_scene(path)
    limits = sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0)
    friction = sd.RigidFriction.from_mjcf(path, invweight0=True)
    traj = sd.simulate(model, q0, qvel, None, 1.0, 1e-3, contact=contact, joint_limits=limits,
                       joint_friction=friction, integrator="semi_implicit_euler",
                       record_contact_forces=True)
    assert (np.abs(traj.contact_force).sum(axis=(-2, -1)) > 0).sum() > 500  # it lands
    converged = _stepped(path, 1000, qvel, converged=True)
    np.testing.assert_allclose(traj.q, converged, rtol=0, atol=1e-9)
    np.testing.assert_allclose(traj.q, _stepped(path, 1000, qvel), rtol=0, atol=1e-7)
    springs = sd.simulate(model, q0, qvel, None, 1.0, 1e-3, contact=contact,
                          joint_limits=limits, integrator="semi_implicit_euler")
    assert 1e-3 < np.abs(springs.q - converged).max() < 5e-3
    assert traj.meta["joint_friction"]["rows"] == 2 and traj.meta["joint_friction"]["own"] == 2


def _cart_scene(path):
    robot = sd.load_mjcf(str(path), joint_friction=True)
    scene = sd.Scene("cart")
    scene.add_robot(robot)
    return scene.build(cone="pyramidal", invweight0=True, margin=0.0, iterations=200)


BALL = """<mujoco model="ball_friction">
  <option timestep="0.001" integrator="Euler"/>
  <worldbody>
    <body name="bob" pos="0 0 1">
      <joint name="ball" type="ball" frictionloss="0.2" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.4 0.1 -0.2" size="0.03" mass="1"/>
    </body>
    <body name="block" pos="1 0 1">
      <freejoint name="free"/>
      <geom type="box" size="0.1 0.05 0.02" mass="1"/>
    </body>
  </worldbody>
</mujoco>"""


def test_a_ball_joints_friction_as_in_mujoco(tmp_path):
    """A ball joint's frictionloss is three rows, one per DoF, as MuJoCo's: a tumbling
    pendulum on one (with damping; a free block beside it, no friction) is mj_step's to 1e-12
    over 0.5 s with 500 sweeps (2e-15 measured; the default 30 leave 1.3e-7, the three rows
    coupled through the pendulum's inertia). Its DoFs' inverse weights are MuJoCo's
    dof_invweight0 (computed: the joint's rows have no single one to read)."""
    mujoco = pytest.importorskip("mujoco")
    path = _file(tmp_path, BALL, "ball")
    qvel = np.array([1.0, -2.0, 3.0, 0.5, 0.1, 0.3, 2.0, -1.0, 4.0])
    reference = _stepped(path, 500, qvel, converged=True)
    model = sd.load_mjcf(str(path), joint_friction=True, joint_damping=True)
    friction = sd.RigidFriction.from_mjcf(path, invweight0=True, iterations=500)
    assert friction.inverse_weights == ()
    rows = sd.sim.friction_constraints.FrictionRows(model, friction)
    m = mujoco.MjModel.from_xml_path(str(path))
    np.testing.assert_allclose(rows.weights, m.dof_invweight0[:3], rtol=1e-12)
    traj = sd.simulate(model, model.q0, qvel, None, 0.5, 1e-3, joint_friction=friction,
                       integrator="semi_implicit_euler")
    np.testing.assert_allclose(traj.q, reference, rtol=0, atol=1e-12)
    stick_slip = sd.simulate(model, model.q0, qvel, None, 0.5, 1e-3,
                             integrator="semi_implicit_euler")
    assert np.abs(stick_slip.q - reference).max() > 1e-3


def test_backends_agree(tmp_path):
    """numpy, native code and JAX give the same cart to 1e-12 (friction, limits and
    contact)."""
    path = _file(tmp_path, CART, "cart")
    model, contact, q0 = _cart_scene(path)
    runs = [sd.simulate(model, q0, np.array([1.5, 0.0]), None, 0.6, 1e-3, contact=contact,
                        joint_limits=sd.RigidLimits(), joint_friction=sd.RigidFriction(),
                        integrator="semi_implicit_euler", backend=backend).q
            for backend in ("numpy", "native", "jax")]
    assert np.ptp(runs[0][:, 1]) > 0.5
    for other in runs[1:]:
        np.testing.assert_allclose(other, runs[0], rtol=0, atol=1e-12)


def test_rollout_differentiates_through_the_friction(tmp_path):
    """``sd.sim.rollout`` (a pure JAX function) is ``simulate``'s run with the friction rows,
    and jax.grad of where the cart and pole are after 0.3 s (both sliding against their
    friction, no floor) with respect to their initial velocities is the central difference's
    to 1e-7."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    path = _file(tmp_path, CART.replace('<geom name="floor" type="plane" size="2 2 0.1"/>',
                                        ""), "cart")
    model = sd.load_mjcf(str(path), joint_friction=True)

    def final(qd0):
        qs, _ = sd.sim.rollout(model, jnp.zeros(2), qd0, None, 300, 1e-3,
                               integrator="semi_implicit_euler",
                               joint_friction=sd.RigidFriction())
        return qs[-1].sum()

    with jax.enable_x64(True):
        qd0 = jnp.array([0.6, 2.0])
        reference = sd.simulate(model, np.zeros(2), np.asarray(qd0), None, 0.3, 1e-3,
                                integrator="semi_implicit_euler",
                                joint_friction=sd.RigidFriction())
        assert float(final(qd0)) == pytest.approx(reference.q[-1].sum(), abs=1e-9)
        gradient = np.asarray(jax.grad(final)(qd0))
        e = 1e-6
        central = [(float(final(qd0 + e * np.eye(2)[i])) - float(final(qd0 - e * np.eye(2)[i])))
                   / (2 * e) for i in range(2)]
    assert np.all(np.abs(reference.qd[-1]) > 0.1)  # still sliding: the friction saturated
    np.testing.assert_allclose(gradient, central, atol=1e-7)


def test_dm_controls_finger_spinner():
    """dm_control's finger: its spinner's hinge has a frictionloss of 0.1 N m. Spun at 8 rad/s
    with the finger swinging beside it (actuators off), 1 s equals mj_step's to 1e-11 with
    the file's soft friction row (RigidFriction.from_mjcf), where the stick-slip spring leaves
    it by 6e-4 rad."""
    mujoco = pytest.importorskip("mujoco")
    path = bundled_mjcf("dm_control", "finger")
    if path is None:
        pytest.skip("dm_control is not installed")
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.timestep, m.opt.integrator = 1e-3, mujoco.mjtIntegrator.mjINT_EULER
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_ACTUATION
    d = mujoco.MjData(m)
    d.qvel[:] = qvel = [3.0, -2.0, 8.0]
    reference = [d.qpos.copy()]
    for _ in range(1000):
        mujoco.mj_step(m, d)
        reference.append(d.qpos.copy())
    robot = sd.load_mjcf(path, joint_damping=True, joint_springs=True, joint_friction=True)
    scene = sd.Scene("finger")
    scene.add_robot(robot)
    model, contact, q0 = scene.build(cone="pyramidal", invweight0=True, margin=0.0)
    friction = sd.RigidFriction.from_mjcf(path, invweight0=True)
    assert dict(friction.inverse_weights) == {"hinge": pytest.approx(m.dof_invweight0[2])}
    limits = sd.RigidLimits.from_mjcf(path, invweight0=True, margin=0.0)
    traj = sd.simulate(model, q0, np.array(qvel), None, 1.0, 1e-3, contact=contact,
                       joint_limits=limits, joint_friction=friction,
                       integrator="semi_implicit_euler")
    assert traj.qd[-1, 2] < 8.0 - 1.0  # the friction slowed the spinner
    np.testing.assert_allclose(traj.q, np.array(reference), rtol=0, atol=1e-11)


def test_a_model_without_friction(tmp_path):
    """RigidFriction on a model without dry friction adds no rows: the run is the one without
    it, bit for bit."""
    path = _file(tmp_path, CART.replace('frictionloss="2" ', "").replace(
        ' frictionloss="0.3"', ""), "plain")
    model = sd.load_mjcf(str(path), joint_friction=True)
    runs = [sd.simulate(model, np.zeros(2), None, None, 0.2, 1e-3, joint_friction=friction,
                        integrator="semi_implicit_euler", backend="numpy")
            for friction in (sd.RigidFriction(), sd.JointFriction())]
    np.testing.assert_array_equal(runs[0].q, runs[1].q)
    assert "joint_friction" not in runs[0].meta


def test_bad_input(tmp_path):
    """Bad settings: a ValueError naming the field; a joint that is not the model's or has no
    friction row's tendon: a ModelError naming it and the model's joints; a solreffriction
    that mixes MuJoCo's two forms: a ModelError naming the joint."""
    for kw in ({"timeconst": 0.0}, {"iterations": 0}, {"impedance": 1.5},
               {"regularization": -1.0}, {"joints": {"z": {"stiffness": 1.0}}},
               {"joints": [1, 2]}, {"inverse_weights": {"z": -1.0}}):
        with pytest.raises(ValueError, match="RigidFriction"):
            sd.RigidFriction(**kw)
    path = _file(tmp_path, SLIDER.format(joint=1.0, tendon=1.0), "slider")
    model = sd.load_mjcf(str(path), joint_friction=True)
    with pytest.raises(sd.ModelError, match="RigidFriction.joints names 'elbow', not a joint "
                                            "of model 'dry' .* nor one of its tendons with a "
                                            "frictionloss"):
        _slide(model, sd.RigidFriction(joints={"elbow": {"timeconst": 0.05}}))
    with pytest.raises(ValueError, match="joint_friction must be a JointFriction or a "
                                         "RigidFriction, got RigidLimits"):
        _slide(model, sd.RigidLimits())
    mixed = _file(tmp_path, SLIDER.format(joint=1.0, tendon=0.0).replace(
        'frictionloss="1.0"', 'frictionloss="1.0" solreffriction="0.02 -1"'), "mixed")
    with pytest.raises(sd.ModelError, match='MJCF <joint name="z">: its solreffriction '
                                            r"\(0.02, -1\) mixes"):
        sd.RigidFriction.from_mjcf(mixed)
    assert os.path.exists(mixed)
