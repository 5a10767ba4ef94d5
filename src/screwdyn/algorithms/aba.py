"""Forward dynamics: the articulated-body algorithm (Featherstone, RBDA Table 7.1). O(n), no mass
matrix is formed or inverted; a joint with several degrees of freedom (a free joint) solves its
own small k x k system."""
from functools import lru_cache

import numpy as np

from ..algebra import body_constants
from ..errors import ModelError
from ..model.model import random_configuration
from .joint_forces import friction
from .kinematics import (body_velocities, concatenate_dofs, joint_motion, joint_poses,
                         motion_subspaces, velocity_product)


def aba(alg, model, q, qd, tau, a0, f_ext=None):
    """Joint accelerations qdd (nv, N). a0 = -gravity as a twist; f_ext as in ``rnea``."""
    X = joint_poses(alg, model, q)
    S = motion_subspaces(alg, model, q)
    _, c, pA = velocity_terms(alg, model, X, S, q, qd, f_ext=f_ext)
    U, D, u = articulated_bodies(alg, model, X, S, c, pA, tau - friction(alg.xp, model, qd))
    return concatenate_dofs(alg.xp, accelerations(alg, model, X, S, U, D, u, c, a0)[1], q)


def velocity_terms(alg, model, X, S, q, qd, v0=None, f_ext=None):
    """Root to leaves: the body twists v, the velocity-product accelerations c = v x vJ (+ dS/dt
    qd of configuration-dependent joints) and the bias wrenches pA = v x* I v - f_ext (RBDA
    eqs. 7.35-7.36); ``v0``: the base's twist in the base frame (None: at rest)."""
    v, vJ = body_velocities(alg, model, X, S, qd, v0)
    c = velocity_product(alg, model, q, qd, v, vJ)
    pA = [alg.cross_force(v_i, alg.inertia_apply(I, v_i))
          for v_i, (_, _, I) in zip(v, body_constants(alg, model))]
    if f_ext is not None:
        pA = [p - f for p, f in zip(pA, f_ext)]
    return v, c, pA


def accelerations(alg, model, X, S, U, D, u, c, a0):
    """Root to leaves: the body accelerations a and each body's joint accelerations qdd_i (k, N),
    from the base's acceleration a0 (base frame; -gravity for a fixed base) (RBDA 7.45-7.47)."""
    xp = alg.xp
    a, qdd = [None] * model.nbodies, [None] * model.nbodies
    for i, S_i in enumerate(S):  # root to leaves
        parent = model.parent[i]
        a_prime = alg.inv_act_twist(X[i], a0 if parent < 0 else a[parent]) + c[i]
        qdd[i] = xp.stack(_matvec(_inverse(xp, D[i]), [u_a - alg.dot(a_prime, U_a)
                                                       for u_a, U_a in zip(u[i], U[i])]))
        a[i] = a_prime + joint_motion(S_i, qdd[i])
    return a, qdd


def articulated_bodies(alg, model, X, S_all, c, pA, tau, IA=None, base=None, inverse=None):
    """Leaves to root: U = IA S, D = S^T IA S (+ armature), u = tau - S^T pA, and the articulated
    inertia and bias wrench of each parent (RBDA eqs. 7.36-7.44). ``IA``: the bodies' inertias
    to start from (default their own; a subsystem adds what its children mount on them).
    ``base``: None for a fixed base, or [IA_base, pA_base] of a moving base, to which the root
    bodies' articulated inertias and bias wrenches are added (base frame). ``inverse``: of the
    small D (default ``_inverse``)."""
    IA = [I for (_, _, I) in body_constants(alg, model)] if IA is None else list(IA)
    pA = list(pA)
    n = model.nbodies
    U, D, u = [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        S, sl = S_all[i], model.v_slices[i]
        U[i] = [alg.inertia_apply(IA[i], S_k) for S_k in S]
        D[i] = [[alg.dot(S_a, U_b) + (model.armature[sl][a] if a == b else 0.0)
                 for b, U_b in enumerate(U[i])] for a, S_a in enumerate(S)]
        u[i] = [tau[sl][a] - alg.dot(S_a, pA[i]) for a, S_a in enumerate(S)]
        parent = model.parent[i]
        if parent >= 0 or base is not None:
            Dinv = (inverse or _inverse)(alg.xp, D[i])
            Ia = alg.inertia_sub_outer(IA[i], U[i], Dinv)
            pa = pA[i] + alg.inertia_apply(Ia, c[i]) + joint_motion(U[i], _matvec(Dinv, u[i]))
            if parent >= 0:
                IA[parent] = IA[parent] + alg.inertia_act(X[i], Ia)
                pA[parent] = pA[parent] + alg.act_wrench(X[i], pa)
            else:
                base[0] = base[0] + alg.inertia_act(X[i], Ia)
                base[1] = base[1] + alg.act_wrench(X[i], pa)
    return U, D, u


def _pseudo_inverse(xp, D):
    """``_inverse`` that never raises: a singular D (which ``check_defined`` then reports)
    gets the pseudo-inverse."""
    if len(D) == 1:
        return [[1.0 / D[0][0]]]
    Dm = xp.moveaxis(xp.stack([xp.stack(row) for row in D]), -1, 0)
    Dinv = xp.moveaxis(xp.linalg.pinv(Dm), 0, -1)
    return [[Dinv[a, b] for b in range(len(D))] for a in range(len(D))]


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
    S = motion_subspaces(alg, model, q)
    wrenches = [np.zeros((6, 3))] * model.nbodies
    with np.errstate(divide="ignore", invalid="ignore"):
        _, D, _ = articulated_bodies(alg, model, X, S, wrenches, wrenches, zeros,
                                     inverse=_pseudo_inverse)
    scale = 1e-12 * max(model.total_mass, 1e-300)
    for i in reversed(range(model.nbodies)):  # leaves first: a defect spoils its ancestors' D
        D_i = np.moveaxis(np.array([[np.broadcast_to(d, (3,)) for d in row] for row in D[i]]),
                          -1, 0)
        eigenvalues, vectors = np.linalg.eigh(D_i)
        if not np.min(eigenvalues) > scale:
            raise ModelError(_undefined_message(model, i, vectors[np.argmin(eigenvalues[:, 0]),
                                                                  :, 0]))


def _undefined_message(model, i, direction):
    """Why joint i's D = S^T IA S is singular: a subtree without mass and inertia, or mass
    without inertia about (or along) the direction the joint moves in."""
    body = model.bodies[i]
    joint = body.joint_model
    subtree = [j for j in range(i, model.nbodies) if i in model.ancestors[j]]
    mass = sum(model.bodies[j].mass for j in subtree)
    inertia = sum(np.abs(model.bodies[j].inertia).sum() for j in subtree)
    names = [n for n, x in zip(joint.velocity_names(), direction) if abs(x) > 1e-6]
    moving = ("its axis" if joint.nv == 1 else
              "the direction " + " + ".join(f"{x:.3g} {n}" for n, x in
                                            zip(joint.velocity_names(), direction)
                                            if abs(x) > 1e-6) if names else "some direction")
    head = f"forward dynamics is undefined for model {model.name!r}: joint {body.joint!r}"
    if mass == 0 and inertia == 0:
        return (f"{head} moves a subtree with no mass and no inertia about its axis (give it "
                "inertia or armature, or make the joint fixed)")
    return (f"{head} ({joint.type_name}) moves a subtree of {mass:.4g} kg that has no inertia "
            f"about {moving} (its mass matrix is singular there: e.g. a point mass on a "
            "revolute axis, or at a ball joint's centre; give it rotational inertia or "
            "armature)")
