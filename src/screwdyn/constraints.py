"""Dynamics under equality constraints: closed loops, welds, coupled joints and tendons.

The constraint kinds (``Connect``, ``Weld``, ``Coupling``), ``FixedTendon`` and ``SpatialTendon``
are defined in ``screwdyn.model.constraints`` and attached to a model by
``Model.with_constraints`` (or read from an MJCF file's ``<equality>``, ``<tendon><fixed>`` and
``<tendon><spatial>`` through sites by ``load_mjcf``). The functions here are
public array functions like ``forward_dynamics``: one kernel (``algorithms/constraints.py`` on
the recursions), run by the execution plan as machine code, numpy or JAX, in every algebra.

    constrained_forward_dynamics  qdd (..., nv) with J qdd + dJ/dt qd = -k e - b e'
    constraint_forces             lambda (..., m): the forces that hold the constraints
    constraint_residual           e (..., m): how far q is from satisfying them
    constraint_jacobian           J (..., m, nv): e' = J qd

plus ``project`` (a configuration that satisfies them: Gauss-Newton from a guess) and ``rank``
(independent rows at a configuration: an over-constrained loop has fewer than m).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from .algebra import get_algebra
from .algorithms import constraints as _algorithm
from .dynamics import FUNCTIONS
from .errors import ModelError
from .execution import plan as _plan
from .execution.plan import Function
from .model.configuration import integrate
from .model.constraints import (  # noqa: F401
    Connect, Constraint, Coupling, FixedTendon, SpatialTendon, Weld)
from .typing import AlgebraName, Array, ArrayLike

if TYPE_CHECKING:
    from .model import Model

__all__ = ["Connect", "Weld", "Coupling", "FixedTendon", "SpatialTendon",
           "constrained_forward_dynamics", "constraint_forces", "constraint_residual",
           "constraint_jacobian", "project", "rank", "labels"]


# -- kernels ----------------------------------------------------------------------------------
def _kinematic(call):
    """The algebra the constraints' kinematics run in (``"vector"``: spatial, as the DH
    frames are the model's link frames)."""
    return call.alg if call.alg is not None else get_algebra("spatial", call.xp)


def _terms(call):
    return _algorithm.constraint_terms(_kinematic(call), call.model, call["q"], call["qd"])


def _dynamics(call):
    """(qdd (nv, N), lambda (m, N))."""
    xp, model = call.xp, call.model
    qdd0 = FUNCTIONS["forward_dynamics"].kernel(call)
    if not model.constraints:
        return qdd0, xp.zeros((0,) + qdd0.shape[1:], dtype=qdd0.dtype)
    M = FUNCTIONS["mass_matrix"].kernel(call)
    e, J, gamma = _terms(call)
    k, b = _algorithm.gains(model)
    e_dot = xp.einsum("ijn,jn->in", J, call["qd"])
    soft = _algorithm.impedance_terms(xp, model, e)  # None: all hard
    spring = k[:, None] * e if soft is None else k[:, None] * soft.scale * e
    rhs = -spring - b[:, None] * e_dot - gamma
    return _algorithm.solve(xp, M, J, qdd0, rhs, soft)


def _accelerations(call):
    """(2 nv, N): qdd, then the joint forces J^T lambda of the constraints (what a simulation
    step takes: the forces' power enters its energy balance)."""
    qdd, lam = _dynamics(call)
    if not call.model.constraints:
        return call.xp.concatenate([qdd, 0 * qdd])
    J = _terms(call)[1]
    return call.xp.concatenate([qdd, call.xp.einsum("ijn,in->jn", J, lam)])


def _residual(call):
    if not call.model.constraints:
        return call.xp.zeros((0, call.N))
    call.arrays.setdefault("qd", call.xp.zeros((call.model.nv, call.N)))
    return _terms(call)[0]


def _jacobian(call):
    if not call.model.constraints:
        return call.xp.zeros((0, call.model.nv, call.N))
    call.arrays.setdefault("qd", call.xp.zeros((call.model.nv, call.N)))
    return _terms(call)[1]


def _nv(model):
    return (model.nv,)


def _m(model):
    return (model.nconstraints,)


def _check(model):
    FUNCTIONS["forward_dynamics"].check(model)


_OPTIONS = ("f_ext", "gravity")
_CFD = Function("constrained_forward_dynamics", lambda call: _dynamics(call)[0],
                ("q", "qd", "tau"), _nv, _OPTIONS, entries=True, check=_check,
                bytes_per_body=1024)
_LAMBDA = Function("constraint_forces", lambda call: _dynamics(call)[1], ("q", "qd", "tau"),
                   _m, _OPTIONS, entries=True, check=_check, bytes_per_body=1024)
#: not public: the simulation step's call (``sim.system.accelerations``)
ACCELERATIONS = Function("constrained_accelerations", _accelerations, ("q", "qd", "tau"),
                         lambda m: (2 * m.nv,), _OPTIONS, entries=True, check=_check,
                         bytes_per_body=1024)
_E = Function("constraint_residual", _residual, ("q",), _m, kinematic=True)
_JC = Function("constraint_jacobian", _jacobian, ("q",), lambda m: (m.nconstraints, m.nv),
               kinematic=True, many_outputs=True)


# -- the public functions ---------------------------------------------------------------------
@_plan.public(_CFD)
def constrained_forward_dynamics(model: Model, q: ArrayLike, qd: ArrayLike, tau: ArrayLike,
                                 f_ext: Optional[ArrayLike] = None,
                                 gravity: Optional[ArrayLike] = None,
                                 algebra: AlgebraName = "spatial") -> Array:
    """Joint accelerations under the joint forces ``tau`` and the model's equality constraints
    (``model.constraints``): the KKT system by its Schur complement (the unconstrained
    accelerations by the articulated-body algorithm, then m constraint forces), stabilised as
    MuJoCo's ``solref`` (module ``screwdyn.algorithms.constraints``). Equals
    ``forward_dynamics`` for a model without constraints.

    Args:
        model: the robot, with ``constraints`` (``Model.with_constraints``, ``load_mjcf``).
        q: configuration (..., nq); qd: joint velocities (..., nv); tau: joint forces
            (..., nv) (N m, N).
        f_ext: external wrenches (..., nlinks, 6), [force; torque about the link origin] in
            each link's frame. Default none.
        gravity: gravity (..., 3), world frame (m/s^2); default ``model.gravity``.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.

    Returns:
        qdd (..., nv) (rad/s^2, m/s^2) such that J qdd + dJ/dt qd = -k e - b de/dt for every
        constraint row (e = 0 and de/dt = 0: the constraint's acceleration is zero).

    Example:
        ```python
        import numpy as np
        import screwdyn as sd
        from screwdyn.constraints import Coupling

        panda = sd.robots.load("panda").with_constraints(
            Coupling("panda_finger_joint2", "panda_finger_joint1"))   # the fingers move as one
        qdd = sd.constrained_forward_dynamics(panda, panda.neutral, np.zeros(9), np.zeros(9))
        ```
    """
    return _plan.run(_CFD, model, algebra, (q, qd, tau), (f_ext, gravity))


@_plan.public(_LAMBDA)
def constraint_forces(model: Model, q: ArrayLike, qd: ArrayLike, tau: ArrayLike,
                      f_ext: Optional[ArrayLike] = None, gravity: Optional[ArrayLike] = None,
                      algebra: AlgebraName = "spatial") -> Array:
    """The constraint forces lambda (..., m) of ``constrained_forward_dynamics`` at the same
    arguments, one per constraint row (``labels``): ``Connect`` and ``Weld``: the force (N)
    and torque (N m), world axes, that link b exerts on link a (a on b: the opposite);
    ``Coupling``: the generalised force (N or N m) along the target joint or tendon. The joint
    forces they make are J^T lambda (``constraint_jacobian``). Redundant rows (an
    over-constrained loop) share their force by least squares."""
    return _plan.run(_LAMBDA, model, algebra, (q, qd, tau), (f_ext, gravity))


@_plan.public(_E)
def constraint_residual(model: Model, q: ArrayLike, algebra: AlgebraName = "spatial") -> Array:
    """e (..., m): each constraint row's violation at q (``labels``): ``Connect``: p_a - p_b
    (m, world axes); ``Weld``: then sin(angle) * axis of the orientation error (world axes);
    ``Coupling``: y - y0 - polynomial(x - x0) (rad or m). Zero where q closes every loop."""
    return _plan.run(_E, model, _plan.kinematic_algebra(algebra), (q,))


@_plan.public(_JC)
def constraint_jacobian(model: Model, q: ArrayLike, algebra: AlgebraName = "spatial") -> Array:
    """J (..., m, nv): the rate of the residual per unit joint velocity, de/dt = J qd (rows as
    ``constraint_residual``; the orientation rows: angular velocity of a less b, world
    axes)."""
    return _plan.run(_JC, model, _plan.kinematic_algebra(algebra), (q,))


def labels(model: Model) -> list:
    """One name per constraint row, e.g. ``"loop.x"``, ``"loop.rx"``, ``"fingers"``."""
    out = []
    for i, c in enumerate(model.constraints):
        name = c.name or f"{type(c).__name__.lower()}{i}"
        if c.rows == 1:
            out.append(name)
        else:
            out += [f"{name}.{axis}" for axis in ("x", "y", "z", "rx", "ry", "rz")[:c.rows]]
    return out


def rank(model: Model, q: ArrayLike, tol: float = 1e-9) -> int:
    """The number of independent constraint rows at q (nq,): ``model.nconstraints`` unless
    the constraints are redundant there (an over-constrained loop: a planar four-bar closed by
    a 3-D ``Connect`` has rank 2 of 3)."""
    J = np.asarray(constraint_jacobian(model, q))
    if J.ndim != 2:
        raise ValueError(f"rank takes one configuration (nq,) = ({model.nq},), got shape "
                         f"{np.shape(q)}")
    if not J.size:
        return 0
    s = np.linalg.svd(J, compute_uv=False)
    return int(np.sum(s > tol * max(1.0, s[0])))


def project(model: Model, q: ArrayLike, tol: float = 1e-12, iterations: int = 50,
            fixed: tuple = ()) -> Array:
    """A configuration (nq,) near q (nq,) that satisfies the model's constraints: Gauss-Newton
    steps q <- q (+) -s J^+ e (least squares, so redundant rows are fine; s = 1, 1/2, ...: the
    first that reduces |e|), the joints in
    ``fixed`` (names) held where q has them (e.g. the crank of a four-bar: the rest follows).

    Raises ``ModelError`` when no configuration near q closes the loops (the residual stops
    decreasing above ``tol`` m or rad), naming the worst row."""
    q = np.array(q, dtype=float)
    if q.shape != (model.nq,):
        raise ValueError(f"project takes one configuration (nq,) = ({model.nq},), got shape "
                         f"{q.shape}")
    if not model.constraints:
        return q
    free = np.ones(model.nv, bool)
    for name in fixed:
        if name not in model.joint_names:
            raise ModelError(f"project: no moving joint named {name!r} in model "
                             f"{model.name!r}")
        free[model.v_slices[model.joint_names.index(name)]] = False
    names = labels(model)
    e = np.asarray(constraint_residual(model, q))
    for _ in range(iterations):
        if np.max(np.abs(e)) <= tol:
            return q
        J = np.asarray(constraint_jacobian(model, q))[:, free]
        step = np.zeros(model.nv)
        step[free] = -np.linalg.lstsq(J, e, rcond=None)[0]
        for _ in range(20):  # backtracking: the full step, or the largest half that helps
            q_new = np.asarray(integrate(model, q, step))
            e_new = np.asarray(constraint_residual(model, q_new))
            if np.linalg.norm(e_new) < np.linalg.norm(e):
                break
            step = step / 2
        else:
            break
        q, e = q_new, e_new
    if np.max(np.abs(e)) <= max(tol, 1e-9):
        return q
    worst = int(np.argmax(np.abs(e)))
    raise ModelError(f"project: no configuration near q satisfies the constraints: row "
                     f"{names[worst]!r} stays at {e[worst]:.3g} (m or rad)")
