"""How a collision shape's contacts behave: its ``Surface`` (friction, the stabilisation's
solref, the impedance's solimp, margin), as MuJoCo's geoms carry them, and how two surfaces
make a pair's (``mix``: MuJoCo's rules, ``mj_contactParam``'s: by priority, then solmix).

    box = Surface(friction=0.2)              # on an MJCF floor Surface(friction=0.3): mu 0.3
    mix(box, floor, mu=0.8, solref=(0.02, 1.0)).friction   # 0.3

A field left None takes the contact's own (``RigidContact``'s ``mu``, ``timeconst``,
``dampratio``, ``impedance``) where the other shape gives one, and is the contact's own where
neither does.
"""
from dataclasses import dataclass, replace
from typing import NamedTuple, Optional

import numpy as np

from ..model.impedance import Impedance, impedance_of, step_time_constant
from .checks import positive


@dataclass(frozen=True)
class Surface:
    """A shape's contact parameters, MuJoCo's names and meanings (an MJCF geom's):

    friction: the sliding friction coefficient (>= 0), or None (the contact's ``mu``).
    condim: 1 (two shapes of condim 1 touch without friction), 3 (sliding friction), 4 (and
        torsional friction: a torque about the normal, at most ``torsion`` f_n) or 6 (and
        rolling friction: a torque about the tangents, at most ``rolling`` f_n).
    solref: (time constant s, damping ratio), both > 0, or the direct (-stiffness 1/s^2,
        -damping 1/s), both < 0; None: the contact's (``timeconst``, ``dampratio``).
    solimp: the impedance of the contact's normal rows: a constant d in (0, 1] or
        (dmin, dmax, width, midpoint, power) (``impedance.Impedance``; stored as one); None:
        the contact's ``impedance`` (rigid by default). An MJCF geom's is MuJoCo's
        (0.9, 0.95, 0.001, 0.5, 2) unless it sets one: its contacts are soft, as MuJoCo's.
    solmix (>= 0): the weight of this surface's solref and solimp in a pair's mean.
    priority: of two surfaces of different priority, the higher's condim, friction, solref
        and solimp are the pair's (MuJoCo's geom priority).
    margin (m, >= 0): a pair's contact holds its surfaces the sum of their margins apart
        (MuJoCo's ``includemargin``; a ``<contact><pair>``'s own margin): gymnasium's ant, 1 cm
        on each geom, rests on its feet 2 cm above its floor, less the contact's sink.
    torsion (m, >= 0): the torsional friction coefficient (MuJoCo's friction[1]), used where
        the pair's condim is 4 or 6; None: MuJoCo's default, 0.005.
    rolling (m, >= 0): the rolling friction coefficient (MuJoCo's friction[2]), used where the
        pair's condim is 6; None: MuJoCo's default, 0.0001.
    gap (m, >= 0): MuJoCo's detection buffer beyond the margin: MuJoCo reports a contact
        there but excludes it from the solve, so it exerts no force; read and kept, it changes
        nothing in a simulation.
    """

    friction: Optional[float] = None
    condim: int = 3
    solref: Optional[tuple] = None
    margin: float = 0.0
    gap: float = 0.0
    solimp: Optional[Impedance] = None
    solmix: float = 1.0
    priority: int = 0
    torsion: Optional[float] = None
    rolling: Optional[float] = None

    def __post_init__(self):
        for name in ("friction", "torsion", "rolling"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, float(positive(
                    getattr(self, name), f"Surface.{name}", allow_zero=True)))
        if self.condim not in (1, 3, 4, 6):
            raise ValueError(f"Surface.condim must be 1, 3, 4 or 6 (MuJoCo's), got "
                             f"{self.condim!r}")
        if self.solref is not None:
            object.__setattr__(self, "solref", _solref(self.solref))
        if self.solimp is not None:
            object.__setattr__(self, "solimp", impedance_of(self.solimp, "Surface.solimp"))
        for name in ("margin", "gap", "solmix"):
            object.__setattr__(self, name, float(positive(getattr(self, name),
                                                          f"Surface.{name}", allow_zero=True)))
        if isinstance(self.priority, bool) or not isinstance(self.priority, (int, np.integer)):
            raise ValueError(f"Surface.priority must be an int (MuJoCo's geom priority), got "
                             f"{self.priority!r}")
        object.__setattr__(self, "priority", int(self.priority))

    @property
    def twist(self) -> tuple:
        """(torsion, rolling) (m): the coefficients this surface gives a pair of its condim,
        0 where the condim has none (below 4, below 6), MuJoCo's defaults where left None."""
        return (_given(self.torsion, TORSION) if self.condim >= 4 else 0.0,
                _given(self.rolling, ROLLING) if self.condim >= 6 else 0.0)


#: MuJoCo's default torsional and rolling friction coefficients (m: geom friction[1], [2])
TORSION, ROLLING = 0.005, 0.0001
#: the twist of a pair of condim 1 (no friction of any kind)
_FRICTIONLESS = (0.0, 0.0)


def _given(value, default):
    return default if value is None else value


class Mixed(NamedTuple):
    """A pair's contact parameters: ``friction`` (None: the contact's ``mu``), ``solref``
    (the pair's (time constant s, damping ratio) or direct (-k, -b), ``stabilisation`` makes
    its gains; None: the contact's), ``offset`` (m): the distance it holds the surfaces apart,
    ``impedance`` (an ``Impedance``; None: the contact's), ``twist``: (torsion, rolling) (m),
    the torsional and rolling friction coefficients (0: none; a pair of condim 1 has none), or
    None where the pair's condim is 3 (the contact's: ``RigidContact.torsion``, ``rolling``)."""

    friction: Optional[float]
    solref: Optional[tuple]
    offset: float
    impedance: Optional[Impedance] = None
    twist: Optional[tuple] = None


def mix(a: Surface, b: Surface, mu: float, solref: tuple, impedance: Impedance) -> Mixed:
    """The pair of surfaces a and b, MuJoCo's way (``mj_contactParam``): of two priorities,
    the higher surface's condim, friction, solref and solimp; of one priority, condim and
    friction the larger of the two (no friction where the condim is 1; the larger torsional
    and rolling coefficients where the larger condim asks for them, ``Surface.twist``), solref
    and solimp their means weighted by solmix (w_a = solmix_a / (solmix_a + solmix_b); solref the
    elementwise least where one is direct); the margin the sum of the two, whatever the
    priorities (MuJoCo's ``includemargin``). ``mu``, ``solref`` (time constant, damping
    ratio) and ``impedance`` stand for a field left None where the other surface gives one."""
    if a.priority != b.priority:
        return own(a if a.priority > b.priority else b)._replace(
            offset=a.margin + b.margin)
    if a.condim == 1 and b.condim == 1:
        friction: Optional[float] = 0.0
    elif a.friction is None and b.friction is None:
        friction = None
    else:
        friction = max(mu if s.friction is None else s.friction for s in (a, b))
    condim = max(a.condim, b.condim)
    twist = _FRICTIONLESS if condim == 1 else None if condim < 4 else tuple(
        max(x, y) for x, y in zip(replace(a, condim=condim).twist,
                                  replace(b, condim=condim).twist))
    w = _weight(a.solmix, b.solmix)
    if a.solref is None and b.solref is None:
        ref = None
    else:
        r1, r2 = (solref if s.solref is None else s.solref for s in (a, b))
        ref = (tuple(w * x + (1.0 - w) * y for x, y in zip(r1, r2)) if min(r1 + r2) > 0
               else tuple(min(x, y) for x, y in zip(r1, r2)))
    if a.solimp is None and b.solimp is None:
        imp = None
    else:
        i1, i2 = (impedance if s.solimp is None else s.solimp for s in (a, b))
        imp = i1 if i1 == i2 else i1.mixed(i2, w)
    return Mixed(friction, ref, a.margin + b.margin, imp, twist)


def _weight(m1, m2, tiny=1e-15):
    """MuJoCo's weight of the first of two surfaces of solmix m1 and m2: m1 / (m1 + m2); 1/2
    where both are 0, 0 or 1 where one is."""
    if m1 < tiny and m2 < tiny:
        return 0.5
    if m1 < tiny or m2 < tiny:
        return 0.0 if m1 < tiny else 1.0
    return m1 / (m1 + m2)


def own(s: Surface) -> Mixed:
    """A pair's own surface (an MJCF ``<contact><pair>``'s) as its parameters."""
    return Mixed(0.0 if s.condim == 1 else s.friction, s.solref, s.margin, s.solimp,
                 _FRICTIONLESS if s.condim == 1 else s.twist if s.condim >= 4 else None)


def stabilisation(solref, dt: Optional[float] = None, refsafe: bool = False):
    """(k 1/s^2, b 1/s) of a solref: (time constant, damping ratio) gives
    k = 1 / (timeconst dampratio)^2, b = 2 / timeconst (``RigidContact``'s), the time
    constant at least 2 dt where ``refsafe`` in a simulation with the step ``dt`` (s; None:
    none) (MuJoCo's refsafe, ``impedance.step_time_constant``); the direct (-k, -b) gives
    them as they are (never refsafe, as MuJoCo's)."""
    if solref[0] < 0:
        return (-float(solref[0]), -float(solref[1]))
    timeconst = step_time_constant(solref[0], dt, refsafe)
    return (1.0 / (timeconst * solref[1]) ** 2, 2.0 / timeconst)


def _solref(value):
    try:
        pair = tuple(float(x) for x in value)
    except (TypeError, ValueError):
        pair = ()
    if len(pair) != 2 or not all(np.isfinite(pair)) or not (min(pair) > 0 or max(pair) < 0):
        raise ValueError(f"Surface.solref must be (time constant s, damping ratio), both > 0, "
                         f"or MuJoCo's direct (-stiffness, -damping), both < 0; got {value!r}")
    return pair
