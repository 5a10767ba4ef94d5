"""The numpy backend's loop: a Python loop over steps, every step checked as it happens."""
import time as _time

import numpy as np

from .. import interrupts
from .failures import Interrupted, bad_flags, flagged, raised
from .record import empty_samples
from .run import all_params
from .step import initial_hybrid, make_step

#: seconds between two calls of the progress callback on the numpy backend (JAX: every chunk)
PROGRESS_PERIOD = 0.1


def run_numpy(run, progress):
    """The rollouts of ``run`` (a ``run.Run``) step by step: (samples (T, N, ...), failure or
    ``Interrupted`` or None, timing {"wall_time", "compile_time"} (s)). ``progress(done,
    total)`` (steps), or None, is called every ``PROGRESS_PERIOD`` s."""
    step_fn = make_step(run, np, run.dt)
    params = all_params(run, np)
    n_steps, record_every = run.n_steps, run.record_every
    q, qd = run.q0, run.qd0
    hybrid = initial_hybrid(run, np, params["system"], q)
    energy = np.zeros((len(q), 2))
    samples = []
    failure = None
    t_start = last_report = _time.perf_counter()
    k = 0
    try:
        with interrupts.held():
            for k in range(n_steps + 1):
                interrupts.stop_if_noted()  # Ctrl-C: before step k, k steps kept
                try:
                    with np.errstate(all="ignore"):
                        (q1, qd1, hybrid1, energy1), sample, tau_ok = step_fn(params, k, q, qd,
                                                                             hybrid, energy)
                except Exception as e:  # the controller's, the external wrenches', the dynamics'
                    failure = raised(e, k)
                    break
                qdd, tau = sample[2], sample[3]
                code = bad_flags(np, tau_ok, qdd, q1, qd1, run.settings.divergence_limit)
                if k == n_steps:  # the last sample: only its joint forces and acceleration count
                    code = bad_flags(np, np.all(np.isfinite(tau), axis=-1), qdd, qdd, qdd, None)
                failure = flagged(code, k, run.batch)
                if failure is not None:
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
        failure = Interrupted(k)
    wall = _time.perf_counter() - t_start
    stacked = tuple(np.stack(a) for a in zip(*samples)) if samples else empty_samples(run)
    return stacked, failure, {"wall_time": wall, "compile_time": 0.0}
