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

import numpy as np

from . import _backend
from .dynamics import gravity_torques, inverse_dynamics

__all__ = ["Controller", "ZeroTorque", "GravityCompensation", "JointPD", "ComputedTorque",
           "sinusoid", "quintic", "actuated"]


class Controller:
    """Base class: ``params`` names the array attributes (gains, set points); everything else
    (model, gravity, reference functions) is fixed at construction and identifies the code."""

    params = ()
    name = "controller"

    def __call__(self, t, q, qd):
        raise NotImplementedError

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
