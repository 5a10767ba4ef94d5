"""The geometric Jacobian of a link frame."""
from ..algebra import link_placements
from .kinematics import joint_poses, motion_subspaces, world_poses


def link_jacobian(alg, model, q, link, frame):
    """(6, nv, N): column j is the twist of link ``link`` (velocity of its origin, angular velocity)
    per unit rate of joint dof j, in link axes (``frame="local"``) or world axes (``"world"``)."""
    xp = alg.xp
    T = world_poses(alg, model, joint_poses(alg, model, q))
    body = model.links[link].body
    zero = xp.zeros((6,) + q.shape[1:], dtype=q.dtype)
    columns = [zero] * model.nv
    if body >= 0:
        T_link = alg.compose(T[body], link_placements(alg, model)[link])
        R = alg.to_matrix(T_link)[:3, :3]
        S = motion_subspaces(alg, model, q)
        for j in model.ancestors[body]:
            for k, S_k in enumerate(S[j]):
                column = alg.twist_vector(alg.inv_act_twist(T_link, alg.act_twist(T[j], S_k)))
                if frame == "world":
                    column = xp.concatenate([xp.einsum("ij...,j...->i...", R, column[:3]),
                                             xp.einsum("ij...,j...->i...", R, column[3:])])
                columns[model.v_slices[j].start + k] = column + zero
    return xp.stack(columns, axis=1)
