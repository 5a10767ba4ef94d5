"""The joint-space mass matrix: the composite-rigid-body algorithm (Featherstone, RBDA Table 6.2)."""
import numpy as np

from ..algebra import body_constants
from .kinematics import joint_poses, motion_subspaces


def crba(alg, model, q):
    """M(q) (nv, nv, N), armature included on the diagonal."""
    xp = alg.xp
    X = joint_poses(alg, model, q)
    S = motion_subspaces(alg, model, q)
    IC = composite_inertias(alg, model, X)
    zero = xp.zeros(q.shape[1:], dtype=q.dtype)
    M = [[zero] * model.nv for _ in range(model.nv)]
    for i in range(model.nbodies):
        for k, S_k in enumerate(S[i]):
            col = model.v_slices[i].start + k
            walk_to_base(alg, model, X, S, alg.inertia_apply(IC[i], S_k), i, col, M, zero)
    if not M:
        return xp.zeros((0, 0) + q.shape[1:], dtype=q.dtype)
    return xp.stack([xp.stack(row) for row in M]) + np.diag(model.armature)[..., None]


def composite_inertias(alg, model, X, IC=None, base=None):
    """Leaves to root: the composite inertia IC_i of each body's subtree (body frame). ``IC``:
    the bodies' inertias to start from (default their own; a subsystem adds those mounted on
    them). ``base``: None, or a one-element list [IC_base] to which the root bodies' composite
    inertias are added (base frame)."""
    IC = [I for (_, _, I) in body_constants(alg, model)] if IC is None else list(IC)
    for i in reversed(range(model.nbodies)):
        parent = model.parent[i]
        if parent >= 0:
            IC[parent] = IC[parent] + alg.inertia_act(X[i], IC[i])
        elif base is not None:
            base[0] = base[0] + alg.inertia_act(X[i], IC[i])
    return IC


def walk_to_base(alg, model, X, S, F, j, col, M, zero, offset=0):
    """From body j to the root: M[row][col] = M[col][row] = S_row . F for every degree of freedom
    of body j and its ancestors, F moved from body to parent on the way (RBDA Table 6.2, inner
    loop); rows are ``offset`` + the model's velocity indices, and ``zero`` (N,) broadcasts
    each entry to the batch. Returns F in the base frame. ``S``: the bodies' motion subspaces."""
    while j >= 0:
        for r, S_r in enumerate(S[j]):
            row = offset + model.v_slices[j].start + r
            M[row][col] = M[col][row] = alg.dot(S_r, F) + zero
        F = alg.act_wrench(X[j], F)
        j = model.parent[j]
    return F
