"""Rollouts in memory: the arrays of many rollouts, which of them failed and why."""
import numpy as np

from .job import ARRAYS


class RolloutResult:
    """N rollouts on the common time grid ``t`` (T,) in seconds: ``q`` (N, T, nq), ``qd``,
    ``qdd``, ``tau`` (N, T, nv), ``kinetic``, ``potential`` (N, T) in joules, as
    ``sd.Trajectory`` has them. A failed rollout's rows are NaN from its failing sample on.

    Per rollout (N,): ``index`` (the rollout's number in the job), ``seed`` (uint64, see
    ``screwdyn.rollouts.rollout_seeds``), ``ok``, ``error`` (None or the failure's message),
    ``failed_step`` (-1 when ok), ``failed_time`` (s, NaN when ok), ``n_samples`` (samples
    before the failure, T when ok), ``q0`` (N, nq) and ``qd0`` (N, nv) the initial state.
    ``meta``: how the rollouts were made (model hash, versions, integrator, dt, ...)."""

    def __init__(self, t, arrays, index, seed, ok, error, failed_step, failed_time, n_samples,
                 q0, qd0, meta=None, model=None):
        self.t = t
        self.q, self.qd, self.qdd, self.tau = (arrays[k] for k in ("q", "qd", "qdd", "tau"))
        self.kinetic, self.potential = arrays["kinetic"], arrays["potential"]
        self.index, self.seed, self.ok, self.error = index, seed, ok, error
        self.failed_step, self.failed_time, self.n_samples = failed_step, failed_time, n_samples
        self.q0, self.qd0 = q0, qd0
        self.meta, self.model = dict(meta or {}), model

    @classmethod
    def empty(cls, index, T, nq, nv, t, meta=None, model=None):
        """NaN-filled arrays for the rollouts ``index`` (filled chunk by chunk with ``fill``)."""
        N = len(index)
        widths = dict(q=(nq,), qd=(nv,), qdd=(nv,), tau=(nv,), kinetic=(), potential=())
        arrays = {k: np.full((N, T) + widths[k], np.nan) for k in ARRAYS}
        return cls(t, arrays, np.asarray(index, dtype=np.int64), np.zeros(N, np.uint64),
                   np.zeros(N, bool), [None] * N, np.full(N, -1, np.int64), np.full(N, np.nan),
                   np.zeros(N, np.int64), np.full((N, nq), np.nan), np.full((N, nv), np.nan),
                   meta, model)

    def fill(self, rows, chunk):
        """Copy a chunk's rollouts (a ``ChunkResult``, or its fields in a dict) into ``rows``."""
        get = chunk.get if isinstance(chunk, dict) else chunk.__getattribute__
        arrays = get("arrays")
        for k in ARRAYS:
            getattr(self, k)[rows] = arrays[k]
        self.seed[rows], self.ok[rows] = get("seed"), get("ok")
        self.failed_step[rows], self.failed_time[rows] = get("failed_step"), get("failed_time")
        self.n_samples[rows], self.q0[rows], self.qd0[rows] = (get("n_samples"), get("q0"),
                                                                get("qd0"))
        for i, e in zip(range(rows.start, rows.stop), get("error"), strict=True):
            self.error[i] = e

    def __len__(self):
        return len(self.index)

    @property
    def failed(self):
        """Indices (into this result) of the rollouts that failed."""
        return np.flatnonzero(~self.ok)

    def trajectory(self, rows=slice(None)):
        """The rollouts ``rows`` as one batch ``sd.Trajectory`` (energy drift, plots, saving);
        failed rollouts keep their NaN rows."""
        import screwdyn as sd

        return sd.Trajectory(self.t, *(getattr(self, k)[rows] for k in ARRAYS),
                             model=self.model, meta=self.meta)

    def __repr__(self):
        failed = len(self.failed)
        return (f"RolloutResult({self.meta.get('model', '?')!r}, {len(self)} rollouts of "
                f"{len(self.t)} samples, {failed} failed)")
