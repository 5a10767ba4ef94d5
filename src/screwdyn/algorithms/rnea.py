"""Inverse dynamics: the recursive Newton-Euler algorithm (Featherstone, RBDA Table 5.1)."""
from ..algebra import body_constants
from .joint_forces import add_joint_forces
from .kinematics import (concatenate_dofs, joint_motion, joint_poses, motion_subspaces,
                         subspace_rates)


def rnea(alg, model, q, qd, qdd, a0, f_ext=None):
    """Joint forces tau (nv, N) of a model on a fixed base."""
    return newton_euler(alg, model, q, qd, qdd, a0, f_ext)[0]


def newton_euler(alg, model, q, qd, qdd, a0, f_ext=None, v0=None):
    """RNEA on a base that may move: returns (tau, f_base).

    a0: acceleration of the base frame minus gravity, as a twist in the base frame (for a fixed
        base, -gravity: gravity enters as a fictitious base acceleration).
    v0: twist of the base frame in the base frame (None: the base is at rest).
    f_ext: None or one wrench per body (body frame) that the environment applies to the body.
    f_base: the wrench that the base exerts on the model through its root joints, in the base
        frame (the model exerts -f_base on its base): what crosses a connection point backward.
    """
    X, S, _, _, f = newton_euler_forward(alg, model, q, qd, qdd, a0, v0)
    if f_ext is not None:
        f = [f_i - f_ext_i for f_i, f_ext_i in zip(f, f_ext)]
    return newton_euler_backward(alg, model, X, S, f, qd, qdd, 0.0 * a0)


def newton_euler_forward(alg, model, q, qd, qdd, a0, v0=None):
    """Root to leaves: the joint poses X, motion subspaces S, the body twists v and twist
    derivatives a (body frames, gravity folded in through a0) and each body's Newton-Euler
    wrench f_i = I_i a_i + v_i x* I_i v_i."""
    consts = body_constants(alg, model)
    X = joint_poses(alg, model, q)
    S = motion_subspaces(alg, model, q)
    Sdot = subspace_rates(alg, model, q, qd)
    v, a, f = [], [], []
    for i, ((_, _, I), S_i, parent, sl) in enumerate(zip(consts, S, model.parent,
                                                        model.v_slices)):
        vJ = joint_motion(S_i, qd[sl])
        v_parent, a_parent = (v0, a0) if parent < 0 else (v[parent], a[parent])
        v.append(vJ if v_parent is None else alg.inv_act_twist(X[i], v_parent) + vJ)
        a.append(alg.inv_act_twist(X[i], a_parent) + joint_motion(S_i, qdd[sl])
                 + alg.cross_motion(v[i], vJ))
        if Sdot[i] is not None:  # cJ = dS/dt qd of a configuration-dependent joint
            a[i] = a[i] + joint_motion(Sdot[i], qd[sl])
        f.append(alg.inertia_apply(I, a[i]) + alg.cross_force(v[i], alg.inertia_apply(I, v[i])))
    return X, S, v, a, f


def newton_euler_backward(alg, model, X, S, f, qd, qdd, f_base):
    """Leaves to root: the joint forces tau (nv, N) that transmit the body wrenches f (each less
    the wrench the environment applies to its body), and f_base plus the wrenches the root bodies
    pass to the base (base frame)."""
    xp = alg.xp
    f = list(f)
    tau = [None] * model.nbodies
    for i in reversed(range(model.nbodies)):
        tau[i] = xp.stack([alg.dot(S_k, f[i]) for S_k in S[i]])
        moved = alg.act_wrench(X[i], f[i])
        if model.parent[i] >= 0:
            f[model.parent[i]] = f[model.parent[i]] + moved
        else:
            f_base = f_base + moved
    tau = concatenate_dofs(xp, tau, qd)
    return add_joint_forces(xp, model, tau, qd, qdd), f_base
