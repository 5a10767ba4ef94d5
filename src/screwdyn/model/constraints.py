"""Equality constraints and fixed tendons: what closes a kinematic loop or couples joints.

A model's tree is what the recursions run on; ``Model.constraints`` adds bilateral constraints
e(q) = 0 on top of it, which ``screwdyn.constrained_forward_dynamics`` enforces (and every
simulation of the model). The kinds, each MuJoCo's equality of the same name:

- ``Connect``: a point of one link coincides with a point of another (a ball joint that closes
  a loop: a four-bar linkage, the parallelograms of a delta robot); 3 rows.
- ``Weld``: one link's frame is held at a fixed pose relative to another's; 6 rows.
- ``Coupling``: a joint (or a fixed tendon) is a polynomial of another,
  y - y0 = a0 + a1 (x - x0) + ... + a4 (x - x0)^4 (MJCF ``<equality><joint>`` and
  ``<equality><tendon>``; without a source: y - y0 = a0); 1 row.

A ``FixedTendon`` is a linear combination of scalar joint positions, L(q) = sum_k c_k q_k (MJCF
``<tendon><fixed>``): a coupling may name it in place of a joint. Its spring and damper act in
simulations (``screwdyn.simulate``) as joint forces tau = -c (k (L - L_spring) + b dL/dt).

Every constraint is held by the stabilised acceleration constraint (Baumgarte's, with MuJoCo's
``solref`` parameters): J qdd + dJ/dt qd = -b de/dt - k e, b = 2 / timeconst,
k = 1 / (timeconst dampratio)^2: a violation (a drift, an inconsistent initial state) decays
with time constant ``timeconst`` (s), critically damped at ``dampratio`` = 1.

A constraint may be soft, as MuJoCo's are: its ``impedance`` d < 1 (MuJoCo's ``solimp``,
``model.impedance``) gives its rows the compliance R_jj = (1 - d) / d A_jj (A = J M^-1 J^T), so
that the acceleration of each row is (1 - d) a0 + d a_ref where it alone acts (a0: the row's
acceleration without the constraint, a_ref = -b e' - k d(r) / dmax e with k and b written at
dmax, MuJoCo's reference acceleration); d is read at the violation r, the norm of a Connect's
3 or a Weld's 6 rows (MuJoCo's), |e| of a Coupling. The default, d = 1, is the hard constraint.
``inverse_weights`` replace A_jj there by given numbers (MuJoCo's approximation of it).
"""
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import ModelError
from .impedance import Impedance, impedance_of, stabilisation_gains, step_time_constant

#: MuJoCo's default ``solref`` (time constant s, damping ratio)
TIMECONST, DAMPRATIO = 0.02, 1.0
_IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)


def _vector(value, n, what):
    a = np.asarray(value, dtype=float).reshape(-1)
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ModelError(f"{what} must be {n} finite numbers, got {value!r}")
    return tuple(float(x) for x in a)


@dataclass(frozen=True)
class Constraint:
    """What every equality constraint has: a name (for messages and ``constraint_labels``),
    the stabilisation's time constant (s, > 0) and damping ratio (> 0), and its impedance:
    1 (the default) for a hard constraint, or MuJoCo's ``solimp`` for a soft one, a constant
    d in (0, 1] or (dmin, dmax, width, midpoint, power) (``impedance.impedance_of``; stored as
    an ``Impedance``; the module docstring). ``inverse_weights``: None (the default), or one
    number > 0 per row that a soft row's compliance scales in place of its exact A_jj
    (MuJoCo's approximation of it, ``efc_diagApprox``, which ``load_mjcf(...,
    soft_equalities=True)`` reads). ``refsafe`` (False by default; ``load_mjcf`` sets it for
    a solref in the standard form, as MuJoCo's refsafe applies): a simulation with the step
    dt uses a time constant of at least 2 dt (``impedance.step_time_constant``;
    ``at_step``)."""

    name: str = field(default="", kw_only=True)
    timeconst: float = field(default=TIMECONST, kw_only=True)
    dampratio: float = field(default=DAMPRATIO, kw_only=True)
    impedance: Any = field(default=Impedance(1.0, 1.0), kw_only=True)
    inverse_weights: Any = field(default=None, kw_only=True)
    refsafe: bool = field(default=False, kw_only=True)

    #: number of scalar constraint rows
    rows = 0

    def __post_init__(self):
        for name in ("timeconst", "dampratio"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float, np.floating)) and np.isfinite(value)
                    and value > 0):
                raise ModelError(f"{self.describe()}: {name} must be a finite number > 0, got "
                                 f"{value!r}")
            object.__setattr__(self, name, float(value))
        try:
            impedance = impedance_of(self.impedance, f"{self.describe()}: impedance")
        except ValueError as error:
            raise ModelError(str(error)) from None
        object.__setattr__(self, "impedance", impedance)
        if self.inverse_weights is not None:
            w = _vector(self.inverse_weights, self.rows, f"{self.describe()}: inverse_weights")
            if min(w) <= 0.0:
                raise ModelError(f"{self.describe()}: inverse_weights must be > 0 (one per row, "
                                 f"1/kg or 1/(kg m^2)), got {self.inverse_weights!r}")
            object.__setattr__(self, "inverse_weights", w)
        if not isinstance(self.refsafe, bool):
            raise ModelError(f"{self.describe()}: refsafe must be True or False, got "
                             f"{self.refsafe!r}")

    def at_step(self, dt: float) -> "Constraint":
        """This constraint as a simulation with the step ``dt`` (s) holds it: its time
        constant at least 2 dt where ``refsafe`` (``impedance.step_time_constant``)."""
        timeconst = step_time_constant(self.timeconst, dt, self.refsafe)
        return self if timeconst == self.timeconst else replace(self, timeconst=timeconst)

    @property
    def gains(self):
        """(k, b): the stabilisation's stiffness (1/s^2) and damping (1/s), written at the
        impedance's dmax (``impedance.stabilisation_gains``; 1 / (timeconst dampratio)^2 and
        2 / timeconst for a hard constraint)."""
        return stabilisation_gains(self.timeconst, self.dampratio, self.impedance)

    @property
    def soft(self) -> bool:
        """Whether the constraint is soft (its impedance is below 1 somewhere)."""
        return not (self.impedance.constant and self.impedance.at(np, 0.0) == 1.0)

    def describe(self):
        return f"{type(self).__name__} {self.name!r}" if self.name else type(self).__name__


@dataclass(frozen=True)
class Connect(Constraint):
    """``point_a`` of ``link_a`` (in its frame, m) coincides with ``point_b`` of ``link_b``
    (a link welded to the world, e.g. the root link of a fixed base, fixes the point in
    space). 3 rows: p_a - p_b in world axes."""

    link_a: str = ""
    link_b: str = ""
    point_a: tuple = (0.0, 0.0, 0.0)
    point_b: tuple = (0.0, 0.0, 0.0)
    rows = 3

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "point_a", _vector(self.point_a, 3, f"{self.describe()}: "
                                                    "point_a"))
        object.__setattr__(self, "point_b", _vector(self.point_b, 3, f"{self.describe()}: "
                                                    "point_b"))


@dataclass(frozen=True)
class Weld(Connect):
    """``link_a``'s frame held at a fixed pose relative to ``link_b``'s: ``point_a`` of a
    coincides with ``point_b`` of b (as ``Connect``) and R_b^T R_a = ``rotation`` (3x3,
    row-major or nested). 6 rows: the points' offset, then the orientation error
    sin(angle) * axis of R_a (R_b rotation)^T, world axes. ``torquescale`` (> 0, MuJoCo's):
    how much the orientation counts, against the offset, in the violation a soft weld reads
    its impedance at, |(offset, torquescale / 2 * orientation error)| (MuJoCo's orientation
    rows are torquescale times half the quaternion error); no effect on a hard weld."""

    rotation: tuple = _IDENTITY
    torquescale: float = 1.0
    rows = 6

    def __post_init__(self):
        super().__post_init__()
        t = self.torquescale
        if not (isinstance(t, (int, float, np.floating)) and np.isfinite(t) and t > 0):
            raise ModelError(f"{self.describe()}: torquescale must be a finite number > 0, got "
                             f"{t!r}")
        object.__setattr__(self, "torquescale", float(t))
        R = np.asarray(self.rotation, dtype=float).reshape(-1)
        if R.shape != (9,) or not np.all(np.isfinite(R)) \
                or not np.allclose(R.reshape(3, 3) @ R.reshape(3, 3).T, np.eye(3), atol=1e-6) \
                or np.linalg.det(R.reshape(3, 3)) < 0:
            raise ModelError(f"{self.describe()}: rotation must be a 3x3 rotation matrix, got "
                             f"{self.rotation!r}")
        object.__setattr__(self, "rotation", tuple(float(x) for x in R))


@dataclass(frozen=True)
class Coupling(Constraint):
    """``target`` (a scalar joint or a ``FixedTendon``, by name) follows ``source`` (same
    kinds; None: held fixed): y - y0 = sum_k polynomial[k] (x - x0)^k, with (y0, x0) =
    ``reference`` (MuJoCo: the values at ``qpos0``). 1 row."""

    target: str = ""
    source: "str | None" = None
    polynomial: tuple = (0.0, 1.0, 0.0, 0.0, 0.0)
    reference: tuple = (0.0, 0.0)
    rows = 1

    def __post_init__(self):
        super().__post_init__()
        p = np.asarray(self.polynomial, dtype=float).reshape(-1)
        if not 1 <= p.size <= 5 or not np.all(np.isfinite(p)):
            raise ModelError(f"{self.describe()}: polynomial must be 1 to 5 finite "
                             f"coefficients (a0, a1, ...), got {self.polynomial!r}")
        object.__setattr__(self, "polynomial", tuple(float(x) for x in p))
        object.__setattr__(self, "reference", _vector(self.reference, 2,
                                                      f"{self.describe()}: reference"))


def _tendon_numbers(tendon, kind, numbers):
    """Check and store a tendon's ``numbers`` (field names: finite, >= 0 but
    ``spring_length``) and its length limits (``lower`` <= ``upper``); ``ModelError`` naming
    the ``kind`` tendon otherwise."""
    for name in numbers:
        value = float(getattr(tendon, name))
        if not np.isfinite(value) or (name != "spring_length" and value < 0):
            raise ModelError(f"{kind} {tendon.name!r}: {name} must be finite"
                             + ("" if name == "spring_length" else " and >= 0")
                             + f", got {getattr(tendon, name)!r}")
        object.__setattr__(tendon, name, value)
    try:
        lower, upper = float(tendon.lower), float(tendon.upper)
    except (TypeError, ValueError):
        lower = upper = np.nan
    if np.isnan(lower) or np.isnan(upper) or lower > upper or lower == np.inf \
            or upper == -np.inf:
        raise ModelError(f"{kind} {tendon.name!r}: its length limits must be numbers "
                         f"with lower <= upper (-inf, inf: none), got lower="
                         f"{tendon.lower!r}, upper={tendon.upper!r}")
    object.__setattr__(tendon, "lower", lower)
    object.__setattr__(tendon, "upper", upper)


class _Tendon:
    """What both kinds of tendon answer: whether a spring or damper acts, whether a length
    limit does."""

    stiffness: float
    damping: float
    lower: float
    upper: float

    @property
    def passive(self):
        """Whether it has a spring or a damper."""
        return self.stiffness > 0 or self.damping > 0

    @property
    def limited(self):
        """Whether it has a finite length limit."""
        return bool(np.isfinite(self.lower) or np.isfinite(self.upper))


@dataclass(frozen=True)
class FixedTendon(_Tendon):
    """L(q) = sum_k coefficients[k] q[joints[k]] (m or rad; scalar joints), with an optional
    spring (``stiffness`` N/m, rest length ``spring_length``) and damper (``damping`` N s/m)
    that act in simulations, optional length limits ``lower`` <= L <= ``upper`` (m or
    rad; -inf, inf: none; MJCF's ``range`` of a limited tendon) that a simulation enforces
    with the joints' position limits (``joint_limits=``: a row of J = c, as a joint's), and
    an optional dry friction ``frictionloss`` (N or N m, >= 0; MJCF's) that a simulation
    applies along the tendon as the joints' Coulomb friction (``joint_friction=``)."""

    name: str
    joints: tuple
    coefficients: tuple
    stiffness: float = 0.0
    damping: float = 0.0
    spring_length: float = 0.0
    lower: float = -np.inf
    upper: float = np.inf
    frictionloss: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "joints", tuple(str(j) for j in self.joints))
        if not self.joints:
            raise ModelError(f"fixed tendon {self.name!r}: it has no joints")
        object.__setattr__(self, "coefficients", _vector(
            self.coefficients, len(self.joints), f"fixed tendon {self.name!r}: coefficients "
            "(one per joint)"))
        _tendon_numbers(self, "fixed tendon",
                        ("stiffness", "damping", "spring_length", "frictionloss"))


@dataclass(frozen=True)
class SpatialTendon(_Tendon):
    """A string through points fixed on links (MJCF ``<tendon><spatial>`` through sites): its
    length is the sum of its straight segments, L(q) = sum_k |p_k+1(q) - p_k(q)| (m), and its
    rate dL/dt = J_L(q) qd with J_L = sum_k u_k^T (J_k+1 - J_k) (u_k the segment's unit vector
    in the world, J_k the point's world-frame linear Jacobian). ``sites``: the points in order,
    ((link name, (x, y, z) in the link's frame, m), ...), at least two.

    Like a ``FixedTendon`` it may have a spring (``stiffness`` N/m about ``spring_length``) and
    a damper (``damping`` N s/m), which act as joint forces tau = -J_L^T (k (L - L_spring) +
    b dL/dt), and length limits ``lower`` <= L <= ``upper`` (m; MJCF's ``range``), which a
    simulation with ``joint_limits=RigidLimits()`` enforces as one-sided rows of J = +-J_L (a
    string that goes taut: MuJoCo's tendon limit). Its length is not linear in q: couplings
    and actuators take fixed tendons only; and it has no dry friction here."""

    name: str
    sites: tuple
    stiffness: float = 0.0
    damping: float = 0.0
    spring_length: float = 0.0
    lower: float = -np.inf
    upper: float = np.inf

    def __post_init__(self):
        where = f"spatial tendon {self.name!r}"
        sites = []
        for k, site in enumerate(self.sites):
            try:
                link, point = site
            except (TypeError, ValueError):
                raise ModelError(f"{where}: sites must be ((link name, (x, y, z)), ...), got "
                                 f"{self.sites!r}") from None
            sites.append((str(link), _vector(point, 3, f"{where}: site {k}'s point")))
        if len(sites) < 2:
            raise ModelError(f"{where}: it needs at least two sites, got {len(sites)}")
        object.__setattr__(self, "sites", tuple(sites))
        _tendon_numbers(self, "spatial tendon", ("stiffness", "damping", "spring_length"))


# -- bound to a model --------------------------------------------------------------------------
def scalar_joint(model, joint, where):
    """(q index, v index) of a one-coordinate joint (revolute, prismatic, ...)."""
    names = model.joint_names
    if joint not in names:
        raise ModelError(f"{where}: no moving joint named {joint!r} in model {model.name!r}")
    k = names.index(joint)
    qs, vs = model.q_slices[k], model.v_slices[k]
    if qs.stop - qs.start != 1 or vs.stop - vs.start != 1:
        raise ModelError(f"{where}: joint {joint!r} has {qs.stop - qs.start} coordinates; "
                         "couplings and fixed tendons take one-coordinate joints (revolute, "
                         "prismatic)")
    return qs.start, vs.start


def linear_map(model, name, where):
    """(q indices, v indices, coefficients) of L(q) for a scalar joint or fixed tendon
    ``name``."""
    for tendon in model.tendons:
        if tendon.name == name:
            index = [scalar_joint(model, j, f"{where}: fixed tendon {name!r}")
                     for j in tendon.joints]
            return ([i for i, _ in index], [k for _, k in index], list(tendon.coefficients))
    if any(t.name == name for t in model.spatial_tendons):
        raise ModelError(f"{where}: {name!r} is a spatial tendon, whose length is not linear in "
                         "the joints' positions: couplings and actuators take joints and fixed "
                         "tendons")
    qi, vi = scalar_joint(model, name, where)
    return [qi], [vi], [1.0]


def check(model, constraints, tendons):
    """Raise ``ModelError`` naming the constraint (or tendon) that refers to something the
    model has not; ``model`` already holds ``tendons`` (fixed and spatial)."""
    if model.coupled:
        raise ModelError(f"model {model.name!r} has coupled mimic joints: constraints take a "
                         "model with independent joints (load_urdf(..., mimic='independent'), "
                         "then a Coupling per mimic joint)")
    names = [t.name for t in tendons]
    if len(set(names)) != len(names):
        raise ModelError(f"tendon names must be unique, got {names}")
    clash = set(names) & set(model.joint_names)
    if clash:
        raise ModelError(f"tendon {sorted(clash)[0]!r} has the name of a joint")
    for tendon in tendons:
        if isinstance(tendon, FixedTendon):
            linear_map(model, tendon.name, "fixed tendon")
            continue
        for k, (link, _) in enumerate(tendon.sites):
            if link not in model._link_lookup:
                raise ModelError(f"spatial tendon {tendon.name!r}: site {k}'s link {link!r} is "
                                 f"no link of model {model.name!r}")
    for c in constraints:
        if not isinstance(c, Constraint) or type(c) is Constraint:
            raise ModelError(f"a constraint must be a Connect, Weld or Coupling, got {c!r}")
        where = f"constraint {c.describe()}"
        if isinstance(c, Connect):
            for side in ("link_a", "link_b"):
                link = getattr(c, side)
                if link not in model._link_lookup:
                    raise ModelError(f"{where}: {side} {link!r} is no link of model "
                                     f"{model.name!r}")
            if model.links[model.link_index(c.link_a)].body \
                    == model.links[model.link_index(c.link_b)].body:
                raise ModelError(f"{where}: links {c.link_a!r} and {c.link_b!r} are on the same "
                                 "rigid body: the constraint holds already (or never)")
        else:
            linear_map(model, c.target, where)
            if c.source is not None:
                linear_map(model, c.source, where)
            if c.source == c.target:
                raise ModelError(f"{where}: target and source are both {c.target!r}")
