"""Tracing: run screwdyn's recursions, unchanged, on symbolic scalars to get a ``graph.Program``.

``SymArray`` is an array whose elements are ``graph.Node`` scalars (or Python floats, for values
that are constant): it has numpy's shape semantics (indexing, reshape, broadcasting) because it
is a numpy object array underneath, and ``xp`` below is the array namespace that the recursions
receive in place of ``numpy`` or ``jax.numpy`` (``stack``, ``concatenate``, ``sin``, ``where``,
``einsum``, ...). SymArray also takes part in numpy's dispatch (``__array_ufunc__``,
``__array_function__``), so code that calls ``np.concatenate`` or ``np.sin`` on a traced array
traces too. Model constants stay numpy arrays and floats, so the algebras' entries layer folds
them and drops their exact zeros as it does on every path (``algebra.entries``).

A trace uses the internal layout of every path: components first, one trailing batch axis, here
of length 1 (a state). ``trace(fn, inputs)`` builds the program::

    program = trace(lambda q: some_recursion(alg, model, q), {"q": model.nq})

Python control flow on traced values (``if x > 0``) raises ``graph.DataDependentError``: the
straight-line program needs ``xp.where``.
"""
import functools
import math

import numpy as np

from .graph import Graph, Node, Program, _ieee

_UNARY = {"negative": "neg", "sin": "sin", "cos": "cos", "tan": "tan", "exp": "exp",
          "log": "log", "sqrt": "sqrt", "absolute": "fabs", "fabs": "fabs", "floor": "floor",
          "isfinite": "isfinite", "isnan": "isnan", "logical_not": "not", "invert": "not"}
_BINARY = {"add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "div",
           "divide": "div", "power": "pow", "arctan2": "atan2", "maximum": "max",
           "minimum": "min", "fmax": "max", "fmin": "min", "less": "lt", "less_equal": "le",
           "greater": "gt", "greater_equal": "ge", "equal": "eq", "not_equal": "ne",
           "logical_and": "and", "logical_or": "or", "bitwise_and": "and", "bitwise_or": "or"}
_PY_COMPARE = {"lt": float.__lt__, "le": float.__le__, "gt": float.__gt__, "ge": float.__ge__,
               "eq": float.__eq__, "ne": float.__ne__}


def _graph_of(*xs):
    for x in xs:
        if type(x) is Node:
            return x.g
    return None


def _scalar(op, *xs):
    """``op`` on scalar elements (Nodes, floats, bools): a Node, or a float/bool if constant."""
    g = _graph_of(*xs)
    if g is not None:
        return g.apply(op, *xs)
    if op in ("and", "or", "not"):
        b = [bool(x) for x in xs]
        return (b[0] and b[1]) if op == "and" else (b[0] or b[1]) if op == "or" else not b[0]
    if op in _PY_COMPARE:
        return _PY_COMPARE[op](float(xs[0]), float(xs[1]))
    if op == "isfinite":
        return math.isfinite(xs[0])
    if op == "isnan":
        return math.isnan(xs[0])
    if op == "select":
        return xs[1] if xs[0] else xs[2]
    if op == "to_float":
        return float(xs[0])
    return _ieee(op, *(float(x) for x in xs))


@functools.lru_cache(maxsize=None)
def _elementwise(op, nin):
    return np.frompyfunc(functools.partial(_scalar, op), nin, 1)


def _objects(x):
    """An object ndarray for a SymArray, numpy array, number or nested list."""
    if type(x) is SymArray:
        return x.a
    if isinstance(x, np.ndarray):
        return x.astype(object) if x.dtype != object else x
    if isinstance(x, (list, tuple)):
        return _stack_objects([_objects(e) for e in x], 0)
    out = np.empty((), dtype=object)
    out[()] = x.item() if isinstance(x, np.generic) else x
    return out


def _stack_objects(arrays, axis):
    shape = np.broadcast_shapes(*(a.shape for a in arrays)) if arrays else ()
    return np.stack([np.broadcast_to(a, shape) for a in arrays], axis=axis) if arrays else \
        np.empty((0,), dtype=object)


def _wrap(a):
    if not isinstance(a, np.ndarray):
        out = np.empty((), dtype=object)
        out[()] = a
        a = out
    elif a.dtype != object:
        a = a.astype(object)
    return SymArray(a)


def apply(op, *xs):
    """``op`` (a ``graph.OPS`` name) elementwise over broadcast operands."""
    arrays = [_objects(x) for x in xs]
    # constants folded here follow IEEE arithmetic silently, as the compiled program does (a
    # massless model's centre of mass is 0 / 0 = nan, not a RuntimeWarning while tracing)
    with np.errstate(all="ignore"):
        return _wrap(_elementwise(op, len(xs))(*arrays))


_ARITH = {"add", "sub", "mul", "div"}


def _arith(op, x, y):
    """add, sub, mul, div of a SymArray and an operand: one element without numpy when both
    are single elements (the entries of the algebras: the hot path of tracing)."""
    ex = x.e if type(x) is SymArray else x if type(x) is float else None
    ey = y.e if type(y) is SymArray else y if type(y) is float else None
    if ex is not None and ey is not None:
        g = ex.g if type(ex) is Node else ey.g if type(ey) is Node else None
        if g is not None:
            return SymArray(None, g.arith(op, ex, ey))
    return apply(op, x, y)


def _defers(y):
    """True for operands that opt out of numpy's operators (``__array_ufunc__ = None``: the
    entries layer's ZERO and Entries), whose reflected methods then handle the operation."""
    return getattr(type(y), "__array_ufunc__", 0) is None


def is_traced(x):
    return type(x) is SymArray or type(x) is Node


class SymArray:
    """An array of traced scalars (see the module docstring). ``e``: the element of an array of
    shape (1,) held without an ndarray (the entries of the algebras: the hot path)."""

    __slots__ = ("_a", "e")

    def __init__(self, a, e=None):
        if a is not None and e is None and a.shape == (1,) and type(a[0]) is Node:
            e = a[0]
        self._a, self.e = a, e

    @property
    def a(self):
        if self._a is None:
            a = np.empty((1,), dtype=object)
            a[0] = self.e
            self._a = a
        return self._a

    # -- array attributes ----------------------------------------------------------------
    @property
    def shape(self):
        return (1,) if self.e is not None else self._a.shape

    @property
    def ndim(self):
        return 1 if self.e is not None else self._a.ndim

    @property
    def size(self):
        return 1 if self.e is not None else self._a.size

    @property
    def dtype(self):
        for e in self.a.flat:
            if isinstance(e, (bool, np.bool_)) or (type(e) is Node and e.g.kind(e.i) == "b"):
                return np.dtype(bool)
            return np.dtype(np.float64)
        return np.dtype(np.float64)

    @property
    def T(self):
        return SymArray(self.a.T)

    def __len__(self):
        return len(self.a)

    def __iter__(self):
        return (SymArray(row) if isinstance(row, np.ndarray) else _wrap(row) for row in self.a)

    def __getitem__(self, index):
        if type(index) is SymArray:
            raise TypeError("indexing with a traced array is not supported; use xp.where")
        return _wrap(self.a[index])

    def __repr__(self):
        return f"SymArray(shape={self.shape})"

    def __bool__(self):
        if self.size == 1:
            return bool(self.a.reshape(-1)[0])
        raise ValueError("the truth value of a SymArray with more than one element is ambiguous")

    def item(self):
        return self.a.reshape(-1)[0] if self.size == 1 else self.a.item()

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return SymArray(self.a.reshape(shape))

    def transpose(self, *axes):
        return SymArray(self.a.transpose(*axes))

    def swapaxes(self, a, b):
        return SymArray(self.a.swapaxes(a, b))

    def astype(self, dtype, copy=True):
        if np.dtype(dtype).kind == "f" and self.dtype == bool:
            return apply("to_float", self)
        if np.dtype(dtype).kind == "f":
            return self
        if np.dtype(dtype) == bool and self.dtype == bool:
            return self
        raise TypeError(f"cannot convert a traced array to {np.dtype(dtype)}")

    def copy(self):
        return SymArray(self.a.copy())

    def sum(self, axis=None, keepdims=False, dtype=None):
        return sum_(self, axis=axis, keepdims=keepdims)

    def all(self, axis=None, keepdims=False):
        return all_(self, axis=axis, keepdims=keepdims)

    def any(self, axis=None, keepdims=False):
        return any_(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return _reduce("max", self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        return _reduce("min", self, axis, keepdims)

    # -- arithmetic ----------------------------------------------------------------------
    def __add__(self, y):
        return NotImplemented if _defers(y) else _arith("add", self, y)

    def __radd__(self, y):
        return NotImplemented if _defers(y) else _arith("add", y, self)

    def __sub__(self, y):
        return NotImplemented if _defers(y) else _arith("sub", self, y)

    def __rsub__(self, y):
        return NotImplemented if _defers(y) else _arith("sub", y, self)

    def __mul__(self, y):
        return NotImplemented if _defers(y) else _arith("mul", self, y)

    def __rmul__(self, y):
        return NotImplemented if _defers(y) else _arith("mul", y, self)

    def __truediv__(self, y):
        return NotImplemented if _defers(y) else _arith("div", self, y)

    def __rtruediv__(self, y):
        return NotImplemented if _defers(y) else _arith("div", y, self)

    def __pow__(self, y):
        return NotImplemented if _defers(y) else apply("pow", self, y)

    def __rpow__(self, y):
        return NotImplemented if _defers(y) else apply("pow", y, self)

    def __neg__(self):
        if self.e is not None:
            return SymArray(None, self.e.g.apply("neg", self.e))
        return apply("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return apply("fabs", self)

    def __matmul__(self, y):
        return _wrap(np.matmul(self.a, _objects(y)))

    def __rmatmul__(self, y):
        return _wrap(np.matmul(_objects(y), self.a))

    def __lt__(self, y):
        return apply("lt", self, y)

    def __le__(self, y):
        return apply("le", self, y)

    def __gt__(self, y):
        return apply("gt", self, y)

    def __ge__(self, y):
        return apply("ge", self, y)

    def __eq__(self, y):
        return apply("eq", self, y)

    def __ne__(self, y):
        return apply("ne", self, y)

    __hash__ = None

    def __and__(self, y):
        return apply("and", self, y)

    __rand__ = __and__

    def __or__(self, y):
        return apply("or", self, y)

    __ror__ = __or__

    def __invert__(self):
        return apply("not", self)

    # -- numpy's dispatch: np.sin(s), np.concatenate([s, ...]) -----------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and not kwargs:
            if ufunc.__name__ in _UNARY and len(inputs) == 1:
                return apply(_UNARY[ufunc.__name__], inputs[0])
            if ufunc.__name__ in _BINARY and len(inputs) == 2:
                return apply(_BINARY[ufunc.__name__], *inputs)
            if ufunc.__name__ == "square":
                return apply("mul", inputs[0], inputs[0])
            if ufunc.__name__ == "matmul":
                return _wrap(np.matmul(*(_objects(x) for x in inputs)))
        if method == "reduce" and ufunc.__name__ in ("add", "logical_and", "logical_or",
                                                     "maximum", "minimum"):
            op = {"add": "add", "logical_and": "and", "logical_or": "or", "maximum": "max",
                  "minimum": "min"}[ufunc.__name__]
            return _reduce(op, inputs[0], kwargs.get("axis", 0), kwargs.get("keepdims", False))
        return NotImplemented

    def __array_namespace__(self, api_version=None):
        return xp

    def __array_function__(self, func, types, args, kwargs):
        ours = getattr(xp, func.__name__, None)
        if ours is None or not callable(ours):
            return NotImplemented
        return ours(*args, **kwargs)


def _reduce(op, x, axis, keepdims):
    a = _objects(x)
    axes = range(a.ndim) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    axes = sorted({ax % a.ndim for ax in axes}, reverse=True)
    for ax in axes:
        parts = [np.take(a, k, axis=ax) for k in range(a.shape[ax])]
        if not parts:
            neutral = {"add": 0.0, "and": True, "or": False}.get(op)
            if neutral is None:
                raise ValueError(f"zero-size reduction ({op})")
            shape = a.shape[:ax] + a.shape[ax + 1:]
            a = np.full(shape, neutral, dtype=object)
        else:
            acc = parts[0]
            for p in parts[1:]:
                acc = _elementwise(op, 2)(acc, p)
            a = np.asarray(acc, dtype=object) if not isinstance(acc, np.ndarray) else acc
        if keepdims:
            a = np.expand_dims(a, ax)
    return _wrap(a)


def sum_(x, axis=None, keepdims=False, dtype=None):
    return _reduce("add", x, axis, keepdims)


def all_(x, axis=None, keepdims=False):
    return _reduce("and", x, axis, keepdims)


def any_(x, axis=None, keepdims=False):
    return _reduce("or", x, axis, keepdims)


class _Linalg:
    """Small dense linear algebra on traced matrices: LU with partial pivoting, the pivot picked
    by comparisons (``select`` nodes), as LAPACK picks it (largest magnitude, first on ties)."""

    @classmethod
    def solve(cls, A, B):
        """A^-1 B for A (..., n, n) and B (..., n) or (..., n, k), numpy's conventions."""
        A, B = _objects(A), _objects(B)
        vector = B.ndim == A.ndim - 1
        if vector:
            B = B[..., None]
        batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        if batch:
            A = np.broadcast_to(A, batch + A.shape[-2:])
            B = np.broadcast_to(B, batch + B.shape[-2:])
            out = np.empty(batch + B.shape[-2:], dtype=object)
            for index in np.ndindex(*batch):
                out[index] = cls.solve(A[index], B[index]).a
            return _wrap(out[..., 0] if vector else out)
        n = A.shape[0]
        M = [[A[i, j] for j in range(n)] + [B[i, k] for k in range(B.shape[1])]
             for i in range(n)]
        for col in range(n):
            for row in range(col + 1, n):  # bring the largest |entry| of the column up
                swap = _scalar("gt", _scalar("fabs", M[row][col]), _scalar("fabs", M[col][col]))
                for j in range(len(M[col])):
                    top, other = M[col][j], M[row][j]
                    M[col][j] = _scalar("select", swap, other, top)
                    M[row][j] = _scalar("select", swap, top, other)
            for row in range(col + 1, n):
                factor = _scalar("div", M[row][col], M[col][col])
                for j in range(col + 1, len(M[row])):
                    M[row][j] = _scalar("sub", M[row][j], _scalar("mul", factor, M[col][j]))
        X = [[None] * (len(M[0]) - n) for _ in range(n)]
        for k in range(len(M[0]) - n):
            for i in reversed(range(n)):
                acc = M[i][n + k]
                for j in range(i + 1, n):
                    acc = _scalar("sub", acc, _scalar("mul", M[i][j], X[j][k]))
                X[i][k] = _scalar("div", acc, M[i][i])
        out = np.empty((n, len(X[0])), dtype=object)
        for i in range(n):
            for k in range(len(X[0])):
                out[i, k] = X[i][k]
        return _wrap(out[:, 0] if vector else out)

    @classmethod
    def cholesky(cls, A):
        """L (..., n, n) lower triangular with L L^T = A for a symmetric positive definite A
        (..., n, n), numpy's convention (no pivoting, no comparisons: n^3 / 6 products)."""
        A = _objects(A)
        batch = A.shape[:-2]
        if batch:
            out = np.empty(A.shape, dtype=object)
            for index in np.ndindex(*batch):
                out[index] = cls.cholesky(A[index]).a
            return _wrap(out)
        n = A.shape[0]
        L = np.empty((n, n), dtype=object)
        for j in range(n):
            acc = A[j, j]
            for k in range(j):
                acc = _scalar("sub", acc, _scalar("mul", L[j, k], L[j, k]))
            L[j, j] = _scalar("sqrt", acc)
            for i in range(j + 1, n):
                acc = A[i, j]
                for k in range(j):
                    acc = _scalar("sub", acc, _scalar("mul", L[i, k], L[j, k]))
                L[i, j] = _scalar("div", acc, L[j, j])
            for i in range(j):
                L[i, j] = 0.0
        return _wrap(L)

    @classmethod
    def inv(cls, A):
        A = _objects(A)
        return cls.solve(A, np.eye(A.shape[0]))


def _flattened(x, what):
    """(flat, pack, unpack) for ``x``, an array or a tuple of arrays (SymArray, numpy, nested
    lists of scalars) of floats or booleans: ``flat``, its scalars as floats (booleans carried
    as 1.0 / 0.0); ``pack(tree)``, the flat floats of a tree of the same structure and shapes
    (``what`` names the caller in the error otherwise); ``unpack(flat)``, the tree back."""
    single = not isinstance(x, tuple)
    parts = [_objects(e) for e in ((x,) if single else x)]
    shapes = [a.shape for a in parts]
    flat = [e for a in parts for e in a.reshape(-1)]
    # boolean scalars (flags) are carried as 1.0 / 0.0 and compared back to 0 in the body
    flags = [(type(e) is Node and e.g.kind(e.i) == "b") or isinstance(e, (bool, np.bool_))
             for e in flat]

    def pack(tree):
        arrays = [_objects(e) for e in ((tree,) if single else tree)]
        if [a.shape for a in arrays] != shapes:
            raise ValueError(f"{what}: the body returned shapes {[a.shape for a in arrays]} "
                             f"for a carry of shapes {shapes}")
        out = [e for a in arrays for e in a.reshape(-1)]
        return [_scalar("to_float", e) if flag else e for e, flag in zip(out, flags)]

    def unpack(flat):
        flat = [_scalar("ne", e, 0.0) if flag else e for e, flag in zip(flat, flags)]
        out, k = [], 0
        for shape in shapes:
            size = int(np.prod(shape, dtype=int))
            out.append(_wrap(_object_array(flat[k:k + size]).reshape(shape)))
            k += size
        return out[0] if single else tuple(out)

    return [_scalar("to_float", e) if flag else e for e, flag in zip(flat, flags)], pack, unpack


def fori_loop(n, body, x):
    """``x`` after ``x = body(None, x)`` n times, as one loop of the program (``Graph.loop``):
    the body is traced once, so the program grows by one body, not n (what
    ``jax.lax.fori_loop`` is to JAX). ``x``: an array (SymArray, numpy, nested lists of
    scalars) or a tuple of arrays, of floats or booleans (carried as 1.0 / 0.0); ``body``
    returns the same structure and shapes. The body
    gets no iteration index (None: a body that needs one is unrolled by its caller), and reads
    anything else it needs from its closure (those values are computed once, before it)."""
    flat, pack, unpack = _flattened(x, "fori_loop")
    g = _graph_of(*flat)
    while g is None and n > 0:  # nothing traced yet: iterations in Python until a value is
        flat, n = pack(body(None, unpack(flat))), n - 1
        g = _graph_of(*flat)
    if g is None or n <= 0:
        return unpack(flat)
    return unpack(g.loop(n, lambda carries: pack(body(None, unpack(carries))), flat))


def when(condition, body, x):
    """``body(x)`` where the scalar boolean ``condition`` holds, else ``x``, as one when of the
    program (``Graph.when``): compiled code runs the body only where the condition holds (in a
    vector of states, where it holds for any). ``x`` as ``fori_loop``'s; the body returns the
    same structure and shapes and reads anything else from its closure."""
    c = _objects(condition)
    if c.size != 1:
        raise ValueError(f"when: the condition is one scalar, got shape {c.shape}")
    c = c.reshape(-1)[0]
    flat, pack, unpack = _flattened(x, "when")
    g = _graph_of(c, *flat)
    if g is None:  # nothing traced: Python decides
        return body(x) if c else x
    return unpack(g.when(c, lambda given: pack(body(unpack(given))), flat))


def map_columns(f, columns):
    """``[f(column) for column in columns]`` as one map of the program (``Graph.map``): ``f``
    traced once, on one column, whatever the number of columns, and compiled to run several
    columns in the lanes of vector registers. ``columns``: lists of K scalars each (one-state
    SymArrays of shape (1,), floats, or anything ``float`` takes, such as an exact zero
    ``ZERO``); ``f`` takes a list of K such scalars and returns a list of them. Returns, per
    column, f's list (SymArrays of shape (1,) where traced)."""
    def scalar(e):
        if type(e) is SymArray or isinstance(e, np.ndarray):
            a = _objects(e)
            if a.size != 1:
                raise ValueError(f"map_columns: a column's values are scalars, got shape "
                                 f"{a.shape}")
            e = a.reshape(-1)[0]
        return e if type(e) is Node else float(e)

    def entry(x):
        return _wrap(_object_array([x])) if type(x) is Node else x

    flat = [[scalar(e) for e in column] for column in columns]
    g = _graph_of(*(x for column in flat for x in column))
    if g is None or len(flat) < 2:  # constant columns, or one: f applied as it is
        return [list(f(list(column))) for column in columns]
    results = g.map(lambda items: [scalar(e) for e in f([entry(x) for x in items])], flat)
    return [[entry(x) for x in column] for column in results]


def _object_array(items):
    """A 1-D object array of ``items`` (Nodes and floats, never unpacked by numpy)."""
    out = np.empty((len(items),), dtype=object)
    out[:] = items
    return out


class _Namespace:
    """The array namespace of traced programs (what ``numpy`` is to the numpy path)."""

    linalg = _Linalg()
    traced = True  # arrays of this namespace are symbolic (see _backend.as_float_array)
    float64, float32, floating, bool_, int64 = np.float64, np.float32, np.floating, np.bool_, \
        np.int64
    complexfloating = np.complexfloating
    pi, inf, nan, newaxis = np.pi, np.inf, np.nan, None
    issubdtype = staticmethod(np.issubdtype)
    ndarray = SymArray

    def __repr__(self):
        return "screwdyn.execution.trace.xp"

    fori_loop = staticmethod(fori_loop)
    when = staticmethod(when)
    map_columns = staticmethod(map_columns)

    @staticmethod
    def asarray(x, dtype=None):
        if type(x) is SymArray:
            return x if dtype is None else x.astype(dtype)
        if isinstance(x, (list, tuple)) and any(is_traced(e) for e in _flat(x)):
            return _wrap(_objects(x))
        return np.asarray(x, dtype=dtype)

    array = asarray

    @staticmethod
    def stack(arrays, axis=0):
        return _wrap(_stack_objects([_objects(a) for a in arrays], axis))

    @staticmethod
    def concatenate(arrays, axis=0):
        return _wrap(np.concatenate([_objects(a) for a in arrays], axis=axis))

    @staticmethod
    def broadcast_to(x, shape):
        return _wrap(np.broadcast_to(_objects(x), shape))

    @staticmethod
    def broadcast_arrays(*xs):
        return [_wrap(a) for a in np.broadcast_arrays(*(_objects(x) for x in xs))]

    @staticmethod
    def moveaxis(x, source, destination):
        return _wrap(np.moveaxis(_objects(x), source, destination))

    @staticmethod
    def reshape(x, shape):
        return _wrap(_objects(x).reshape(shape))

    @staticmethod
    def transpose(x, axes=None):
        return _wrap(np.transpose(_objects(x), axes))

    @staticmethod
    def expand_dims(x, axis):
        return _wrap(np.expand_dims(_objects(x), axis))

    @staticmethod
    def squeeze(x, axis=None):
        return _wrap(np.squeeze(_objects(x), axis))

    @staticmethod
    def take(x, indices, axis=None):
        return _wrap(np.take(_objects(x), indices, axis=axis))

    @staticmethod
    def zeros(shape, dtype=None):
        return np.zeros(shape, dtype=bool if dtype is bool else np.float64)

    @staticmethod
    def ones(shape, dtype=None):
        return np.ones(shape, dtype=bool if dtype is bool else np.float64)

    @staticmethod
    def full(shape, value, dtype=None):
        if is_traced(value):
            return _wrap(np.broadcast_to(_objects(value), shape).copy())
        return np.full(shape, value, dtype=bool if dtype is bool else np.float64)

    @staticmethod
    def eye(n, dtype=None):
        return np.eye(n)

    @staticmethod
    def zeros_like(x, dtype=None):
        return _Namespace.zeros(np.shape(_objects(x)), dtype)

    @staticmethod
    def ones_like(x, dtype=None):
        return _Namespace.ones(np.shape(_objects(x)), dtype)

    @staticmethod
    def result_type(*xs):
        return np.dtype(np.float64)

    @staticmethod
    def shape(x):
        return np.shape(_objects(x))

    @staticmethod
    def einsum(subscripts, *operands):
        return _wrap(np.einsum(subscripts, *(_objects(x) for x in operands)))

    @staticmethod
    def cross(a, b, axis=-1):
        a, b = np.moveaxis(_objects(a), axis, -1), np.moveaxis(_objects(b), axis, -1)
        c = [a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
             a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
             a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]]
        return _wrap(np.moveaxis(_stack_objects([np.asarray(x, dtype=object) for x in c], -1),
                                 -1, axis))

    @staticmethod
    def where(cond, a, b):
        return apply("select", cond, a, b)

    @staticmethod
    def clip(x, low, high):
        return apply("min", apply("max", x, low), high)

    @staticmethod
    def dot(a, b):
        return _wrap(np.dot(_objects(a), _objects(b)))

    @staticmethod
    def matmul(a, b):
        return _wrap(np.matmul(_objects(a), _objects(b)))

    sum = staticmethod(sum_)
    all = staticmethod(all_)
    any = staticmethod(any_)

    @staticmethod
    def max(x, axis=None, keepdims=False):
        return _reduce("max", x, axis, keepdims)

    @staticmethod
    def min(x, axis=None, keepdims=False):
        return _reduce("min", x, axis, keepdims)


def _unary(op):
    return staticmethod(lambda x: apply(op, x))


def _binary(op):
    return staticmethod(lambda x, y: apply(op, x, y))


for _name, _op in _UNARY.items():
    setattr(_Namespace, _name, _unary(_op))
for _name, _op in _BINARY.items():
    setattr(_Namespace, _name, _binary(_op))


_Namespace.abs = _Namespace.absolute
_Namespace.square = staticmethod(lambda x: apply("mul", x, x))


def _any_traced(args):
    for a in args:
        if type(a) is SymArray or type(a) is Node:
            return True
        if isinstance(a, (list, tuple)) and _any_traced(a):
            return True
    return False


def _constants_stay_numpy(name, ours):
    """``ours``, or numpy's function of the same name when no argument is traced: model
    constants stay numpy arrays, whose zeros the algebras' entries layer drops."""
    theirs = getattr(np, name)

    def function(*args, **kwargs):
        if _any_traced(args) or _any_traced(kwargs.values()):
            return ours(*args, **kwargs)
        return theirs(*args, **kwargs)

    function.__name__ = name
    return staticmethod(function)


for _name in ("stack", "concatenate", "broadcast_to", "broadcast_arrays", "moveaxis", "reshape",
              "transpose", "expand_dims", "squeeze", "take", "einsum", "cross", "where", "clip",
              "dot", "matmul", "sum", "all", "any", "max", "min", *_UNARY, *_BINARY, "abs",
              "square"):
    setattr(_Namespace, _name, _constants_stay_numpy(_name, getattr(_Namespace, _name)))

#: the array namespace of traced programs
xp = _Namespace()


def _flat(x):
    if isinstance(x, (list, tuple)):
        for e in x:
            yield from _flat(e)
    else:
        yield x


def inputs(graph, shapes):
    """{name: SymArray core + (1,)} of fresh input nodes for ``shapes`` {name: core shape}: the
    scalars of one state (input node (name, flat index)), laid out as the recursions take them
    (components first, then a batch axis of length 1)."""
    out = {}
    for name, shape in shapes.items():
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        size = int(np.prod(shape, dtype=int))
        a = np.empty((size,), dtype=object)
        for k in range(size):
            a[k] = graph.input(name, k)
        out[name] = SymArray(a.reshape(shape + (1,)))
    return out


def trace(fn, shapes):
    """The ``Program`` of ``fn(**inputs)``: inputs named by ``shapes`` {name: core shape (or
    size)}, each a SymArray core + (1,); the result an array of any shape whose last axis is
    the batch (1)."""
    graph = Graph()
    result = fn(**inputs(graph, shapes))
    a = _objects(result)
    if a.ndim == 0 or a.shape[-1] != 1:
        raise ValueError(f"a traced function must return components first and a batch axis of "
                         f"length 1, got shape {a.shape}")
    a = a[..., 0]
    sizes = [(name, int(np.prod((s,) if isinstance(s, int) else s, dtype=int)))
             for name, s in shapes.items()]
    return Program(graph, sizes, [e if type(e) is Node else graph.operand(e)
                                  for e in a.reshape(-1)], a.shape)
