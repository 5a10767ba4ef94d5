"""What the joint-space rows that a step solves with the dynamics share: the joint limits of
``limit_constraints.RigidLimits`` and the dry friction of ``friction_constraints.RigidFriction``.

Each kind of row has settings (``RowSettings``: a stabilisation time constant, an impedance,
the solver's sweeps, each joint's or tendon's own softness, MuJoCo's inverse weights) and,
bound to a model, one ``JointLimit`` per row (``SoftRows``): its joint's or tendon's own, else
the settings', at the time constant a simulation's step gives it (MuJoCo's refsafe)."""
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping, NamedTuple, Union

import numpy as np

from ..errors import ModelError
from ..model.impedance import Impedance, impedance_of, stabilisation_gains, step_time_constant
from .checks import boolean, positive, sweeps
from .inverse_weights import dof_inverse_weights
from .joint_springs import tendon_inverse_inertias


class JointLimit(NamedTuple):
    """A joint's (or fixed tendon's) own row softness: its stabilisation (MJCF solreflimit,
    or solreffriction for ``RigidFriction``: ``timeconst`` s, ``dampratio``) and impedance
    (solimplimit, solimpfriction: ``impedance``, a number or MuJoCo's five; an ``Impedance``
    once in the settings' ``joints``). ``refsafe``: MuJoCo's refsafe, a time constant of at
    least 2 dt in a simulation with the step dt (``impedance.step_time_constant``).
    ``inset`` (rad or m, >= 0): a limit's MJCF ``margin``: MuJoCo's limit acts that far
    inside the joint's range (the stop at lower + inset and upper - inset; a dry friction row
    has none)."""

    timeconst: float = 0.02
    dampratio: float = 1.0
    impedance: object = 1.0
    refsafe: bool = False
    inset: float = 0.0


@dataclass(frozen=True)
class RowSettings:
    """The fields ``RigidLimits`` and ``RigidFriction`` share (each documents them for its
    rows): ``timeconst``, ``dampratio``, ``iterations``, ``regularization``, ``impedance``,
    ``joints`` ({joint or tendon name: a ``JointLimit`` or a dict of some of its fields}, stored
    as a tuple of (name, ``JointLimit``)), ``invweight0``, ``inverse_weights`` and
    ``refsafe``."""

    timeconst: float = 0.02
    dampratio: float = 1.0
    iterations: int = 30
    regularization: float = 1e-6
    impedance: Impedance = Impedance(1.0, 1.0)
    joints: Union[Mapping[str, Any], tuple] = ()
    invweight0: bool = False
    inverse_weights: tuple = ()
    refsafe: bool = False

    def __post_init__(self):
        kind = type(self).__name__
        positive(self.timeconst, f"{kind}.timeconst")
        positive(self.dampratio, f"{kind}.dampratio")
        positive(self.regularization, f"{kind}.regularization", allow_zero=True)
        object.__setattr__(self, "impedance", impedance_of(self.impedance, f"{kind}.impedance"))
        sweeps(self.iterations, f"{kind}.iterations")
        object.__setattr__(self, "joints", self._own(self.joints))
        boolean(self.invweight0, f"{kind}.invweight0")
        boolean(self.refsafe, f"{kind}.refsafe")
        object.__setattr__(self, "inverse_weights", tuple(
            (str(name), positive(w, f"{kind}.inverse_weights[{name!r}]", allow_zero=True))
            for name, w in dict(self.inverse_weights).items()))

    def _own(self, joints):
        """``joints`` as a tuple of (name, ``JointLimit``), each field checked."""
        kind = type(self).__name__
        items = joints.items() if hasattr(joints, "items") else joints
        out = []
        for entry in items:
            try:
                name, given = entry
            except (TypeError, ValueError):
                raise ValueError(f"{kind}.joints must map joint names to a JointLimit or "
                                 f"a dict of {', '.join(JointLimit._fields)}; got "
                                 f"{joints!r}") from None
            where = f"{kind}.joints[{name!r}]"
            fields = given._asdict() if isinstance(given, JointLimit) else given
            if not isinstance(name, str) or not isinstance(fields, dict) or \
                    set(fields) - set(JointLimit._fields):
                raise ValueError(f"{where} must be a JointLimit or a dict of "
                                 f"{', '.join(JointLimit._fields)}; got {given!r}")
            out.append((name, JointLimit(
                positive(fields.get("timeconst", self.timeconst), f"{where}.timeconst"),
                positive(fields.get("dampratio", self.dampratio), f"{where}.dampratio"),
                impedance_of(fields.get("impedance", self.impedance), f"{where}.impedance"),
                boolean(fields.get("refsafe", self.refsafe), f"{where}.refsafe"),
                positive(fields.get("inset", 0.0), f"{where}.inset", allow_zero=True))))
        return tuple(out)

    @classmethod
    def _from_softness(cls, softness, prefix, options):
        """The settings with the joints' and tendons' own ``softness`` ({name: ((timeconst,
        dampratio), solimp, inverse weight or None, refsafe, margin)}, as ``model.mjcf``'s
        ``limit_softness`` and ``friction_softness`` give them), their names prefixed by
        ``prefix``, and the other fields ``options``."""
        joints = {prefix + name: JointLimit(*ref, impedance=imp, refsafe=safe, inset=inset)
                  for name, (ref, imp, _, safe, inset) in softness.items()}
        weights = tuple((prefix + name, w) for name, (_, _, w, _, _) in softness.items()
                        if w is not None)
        return cls(joints=joints, inverse_weights=weights, **options)

    @property
    def gains(self):
        """(k 1/s^2, b 1/s): the stabilisation per unit apparent inertia
        (``impedance.stabilisation_gains``: with the impedance, k written at its dmax, as
        MuJoCo's)."""
        return stabilisation_gains(self.timeconst, self.dampratio, self.impedance)


class SoftRows:
    """Rows of ``RowSettings`` bound to a model: per row, the joint or tendon it belongs to
    and its ``JointLimit``; ``solves`` is True: the step solves them (a ``Rows`` block of
    ``contact_solver.solve_rows``) rather than adding a force."""

    solves = True
    #: what ``settings.joints`` may name besides joints (for the error)
    tendon_kind = "tendons"

    #: (the DoFs of the joints' rows, (T, nv): the rates of the tendons' rows after them):
    #: what ``weights`` are of (each kind's)
    weighed: tuple = ((), np.zeros((0, 0)))

    def __init__(self, model, settings, names, tendons, dt=None):
        """The rows named ``names`` (per row, its joint's or tendon's name) of ``settings`` on
        ``model``, whose tendons with such rows are ``tendons`` (names), in a simulation with
        the step ``dt`` (s; None: no step), at which refsafe rows take their time
        constants. ``ModelError`` where ``settings.joints`` names neither a joint nor one of
        ``tendons``."""
        kind = type(settings).__name__
        own = dict(settings.joints)
        for name in own:
            if name not in model.joint_names and name not in tendons:
                raise ModelError(f"{kind}.joints names {name!r}, not a joint of model "
                                 f"{model.name!r} (its joints: {', '.join(model.joint_names)})"
                                 f" nor one of its {self.tendon_kind}")
        default = JointLimit(settings.timeconst, settings.dampratio, settings.impedance,
                             settings.refsafe)
        #: per row: its joint's or tendon's name
        self.joint_names = tuple(names)
        #: per row: its joint's ``JointLimit`` (its own, else the settings'), its time
        #: constant the one a step of dt uses (refsafe)
        self.limit = tuple(_at_step(own.get(name, default), dt) for name in self.joint_names)
        #: the joints and tendons of the rows with their own ``JointLimit``
        self.own_joints = sorted(set(self.joint_names) & set(own))
        #: the distinct impedances of the rows, in order
        self.impedances = tuple(dict.fromkeys(j.impedance for j in self.limit))
        self.settings, self.model = settings, model

    def __bool__(self):
        return len(self.joint_names) > 0

    def gains(self):
        """(k (L,) 1/s^2, b (L,) 1/s): each row's stabilisation per unit apparent inertia."""
        return np.array([_gains(j) for j in self.limit]).reshape(-1, 2).T

    def solver_params(self, **own):
        """The rows' numbers ``own`` and the solve's: the regularization and, with
        ``invweight0``, each row's ``weights`` (its A_jj as MuJoCo approximates it)."""
        out = dict(own, regularization=np.asarray(float(self.settings.regularization)))
        if self.settings.invweight0:
            out["weights"] = self.weights
        return out

    @cached_property
    def weights(self):
        """(L,): each row's inverse weight as MuJoCo approximates it, for rows on the DoFs
        ``weighed[0]`` (their ``dof_invweight0``: ``inverse_weights.dof_inverse_weights``) then
        on tendons of rates ``weighed[1]`` (T, nv) (c M^-1 c^T at the model's ``q0``,
        MuJoCo's ``tendon_invweight0``); the settings' ``inverse_weights`` where they name a
        row's joint or tendon (for a joint of several DoFs, each of its rows)."""
        dofs, tendons = self.weighed
        weights = dof_inverse_weights(self.model)
        along = tendon_inverse_inertias(self.model, np.asarray(self.model.q0, dtype=float)[None],
                                        tendons)[0] if len(tendons) else []
        given = dict(self.settings.inverse_weights)
        return np.array([given.get(name, w) for name, w in zip(
            self.joint_names, [weights[v] for v in dofs] + list(along))])

    def terms(self, xp, k, depth):
        """(the spring terms k d(r) / dmax r, the compliances), each (N, L), of the rows at
        their depths (N, L) with their stiffnesses k (L,) (``Impedance.terms``): all rows at
        once where they share one impedance, else row by row."""
        if len(self.impedances) == 1:
            return self.impedances[0].terms(xp, k, depth)
        rows = [j.impedance.terms(xp, k[i], depth[:, i]) for i, j in enumerate(self.limit)]
        return (xp.stack([spring for spring, _ in rows], axis=-1),
                xp.stack([soft for _, soft in rows], axis=-1))

    def stabilisations(self, what):
        """The stabilisation, per unit apparent inertia (``stability.stiffest_springs``): each
        distinct one of the rows', as ``what`` (e.g. "the joint limits' stabilisation")."""
        return [(f"{what} (timeconst {j.timeconst:g} s)", *_gains(j), 1.0)
                for j in dict.fromkeys(self.limit)]

    def describe(self):
        s = self.settings
        impedance = self.impedances[0] if len(self.impedances) == 1 else s.impedance
        return {"kind": "rigid", "rows": len(self.joint_names), "timeconst": s.timeconst,
                "dampratio": s.dampratio, "impedance": impedance.describe(),
                "own": len(self.own_joints), "invweight0": s.invweight0}


def _at_step(limit, dt):
    """``limit`` (a ``JointLimit``) with the time constant a simulation with the step dt (s;
    None: no step) uses (``impedance.step_time_constant``)."""
    return limit._replace(timeconst=step_time_constant(limit.timeconst, dt, limit.refsafe))


def _gains(limit):
    """(k 1/s^2, b 1/s) of a ``JointLimit`` (``impedance.stabilisation_gains``)."""
    return stabilisation_gains(limit.timeconst, limit.dampratio, limit.impedance)
