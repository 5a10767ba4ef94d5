"""Connection-point arrays between the public layout and the recursions' internal one.

Public: leading batch dimensions, components last, (..., 6) twists and wrenches, (..., 4, 4)
poses. Internal (``screwdyn.algebra``): components first, one trailing batch axis of N states.
What crosses a connection point inside an assembly is kept in exactly the form it has after a
round trip through the public layout (a contiguous (6, N) array of floats, never a model constant
folded into the algebra's entries), so that a subsystem evaluated on its own from public data, in
another process or on another machine, computes bit for bit what it computes in the assembly.
"""
import numpy as np

from .. import _backend
from ..algebra.entries import Entries, components, cut, is_constant


class Batch:
    """The batch of one call: its shape, its size N and its array namespace."""

    def __init__(self, xp, shape):
        self.xp, self.shape = xp, tuple(shape)
        self.N = int(np.prod(self.shape, dtype=int))

    def internal(self, value, core, what):
        """A public array (..., *core), e.g. a black box's measurement, in the internal layout
        (*core, N), contiguous; ValueError naming ``what`` on a wrong shape or batch."""
        xp = self.xp
        a = _backend.as_float_array(value, xp, what)
        if tuple(a.shape[a.ndim - len(core):]) != tuple(core) or a.ndim < len(core):
            raise ValueError(f"{what} must have shape (..., {', '.join(map(str, core))}), "
                             f"got shape {tuple(a.shape)}")
        if xp is not np and a.ndim == len(core):  # one value for the batch: it broadcasts
            return a.reshape(tuple(core) + (1,))
        try:
            a = xp.broadcast_to(a, self.shape + tuple(core))
        except ValueError:
            raise ValueError(f"{what}: batch shape {tuple(a.shape[:a.ndim - len(core)])} does not "
                             f"broadcast to the call's batch {self.shape}") from None
        a = xp.moveaxis(a.reshape((self.N,) + tuple(core)), 0, -1)
        return np.ascontiguousarray(a) if xp is np else a

    def public(self, a):
        """(n..., N or 1) -> (..., n...)."""
        a = self.xp.broadcast_to(a, a.shape[:-1] + (self.N,))
        return self.xp.moveaxis(a, -1, 0).reshape(self.shape + a.shape[:-1])

    def twist(self, alg, value, what):
        """The algebra twist of a public twist (..., 6); None stays None (at rest)."""
        return None if value is None else alg.twist(self.internal(value, (6,), what))

    def wrench(self, alg, value, what):
        return alg.wrench(self.internal(value, (6,), what))

    def twist_public(self, alg, V):
        """The public twist (..., 6) of an algebra twist (None: at rest, zeros)."""
        return self.public(np.zeros((6, 1)) if V is None else alg.twist_vector(V))

    def through_public(self, alg, V, kind="twist"):
        """V as it comes back from the public layout (see the module); None stays None."""
        if V is None:
            return None
        if self.xp is not np:  # JAX: computed once, into memory (``entries.cut``)
            return Entries(self.xp, [e if is_constant(e) else cut(e) for e in components(V)],
                           (6,)) if isinstance(V, Entries) else cut(V)
        vector = alg.twist_vector(V) if kind == "twist" else alg.wrench_vector(V)
        a = self.xp.broadcast_to(vector, (6, self.N))
        a = np.ascontiguousarray(a) if self.xp is np else a
        return alg.twist(a) if kind == "twist" else alg.wrench(a)
