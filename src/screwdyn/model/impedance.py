"""MuJoCo's impedance of a soft constraint (its ``solimp``): how much of the force that would
hold a row rigidly the row gets, as a function of how far it is violated, and what that makes
of the row's compliance and of its stabilisation's gains. A model parameter: the equality
constraints' (``Constraint.impedance``) and the simulations' contact and joint limits
(``sim``) read it.

    d(r) = dmin + y(x) (dmax - dmin),   x = min(|r| / width, 1)    (r: the violation, m or rad)
    y(x) = x^p / m^(p-1)                  for x <= m
         = 1 - (1 - x)^p / (1 - m)^(p-1)  for x > m                (m: midpoint, p: power)

so that d rises from dmin at r = 0 to dmax at r = width (MuJoCo's default solimp
(0.9, 0.95, 0.001, 0.5, 2): from 0.9 to 0.95 over 1 mm). dmin = dmax (``Impedance.constant``)
is a constant impedance; 1 is a rigid row. A row of impedance d has the compliance

    R_jj = (1 - d) / d A_jj                  (A = J M^-1 J^T, the Delassus matrix)

and the reference acceleration a_ref = k d(r) / dmax r - b v, with (``stabilisation_gains``)
k = 1 / (dmax (timeconst dampratio)^2), b = 2 / (dmax timeconst): MuJoCo's K, B and I
(``mj_makeImpedance``) for its solref (timeconst, dampratio), k written at dmax. MuJoCo clamps
dmin and dmax to [0.0001, 0.9999]; here 1 is allowed and is the rigid row.

MuJoCo's refsafe (on unless a model's ``<flag refsafe="disable"/>``): a simulation with the time
step dt (s) uses a solref given in the standard form with a time constant of at least 2 dt, so
that no constraint is stiffer than the step integrates stably (``step_time_constant``). It
depends on the step the simulation takes, not on the file's ``<option timestep>``: the
constraints that ``load_mjcf`` and ``RigidLimits.from_mjcf`` read carry the file's time
constant and ``refsafe=True``, and each simulation applies it at its own dt.
"""
import math
from dataclasses import dataclass
from typing import Any, Union

#: MuJoCo's solimp defaults for what a shorter solimp leaves out (width, midpoint, power)
DEFAULT_TAIL = (0.001, 0.5, 2.0)
#: MuJoCo's refsafe: the shortest time constant of a refsafe constraint, in time steps
REFSAFE_STEPS = 2.0


@dataclass(frozen=True)
class Impedance:
    """A soft constraint's impedance, MuJoCo's ``solimp``: ``dmin`` at no violation, ``dmax``
    at a violation of ``width`` (m or rad) and beyond, the sigmoid between them set by
    ``midpoint`` in (0, 1) and ``power`` >= 1 (module docstring). ``impedance_of`` makes one
    from a number or a sequence, checked."""

    dmin: float
    dmax: float
    width: float = DEFAULT_TAIL[0]
    midpoint: float = DEFAULT_TAIL[1]
    power: float = DEFAULT_TAIL[2]

    @property
    def constant(self) -> bool:
        """Whether d does not depend on the violation (dmin = dmax, or no width: MuJoCo's
        flat case, d = (dmin + dmax) / 2)."""
        return self.dmin == self.dmax or self.width <= 1e-15

    def at(self, xp: Any, r: Any) -> Any:
        """d(r): the impedance at violations r (an array, any shape; its sign ignored); a
        Python float where it is ``constant``."""
        if self.constant:
            return 0.5 * (self.dmin + self.dmax)
        x = xp.minimum(xp.abs(r) / self.width, 1.0)
        m, p = self.midpoint, self.power
        if p == 1.0:
            y = x
        else:
            low = xp.power(x, p) / m ** (p - 1.0)
            high = 1.0 - xp.power(1.0 - x, p) / (1.0 - m) ** (p - 1.0)
            y = xp.where(x <= m, low, high)
        return self.dmin + y * (self.dmax - self.dmin)

    def compliance(self, xp: Any, r: Any) -> Any:
        """R_jj / A_jj = (1 - d) / d at violations r (``at``): 0 for a rigid row."""
        d = self.at(xp, r)
        return (1.0 - d) / d

    def scale(self, xp: Any, r: Any) -> Any:
        """d(r) / dmax: the factor on the stiffness k written at dmax (``stabilisation_gains``)
        at violations r; the Python float 1.0 where d is dmax whatever r."""
        if self.constant:
            return 0.5 * (self.dmin + self.dmax) / self.dmax
        return self.at(xp, r) / self.dmax

    def terms(self, xp: Any, k: Any, r: Any) -> tuple:
        """(k d(r) / dmax r, (1 - d(r)) / d(r)), both shaped as the violations r: a one-sided
        row's spring term of its reference acceleration (k written at dmax,
        ``stabilisation_gains``) and its compliance R_jj / A_jj. Where d is dmax whatever r
        the spring is k r, the factor left out."""
        scale = self.scale(xp, r)
        spring = k * r if isinstance(scale, float) and scale == 1.0 else k * scale * r
        return spring, self.compliance(xp, r) + 0.0 * r

    def mixed(self, other: "Impedance", weight: float) -> "Impedance":
        """weight self + (1 - weight) other, entry by entry (MuJoCo's mix of two geoms'
        solimp by their solmix)."""
        return Impedance(*(weight * a + (1.0 - weight) * b
                           for a, b in zip(self.as_tuple(), other.as_tuple())))

    def as_tuple(self) -> tuple:
        return (self.dmin, self.dmax, self.width, self.midpoint, self.power)

    def describe(self) -> Union[float, list]:
        """d where it is a constant (a float), else the five numbers (a list): for records."""
        return 0.5 * (self.dmin + self.dmax) if self.constant else list(self.as_tuple())


def impedance_of(value: Any, name: str) -> Impedance:
    """``value`` as an ``Impedance``: a number d in (0, 1] (a constant impedance), an
    ``Impedance``, or MuJoCo's solimp as a sequence (dmin, dmax[, width[, midpoint[, power]]]),
    what it leaves out MuJoCo's defaults (0.001 m, 0.5, 2). ``ValueError`` naming ``name``
    unless dmin and dmax lie in (0, 1], width >= 0, midpoint in (0, 1) and power >= 1."""
    if isinstance(value, Impedance):
        numbers: tuple = value.as_tuple()
    elif isinstance(value, bool):
        numbers = ()
    elif isinstance(value, (int, float)):
        if not 0.0 < value <= 1.0:
            raise ValueError(f"{name} must be a number in (0, 1] (MuJoCo's solimp impedance; 1: "
                             f"rigid) or MuJoCo's solimp (dmin, dmax, width, midpoint, power), "
                             f"got {value!r}")
        numbers = (float(value), float(value)) + DEFAULT_TAIL
    else:
        try:
            given = tuple(float(x) for x in value)
        except (TypeError, ValueError):
            given = ()
        numbers = given + DEFAULT_TAIL[len(given) - 2:] if 2 <= len(given) <= 5 else ()
    if not numbers or not all(math.isfinite(x) for x in numbers):
        raise ValueError(f"{name} must be a number d in (0, 1] (1: rigid) or MuJoCo's solimp "
                         f"(dmin, dmax, width, midpoint, power), got {value!r}")
    dmin, dmax, width, midpoint, power = numbers
    for label, x, ok in (("dmin", dmin, 0.0 < dmin <= 1.0), ("dmax", dmax, 0.0 < dmax <= 1.0),
                         ("width", width, width >= 0.0),
                         ("midpoint", midpoint, 0.0 < midpoint < 1.0),
                         ("power", power, power >= 1.0)):
        if not ok:
            where = {"dmin": "in (0, 1]", "dmax": "in (0, 1]", "width": ">= 0 (m or rad)",
                     "midpoint": "in (0, 1)", "power": ">= 1"}[label]
            raise ValueError(f"{name}: the impedance's {label} must be {where} (MuJoCo's "
                             f"solimp; d = 1: rigid), got {x!r} in {value!r}")
    return Impedance(dmin, dmax, width, midpoint, power)


def impratio_of(value: Any, name: str) -> float:
    """``value`` as MuJoCo's ``impratio`` (a float > 0; ``math.inf``: rigid friction);
    ``ValueError`` naming ``name`` otherwise."""
    try:
        ratio = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        ratio = math.nan
    if not ratio > 0.0:
        raise ValueError(f"{name} must be a number > 0 (MuJoCo's impratio: the friction's "
                         f"stiffness relative to the normal's; math.inf: rigid friction), got "
                         f"{value!r}")
    return ratio


def step_time_constant(timeconst: float, dt: "float | None", refsafe: bool) -> float:
    """The time constant (s) that a simulation with the step ``dt`` (s; None: no step) uses
    for a constraint's ``timeconst`` (s): at least ``REFSAFE_STEPS`` dt where ``refsafe``
    (MuJoCo's refsafe, module docstring), else ``timeconst`` itself."""
    if refsafe and dt is not None:
        return max(float(timeconst), REFSAFE_STEPS * float(dt))
    return float(timeconst)


def stabilisation_gains(timeconst: float, dampratio: float,
                        impedance: Union[Impedance, float] = 1.0) -> tuple:
    """(k 1/s^2, b 1/s) of a constraint's stabilisation a_ref = k d(r) / dmax r - b v (module
    docstring): MuJoCo's k = 1 / (dmax timeconst^2 dampratio^2) (written at dmax),
    b = 2 / (dmax timeconst), for an ``Impedance`` or a constant d (1: rigid)."""
    dmax = impedance.dmax if isinstance(impedance, Impedance) else impedance
    return (1.0 / (dmax * (timeconst * dampratio) ** 2), 2.0 / (dmax * timeconst))
