"""The Coriolis matrix C(q, qd) with dM/dt - 2C skew-symmetric (any algebra, world frame).

With body Jacobians J_i in world coordinates and world inertias I_i, M = sum J_i^T I_i J_i and
C = sum_i J_i^T (I_i dJ_i/dt + B_i J_i) with Echeandia and Wensing's body Coriolis factor
    B(v, I) = ((v x*) I - I (v x) + (I v) xbar) / 2,    where (h xbar) v = v x* h,
which gives C qd = b - g, dM/dt - 2C skew-symmetric, and the Christoffel-consistent C that
Pinocchio returns. The column of dJ/dt for a joint on body j is v_j x S_j. Summing over subtrees
(composite IC_d and BC_d) makes it O(n d) for tree depth d.
"""
import numpy as np

from ..algebra import body_constants
from .kinematics import (body_velocities, joint_poses, motion_subspaces, subspace_rates,
                         world_poses)


def coriolis(alg, model, q, qd):
    xp = alg.xp
    consts = body_constants(alg, model)
    X = joint_poses(alg, model, q)
    T = world_poses(alg, model, X)
    S_b = motion_subspaces(alg, model, q)
    v, _ = body_velocities(alg, model, X, S_b, qd)
    v_w = [alg.act_twist(T_i, v_i) for T_i, v_i in zip(T, v)]
    S_w = [[alg.act_twist(T_i, S_k) for S_k in S] for T_i, S in zip(T, S_b)]
    Sd_w = [[alg.cross_motion(v_i, S_k) for S_k in S] for v_i, S in zip(v_w, S_w)]
    for i, rates in enumerate(subspace_rates(alg, model, q, qd)):  # dS/dt of S(q), world axes
        if rates is not None:
            Sd_w[i] = [Sd + alg.act_twist(T[i], R) for Sd, R in zip(Sd_w[i], rates)]
    IC = [alg.inertia_act(T_i, I) for T_i, (_, _, I) in zip(T, consts)]
    BC = [_coriolis_factor(alg, v_i, I) for v_i, I in zip(v_w, IC)]
    for i in reversed(range(model.nbodies)):
        p = model.parent[i]
        if p >= 0:
            IC[p], BC[p] = IC[p] + IC[i], BC[p] + BC[i]
    zero = xp.zeros(q.shape[1:], dtype=q.dtype)
    C = [[zero] * model.nv for _ in range(model.nv)]
    for d in range(model.nbodies):
        own = list(zip(range(model.v_slices[d].start, model.v_slices[d].stop), S_w[d]))
        for j in model.ancestors[d]:
            for k, (S_k, Sd_k) in enumerate(zip(S_w[j], Sd_w[j])):
                col = model.v_slices[j].start + k
                W = alg.inertia_apply(IC[d], Sd_k) + alg.inertia_apply(BC[d], S_k)
                rows = ([(model.v_slices[a].start + r, S_r) for a in model.ancestors[d]
                         for r, S_r in enumerate(S_w[a])] if j == d else own)
                for row, S_r in rows:
                    C[row][col] = alg.dot(S_r, W) + zero
    return xp.stack([xp.stack(row) for row in C])


def _coriolis_factor(alg, V, I):
    """B(v, I) as a 6x6 operator of the algebra (6, 6, N), built column by column from its action
    on the algebra's basis twists e_j: B e_j = (v x* (I e_j) - I (v x e_j) + e_j x* (I v)) / 2.
    ``inertia_apply`` applies it (every algebra applies an inertia as a matrix on components)."""
    xp = alg.xp
    h = alg.inertia_apply(I, V)
    columns = []
    for e_j in np.eye(6)[:, :, None]:
        column = (alg.cross_force(V, alg.inertia_apply(I, e_j))
                  - alg.inertia_apply(I, alg.cross_motion(V, e_j)) + alg.cross_force(e_j, h))
        columns.append(0.5 * xp.broadcast_to(column, (6,) + V.shape[1:]))
    return xp.stack(columns, axis=1)
