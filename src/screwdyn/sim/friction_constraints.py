"""Dry (Coulomb) friction of the joints and of the fixed tendons as constraints: MuJoCo's
friction loss rows, solved with the dynamics (and with the contact's and the joint limits'
rows: one ``contact_solver.solve_rows``) in place of the stick-slip springs or the sign law of
``settings.JointFriction``.

Each DoF with a Coulomb force (``model.coulomb``: MJCF frictionloss) has a row J = e_v, each
fixed tendon with a ``frictionloss`` a row J = c (its coefficients). The row's force f is
bounded to [-c+, -c-] (c+ and c- the model's friction forces at positive and negative
velocity; a tendon's, +-frictionloss), and is the force that stops the motion along the row
where a force within the bound can, else the bound: a joint loaded below its friction holds,
one loaded beyond it slides with exactly the Coulomb force against it. The reference
acceleration is MuJoCo's,

    a_ref = -b v,   b = 2 / (dmax timeconst)

(MJCF solreffriction = (timeconst, dampratio), default (0.02, 1); a friction row's violation
is zero, so it has no spring term and the damping ratio does not act), per unit apparent
inertia: a joint left sliding slower than its load could drive it stops within about a time
constant.

MuJoCo's friction rows are soft: its solimpfriction (default (0.9, 0.95, 0.001, 0.5, 2))
gives d = dmin at zero violation, so each row has the compliance (1 - d) / d of its inverse
weight, and a joint held by its friction creeps at v = (1 - d) / d a0 / b (a0 the acceleration
its load would give it without friction: 1e-3 a0 s at MuJoCo's defaults). ``RigidFriction()``
is rigid (impedance 1: a held joint stops, no creep); ``RigidFriction.from_mjcf`` reads the
file's solreffriction and solimpfriction and MuJoCo's inverse weights: the run is then
``mj_step``'s.
"""
from dataclasses import dataclass

import numpy as np

from .contact_solver import Rows, columns, put_columns
from .joint_springs import tendon_friction
from .solved_rows import RowSettings, SoftRows


@dataclass(frozen=True)
class RigidFriction(RowSettings):
    """Coulomb friction of the joints (``model.coulomb``) and fixed tendons
    (``FixedTendon.frictionloss``) as constraints, solved with the dynamics (module
    docstring); pass as ``joint_friction=RigidFriction()``.

    timeconst: the time constant (s) of the rows' damping b = 2 / (dmax timeconst) (MuJoCo's
        solreffriction[0]; >= 2 dt is stable for every integrator).
    dampratio: solreffriction[1]; kept for MuJoCo's form, it does not act on a friction row.
    iterations: projected Gauss-Seidel sweeps when the friction rows are solved without a
        solved contact (with a solved contact, its ``iterations``; with ``RigidLimits`` and no
        solved contact, the limits').
    regularization: added to each row's diagonal, relative to it (>= 0), as for
        ``iterations``.
    impedance: MuJoCo's ``solimpfriction``: a constant d in (0, 1], or (dmin, dmax, width,
        midpoint, power) (``impedance.Impedance``; stored as one), of which a friction row
        uses d at zero violation (dmin) for its compliance (1 - d) / d and dmax for its
        damping; 1 (the default): rigid.
    joints: joints (or fixed tendons with a frictionloss) with their own timeconst, dampratio
        or impedance: {name: a ``JointLimit`` (a row's softness) or a dict of some of its
        fields}; stored as a tuple of (name, ``JointLimit``). ``from_mjcf`` reads an MJCF
        file's.
    invweight0: whether a soft row's compliance scales MuJoCo's approximation of its A_jj,
        its DoF's inverse weight at the model's ``q0`` (MuJoCo's ``dof_invweight0``; a
        tendon's ``tendon_invweight0``), as MuJoCo's does, rather than the exact (M^-1)_vv
        of the current state (False, the default).
    inverse_weights: ((joint or tendon name, inverse weight), ...): given inverse weights in
        place of the computed ones (``from_mjcf``: MuJoCo's own, for the 1-DoF joints and the
        tendons).
    refsafe: MuJoCo's refsafe for the rows without their own ``JointLimit``: a simulation
        with the step dt uses a time constant of at least 2 dt. False by default."""

    @classmethod
    def from_mjcf(cls, path, prefix: str = "", **options) -> "RigidFriction":
        """The dry friction rows of an MJCF file as MuJoCo makes them: each joint's and fixed
        tendon's with a frictionloss, with its solreffriction (refsafe, for the standard
        form unless the file disables it) and solimpfriction, and MuJoCo's inverse weights
        (``model.mjcf.friction_softness``), as ``joints`` and ``inverse_weights``;
        ``options``: the other fields. ``prefix``: the joints' names in a scene that added
        the robot with ``Scene.add_robot(prefix=...)``."""
        from ..model.mjcf import friction_softness

        return cls._from_softness(friction_softness(path), prefix, options)


class FrictionRows(SoftRows):
    """``RigidFriction`` bound to a model: one row per DoF with a Coulomb force, then one per
    fixed tendon with a frictionloss (``solved_rows.SoftRows``)."""

    tendon_kind = "tendons with a frictionloss"

    def __init__(self, model, settings, dt=None):
        """The rows of ``settings`` (``RigidFriction``) on ``model``, in a simulation with the
        step ``dt`` (s; None: no step), at which refsafe rows take their time constants."""
        coulomb = model.coulomb
        #: the DoFs with a Coulomb force, in order
        self.index = np.flatnonzero(np.any(coulomb != 0, axis=1))
        #: (T, nv): the rows of the tendons with a frictionloss (their rates Cv qd)
        tendons, self.Cv, force = tendon_friction(model)
        joint_of = {v: name for name, vs in zip(model.joint_names, model.v_slices)
                    for v in range(vs.start, vs.stop)}
        super().__init__(model, settings, [joint_of[v] for v in self.index] + list(tendons),
                         tendons, dt)
        #: per row: its force's bounds (N m or N): [-c+, -c-] of a DoF, [-f, f] of a tendon
        self.low = np.concatenate([-coulomb[self.index, 0], -force])
        self.high = np.concatenate([-coulomb[self.index, 1], force])
        #: (F, nv): the rows, e_v of a DoF, c of a tendon
        self.J = np.concatenate([np.eye(model.nv)[self.index], self.Cv])
        self.weighed = (self.index, self.Cv)

    @property
    def key(self):
        return ("rigid friction", tuple(self.index.tolist()), self.Cv.tobytes(),
                self.settings.iterations, tuple(j.impedance for j in self.limit),
                self.settings.invweight0)

    def params(self, model, q0):
        """The rows' numbers (numpy; the same for every initial state q0): their bounds, the
        damping b, their compliances (1 - d) / d at zero violation and the regularization."""
        _, b = self.gains()
        zero = np.zeros((1, len(self.low)))
        return self.solver_params(low=self.low, high=self.high, b=b, compliance=self.terms(
            np, np.zeros(len(self.low)), zero)[1][0])

    def rates(self, xp, qd):
        """(N, F): the rows' velocities J qd (rad/s or m/s)."""
        return qd @ self.J.T

    def initial_state(self, xp, q0):
        """The warm start: the previous step's forces (N, F), none at first."""
        return {"forces": xp.zeros(q0.shape[:-1] + (len(self.low),), dtype=q0.dtype)}

    def block(self, xp, p, q, qd, state):
        """The friction's ``Rows`` (``contact_solver.solve_rows``) at q (N, nq), qd (N, nv),
        warm-started from ``state["forces"]``; its ``finish`` gives the next step's state."""
        start = state["forces"]
        a_ref = -p["b"] * self.rates(xp, qd)

        def sweep(S, first, f, u):
            for j in range(len(self.low)):
                new, u = S.boxed(first + j, columns(xp, f, first + j, 1)[:, 0], u,
                                 p["low"][j], p["high"][j])
                f = put_columns(xp, f, first + j, new[:, None])
            return f, u

        def finish(f, _diag, _entry):
            return {"forces": f}

        weights = p["weights"] + 0.0 * start if "weights" in p else None
        return Rows(0.0 * q[:, :1, None] + self.J, a_ref, start, p["compliance"] + 0.0 * start,
                    sweep, finish, weights=weights,
                    dofs=tuple(tuple(int(v) for v in np.flatnonzero(row)) for row in self.J))

    def springs(self, model):
        """The damping, per unit apparent inertia (``stability.stiffest_springs``)."""
        return [(what, 0.0, b, m) for what, _, b, m in
                self.stabilisations("the joint friction's damping")]
