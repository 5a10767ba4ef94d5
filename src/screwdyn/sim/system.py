"""The simulated system: the model's forward dynamics under every force the settings add.

    qdd = FD(q, qd, tau_controller + tau_limits + tau_friction, f_ext = contact + external)

``System.rates`` is the right-hand side an integrator evaluates at each stage, with the power of
the forces for the energy balance in two channels: *input* (the controller's joint forces and the
external wrenches) and *passive* (contact, joint limits, joint friction and damping: springs and
dissipation). ``accelerations`` is the one place a step evaluates forward dynamics (where a
compiled single-state recursion can be hooked in).

Semi-implicit Euler integrates the joints' viscous damping implicitly, as MuJoCo's Euler does:
the step solves (M + dt D) qdd = f(q, qd) (D = diag(``model.damping``)), so that
qd1 = qd + dt qdd feels the damping force -D qd1 of the velocity it ends with. Its forward
dynamics is the model's with dt D added to the armature (``fd_model``); the damping's work is
taken at qd1. Constraint forces (equalities, a solved contact, solved limits) are found as
MuJoCo's Euler finds them, with the undamped dynamics (``constrained_model``: damping -D qd
only), whose accelerations a the step then damps: (M + dt D) qdd = M a (``_damped``).
Explicit damping is unstable once dt D exceeds twice a joint's apparent inertia (dm_control's
light fingers at 1 ms); implicit damping is stable at every dt and equals ``mj_step``'s Euler.

Constraint forces found with the dynamics, a ``RigidContact``'s or a scene's contact, the
joint limits of ``RigidLimits`` and the dry friction of ``RigidFriction``, are one problem:
their rows (``contact_solver.Rows``) go through one ``solve_rows`` after the forward dynamics
(``_solve``), which keeps the model's equality constraints too.

Some forces carry state from step to step (the anchors of the stick-slip contact and joint
friction springs): the *hybrid state*, a dict of arrays, fixed during a step and updated between
steps (``advance`` with the step's displacement, ``project`` onto what the springs can hold;
the solvers' warm starts, ``solved``).
"""
import numpy as np

from ..algorithms import spd
from ..algorithms.aba import check_defined
from ..algorithms.constraints import impedance_terms
from ..algorithms.joint_forces import add_diagonal, coulomb, friction as joint_friction_forces
from ..controllers import Identity
from .. import _backend
from ..dynamics import forward_kinematics, link_velocities, mass_matrix
from ..constraints import ACCELERATIONS, constraint_jacobian, constraint_residual
from ..execution import plan
from ..execution.plan import lookup, run_jax
from .contact_solver import solve_rows
from .friction_constraints import FrictionRows, RigidFriction
from .joint_springs import Limits, StickSlip, TendonSprings, tendon_friction
from .limit_constraints import LimitRows, RigidLimits
from .spatial_tendons import SpatialSprings


def accelerations(model, q, qd, tau, f_ext, gravity, algebra):
    """(qdd (N, nv), tau_c (N, nv) or None): the joint accelerations of ``model`` at q (N, nq),
    qd (N, nv) under joint forces tau (N, nv) and link wrenches f_ext (N, nlinks, 6) or None,
    and for a model with equality constraints the joint forces of the constraint forces
    (J^T lambda): the single forward-dynamics call of a simulation step
    (``forward_dynamics``, or ``constraints.ACCELERATIONS``: constrained forward dynamics; on
    numpy through the plan; under JAX, the body of the rollout's XLA loop: the execution plan's
    loop program, ``plan.run_jax(..., loop=True)``)."""
    function = ACCELERATIONS if model.constraints else lookup("forward_dynamics")
    if _backend.namespace(q, qd, tau) is np:
        out = plan.run(function, model, algebra, (q, qd, tau), (f_ext, gravity))
    else:
        given = {"q": q, "qd": qd, "tau": tau, "gravity": gravity, "f_ext": f_ext}
        out = run_jax(function, model, algebra, given, loop=True)
    if not model.constraints:
        return out, None
    nv = model.nv
    return out[..., :nv], out[..., nv:]


class System:
    """The forces of a simulation bound to a model (static structure here, numbers in
    ``params``, which the compiled rollout takes as arguments). ``contact`` is a
    ``contact_model.ContactModel`` (or None): the step reaches contact only through it."""

    def __init__(self, model, settings, assembly=None, dt=None):
        """``assembly``: None, or what simulates in the model's stead (a
        ``screwdyn.composition.Assembly``: its own forward dynamics across the connection
        points; ``model`` is then its configuration layout). ``dt`` (s): the step, with which
        semi-implicit Euler integrates the joints' damping implicitly (module docstring), and
        at which the refsafe constraints and limits take their time constants (at least
        2 dt: ``Model.at_step``, ``impedance.step_time_constant``)."""
        self.model, self.settings, self.assembly = model, settings, assembly
        if assembly is not None and (settings.contact is not None
                                     or settings.external is not None):
            raise ValueError("contact and external wrenches act on a Model's links: simulate "
                             "assembly.to_model() to use them")
        if assembly is not None and isinstance(settings.joint_limits, RigidLimits):
            raise ValueError("RigidLimits are solved with a Model's dynamics: simulate "
                             "assembly.to_model() to use them, or JointLimits (springs)")
        if assembly is not None and isinstance(settings.joint_friction, RigidFriction):
            raise ValueError("RigidFriction is solved with a Model's dynamics: simulate "
                             "assembly.to_model() to use it, or JointFriction (springs)")
        self.gravity = np.array(settings.gravity if settings.gravity is not None
                                else model.gravity, dtype=float)
        self.algebra = settings.algebra
        self.kinematics_algebra = "spatial" if settings.algebra == "vector" else settings.algebra
        self.contact = None if settings.contact is None \
            else settings.contact.resolve(model, dt)
        self.solves_contact = getattr(self.contact, "solves", False)
        self.limits = None
        if settings.joint_limits is not None:
            if not isinstance(settings.joint_limits, RigidLimits) \
                    and any(t.limited for t in model.spatial_tendons):
                raise ValueError(
                    f"model {model.name!r} has spatial tendons with length limits, which are "
                    "solved as constraints: pass joint_limits=RigidLimits() (an MJCF file's: "
                    "RigidLimits.from_mjcf(path); on the command line --rigid-limits), or "
                    "joint_limits=False to leave every limit out")
            limits = LimitRows(model, settings.joint_limits, dt, self.kinematics_algebra) \
                if isinstance(settings.joint_limits, RigidLimits) \
                else Limits(model, settings.joint_limits)
            self.limits = limits if limits else None
        #: whether the joint limits are constraints, solved with the dynamics (and the
        #: contact's, where it solves too: one ``solve_rows``)
        self.solves_limits = getattr(self.limits, "solves", False)
        #: the stick-slip springs of the joints' and tendons' dry friction, or None
        self.friction = None
        #: the dry friction as constraints (``RigidFriction``), solved with the dynamics
        self.friction_rows = None
        self.fd_model = model = model if dt is None else model.at_step(dt)
        #: (Cv (T, nv), frictionloss (T,)): the tendons' dry friction of the "sign" model
        self.tendon_sign = None
        if isinstance(settings.joint_friction, RigidFriction):
            rows = FrictionRows(model, settings.joint_friction, dt)
            if rows:
                self.friction_rows = rows
                if model.coulomb.any():  # the rows replace it
                    self.fd_model = model.with_joint_parameters(coulomb=0.0)
        elif settings.joint_friction.model == "stick_slip":
            friction = StickSlip(model, settings.joint_friction)
            if friction:
                self.friction = friction
                if model.coulomb.any():  # the springs replace it
                    self.fd_model = model.with_joint_parameters(coulomb=0.0)
        elif any(t.frictionloss > 0 for t in model.tendons):
            self.tendon_sign = tendon_friction(model)[1:]
        #: dt D (nv,): the damping semi-implicit Euler integrates implicitly, or None
        self.implicit_damping = None
        undamped = self.fd_model
        if (settings.integrator == "semi_implicit_euler" and dt is not None
                and assembly is None and model.damping.any()):
            self.implicit_damping = float(dt) * model.damping
            self.fd_model = self.fd_model.with_joint_parameters(armature={
                b.joint: np.add(b.armature, float(dt) * np.asarray(b.damping))
                for b in model.active_bodies})
        #: the model whose dynamics find the constraint forces (equalities, solved contact and
        #: limits): without the implicit damping, which then damps the accelerations they give
        #: (``_damped``), as MuJoCo's Euler does; ``fd_model`` where no constraint force acts
        #: (one solve)
        constrained = model.constraints or self.solves
        self.constrained_model = undamped if constrained else self.fd_model
        self.external = settings.external
        self.tendons = TendonSprings(model) if any(t.passive for t in model.tendons) else None
        #: the spatial tendons' springs and dampers, or None
        self.strings = SpatialSprings(model, self.kinematics_algebra) \
            if any(t.passive for t in model.spatial_tendons) else None

    @property
    def solves_friction(self):
        """Whether the dry friction is constraints (``RigidFriction``), solved with the
        dynamics."""
        return self.friction_rows is not None

    @property
    def solves(self):
        """Whether a step solves constraint rows with the dynamics (``_solve``): a solved
        contact's, ``RigidLimits``', ``RigidFriction``'s."""
        return self.solves_contact or self.solves_limits or self.solves_friction

    @property
    def key(self):
        """What identifies the compiled code of this system (numbers excluded)."""
        return (self.fd_model, self.constrained_model, self.algebra, self.assembly,
                None if self.assembly is None else self.assembly.version,
                None if self.contact is None else self.contact.key,
                None if self.limits is None else self.limits.key,
                None if self.friction is None else self.friction.key,
                None if self.friction_rows is None else self.friction_rows.key,
                None if self.tendons is None else self.tendons.key,
                None if self.strings is None else self.strings.key,
                None if self.external is None else Identity(self.external))

    @property
    def needs_links(self):
        return self.contact is not None or self.external is not None

    @property
    def parts(self):
        """((name, part), ...): the forces other than the contact whose numbers
        (``part.params(model, q0)``) ``params`` holds under that name: the joint limits, the
        dry friction (its springs or its rows)."""
        out = (("limits", self.limits), ("friction", self.friction or self.friction_rows))
        return tuple((name, part) for name, part in out if part is not None)

    def params(self, q0):
        """The numbers of every force, for initial states q0 (N, nq) (numpy)."""
        p = {"gravity": self.gravity}
        if self.contact is not None:
            p["contact"] = self.contact.params()
        for name, part in self.parts:
            p[name] = part.params(self.model, q0)
        return p

    # -- hybrid state ----------------------------------------------------------------------
    def initial_hybrid(self, xp, params, q0):
        """The springs' anchors at rest under the initial states q0 (N, nq)."""
        hybrid = {}
        M = None
        if self.solves_contact or self.solves_limits:  # the stabilisation's stiffness, from
            check_defined(self.fd_model.tree.nominal)  # the apparent masses (M^-1: the
            M = mass_matrix(self.constrained_model, q0,  # ModelError naming the joint)
                            algebra=self.kinematics_algebra)
        if self.contact is not None:
            T = self._poses(q0)
            hybrid["contact"] = self.contact.initial_state(xp, params["contact"], T)
            if self.solves_contact:
                hybrid["contact"]["stiffness"] = self.contact.stiffness(
                    xp, params["contact"], q0, T, M)
        if self.solves_limits:
            hybrid["limits"] = self.limits.initial_state(xp, params["limits"], q0, M)
        if self.friction is not None:
            hybrid["delta"] = xp.zeros(q0.shape[:-1] + (len(self.friction.positive),))
        if self.solves_friction:
            hybrid["friction"] = self.friction_rows.initial_state(xp, q0)
        return hybrid

    def solved(self, hybrid):
        """{"contact": ..., "limits": ..., "friction": ...}: the solvers' states in ``hybrid``
        (the warm starts), None for what is not solved: what a step's evaluations of
        ``rates`` replace."""
        return {"contact": hybrid["contact"] if self.solves_contact else None,
                "limits": hybrid["limits"] if self.solves_limits else None,
                "friction": hybrid["friction"] if self.solves_friction else None}

    def advance(self, xp, hybrid, xi, solved=None):
        """The hybrid state after a step that moved the configuration by xi (N, nv), its last
        evaluation of the dynamics giving the solvers' states ``solved`` (as ``solved``: their
        warm starts for the next step)."""
        if solved is not None:
            hybrid = dict(hybrid, **{k: v for k, v in solved.items() if v is not None})
        if "delta" in hybrid:
            hybrid = dict(hybrid, delta=hybrid["delta"] + self.friction.moved(xp, xi))
        return hybrid

    def project(self, xp, params, q, hybrid):
        """(hybrid state the springs can hold at q, elastic energy (N,) of every spring)."""
        elastic = xp.zeros(q.shape[:-1], dtype=q.dtype)
        hybrid = dict(hybrid)
        if self.contact is not None:
            hybrid["contact"], e = self.contact.project(xp, params["contact"], self._poses(q),
                                                        hybrid["contact"])
            elastic = elastic + e
        if self.friction is not None:
            hybrid["delta"], e = self.friction.project(xp, params["friction"], hybrid["delta"])
            elastic = elastic + e
        if self.solves_limits:
            elastic = elastic + self.limits.elastic(xp, params["limits"], q, hybrid["limits"])
        elif self.limits is not None:
            _, e = self.limits.torques(xp, params["limits"], q, xp.zeros(q.shape[:-1]
                                                                       + (self.model.nv,)))
            elastic = elastic + e
        for springs in (self.tendons, self.strings):
            if springs is not None:
                elastic = elastic + springs.forces(xp, q, 0 * q[..., :self.model.nv])[1]
        return hybrid, elastic

    # -- the right-hand side ----------------------------------------------------------------
    def rates(self, xp, params, t, q, qd, xi, tau, hybrid):
        """(qdd (N, nv), power, contact forces (N, P, 3) or None, the solvers' new states (as
        ``solved``)) at time t, q, qd, under the
        controller's joint forces tau (N, nv); xi (N, nv) is the displacement since the step
        began (for the stick-slip springs). ``power(v)`` (N, 2) is the power [input, passive]
        of these forces when the robot moves with velocity v (N, nv): the integrator takes it
        with the velocity it moves the configuration with."""
        total = tau
        passive = -joint_friction_forces(xp, self.fd_model, qd.T).T \
            if self.fd_model.has_joint_friction else 0 * qd
        if self.tendon_sign is not None:  # a tendon's dry friction, "sign": -f sign(c qd) c
            Cv, force = self.tendon_sign
            rate = qd @ Cv.T
            tf = -coulomb(xp, rate, force, -force) @ Cv
            total, passive = total + tf, passive + tf
        if self.limits is not None and not self.solves_limits:
            tl, _ = self.limits.torques(xp, params["limits"], q, qd)
            tl = 0 * qd + tl @ self.limits.rows
            total, passive = total + tl, passive + tl
        if self.friction is not None:
            tf = self.friction.torques(xp, params["friction"],
                                       hybrid["delta"] + self.friction.moved(xp, xi), qd)
            tf = 0 * qd + tf @ self.friction.rows
            total, passive = total + tf, passive + tf
        for springs in (self.tendons, self.strings):
            if springs is not None:
                tt = springs.forces(xp, q, qd)[0]
                total, passive = total + tt, passive + tt
        f_ext = wrench_in = wrench_passive = forces = V = T = None
        solved = self.solved(hybrid)
        if self.needs_links:
            T = self._poses(q)
            if (self.contact is not None and not self.solves_contact) \
                    or self.external is not None:  # a force law's wrenches: their power
                V = link_velocities(self.model, q, qd, frame="local",
                                    algebra=self.kinematics_algebra)
            if self.contact is not None and not self.solves_contact:
                wrench_passive, forces = self.contact.forces(xp, params["contact"], T, V,
                                                            hybrid["contact"])
                f_ext = wrench_passive
            if self.external is not None:
                wrench_in = self._external(xp, t, q, qd)
                f_ext = wrench_in if f_ext is None else f_ext + wrench_in
        if self.assembly is not None:
            qdd = self.assembly.forward_dynamics(q, qd, total, gravity=params["gravity"],
                                                 algebra=self.algebra, time=t)
        else:
            qdd, tau_c = accelerations(self.constrained_model, q, qd, total, f_ext,
                                       params["gravity"], self.algebra)
            if tau_c is not None:  # the constraint forces: passive (no work when held)
                passive = passive + tau_c
            M = None
            if self.solves:  # solved with the dynamics
                qdd, tau_c, forces, solved, M = self._solve(xp, params, q, qd, qdd, T, hybrid)
                passive = passive + tau_c
            if self.constrained_model is not self.fd_model:
                qdd = self._damped(xp, q, qdd, M)
        if self.implicit_damping is not None:  # the damping at qd1 = qd + dt qdd: -D qd1
            passive = passive - add_diagonal(xp, 0 * qd.T, self.implicit_damping, qdd.T).T

        def power(v):
            twists = V if v is qd else None
            if twists is None and (wrench_in is not None or wrench_passive is not None):
                twists = link_velocities(self.model, q, v, frame="local",
                                         algebra=self.kinematics_algebra)
            p_in, p_passive = xp.sum(tau * v, axis=-1), xp.sum(passive * v, axis=-1)
            if wrench_in is not None:
                p_in = p_in + xp.sum(wrench_in * twists, axis=(-2, -1))
            if wrench_passive is not None:
                p_passive = p_passive + xp.sum(wrench_passive * twists, axis=(-2, -1))
            return xp.stack([p_in, p_passive], axis=-1)

        return qdd, power, forces, solved

    def _solve(self, xp, params, q, qd, qdd0, T, hybrid):
        """(qdd, tau_c, contact forces or None, the solvers' new states, M): the rigid
        contact's forces, the joint limits' and the dry friction's that are constraints, in one
        ``solve_rows`` with
        the accelerations qdd0 (N, nv) without them (which keep the model's equality
        constraints: their Jacobian makes the rows act through the constrained inertia), for
        ``constrained_model``'s mass matrix M (N, nv, nv)."""
        model = self.constrained_model
        M = mass_matrix(model, q, algebra=self.kinematics_algebra)
        J_eq = constraint_jacobian(model, q, algebra=self.kinematics_algebra) \
            if model.constraints else None
        eq_soft = self._equality_softness(xp, q)
        blocks, names = [], []
        if self.solves_contact:  # first: its sweep reads its forces from column 0
            blocks.append(self.contact.block(xp, params["contact"], q, qd, T,
                                             hybrid["contact"]))
            names.append("contact")
        if self.solves_limits:
            blocks.append(self.limits.block(xp, params["limits"], q, qd, hybrid["limits"]))
            names.append("limits")
        if self.solves_friction:
            blocks.append(self.friction_rows.block(xp, params["friction"], q, qd,
                                                   hybrid["friction"]))
            names.append("friction")
        # one solve: the first block's sweeps and regularization (the contact's, else the
        # limits', else the friction's)
        if self.solves_contact:
            iterations = self.contact.ground.iterations
            regularization = params["contact"]["regularization"]
        else:
            first = self.limits if self.solves_limits else self.friction_rows
            iterations = first.settings.iterations
            regularization = params[names[0]]["regularization"]
        qdd, tau_c, out = solve_rows(xp, model, M, J_eq, qdd0, blocks, iterations,
                                     regularization, eq_soft)
        out = dict(zip(names, out))
        forces, contact = out.get("contact", (None, None))
        return qdd, tau_c, forces, {"contact": contact, "limits": out.get("limits"),
                                    "friction": out.get("friction")}, M

    def _damped(self, xp, q, qdd, M=None):
        """The accelerations (N, nv) that the joint forces giving qdd (N, nv) to the undamped
        ``constrained_model`` (its mass matrix M (N, nv, nv), or None: computed here) give
        under the implicit damping: (M + dt D) qdd' = M qdd, i.e.
        qdd' = qdd - (M + dt D)^-1 dt D qdd (MuJoCo's Euler, after its constraint solve)."""
        if M is None:
            M = mass_matrix(self.constrained_model, q, algebra=self.kinematics_algebra)
        hD = self.implicit_damping
        return qdd - spd.solve(xp, M + np.diag(hD), (hD * qdd)[..., None])[..., 0]

    def _equality_softness(self, xp, q):
        """The soft equality constraints' ``Softness`` at q (N, nq) (``impedance_terms``;
        their residual is evaluated only where an impedance depends on it); None where every
        constraint is hard."""
        model = self.constrained_model
        if not any(c.soft for c in model.constraints):
            return None
        if all(c.impedance.constant for c in model.constraints):
            e = xp.zeros((model.nconstraints,) + q.shape[:-1])
        else:
            e = xp.moveaxis(constraint_residual(model, q, algebra=self.kinematics_algebra),
                            -1, 0)
        return impedance_terms(xp, model, e)

    def _poses(self, q):
        return forward_kinematics(self.model, q, algebra=self.kinematics_algebra)

    def _external(self, xp, t, q, qd):
        wrench = xp.asarray(self.external(t, q, qd))
        shape = (self.model.nlinks, 6)
        if wrench.ndim < 2 or tuple(wrench.shape[-2:]) != shape:
            raise ExternalWrenchError(f"external(t, q, qd) returned shape {tuple(wrench.shape)}; "
                                      f"expected (..., {shape[0]}, 6): one [force; torque] per "
                                      "link, in model.link_names order")
        return xp.broadcast_to(wrench, q.shape[:-1] + shape)


class ExternalWrenchError(ValueError):
    """The external wrench function returned the wrong shape."""
