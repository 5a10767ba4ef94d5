"""The JAX backend's loop: the whole rollout (controller, integrator, checks) one compiled XLA
loop, cached in the process, run in chunks of samples sized by ``pacing`` (so Ctrl-C stops it
between two chunks); and ``x64``, float64 for the JAX computations of a simulation."""
import contextlib
import time as _time
from collections import OrderedDict

import numpy as np

from .. import interrupts
from .failures import Interrupted, bad_flags, finish, first_failure
from .pacing import Paced, chunk_length
from .policy import BadOutput
from .record import empty_samples, sample_width
from .run import all_params, tree_map
from .step import initial_hybrid, make_step
from .system import ExternalWrenchError

_COMPILED = OrderedDict()
_COMPILED_MAX = 32


def x64():
    """float64 for the JAX computations inside, without changing the user's global setting."""
    import jax

    if getattr(jax.config, "jax_enable_x64", False):
        return contextlib.nullcontext()
    manager = getattr(jax, "enable_x64", None)
    if manager is None:  # older JAX
        from jax.experimental import enable_x64 as manager
    return manager(True)


def run_jax(run, progress):
    """The rollouts of ``run`` (a ``run.Run``) as compiled XLA chunks: (samples (T, N, ...),
    failure or ``Interrupted`` or None, timing {"wall_time", "compile_time"} (s)).
    ``progress(done, total)`` (steps), or None, is called after every chunk."""
    import jax
    import jax.numpy as jnp

    n_steps, total = run.n_steps, run.n_records + 1  # samples, the final state included
    N = len(run.q0)
    width = sample_width(run.model, run.points, run.settings.record_contact_forces)
    chunk = chunk_length(N, width)
    s = run.settings
    with x64():
        params = tree_map(jnp.asarray, all_params(run, np))
        key = (run.system.key, s.integrator, run.policy.key, run.record_every, chunk,
               s.divergence_limit, run.batch, s.control, s.record_contact_forces,
               tuple((k, v.shape) for k, v in sorted(params["policy"].items())))
        hybrid = initial_hybrid(run, jnp, params["system"], jnp.asarray(run.q0))
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
                return empty_samples(run), (str(e), 0, ()), \
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
            with interrupts.held():
                while done < total:
                    n = paced.take(total - done)
                    new_carry, out = compiled(carry, params, dt_arg, jnp.asarray(n, jnp.int64))
                    outputs.append(tuple(np.asarray(o[:n]) for o in out))
                    paced.took(n)
                    carry = new_carry
                    done += n
                    if progress is not None:
                        progress(min(done * run.record_every, n_steps), n_steps)
                    if done < total and first_failure(np.asarray(carry[5]), np.asarray(carry[6]),
                                                       n_steps) is not None:
                        break  # a rollout failed: stop here, keep what came before
                    interrupts.stop_if_noted()  # Ctrl-C: between two calls, samples kept
        except KeyboardInterrupt:
            # the samples kept say where it stopped (Ctrl-C may land between two lines)
            interrupted = Interrupted(sum(len(o[0]) for o in outputs) * run.record_every)
        samples = tuple(np.concatenate([o[i] for o in outputs]) for i in range(len(outputs[0]))) \
            if outputs else empty_samples(run)
        wall = _time.perf_counter() - t0
        bad_step, bad_code = np.asarray(carry[5]), np.asarray(carry[6])
    timing = {"wall_time": wall, "compile_time": compile_time}
    if interrupted is not None:
        return samples, interrupted, timing
    return (*finish(run, samples, bad_step, bad_code), timing)


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
            code = bad_flags(jnp, tau_ok, sample[2], q1, qd1, limit)
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
