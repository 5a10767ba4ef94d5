"""Simulation: fixed-step integrators, batched rollouts on numpy or JAX, the Trajectory they return.

    traj = simulate(model, q0, qd0, controllers.GravityCompensation(model), t_final=5, dt=1e-3)
    traj.energy_drift(), traj.save("run.npz"), traj.plot("run.png")

The state is (q, qd) in the model's layout: a free joint's q is (xyz, quaternion xyzw) and its
velocity the body twist (linear, angular) in the body frame, as in Pinocchio. Configurations are
integrated on the manifold: ``integrate(model, q, v)`` is ``pinocchio.integrate`` (q exp(v), the
SE(3) exponential of the body twist for a free joint, q + v for the others), so a quaternion
stays a unit quaternion.

Integrators (``integrator=``), each a function of (q, qd, tau) over one step dt:

- ``"rk4"``: the classical fourth-order Runge-Kutta method, in its Lie-group form (Munthe-Kaas):
  the stages move on the manifold as q0 exp(xi) and the twist is mapped back by the truncated
  inverse of the exponential's differential, so a spinning free body keeps fourth order;
- ``"semi_implicit_euler"``: qd += dt qdd(q, qd); q = q exp(dt qd) (first order, symplectic for a
  separable system, bounded energy error on long runs);
- ``"euler"``: explicit Euler (first order, gains energy; for comparisons).

The controller is part of the differential equation (``control="continuous"``): RK4 calls it at
each of its four stages, so the closed loop keeps fourth order. ``control="hold"`` calls it once
per step and holds its output over the step (a zero-order hold: a digital controller running at
1/dt); a torque table is always held. ``tau[k]`` and ``qdd[k]`` are the joint forces and the
acceleration at t_k.

Backends (``backend=``): ``"native"`` traces one step of the integrator, controller and forward
dynamics included, into machine code (``screwdyn.execution``, the same programs as the public
functions) and runs the loop over steps in machine code too, for one rollout or a batch (the
same bits for each rollout either way); the controller's gains are inputs, so new gains reuse
the program. ``"jax"`` compiles the whole rollout, controller included, into one XLA
loop (``jax.lax`` loops; compiled once per model, integrator, controller and algebra, then cached;
dt, the duration and the controller's gains are arguments and change nothing), in float64
without touching the user's JAX configuration; ``"numpy"`` steps in Python. ``"auto"``
takes native code when llvmlite is installed and the controller can be traced (built-in
controllers can, and so can any written with ``screwdyn._backend.namespace``, with gains of at
most one axis), else JAX under the same condition; it falls back to numpy with a warning
otherwise. A batch of initial states (..., nq) runs as one rollout either way.

Failures never lose the run: a controller returning the wrong shape or a non-finite torque, or a
state that becomes non-finite or exceeds ``divergence_limit``, raises ``SimulationError`` naming
the step and time, with ``.trajectory`` holding every sample before it.
"""
import contextlib
import csv
import inspect
import math
import time as _time
import warnings
from collections import OrderedDict

import numpy as np

from . import _backend
from .dynamics import FUNCTIONS, forward_dynamics, kinetic_energy, potential_energy
from .execution.plan import run_jax

INTEGRATORS = ("rk4", "semi_implicit_euler", "euler")
BACKENDS = ("auto", "native", "jax", "numpy")
CONTROL = ("continuous", "hold")

# Classical RK4 as a loop over its four stages (stage i starts from the state advanced by
# a_i dt along stage i-1's slope); a loop traces the dynamics once, so JAX compiles it in a
# quarter of the time, and the compiled loop also runs faster than four inlined copies.
_RK4_A = (0.0, 0.5, 0.5, 1.0)
_RK4_B = (1 / 6, 1 / 3, 1 / 3, 1 / 6)
_RK4_FIRST = (1.0, 0.0, 0.0, 0.0)

REASONS = {1: "the controller returned a non-finite joint force",
           2: "the state or the acceleration became non-finite (the simulation diverged)",
           3: "the velocity exceeded divergence_limit (the simulation diverged)"}


class SimulationError(RuntimeError):
    """A simulation that could not go on. ``step``, ``time`` (s), ``rollout`` (the batch index of
    the first failing rollout, ``()`` for a single one), ``reason``, and ``trajectory``: the
    samples before the failing step (every rollout of a batch, cut at the same sample)."""

    def __init__(self, reason, step, time, rollout=(), trajectory=None):
        where = f" (rollout {rollout})" if rollout else ""
        super().__init__(f"simulation failed at step {step} (t = {time:.6g} s){where}: {reason}")
        self.reason, self.step, self.time, self.rollout = reason, step, time, rollout
        self.trajectory = trajectory


# ============================================================================================
# Configuration space: integrate on the manifold
# ============================================================================================
from .model.configuration import dexpinv as _dexpinv  # noqa: E402
from .model.configuration import integrate  # noqa: E402,F401  (sd.integrate)
from .model.configuration import integrate_arrays as _integrate  # noqa: E402


# ============================================================================================
# Integrators: one step of (q, qd) under the held joint forces tau; written once for numpy and JAX
# ============================================================================================
class _Dynamics:
    """What an integrator needs: the array namespace, the model's accelerations and manifold.
    ``system``: None, or what simulates in the model's stead (``_system``)."""

    def __init__(self, xp, model, dt, algebra, gravity, system=None, loop=False):
        self.xp, self.model, self.dt, self.algebra, self.gravity = xp, model, dt, algebra, gravity
        self.system = system
        self.loop = loop  # the body of an XLA loop (the JAX backend)

    def accel(self, q, qd, tau, t):
        if self.system is not None:
            return self.system.forward_dynamics(q, qd, tau, gravity=self.gravity,
                                                algebra=self.algebra, time=t)
        if self.loop:  # cut once per body (plan.jax_options)
            return run_jax(FUNCTIONS["forward_dynamics"], self.model, self.algebra,
                           {"q": q, "qd": qd, "tau": tau, "gravity": self.gravity}, loop=True)
        return forward_dynamics(self.model, q, qd, tau, gravity=self.gravity, algebra=self.algebra)

    def integrate(self, q, v):
        return _integrate(self.xp, self.model, q, v)

    def dexpinv(self, xi, v):
        return _dexpinv(self.xp, self.model, xi, v)

    def stages(self, body, carry, xs):
        """A loop over stages: ``jax.lax.scan`` under JAX (traced once), a Python loop on numpy."""
        if _backend.is_jax_namespace(self.xp):
            import jax

            return jax.lax.scan(lambda c, x: (body(c, x), None), carry,
                                tuple(self.xp.asarray(a) for a in xs))[0]
        for x in zip(*xs):
            carry = body(carry, x)
        return carry


def rk4(dyn, t, q, qd, force):
    """Classical RK4 on the configuration manifold (RKMK) for the closed loop, the joint forces
    force(t, q, qd) evaluated at every stage. Returns (q1, qd1, qdd and tau at the start, and
    whether every stage's joint forces were finite, per rollout)."""
    xp, dt = dyn.xp, dyn.dt

    def stage(carry, abf):
        K_prev, A_prev, K_sum, A_sum, A_first, tau_first, finite = carry
        a, b, first = abf
        xi = (a * dt) * K_prev
        q_i, qd_i = dyn.integrate(q, xi), qd + (a * dt) * A_prev
        tau_i = force(t + a * dt, q_i, qd_i)
        A_i = dyn.accel(q_i, qd_i, tau_i, t + a * dt)
        K_i = dyn.dexpinv(xi, qd_i)
        finite = finite & xp.all(xp.isfinite(tau_i), axis=-1)
        return (K_i, A_i, K_sum + b * K_i, A_sum + b * A_i, xp.where(first > 0, A_i, A_first),
                xp.where(first > 0, tau_i, tau_first), finite)

    zero = 0 * qd
    carry = (zero,) * 6 + (xp.ones(qd.shape[:-1], dtype=bool),)
    _, _, K_sum, A_sum, qdd, tau, finite = dyn.stages(stage, carry, (_RK4_A, _RK4_B, _RK4_FIRST))
    return dyn.integrate(q, dt * K_sum), qd + dt * A_sum, qdd, tau, finite


def semi_implicit_euler(dyn, t, q, qd, force):
    """qd1 = qd + dt qdd(q, qd); q1 = q exp(dt qd1)."""
    tau = force(t, q, qd)
    qdd = dyn.accel(q, qd, tau, t)
    qd1 = qd + dyn.dt * qdd
    return dyn.integrate(q, dyn.dt * qd1), qd1, qdd, tau, _finite(dyn.xp, tau)


def euler(dyn, t, q, qd, force):
    """q1 = q exp(dt qd); qd1 = qd + dt qdd(q, qd)."""
    tau = force(t, q, qd)
    qdd = dyn.accel(q, qd, tau, t)
    return dyn.integrate(q, dyn.dt * qd), qd + dyn.dt * qdd, qdd, tau, _finite(dyn.xp, tau)


def _finite(xp, a):
    return xp.all(xp.isfinite(a), axis=-1)


_STEPPERS = {"rk4": rk4, "semi_implicit_euler": semi_implicit_euler, "euler": euler}


# ============================================================================================
# Joint forces: controllers, torque tables and torque profiles as one "policy"
# ============================================================================================
class _Policy:
    """tau(params, k, t, q, qd) for every kind of ``controller_or_torques``, with the key that
    identifies its compiled code and the arrays passed to that code (so new gains or a new torque
    table of the same shape reuse it)."""

    def __init__(self, spec, model, n_steps):
        self.model = model
        self.table = None
        self.kind = "controller"
        if spec is None:
            from .controllers import ZeroTorque

            spec = ZeroTorque()
        if not callable(spec):
            table = np.asarray(spec, dtype=float)
            if table.ndim < 2 or table.shape[-1] != model.nv:
                raise ValueError(f"a torque table must have shape (steps, {model.nv}) or "
                                 f"(..., steps, {model.nv}), got {table.shape}")
            if table.shape[-2] < n_steps:
                raise ValueError(f"the torque table has {table.shape[-2]} rows but the simulation "
                                 f"takes {n_steps} steps")
            self.kind, self.table, self.name = "table", table, f"torque table {table.shape}"
            self.key, self.params = ("table",), {"table": table}
            return
        if _takes_one_argument(spec):
            self.kind, self.name = "profile", f"torque profile {_name(spec)}"
        else:
            self.name = getattr(spec, "name", None) or _name(spec)
        self.fn = spec
        split = getattr(spec, "split_params", None)
        if split is not None:  # a screwdyn controller: arrays apart, the rest in the cache key
            static, self.params = split()
            self.key = (self.kind, type(spec), static)
        else:  # a plain function or callable object: its identity (kept alive by the key)
            from .controllers import Identity

            self.key, self.params = (self.kind, Identity(spec)), {}

    def __call__(self, params, k, t, q, qd, xp):
        if self.kind == "table":
            table = params["table"]
            if xp is np:  # past the last row (the final sample) the last row holds
                return table[..., min(k, table.shape[-2] - 1), :]
            return _take_row(xp, table, k)
        fn = self.fn.with_params(params) if params else self.fn
        return fn(t) if self.kind == "profile" else fn(t, q, qd)


def _take_row(xp, table, k):
    import jax

    return jax.lax.dynamic_index_in_dim(table, k, axis=table.ndim - 2, keepdims=False)


def _takes_one_argument(fn):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    return not varargs and len(required) == 1


def _name(fn):
    return getattr(fn, "__name__", None) or type(fn).__name__


# ============================================================================================
# simulate
# ============================================================================================
def simulate(model, q0, qd0=None, controller=None, t_final=1.0, dt=1e-3, *, integrator="rk4",
             algebra="spatial", backend="auto", control="continuous", gravity=None,
             record_every=1, divergence_limit=1e6, progress=None):
    """Simulate ``model`` from (q0, qd0) for ``t_final`` seconds with fixed steps ``dt``.

    q0 (..., nq), qd0 (..., nv) (default zero): a batch of initial states runs as one rollout.
    controller: the joint forces, one of
        None                     zero torque (a passive robot);
        controller(t, q, qd)     -> tau (..., nv) (see screwdyn.controllers and ``control``);
        profile(t)               -> tau, a callable of one argument: open-loop torques;
        an array (steps, nv)     the torque of each step (or (..., steps, nv), one per rollout).
    integrator: "rk4", "semi_implicit_euler" or "euler".
    algebra: the algebra the forward dynamics runs in ("spatial", "cga", "dq", "vector").
    backend: "auto", "jax" or "numpy" (see the module docstring).
    control: "continuous" (the controller is part of the ODE, called at every integrator stage)
        or "hold" (called once per step, its output held: a digital controller at 1/dt).
    gravity: the world gravity vector (default (0, 0, -9.81)).
    record_every: keep every k-th sample (the steps in between run but are not stored).
    divergence_limit: the largest |qd| entry before the run counts as diverged (None: no limit).
    progress: a callable progress(steps_done, steps_total) called from time to time.

    The run takes ceil(t_final / (dt record_every)) record_every steps (t_final rounded up to
    whole recorded intervals). Returns a ``Trajectory``; raises ``SimulationError`` (carrying
    the trajectory so far) if the controller or the dynamics fail on the way.
    """
    system, model = _system(model)
    integrator = str(integrator).replace("-", "_").lower()
    if integrator not in INTEGRATORS:
        raise ValueError(f"unknown integrator {integrator!r}; valid: {', '.join(INTEGRATORS)}")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; valid: {', '.join(BACKENDS)}")
    if control not in CONTROL:
        raise ValueError(f"unknown control {control!r}; valid: {', '.join(CONTROL)}")
    if model.nv == 0:
        raise ValueError(f"model {model.name!r} has no degrees of freedom: nothing to simulate")
    dt, t_final = _positive(dt, "dt"), _positive(t_final, "t_final")
    if isinstance(record_every, bool) or int(record_every) != record_every or record_every < 1:
        raise ValueError(f"record_every must be a positive integer, got {record_every!r}")
    record_every = int(record_every)
    if divergence_limit is not None:
        divergence_limit = _positive(divergence_limit, "divergence_limit")
    gravity = None if gravity is None else tuple(float(g) for g in np.asarray(gravity).reshape(3))
    n_records = max(1, math.ceil(t_final / (dt * record_every) - 1e-9))
    n_steps = n_records * record_every
    q0, qd0, batch = _initial_state(model, q0, qd0)
    policy = _Policy(controller, model, n_steps)
    if policy.table is not None and policy.table.ndim > 2:
        try:
            np.broadcast_shapes(policy.table.shape[:-2], batch)
        except ValueError:
            raise ValueError(f"the torque table's batch shape {policy.table.shape[:-2]} does not "
                             f"match the initial states' {batch}") from None
    run = dict(model=model, q0=q0, qd0=qd0, batch=batch, policy=policy, dt=dt,
               integrator=integrator, algebra=algebra, gravity=gravity, n_records=n_records,
               record_every=record_every, limit=divergence_limit, progress=progress,
               control=control)
    chosen = _choose_backend(backend, policy, model, q0, qd0, batch, system)
    if chosen == "native":
        samples, failure, timing = _run_native(**run)
    else:
        samples, failure, timing = (_run_jax if chosen == "jax" else _run_numpy)(**run,
                                                                                 system=system)
    run["system"] = system
    traj = _make_trajectory(run, samples, chosen, timing)
    if failure is not None:
        reason, step, rollout, *cause = failure
        raise SimulationError(reason, step, step * dt, rollout, traj) from (cause or [None])[0]
    return traj


def _system(model):
    """(system, model): a Model simulates itself (system None). An object with its own
    ``forward_dynamics(q, qd, tau, gravity=, algebra=, time=)``, ``kinetic_energy``,
    ``potential_energy``, a ``version`` (changed when it changes) and a ``configuration_model``
    (a Model of its q and v layout), as a ``screwdyn.composition.Assembly`` has, is simulated
    through them."""
    layout = getattr(model, "configuration_model", None)
    return (None, model) if layout is None else (model, layout)


def _positive(x, name):
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {x!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"{name} must be positive and finite, got {x!r}")
    return x


def _initial_state(model, q0, qd0):
    q0 = np.array(q0, dtype=float)  # a copy; JAX arrays come back to numpy here
    qd0 = np.zeros(model.nv) if qd0 is None else np.array(qd0, dtype=float)
    _backend.check_last_dim(q0, model.nq, "q0", "configuration, nq")
    _backend.check_last_dim(qd0, model.nv, "qd0", "velocity, nv")
    batch = _backend.broadcast_batch([("q0", q0, 1), ("qd0", qd0, 1)])
    if not (np.all(np.isfinite(q0)) and np.all(np.isfinite(qd0))):
        raise ValueError("q0 and qd0 must be finite")
    for b, qs in zip(model.active_bodies, model.q_slices):
        unit = b.joint_model.normalize(np, q0[..., qs])
        if np.any(np.abs(unit - q0[..., qs]) > 1e-6):
            raise ValueError(f"q0: the quaternion of joint {b.joint!r} (q[{qs.start}:{qs.stop}], "
                             f"{' '.join(b.joint_model.position_names())}) must have unit norm")
        q0[..., qs] = unit
    N = int(np.prod(batch, dtype=int))
    return (np.broadcast_to(q0, batch + (model.nq,)).reshape(N, model.nq),
            np.broadcast_to(qd0, batch + (model.nv,)).reshape(N, model.nv), batch)


def _choose_backend(backend, policy, model, q0, qd0, batch, system=None):
    if backend == "numpy":
        return "numpy"
    if backend in ("auto", "native"):
        why = (_native_refusal(policy, model) if system is None else
               "an assembly simulates through its own forward dynamics, which has no native "
               "program")
        if why is None:
            return "native"
        if backend == "native":
            raise ValueError(f"backend='native': {why}")
    try:
        import jax
    except ImportError:
        if backend == "jax":
            raise ImportError("backend='jax' needs JAX: pip install jax") from None
        return "numpy"
    if policy.kind == "table" or _TRACEABLE.get((policy.key, model, batch)):
        return "jax"
    with _x64():
        q = jax.numpy.asarray(q0).reshape(batch + (model.nq,))
        qd = jax.numpy.asarray(qd0).reshape(batch + (model.nv,))
        try:
            jax.eval_shape(lambda t, q, qd: policy(policy.params, 0, t, q, qd, jax.numpy),
                           jax.numpy.zeros(()), q, qd)
        except Exception as e:  # not traceable: numpy-only code, Python control flow on values
            if backend == "jax":
                raise ValueError(f"backend='jax': the controller {policy.name} cannot be traced "
                                 f"by JAX ({type(e).__name__}: {str(e).splitlines()[0][:200]}); "
                                 "write it with screwdyn._backend.namespace(q) or use "
                                 "backend='numpy'") from e
            warnings.warn(f"the controller {policy.name} cannot be traced by JAX "
                          f"({type(e).__name__}); simulating on the numpy backend, step by step "
                          "(much slower). Write it with screwdyn._backend.namespace(q) (array-"
                          "generic) to compile it, or pass backend='numpy' to silence this.",
                          stacklevel=3)
            return "numpy"
    if len(_TRACEABLE) > 256:  # closures made afresh for every call would pile up
        _TRACEABLE.clear()
    _TRACEABLE[(policy.key, model, batch)] = True
    return "jax"


_TRACEABLE = {}


def _x64():
    """float64 for the JAX computations inside, without changing the user's global setting."""
    import jax

    if getattr(jax.config, "jax_enable_x64", False):
        return contextlib.nullcontext()
    manager = getattr(jax, "enable_x64", None)
    if manager is None:  # older JAX
        from jax.experimental import enable_x64 as manager
    return manager(True)


def _torque(policy, params, k, t, q, qd, xp, batch, nv):
    """The policy's joint forces as (N, nv), checked for shape (a ``_BadOutput`` if wrong)."""
    N = int(np.prod(batch, dtype=int))
    tau = policy(params, k, t, q.reshape(batch + q.shape[-1:]), qd.reshape(batch + (nv,)), xp)
    tau = xp.asarray(tau)
    try:
        if tau.ndim < 1 or tau.shape[-1] != nv:
            raise ValueError
        tau = xp.broadcast_to(tau, batch + (nv,))
    except ValueError:
        expected = f"({nv},)" + (f" or {batch + (nv,)}" if batch else "")
        raise _BadOutput(f"the controller {policy.name} returned joint forces of shape "
                         f"{tuple(tau.shape)}; expected {expected}") from None
    if not xp.issubdtype(tau.dtype, xp.floating):
        tau = tau.astype(float)
    return tau.reshape(N, nv)


class _BadOutput(Exception):
    pass


def _bad_flags(xp, tau_ok, qdd, q1, qd1, limit):
    """Per rollout: 0 fine, else the REASONS code of what went wrong in this step."""
    code = xp.where(_finite(xp, qdd) & _finite(xp, q1) & _finite(xp, qd1), 0, 2)
    if limit is not None:
        code = xp.where((code == 0) & (xp.max(xp.abs(qd1), axis=-1) > limit), 3, code)
    return xp.where(tau_ok, code, 1)


# -- the numpy backend: a Python loop, every step checked as it happens ----------------------
def _run_numpy(model, q0, qd0, batch, policy, dt, integrator, algebra, gravity, n_records,
               record_every, limit, progress, control, system=None):
    dyn = _Dynamics(np, model, dt, algebra, gravity, system)
    stepper = _STEPPERS[integrator]
    n_steps = n_records * record_every
    q, qd = q0, qd0
    Q, QD, QDD, TAU = [], [], [], []
    failure = None
    t_start = _time.perf_counter()
    report_every = max(1, n_steps // 100)
    for k in range(n_steps + 1):
        t = k * dt
        try:
            with np.errstate(all="ignore"):
                force = _force(policy, policy.params, k, t, q, qd, np, batch, model.nv, control)
                q1, qd1, qdd, tau, tau_ok = stepper(dyn, t, q, qd, force)
        except _BadOutput as e:
            failure = (str(e), k, ())
            break
        except _ControllerFailed as e:  # reported with the samples so far, the cause attached
            failure = (f"the controller raised {type(e.cause).__name__}: {e.cause}", k, (),
                       e.cause)
            break
        except Exception as e:
            failure = (f"the dynamics raised {type(e).__name__}: {e}", k, (), e)
            break
        code = _bad_flags(np, tau_ok, qdd, q1, qd1, limit)
        if k == n_steps:  # the last sample: only its own joint forces and acceleration count
            code = _bad_flags(np, _finite(np, tau), qdd, qdd, qdd, None)
        if np.any(code):
            first = int(np.flatnonzero(code)[0])
            rollout = np.unravel_index(first, batch) if batch else ()
            failure = (REASONS[int(code[first])], k, tuple(int(i) for i in rollout))
            break
        if k % record_every == 0:
            Q.append(q), QD.append(qd), QDD.append(qdd), TAU.append(tau)
        q, qd = q1, qd1
        if progress is not None and k % report_every == 0:
            progress(k, n_steps)
    if progress is not None and failure is None:
        progress(n_steps, n_steps)
    wall = _time.perf_counter() - t_start
    return _stack(Q, QD, QDD, TAU, model, len(q0)), failure, {"wall_time": wall,
                                                              "compile_time": 0.0}


class _ControllerFailed(Exception):
    def __init__(self, cause):
        super().__init__(str(cause))
        self.cause = cause


def _force(policy, params, k, t, q, qd, xp, batch, nv, control):
    """The joint forces over step k as a function force(t, q, qd): the policy itself
    (``control="continuous"``), or its value at the step's start held (``"hold"``, and tables)."""
    def evaluate(t, q, qd):
        try:
            return _torque(policy, params, k, t, q, qd, xp, batch, nv)
        except (_BadOutput, _ControllerFailed):
            raise
        except Exception as e:
            if xp is not np:
                raise
            raise _ControllerFailed(e) from e

    if control == "hold" or policy.kind == "table":
        tau = evaluate(t, q, qd)
        return lambda t, q, qd: tau
    return evaluate


def _stack(Q, QD, QDD, TAU, model, N):
    if not Q:
        return (np.zeros((0, N, model.nq)), np.zeros((0, N, model.nv)),
                np.zeros((0, N, model.nv)), np.zeros((0, N, model.nv)))
    return tuple(np.stack(a) for a in (Q, QD, QDD, TAU))


# -- the native backend: the step in machine code, the loop over steps too -----------------------
_NATIVE_REFUSALS = {}


def _native_refusal(policy, model):
    """None if the native backend can run this policy on this model, else why not."""
    from .execution import plan

    if not plan.native_enabled():
        return "native code is switched off or llvmlite is not installed"
    if policy.kind != "table" and any(np.ndim(v) > 1 for v in policy.params.values()):
        return f"the controller {policy.name} has gains with batch axes"
    key = (policy.key, model)
    if key not in _NATIVE_REFUSALS:
        if len(_NATIVE_REFUSALS) > 256:
            _NATIVE_REFUSALS.clear()
        try:
            from .execution import trace

            def probe(q, qd, time, params):
                p = _unflatten(params, policy.params)
                return _torque(policy, p, 0, time[0, 0], q.T, qd.T, trace.xp, (),
                               model.nv).T

            if policy.kind != "table":
                trace.trace(probe, {"q": (model.nq,), "qd": (model.nv,), "time": (2,),
                                    "params": (_param_size(policy.params),)})
            _NATIVE_REFUSALS[key] = None
        except _BadOutput:  # a wrong shape: the native run reports it at step 0
            _NATIVE_REFUSALS[key] = None
        except Exception as e:  # noqa: BLE001  (not traceable: numpy-only code, control flow)
            _NATIVE_REFUSALS[key] = (f"the controller {policy.name} cannot be traced "
                                     f"({type(e).__name__}: {str(e).splitlines()[0][:200]})")
    return _NATIVE_REFUSALS[key]


def _param_size(params):
    return int(sum(np.size(v) for v in params.values()))


def _unflatten(flat, params):
    """The controller's gains as traced arrays, in the shapes of ``params``, from the flat
    traced input (p, 1)."""
    out, start = {}, 0
    for name in sorted(params):
        shape = np.shape(params[name])
        size = int(np.prod(shape, dtype=int))
        out[name] = flat[start:start + size, 0].reshape(shape)
        start += size
    return out


def _native_step(model, policy, integrator, algebra, gravity, control, limit):
    """The step function the native backend traces (see ``execution.rollout``)."""
    stepper = _STEPPERS[integrator]

    def step(q, qd, time, tau=None, params=None):
        from .execution import trace

        xp = trace.xp
        qp, qdp, t, dt = q.T, qd.T, time[0, 0], time[1, 0]
        dyn = _Dynamics(xp, model, dt, algebra, gravity)
        if policy.kind == "table":
            held = tau.T
            force = lambda t, q, qd: held  # noqa: E731
        else:
            p = _unflatten(params, policy.params) if params is not None else {}
            force = _force(policy, p, 0, t, qp, qdp, xp, (), model.nv, control)
        q1, qd1, qdd, tau_out, tau_ok = stepper(dyn, t, qp, qdp, force)
        code = _bad_flags(xp, tau_ok, qdd, q1, qd1, limit)
        code = xp.reshape(code, (1, 1)) * 1.0
        return xp.concatenate([xp.broadcast_to(q1, (1, model.nq)),
                               xp.broadcast_to(qd1, (1, model.nv)),
                               xp.broadcast_to(qdd, (1, model.nv)),
                               xp.broadcast_to(tau_out, (1, model.nv)), code], axis=-1).T

    return step


def _run_native(model, q0, qd0, batch, policy, dt, integrator, algebra, gravity, n_records,
                record_every, limit, progress, control):
    from .execution import cache, rollout

    n_steps = n_records * record_every
    total = n_records + 1  # samples, the final state included
    N = q0.shape[0]
    table = policy.kind == "table"
    n_params = 0 if table else _param_size(policy.params)
    t0 = _time.perf_counter()
    static = (integrator, algebra, gravity, control, limit, table, n_params)
    try:  # a name valid in every process, for the disk cache
        disk = ("simulate", cache.content_hash(model), static, policy.kind,
                f"{type(policy.fn).__module__}.{type(policy.fn).__qualname__}"
                if not table else "table",
                cache.content_hash(policy.key[2] if not table else ()))
    except (TypeError, IndexError, AttributeError):
        disk = None
    try:
        program = rollout.get(disk, (model, static, policy.key), model.nq, model.nv, table,
                              n_params, _native_step(model, policy, integrator, algebra,
                                                     gravity, control, limit), vector=N > 1)
    except _BadOutput as e:
        return _stack([], [], [], [], model, N), (str(e), 0, ()), \
            {"wall_time": 0.0, "compile_time": _time.perf_counter() - t0}
    compile_time = _time.perf_counter() - t0
    params = None
    if not table and n_params:
        params = np.concatenate([np.ravel(np.asarray(policy.params[k], dtype=float))
                                 for k in sorted(policy.params)])
    table_rows = None
    if table:
        table_rows = np.broadcast_to(policy.table, batch + policy.table.shape[-2:]).reshape(
            (N,) + policy.table.shape[-2:]) if policy.table.ndim > 2 else policy.table
        last = table_rows[..., -1:, :]  # past the last row (the final sample) the last row holds
        table_rows = np.ascontiguousarray(np.concatenate(
            [table_rows, np.repeat(last, max(0, n_steps + 1 - table_rows.shape[-2]), axis=-2)],
            axis=-2))
    q, qd = np.array(q0, dtype=float, order="C"), np.array(qd0, dtype=float, order="C")
    chunk = _chunk_length(N, model.nq + 3 * model.nv)
    outputs, bad_step, bad_code = [], np.full(N, -1, np.int64), np.zeros(N, np.int64)
    t1 = _time.perf_counter()
    done = 0
    with np.errstate(all="ignore"):
        while done < total:
            n = min(chunk, total - done)
            # the last sample is the state after the last step: one step more, kept unrecorded
            samples, step, code = program.run(q, qd, done * record_every, n, record_every, dt,
                                              table_rows, params)
            new = (bad_step < 0) & (step >= 0)
            bad_step[new], bad_code[new] = step[new], code[new]
            outputs.append(samples)
            done += n
            if progress is not None:
                progress(min(done * record_every, n_steps), n_steps)
            if done < total and _first_failure(bad_step, bad_code, n_steps) is not None:
                break  # a rollout failed: stop here, keep what came before
    samples = tuple(np.concatenate([o[i] for o in outputs]) for i in range(4))
    wall = _time.perf_counter() - t1
    return _cut_at_failure(samples, bad_step, bad_code, batch, n_steps, record_every), \
        _failure(samples, bad_step, bad_code, batch, n_steps, record_every), \
        {"wall_time": wall, "compile_time": compile_time}


# -- the JAX backend: the rollout is a compiled loop, run in chunks ---------------------------
_COMPILED = OrderedDict()
_COMPILED_MAX = 32
_CHUNK = 1024  # samples per compiled call at most (fewer for big batches: bounded memory)
_CHUNK_BYTES = 64 << 20


def _chunk_length(N, width):
    """Samples per call: 1024, or the power of two that keeps one call's samples in 64 MiB."""
    fit = max(1, _CHUNK_BYTES // (8 * N * width))
    return min(_CHUNK, 1 << (fit.bit_length() - 1))


def _run_jax(model, q0, qd0, batch, policy, dt, integrator, algebra, gravity, n_records,
             record_every, limit, progress, control, system=None):
    import jax
    import jax.numpy as jnp

    n_steps = n_records * record_every
    total = n_records + 1  # samples, the final state included
    N = q0.shape[0]
    chunk = _chunk_length(N, model.nq + 3 * model.nv)
    with _x64():
        params = {k: jnp.asarray(v) for k, v in policy.params.items()}
        key = (model, integrator, algebra, gravity, policy.key, record_every, chunk, limit,
               batch, control, tuple((k, v.shape) for k, v in sorted(params.items())),
               system, getattr(system, "version", None))
        carry = (jnp.asarray(q0), jnp.asarray(qd0), jnp.zeros((), jnp.int64),
                 jnp.full((N,), -1, jnp.int64), jnp.zeros((N,), jnp.int64))
        dt_arg, count = jnp.asarray(dt), jnp.asarray(min(chunk, total), jnp.int64)
        compile_time = 0.0
        compiled = _COMPILED.get(key)
        if compiled is None:
            t0 = _time.perf_counter()
            fn = _chunk_function(model, policy, integrator, algebra, gravity, chunk,
                                 record_every, limit, batch, control, system)
            try:
                compiled = jax.jit(fn).lower(carry, params, dt_arg, count).compile()
            except _BadOutput as e:
                return _stack([], [], [], [], model, N), (str(e), 0, ()), \
                    {"wall_time": 0.0, "compile_time": _time.perf_counter() - t0}
            compile_time = _time.perf_counter() - t0
            _COMPILED[key] = compiled
            while len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)
        else:
            _COMPILED.move_to_end(key)
        t0 = _time.perf_counter()
        outputs = []
        done = 0
        while done < total:
            n = min(chunk, total - done)
            carry, out = compiled(carry, params, dt_arg, jnp.asarray(n, jnp.int64))
            outputs.append(tuple(np.asarray(o[:n]) for o in out))
            done += n
            if progress is not None:
                progress(min(done * record_every, n_steps), n_steps)
            if done < total and _first_failure(np.asarray(carry[3]), np.asarray(carry[4]),
                                               n_steps) is not None:
                break  # a rollout failed: stop here, keep what came before
        samples = tuple(np.concatenate([o[i] for o in outputs]) for i in range(4))
        wall = _time.perf_counter() - t0
        bad_step, bad_code = np.asarray(carry[3]), np.asarray(carry[4])
    return _cut_at_failure(samples, bad_step, bad_code, batch, n_steps, record_every), \
        _failure(samples, bad_step, bad_code, batch, n_steps, record_every), \
        {"wall_time": wall, "compile_time": compile_time}


def _chunk_function(model, policy, integrator, algebra, gravity, chunk, record_every, limit,
                    batch, control, system=None):
    """chunk_fn(carry, params, dt, count): ``count`` (<= chunk) samples, each followed by
    ``record_every`` steps; dt and count are arguments, so one compilation serves them all."""
    import jax
    import jax.numpy as jnp

    stepper = _STEPPERS[integrator]

    def chunk_fn(carry, params, dt, count):
        dyn = _Dynamics(jnp, model, dt, algebra, gravity, system, loop=True)

        def step(q, qd, k, bad_step, bad_code):
            t = k * dt
            force = _force(policy, params, k, t, q, qd, jnp, batch, model.nv, control)
            q1, qd1, qdd, tau, tau_ok = stepper(dyn, t, q, qd, force)
            code = _bad_flags(jnp, tau_ok, qdd, q1, qd1, limit)
            new = (bad_step < 0) & (code > 0)
            return (q1, qd1, k + 1, jnp.where(new, k, bad_step),
                    jnp.where(new, code, bad_code)), (q, qd, qdd, tau)

        def record(i, state):
            carry, buffers = state
            carry, sample = step(*carry)
            if record_every > 1:
                carry = jax.lax.fori_loop(1, record_every, lambda _, c: step(*c)[0], carry)
            buffers = tuple(jax.lax.dynamic_update_index_in_dim(b, s.astype(b.dtype), i, 0)
                            for b, s in zip(buffers, sample))
            return carry, buffers

        q, qd = carry[0], carry[1]
        buffers = tuple(jnp.zeros((chunk,) + a.shape, q.dtype) for a in (q, qd, qd, qd))
        return jax.lax.fori_loop(0, count, record, (carry, buffers))

    return chunk_fn


def _first_failure(bad_step, bad_code, n_steps):
    """(step, flat rollout index, code) of the earliest failure before n_steps, or None."""
    steps = np.where((bad_step >= 0) & (bad_step < n_steps), bad_step, np.iinfo(np.int64).max)
    first = int(np.argmin(steps))
    if steps[first] == np.iinfo(np.int64).max:
        return None
    return int(steps[first]), first, int(bad_code[first])


def _last_sample_bad(samples):
    _, _, qdd, tau = samples
    if len(tau) == 0:
        return None
    ok_tau = np.all(np.isfinite(tau[-1]), axis=-1)
    ok_qdd = np.all(np.isfinite(qdd[-1]), axis=-1)
    bad = ~(ok_tau & ok_qdd)
    if not np.any(bad):
        return None
    first = int(np.flatnonzero(bad)[0])
    return first, (1 if not ok_tau[first] else 2)


def _kept(samples, bad_step, bad_code, n_steps, record_every):
    """How many samples to keep: those taken strictly before the failing step."""
    failure = _first_failure(bad_step, bad_code, n_steps)
    if failure is None:
        return len(samples[0]) if _last_sample_bad(samples) is None else len(samples[0]) - 1
    return -(-failure[0] // record_every)  # ceil: samples at steps 0, r, 2r, ... < step


def _cut_at_failure(samples, bad_step, bad_code, batch, n_steps, record_every):
    keep = _kept(samples, bad_step, bad_code, n_steps, record_every)
    return tuple(a[:keep] for a in samples)


def _failure(samples, bad_step, bad_code, batch, n_steps, record_every):
    failure = _first_failure(bad_step, bad_code, n_steps)
    if failure is None:
        last = _last_sample_bad(samples)
        if last is None:
            return None
        first, code = last
        step = n_steps
    else:
        step, first, code = failure
    rollout = tuple(int(i) for i in np.unravel_index(first, batch)) if batch else ()
    return REASONS[code], step, rollout


def _make_trajectory(run, samples, backend, timing):
    model, batch = run["model"], run["batch"]
    Q, QD, QDD, TAU = samples  # (T, N, n)

    def public(a):
        return np.ascontiguousarray(np.moveaxis(a, 0, 1).reshape(batch + (a.shape[0],)
                                                                + a.shape[2:]))

    q, qd = public(Q), public(QD)
    T_len = Q.shape[0]
    kinetic, potential = _energies(model, q, qd, run["gravity"], backend, system=run["system"])
    return Trajectory(
        t=np.arange(T_len) * run["dt"] * run["record_every"], q=q, qd=qd, qdd=public(QDD),
        tau=public(TAU), kinetic=kinetic, potential=potential, model=model,
        meta={"model": model.name, "dt": run["dt"], "record_every": run["record_every"],
              "integrator": run["integrator"], "algebra": run["algebra"], "backend": backend,
              "control": "hold" if run["policy"].kind == "table" else run["control"],
              "controller": run["policy"].name,
              "gravity": list(run["gravity"] or (0.0, 0.0, -9.81)),
              "damping": model.damping.tolist(),
              "energy_floor": _energy_floor(model, run["q0"][0], run["gravity"]), **timing})


def _energy_floor(model, q, gravity):
    """A thousandth of |g| m L (weight times extent at q): the smallest energy scale a drift is
    measured against, so that a robot that hardly moves does not divide by zero."""
    from .dynamics import forward_kinematics

    g = np.linalg.norm(gravity if gravity is not None else (0.0, 0.0, -9.81))
    origins = np.asarray(forward_kinematics(model, q))[:, :3, 3]
    extent = np.linalg.norm(origins - origins[:1], axis=-1).max() if len(origins) else 0.0
    return 1e-3 * g * model.total_mass * float(extent)


def _energies(model, q, qd, gravity, backend, block=8192, system=None):
    """Kinetic and potential energy of every sample, in numpy blocks (fast: 8192 Puma states take
    about 15 ms; bounded memory for long batches); a ``system``'s own (``_system``)."""
    if system is not None:
        return (system.kinetic_energy(q, qd, algebra="spatial"),
                system.potential_energy(q, gravity=gravity, algebra="spatial"))
    shape = q.shape[:-1]
    qf, qdf = q.reshape(-1, model.nq), qd.reshape(-1, model.nv)
    T, V = np.empty(len(qf)), np.empty(len(qf))
    for s in range(0, len(qf), block):
        with np.errstate(all="ignore"):
            T[s:s + block] = kinetic_energy(model, qf[s:s + block], qdf[s:s + block])
            V[s:s + block] = potential_energy(model, qf[s:s + block], gravity=gravity)
    return T.reshape(shape), V.reshape(shape)


# ============================================================================================
# Trajectory
# ============================================================================================
class Trajectory:
    """A simulated run: samples at times ``t`` (T,) of ``q`` (..., T, nq), ``qd``, ``qdd``, ``tau``
    (..., T, nv), ``kinetic`` and ``potential`` energy (..., T); leading dimensions are the batch
    of rollouts (none for a single one). ``tau[k]`` acted during [t_k, t_k + dt); ``qdd[k]`` is the
    acceleration at t_k. ``meta`` holds how it was made (model name, dt, integrator, algebra,
    backend, controller, gravity, wall_time and compile_time in seconds)."""

    ARRAYS = ("t", "q", "qd", "qdd", "tau", "kinetic", "potential")

    def __init__(self, t, q, qd, qdd, tau, kinetic, potential, model=None, meta=None):
        self.t, self.q, self.qd, self.qdd, self.tau = t, q, qd, qdd, tau
        self.kinetic, self.potential = kinetic, potential
        self.model, self.meta = model, dict(meta or {})

    # -- views ----------------------------------------------------------------------------
    @property
    def energy(self):
        """Total mechanical energy T + V (..., T)."""
        return self.kinetic + self.potential

    @property
    def batch_shape(self):
        return self.q.shape[:-2]

    @property
    def n_samples(self):
        return len(self.t)

    @property
    def real_time_factor(self):
        """Simulated time per second of wall time (compilation excluded)."""
        wall = self.meta.get("wall_time", 0.0)
        return (self.t[-1] if len(self.t) else 0.0) / wall if wall > 0 else math.inf

    def __getitem__(self, index):
        """The rollout(s) at ``index`` of the batch, e.g. ``traj[3]``."""
        if not self.batch_shape:
            raise IndexError("a single rollout has no batch to index")
        if not isinstance(index, tuple):
            index = (index,)
        if any(i is Ellipsis for i in index) or len(index) > len(self.batch_shape):
            raise IndexError(f"index {index} does not address the batch {self.batch_shape}")
        return Trajectory(self.t, *(getattr(self, n)[index] for n in self.ARRAYS[1:]),
                          model=self.model, meta=self.meta)

    def __repr__(self):
        batch = f", batch={self.batch_shape}" if self.batch_shape else ""
        end = self.t[-1] if len(self.t) else 0.0
        return (f"Trajectory({self.meta.get('model', '?')!r}, {self.n_samples} samples over "
                f"{end:.6g} s{batch}, integrator={self.meta.get('integrator')!r})")

    # -- energy ---------------------------------------------------------------------------
    def work(self):
        """Cumulative work (..., T) of the joint forces minus what viscous damping dissipated,
        int qd . (tau - damping qd) dt, by the trapezoidal rule: with the power at both ends of
        each interval for continuous control, with the interval's held tau for ``"hold"``.
        Accurate to O(dt^2) when every step is recorded (``record_every=1``)."""
        damping = np.asarray(self.meta.get("damping", np.zeros(self.qd.shape[-1])))
        if len(self.t) < 2:
            return np.zeros(self.kinetic.shape)
        h = np.diff(self.t)
        qd, tau = self.qd, self.tau
        held = self.meta.get("control") == "hold"
        tau_right = tau[..., :-1, :] if held else tau[..., 1:, :]
        power_left = (qd[..., :-1, :] * (tau[..., :-1, :] - damping * qd[..., :-1, :])).sum(-1)
        power_right = (qd[..., 1:, :] * (tau_right - damping * qd[..., 1:, :])).sum(-1)
        steps = 0.5 * h * (power_left + power_right)
        return np.concatenate([np.zeros(steps.shape[:-1] + (1,)), np.cumsum(steps, axis=-1)],
                              axis=-1)

    def energy_scale(self):
        """The energy the motion exchanges, per rollout (...): the larger of the peak kinetic
        energy and the range of the potential energy (total energy has no natural zero), but at
        least ``meta["energy_floor"]``, a thousandth of the robot's weight times its extent."""
        if self.kinetic.shape[-1] == 0:
            return np.zeros(self.batch_shape)
        exchanged = np.maximum(self.kinetic.max(axis=-1),
                               self.potential.max(axis=-1) - self.potential.min(axis=-1))
        return np.maximum(exchanged, self.meta.get("energy_floor", 0.0))

    def energy_drift(self, final=False):
        """The largest |E(t) - E(0) - W(t)| over the run (the value at the end if ``final``),
        relative to ``energy_scale()``, where W is ``work()`` (zero for a passive robot without
        damping). Needs ``record_every=1`` when joint forces act; per rollout (...)."""
        if self.n_samples == 0:
            return np.zeros(self.batch_shape)
        error = self.energy - self.energy[..., :1] - self.work()
        error = np.abs(error[..., -1] if final else error).reshape(self.batch_shape + (-1,))
        return error.max(axis=-1) / np.maximum(self.energy_scale(), np.finfo(float).tiny)

    # -- files ----------------------------------------------------------------------------
    def save(self, path):
        """Write ``.npz`` (any batch) or ``.csv`` (one rollout: a header of metadata lines
        starting with ``#``, then one row per sample)."""
        path = str(path)
        if path.lower().endswith(".csv"):
            return self._save_csv(path)
        if not path.lower().endswith(".npz"):
            raise ValueError(f"unknown trajectory file type {path!r}: use .npz or .csv")
        np.savez_compressed(path, **{n: getattr(self, n) for n in self.ARRAYS},
                            meta=np.array(_json_dumps(self._meta_with_names())))
        return path

    @classmethod
    def load(cls, path, model=None):
        """Read a file written by ``save``; ``model`` (optional) enables drawing it."""
        path = str(path)
        if path.lower().endswith(".csv"):
            return cls._load_csv(path, model)
        with np.load(path, allow_pickle=False) as data:
            arrays = {n: data[n] for n in cls.ARRAYS}
            meta = _json_loads(str(data["meta"]))
        return cls(**arrays, model=model, meta=meta)

    def _meta_with_names(self):
        meta = dict(self.meta)
        if self.model is not None:
            meta["q_names"], meta["v_names"] = coordinate_names(self.model)
        return meta

    def _save_csv(self, path):
        if self.batch_shape:
            raise ValueError(f"CSV holds one rollout; this trajectory has batch "
                             f"{self.batch_shape}: save traj[i] or use .npz")
        meta = self._meta_with_names()
        q_names = meta.get("q_names") or [f"q{i}" for i in range(self.q.shape[-1])]
        v_names = meta.get("v_names") or [f"v{i}" for i in range(self.qd.shape[-1])]
        header = (["t"] + [f"q:{n}" for n in q_names] + [f"qd:{n}" for n in v_names]
                  + [f"qdd:{n}" for n in v_names] + [f"tau:{n}" for n in v_names]
                  + ["kinetic", "potential"])
        table = np.column_stack([self.t, self.q, self.qd, self.qdd, self.tau, self.kinetic,
                                 self.potential])
        with open(path, "w", newline="") as f:
            f.write(f"# screwdyn trajectory {_json_dumps(meta)}\n")
            writer = csv.writer(f)
            writer.writerow(header)
            for row in table:
                writer.writerow([repr(float(x)) for x in row])
        return path

    @classmethod
    def _load_csv(cls, path, model):
        with open(path, newline="") as f:
            first = f.readline()
            if not first.startswith("# screwdyn trajectory "):
                raise ValueError(f"{path}: not a screwdyn trajectory CSV (first line {first!r})")
            meta = _json_loads(first[len("# screwdyn trajectory "):])
            reader = csv.reader(f)
            header = next(reader)
            rows = np.array([[float(x) for x in row] for row in reader if row], dtype=float)
        rows = rows.reshape(-1, len(header))
        cols = {name: rows[:, i] for i, name in enumerate(header)}

        def group(prefix):
            names = [h for h in header if h.startswith(prefix + ":")]
            return np.column_stack([cols[h] for h in names]) if names else np.zeros((len(rows), 0))

        return cls(cols["t"], group("q"), group("qd"), group("qdd"), group("tau"),
                   cols["kinetic"], cols["potential"], model=model, meta=meta)

    # -- pictures -------------------------------------------------------------------------
    def plot(self, path=None, **kwargs):
        """Joint positions, velocities, joint forces and energy against time (matplotlib; see
        ``screwdyn.plot.plot_trajectory``). Saves to ``path`` if given; returns the Figure."""
        from .plot import plot_trajectory

        return plot_trajectory(self, path, **kwargs)

    def animate(self, path, model=None, **kwargs):
        """Save an animation of the robot along the trajectory (.gif or .mp4)."""
        from .plot import animate

        return animate(self, path, model=model, **kwargs)

    def summary(self):
        """A few lines: length, wall time, real-time factor, energy drift, peak joint forces."""
        from .cli_simulate import summary_lines

        return "\n".join(summary_lines(self))


def coordinate_names(model):
    """Names of the q and v coordinates: a 1-DoF joint's name, or ``joint.x`` ... ``joint.qw``
    and ``joint.vx`` ... ``joint.wz`` for a multi-DoF joint (its ``position_names`` and
    ``velocity_names``)."""
    def names(joint, suffixes):
        return [f"{joint}.{c}" if c else joint for c in suffixes]

    q_names, v_names = [], []
    for b in model.active_bodies:
        q_names += names(b.joint, b.joint_model.position_names())
        v_names += names(b.joint, b.joint_model.velocity_names())
    return q_names, v_names


def _json_dumps(obj):
    import json

    return json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))


def _json_loads(text):
    import json

    return json.loads(text)
