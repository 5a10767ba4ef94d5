"""Conformal geometric algebra G(4,1): motors, twists, wrenches and the inertia tensor of Löw and
Calinon, "Recursive forward dynamics for serial kinematic chains using CGA" (eqs. 4-19), as an
algebra in which screwdyn's shared recursions run.

Layout (components first, one trailing batch axis, see ``algebra/__init__``):
    motor    M  8 entries   1, e23, e13, e12, e1i, e2i, e3i, e123i  (a ``Pose``, see below)
    twist    V (6, N)       e23, e13, e12, e1i, e2i, e3i            (eq. 7)
    wrench   W (6, N)       e23, e13, e12, e01, e02, e03            (eq. 8)
    inertia  I (6, 6, N)    I[k] = the element I^(e_k), a wrench, for e_k in e23, e13, e12, e01,
                            e02, e03 (eqs. 13-14)
A pose X = T_parent_child is the motor M with which M V ~M (eq. 4) takes a twist or a wrench from
the child frame to the parent frame. A rotation by angle a about the unit axis u is the rotor
R = exp(-a B / 2) = cos(a/2) - sin(a/2) B with B = u_x e23 - u_y e13 + u_z e12; a translation by
t is the translator T = 1 - t ei / 2; a frame at (R, t) is M = T R.

Public 6-vectors map to bivectors with gafro's signs:
    twist  [v; w]  <->  w_x e23 - w_y e13 + w_z e12 + v_x e1i + v_y e2i + v_z e3i
    wrench [f; n]  <->  n_x e23 - n_y e13 + n_z e12 + f_x e01 + f_y e02 + f_z e03
In these coordinates the power p = -V . W (eq. 9) is the plain sum of the products of components.

The products are the closed forms generated from the multiplication table into ``_cga_products``
(``tools/generate_cga_products.py``); this module arranges them. The kernels take sequences of
*entries*: a component is a batch array (N,), a Python float (a component of a model constant) or
``ZERO``, an exact zero that products and sums skip. So the generated expressions, unchanged, do
only the work that a joint's actual motor needs: the rotor of a joint about z has two nonzero
components, a placement without offset has no translator part. A motor stays as entries between
operations, and the 18 images of the bivector blades under its sandwich (``sandwich_images``,
quadratic in the motor) are computed once per pose and shared by the twist and wrench sandwiches
and by the inertia transformation; for a joint's motor, placement times joint motion, they are
the placement's sandwich of the joint motion's images, which keeps both factors' exact zeros.
Twists, wrenches and inertias cross the protocol as arrays, or in the entries mode
(``CGAEntries``, which the recursions use) as ``Entries``, lists of their components.
"""
import numpy as np

from . import Algebra
from . import _cga_products as products
from .entries import (ZERO, EntriesMode, components, constant, like, lin, scalar, sin_cos,
                      sub_outer, unit)


# twist / wrench components from the public [linear; angular] 6-vector: (index, sign)
_FROM_VECTOR = ((3, 1.0), (4, -1.0), (5, 1.0), (0, 1.0), (1, 1.0), (2, 1.0))
_TO_VECTOR = ((3, 1.0), (4, 1.0), (5, 1.0), (0, 1.0), (1, -1.0), (2, 1.0))
REVERSE_SIGNS = (1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 1.0)  # ~M, blade by blade


class Pose:
    """A motor kept as its 8 entries, with the images of the bivector blades under its sandwich
    computed on first use (they serve M V ~M, ~M V M, M W ~M, ~M W M and M * I). A composition
    A B with a constant A (a joint's placement) keeps its factors: its sandwich is A's sandwich
    of B's (see ``images``)."""

    __slots__ = ("motor", "factors", "_images", "_rows")

    def __init__(self, motor, factors=None):
        self.motor, self.factors, self._images, self._rows = tuple(motor), factors, None, None

    @property
    def images(self):
        """The 18 images, from the motor, or for a composition A B as (A B) e_k ~(A B) =
        A (B e_k ~B) ~A: the wrench sandwich of A applied to B's images of the wrench blades
        (the columns of B's sandwich), which keeps the zeros of a constant placement A and of a
        joint rotor B exact (the joint's motor itself has none)."""
        if self._images is None:
            if self.factors is None:
                images = products.sandwich_images(self.motor)
                constant = not any(hasattr(e, "shape") for e in images)
                self._images = _constant(images) if constant else images
            else:
                A, B = self.factors
                columns = [products.sandwich_wrench_from_images(A.images, column)
                           for column in zip(*B.wrench_rows)]
                self._images = tuple(_signed(sign, columns[c][r])
                                     for r, c, sign in _IMAGE_POSITIONS)
        return self._images

    @property
    def wrench_rows(self):
        """The wrench sandwich W -> M W ~M as a 6x6 matrix of entries, row by row: each entry is
        one of the images, up to sign, or zero (``_WRENCH_MATRIX``)."""
        if self._rows is None:
            self._rows = tuple(tuple(ZERO if e is None else _signed(e[1], self.images[e[0]])
                                     for e in row) for row in _WRENCH_MATRIX)
        return self._rows

    def __repr__(self):
        return f"Pose({self.motor})"


class CGA(Algebra):
    name = "cga"

    # -- motors ----------------------------------------------------------------------------
    def pose(self, R, p):
        """The motor T R of a frame with axes R and origin p (numpy constants)."""
        R, p = np.asarray(R, dtype=float), np.asarray(p, dtype=float)
        return Pose(_constant(motor_from_rotation(np, R, p)))

    def identity(self):
        return Pose((1.0,) + (ZERO,) * 7)

    def revolute(self, axis, angle):
        """The rotor exp(-angle B / 2) of a rotation by ``angle`` (N,) about the unit ``axis``."""
        return Pose(rotor(self.xp, _constant(axis), angle))

    def prismatic(self, axis, distance):
        """The translator 1 - distance * axis ei / 2."""
        return Pose(translator([a * distance for a in _constant(axis)]))

    def translation(self, p):
        """The translator 1 - p ei / 2 of a translation by p (3 entries)."""
        return Pose(translator([scalar(e) for e in p]))

    def rotation(self, quat):
        """The rotor of the quaternion (x, y, z, w) (4 entries), normalised."""
        return Pose(rotor_from_quaternion(unit(self.xp, quat)))

    def compose(self, A, B):
        """A B: first B (child in the middle frame), then A (middle frame in the parent). For a
        constant A, the factors give the sandwich images (``Pose.images``)."""
        constant = not any(hasattr(m, "shape") for m in A.motor)
        return Pose(products.geometric_motor_motor(A.motor, B.motor),
                    factors=(A, B) if constant else None)

    def inverse(self, X):
        """~X, the reverse, is the inverse of a unit motor."""
        return Pose(sign * m for sign, m in zip(REVERSE_SIGNS, X.motor))

    def to_matrix(self, X):
        """(4, 4, N) homogeneous matrices."""
        R, t = products.rotation_matrix(X.motor), products.translation(X.motor)
        entries = R[0:3] + t[0:1] + R[3:6] + t[1:2] + R[6:9] + t[2:3] + (ZERO, ZERO, ZERO, 1.0)
        return self._stack(entries, (4, 4), X.motor)

    def from_matrix(self, T):
        """The motor of (4, 4, N) homogeneous matrices."""
        return Pose(motor_from_rotation(self.xp, T[:3, :3], T[:3, 3]))

    # -- twists and wrenches ---------------------------------------------------------------
    def twist(self, v):
        """Twist bivector from a public [linear; angular] 6-vector (6, ...)."""
        return self._xp(v).stack([sign * v[k] for k, sign in _FROM_VECTOR])

    def twist_vector(self, V):
        return self._xp(V).stack([sign * V[k] for k, sign in _TO_VECTOR])

    wrench, wrench_vector = twist, twist_vector  # [f; n] maps like [v; w]

    def act_twist(self, X, V):
        """X V ~X (eq. 4): the twist V of the child frame, in the parent frame."""
        return self._sandwich(products.sandwich_twist_from_images, X, V)

    def inv_act_twist(self, X, V):
        """~X V X: the twist V given in the parent frame, in the child frame."""
        return self._sandwich(products.reverse_sandwich_twist_from_images, X, V)

    def act_wrench(self, X, F):
        """X F ~X: the same sandwich moves wrenches (the adjoint and co-adjoint at once)."""
        return self._sandwich(products.sandwich_wrench_from_images, X, F)

    def inv_act_wrench(self, X, F):
        return self._sandwich(products.reverse_sandwich_wrench_from_images, X, F)

    def _sandwich(self, kernel, X, B):
        B_entries = components(B)
        return self._stack(kernel(X.images, B_entries), (6,), X.motor, B_entries, like(B))

    def cross_motion(self, V, M):
        """Featherstone's V x M (crm) is the commutator M x V (eqs. 10-11)."""
        V, M = components(V), components(M)
        return self._stack(products.commutator_twist_twist(M, V), (6,), V, M)

    def cross_force(self, V, F):
        """Featherstone's V x* F (crf) is -<V x F>, the commutator's wrench part (eqs. 10-11)."""
        V, F = components(V), components(F)
        return -self._stack(products.commutator_twist_wrench_onto_wrench(V, F), (6,), V, F)

    def dot(self, M, F):
        """The power -M . F (eq. 9) of a twist M and a wrench F: here the sum of the products of
        their components."""
        m, f = components(M), components(F)
        return self._stack([_power(m, f)], (), m, f, like(M), like(F))

    # -- the inertia tensor ----------------------------------------------------------------
    def inertia(self, mass, com, inertia_com):
        """The inertia tensor at the body frame: eq. 18 at the centre of mass (axes parallel to
        the body's), moved there by the translator to the centre of mass (eq. 19)."""
        at_com = np.asarray(inertia_elements(float(mass), np.reshape(inertia_com, (3, 3))))
        to_com = Pose(_constant(translator(np.asarray(com, dtype=float))))
        return self.inertia_act(to_com, at_com[..., None])

    def inertia_apply(self, I, V):
        """I[V] = -sum_k (I^k . V) e_k (eq. 15): component k is the power of V against I^k."""
        v, elements = components(V), _elements(I)
        return self._stack([_power(v, element) for element in elements], (6,), v, *elements,
                           like(V), like(I))

    def inertia_act(self, X, I):
        """X * I (eq. 16): move every element with X, regroup the coefficients (the e_j
        coefficient of moved element k becomes the e_k coefficient of element j), move every
        element again. The result is symmetric (its e_i coefficient of element j is its e_j
        coefficient of element i), so the second move computes only the coefficients i >= j,
        each as the row i of the wrench sandwich (``Pose.wrench_rows``) against element j."""
        elements = _elements(I)
        moved = [products.sandwich_wrench_from_images(X.images, I_k) for I_k in elements]
        regrouped = list(zip(*moved))
        rows = X.wrench_rows
        upper = {(j, i): _power(rows[i], regrouped[j]) for j in range(6) for i in range(j, 6)}
        return self._stack([upper[min(j, i), max(j, i)] for j in range(6) for i in range(6)],
                           (6, 6), X.motor, *elements, like(I))

    inertia_variation = Algebra._dot_variation  # components paired by the plain dot product

    def inertia_sub_outer(self, IA, U, Dinv):
        """IA - sum_ab U_a Dinv_ab U_b^T: element IA^k loses sum_a (U_a)_k W_a, with the wrenches
        W_a = sum_b Dinv_ab U_b (the articulated-inertia update, Featherstone 7.1). The result is
        symmetric like IA: only the coefficients i >= k are computed."""
        U, M = [components(U_a) for U_a in U], components(IA, 2)
        return self._stack(sub_outer(M, U, Dinv), (6, 6), M, *U, like(IA))

    # -- entries -> arrays -----------------------------------------------------------------
    def _xp(self, *arrays):
        """numpy for numpy arrays (model constants stay numpy, also while JAX traces), else xp."""
        return np if all(isinstance(a, np.ndarray) for a in arrays) else self.xp


class CGAEntries(EntriesMode, CGA):
    """CGA in entries mode (``entries.EntriesMode``): twists, wrenches and inertia tensors stay
    ``Entries`` between operations, so nothing is stacked and the zeros of the joints' motion
    subspaces survive the recursions' arithmetic."""


CGA.entries_class = CGAEntries


def _elements(I):
    """The six elements of an inertia tensor (6, 6, N) or ``Entries``, each as entries."""
    e = components(I, 2)
    return [e[6 * k:6 * k + 6] for k in range(6)]


def _constant(values):
    """Entries of a constant (an array or entries): Python floats, exact zeros as ZERO."""
    flat = values if isinstance(values, tuple) else np.ravel(values)
    return tuple(v if v is ZERO else constant(v) for v in flat)


def _wrench_matrix():
    """Where the sandwich images stand in the 6x6 matrix of the wrench sandwich: per entry
    (image, sign), or None for a zero, read off ``sandwich_wrench_from_images`` applied to the
    blades with the images numbered 1 to 18 (each entry is one image, up to sign)."""
    numbers = tuple(float(k + 1) for k in range(18))
    columns = [products.sandwich_wrench_from_images(numbers, tuple(1.0 if k == c else ZERO
                                                                   for k in range(6)))
               for c in range(6)]
    return tuple(tuple(None if column[r] is ZERO else
                       (int(abs(column[r])) - 1, 1.0 if column[r] > 0 else -1.0)
                       for column in columns) for r in range(6))


_WRENCH_MATRIX = _wrench_matrix()
# (row, column, sign) of one place of each image in the matrix
_IMAGE_POSITIONS = tuple(min((r, c, e[1]) for r, row in enumerate(_WRENCH_MATRIX)
                             for c, e in enumerate(row) if e is not None and e[0] == k)
                         for k in range(18))


def _signed(sign, x):
    """sign * x for a sign +-1.0, without a product for +1."""
    return x if sign > 0 else -x


def _power(V, W):
    """-V . W (eq. 9) for entries of a twist V and a wrench W: the sum of their products."""
    return lin(zip(V, W))


# -- motors from their parameters (sequences of entries or component arrays, any backend) ---
def rotor(xp, axis, angle):
    """exp(-angle B / 2) for B = u_x e23 - u_y e13 + u_z e12, the unit rotation about ``axis``."""
    s, c = sin_cos(xp, angle / 2)
    return (c, -axis[0] * s, axis[1] * s, -axis[2] * s, ZERO, ZERO, ZERO, ZERO)


def translator(t):
    """1 - t ei / 2 = 1 - (t_1 e1i + t_2 e2i + t_3 e3i) / 2."""
    return (1.0, ZERO, ZERO, ZERO, -0.5 * t[0], -0.5 * t[1], -0.5 * t[2], ZERO)


def rotor_from_quaternion(quat):
    """The rotor of the unit quaternion (x, y, z, w): w - x e23 + y e13 - z e12."""
    x, y, z, w = quat[0], quat[1], quat[2], quat[3]
    return (w, -x, y, -z, ZERO, ZERO, ZERO, ZERO)


def motor_from_rotation(xp, R, p):
    """T R for rotation matrices R (3, 3, ...) and translations p (3, ...)."""
    return products.geometric_motor_motor(translator(p),
                                          rotor_from_quaternion(quaternion_from_matrix(xp, R)))


def quaternion_from_matrix(xp, R):
    """Unit quaternion (x, y, z, w) of rotation matrices R (3, 3, ...), by Shepperd's method:
    the largest of |w|, |x|, |y|, |z| comes from the diagonal, the others from off-diagonal
    differences, so that no precision is lost near any rotation."""
    trace = R[0, 0] + R[1, 1] + R[2, 2]
    candidates = [  # 4 * pivot * (x, y, z, w) for the pivots w, x, y, z
        (R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1], 1 + trace),
        (1 + 2 * R[0, 0] - trace, R[0, 1] + R[1, 0], R[0, 2] + R[2, 0], R[2, 1] - R[1, 2]),
        (R[0, 1] + R[1, 0], 1 + 2 * R[1, 1] - trace, R[1, 2] + R[2, 1], R[0, 2] - R[2, 0]),
        (R[0, 2] + R[2, 0], R[1, 2] + R[2, 1], 1 + 2 * R[2, 2] - trace, R[1, 0] - R[0, 1]),
    ]
    best = xp.argmax(xp.stack([trace, R[0, 0], R[1, 1], R[2, 2]]), axis=0)
    quat = candidates[0]
    for k in (1, 2, 3):
        quat = tuple(xp.where(best == k, c, q) for c, q in zip(candidates[k], quat))
    norm = xp.sqrt(sum(c * c for c in quat))
    return tuple(c / norm for c in quat)


# -- the inertia tensor --------------------------------------------------------------------
def inertia_elements(mass, I):
    """The six elements I^(e23), I^(e13), I^(e12), I^(e01), I^(e02), I^(e03) of eq. 18 for a
    mass and a rotational inertia I (3x3) about the centre of mass, as rows of wrench
    components (e23, e13, e12, e01, e02, e03); the signs come from the metric of CGA."""
    z = 0 * mass
    return ((I[0][0], -I[0][1], I[0][2], z, z, z),
            (-I[0][1], I[1][1], -I[1][2], z, z, z),
            (I[0][2], -I[1][2], I[2][2], z, z, z),
            (z, z, z, mass, z, z),
            (z, z, z, z, mass, z),
            (z, z, z, z, z, mass))
