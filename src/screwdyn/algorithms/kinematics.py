"""Forward kinematics: joint poses, motion subspaces, body poses in the world, link frames, body
velocities. Every joint type answers for itself (``model/joints.py``): its transform X_J(q), its
motion subspace S (constant, or S(q) with rate dS/dt for configuration-dependent joints)."""
from ..algebra import body_constants, link_placements
from ..algebra.entries import stack


def joint_poses(alg, model, q):
    """X_parent_body for every body at configuration q (nq, N): placement, then joint motion."""
    return [alg.compose(placement, b.joint_model.motion(alg, q[sl]))
            for (placement, _, _), b, sl in zip(body_constants(alg, model), model.bodies,
                                                 model.q_slices)]


def motion_subspaces(alg, model, q):
    """S_i for every body (a list of nv_i twists, body frame): the model constants, or S(q)."""
    return [S if S is not None else _twists(alg, b.joint_model.subspace_at(alg.xp, q[sl]))
            for (_, S, _), b, sl in zip(body_constants(alg, model), model.bodies,
                                        model.q_slices)]


def subspace_rates(alg, model, q, qd):
    """dS_i/dt for every body: None for constant S, else a list of twists."""
    return [None if not b.joint_model.configuration_dependent else
            _twists(alg, b.joint_model.subspace_rate(alg.xp, q[qs], qd[vs]))
            for b, qs, vs in zip(model.bodies, model.q_slices, model.v_slices)]


def _twists(alg, columns):
    """Algebra twists from public [linear; angular] columns given as 6 entries each."""
    return [alg.twist(stack(alg.xp, column, (6,))) for column in columns]


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


def body_velocities(alg, model, X, S, qd, v0=None):
    """Body twists v_i (body frame) and joint twists vJ_i = S_i qd_i; ``v0``: the base's twist in
    the base frame (None: at rest)."""
    v, vJ = [], []
    for i, (S_i, parent, sl) in enumerate(zip(S, model.parent, model.v_slices)):
        vJ.append(joint_motion(S_i, qd[sl]))
        v_parent = v0 if parent < 0 else v[parent]
        v.append(vJ[i] if v_parent is None else alg.inv_act_twist(X[i], v_parent) + vJ[i])
    return v, vJ


def velocity_product(alg, model, q, qd, v, vJ):
    """c_i = v_i x vJ_i + dS_i/dt qd_i: the acceleration a joint's velocity adds (cJ, the second
    term, only for configuration-dependent joints)."""
    c = [alg.cross_motion(v_i, vJ_i) for v_i, vJ_i in zip(v, vJ)]
    for i, (Sdot, sl) in enumerate(zip(subspace_rates(alg, model, q, qd), model.v_slices)):
        if Sdot is not None:
            c[i] = c[i] + joint_motion(Sdot, qd[sl])
    return c


def concatenate_dofs(xp, parts, like):
    """Per-joint (k, N) arrays stacked into one (nv, N) array (empty for a model without DoF)."""
    return xp.concatenate(parts) if parts else xp.zeros((0,) + like.shape[1:], dtype=like.dtype)
