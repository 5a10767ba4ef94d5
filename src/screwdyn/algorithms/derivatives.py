"""Derivatives of inverse and forward dynamics: the recursive algorithm of Carpentier and Mansard
(RSS 2018, Pinocchio's ``computeRNEADerivatives``) in world-frame quantities, O(n d) for n joints
of depth d, written once on the algebra operations; forward dynamics' from it, as Pinocchio's
``computeABADerivatives``: d qdd/dx = -M^-1 d tau/dx at qdd = FD(q, qd, tau), d qdd/d tau = M^-1,
with M^-1 applied through the tree's sparse factor M = L^T D L (``spd.tree_factor``).

World frame, at the world origin, for body i: J_i its joint's columns (S_i moved to the world),
v_i its twist, a_i its spatial acceleration (gravity as a_0 = -g), Y_i its inertia, h_i = Y_i v_i,
f_i = Y_i a_i + v_i x* h_i less the external wrench, and Ydot_i = v_i x* Y_i - Y_i v_i x
(``inertia_variation``). Yc, Ydc, Hc, Fc: their sums over a body's subtree.

Moving the tangent coordinate k of joint kappa (parent lambda) turns kappa's subtree rigidly about
J_k: every world quantity of the subtree is carried along (J_k x on motions, J_k x* on wrenches),
and the twists and accelerations of all its bodies gain the same motions

    dv_i/dq_k = J_k x v_i + w_k,                 w_k = v_lambda x J_k
    da_i/dq_k = J_k x a_i + w_k x v_i + alpha_k,  alpha_k = a_lambda x J_k + v_lambda x w_k

so that df_i/dq_k = J_k x* f_i + Y_i alpha_k + Ydot_i w_k + w_k x* h_i. In tau_j = J_j . Fc_j the
carrying cancels for the rows j in kappa's subtree; for the rows of kappa's ancestors the subtree's
wrench Fc turns with it:

    dtau_j/dq_k = (Yc J_j) . alpha_k + (Ydc J_j - J_j x* Hc) . w_k     (j in the subtree; j's Yc..)
                = J_j . (Yc alpha_k + Ydc w_k + w_k x* Hc + J_k x* Fc)  (j above kappa; kappa's)

The rates: dv_i/dqd_k = J_k and da_i/dqd_k = J_k x v_i + u_k with u_k = (v_lambda + v_kappa) x J_k,
so d tau/d qd has the same two forms with (u_k, J_k) in place of (alpha_k, w_k) and no J_k x* Fc;
d tau/d qdd is the mass matrix, (Yc J_j) . J_k. A joint whose S depends on q (MuJoCo's free joint)
adds its own terms (``JointModel.subspace_derivatives``) to w_k, alpha_k, u_k and to its own
rows. The joints' own forces add armature to d/d qdd and damping to d/d qd (Coulomb friction is
constant in qd away from zero).
"""
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..algebra import body_constants
from ..algebra.entries import ZERO, map_columns, stack
from .spd import tree_factor, tree_solve
from .kinematics import (joint_motion, joint_poses, motion_subspaces, subspace_rates,
                         world_poses)


class Columns(NamedTuple):
    """Per tangent coordinate k (tree order), the world-frame vectors the derivatives are made
    of (algebra objects; ``w[k]`` None where it is zero, at a root): the column J_k, the
    wrenches YJ_k = Yc J_k and BJ_k = Ydc J_k - J_k x* Hc (composites of k's body), the motions
    alpha_k, w_k, u_k, and the wrenches P_k, Q_k that the rows above k's joint pair with. ``own``:
    {(row, column): entry} of the terms a configuration-dependent joint adds to its own block of
    d tau/dq."""

    J: list
    YJ: list
    BJ: list
    alpha: list
    w: list
    u: list
    P: list
    Q: list
    own: dict


def derivative_columns(alg, model, q, qd, qdd, a0, f_ext=None):
    """The ``Columns`` of the derivatives of inverse dynamics at (q, qd, qdd): one pass root to
    leaves (the world-frame kinematics and each column's motions), one leaves to root (the
    composites and each column's wrenches). ``a0`` = -gravity as a twist in the world frame
    (the base's frame); ``f_ext``: None or one wrench per body, in the body's frame, that the
    environment applies to it."""
    n, parent, slices = model.nbodies, model.parent, model.v_slices
    T = world_poses(alg, model, joint_poses(alg, model, q))
    S = motion_subspaces(alg, model, q)
    Sdot = subspace_rates(alg, model, q, qd)
    J = [[alg.act_twist(T[i], S_ik) for S_ik in S[i]] for i in range(n)]
    v, a, Y, Yd, H, F = [], [], [], [], [], []
    w, alpha, u = [None] * n, [None] * n, [None] * n  # per joint, one per column
    own = {}
    for i, (_, _, I) in enumerate(body_constants(alg, model)):  # root to leaves
        sl = slices[i]
        vJ = joint_motion(J[i], qd[sl])
        v_p, a_p = (None, a0) if parent[i] < 0 else (v[parent[i]], a[parent[i]])
        v.append(vJ if v_p is None else v_p + vJ)
        a_i = a_p + joint_motion(J[i], qdd[sl]) + alg.cross_motion(v[i], vJ)
        if Sdot[i] is not None:
            a_i = a_i + alg.act_twist(T[i], joint_motion(Sdot[i], qd[sl]))
        a.append(a_i)
        Y.append(alg.inertia_act(T[i], I))
        Yd.append(alg.inertia_variation(v[i], Y[i]))
        H.append(alg.inertia_apply(Y[i], v[i]))
        f_i = alg.inertia_apply(Y[i], a[i]) + alg.cross_force(v[i], H[i])
        if f_ext is not None:
            f_i = f_i - alg.act_wrench(T[i], f_ext[i])
        F.append(f_i)
        w[i] = [None if v_p is None else alg.cross_motion(v_p, J_k) for J_k in J[i]]
        alpha[i] = [alg.cross_motion(a_p, J_k) if w_k is None else
                    alg.cross_motion(a_p, J_k) + alg.cross_motion(v_p, w_k)
                    for J_k, w_k in zip(J[i], w[i])]
        u[i] = [alg.cross_motion(v[i] if v_p is None else v_p + v[i], J_k) for J_k in J[i]]
        if Sdot[i] is not None:
            _moving_subspace(alg, model, i, T[i], q, qd, qdd, v, v_p, w, alpha, u, own)
    out = Columns(*([None] * model.nv for _ in range(8)), own={})
    for i in reversed(range(n)):  # leaves to root: the composites of i are complete
        for c, J_k, alpha_k, w_k, u_k in zip(range(slices[i].start, slices[i].stop), J[i],
                                             alpha[i], w[i], u[i]):
            YJ = alg.inertia_apply(Y[i], J_k)
            BJ = alg.inertia_apply(Yd[i], J_k) - alg.cross_force(J_k, H[i])
            P = alg.inertia_apply(Y[i], alpha_k) + alg.cross_force(J_k, F[i])
            if w_k is not None:
                P = P + alg.inertia_apply(Yd[i], w_k) + alg.cross_force(w_k, H[i])
            Q = alg.inertia_apply(Y[i], u_k) + BJ + 2.0 * alg.cross_force(J_k, H[i])
            for field, value in zip(out[:8], (J_k, YJ, BJ, alpha_k, w_k, u_k, P, Q)):
                field[c] = value
        for (r, c), D_rc in own.get(i, {}).items():  # beyond the carrying, against F_i
            out.own[r, c] = alg.dot(D_rc, F[i])
        p = parent[i]
        if p >= 0:
            Y[p], Yd[p], H[p], F[p] = Y[p] + Y[i], Yd[p] + Yd[i], H[p] + H[i], F[p] + F[i]
    return out


def rnea_derivatives(alg, model, q, qd, qdd, a0, f_ext=None):
    """(d tau/dq, d tau/dqd, d tau/dqdd), three nv x nv nested lists of entries (batch arrays
    (N,) or constants; ``as_array``), row j the joint force j, column k the tangent coordinate k
    of q (q (+) e_k e), of qd, of qdd: the pairs of ``derivative_columns`` on the tree's
    pattern, as straight-line code. Arguments as ``derivative_columns``."""
    cols = derivative_columns(alg, model, q, qd, qdd, a0, f_ext)
    nv = model.nv
    dq = [[ZERO] * nv for _ in range(nv)]
    dqd = [[ZERO] * nv for _ in range(nv)]
    M = [[ZERO] * nv for _ in range(nv)]
    for r, c, above in pairs(model):  # c's joint r's own or an ancestor's
        w_c = cols.w[c]
        dq[r][c] = alg.dot(cols.alpha[c], cols.YJ[r]) + (
            0.0 if w_c is None else alg.dot(w_c, cols.BJ[r]))
        dqd[r][c] = alg.dot(cols.u[c], cols.YJ[r]) + alg.dot(cols.J[c], cols.BJ[r])
        M[r][c] = alg.dot(cols.J[c], cols.YJ[r])
        if above:  # c's joint above r's: the row c, the column r
            dq[c][r] = alg.dot(cols.J[c], cols.P[r])
            dqd[c][r] = alg.dot(cols.J[c], cols.Q[r])
            M[c][r] = M[r][c]
    for (r, c), value in cols.own.items():
        dq[r][c] = dq[r][c] + value
    _joint_terms(model, dqd, M)
    return dq, dqd, M


@lru_cache(maxsize=64)
def pairs(model):
    """(r, c, above) for every pair of coordinates whose joints are related: c's joint r's own
    (above False) or one of its ancestors (above True); the other entries of the derivatives
    are zero."""
    out = []
    for i, sl in enumerate(model.v_slices):
        for a in sorted(model.ancestors[i]):
            for r in range(sl.start, sl.stop):
                out.extend((r, c, a != i) for c in range(model.v_slices[a].start,
                                                         model.v_slices[a].stop))
    return tuple(out)


def columns_array(alg, model, cols):
    """The ``Columns`` as one array (9, 6, nv, N) in the public layout ([linear; angular]
    twists, [force; torque] wrenches, so that a pairing is the plain dot product): J, YJ, BJ,
    alpha, w, u, P, Q and, in the ninth, own[r, start + m] at (m, r) for the coordinates start..
    of r's joint."""
    xp, nv = alg.xp, model.nv
    zero = 0.0 * alg.twist_vector(cols.J[0])  # the batch (a large tree: nv > 0)

    def public(x, kind):
        if x is None:
            return zero
        return (alg.twist_vector(x) if kind == "motion" else alg.wrench_vector(x)) + zero

    kinds = ("motion", "force", "force", "motion", "motion", "motion", "force", "force")
    parts = [xp.stack([public(x, kind) for x in field], axis=1)
             for field, kind in zip(cols[:8], kinds)]
    own = [[zero[0]] * nv for _ in range(6)]
    starts = _joint_starts(model)
    for (r, c), value in cols.own.items():
        own[c - starts[r]][r] = value + zero[0]
    parts.append(xp.stack([xp.stack(row) for row in own]))
    return xp.stack(parts)


def from_columns(xp, model, factors, out=None, scratch=None):
    """[d tau/dq, d tau/dqd, d tau/dqdd] side by side (..., nv, 3 nv) from ``columns_array``'s
    factors (..., 9, 6, nv), batch first: the pairs of ``rnea_derivatives`` as matrix products
    masked by the tree's pattern, the joints' own terms added. On numpy, ``out`` (..., nv,
    3 nv) receives the result and ``scratch``, an array of the same shape, the one product
    that is not written there directly (fresh arrays of this size cost a page fault per 4 KiB
    each time: a 100-link chain's pairs took 4 times as long)."""
    J, YJ, BJ, alpha, w, u, P, Q, own = (factors[..., k, :, :] for k in range(9))
    below, above, own_maps, joint_terms = _patterns(model)
    # [r, c] = x_c . y_r: the three matrices side by side in two products
    A = xp.swapaxes(xp.concatenate([YJ, BJ], axis=-2), -1, -2)
    B = xp.concatenate([xp.concatenate([alpha, u, J], axis=-1),
                        xp.concatenate([w, J, J - J], axis=-1)], axis=-2)
    R = (xp.swapaxes(J, -1, -2), xp.concatenate([P, Q, YJ], axis=-1))
    if out is None:
        left, right = xp.matmul(A, B), xp.matmul(*R)
        out = xp.where(below, left, right if above is None else
                       xp.where(above, right, left - left))
    else:
        np.matmul(*R, out=out)
        left = np.matmul(A, B, out=scratch)
        np.copyto(out, left, where=below)
        if above is not None:  # unrelated pairs: zero (NaN for a state of NaN factors)
            np.copyto(out, np.subtract(left, left, out=left), where=~(below | above))
    terms = [] if own_maps is None else [(own[..., :, :, None] * own_maps).sum(axis=-3)]
    if joint_terms is not None:  # [r, start_r + m] = own[m, r], in d/dq; damping, armature
        terms.append(joint_terms)
    for term in terms:
        if scratch is None:
            out = out + term
        else:
            out += term
    return out


def _joint_starts(model):
    """Per velocity coordinate, the first coordinate of its joint."""
    return [sl.start for sl in model.v_slices for _ in range(sl.start, sl.stop)]


def aba_derivatives(xp, model, dq, dqd, M):
    """(d qdd/dq, d qdd/dqd, d qdd/d tau) = (-M^-1 dq, -M^-1 dqd, M^-1) from ``rnea_derivatives``
    at qdd = FD(q, qd, tau), nested lists of entries like it: M^-1 applied column by column
    through the tree's factor, O(n d) per column, the 3 nv columns one map of a traced program
    (``entries.map_columns``: the solve traced once, run on several columns at a time)."""
    parent = dof_parents(model)
    H = tree_factor(M, parent)
    nv = model.nv
    rhs = [[-D[r][c] if D[r][c] is not ZERO else ZERO for r in range(nv)]
           for D in (dq, dqd) for c in range(nv)]
    rhs += [[1.0 if r == c else ZERO for r in range(nv)] for c in range(nv)]
    columns = map_columns(xp, lambda b: tree_solve(H, parent, b), rhs)
    return tuple([[columns[part * nv + c][r] for c in range(nv)] for r in range(nv)]
                 for part in range(3))


def dof_parents(model):
    """Per velocity coordinate, the one before it on the path to the root (the previous one of
    its joint, or the last one of the parent joint), -1 at a root: the sparsity of M's factor."""
    out = []
    for i, sl in enumerate(model.v_slices):
        p = model.parent[i]
        for k in range(sl.start, sl.stop):
            out.append(k - 1 if k > sl.start else
                       (model.v_slices[p].stop - 1 if p >= 0 else -1))
    return out


def as_array(xp, D, like):
    """An n x m nested list of entries as one (n, m, N) array; ``like``: an entry list whose
    arrays give the batch when every entry is constant."""
    return stack(xp, [x for row in D for x in row], (len(D), len(D[0]) if D else 0), like)


@lru_cache(maxsize=64)
def _patterns(model):
    """(below, above, own_maps, joint_terms) for the three matrices side by side (nv, 3 nv):
    ``below`` where c's joint is r's or one of its ancestors, ``above`` where r's is above c's
    (None where the two cover every pair: a chain);
    ``own_maps`` (6, nv, 3 nv), 1 at [m, r, start_r + m], or None for a model without
    configuration-dependent joints; ``joint_terms``: damping and armature on the diagonals of
    d/dqd and d/dqdd, or None."""
    nv = model.nv
    below = np.zeros((nv, nv), dtype=bool)
    for r, c, _ in pairs(model):
        below[r, c] = True
    above = below.T & ~below
    own_maps = None
    if any(b.joint_model.configuration_dependent for b in model.bodies):
        own_maps = np.zeros((6, nv, 3 * nv))
        for sl in model.v_slices:
            for r in range(sl.start, sl.stop):
                for c in range(sl.start, sl.stop):
                    own_maps[c - sl.start, r, c] = 1.0
    joint_terms = None
    if np.any(model.armature) or np.any(model.damping):
        joint_terms = np.hstack([np.zeros((nv, nv)), np.diag(model.damping),
                                 np.diag(model.armature)])
    above = None if (below | above).all() else np.tile(above, 3)  # a chain: every pair
    return np.tile(below, 3), above, own_maps, joint_terms


def _moving_subspace(alg, model, i, T_i, q, qd, qdd, v, v_p, w, alpha, u, own):
    """The terms of joint i whose S depends on q (``JointModel.subspace_derivatives``, child
    frame): E_k into w_k, G_k + v_i x E_k into alpha_k (with v_lambda x E_k through w_k), T_k into
    u_k, and D_jk for the joint's own rows."""
    qs, sl = model.q_slices[i], model.v_slices[i]
    D, E, G, Tk = model.bodies[i].joint_model.subspace_derivatives(alg.xp, q[qs], qd[sl],
                                                                   qdd[sl])

    def world(column):
        return alg.act_twist(T_i, alg.twist(stack(alg.xp, column, (6,))))

    for k in range(len(E)):
        E_k = world(E[k])
        w[i][k] = E_k if w[i][k] is None else w[i][k] + E_k
        alpha[i][k] = (alpha[i][k] + world(G[k]) + alg.cross_motion(v[i], E_k)
                       + (0.0 if v_p is None else alg.cross_motion(v_p, E_k)))
        u[i][k] = u[i][k] + world(Tk[k])
    own[i] = {(sl.start + j, sl.start + k): world(D[k][j])
              for k in range(len(D)) for j in range(len(D[k]))}


def _joint_terms(model, dqd, M):
    """The joints' own forces: armature on M's diagonal, damping on d tau/d qd's."""
    for k, (armature, damping) in enumerate(zip(model.armature.tolist(),
                                                model.damping.tolist())):
        if armature:
            M[k][k] = M[k][k] + armature
        if damping:
            dqd[k][k] = dqd[k][k] + damping
