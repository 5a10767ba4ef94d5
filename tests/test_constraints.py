"""Closed loops and couplings (``screwdyn.constraints``), proven against independent references.

- a planar four-bar linkage (crank, coupler, rocker on a fixed ground; the loop closed by a
  ``Connect``): the parallelogram against its closed-form equation of motion, a general one
  against a 1-DoF Lagrangian written here in plain numpy (planar kinematics, the loop solved as
  the intersection of two circles, derivatives by finite differences), and both against
  Pinocchio's ``constraintDynamics``;
- the identities of the stabilised KKT system: J qdd + dJ/dt qd = -k e - b de/dt (dJ/dt by
  finite differences of ``constraint_jacobian``), ID(q, qd, qdd) - J^T lambda = tau, the
  constraint forces do no work;
- an over-constrained loop (a planar loop closed by a 3-D ``Connect``: rank 2 of 3);
- every algebra, native code, numpy and JAX (jit, grad) agree;
- a delta robot (three arms of an upper arm and a rod on ball joints, the platform hanging from
  arm 1, arms 2 and 3 closed by ``Connect``) against Pinocchio;
- couplings (a quadratic joint polynomial, a fixed tendon) against reduced closed forms;
- bad input: a ``ModelError`` naming what is wrong.

Tolerances: the kernel regularises the Schur complement A = J M^-1 J^T by 1e-9 times its mean
diagonal (``algorithms/constraints.py``, ``EPSILON``: redundant rows) and removes the bias this
puts on independent rows by one step of iterative refinement, so the comparisons with the
references hold to ``RTOL`` = 1e-9 relative, and ``test_acceleration_constraint_is_exact``
checks qdd against the exact KKT solution to 1e-11.
"""
import re

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.constraints import Connect, Coupling, FixedTendon, SpatialTendon, Weld
from screwdyn.model.constraints import DAMPRATIO, TIMECONST

G = 9.81
#: the kernel against the references (see the module docstring)
RTOL = 1e-9
AXIS = (0.0, -1.0, 0.0)  # the plane is x-z; q > 0 turns a link's x axis towards +z


# -- the four-bar linkage ------------------------------------------------------------------------
#: link lengths (m): crank a, coupler c, rocker r, ground d; per link: mass (kg), centre of mass
#: (link frame, m), inertia about it (kg m^2, link axes; only I_yy acts in the plane)
GENERAL = dict(a=0.3, c=0.8, r=0.6, d=0.7)
PARALLELOGRAM = dict(a=0.4, c=0.9, r=0.4, d=0.9)
INERTIA = {"crank": (1.3, (0.15, 0.02, 0.0), [[0.02, 0.001, 0.002], [0.001, 0.011, 0.003],
                                              [0.002, 0.003, 0.015]]),
           "coupler": (0.8, (0.35, -0.03, 0.05), [[0.01, 0.0, 0.001], [0.0, 0.045, 0.0],
                                                  [0.001, 0.0, 0.04]]),
           "rocker": (1.1, (0.25, 0.01, 0.0), [[0.015, 0.002, 0.0], [0.002, 0.03, 0.001],
                                               [0.0, 0.001, 0.02]])}


def four_bar(a, c, r, d, **constraint):
    """Ground, crank (joint ``crank`` at the origin), coupler (joint ``coupler`` at the crank's
    end), rocker (joint ``rocker`` at (d, 0, 0)), all revolute about -y; the coupler's end
    (c, 0, 0) meets the rocker's end (r, 0, 0) by the ``Connect`` ``loop``."""
    b = sd.ModelBuilder("four_bar")
    b.add_link("ground", mass=5.0, inertia=np.eye(3))
    for name, (mass, com, inertia) in INERTIA.items():
        b.add_link(name, mass=mass, com=com, inertia=inertia)
    b.add_joint("crank", "revolute", "ground", "crank", axis=AXIS)
    b.add_joint("coupler", "revolute", "crank", "coupler", xyz=(a, 0, 0), axis=AXIS)
    b.add_joint("rocker", "revolute", "ground", "rocker", xyz=(d, 0, 0), axis=AXIS)
    return b.build().with_constraints(Connect("coupler", "rocker", (c, 0, 0), (r, 0, 0),
                                              name="loop", **constraint))


def perp(v):
    """v (x, z) turned by +90 degrees in the plane (the velocity of a point per unit q)."""
    return np.array([-v[1], v[0]])


def rot(phi):
    return np.array([[np.cos(phi), -np.sin(phi)], [np.sin(phi), np.cos(phi)]])


class PlanarFourBar:
    """The four-bar in plain numpy, from its lengths and the in-plane inertias: planar
    positions (x, z), the mass matrix M(q) = sum m Jc^T Jc + I_yy Jw^T Jw, the potential
    energy and the loop closure; nothing of screwdyn's."""

    def __init__(self, a, c, r, d):
        self.a, self.c, self.r, self.d = a, c, r, d
        # (mass, com (x, z) in the link, I_yy about the com)
        self.links = {k: (m, np.array([com[0], com[2]]), I[1][1])
                      for k, (m, com, I) in INERTIA.items()}

    def frames(self, q):
        """{link: (pivot (x, z), absolute angle, ancestors' joint indices)}."""
        pivot_c = rot(q[0]) @ [self.a, 0.0]
        return {"crank": (np.zeros(2), q[0], (0,)), "coupler": (pivot_c, q[0] + q[1], (0, 1)),
                "rocker": (np.array([self.d, 0.0]), q[2], (2,))}

    def pivots(self, q):
        return [np.zeros(2), rot(q[0]) @ [self.a, 0.0], np.array([self.d, 0.0])]

    def mass_matrix(self, q):
        M = np.zeros((3, 3))
        pivots = self.pivots(q)
        for name, (pivot, phi, chain) in self.frames(q).items():
            m, s, Iyy = self.links[name]
            com = pivot + rot(phi) @ s
            Jc, Jw = np.zeros((2, 3)), np.zeros(3)
            for j in chain:
                Jc[:, j] = perp(com - pivots[j])
                Jw[j] = 1.0
            M += m * Jc.T @ Jc + Iyy * np.outer(Jw, Jw)
        return M

    def potential(self, q):
        return sum(self.links[n][0] * G * (p + rot(phi) @ self.links[n][1])[1]
                   for n, (p, phi, _) in self.frames(q).items())

    def loop(self, q):
        """The coupler's end less the rocker's end (x, z) and its Jacobian (2, 3)."""
        pivots = self.pivots(q)
        end_c = pivots[1] + rot(q[0] + q[1]) @ [self.c, 0.0]
        end_r = pivots[2] + rot(q[2]) @ [self.r, 0.0]
        G_ = np.stack([perp(end_c - pivots[0]), perp(end_c - pivots[1]),
                       -perp(end_r - pivots[2])], axis=1)
        return end_c - end_r, G_

    def close(self, theta, branch=1.0):
        """q with crank angle theta that closes the loop: the coupler's end is where the
        circles about the crank's end (radius c) and the rocker's pivot (radius r) meet."""
        P, B = rot(theta) @ [self.a, 0.0], np.array([self.d, 0.0])
        D = np.linalg.norm(B - P)
        u = (B - P) / D
        along = (self.c ** 2 - self.r ** 2 + D ** 2) / (2 * D)
        E = P + along * u + branch * np.sqrt(self.c ** 2 - along ** 2) * perp(u)
        return np.array([theta, np.arctan2(*(E - P)[::-1]) - theta,
                         np.arctan2(*(E - B)[::-1])])

    def tangent(self, q):
        """N = dq/dtheta (theta = the crank angle) along the loop: G N = 0, N[0] = 1."""
        _, G_ = self.loop(q)
        return np.concatenate([[1.0], -np.linalg.solve(G_[:, 1:], G_[:, 0])])


def derivative(f, x, h=1e-3):
    """df/dx by the fourth-order central difference (error ~ h^4 f^(5))."""
    return (8 * (f(x + h) - f(x - h)) - (f(x + 2 * h) - f(x - 2 * h))) / (12 * h)


def reduced_qdd(q_of, N_of, mass_matrix, potential, theta, theta_dot, tau):
    """qdd of a 1-DoF mechanism q = q(theta) from its Lagrangian L = 1/2 m(theta) theta'^2 -
    V(theta), m = N^T M N, N = dq/dtheta: m theta'' + 1/2 m' theta'^2 + V' = N^T tau, then
    qdd = N theta'' + dN/dtheta theta'^2."""
    def m_of(t):
        N = N_of(t)
        return N @ mass_matrix(q_of(t)) @ N

    N = N_of(theta)
    theta_ddot = (N @ tau - 0.5 * derivative(m_of, theta) * theta_dot ** 2
                  - derivative(lambda t: potential(q_of(t)), theta)) / m_of(theta)
    return N * theta_ddot + derivative(N_of, theta) * theta_dot ** 2


def assert_close(actual, expected, rtol=None, what=""):
    """|actual - expected| <= rtol max(1, |expected|_inf) (see the module docstring)."""
    rtol = RTOL if rtol is None else rtol
    actual, expected = np.asarray(actual), np.asarray(expected)
    scale = max(1.0, float(np.max(np.abs(expected))))
    error = float(np.max(np.abs(actual - expected)))
    assert error <= rtol * scale, f"{what}: error {error:.3g} > {rtol:g} x {scale:.3g}"


@pytest.fixture(scope="module")
def general():
    return four_bar(**GENERAL)


def test_project_closes_the_loop_as_the_circles_do(general):
    ref = PlanarFourBar(**GENERAL)
    for theta in (0.3, 1.2, 2.5, -0.7):
        for branch in (1.0, -1.0):
            exact = ref.close(theta, branch)
            assert np.max(np.abs(ref.loop(exact)[0])) < 1e-14
            e = np.asarray(sd.constraint_residual(general, exact))
            assert np.max(np.abs(e)) < 1e-14, (theta, branch, e)  # the same closure
            guess = exact + np.array([0.0, 0.05, -0.04])  # near one branch: project finds it
            q = sd.constraints.project(general, guess, fixed=("crank",))
            assert q[0] == theta
            np.testing.assert_allclose(q, exact, atol=1e-9)
    with pytest.raises(sd.ModelError, match="'loop.x'|'loop.z'"):  # a crank angle with no loop
        sd.constraints.project(four_bar(a=0.3, c=0.3, r=0.3, d=1.2), [0.0, 0.0, 0.0],
                               fixed=("crank",))


def test_parallelogram_closed_form():
    """The parallelogram (crank a = rocker r, coupler c = ground d) keeps the coupler
    translating: with theta the crank angle, q = (theta, -theta, theta) and
    qd = (1, -1, 1) theta'. The coupler moves as the crank's end, speed a theta', and has no
    rotational energy; the crank and rocker turn about their pivots (I_A = I_yy + m s^2 with s
    the centre of mass's distance from the pivot, in the plane). Lagrange:

        T = 1/2 (I_A + I_R + m_c a^2) theta'^2
        V = g (m_a z_a(theta) + m_c a sin(theta) + m_r z_r(theta)) + const,
            z(theta) = s_x sin(theta) + s_z cos(theta)  (the centre of mass's height)
        (I_A + I_R + m_c a^2) theta'' + dV/dtheta = Q = tau_crank - tau_coupler + tau_rocker

    (Q = N^T tau, the virtual work of tau along qd = N theta'), and qdd = (1, -1, 1) theta''.
    """
    p = PARALLELOGRAM
    model = four_bar(**p)
    (ma, sa, Ia), (mc, _, _), (mr, sr, Ir) = (INERTIA[k] for k in ("crank", "coupler",
                                                                   "rocker"))
    inertia = (Ia[1][1] + ma * (sa[0] ** 2 + sa[2] ** 2) + Ir[1][1]
               + mr * (sr[0] ** 2 + sr[2] ** 2) + mc * p["a"] ** 2)
    N = np.array([1.0, -1.0, 1.0])
    rng = np.random.default_rng(1)
    for theta in (0.4, 1.9, -1.0, -2.6):  # not 0 or pi: the links line up (a change point)
        q = theta * N
        assert np.max(np.abs(sd.constraint_residual(model, q))) < 1e-15
        for theta_dot in (0.0, 2.5):
            tau = rng.normal(size=3)
            dV = G * (ma * (sa[0] * np.cos(theta) - sa[2] * np.sin(theta))
                      + mc * p["a"] * np.cos(theta)
                      + mr * (sr[0] * np.cos(theta) - sr[2] * np.sin(theta)))
            theta_ddot = (N @ tau - dV) / inertia
            qdd = sd.constrained_forward_dynamics(model, q, N * theta_dot, tau)
            assert_close(qdd, N * theta_ddot, what=f"theta {theta}")


def test_general_four_bar_against_reduced_lagrangian(general):
    ref = PlanarFourBar(**GENERAL)
    rng = np.random.default_rng(2)
    for theta, branch in ((0.3, 1.0), (1.2, -1.0), (2.5, 1.0), (-0.7, -1.0)):
        q = ref.close(theta, branch)
        np.testing.assert_allclose(sd.mass_matrix(general, q), ref.mass_matrix(q), atol=1e-13)
        N = ref.tangent(q)
        J = np.asarray(sd.constraint_jacobian(general, q))
        assert np.max(np.abs(J @ N)) < 1e-13  # screwdyn's J and the circles' tangent agree
        for theta_dot in (0.0, -3.0):
            tau = rng.normal(size=3)
            expected = reduced_qdd(lambda t: ref.close(t, branch),
                                   lambda t: ref.tangent(ref.close(t, branch)),
                                   ref.mass_matrix, ref.potential, theta, theta_dot, tau)
            qdd = sd.constrained_forward_dynamics(general, q, N * theta_dot, tau)
            assert_close(qdd, expected, what=f"theta {theta} branch {branch}")


def off_loop_state(model, seed):
    """A state that violates the loop (q perturbed, qd random): the stabilisation acts."""
    rng = np.random.default_rng(seed)
    q = PlanarFourBar(**GENERAL).close(0.8) + rng.normal(size=3) * 0.02
    return q, rng.normal(size=3), rng.normal(size=3)


def test_kkt_identities(general):
    """J qdd + dJ/dt qd = -k e - b e' (dJ/dt qd by central differences of J along qd), the
    Jacobian is the derivative of the residual, ID(q, qd, qdd) - J^T lambda = tau, and
    lambda does no work on velocities that keep the loop (J qd = 0)."""
    k, b = 1 / (TIMECONST * DAMPRATIO) ** 2, 2 / TIMECONST
    for seed in range(3):
        q, qd, tau = off_loop_state(general, seed)
        e = np.asarray(sd.constraint_residual(general, q))
        assert np.max(np.abs(e)) > 1e-3
        J = np.asarray(sd.constraint_jacobian(general, q))
        h = 1e-6
        J_fd = np.stack([(np.asarray(sd.constraint_residual(general, q + h * dq))
                          - np.asarray(sd.constraint_residual(general, q - h * dq))) / (2 * h)
                         for dq in np.eye(3)], axis=1)
        np.testing.assert_allclose(J, J_fd, atol=1e-9)
        gamma = derivative(lambda s: np.asarray(sd.constraint_jacobian(general, q + s * qd)),
                           0.0) @ qd
        qdd = np.asarray(sd.constrained_forward_dynamics(general, q, qd, tau))
        lam = np.asarray(sd.constraint_forces(general, q, qd, tau))
        assert_close(J @ qdd + gamma, -k * e - b * (J @ qd), what="acceleration constraint")
        assert_close(np.asarray(sd.inverse_dynamics(general, q, qd, qdd)) - J.T @ lam, tau,
                     rtol=1e-10, what="ID - J^T lambda")
        null = np.linalg.svd(J)[2][-1]  # rank 2: one direction keeps the loop
        assert abs(null @ J.T @ lam) < 1e-10 * np.linalg.norm(lam)


def test_redundant_row_of_a_planar_loop(general):
    """A planar loop closed by a 3-D Connect: the y row (out of the plane) is identically zero
    (rank 2 of 3); the dynamics are finite and correct (the reduced Lagrangian, above) and the
    redundant row carries no force."""
    q = PlanarFourBar(**GENERAL).close(1.0)
    assert sd.constraints.rank(general, q) == 2 and general.nconstraints == 3
    assert sd.constraints.labels(general) == ["loop.x", "loop.y", "loop.z"]
    J = np.asarray(sd.constraint_jacobian(general, q))
    assert not J[1].any()
    lam = np.asarray(sd.constraint_forces(general, q, np.zeros(3), np.ones(3)))
    assert np.all(np.isfinite(lam)) and abs(lam[1]) < 1e-12 * np.max(np.abs(lam))
    # a loop that is not planar has full rank: the rocker's axis tilted out of the plane
    # makes the Connect's y row independent (and then a 1-DoF chain is locked: rank 3, nv 3)
    b = sd.ModelBuilder("spatial_loop")
    b.add_link("ground")
    for name in ("crank", "coupler", "rocker"):
        b.add_link(name, mass=1.0, com=(0.2, 0, 0), inertia=np.eye(3) * 0.01)
    b.add_joint("crank", "revolute", "ground", "crank", axis=AXIS)
    b.add_joint("coupler", "revolute", "crank", "coupler", xyz=(0.3, 0, 0), axis=(0, 0, 1))
    b.add_joint("rocker", "revolute", "ground", "rocker", xyz=(0.7, 0, 0), axis=(1, -1, 0))
    spatial = b.build().with_constraints(Connect("coupler", "rocker", (0.8, 0, 0),
                                                 (0.6, 0, 0)))
    assert sd.constraints.rank(spatial, [0.3, 0.2, 0.1]) == 3


def test_algebras_and_backends_agree(general):
    q, qd, tau = off_loop_state(general, 7)
    functions = {"qdd": sd.constrained_forward_dynamics, "lambda": sd.constraint_forces}
    reference = {k: np.asarray(f(general, q, qd, tau)) for k, f in functions.items()}
    for algebra in ("cga", "dq"):
        for k, f in functions.items():
            assert_close(f(general, q, qd, tau, algebra=algebra), reference[k], rtol=1e-10,
                         what=f"{k} in {algebra}")
        np.testing.assert_allclose(sd.constraint_jacobian(general, q, algebra=algebra),
                                   sd.constraint_jacobian(general, q), atol=1e-12)
    previous = sd.execution.use_native(False)
    try:
        for k, f in functions.items():
            assert_close(f(general, q, qd, tau), reference[k], rtol=1e-10, what=f"numpy {k}")
        batch = np.stack([q, q + 0.01, q - 0.02])
        batched = np.asarray(sd.constrained_forward_dynamics(general, batch, np.stack([qd] * 3),
                                                              np.stack([tau] * 3)))
    finally:
        sd.execution.use_native(previous)
    native = np.asarray(sd.constrained_forward_dynamics(general, batch, np.stack([qd] * 3),
                                                         np.stack([tau] * 3)))
    assert_close(native, batched, rtol=1e-10, what="native batch")
    assert_close(native[0], reference["qdd"], rtol=1e-12, what="batch row")


def test_jax_jit_and_grad(general):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    q, qd, tau = off_loop_state(general, 3)
    expected = np.asarray(sd.constrained_forward_dynamics(general, q, qd, tau))
    f = jax.jit(lambda q, qd, tau: sd.constrained_forward_dynamics(general, q, qd, tau))
    assert_close(f(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(tau)), expected, rtol=1e-10,
                 what="jit")

    def scalar(q, tau):  # a scalar of qdd, its gradient against finite differences
        return jnp.sum(sd.constrained_forward_dynamics(general, q, jnp.asarray(qd), tau)
                       * jnp.array([1.0, -0.5, 2.0]))

    g_q, g_tau = jax.grad(scalar, argnums=(0, 1))(jnp.asarray(q), jnp.asarray(tau))

    def numeric(x):
        return np.asarray(sd.constrained_forward_dynamics(general, *x)) @ [1.0, -0.5, 2.0]

    h = 1e-6
    fd_q = [(numeric((q + h * d, qd, tau)) - numeric((q - h * d, qd, tau))) / (2 * h)
            for d in np.eye(3)]
    fd_tau = [(numeric((q, qd, tau + h * d)) - numeric((q, qd, tau - h * d))) / (2 * h)
              for d in np.eye(3)]
    assert_close(g_tau, fd_tau, rtol=1e-6, what="grad tau")
    assert_close(g_q, fd_q, rtol=1e-5, what="grad q")


# -- Pinocchio -----------------------------------------------------------------------------------
def pinocchio_constraints(pin, pm, model, gains=True):
    """Pinocchio's RigidConstraintModels (CONTACT_3D, LOCAL) of ``model``'s Connects, with
    screwdyn's Baumgarte gains (Kp = k, Kd = b) unless ``gains`` is False."""
    def site(link, point):
        frame = pm.frames[pm.getFrameId(link)]
        return frame.parentJoint, frame.placement * pin.SE3(np.eye(3), np.array(point))

    models = pin.StdVec_RigidConstraintModel()
    datas = pin.StdVec_RigidConstraintData()
    for c in model.constraints:
        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, *site(c.link_a, c.point_a),
                                      *site(c.link_b, c.point_b), pin.ReferenceFrame.LOCAL)
        if gains:
            cm.m_baumgarte_parameters.Kp = c.gains[0]
            cm.m_baumgarte_parameters.Kd = c.gains[1]
        models.append(cm)
        datas.append(cm.createData())
    return models, datas


class Pinocchio:
    """Pinocchio's constraintDynamics on the same tree (``conftest.pinocchio_model``, built
    joint by joint) with the same loop closures; redundant rows take its proximal
    regularisation (mu = 1e-12, iterated to 1e-14)."""

    def __init__(self, model):
        self.pin = pin = pytest.importorskip("pinocchio")
        from conftest import pinocchio_model

        self.model, self.pm = model, pinocchio_model(model)
        self.data = self.pm.createData()
        self.cms, self.cds = pinocchio_constraints(pin, self.pm, model)
        pin.initConstraintDynamics(self.pm, self.data, self.cms, self.cds)

    def qdd(self, q, qd, tau):
        from conftest import pinocchio_q

        settings = self.pin.ProximalSettings(1e-14, 1e-12, 100)
        return self.pin.constraintDynamics(self.pm, self.data, pinocchio_q(self.model, q), qd,
                                           tau, self.cms, self.cds, settings).copy()


def test_four_bar_against_pinocchio(general):
    ref, pin = PlanarFourBar(**GENERAL), Pinocchio(general)
    rng = np.random.default_rng(4)
    worst = 0.0
    for theta in np.linspace(-3.0, 3.0, 7):
        q = ref.close(theta, 1.0)
        qd = ref.tangent(q) * rng.normal() * 3
        tau = rng.normal(size=3)
        ours = np.asarray(sd.constrained_forward_dynamics(general, q, qd, tau))
        theirs = pin.qdd(q, qd, tau)
        assert_close(ours, theirs, what=f"theta {theta}")
        worst = max(worst, np.max(np.abs(ours - theirs)) / max(1, np.max(np.abs(theirs))))
    for seed in range(3):  # off the loop: the same Baumgarte gains (Kp = k, Kd = b) act
        q, qd, tau = off_loop_state(general, seed)
        assert_close(sd.constrained_forward_dynamics(general, q, qd, tau), pin.qdd(q, qd, tau),
                     what=f"off the loop, seed {seed}")
    print(f"four-bar vs Pinocchio: worst relative difference {worst:.2g}")


# -- the delta robot -----------------------------------------------------------------------------
DELTA = dict(base=0.2, upper=0.3, rod=0.7, platform=0.06)


def delta_robot():
    """Three arms at 0, 120 and 240 degrees about z: an upper arm on a revolute joint at the
    base's rim (its x radial, turning about its y axis, tangential) and a rod on a ball joint
    at the upper arm's end (hanging along -z at q = neutral); the platform hangs from rod 1's
    end on a ball joint, and the ends of rods 2 and 3 meet their points on the platform's rim
    by ``Connect``s. 15 DoF, 6 constraint rows (rank 6): 9 left, the platform's position, its
    orientation held by three rods only in part, and the spin of each rod about its own line."""
    g = DELTA
    b = sd.ModelBuilder("delta")
    b.add_link("base", mass=3.0, inertia=np.eye(3) * 0.05)
    b.add_link("platform", mass=0.4, com=(-g["platform"], 0, -0.01),
               inertia=np.diag([4e-4, 4e-4, 7e-4]))
    b.add_joint("platform_ball", "spherical", "rod1", "platform", xyz=(0, 0, -g["rod"]))
    for k in (1, 2, 3):
        phi = 2 * np.pi * (k - 1) / 3
        b.add_link(f"upper{k}", mass=0.5, com=(g["upper"] / 2, 0, 0),
                   inertia=np.diag([1e-4, 4e-3, 4e-3]))
        b.add_link(f"rod{k}", mass=0.2, com=(0, 0.002 * k, -g["rod"] / 2),
                   inertia=np.diag([8e-3, 8e-3, 2e-4]))
        b.add_joint(f"shoulder{k}", "revolute", "base", f"upper{k}",
                    xyz=(g["base"] * np.cos(phi), g["base"] * np.sin(phi), 0), rpy=(0, 0, phi),
                    axis=(0, 1, 0))
        b.add_joint(f"elbow{k}", "spherical", f"upper{k}", f"rod{k}", xyz=(g["upper"], 0, 0))
    model = b.build()
    rim = [(-g["platform"] + g["platform"] * np.cos(p), g["platform"] * np.sin(p), 0.0)
           for p in (2 * np.pi / 3, 4 * np.pi / 3)]
    return model.with_constraints(Connect("rod2", "platform", (0, 0, -g["rod"]), rim[0],
                                          name="arm2"),
                                  Connect("rod3", "platform", (0, 0, -g["rod"]), rim[1],
                                          name="arm3"))


def quaternion_between(u, v):
    """The unit quaternion (x, y, z, w) of the shortest rotation taking unit u to unit v."""
    w = 1.0 + u @ v
    x = np.cross(u, v)
    quat = np.concatenate([x, [w]])
    return quat / np.linalg.norm(quat)


def quaternion_matrix(quat):
    x, y, z, w = quat
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def delta_configuration(model, alpha, seed):
    """A configuration that closes both loops: the symmetric pose with the upper arms turned
    down by alpha (the rods then point from the elbows to the platform's rim, the platform
    level), perturbed at random and projected back with the shoulders held."""
    g = DELTA
    h = g["upper"] * np.sin(alpha) + np.sqrt(
        g["rod"] ** 2 - (g["base"] + g["upper"] * np.cos(alpha) - g["platform"]) ** 2)
    parts = {}
    for k in (1, 2, 3):
        phi = 2 * np.pi * (k - 1) / 3
        u = np.array([np.cos(phi), np.sin(phi), 0.0])
        R_upper = quaternion_matrix([0, 0, np.sin(phi / 2), np.cos(phi / 2)]) \
            @ quaternion_matrix([0, np.sin(alpha / 2), 0, np.cos(alpha / 2)])
        elbow = g["base"] * u + R_upper @ [g["upper"], 0, 0]
        rod = g["platform"] * u + [0, 0, -h] - elbow
        quat = quaternion_between(np.array([0, 0, -1.0]), R_upper.T @ rod / np.linalg.norm(rod))
        parts[f"shoulder{k}"], parts[f"elbow{k}"] = alpha, quat
        if k == 1:  # the platform level: its frame turned back from rod 1's
            R = (R_upper @ quaternion_matrix(quat)).T
            w = np.sqrt(1 + np.trace(R)) / 2
            parts["platform_ball"] = [(R[2, 1] - R[1, 2]) / (4 * w),
                                      (R[0, 2] - R[2, 0]) / (4 * w),
                                      (R[1, 0] - R[0, 1]) / (4 * w), w]
    q = model.q_from_dict(parts)
    assert np.max(np.abs(sd.constraint_residual(model, q))) < 1e-12
    rng = np.random.default_rng(seed)
    q = np.asarray(sd.integrate(model, q, rng.normal(size=model.nv) * 0.05))
    return sd.constraints.project(model, q, tol=1e-14,
                                  fixed=("shoulder1", "shoulder2", "shoulder3"))


def loop_velocity(model, q, rng):
    """A random qd with J qd = 0 (in the null space of J)."""
    J = np.asarray(sd.constraint_jacobian(model, q))
    _, s, Vt = np.linalg.svd(J)
    null = Vt[int(np.sum(s > 1e-10 * s[0])):]
    return rng.normal(size=len(null)) @ null


@pytest.fixture(scope="module")
def delta():
    return delta_robot()


def test_delta_robot_identities(delta):
    assert (delta.nq, delta.nv, delta.nconstraints) == (19, 15, 6)
    rng = np.random.default_rng(5)
    k, b = 1 / (TIMECONST * DAMPRATIO) ** 2, 2 / TIMECONST
    for seed in range(2):
        q = delta_configuration(delta, 0.4 + 0.3 * seed, seed)
        assert np.max(np.abs(sd.constraint_residual(delta, q))) < 1e-13
        assert sd.constraints.rank(delta, q) == 6
        qd, tau = loop_velocity(delta, q, rng) * 2, rng.normal(size=delta.nv)
        J = np.asarray(sd.constraint_jacobian(delta, q))
        assert np.max(np.abs(J @ qd)) < 1e-12
        # off the loop too: q moved along random directions, qd random
        q_off = np.asarray(sd.integrate(delta, q, rng.normal(size=delta.nv) * 0.01))
        for q_, qd_ in ((q, qd), (q_off, rng.normal(size=delta.nv))):
            J = np.asarray(sd.constraint_jacobian(delta, q_))
            e = np.asarray(sd.constraint_residual(delta, q_))
            gamma = derivative(lambda s: np.asarray(sd.constraint_jacobian(
                delta, sd.integrate(delta, q_, s * qd_))), 0.0) @ qd_
            qdd = np.asarray(sd.constrained_forward_dynamics(delta, q_, qd_, tau))
            lam = np.asarray(sd.constraint_forces(delta, q_, qd_, tau))
            assert_close(J @ qdd + gamma, -k * e - b * (J @ qd_), rtol=1e-6,
                         what="acceleration constraint")
            assert_close(np.asarray(sd.inverse_dynamics(delta, q_, qd_, qdd)) - J.T @ lam, tau,
                         rtol=1e-10, what="ID - J^T lambda")


def test_delta_robot_against_pinocchio(delta):
    pin = Pinocchio(delta)
    rng = np.random.default_rng(6)
    worst = 0.0
    for seed in range(4):
        q = delta_configuration(delta, 0.2 + 0.25 * seed, 10 + seed)
        qd, tau = loop_velocity(delta, q, rng) * 2, rng.normal(size=delta.nv)
        if seed >= 2:  # off the loops: the same Baumgarte gains (Kp = k, Kd = b) act
            q = np.asarray(sd.integrate(delta, q, rng.normal(size=delta.nv) * 0.01))
            qd = qd + rng.normal(size=delta.nv)
        ours = np.asarray(sd.constrained_forward_dynamics(delta, q, qd, tau))
        theirs = pin.qdd(q, qd, tau)
        assert_close(ours, theirs, what=f"seed {seed}")
        worst = max(worst, np.max(np.abs(ours - theirs)) / max(1, np.max(np.abs(theirs))))
    print(f"delta vs Pinocchio: worst relative difference {worst:.2g}")


def tendon_arm():
    """``planar_arm(3)`` with the fixed tendon L = 0.5 j1 + 1.5 j2 + j3 following j1
    (L - 0.1 = 2 j1) and j2 held at 0.3 (see ``test_fixed_tendon_coupling``)."""
    tendon = FixedTendon("tendon", ("j1", "j2", "j3"), (0.5, 1.5, 1.0))
    return planar_arm(3).with_constraints(
        Coupling("tendon", "j1", polynomial=(0.0, 2.0), reference=(0.1, 0.0),
                 name="tendon_follows_j1"),
        Coupling("j2", polynomial=(0.3,), name="hold_j2"), tendons=[tendon])


@pytest.mark.parametrize("case", ["delta", "tendon"])
def test_acceleration_constraint_is_exact(case):
    """With independent rows, e = 0 and e' = 0, qdd is the exact KKT solution (Pinocchio's at
    mu -> 0) to rounding, and J qdd + gamma = 0 (the tendon arm: gamma = 0, and j2, held, has
    qdd = 0)."""
    rng = np.random.default_rng(8)
    if case == "delta":
        model = delta_robot()
        q = delta_configuration(model, 0.5, 0)
        qd = loop_velocity(model, q, rng) * 2
    else:
        model = tendon_arm()
        q, qd = np.array([-0.9, 0.3, 0.1 - 1.35 - 0.45]), np.array([1.0, 0.0, 1.5]) * 1.7
    tau = rng.normal(size=model.nv)
    M = np.asarray(sd.mass_matrix(model, q))
    J = np.asarray(sd.constraint_jacobian(model, q))
    bias = np.asarray(sd.inverse_dynamics(model, q, qd, np.zeros(model.nv)))
    gamma = derivative(lambda s: np.asarray(sd.constraint_jacobian(
        model, sd.integrate(model, q, s * qd))), 0.0) @ qd
    m = model.nconstraints
    kkt = np.block([[M, J.T], [J, np.zeros((m, m))]])
    exact = np.linalg.solve(kkt, np.concatenate([tau - bias, -gamma]))[:model.nv]
    qdd = np.asarray(sd.constrained_forward_dynamics(model, q, qd, tau))
    assert_close(qdd, exact, rtol=1e-11, what="qdd against the exact KKT solution")


# -- URDF loop joints ----------------------------------------------------------------------------
def four_bar_urdf(a, c, r, d, loop='type="spherical"', ends=None):
    """The four-bar of ``four_bar`` as a URDF file whose ``<loop_joint>`` (Isaac Sim's
    extension) closes the loop: the coupler's end on the rocker's."""
    links = ['<link name="ground"><inertial><mass value="5"/><inertia ixx="1" iyy="1" izz="1"/>'
             '</inertial></link>']
    for name, (mass, com, I) in INERTIA.items():
        links.append(f'<link name="{name}"><inertial><origin xyz="{com[0]} {com[1]} {com[2]}"/>'
                     f'<mass value="{mass}"/><inertia ixx="{I[0][0]}" ixy="{I[0][1]}" '
                     f'ixz="{I[0][2]}" iyy="{I[1][1]}" iyz="{I[1][2]}" izz="{I[2][2]}"/>'
                     '</inertial></link>')
    joints = [f'<joint name="{name}" type="continuous"><parent link="{parent}"/>'
              f'<child link="{name}"/><origin xyz="{x} 0 0"/><axis xyz="0 -1 0"/></joint>'
              for name, parent, x in (("crank", "ground", 0), ("coupler", "crank", a),
                                      ("rocker", "ground", d))]
    ends = ends or f'<link1 link="coupler" xyz="{c} 0 0"/><link2 link="rocker" xyz="{r} 0 0"/>'
    return (f'<robot name="four_bar">{"".join(links + joints)}'
            f'<loop_joint name="loop" {loop}>{ends}</loop_joint></robot>')


def test_urdf_loop_joint_closes_the_four_bar():
    """A URDF four-bar closed by a spherical ``<loop_joint>`` loads with its Connect (the
    builder's ``four_bar`` exactly), and its constrained accelerations are the reduced
    Lagrangian's of the planar closed form on the loop, at rest and moving."""
    loaded = sd.load_urdf(four_bar_urdf(**GENERAL))
    assert loaded.constraints == four_bar(**GENERAL).constraints
    ref = PlanarFourBar(**GENERAL)
    rng = np.random.default_rng(8)
    for theta, branch in ((0.4, 1.0), (2.1, -1.0)):
        q = ref.close(theta, branch)
        for theta_dot in (0.0, 2.5):
            tau = rng.normal(size=3)
            expected = reduced_qdd(lambda t: ref.close(t, branch),
                                   lambda t: ref.tangent(ref.close(t, branch)),
                                   ref.mass_matrix, ref.potential, theta, theta_dot, tau)
            qdd = sd.constrained_forward_dynamics(loaded, q, ref.tangent(q) * theta_dot, tau)
            assert_close(qdd, expected, what=f"theta {theta}")


def test_urdf_fixed_loop_joint_welds_the_frames():
    """A ``<loop_joint type="fixed">`` is a Weld of its two frames (xyz, rpy on each link):
    its residual is zero where the frames coincide (link2's frame placed on link1's at a
    random q) and not elsewhere."""
    from scipy.spatial.transform import Rotation

    model = sd.load_urdf(four_bar_urdf(**GENERAL, loop='type="spherical"'))
    rng = np.random.default_rng(9)
    q = rng.normal(size=3)
    T = np.asarray(sd.forward_kinematics(model, q))
    names = list(model.link_names)
    frame1 = np.eye(4)
    frame1[:3, :3] = Rotation.from_euler("xyz", [0.3, -0.2, 0.7]).as_matrix()
    frame1[:3, 3] = (0.5, 0.1, -0.05)
    world = T[names.index("coupler")] @ frame1
    frame2 = np.linalg.inv(T[names.index("rocker")]) @ world
    rpy2 = Rotation.from_matrix(frame2[:3, :3]).as_euler("xyz")

    def text(values):
        return " ".join(f"{v:.17g}" for v in values)

    ends = (f'<link1 link="coupler" xyz="0.5 0.1 -0.05" rpy="0.3 -0.2 0.7"/>'
            f'<link2 link="rocker" xyz="{text(frame2[:3, 3])}" rpy="{text(rpy2)}"/>')
    welded = sd.load_urdf(four_bar_urdf(**GENERAL, loop='type="fixed"', ends=ends))
    (weld,) = welded.constraints
    assert isinstance(weld, Weld) and weld.name == "loop"
    assert np.abs(np.asarray(sd.constraint_residual(welded, q))).max() < 1e-12
    assert np.abs(np.asarray(sd.constraint_residual(welded, q + 0.1))).max() > 1e-3


def test_urdf_loop_joints_that_are_not_modelled_are_refused():
    """A loop joint of another type, without its second link, or on a link the file has not:
    a ModelError naming the element."""
    for loop, ends, message in [
            ('type="revolute"', None, '<loop_joint name="loop">: type \'revolute\' is not '
                                      'modelled'),
            ('type="spherical"', '<link1 link="coupler"/>', "missing <link2 link=...>"),
            ('type="spherical"', '<link1 link="coupler"/><link2 link="nowhere"/>',
             '<link2>: the file has no <link name="nowhere">')]:
        with pytest.raises(sd.ModelError, match=re.escape(message)):
            sd.load_urdf(four_bar_urdf(**GENERAL, loop=loop, ends=ends))


# -- couplings and tendons -----------------------------------------------------------------------
def planar_arm(n=2):
    """n links in the x-z plane, revolute about -y, each 0.5 m (centre of mass at 0.25 m)."""
    b = sd.ModelBuilder("arm")
    b.add_link("l0")
    for i in range(1, n + 1):
        b.add_link(f"l{i}", mass=1.0 + 0.3 * i, com=(0.25, 0, 0.02),
                   inertia=np.diag([0.02 + 0.01 * i, 0.02 + 0.01 * i, 0.005]))
        b.add_joint(f"j{i}", "revolute", f"l{i - 1}", f"l{i}", xyz=(0.5 if i > 1 else 0, 0, 0),
                    axis=AXIS)
    return b.build()


class PlanarArm:
    """``planar_arm`` in numpy: M(q) and V(q) from the planar link kinematics."""

    def __init__(self, model):
        self.links = [(b.mass, np.array([b.com[0], b.com[2]]), b.inertia[4])
                      for b in model.bodies]

    def _each(self, q):
        pivot, phi = np.zeros(2), 0.0
        for i, (m, s, Iyy) in enumerate(self.links):
            if i:
                pivot = pivot + rot(phi) @ [0.5, 0.0]
            phi = phi + q[i]
            yield i, m, pivot + rot(phi) @ s, Iyy

    def mass_matrix(self, q):
        n = len(self.links)
        M = np.zeros((n, n))
        pivots = [np.zeros(2)]
        for i in range(1, n):
            pivots.append(pivots[-1] + rot(np.sum(q[:i])) @ [0.5, 0.0])
        for i, m, com, Iyy in self._each(q):
            Jc = np.zeros((2, n))
            for j in range(i + 1):
                Jc[:, j] = perp(com - pivots[j])
            Jw = (np.arange(n) <= i).astype(float)
            M += m * Jc.T @ Jc + Iyy * np.outer(Jw, Jw)
        return M

    def potential(self, q):
        return sum(m * G * com[1] for _, m, com, _ in self._each(q))


def test_quadratic_joint_coupling():
    """j2 - y0 = a0 + a1 (j1 - x0) + a2 (j1 - x0)^2: q = (theta, f(theta)),
    N = (1, f'(theta)), against the reduced Lagrangian."""
    poly, (y0, x0) = (0.1, -0.6, 0.8), (0.2, 0.3)
    arm = planar_arm(2)
    model = arm.with_constraints(Coupling("j2", "j1", polynomial=poly, reference=(y0, x0),
                                          name="knee"))
    assert sd.constraints.labels(model) == ["knee"] and model.nconstraints == 1
    ref = PlanarArm(arm)

    def q_of(t):
        return np.array([t, y0 + np.polyval(poly[::-1], t - x0)])

    def N_of(t):
        return np.array([1.0, poly[1] + 2 * poly[2] * (t - x0)])

    rng = np.random.default_rng(9)
    for theta, theta_dot in ((0.0, 0.0), (0.7, 2.0), (-1.1, -1.5)):
        q = q_of(theta)
        np.testing.assert_allclose(sd.mass_matrix(arm, q), ref.mass_matrix(q), atol=1e-13)
        assert abs(float(sd.constraint_residual(model, q)[0])) < 1e-15
        tau = rng.normal(size=2)
        expected = reduced_qdd(q_of, N_of, ref.mass_matrix, ref.potential, theta, theta_dot,
                               tau)
        qdd = sd.constrained_forward_dynamics(model, q, N_of(theta) * theta_dot, tau)
        assert_close(qdd, expected, what=f"theta {theta}")
        # the coupling's force is the generalised force along j2 that enforces it
        lam = sd.constraint_forces(model, q, N_of(theta) * theta_dot, tau)
        J = np.asarray(sd.constraint_jacobian(model, q))
        np.testing.assert_allclose(J, [[-N_of(theta)[1], 1.0]], atol=1e-15)
        assert_close(np.asarray(sd.inverse_dynamics(model, q, N_of(theta) * theta_dot, qdd))
                     - J.T @ np.asarray(lam), tau, rtol=1e-10, what="ID - J^T lambda")
    # a violation decays as the stabilisation says: e'' = -k e - b e'
    q, qd = np.array([0.5, 0.0]), np.array([0.3, -0.2])
    coupling = model.constraints[0]
    k, b = coupling.gains
    e = float(sd.constraint_residual(model, q)[0])
    x = q[0] - x0
    e_dot = qd[1] - (poly[1] + 2 * poly[2] * x) * qd[0]
    qdd = np.asarray(sd.constrained_forward_dynamics(model, q, qd, np.zeros(2)))
    e_ddot = qdd[1] - (poly[1] + 2 * poly[2] * x) * qdd[0] - 2 * poly[2] * qd[0] ** 2
    assert_close(e_ddot, -k * e - b * e_dot, what="e''")


def test_fixed_tendon_coupling():
    """A fixed tendon L = 0.5 j1 + 1.5 j2 + j3 of a 3-link arm coupled to j1
    (L - 0.1 = 2 (j1 - 0) => j3 = 0.1 + 1.5 j1 - 1.5 j2) and a second coupling holding j2 at
    0.3 (no source): 1 DoF left, q = (theta, 0.3, 0.1 + 1.5 theta - 0.45), N = (1, 0, 1.5),
    against the reduced Lagrangian."""
    arm, model = planar_arm(3), tendon_arm()
    assert sd.constraints.labels(model) == ["tendon_follows_j1", "hold_j2"]
    ref = PlanarArm(arm)

    def q_of(t):
        return np.array([t, 0.3, 0.1 + 1.5 * t - 0.45])

    def N_of(t):
        return np.array([1.0, 0.0, 1.5])

    rng = np.random.default_rng(10)
    for theta, theta_dot in ((0.2, 0.0), (-0.9, 1.7)):
        q = q_of(theta)
        assert np.max(np.abs(sd.constraint_residual(model, q))) < 1e-15
        tau = rng.normal(size=3)
        expected = reduced_qdd(q_of, N_of, ref.mass_matrix, ref.potential, theta, theta_dot,
                               tau)
        qdd = sd.constrained_forward_dynamics(model, q, N_of(theta) * theta_dot, tau)
        assert_close(qdd, expected, what=f"theta {theta}")
    q = sd.constraints.project(model, np.array([0.4, 0.0, 0.0]), fixed=("j1",))
    np.testing.assert_allclose(q, q_of(0.4), atol=1e-12)


def test_bad_input_names_the_culprit(general):
    arm = planar_arm(2)
    with pytest.raises(sd.ModelError, match="link_a 'nowhere' is no link of model"):
        general.with_constraints(Connect("nowhere", "rocker", name="lost"))
    with pytest.raises(sd.ModelError, match="Connect 'lost'.*link_b 'ghost'"):
        general.with_constraints(Connect("crank", "ghost", name="lost"))
    b = sd.ModelBuilder("ball")
    b.add_link("base")
    b.add_link("ball", mass=1.0, inertia=np.eye(3))
    b.add_link("tip", mass=1.0, inertia=np.eye(3))
    b.add_joint("shoulder", "spherical", "base", "ball")
    b.add_joint("hinge", "revolute", "ball", "tip", axis=(0, 0, 1))
    with pytest.raises(sd.ModelError, match="Coupling 'wrist'.*joint 'shoulder' has 4 "
                                            "coordinates"):
        b.build().with_constraints(Coupling("hinge", "shoulder", name="wrist"))
    with pytest.raises(sd.ModelError, match="Connect 'loop': timeconst must be a finite "
                                            "number > 0, got -0.1"):
        Connect("coupler", "rocker", name="loop", timeconst=-0.1)
    with pytest.raises(sd.ModelError, match="dampratio"):
        Coupling("j2", "j1", dampratio=0.0)
    tendons = [FixedTendon("t", ("j1",), (1.0,)), FixedTendon("t", ("j2",), (1.0,))]
    with pytest.raises(sd.ModelError, match=r"tendon names must be unique, got \['t', "
                                            r"'t'\]"):
        arm.with_constraints(tendons=tendons)
    string = SpatialTendon("t", [("l0", (0, 0, 0)), ("l1", (0, 0, 0))])
    with pytest.raises(sd.ModelError, match=r"tendon names must be unique, got \['t', 't'\]"):
        arm.with_constraints(tendons=tendons[:1] + [string])  # one name for both kinds
    with pytest.raises(sd.ModelError, match="tendon 'j1' has the name of a joint"):
        arm.with_constraints(tendons=[SpatialTendon("j1", string.sites)])
    with pytest.raises(sd.ModelError, match="no moving joint named 'j9'"):
        arm.with_constraints(Coupling("j9", "j1"))
    with pytest.raises(sd.ModelError, match="fixed tendon 'u'.*no moving joint named 'j7'"):
        arm.with_constraints(tendons=[FixedTendon("u", ("j7",), (1.0,))])


# -- soft constraints (MuJoCo's solimp) ----------------------------------------------------------
def slider(mass=2.0):
    """A body of ``mass`` (kg) on a vertical slider ``lift`` (q up, m), under gravity."""
    b = sd.ModelBuilder("slider")
    b.add_link("base")
    b.add_link("body", mass=mass, inertia=np.eye(3) * 0.01)
    b.add_joint("lift", "prismatic", "base", "body", axis=(0, 0, 1))
    return b.build()


@pytest.mark.parametrize("solimp", [0.9, (0.5, 0.99, 0.01, 0.3, 3.0)],
                         ids=["constant", "sigmoid"])
def test_soft_coupling_sags_as_its_impedance_says(solimp):
    """A slider held at q = 0 by a soft Coupling (impedance d < 1, MuJoCo's solimp) sags under
    gravity to where its compliance carries the weight: e = g (1 - d) (dmax timeconst / d)^2
    (``conftest.soft_sink``, d read at e), to 1e-9 m, on numpy, native code and JAX. A soft
    row's acceleration is (1 - d) a0 + d a_ref (a0 = -g without it, a_ref = -k d / dmax e -
    b e', k and b written at dmax) at every state, in every algebra; the hard coupling
    (impedance 1, the default) is unchanged: e'' = -k e - b e'."""
    from conftest import soft_sink

    held = Coupling("lift", polynomial=(0.0,), name="hold", impedance=solimp)
    model = slider().with_constraints(held)
    (c,) = model.constraints
    assert c.soft and not Coupling("lift").soft
    dmin, dmax = c.impedance.dmin, c.impedance.dmax
    sag = soft_sink(G, TIMECONST, c.impedance.as_tuple() if dmin != dmax
                    else (dmin, dmax, 0.001, 0.5, 2.0))
    k, b = c.gains
    assert (k, b) == pytest.approx((1 / (dmax * TIMECONST ** 2), 2 / (dmax * TIMECONST)))
    for q, qd in ((0.0, 0.0), (-0.004, 0.3), (0.02, -1.0), (-sag, 0.0)):
        d = float(c.impedance.at(np, q))
        a_ref = -k * d / dmax * q - b * qd
        for algebra in ("spatial", "cga", "dq"):
            qdd = sd.constrained_forward_dynamics(model, [q], [qd], [0.0], algebra=algebra)
            assert_close(qdd, [(1 - d) * -G + d * a_ref], rtol=1e-12, what=f"{q} {algebra}")
    # at the sag the compliance carries the whole weight
    assert_close(sd.constraint_forces(model, [-sag], [0.0], [0.0]), [2.0 * G], rtol=1e-9)
    for backend in ("numpy", "native", "jax"):
        traj = sd.simulate(model, [0.0], [0.0], None, 1.5, 1e-3, backend=backend,
                           integrator="semi_implicit_euler")
        assert traj.q[-1, 0] == pytest.approx(-sag, abs=1e-9), backend
    hard = slider().with_constraints(Coupling("lift", polynomial=(0.0,)))
    traj = sd.simulate(hard, [0.0], [0.0], None, 1.5, 1e-3, integrator="semi_implicit_euler")
    assert abs(traj.q[-1, 0]) < 1e-12


def test_soft_rows_scale_given_inverse_weights():
    """``inverse_weights`` replace a soft row's exact A_jj in its compliance (MuJoCo's
    approximation): the slider's A_jj is 1 / m; given 1 / (2 m) its compliance halves and it
    sags as a row of A_jj half as large would, g / 2 in soft_sink."""
    from conftest import soft_sink

    exact = slider().with_constraints(Coupling("lift", polynomial=(0.0,), impedance=0.9))
    given = slider().with_constraints(Coupling("lift", polynomial=(0.0,), impedance=0.9,
                                               inverse_weights=(0.25,)))
    assert given.constraints[0].inverse_weights == (0.25,)
    for model, load in ((exact, G), (given, G / 2)):
        traj = sd.simulate(model, [0.0], [0.0], None, 1.5, 1e-3,
                           integrator="semi_implicit_euler")
        sag = soft_sink(load, TIMECONST, (0.9, 0.9, 0.001, 0.5, 2.0))
        assert traj.q[-1, 0] == pytest.approx(-sag, abs=1e-9)


def test_bad_softness_names_the_constraint():
    """An impedance outside (0, 1] or not a solimp, inverse weights of the wrong count or not
    > 0, a weld's torquescale not > 0: a ModelError naming the constraint and the field."""
    with pytest.raises(sd.ModelError, match=r"Coupling 'hold': impedance must be a number in "
                                            r"\(0, 1\]"):
        Coupling("lift", name="hold", impedance=1.5)
    with pytest.raises(sd.ModelError, match="Connect 'loop': impedance.*dmax must be in"):
        Connect("a", "b", name="loop", impedance=(0.9, 0.0))
    with pytest.raises(sd.ModelError, match="Coupling: impedance must be a number d"):
        Coupling("lift", impedance="soft")
    with pytest.raises(sd.ModelError, match="Connect 'loop': inverse_weights must be 3 "
                                            "finite numbers"):
        Connect("a", "b", name="loop", inverse_weights=(1.0, 1.0))
    with pytest.raises(sd.ModelError, match=r"Coupling 'hold': inverse_weights must be > 0"):
        Coupling("lift", name="hold", inverse_weights=(0.0,))
    with pytest.raises(sd.ModelError, match="Weld 'grip': torquescale must be a finite number "
                                            "> 0, got 0"):
        sd.constraints.Weld("a", "b", name="grip", torquescale=0)
