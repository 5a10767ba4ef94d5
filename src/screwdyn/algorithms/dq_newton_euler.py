"""The dual-quaternion Newton-Euler recursion at the links' centres of mass (``algebra="dq"``).

Silva, Quiroz-Omana and Adorno, "Dynamics of Mobile Manipulators Using Dual Quaternion Algebra"
(J. Mechanisms Robotics 14, 2022), the per-subsystem recursion that the branched-robot paper
instantiates (its Algorithms 4-7), as transcribed in the project's note
``dual-quaternion-newton-euler.md``. Every quantity is a dual quaternion and every step a
dual-quaternion operation (``algebra.dualquat``): poses x = r + eps p r / 2, twists
xi = omega + eps v, wrenches zeta = f + eps tau, Ad(x) h = x h x*, cross(a, b) = (ab - ba) / 2,
dot(a, b) = -(ab + ba) / 2. Body i's frame is x_i (after its joint), its centre-of-mass frame
x_ci = x_i (1 + eps c_i / 2) (axes parallel to the body's), and its joint screws s_i are the
motion subspace in the body frame (``kinematics.motion_subspaces``: any number of degrees of
freedom, so revolute, prismatic, free and every other joint type alike; a joint whose screws
move with q, as MuJoCo's free joint, adds their rate, Ad(B_i) ds_i/dt qd_i, to xidot_i).

Forward, root to leaves (xi_0, xidot_0 the base's twist and twist derivative, gravity folded in
as xidot_0 = -g):

    A_i = x_ci* x_c(i-1),   B_i = x_ci* x_i = 1 - eps c_i / 2   (from the joint frame x_i)
    xi_i    = Ad(A_i) xi_(i-1)    + Ad(B_i) s_i qd_i
    xidot_i = Ad(A_i) xidot_(i-1) + Ad(B_i) s_i qdd_i + cross(xi_i, Ad(B_i) s_i qd_i)
    zeta_ci = II_i(xidot_i) + cross(xi_i, II_i(xi_i))     Newton and Euler at the centre of mass,
                                                           II(omega + eps v) = m v + eps I_c omega

Backward, leaves to root (the wrench through joint i, in its frame; ``f_ext`` subtracted):

    zeta_i = Ad(B_i*) zeta_ci + sum_children Ad(x_i* x_j) zeta_j
    tau_i  = D(dot(zeta_i, s_i))                           one projection for every joint type

The joint frame of the note is the frame before joint i (frame i-1 of DH); here it is the body
frame x_i, after the joint: they differ by the joint's own motion, which leaves s_i and so the
projection unchanged. Ad(A_i) is applied factor by factor, A_i = t_ci* X_i* t_c(i-1), where
X_i = x_(i-1)* x_i is the joint's pose in its parent and t_c = 1 + eps c / 2 the constant offsets
of the centres of mass (B_i = t_ci*). Only the inertia operator II (the 3x3 inertia and the mass)
enters; no 6x6 spatial inertia is formed or moved.
"""
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..algebra import body_constants
from ..algebra.entries import Entries, EntriesMode, components
from ..model.inertial import inertia_from_parameters
from .kinematics import joint_motion, joint_poses, motion_subspaces, subspace_rates
from .rnea import newton_euler_backward


class CentreOfMass(NamedTuple):
    """The constants of one body: ``c`` = eps c, the offset of the centre of mass as a pure dual
    quaternion (t_c = 1 + eps c / 2 is the centre-of-mass frame in the body frame, and
    Ad(t_c) h = h + cross(eps c, h) exactly, ad(eps c) squaring to zero), and the inertia
    operator ``II`` (6x6 matrix of omega + eps v -> m v + eps I_c omega, rows [f; tau], columns
    [omega; v])."""

    c: object
    II: object


def com_constants(alg, model):
    """Per body, its ``CentreOfMass`` constants in ``alg`` (the dual-quaternion algebra); of
    the traced inertial parameters when the model holds them (``Model.traced_parameters``)."""
    pi = model.traced_parameters
    if pi is None:
        return _com_constants(alg, model)
    xp = alg.xp
    out = []
    for pi_i in pi:
        mass, com, inertia_com = inertia_from_parameters(pi_i)
        out.append(CentreOfMass(alg.twist(xp.concatenate([com, xp.zeros(3)])[:, None]),
                                inertia_operator(alg, mass, inertia_com)))
    return tuple(out)


@lru_cache(maxsize=64)
def _com_constants(alg, model):
    return tuple(CentreOfMass(alg.twist(np.concatenate([b.com, np.zeros(3)])[:, None]),  # eps c
                              inertia_operator(alg, b.mass, b.inertia)) for b in model.bodies)


def _screws_at_com(alg, model):
    """Per body, Ad(B_i) s_i (the joint screws at the centre of mass) when they are model
    constants, else None (the joint's screws move with q, or the centres of mass are traced)."""
    if model.parameters is not None:
        return (None,) * model.nbodies
    return _constant_screws_at_com(alg, model)


@lru_cache(maxsize=64)
def _constant_screws_at_com(alg, model):
    return tuple(None if S is None else [translated(alg, -c.c, s) for s in S]
                 for (_, S, _), c in zip(body_constants(alg, model), com_constants(alg, model)))


def translated(alg, c, h):
    """Ad(1 + eps c / 2) h = h + cross(eps c, h) for a twist or a wrench h (``c`` = eps c)."""
    return h + alg.cross_motion(c, h)


def inertia_operator(alg, mass, inertia_com):
    """II(omega + eps v) = m v + eps I_c omega as a constant operator of ``alg``
    (``inertia_apply``): a 6x6 matrix, rows [f; tau], columns [omega; v]; in the algebra's
    entries mode, as entries (its zeros then cost nothing)."""
    if isinstance(mass, (int, float)):
        II = np.zeros((6, 6, 1))
        II[:3, 3:, 0] = mass * np.eye(3)
        II[3:, :3, 0] = np.reshape(inertia_com, (3, 3))
    else:  # traced values (``com_constants``)
        xp, zero = alg.xp, alg.xp.zeros((3, 3))
        II = xp.concatenate([xp.concatenate([zero, mass * xp.eye(3)], 1),
                             xp.concatenate([xp.reshape(inertia_com, (3, 3)), zero], 1)])[..., None]
    if isinstance(alg, EntriesMode):
        return Entries(alg.xp, components(II, 2), (6, 6))
    return II


def newton_euler_wrench(alg, II, xi, xidot):
    """zeta_c = II(xidot) + cross(xi, II(xi)): the wrench that moves a body at its centre of
    mass with twist xi and twist derivative xidot (xi None: at rest)."""
    zeta = alg.inertia_apply(II, xidot)
    if xi is not None:
        zeta = zeta + alg.cross_force(xi, alg.inertia_apply(II, xi))
    return zeta


def forward(alg, model, q, qd, qdd, xidot0, xi0=None):
    """Root to leaves: the joint poses X, the joint screws S (body frames), the centre-of-mass
    twists xi and twist derivatives xidot, and each body's Newton-Euler wrench zeta_c at its
    centre of mass (all in the centre-of-mass frames). ``xi0``, ``xidot0``: twist and twist
    derivative of the base frame in the base frame (xi0 None: at rest; xidot0 = -g for a base
    at rest under gravity g)."""
    consts, constant_screws = com_constants(alg, model), _screws_at_com(alg, model)
    X = joint_poses(alg, model, q)
    S = motion_subspaces(alg, model, q)
    rates = subspace_rates(alg, model, q, qd)
    xi, xidot, zeta = [], [], []
    for i, (c, S_i, parent, sl) in enumerate(zip(consts, S, model.parent, model.v_slices)):
        S_c = constant_screws[i] or [translated(alg, -c.c, s) for s in S_i]  # Ad(B_i) s_i
        s_qd = joint_motion(S_c, qd[sl])  # Ad(B_i) s_i qd_i
        if parent < 0:
            xi_p, xidot_p, c_p = xi0, xidot0, None
        else:
            xi_p, xidot_p, c_p = xi[parent], xidot[parent], consts[parent].c
        xi.append(s_qd if xi_p is None else _ad_A(alg, c, X[i], c_p, xi_p) + s_qd)
        xidot.append(_ad_A(alg, c, X[i], c_p, xidot_p) + joint_motion(S_c, qdd[sl])
                     + alg.cross_motion(xi[i], s_qd))
        if rates[i] is not None:  # screws that move with q: Ad(B_i) ds_i/dt qd_i
            xidot[i] = xidot[i] + joint_motion([translated(alg, -c.c, r) for r in rates[i]],
                                               qd[sl])
        zeta.append(newton_euler_wrench(alg, c.II, xi[i], xidot[i]))
    return X, S, xi, xidot, zeta


def _ad_A(alg, c, X_i, c_p, h):
    """Ad(A_i) h for A_i = x_ci* x_c(i-1) = t_ci* X_i* t_c(i-1), factor by factor."""
    if c_p is not None:
        h = translated(alg, c_p, h)
    h = alg.inv_act_twist(X_i, h)
    return h - alg.cross_motion(c.c, h)


def backward(alg, model, X, S, zeta, qd, qdd, f_ext=None, zeta_base=0.0):
    """Leaves to root: the joint forces tau (nv, N), tau_i = D(dot(zeta_i, s_i)), and
    ``zeta_base`` plus the wrenches the root joints pass to the base (base frame). ``f_ext``:
    None, or per body None or the wrench (body frame) that the environment applies to the body
    (a child subsystem's load included). The wrench through joint i starts as Ad(B_i*) zeta_ci
    (its body's Newton-Euler wrench moved from the centre of mass to the joint), less f_ext;
    the sweep that sums Ad(x_i* x_j) zeta_j over the children and projects on s_i is the one
    every recursion shares (``rnea.newton_euler_backward``: its ``dot`` is D(dot(., .)) here)."""
    joint = [translated(alg, c.c, z) for c, z in zip(com_constants(alg, model), zeta)]
    if f_ext is not None:
        joint = [z if e is None else z - e for z, e in zip(joint, f_ext)]
    return newton_euler_backward(alg, model, X, S, joint, qd, qdd, zeta_base)


def inverse_dynamics(alg, model, q, qd, qdd, xidot0, f_ext=None):
    """Joint forces tau (nv, N) of a model on a fixed base (xidot0 = -g as a twist)."""
    X, S, _, _, zeta = forward(alg, model, q, qd, qdd, xidot0)
    return backward(alg, model, X, S, zeta, qd, qdd, f_ext)[0]
