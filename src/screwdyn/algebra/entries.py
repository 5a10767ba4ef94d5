"""Components as *entries*, shared by the three algebras.

An entry is one scalar component of an algebra object: a batch array (N,), a Python float (a
component of a model constant: a placement, a joint axis, a motion subspace, an inertia), or
``ZERO``, the exact zero of a constant. Closed-form operations written on entries do only the work
that a model's constants leave: ``ZERO`` absorbs products and vanishes from sums, and the entry
arithmetic below (``mul``, ``add``, ``sub``, ``lin``) also folds products of constants and skips
factors of +-1. So the code that runs for a joint is what one would write by hand for it: a
rotation about z behind a placement that permutes axes rotates a vector with 4 products, not 9.

``Entries`` holds a twist, a wrench or an inertia as its list of entries, so that the recursions'
own linear arithmetic (V + S qd, IA + X * Ia) keeps the zeros too and nothing is stacked into
arrays between operations: the *entries mode* of an algebra returns ``Entries`` where the plain
algebra returns arrays. Under JAX this keeps the traced graph scalar and short.
"""
import math

import numpy as np

_F = float


class _Zero:
    """The exact zero of a constant component: products with it vanish and sums skip it."""

    __slots__ = ()
    __array_ufunc__ = None  # numpy defers to the reflected methods below; JAX arrays do too

    def __mul__(self, other):
        return self

    __rmul__ = __truediv__ = __mul__

    def __add__(self, other):
        return other

    __radd__ = __rsub__ = __add__

    def __sub__(self, other):
        return -other

    def __neg__(self):
        return self

    def __float__(self):
        return 0.0

    def __repr__(self):
        return "ZERO"


ZERO = _Zero()


def is_constant(x):
    """True for a float or ZERO, False for a batch array."""
    return type(x) is _F or x is ZERO


def constant(x, tolerance=0.0):
    """A constant entry from a number: ZERO when |x| <= tolerance, else a float."""
    x = float(x)
    return ZERO if abs(x) <= tolerance else x


def value(x):
    """A number or array for an entry (0.0 for ZERO)."""
    return 0.0 if x is ZERO else x


# -- values computed once ---------------------------------------------------------------------
def cut(x):
    """x / one with one = (x == x) * 0 + 1: x in every bit (NaN and inf included), which XLA
    computes once, into memory, because it never duplicates a division into its consumers and
    cannot know that ``one`` is 1 (see ``screwdyn.execution.xla``)."""
    return x / ((x == x) * 0.0 + 1.0)


def sin_cos(xp, angle):
    """(sin, cos) of a batch of angles (``xp`` decides how: ``screwdyn.execution.xla``)."""
    return xp.sin(angle), xp.cos(angle)


def inverse_norm(xp, components):
    """1 / |components| of a batch of vectors (as entries)."""
    return 1.0 / xp.sqrt(sum(c * c for c in components))


def unit(xp, entries):
    """The entries of a vector divided by its norm (a quaternion normalised); constants stay
    constants."""
    entries = [scalar(e) for e in entries]
    if all_constant(entries):
        norm = math.sqrt(sum(value(e) ** 2 for e in entries))
        if not norm:  # a zero quaternion: NaN entries, as arrays give (0 * inf), not ZERO
            return [math.nan] * len(entries)
        inv = 1.0 / norm
    else:
        inv = inverse_norm(xp, [value(e) for e in entries])
    return [mul(e, inv) for e in entries]


# -- entry arithmetic: constants are folded, ZERO and +-1 cost nothing -------------------------
def mul(a, b):
    if a is ZERO or b is ZERO:
        return ZERO
    if type(a) is _F:
        if type(b) is _F:
            return constant(a * b)
        if a == 1.0:
            return b
        return -b if a == -1.0 else a * b
    if type(b) is _F:
        if b == 1.0:
            return a
        return -a if b == -1.0 else a * b
    return a * b


def add(a, b):
    if a is ZERO:
        return b
    if b is ZERO:
        return a
    if type(a) is _F and type(b) is _F:
        return constant(a + b)
    return a + b


def sub(a, b):
    if b is ZERO:
        return a
    if a is ZERO:
        return -b
    if type(a) is _F and type(b) is _F:
        return constant(a - b)
    return a - b


def lin(pairs):
    """sum a * b over the pairs (``mul`` and ``add`` inlined: this is the hot loop; the products
    of constants are summed apart and added once)."""
    const, acc = 0.0, None
    for a, b in pairs:
        if a is ZERO or b is ZERO:
            continue
        if type(a) is _F:
            if type(b) is _F:
                const += a * b
                continue
            t = b if a == 1.0 else (-b if a == -1.0 else a * b)
        elif type(b) is _F:
            t = a if b == 1.0 else (-a if b == -1.0 else a * b)
        else:
            t = a * b
        acc = t if acc is None else acc + t
    if acc is None:
        return constant(const)
    return acc if const == 0.0 else acc + const


def scalar(x):
    """An entry from a batch scalar (N,): a constant when it is a numpy array of length 1."""
    if isinstance(x, np.ndarray):
        return constant(x.reshape(-1)[0]) if x.size == 1 and x.ndim <= 1 else x
    if isinstance(x, (int, float, np.floating, np.integer)):
        return constant(x)
    return x


def all_constant(*entry_lists):
    return all(is_constant(x) for entries in entry_lists for x in entries)


def first_array(entry_lists):
    """The first batch array among the entries of the lists, or None."""
    for entries in entry_lists:
        for e in entries:
            if not is_constant(e):
                return e
    return None


def like(x):
    """[an array with the batch shape of Entries x whose entries are all constant], else []."""
    found = getattr(x, "like", None)
    return [] if found is None else [found]


def components(a, ncomp=1):
    """The flat list of entries of an array with ``ncomp`` leading component axes (a numpy array
    with batch length 1 gives constants), of ``Entries``, or of a sequence of entries."""
    if isinstance(a, Entries):
        return a.e
    if isinstance(a, np.ndarray):
        if a.ndim == ncomp + 1 and a.shape[-1] == 1:
            return [constant(x) for x in a.reshape(-1).tolist()]
        return list(a.reshape((-1,) + a.shape[ncomp:]))
    if isinstance(a, (list, tuple)):
        return [scalar(x) for x in a]
    n = int(np.prod(a.shape[:ncomp]))
    a = a.reshape((n,) + a.shape[ncomp:])
    return [a[k] for k in range(n)]


def stack(xp, entries, shape, *inputs):
    """The array of component shape ``shape`` from flat entries; constants broadcast to the batch.
    ``inputs`` (entry lists) give the batch when every entry is constant (a product with a zero
    inertia, say), so that a result keeps the batch axis of its operands; with no batch anywhere
    the result is a constant (batch length 1). numpy arrays stay numpy (model constants, also
    while JAX traces)."""
    if shape == () and len(entries) == 1 and not is_constant(entries[0]):
        return entries[0]  # a lone scalar: nothing to stack
    arrays = [e for e in entries if not is_constant(e)]
    if not arrays:
        found = first_array(inputs)
        if found is None:
            return np.array([value(e) for e in entries], dtype=float).reshape(shape + (1,))
        arrays = [found]
    batch = arrays[0].shape
    if any(a.shape != batch for a in arrays):
        batch = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    if all(isinstance(a, np.ndarray) for a in arrays):
        out = np.empty((len(entries),) + batch, dtype=np.result_type(*{a.dtype for a in arrays}))
        for k, e in enumerate(entries):
            out[k] = value(e)
        return out.reshape(shape + batch)
    dtype = xp.result_type(*arrays)
    return xp.stack([xp.full(batch, value(e), dtype) if is_constant(e)
                     else xp.broadcast_to(e, batch) for e in entries]).reshape(shape + batch)


# -- symmetric 6x6 matrices of entries (inertias), 36 entries row-major ---------------------------
UPPER = tuple((r, c) for r in range(6) for c in range(r, 6))
SYMMETRIC = tuple((min(r, c), max(r, c)) for r in range(6) for c in range(6))  # -> its upper twin


def sub_outer(M, U, Dinv):
    """M - sum_ab U_a Dinv_ab U_b^T for a symmetric 6x6 M (36 entries; only its upper triangle is
    read), k 6-vectors U_a and the k x k entries Dinv: the 36 entries of the symmetric result
    (the articulated-inertia update, Featherstone eq. 7.1, in every algebra's coordinates)."""
    Dinv = [[scalar(d) for d in row] for row in Dinv]
    if all_constant(M, *U, *Dinv):  # one state or constants: small matrix products
        Um = np.array([[value(e) for e in U_a] for U_a in U]).T  # (6, k)
        out = np.array([value(e) for e in M]).reshape(6, 6) - Um @ np.array(
            [[value(d) for d in row] for row in Dinv]) @ Um.T
        return [constant(x) for x in ((out + out.T) / 2).reshape(-1)]
    W = [[lin((D_ab, U_b[j]) for D_ab, U_b in zip(Dinv_a, U)) for j in range(6)]
         for Dinv_a in Dinv]
    upper = {(r, c): sub(M[6 * r + c], lin((U_a[r], W_a[c]) for U_a, W_a in zip(U, W)))
             for r, c in UPPER}
    return [upper[rc] for rc in SYMMETRIC]


class Entries:
    """A twist or wrench (component shape (6,)) or an inertia ((6, 6)) of an algebra's entries
    mode: its entries, row-major, in a list. It supports the linear arithmetic the recursions do
    on algebra objects (sums, differences, products with scalars or batch scalars (N,));
    ``array()`` or ``np.asarray`` gives the protocol's array. ``like``: an array with the batch
    shape, kept when every entry is a constant (so that results keep the batch axis)."""

    __slots__ = ("e", "cshape", "like", "xp")
    __array_ufunc__ = None  # numpy defers to the reflected operators below

    def __init__(self, xp, e, cshape, like=None):
        self.xp, self.e, self.cshape = xp, list(e), cshape
        self.like = like if like is not None and all_constant(self.e) else None

    def array(self):
        return stack(self.xp, self.e, self.cshape, like(self))

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.array(), dtype=dtype)

    def __repr__(self):
        return f"Entries{self.cshape}({self.e})"

    def _operand(self, y):
        """(entries of y, None) for an algebra object, (None, batch) for a scalar."""
        if isinstance(y, Entries):
            return y.e, y.like
        if isinstance(y, (int, float, np.floating, np.integer)):
            return None, None
        if getattr(y, "ndim", 0) <= 1:  # a batch scalar (N,)
            return None, y
        e = components(y, len(self.cshape))
        return e, first_array([e])

    def _binary(self, y, op, reflected=False):
        other, batch = self._operand(y)
        if other is None:
            y = scalar(y)
            e = [op(y, a) if reflected else op(a, y) for a in self.e]
        else:
            e = [op(b, a) if reflected else op(a, b) for a, b in zip(self.e, other)]
        return Entries(self.xp, e, self.cshape, self.like if self.like is not None else batch)

    def __add__(self, y):
        return self._binary(y, add)

    def __radd__(self, y):
        return self._binary(y, add, True)

    def __sub__(self, y):
        return self._binary(y, sub)

    def __rsub__(self, y):
        return self._binary(y, sub, True)

    def __mul__(self, y):
        if isinstance(y, Entries) or getattr(y, "ndim", 0) > 1:
            return NotImplemented  # only scalings are linear
        return self._binary(y, mul)

    __rmul__ = __mul__

    def __truediv__(self, y):
        return self._binary(1.0 / scalar(y), mul)

    def __neg__(self):
        return Entries(self.xp, [mul(-1.0, a) for a in self.e], self.cshape, self.like)


class EntriesMode:
    """Mixin that turns an algebra into its entries mode: its ``_stack`` returns ``Entries`` for
    twists, wrenches (component shape (6,)) and inertias ((6, 6)), and its ``twist``, ``wrench``
    and ``inertia`` build ``Entries``; every other result stays an array. The public functions
    use it for the recursions that only do linear arithmetic on algebra objects (RNEA, ABA,
    CRBA). ``checkpoints`` (JAX only): cut XLA's fusions at every body (``checkpoint``)."""

    CHECKPOINTS = ("inv_act_twist", "act_wrench", "inertia_act")

    def __init__(self, xp, checkpoints=False):
        super().__init__(xp)
        self.checkpoints = bool(checkpoints) and xp is not np

    def checkpoint(self, X):
        """Under JAX, make XLA compute each batch entry of X once, into memory (``cut``), on any
        backend. Without these cuts XLA's loop fusion recomputes
        every value inside each consumer, which grows as n^2 over a chain of n bodies (compile
        time and run time); with them, linearly. (For small trees the duplicated arithmetic is
        cheaper than the memory traffic: no cuts.)"""
        if not self.checkpoints or not isinstance(X, Entries):
            return X
        return Entries(self.xp, [x if is_constant(x) else cut(x) for x in X.e], X.cshape,
                       X.like)

    def inv_act_twist(self, X, V):
        return self.checkpoint(super().inv_act_twist(X, V))

    def act_wrench(self, X, F):
        return self.checkpoint(super().act_wrench(X, F))

    def inertia_act(self, X, I):
        return self.checkpoint(super().inertia_act(X, I))

    def _stack(self, entries, shape, *inputs):
        if shape == (6,) or shape == (6, 6):
            return Entries(self.xp, entries, shape, first_array(inputs))
        return super()._stack(entries, shape, *inputs)

    def twist(self, v):
        return v if isinstance(v, Entries) else Entries(self.xp, components(super().twist(v)),
                                                        (6,))

    def wrench(self, f):
        return f if isinstance(f, Entries) else Entries(self.xp, components(super().wrench(f)),
                                                        (6,))

    def twist_vector(self, V):
        return super().twist_vector(V.array() if isinstance(V, Entries) else V)

    def wrench_vector(self, F):
        return super().wrench_vector(F.array() if isinstance(F, Entries) else F)

    def inertia(self, mass, com, inertia_com):
        I = super().inertia(mass, com, inertia_com)
        return I if isinstance(I, Entries) else Entries(self.xp, components(I, 2), (6, 6))


def map_columns(xp, f, columns):
    """``[f(column) for column in columns]`` for lists of entries: where ``xp`` traces a
    program (``execution.trace.xp``), one map of it (``f`` traced once, run on several columns
    at a time in vector lanes); elsewhere a Python loop. ``f`` takes and returns lists of
    entries; traced, a column's exact zeros become 0.0 (f sees no ``ZERO``)."""
    mapped = getattr(xp, "map_columns", None)
    if mapped is None:
        return [f(column) for column in columns]
    return mapped(f, columns)
