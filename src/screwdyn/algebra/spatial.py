"""Featherstone's 6-D spatial algebra, in Pinocchio's layout.

Layout (components first, one trailing batch axis, see ``algebra/__init__``):
    twist   V = [v; w]   (6, N): velocity of the frame origin, angular velocity
    wrench  F = [f; n]   (6, N): force, moment about the frame origin
    pose    X = (R, p)   (3, 3, N), (3, N): the child frame's axes and origin in the parent frame
    inertia I            (6, 6, N): wrench = I twist (symmetric, as every spatial inertia is)

How it is fast. Every operation is straight-line code on *entries* (``algebra/entries``), the
scalar components: a constant (a float, or ZERO) or a batch array (N,). A product with ZERO is
skipped and one with +-1 costs nothing, so the code that runs for a joint is what one would write
by hand for it: a revolute joint about z behind a placement that permutes axes rotates a vector
with 4 products, not 9, and a placement offset along one axis crosses with 2 products, not 6.
Poses stay as entries between operations (``Pose``, which unpacks to the protocol's ``(R, p)``
arrays on demand), so the zeros and ones of R = R_placement R_joint(q) survive from ``compose``
to every use. In the entries mode (``SpatialEntries``) twists, wrenches and inertias stay entries
too. Under JAX the same code traces to a short graph that XLA fuses into a few loops over the
batch.
"""
import math
from functools import lru_cache

import numpy as np

from . import Algebra
from .entries import (SYMMETRIC, UPPER, ZERO, EntriesMode, add, all_constant, components,
                      constant, is_constant, like, lin, mul, scalar, sin_cos, stack, sub,
                      sub_outer, unit, value)

def _rot(R, x):
    """R x for R (9 entries, row-major) and x (3 entries)."""
    return [lin(((R[3 * i], x[0]), (R[3 * i + 1], x[1]), (R[3 * i + 2], x[2]))) for i in range(3)]


def _rot_t(R, x):
    """R^T x."""
    return [lin(((R[i], x[0]), (R[3 + i], x[1]), (R[6 + i], x[2]))) for i in range(3)]


def _cross(a, b):
    return [sub(mul(a[1], b[2]), mul(a[2], b[1])),
            sub(mul(a[2], b[0]), mul(a[0], b[2])),
            sub(mul(a[0], b[1]), mul(a[1], b[0]))]


def _cross_i(a, b, i):
    """Component i of a x b."""
    j, k = (i + 1) % 3, (i + 2) % 3
    return sub(mul(a[j], b[k]), mul(a[k], b[j]))


def _add3(a, b):
    return [add(x, y) for x, y in zip(a, b)]


def _sub3(a, b):
    return [sub(x, y) for x, y in zip(a, b)]


def _matmul3(A, B):
    return [lin(((A[3 * i], B[j]), (A[3 * i + 1], B[3 + j]), (A[3 * i + 2], B[6 + j])))
            for i in range(3) for j in range(3)]


def _snap(x):
    """A constant with |x| < 1e-14 is a round-off zero (cos(pi/2) = 6e-17): made exact, ZERO."""
    return constant(x, 1e-14)


@lru_cache(maxsize=1024)  # keyed by user data (poses, axes): bounded
def _rodrigues(axis):
    """Per entry of R(angle) about ``axis``: the coefficients of 1, sin and cos."""
    x, y, z = axis
    K = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    K2 = K @ K
    return tuple((constant(np.eye(3)[i, j] + K2[i, j]), constant(K[i, j]), constant(-K2[i, j]))
                 for i in range(3) for j in range(3))


_EYE = (1.0, ZERO, ZERO, ZERO, 1.0, ZERO, ZERO, ZERO, 1.0)


class Pose:
    """A pose kept as entries: ``R`` (9, row-major) and ``p`` (3). Unpacks, indexes and iterates as
    the protocol's ``(R, p)`` arrays of shapes (3, 3, N) and (3, N)."""

    __slots__ = ("R", "p", "_alg", "_arrays")

    def __init__(self, alg, R, p):
        self._alg, self.R, self.p, self._arrays = alg, tuple(R), tuple(p), None

    def arrays(self):
        if self._arrays is None:
            xp = self._alg.xp
            self._arrays = (stack(xp, self.R, (3, 3), self.p), stack(xp, self.p, (3,), self.R))
        return self._arrays

    def __iter__(self):
        return iter(self.arrays())

    def __getitem__(self, k):
        return self.arrays()[k]

    def __len__(self):
        return 2

    def __repr__(self):
        return f"Pose(R={self.R}, p={self.p})"


class Spatial(Algebra):
    name = "spatial"

    # -- entries <-> arrays ----------------------------------------------------------------
    def _pose(self, X):
        if isinstance(X, Pose):
            return X
        R, p = X
        return Pose(self, components(R, 2), components(p, 1))

    # -- 3-D helpers (arrays) --------------------------------------------------------------
    def rotate(self, R, x):
        R, x = components(R, 2), components(x, 1)
        return self._stack(_rot(R, x), (3,), R, x)

    def rotate_back(self, R, x):
        R, x = components(R, 2), components(x, 1)
        return self._stack(_rot_t(R, x), (3,), R, x)

    def cross(self, a, b):
        a, b = components(a, 1), components(b, 1)
        return self._stack(_cross(a, b), (3,), a, b)

    # -- poses -----------------------------------------------------------------------------
    def pose(self, R, p):
        R, p = np.asarray(R, dtype=float), np.asarray(p, dtype=float)
        if R.ndim == 2:  # a model constant: round-off zeros (cos(pi/2) = 6e-17) become exact
            return Pose(self, [_snap(x) for x in R.reshape(-1).tolist()],
                        [_snap(x) for x in p.reshape(-1).tolist()])
        return Pose(self, components(R, 2), components(p, 1))

    def identity(self):
        return Pose(self, _EYE, (ZERO, ZERO, ZERO))

    def revolute(self, axis, angle):
        """Rotation by ``angle`` (N,) about the unit ``axis``: Rodrigues' formula,
        R = (1 + K^2) + K sin - K^2 cos, with the zeros of K and K^2 for a coordinate axis."""
        table = _rodrigues(tuple(float(a) for a in axis))
        angle = scalar(angle)
        if is_constant(angle):
            # IEEE: the sine and cosine of an infinite angle are NaN (math.sin raises instead)
            s, c = (math.sin(angle), math.cos(angle)) if math.isfinite(angle) else (math.nan,) * 2
        else:
            s, c = sin_cos(self.xp, angle)
        return Pose(self, [add(add(a, mul(b, s)), mul(d, c)) for a, b, d in table],
                    (ZERO, ZERO, ZERO))

    def prismatic(self, axis, distance):
        d = scalar(distance)
        return Pose(self, _EYE,
                    [mul(float(a), d) for a in axis])

    def translation(self, p):
        """Translation by p (3 entries)."""
        return Pose(self, _EYE, [scalar(e) for e in p])

    def rotation(self, quat):
        """Rotation by the quaternion (x, y, z, w) (4 entries), normalised."""
        return Pose(self, self._quaternion_entries(quat), (ZERO, ZERO, ZERO))

    def compose(self, A, B):
        A, B = self._pose(A), self._pose(B)
        return Pose(self, _matmul3(A.R, B.R), _add3(_rot(A.R, B.p), A.p))

    def inverse(self, X):
        X = self._pose(X)
        R = X.R
        Rt = (R[0], R[3], R[6], R[1], R[4], R[7], R[2], R[5], R[8])
        return Pose(self, Rt, [mul(-1.0, e) for e in _rot(Rt, X.p)])

    def to_matrix(self, X):
        """(4, 4, N) homogeneous matrices."""
        X = self._pose(X)
        R, p = X.R, X.p
        return self._stack([R[0], R[1], R[2], p[0], R[3], R[4], R[5], p[1],
                            R[6], R[7], R[8], p[2], ZERO, ZERO, ZERO, 1.0], (4, 4), R, p)

    def from_matrix(self, T):
        e = components(T, 2)
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
        X, e = self._pose(X), components(V)
        w = _rot(X.R, e[3:])
        return self._stack(_add3(_rot(X.R, e[:3]), _cross(X.p, w)) + w, (6,), X.R, X.p, e)

    def inv_act_twist(self, X, V):
        """The twist V given in the parent frame, in the child frame: R^T (v - p x w), R^T w."""
        X, e = self._pose(X), components(V)
        w = e[3:]
        return self._stack(_rot_t(X.R, _sub3(e[:3], _cross(X.p, w))) + _rot_t(X.R, w), (6,),
                           X.R, X.p, e)

    def act_wrench(self, X, F):
        """f' = R f, n' = R n + p x f'."""
        X, e = self._pose(X), components(F)
        f = _rot(X.R, e[:3])
        return self._stack(f + _add3(_rot(X.R, e[3:]), _cross(X.p, f)), (6,), X.R, X.p, e)

    def inv_act_wrench(self, X, F):
        """f' = R^T f, n' = R^T (n - p x f)."""
        X, e = self._pose(X), components(F)
        f = e[:3]
        return self._stack(_rot_t(X.R, f) + _rot_t(X.R, _sub3(e[3:], _cross(X.p, f))), (6,),
                           X.R, X.p, e)

    def cross_motion(self, V, M):
        """V x M (crm): [w x m_v + v x m_w; w x m_w]."""
        a, m = components(V), components(M)
        v, w = a[:3], a[3:]
        return self._stack(_add3(_cross(w, m[:3]), _cross(v, m[3:])) + _cross(w, m[3:]), (6,), a, m)

    def cross_force(self, V, F):
        """V x* F (crf): [w x f; w x n + v x f]."""
        a, g = components(V), components(F)
        v, w = a[:3], a[3:]
        return self._stack(_cross(w, g[:3]) + _add3(_cross(w, g[3:]), _cross(v, g[:3])), (6,), a, g)

    def dot(self, M, F):
        """The power pairing M . F (batched over any shared trailing axes)."""
        m, f = components(M), components(F)
        return self._stack([lin(zip(m, f))], (), m, f, like(M), like(F))

    # -- inertias --------------------------------------------------------------------------
    def inertia(self, mass, com, inertia_com):
        """Spatial inertia about the frame origin (Featherstone eq. 2.63, [v; w] layout)."""
        c = _skew(com)
        I = np.block([[mass * np.eye(3), -mass * c],
                      [mass * c, np.asarray(inertia_com).reshape(3, 3) + mass * c @ c.T]])
        return I[..., None]

    def inertia_apply(self, I, V):
        """I V for any 6x6 I (not only symmetric ones)."""
        M, e = components(I, 2), components(V)
        if all_constant(M, e):  # one state or constants: a small matrix product
            out = (_matrix(M, 6) @ _matrix(e)).tolist()
            return self._stack(out, (6,), M, e, like(I), like(V))
        return self._stack([lin(zip(M[6 * i:6 * i + 6], e)) for i in range(6)], (6,), M, e)

    def inertia_act(self, X, I):
        """The inertia I of the child frame, in the parent frame: X* I X^-1 = Xf I Xf^T with
        Xf = [[1, 0], [p x, 1]] diag(R, R): rotate the 3x3 blocks, then shift by p. Only the upper
        triangle of the symmetric I is read and computed."""
        X, M = self._pose(X), components(I, 2)
        return self._stack(force_congruence(X.R, X.p, M), (6, 6), M, X.R, X.p, like(I))

    inertia_variation = Algebra._dot_variation  # components paired by the plain dot product

    def inertia_sub_outer(self, IA, U, Dinv):
        """IA - sum_ab U_a Dinv_ab U_b^T: the articulated-inertia update (Featherstone 7.1),
        symmetric like IA."""
        M, Ue = components(IA, 2), [components(U_a) for U_a in U]
        return self._stack(sub_outer(M, Ue, Dinv), (6, 6), M, *Ue, like(IA),
                           *(like(U_a) for U_a in U), [scalar(d) for row in Dinv for d in row])

    # -- rotations -------------------------------------------------------------------------
    def matrix_from_quaternion(self, quat):
        """Rotation matrices (3, 3, N) from unit quaternions (x, y, z, w) (4, N), normalised."""
        quat = components(quat, 1)
        return self._stack(self._quaternion_entries(quat), (3, 3), quat)

    def _quaternion_entries(self, quat):
        x, y, z, w = unit(self.xp, quat)
        xx, yy, zz = mul(x, x), mul(y, y), mul(z, z)
        xy, xz, yz = mul(x, y), mul(x, z), mul(y, z)
        xw, yw, zw = mul(x, w), mul(y, w), mul(z, w)
        one = lambda a, b: sub(1.0, mul(2.0, add(a, b)))  # noqa: E731
        return [one(yy, zz), mul(2.0, sub(xy, zw)), mul(2.0, add(xz, yw)),
                mul(2.0, add(xy, zw)), one(xx, zz), mul(2.0, sub(yz, xw)),
                mul(2.0, sub(xz, yw)), mul(2.0, add(yz, xw)), one(xx, yy)]


class SpatialEntries(EntriesMode, Spatial):
    """The spatial algebra in entries mode (``entries.EntriesMode``): twists, wrenches and
    inertias are ``Entries``, so the zeros of the motion subspaces S (a joint about z has
    S = e_6) survive the recursions' own arithmetic (S qd, S . f)."""


Spatial.entries_class = SpatialEntries


def force_congruence(R, p, M):
    """Xf M Xf^T for the wrench transformation Xf = [[1, 0], [p x, 1]] diag(R, R) of a pose (R: 9
    entries, row-major; p: 3) and a symmetric 6x6 M (36 entries; only its upper triangle is read):
    the 36 entries of the symmetric result. It moves a spatial inertia from the child frame to
    the parent frame (X* I X^-1), rotating the 3x3 blocks, then shifting them by p."""
    if all_constant(M, R, p):  # one state or constants: small matrix products
        Rm, P = _matrix(R, 3), _skew(_matrix(p))
        Xf = np.block([[Rm, np.zeros((3, 3))], [P @ Rm, Rm]])
        out = Xf @ _matrix(M, 6) @ Xf.T
        return [constant(x) for x in ((out + out.T) / 2).reshape(-1)]
    # Y = M diag(R, R)^T, the entries the upper triangle of diag(R, R) Y needs
    Y = {}
    for a in range(6):
        for c in range(3 if a >= 3 else 0, 6):
            cb, k = divmod(c, 3)
            Y[a, c] = lin((M[6 * a + 3 * cb + l], R[3 * k + l]) for l in range(3))
    rot = {}
    for r, c in UPPER:
        rb, i = divmod(r, 3)
        rot[r, c] = lin((R[3 * i + j], Y[3 * rb + j, c]) for j in range(3))
    if all(x is ZERO for x in p):
        out = rot
    else:
        A = lambda i, j: rot[min(i, j), max(i, j)]  # noqa: E731 (symmetric block)
        B = lambda i, j: rot[i, 3 + j]  # noqa: E731
        Q = [[_cross_i(p, [A(i, 0), A(i, 1), A(i, 2)], k) for k in range(3)]
             for i in range(3)]  # Q = A P^T: row i is p x A[i, :]
        PB = [[_cross_i(p, [B(0, k), B(1, k), B(2, k)], i) for k in range(3)]
              for i in range(3)]  # P B: column k is p x B[:, k]
        out = {}
        for r, c in UPPER:
            if c < 3:
                out[r, c] = rot[r, c]
            elif r < 3:
                out[r, c] = add(rot[r, c], Q[r][c - 3])
            else:
                i, k = r - 3, c - 3
                PAPt = _cross_i(p, [Q[0][k], Q[1][k], Q[2][k]], i)  # (P A P^T)[i, k]
                out[r, c] = add(add(rot[r, c], PAPt), add(PB[i][k], PB[k][i]))
    return [out[k] for k in SYMMETRIC]


def _matrix(entries, n=None):
    """A numpy vector, or n x n matrix, of constant entries."""
    out = np.array([value(e) for e in entries], dtype=float)
    return out if n is None else out.reshape(n, n)


def _skew(a):
    return np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]], dtype=float)
