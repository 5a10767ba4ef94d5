"""The public algorithms: each one a kernel written once on the recursions, run by the plan.

Every function takes arrays with leading batch dimensions, ``q`` (..., nq) and ``qd``, ``qdd``,
``tau`` (..., nv), which broadcast against each other, and returns arrays with the same batch
dimensions. numpy in, numpy out (float64); a JAX array anywhere in, JAX arrays out. How a call
runs (machine code compiled from the recursion, numpy, or JAX) is decided in one place,
``screwdyn.execution.plan``; ``screwdyn.plan(model, "inverse_dynamics").explain()`` tells.

``algebra`` selects the algebra the recursion runs in: ``"spatial"`` (6-D spatial vectors, the
default), ``"cga"`` (conformal geometric algebra), ``"dq"`` (dual quaternions) or ``"vector"`` (the
classical Newton-Euler recursion on Denavit-Hartenberg frames, for models made by ``from_dh``).

External wrenches ``f_ext`` have shape (..., nlinks, 6): for each link, in ``model.link_names``
order, the wrench [force; torque] that the environment applies to the link, expressed in the
link's frame, the torque taken about the link's origin (Pinocchio's local convention).

Each kernel below takes a ``Call`` (the inputs in the internal layout: components first, one
trailing batch axis; see ``screwdyn.execution.call``) and returns its result in that layout. For
a coupled model (mimic joints tied to their sources) the recursions run on the whole tree
(``call.model``) and ``call.reduce`` brings their results back to the model's coordinates.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

import numpy as np

from .algebra import link_placements
from .algorithms import aba as _aba
from .algorithms import crba as _crba
from .algorithms import derivatives as _derivs
from .algorithms import kinematics as _kin
from .algorithms import rnea as _rnea
from . import validation
from .execution import plan as _plan
from .execution.plan import Function
from .model.model import GRAVITY  # noqa: F401  (the default of Model.gravity)
from .typing import AlgebraName, Array, ArrayLike

if TYPE_CHECKING:
    from .execution.plan import Plan
    from .model import Model


# -- kernels ----------------------------------------------------------------------------------
def _forward_kinematics(call):
    alg, model = call.alg, call.model
    T = _kin.link_poses(alg, model, _kin.world_poses(alg, model,
                                                     _kin.joint_poses(alg, model, call["q"])))
    zero = call.xp.zeros(call.N)  # broadcasts links welded to the world over the batch
    mats = [alg.to_matrix(T_l) + zero for T_l in T]
    return call.xp.stack(mats) if mats else call.xp.zeros((0, 4, 4, call.N))


def _newton_euler(call, qd, qdd):
    """RNEA (or the DH recursion, or the dual-quaternion Newton-Euler at the centres of mass)
    on the call's tree: (tree nv, N)."""
    if call.alg is None:
        from .algorithms.newton_euler_dh import newton_euler_dh

        return newton_euler_dh(call, qd, qdd)
    if call.algebra_name == "dq":  # the paper's Newton-Euler at the centres of mass
        from .algorithms.dq_newton_euler import inverse_dynamics as newton_euler_com

        return newton_euler_com(call.alg, call.model, call["q"], qd, qdd, call.gravity_twist(),
                                call.body_wrenches())
    return _rnea.rnea(call.alg, call.model, call["q"], qd, qdd, call.gravity_twist(),
                      call.body_wrenches())


def _inverse_dynamics(call):
    return call.reduce(_newton_euler(call, call["qd"], call["qdd"]))


def _bias_forces(call):
    return call.reduce(_newton_euler(call, call["qd"], call.xp.zeros_like(call["qd"])))


def _gravity_torques(call):
    zero = call.xp.zeros((call.model.nv, call.N))
    return call.reduce(_newton_euler(call, zero, zero))


def _forward_dynamics(call):
    if call.coupling is not None:  # M qdd = tau - b in the model's (reduced) coordinates
        b = call.reduce(_newton_euler(call, call["qd"], call.xp.zeros_like(call["qd"])))
        M = call.reduce(_crba.crba(call.alg, call.model, call["q"]), axes=2)
        return _solve(call.xp, M, call["tau"] - b)
    if call.alg is None:
        from .algorithms.newton_euler_dh import forward_dynamics_dh

        return forward_dynamics_dh(call)
    return _aba.aba(call.alg, call.model, call["q"], call["qd"], call["tau"],
                    call.gravity_twist(), call.body_wrenches())


def _solve(xp, M, rhs):
    """x (n, N) with M x = rhs for M (n, n, N)."""
    x = xp.linalg.solve(xp.moveaxis(M, -1, 0), xp.moveaxis(rhs, -1, 0)[..., None])[..., 0]
    return xp.moveaxis(x, 0, -1)


def _inverse_dynamics_derivatives(call):
    return _derivatives(call, call["qdd"], forward=False)


def _forward_dynamics_derivatives(call):
    return _derivatives(call, _tree_accelerations(call), forward=True)


def _tree_accelerations(call):
    """FD(q, qd, tau) on the call's tree (a coupled model's expanded: G qdd)."""
    return call.expand(_forward_dynamics(call))


def _derivatives(call, qdd, forward):
    """(nv, 3 nv, N): [d out/dq, d out/dqd, d out/du] of inverse dynamics (u = qdd) or forward
    dynamics (u = tau, ``forward``) at the tree's accelerations ``qdd``, as one straight-line
    program (``algorithms.derivatives``); a coupled model's in its own coordinates."""
    xp = call.xp
    if call.model.nv == 0:  # nothing moves: no derivatives
        return xp.zeros((0, 0) + call["q"].shape[1:])
    parts = _derivs.rnea_derivatives(call.alg, call.model, call["q"], call["qd"], qdd,
                                     call.gravity_twist(), call.body_wrenches())
    like = [qdd[0]]  # the batch, where every entry is constant
    if call.coupling is None:
        if forward:
            parts = _derivs.aba_derivatives(xp, call.model, *parts)
        return xp.concatenate([_derivs.as_array(xp, D, like) for D in parts], axis=1)
    dq, dqd, M = (call.reduce(_derivs.as_array(xp, D, like), axes=2) for D in parts)
    if not forward:
        return xp.concatenate([dq, dqd, M], axis=1)
    out = _solved(xp, *(xp.moveaxis(D, -1, 0) for D in (dq, dqd, M)))
    return xp.moveaxis(out, 0, -1)


def _solved(xp, dq, dqd, M):
    """[-M^-1 dq, -M^-1 dqd, M^-1] (N, nv, 3 nv) by M's Cholesky factor (``spd.solve``)."""
    from .algorithms.spd import solve

    eye = xp.zeros_like(M) + np.eye(M.shape[-1])
    return solve(xp, M, xp.concatenate([-dq, -dqd, eye], axis=-1))


def _derivative_columns(call, qdd):
    """(9, 6, tree nv, N): the world-frame factors of the derivatives of a large tree
    (``derivatives.columns_array``)."""
    alg = call.alg
    cols = _derivs.derivative_columns(alg, call.model, call["q"], call["qd"], qdd,
                                      call.gravity_twist(), call.body_wrenches())
    return _derivs.columns_array(alg, call.model, cols)


def _derivatives_from_columns(forward):
    def finish(xp, model, factors, out=None):
        """(..., nv, 3 nv) from the factors (..., 9, 6, tree nv): the pairs as matrix products
        (``derivatives.from_columns``), a coupling's G^T D G, forward dynamics' M^-1 (one
        batched inverse, then matrix products: this step is never traced). On numpy the pairs
        4 states at a time (their intermediates stay in the cache: 16 at a time of a 100-link
        chain's took 7 times as long per state), written into the result where the model has
        no coupling, with one scratch array for the whole call (a fresh one per chunk cost a
        page fault per 4 KiB), the inverses 64 at a time."""
        def pairs(part, out=None, scratch=None):  # into ``out`` where given (numpy)
            if model.coupling is None:
                return _derivs.from_columns(xp, model.nominal.tree, part, out, scratch)
            D = _derivs.from_columns(xp, model.nominal.tree, part)
            G = model.coupling[3]
            n = D.shape[-1] // 3
            reduced = xp.concatenate([xp.matmul(xp.matmul(G.T, D[..., k * n:(k + 1) * n]), G)
                                      for k in range(3)], axis=-1)
            if out is None:
                return reduced
            out[...] = reduced
            return out

        def solved(out):  # [-M^-1 dq, -M^-1 dqd, M^-1]
            nv = model.nv
            Minv = xp.linalg.inv(out[..., 2 * nv:])
            rhs = out[..., :2 * nv]
            if xp is not np:
                return xp.concatenate([-xp.matmul(Minv, rhs), Minv], axis=-1)
            # a contiguous operand: numpy's stacked matmul then calls BLAS; in place
            np.matmul(Minv, np.ascontiguousarray(rhs), out=rhs)
            np.negative(rhs, out=rhs)
            out[..., 2 * nv:] = Minv
            return out

        if xp is not np:
            out = pairs(factors)
            return solved(out) if forward else out
        batch = tuple(factors.shape[:-3])
        flat = factors.reshape((-1,) + tuple(factors.shape[-3:]))
        nv = model.nv
        name = "forward_dynamics_derivatives" if forward else "inverse_dynamics_derivatives"
        result = _plan.result_array(out, batch + (nv, 3 * nv), name)
        out = result.reshape((-1, nv, 3 * nv))
        scratch = np.empty((min(4, flat.shape[0]), nv, 3 * nv)) if model.coupling is None \
            else None
        for start in range(0, flat.shape[0], 4):
            chunk = out[start:start + 4]
            pairs(flat[start:start + 4], chunk, None if scratch is None else scratch[:len(chunk)])
        if forward:
            for start in range(0, flat.shape[0], 64):
                solved(out[start:start + 64])
        return result
    return finish


def _derivative_pairs(model):
    """The related pairs of coordinates in the derivatives (``derivatives.pairs``)."""
    return len(_derivs.pairs(model.nominal.tree))


#: the derivatives are computed from world-frame factors (9 x 6 numbers per degree of freedom,
#: a program of O(n) operations, then matrix products) where the tree relates more than this
#: many pairs of coordinates (a chain of 44 DoF has 990), and as one straight-line program below
DERIVATIVE_PAIRS = 1024


def _check_forward_dynamics(model):
    _aba.check_defined(model.tree.nominal)


def _mass_matrix(call):
    if call.alg is None:
        from .algorithms.newton_euler_dh import mass_matrix_dh

        return call.reduce(mass_matrix_dh(call), axes=2)
    return call.reduce(_crba.crba(call.alg, call.model, call["q"]), axes=2)


def _mass_matrix_columns(call):
    """(2, 6, tree nv, N): the world-frame columns S and IC S of ``crba_columns``, the factors
    of the mass matrix of a large tree."""
    S, F = _crba.crba_columns(call.alg, call.model, call["q"])
    return call.xp.stack([S, F])


def _mass_from_columns(xp, model, factors, out=None):
    """M (..., nv, nv) from the columns (..., 2, 6, tree nv) (``crba.mass_from_columns``, then
    the coupling G^T M G); on numpy a few states at a time (about 64 MiB of intermediates),
    into ``out`` where given."""
    tree, nv = model.nominal.tree, model.nv

    def block(part):  # (..., 2, 6, tree nv) -> (..., nv, nv)
        M = _crba.mass_from_columns(xp, tree, part[..., 0, :, :], part[..., 1, :, :])
        if model.coupling is None:
            return M
        G = model.coupling[3]
        return xp.matmul(xp.matmul(G.T, M), G)

    if xp is not np:
        return block(factors)
    batch = tuple(factors.shape[:-3])
    flat = factors.reshape((-1,) + tuple(factors.shape[-3:]))
    result = _plan.result_array(out, batch + (nv, nv), "mass_matrix")
    out = result.reshape((-1, nv, nv))
    step = max(1, (64 << 20) // (32 * tree.nv ** 2 + 1))
    for start in range(0, flat.shape[0], step):
        out[start:start + step] = block(flat[start:start + step])
    return result


def _mass_matrix_entries(model):
    """The entries of M (upper half) that the model's tree does not make zero."""
    return int(_crba.tree_pattern(model.nominal.tree)[0].sum())


#: the mass matrix is computed from its world-frame columns (``crba.crba_columns``, a program of
#: O(n) operations, then one array product) where the tree leaves more than this many entries
#: of M nonzero (upper half; a chain of 63 DoF has 2,016), and in body frames as one
#: straight-line program (``crba.crba``) below
MASS_MATRIX_PAIRS = 2048


def _coriolis_matrix(call):
    from .algorithms.coriolis import coriolis

    return call.reduce(coriolis(call.alg, call.model, call["q"], call["qd"]), axes=2)


def _kinetic_energy(call):
    from .algorithms.energy import kinetic

    return kinetic(call.alg, call.model, call["q"], call["qd"])


def _potential_energy(call):
    from .algorithms.energy import center_of_mass_moment

    g = call.arrays.get("gravity", np.array(call.model.gravity)[:, None])
    return -(g * center_of_mass_moment(call.alg, call.model, call["q"])).sum(axis=0)


def _center_of_mass(call):
    from .algorithms.energy import center_of_mass_moment

    return center_of_mass_moment(call.alg, call.model, call["q"]) / call.model.total_mass


def _jacobian(call, link, frame):
    from .algorithms.jacobian import link_jacobian

    J = link_jacobian(call.alg, call.model, call["q"], link, frame)  # (6, tree nv, N)
    return call.xp.moveaxis(call.reduce(call.xp.moveaxis(J, 1, 0)), 0, 1)


def _link_velocities(call, frame):
    from .algorithms.kinematics import body_velocities, joint_poses, motion_subspaces

    alg, tree, xp = call.alg, call.model, call.xp
    qd_tree = call["qd"]
    X = joint_poses(alg, tree, call["q"])
    v, _ = body_velocities(alg, tree, X, motion_subspaces(alg, tree, call["q"]), qd_tree)
    zero = xp.zeros((6, call.N), dtype=qd_tree.dtype)
    if frame == "world":
        T = _kin.link_poses(alg, tree, _kin.world_poses(alg, tree, X))
    out = []
    for l, (link, placement) in enumerate(zip(tree.links, link_placements(alg, tree))):
        if link.body < 0:
            out.append(zero)
            continue
        twist = alg.twist_vector(alg.inv_act_twist(placement, v[link.body])) + zero
        if frame == "world":
            R = alg.to_matrix(T[l])[:3, :3]
            twist = xp.concatenate([xp.einsum("ij...,j...->i...", R, twist[:3]),
                                    xp.einsum("ij...,j...->i...", R, twist[3:])])
        out.append(twist)
    if not out:
        return xp.zeros((0, 6, call.N))
    return xp.stack(out)


def _nv(model):
    return (model.nv,)


def _nv_nv(model):
    return (model.nv, model.nv)


_EXTERNAL = ("f_ext", "gravity")
#: the public functions as the plan runs them, by name
FUNCTIONS = {f.name: f for f in (
    Function("forward_kinematics", _forward_kinematics, ("q",),
             lambda m: (m.nlinks, 4, 4), kinematic=True),
    Function("inverse_dynamics", _inverse_dynamics, ("q", "qd", "qdd"), _nv, _EXTERNAL,
             entries=True, bytes_per_body=256),
    Function("bias_forces", _bias_forces, ("q", "qd"), _nv, ("gravity",), entries=True,
             bytes_per_body=256),
    Function("gravity_torques", _gravity_torques, ("q",), _nv, ("gravity",), entries=True,
             bytes_per_body=256),
    Function("forward_dynamics", _forward_dynamics, ("q", "qd", "tau"), _nv, _EXTERNAL,
             entries=True, check=_check_forward_dynamics, bytes_per_body=512),
    Function("mass_matrix", _mass_matrix, ("q",), _nv_nv, entries=True, many_outputs=True,
             bytes_per_body=384, factored=_plan.Factored(
                 Function("mass_matrix_columns", _mass_matrix_columns, ("q",),
                          lambda m: (2, 6, m.tree.nv), entries=True, bytes_per_body=384),
                 _mass_from_columns, _mass_matrix_entries, MASS_MATRIX_PAIRS,
                 ("spatial", "cga", "dq"))),
    Function("coriolis_matrix", _coriolis_matrix, ("q", "qd"), _nv_nv, many_outputs=True,
             kinematic=True),
    Function("kinetic_energy", _kinetic_energy, ("q", "qd"), lambda m: (), kinematic=True),
    Function("potential_energy", _potential_energy, ("q",), lambda m: (), ("gravity",),
             kinematic=True),
    Function("center_of_mass", _center_of_mass, ("q",), lambda m: (3,), kinematic=True),
    Function("jacobian", _jacobian, ("q",), lambda m, link, frame: (6, m.nv),
             static=("link", "frame"), kinematic=True),
    Function("link_velocities", _link_velocities, ("q", "qd"), lambda m, frame: (m.nlinks, 6),
             static=("frame",), kinematic=True, many_outputs=True),
    # [d tau/dq, d tau/dqd, d tau/dqdd] (nv, 3 nv), d/dq in q's tangent space, and the same of
    # forward dynamics (screwdyn.derivatives)
    Function("inverse_dynamics_derivatives", _inverse_dynamics_derivatives, ("q", "qd", "qdd"),
             lambda m: (m.nv, 3 * m.nv), _EXTERNAL, entries=True, many_outputs=True,
             kinematic=True, bytes_per_body=2048, factored=_plan.Factored(
                 Function("inverse_dynamics_derivative_columns",
                          lambda call: _derivative_columns(call, call["qdd"]),
                          ("q", "qd", "qdd"), lambda m: (9, 6, m.tree.nv), _EXTERNAL,
                          entries=True, bytes_per_body=2048),
                 _derivatives_from_columns(False), _derivative_pairs, DERIVATIVE_PAIRS,
                 ("spatial", "cga", "dq"))),
    Function("forward_dynamics_derivatives", _forward_dynamics_derivatives, ("q", "qd", "tau"),
             lambda m: (m.nv, 3 * m.nv), _EXTERNAL, entries=True, many_outputs=True,
             check=_check_forward_dynamics, kinematic=True, bytes_per_body=2048,
             factored=_plan.Factored(
                 Function("forward_dynamics_derivative_columns",
                          lambda call: _derivative_columns(call, _tree_accelerations(call)),
                          ("q", "qd", "tau"), lambda m: (9, 6, m.tree.nv), _EXTERNAL,
                          entries=True, check=_check_forward_dynamics, bytes_per_body=2048),
                 _derivatives_from_columns(True), _derivative_pairs, DERIVATIVE_PAIRS,
                 ("spatial", "cga", "dq"))),
)}
_FK, _ID, _BIAS, _GRAV, _FD, _M, _C, _T, _V, _COM, _J, _LV, _DID, _DFD = FUNCTIONS.values()


_kinematic_algebra = _plan.kinematic_algebra


# -- the public functions ---------------------------------------------------------------------
@_plan.public(_FK)
def forward_kinematics(model: Model, q: ArrayLike, algebra: AlgebraName = "spatial") -> Array:
    """World poses of every link, in ``model.link_names`` order.

    Composed as the algebra's poses (rotation matrices, motors or unit dual quaternions) and
    returned as homogeneous matrices.

    Args:
        model: the robot.
        q: configuration (..., nq): joint angles (rad) and displacements (m); a free joint takes
            (x, y, z, qx, qy, qz, qw) (Pinocchio's layout).
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` (``"vector"``: as ``"spatial"``).

    Returns:
        (..., nlinks, 4, 4): T such that p_world = T[l] @ p_link for a point given in link l's
        frame (metres).

    Example:
        ```python
        import screwdyn as sd

        panda = sd.robots.load("panda")
        T = sd.forward_kinematics(panda, panda.neutral)
        print(T[panda.link_index("panda_hand"), :3, 3])   # the hand's origin in the world, m
        ```
    """
    return _plan.run(_FK, model, _kinematic_algebra(algebra), (q,))


@_plan.public(_ID)
def inverse_dynamics(model: Model, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike,
                     f_ext: Optional[ArrayLike] = None, gravity: Optional[ArrayLike] = None,
                     algebra: AlgebraName = "spatial") -> Array:
    """Joint forces that produce the accelerations ``qdd``: the recursive Newton-Euler
    algorithm, O(n).

    tau = M(q) qdd + b(q, qd) - J(q)^T f_ext, plus the joints' own forces when the model has
    them (armature * qdd, damping * qd, Coulomb friction).

    Args:
        model: the robot.
        q: configuration (..., nq) (rad, m; a free joint: position and quaternion xyzw).
        qd: joint velocities (..., nv) (rad/s, m/s; a free joint: linear and angular velocity of
            the base in the base frame).
        qdd: joint accelerations (..., nv) (rad/s^2, m/s^2).
        f_ext: external wrenches (..., nlinks, 6), one per link in ``model.link_names`` order:
            [force (N); torque (N m) about the link origin], in the link frame. Default none.
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: the algebra the recursion runs in: ``"spatial"`` (default), ``"cga"``,
            ``"dq"``, or ``"vector"`` (Corke's DH recursion, for models made by ``from_dh``).

    Returns:
        tau (..., nv): joint torques (N m) and forces (N); the batch dimensions of the inputs,
        broadcast. numpy in, numpy out; a JAX array in, a JAX array out.

    Example:
        ```python
        import numpy as np
        import screwdyn as sd

        puma = sd.robots.load("puma560")
        tau = sd.inverse_dynamics(puma, np.zeros(6), np.zeros(6), np.zeros(6))  # = gravity
        taus = sd.inverse_dynamics(puma, np.random.default_rng(0).normal(size=(100, 6)),
                                   np.zeros(6), np.zeros(6))                   # (100, 6)
        ```
    """
    return _plan.run(_ID, model, algebra, (q, qd, qdd), (f_ext, gravity))


@_plan.public(_FD)
def forward_dynamics(model: Model, q: ArrayLike, qd: ArrayLike, tau: ArrayLike,
                     f_ext: Optional[ArrayLike] = None, gravity: Optional[ArrayLike] = None,
                     algebra: AlgebraName = "spatial") -> Array:
    """Joint accelerations under the joint forces ``tau``: the articulated-body algorithm,
    O(n).

    Solves M(q) qdd = tau - b(q, qd) + J(q)^T f_ext (``algebra="vector"`` and coupled models
    solve it with the mass matrix instead). ``ModelError`` when a moving subtree has no mass
    (the mass matrix is singular).

    Args:
        model: the robot.
        q: configuration (..., nq) (rad, m; a free joint: position and quaternion xyzw).
        qd: joint velocities (..., nv) (rad/s, m/s).
        tau: joint torques (N m) and forces (N) (..., nv).
        f_ext: external wrenches (..., nlinks, 6), [force; torque about the link origin] in
            each link's frame. Default none.
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.

    Returns:
        qdd (..., nv): joint accelerations (rad/s^2, m/s^2).

    Example:
        ```python
        import numpy as np
        import screwdyn as sd

        panda = sd.robots.load("panda")
        qdd = sd.forward_dynamics(panda, panda.neutral, np.zeros(9), np.zeros(9))  # it falls
        ```
    """
    return _plan.run(_FD, model, algebra, (q, qd, tau), (f_ext, gravity))


@_plan.public(_M)
def mass_matrix(model: Model, q: ArrayLike, algebra: AlgebraName = "spatial") -> Array:
    """The joint-space inertia matrix M(q): the composite-rigid-body algorithm.

    Args:
        model: the robot.
        q: configuration (..., nq).
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.

    Returns:
        M (..., nv, nv), symmetric positive definite (kg m^2, kg, kg m); armature on the
        diagonal when the model has it. Kinetic energy is qd^T M qd / 2.
    """
    return _plan.run(_M, model, algebra, (q,))


@_plan.public(_BIAS)
def bias_forces(model: Model, q: ArrayLike, qd: ArrayLike, gravity: Optional[ArrayLike] = None,
                algebra: AlgebraName = "spatial") -> Array:
    """b(q, qd) = C(q, qd) qd + g(q) (+ joint friction): inverse dynamics at zero acceleration.

    Args:
        model: the robot.
        q: configuration (..., nq).
        qd: joint velocities (..., nv).
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.

    Returns:
        b (..., nv): N m and N.
    """
    return _plan.run(_BIAS, model, algebra, (q, qd), (gravity,))


@_plan.public(_GRAV)
def gravity_torques(model: Model, q: ArrayLike, gravity: Optional[ArrayLike] = None,
                    algebra: AlgebraName = "spatial") -> Array:
    """g(q): the joint forces that hold the robot still against gravity.

    Args:
        model: the robot.
        q: configuration (..., nq).
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.

    Returns:
        g (..., nv): N m and N; for 1-DoF joints, the gradient of ``potential_energy``.
    """
    return _plan.run(_GRAV, model, algebra, (q,), (gravity,))


@_plan.public(_C)
def coriolis_matrix(model: Model, q: ArrayLike, qd: ArrayLike,
                    algebra: AlgebraName = "spatial") -> Array:
    """The Coriolis and centrifugal matrix C(q, qd) (the one Pinocchio computes).

    Args:
        model: the robot.
        q: configuration (..., nq).
        qd: joint velocities (..., nv).
        algebra: the algebra the recursion runs in (``"vector"``: spatial).

    Returns:
        C (..., nv, nv) with C qd = b - g and dM/dt - 2C skew-symmetric.
    """
    return _plan.run(_C, model, _kinematic_algebra(algebra), (q, qd))


@_plan.public(_T)
def kinetic_energy(model: Model, q: ArrayLike, qd: ArrayLike,
                   algebra: AlgebraName = "spatial") -> Array:
    """Kinetic energy T = qd^T M(q) qd / 2, summed over bodies as v_i . I_i v_i / 2 (armature
    included).

    Args:
        model: the robot.
        q: configuration (..., nq).
        qd: joint velocities (..., nv).
        algebra: the algebra the recursion runs in (``"vector"``: spatial).

    Returns:
        T (...): joules.
    """
    return _plan.run(_T, model, _kinematic_algebra(algebra), (q, qd))


@_plan.public(_V)
def potential_energy(model: Model, q: ArrayLike, gravity: Optional[ArrayLike] = None,
                     algebra: AlgebraName = "spatial") -> Array:
    """Gravitational potential energy V = -sum_i m_i g . c_i, zero when every centre of mass is
    at the world origin's height.

    Args:
        model: the robot.
        q: configuration (..., nq).
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: the algebra the recursion runs in (``"vector"``: spatial).

    Returns:
        V (...): joules.
    """
    return _plan.run(_V, model, _kinematic_algebra(algebra), (q,), (gravity,))


@_plan.public(_COM)
def center_of_mass(model: Model, q: ArrayLike) -> Array:
    """The robot's centre of mass, in the world frame.

    Args:
        model: the robot.
        q: configuration (..., nq).

    Returns:
        c (..., 3): metres, world frame (the moving bodies' masses; links welded to the world
        are not included).
    """
    return _plan.run(_COM, model, "spatial", (q,))


@_plan.public(_J)
def jacobian(model: Model, q: ArrayLike, link: Union[str, int], frame: str = "world",
             algebra: AlgebraName = "spatial") -> Array:
    """The link's Jacobian: its velocity per unit rate of each velocity coordinate.

    Args:
        model: the robot.
        q: configuration (..., nq).
        link: the link's name or index (``model.link_names``).
        frame: ``"world"``: the velocity of the link origin and the link's angular velocity in
            world axes; ``"local"``: the same in the link's axes.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` (``"vector"``: as ``"spatial"``).

    Returns:
        J (..., 6, nv), rows [linear (m/s); angular (rad/s)]: [v; w] = J @ qd.

    Example:
        ```python
        import screwdyn as sd

        panda = sd.robots.load("panda")
        J = sd.jacobian(panda, panda.neutral, "panda_hand")   # (6, 9)
        ```
    """
    _plan.check_frame(frame)
    return _plan.run(_J, model, _kinematic_algebra(algebra), (q,),
                     static=(model.link_index(link), frame))


@_plan.public(_LV)
def link_velocities(model: Model, q: ArrayLike, qd: ArrayLike, frame: str = "local",
                    algebra: AlgebraName = "spatial") -> Array:
    """The twist of every link (..., nlinks, 6), in ``model.link_names`` order, rows [linear;
    angular]: the velocity of the link's origin and the link's angular velocity (m/s, rad/s), in
    link axes (``frame="local"``) or world axes (``"world"``); zero for links welded to the
    world. Equals ``jacobian(model, q, link, frame) @ qd`` for every link at once (one O(n)
    velocity recursion)."""
    _plan.check_frame(frame)
    return _plan.run(_LV, model, _kinematic_algebra(algebra), (q, qd), static=(frame,))


def plan(model: Model, function: str, algebra: AlgebraName = "spatial", inputs: str = "numpy",
         gravity: bool = False, f_ext: bool = False, backend: Optional[str] = None,
         **static: object) -> Plan:
    """How a call of a public function runs: machine code, numpy or JAX, and why.

    Args:
        model: the robot.
        function: a public function's name, e.g. ``"forward_dynamics"``: any of
            ``screwdyn.execution.plan.REGISTRY`` (every public array function).
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.
        inputs: ``"numpy"`` or ``"jax"``: the kind of arrays the call gets.
        gravity: whether the call passes the optional ``gravity`` array.
        f_ext: whether the call passes the optional ``f_ext`` array.
        backend: JAX's platform (default: ``jax.default_backend()``).
        **static: the function's static arguments, as its signature names them: ``link`` and
            ``frame`` of ``jacobian``, ``frame`` of ``link_velocities``; needed to compile
            (``Plan.compile``), not to say the path.

    Returns:
        A ``screwdyn.execution.plan.Plan``: ``explain()`` says which path, why, and what
        compiling costs; ``compile()`` compiles the native program ahead of the first call.

    Example:
        ```python
        import screwdyn as sd

        panda = sd.robots.load("panda")
        print(sd.plan(panda, "forward_dynamics").explain())
        ```
    """
    f = _plan.lookup(function)
    if inputs not in ("numpy", "jax"):
        raise ValueError(f"inputs must be 'numpy' or 'jax', got {inputs!r}")
    options = tuple(name for name, given in (("f_ext", f_ext), ("gravity", gravity)) if given)
    unknown = [name for name in options if name not in f.options]
    if unknown:
        raise ValueError(f"{function} takes no {unknown[0]}")
    arguments = _plan.static_arguments(f, model, static, required=False)
    algebra = _plan.public_algebra(f, algebra)
    return _plan.Plan(f, model, algebra, inputs, options, backend, False, arguments)


def _Call(model, algebra="spatial", entries=False, many_outputs=False, loop=False, **arrays):
    """The inputs ``arrays`` of a call on ``model`` in the internal layout, with the algebra a
    recursion runs in (its entries mode for ``entries``; ``loop``: the recursion is the body of
    an XLA loop, cut once per body under JAX): ``screwdyn.execution.plan.call``."""
    return _plan.call(model, algebra, arrays, entries, many_outputs, loop)
