"""``simulate``: the rollout loop, on numpy (a Python loop) or JAX (one compiled XLA loop run in
chunks), and ``rollout``, the same step as a pure JAX function to differentiate.

Failures never lose the run: a controller returning the wrong shape or a non-finite torque, or
raising; a state that becomes non-finite, exceeds ``divergence_limit`` or breaks the energy
balance beyond ``energy_limit``: each raises ``SimulationError`` naming the step and time, with
``.trajectory`` holding every sample before it. Ctrl-C raises ``SimulationInterrupted`` (a
``KeyboardInterrupt``) carrying the samples computed so far.
"""
import contextlib
import math
import os
import time as _time
import warnings
from collections import OrderedDict

import numpy as np

from .. import _backend, validation
from ..dynamics import forward_kinematics, kinetic_energy, potential_energy
from .checks import positive
from .errors import SimulationError, SimulationInterrupted
from .integrators import STEPPERS, Manifold, largest_stable_step
from .policy import BadOutput, ControllerFailed, Policy
from .settings import Settings
from .system import ExternalWrenchError, System
from .trajectory import Trajectory

REASONS = {1: "the controller returned a non-finite joint force",
           2: "the state or the acceleration became non-finite (the simulation diverged)",
           3: "the velocity exceeded divergence_limit (the simulation diverged)"}

#: a rollout with more steps than this (steps x rollouts) warns with its size before it runs
LONG_ROLLOUT_STEPS = 10 ** 8
#: seconds between two calls of the progress callback on the numpy backend (JAX: every chunk)
PROGRESS_PERIOD = 0.1
#: the smallest extent (m) of a robot in the energy floor (see ``_energy_floor``)
MIN_EXTENT = 0.1


def simulate(model, q0, qd0=None, controller=None, t_final=1.0, dt=1e-3, *, settings=None,
             **options):
    """Simulate ``model`` from (q0, qd0) for ``t_final`` seconds with fixed steps ``dt`` (s).

    q0 (..., nq), qd0 (..., nv) (default zero): a batch of initial states runs as one rollout.
    controller: the joint forces, one of
        None                     zero torque (a passive robot);
        controller(t, q, qd)     -> tau (..., nv) (see screwdyn.controllers and ``control``);
        profile(t)               -> tau, a callable of one argument: open-loop torques;
        an array (steps, nv)     the torque of each step (or (..., steps, nv), one per rollout).
    settings: a ``screwdyn.sim.Settings``; every field may also be given as a keyword
        (``integrator="rk4"``, ``contact=GroundContact(mu=0.8)``, ``joint_limits=True``,
        ``external=f``, ``progress=True``, ...), overriding ``settings``.

    The run takes ceil(t_final / (dt record_every)) record_every steps (t_final rounded up to
    whole recorded intervals). Returns a ``Trajectory``; raises ``SimulationError`` (carrying
    the trajectory so far) if the controller or the dynamics fail on the way,
    ``SimulationInterrupted`` on Ctrl-C, ``ValueError`` for bad arguments (before anything
    runs). Warns (``UserWarning``) when dt is too large for the stiffness of the contact or
    limit springs, naming the largest stable step.
    """
    settings = Settings.make(settings, **options)
    assembly, model = _assembly(model)
    if model.nv == 0:
        raise ValueError(f"model {model.name!r} has no degrees of freedom: nothing to simulate")
    dt, t_final = positive(dt, "dt"), positive(t_final, "t_final")
    if dt > t_final:
        raise ValueError(f"dt = {dt:g} s is longer than t_final = {t_final:g} s: nothing would "
                         "be simulated between the first and the last sample; use dt <= t_final")
    record_every = settings.record_every
    n_records = max(1, math.ceil(t_final / (dt * record_every) - 1e-9))
    n_steps = n_records * record_every
    q0, qd0, batch = _initial_state(model, q0, qd0)
    policy = Policy(controller, model, n_steps)
    if policy.table is not None and policy.table.ndim > 2:
        try:
            np.broadcast_shapes(policy.table.shape[:-2], batch)
        except ValueError:
            raise ValueError(f"the torque table's batch shape {policy.table.shape[:-2]} does not "
                             f"match the initial states' {batch}") from None
    system = System(model, settings, assembly)
    N = q0.shape[0]
    _check_size(model, system, settings, N, n_records, n_steps)
    run = _Run(model, system, settings, policy, q0, qd0, batch, dt, n_records)
    if N == 0:  # an empty batch: the sample times, and no rollout
        return _make_trajectory(run, _empty_samples(run, n_records + 1), "numpy",
                                {"wall_time": 0.0, "compile_time": 0.0})
    _warn_if_unstable(run)
    chosen = _choose_backend(settings.backend, policy, model, q0, qd0, batch, system, run)
    progress = _progress(settings.progress, n_steps, dt)
    runner = {"native": _run_native, "jax": _run_jax, "numpy": _run_numpy}[chosen]
    try:
        samples, failure, timing = runner(run, progress)
    finally:
        if hasattr(progress, "close"):
            progress.close()
    if isinstance(failure, _Interrupted):
        traj = _make_trajectory(run, samples, chosen, timing)
        raise SimulationInterrupted(failure.step, failure.step * dt, traj) from None
    traj = _make_trajectory(run, samples, chosen, timing)
    if failure is None:
        failure, traj = _energy_failure(run, traj)
    if failure is not None:
        reason, step, rollout, *cause = failure
        raise SimulationError(reason, step, step * dt, rollout, traj) from (cause or [None])[0]
    return traj


def _assembly(model):
    """(assembly, model): a Model simulates itself (assembly None). An object with its own
    ``forward_dynamics(q, qd, tau, gravity=, algebra=, time=)``, ``kinetic_energy``,
    ``potential_energy``, a ``version`` (changed when it changes) and a ``configuration_model``
    (a Model of its q and v layout), as a ``screwdyn.composition.Assembly`` has, is simulated
    through them."""
    layout = getattr(model, "configuration_model", None)
    return (None, model) if layout is None else (model, layout)


class _Run:
    """Everything one ``simulate`` call runs with."""

    def __init__(self, model, system, settings, policy, q0, qd0, batch, dt, n_records):
        self.model, self.system, self.settings, self.policy = model, system, settings, policy
        self.q0, self.qd0, self.batch, self.dt = q0, qd0, batch, dt
        self.n_records, self.record_every = n_records, settings.record_every
        self.n_steps = n_records * settings.record_every
        self.params = system.params(q0) if len(q0) else {}
        self.points = 0 if system.contact is None else len(system.contact.points)


def _initial_state(model, q0, qd0):
    """(q0 (N, nq), qd0 (N, nv), batch shape), checked: real, finite, unit quaternions."""
    arrays = []
    for name, value, size, meaning in (("q0", q0, model.nq, "configuration, nq"),
                                       ("qd0", qd0, model.nv, "velocity, nv")):
        if value is None:
            if name == "q0":
                raise ValueError(f"q0 must be an array of shape (..., {model.nq}) (configuration,"
                                 f" nq), got None (model.neutral is the zero configuration)")
            value = np.zeros(model.nv)
        a = np.array(value)  # a copy; JAX arrays come back to numpy here
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be real numbers, got dtype {a.dtype}")
        a = a.astype(float)
        _backend.check_last_dim(a, size, name, meaning)
        arrays.append(a)
    q0, qd0 = arrays
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
    return (np.broadcast_to(q0, batch + (model.nq,)).reshape(N, model.nq).copy(),
            np.broadcast_to(qd0, batch + (model.nv,)).reshape(N, model.nv).copy(), batch)


def _sample_width(model, points, record_forces):
    """Numbers recorded per sample and rollout."""
    return model.nq + 3 * model.nv + 3 + (3 * points if record_forces else 0)


def _check_size(model, system, settings, N, n_records, n_steps):
    """Refuse a run whose samples alone would not fit in memory; warn about a very long one."""
    points = 0 if system.contact is None else len(system.contact.points)
    width = _sample_width(model, points, settings.record_contact_forces) + 4  # + energies
    # + the sample times and a temporary while they are computed (all of an empty batch's)
    need = 8 * (width * N + 2) * (n_records + 1)
    available = validation.memory_bytes()
    if available and need > validation.MEMORY_FRACTION * available:
        raise ValueError(f"the recorded samples would take {need / 2 ** 30:,.1f} GiB "
                         f"({n_records + 1} samples x {N} rollouts x {width} numbers, and the "
                         "sample times), more than "
                         f"{validation.MEMORY_FRACTION:.0%} of this machine's "
                         f"{available / 2 ** 30:.3g} GiB: "
                         "shorten the run, record fewer samples (record_every) or split the batch")
    if n_steps * max(N, 1) > LONG_ROLLOUT_STEPS:
        warnings.warn(f"a long simulation: {n_steps:,} steps x {N:,} rollouts "
                      f"({n_steps * N:.3g} state steps; the samples take "
                      f"{need / 2 ** 20:,.0f} MiB). The progress bar (progress=True) shows the "
                      "estimated time; Ctrl-C keeps the samples computed so far.", stacklevel=3)


def _warn_if_unstable(run):
    """Warn when dt exceeds the largest step the integrator keeps stable on the stiffest spring
    (a contact point, a limit, a stick-slip joint), each seen as a damped oscillator with its
    effective mass at the first initial state."""
    stiffest = _stiffest_springs(run)
    if not stiffest:
        return
    integrator = run.settings.integrator
    limits = [(largest_stable_step(integrator, k, b, m), what, k, m) for what, k, b, m in stiffest]
    dt_max, what, k, m = min(limits)
    if run.dt > dt_max:
        warnings.warn(f"dt = {run.dt:g} s is too large for the stiffness of {what} (k = {k:.3g}, "
                      f"effective mass {m:.3g}): the largest stable step of {integrator} there "
                      f"is about {dt_max:.3g} s. Use dt <= {dt_max:.2g} s, or softer contact "
                      "(GroundContact(stiffness=...) / JointLimits(frequency=...)).",
                      stacklevel=3)


def _stiffest_springs(run):
    """(what, stiffness, damping, effective mass) of the springs at the first initial state."""
    from ..dynamics import jacobian, mass_matrix

    system, model, q = run.system, run.model, run.q0[0]
    out = []
    M = np.asarray(mass_matrix(model, q))
    for name, spring, dofs in (("joint limit", system.limits, "v_index"),
                               ("stick-slip joint friction", system.friction, "index")):
        if spring is not None:
            p = run.params["limits" if name == "joint limit" else "friction"]
            for j, dof in enumerate(getattr(spring, dofs)):
                out.append((f"the {name} of {_dof_name(model, dof)!r}", p["k"][0, j],
                            p["b"][0, j], M[dof, dof]))
    if system.contact is not None:
        contact, p = system.contact, run.params["contact"]
        Minv = np.linalg.inv(M)
        T = np.asarray(forward_kinematics(model, q))
        n = np.asarray(p["normal"])
        point = contact.positions(np, p, T[None])[0]
        weight = model.total_mass * 9.81
        k, kt, c = (float(p[name]) for name in ("k", "kt", "c"))
        seen = {}
        for i, (link, label) in enumerate(zip(contact.link, contact.points.labels)):
            if link not in seen:
                seen[link] = np.asarray(jacobian(model, q, int(link), frame="world"))
            J = seen[link]
            r = point[0, i] - T[link, :3, 3]
            Jp = J[:3] - np.cross(r, J[3:].T).T  # velocity of the point: v + w x r
            inverse = Jp @ Minv @ Jp.T  # (3, 3): the point's inverse apparent inertia
            normal = float(n @ inverse @ n)
            tangent = np.eye(3) - np.outer(n, n)
            lightest = float(np.linalg.eigvalsh(tangent @ inverse @ tangent).max())
            # the springs, damped as when the point carries the whole weight (the worst case)
            if normal > 0:
                out.append((f"the contact at {label!r}", k, c * weight, 1 / normal))
            if lightest > 0:
                out.append((f"the friction spring at {label!r}", kt, c * weight, 1 / lightest))
    return out


def _dof_name(model, dof):
    from .trajectory import coordinate_names

    return coordinate_names(model)[1][dof]


def _choose_backend(backend, policy, model, q0, qd0, batch, system, run):
    if backend == "numpy":
        return "numpy"
    if backend in ("auto", "native"):
        from .native import refusal

        why = refusal(run)
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
    key = (policy.key, model, batch, system.key)
    if policy.kind == "table" and system.external is None or _TRACEABLE.get(key):
        return "jax"
    with x64():
        q = jax.numpy.asarray(q0).reshape(batch + (model.nq,))
        qd = jax.numpy.asarray(qd0).reshape(batch + (model.nv,))
        for what, fn in (("controller " + policy.name,
                          lambda t, q, qd: policy(policy.params, 0, t, q, qd, jax.numpy)),
                         ("external wrench function", system.external)):
            if fn is None or (what.startswith("controller") and policy.kind == "table"):
                continue
            try:
                jax.eval_shape(fn, jax.numpy.zeros(()), q, qd)
            except Exception as e:  # not traceable: numpy-only code, Python control flow
                if backend == "jax":
                    raise ValueError(f"backend='jax': the {what} cannot be traced by JAX "
                                     f"({type(e).__name__}: {str(e).splitlines()[0][:200]}); "
                                     "write it with screwdyn.controllers.array_namespace(q) or use "
                                     "backend='numpy'") from e
                warnings.warn(f"the {what} cannot be traced by JAX ({type(e).__name__}); "
                              "simulating on the numpy backend, step by step (much slower). "
                              "Write it with screwdyn.controllers.array_namespace(q) (array-generic) to "
                              "compile it, or pass backend='numpy' to silence this.",
                              stacklevel=3)
                return "numpy"
    if len(_TRACEABLE) > 256:  # closures made afresh for every call would pile up
        _TRACEABLE.clear()
    _TRACEABLE[key] = True
    return "jax"


_TRACEABLE = {}


def x64():
    """float64 for the JAX computations inside, without changing the user's global setting."""
    import jax

    if getattr(jax.config, "jax_enable_x64", False):
        return contextlib.nullcontext()
    manager = getattr(jax, "enable_x64", None)
    if manager is None:  # older JAX
        from jax.experimental import enable_x64 as manager
    return manager(True)


def _progress(progress, n_steps, dt):
    if progress is True:
        from .progress import ProgressBar

        return ProgressBar(n_steps, dt)
    return progress or None


# ============================================================================================
# One step, for every backend
# ============================================================================================
def make_step(run, xp, dt):
    """step(params, k, q, qd, hybrid, energy) -> ((q1, qd1, hybrid1, energy1), sample,
    finite): one integrator step from t_k = k dt; ``sample`` is what the rollout records at
    t_k: (q, qd, qdd, tau, [elastic, work_in, work_passive]) (+ contact forces)."""
    system, policy, batch = run.system, run.policy, run.batch
    stepper = STEPPERS[run.settings.integrator]
    control = run.settings.control
    manifold = Manifold(xp, run.model, dt)
    record_forces = run.settings.record_contact_forces and system.contact is not None

    def step(params, k, q, qd, hybrid, energy):
        t = k * dt
        hybrid, elastic = system.project(xp, params["system"], q, hybrid)
        force = policy.force(params["policy"], k, t, q, qd, xp, batch, control)

        def rates(t_i, q_i, qd_i, xi):
            tau = force(t_i, q_i, qd_i)
            qdd, power, _ = system.rates(xp, params["system"], t_i, q_i, qd_i, xi, tau, hybrid)
            return qdd, power, tau

        s = stepper(manifold, t, q, qd, rates)
        channels = xp.concatenate([elastic[..., None], energy], axis=-1)
        sample = (q, qd, s.qdd, s.tau, channels)
        if record_forces:
            sample = sample + (system.rates(xp, params["system"], t, q, qd, 0 * qd, s.tau,
                                            hybrid)[2],)
        return (s.q, s.qd, system.advance(hybrid, s.xi), energy + s.energy), sample, s.finite

    return step


def _bad_flags(xp, tau_ok, qdd, q1, qd1, limit):
    """Per rollout: 0 fine, else the REASONS code of what went wrong in this step."""
    def finite(a):
        return xp.all(xp.isfinite(a), axis=-1)

    code = xp.where(finite(qdd) & finite(q1) & finite(qd1), 0, 2)
    if limit is not None:
        code = xp.where((code == 0) & (xp.max(xp.abs(qd1), axis=-1) > limit), 3, code)
    return xp.where(tau_ok, code, 1)


def _all_params(run, xp):
    convert = (lambda a: a) if xp is np else xp.asarray
    return {"policy": {k: convert(v) for k, v in run.policy.params.items()},
            "system": _tree_map(convert, run.params)}


def _tree_map(fn, tree):
    if isinstance(tree, dict):
        return {k: _tree_map(fn, v) for k, v in tree.items()}
    return fn(tree)


# -- the numpy backend: a Python loop, every step checked as it happens ----------------------
class _Interrupted:
    def __init__(self, step):
        self.step = step


def _run_numpy(run, progress):
    step_fn = make_step(run, np, run.dt)
    params = _all_params(run, np)
    n_steps, record_every = run.n_steps, run.record_every
    q, qd = run.q0, run.qd0
    hybrid = run.system.initial_hybrid(np, params["system"], q)
    energy = np.zeros((len(q), 2))
    samples = []
    failure = None
    t_start = last_report = _time.perf_counter()
    k = 0
    try:
        for k in range(n_steps + 1):
            try:
                with np.errstate(all="ignore"):
                    (q1, qd1, hybrid1, energy1), sample, tau_ok = step_fn(params, k, q, qd,
                                                                         hybrid, energy)
            except BadOutput as e:
                failure = (str(e), k, ())
                break
            except ControllerFailed as e:  # reported with the samples so far, cause attached
                failure = (f"the controller raised {type(e.cause).__name__}: {e.cause}", k, (),
                           e.cause)
                break
            except ExternalWrenchError as e:
                failure = (str(e), k, ())
                break
            except Exception as e:
                failure = (f"the dynamics raised {type(e).__name__}: {e}", k, (), e)
                break
            qdd, tau = sample[2], sample[3]
            code = _bad_flags(np, tau_ok, qdd, q1, qd1, run.settings.divergence_limit)
            if k == n_steps:  # the last sample: only its own joint forces and acceleration count
                code = _bad_flags(np, np.all(np.isfinite(tau), axis=-1), qdd, qdd, qdd, None)
            if np.any(code):
                first = int(np.flatnonzero(code)[0])
                rollout = np.unravel_index(first, run.batch) if run.batch else ()
                failure = (REASONS[int(code[first])], k, tuple(int(i) for i in rollout))
                break
            if k % record_every == 0:
                samples.append(sample)
            q, qd, hybrid, energy = q1, qd1, hybrid1, energy1
            if progress is not None and _time.perf_counter() - last_report > PROGRESS_PERIOD:
                progress(k, n_steps)
                last_report = _time.perf_counter()
        if progress is not None and failure is None:
            progress(n_steps, n_steps)
    except KeyboardInterrupt:
        failure = _Interrupted(k)
    wall = _time.perf_counter() - t_start
    stacked = tuple(np.stack(a) for a in zip(*samples)) if samples else _empty_samples(run)
    return stacked, failure, {"wall_time": wall, "compile_time": 0.0}


def _empty_samples(run, T=0):
    """Samples (T, N, ...) of zeros: none at all (T = 0), or T of an empty batch (N = 0)."""
    N, model = len(run.q0), run.model
    out = (np.zeros((T, N, model.nq)),) + tuple(np.zeros((T, N, model.nv)) for _ in range(3)) \
        + (np.zeros((T, N, 3)),)
    if run.settings.record_contact_forces and run.points:
        out = out + (np.zeros((T, N, run.points, 3)),)
    return out


# -- the native backend: the step in machine code, the loop over steps too (sim/native.py) ----
def _run_native(run, progress):
    from .native import run_native

    def finish(samples, bad_step, bad_code):
        return (_cut_at_failure(samples, bad_step, bad_code, run.n_steps, run.record_every),
                _failure(samples, bad_step, bad_code, run.batch, run.n_steps, run.record_every))

    return run_native(run, progress, make_step, _bad_flags, _chunk_length, Paced,
                      lambda: _empty_samples(run), finish, _Interrupted)


# -- the JAX backend: the rollout is a compiled loop, run in chunks ---------------------------
_COMPILED = OrderedDict()
_COMPILED_MAX = 32
_CHUNK = 1024  # samples per compiled call at most (fewer for big batches: bounded memory)
_CHUNK_BYTES = 64 << 20


def _chunk_length(N, width):
    """Samples per call: 1024, or the power of two that keeps one call's samples in 64 MiB."""
    fit = max(1, _CHUNK_BYTES // (8 * N * width))
    return min(_CHUNK, 1 << (fit.bit_length() - 1))


#: seconds one uninterruptible call (a native or compiled JAX chunk) aims to take: Python sees
#: Ctrl-C only when the call returns
CHUNK_SECONDS = 0.25


class Paced:
    """The sizes of successive uninterruptible calls (machine code, a compiled JAX loop), in
    units of work (steps, samples): ``first`` unit(s), then as many as the measured time per
    unit fits in ``CHUNK_SECONDS`` (growing at most ``growth``-fold from one call to the next),
    never more than ``most`` (the memory bound). So Ctrl-C waits a fraction of a second
    whatever the model, the batch or ``record_every``. The chunking does not change the
    results: the calls run one after the other on the same state."""

    def __init__(self, most, first=1, growth=8):
        self.most, self.growth = max(1, int(most)), growth
        self.next, self._start = min(self.most, max(1, int(first))), None

    def take(self, left):
        """The next call's size in units (1 to ``left``); starts its clock."""
        self._start = _time.perf_counter()
        return max(1, min(self.next, int(left)))

    def took(self, n):
        """The call of ``n`` units taken by ``take`` has returned: size the next one."""
        elapsed = _time.perf_counter() - self._start
        fit = CHUNK_SECONDS * n / elapsed if elapsed > 0 else self.most
        size = int(max(1, min(self.most, self.growth * n, fit)))
        self.next = 1 << (size.bit_length() - 1)  # a power of two: few distinct call shapes


def _run_jax(run, progress):
    import jax
    import jax.numpy as jnp

    n_steps, total = run.n_steps, run.n_records + 1  # samples, the final state included
    N = len(run.q0)
    width = _sample_width(run.model, run.points, run.settings.record_contact_forces)
    chunk = _chunk_length(N, width)
    s = run.settings
    with x64():
        params = _tree_map(jnp.asarray, _all_params(run, np))
        key = (run.system.key, s.integrator, run.policy.key, run.record_every, chunk,
               s.divergence_limit, run.batch, s.control, s.record_contact_forces,
               tuple((k, v.shape) for k, v in sorted(params["policy"].items())))
        hybrid = run.system.initial_hybrid(jnp, params["system"], jnp.asarray(run.q0))
        carry = (jnp.asarray(run.q0), jnp.asarray(run.qd0), hybrid, jnp.zeros((N, 2)),
                 jnp.zeros((), jnp.int64), jnp.full((N,), -1, jnp.int64),
                 jnp.zeros((N,), jnp.int64))
        dt_arg, count = jnp.asarray(run.dt), jnp.asarray(min(chunk, total), jnp.int64)
        compile_time = 0.0
        compiled = _COMPILED.get(key)
        if compiled is None:
            t0 = _time.perf_counter()
            fn = _chunk_function(run, chunk)
            try:
                compiled = jax.jit(fn).lower(carry, params, dt_arg, count).compile()
            except (BadOutput, ExternalWrenchError) as e:
                return _empty_samples(run), (str(e), 0, ()), \
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
        interrupted = None
        paced = Paced(chunk)  # samples per call: bounded in memory and in time
        try:
            while done < total:
                n = paced.take(total - done)
                new_carry, out = compiled(carry, params, dt_arg, jnp.asarray(n, jnp.int64))
                outputs.append(tuple(np.asarray(o[:n]) for o in out))
                paced.took(n)
                carry = new_carry
                done += n
                if progress is not None:
                    progress(min(done * run.record_every, n_steps), n_steps)
                if done < total and _first_failure(np.asarray(carry[5]), np.asarray(carry[6]),
                                                   n_steps) is not None:
                    break  # a rollout failed: stop here, keep what came before
        except KeyboardInterrupt:
            # the samples kept say where it stopped (Ctrl-C may land between two lines)
            interrupted = _Interrupted(sum(len(o[0]) for o in outputs) * run.record_every)
        samples = tuple(np.concatenate([o[i] for o in outputs]) for i in range(len(outputs[0]))) \
            if outputs else _empty_samples(run)
        wall = _time.perf_counter() - t0
        bad_step, bad_code = np.asarray(carry[5]), np.asarray(carry[6])
    timing = {"wall_time": wall, "compile_time": compile_time}
    if interrupted is not None:
        return samples, interrupted, timing
    return _cut_at_failure(samples, bad_step, bad_code, n_steps, run.record_every), \
        _failure(samples, bad_step, bad_code, run.batch, n_steps, run.record_every), timing


def _chunk_function(run, chunk):
    """chunk_fn(carry, params, dt, count): ``count`` (<= chunk) samples, each followed by
    ``record_every`` steps; dt and count are arguments, so one compilation serves them all."""
    import jax
    import jax.numpy as jnp

    record_every, limit = run.record_every, run.settings.divergence_limit

    def chunk_fn(carry, params, dt, count):
        step_fn = make_step(run, jnp, dt)

        def step(q, qd, hybrid, energy, k, bad_step, bad_code):
            (q1, qd1, hybrid1, energy1), sample, tau_ok = step_fn(params, k, q, qd, hybrid,
                                                                 energy)
            code = _bad_flags(jnp, tau_ok, sample[2], q1, qd1, limit)
            new = (bad_step < 0) & (code > 0)
            return (q1, qd1, hybrid1, energy1, k + 1, jnp.where(new, k, bad_step),
                    jnp.where(new, code, bad_code)), sample

        def record(i, state):
            carry, buffers = state
            carry, sample = step(*carry)
            if record_every > 1:
                carry = jax.lax.fori_loop(1, record_every, lambda _, c: step(*c)[0], carry)
            buffers = tuple(jax.lax.dynamic_update_index_in_dim(b, s.astype(b.dtype), i, 0)
                            for b, s in zip(buffers, sample))
            return carry, buffers

        shapes = jax.eval_shape(lambda c: step(*c)[1], carry)
        buffers = tuple(jnp.zeros((chunk,) + a.shape, a.dtype) for a in shapes)
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
    qdd, tau = samples[2], samples[3]
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


def _cut_at_failure(samples, bad_step, bad_code, n_steps, record_every):
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


# ============================================================================================
# The trajectory, and the energy check
# ============================================================================================
def _make_trajectory(run, samples, backend, timing):
    model, batch, s = run.model, run.batch, run.settings

    def public(a):
        return np.ascontiguousarray(np.moveaxis(a, 0, 1).reshape(batch + (a.shape[0],)
                                                                + a.shape[2:]))

    q, qd = public(samples[0]), public(samples[1])
    channels = public(samples[4])
    kinetic, potential = _energies(model, q, qd, s.gravity, run.system.assembly)
    forces = public(samples[5]) if len(samples) > 5 else None
    gravity = s.gravity if s.gravity is not None else model.gravity
    meta = {"model": model.name, "dt": run.dt, "record_every": run.record_every,
            "integrator": s.integrator, "algebra": s.algebra, "backend": backend,
            "control": "hold" if run.policy.kind == "table" else s.control,
            "controller": run.policy.name, "gravity": list(gravity),
            "damping": model.damping.tolist(),
            "energy_floor": _energy_floor(run, gravity) if len(run.q0) else 0.0,
            **timing}
    if run.system.contact is not None:
        g = s.contact
        p = run.params["contact"]
        meta["contact"] = {"points": len(run.system.contact.points), "mu": float(p["mu"]),
                           "stiffness": float(p["k"]), "tangential_stiffness": float(p["kt"]),
                           "dissipation": float(p["c"]), "height": float(g.height),
                           "normal": [float(x) for x in np.asarray(p["normal"])],
                           "labels": list(run.system.contact.points.labels)}
    if s.joint_limits is not None:
        meta["joint_limits"] = {"frequency": s.joint_limits.frequency,
                                "damping_ratio": s.joint_limits.damping_ratio}
    if run.system.friction is not None:
        meta["joint_friction"] = s.joint_friction.model
    if s.external is not None:
        meta["external"] = getattr(s.external, "__name__", type(s.external).__name__)
    return Trajectory(
        t=np.arange(q.shape[-2]) * run.dt * run.record_every, q=q, qd=qd,
        qdd=public(samples[2]), tau=public(samples[3]), kinetic=kinetic, potential=potential,
        elastic=channels[..., 0], work_in=channels[..., 1], work_passive=channels[..., 2],
        model=model, meta=meta, contact_force=forces)


def _energy_floor(run, gravity):
    """A thousandth of the robot's weight times its extent at the first initial state (the
    spread of its link origins and contact points, at least MIN_EXTENT): the smallest energy
    scale an energy error is measured against, so that a robot that hardly moves (or starts at
    rest) does not divide by almost nothing."""
    model = run.model
    T = np.asarray(forward_kinematics(model, run.q0[0]))
    points = [T[:, :3, 3]]
    if run.system.contact is not None:
        points.append(run.system.contact.positions(np, run.params["contact"], T[None])[0][0])
    points = np.concatenate(points)
    extent = np.linalg.norm(points - points.mean(axis=0), axis=-1).max() * 2 if len(points) \
        else 0.0
    g = max(np.linalg.norm(gravity), 9.81)
    return 1e-3 * g * model.total_mass * max(float(extent), MIN_EXTENT)


def _energies(model, q, qd, gravity, assembly=None, block=8192):
    """Kinetic and potential energy of every sample, in numpy blocks (bounded memory); an
    assembly's own (``_assembly``)."""
    if assembly is not None:
        with np.errstate(all="ignore"):
            return (np.asarray(assembly.kinetic_energy(q, qd)),
                    np.asarray(assembly.potential_energy(q, gravity=gravity)))
    shape = q.shape[:-1]
    qf, qdf = q.reshape(-1, model.nq), qd.reshape(-1, model.nv)
    T, V = np.empty(len(qf)), np.empty(len(qf))
    for s in range(0, len(qf), block):
        with np.errstate(all="ignore"):
            T[s:s + block] = kinetic_energy(model, qf[s:s + block], qdf[s:s + block])
            V[s:s + block] = potential_energy(model, qf[s:s + block], gravity=gravity)
    return T.reshape(shape), V.reshape(shape)


def _energy_failure(run, traj):
    """The energy check: (failure, trajectory cut before it) when, beyond ``energy_limit`` of
    the energy exchanged so far, the energy balance breaks (energy no force accounts for) or the
    passive forces produce energy (negative dissipation: springs too stiff for the step give
    out more than they took in); else (None, traj)."""
    limit = run.settings.energy_limit
    if limit is None or traj.n_samples < 2:
        return None, traj
    scale = np.maximum.accumulate(np.maximum(traj.kinetic, np.abs(traj.work_in)), axis=-1)
    spread = np.maximum.accumulate(traj.potential, axis=-1) \
        - np.minimum.accumulate(traj.potential, axis=-1)
    scale = np.maximum(np.maximum(scale, spread), traj.meta.get("energy_floor", 0.0))
    scale = np.maximum(scale, np.finfo(float).tiny)
    unaccounted = np.abs(traj.energy_error())
    produced = -traj.dissipated()
    found = None
    for amount, what in ((unaccounted, "the energy balance broke: {err:.3g} J that no force "
                                       "accounts for"),
                         (produced, "the contact, limit or friction springs gave out {err:.3g} J "
                                    "more than they took in (the step is too long for their "
                                    "stiffness)")):
        bad = (amount > limit * scale).reshape(-1, traj.n_samples)
        if not bad.any():
            continue
        first = np.where(bad.any(axis=1), bad.argmax(axis=1), traj.n_samples)
        rollout = int(np.argmin(first))
        sample = int(first[rollout])
        if found is None or sample < found[0]:
            err = float(amount.reshape(-1, traj.n_samples)[rollout, sample])
            ref = float(scale.reshape(-1, traj.n_samples)[rollout, sample])
            found = (sample, rollout, what.format(err=err), err / ref, ref)
    if found is None:
        return None, traj
    sample, rollout, what, ratio, ref = found
    where = tuple(int(i) for i in np.unravel_index(rollout, run.batch)) if run.batch else ()
    reason = (f"{what}, {ratio:.3g} of the {ref:.3g} J the motion exchanges (the simulation "
              f"diverged; a smaller dt or a stabler integrator helps; energy_limit={limit:g})")
    keep = sample  # the samples before the one where it broke
    cut = Trajectory(traj.t[:keep], *(getattr(traj, n)[..., :keep, :] for n in
                                      ("q", "qd", "qdd", "tau")),
                     *(getattr(traj, n)[..., :keep] for n in ("kinetic", "potential", "elastic",
                                                              "work_in", "work_passive")),
                     model=traj.model, meta=traj.meta,
                     contact_force=None if traj.contact_force is None
                     else traj.contact_force[..., :keep, :, :])
    return (reason, sample * run.record_every, where), cut


# ============================================================================================
# rollout: a differentiable function
# ============================================================================================
def rollout(model, q0, qd0, controller, steps, dt, *, settings=None, **options):
    """The states of a simulation as a pure JAX function, to differentiate or ``vmap``:
    returns (q (steps + 1, ..., nq), qd (steps + 1, ..., nv)), the states at t = 0, dt, ...,
    steps dt, from the same step as ``simulate`` (same settings: contact, joint limits, friction,
    external wrenches). q0, qd0 (..., nq), (..., nv) may be JAX arrays being traced (for
    ``jax.grad``), and so may the numbers of ``settings.contact`` and the controller's gains;
    ``steps`` is a Python int. Nothing is checked after the start (no SimulationError: a
    diverging rollout returns non-finite values) and nothing is recorded but the states. Runs
    in the caller's precision: enable ``jax_enable_x64`` for float64."""
    import jax
    import jax.numpy as jnp

    settings = Settings.make(settings, **options)
    steps = int(steps)
    if steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps}")
    q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
    _backend.check_last_dim(q0, model.nq, "q0", "configuration, nq")
    _backend.check_last_dim(qd0, model.nv, "qd0", "velocity, nv")
    batch = tuple(np.broadcast_shapes(q0.shape[:-1], qd0.shape[:-1]))
    N = int(np.prod(batch, dtype=int))
    q = jnp.broadcast_to(q0, batch + (model.nq,)).reshape(N, model.nq)
    qd = jnp.broadcast_to(qd0, batch + (model.nv,)).reshape(N, model.nv)
    policy = Policy(controller, model, steps)
    system = System(model, settings)
    q_concrete = jax.lax.stop_gradient(q)
    run = _Run(model, system, settings, policy, np.zeros((0, model.nq)), None, batch, dt, steps)
    params = {"policy": {k: jnp.asarray(v) for k, v in policy.params.items()},
              "system": {"gravity": jnp.asarray(system.gravity)}}
    if system.contact is not None:
        params["system"]["contact"] = system.contact.params(jnp)
    for name, part in (("limits", system.limits), ("friction", system.friction)):
        if part is not None:
            params["system"][name] = _tree_map(jnp.asarray, part.params(model, q_concrete))
    step_fn = make_step(run, jnp, dt)

    def body(carry, k):
        q, qd, hybrid, energy = carry
        carry, _, _ = step_fn(params, k, q, qd, hybrid, energy)
        return carry, (carry[0], carry[1])

    hybrid = system.initial_hybrid(jnp, params["system"], q)
    carry = (q, qd, hybrid, jnp.zeros((N, 2), dtype=q.dtype))
    _, (qs, qds) = jax.lax.scan(body, carry, jnp.arange(steps))
    qs = jnp.concatenate([q[None], qs]).reshape((steps + 1,) + batch + (model.nq,))
    qds = jnp.concatenate([qd[None], qds]).reshape((steps + 1,) + batch + (model.nv,))
    return qs, qds
