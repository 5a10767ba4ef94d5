"""The public entries of the simulation: ``simulate``, the rollout loop on a backend (native
machine code, one compiled JAX loop run in chunks, or a numpy loop), and ``rollout``, the same
step as a pure JAX function to differentiate. They tie together the modules that do the work:

    inputs       the checks of the arguments and of the run's size
    stability    the largest stable step of every spring, and the warning
    backend      which backend runs it
    step         one step, for every backend
    loop_numpy, loop_jax, native   the loop on each backend (pacing: the size of each call)
    failures     failure flags, the first failure, the samples kept before it
    energy       the energies of the samples and the energy-balance check
    record       the samples' layout and the Trajectory made of them

Failures never lose the run: a controller returning the wrong shape or a non-finite torque, or
raising; a state that becomes non-finite, exceeds ``divergence_limit`` or breaks the energy
balance beyond ``energy_limit``: each raises ``SimulationError`` naming the step and time, with
``.trajectory`` holding every sample before it. Ctrl-C raises ``SimulationInterrupted`` (a
``KeyboardInterrupt``) carrying the samples computed so far.
"""
import numpy as np

from .. import _backend
from . import inputs
from .backend import choose_backend
from .energy import energy_failure
from .errors import SimulationError, SimulationInterrupted
from .failures import Interrupted
from .loop_jax import run_jax
from .loop_numpy import run_numpy
from .policy import Policy
from .record import empty_samples, make_trajectory
from .run import Run, tree_map
from .settings import Settings
from .stability import warn_if_unstable
from .step import initial_hybrid, make_step
from .system import System


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
        (``integrator="rk4"``, ``contact=GroundContact(mu=0.8)``, ``joint_limits=True`` (springs)
        or ``joint_limits=RigidLimits()`` (constraints), ``external=f``, ``progress=True``, ...),
        overriding ``settings``.

    The run takes ceil(t_final / (dt record_every)) record_every steps (t_final rounded up to
    whole recorded intervals). Returns a ``Trajectory``; raises ``SimulationError`` (carrying
    the trajectory so far) if the controller or the dynamics fail on the way,
    ``SimulationInterrupted`` on Ctrl-C, ``ValueError`` for bad arguments (before anything
    runs). Warns (``UserWarning``) when dt is too large for the stiffness of the contact or
    limit springs, naming the largest stable step.
    """
    settings = Settings.make(settings, **options)
    assembly, model = inputs.split_assembly(model)
    dt, t_final, n_records, n_steps = inputs.steps(model, dt, t_final, settings.record_every)
    q0, qd0, batch = inputs.initial_state(model, q0, qd0)
    policy = Policy(controller, model, n_steps)
    inputs.table_batch(policy, batch)
    system = System(model, settings, assembly, dt)
    N = q0.shape[0]
    inputs.run_size(model, system, settings, N, n_records, n_steps)
    run = Run(model, system, settings, policy, q0, qd0, batch, dt, n_records)
    if N == 0:  # an empty batch: the sample times, and no rollout
        return make_trajectory(run, empty_samples(run, n_records + 1), "numpy",
                               {"wall_time": 0.0, "compile_time": 0.0})
    warn_if_unstable(run)
    inputs.check_constraints(model, q0, qd0)
    inputs.check_penetration(run)
    chosen = choose_backend(settings.backend, run)
    progress = _progress(settings.progress, n_steps, dt)
    try:
        samples, failure, timing = _runner(chosen)(run, progress)
    finally:
        if hasattr(progress, "close"):
            progress.close()
    if isinstance(failure, Interrupted):
        traj = make_trajectory(run, samples, chosen, timing)
        raise SimulationInterrupted(failure.step, failure.step * dt, traj) from None
    traj = make_trajectory(run, samples, chosen, timing)
    if failure is None:
        failure, traj = energy_failure(run, traj)
    if failure is not None:
        reason, step, rollout, *cause = failure
        raise SimulationError(reason, step, step * dt, rollout, traj) from (cause or [None])[0]
    return traj


def _runner(backend):
    """The loop of ``backend``: run(run, progress) -> (samples, failure, timing); the native
    one imported when it runs (it brings the machine-code machinery)."""
    if backend == "native":
        from .native import run_native

        return run_native
    return run_jax if backend == "jax" else run_numpy


def _progress(progress, n_steps, dt):
    """The progress callback: a ``ProgressBar`` for ``progress=True``, the user's callable, or
    None."""
    if progress is True:
        from .progress import ProgressBar

        return ProgressBar(n_steps, dt)
    return progress or None


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
    system = System(model, settings, dt=dt)
    q_concrete = jax.lax.stop_gradient(q)
    run = Run(model, system, settings, policy, np.zeros((0, model.nq)), None, batch, dt, steps)
    params = {"policy": {k: jnp.asarray(v) for k, v in policy.params.items()},
              "system": {"gravity": jnp.asarray(system.gravity)}}
    if system.contact is not None:
        params["system"]["contact"] = system.contact.params(jnp)
    for name, part in system.parts:
        params["system"][name] = tree_map(jnp.asarray, part.params(model, q_concrete))
    step_fn = make_step(run, jnp, dt)

    def body(carry, k):
        q, qd, hybrid, energy = carry
        carry, _, _ = step_fn(params, k, q, qd, hybrid, energy)
        return carry, (carry[0], carry[1])

    hybrid = initial_hybrid(run, jnp, params["system"], q)
    carry = (q, qd, hybrid, jnp.zeros((N, 2), dtype=q.dtype))
    _, (qs, qds) = jax.lax.scan(body, carry, jnp.arange(steps))
    qs = jnp.concatenate([q[None], qs]).reshape((steps + 1,) + batch + (model.nq,))
    qds = jnp.concatenate([qd[None], qds]).reshape((steps + 1,) + batch + (model.nv,))
    return qs, qds
