"""Controllers to start from: callables ``controller(t, q, qd) -> tau`` for ``screwdyn.simulate``.

A controller is any function of the time t (s), the configuration q (..., nq) and the velocity
qd (..., nv) returning joint forces (..., nv). Write it array-generic, with the namespace of its
inputs, and the JAX backend compiles it into the rollout; numpy-only code also works, step by
step on the numpy backend. The classes below are such functions with their gains kept apart, so
that a new gain reuses the compiled rollout. Each one is a few lines to copy, e.g.::

    def pd_with_gravity(t, q, qd):      # JointPD(..., gravity_compensation=True)
        return kp * (q_ref - q) - kd * qd + screwdyn.gravity_torques(model, q)

    def computed_torque(t, q, qd):      # ComputedTorque
        q_r, qd_r, qdd_r = reference(t)
        return screwdyn.inverse_dynamics(model, q, qd, qdd_r + kd * (qd_r - qd) + kp * (q_r - q))

On a model with a floating base the built-in controllers leave the base unactuated (its six
joint-force entries are zero): a floating robot cannot push on the world through its base.
References (``sinusoid``, ``quintic``) return (q, qd, qdd) at time t, array-generic too.
"""
import copy
import os

import numpy as np

from . import _backend
from .dynamics import gravity_torques, inverse_dynamics

__all__ = ["Controller", "ZeroTorque", "GravityCompensation", "JointPD", "ComputedTorque",
           "MjcfActuators", "sinusoid", "quintic", "actuated", "array_namespace"]


def array_namespace(*arrays):
    """The array module of the arguments: ``jax.numpy`` if any is a JAX array or tracer, else
    ``numpy``. A controller written with it (``xp = array_namespace(q)``, then ``xp.clip``,
    ``xp.where``, ...) is traced into the compiled rollout and also runs on numpy."""
    return _backend.namespace(*arrays)


class Controller:
    """Base class: ``params`` names the array attributes (gains, set points); everything else
    (model, gravity, reference functions) is fixed at construction and identifies the code."""

    params = ()
    name = "controller"
    #: the size of the controller's own state (0: none). A controller with a state (an MJCF
    #: file's actuators with activation dynamics) is called as controller(t, q, qd, state)
    #: with its state (..., state_size) (``simulate`` carries it: ``initial_state`` at the
    #: start, ``next_state`` after each step)
    state_size = 0

    def __call__(self, t, q, qd):
        raise NotImplementedError

    def initial_state(self):
        """The state (state_size,) at the start of a simulation."""
        return np.zeros(self.state_size)

    def next_state(self, t, q, qd, state, dt):
        """The state (..., state_size) after a step of dt (s) that starts at time t (s) from
        q (..., nq), qd (..., nv) and state (..., state_size)."""
        return state

    def split_params(self):
        """(hashable description of the fixed parts, {name: array} of the gains)."""
        static, arrays = [], {}
        for key, value in sorted(vars(self).items()):
            if key in self.params and value is not None and not callable(value):
                arrays[key] = np.asarray(value, dtype=float)
            else:
                static.append((key, _hashable(value)))
        return tuple(static), arrays

    def with_params(self, params):
        """A copy with some gains replaced (the JAX backend passes them in as arrays)."""
        new = copy.copy(self)
        new.__dict__.update(params)
        return new

    def __repr__(self):
        return f"{type(self).__name__}()"


def _hashable(value):
    if isinstance(value, np.ndarray):
        return ("array", value.shape, tuple(value.ravel().tolist()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return Identity(value)
    return value


class Identity:
    """A key that stands for one object by identity and keeps it alive (so that its id cannot
    be reused by another object while the key is in a cache)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, Identity) and other.obj is self.obj


def actuated(model, tau):
    """tau with the entries of floating joints (a floating base) set to zero."""
    if not any(b.joint_model.floating for b in model.active_bodies):
        return tau
    xp = _backend.namespace(tau)
    parts = [0 * tau[..., s] if b.joint_model.floating else tau[..., s]
             for b, s in zip(model.active_bodies, model.v_slices)]
    return xp.concatenate(parts, axis=-1)


def joint_error(model, q_ref, q):
    """q_ref (-) q as a velocity-sized vector (..., nv): each joint's own difference on its
    manifold (``screwdyn.model.configuration.difference``), zero on floating joints (an
    unactuated base)."""
    if all(b.joint_model.euclidean for b in model.active_bodies):
        return q_ref - q
    xp = _backend.namespace(q_ref, q)
    shape = np.broadcast_shapes(xp.shape(q_ref)[:-1], xp.shape(q)[:-1])
    parts = []
    for b, qs in zip(model.active_bodies, model.q_slices):
        diff = b.joint_model.difference(xp, q[..., qs], q_ref[..., qs])
        diff = 0 * diff if b.joint_model.floating else diff
        parts.append(xp.broadcast_to(diff, shape + diff.shape[-1:]))
    return xp.concatenate(parts, axis=-1)


class ZeroTorque(Controller):
    """tau = 0: the robot moves under gravity alone (and its joint damping)."""

    name = "zero torque"

    def __call__(self, t, q, qd):
        return 0 * qd


class GravityCompensation(Controller):
    """tau = g(q), the joint forces that hold the robot still against gravity: released at rest,
    it stays where it is; moving, it coasts as if in zero gravity."""

    name = "gravity compensation"

    def __init__(self, model, gravity=None, algebra="spatial"):
        self.model, self.algebra = model, algebra
        self.gravity = None if gravity is None else tuple(map(float, gravity))

    def __call__(self, t, q, qd):
        return actuated(self.model, gravity_torques(self.model, q, gravity=self.gravity,
                                                    algebra=self.algebra))


class JointPD(Controller):
    """tau = kp (q_ref - q) + kd (qd_ref - qd), plus g(q) if ``gravity_compensation``.

    kp, kd: scalars or (nv,) gains. q_ref: a configuration (nq,) or a function of t returning one
    (default: the model's neutral configuration); qd_ref likewise (default zero). Without gravity
    compensation the robot settles where the spring balances gravity, kp^-1 g(q) away from
    q_ref; with it, exactly at a constant q_ref."""

    params = ("kp", "kd", "q_ref", "qd_ref")
    name = "joint PD"

    def __init__(self, model, kp, kd, q_ref=None, qd_ref=None, gravity_compensation=False,
                 gravity=None, algebra="spatial"):
        self.model, self.algebra = model, algebra
        self.kp, self.kd = np.asarray(kp, dtype=float), np.asarray(kd, dtype=float)
        self.q_ref = np.array(model.neutral) if q_ref is None else _vector(q_ref, model.nq, "q_ref")
        self.qd_ref = None if qd_ref is None else _vector(qd_ref, model.nv, "qd_ref")
        self.gravity_compensation = bool(gravity_compensation)
        self.gravity = None if gravity is None else tuple(map(float, gravity))
        if gravity_compensation:
            self.name = "joint PD + gravity compensation"

    def __call__(self, t, q, qd):
        q_ref = self.q_ref(t) if callable(self.q_ref) else self.q_ref
        qd_ref = 0.0 if self.qd_ref is None else (
            self.qd_ref(t) if callable(self.qd_ref) else self.qd_ref)
        tau = self.kp * joint_error(self.model, q_ref, q) + self.kd * (qd_ref - qd)
        if self.gravity_compensation:
            tau = tau + gravity_torques(self.model, q, gravity=self.gravity, algebra=self.algebra)
        return actuated(self.model, tau)


class ComputedTorque(Controller):
    """tau = ID(q, qd, qdd_ref + kd (qd_ref - qd) + kp (q_ref - q)), inverse dynamics of the
    reference acceleration corrected by a PD term: with an exact model the tracking error e obeys
    e'' + kd e' + kp e = 0 (critically damped for kd = 2 sqrt(kp)).

    reference: a function t -> (q_ref, qd_ref, qdd_ref) (``sinusoid``, ``quintic`` or your own),
    or a constant configuration (nq,) to regulate to. Needs a fixed base (nq == nv)."""

    params = ("kp", "kd", "reference")
    name = "computed torque"

    def __init__(self, model, reference, kp, kd, gravity=None, algebra="spatial"):
        if model.nq != model.nv:
            raise ValueError("ComputedTorque needs a fixed-base model: the free joint of "
                             f"{model.name!r} cannot be actuated")
        self.model, self.algebra = model, algebra
        self.reference = reference if callable(reference) else _vector(reference, model.nq,
                                                                       "reference")
        self.kp, self.kd = np.asarray(kp, dtype=float), np.asarray(kd, dtype=float)
        self.gravity = None if gravity is None else tuple(map(float, gravity))

    def __call__(self, t, q, qd):
        if callable(self.reference):
            q_r, qd_r, qdd_r = self.reference(t)
        else:
            q_r, qd_r, qdd_r = self.reference, 0.0, 0.0
        qdd = qdd_r + self.kd * (qd_r - qd) + self.kp * (q_r - q)
        return inverse_dynamics(self.model, q, qd, qdd, gravity=self.gravity,
                                algebra=self.algebra)


class MjcfActuators(Controller):
    """An MJCF file's actuators driven by their controls, as MuJoCo applies them
    (``mj_fwdActuation``: a run with them is ``mj_step``'s with ``d.ctrl = ctrl``): motors,
    position and velocity servos, general actuators of fixed or affine gain and bias, on
    hinge and slide joints and fixed tendons, their control and force ranges and the joints'
    ``actuatorfrcrange`` clamped (``screwdyn.model.actuators``: what is modelled; anything
    else, a ``ModelError`` naming the actuator).

    model: the file's Model (``load_mjcf(path)``). path: the MJCF file. ctrl: the controls
    (nu,) (or (..., nu) for a batch), or a function of t returning them (MuJoCo's ``d.ctrl``
    at that time; default zero: a position servo then holds its joint at 0, as MuJoCo's does).
    ``actuators.names`` lists the actuators in ctrl's order. As any controller, it is called
    at each integrator stage (``control="hold"``: once a step, as MuJoCo reads ``d.ctrl``;
    semi-implicit Euler has one stage a step, at its start). MuJoCo's Euler integrates only
    the joints' damping implicitly, not a servo's kv: neither does this.

    Actuators with activation dynamics (filters, integrators: ``screwdyn.model.actuators``)
    make it a controller with a state, their activations (``state_size`` = MuJoCo's ``m.na``,
    in ``d.act``'s order, zero at the start): ``simulate`` advances them once a step from the
    step's start, as MuJoCo's Euler does (with RK4 too, where MuJoCo's RK4 integrates them in
    its stages), and the forces take them where the control would go. Called without a state,
    the activations are zero.

    ```python
    import os, tempfile
    import screwdyn as sd
    path = os.path.join(tempfile.mkdtemp(), "servo.xml")
    with open(path, "w") as f:
        f.write('<mujoco><worldbody><body><joint name="hinge" axis="0 1 0"/>'
                '<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1"/>'
                '</body></worldbody><actuator><position joint="hinge" kp="50" kv="5"/>'
                '</actuator></mujoco>')
    arm = sd.load_mjcf(path)
    servo = sd.controllers.MjcfActuators(arm, path, ctrl=[0.5])
    traj = sd.simulate(arm, [0.0], None, servo, 3.0, 1e-3, integrator="semi_implicit_euler")
    # it holds the arm at 0.5 rad and the sag of its 50 N m/rad under the arm's weight
    assert abs(traj.q[-1, 0] - 0.5) < 0.1 and abs(traj.qd[-1, 0]) < 1e-3
    ```"""

    params = ("ctrl",)
    name = "MJCF actuators"

    def __init__(self, model, path, ctrl=None):
        from .model.actuators import mjcf_actuators

        self.model = model
        self.source = os.fspath(path)
        self.actuators = mjcf_actuators(path, model)
        nu = self.actuators.nu
        if ctrl is None:
            ctrl = np.zeros(nu)
        elif not callable(ctrl):
            ctrl = np.asarray(ctrl, dtype=float)
            if ctrl.ndim == 0 or ctrl.shape[-1] != nu:
                raise ValueError(f"ctrl must have shape (..., {nu}): one control per actuator "
                                 f"of {os.fspath(path)} ({', '.join(self.actuators.names)}); "
                                 f"got shape {ctrl.shape}")
        self.ctrl = ctrl

    @property
    def state_size(self):
        """The number of activations (MuJoCo's ``m.na``)."""
        return self.actuators.na

    def controls(self, t, qd):
        """The controls (..., nu) at time t (s), clamped to their ranges (qd (..., nv) gives
        the batch shape and the array namespace)."""
        a = self.actuators
        xp = array_namespace(qd)
        ctrl = self.ctrl(t) if callable(self.ctrl) else self.ctrl
        return xp.minimum(xp.maximum(ctrl + 0.0 * qd[..., :1], a.ctrl_range[:, 0]),
                          a.ctrl_range[:, 1])

    def next_state(self, t, q, qd, state, dt):
        """The activations (..., na) after a step of dt (s) from time t (s), q, qd and the
        activations ``state`` (..., na), as MuJoCo's Euler advances ``d.act``
        (``screwdyn.model.actuators``)."""
        a = self.actuators
        if not a.na:
            return state
        self._check_state(state)
        xp = array_namespace(qd, state)
        u = self.controls(t, qd) @ a.selection.T
        rate = a.activation_rate[:, 0] * u - a.activation_rate[:, 1] * state
        tau = a.exact_time_constant  # 0: Euler's step dt
        exact = (tau > 0).astype(float)
        step = exact * tau * (1.0 - xp.exp(-dt / np.where(tau > 0, tau, 1.0))) + (1 - exact) * dt
        return xp.minimum(xp.maximum(state + step * rate, a.activation_range[:, 0]),
                          a.activation_range[:, 1])

    def activations(self, traj):
        """The activations (..., T, na) at the samples of ``traj`` (a ``Trajectory`` of a run
        with these actuators), as ``simulate`` carried them: they depend on the controls and
        the step alone (``next_state``), so they are stepped again here from zero, with the
        run's dt and ``record_every`` (MuJoCo's ``d.act`` at each sample). With them,
        ``forces(t, q, qd, state)`` gives the actuators' forces along the run."""
        a = self.actuators
        dt, every = float(traj.meta["dt"]), int(traj.meta["record_every"])
        batch = traj.q.shape[:-2]
        qd = np.zeros(batch + (self.model.nv,))
        state = np.zeros(batch + (a.na,))
        out = [state]
        for k in range((traj.n_samples - 1) * every):
            state = self.next_state(k * dt, None, qd, state, dt)
            if (k + 1) % every == 0:
                out.append(state)
        return np.stack(out, axis=-2)

    def forces(self, t, q, qd, state=None):
        """(tau (..., nv) N m or N, the actuators' forces (..., nu)) at time t (s), q
        (..., nq), qd (..., nv) and the activations ``state`` (..., na) (None: zero)."""
        a = self.actuators
        xp = array_namespace(q, qd)
        ctrl = self.controls(t, qd)
        if a.na:  # an activation takes its control's place
            if state is not None:
                self._check_state(state)
            S = a.selection
            ctrl = ctrl * (1.0 - S.sum(axis=0)) + (0.0 if state is None else state @ S)
        length, velocity = q @ a.length.T, qd @ a.moment.T
        gain = a.gain[:, 0] + a.gain[:, 1] * length + a.gain[:, 2] * velocity
        force = gain * ctrl + a.bias[:, 0] + a.bias[:, 1] * length + a.bias[:, 2] * velocity
        force = xp.minimum(xp.maximum(force, a.force_range[:, 0]), a.force_range[:, 1])
        tau = force @ a.moment
        tau = xp.minimum(xp.maximum(tau, a.joint_force_range[:, 0]), a.joint_force_range[:, 1])
        return tau, force

    def _check_state(self, state):
        a = self.actuators
        shape = tuple(getattr(state, "shape", np.shape(state)))
        if not shape or shape[-1] != a.na:
            names = ", ".join(a.names[i] for i in a.activated)
            raise ValueError(f"state must have shape (..., {a.na}): one activation per "
                             f"actuator with activation dynamics of {self.source} ({names}); "
                             f"got shape {shape}")

    def __call__(self, t, q, qd, state=None):
        if not self.actuators.nu:
            return 0 * qd
        return self.forces(t, q, qd, state)[0]


def _vector(value, n, name):
    a = np.asarray(value, dtype=float)
    if a.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {a.shape}")
    return a


# -- references: t -> (q, qd, qdd), array-generic ---------------------------------------------
def sinusoid(center, amplitude, frequency, phase=0.0):
    """q(t) = center + amplitude sin(2 pi frequency t + phase), with its derivatives."""
    center, amplitude = np.asarray(center, dtype=float), np.asarray(amplitude, dtype=float)
    frequency, phase = np.asarray(frequency, dtype=float), np.asarray(phase, dtype=float)
    w = 2 * np.pi * frequency

    def reference(t):
        xp = _backend.namespace(t)
        s, c = xp.sin(w * t + phase), xp.cos(w * t + phase)
        return center + amplitude * s, amplitude * w * c, -amplitude * w * w * s

    return reference


def quintic(q_start, q_end, duration):
    """A rest-to-rest move from q_start to q_end in ``duration`` seconds along the quintic
    10 s^3 - 15 s^4 + 6 s^5 (zero velocity and acceleration at both ends, as Corke's jtraj),
    holding q_end afterwards."""
    q_start, q_end = np.asarray(q_start, dtype=float), np.asarray(q_end, dtype=float)
    delta, T = q_end - q_start, float(duration)

    def reference(t):
        xp = _backend.namespace(t)
        s = xp.clip(xp.asarray(t) / T, 0.0, 1.0)
        pos = s ** 3 * (10 - 15 * s + 6 * s * s)
        vel = 30 * s * s * (1 - s) ** 2 / T
        acc = 60 * s * (1 - s) * (1 - 2 * s) / (T * T)
        return q_start + delta * pos, delta * vel, delta * acc

    return reference
