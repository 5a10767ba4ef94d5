"""Joint position limits as constraints: one-sided rows of the rigid contact's solver
(``contact_solver.solve_rows``), as MuJoCo's joint limits, instead of the stiff springs of
``settings.JointLimits``.

A 1-DoF joint (revolute, prismatic, helical) with a finite lower limit l has the row
J = e_v (its velocity), with penetration d = l - q; an upper limit u the row J = -e_v with
d = q - u. Each row's force f (N m or N) pushes the joint back inside, never pulls (f >= 0),
and is found with the dynamics, together with the contact's forces where the simulation has a
solved contact (``RigidContact``, ``Scene.build``): a leg pressed on its limit by the ground
holds as a rigid stop does. The reference acceleration is the contact's stabilisation,

    a_ref = k d - b v,   k = 1 / (timeconst dampratio)^2,  b = 2 / timeconst

(MuJoCo's solreflimit = (timeconst, dampratio), default (0.02, 1)), per unit apparent
inertia, so that a joint driven past its limit returns with the same time constant whatever
its size, and a load on the stop deflects it by nothing but what the stabilisation allows
while it converges: no stiffness to tune, no step too large for it.

A row takes part in a solve where its joint is closer to the limit than ``margin`` (its force
still zero unless it would cross); a joint far from both limits costs one test a sweep.

Each joint may have its own stabilisation and impedance (``RigidLimits.joints``; an MJCF
file's solreflimit and solimplimit: ``RigidLimits.from_mjcf``).

A fixed tendon with length limits (``FixedTendon.lower``, ``upper``) has rows too, after the
joints': J = sign c (its coefficients), depth sign (bound - c q), named (and given their own
``JointLimit``) by the tendon's name; then a spatial tendon (``SpatialTendon``: a string
through points on links, whose length L(q) is not linear in q), with J = sign J_L(q), its
length's Jacobian at the state (``spatial_tendons``), and depth sign (bound - L(q)): a string
that goes taut at its upper limit pulls its ends together, as MuJoCo's tendon limit.
"""
from dataclasses import dataclass

import numpy as np

from .checks import positive
from .contact_solver import Rows, columns, put_columns, row_diagonal
from .joint_springs import limited_joints, limited_tendons
from .loops import when
from .solved_rows import JointLimit, RowSettings, SoftRows
from .spatial_tendons import SpatialTendons

__all__ = ["RigidLimits", "JointLimit", "LimitRows"]


@dataclass(frozen=True)
class RigidLimits(RowSettings):
    """Joint position limits (``model.lower_position_limit``, ``upper_position_limit``)
    enforced as constraints, solved with the dynamics (see the module docstring); pass as
    ``joint_limits=RigidLimits()``.

    timeconst: the time constant (s) with which a joint past its limit is brought back
        (MuJoCo's solreflimit[0]; >= 2 dt is stable for every integrator). A joint reaching
        its limit at speed v passes it by up to v timeconst / e (dampratio 1: x = v t
        exp(-t / timeconst)) before it is back, as MuJoCo's do: 2.3 cm for a Panda joint
        falling onto its stop at 3 rad/s; a shorter timeconst, less.
    dampratio: the damping ratio of that return (solreflimit[1]); 1: critical damping, a
        joint hitting its limit leaves it at exp(-2) = 0.135 of its speed (MuJoCo's too); above
        1, less (``contact_solver.restitution_of``).
    iterations: projected Gauss-Seidel sweeps when the limits are solved alone; with a
        solved contact, its ``iterations`` (one solve for both).
    regularization: added to each row's diagonal, relative to it (>= 0), when solved alone
        (with a solved contact, the contact's).
    impedance: MuJoCo's ``solimplimit``: a constant d in (0, 1], or (dmin, dmax, width,
        midpoint, power), d rising from dmin to dmax as the joint goes past its limit by up to
        width (rad or m) (``impedance.Impedance``; stored as one): each row's compliance
        (1 - d) / d relative to its diagonal (``contact_solver``); 1: rigid.
    margin: a joint closer to a limit than this (rad or m, >= 0) takes part in the solve.
    joints: joints (or limited fixed tendons) with their own timeconst, dampratio or
        impedance: {joint or tendon name: a ``JointLimit`` or a dict of some of those fields
        (the others this object's)}; stored as a tuple of (name, ``JointLimit``).
        ``from_mjcf`` reads an MJCF file's.
    invweight0: whether a soft row's compliance scales MuJoCo's approximation of its A_jj,
        its joint's inverse weight at the model's ``q0`` (MuJoCo's ``dof_invweight0``:
        ``inverse_weights.dof_inverse_weights``, or ``inverse_weights``'s), as MuJoCo's does,
        rather than the exact (M^-1)_vv of the current state (False, the default).
    inverse_weights: ((joint name, inverse weight), ...): joints' given inverse weights in
        place of the computed ones (``from_mjcf``: MuJoCo's own).
    refsafe: MuJoCo's refsafe for the joints without their own ``JointLimit``: a simulation
        with the step dt uses a time constant of at least 2 dt
        (``impedance.step_time_constant``). False by default; a ``JointLimit`` has its own
        (``from_mjcf`` sets it for a solreflimit in the standard form, as MuJoCo)."""

    margin: float = 1e-4

    def __post_init__(self):
        super().__post_init__()
        positive(self.margin, "RigidLimits.margin", allow_zero=True)

    @classmethod
    def from_mjcf(cls, path, prefix: str = "", **options) -> "RigidLimits":
        """The limits of an MJCF file as MuJoCo has them: each limited hinge's and slide's
        own solreflimit (time constant and damping ratio; a direct (-stiffness, -damping)
        converted: timeconst 2 / damping, dampratio damping / (2 sqrt(stiffness)); MuJoCo's
        refsafe, for a solreflimit in the standard form unless the file disables it: a time
        constant of at least 2 dt of the simulation's step) and solimplimit, as ``joints``
        (``model.mjcf.limit_softness``); ``options``: the other fields (``iterations``,
        ``regularization``, ``margin``; ``timeconst``, ``dampratio``, ``impedance`` for the
        joints the file does not limit). ``prefix``: the joints' names in a scene that added
        the robot with ``Scene.add_robot(prefix=...)``. MuJoCo's inverse weights of the
        joints (``dof_invweight0``) come too, for ``invweight0=True``; a limited fixed
        tendon's solreflimit, solimplimit and ``tendon_invweight0`` as well, under its
        name."""
        from ..model.mjcf import limit_softness

        return cls._from_softness(limit_softness(path), prefix, options)


class LimitRows(SoftRows):
    """``RigidLimits`` bound to a model: one row per finite limit of a 1-DoF joint, then per
    finite length limit of a fixed tendon, then of a spatial tendon
    (``solved_rows.SoftRows``)."""

    tendon_kind = "limited tendons"

    def __init__(self, model, settings, dt=None, algebra="spatial"):
        """The rows of ``settings`` (``RigidLimits``) on ``model``, in a simulation with the
        step ``dt`` (s; None: no step), at which refsafe limits take their time constants;
        ``algebra``: the one the spatial tendons' kinematics are computed in."""
        lower, upper = model.lower_position_limit, model.upper_position_limit
        q_index, v_index, sign, bound = [], [], [], []
        for qi, vi in zip(*limited_joints(model)):
            for s, value in ((1.0, lower[qi]), (-1.0, upper[qi])):
                if np.isfinite(value):
                    q_index.append(qi)
                    v_index.append(vi)
                    sign.append(s)
                    bound.append(value)
        names = {qs.start: name for name, qs in zip(model.joint_names, model.q_slices)}
        tendons, Cq, Cv, low, high = limited_tendons(model)
        rows = [(t, s, value) for t in range(len(tendons))
                for s, value in ((1.0, low[t]), (-1.0, high[t])) if np.isfinite(value)]
        strings = [t for t in model.spatial_tendons if t.limited]
        #: the limited spatial tendons, bound to the model (their lengths and Jacobians at a
        #: state)
        self.paths = SpatialTendons(model, strings, algebra)
        spatial = [(t, s, value) for t, string in enumerate(strings)
                   for s, value in ((1.0, string.lower), (-1.0, string.upper))
                   if np.isfinite(value)]
        super().__init__(model, settings, [names[qi] for qi in q_index]
                         + [tendons[t] for t, _, _ in rows]
                         + [strings[t].name for t, _, _ in spatial],
                         tendons + tuple(t.name for t in strings), dt)
        #: per row: the joint's coordinate and velocity index, +1 (lower) or -1 (upper), the
        #: limit (rad or m) where it acts: the range's bound, moved inside by its
        #: ``JointLimit.inset`` (an MJCF margin)
        self.q_index = np.array(q_index, dtype=int)
        self.v_index = np.array(v_index, dtype=int)
        self.sign = np.array(sign + [s for _, s, _ in rows + spatial], dtype=float)
        self.bound = np.array(bound + [value for _, _, value in rows + spatial], dtype=float) \
            + self.sign * np.array([j.inset for j in self.limit], dtype=float)
        #: the fixed tendon rows' (after the joints'): sign c (T, nq) and (T, nv) of their
        #: tendons' lengths and rates (a row's J; its depth sign (bound - L(q)))
        self.tendon_q = np.array([s * Cq[t] for t, s, _ in rows]).reshape(-1, model.nq)
        self.tendon_v = np.array([s * Cv[t] for t, s, _ in rows]).reshape(-1, model.nv)
        #: the spatial tendon rows' (last): their tendons (indices into ``paths``)
        self.spatial = np.array([t for t, _, _ in spatial], dtype=int)
        self.nv = model.nv
        _, J0 = self.paths.at(model.q0) if strings else (None, np.zeros((0, model.nv)))
        #: what MuJoCo's inverse weights are of: a spatial tendon's J at the model's q0
        self.weighed = (self.v_index, np.concatenate([self.tendon_v, J0[self.spatial]]))

    @property
    def key(self):
        return ("rigid limits", tuple(self.q_index.tolist()), tuple(self.sign.tolist()),
                self.settings.iterations, tuple(j.impedance for j in self.limit),
                self.settings.invweight0, self.tendon_q.tobytes(), self.tendon_v.tobytes(),
                self.paths.key, tuple(self.spatial.tolist()))

    def params(self, model, q0):
        """The rows' numbers (numpy; the same for every initial state q0, unlike the springs'
        of ``joint_springs.Limits``): the limits, the stabilisation's k and b, the margin
        and the regularization."""
        k, b = self.gains()
        return self.solver_params(bound=self.bound, k=k, b=b,
                                  margin=np.asarray(float(self.settings.margin)))

    def _kinematics(self, xp, q, qd=None):
        """(x (N, L): each row's joint position or tendon length, signed (+1 at a lower limit,
        -1 at an upper), J (N, L, nv): its rows, and with qd (N, nv) the rates J qd (N, L)) at
        q (N, nq): the joints' and fixed tendons' rows are constants, the spatial tendons'
        depend on q."""
        joints = len(self.q_index)
        J = np.zeros((joints, self.nv))
        J[np.arange(joints), self.v_index] = self.sign[:joints]
        constant = np.concatenate([J, self.tendon_v])
        x, rows, rates = [], [0.0 * q[:, :1, None] + constant] if len(constant) else [], []
        if joints:
            x.append(self.sign[:joints] * q[..., self.q_index])
            rates += [self.sign[:joints] * qd[..., self.v_index]] if qd is not None else []
        if len(self.tendon_q):
            x.append(q @ self.tendon_q.T)
            rates += [qd @ self.tendon_v.T] if qd is not None else []
        if len(self.spatial):
            L, JL = self.paths.kinematics(xp, q)
            s = self.sign[-len(self.spatial):]
            x.append(s * L[:, self.spatial])
            rows.append(s[:, None] * JL[:, self.spatial])
            if qd is not None:
                rates.append(xp.einsum("nlv,nv->nl", rows[-1], qd))
        out = (_joined(xp, x, -1), _joined(xp, rows, 1))
        return out if qd is None else out + (_joined(xp, rates, -1),)

    def depths(self, xp, p, q):
        """(N, L): how far each joint (then each limited fixed tendon, each limited spatial
        tendon) is past its limit (rad or m; negative: inside)."""
        return self.sign * p["bound"] - self._kinematics(xp, q)[0]

    def initial_state(self, xp, p, q0, M):
        """The warm start (the previous step's forces, (N, L), none at first) and the
        stabilisation's stiffness k m_j (N, L) (N m/rad or N/m; m_j = 1 / (M^-1)_vv the
        joint's apparent inertia) at the initial states q0 (N, nq), mass matrix M."""
        diag = row_diagonal(xp, M, self._kinematics(xp, q0)[1], p["regularization"])
        return {"forces": 0.0 * diag, "stiffness": p["k"] / diag}

    def elastic(self, xp, p, q, state):
        """(N,): the energy the stabilisation holds in the joints past their limits,
        sum 1/2 k m_j d_j^2 (J) (as the contact's, ``traj.elastic``)."""
        inside = xp.maximum(self.depths(xp, p, q), 0.0)
        return xp.sum(0.5 * state["stiffness"] * inside * inside, axis=-1)

    def block(self, xp, p, q, qd, state):
        """The limits' ``Rows`` (``contact_solver.solve_rows``) at q (N, nq), qd (N, nv),
        warm-started from ``state["forces"]``; its ``finish`` gives the next step's state."""
        x, J, rate = self._kinematics(xp, q, qd)
        depth = self.sign * p["bound"] - x
        near = depth > -p["margin"]
        spring, compliance = self.terms(xp, p["k"], depth)
        a_ref = spring - p["b"] * rate

        def sweep(S, first, f, u):
            for j in range(len(self.sign)):  # a row far from its limit: one test
                def row(x, j=j):
                    fj, u = x
                    new, u = S.one_sided(first + j, fj[:, 0], u, near[:, j])
                    return new[:, None], u

                fj, u = when(xp, near[:, j], row, (columns(xp, f, first + j, 1), u))
                f = put_columns(xp, f, first + j, fj)
            return f, u

        def finish(f, diag, _entry):
            return {"forces": f, "stiffness": p["k"] / diag}

        start = xp.where(near, state["forces"], 0.0)
        weights = p["weights"] + 0.0 * start if "weights" in p else None
        return Rows(J, a_ref, start, compliance + 0.0 * start, sweep, finish,
                    weights=weights, dofs=tuple((int(v),) for v in self.v_index) + tuple(
                        tuple(int(v) for v in np.flatnonzero(row)) for row in self.tendon_v)
                    + tuple(self.paths.dofs[t] for t in self.spatial))

    def springs(self, model):
        """The stabilisation, per unit apparent inertia (``stability.stiffest_springs``)."""
        return self.stabilisations("the joint limits' stabilisation")


def _joined(xp, parts, axis):
    """The arrays ``parts`` concatenated along ``axis``; one part as it is."""
    return parts[0] if len(parts) == 1 else xp.concatenate(parts, axis=axis)
