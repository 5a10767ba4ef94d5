"""Simulations of models with equality constraints (issue 24 item 1): a closed four-bar and a
tendon-coupled pair of joints simulate on every backend with the same result, hold their
constraints, and close the energy balance (the constraint forces' work accounted); a state off
the constraints or a redundant row is said before step 0."""
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.constraints import Connect, Coupling, FixedTendon


def _rod(mass, length):
    return dict(mass=mass, com=(length / 2, 0, 0),
                inertia=np.diag([1e-4, mass * length ** 2 / 12, mass * length ** 2 / 12]))


def _four_bar(timeconst=0.02):
    """A Grashof crank-rocker (crank 0.3 m, coupler 1 m, rocker 0.8 m, ground 1 m) in the
    x-y plane under gravity -y, closed at the coupler's end: no singular configuration on its
    way, so its motion is smooth."""
    b = sd.ModelBuilder("crank_rocker")
    b.add_link("ground")
    b.add_link("crank", **_rod(1.0, 0.3))
    b.add_link("coupler", **_rod(2.0, 1.0))
    b.add_link("rocker", **_rod(1.0, 0.8))
    b.add_joint("j1", "revolute", "ground", "crank", axis=(0, 0, 1))
    b.add_joint("j2", "revolute", "crank", "coupler", xyz=(0.3, 0, 0), axis=(0, 0, 1))
    b.add_joint("j3", "revolute", "ground", "rocker", xyz=(1.0, 0, 0), axis=(0, 0, 1))
    model = b.build(gravity=(0, -9.81, 0))
    closed = model.with_constraints(Connect("coupler", "rocker", (1.0, 0, 0), (0.8, 0, 0),
                                            name="loop", timeconst=timeconst))
    q0 = sd.constraints.project(closed, np.array([1.5, 0.5, 1.8]), fixed=("j1",))
    return closed, q0


@pytest.fixture(scope="module")
def four_bar():
    return _four_bar()


def _quiet_simulate(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.ConstraintWarning)  # the planar loop's z row
        return sd.simulate(*args, **kwargs)


@pytest.mark.parametrize("backend", ["numpy", "native", "jax"])
def test_four_bar_holds_its_loop_and_its_energy(four_bar, backend):
    model, q0 = four_bar
    assert np.abs(sd.constraint_residual(model, q0)).max() < 1e-12
    qd0 = np.array([2.0, 0.0, 0.0])
    J = sd.constraint_jacobian(model, q0)
    # the initial velocity in the null space of J: crank rate 2 rad/s, the others following
    N = np.linalg.svd(J)[2][-1]
    qd0 = N * 2.0 / N[0]
    assert np.abs(J @ qd0).max() < 1e-12
    traj = _quiet_simulate(model, q0, qd0, t_final=2.0, dt=1e-3, backend=backend)
    residual = np.abs(np.asarray(sd.constraint_residual(model, traj.q))).max()
    assert residual < 1e-7  # m: the loop stays closed
    scale = np.abs(traj.energy).max()
    assert np.abs(traj.energy_error()).max() < 1e-6 * scale
    if backend != "numpy":
        reference = _quiet_simulate(model, q0, qd0, t_final=2.0, dt=1e-3, backend="numpy")
        assert np.abs(traj.q - reference.q).max() < 1e-9


def test_four_bar_moves_with_one_degree_of_freedom(four_bar):
    """The rocker's angle is the loop's function of the crank's: the simulated rocker equals
    the closed loop solved at the simulated crank angle (by project, from the trajectory's own
    state, holding the crank)."""
    model, q0 = four_bar
    traj = _quiet_simulate(model, q0, t_final=1.0, dt=1e-3, backend="native")
    for k in (200, 600, 1000):
        q = traj.q[k]
        solved = sd.constraints.project(model, q + np.array([0.0, 0.05, -0.05]),
                                        fixed=("j1",))
        assert np.abs(solved - q).max() < 1e-6


def test_a_state_off_the_loop_is_said_and_closed(four_bar):
    model, q0 = four_bar
    with pytest.warns(sd.ConstraintWarning, match="violates the constraint row 'loop.*project"):
        traj = sd.simulate(model, q0 + 0.01, t_final=0.5, dt=1e-3)
    assert np.abs(np.asarray(sd.constraint_residual(model, traj.q[-1]))).max() < 1e-7
    assert np.abs(traj.energy_error()).max() < 1e-5  # the stabilisation's work is accounted
    with pytest.warns(sd.ConstraintWarning, match="moves off"):
        _quiet = sd.simulate(model, q0, np.array([1.0, 0, 0]), t_final=0.01, dt=1e-3)
    with pytest.warns(sd.ConstraintWarning, match="rank 2"):
        sd.simulate(model, q0, t_final=0.01, dt=1e-3)


def test_stabilisation_enters_the_stability_check():
    """A time constant of 0.1 ms cannot be followed by 1 ms steps: said before step 0."""
    stiff, q0 = _four_bar(timeconst=1e-4)
    with pytest.warns(UserWarning, match="stabilisation of constraint Connect 'loop'.*timeconst"):
        try:
            _quiet_simulate(stiff, q0, t_final=0.01, dt=1e-3, backend="numpy")
        except sd.SimulationError:
            pass  # it may diverge, as said


def _pair(coupling):
    """Two pendulums side by side, the second's angle tied to the first's."""
    b = sd.ModelBuilder("pair")
    b.add_link("base")
    for side, (mass, length) in (("a", (1.0, 0.5)), ("b", (2.0, 0.8))):
        b.add_link(side, **_rod(mass, length))
        b.add_joint(f"j{side}", "revolute", "base", side, xyz=(0, 0.2 if side == "b" else 0, 0),
                    axis=(0, 1, 0))
    return b.build()


def test_tendon_coupling_and_springs_simulate():
    """Two pendulums (rods of 1 kg, 0.5 m and 2 kg, 0.8 m about parallel axes) tied by a tendon
    equality (L = qa - qb = 0) swing as one compound pendulum: qdd = sum m g (l/2) cos q /
    sum m l^2 / 3 (rods along x turning about y, gravity -z); a tendon spring between them
    stores elastic energy that the balance counts."""
    model = _pair(None)
    tendon = FixedTendon("diff", ["ja", "jb"], [1.0, -1.0])
    tied = model.with_constraints(Coupling("diff", None, polynomial=(0.0,), name="tie"),
                                  tendons=[tendon])
    q0 = np.array([0.7, 0.7])
    traj = sd.simulate(tied, q0, t_final=1.0, dt=1e-3)
    assert np.abs(traj.q[:, 0] - traj.q[:, 1]).max() < 1e-9
    q = traj.q[:, 0]
    compound = (9.81 * (1.0 * 0.25 + 2.0 * 0.4) * np.cos(q)
                / (1.0 * 0.5 ** 2 / 3 + 2.0 * 0.8 ** 2 / 3))
    assert np.abs(traj.qdd[:, 0] - compound).max() < 1e-6 * np.abs(compound).max()
    free = sd.simulate(model, q0, t_final=1.0, dt=1e-3)  # untied, they part
    assert np.abs(free.q[:, 0] - free.q[:, 1]).max() > 0.1
    sprung = model.with_constraints(tendons=[FixedTendon("diff", ["ja", "jb"], [1.0, -1.0],
                                                         stiffness=20.0, damping=0.0)])
    traj = sd.simulate(sprung, np.array([0.7, 0.2]), t_final=1.0, dt=1e-3)
    assert traj.elastic.max() > 1.0  # 0.5 * 20 * 0.5^2 = 2.5 J at the start
    assert np.abs(traj.energy_error()).max() < 1e-6 * np.abs(traj.energy).max()
    # the spring pulls them together: tau_a = -k (qa - qb) = -10 N m at the start
    tau_spring = -20.0 * 0.5
    qdd_free = sd.forward_dynamics(model, np.array([0.7, 0.2]), np.zeros(2), np.zeros(2))
    qdd_sprung = sd.forward_dynamics(model, np.array([0.7, 0.2]), np.zeros(2),
                                     np.array([tau_spring, -tau_spring]))
    assert np.abs(traj.qdd[0] - qdd_sprung).max() < 1e-9
    assert np.abs(traj.qdd[0] - qdd_free).max() > 1.0
