"""Forward kinematics: joint poses, body poses in the world, link frames, body velocities."""
from ..algebra import body_constants, link_placements


def joint_poses(alg, model, q):
    """X_parent_body for every body at configuration q (nq, N): placement, then joint motion."""
    X = []
    for (placement, _, _), b, sl in zip(body_constants(alg, model), model.bodies, model.q_slices):
        qi = q[sl]
        if b.kind == "free":
            motion = alg.free(qi)
        elif b.kind == "prismatic":
            motion = alg.prismatic(b.axis, qi[0])
        else:
            motion = alg.revolute(b.axis, qi[0])
        X.append(alg.compose(placement, motion))
    return X


def world_poses(alg, model, X):
    """T_world_body for every body, from the joint poses X."""
    T = []
    for Xi, parent in zip(X, model.parent):
        T.append(Xi if parent < 0 else alg.compose(T[parent], Xi))
    return T


def link_poses(alg, model, T):
    """T_world_link for every link (links welded to the world have their fixed placement)."""
    return [placement if link.body < 0 else alg.compose(T[link.body], placement)
            for link, placement in zip(model.links, link_placements(alg, model))]


def joint_motion(S, rate):
    """S * rate for a joint's motion subspace S (list of twists) and rates (k, N): the twist
    S qd, or S qdd."""
    out = S[0] * rate[0]
    for k in range(1, len(S)):
        out = out + S[k] * rate[k]
    return out


def body_velocities(alg, model, X, qd, v0=None):
    """Body twists v_i (body frame) and joint twists vJ_i = S_i qd_i; ``v0``: the base's twist in
    the base frame (None: at rest)."""
    v, vJ = [], []
    for i, ((_, S, _), parent, sl) in enumerate(zip(body_constants(alg, model), model.parent,
                                                    model.v_slices)):
        vJ.append(joint_motion(S, qd[sl]))
        v_parent = v0 if parent < 0 else v[parent]
        v.append(vJ[i] if v_parent is None else alg.inv_act_twist(X[i], v_parent) + vJ[i])
    return v, vJ



def concatenate_dofs(xp, parts, like):
    """Per-joint (k, N) arrays stacked into one (nv, N) array (empty for a model without DoF)."""
    return xp.concatenate(parts) if parts else xp.zeros((0,) + like.shape[1:], dtype=like.dtype)
