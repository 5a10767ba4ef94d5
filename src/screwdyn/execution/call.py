"""One call's inputs in the internal layout, and what the recursions need from them.

The public functions take ``q`` (..., nq), ``qd``, ``qdd``, ``tau`` (..., nv), ``gravity``
(..., 3) and ``f_ext`` (..., nlinks, 6) with leading batch dimensions that broadcast. ``validate``
checks them (``screwdyn.validation``: clear ``ValueError``s naming the argument and the expected
shape, the dtype policy of ``screwdyn._backend``); ``parse`` also brings them to the internal
layout of the recursions: components first, one trailing batch axis of N states (``gravity``
given once stays (3, 1)). ``Call`` holds
them with the algebra the recursion runs in and builds the algebra objects every recursion
needs (the gravity twist, the external wrenches on bodies).
"""
import numpy as np

from .. import _backend, validation
from ..algebra import link_placements

#: input name -> (core shape of one state, as a function of the model; meaning)
INPUTS = {
    "q": (lambda m: (m.nq,), "configuration, nq"),
    "qd": (lambda m: (m.nv,), "velocity, nv"),
    "qdd": (lambda m: (m.nv,), "acceleration, nv"),
    "tau": (lambda m: (m.nv,), "joint forces, nv"),
    "gravity": (lambda m: (3,), "gravity vector in the world frame"),
    "f_ext": (lambda m: (m.nlinks, 6), "one [force; torque] wrench per link, nlinks x 6"),
    # internal: a traced model's inertial parameters, an input of its native programs
    "parameters": (lambda m: (m.nbodies, 10), "inertial parameters, bodies x 10"),
}


def core_shape(model, name):
    return INPUTS[name][0](model)


def validate(model, given, xp=None):
    """(xp, {name: checked array in the public layout}, batch shape, N) for the public inputs
    ``given`` {name: value or None}: every argument through ``screwdyn.validation`` (None for a
    required one, strings, objects, complex values and wrong shapes refused naming the argument
    and the expected shape; the dtype policy of ``screwdyn._backend``); the batch shape from
    the shapes alone (nothing broadcast yet). ``xp``: the namespace (default: numpy, or
    jax.numpy if any input is a JAX array)."""
    given = validation.given(given)
    if xp is None:  # inertial parameters traced by JAX make the call a JAX call
        xp = _backend.namespace(*given.values(), model.traced_parameters)
    arrays = {name: validation.state_array(name, value, core_shape(model, name),
                                           INPUTS[name][1], xp)
              for name, value in given.items()}
    batch = validation.batch_shape({name: (a, len(core_shape(model, name)))
                                    for name, a in arrays.items()})
    return xp, arrays, batch, validation.states(batch)


def parse(model, given, xp=None):
    """(xp, {name: internal array}, batch shape, N) for the public inputs ``given`` {name: value
    or None}: checked (``validate``), broadcast to one batch, moved to components first
    (contiguous rows on numpy)."""
    xp, parsed, batch, N = validate(model, given, xp)
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
    shape, the namespace ``xp`` and the algebra ``alg`` (None for ``algebra="vector"``).

    ``model`` is the tree the recursions run on: the given model (``user_model``) itself, or for
    a coupled model (mimic joints tied to their sources) its whole tree (``model.tree``), to
    which q, qd and qdd are expanded here; ``reduce`` brings the tree's results back
    (``model.coupling``)."""

    def __init__(self, model, algebra_name, alg, xp, arrays, batch=(), N=1):
        self.user_model, self.model = model, model.tree
        self.algebra_name, self.alg, self.xp = algebra_name, alg, xp
        self.arrays, self.batch, self.N = dict(arrays), tuple(batch), N
        self.given = tuple(self.arrays)  # the inputs' names (before a coupling expands them)
        self.coupling = model.coupling
        if self.coupling is not None:
            q_index, q_scale, q_offset, G = self.coupling
            if "q" in self.arrays:
                q = self.arrays["q"]
                self.arrays["q"] = xp.stack([q[k] * s + o if s != 1.0 or o != 0.0 else q[k]
                                             for k, s, o in zip(q_index.tolist(),
                                                                q_scale.tolist(),
                                                                q_offset.tolist())])
            for name in ("qd", "qdd"):
                if name in self.arrays:
                    self.arrays[name] = _sparse_product(xp, G, self.arrays[name])

    def reduce(self, result, axes=1):
        """A tree result (tree nv, ..., N) with ``axes`` leading velocity axes brought to the
        model's v (G^T tau, G^T M G); itself when the model is not coupled."""
        if self.coupling is None:
            return result
        G = self.coupling[3]
        result = _sparse_product(self.xp, G.T, result)
        if axes == 2:
            result = self.xp.moveaxis(_sparse_product(self.xp, G.T,
                                                      self.xp.moveaxis(result, 1, 0)), 0, 1)
        return result

    def expand(self, x):
        """Rows (model nv, ...) of velocities or accelerations on the tree (G x, as the inputs
        qd and qdd are expanded); x itself when the model is not coupled."""
        return x if self.coupling is None else _sparse_product(self.xp, self.coupling[3], x)

    def __getitem__(self, name):
        return self.arrays[name]

    def gravity_twist(self):
        """a0 = -g, the base acceleration that stands for gravity, as an algebra twist."""
        g = self.arrays.get("gravity")
        g = np.array(self.model.gravity)[:, None] if g is None else g
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


def _sparse_product(xp, A, x):
    """A x for a constant matrix A (m, n) and rows x (n, ...): each row the sum of its nonzero
    terms only (a coupling's G is mostly zeros and ones), the same operations on every path."""
    rows = []
    for a in np.asarray(A, dtype=float):
        terms = [x[k] if c == 1.0 else c * x[k] for k, c in enumerate(a.tolist()) if c]
        row = terms[0] if terms else 0.0 * x[0]
        for t in terms[1:]:
            row = row + t
        rows.append(row)
    return xp.stack(rows) if rows else x[:0]


def propagate_non_finite(xp, inputs, result):
    """``result`` (..., N) with every finite entry of a state made NaN when one of that state's
    ``inputs`` (arrays (..., N) or (..., 1) in the internal layout) is NaN or infinite; other
    entries (inf, NaN) as computed. The recursions leave out products with the model's exact
    zeros, which can also leave out a non-finite input (a NaN first joint angle of a robot whose
    first axis is vertical: gravity along that axis never meets its sine and cosine), so that
    without this rule a state with a NaN could give finite results. The same rule on every path
    (numpy, JAX and the native programs, ``native.trace_program``)."""
    ok = None
    for a in inputs:
        b = xp.all(xp.isfinite(xp.reshape(a, (-1, a.shape[-1]))), axis=0)
        ok = b if ok is None else ok & b
    if ok is None:
        return result
    return xp.where(~ok & xp.isfinite(result), xp.nan, result)
