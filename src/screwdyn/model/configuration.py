"""The configuration manifold of a model: each joint's own ``integrate``, ``difference``,
``dexpinv`` and ``normalize`` (``model/joints.py``), applied joint by joint over q (..., nq) and
v (..., nv) with leading batch dimensions that broadcast, on numpy or JAX.

    integrate(model, q, v)     q (+) v, as ``pinocchio.integrate``: q + v for 1-DoF joints, the
                               SE(3) exponential of the body twist for a free flyer, ...
    difference(model, q0, q1)  q1 (-) q0, as ``pinocchio.difference`` (integrate's inverse)
"""
from typing import TYPE_CHECKING

import numpy as np

from .. import _backend

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray as Array

    from .model import Model


def integrate(model: "Model", q: "ArrayLike", v: "ArrayLike") -> "Array":
    """q (+) v (..., nq): the configuration reached from q (..., nq) by the velocity v (..., nv)
    held for one unit of time (``pinocchio.integrate``); quaternions stay unit."""
    xp, q, v = _inputs((q, "q", model.nq, "configuration, nq"),
                       (v, "v", model.nv, "velocity, nv"))
    return integrate_arrays(xp, model, q, v)


def difference(model: "Model", q0: "ArrayLike", q1: "ArrayLike") -> "Array":
    """q1 (-) q0 (..., nv): the velocity that takes q0 to q1 in one unit of time
    (``pinocchio.difference``)."""
    xp, q0, q1 = _inputs((q0, "q0", model.nq, "configuration, nq"),
                         (q1, "q1", model.nq, "configuration, nq"))
    return _joint_by_joint(xp, model, "difference", q0, q1, model.q_slices, model.q_slices)


def integrate_arrays(xp, model, q, v):
    """``integrate`` on arrays already checked (the integrators' inner loop)."""
    if all(b.joint_model.euclidean for b in model.active_bodies):
        return q + v
    return _joint_by_joint(xp, model, "integrate", q, v, model.q_slices, model.v_slices)


def dexpinv(xp, model, xi, v):
    """The rate of the exponential coordinates xi (..., nv) of a configuration near q0
    (q = integrate(q0, xi)) when the velocity is v: v on vector spaces, v + [xi, v]/2 +
    [xi, [xi, v]]/12 on Lie groups (enough for Runge-Kutta 4 to keep its order)."""
    if all(b.joint_model.euclidean for b in model.active_bodies):
        return v
    return _joint_by_joint(xp, model, "dexpinv", xi, v, model.v_slices, model.v_slices)


def normalize(xp, model, q):
    """q projected onto the manifold (unit quaternions)."""
    if all(b.joint_model.euclidean for b in model.active_bodies):
        return q
    parts = [b.joint_model.normalize(xp, q[..., s]) for b, s in
             zip(model.active_bodies, model.q_slices)]
    return xp.concatenate(parts, axis=-1)


def _joint_by_joint(xp, model, method, a, b, slices_a, slices_b):
    shape = tuple(np.broadcast_shapes(tuple(a.shape[:-1]), tuple(b.shape[:-1])))
    parts = []
    for body, sa, sb in zip(model.active_bodies, slices_a, slices_b):
        part = getattr(body.joint_model, method)(xp, a[..., sa], b[..., sb])
        parts.append(xp.broadcast_to(part, shape + tuple(part.shape[-1:])))
    if not parts:
        return xp.zeros(shape + (0,))
    return xp.concatenate(parts, axis=-1)


def _inputs(*specs):
    """(xp, arrays...) from (value, name, size, meaning) specs, each checked (``ValueError``)."""
    xp = _backend.namespace(*(spec[0] for spec in specs))
    out = []
    for value, name, size, meaning in specs:
        a = _backend.as_float_array(value, xp, name)
        _backend.check_last_dim(a, size, name, meaning)
        out.append(a)
    return (xp, *out)
