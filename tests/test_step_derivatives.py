"""Derivatives of one simulation step (issue 27 items 3 and 4): ``step_derivatives`` against
central finite differences of ``sd.simulate`` (the Panda, a free-flying body in its tangent
space, semi-implicit Euler and RK4) and of itself (a box resting and sliding on the ground under
``RigidContact``); bad inputs; the iLQR and MPPI examples' solves."""
import os
import sys

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.sim.step_derivatives import step_derivatives

pytest.importorskip("jax")

H = 1e-6
HALF = 0.1
CORNERS = [(sx * HALF, sy * HALF, sz * HALF) for sx in (-1, 1) for sy in (-1, 1)
           for sz in (-1, 1)]


def _cube():
    b = sd.ModelBuilder("cube")
    b.add_link("cube", mass=1.0, inertia=np.diag([0.006, 0.007, 0.008]))
    return b.build(floating_base=True)


def _perturbed(model, q, qd, tau, h):
    """The 2 (3 nv) states and torques perturbed by +-h along each tangent direction."""
    nv = model.nv
    Q, QD, T = [], [], []
    for j in range(3 * nv):
        for s in (1.0, -1.0):
            e = np.zeros(3 * nv)
            e[j] = s * h
            Q.append(sd.integrate(model, q, e[:nv]))
            QD.append(qd + e[nv:2 * nv])
            T.append(tau + e[2 * nv:])
    return np.array(Q), np.array(QD), np.array(T)


def _central(model, ref, q_next, qd_next, h):
    """[A B] (2nv, 3nv) from the perturbed next states, in the tangent space at ref.q_next."""
    nv = model.nv
    dq = np.asarray(sd.difference(model, np.broadcast_to(ref.q_next, q_next.shape), q_next))
    X = np.concatenate([dq, qd_next - ref.qd_next], -1).reshape(3 * nv, 2, 2 * nv)
    return ((X[:, 0] - X[:, 1]) / (2 * h)).T


def _fd_simulate(model, q, qd, tau, dt, h=H, **kw):
    """Central differences of one ``sd.simulate`` step (one batch of 6 nv rollouts)."""
    Q, QD, T = _perturbed(model, q, qd, tau, h)
    traj = sd.simulate(model, Q, QD, T[:, None, :], t_final=dt, dt=dt, **kw)
    ref = step_derivatives(model, q, qd, tau, dt, **kw)
    return ref, _central(model, ref, traj.q[:, -1], traj.qd[:, -1], h)


@pytest.mark.parametrize("integrator", ["semi_implicit_euler", "rk4"])
def test_panda_against_simulate(integrator):
    panda = sd.robots.load("panda")
    rng = np.random.default_rng(0)
    q = np.r_[rng.uniform(-0.5, 0.5, 7), 0.02, 0.02]
    qd, tau = 0.3 * rng.normal(size=9), rng.normal(size=9)
    ref, J = _fd_simulate(panda, q, qd, tau, 0.01, integrator=integrator)
    traj = sd.simulate(panda, q, qd, tau[None], t_final=0.01, dt=0.01, integrator=integrator)
    assert np.abs(ref.q_next - traj.q[-1]).max() < 1e-12
    assert np.abs(ref.qd_next - traj.qd[-1]).max() < 1e-12
    assert ref.A.shape == (18, 18) and ref.B.shape == (18, 9)
    # measured: 1.5e-10 to 2.1e-10 (the differences' own error), entries up to 1.8
    assert np.abs(J[:, :18] - ref.A).max() < 2e-8
    assert np.abs(J[:, 18:] - ref.B).max() < 2e-8


@pytest.mark.parametrize("integrator", ["semi_implicit_euler", "rk4"])
def test_free_body_tangent_space(integrator):
    """A tumbling free body: x in (position, quaternion), A and B in the body-twist tangent."""
    cube = _cube()
    rng = np.random.default_rng(1)
    quat = rng.normal(size=4)
    q = np.r_[0.1, 0.2, 0.3, quat / np.linalg.norm(quat)]
    qd, tau = np.array([0.3, -0.2, 0.1, 2.0, -1.0, 3.0]), rng.normal(size=6)
    ref, J = _fd_simulate(cube, q, qd, tau, 0.01, integrator=integrator)
    assert ref.x_next.shape == (13,) and ref.A.shape == (12, 12) and ref.B.shape == (12, 6)
    assert np.abs(J[:, :12] - ref.A).max() < 2e-8  # measured 2.1e-10
    assert np.abs(J[:, 12:] - ref.B).max() < 2e-8


@pytest.mark.parametrize("speed", [0.0, 1.0])
def test_rigid_contact_box(speed):
    """A box on the ground under RigidContact, at rest (sticking) and sliding at 1 m/s: no mode
    changes within the differences, so they match the program's derivatives; at rest the
    contact holds, so a small wrench moves nothing (B ~ 0)."""
    cube = _cube()
    contact = sd.RigidContact(mu=0.5, points={"cube": CORNERS})
    q = np.array([0, 0, HALF, 0, 0, 0, 1.0])
    qd = np.array([speed, 0, 0, 0, 0, 0])
    tau, dt, h = np.zeros(6), 2e-3, 1e-7
    Q, QD, T = _perturbed(cube, q, qd, tau, h)
    # one batch: the perturbed states and, last, the state itself (each row its own step)
    out = step_derivatives(cube, np.r_[Q, q[None]], np.r_[QD, qd[None]], np.r_[T, tau[None]],
                           dt, contact=contact)
    ref = type(out)(out.x_next[-1], out.A[-1], out.B[-1])
    assert out.A.shape == (37, 12, 12) and out.B.shape == (37, 12, 6)
    assert np.isfinite(ref.A).all() and np.isfinite(ref.B).all()
    J = _central(cube, ref, out.q_next[:-1], out.qd_next[:-1], h)
    # measured 2.7e-9 (A, entries up to 5) and 3.5e-10 (B)
    assert np.abs(J[:, :12] - ref.A).max() < 1e-6
    assert np.abs(J[:, 12:] - ref.B).max() < 1e-6
    if speed == 0.0:
        assert np.abs(ref.B).max() < 1e-9
    else:  # sliding: a push along the slide accelerates it (friction is already mu N)
        assert ref.B[6, 0] == pytest.approx(dt / 1.0, rel=1e-3)


def test_bad_inputs_name_the_shape():
    panda = sd.robots.load("panda")
    q, v = np.zeros(9), np.zeros(9)
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., 9\).*\(7,\)"):
        step_derivatives(panda, np.zeros(7), v, v, 0.01)
    with pytest.raises(ValueError, match=r"qd must have shape.*\(3, 8\)"):
        step_derivatives(panda, q, np.zeros((3, 8)), v, 0.01)
    with pytest.raises(ValueError, match=r"tau must have shape.*\(\)"):
        step_derivatives(panda, q, v, 1.0, 0.01)
    with pytest.raises(ValueError, match="batch shapes do not broadcast"):
        step_derivatives(panda, np.zeros((2, 9)), np.zeros((3, 9)), v, 0.01)
    with pytest.raises(ValueError, match="dt"):
        step_derivatives(panda, q, v, v, 0.0)
    with pytest.raises(ValueError, match="integrator"):
        step_derivatives(panda, q, v, v, 0.01, integrator="verlet")
    with pytest.raises(ValueError, match="unit norm"):
        step_derivatives(_cube(), np.r_[0, 0, 0, 0, 0, 0, 2.0], np.zeros(6), np.zeros(6), 0.01)


def _examples():
    path = os.path.join(os.path.dirname(__file__), os.pardir, "examples")
    sys.path.insert(0, os.path.abspath(path))
    try:
        import ilqr_panda
        import mppi_panda
    finally:
        sys.path.pop(0)
    return ilqr_panda, mppi_panda


def test_ilqr_example_converges():
    """The iLQR example's solve (about 1 s after compilation): the cost falls from 297 to
    0.883 (measured; Crocoddyl's FDDP reaches 0.883053 on the same problem) and the hand
    ends within a millimetre of the target."""
    ilqr_panda, _ = _examples()
    result = ilqr_panda.solve_ilqr(iterations=15, verbose=False)
    assert result["costs"][0] == pytest.approx(297.0, rel=1e-3)
    assert result["costs"][-1] < 0.8835
    assert result["error"] < 1.5e-3


def test_mppi_example_runs():
    """The MPPI example's loop, small (64 samples, two MPC iterations of one update): it
    applies a full second of finite torques and accounts for every rollout."""
    ilqr_panda, mppi_panda = _examples()
    result = mppi_panda.mppi(ilqr_panda.Problem(), samples=64, mpc_iterations=2, updates=1,
                             verbose=False)
    assert result["tau"].shape == (100, 9) and np.isfinite(result["tau"]).all()
    assert np.isfinite(result["cost"]) and result["rollouts"] == 128
