"""Failure bookkeeping, the same for every backend: what counts as a failed step (``bad_flags``,
``REASONS``), which failure came first (``first_failure``), the samples kept before it
(``cut_at_failure``), its description (``failure``), and a Ctrl-C (``Interrupted``).

A failure is a tuple (reason, step, rollout[, cause]): ``reason`` the sentence
``SimulationError`` carries, ``step`` the failing step, ``rollout`` the batch index of the
first failing rollout (() for one rollout), ``cause`` the exception raised, when one was.
The compiled loops (JAX, native) flag each rollout's first failing step and its code, per
rollout: bad_step (N,) (-1: none) and bad_code (N,) (a key of ``REASONS``).
"""
import numpy as np

from .policy import BadOutput, ControllerFailed
from .system import ExternalWrenchError

REASONS = {1: "the controller returned a non-finite joint force",
           2: "the state or the acceleration became non-finite (the simulation diverged)",
           3: "the velocity exceeded divergence_limit (the simulation diverged)"}


class Interrupted:
    """Ctrl-C at ``step``: the loop stopped there, its samples kept."""

    def __init__(self, step):
        self.step = step


def bad_flags(xp, tau_ok, qdd, q1, qd1, limit):
    """Per rollout (N,): 0 fine, else the REASONS code of what went wrong in this step, from
    whether the joint forces were finite ``tau_ok`` (N,), the acceleration qdd (N, nv), the new
    state q1 (N, nq), qd1 (N, nv) and ``divergence_limit`` (rad/s or m/s, or None)."""
    def finite(a):
        return xp.all(xp.isfinite(a), axis=-1)

    code = xp.where(finite(qdd) & finite(q1) & finite(qd1), 0, 2)
    if limit is not None:
        code = xp.where((code == 0) & (xp.max(xp.abs(qd1), axis=-1) > limit), 3, code)
    return xp.where(tau_ok, code, 1)


def flagged(code, step, batch):
    """The failure of the first rollout whose ``bad_flags`` code (N,) is not 0 at ``step``, or
    None."""
    if not np.any(code):
        return None
    first = int(np.flatnonzero(code)[0])
    rollout = np.unravel_index(first, batch) if batch else ()
    return REASONS[int(code[first])], step, tuple(int(i) for i in rollout)


def raised(e, step):
    """The failure of a step that raised ``e`` (an ``Exception``): the controller's or the
    external wrench function's wrong output, the controller's own exception (its cause
    attached), or the dynamics'."""
    if isinstance(e, BadOutput):
        return str(e), step, ()
    if isinstance(e, ControllerFailed):  # reported with the samples so far, cause attached
        return f"the controller raised {type(e.cause).__name__}: {e.cause}", step, (), e.cause
    if isinstance(e, ExternalWrenchError):
        return str(e), step, ()
    return f"the dynamics raised {type(e).__name__}: {e}", step, (), e


def first_failure(bad_step, bad_code, n_steps):
    """(step, flat rollout index, code) of the earliest failure before n_steps, or None."""
    steps = np.where((bad_step >= 0) & (bad_step < n_steps), bad_step, np.iinfo(np.int64).max)
    first = int(np.argmin(steps))
    if steps[first] == np.iinfo(np.int64).max:
        return None
    return int(steps[first]), first, int(bad_code[first])


def _last_sample_bad(samples):
    """(flat rollout index, code) of the first rollout whose last sample has non-finite joint
    forces or acceleration (the final sample takes no step after it), or None."""
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
    failure = first_failure(bad_step, bad_code, n_steps)
    if failure is None:
        return len(samples[0]) if _last_sample_bad(samples) is None else len(samples[0]) - 1
    return -(-failure[0] // record_every)  # ceil: samples at steps 0, r, 2r, ... < step


def cut_at_failure(samples, bad_step, bad_code, n_steps, record_every):
    """The samples (T, N, ...) taken before the first failure."""
    keep = _kept(samples, bad_step, bad_code, n_steps, record_every)
    return tuple(a[:keep] for a in samples)


def failure(samples, bad_step, bad_code, batch, n_steps, record_every):
    """The first failure of a compiled loop's run (flags and samples), or None."""
    first = first_failure(bad_step, bad_code, n_steps)
    if first is None:
        last = _last_sample_bad(samples)
        if last is None:
            return None
        index, code = last
        step = n_steps
    else:
        step, index, code = first
    rollout = tuple(int(i) for i in np.unravel_index(index, batch)) if batch else ()
    return REASONS[code], step, rollout


def finish(run, samples, bad_step, bad_code):
    """(samples cut at the first failure, the failure or None) of a compiled loop's run."""
    return (cut_at_failure(samples, bad_step, bad_code, run.n_steps, run.record_every),
            failure(samples, bad_step, bad_code, run.batch, run.n_steps, run.record_every))
