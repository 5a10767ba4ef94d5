"""Featherstone's 6-D spatial algebra, in Pinocchio's layout.

Layout (components first, one trailing batch axis, see ``algebra/__init__``):
    twist   V = [v; w]   (6, N): velocity of the frame origin, angular velocity
    wrench  F = [f; n]   (6, N): force, moment about the frame origin
    pose    X = (R, p)   (3, 3, N), (3, N): the child frame's axes and origin in the parent frame
    inertia I            (6, 6, N): wrench = I twist (symmetric, as every spatial inertia is)

How it is fast. Every operation is straight-line code on *entries*, the scalar components: an entry
is either an exact Python float (a model constant, or any numpy array whose batch axis has length
1) or a batch array (N,). A product with a constant 0 is skipped and one with +-1 costs nothing, so
the code that runs for a joint is what one would write by hand for it: a revolute joint about z
behind a placement that permutes axes rotates a vector with 4 products, not 9, and a placement
offset along one axis crosses with 2 products, not 6. Poses stay as entries between operations
(``Pose``, which unpacks to the protocol's ``(R, p)`` arrays on demand), so the zeros and ones of
R = R_placement R_joint(q) survive from ``compose`` to every use. Twists, wrenches and inertias
cross the protocol as arrays; stacking and slicing them is cheap next to the arithmetic. Under JAX
the same code traces to a short graph that XLA fuses into a few loops over the batch.
"""
import math
from functools import lru_cache

import numpy as np

from . import Algebra

_F = float


# -- entry arithmetic: exact float constants are folded, 0 and +-1 are skipped --------------------
def _mul(a, b):
    if type(a) is _F:
        if a == 0.0:
            return 0.0
        if type(b) is _F:
            return a * b
        if a == 1.0:
            return b
        if a == -1.0:
            return -b
        return a * b
    if type(b) is _F:
        if b == 0.0:
            return 0.0
        if b == 1.0:
            return a
        if b == -1.0:
            return -a
    return a * b


def _add(a, b):
    if type(a) is _F and a == 0.0:
        return b
    if type(b) is _F and b == 0.0:
        return a
    return a + b


def _sub(a, b):
    if type(b) is _F and b == 0.0:
        return a
    if type(a) is _F and a == 0.0:
        return -b
    return a - b


def _lin(pairs):
    """sum a * b over the pairs (``_mul`` and ``_add`` inlined: this is the hot loop; the
    constant products are summed apart and added once)."""
    const, acc = 0.0, None
    for a, b in pairs:
        if type(a) is _F:
            if type(b) is _F:
                const += a * b
                continue
            if a == 0.0:
                continue
            t = b if a == 1.0 else (-b if a == -1.0 else a * b)
        elif type(b) is _F:
            if b == 0.0:
                continue
            t = a if b == 1.0 else (-a if b == -1.0 else a * b)
        else:
            t = a * b
        acc = t if acc is None else acc + t
    if acc is None:
        return const
    return acc if const == 0.0 else acc + const


def _rot(R, x):
    """R x for R (9 entries, row-major) and x (3 entries)."""
    return [_lin(((R[3 * i], x[0]), (R[3 * i + 1], x[1]), (R[3 * i + 2], x[2]))) for i in range(3)]


def _rot_t(R, x):
    """R^T x."""
    return [_lin(((R[i], x[0]), (R[3 + i], x[1]), (R[6 + i], x[2]))) for i in range(3)]


def _cross(a, b):
    return [_sub(_mul(a[1], b[2]), _mul(a[2], b[1])),
            _sub(_mul(a[2], b[0]), _mul(a[0], b[2])),
            _sub(_mul(a[0], b[1]), _mul(a[1], b[0]))]


def _cross_i(a, b, i):
    """Component i of a x b."""
    j, k = (i + 1) % 3, (i + 2) % 3
    return _sub(_mul(a[j], b[k]), _mul(a[k], b[j]))


def _add3(a, b):
    return [_add(x, y) for x, y in zip(a, b)]


def _sub3(a, b):
    return [_sub(x, y) for x, y in zip(a, b)]


def _matmul3(A, B):
    return [_lin(((A[3 * i], B[j]), (A[3 * i + 1], B[3 + j]), (A[3 * i + 2], B[6 + j])))
            for i in range(3) for j in range(3)]


def _scalar(x):
    """An entry from a batch scalar (N,): a float when it is a numpy constant of length 1."""
    if isinstance(x, np.ndarray):
        return float(x.reshape(-1)[0]) if x.size == 1 and x.ndim <= 1 else x
    if isinstance(x, (int, float, np.floating, np.integer)):
        return float(x)
    return x


def _snap(x):
    """A constant with |x| < 1e-14 is a round-off zero: made exact, its products are skipped."""
    return 0.0 if abs(x) < 1e-14 else x


@lru_cache(maxsize=None)
def _rodrigues(axis):
    """Per entry of R(angle) about ``axis``: the coefficients of 1, sin and cos."""
    x, y, z = axis
    K = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    K2 = K @ K
    return tuple((float(np.eye(3)[i, j] + K2[i, j]), float(K[i, j]), float(-K2[i, j]))
                 for i in range(3) for j in range(3))


def _upper_pairs():
    return [(i, j) for i in range(6) for j in range(i, 6)]


_UPPER = _upper_pairs()
_SYMMETRIC = [(min(r, c), max(r, c)) for r in range(6) for c in range(6)]  # row-major -> upper


class Pose:
    """A pose kept as entries: ``R`` (9, row-major) and ``p`` (3). Unpacks, indexes and iterates as
    the protocol's ``(R, p)`` arrays of shapes (3, 3, N) and (3, N)."""

    __slots__ = ("R", "p", "_alg", "_arrays")

    def __init__(self, alg, R, p):
        self._alg, self.R, self.p, self._arrays = alg, tuple(R), tuple(p), None

    def arrays(self):
        if self._arrays is None:
            self._arrays = (self._alg._stack_arrays(self.R, (3, 3), self.p),
                            self._alg._stack_arrays(self.p, (3,), self.R))
        return self._arrays

    def __iter__(self):
        return iter(self.arrays())

    def __getitem__(self, k):
        return self.arrays()[k]

    def __len__(self):
        return 2

    def __repr__(self):
        return f"Pose(R={self.R}, p={self.p})"


class Entries:
    """A twist or wrench (component shape (6,)) or an inertia ((6, 6)) of the entries mode (see
    ``SpatialEntries``): its entries, row-major, in a list. It supports the linear arithmetic the
    recursions do on algebra objects (sums, differences, products with scalars or batch scalars
    (N,)); ``array()`` or ``np.asarray`` gives the protocol's array. ``like``: an array with the
    batch shape, kept when every entry is a constant (so that results keep the batch axis)."""

    __slots__ = ("e", "cshape", "like", "_alg")
    __array_ufunc__ = None  # numpy defers to the reflected operators below

    def __init__(self, alg, e, cshape, like=None):
        self._alg, self.e, self.cshape = alg, list(e), cshape
        self.like = like if like is not None and all(type(x) is _F for x in self.e) else None

    def array(self):
        return self._alg._stack_arrays(self.e, self.cshape, _like(self))

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.array(), dtype=dtype)

    def __repr__(self):
        return f"Entries{self.cshape}({self.e})"

    def _operand(self, y):
        """(entries of y, None) for an algebra object, (None, scalar entry) for a scalar."""
        if isinstance(y, Entries):
            return y.e, y.like
        if isinstance(y, (int, float, np.floating, np.integer)):
            return None, None
        if getattr(y, "ndim", 0) <= 1:  # a batch scalar (N,)
            return None, y
        e = self._alg._entries(y, len(self.cshape))
        return e, _first_array([e])

    def _binary(self, y, op, reflected=False):
        other, like = self._operand(y)
        if other is None:
            y = _scalar(y)
            e = [op(y, a) if reflected else op(a, y) for a in self.e]
        else:
            e = [op(b, a) if reflected else op(a, b) for a, b in zip(self.e, other)]
        return Entries(self._alg, e, self.cshape, self.like if self.like is not None else like)

    def __add__(self, y):
        return self._binary(y, _add)

    def __radd__(self, y):
        return self._binary(y, _add, True)

    def __sub__(self, y):
        return self._binary(y, _sub)

    def __rsub__(self, y):
        return self._binary(y, _sub, True)

    def __mul__(self, y):
        if isinstance(y, Entries) or getattr(y, "ndim", 0) > 1:
            return NotImplemented  # only scalings are linear
        return self._binary(y, _mul)

    __rmul__ = __mul__

    def __truediv__(self, y):
        y = _scalar(y)
        return self._binary(1.0 / y, _mul)

    def __neg__(self):
        return Entries(self._alg, [_mul(-1.0, a) for a in self.e], self.cshape, self.like)


class Spatial(Algebra):
    name = "spatial"

    def entries_mode(self, checkpoints=False):
        """The same algebra in entries mode (``SpatialEntries``), on the same backend;
        ``checkpoints``: cut XLA's fusions at every body (see ``SpatialEntries._checkpoint``)."""
        cache = self.__dict__.setdefault("_entries_algs", {})
        if checkpoints not in cache:
            cache[checkpoints] = SpatialEntries(self.xp, checkpoints)
        return cache[checkpoints]

    # -- entries <-> arrays ----------------------------------------------------------------
    def _entries(self, a, ncomp=1):
        """The flat list of entries of an array with ``ncomp`` leading component axes."""
        if isinstance(a, Entries):
            return a.e
        if isinstance(a, np.ndarray):
            if a.ndim == ncomp + 1 and a.shape[-1] == 1:
                return a.reshape(-1).tolist()
            return list(a.reshape((-1,) + a.shape[ncomp:]))
        if isinstance(a, (list, tuple)):
            return [_scalar(x) for x in a]
        n = int(np.prod(a.shape[:ncomp]))
        a = a.reshape((n,) + a.shape[ncomp:])
        return [a[k] for k in range(n)]

    def _stack_arrays(self, entries, shape, *inputs):
        """Array of component shape ``shape`` from flat entries; constants broadcast to the batch.
        ``inputs`` (entry lists) give the batch when every entry is constant (a product with a
        zero inertia, say), so that a result has the batch axis of its operands as before."""
        arrays = [e for e in entries if type(e) is not _F]
        if not arrays:
            like = _first_array(inputs)
            if like is None:
                return np.array(entries, dtype=float).reshape(shape + (1,))
            arrays = [like]
        xp = self.xp
        batch = arrays[0].shape
        if any(a.shape != batch for a in arrays):
            batch = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
        if xp is np:
            dtype = np.result_type(*{a.dtype for a in arrays})
            out = np.empty((len(entries),) + batch, dtype=dtype)
            for k, e in enumerate(entries):
                out[k] = e
            return out.reshape(shape + batch)
        dtype = xp.result_type(*arrays)
        return xp.stack([xp.full(batch, e, dtype) if type(e) is _F else xp.broadcast_to(e, batch)
                         for e in entries]).reshape(shape + batch)

    _stack = _stack_arrays

    def _pose(self, X):
        if isinstance(X, Pose):
            return X
        R, p = X
        return Pose(self, self._entries(R, 2), self._entries(p, 1))

    def _vec6(self, V):
        return self._entries(V, 1)

    # -- 3-D helpers (arrays) --------------------------------------------------------------
    def rotate(self, R, x):
        R, x = self._entries(R, 2), self._entries(x, 1)
        return self._stack(_rot(R, x), (3,), R, x)

    def rotate_back(self, R, x):
        R, x = self._entries(R, 2), self._entries(x, 1)
        return self._stack(_rot_t(R, x), (3,), R, x)

    def cross(self, a, b):
        a, b = self._entries(a, 1), self._entries(b, 1)
        return self._stack(_cross(a, b), (3,), a, b)

    # -- poses -----------------------------------------------------------------------------
    def pose(self, R, p):
        R, p = np.asarray(R, dtype=float), np.asarray(p, dtype=float)
        if R.ndim == 2:  # a model constant: round-off zeros (cos(pi/2) = 6e-17) become exact
            return Pose(self, [_snap(x) for x in R.reshape(-1).tolist()],
                        [_snap(x) for x in p.reshape(-1).tolist()])
        return Pose(self, self._entries(R, 2), self._entries(p, 1))

    def identity(self):
        return Pose(self, (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0))

    def revolute(self, axis, angle):
        """Rotation by ``angle`` (N,) about the unit ``axis``: Rodrigues' formula,
        R = (1 + K^2) + K sin - K^2 cos, with the zeros of K and K^2 for a coordinate axis."""
        table = _rodrigues(tuple(float(a) for a in axis))
        angle = _scalar(angle)
        if type(angle) is _F:
            s, c = math.sin(angle), math.cos(angle)
        else:
            s, c = self.xp.sin(angle), self.xp.cos(angle)
        return Pose(self, [_add(_add(a, _mul(b, s)), _mul(d, c)) for a, b, d in table],
                    (0.0, 0.0, 0.0))

    def prismatic(self, axis, distance):
        d = _scalar(distance)
        return Pose(self, (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0),
                    [_mul(float(a), d) for a in axis])

    def free(self, q):
        """Pose from (x, y, z, qx, qy, qz, qw); the quaternion is normalised."""
        e = self._entries(q, 1)
        return Pose(self, self._quaternion_entries(e[3:7]), e[0:3])

    def compose(self, A, B):
        A, B = self._pose(A), self._pose(B)
        return Pose(self, _matmul3(A.R, B.R), _add3(_rot(A.R, B.p), A.p))

    def inverse(self, X):
        X = self._pose(X)
        R = X.R
        Rt = (R[0], R[3], R[6], R[1], R[4], R[7], R[2], R[5], R[8])
        return Pose(self, Rt, [_mul(-1.0, e) for e in _rot(Rt, X.p)])

    def to_matrix(self, X):
        """(4, 4, N) homogeneous matrices."""
        X = self._pose(X)
        R, p = X.R, X.p
        return self._stack([R[0], R[1], R[2], p[0], R[3], R[4], R[5], p[1],
                            R[6], R[7], R[8], p[2], 0.0, 0.0, 0.0, 1.0], (4, 4), R, p)

    def from_matrix(self, T):
        e = self._entries(T, 2)
        return Pose(self, (e[0], e[1], e[2], e[4], e[5], e[6], e[8], e[9], e[10]),
                    (e[3], e[7], e[11]))

    # -- twists and wrenches ---------------------------------------------------------------
    def twist(self, v):
        """Algebra twist from a public [linear; angular] 6-vector (6, ...)."""
        return v

    def twist_vector(self, V):
        return V

    wrench, wrench_vector = twist, twist_vector

    def act_twist(self, X, V):
        """The twist V of the child frame, in the parent frame: w' = R w, v' = R v + p x w'."""
        X, e = self._pose(X), self._vec6(V)
        w = _rot(X.R, e[3:])
        return self._stack(_add3(_rot(X.R, e[:3]), _cross(X.p, w)) + w, (6,), X.R, X.p, e)

    def inv_act_twist(self, X, V):
        """The twist V given in the parent frame, in the child frame: R^T (v - p x w), R^T w."""
        X, e = self._pose(X), self._vec6(V)
        w = e[3:]
        return self._stack(_rot_t(X.R, _sub3(e[:3], _cross(X.p, w))) + _rot_t(X.R, w), (6,),
                           X.R, X.p, e)

    def act_wrench(self, X, F):
        """f' = R f, n' = R n + p x f'."""
        X, e = self._pose(X), self._vec6(F)
        f = _rot(X.R, e[:3])
        return self._stack(f + _add3(_rot(X.R, e[3:]), _cross(X.p, f)), (6,), X.R, X.p, e)

    def inv_act_wrench(self, X, F):
        """f' = R^T f, n' = R^T (n - p x f)."""
        X, e = self._pose(X), self._vec6(F)
        f = e[:3]
        return self._stack(_rot_t(X.R, f) + _rot_t(X.R, _sub3(e[3:], _cross(X.p, f))), (6,),
                           X.R, X.p, e)

    def cross_motion(self, V, M):
        """V x M (crm): [w x m_v + v x m_w; w x m_w]."""
        a, m = self._vec6(V), self._vec6(M)
        v, w = a[:3], a[3:]
        return self._stack(_add3(_cross(w, m[:3]), _cross(v, m[3:])) + _cross(w, m[3:]), (6,), a, m)

    def cross_force(self, V, F):
        """V x* F (crf): [w x f; w x n + v x f]."""
        a, g = self._vec6(V), self._vec6(F)
        v, w = a[:3], a[3:]
        return self._stack(_cross(w, g[:3]) + _add3(_cross(w, g[3:]), _cross(v, g[:3])), (6,), a, g)

    def dot(self, M, F):
        """The power pairing M . F (batched over any shared trailing axes)."""
        m, f = self._vec6(M), self._vec6(F)
        r = _lin(zip(m, f))
        if type(r) is _F:
            like = _first_array((m, f, _like(M), _like(F)))
            return np.array([r]) if like is None else 0.0 * like + r
        return r

    # -- inertias --------------------------------------------------------------------------
    def inertia(self, mass, com, inertia_com):
        """Spatial inertia about the frame origin (Featherstone eq. 2.63, [v; w] layout)."""
        c = _skew(com)
        I = np.block([[mass * np.eye(3), -mass * c],
                      [mass * c, np.asarray(inertia_com).reshape(3, 3) + mass * c @ c.T]])
        return I[..., None]

    def inertia_apply(self, I, V):
        """I V for any 6x6 I (not only symmetric ones)."""
        M, e = self._entries(I, 2), self._vec6(V)
        if _all_float(M, e):  # one state or constants: a small matrix product
            out = (np.array(M).reshape(6, 6) @ np.array(e)).tolist()
            return self._stack(out, (6,), M, e, _like(I), _like(V))
        return self._stack([_lin(zip(M[6 * i:6 * i + 6], e)) for i in range(6)], (6,), M, e)

    def inertia_act(self, X, I):
        """The inertia I of the child frame, in the parent frame: X* I X^-1 = Xf I Xf^T with
        Xf = [[1, 0], [p x, 1]] diag(R, R): rotate the 3x3 blocks, then shift by p. Only the upper
        triangle of the symmetric I is read and computed."""
        X, M = self._pose(X), self._entries(I, 2)
        R, p = X.R, X.p
        if _all_float(M, R, p):  # one state or constants: small matrix products
            Rm, P = np.array(R).reshape(3, 3), _skew(p)
            Xf = np.block([[Rm, np.zeros((3, 3))], [P @ Rm, Rm]])
            out = Xf @ np.array(M).reshape(6, 6) @ Xf.T
            return self._stack(((out + out.T) / 2).reshape(-1).tolist(), (6, 6), M, _like(I))
        # Y = M diag(R, R)^T, the entries the upper triangle of diag(R, R) Y needs
        Y = {}
        for a in range(6):
            for c in range(3 if a >= 3 else 0, 6):
                cb, k = divmod(c, 3)
                Y[a, c] = _lin((M[6 * a + 3 * cb + l], R[3 * k + l]) for l in range(3))
        rot = {}
        for r, c in _UPPER:
            rb, i = divmod(r, 3)
            rot[r, c] = _lin((R[3 * i + j], Y[3 * rb + j, c]) for j in range(3))
        if all(type(x) is _F and x == 0.0 for x in p):
            out = rot
        else:
            A = lambda i, j: rot[min(i, j), max(i, j)]  # noqa: E731 (symmetric block)
            B = lambda i, j: rot[i, 3 + j]  # noqa: E731
            Q = [[_cross_i(p, [A(i, 0), A(i, 1), A(i, 2)], k) for k in range(3)]
                 for i in range(3)]  # Q = A P^T: row i is p x A[i, :]
            PB = [[_cross_i(p, [B(0, k), B(1, k), B(2, k)], i) for k in range(3)]
                  for i in range(3)]  # P B: column k is p x B[:, k]
            out = {}
            for r, c in _UPPER:
                if c < 3:
                    out[r, c] = rot[r, c]
                elif r < 3:
                    out[r, c] = _add(rot[r, c], Q[r][c - 3])
                else:
                    i, k = r - 3, c - 3
                    PAPt = _cross_i(p, [Q[0][k], Q[1][k], Q[2][k]], i)  # (P A P^T)[i, k]
                    out[r, c] = _add(_add(rot[r, c], PAPt), _add(PB[i][k], PB[k][i]))
        return self._stack([out[k] for k in _SYMMETRIC], (6, 6),
                           M, R, p)

    def inertia_sub_outer(self, IA, U, Dinv):
        """IA - sum_ab U_a Dinv_ab U_b^T: the articulated-inertia update (Featherstone 7.1),
        symmetric like IA."""
        M = self._entries(IA, 2)
        Ue = [self._vec6(U_a) for U_a in U]
        Dinv = [[_scalar(d) for d in row] for row in Dinv]
        if _all_float(M, *Ue, *Dinv):  # one state or constants: small matrix products
            Um = np.array(Ue).T  # (6, k)
            out = np.array(M).reshape(6, 6) - Um @ np.array(Dinv) @ Um.T
            return self._stack(((out + out.T) / 2).reshape(-1).tolist(), (6, 6), M,
                               _like(IA), *(_like(U_a) for U_a in U))
        W = [[_lin((Dinv[a][b], Ue[b][j]) for b in range(len(Ue))) for j in range(6)]
             for a in range(len(Ue))]
        out = {(r, c): _sub(M[6 * r + c], _lin((Ue[a][r], W[a][c]) for a in range(len(Ue))))
               for r, c in _UPPER}
        return self._stack([out[k] for k in _SYMMETRIC], (6, 6),
                           M, *Ue, [d for row in Dinv for d in row])

    # -- rotations -------------------------------------------------------------------------
    def matrix_from_quaternion(self, quat):
        """Rotation matrices (3, 3, N) from unit quaternions (x, y, z, w) (4, N), normalised."""
        quat = self._entries(quat, 1)
        return self._stack(self._quaternion_entries(quat), (3, 3), quat)

    def _quaternion_entries(self, quat):
        x, y, z, w = quat
        n2 = _lin(((x, x), (y, y), (z, z), (w, w)))
        inv = 1.0 / math.sqrt(n2) if type(n2) is _F else 1.0 / self.xp.sqrt(n2)
        x, y, z, w = (_mul(e, inv) for e in (x, y, z, w))
        xx, yy, zz = _mul(x, x), _mul(y, y), _mul(z, z)
        xy, xz, yz = _mul(x, y), _mul(x, z), _mul(y, z)
        xw, yw, zw = _mul(x, w), _mul(y, w), _mul(z, w)
        one = lambda a, b: _sub(1.0, _mul(2.0, _add(a, b)))  # noqa: E731
        return [one(yy, zz), _mul(2.0, _sub(xy, zw)), _mul(2.0, _add(xz, yw)),
                _mul(2.0, _add(xy, zw)), one(xx, zz), _mul(2.0, _sub(yz, xw)),
                _mul(2.0, _sub(xz, yw)), _mul(2.0, _add(yz, xw)), one(xx, yy)]


def _all_float(*entry_lists):
    return all(type(x) is _F for entries in entry_lists for x in entries)


def _like(x):
    """[an array with the batch shape of Entries x whose entries are all constant], else []."""
    like = getattr(x, "like", None)
    return [] if like is None else [like]


def _first_array(entry_lists):
    for entries in entry_lists:
        for e in entries:
            if type(e) is not _F:
                return e
    return None


class SpatialEntries(Spatial):
    """The spatial algebra in *entries mode*: twists, wrenches and inertias are ``Entries`` (lists
    of components) rather than stacked arrays, so nothing is stacked or sliced between operations
    and the zeros of the motion subspaces S (a joint about z has S = e_6) survive the recursions'
    own arithmetic (S qd, S . f). The public functions use it for the recursions that only do
    linear arithmetic on algebra objects (RNEA, ABA, CRBA); the other algorithms get ``Spatial``.
    Under JAX this keeps the traced graph scalar and short, which XLA fuses well."""

    CHECKPOINTS = frozenset({"inv_act_twist", "act_wrench", "inertia_act"})

    def __init__(self, xp, checkpoints=False):
        super().__init__(xp)
        self.checkpoints = bool(checkpoints) and xp is not np

    def entries_mode(self, checkpoints=False):
        return self if bool(checkpoints) == self.checkpoints else \
            Spatial.entries_mode(self, checkpoints)

    def _stack(self, entries, shape, *inputs):
        if shape == (6,) or shape == (6, 6):
            return Entries(self, entries, shape, _first_array(inputs))
        return self._stack_arrays(entries, shape, *inputs)

    def _checkpoint(self, X):
        """Under JAX, make XLA compute each batch entry of X once, into memory: x / (x * 0 + 1)
        (XLA never duplicates a division into its consumers and cannot fold this one). Without
        these cuts XLA's loop fusion recomputes every value inside each consumer, which grows as
        n^2 over a chain of n bodies (compile time and run time); with them, linearly. (For
        small trees the duplicated arithmetic is cheaper than the memory traffic: no cuts.)"""
        if not self.checkpoints or not isinstance(X, Entries):
            return X
        return Entries(self, [x if type(x) is _F else x / (x * 0.0 + 1.0) for x in X.e],
                       X.cshape, X.like)

    def inv_act_twist(self, X, V):
        r = super().inv_act_twist(X, V)
        return self._checkpoint(r) if "inv_act_twist" in self.CHECKPOINTS else r

    def act_wrench(self, X, F):
        r = super().act_wrench(X, F)
        return self._checkpoint(r) if "act_wrench" in self.CHECKPOINTS else r

    def inertia_act(self, X, I):
        r = super().inertia_act(X, I)
        return self._checkpoint(r) if "inertia_act" in self.CHECKPOINTS else r

    def twist(self, v):
        return v if isinstance(v, Entries) else Entries(self, self._entries(v, 1), (6,))

    def twist_vector(self, V):
        return V.array() if isinstance(V, Entries) else V

    wrench, wrench_vector = twist, twist_vector

    def inertia(self, mass, com, inertia_com):
        return Entries(self, self._entries(super().inertia(mass, com, inertia_com), 2), (6, 6))


def _skew(a):
    return np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]], dtype=float)
