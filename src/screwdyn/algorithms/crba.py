"""The joint-space mass matrix: the composite-rigid-body algorithm (Featherstone, RBDA Table 6.2)."""
import numpy as np

from ..algebra import body_constants
from .kinematics import joint_poses, motion_subspaces


def crba(alg, model, q):
    """M(q) (nv, nv, N), armature included on the diagonal."""
    xp = alg.xp
    consts = body_constants(alg, model)
    X = joint_poses(alg, model, q)
    S = motion_subspaces(alg, model, q)
    IC = [I for (_, _, I) in consts]
    for i in reversed(range(model.nbodies)):
        if model.parent[i] >= 0:
            IC[model.parent[i]] = IC[model.parent[i]] + alg.inertia_act(X[i], IC[i])
    zero = xp.zeros(q.shape[1:], dtype=q.dtype)
    M = [[zero] * model.nv for _ in range(model.nv)]
    for i in range(model.nbodies):
        for k, S_k in enumerate(S[i]):
            col = model.v_slices[i].start + k
            F = alg.inertia_apply(IC[i], S_k)
            j = i
            while True:
                for r, S_r in enumerate(S[j]):
                    row = model.v_slices[j].start + r
                    M[row][col] = M[col][row] = alg.dot(S_r, F) + zero
                if model.parent[j] < 0:
                    break
                F = alg.act_wrench(X[j], F)
                j = model.parent[j]
    if not M:
        return xp.zeros((0, 0) + q.shape[1:], dtype=q.dtype)
    return xp.stack([xp.stack(row) for row in M]) + np.diag(model.armature)[..., None]
