"""Forward dynamics: the articulated-body algorithm (Featherstone, RBDA Table 7.1). O(n), no mass
matrix is formed or inverted; a joint with several degrees of freedom (a free joint) solves its
own small k x k system."""
from functools import lru_cache

import numpy as np

from ..algebra import body_constants
from ..errors import ModelError
from ..model.model import random_configuration
from .kinematics import body_velocities, concatenate_dofs, joint_motion, joint_poses
from .rnea import add_diagonal


def aba(alg, model, q, qd, tau, a0, f_ext=None):
    """Joint accelerations qdd (nv, N). a0 = -gravity as a twist; f_ext as in ``rnea``."""
    xp = alg.xp
    X = joint_poses(alg, model, q)
    v, vJ = body_velocities(alg, model, X, qd)
    c = [alg.cross_motion(v_i, vJ_i) for v_i, vJ_i in zip(v, vJ)]  # velocity-product accelerations
    pA = [alg.cross_force(v_i, alg.inertia_apply(I, v_i))
          for v_i, (_, _, I) in zip(v, body_constants(alg, model))]
    if f_ext is not None:
        pA = [p - f for p, f in zip(pA, f_ext)]
    U, D, u = articulated_bodies(alg, model, X, c, pA, add_diagonal(xp, tau, -model.damping, qd))
    Dinv = [_inverse(xp, D_i) for D_i in D]
    a, qdd = [None] * model.nbodies, [None] * model.nbodies
    for i, (_, S, _) in enumerate(body_constants(alg, model)):  # root to leaves
        parent = model.parent[i]
        a_prime = alg.inv_act_twist(X[i], a0 if parent < 0 else a[parent]) + c[i]
        qdd[i] = xp.stack(_matvec(Dinv[i], [u_a - alg.dot(a_prime, U_a)
                                            for u_a, U_a in zip(u[i], U[i])]))
        a[i] = a_prime + joint_motion(S, qdd[i])
    return concatenate_dofs(xp, qdd, q)


def articulated_bodies(alg, model, X, c, pA, tau):
    """Leaves to root: U = IA S, D = S^T IA S (+ armature), u = tau - S^T pA, and the articulated
    inertia and bias wrench of each parent (RBDA eqs. 7.36-7.44)."""
    consts = body_constants(alg, model)
    IA = [I for (_, _, I) in consts]
    pA = list(pA)
    n = model.nbodies
    U, D, u = [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        S, sl = consts[i][1], model.v_slices[i]
        U[i] = [alg.inertia_apply(IA[i], S_k) for S_k in S]
        D[i] = [[alg.dot(S_a, U_b) + (model.armature[sl][a] if a == b else 0.0)
                 for b, U_b in enumerate(U[i])] for a, S_a in enumerate(S)]
        u[i] = [tau[sl][a] - alg.dot(S_a, pA[i]) for a, S_a in enumerate(S)]
        parent = model.parent[i]
        if parent >= 0:
            Dinv = _inverse(alg.xp, D[i])
            Ia = alg.inertia_sub_outer(IA[i], U[i], Dinv)
            pa = pA[i] + alg.inertia_apply(Ia, c[i]) + joint_motion(U[i], _matvec(Dinv, u[i]))
            IA[parent] = IA[parent] + alg.inertia_act(X[i], Ia)
            pA[parent] = pA[parent] + alg.act_wrench(X[i], pa)
    return U, D, u


def _inverse(xp, D):
    """Inverse of a small symmetric positive definite k x k matrix given as nested lists of
    entries (batch arrays or numbers; only the lower triangle is read): D = L diag(d) L^T
    without pivoting (D = S^T IA S is positive definite), then D^-1 = L^-T diag(1/d) L^-1. Plain
    arithmetic, so the same code runs on numpy batches, under JAX and on traced scalars."""
    k = len(D)
    if k == 1:
        return [[1.0 / D[0][0]]]
    L, d = [[None] * k for _ in range(k)], [None] * k
    for j in range(k):
        s = D[j][j]
        for m in range(j):
            s = s - L[j][m] * L[j][m] * d[m]
        d[j] = s
        for i in range(j + 1, k):
            s = D[i][j]
            for m in range(j):
                s = s - L[i][m] * L[j][m] * d[m]
            L[i][j] = s / d[j]
    inv_d = [1.0 / d_m for d_m in d]
    Linv = [[None] * k for _ in range(k)]  # unit lower triangular: Linv[i][j] for j < i
    for i in range(k):
        for j in range(i):
            s = -L[i][j]
            for m in range(j + 1, i):
                s = s - L[i][m] * Linv[m][j]
            Linv[i][j] = s
    def column(m, i):  # Linv[m][i]
        return 1.0 if m == i else Linv[m][i]
    out = [[None] * k for _ in range(k)]
    for i in range(k):
        for j in range(i + 1):  # (L^-T diag(1/d) L^-1)[i][j], m >= i >= j
            s = column(i, i) * column(i, j) * inv_d[i]
            for m in range(i + 1, k):
                s = s + column(m, i) * column(m, j) * inv_d[m]
            out[i][j] = out[j][i] = s
    return out


def _matvec(A, x):
    return [sum(A[a][b] * x[b] for b in range(len(x))) for a in range(len(A))]


@lru_cache(maxsize=64)
def check_defined(model):
    """Raise ModelError if forward dynamics is undefined for ``model``: a joint whose moving
    subtree has no mass and no inertia about its axis, so that D = S^T IA S vanishes. Checked once
    per model, in numpy, at three random configurations (a structural defect shows at all)."""
    from ..algebra import get_algebra

    alg = get_algebra("spatial")
    q = np.stack([random_configuration(model, seed) for seed in range(3)], axis=-1)
    zeros = np.zeros((model.nv, 3))
    X = joint_poses(alg, model, q)
    wrenches = [np.zeros((6, 3))] * model.nbodies
    with np.errstate(divide="ignore", invalid="ignore"):
        _, D, _ = articulated_bodies(alg, model, X, wrenches, wrenches, zeros)
    scale = 1e-12 * max(model.total_mass, 1e-300)
    for i in reversed(range(model.nbodies)):  # leaves first: a defect spoils its ancestors' D
        D_i = D[i]
        D_i = np.moveaxis(np.array([[np.broadcast_to(d, (3,)) for d in row] for row in D_i]), -1, 0)
        if not np.min(np.linalg.eigvalsh(D_i)) > scale:
            raise ModelError(
                f"forward dynamics is undefined for model {model.name!r}: joint "
                f"{model.bodies[i].joint!r} moves a subtree with no mass and no inertia about its "
                "axis (give it inertia or armature, or make the joint fixed)")

