"""The joint-space mass matrix: the composite-rigid-body algorithm (Featherstone, RBDA Table 6.2),
in two conventions, as Pinocchio's ``crba`` has them.

- **Body frames** (``crba``): composite inertias moved from child to parent, and each column
  IC_j S_j walked from its body to the root (``walk_to_base``). Every transform is a joint's
  own, so a program traced from it keeps the model's zeros: the cheapest straight-line code
  for a small tree (1,312 operations for the Panda).
- **World frame** (``crba_columns`` and ``mass_from_columns``): the same composite inertias,
  two columns per degree of freedom moved to the world frame (S_j and IC_j S_j), then
  M[r, c] = S_r . F_c on the tree's pattern. The columns are O(n) work; the O(n d) part is
  one matrix product (6 x nv by 6 x nv) instead of a walk per column, so a long chain costs a
  program of O(n) operations and a product, not a program of O(n d) operations (a
  1,000-link chain: about 250,000 operations, where the walk would be 10 million).

The execution plan chooses between them (``screwdyn.execution.plan``, ``Factored``); both give
M to rounding.
"""
import functools

import numpy as np

from ..algebra import body_constants
from .kinematics import joint_poses, motion_subspaces, world_poses


# -- body frames ---------------------------------------------------------------------------
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


# -- world frame ---------------------------------------------------------------------------
def crba_columns(alg, model, q):
    """(S, F), each (6, nv, N), world frame: column j of S is the motion subspace of degree of
    freedom j ([linear; angular], the velocity of the world origin), column j of F the wrench
    IC S_j ([force; moment about the world origin]) of the composite inertia IC of the subtree
    that degree of freedom moves (``composite_inertias``, body frame, then moved)."""
    xp = alg.xp
    zero = xp.zeros((6,) + q.shape[1:], dtype=q.dtype)
    if model.nv == 0:
        return zero[:, :0], zero[:, :0]
    X = joint_poses(alg, model, q)
    T = world_poses(alg, model, X)
    IC = composite_inertias(alg, model, X)
    S, F = [], []
    for T_i, IC_i, S_i in zip(T, IC, motion_subspaces(alg, model, q)):
        for S_k in S_i:  # IC S in the body frame (a joint axis picks a column), then moved
            S.append(alg.twist_vector(alg.act_twist(T_i, S_k)) + zero)
            F.append(alg.wrench_vector(alg.act_wrench(T_i, alg.inertia_apply(IC_i, S_k))) + zero)
    return xp.stack(S, axis=1), xp.stack(F, axis=1)


def mass_from_columns(xp, model, S, F):
    """M (..., nv, nv) from the columns S, F (..., 6, nv) of ``crba_columns`` (batch first, the
    public layout: matrix products per state): S_r . F_c on the upper half of the tree's
    pattern (``tree_pattern``), the same products in the lower half, plus the armature; zero
    where the tree makes M zero (x - x of a product, so that a state with NaN or inf stays
    non-finite there too)."""
    upper, lower, armature = tree_pattern(model)
    G = xp.matmul(xp.swapaxes(S, -1, -2), F)  # G[r, c] = S_r . F_c
    H = xp.matmul(xp.swapaxes(F, -1, -2), S)  # H[c, r] = S_r . F_c: the lower half, in rows
    M = xp.where(upper, G, H if lower is None else xp.where(lower, H, G - G))
    return M if armature is None else M + armature


@functools.lru_cache(maxsize=64)
def tree_pattern(model):
    """(upper, lower, armature): ``upper`` (nv, nv) bool, the upper half of the entries of M that
    the tree does not make zero ((r, c) with body(r) an ancestor of body(c), or the same body
    and r <= c); ``lower`` its transpose, or None where the two cover M (a chain);
    ``armature`` the diagonal matrix of the armatures, or None where they are zero."""
    upper = np.zeros((model.nv, model.nv), dtype=bool)
    for i, sl in enumerate(model.v_slices):
        for a in model.ancestors[i]:
            upper[model.v_slices[a], sl] = True
    upper &= ~np.tril(np.ones_like(upper), -1)
    lower = None if (upper | upper.T).all() else upper.T.copy()
    armature = np.diag(model.armature) if np.any(model.armature) else None
    return upper, lower, armature
