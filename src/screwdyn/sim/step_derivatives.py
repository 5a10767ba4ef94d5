"""The derivatives of one simulation step: the linearisation DDP and iLQR need.

``step_derivatives(model, q, qd, tau, dt)`` returns the state after one step of ``dt`` from
(q, qd) under the joint forces tau held over the step, and its Jacobians with respect to the
state and to tau, for the simulation's own step (``step.make_step``: the integrator, the forces
of the settings, ground contact, ``GroundContact`` or ``RigidContact``), so that the model a
trajectory optimiser linearises is exactly the one ``simulate`` runs. The step is traced with
``jax.numpy`` (the forward dynamics are the native programs' XLA custom call and their
derivative programs) and differentiated in forward mode (``jax.jacfwd``) in float64, compiled
with ``jax.jit`` once per (model, dt, integrator, forces' structure, batch size) and kept in the
process.

Tangent space: a configuration is perturbed as q (+) dq = ``screwdyn.integrate(model, q, dq)``
(dq (nv,) in velocity coordinates: the body twist of a free joint, as Pinocchio), and the next
one is read back as q_next (-) q_next' = ``screwdyn.difference``; on vector spaces (a fixed-base
arm) this is plain addition and the Jacobians are the ordinary ones.
"""
from collections import OrderedDict, namedtuple

import numpy as np

from .. import _backend
from ..model.configuration import integrate_arrays
from .checks import positive
from .integrators import STEPPERS
from .loop_jax import x64
from .policy import Policy
from .run import Run, all_params
from .settings import Settings
from .step import make_step
from .system import System

_COMPILED = OrderedDict()
_COMPILED_MAX = 32


class StepDerivatives(namedtuple("StepDerivatives", "x_next A B")):
    """(x_next, A, B) of ``step_derivatives``; ``q_next`` and ``qd_next`` split x_next."""

    __slots__ = ()

    @property
    def nv(self):
        return self.B.shape[-1]

    @property
    def q_next(self):
        return self.x_next[..., :self.x_next.shape[-1] - self.nv]

    @property
    def qd_next(self):
        return self.x_next[..., self.x_next.shape[-1] - self.nv:]


def step_derivatives(model, q, qd, tau, dt, integrator="semi_implicit_euler", contact=None,
                     gravity=None, *, settings=None, **options):
    """One simulation step and its derivatives: (x_next, A, B).

    model: a ``screwdyn.Model`` (fixed or floating base).
    q (..., nq), qd (..., nv): the state at the step's start (rad or m; rad/s or m/s; a free
        joint: position and quaternion x y z w, body twist [linear; angular] in the body frame).
    tau (..., nv): the joint forces (N m or N), held over the step (as a torque table row in
        ``simulate``). Leading dimensions are a batch (broadcast together), computed in one call.
    dt: the step (s). integrator: ``"semi_implicit_euler"`` (default), ``"rk4"`` or ``"euler"``.
    contact: None, a ``GroundContact`` or a ``RigidContact`` (as ``simulate``'s ``contact``).
    gravity: (3,) m/s^2 in the world frame, or None for the model's.
    settings, **options: any other ``screwdyn.sim.Settings`` field (``joint_limits=True``,
        ``algebra``, ``external``, ...), as for ``simulate``.

    Returns a ``StepDerivatives`` named tuple (numpy float64 arrays):

    x_next (..., nq + nv): (q_next, qd_next), what ``simulate`` reaches after one step (to
        rounding: the JAX-traced step); also ``.q_next``, ``.qd_next``.
    A (..., 2 nv, 2 nv): d x_next / d x in the tangent space: rows (dq_next, dqd_next), columns
        (dq, dqd), with dq and dq_next velocity coordinates (``screwdyn.integrate`` and
        ``screwdyn.difference`` conventions; for a fixed-base arm, d q_next / d q).
    B (..., 2 nv, nv): d x_next / d tau (s^2/kg-like units: rad per N m, ...).

    Each step starts as ``simulate`` starts a run from that state: the contact springs' anchors
    (``GroundContact``'s stick-slip friction) at the current contact points and a contact
    solver's warm start (``RigidContact``) at zero. The derivatives are those of the step as
    computed (exact forward-mode derivatives of the program: through the contact law or the
    solver's fixed number of sweeps); where the contact changes mode (a point touching or
    leaving the ground, sticking or slipping) they are one-sided. Not traceable itself (it
    runs its own compiled function and returns numpy); for ``jax.grad`` through a whole
    trajectory use ``screwdyn.sim.rollout``. Raises ``ValueError`` for wrong shapes (naming
    the argument and its shape), non-finite inputs, a non-unit quaternion or dt <= 0.
    """
    if integrator not in STEPPERS:
        raise ValueError(f"integrator must be one of {sorted(STEPPERS)}, got {integrator!r}")
    dt = float(positive(dt, "dt"))
    options = dict(options, integrator=integrator, contact=contact, gravity=gravity)
    settings = Settings.make(settings, **options)
    q, qd, tau, batch = _inputs(model, q, qd, tau)
    N = q.shape[0]
    nq, nv = model.nq, model.nv
    if N == 0:
        return StepDerivatives(np.zeros(batch + (nq + nv,)), np.zeros(batch + (2 * nv, 2 * nv)),
                               np.zeros(batch + (2 * nv, nv)))
    system = System(model, settings, dt=dt)
    policy = Policy(np.zeros((N, 1, nv)), model, 1)
    run = Run(model, system, settings, policy, q, qd, (N,), dt, 1)
    key = (model, dt, settings.integrator, settings.control, system.key, N)
    with x64():
        import jax.numpy as jnp

        fn = _COMPILED.get(key)
        if fn is None:
            fn = _compile(run, dt)
            _COMPILED[key] = fn
            while len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)
        else:
            _COMPILED.move_to_end(key)
        params = all_params(run, jnp)
        params["policy"] = {}
        x_next, A, B = fn(params, jnp.asarray(q), jnp.asarray(qd), jnp.asarray(tau))
        x_next, A, B = (np.asarray(a, dtype=float) for a in (x_next, A, B))
    return StepDerivatives(x_next.reshape(batch + (nq + nv,)),
                           A.reshape(batch + (2 * nv, 2 * nv)), B.reshape(batch + (2 * nv, nv)))


def _compile(run, dt):
    """The jitted (params, q (N, nq), qd (N, nv), tau (N, nv)) -> (x_next (N, nq + nv),
    A (N, 2nv, 2nv), B (N, 2nv, nv)) of ``run``'s step."""
    import jax
    import jax.numpy as jnp

    model, system = run.model, run.system
    nv = model.nv
    step_fn = make_step(run, jnp, dt)
    euclidean = all(b.joint_model.euclidean for b in model.active_bodies)

    def advance(params, e, q, qd, tau):
        # e (3 nv,): one perturbation (dq, dqd, dtau) shared by every row; the rows are
        # independent rollouts, so d(row n) / d e is row n's own Jacobian
        N = q.shape[0]
        q_in = integrate_arrays(jnp, model, q, jnp.broadcast_to(e[:nv], (N, nv)))
        qd_in = qd + e[nv:2 * nv]
        p = {"policy": {"table": (tau + e[2 * nv:])[:, None, :]}, "system": params["system"]}
        hybrid = system.initial_hybrid(jnp, p["system"], q_in)
        energy = jnp.zeros((N, 2), dtype=q.dtype)
        (q1, qd1, _, _), _, _ = step_fn(p, 0, q_in, qd_in, hybrid, energy)
        return (q1, qd1), (q1, qd1)

    def tangent_map(q1):
        """P (N, nv, nq): the left inverse of d integrate(q1, v) / dv at v = 0, which reads a
        displacement of q1 on the manifold as velocity coordinates (= d difference(q1, .))."""
        N = q1.shape[0]
        J = jax.jacfwd(lambda v: integrate_arrays(jnp, model, q1, jnp.broadcast_to(v, (N, nv))))(
            jnp.zeros(nv, dtype=q1.dtype))  # (N, nq, nv)
        Jt = jnp.swapaxes(J, -1, -2)
        return jnp.linalg.solve(Jt @ J, Jt)

    def derivatives(params, q, qd, tau):
        e0 = jnp.zeros(3 * nv, dtype=q.dtype)
        (Jq, Jqd), (q1, qd1) = jax.jacfwd(advance, argnums=1, has_aux=True)(params, e0, q, qd,
                                                                           tau)
        if not euclidean:
            Jq = tangent_map(q1) @ Jq
        J = jnp.concatenate([Jq, Jqd], axis=-2)  # (N, 2nv, 3nv)
        return jnp.concatenate([q1, qd1], axis=-1), J[..., :2 * nv], J[..., 2 * nv:]

    return jax.jit(derivatives)


def _inputs(model, q, qd, tau):
    """(q (N, nq), qd (N, nv), tau (N, nv), batch shape), checked and broadcast."""
    if model.nv == 0:
        raise ValueError(f"model {model.name!r} has no degrees of freedom")
    arrays = []
    for name, value, size, meaning in (("q", q, model.nq, "configuration, nq"),
                                       ("qd", qd, model.nv, "velocity, nv"),
                                       ("tau", tau, model.nv, "joint forces, nv")):
        if value is None:
            raise ValueError(f"{name} must be an array of shape (..., {size}) ({meaning}), "
                             "got None")
        a = np.array(value)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be real numbers, got dtype {a.dtype}")
        a = a.astype(float)
        _backend.check_last_dim(a, size, name, meaning)
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be finite")
        arrays.append(a)
    q, qd, tau = arrays
    batch = tuple(_backend.broadcast_batch([("q", q, 1), ("qd", qd, 1), ("tau", tau, 1)]))
    for b, qs in zip(model.active_bodies, model.q_slices):
        unit = b.joint_model.normalize(np, q[..., qs])
        if np.any(np.abs(unit - q[..., qs]) > 1e-6):
            raise ValueError(f"q: the quaternion of joint {b.joint!r} (q[{qs.start}:{qs.stop}]) "
                             "must have unit norm")
        q[..., qs] = unit
    N = int(np.prod(batch, dtype=int))
    return tuple(np.broadcast_to(a, batch + a.shape[-1:]).reshape(N, a.shape[-1]).copy()
                 for a in (q, qd, tau)) + (batch,)
