"""Kinetic and potential energy, centre of mass."""
from ..algebra import body_constants
from .kinematics import body_velocities, joint_poses, motion_subspaces, world_poses


def kinetic(alg, model, q, qd):
    """T = sum_i v_i . I_i v_i / 2 + sum_j armature_j qd_j^2 / 2, shape (N,)."""
    X = joint_poses(alg, model, q)
    v, _ = body_velocities(alg, model, X, motion_subspaces(alg, model, q), qd)
    T = sum(alg.dot(v_i, alg.inertia_apply(I, v_i)) for v_i, (_, _, I)
            in zip(v, body_constants(alg, model)))
    return 0.5 * (T + (model.armature[:, None] * qd * qd).sum(axis=0))


def center_of_mass_moment(alg, model, q):
    """sum_i m_i c_i, the first mass moment in world coordinates (3, N)."""
    xp = alg.xp
    T = world_poses(alg, model, joint_poses(alg, model, q))
    moment = xp.zeros((3,) + q.shape[1:], dtype=q.dtype)
    pi = model.traced_parameters
    for i, (T_i, b) in enumerate(zip(T, model.bodies)):
        H = alg.to_matrix(T_i)
        mass, first = (b.mass, b.mass * xp.asarray(b.com)) if pi is None else (pi[i, 0],
                                                                                pi[i, 1:4])
        moment = moment + xp.einsum("ij...,j...->i...", H[:3, :3], first[:, None]) \
            + mass * H[:3, 3]
    return moment
