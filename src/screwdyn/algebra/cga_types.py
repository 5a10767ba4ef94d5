"""Conformal geometric algebra G(4,1) for users: typed, batched multivectors of the grades that
rigid-body dynamics needs, after Löw and Calinon (eqs. 4-19). Exported as ``screwdyn.cga``.

    from screwdyn import cga
    M = cga.translator([0.1, 0, 0]) * cga.rotor([0, 0, 1], np.pi / 2)   # a motor, M = T R
    V = cga.Twist.from_vector([1, 0, 0, 0, 0, 2])     # [linear; angular], a bivector
    M.apply(V)                                         # M V ~M (eq. 4), the twist in the parent
    I = cga.InertiaTensor.from_mass(2.0, com=[0, 0, 0.1], inertia=np.diag([0.1, 0.1, 0.02]))
    M.apply(I)(M.apply(V))                             # = M.apply(I(V)) (eq. 17)

Objects carry leading batch dimensions: a Motor's ``coefficients`` have shape (..., 8), on numpy
or JAX (they are pytrees, so they cross ``jax.jit`` and ``jax.vmap``). Blades and their order:

    Motor            1, e23, e13, e12, e1i, e2i, e3i, e123i    rotor times translator
    Twist            e23, e13, e12, e1i, e2i, e3i              eq. 7
    Wrench           e23, e13, e12, e01, e02, e03              eq. 8
    Bivector         the twist and wrench blades and e0i       (a commutator's result)
    EvenMultivector  1, the 10 bivectors, the 5 quadvectors    (any other product's result)

e0 is the origin, ei infinity (e0 . ei = -1), e1i = e1 ^ ei, e123i = e1 ^ e2 ^ e3 ^ ei. Operators:
``*`` geometric product (or scaling by numbers), ``^`` outer, ``|`` inner (Hestenes', as in
gafro), ``.commutator`` the commutator product X x Y = (XY - YX) / 2 (eq. 11), ``~`` reverse. They
are the closed forms generated from the multiplication table (``_cga_products``), defined between
motors, twists and wrenches. Public 6-vectors map with gafro's signs (see ``algebra.cga``).

``exp`` is the screw exponential of a twist bivector (the exponential of the algebra) and ``log``
its inverse. gafro's decoupled chart, ``Motor(MotorGenerator)`` = translate by t then rotate, is
not offered: write it as ``translator(t) * rotor(axis, angle)``. A frame moving with the constant
twist V (in its own frame) for a time t moves by ``exp(-t * V / 2)``.
"""
import sys

import numpy as np

from .. import _backend
from . import _cga_products as products
from .cga import (inertia_elements, quaternion_from_matrix, rotor_from_quaternion,
                  _FROM_VECTOR, _TO_VECTOR)
from .cga import rotor as _rotor
from .cga import translator as _translator

UNIT_TOLERANCE = 1e-8


class Multivector:
    """A batch of multivectors on the blades ``blades``: ``coefficients`` (..., len(blades))."""

    blades = ()
    __slots__ = ("coefficients",)

    def __init__(self, coefficients):
        xp = _backend.namespace(coefficients)
        a = _backend.as_float_array(coefficients, xp, type(self).__name__)
        k = len(self.blades)
        if a.ndim < 1 or a.shape[-1] != k:
            raise ValueError(f"a {type(self).__name__} has {k} components "
                             f"({', '.join(self.blades)}), so its coefficients have shape "
                             f"(..., {k}); got shape {tuple(a.shape)}")
        self.coefficients = a
        _register_pytrees()

    @classmethod
    def _trusted(cls, coefficients):
        out = object.__new__(cls)
        out.coefficients = coefficients
        _register_pytrees()
        return out

    @classmethod
    def _from_components(cls, blades, components):
        """From component arrays on ``blades`` (a subset of cls.blades; the others are zero)."""
        given = dict(zip(blades, components))
        xp = _backend.namespace(*given.values())
        shape = np.broadcast_shapes(*(np.shape(c) for c in given.values()))
        zero = xp.zeros(shape)
        return cls._trusted(xp.stack([xp.broadcast_to(given.get(b, zero), shape)
                                      for b in cls.blades], axis=-1))

    # -- components ----------------------------------------------------------------------
    @property
    def shape(self):
        """The batch shape."""
        return tuple(self.coefficients.shape[:-1])

    @property
    def xp(self):
        return _backend.namespace(self.coefficients)

    def components(self):
        """The component arrays (batch-shaped), in the order of ``blades``."""
        return tuple(self.xp.moveaxis(self.coefficients, -1, 0))

    def __getitem__(self, key):
        """``X["e12"]``: a component; anything else indexes the batch."""
        if isinstance(key, str):
            if key not in self.blades:
                raise KeyError(f"{key!r} is not a blade of a {type(self).__name__} "
                               f"({', '.join(self.blades)})")
            return self.coefficients[..., self.blades.index(key)]
        key = key if isinstance(key, tuple) else (key,)
        return self._trusted(self.coefficients[key + (slice(None),)])

    def cast(self, cls):
        """The same multivector as a ``cls``: exact, or ValueError if it has nonzero components
        on blades that ``cls`` lacks (see ``project`` to drop them)."""
        nonzero = [b for b in self.blades
                   if b not in cls.blades and np.any(np.asarray(_concrete(self[b])) != 0)]
        if nonzero:
            raise ValueError(f"this {type(self).__name__} is not a {cls.__name__}: it has "
                             f"nonzero components on {', '.join(nonzero)}")
        return self.project(cls)

    def project(self, cls):
        """The part of the multivector on the blades of ``cls``, e.g. <V x W>_wrench."""
        kept = [b for b in cls.blades if b in self.blades]
        return cls._from_components(kept, [self[b] for b in kept])

    # -- arithmetic ----------------------------------------------------------------------
    def __add__(self, other):
        if not isinstance(other, Multivector):
            return NotImplemented
        _batch(self, other)
        cls = _smallest_type(set(self.blades) | set(other.blades))
        return cls._trusted(self.project(cls).coefficients + other.project(cls).coefficients)

    def __sub__(self, other):
        if not isinstance(other, Multivector):
            return NotImplemented
        return self + (-other)

    def __neg__(self):
        return self._trusted(-self.coefficients)

    def __mul__(self, other):
        """The geometric product with a Multivector, or scaling by numbers (batch-shaped)."""
        if isinstance(other, Multivector):
            return _product("geometric", self, other)
        if isinstance(other, InertiaTensor):
            return NotImplemented
        return self._trusted(self.coefficients * self.xp.asarray(other)[..., None])

    def __rmul__(self, other):
        return self * other

    def __truediv__(self, other):
        return self * (1 / self.xp.asarray(other))

    def __xor__(self, other):
        return _product("outer", self, other)

    def __or__(self, other):
        return _product("inner", self, other)

    def commutator(self, other):
        """X x Y = (XY - YX) / 2 (eq. 11); for twists, the Lie bracket (eq. 10)."""
        if not isinstance(other, Multivector):
            raise ValueError(f"the commutator needs a multivector, got {type(other).__name__}")
        return _product("commutator", self, other)

    def __invert__(self):
        """The reverse ~X: the sign (-1)^(k(k-1)/2) on each blade of grade k."""
        signs = np.array([-1.0 if _grade(b) in (2, 3) else 1.0 for b in self.blades])
        return self._trusted(self.coefficients * signs)

    def __repr__(self):
        if self.shape:
            return f"{type(self).__name__}(batch shape {self.shape})"
        text = ""
        for b, c in zip(self.blades, np.asarray(_concrete(self.coefficients))):
            if c:
                term = f"{abs(c):.6g}" + ("" if b == "1" else f" {b}")
                sign = "-" if c < 0 else "+"
                text = f"{text} {sign} {term}" if text else ("-" if c < 0 else "") + term
        return f"{type(self).__name__}({text or '0'})"

    # -- JAX pytree ----------------------------------------------------------------------
    def tree_flatten(self):
        return (self.coefficients,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls._trusted(children[0])


class Twist(Multivector):
    """A twist bivector (eq. 7): angular velocity on e23, e13, e12, linear velocity on e1i, e2i,
    e3i. Twists are the Lie algebra of the motors: ``exp`` maps them to motors."""

    blades = products.TWIST
    __slots__ = ()

    @classmethod
    def from_vector(cls, v):
        """From public [linear; angular] 6-vectors (..., 6) (Pinocchio's Motion layout)."""
        return cls(_from_vector(v, "twist"))

    def vector(self):
        """The public [linear; angular] 6-vectors (..., 6)."""
        return _to_vector(self)

    def ad(self):
        """The adjoint matrix of the Lie algebra, ad_V (..., 6, 6), on Twist coefficients: column
        j is the bracket of V with the blade e_j, X x V (eqs. 10-11; Featherstone's v x, crm)."""
        return _matrix_of(lambda X: X.commutator(self).project(Twist), Twist, self)

    def coad(self):
        """The co-adjoint matrix (..., 6, 6) on Wrench coefficients: W -> -<V x W>_wrench, the
        force cross product (Featherstone's v x*, crf); with the pairing p = -V . W it is
        -ad_V^T."""
        return _matrix_of(lambda W: -self.commutator(W).project(Wrench), Wrench, self)


class Wrench(Multivector):
    """A wrench bivector (eq. 8): torque on e23, e13, e12, force on e01, e02, e03. The power of
    a twist V against a wrench W is -(V | W) (eq. 9)."""

    blades = products.WRENCH
    __slots__ = ()

    @classmethod
    def from_vector(cls, f):
        """From public [force; torque] 6-vectors (..., 6) (Pinocchio's Force layout)."""
        return cls(_from_vector(f, "wrench"))

    def vector(self):
        """The public [force; torque] 6-vectors (..., 6)."""
        return _to_vector(self)


class Bivector(Multivector):
    """Any bivector of the twist and wrench blades and e0i."""

    blades = products.BIVECTOR
    __slots__ = ()


class EvenMultivector(Multivector):
    """Scalar, bivector and quadvector parts: the result of products between the types above."""

    blades = products.EVENMULTIVECTOR
    __slots__ = ()


class Motor(Multivector):
    """A motor M = T R: a rigid motion, applied to any of these objects by M X ~M (eq. 4).
    Products of motors are motors; a unit motor (M ~M = 1) is required wherever M stands for a
    rigid motion (``apply``, ``inverse``, ``matrix``, ``log``)."""

    blades = products.MOTOR
    __slots__ = ()

    @classmethod
    def identity(cls, shape=()):
        return cls(np.broadcast_to(np.eye(1, 8)[0], tuple(shape) + (8,)))

    @classmethod
    def from_matrix(cls, T):
        """From homogeneous matrices (..., 4, 4); ValueError unless they are rigid motions."""
        xp = _backend.namespace(T)
        T = _backend.as_float_array(T, xp, "T")
        if T.ndim < 2 or tuple(T.shape[-2:]) != (4, 4):
            raise ValueError(f"T must have shape (..., 4, 4), got shape {tuple(T.shape)}")
        R = T[..., :3, :3]
        _check_rotation(R, T)
        R = xp.moveaxis(xp.moveaxis(R, -1, 0), -1, 0)  # (3, 3, ...)
        return cls._from_components(cls.blades, products.geometric_motor_motor(
            _translator(xp.moveaxis(T[..., :3, 3], -1, 0)),
            rotor_from_quaternion(quaternion_from_matrix(xp, R))))

    def matrix(self):
        """The homogeneous matrices (..., 4, 4) of a unit motor."""
        self._require_unit("matrix")
        xp, m = self.xp, self.components()
        R, t = products.rotation_matrix(m), products.translation(m)
        zero = xp.zeros_like(R[0])
        rows = [R[0:3] + t[0:1], R[3:6] + t[1:2], R[6:9] + t[2:3], (zero, zero, zero, zero + 1)]
        return xp.stack([xp.stack(row, axis=-1) for row in rows], axis=-2)

    def inverse(self):
        """~M, the inverse of a unit motor."""
        self._require_unit("inverse")
        return ~self

    def apply(self, X):
        """M X ~M (eq. 4) for a Twist, Wrench or Motor X; M * I (eq. 16) for an InertiaTensor."""
        self._require_unit("apply")
        if isinstance(X, (Twist, Wrench)):
            _batch(self, X)
            sandwich = products.sandwich_twist if isinstance(X, Twist) else products.sandwich_wrench
            return type(X)._from_components(X.blades, sandwich(self.components(), X.components()))
        if isinstance(X, Motor):
            return self * X * ~self
        if isinstance(X, InertiaTensor):
            return X._moved_by(self)
        raise ValueError(f"a motor applies to a Twist, Wrench, Motor or InertiaTensor, "
                         f"not to a {type(X).__name__}")

    def adjoint(self):
        """The adjoint matrix Ad_M (..., 6, 6) on Twist coefficients: M V ~M = Ad_M V, column j
        the image M e_j ~M of blade e_j (eq. 4 as a matrix; Pinocchio's SE3.action in blade
        coordinates)."""
        return _matrix_of(self.apply, Twist, self)

    def coadjoint(self):
        """The co-adjoint matrix (..., 6, 6) on Wrench coefficients: the same sandwich M W ~M
        moves wrenches (eqs. 7-8), column j the image of blade e_j; with the pairing
        p = -V . W it is Ad_M^-T (Pinocchio's SE3.dualAction in blade coordinates)."""
        return _matrix_of(self.apply, Wrench, self)

    def log(self):
        """The twist bivector B with exp(B) = M or -M (the same rigid motion): the screw
        logarithm, see ``log``."""
        self._require_unit("log")
        return log(self)

    def is_unit(self, tolerance=UNIT_TOLERANCE):
        """Whether M ~M = 1 within ``tolerance`` (batch-shaped booleans)."""
        return _unit_defect(self) <= tolerance

    def _require_unit(self, what):
        if _is_traced(self.coefficients):
            return
        defect = np.asarray(_unit_defect(self))
        if defect.size and not np.all(defect <= UNIT_TOLERANCE):
            raise ValueError(f"Motor.{what} needs a unit motor (M ~M = 1), but M ~M differs from 1 "
                             f"by {defect.max():.3g}; normalise it or build it with rotor, "
                             "translator, exp or from_matrix")


class InertiaTensor:
    """The inertia tensor of eqs. 13-14: six wrench-valued elements I^(e_k), one for each wrench
    blade e_k in e23, e13, e12, e01, e02, e03; ``elements`` (..., 6, 6) holds element k's wrench
    components in row k. ``I(V)`` is the wrench I[V] of a twist (eq. 15), ``M.apply(I)`` the
    inertia seen from another frame (eq. 16), and ``M.apply(I(V)) == M.apply(I)(M.apply(V))``
    (eq. 17)."""

    __slots__ = ("elements",)
    blades = products.WRENCH

    def __init__(self, elements):
        xp = _backend.namespace(elements)
        a = _backend.as_float_array(elements, xp, "InertiaTensor")
        if a.ndim < 2 or tuple(a.shape[-2:]) != (6, 6):
            raise ValueError("an InertiaTensor has six wrench-valued elements: elements of shape "
                             f"(..., 6, 6), got shape {tuple(a.shape)}")
        self.elements = a
        _register_pytrees()

    @classmethod
    def from_mass(cls, mass, com=(0.0, 0.0, 0.0), inertia=None, rotation=None):
        """The inertia tensor at a link frame (eq. 19) of a body of ``mass`` whose centre of mass
        is at ``com`` and whose rotational inertia about the centre of mass is ``inertia``
        (3x3), given in axes rotated by ``rotation`` (3x3, e.g. a URDF inertial rpy) from the
        link's: eq. 18 in the inertial frame, moved by the motor of that frame."""
        xp = _backend.namespace(mass, com, inertia, rotation)
        mass = _backend.as_float_array(mass, xp, "mass")
        I = xp.zeros(mass.shape + (3, 3)) if inertia is None else \
            _backend.as_float_array(inertia, xp, "inertia")
        if tuple(I.shape[-2:]) != (3, 3):
            raise ValueError(f"inertia must have shape (..., 3, 3), got {tuple(I.shape)}")
        if not _is_traced(I) and not np.allclose(np.asarray(I), np.swapaxes(np.asarray(I), -1, -2)):
            raise ValueError("inertia must be a symmetric 3x3 matrix")
        if not _is_traced(mass) and np.any(np.asarray(mass) < 0):
            raise ValueError(f"mass must not be negative, got {np.asarray(mass)}")
        rows = [[xp.asarray(e) for e in row]
                for row in inertia_elements(mass, [[I[..., j, k] for k in range(3)]
                                                   for j in range(3)])]
        shape = np.broadcast_shapes(*(np.shape(e) for row in rows for e in row))
        elements = xp.stack([xp.stack([xp.broadcast_to(e, shape) for e in row], axis=-1)
                             for row in rows], axis=-2)
        frame = translator(com)
        if rotation is not None:
            frame = frame * Motor.from_matrix(_homogeneous(xp, rotation))
        return frame.apply(cls(elements))

    @property
    def shape(self):
        return tuple(self.elements.shape[:-2])

    def __getitem__(self, blade):
        """The element I^(blade), a Wrench, e.g. ``I["e01"]``."""
        return Wrench._trusted(self.elements[..., self.blades.index(blade), :])

    def __call__(self, V):
        """I[V] = -sum_k (I^k . V) e_k (eq. 15), the wrench of a twist (momentum, or force from
        an acceleration)."""
        if not isinstance(V, Twist):
            raise ValueError("an inertia tensor maps a Twist to a Wrench, not a "
                             f"{type(V).__name__}")
        _batch(self, V)
        xp = _backend.namespace(self.elements, V.coefficients)
        return Wrench._trusted(xp.einsum("...ki,...i->...k", self.elements, V.coefficients))

    def articulated(self, S):
        """The articulated-body inertia this body presents to its parent through a joint with
        axis S (a Twist) or axes S (a sequence of Twists): I - U D^-1 U^T with the wrenches
        U_a = I[S_a] and D_ab = -(S_a . U_b) (Featherstone's Ia, RBDA eq. 7.23; the rank-k
        update of the six inertia elements). ``self`` is the body's articulated inertia IA (its
        own inertia for a leaf, plus its children's ``M.apply(Ia)``); the result transmits no
        force along the axes: ``Ia(S)`` is zero."""
        axes = [S] if isinstance(S, Twist) else list(S)
        if not axes or not all(isinstance(a, Twist) for a in axes):
            raise ValueError("articulated needs the joint's axis as a Twist, or its axes as a "
                             "sequence of Twists")
        xp = _backend.namespace(self.elements, *(a.coefficients for a in axes))
        S_m = xp.stack([xp.broadcast_to(a.coefficients, np.broadcast_shapes(
            *(b.shape for b in axes)) + (6,)) for a in axes], axis=-1)  # (..., 6, k)
        U = self.elements @ S_m  # wrench coefficients (..., 6, k)
        D = xp.swapaxes(S_m, -1, -2) @ U  # -(S . U): the power pairing is the plain product
        return InertiaTensor._trusted(self.elements - U @ xp.linalg.solve(
            D, xp.swapaxes(U, -1, -2)))

    def inverse(self):
        """The inverse inertia map (``InverseInertia``): the twist V with I[V] = W for a wrench W
        (the acceleration a free body gains from a force, the velocity from a momentum).
        ValueError for a singular tensor (a massless body)."""
        xp = _backend.namespace(self.elements)
        if not _is_traced(self.elements):
            cond = np.linalg.cond(np.asarray(self.elements)) if self.elements.size else 1.0
            if not np.all(np.asarray(cond) < 1e14):
                raise ValueError("the inertia tensor is singular (a body without mass or "
                                 "rotational inertia): it has no inverse")
        return InverseInertia(xp.linalg.inv(self.elements))

    def __add__(self, other):
        """The inertia of two bodies together (same frame)."""
        if not isinstance(other, InertiaTensor):
            return NotImplemented
        _batch(self, other)
        return InertiaTensor._trusted(self.elements + other.elements)

    def matrix(self):
        """The 6x6 spatial inertias (..., 6, 6) in the public layout: [force; torque] =
        matrix @ [linear; angular] (Featherstone's, Pinocchio's)."""
        P = np.zeros((6, 6))
        for row, (k, sign) in enumerate(_FROM_VECTOR):
            P[row, k] = sign
        return P.T @ self.elements @ P

    def _moved_by(self, M):
        """M * I (eq. 16): move every element with M, regroup the coefficients (the e_j
        coefficient of moved element k becomes the e_k coefficient of element j), move again."""
        _batch(M, self)
        xp = _backend.namespace(M.coefficients, self.elements)
        images = products.sandwich_images(M.components())
        elements = [tuple(xp.moveaxis(self.elements[..., k, :], -1, 0)) for k in range(6)]
        moved = [products.sandwich_wrench_from_images(images, I_k) for I_k in elements]
        final = [products.sandwich_wrench_from_images(images, J_j) for J_j in zip(*moved)]
        shape = np.broadcast_shapes(*(np.shape(c) for J in final for c in J))
        return InertiaTensor._trusted(xp.stack([xp.stack([xp.broadcast_to(c, shape) for c in J],
                                                         axis=-1) for J in final], axis=-2))

    @classmethod
    def _trusted(cls, elements):
        out = object.__new__(cls)
        out.elements = elements
        _register_pytrees()
        return out

    def __repr__(self):
        return f"InertiaTensor(batch shape {self.shape})" if self.shape else \
            f"InertiaTensor(mass {float(_concrete(self.elements[3, 3])):.6g})"

    def tree_flatten(self):
        return (self.elements,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls._trusted(children[0])


class InverseInertia:
    """The inverse of an inertia tensor: ``elements`` (..., 6, 6) map Wrench coefficients to
    Twist coefficients, ``Iinv(W)`` is the Twist V with I[V] = W."""

    __slots__ = ("elements",)

    def __init__(self, elements):
        self.elements = elements

    @property
    def shape(self):
        return tuple(self.elements.shape[:-2])

    def __call__(self, W):
        if not isinstance(W, Wrench):
            raise ValueError("an inverse inertia maps a Wrench to a Twist, not a "
                             f"{type(W).__name__}")
        xp = _backend.namespace(self.elements, W.coefficients)
        return Twist._trusted(xp.einsum("...ki,...i->...k", self.elements, W.coefficients))

    def matrix(self):
        """The 6x6 inverse spatial inertias (..., 6, 6) in the public layout: [linear; angular]
        = matrix @ [force; torque]."""
        P = np.zeros((6, 6))
        for row, (k, sign) in enumerate(_FROM_VECTOR):
            P[row, k] = sign
        return P.T @ self.elements @ P

    def __repr__(self):
        return f"InverseInertia(batch shape {self.shape})"

    def tree_flatten(self):
        return (self.elements,), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0])


# -- constructors and the exponential map ---------------------------------------------------
def rotor(axis, angle):
    """The rotor exp(-angle B / 2) = cos(angle/2) - sin(angle/2) B of a rotation by ``angle``
    (...) about the unit ``axis`` (..., 3), with B = u_x e23 - u_y e13 + u_z e12."""
    xp = _backend.namespace(axis, angle)
    axis = _backend.as_float_array(axis, xp, "axis")
    angle = _backend.as_float_array(angle, xp, "angle")
    _backend.check_last_dim(axis, 3, "axis", "a unit vector")
    norm = np.asarray(_concrete_or(xp.sqrt((axis * axis).sum(axis=-1)), 1.0))
    if not np.allclose(norm, 1.0, atol=1e-9):
        raise ValueError(f"rotor axis must be a unit vector, got norm {norm}")
    components = _rotor(xp, tuple(xp.moveaxis(axis, -1, 0)), angle)
    return Motor._from_components(Motor.blades[:4], components[:4])


def translator(t):
    """The translator 1 - t ei / 2 of a translation t (..., 3)."""
    xp = _backend.namespace(t)
    t = _backend.as_float_array(t, xp, "t")
    _backend.check_last_dim(t, 3, "t", "a translation")
    components = _translator(tuple(xp.moveaxis(t, -1, 0)))
    return Motor._from_components(("1", "e1i", "e2i", "e3i"),
                                  (xp.ones(t.shape[:-1]),) + components[4:7])


def exp(B):
    """The motor exp(B) of a twist bivector B: the screw exponential. With theta^2 = -B . B and
    B ^ B = delta I_inf, where I_inf = e123i commutes with B and squares to zero, B^2 is minus
    the square of the dual angle theta - delta I_inf / (2 theta), and
        exp(B) = cos theta + sinc theta B + delta / 2 (sinc theta + f(theta) B) I_inf,
    with f(theta) = (sin theta - theta cos theta) / theta^3."""
    if not isinstance(B, Twist):
        raise ValueError("exp takes a Twist (the bivectors e23, e13, e12, e1i, e2i, e3i that "
                         f"generate rigid motions), got a {type(B).__name__}")
    xp, b = B.xp, B.components()
    cos, sinc, f = _trigonometry(xp, -products.inner_twist_twist(b, b))
    delta = products.outer_twist_twist(b, b)[0]
    dual = products.times_e123i(b)  # B I_inf: the rotation part moved onto e1i, e2i, e3i
    components = ([cos] + [sinc * c for c in b[:3]]
                  + [sinc * c + delta / 2 * f * d for c, d in zip(b[3:], dual)]
                  + [delta / 2 * sinc])
    return Motor._from_components(Motor.blades, components)


def log(M):
    """The twist bivector B with exp(B) = M (or -M, the same rigid motion) for a unit motor M,
    with a rotation part of angle at most pi/2 (a turn of at most pi): the inverse of ``exp``,
    read off its formula from the scalar, rotation, translation and e123i components."""
    if not isinstance(M, Motor):
        raise ValueError(f"log takes a Motor, got a {type(M).__name__}")
    M._require_unit("log")
    xp = M.xp
    sign = xp.where(M["1"] < 0, -1.0, 1.0)  # M and -M are the same motion: take scalar >= 0
    m = [sign * c for c in M.components()]
    sin_sq = m[1] ** 2 + m[2] ** 2 + m[3] ** 2
    rotating = sin_sq > 0
    theta = xp.arctan2(xp.sqrt(xp.where(rotating, sin_sq, 1.0)) * rotating, m[0])
    _, sinc, f = _trigonometry(xp, theta * theta)
    rotation = [c / sinc for c in m[1:4]]
    delta = 2 * m[7] / sinc
    dual = products.times_e123i(rotation + [0 * theta] * 3)
    translation = [(c - delta / 2 * f * d) / sinc for c, d in zip(m[4:7], dual)]
    return Twist._from_components(Twist.blades, rotation + translation)


# -- helpers --------------------------------------------------------------------------------
def _matrix_of(linear_map, cls, like):
    """The matrix (..., 6, 6) of a linear map on ``cls`` coefficients: column j the map of blade
    j (batch shape that of ``like``)."""
    xp, shape = like.xp, like.shape
    columns = [linear_map(cls._trusted(xp.broadcast_to(xp.asarray(np.eye(6)[j]), shape + (6,))))
               .coefficients for j in range(6)]
    return xp.stack(columns, axis=-1)


def _product(op, a, b):
    if not isinstance(b, Multivector):
        return NotImplemented
    key = (op, type(a).__name__, type(b).__name__)
    if key not in products.PRODUCTS:
        raise TypeError(f"the {op} product of a {key[1]} and a {key[2]} is not generated: "
                        "products are generated between motors, twists and wrenches")
    _batch(a, b)
    kernel, result, blades = products.PRODUCTS[key]
    components = kernel(a.components(), b.components())
    return components if result == "scalar" else TYPES[result]._from_components(blades, components)


def _batch(a, b):
    try:
        return np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"batch shapes do not broadcast: {type(a).__name__} {a.shape} and "
                         f"{type(b).__name__} {b.shape}") from None


def _smallest_type(blades):
    for cls in (Twist, Wrench, Motor, Bivector, EvenMultivector):
        if blades <= set(cls.blades):
            return cls
    raise ValueError(f"no multivector type holds the blades {sorted(blades)}")


def _grade(blade):
    return 0 if blade == "1" else len(blade) - 1


def _from_vector(v, what):
    xp = _backend.namespace(v)
    v = _backend.as_float_array(v, xp, what)
    _backend.check_last_dim(v, 6, what, "[linear; angular]" if what == "twist" else
                            "[force; torque]")
    return xp.stack([sign * v[..., k] for k, sign in _FROM_VECTOR], axis=-1)


def _to_vector(X):
    return X.xp.stack([sign * X.coefficients[..., k] for k, sign in _TO_VECTOR], axis=-1)


def _unit_defect(M):
    """|M ~M - 1|: the scalar's distance to 1 and the e123i part relative to the translation."""
    m = M.components()
    square = products.geometric_motor_motor(m, (~M).components())
    xp = M.xp
    scale = 1 + xp.sqrt(sum(c * c for c in m[4:7]))
    return xp.maximum(xp.abs(square[0] - 1), xp.abs(square[7]) / scale)


def _check_rotation(R, T):
    if _is_traced(R):
        return
    Rn, Tn = np.asarray(R), np.asarray(T)
    orthogonal = np.abs(Rn @ np.swapaxes(Rn, -1, -2) - np.eye(3)).max(initial=0) < 1e-9
    proper = np.all(np.linalg.det(Rn) > 0) if Rn.size else True
    bottom = np.allclose(Tn[..., 3, :], [0, 0, 0, 1]) if Tn.size else True
    if not (orthogonal and proper and bottom):
        raise ValueError("T is not a rigid motion: its rotation block must be orthonormal with "
                         "determinant +1 and its last row (0, 0, 0, 1)")


def _homogeneous(xp, R):
    R = _backend.as_float_array(R, xp, "rotation")
    T = xp.concatenate([R, xp.zeros(R.shape[:-1] + (1,))], axis=-1)
    bottom = xp.broadcast_to(xp.asarray([0.0, 0, 0, 1]), R.shape[:-2] + (1, 4))
    return xp.concatenate([T, bottom], axis=-2)


def _trigonometry(xp, theta_sq):
    """cos theta, sin theta / theta and (sin theta - theta cos theta) / theta^3 from theta^2,
    by their series near 0 (accurate there, and safe for autodiff)."""
    small = theta_sq < 0.05 ** 2
    theta = xp.sqrt(xp.where(small, 1.0, theta_sq))
    s, c, t2 = xp.sin(theta), xp.cos(theta), theta_sq
    return (xp.where(small, 1 - t2 / 2 + t2 ** 2 / 24 - t2 ** 3 / 720 + t2 ** 4 / 40320, c),
            xp.where(small, 1 - t2 / 6 + t2 ** 2 / 120 - t2 ** 3 / 5040, s / theta),
            xp.where(small, 1 / 3 - t2 / 30 + t2 ** 2 / 840 - t2 ** 3 / 45360,
                     (s - theta * c) / theta ** 3))


def _is_traced(x):
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, jax.core.Tracer)


def _concrete(x):
    if _is_traced(x):
        raise ValueError("this needs concrete values; it cannot run under jax.jit")
    return x


def _concrete_or(x, default):
    """x, or ``default`` while JAX traces (checks of values are skipped then)."""
    return default if _is_traced(x) else x


_REGISTERED = []


def _register_pytrees():
    """Register the types as JAX pytrees, once JAX is imported (so they cross jax.jit)."""
    if _REGISTERED or "jax" not in sys.modules:
        return
    from jax import tree_util

    for cls in (Twist, Wrench, Bivector, EvenMultivector, Motor, InertiaTensor, InverseInertia):
        tree_util.register_pytree_node_class(cls)
    _REGISTERED.append(True)


TYPES = {cls.__name__: cls for cls in (Twist, Wrench, Bivector, EvenMultivector, Motor)}

__all__ = ["Bivector", "EvenMultivector", "InertiaTensor", "InverseInertia", "Motor",
           "Multivector", "Twist", "Wrench", "exp", "log", "rotor", "translator"]
