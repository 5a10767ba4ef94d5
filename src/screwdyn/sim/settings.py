"""The settings of a simulation: one typed, validated, documented object.

    settings = Settings(integrator="semi_implicit_euler", contact=GroundContact(mu=0.6),
                        joint_limits=True)
    traj = simulate(model, q0, qd0, controller, 5.0, 1e-3, settings=settings)

``simulate`` also takes every field as a keyword (``simulate(..., integrator="rk4")``); keywords
override the fields of ``settings``. Every field is checked when the object is made: a bad value
raises ``ValueError`` naming the field and what it accepts, before anything runs.
"""
from dataclasses import dataclass, field, fields, replace
from typing import Callable, Optional, Union

import numpy as np

from .checks import boolean, gravity as _check_gravity, positive as _check_positive
from .contact import GroundContact
from .contact_solver import RigidContact
from .friction_constraints import RigidFriction
from .limit_constraints import RigidLimits
from .scene import ShapeContact

INTEGRATORS = ("rk4", "semi_implicit_euler", "euler")
BACKENDS = ("auto", "native", "jax", "numpy")
CONTROL = ("continuous", "hold")
JOINT_FRICTION_MODELS = ("stick_slip", "sign")


@dataclass(frozen=True)
class JointLimits:
    """Joint position limits (``model.lower_position_limit``, ``upper_position_limit``) enforced
    as stiff one-sided spring-dampers: beyond a limit by x (rad or m) at rate x', the joint
    feels -(k x + b x') (never pulling towards the limit). k and b are set per joint and per
    rollout from the joint's own inertia at the initial state, I = M_jj(q0) (armature included):
    k = I (2 pi frequency)^2, b = 2 damping_ratio I (2 pi frequency), so that a joint pressed
    against its limit rings at ``frequency`` (Hz) with ``damping_ratio``, whatever its size.

    The defaults (50 Hz, critically damped) keep a limit stiff enough that a joint pushing with
    torque tau overshoots by tau / k (0.6 degrees for a 0.5 kg m^2 joint at 87 N m) and soft
    enough for 1 ms steps (the step must stay under about 1 / (3 frequency); ``simulate`` warns
    with the largest stable step otherwise). Limits apply to 1-DoF joints (revolute, prismatic,
    helical); continuous, planar, spherical and free joints have none."""

    frequency: float = 50.0
    damping_ratio: float = 1.0

    def __post_init__(self):
        _check_positive(self.frequency, "JointLimits.frequency")
        _check_positive(self.damping_ratio, "JointLimits.damping_ratio", allow_zero=True)


@dataclass(frozen=True)
class JointFriction:
    """How the model's Coulomb joint friction (``model.coulomb``, from URDF ``<dynamics
    friction>``, MJCF ``frictionloss``, DH ``Tc``) is simulated, and its fixed tendons' dry
    friction (``FixedTendon.frictionloss``, along each tendon's length). Viscous damping
    (``model.damping``) always acts as in ``forward_dynamics``.

    ``model="stick_slip"`` (default): an elasto-plastic (Dahl-type) spring per joint. A sticking
    joint is held by a spring of stiffness k anchored where it stuck, damped by b; when the
    spring force reaches the Coulomb force the anchor slides along, so a sliding joint feels
    exactly the Coulomb force against its motion, and a joint loaded below it stays put (no
    creep, no chatter at zero velocity). k and b are set from the joint's inertia at q0 as for
    ``JointLimits`` (``frequency`` Hz, ``damping_ratio``); the spring deflects by at most
    Coulomb force / k (1e-4 rad for a Puma 560 shoulder).

    ``model="sign"``: the force of ``forward_dynamics``, a constant opposing force at nonzero
    velocity and none at rest (Robotics Toolbox's model). It chatters around zero velocity and
    cannot hold a joint still against a load; for comparisons with that model."""

    model: str = "stick_slip"
    frequency: float = 50.0
    damping_ratio: float = 1.0

    def __post_init__(self):
        if self.model not in JOINT_FRICTION_MODELS:
            raise ValueError(f"JointFriction.model must be one of "
                             f"{', '.join(JOINT_FRICTION_MODELS)}, got {self.model!r}")
        _check_positive(self.frequency, "JointFriction.frequency")
        _check_positive(self.damping_ratio, "JointFriction.damping_ratio", allow_zero=True)


@dataclass(frozen=True)
class Settings:
    """How ``simulate`` integrates. Fields (each also a keyword of ``simulate``):

    integrator: ``"rk4"`` (classical Runge-Kutta on the configuration manifold, fourth order),
        ``"semi_implicit_euler"`` (qd += dt qdd, then q moves with the new qd; first order,
        bounded energy error, one dynamics evaluation per step; the joints' viscous damping
        integrated implicitly, as MuJoCo's Euler: stable at every dt) or ``"euler"``.
    algebra: the algebra the forward dynamics and the contact kinematics run in: ``"spatial"``,
        ``"cga"``, ``"dq"`` or, for DH models, ``"vector"``.
    backend: ``"auto"`` (native when llvmlite is installed and the controller can be traced,
        else JAX under the same condition, else numpy with a warning), ``"native"`` (the step
        traced into machine code and the loop over steps in machine code too), ``"jax"`` (the
        rollout compiled into one XLA loop) or ``"numpy"`` (stepped in Python).
    control: ``"continuous"`` (the controller is part of the ODE, called at every integrator
        stage) or ``"hold"`` (called once per step, its output held: a digital controller at
        1/dt). Torque tables are always held.
    gravity: the world gravity vector (3,) in m/s^2; None: ``model.gravity``.
    record_every: keep every k-th sample (the steps in between run but are not stored).
    divergence_limit: the largest |qd| entry (rad/s or m/s) before the run counts as diverged
        (None: no limit).
    energy_limit: the run counts as diverged when, as a fraction of the energy the motion has
        exchanged so far, the energy balance |T + V - E0 - W_in - W_passive| (the energy no
        force accounts for) or the energy the passive forces produce (negative dissipation:
        springs too stiff for the step giving out more than they took in) exceeds it (None: no
        check). A sound run stays orders of magnitude below the default 0.5 (RK4: 1e-12 to
        1e-4; semi-implicit Euler: about 1e-3); an unstable step passes it within a few steps
        of blowing up.
    contact: a ``GroundContact`` (a ground plane with compliant contact and stick-slip
        friction: a penalty law), a ``RigidContact`` (a ground plane whose contact forces are
        solved with the dynamics: Coulomb cones, stable at 1-2 ms steps), a ``ShapeContact``
        (rigid contact between collision shapes and with the ground: ``Scene.build``), or
        None.
    joint_limits: enforce the model's position limits: True (``JointLimits()``: stiff
        springs), a ``JointLimits`` with other parameters, a ``RigidLimits`` (constraints
        solved with the dynamics, and with a ``RigidContact``'s or a scene's contact: a rigid
        stop at 1-2 ms steps, as MuJoCo's limits), or False.
    joint_friction: how the joints' Coulomb friction (and the fixed tendons' frictionloss) is
        simulated: a ``JointFriction`` (stick-slip springs or the sign law, a force of the
        dynamics) or a ``RigidFriction`` (MuJoCo's friction loss rows, solved with the
        dynamics and with a solved contact's and ``RigidLimits``' rows).
    external: external wrenches ``external(t, q, qd) -> (..., nlinks, 6)``: for each link, in
        ``model.link_names`` order, the [force; torque] the environment applies, in the link
        frame, torque about the link origin (as ``f_ext`` of the dynamics functions). Part of
        the ODE like a continuous controller; write it array-generic to compile it.
    progress: a callable ``progress(steps_done, steps_total)`` called from time to time, True
        for a progress bar on stderr (tqdm), or None.
    record_contact_forces: also keep the contact force on every contact point at every sample,
        ``traj.contact_force`` (..., T, points, 3), world frame, N.
    """

    integrator: str = "rk4"
    algebra: str = "spatial"
    backend: str = "auto"
    control: str = "continuous"
    gravity: Optional[tuple] = None
    record_every: int = 1
    divergence_limit: Optional[float] = 1e6
    energy_limit: Optional[float] = 0.5
    contact: Optional[Union[GroundContact, RigidContact, ShapeContact]] = None
    joint_limits: Union[JointLimits, RigidLimits, bool, None] = None
    joint_friction: Union[JointFriction, RigidFriction] = field(default_factory=JointFriction)
    external: Optional[Callable] = None
    progress: Union[Callable, bool, None] = None
    record_contact_forces: bool = False

    def __post_init__(self):
        from ..algebra import ALGEBRAS

        integrator = str(self.integrator).replace("-", "_").lower()
        if integrator not in INTEGRATORS:
            raise ValueError(f"unknown integrator {self.integrator!r}; valid: "
                             f"{', '.join(INTEGRATORS)}")
        object.__setattr__(self, "integrator", integrator)
        for name, valid in (("backend", BACKENDS), ("control", CONTROL), ("algebra", ALGEBRAS)):
            if getattr(self, name) not in valid:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; valid: "
                                 f"{', '.join(valid)}")
        if self.gravity is not None:
            object.__setattr__(self, "gravity", _check_gravity(self.gravity, "gravity"))
        r = self.record_every
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
            raise ValueError(f"record_every must be a positive integer, got {r!r}")
        object.__setattr__(self, "record_every", int(r))
        for name in ("divergence_limit", "energy_limit"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _check_positive(getattr(self, name), name))
        if self.contact is not None and not isinstance(self.contact, (GroundContact,
                                                                      RigidContact,
                                                                      ShapeContact)):
            raise ValueError(f"contact must be a GroundContact, a RigidContact, a ShapeContact "
                             f"(Scene.build) or None, got "
                             f"{type(self.contact).__name__}")
        limits = self.joint_limits
        if limits is True:
            limits = JointLimits()
        elif limits is False:
            limits = None
        if limits is not None and not isinstance(limits, (JointLimits, RigidLimits)):
            raise ValueError(f"joint_limits must be True, False, a JointLimits or a "
                             f"RigidLimits, got "
                             f"{type(limits).__name__}")
        object.__setattr__(self, "joint_limits", limits)
        if not isinstance(self.joint_friction, (JointFriction, RigidFriction)):
            raise ValueError(f"joint_friction must be a JointFriction or a RigidFriction, got "
                             f"{type(self.joint_friction).__name__}")
        if self.external is not None and not callable(self.external):
            raise ValueError("external must be a function external(t, q, qd) -> (..., nlinks, "
                             f"6), got {type(self.external).__name__}")
        if not (self.progress is None or isinstance(self.progress, bool)
                or callable(self.progress)):
            raise ValueError("progress must be a callable progress(done, total), True or None")
        boolean(self.record_contact_forces, "record_contact_forces")

    @classmethod
    def make(cls, settings=None, **overrides):
        """``settings`` (default ``Settings()``) with the keyword fields replaced; an unknown
        keyword is a ``TypeError`` listing the valid ones."""
        if settings is None:
            settings = cls()
        elif not isinstance(settings, cls):
            raise ValueError(f"settings must be a screwdyn.sim.Settings, got "
                             f"{type(settings).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"simulate() got an unexpected keyword argument {unknown[0]!r}; "
                            f"settings are: {', '.join(sorted(names))}")
        return replace(settings, **overrides) if overrides else settings

