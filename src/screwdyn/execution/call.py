"""One call's inputs in the internal layout, and what the recursions need from them.

The public functions take ``q`` (..., nq), ``qd``, ``qdd``, ``tau`` (..., nv), ``gravity``
(..., 3) and ``f_ext`` (..., nlinks, 6) with leading batch dimensions that broadcast. ``parse``
checks them (clear ``ValueError``s naming the argument and the expected shape, the dtype policy of
``screwdyn._backend``) and brings them to the internal layout of the recursions: components
first, one trailing batch axis of N states (``gravity`` given once stays (3, 1)). ``Call`` holds
them with the algebra the recursion runs in and builds the algebra objects every recursion
needs (the gravity twist, the external wrenches on bodies).
"""
import numpy as np

from .. import _backend
from ..algebra import link_placements

GRAVITY = (0.0, 0.0, -9.81)

#: input name -> (core shape of one state, as a function of the model; meaning)
INPUTS = {
    "q": (lambda m: (m.nq,), "configuration, nq"),
    "qd": (lambda m: (m.nv,), "velocity, nv"),
    "qdd": (lambda m: (m.nv,), "acceleration, nv"),
    "tau": (lambda m: (m.nv,), "joint forces, nv"),
    "gravity": (lambda m: (3,), "gravity vector in the world frame"),
    "f_ext": (lambda m: (m.nlinks, 6), "one [force; torque] wrench per link, nlinks x 6"),
}


def core_shape(model, name):
    return INPUTS[name][0](model)


def check(model, name, a):
    """ValueError unless ``a`` has shape (..., core) for input ``name``."""
    shape = core_shape(model, name)
    if a.ndim < len(shape) or tuple(a.shape[a.ndim - len(shape):]) != shape:
        raise ValueError(f"{name} must have shape (..., {', '.join(map(str, shape))}) "
                         f"({INPUTS[name][1]}), got shape {tuple(a.shape)}")


def parse(model, given, xp=None):
    """(xp, {name: internal array}, batch shape, N) for the public inputs ``given`` {name: value
    or None}: checked, converted to the backend's float dtype, broadcast to one batch, moved to
    components first (contiguous rows on numpy). ``xp``: the namespace (default: numpy, or
    jax.numpy if any input is a JAX array)."""
    given = {k: v for k, v in given.items() if v is not None}
    if xp is None:
        xp = _backend.namespace(*given.values())
    parsed, cores = {}, []
    for name, value in given.items():
        a = _backend.as_float_array(value, xp, name)
        check(model, name, a)
        parsed[name] = a
        cores.append((name, a, len(core_shape(model, name))))
    batch = _backend.broadcast_batch(cores)
    N = int(np.prod(batch, dtype=int))
    arrays = {}
    for name, a in parsed.items():
        shape = core_shape(model, name)
        if name == "gravity" and a.ndim == 1:
            arrays[name] = a[:, None]  # one gravity for the whole batch
            continue
        a = xp.broadcast_to(a, batch + shape).reshape((N,) + shape)
        a = xp.moveaxis(a, 0, -1)
        arrays[name] = np.ascontiguousarray(a) if xp is np else a  # rows contiguous
    return xp, arrays, batch, N


class Call:
    """The inputs of one call in the internal layout (``arrays``: name -> (..., N)), the batch
    shape, the namespace ``xp`` and the algebra ``alg`` (None for ``algebra="vector"``)."""

    def __init__(self, model, algebra_name, alg, xp, arrays, batch=(), N=1):
        self.model, self.algebra_name, self.alg, self.xp = model, algebra_name, alg, xp
        self.arrays, self.batch, self.N = arrays, tuple(batch), N

    def __getitem__(self, name):
        return self.arrays[name]

    def gravity_twist(self):
        """a0 = -g, the base acceleration that stands for gravity, as an algebra twist."""
        g = self.arrays.get("gravity")
        g = np.array(GRAVITY)[:, None] if g is None else g
        return self.alg.twist(self.xp.concatenate([-g, 0 * g]))

    def body_wrenches(self):
        """External link wrenches gathered on bodies, in body frames (None if none given)."""
        if "f_ext" not in self.arrays:
            return None
        alg, model = self.alg, self.model
        F = self.arrays["f_ext"]  # (nlinks, 6, N)
        out = [0.0 * alg.wrench(F[0])] * model.nbodies
        for l, (link, placement) in enumerate(zip(model.links, link_placements(alg, model))):
            if link.body >= 0:
                out[link.body] = out[link.body] + alg.act_wrench(placement, alg.wrench(F[l]))
        return out

    def vector(self, result):
        """(n..., N) -> (..., n...)"""
        return self.xp.moveaxis(result, -1, 0).reshape(self.batch + result.shape[:-1])

    matrix = vector
