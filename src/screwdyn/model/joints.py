"""Joint types: one class per type, the only place that knows what a joint does.

A joint connects a parent frame to a child frame. Each class says, for its configuration q (nq
numbers) and velocity v (nv numbers), what Featherstone's ``jcalc`` says (RBDA section 4.4):

- ``motion(alg, q)``: the joint transform X_J, the child frame seen from the joint frame, built in
  any algebra from the algebra's four joint-motion primitives (``revolute``, ``prismatic``,
  ``translation``, ``rotation``) and ``compose``;
- ``subspace()``: the motion subspace S, nv twists [linear; angular] in the child frame, so that
  the child's velocity relative to the parent is S v (constant for every type but MuJoCo's free
  joint, whose ``subspace_at(xp, q)`` depends on q, with its rate ``subspace_rate``);
- the configuration manifold: ``neutral``, ``random``, ``integrate`` (q (+) v, as
  ``pinocchio.integrate``), ``difference`` (q1 (-) q0), ``dexpinv`` (for Lie-group Runge-Kutta),
  ``normalize``;
- its limits (``Limits``: position per q, velocity and effort per v; inf where there is none).

Conventions (q ; v), SI units:

    Revolute(axis)        angle ; angular rate about the unit axis. ``Continuous`` is the same
                          joint without position limits (one angle, not Pinocchio's cos/sin pair).
    Prismatic(axis)       displacement ; its rate along the unit axis
    Helical(axis, pitch)  angle ; rate: rotation by the angle about the axis and translation of
                          pitch * angle along it (pitch in m/rad, Pinocchio's JointModelHelical)
    Planar(normal)        x, y, theta ; v_x, v_y, omega: the child moves in the plane through the
                          joint origin normal to ``normal``; x, y along the plane's axes (for
                          normal z: the joint frame's x and y axes; otherwise the rotation that
                          takes z to the normal carries them), v_x, v_y in the child frame
                          (Pinocchio's JointModelPlanar, but theta as one angle)
    Spherical()           unit quaternion (qx, qy, qz, qw) ; angular velocity in the child frame
                          (Pinocchio's JointModelSpherical). ``Spherical(scalar_first=True)``:
                          (qw, qx, qy, qz), MuJoCo's ball joint
    FreeFlyer()           x, y, z, qx, qy, qz, qw ; [linear; angular] velocity of the child,
                          both in the child frame (Pinocchio's JointModelFreeFlyer)
    MuJoCoFree()          x, y, z, qw, qx, qy, qz ; linear velocity in the parent (world) axes,
                          angular velocity in the child frame (MuJoCo's free joint, data.qvel)

Quaternions need not be unit: every use normalises them (a q off the unit sphere is the rotation
of its normalised quaternion, as in Pinocchio and MuJoCo); ``normalize`` projects q back.
Fixed joints are not joint types here: the model builder welds their links to the moving body.
"""
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import ClassVar

import numpy as np

from ..errors import ModelError

INF = math.inf


@dataclass(frozen=True)
class Limits:
    """Position limits per q entry, velocity and effort limits per v entry (inf: none)."""

    lower: tuple
    upper: tuple
    velocity: tuple
    effort: tuple

    @classmethod
    def none(cls, nq: int, nv: int) -> "Limits":
        return cls((-INF,) * nq, (INF,) * nq, (INF,) * nv, (INF,) * nv)


@dataclass(frozen=True)
class JointModel:
    """The base of the joint types: see the module docstring. Instances are frozen and hashable,
    and hold the joint's geometry (axis, pitch, ...) and its ``limits``."""

    nq: ClassVar[int] = 0
    nv: ClassVar[int] = 0
    type_name: ClassVar[str] = ""
    #: True when S depends on q (``subspace_at``); False when ``subspace()`` is constant
    configuration_dependent: ClassVar[bool] = False
    #: True for six-DoF joints (a floating base: unactuated, excluded from joint-space control)
    floating: ClassVar[bool] = False
    #: True when q and v are the same coordinates (integrate is q + v)
    euclidean: ClassVar[bool] = False

    limits: Limits = field(default=None, kw_only=True)

    def __post_init__(self):
        if self.limits is None:
            object.__setattr__(self, "limits", _no_limits(self.nq, self.nv))

    # -- jcalc -------------------------------------------------------------------------------
    def motion(self, alg, q):
        """X_J, the child frame in the joint frame, from q: a (nq, N) array (or sequence of
        nq entries) of this joint's configuration."""
        raise NotImplementedError

    def subspace(self) -> np.ndarray:
        """S, (nv, 6): the [linear; angular] twists of the child frame, in the child frame, per
        unit rate of each velocity coordinate."""
        raise NotImplementedError

    def subspace_at(self, xp, q):
        """S at q for configuration-dependent joints: nv lists of 6 entries (public order)."""
        raise NotImplementedError

    def subspace_rate(self, xp, q, v):
        """dS/dt at (q, v) for configuration-dependent joints, like ``subspace_at``."""
        raise NotImplementedError

    def subspace_derivatives(self, xp, q, v, a):
        """What the derivatives of the dynamics need of a configuration-dependent S, in the
        child frame as 6 entries each, for the tangent coordinates k of q (d/de at q (+) e_k e)
        and the rates v, a: (D, E, G, T) with ``D[k][j]`` = dS_j/de_k, ``E[k]`` = d(S v)/de_k,
        ``G[k]`` = d(S a + dS/dt v)/de_k and ``T[k]`` = d(dS/dt v)/dv_k."""
        raise NotImplementedError

    # -- the configuration manifold (numpy or JAX arrays, leading batch dimensions) -----------
    def neutral(self) -> np.ndarray:
        """The zero configuration (identity quaternions)."""
        return np.zeros(self.nq)

    def random(self, rng: np.random.Generator) -> np.ndarray:
        """A random configuration: uniform within finite position limits, else within
        [-pi, pi] for angles and a standard normal for positions; quaternions uniform."""
        raise NotImplementedError

    def integrate(self, xp, q, v):
        """q (+) v: the configuration reached from q by the velocity v held for unit time."""
        return q + v

    def difference(self, xp, q0, q1):
        """q1 (-) q0: the velocity that takes q0 to q1 in unit time (integrate's inverse)."""
        return q1 - q0

    def dexpinv(self, xp, xi, v):
        """The rate of the exponential coordinates xi (integrate(q0, xi) = q) when the
        velocity is v; v itself on vector spaces."""
        return v

    def normalize(self, xp, q):
        """q projected back onto the manifold (unit quaternions)."""
        return q

    # -- presentation --------------------------------------------------------------------------
    def describe(self) -> str:
        """The joint's geometry in a few characters, for summaries."""
        return ""

    def velocity_names(self) -> tuple:
        """Suffixes naming each velocity coordinate ('' for a 1-DoF joint)."""
        return ("",) if self.nv == 1 else tuple(f"v{k}" for k in range(self.nv))

    def position_names(self) -> tuple:
        """Suffixes naming each configuration coordinate ('' for a 1-DoF joint)."""
        return ("",) if self.nq == 1 else tuple(f"q{k}" for k in range(self.nq))

    def with_limits(self, limits: Limits) -> "JointModel":
        from dataclasses import replace

        return replace(self, limits=limits)


# -- 1-DoF joints -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Axial(JointModel):
    """A joint about or along a unit axis (in the joint frame, which is the child frame's
    orientation at q = 0)."""

    nq: ClassVar[int] = 1
    nv: ClassVar[int] = 1
    euclidean: ClassVar[bool] = True
    axis: tuple = (0.0, 0.0, 1.0)

    def describe(self):
        return "(" + ", ".join(f"{a:.3g}" for a in self.axis) + ")"

    def random(self, rng):
        lo, hi = self.limits.lower[0], self.limits.upper[0]
        if math.isfinite(lo) and math.isfinite(hi):
            return rng.uniform(lo, hi, size=1)
        return rng.uniform(-math.pi, math.pi, size=1)


@dataclass(frozen=True)
class Revolute(_Axial):
    type_name: ClassVar[str] = "revolute"

    def motion(self, alg, q):
        return alg.revolute(self.axis, q[0])

    def subspace(self):
        return np.array([[0.0, 0.0, 0.0, *self.axis]])


@dataclass(frozen=True)
class Continuous(Revolute):
    """A revolute joint without position limits (URDF ``continuous``)."""

    type_name: ClassVar[str] = "continuous"


@dataclass(frozen=True)
class Prismatic(_Axial):
    type_name: ClassVar[str] = "prismatic"

    def motion(self, alg, q):
        return alg.prismatic(self.axis, q[0])

    def subspace(self):
        return np.array([[*self.axis, 0.0, 0.0, 0.0]])


@dataclass(frozen=True)
class Helical(_Axial):
    """A screw: rotation by q about the axis and translation pitch * q along it."""

    type_name: ClassVar[str] = "helical"
    pitch: float = 0.0

    def motion(self, alg, q):
        return alg.compose(alg.prismatic(self.axis, self.pitch * q[0]),
                           alg.revolute(self.axis, q[0]))

    def subspace(self):
        return np.array([[*(self.pitch * np.array(self.axis)), *self.axis]])

    def describe(self):
        return super().describe() + f" pitch {self.pitch:.3g}"


# -- the plane ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Planar(JointModel):
    """Motion in the plane normal to ``normal``: X_J = A P(x, y, theta) A^T, with P the planar
    motion in the xy plane and A a constant rotation taking z to the normal (identity for z)."""

    nq: ClassVar[int] = 3
    nv: ClassVar[int] = 3
    type_name: ClassVar[str] = "planar"
    normal: tuple = (0.0, 0.0, 1.0)

    @property
    def frame(self) -> np.ndarray:
        """A: the plane's axes (columns x, y, normal) in the joint frame."""
        return plane_frame(self.normal)

    def motion(self, alg, q):
        in_plane = alg.compose(alg.translation([q[0], q[1], 0.0]),
                               alg.revolute((0.0, 0.0, 1.0), q[2]))
        if self.normal == (0.0, 0.0, 1.0):
            return in_plane
        A = self.frame
        zero = np.zeros(3)
        return alg.compose(alg.compose(alg.pose(A, zero), in_plane), alg.pose(A.T, zero))

    def subspace(self):
        A = self.frame
        return np.array([[*A[:, 0], 0, 0, 0], [*A[:, 1], 0, 0, 0], [0, 0, 0, *A[:, 2]]],
                        dtype=float)

    def random(self, rng):
        q = np.concatenate([rng.normal(size=2), rng.uniform(-math.pi, math.pi, size=1)])
        lo, hi = np.array(self.limits.lower), np.array(self.limits.upper)
        finite = np.isfinite(lo) & np.isfinite(hi)
        q[finite] = rng.uniform(lo[finite], hi[finite])
        return q

    def integrate(self, xp, q, v):
        """SE(2): theta += omega; (x, y) += R(theta) V(omega) (v_x, v_y)."""
        th, w = q[..., 2:3], v[..., 2:3]
        a, b = _se2_left_jacobian(xp, w)  # V = [[a, -b], [b, a]]
        vx, vy = v[..., 0:1], v[..., 1:2]
        dx, dy = a * vx - b * vy, b * vx + a * vy
        c, s = xp.cos(th), xp.sin(th)
        return xp.concatenate([q[..., 0:1] + c * dx - s * dy, q[..., 1:2] + s * dx + c * dy,
                               th + w], axis=-1)

    def difference(self, xp, q0, q1):
        th0 = q0[..., 2:3]
        w = q1[..., 2:3] - th0
        c, s = xp.cos(th0), xp.sin(th0)
        ex, ey = q1[..., 0:1] - q0[..., 0:1], q1[..., 1:2] - q0[..., 1:2]
        dx, dy = c * ex + s * ey, -s * ex + c * ey  # R(theta0)^T (p1 - p0)
        a, b = _se2_left_jacobian(xp, w)
        det = a * a + b * b
        return xp.concatenate([(a * dx + b * dy) / det, (-b * dx + a * dy) / det, w], axis=-1)

    def dexpinv(self, xp, xi, v):
        """v + [xi, v] / 2 + [xi, [xi, v]] / 12 with the bracket of se(2)."""
        ad1 = _se2_bracket(xp, xi, v)
        return v + ad1 / 2 + _se2_bracket(xp, xi, ad1) / 12

    def velocity_names(self):
        return ("vx", "vy", "wz")

    def position_names(self):
        return ("x", "y", "theta")

    def describe(self):
        return "normal (" + ", ".join(f"{a:.3g}" for a in self.normal) + ")"


def plane_frame(normal) -> np.ndarray:
    """A rotation whose third column is the unit ``normal``: the identity for z, else the
    smallest rotation taking z to the normal (its first two columns span the plane)."""
    n = np.asarray(normal, dtype=float)
    z = np.array([0.0, 0.0, 1.0])
    c = float(n @ z)
    if c > 1.0 - 1e-15:
        return np.eye(3)
    if c < -1.0 + 1e-15:
        return np.diag([1.0, -1.0, -1.0])  # a half turn about x
    k = np.cross(z, n)
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + K + K @ K / (1.0 + c)


def _se2_left_jacobian(xp, w):
    """(sin w / w, (1 - cos w) / w), smooth at w = 0 (series below 1e-4)."""
    small = xp.abs(w) < 1e-4
    safe = xp.where(small, 1.0, w)
    w2 = w * w
    a = xp.where(small, 1.0 - w2 / 6.0, xp.sin(safe) / safe)
    b = xp.where(small, w / 2.0 - w * w2 / 24.0, (1.0 - xp.cos(safe)) / safe)
    return a, b


def _se2_bracket(xp, x, u):
    """[x, u] in se(2) with twists (v_x, v_y, omega): (w_x u_y... ) = (-w u_y + v_y u_w,
    w u_x - v_x u_w, 0)."""
    w, uw = x[..., 2:3], u[..., 2:3]
    return xp.concatenate([-w * u[..., 1:2] + x[..., 1:2] * uw,
                           w * u[..., 0:1] - x[..., 0:1] * uw, 0 * w], axis=-1)


# -- rotations ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spherical(JointModel):
    """A ball joint: q a unit quaternion, v the angular velocity in the child frame."""

    nq: ClassVar[int] = 4
    nv: ClassVar[int] = 3
    type_name: ClassVar[str] = "spherical"
    scalar_first: bool = False  # (w, x, y, z) as MuJoCo, else (x, y, z, w) as Pinocchio

    def xyzw(self, q):
        """The quaternion entries in (x, y, z, w) order."""
        return (q[1], q[2], q[3], q[0]) if self.scalar_first else (q[0], q[1], q[2], q[3])

    def motion(self, alg, q):
        return alg.rotation(self.xyzw(q))

    def subspace(self):
        return np.hstack([np.zeros((3, 3)), np.eye(3)])

    def neutral(self):
        return np.array([1.0, 0, 0, 0]) if self.scalar_first else np.array([0, 0, 0, 1.0])

    def random(self, rng):
        return _order(_random_quaternion(rng), self.scalar_first)

    def integrate(self, xp, q, v):
        return _order_xp(xp, _quat_integrate(xp, _xyzw_xp(xp, q, self.scalar_first), v),
                         self.scalar_first)

    def difference(self, xp, q0, q1):
        return _quat_difference(xp, _xyzw_xp(xp, q0, self.scalar_first),
                                _xyzw_xp(xp, q1, self.scalar_first))

    def dexpinv(self, xp, xi, v):
        return _so3_dexpinv(xp, xi, v)

    def normalize(self, xp, q):
        return q / xp.sqrt((q * q).sum(axis=-1, keepdims=True))

    def velocity_names(self):
        return ("wx", "wy", "wz")

    def position_names(self):
        return ("qw", "qx", "qy", "qz") if self.scalar_first else ("qx", "qy", "qz", "qw")

    def describe(self):
        return "quaternion " + ("w x y z" if self.scalar_first else "x y z w")


#: the velocity coordinates of a free joint: the base's linear and angular velocity
FREE_VELOCITY_NAMES = ("vx", "vy", "vz", "wx", "wy", "wz")


def _normalize_free(xp, q):
    """A free joint's q (..., 7) with its quaternion (q[3:7], either order) made unit."""
    quat = q[..., 3:7]
    return xp.concatenate([q[..., :3], quat / xp.sqrt((quat * quat).sum(-1, keepdims=True))],
                          axis=-1)


@dataclass(frozen=True)
class FreeFlyer(JointModel):
    """Six degrees of freedom, Pinocchio's convention: q = (position, quaternion x y z w), v the
    child's [linear; angular] velocity in the child frame; integrated with the SE(3)
    exponential."""

    nq: ClassVar[int] = 7
    nv: ClassVar[int] = 6
    type_name: ClassVar[str] = "free"
    floating: ClassVar[bool] = True

    def motion(self, alg, q):
        return alg.compose(alg.translation([q[0], q[1], q[2]]),
                           alg.rotation([q[3], q[4], q[5], q[6]]))

    def subspace(self):
        return np.eye(6)

    def neutral(self):
        return np.array([0, 0, 0, 0, 0, 0, 1.0])

    def random(self, rng):
        return np.concatenate([rng.normal(size=3), _random_quaternion(rng)])

    def integrate(self, xp, q, v):
        return _se3_integrate(xp, q, v)

    def difference(self, xp, q0, q1):
        return _se3_difference(xp, q0, q1)

    def dexpinv(self, xp, xi, v):
        ad1 = _se3_bracket(xp, xi, v)
        return v + ad1 / 2 + _se3_bracket(xp, xi, ad1) / 12

    def normalize(self, xp, q):
        return _normalize_free(xp, q)

    def velocity_names(self):
        return FREE_VELOCITY_NAMES

    def position_names(self):
        return ("x", "y", "z", "qx", "qy", "qz", "qw")


@dataclass(frozen=True)
class MuJoCoFree(JointModel):
    """Six degrees of freedom, MuJoCo's convention: q = (position, quaternion w x y z) = qpos,
    v = (linear velocity of the child's origin in the parent axes, angular velocity in the child
    frame) = qvel. S depends on q: S = [[R^T, 0], [0, 1]]; integrated as MuJoCo does, the
    position plus v_linear, the rotation times exp(omega)."""

    nq: ClassVar[int] = 7
    nv: ClassVar[int] = 6
    type_name: ClassVar[str] = "free (MuJoCo)"
    configuration_dependent: ClassVar[bool] = True
    floating: ClassVar[bool] = True

    def motion(self, alg, q):
        return alg.compose(alg.translation([q[0], q[1], q[2]]),
                           alg.rotation([q[4], q[5], q[6], q[3]]))

    def subspace_at(self, xp, q):
        R = rotation_entries(xp, (q[4], q[5], q[6], q[3]))  # rows of R; S_k = (R^T e_k, 0)
        zero = 0.0 * q[0]
        S = [[R[3 * k], R[3 * k + 1], R[3 * k + 2], zero, zero, zero] for k in range(3)]
        return S + [[zero, zero, zero] + [zero + float(i == k) for i in range(3)]
                    for k in range(3)]

    def subspace_rate(self, xp, q, v):
        """d(R^T)/dt = -[omega]x R^T: column k of the linear block is -omega x R^T e_k."""
        R = rotation_entries(xp, (q[4], q[5], q[6], q[3]))
        w = (v[3], v[4], v[5])
        zero = 0.0 * q[0]
        out = []
        for k in range(3):
            r = (R[3 * k], R[3 * k + 1], R[3 * k + 2])
            out.append([-(w[1] * r[2] - w[2] * r[1]), -(w[2] * r[0] - w[0] * r[2]),
                        -(w[0] * r[1] - w[1] * r[0]), zero, zero, zero])
        return out + [[zero] * 6 for _ in range(3)]

    def subspace_derivatives(self, xp, q, v, a):
        """Only the rotation moves S (its linear block R^T): along the angular tangent e_m,
        d(R^T x)/de = -e_m x R^T x. With u = R^T v_lin and dS/dt v = -omega x u (see
        ``subspace_rate``)."""
        R = rotation_entries(xp, (q[4], q[5], q[6], q[3]))
        rows = [(R[3 * j], R[3 * j + 1], R[3 * j + 2]) for j in range(3)]  # R^T e_j
        u = [rows[0][i] * v[0] + rows[1][i] * v[1] + rows[2][i] * v[2] for i in range(3)]
        ua = [rows[0][i] * a[0] + rows[1][i] * a[1] + rows[2][i] * a[2] for i in range(3)]
        w = (v[3], v[4], v[5])
        zero = 0.0 * q[0]
        none = [zero] * 6

        def linear(x):  # the twist (x, 0)
            return [x[0], x[1], x[2], zero, zero, zero]

        def e_cross(m, x):  # e_m x x
            return [(0.0, -x[2], x[1]), (x[2], 0.0, -x[0]), (-x[1], x[0], 0.0)][m]

        D, E, G, T = [], [], [], []
        for k in range(3):  # the position: S does not move
            D.append([none] * 6)
            E.append(none)
            G.append(none)
            T.append(linear([-c for c in _cross3(w, rows[k])]))
        for m in range(3):  # the rotation
            D.append([linear([-c for c in e_cross(m, rows[j])]) for j in range(3)]
                     + [none] * 3)
            eu = e_cross(m, u)
            E.append(linear([-c for c in eu]))
            G.append(linear([-x + y for x, y in zip(e_cross(m, ua), _cross3(w, eu))]))
            T.append(linear([-c for c in eu]))
        return D, E, G, T

    def neutral(self):
        return np.array([0, 0, 0, 1.0, 0, 0, 0])

    def random(self, rng):
        return np.concatenate([rng.normal(size=3), _order(_random_quaternion(rng), True)])

    def integrate(self, xp, q, v):
        quat = _quat_integrate(xp, _xyzw_xp(xp, q[..., 3:7], True), v[..., 3:6])
        return xp.concatenate([q[..., :3] + v[..., :3], _order_xp(xp, quat, True)], axis=-1)

    def difference(self, xp, q0, q1):
        w = _quat_difference(xp, _xyzw_xp(xp, q0[..., 3:7], True),
                             _xyzw_xp(xp, q1[..., 3:7], True))
        return xp.concatenate([q1[..., :3] - q0[..., :3], w], axis=-1)

    def dexpinv(self, xp, xi, v):
        return xp.concatenate([v[..., :3], _so3_dexpinv(xp, xi[..., 3:6], v[..., 3:6])],
                              axis=-1)

    def normalize(self, xp, q):
        return _normalize_free(xp, q)

    def velocity_names(self):
        return FREE_VELOCITY_NAMES

    def position_names(self):
        return ("x", "y", "z", "qw", "qx", "qy", "qz")


#: the joint types by the name a builder or a summary uses
TYPES = {cls.type_name: cls for cls in (Revolute, Continuous, Prismatic, Helical, Planar,
                                        Spherical, FreeFlyer, MuJoCoFree)}
FIXED = "fixed"  # not a joint type: the builder welds the child link to its parent
_ALIASES = {"floating": "free", "ball": "spherical", "screw": "helical"}


def make(kind, axis=(1.0, 0.0, 0.0), pitch=0.0, limits=None, where="joint"):
    """The joint model of type ``kind`` (a name of ``TYPES``, an alias ``floating``, ``ball``,
    ``screw``, or a ``JointModel`` instance), or None for ``"fixed"``. ``axis``: the unit axis
    of a revolute, continuous, prismatic or helical joint, the plane's normal of a planar one
    (normalised here); ``pitch``: a helical joint's, m/rad; ``limits``: a ``Limits`` or a dict
    with any of ``lower``, ``upper`` (per q), ``velocity``, ``effort`` (per v), a number for
    every entry or one per entry (missing: none). Every error is a ``ModelError`` naming
    ``where``."""
    if isinstance(kind, JointModel):
        return kind if limits is None else kind.with_limits(checked_limits(kind, limits, where))
    else:
        if kind == FIXED:
            return None
        name = _ALIASES.get(kind, kind)
        if name not in TYPES:
            raise ModelError(f"{where}: unknown joint type {kind!r} (known: "
                             f"{', '.join(sorted(set(TYPES) | set(_ALIASES) | {FIXED}))})")
        cls = TYPES[name]
        if issubclass(cls, _Axial) or cls is Planar:
            what = "plane normal" if cls is Planar else "axis"
            try:
                a = tuple(map(float, axis.tolist() if hasattr(axis, "tolist") else axis))
            except (TypeError, ValueError):
                a = ()
            if not (len(a) == 3 and all(map(math.isfinite, a))):
                raise ModelError(f"{where}: joint {what} must be 3 finite numbers, got {axis!r}")
            norm = math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])
            if norm < 1e-12:
                raise ModelError(f"{where}: zero joint {what} (a {name} joint needs a nonzero "
                                 f"{what})")
            unit_axis = a if norm == 1.0 else (a[0] / norm, a[1] / norm, a[2] / norm)
            checked = None if limits is None else checked_limits(cls, limits, where)
            if cls is Planar:
                return Planar(normal=unit_axis, limits=checked)
            if cls is Helical:
                if not math.isfinite(pitch):
                    raise ModelError(f"{where}: pitch {pitch!r} is not finite")
                return Helical(axis=unit_axis, pitch=float(pitch), limits=checked)
            return cls(axis=unit_axis, limits=checked)
        return cls(limits=None if limits is None else checked_limits(cls, limits, where))


def checked_limits(joint, limits, where):
    """``limits`` (a ``Limits`` or a dict, see ``make``) for ``joint`` (a joint model or type),
    checked: finite or infinite numbers, lower <= upper, velocity and effort >= 0. A
    ``ModelError`` names ``where`` and the limit at fault."""
    none = _no_limits(joint.nq, joint.nv)
    given = limits.__dict__ if isinstance(limits, Limits) else limits
    if joint.nq == joint.nv == 1 and all(type(v) is float for v in given.values()):
        return _one_dof_limits(given, where)
    if not given.keys() <= _LIMIT_KEYS:
        raise ModelError(f"{where}: unknown limit {sorted(given.keys() - _LIMIT_KEYS)[0]!r} "
                         "(lower, upper, velocity, effort)")
    out = {}
    for key, default in none.__dict__.items():
        value = given.get(key)
        if value is None:
            out[key] = default
            continue
        n = len(default)
        try:
            if type(value) is float:
                a = (value,) * n
            else:
                if hasattr(value, "tolist"):
                    value = value.tolist()
                a = ((float(value),) * n if not isinstance(value, (list, tuple))
                     else tuple(float(x) for x in value))
                if len(a) == 1:
                    a = a * n
        except (TypeError, ValueError):
            a = ()
        if len(a) != n:
            raise ModelError(f"{where}: {key} limit {value!r} is not {n} number(s)")
        if any(math.isnan(x) for x in a):
            raise ModelError(f"{where}: {key} limit is not a number: {list(a)}")
        if key in ("velocity", "effort") and any(x < 0 for x in a):
            raise ModelError(f"{where}: negative {key} limit {list(a)}")
        out[key] = a
    bad = [k for k, (lo, hi) in enumerate(zip(out["lower"], out["upper"])) if lo > hi]
    if bad:
        k = bad[0]
        raise ModelError(f"{where}: lower limit {out['lower'][k]} > upper limit "
                         f"{out['upper'][k]}{_CROSSED}")
    return Limits(**out)


_LIMIT_KEYS = frozenset(("lower", "upper", "velocity", "effort"))
_CROSSED = (" (Bullet reads crossed limits as 'no limit': for that, give the joint no position "
            "limits, e.g. a continuous joint)")


def _one_dof_limits(given, where):
    """``checked_limits`` for a 1-DoF joint given numbers (the loaders' case)."""
    if not given.keys() <= _LIMIT_KEYS:
        raise ModelError(f"{where}: unknown limit {sorted(given.keys() - _LIMIT_KEYS)[0]!r} "
                         "(lower, upper, velocity, effort)")
    lower, upper = given.get("lower", -INF), given.get("upper", INF)
    velocity, effort = given.get("velocity", INF), given.get("effort", INF)
    for key, value in (("lower", lower), ("upper", upper), ("velocity", velocity),
                       ("effort", effort)):
        if value != value:
            raise ModelError(f"{where}: {key} limit is not a number: [{value}]")
    for key, value in (("velocity", velocity), ("effort", effort)):
        if value < 0:
            raise ModelError(f"{where}: negative {key} limit [{value}]")
    if lower > upper:
        raise ModelError(f"{where}: lower limit {lower} > upper limit {upper}{_CROSSED}")
    return Limits((lower,), (upper,), (velocity,), (effort,))


@lru_cache(maxsize=None)
def _no_limits(nq, nv):
    return Limits.none(nq, nv)


# -- quaternion and Lie-group helpers (numpy or JAX, components last) -----------------------------
def rotation_entries(xp, quat):
    """The 9 entries (row-major) of the rotation of the quaternion (x, y, z, w), normalised."""
    x, y, z, w = quat
    inv = 1.0 / xp.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x * inv, y * inv, z * inv, w * inv
    return (1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
            2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
            2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y))


def _random_quaternion(rng):
    quat = rng.normal(size=4)
    return quat / np.linalg.norm(quat)


def _order(quat_xyzw, scalar_first):
    return np.roll(quat_xyzw, 1) if scalar_first else quat_xyzw


def _xyzw_xp(xp, q, scalar_first):
    return xp.concatenate([q[..., 1:4], q[..., 0:1]], axis=-1) if scalar_first else q


def _order_xp(xp, quat, scalar_first):
    return xp.concatenate([quat[..., 3:4], quat[..., 0:3]], axis=-1) if scalar_first else quat


def _cross(xp, a, b):
    return xp.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
                     a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
                     a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)


def _dot(a, b):
    return (a * b).sum(axis=-1, keepdims=True)


def _quat_mul(xp, a, b):
    """Hamilton product of quaternions (x, y, z, w)."""
    u1, w1, u2, w2 = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return xp.concatenate([w1 * u2 + w2 * u1 + _cross(xp, u1, u2), w1 * w2 - _dot(u1, u2)],
                          axis=-1)


def _quat_rotate(xp, quat, x):
    """R(quat) x for a unit quaternion (x, y, z, w)."""
    u, w = quat[..., :3], quat[..., 3:]
    t = 2 * _cross(xp, u, x)
    return x + w * t + _cross(xp, u, t)


def _unit(xp, quat):
    return quat / xp.sqrt(_dot(quat, quat))


def _so3_exp_quat(xp, phi):
    """The unit quaternion (x, y, z, w) of the rotation vector phi, smooth at 0."""
    th2 = _dot(phi, phi)
    small = th2 < 1e-4
    th = xp.sqrt(xp.where(small, 1.0, th2))
    half_sinc = xp.where(small, 0.5 - th2 / 48 + th2 * th2 / 3840, xp.sin(th / 2) / th)
    c_half = xp.where(small, 1 - th2 / 8 + th2 * th2 / 384, xp.cos(th / 2))
    return xp.concatenate([half_sinc * phi, c_half], axis=-1)


def _so3_log_quat(xp, quat):
    """The rotation vector of a unit quaternion (x, y, z, w), angle in [0, pi]."""
    quat = _unit(xp, quat)
    quat = xp.where(quat[..., 3:] < 0, -quat, quat)  # q and -q: one rotation, take w >= 0
    u, w = quat[..., :3], quat[..., 3:]
    s2 = _dot(u, u)
    small = s2 < 1e-12
    # sqrt only where it is smooth: at s = 0 its derivative is infinite, and jax.grad would
    # carry that through the unused branch of the where as NaN
    s = xp.sqrt(xp.where(small, 1.0, s2))
    factor = xp.where(small, 2.0 / w - 2.0 * s2 / (3 * w ** 3),  # th / sin(th/2) near 0
                      2 * xp.arctan2(s, w) / s)
    return factor * u


def _quat_integrate(xp, quat, omega):
    """quat exp(omega): the rotation moved by the body angular velocity omega (unit time)."""
    return _unit(xp, _quat_mul(xp, quat, _so3_exp_quat(xp, omega)))


def _quat_difference(xp, quat0, quat1):
    """log(quat0^-1 quat1): the body angular velocity from quat0 to quat1 in unit time."""
    conj = xp.concatenate([-quat0[..., :3], quat0[..., 3:]], axis=-1)
    return _so3_log_quat(xp, _quat_mul(xp, _unit(xp, conj), _unit(xp, quat1)))


def _so3_dexpinv(xp, xi, v):
    """v + xi x v / 2 + xi x (xi x v) / 12: the rate of the rotation vector xi (third order)."""
    a = _cross(xp, xi, v)
    return v + a / 2 + _cross(xp, xi, a) / 12


def _se3_terms(xp, phi):
    """(1 - cos th) / th^2 and (th - sin th) / th^3 of th = |phi|, smooth at 0."""
    th2 = _dot(phi, phi)
    small = th2 < 1e-4
    th2_safe = xp.where(small, 1.0, th2)
    th = xp.sqrt(th2_safe)
    A = xp.where(small, 0.5 - th2 / 24 + th2 * th2 / 720 - th2 ** 3 / 40320,
                 (1 - xp.cos(th)) / th2_safe)
    B = xp.where(small, 1 / 6 - th2 / 120 + th2 * th2 / 5040 - th2 ** 3 / 362880,
                 (th - xp.sin(th)) / (th2_safe * th))
    return A, B


def _se3_integrate(xp, q7, twist):
    """(p, quat) exp(twist) for the body twist (rho, phi) (Pinocchio's exp6)."""
    p, quat = q7[..., :3], q7[..., 3:]
    rho, phi = twist[..., :3], twist[..., 3:]
    A, B = _se3_terms(xp, phi)
    phi_x_rho = _cross(xp, phi, rho)
    V_rho = rho + A * phi_x_rho + B * _cross(xp, phi, phi_x_rho)  # the SE(3) left Jacobian
    new_quat = _unit(xp, _quat_mul(xp, quat, _so3_exp_quat(xp, phi)))
    return xp.concatenate([p + _quat_rotate(xp, _unit(xp, quat), V_rho), new_quat], axis=-1)


def _se3_difference(xp, q0, q1):
    """log6((p0, quat0)^-1 (p1, quat1)): the body twist from q0 to q1 in unit time."""
    quat0 = _unit(xp, q0[..., 3:])
    conj = xp.concatenate([-quat0[..., :3], quat0[..., 3:]], axis=-1)
    phi = _so3_log_quat(xp, _quat_mul(xp, conj, _unit(xp, q1[..., 3:])))
    dp = _quat_rotate(xp, conj, q1[..., :3] - q0[..., :3])  # R0^T (p1 - p0)
    # rho = V(phi)^-1 dp, V^-1 = 1 - phi^/2 + (1/th^2)(1 - (th/2) cot(th/2)) phi^2
    th2 = _dot(phi, phi)
    small = th2 < 1e-4
    th = xp.sqrt(xp.where(small, 1.0, th2))
    c = xp.where(small, 1 / 12 + th2 / 720 + th2 * th2 / 30240,
                 (1 - (th / 2) * xp.cos(th / 2) / xp.sin(th / 2)) / xp.where(small, 1.0, th2))
    phi_x_dp = _cross(xp, phi, dp)
    rho = dp - phi_x_dp / 2 + c * _cross(xp, phi, phi_x_dp)
    return xp.concatenate([rho, phi], axis=-1)


def _se3_bracket(xp, x, u):
    """[x, u] in se(3), twists (linear, angular): (w x u_v + v x u_w, w x u_w)."""
    return xp.concatenate([_cross(xp, x[..., 3:], u[..., :3]) + _cross(xp, x[..., :3], u[..., 3:]),
                           _cross(xp, x[..., 3:], u[..., 3:])], axis=-1)


def _cross3(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])
