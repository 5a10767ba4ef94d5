"""Inverse dynamics: the recursive Newton-Euler algorithm (Featherstone, RBDA Table 5.1)."""
from ..algebra import body_constants
from .kinematics import joint_motion, joint_poses


def rnea(alg, model, q, qd, qdd, a0, f_ext=None):
    """Joint forces tau (nv, N).

    a0: the base acceleration as a twist, -gravity (gravity enters as a fictitious acceleration).
    f_ext: None or a list of body wrenches (body frame), one per body, acting on the body.
    """
    xp = alg.xp
    consts = body_constants(alg, model)
    X = joint_poses(alg, model, q)
    v, f = [], []
    a = []
    for i, ((_, S, I), parent, sl) in enumerate(zip(consts, model.parent, model.v_slices)):
        vJ = joint_motion(S, qd[sl])
        if parent < 0:
            v.append(vJ)
            a_parent = alg.inv_act_twist(X[i], a0)
        else:
            v.append(alg.inv_act_twist(X[i], v[parent]) + vJ)
            a_parent = alg.inv_act_twist(X[i], a[parent])
        a.append(a_parent + joint_motion(S, qdd[sl]) + alg.cross_motion(v[i], vJ))
        f_i = alg.inertia_apply(I, a[i]) + alg.cross_force(v[i], alg.inertia_apply(I, v[i]))
        f.append(f_i if f_ext is None else f_i - f_ext[i])
    tau = [None] * model.nbodies
    for i in reversed(range(model.nbodies)):
        S = consts[i][1]
        tau[i] = xp.stack([alg.dot(S_k, f[i]) for S_k in S])
        if model.parent[i] >= 0:
            f[model.parent[i]] = f[model.parent[i]] + alg.act_wrench(X[i], f[i])
    tau = xp.concatenate(tau)
    return tau + model.armature[:, None] * qdd + model.damping[:, None] * qd
