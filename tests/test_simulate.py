"""Simulation: closed forms, energy, backends and batches, controllers, files, bad input, plots,
the ``screwdyn simulate`` command."""
import argparse
import math
import os
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn import controllers
from screwdyn._backend import namespace
from conftest import PENDULUM_URDF
from screwdyn.sim import SimulationError, Trajectory, integrate, simulate

G = 9.81


# -- models ---------------------------------------------------------------------------------
def pendulum(length=1.0, mass=1.0):
    """A point mass on a massless rod, hinged about y."""
    b = sd.ModelBuilder("pendulum")
    b.add_link("base")
    b.add_link("bob", mass=mass, com=(0, 0, -length))
    b.add_joint("hinge", "revolute", "base", "bob", axis=(0, 1, 0))
    return b.build()


def arm3():
    """Yaw, then two pitch joints: a spatial arm whose gravity torques couple the joints."""
    b = sd.ModelBuilder("arm3")
    b.add_link("base")
    b.add_link("turret", mass=2.0, com=(0, 0, 0.1), inertia=np.diag([0.02, 0.02, 0.01]))
    b.add_link("upper", mass=1.5, com=(0.25, 0, 0.02), inertia=np.diag([0.005, 0.03, 0.03]))
    b.add_link("fore", mass=1.0, com=(0.2, 0.01, 0), inertia=np.diag([0.003, 0.02, 0.02]))
    b.add_link("tool")
    b.add_joint("yaw", "revolute", "base", "turret", axis=(0, 0, 1))
    b.add_joint("shoulder", "revolute", "turret", "upper", xyz=(0, 0, 0.2), axis=(0, 1, 0))
    b.add_joint("elbow", "revolute", "upper", "fore", xyz=(0.5, 0, 0), axis=(0, 1, 0))
    b.add_joint("tool_mount", "fixed", "fore", "tool", xyz=(0.4, 0, 0))
    return b.build()


BRICK_INERTIA = np.diag([0.1, 0.2, 0.3])


def brick():
    """A free-floating rigid body, centre of mass at its frame origin."""
    b = sd.ModelBuilder("brick")
    b.add_link("brick", mass=2.0, inertia=BRICK_INERTIA)
    return b.build(floating_base=True)


def quat_matrix(quat):
    x, y, z, w = quat
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v)


# -- closed forms ---------------------------------------------------------------------------
def test_pendulum_small_angle_period():
    length, amplitude = 0.7, 1e-2
    traj = simulate(pendulum(length), [amplitude], [0.0], None, 4.0, 1e-3)
    q, t = traj.q[:, 0], traj.t
    down = np.flatnonzero((q[:-1] > 0) & (q[1:] <= 0))  # downward zero crossings
    crossings = t[down] + q[down] / (q[down] - q[down + 1]) * (t[down + 1] - t[down])
    period = np.diff(crossings).mean()
    # the small-angle period with its first amplitude correction (1 + theta0^2 / 16)
    expected = 2 * np.pi * math.sqrt(length / G) * (1 + amplitude ** 2 / 16)
    assert len(crossings) >= 3
    assert period == pytest.approx(expected, rel=1e-7)


def test_free_body_falls_parabolically_and_spins_with_constant_angular_momentum():
    quat0 = unit([0.1, 0.2, 0.3, 0.9])
    q0 = np.concatenate([[0.2, -0.1, 1.0], quat0])
    v0 = np.array([0.3, -0.2, 0.5, 1.0, 3.0, 0.2])  # body frame: linear, angular
    traj = simulate(brick(), q0, v0, None, 2.0, 1e-3)
    t = traj.t[:, None]
    R0 = quat_matrix(quat0)
    expected = q0[:3] + t * (R0 @ v0[:3]) + 0.5 * t ** 2 * np.array([0, 0, -G])
    np.testing.assert_allclose(traj.q[:, :3], expected, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(traj.q[:, 3:], axis=1), 1.0, atol=1e-13)
    L_world = np.array([quat_matrix(q[3:]) @ BRICK_INERTIA @ v[3:]
                        for q, v in zip(traj.q, traj.qd)])
    np.testing.assert_allclose(L_world, np.broadcast_to(L_world[0], L_world.shape), atol=1e-9)
    assert np.ptp(traj.qd[:, 5]) > 0.1  # the body does tumble: its body-frame spin changes
    assert traj.energy_drift() < 1e-9


def test_rk4_is_fourth_order_on_the_rotation_manifold():
    """Lie-group RK4: halving dt divides the angular-momentum error of a tumbling body by ~16."""
    q0 = np.concatenate([[0, 0, 0], unit([0.3, -0.1, 0.2, 0.9])])
    v0 = np.array([0, 0, 0, 2.0, 5.0, 0.5])
    errors = []
    for dt in (4e-3, 2e-3):
        traj = simulate(brick(), q0, v0, None, 1.0, dt, gravity=(0, 0, 0))
        L = np.array([quat_matrix(q[3:]) @ BRICK_INERTIA @ v[3:]
                      for q, v in zip(traj.q, traj.qd)])
        errors.append(np.abs(L - L[0]).max())
    assert 10 < errors[0] / errors[1] < 25


def test_integrate_matches_pinocchio():
    pin = pytest.importorskip("pinocchio")
    pmodel = pin.Model()
    pmodel.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
    rng = np.random.default_rng(3)
    for scale in (3.0, 1e-3, 1e-9, 0.0):
        q = np.concatenate([rng.normal(size=3), unit(rng.normal(size=4))])
        v = rng.normal(size=6) * scale
        ours, theirs = integrate(brick(), q, v), pin.integrate(pmodel, q, v)
        np.testing.assert_allclose(ours[:3], theirs[:3], atol=1e-14)
        sign = np.sign(np.dot(ours[3:], theirs[3:]))  # q and -q are the same rotation
        np.testing.assert_allclose(ours[3:], sign * theirs[3:], atol=1e-14)


# -- energy ---------------------------------------------------------------------------------
def test_passive_puma_energy_drift_rk4_and_semi_implicit_euler():
    robots = pytest.importorskip("screwdyn.model.robots")
    model = robots.load("puma560")
    q0 = np.array([0.0, 0.5, -0.3, 0.2, 0.4, 0.1])
    rk4 = simulate(model, q0, None, None, 10.0, 1e-3, integrator="rk4")
    assert rk4.t[-1] == pytest.approx(10.0)
    assert rk4.energy_scale() > 10.0  # it really swings: tens of joules exchanged
    assert rk4.energy_drift() < 1e-6
    euler = simulate(model, q0, None, None, 10.0, 1e-3, integrator="semi_implicit_euler")
    # first order but symplectic-like: a bounded error, far larger than RK4's
    assert 1e-6 < euler.energy_drift() < 2e-2


def test_semi_implicit_euler_energy_error_is_first_order():
    drift = [simulate(arm3(), [0.3, 0.8, -0.5], [1.0, 0.0, 0.5], None, 2.0, dt,
                      integrator="semi_implicit_euler").energy_drift() for dt in (2e-3, 1e-3)]
    assert 1.5 < drift[0] / drift[1] < 2.7


def test_power_balance_with_damping_and_torques():
    """dE/dt = qd . tau - damping qd^2: energy changes by exactly the work done."""
    model = arm3().with_joint_parameters(damping={"yaw": 0.3, "shoulder": 0.5, "elbow": 0.2})
    amplitude = np.array([2.0, 5.0, 3.0])

    def torque_profile(t):
        xp = namespace(t)
        return amplitude * xp.sin(np.array([3.0, 2.0, 5.0]) * t)

    traj = simulate(model, [0.1, 0.5, -0.4], [0.5, -0.2, 0.1], torque_profile, 2.0, 1e-3)
    change = traj.energy[-1] - traj.energy[0]
    work, dissipated = traj.work()[-1], traj.dissipated()[-1]
    # the integrator's own bookkeeping against the trapezoidal rule on the samples
    power = np.sum(traj.qd * traj.tau, axis=-1)
    np.testing.assert_allclose(work, np.trapezoid(power, traj.t), rtol=1e-5)
    loss = np.sum(model.damping * traj.qd ** 2, axis=-1)
    np.testing.assert_allclose(dissipated, np.trapezoid(loss, traj.t), rtol=1e-5)
    assert dissipated > 0.05 * traj.energy_scale()  # damping matters here
    assert abs(change - (work - dissipated)) < 1e-8 * traj.energy_scale()
    assert traj.energy_drift() < 1e-8
    # the same with a sample every 10 steps: the balance does not depend on what is recorded
    sparse = simulate(model, [0.1, 0.5, -0.4], [0.5, -0.2, 0.1], torque_profile, 2.0, 1e-3,
                      record_every=10)
    np.testing.assert_allclose(sparse.work()[-1], work, rtol=1e-12)
    assert sparse.energy_drift() < 1e-8


def wheel(damping):
    """A wheel on a vertical axle with viscous damping (N m s/rad), inertia 0.005 kg m^2, no
    gravity: its velocity decays as exp(-damping t / I) and its kinetic energy into heat."""
    b = sd.ModelBuilder("wheel")
    b.add_link("base")
    b.add_link("wheel", mass=1.0, inertia=np.diag([0.0026, 0.0026, 0.005]))
    b.add_joint("axle", "revolute", "base", "wheel", axis=(0, 0, 1))
    return b.build().with_joint_parameters(damping=damping).with_gravity((0.0, 0.0, 0.0))


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_semi_implicit_euler_integrates_the_damping_implicitly(backend):
    """Semi-implicit Euler solves (I + dt b) qd1 = I qd, as MuJoCo's Euler does: the wheel's
    velocity falls by exactly 1 / (1 + dt b / I) a step, at dt b / I = 0.1 and at 5, where
    explicit damping (1 - dt b / I a step) would grow fourfold a step; the energy balance
    holds to rounding (the damping's work taken at the velocity the step ends with). RK4
    keeps explicit damping: its factor a step is exp(z)'s Taylor polynomial to z^4, z = -dt b
    / I."""
    model = wheel(0.5)
    for dt in (1e-3, 5e-2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # stable: no warning about the damper
            traj = simulate(model, [0.0], [3.0], None, 1.0, dt,
                            integrator="semi_implicit_euler", backend=backend)
        steps = np.arange(len(traj.t))
        np.testing.assert_allclose(traj.qd[:, 0], 3.0 / (1 + dt * 0.5 / 0.005) ** steps,
                                   rtol=1e-12, atol=1e-300)
        assert np.abs(traj.energy_error()).max() < 1e-15
        assert traj.dissipated()[-1] == pytest.approx(0.5 * 0.005 * 9.0, rel=1e-9)
    traj = simulate(model, [0.0], [3.0], None, 1.0, 1e-3, integrator="rk4", backend=backend)
    z = -0.1
    np.testing.assert_allclose(traj.qd[:, 0], 3.0 * (1 + z + z ** 2 / 2 + z ** 3 / 6
                                                     + z ** 4 / 24) ** np.arange(1001),
                               rtol=1e-12, atol=1e-300)
    with pytest.warns(UserWarning, match=r"dt = 0.05 s is too large for the damping of 'axle' "
                                         r"\(b = 0.5, inertia 0.005\): the largest stable step "
                                         r"of rk4 there is about 0.027.*semi_implicit_euler"):
        with pytest.raises(SimulationError):
            simulate(model, [0.0], [3.0], None, 1.0, 5e-2, integrator="rk4", backend=backend)


# -- backends and batches -------------------------------------------------------------------
@pytest.mark.parametrize("integrator", ["rk4", "semi_implicit_euler", "euler"])
def test_jax_rollout_equals_numpy_rollout(integrator):
    pytest.importorskip("jax")
    for model, q0, qd0 in ((arm3(), [0.3, 0.8, -0.5], [1.0, 0.0, 0.5]),
                           (brick(), np.r_[0, 0, 1, unit([0.1, 0.2, 0.3, 0.9])],
                            [0.3, -0.2, 0.5, 1.0, 3.0, 0.2])):
        runs = [simulate(model, q0, qd0, None, 0.1, 1e-3, integrator=integrator, backend=b)
                for b in ("numpy", "jax", "native")]
        assert [r.meta["backend"] for r in runs] == ["numpy", "jax", "native"]
        for name in ("q", "qd", "qdd", "tau", "kinetic", "potential", "work_in",
                     "work_passive"):
            for other in runs[1:]:
                np.testing.assert_allclose(getattr(runs[0], name), getattr(other, name),
                                           rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("backend", ["native", "jax", "numpy"])
def test_batched_rollouts_equal_one_by_one(backend):
    rng = np.random.default_rng(0)
    q0 = rng.uniform(-1, 1, size=(2, 2, 3))
    qd0 = rng.uniform(-1, 1, size=(2, 2, 3))
    pd = controllers.JointPD(arm3(), kp=[20.0, 30.0, 10.0], kd=2.0, q_ref=[0.2, 0.1, 0.3])
    batch = simulate(arm3(), q0, qd0, pd, 0.05, 1e-3, backend=backend)
    assert batch.batch_shape == (2, 2)
    assert batch.q.shape == (2, 2, 51, 3)
    for i in range(2):
        for j in range(2):
            one = simulate(arm3(), q0[i, j], qd0[i, j], pd, 0.05, 1e-3, backend=backend)
            for name in ("q", "qd", "qdd", "tau", "kinetic"):
                np.testing.assert_allclose(getattr(batch[i, j], name), getattr(one, name),
                                           rtol=1e-13, atol=1e-13)
                if backend == "native":  # the same program for one rollout and a batch
                    assert np.array_equal(getattr(batch[i, j], name), getattr(one, name))


def test_native_rollouts_with_tables_controllers_and_a_floating_base():
    """The native backend against the numpy backend: a torque table per rollout, a computed-
    torque controller with a reference, a free-flying body, held control, record_every."""
    model = arm3()
    rng = np.random.default_rng(5)
    table = rng.normal(size=(2, 60, 3))
    reference = controllers.sinusoid([0.1, 0.2, 0.3], 0.2, 1.5)
    cases = [(model, rng.uniform(-1, 1, (2, 3)), None, table, {}),
             (model, rng.uniform(-1, 1, (2, 3)), None, table[0], {"record_every": 4}),
             (model, [0.3, 0.2, 0.1], None,
              controllers.ComputedTorque(model, reference, kp=100.0, kd=20.0), {}),
             (model, [0.3, 0.2, 0.1], [0.1, 0.0, 0.0],
              controllers.JointPD(model, kp=[20.0, 30.0, 10.0], kd=2.0), {"control": "hold"}),
             (brick(), np.r_[0, 0, 1, unit([0.1, 0.2, 0.3, 0.9])], [0.3, -0.2, 0.5, 1.0, 3.0, 0.2],
              None, {"integrator": "semi_implicit_euler"})]
    for m, q0, qd0, controller, kw in cases:
        runs = [simulate(m, q0, qd0, controller, 0.05, 1e-3, backend=b, **kw)
                for b in ("numpy", "native")]
        assert runs[1].meta["backend"] == "native"
        assert runs[0].q.shape == runs[1].q.shape
        for name in ("q", "qd", "qdd", "tau", "work_in"):
            np.testing.assert_allclose(getattr(runs[0], name), getattr(runs[1], name),
                                       rtol=1e-11, atol=1e-11, err_msg=name)


def test_native_gains_are_inputs_of_one_program(monkeypatch):
    """New gains of the same controller reuse the traced program (traced once, not twice) and
    act: each run equals numpy's with its gains."""
    from screwdyn.execution import trace

    traced = []  # the shapes of every program traced: a step program has the state input "s"
    original = trace.trace
    monkeypatch.setattr(trace, "trace",
                        lambda fn, shapes: traced.append(shapes) or original(fn, shapes))
    model = arm3()
    runs = {}
    for kp in (21.0, 63.0):
        pd = controllers.JointPD(model, kp=kp, kd=2.5, q_ref=[0.2, 0.1, 0.3])
        runs[kp] = [simulate(model, [0.3, 0.2, 0.1], None, pd, 0.05, 1e-3, backend=b)
                    for b in ("numpy", "native")]
        np.testing.assert_allclose(runs[kp][0].q, runs[kp][1].q, rtol=1e-11, atol=1e-12)
    assert not np.allclose(runs[21.0][1].q, runs[63.0][1].q)
    assert sum("s" in shapes for shapes in traced) <= 1  # once, or none: from the disk cache


class PerRolloutGain(controllers.Controller):
    """Joint damping with one gain per rollout (its gain has the batch's shape)."""

    params = ("kd",)
    name = "per-rollout damping"

    def __init__(self, kd):
        self.kd = np.asarray(kd, dtype=float)

    def __call__(self, t, q, qd):
        return -self.kd[..., None] * qd


def test_gains_per_rollout_are_not_native_and_auto_compiles_them_with_jax():
    model, q0 = arm3(), [[0.3, 0.2, 0.1], [0.1, -0.2, 0.4]]
    damping = PerRolloutGain([1.0, 5.0])
    with pytest.raises(ValueError, match="backend='native': the controller per-rollout damping "
                                         "returns joint forces of the batch's shape"):
        simulate(model, q0, [1.0, 0.0, 0.5], damping, 0.02, 1e-3, backend="native")
    runs = [simulate(model, q0, [1.0, 0.0, 0.5], damping, 0.02, 1e-3, backend=b)
            for b in ("auto", "numpy")]
    assert runs[0].meta["backend"] == "jax"
    np.testing.assert_allclose(runs[0].q, runs[1].q, rtol=1e-12, atol=1e-12)
    # one state, one gain: native
    one = simulate(model, q0[1], [1.0, 0.0, 0.5], PerRolloutGain(5.0), 0.02, 1e-3)
    assert one.meta["backend"] == "native"
    np.testing.assert_allclose(one.q, runs[1].q[1], rtol=1e-11, atol=1e-12)


def test_torque_table_is_applied_step_by_step():
    """A torque table (steps, nv) equals the same torques given as a profile of time."""
    model, dt = arm3(), 1e-3
    table = np.column_stack([np.linspace(0, 1, 300), np.full(300, -2.0), np.zeros(300)])
    by_table = simulate(model, [0, 0.3, 0.2], None, table, 0.3, dt)
    profile = lambda t: table[min(int(round(t / dt)), 299)]  # noqa: E731 (numpy only)
    by_profile = simulate(model, [0, 0.3, 0.2], None, profile, 0.3, dt, backend="numpy",
                          control="hold")
    np.testing.assert_allclose(by_table.tau[:-1], table)
    np.testing.assert_allclose(by_table.q, by_profile.q, rtol=1e-12, atol=1e-12)


def test_record_every_keeps_every_kth_sample():
    model = arm3()
    full = simulate(model, [0.3, 0.8, -0.5], None, None, 0.5, 1e-3)
    sparse = simulate(model, [0.3, 0.8, -0.5], None, None, 0.5, 1e-3, record_every=10)
    assert sparse.n_samples == 51
    np.testing.assert_allclose(sparse.t, full.t[::10])
    np.testing.assert_allclose(sparse.q, full.q[::10], rtol=1e-13, atol=1e-13)


# -- controllers ----------------------------------------------------------------------------
def test_gravity_compensation_holds_a_pose():
    model = arm3()
    q0 = np.array([0.4, 0.9, -1.2])
    passive = simulate(model, q0, None, None, 1.0, 1e-3)
    held = simulate(model, q0, None, controllers.GravityCompensation(model), 1.0, 1e-3)
    assert np.abs(passive.q - q0).max() > 0.1  # without it the arm falls
    assert np.abs(held.q - q0).max() < 1e-9
    assert np.abs(held.qd).max() < 1e-9
    np.testing.assert_allclose(held.tau[0], sd.gravity_torques(model, q0), atol=1e-12)


def test_joint_pd_converges():
    model, q_ref = arm3(), np.array([0.5, 0.4, -0.6])
    kp, kd = 80.0, 20.0
    compensated = controllers.JointPD(model, kp, kd, q_ref, gravity_compensation=True)
    traj = simulate(model, np.zeros(3), None, compensated, 3.0, 1e-3)
    assert np.abs(traj.q[-1] - q_ref).max() < 1e-4
    assert np.abs(traj.qd[-1]).max() < 1e-3
    # plain PD settles where the spring holds gravity: kp (q_ref - q) = g(q)
    plain = simulate(model, np.zeros(3), None, controllers.JointPD(model, kp, kd, q_ref),
                     4.0, 1e-3)
    q_end = plain.q[-1]
    assert np.abs(q_end - q_ref).max() > 1e-2
    np.testing.assert_allclose(kp * (q_ref - q_end), sd.gravity_torques(model, q_end),
                               atol=1e-4)


def test_computed_torque_tracks_a_reference():
    model = arm3()
    reference = controllers.sinusoid(center=[0.2, 0.6, -0.8], amplitude=[0.5, 0.3, 0.4],
                                     frequency=[0.5, 0.7, 0.9])
    omega = 10.0
    ct = controllers.ComputedTorque(model, reference, kp=omega ** 2, kd=2 * omega)
    q_r0, qd_r0, _ = reference(0.0)
    on = simulate(model, q_r0, qd_r0, ct, 2.0, 1e-3)
    q_r = np.array([reference(t)[0] for t in on.t])
    assert np.abs(on.q - q_r).max() < 1e-9  # started on the reference, it stays on it
    e0 = np.array([0.1, -0.05, 0.08])
    off = simulate(model, q_r0 + e0, qd_r0, ct, 2.0, 1e-3)
    error = np.array([reference(t)[0] for t in off.t]) - off.q
    # an exact model makes e'' + 2 w e' + w^2 e = 0: e(t) = e0 (1 + w t) exp(-w t)
    closed_form = np.outer((1 + omega * off.t) * np.exp(-omega * off.t), -e0)
    np.testing.assert_allclose(error, closed_form, atol=1e-9)
    # a digital controller holding its output for dt lags by about dt |d3q_r/dt3| / (2 kp)
    held = simulate(model, q_r0, qd_r0, ct, 2.0, 1e-3, control="hold")
    lag = np.abs(held.q - q_r).max()
    jerk = (2 * np.pi * 0.9) ** 3 * 0.4
    assert 0.2 < lag / (1e-3 * jerk / (2 * omega ** 2)) < 5


def test_builtin_controllers_leave_a_floating_base_unactuated():
    model = brick()
    q = np.r_[0, 0, 1, unit([0.1, 0.2, 0.3, 0.9])]
    assert np.all(controllers.GravityCompensation(model)(0.0, q, np.zeros(6)) == 0)
    with pytest.raises(ValueError, match="fixed-base"):
        controllers.ComputedTorque(model, q, 1.0, 1.0)


# -- files ----------------------------------------------------------------------------------
def test_trajectory_npz_and_csv_round_trip(tmp_path):
    model = arm3()
    traj = simulate(model, [[0.3, 0.8, -0.5], [0.1, 0.0, 0.2]], None,
                    controllers.GravityCompensation(model), 0.05, 1e-3)
    loaded = Trajectory.load(traj.save(tmp_path / "run.npz"))
    for name in Trajectory.ARRAYS:
        np.testing.assert_array_equal(getattr(loaded, name), getattr(traj, name))
    assert loaded.meta["integrator"] == "rk4" and loaded.meta["model"] == "arm3"
    assert loaded.meta["v_names"] == ["yaw", "shoulder", "elbow"]
    with pytest.raises(ValueError, match="one rollout"):
        traj.save(tmp_path / "run.csv")
    one = traj[1]
    loaded = Trajectory.load(one.save(tmp_path / "run.csv"))
    for name in Trajectory.ARRAYS:
        np.testing.assert_array_equal(getattr(loaded, name), getattr(one, name))
    assert loaded.meta["controller"] == "gravity compensation"
    header = (tmp_path / "run.csv").read_text().splitlines()[1]
    assert header.startswith("t,q:yaw,q:shoulder,q:elbow,qd:yaw")


def test_floating_base_csv_names_quaternion_columns(tmp_path):
    q0 = np.r_[0, 0, 1, unit([0.1, 0.2, 0.3, 0.9])]
    traj = simulate(brick(), q0, None, None, 0.01, 1e-3)
    traj.save(tmp_path / "b.csv")
    header = (tmp_path / "b.csv").read_text().splitlines()[1].split(",")
    assert header[1:8] == [f"q:root_joint.{c}" for c in ("x", "y", "z", "qx", "qy", "qz", "qw")]
    assert Trajectory.load(tmp_path / "b.csv").q.shape == (11, 7)


# -- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["native", "jax", "numpy"])
def test_wrong_controller_shape_names_step_zero(backend):
    model = arm3()
    expected = r"step 0 \(t = 0 s\).*shape \(2,\); expected \(3,\)"
    with pytest.raises(SimulationError, match=expected) as e:
        simulate(model, np.zeros(3), None, lambda t, q, qd: qd[..., :2], 0.1, 1e-3,
                 backend=backend)
    assert e.value.step == 0 and e.value.trajectory.n_samples == 0


@pytest.mark.parametrize("backend", ["native", "jax", "numpy"])
def test_nan_from_controller_keeps_the_trajectory_before_it(backend):
    model = arm3()

    def fails_after(t_bad):
        def controller(t, q, qd):
            xp = namespace(t, q)
            return -qd + xp.where(t >= t_bad, xp.nan, 0.0)
        return controller

    # RK4 calls the controller at t_k, t_k + dt/2 and t_k + dt: t = 0.2505 (step 250) is the
    # first call at or after 0.2502; holding, t = 0.251 (step 251) is
    for control, step in (("continuous", 250), ("hold", 251)):
        with pytest.raises(SimulationError, match="non-finite joint force") as e:
            simulate(model, [0.3, 0.8, -0.5], None, fails_after(0.2502), 1.0, 1e-3,
                     backend=backend, control=control)
        err = e.value
        assert err.step == step and err.time == pytest.approx(step * 1e-3)
        assert err.trajectory.n_samples == step  # samples 0 .. step - 1, every one sound
        assert np.all(np.isfinite(err.trajectory.tau)) and np.all(np.isfinite(err.trajectory.q))
        assert err.trajectory.t[-1] == pytest.approx((step - 1) * 1e-3)


@pytest.mark.parametrize("backend", ["native", "jax", "numpy"])
def test_divergence_raises_with_the_partial_trajectory(backend):
    model = arm3()
    stiff = controllers.JointPD(model, kp=1e5, kd=0.0, q_ref=[0.1, 0.1, 0.1])
    with pytest.raises(SimulationError, match="diverged") as e:
        simulate(model, np.zeros(3), None, stiff, 2.0, 1e-2, integrator="euler",
                 backend=backend)
    partial = e.value.trajectory
    assert 0 < partial.n_samples == e.value.step < 200
    assert np.all(np.isfinite(partial.q)) and np.all(np.abs(partial.qd) <= 1e6)


@pytest.mark.parametrize("backend", ["native", "jax", "auto"])
def test_batch_failure_names_the_rollout(backend):
    model = pendulum()

    def fails_for_large_angles(t, q, qd):
        xp = namespace(t, q)
        return xp.where(xp.abs(q) > 0.5, xp.nan, 0.0)

    with pytest.raises(SimulationError, match=r"rollout \(1,\)") as e:
        simulate(model, [[0.1], [0.6], [0.2]], None, fails_for_large_angles, 0.5, 1e-3,
                 backend=backend)
    assert e.value.step == 0 and e.value.rollout == (1,)
    assert e.value.trajectory.meta["backend"] == ("native" if backend == "auto" else backend)


def test_controller_exception_is_reported_with_its_step():
    def breaks_later(t, q, qd):
        if t > 0.0102:  # first met at step 10's midpoint, t = 0.0105
            raise RuntimeError("sensor unplugged")
        return 0 * qd

    with pytest.raises(SimulationError, match=r"step 10 \(t = 0.01 s\).*sensor unplugged") as e:
        simulate(pendulum(), [0.1], None, breaks_later, 0.1, 1e-3, backend="numpy")
    assert isinstance(e.value.__cause__, RuntimeError)
    assert e.value.trajectory.n_samples == 10


@pytest.mark.parametrize("dt", [0.0, -1e-3, float("nan"), float("inf")])
def test_bad_time_step_is_refused(dt):
    with pytest.raises(ValueError, match="dt must be positive"):
        simulate(pendulum(), [0.1], None, None, 1.0, dt)


def test_other_bad_inputs_are_refused():
    model = arm3()
    with pytest.raises(ValueError, match=r"q0 must have shape \(\.\.\., 3\)"):
        simulate(model, np.zeros(2), None, None, 0.1)
    with pytest.raises(ValueError, match="unknown integrator"):
        simulate(model, np.zeros(3), None, None, 0.1, integrator="leapfrog")
    with pytest.raises(ValueError, match="t_final must be positive"):
        simulate(model, np.zeros(3), None, None, -1.0)
    with pytest.raises(ValueError, match="table has 5 rows"):
        simulate(model, np.zeros(3), None, np.zeros((5, 3)), 0.1, 1e-3)
    with pytest.raises(ValueError, match="unit norm"):
        simulate(brick(), np.r_[0, 0, 0, 0, 0, 0, 2.0], None, None, 0.1)
    rigid = sd.ModelBuilder("rigid")
    rigid.add_link("base", mass=1.0)
    with pytest.raises(ValueError, match="no degrees of freedom"):
        simulate(rigid.build(), np.zeros(0), None, None, 0.1)


def test_numpy_only_controller_falls_back_to_numpy_with_a_warning():
    pytest.importorskip("jax")
    model = pendulum()

    def numpy_only(t, q, qd):
        return -np.asarray(qd)

    with pytest.warns(UserWarning, match="cannot be traced by JAX"):
        traj = simulate(model, [0.1], None, numpy_only, 0.05, 1e-3)
    assert traj.meta["backend"] == "numpy"
    np.testing.assert_allclose(traj.tau, -traj.qd)
    with pytest.raises(ValueError, match="cannot be traced"):
        simulate(model, [0.1], None, numpy_only, 0.05, 1e-3, backend="jax")


def test_simulation_leaves_the_global_jax_precision_alone():
    jax = pytest.importorskip("jax")
    import warnings

    before = jax.config.jax_enable_x64
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no float32 warning either: the rollout runs in float64
        traj = simulate(pendulum(), [0.1], None, None, 0.01, 1e-3, backend="jax")
    assert traj.q.dtype == np.float64
    assert jax.config.jax_enable_x64 == before


# -- pictures -------------------------------------------------------------------------------
@pytest.fixture
def agg():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    return matplotlib


def test_plots_write_files(tmp_path, agg):
    from screwdyn import plot

    model = arm3()
    traj = simulate(model, [[0.3, 0.8, -0.5], [0.0, 0.5, 0.5]], None, None, 0.2, 1e-3)
    traj.plot(tmp_path / "traj.png")
    plot.draw_robot(model, [0.3, 0.8, -0.5], path=tmp_path / "robot.png")
    traj[0].animate(tmp_path / "robot.gif", fps=10)
    for name in ("traj.png", "robot.png", "robot.gif"):
        assert (tmp_path / name).stat().st_size > 1000
    from PIL import Image

    with Image.open(tmp_path / "robot.gif") as gif:
        assert gif.n_frames == 3  # 0.2 s at 10 frames per second: t = 0, 0.1, 0.2


def test_skeleton_joins_every_link_to_its_parent():
    from screwdyn.plot import skeleton

    model = arm3()
    names = model.link_names
    pairs = {(names[a], names[b]) for a, b in skeleton(model)}
    assert pairs == {("base", "turret"), ("turret", "upper"), ("upper", "fore"),
                     ("fore", "tool")}


def test_missing_matplotlib_gives_a_clear_error(monkeypatch):
    import sys

    from screwdyn import plot

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"screwdyn\[plot\]"):
        plot.draw_robot(pendulum(), [0.1])


# -- the command ----------------------------------------------------------------------------


def parse(argv):
    from screwdyn import cli_simulate

    parser = argparse.ArgumentParser()
    cli_simulate.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_simulate_run(tmp_path, capsys, agg):
    from screwdyn import cli_simulate

    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM_URDF)
    args = parse(["simulate", str(urdf), "--duration", "0.3", "--dt", "1e-3", "--q0", "0.4",
                  "--controller", "pd-gravity", "--kp", "50", "--kd", "10",
                  "--out", str(tmp_path / "t.npz"), "--plot", str(tmp_path / "t.png"),
                  "--quiet", "--no-compile-cache"])
    assert args.func is cli_simulate.run
    assert cli_simulate.run(args) == 0
    out = capsys.readouterr().out
    assert "real-time factor" in out and "energy" in out and "max |tau|" in out
    traj = Trajectory.load(tmp_path / "t.npz")
    assert traj.n_samples == 301 and traj.meta["controller"] == "joint PD + gravity compensation"
    assert abs(traj.q[-1, 0]) < abs(traj.q[0, 0])  # PD pulls the pendulum back to 0
    assert (tmp_path / "t.png").stat().st_size > 1000


def test_cli_simulate_failure_keeps_the_samples(tmp_path, capsys):
    from screwdyn import cli_simulate

    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM_URDF)
    args = parse(["simulate", str(urdf), "--duration", "2", "--dt", "0.05", "--q0", "0.4",
                  "--controller", "pd", "--kp", "1e6", "--kd", "0", "--integrator", "euler",
                  "--out", str(tmp_path / "t.csv"), "--quiet", "--no-compile-cache"])
    assert cli_simulate.run(args) == 2  # one line, status 2 (#26)
    assert "diverged" in capsys.readouterr().err
    partial = Trajectory.load(tmp_path / "t.csv")
    assert 0 < partial.n_samples < 40 and np.all(np.isfinite(partial.q))


def test_progress_bar_reports_through_tqdm():
    import io

    from screwdyn.sim.progress import ProgressBar

    stream = io.StringIO()
    bar = ProgressBar(500, 1e-3, stream=stream, delay=0.0)
    traj = simulate(pendulum(), [0.1], None, None, 0.5, 1e-3, progress=bar, backend="numpy")
    bar.close()
    assert traj.n_samples == 501
    assert bar.bar.n == 500  # every step counted
    text = stream.getvalue()
    assert "simulating: 100%" in text and "t = 0.5 s" in text


def test_screwdyn_command_has_the_simulate_subcommand(tmp_path, capsys):
    cli = pytest.importorskip("screwdyn.cli")
    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM_URDF)
    assert cli.main(["simulate", str(urdf), "--duration", "0.05", "--q0", "0.2", "--quiet",
                     "--no-compile-cache", "--out", str(tmp_path / "t.npz")]) == 0
    assert "real-time factor" in capsys.readouterr().out
    assert Trajectory.load(tmp_path / "t.npz").n_samples == 51
    assert cli.main(["simulate", str(urdf), "--dt", "-1", "--quiet"]) == 2
    assert "dt must be positive" in capsys.readouterr().err


def _has_first_code(folder, rollout):
    """Whether the disk cache in ``folder`` holds ``rollout``'s first code (level 0)."""
    from screwdyn.execution import native

    return os.path.exists(os.path.join(folder, native.level_key(rollout._store[0], 0) + ".o"))


def test_native_rollouts_switch_to_optimised_code_in_the_same_bits(tmp_path, monkeypatch):
    """A fresh step program first runs LLVM's level-0 code; once it has run as long as that
    took to make, level 2 is compiled in the background and used from the next call on, and
    the disk cache keeps it. The two give the same bits, so the switch changes nothing, even
    in the middle of a run."""
    from screwdyn.execution import cache, native
    from screwdyn.execution import rollout as native_rollout

    native.wait_for_optimisation()  # nothing queued by an earlier test is still being made
    monkeypatch.setattr(cache, "_STATE", dict(cache._STATE, directory=str(tmp_path)))
    monkeypatch.setattr(native_rollout, "_ROLLOUTS", native_rollout.Store("test rollouts"))
    model = arm3()
    pd = controllers.JointPD(model, kp=[20.0, 30.0, 10.0], kd=2.0, q_ref=[0.2, 0.1, 0.3])
    q0 = [[0.3, 0.2, 0.1], [-0.2, 0.4, 0.0]]
    first = simulate(model, q0, None, pd, 0.2, 1e-3, backend="native")
    (compiled,) = native_rollout._ROLLOUTS.values()
    assert (compiled.level, compiled.source) == (0, "compiled")
    assert _has_first_code(tmp_path, compiled)
    compiled.running = compiled.compile_time  # as if it had run that long: the next call
    again = simulate(model, q0, None, pd, 0.2, 1e-3, backend="native")  # queues level 2
    native.wait_for_optimisation()
    assert compiled.level == 2 and compiled.optimise_time > 0 and compiled.error is None
    assert not _has_first_code(tmp_path, compiled)  # level 2 replaced it on disk
    optimised = simulate(model, q0, None, pd, 0.2, 1e-3, backend="native")
    for run in (again, optimised):
        for name in ("q", "qd", "qdd", "tau", "work_in"):
            assert np.array_equal(getattr(run, name), getattr(first, name)), name
    monkeypatch.setattr(native_rollout, "_ROLLOUTS", native_rollout.Store("fresh"))
    loaded = simulate(model, q0, None, pd, 0.2, 1e-3, backend="native")
    (compiled,) = native_rollout._ROLLOUTS.values()
    assert (compiled.level, compiled.source) == (2, "disk cache")  # the optimised code kept
    assert np.array_equal(loaded.q, first.q)


def test_a_process_that_ends_before_level_2_leaves_its_first_code(tmp_path, monkeypatch):
    """Until level 2 is made, the disk cache holds the first code (level 0) and the seconds it
    took to make: the next process loads it instead of tracing and compiling (the same bits),
    queues level 2 once it has run that long, traces the program again only to make level 2,
    and the process after that loads level 2."""
    from screwdyn.execution import cache, llvm, native, trace
    from screwdyn.execution import rollout as native_rollout

    native.wait_for_optimisation()
    monkeypatch.setattr(cache, "_STATE", dict(cache._STATE, directory=str(tmp_path)))
    model = arm3()
    pd = controllers.JointPD(model, kp=[20.0, 30.0, 10.0], kd=2.0, q_ref=[0.2, 0.1, 0.3])
    q0 = [[0.3, 0.2, 0.1], [-0.2, 0.4, 0.0]]

    def process():  # a new process's memory: the program is found on disk or made again
        monkeypatch.setattr(native_rollout, "_ROLLOUTS", native_rollout.Store("a process"))
        run = simulate(model, q0, None, pd, 0.2, 1e-3, backend="native")
        (compiled,) = native_rollout._ROLLOUTS.values()
        return run, compiled

    with monkeypatch.context() as ends_early:  # ends before level 2 is made
        ends_early.setattr(native_rollout.NativeRollout, "optimise", lambda self, wait=True: self)
        first, compiled = process()
    assert (compiled.level, compiled.source) == (0, "compiled")
    made_in = compiled.compile_time
    traced, compiled_here = [], []
    trace_program, compile_object = trace.trace, llvm.compile_object
    monkeypatch.setattr(trace, "trace", lambda f, shapes: traced.append("s" in shapes)
                        or trace_program(f, shapes))  # "s": a step program, not a function
    monkeypatch.setattr(llvm, "compile_object",
                        lambda ir, opt=2: compiled_here.append(opt) or compile_object(ir, opt))
    again, compiled = process()  # from the first code (level 2 may be queued meanwhile)
    assert compiled.source == "disk cache" and compiled_here == []
    assert compiled.made_in == made_in and compiled.compile_time != made_in
    assert _has_first_code(tmp_path, compiled)
    compiled._source()  # the background thread's preparation, as if it ran first
    compiled.optimise(wait=True)  # level 2, in the child, from the program traced again
    assert compiled.level == 2 and compiled.error is None
    assert not _has_first_code(tmp_path, compiled)  # level 2 replaced it on disk
    assert sum(traced) == 1  # for level 2 only, and once: the first code was loaded
    optimised, compiled = process()
    assert (compiled.level, compiled.source) == (2, "disk cache") and sum(traced) == 1
    for run in (again, optimised):
        for name in ("q", "qd", "qdd", "tau", "work_in"):
            assert np.array_equal(getattr(run, name), getattr(first, name)), name


class _PIDSlider(controllers.Controller):
    """A PID controller on a vertical slider: its state is the integral of the error."""

    params = ("kp", "ki", "kd")
    state_size = 1

    def __init__(self, kp, ki, kd):
        self.kp, self.ki, self.kd = kp, ki, kd

    def __call__(self, t, q, qd, state):
        return -self.kp * q - self.kd * qd - self.ki * state

    def next_state(self, t, q, qd, state, dt):
        return state + dt * q


def _vertical_slider():
    b = sd.ModelBuilder("slider")
    b.add_link("base")
    b.add_link("block", mass=2.0)
    b.add_joint("lift", "prismatic", "base", "block", axis=(0, 0, 1))
    return b.build()


@pytest.mark.parametrize("backend", ["numpy", "native", "jax"])
def test_a_controller_with_a_state(backend):
    """A controller with its own state (``Controller.state_size``: a PID's integral of the
    error), on a 2 kg block on a vertical slider: the run equals the semi-implicit Euler
    recursion written out (the state advanced once a step from the step's start) to 1e-12 on
    every backend, and the integral term removes the sag m g / kp that the PD alone leaves; a
    batch of starts carries one state per rollout."""
    model, dt, steps = _vertical_slider(), 1e-3, 3000

    def written_out(q, ki):
        qd, s, out = 0.0, 0.0, [q]
        for _ in range(steps):  # m qdd = tau - m g
            tau = -400.0 * q - 40.0 * qd - ki * s
            s = s + dt * q
            qd = qd + dt * (tau / 2.0 - 9.81)
            q = q + dt * qd
            out.append(q)
        return np.array(out)

    pid = _PIDSlider(400.0, 2000.0, 40.0)
    batch = simulate(model, np.array([[0.0], [0.05]]), None, pid, steps * dt, dt,
                     integrator="semi_implicit_euler", backend=backend)
    for i, start in enumerate((0.0, 0.05)):
        np.testing.assert_allclose(batch.q[i, :, 0], written_out(start, 2000.0), rtol=0,
                                   atol=1e-12)
    assert np.abs(batch.q[:, -1, 0]).max() < 1e-3 < 2.0 * 9.81 / 400.0  # no sag left
    pd = simulate(model, [0.0], None, _PIDSlider(400.0, 0.0, 40.0), steps * dt, dt,
                  integrator="semi_implicit_euler", backend=backend)
    np.testing.assert_allclose(pd.q[:, 0], written_out(0.0, 0.0), rtol=0, atol=1e-12)
    assert pd.q[-1, 0] == pytest.approx(-2.0 * 9.81 / 400.0, abs=1e-6)  # the PD's sag


def test_a_controller_whose_initial_state_has_the_wrong_shape():
    """A controller whose initial_state() does not have its state_size: a ValueError naming
    both, before anything runs."""
    class Wrong(_PIDSlider):
        def initial_state(self):
            return np.zeros(2)

    with pytest.raises(ValueError, match=r"initial_state\(\) has shape \(2,\); expected \(1,\): "
                                         "its state_size"):
        simulate(_vertical_slider(), [0.0], None, Wrong(1.0, 1.0, 1.0), 0.01, 1e-3)
