"""Dual quaternions: unit dual quaternions for poses, pure dual quaternions for twists and wrenches.

A dual quaternion is h = P(h) + eps D(h) with eps^2 = 0 and P, D quaternions (w, x, y, z). The
objects, after Silva, Quiroz-Omana and Adorno (J. Mechanisms Robotics 14, 2022), which the
branched-robot paper instantiates (see ``shared/notes/dual-quaternion-newton-euler.md``):

    pose     x = r + eps p r / 2            r the rotation, p the translation (T_parent_child)
    twist    xi = omega + eps v = 2 x* xdot  of a frame, in that frame (v of the frame's origin)
    wrench   zeta = f + eps tau              force first, torque about the frame's origin
    Ad(x) h = x h x* = R a + eps (R b + p x R a)   for a pure h = a + eps b (twists and wrenches)
    cross(a, b) = (ab - ba) / 2              the motion bracket, and the force bracket on a wrench
    dot(a, b) = -(ab + ba) / 2               D(dot(xi, zeta)) = f.v + tau.omega is the power
    inertia  II(omega + eps v) = m v + eps I_c omega   at the centre of mass

Layout. Components are indexed first: a unit dual quaternion has 8 (w, x, y, z of P, then of D), a
pure one 6 (the vector parts of P and D: [omega; v] for a twist, [f; tau] for a wrench). The
kernels below are written once, with plain operators, on *sequences of components*, and serve both

- the algebra ``DualQuaternion`` in which screwdyn's recursions run, components first and one
  trailing batch axis: twist and wrench (6, N), inertia (6, 6, N) (the matrix of the operator
  twist -> momentum wrench), and a pose, a ``UnitDualQuaternion`` holding its 8 components (each
  (N,), or a constant); and
- the public functions of this module (``screwdyn.dq``): leading batch dimensions, components
  last, (..., 8) and (..., 6), numpy or JAX.

How the algebra is fast. A component is a batch array (N,), a float, or ``ZERO``: model constants
(placements, joint axes, motion subspaces) enter as floats, and ``ZERO`` absorbs products and
vanishes from sums, so a kernel run on a constant costs only its non-zero terms (a placement
composed with a rotation about a coordinate axis: 24 products, not 64). Ad(x), applied up to three
times per pose in a recursion, is evaluated from the rotation matrix R of P(x) and the translation
p, which a ``UnitDualQuaternion`` computes once, when first needed; for a joint's pose, placement
times motion, from its factors, so that what is constant in them stays constant. Inertias move
with the wrench congruence and the articulated-inertia update that the other algebras share
(through the swap that makes an inertia's matrix symmetric, see ``inertia_act``), and in the
entries mode (``DualQuaternionEntries``, which the recursions use) twists, wrenches and inertias
stay lists of components between operations (``algebra/entries``).

The public twist 6-vector is [linear; angular], so ``twist`` swaps the halves; the public wrench
[force; torque] is already f + eps tau.
"""
import numpy as np

from .. import _backend
from . import Algebra
from .entries import (ZERO, EntriesMode, components, constant, is_constant, like, lin,
                      scalar, sin_cos, sub_outer, unit)
from .entries import mul as entry_mul
from .spatial import force_congruence

SWAP = np.array([3, 4, 5, 0, 1, 2])  # [omega; v] <-> [v; omega]; also the pairing twist-wrench


# -- kernels on sequences of components -----------------------------------------------------------
def _cross3(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _dot3(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _add3(a, b):
    return tuple(u + v for u, v in zip(a, b))


def _qmul(a, b):
    """The Hamilton product of quaternions a = (w, x, y, z) and b."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw)


def _mul(a, b):
    """(Pa + eps Da)(Pb + eps Db) = Pa Pb + eps (Pa Db + Da Pb)."""
    Pa, Da, Pb, Db = a[:4], a[4:8], b[:4], b[4:8]
    return _qmul(Pa, Pb) + tuple(u + v for u, v in zip(_qmul(Pa, Db), _qmul(Da, Pb)))


def _conj(x):
    """x* = P(x)* + eps D(x)*: the inverse of a unit dual quaternion."""
    return (x[0], -x[1], -x[2], -x[3], x[4], -x[5], -x[6], -x[7])


def _dual_conj(x):
    """P(x) - eps D(x)."""
    return tuple(x[:4]) + tuple(-c for c in x[4:8])


def _rotation(x):
    """The rotation matrix of P(x) = (w, a, b, c), rows of components: R v = r v r*."""
    w, a, b, c = x[:4]
    return ((1.0 - 2.0 * (b * b + c * c), 2.0 * (a * b - c * w), 2.0 * (a * c + b * w)),
            (2.0 * (a * b + c * w), 1.0 - 2.0 * (a * a + c * c), 2.0 * (b * c - a * w)),
            (2.0 * (a * c - b * w), 2.0 * (b * c + a * w), 1.0 - 2.0 * (a * a + b * b)))


def _translation(x):
    """p = 2 D(x) P(x)*, the translation of x = r + eps p r / 2 (vector part; the scalar is 0)."""
    w, u, dw, dv = x[0], x[1:4], x[4], x[5:8]
    return tuple(2.0 * (w * d - dw * c + e) for d, c, e in zip(dv, u, _cross3(u, dv)))


def _rotate(R, v):
    return tuple(_dot3(row, v) for row in R)


def _rotate_back(R, v):
    return tuple(R[0][k] * v[0] + R[1][k] * v[1] + R[2][k] * v[2] for k in range(3))


def _ad(R, p, h):
    """Ad(x) h = x h x* for a pure h = a + eps b, from R and p of x: R a + eps (R b + p x R a)."""
    Ra = _rotate(R, h[:3])
    return Ra + _add3(_rotate(R, h[3:6]), _cross3(p, Ra))


def _ad_inverse(R, p, h):
    """Ad(x*) h = x* h x = R^T a + eps R^T (b - p x a)."""
    a = h[:3]
    return _rotate_back(R, a) + _rotate_back(R, tuple(b - c for b, c in zip(h[3:6], _cross3(p, a))))


def _cross(a, b):
    """(ab - ba) / 2 of pure dual quaternions: a1 x b1 + eps (a1 x b2 + a2 x b1)."""
    a1, a2, b1, b2 = a[:3], a[3:6], b[:3], b[3:6]
    return _cross3(a1, b1) + _add3(_cross3(a1, b2), _cross3(a2, b1))


def _power(a, b):
    """D(dot(a, b)) = a1.b2 + a2.b1: for a twist and a wrench, the power f.v + tau.omega."""
    return _dot3(a[:3], b[3:6]) + _dot3(a[3:6], b[:3])


def _dot(a, b):
    """dot(a, b) = -(ab + ba) / 2 of pure dual quaternions, a dual number: a1.b1 + eps power."""
    return _dot3(a[:3], b[:3]), _power(a, b)


def _from_rotation_translation(R, p, xp):
    """The unit dual quaternion of rotation R (R[i][j]) and translation p: r by Shepperd's method
    (each of the four candidates is 4 r_k r; the largest r_k^2 picks the stable one), then
    d = p r / 2."""
    (R00, R01, R02), (R10, R11, R12), (R20, R21, R22) = (R[i][:3] for i in range(3))
    candidates = ((1.0 + R00 + R11 + R22, R21 - R12, R02 - R20, R10 - R01),
                  (R21 - R12, 1.0 + R00 - R11 - R22, R01 + R10, R02 + R20),
                  (R02 - R20, R01 + R10, 1.0 - R00 + R11 - R22, R12 + R21),
                  (R10 - R01, R02 + R20, R12 + R21, 1.0 - R00 - R11 + R22))
    dw, dx, dy, dz = (c[k] for k, c in enumerate(candidates))
    use_w = (dw >= dx) & (dw >= dy) & (dw >= dz)
    use_x = (dx >= dy) & (dx >= dz)
    use_y = dy >= dz
    q = [xp.where(use_w, cw, xp.where(use_x, cx, xp.where(use_y, cy, cz)))
         for cw, cx, cy, cz in zip(*candidates)]
    norm = xp.sqrt(sum(c * c for c in q))
    r = tuple(c / norm for c in q)
    return r + _translated(p, r)


def _translated(p, r):
    """D = p r / 2: the dual part of the pose with rotation r and translation p."""
    return tuple(0.5 * c for c in _qmul((ZERO,) + tuple(p[:3]), r))


def _matrix(x, R=None, p=None):
    """The 4x4 homogeneous matrix of a unit dual quaternion, as rows of components."""
    R, p = R or _rotation(x), p or _translation(x)
    return tuple(row + (p_i,) for row, p_i in zip(R, p)) + ((ZERO, ZERO, ZERO, 1.0),)


def _sinc_terms(t, xp):
    """s = sin(th)/th and g = (th cos th - sin th)/th^3 of th = sqrt(t), by their series for
    t < 1e-2 (truncation below 1e-18) and exactly otherwise, smooth at th = 0."""
    small = t < 1e-2
    safe = xp.where(small, 1.0, t)
    th = xp.sqrt(safe)
    s_exact, c_exact = xp.sin(th) / th, xp.cos(th)
    s_series = 1.0 - t / 6.0 + t * t / 120.0 - t ** 3 / 5040.0 + t ** 4 / 362880.0
    g_series = -1.0 / 3.0 + t / 30.0 - t * t / 840.0 + t ** 3 / 45360.0 - t ** 4 / 3991680.0
    return (xp.where(small, s_series, s_exact),
            xp.where(small, g_series, (c_exact - s_exact) / safe))


def _exp(h, xp):
    """exp(a + eps b) = cos(th^) + sin(th^) n^ over the dual angle th^ = |a| + eps a.b/|a| and
    the dual axis n^ (the exponential is analytic, so it extends to dual numbers):
    P = cos th + s a, D = -s (a.b) + s b + g (a.b) a, with s, g from ``_sinc_terms``."""
    a, b = h[:3], h[3:6]
    t, ab = _dot3(a, a), _dot3(a, b)
    s, g = _sinc_terms(t, xp)
    return ((xp.cos(xp.sqrt(t)),) + tuple(s * c for c in a) + (-s * ab,)
            + tuple(s * cb + g * ab * ca for ca, cb in zip(a, b)))


def _log(x, xp):
    """The pure h with exp(h) = x, from the branch with P(x) scalar >= 0 (x and -x are one
    pose): inverts ``_exp`` with th = atan2(|u|, w) <= pi/2, so s >= 2/pi never vanishes."""
    sign = xp.where(x[0] < 0, -1.0, 1.0)
    w, u, dw, dv = sign * x[0], [sign * c for c in x[1:4]], sign * x[4], [sign * c for c in x[5:8]]
    th = xp.arctan2(xp.sqrt(_dot3(u, u)), w)
    s, g = _sinc_terms(th * th, xp)
    a = tuple(c / s for c in u)
    ab = -dw / s
    return a + tuple((d - g * ab * c) / s for d, c in zip(dv, a))


# -- the algebra of the recursions: components first, one trailing batch axis ---------------------
class UnitDualQuaternion:
    """A pose of the algebra, x = r + eps p r / 2. Its 8 components, its rotation matrix R and its
    translation p (what Ad(x) reads) are each computed when first needed, and kept: for a product
    A B from the factors (x = A.x B.x, R = R_A R_B, p = p_A + R_A p_B, which keeps the zeros and
    constants of a joint's placement and motion), for any other pose R and p from x."""

    __slots__ = ("_x", "_R", "_p", "_factors")

    def __init__(self, x=None, factors=None):
        self._x, self._R, self._p = (None if x is None else tuple(x)), None, None
        self._factors = factors

    @property
    def x(self):
        if self._x is None:
            A, B = self._factors
            self._x = _mul(A.x, B.x)
        return self._x

    @property
    def R(self):
        if self._R is None:
            self._R = self._rotation()
        return self._R

    @property
    def p(self):
        if self._p is None:
            self._p = self._translation()
        return self._p

    def _rotation(self):
        """R, without keeping the factors' (a joint motion's is cheap to recompute)."""
        if self._R is not None:
            return self._R
        if self._factors is None:
            return _rotation(self.x)
        A, B = self._factors
        columns = [_rotate(A.R, column) for column in zip(*B._rotation())]  # R_A R_B
        return tuple(zip(*columns))

    def _translation(self):
        if self._p is not None:
            return self._p
        if self._factors is None:
            return _translation(self.x)
        A, B = self._factors
        return _add3(A.p, _rotate(A.R, B._translation()))

    def __repr__(self):
        return f"UnitDualQuaternion({self.x})"


class DualQuaternion(Algebra):
    """The protocol of ``screwdyn.algebra`` in dual quaternions. Objects built from model
    constants (``pose``, ``identity``, ``inertia``, ``twist`` of a constant) hold floats or numpy
    arrays whatever the backend, so they can be cached."""

    name = "dq"

    def _components(self, a):
        """The components of a twist or wrench (``entries.components``), as a tuple."""
        return tuple(components(a))

    # -- poses -------------------------------------------------------------------------------
    def pose(self, R, p):
        """The constant pose of rotation R (3, 3) and translation p (3,). Its R and p, which Ad
        reads, are the given ones with round-off zeros made exact (|x| < 1e-14, as the spatial
        algebra's placements), not the ones recomputed from the dual quaternion, whose zeros
        would carry round-off (2e-16 for a quarter turn) and cost a product each."""
        R, p = np.asarray(R, dtype=float), np.asarray(p, dtype=float)
        x = UnitDualQuaternion(map(constant, _from_rotation_translation(R, p, np)))
        x._R = tuple(tuple(constant(v, 1e-14) for v in row) for row in R.tolist())
        x._p = tuple(constant(v, 1e-14) for v in p.tolist())
        return x

    def identity(self):
        return UnitDualQuaternion((1.0,) + (ZERO,) * 7)

    def revolute(self, axis, angle):
        """cos(q/2) + sin(q/2) k for the unit axis k."""
        half = 0.5 * angle
        s, c = sin_cos(self.xp, half)
        return UnitDualQuaternion((c,) + tuple(constant(k) * s for k in axis)
                                  + (ZERO,) * 4)

    def prismatic(self, axis, distance):
        """1 + eps d k / 2."""
        return UnitDualQuaternion((1.0,) + (ZERO,) * 4
                                  + tuple(constant(0.5 * k) * distance for k in axis))

    def translation(self, p):
        """1 + eps p / 2 for a translation by p (3 entries)."""
        return UnitDualQuaternion((1.0, ZERO, ZERO, ZERO, ZERO)
                                  + tuple(entry_mul(0.5, scalar(e)) for e in p))

    def rotation(self, quat):
        """The rotation of the quaternion (x, y, z, w) (4 entries), normalised."""
        x, y, z, w = unit(self.xp, quat)
        return UnitDualQuaternion((w, x, y, z, ZERO, ZERO, ZERO, ZERO))

    def compose(self, A, B):
        return UnitDualQuaternion(factors=(A, B))

    def inverse(self, X):
        return UnitDualQuaternion(_conj(X.x))

    def to_matrix(self, X):
        """(4, 4, N) homogeneous matrices."""
        return self._stack([c for row in _matrix(X.x, X.R, X.p) for c in row], (4, 4), X.x)

    def from_matrix(self, T):
        return UnitDualQuaternion(_from_rotation_translation(T, [T[i][3] for i in range(3)],
                                                             self.xp))

    # -- twists and wrenches -----------------------------------------------------------------
    def twist(self, v):
        """omega + eps v from a public [linear; angular] 6-vector (6, ...)."""
        return v[SWAP]

    twist_vector = twist  # the swap is its own inverse

    def wrench(self, f):
        """f + eps tau: the public [force; torque] order already."""
        return f

    wrench_vector = wrench

    def act_twist(self, X, V):
        h = self._components(V)
        return self._stack(_ad(X.R, X.p, h), (6,), h, like(V))

    def inv_act_twist(self, X, V):
        h = self._components(V)
        return self._stack(_ad_inverse(X.R, X.p, h), (6,), h, like(V))

    act_wrench, inv_act_wrench = act_twist, inv_act_twist  # one Ad for twists and wrenches

    def cross_motion(self, V, M):
        a, b = self._components(V), self._components(M)
        return self._stack(_cross(a, b), (6,), a, b, like(V), like(M))

    cross_force = cross_motion  # cross(xi, zeta) is the force bracket in wrench order

    def dot(self, M, F):
        """The power D(dot(M, F)) (N,)."""
        a, b = self._components(M), self._components(F)
        return self._stack([_power(a, b)], (), a, b, like(M), like(F))

    # -- inertias: matrices of linear operators on pure dual quaternions ---------------------
    # An inertia II (6, 6, N) maps a twist omega + eps v to its momentum wrench. With its columns
    # in the public twist order [v; omega], G = II[:, SWAP] is the symmetric spatial inertia, and
    # Ad(x) II Ad(x*) is the congruence G -> A G A^T by the matrix A of Ad(x) on wrenches
    # (Ad(x*) = P A^T P with P the swap, since Ad preserves the twist-wrench pairing).
    def inertia(self, mass, com, inertia_com):
        """II_o = Ad(x_c) II_c Ad(x_c*) with II_c(omega + eps v) = m v + eps I_c omega at the
        centre of mass x_c = 1 + eps c / 2."""
        II_c = np.zeros((6, 6, 1))
        II_c[:3, 3:, 0] = mass * np.eye(3)
        II_c[3:, :3, 0] = np.reshape(inertia_com, (3, 3))
        return DualQuaternion.inertia_act(self, self.pose(np.eye(3), com), II_c)

    def inertia_apply(self, I, V):
        M, h = components(I, 2), self._components(V)
        return self._stack([lin(zip(M[6 * i:6 * i + 6], h)) for i in range(6)], (6,), M, h,
                           like(I), like(V))

    def inertia_act(self, X, I):
        """Ad(x) II Ad(x*), through G (see above)."""
        M = components(I, 2)
        R = [c for row in X.R for c in row]
        return self._stack(_swap_columns(force_congruence(R, X.p, _swap_columns(M))), (6, 6),
                           M, R, X.p, like(I))

    def inertia_sub_outer(self, IA, U, Dinv):
        """IA - sum_ab U_a Dinv_ab dot(U_b, .): the articulated-inertia update (Featherstone 7.1);
        through G, the pairing dot(U_b, xi) = U_b . SWAP xi is the plain outer product."""
        M, U = components(IA, 2), [self._components(U_a) for U_a in U]
        return self._stack(_swap_columns(sub_outer(_swap_columns(M), U, Dinv)), (6, 6), M, *U,
                           like(IA))


class DualQuaternionEntries(EntriesMode, DualQuaternion):
    """Dual quaternions in entries mode (``entries.EntriesMode``): twists, wrenches and inertias
    stay ``Entries`` between operations."""


DualQuaternion.entries_class = DualQuaternionEntries


def _swap_columns(M):
    """The 36 entries of M[:, SWAP]."""
    return [M[6 * r + SWAP[c]] for r in range(6) for c in range(6)]


# -- the public functions: leading batch dimensions, components last -------------------------------
def _stack(xp, components, axis=-1):
    """One array from components that broadcast (constants among them)."""
    components = [float(c) if is_constant(c) else c for c in components]
    if len({np.shape(c) for c in components}) > 1:
        components = xp.broadcast_arrays(*components)
    return xp.stack(components, axis=axis)


def _components(a, size, name, xp):
    a = _backend.as_float_array(a, xp, name)
    _backend.check_last_dim(a, size, name, "unit dual quaternion" if size == 8 else
                            "pure dual quaternion [P vector; D vector]")
    return tuple(a[..., k] for k in range(size))


def _apply(kernel, *arguments):
    """``kernel`` on public arrays: ``arguments`` are (array, size, name) triples."""
    xp = _backend.namespace(*(a for a, _, _ in arguments))
    return _stack(xp, kernel(*(_components(a, n, name, xp) for a, n, name in arguments)))


def mul(a, b):
    """The product a b of dual quaternions (..., 8)."""
    return _apply(_mul, (a, 8, "a"), (b, 8, "b"))


def conj(x):
    """The conjugate x* = P(x)* + eps D(x)* (..., 8); the inverse of a unit dual quaternion."""
    return _apply(_conj, (x, 8, "x"))


def dual_conj(x):
    """The dual conjugate P(x) - eps D(x) (..., 8)."""
    return _apply(_dual_conj, (x, 8, "x"))


def Ad(x, h):
    """Ad(x) h = x h x* (..., 6): a twist or wrench h given in frame x, in x's parent frame."""
    return _apply(lambda x, h: _ad(_rotation(x), _translation(x), h), (x, 8, "x"), (h, 6, "h"))


def cross(a, b):
    """(ab - ba)/2 of pure dual quaternions (..., 6): twist x twist, or twist x wrench."""
    return _apply(_cross, (a, 6, "a"), (b, 6, "b"))


def dot(a, b):
    """-(ab + ba)/2 of pure dual quaternions, a dual number (..., 2) [primary, dual]; for a twist
    and a wrench the dual part is the power."""
    return _apply(_dot, (a, 6, "a"), (b, 6, "b"))


def exp(h):
    """The exponential of a pure dual quaternion (..., 6) -> (..., 8); exp(xi t / 2) is the motion
    of a frame under the constant twist xi for time t (body frame: x(t) = x(0) exp(xi t / 2)).

    This is the exponential of the algebra, the screw motion: for h = a + eps b the rotation by
    2|a| about a and the translation come together along one screw axis. DQ Robotics' ``exp``
    (``dqrobotics.exp``) is the decoupled map instead, exp(a) + eps b exp(a): the rotation
    exp(a), then the translation 2b in the base frame (x = r + eps p r / 2 with p = 2b). The two
    agree when b is parallel to a (a pure rotation, a pure translation, or a translation along
    the rotation axis) and differ otherwise; ``exp(log(x))`` and DQ Robotics' ``exp(log(x))``
    both give x back (each with its own ``log``)."""
    xp = _backend.namespace(h)
    return _stack(xp, _exp(_components(h, 6, "h", xp), xp))


def log(x):
    """The logarithm of a unit dual quaternion (..., 8) -> (..., 6), inverse of ``exp`` (principal
    branch: rotation angles up to pi): the screw a + eps b with exp(a + eps b) = x.

    DQ Robotics' ``log`` (``dqrobotics.log``) is the decoupled logarithm, (theta / 2) n +
    eps p / 2 for the rotation by theta about n and the translation p: its primary part is the
    same as here, its dual part is half the translation, whereas here the dual part is the
    screw's (b = p / 2 only when p is parallel to n, or theta = 0)."""
    xp = _backend.namespace(x)
    return _stack(xp, _log(_components(x, 8, "x", xp), xp))


def from_matrix(T):
    """The unit dual quaternion (..., 8) of homogeneous transforms (..., 4, 4)."""
    xp = _backend.namespace(T)
    T = _backend.as_float_array(T, xp, "T")
    if T.shape[-2:] != (4, 4):
        raise ValueError(f"T must have shape (..., 4, 4), got shape {tuple(T.shape)}")
    R = [[T[..., i, j] for j in range(3)] for i in range(3)]
    return _stack(xp, _from_rotation_translation(R, [T[..., i, 3] for i in range(3)], xp))


def to_matrix(x):
    """The homogeneous transforms (..., 4, 4) of unit dual quaternions (..., 8)."""
    xp = _backend.namespace(x)
    rows = _matrix(_components(x, 8, "x", xp))
    return _stack(xp, [_stack(xp, row) for row in rows], axis=-2)


def twist(v):
    """The pure dual quaternion omega + eps v (..., 6) of a public [linear; angular] twist."""
    return _apply(lambda c: tuple(c[k] for k in SWAP), (v, 6, "v"))


def twist_vector(xi):
    """The public [linear; angular] 6-vector of a twist omega + eps v (..., 6)."""
    return twist(xi)


def embed(h):
    """A pure dual quaternion (..., 6) as a dual quaternion (..., 8) with zero scalar parts."""
    return _apply(lambda c: (ZERO,) + tuple(c[:3]) + (ZERO,) + tuple(c[3:]), (h, 6, "h"))
