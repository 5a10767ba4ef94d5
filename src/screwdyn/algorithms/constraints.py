"""Equality constraints e(q) = 0 (``model/constraints.py``): their residual e, Jacobian
J = de/dq (in the tangent space, e' = J qd) and the acceleration bias gamma = dJ/dt qd, so that
e'' = J qdd + gamma; then constrained forward dynamics by the Schur complement of the KKT system
(Featherstone, RBDA section 8.3; Pinocchio's ``constraintDynamics``):

    [M  J^T] [ qdd  ]   [tau - b         ]
    [J   0 ] [-lambda] = [a_ref - gamma  ],   a_ref = -k e - b_s e'  (Baumgarte, MuJoCo's solref)

    qdd0 = ABA(q, qd, tau)            (the unconstrained accelerations)
    A = J M^-1 J^T + eps I,  lambda = A^-1 (a_ref - gamma - J qdd0),  qdd = qdd0 + M^-1 J^T lambda

A soft constraint (its impedance d < 1, MuJoCo's solimp; ``model/constraints.py``) adds its
compliance R = diag((1 - d) / d A_jj) to A, and its stiffness term is k d(r) / dmax e
(``impedance_terms``): lambda = (A + R)^-1 (a_ref - gamma - J qdd0), MuJoCo's soft equality
constraints (their exact solution: equality rows have no cone, nothing to iterate).

lambda (m,) are the constraint forces (N, N m; J^T lambda the joint forces they make). eps = 1e-9
times A's mean diagonal regularises redundant rows (an over-constrained loop: A is singular),
whose forces are then the least-squares split (their part in J^T's null space does not change
qdd); one step of iterative refinement against A removes the regularisation's bias on the
other rows (from eps to eps^2).

Written once over the algebra operations (twists and poses of ``alg``), on arrays with a
trailing batch axis (N), so that it runs in every algebra, on numpy, JAX, and the native tracer.
Point kinematics in a link's frame: twist (v, w) and acceleration (a, alpha) of its origin, in
link axes; the classical acceleration of a point r fixed in the link is
R (a + alpha x r + w x (v + w x r)).
"""
from typing import Any, NamedTuple

import numpy as np

from ..algebra import link_placements
from ..model import constraints as _c
from . import spd
from .jacobian import link_jacobian
from .kinematics import (body_velocities, joint_poses, motion_subspaces, velocity_product,
                         world_poses)

#: redundant constraint rows: A + EPSILON * mean(diag A) I (see the module docstring)
EPSILON = 1e-9


def _cross(xp, a, b):
    return xp.stack([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])


def _rotate(xp, R, r):
    """R (3, 3, N) times r (3, N) or a constant (3,)."""
    return xp.stack([R[i, 0] * r[0] + R[i, 1] * r[1] + R[i, 2] * r[2] for i in range(3)])


class _LinkMotion:
    """Pose, twist and velocity-product acceleration (qdd = 0, no gravity) of each body, from
    which each constrained link's terms are read."""

    def __init__(self, alg, model, q, qd):
        self.alg, self.model, self.q = alg, model, q
        xp = alg.xp
        X = joint_poses(alg, model, q)
        self.T = world_poses(alg, model, X)
        v, vJ = body_velocities(alg, model, X, motion_subspaces(alg, model, q), qd)
        c = velocity_product(alg, model, q, qd, v, vJ)
        a = []
        for i, parent in enumerate(model.parent):
            a.append(c[i] if parent < 0 else alg.inv_act_twist(X[i], a[parent]) + c[i])
        self.v, self.a = v, a
        self.zero = xp.zeros(q.shape[1:], dtype=q.dtype)
        self.placements = link_placements(alg, model)

    def link(self, name):
        """(R (3, 3, N), p (3, N), v, w, a, alpha (3, N) each, link axes, or None at rest;
        Jacobian (6, nv, N) of the origin, world axes) of link ``name``."""
        alg, model, xp = self.alg, self.model, self.alg.xp
        index = model.link_index(name)
        link, placement = model.links[index], self.placements[index]
        if link.body < 0:
            T = alg.to_matrix(placement)
            R = xp.stack([xp.stack([T[i, j] + self.zero for j in range(3)]) for i in range(3)])
            p = xp.stack([T[i, 3] + self.zero for i in range(3)])
            return R, p, None, xp.zeros((6, model.nv) + self.zero.shape, dtype=self.q.dtype)
        T = alg.to_matrix(alg.compose(self.T[link.body], placement))
        twist = alg.twist_vector(alg.inv_act_twist(placement, self.v[link.body]))
        accel = alg.twist_vector(alg.inv_act_twist(placement, self.a[link.body]))
        motion = (twist[:3], twist[3:], accel[:3], accel[3:])
        return T[:3, :3], T[:3, 3], motion, link_jacobian(alg, model, self.q, index, "world")

    def point(self, name, r):
        """(position (3, N), Jacobian (3, nv, N), gamma (3, N), R, angular Jacobian (3, nv, N),
        angular gamma (3, N)) of the point r (3,) fixed in link ``name``, world axes."""
        xp = self.alg.xp
        R, p, motion, J = self.link(name)
        Rr = _rotate(xp, R, r)
        position = p + Rr
        # v_point = v_o + w x (R r): J_point = J_lin - [R r]x J_ang
        J_point = J[:3] - _cross(xp, Rr[:, None], J[3:])
        if motion is None:
            zero = xp.zeros((3,) + self.zero.shape, dtype=self.q.dtype)
            return position, J_point, zero, R, J[3:], zero
        v, w, a, alpha = motion
        r = xp.stack([r[0] + self.zero, r[1] + self.zero, r[2] + self.zero])
        classical = a + _cross(xp, alpha, r) + _cross(xp, w, v + _cross(xp, w, r))
        return position, J_point, _rotate(xp, R, classical), R, J[3:], _rotate(xp, R, alpha)


def _horner(coefficients, x):
    """sum_k coefficients[k] x^k (0 for none), by Horner's rule."""
    out = 0.0 * x
    for a_k in reversed(coefficients):
        out = out * x + a_k
    return out


def constraint_terms(alg, model, q, qd):
    """(e (m, N), J (m, nv, N), gamma (m, N)) of ``model.constraints`` at q (nq, N), qd (nv, N),
    the rows in the constraints' order (``Connect`` 3, ``Weld`` 6, ``Coupling`` 1)."""
    xp = alg.xp
    motion = _LinkMotion(alg, model, q, qd)
    e, J, gamma = [], [], []
    for c in model.constraints:
        if isinstance(c, _c.Connect):
            pa, Ja, ga, Ra, Wa, aa = motion.point(c.link_a, c.point_a)
            pb, Jb, gb, Rb, Wb, ab = motion.point(c.link_b, c.point_b)
            e.append(pa - pb)
            J.append(Ja - Jb)
            gamma.append(ga - gb)
            if isinstance(c, _c.Weld):  # R_a (R_b rel)^T = I: sin(angle) axis of it
                rel = np.array(c.rotation).reshape(3, 3)
                target = xp.stack([xp.stack([sum(Rb[i, k] * rel[k, j] for k in range(3))
                                             for j in range(3)]) for i in range(3)])
                E = [[sum(Ra[i, k] * target[j, k] for k in range(3)) for j in range(3)]
                     for i in range(3)]
                e.append(0.5 * xp.stack([E[2][1] - E[1][2], E[0][2] - E[2][0],
                                         E[1][0] - E[0][1]]))
                J.append(Wa - Wb)
                gamma.append(aa - ab)
        else:
            y_q, y_v, y_c = _c.linear_map(model, c.target, "")
            y = sum(k * q[i] for i, k in zip(y_q, y_c)) - c.reference[0]
            row = [0.0 * motion.zero] * model.nv
            for i, k in zip(y_v, y_c):
                row[i] = row[i] + k
            if c.source is None:
                e.append((y - c.polynomial[0])[None])
                J.append(xp.stack(row)[None])
                gamma.append((0.0 * motion.zero)[None])
                continue
            x_q, x_v, x_c = _c.linear_map(model, c.source, "")
            x = sum(k * q[i] for i, k in zip(x_q, x_c)) - c.reference[1]
            xd = sum(k * qd[i] for i, k in zip(x_v, x_c))
            a = c.polynomial
            value = _horner(a, x)
            slope = _horner([k * a_k for k, a_k in enumerate(a)][1:], x)
            curvature = _horner([k * (k - 1) * a_k for k, a_k in enumerate(a)][2:], x)
            for i, k in zip(x_v, x_c):
                row[i] = row[i] - k * slope
            e.append((y - value)[None])
            J.append(xp.stack(row)[None])
            gamma.append((-curvature * xd * xd + 0.0 * motion.zero)[None])
    return xp.concatenate(e), xp.concatenate(J), xp.concatenate(gamma)


def gains(model):
    """(k (m,), b (m,)): each row's stabilisation stiffness (1/s^2) and damping (1/s)."""
    k, b = [], []
    for c in model.constraints:
        k += [c.gains[0]] * c.rows
        b += [c.gains[1]] * c.rows
    return np.array(k), np.array(b)


class Softness(NamedTuple):
    """The soft constraints' terms at a residual (``impedance_terms``), rows first."""

    #: (m, N): each row's factor d(r) / dmax on its stiffness k (1 on a hard row)
    scale: Any
    #: (m, N): each row's compliance relative to its scale, (1 - d) / d (0 on a hard row)
    compliance: Any
    #: (m,): 1 where the compliance scales the row's exact A_jj, 0 where a given weight
    exact: Any
    #: (m,): the given inverse weights (``Constraint.inverse_weights``), 0 where exact
    weights: Any

    def rows(self, xp, A_diag):
        """R (N, m): each row's compliance, for A's diagonal A_diag (N, m)."""
        return xp.moveaxis(self.compliance, -1, 0) * (self.exact * A_diag + self.weights)


def impedance_terms(xp, model, e):
    """None where every constraint of ``model`` is hard; else their ``Softness`` at the
    residual e (m, N): each row's factor d(r) / dmax on its stiffness k and its compliance
    R_jj / A_jj = (1 - d) / d, d read at the constraint's violation r (MuJoCo's: the norm of a
    Connect's 3 rows and of a Weld's 6, its orientation rows times torquescale / 2 as
    MuJoCo's are torquescale times the quaternion error, sin(angle / 2) axis; |e| of a
    Coupling), and what R scales."""
    if not any(c.soft for c in model.constraints):
        return None
    weights = np.concatenate([c.inverse_weights or np.zeros(c.rows)
                              for c in model.constraints])
    exact = np.concatenate([np.full(c.rows, float(c.inverse_weights is None))
                            for c in model.constraints])
    scale, compliance, first = [], [], 0
    for c in model.constraints:
        rows = e[first:first + c.rows]
        first += c.rows
        if c.impedance.constant:
            r = None
        elif isinstance(c, _c.Weld):
            r = xp.sqrt(xp.sum(rows[:3] ** 2, axis=0)
                        + (0.5 * c.torquescale) ** 2 * xp.sum(rows[3:] ** 2, axis=0))
        elif isinstance(c, _c.Connect):
            r = xp.sqrt(xp.sum(rows ** 2, axis=0))
        else:
            r = rows[0]
        scale.append(0.0 * rows + c.impedance.scale(xp, r))
        compliance.append(0.0 * rows + c.impedance.compliance(xp, r))
    return Softness(xp.concatenate(scale), xp.concatenate(compliance), exact, weights)


def solve(xp, M, J, qdd0, rhs, soft=None):
    """(qdd (nv, N), lambda (m, N)) for M (nv, nv, N), J (m, nv, N), the unconstrained
    accelerations qdd0 (nv, N) and rhs = a_ref - gamma (m, N); ``soft``: the soft
    constraints' ``Softness``, or None (all hard) (see the module docstring)."""
    Mb, Jb = xp.moveaxis(M, -1, 0), xp.moveaxis(J, -1, 0)  # (N, nv, nv), (N, m, nv)
    MinvJT = spd.solve(xp, Mb, xp.moveaxis(Jb, -1, -2))  # (N, nv, m)
    A = xp.einsum("nij,njk->nik", Jb, MinvJT)
    m = J.shape[0]
    scale = sum(A[:, i, i] for i in range(m)) * (EPSILON / m) + 1e-300
    if soft is not None:  # A + R, R = diag((1 - d) / d A_jj)
        R = soft.rows(xp, xp.stack([A[:, i, i] for i in range(m)], axis=-1))
        A = A + R[:, :, None] * np.eye(m)
    residual = xp.moveaxis(rhs, -1, 0) - xp.einsum("nij,jn->ni", Jb, qdd0)
    regularised = A + scale[:, None, None] * np.eye(m)
    lam = spd.solve(xp, regularised, residual[..., None])[..., 0]  # (N, m)
    # one step of iterative refinement against A itself: the regularisation's bias on
    # independent rows falls from eps to eps^2 (exact to rounding)
    lam = lam + spd.solve(xp, regularised, (residual - xp.einsum("nij,nj->ni", A, lam))
                          [..., None])[..., 0]
    qdd = qdd0 + xp.moveaxis(xp.einsum("nij,nj->ni", MinvJT, lam), 0, -1)
    return qdd, xp.moveaxis(lam, 0, -1)
