"""Spatial-algebra algorithms: identities on random trees, closed forms, shapes and bad input."""
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import screwdyn as sd
from conftest import random_state, random_tree

TREES = [(seed, floating) for seed in range(3) for floating in (False, True)]


@pytest.fixture(params=TREES, ids=[f"tree{s}{'-floating' if f else ''}" for s, f in TREES])
def tree(request):
    seed, floating = request.param
    return random_tree(seed, n=8, floating_base=floating)


def test_forward_dynamics_inverts_inverse_dynamics(tree):
    q, qd, qdd = random_state(tree, 0, batch=(4,))
    tau = sd.inverse_dynamics(tree, q, qd, qdd)
    np.testing.assert_allclose(sd.forward_dynamics(tree, q, qd, tau), qdd, rtol=1e-9, atol=1e-9)


def test_mass_matrix_is_spd_and_equals_columns_of_inverse_dynamics(tree):
    q, qd, _ = random_state(tree, 1)
    M = sd.mass_matrix(tree, q)
    np.testing.assert_allclose(M, M.T, atol=1e-12)
    assert np.linalg.eigvalsh(M)[0] > 0
    b = sd.bias_forces(tree, q, qd)
    columns = sd.inverse_dynamics(tree, q, qd, np.eye(tree.nv)) - b
    np.testing.assert_allclose(columns.T, M, atol=1e-10)


def test_bias_and_gravity_forces(tree):
    q, qd, _ = random_state(tree, 2)
    g = sd.gravity_torques(tree, q)
    np.testing.assert_allclose(g, sd.inverse_dynamics(tree, q, 0 * qd, 0 * qd), atol=1e-12)
    C = sd.coriolis_matrix(tree, q, qd)
    np.testing.assert_allclose(C @ qd, sd.bias_forces(tree, q, qd) - g, atol=1e-10)


def test_coriolis_matrix_makes_mdot_minus_2c_skew(tree):
    q, qd, _ = random_state(tree, 3)
    h = 1e-6  # dM/dt along the motion by central differences on the manifold
    Mdot = (sd.mass_matrix(tree, _integrate(tree, q, qd * h))
            - sd.mass_matrix(tree, _integrate(tree, q, -qd * h))) / (2 * h)
    N = Mdot - 2 * sd.coriolis_matrix(tree, q, qd)
    np.testing.assert_allclose(N, -N.T, atol=1e-6)


def test_energies_and_power_balance(tree):
    q, qd, qdd = random_state(tree, 4)
    M = sd.mass_matrix(tree, q)
    np.testing.assert_allclose(sd.kinetic_energy(tree, q, qd), qd @ M @ qd / 2, rtol=1e-12)
    # d(T + V)/dt = qd . tau for tau = ID(q, qd, qdd): central differences along the motion
    tau = sd.inverse_dynamics(tree, q, qd, qdd)
    h = 1e-5
    energy = [sd.kinetic_energy(tree, _integrate(tree, q, qd * s + qdd * s * s / 2), qd + qdd * s)
              + sd.potential_energy(tree, _integrate(tree, q, qd * s + qdd * s * s / 2))
              for s in (-h, h)]
    assert abs((energy[1] - energy[0]) / (2 * h) - qd @ tau) < 1e-5 * max(1, abs(qd @ tau))


def test_gravity_torques_are_the_gradient_of_potential_energy(tree):
    q, _, _ = random_state(tree, 5)
    h, grad = 1e-6, []
    for k in range(tree.nv):
        e = np.eye(tree.nv)[k] * h
        grad.append((sd.potential_energy(tree, _integrate(tree, q, e))
                     - sd.potential_energy(tree, _integrate(tree, q, -e))) / (2 * h))
    np.testing.assert_allclose(sd.gravity_torques(tree, q), grad, atol=1e-6)


def test_external_wrenches_act_through_the_jacobian_transpose(tree):
    q, qd, qdd = random_state(tree, 6)
    rng = np.random.default_rng(6)
    f_ext = rng.normal(size=(tree.nlinks, 6))
    expected = sd.inverse_dynamics(tree, q, qd, qdd)
    for l in range(tree.nlinks):
        expected = expected - sd.jacobian(tree, q, l, frame="local").T @ f_ext[l]
    np.testing.assert_allclose(sd.inverse_dynamics(tree, q, qd, qdd, f_ext=f_ext), expected,
                               atol=1e-10)
    tau = sd.inverse_dynamics(tree, q, qd, qdd, f_ext=f_ext)
    np.testing.assert_allclose(sd.forward_dynamics(tree, q, qd, tau, f_ext=f_ext), qdd,
                               atol=1e-9)


def test_jacobian_maps_joint_rates_to_link_twists(tree):
    q, qd, _ = random_state(tree, 7)
    h = 1e-6
    T0, T1 = (sd.forward_kinematics(tree, _integrate(tree, q, s * qd * h)) for s in (-1, 1))
    for l in range(tree.nlinks):
        J = sd.jacobian(tree, q, l, frame="world")
        np.testing.assert_allclose(J[:3] @ qd, (T1[l, :3, 3] - T0[l, :3, 3]) / (2 * h), atol=1e-6)
        Rdot = (T1[l, :3, :3] - T0[l, :3, :3]) / (2 * h)
        W = Rdot @ sd.forward_kinematics(tree, q)[l, :3, :3].T
        np.testing.assert_allclose(J[3:] @ qd, [W[2, 1], W[0, 2], W[1, 0]], atol=1e-6)


def test_center_of_mass_is_the_mass_weighted_mean_of_link_frames():
    b = sd.ModelBuilder("two")
    b.add_link("base")
    b.add_link("a", mass=1.0, com=(1, 0, 0))
    b.add_link("b", mass=3.0, com=(0, 0, 1))
    b.add_joint("ja", "revolute", "base", "a", axis=(0, 0, 1))
    b.add_joint("jb", "prismatic", "a", "b", xyz=(0, 2, 0), axis=(1, 0, 0))
    model = b.build()
    q = np.array([np.pi / 2, 0.5])
    # link a: rotated 90 deg about z: its com (1, 0, 0) -> (0, 1, 0)
    # link b: origin at R (0, 2, 0) + R (0.5, 0, 0) = (-2, 0.5, 0); com + (0, 0, 1)
    expected = (1 * np.array([0, 1, 0]) + 3 * np.array([-2, 0.5, 1])) / 4
    np.testing.assert_allclose(sd.center_of_mass(model, q), expected, atol=1e-14)


def test_batches_equal_one_by_one_calls_and_broadcast():
    model = random_tree(11, n=6, floating_base=True)
    q, qd, qdd = random_state(model, 8, batch=(2, 3))
    tau = sd.inverse_dynamics(model, q, qd, qdd)
    assert tau.shape == (2, 3, model.nv)
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(tau[i, j], sd.inverse_dynamics(model, q[i, j], qd[i, j],
                                                                     qdd[i, j]), atol=1e-12)
    # one configuration against a batch of velocities
    tau_b = sd.inverse_dynamics(model, q[0, 0], qd, qdd[0, 0])
    assert tau_b.shape == (2, 3, model.nv)
    np.testing.assert_allclose(tau_b[1, 2], sd.inverse_dynamics(model, q[0, 0], qd[1, 2],
                                                                 qdd[0, 0]), atol=1e-12)
    assert sd.mass_matrix(model, q).shape == (2, 3, model.nv, model.nv)
    assert sd.forward_kinematics(model, q).shape == (2, 3, model.nlinks, 4, 4)
    assert sd.jacobian(model, q, -1).shape == (2, 3, 6, model.nv)
    assert sd.kinetic_energy(model, q, qd).shape == (2, 3)
    assert sd.center_of_mass(model, q).shape == (2, 3, 3)


def test_simple_pendulum_closed_form():
    m, l, I_c = 2.0, 0.7, 0.03
    b = sd.ModelBuilder("pendulum")
    b.add_link("pivot")
    b.add_link("bob", mass=m, com=(0, 0, -l), inertia=np.diag([I_c, I_c, 0.01]))
    b.add_joint("hinge", "revolute", "pivot", "bob", axis=(1, 0, 0))
    model = b.build()
    q, qd, qdd = 0.4, 1.3, -0.8
    # theta about +x lifts the bob towards +y; gravity torque m g l sin(theta)
    expected = (I_c + m * l * l) * qdd + m * 9.81 * l * np.sin(q)
    np.testing.assert_allclose(sd.inverse_dynamics(model, [q], [qd], [qdd]), [expected],
                               rtol=1e-13)
    energy = 0.5 * (I_c + m * l * l) * qd ** 2 - m * 9.81 * l * np.cos(q)
    np.testing.assert_allclose(sd.kinetic_energy(model, [q], [qd])
                               + sd.potential_energy(model, [q]), energy, rtol=1e-13)


def test_double_pendulum_closed_form():
    m1, m2, l1, l2 = 1.0, 1.5, 0.8, 0.6  # point masses on massless rods, axes along +y
    b = sd.ModelBuilder("double")
    b.add_link("base")
    b.add_link("a", mass=m1, com=(0, 0, -l1))
    b.add_link("b", mass=m2, com=(0, 0, -l2))
    b.add_joint("j1", "revolute", "base", "a", axis=(0, 1, 0))
    b.add_joint("j2", "revolute", "a", "b", xyz=(0, 0, -l1), axis=(0, 1, 0))
    model = b.build()
    q = np.array([0.3, -0.5])
    qd = np.array([0.7, 1.1])
    qdd = np.array([-0.2, 0.4])
    c2, s2 = np.cos(q[1]), np.sin(q[1])
    g = 9.81
    M = np.array([[m1 * l1 ** 2 + m2 * (l1 ** 2 + l2 ** 2 + 2 * l1 * l2 * c2),
                   m2 * (l2 ** 2 + l1 * l2 * c2)],
                  [m2 * (l2 ** 2 + l1 * l2 * c2), m2 * l2 ** 2]])
    h = m2 * l1 * l2 * s2
    coriolis = np.array([-h * (2 * qd[0] * qd[1] + qd[1] ** 2), h * qd[0] ** 2])
    # rotation about +y moves a hanging mass towards -x... and up: V = -m g l cos(theta)
    gravity = np.array([(m1 + m2) * g * l1 * np.sin(q[0]) + m2 * g * l2 * np.sin(q.sum()),
                        m2 * g * l2 * np.sin(q.sum())])
    np.testing.assert_allclose(sd.mass_matrix(model, q), M, rtol=1e-13)
    np.testing.assert_allclose(sd.inverse_dynamics(model, q, qd, qdd),
                               M @ qdd + coriolis + gravity, rtol=1e-12)


def test_gravity_direction_and_armature_damping():
    model = random_tree(12, n=5)
    q, qd, qdd = random_state(model, 9)
    tilted = np.array([1.0, -2.0, -9.0])
    a = sd.inverse_dynamics(model, q, qd, qdd, gravity=tilted)
    b = sd.inverse_dynamics(model, q, qd, qdd, gravity=np.zeros(3))
    np.testing.assert_allclose(a - b, sd.gravity_torques(model, q, gravity=tilted), atol=1e-12)
    joints = model.joint_names
    geared = model.with_joint_parameters(armature={joints[0]: 0.5}, damping=0.2)
    tau = sd.inverse_dynamics(geared, q, qd, qdd)
    expected = sd.inverse_dynamics(model, q, qd, qdd) + 0.2 * qd
    expected[0] += 0.5 * qdd[0]
    np.testing.assert_allclose(tau, expected, atol=1e-12)
    np.testing.assert_allclose(sd.forward_dynamics(geared, q, qd, tau), qdd, atol=1e-10)
    M = sd.mass_matrix(geared, q)
    np.testing.assert_allclose(M - sd.mass_matrix(model, q), np.diag([0.5] + [0] * (model.nv - 1)),
                               atol=1e-12)


@pytest.mark.parametrize("call, match", [
    (lambda m: sd.inverse_dynamics(m, np.zeros(5), np.zeros(6), np.zeros(6)), r"q must have shape \(\.\.\., 6\)"),
    (lambda m: sd.inverse_dynamics(m, np.zeros(6), np.zeros((2, 6)), np.zeros((3, 6))), "batch shapes do not broadcast"),
    (lambda m: sd.forward_dynamics(m, np.zeros(6), np.zeros(6), np.zeros(4)), r"tau must have shape \(\.\.\., 6\)"),
    (lambda m: sd.inverse_dynamics(m, np.zeros(6), np.zeros(6), np.zeros(6), f_ext=np.zeros((2, 6))), r"f_ext must have shape \(\.\.\., 7, 6\)"),
    (lambda m: sd.inverse_dynamics(m, np.zeros(6), np.zeros(6), np.zeros(6), gravity=[0, 9.81]), r"gravity must have shape \(\.\.\., 3\)"),
    (lambda m: sd.inverse_dynamics(m, np.zeros(6), np.zeros(6), np.zeros(6), algebra="quaternion"), "unknown algebra 'quaternion'; valid: 'spatial'"),
    (lambda m: sd.mass_matrix(m, "abc"), "real numeric array"),
    (lambda m: sd.jacobian(m, np.zeros(6), "nope"), "no link named 'nope'"),
    (lambda m: sd.jacobian(m, np.zeros(6), 0, frame="body"), "frame must be 'world' or 'local'"),
])
def test_bad_shapes_and_arguments_raise_value_errors(call, match):
    b = sd.ModelBuilder("chain")
    b.add_link("l0")
    for i in range(6):
        b.add_link(f"l{i + 1}", mass=1.0, inertia=np.eye(3) * 0.01)
        b.add_joint(f"j{i}", "revolute", f"l{i}", f"l{i + 1}", xyz=(0, 0, 0.1), axis=(0, 1, 0))
    with pytest.raises(ValueError, match=match):
        call(b.build())


def _integrate(model, q, v):
    """q (+) v: joint-wise; free joints (q = xyz, quaternion xyzw) move by the SE(3)
    exponential of the body-frame twist v = (linear, angular)."""
    out = np.array(q, dtype=float)
    for body, qs, vs in zip(model.bodies, model.q_slices, model.v_slices):
        if not body.joint_model.floating:
            out[qs] = q[qs] + v[vs]
            continue
        R = Rotation.from_quat(q[qs][3:])
        lin, ang = v[vs][:3], v[vs][3:]
        dR = Rotation.from_rotvec(ang)
        theta = np.linalg.norm(ang)
        K = np.array([[0, -ang[2], ang[1]], [ang[2], 0, -ang[0]], [-ang[1], ang[0], 0]])
        V = (np.eye(3) + (1 - np.cos(theta)) / theta ** 2 * K
             + (theta - np.sin(theta)) / theta ** 3 * K @ K) if theta > 1e-9 else np.eye(3)
        out[qs.start:qs.start + 3] = q[qs][:3] + R.apply(V @ lin)
        out[qs.start + 3:qs.stop] = (R * dR).as_quat()
    return out


@pytest.mark.parametrize("algebra", ["cga", "dq", "vector"])
def test_energies_and_coriolis_matrix_in_every_algebra(algebra):
    """kinetic_energy, potential_energy and coriolis_matrix take algebra= like the recursions:
    CGA and dual quaternions compute them with their own operations (the Coriolis factor built
    from the algebra's brackets), algebra="vector" on the DH model's link frames. Against the
    spatial algebra, and the identities: T = qd'M qd / 2 (M in the same algebra), C qd = b - g."""
    model = sd.robots.load("puma560") if algebra == "vector" else random_tree(3, 7, True)
    q, qd, _ = random_state(model, 5, batch=(3,))
    C = sd.coriolis_matrix(model, q, qd, algebra=algebra)
    np.testing.assert_allclose(C, sd.coriolis_matrix(model, q, qd), atol=1e-12)
    b = sd.bias_forces(model, q, qd, algebra=algebra) - sd.gravity_torques(model, q,
                                                                           algebra=algebra)
    np.testing.assert_allclose(np.einsum("bij,bj->bi", C, qd), b, atol=1e-11)
    T = sd.kinetic_energy(model, q, qd, algebra=algebra)
    M = sd.mass_matrix(model, q, algebra=algebra)
    np.testing.assert_allclose(T, 0.5 * np.einsum("bi,bij,bj->b", qd, M, qd), rtol=1e-12)
    np.testing.assert_allclose(sd.potential_energy(model, q, algebra=algebra),
                               sd.potential_energy(model, q), atol=1e-12)
