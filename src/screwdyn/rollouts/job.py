"""A rollout job and the work of one chunk: what every engine runs, in whichever process.

Rollout i belongs to chunk ``i // chunk_size`` and sits in lane ``i % chunk_size`` of it, and
every chunk runs as one ``sd.simulate`` batch of exactly ``chunk_size`` lanes (a short last
chunk and the lanes of failed rollouts are padded with copies of a live lane). So a rollout is
always computed by the same compiled program, in the same lane, whatever the engine, the number
of workers or the order the chunks run in: results are bit-identical across engines. (A JAX
batch of another width is another program: XLA may then round differently in the last bit, and
does, measured; this is why the chunk size is fixed and recorded with a dataset.)

Failures are per rollout. ``sd.simulate`` stops a batch at the first failing rollout; the chunk
then records that rollout's error and its samples before the failure, pads its lane, and runs
again, until every rollout has either finished or failed. A controller that raises (numpy
backend) does not say which rollout made it raise: the chunk's live lanes are then split in
halves, run apart (the other lanes padded), until each raising rollout is alone. Lanes never
influence each other, so what finishes in any of these runs is what the first run would have
given, bit for bit.
"""
import dataclasses
import math
import time
from typing import Optional

import numpy as np

ENGINES = ("serial", "processes", "ray")

ARRAYS = ("q", "qd", "qdd", "tau", "kinetic", "potential")


class RolloutError(RuntimeError):
    """A job that could not go on: every rollout of a chunk failed the same way (a broken
    controller), or a chunk kept killing its workers. ``result``: the rollouts finished before
    (a ``RolloutResult``, or None when they were written to a dataset, which keeps them)."""

    def __init__(self, message, result=None):
        super().__init__(message)
        self.result = result


@dataclasses.dataclass(frozen=True)
class Job:
    """Everything a worker needs to run any chunk; sent to each worker once."""

    model: object
    controller: object  # None, a callable, or a torque table shared by all rollouts
    t_final: float
    dt: float
    simulate: tuple  # sorted (keyword, value) pairs for sd.simulate
    n: int
    chunk_size: int
    seed: int
    sampler: object = None  # sampler(rng) -> (q0, qd0); None: the states travel with the chunks
    per_rollout_table: bool = False  # the controller is a torque table per rollout (in states)
    out: Optional[str] = None  # the dataset folder, written by the workers
    uid: str = ""  # the run (a worker keeps its jobs by it)
    jax_cache_dir: Optional[str] = None  # the driver's persistent JAX compilation cache
    dataset_meta: tuple = ()  # (json text,) of the dataset's metadata, for the shards' footers

    @property
    def n_chunks(self):
        return math.ceil(self.n / self.chunk_size)

    def rollout_range(self, chunk):
        """(first, stop) rollout indices of a chunk."""
        start = chunk * self.chunk_size
        return start, min(self.n, start + self.chunk_size)

    def chunk_length(self, chunk):
        """How many rollouts a chunk holds (chunk_size, fewer in the last)."""
        start, stop = self.rollout_range(chunk)
        return stop - start

    @property
    def record_every(self):
        return dict(self.simulate)["record_every"]

    @property
    def n_samples(self):
        """Samples per finished rollout (the initial state included), as sd.simulate takes."""
        every = self.record_every
        return max(1, math.ceil(self.t_final / (self.dt * every) - 1e-9)) + 1

    @property
    def steps(self):
        """Integration steps per finished rollout."""
        return (self.n_samples - 1) * self.record_every

    def times(self):
        """The sample times (T,) in seconds, as ``sd.Trajectory.t`` has them."""
        return sample_times(self.n_samples, self.dt, self.record_every)


def sample_times(n_samples, dt, record_every):
    """Times of the samples: k dt record_every, the formula sd.simulate uses (same bits)."""
    return np.arange(n_samples) * dt * record_every


def rollout_seeds(seed, start, stop):
    """The seed of each rollout in [start, stop): the first 64-bit word of
    ``numpy.random.SeedSequence(seed, spawn_key=(i,))``, independent streams that depend on the
    job's seed and the rollout's index only (``numpy.random.default_rng(s)`` reproduces one)."""
    return np.array([np.random.SeedSequence(seed, spawn_key=(i,)).generate_state(1, np.uint64)[0]
                     for i in range(start, stop)], dtype=np.uint64)


@dataclasses.dataclass
class ChunkResult:
    """The rollouts [start, stop) of one chunk. Arrays are (n, T, ...) with NaN from a failed
    rollout's failing sample on; ``error`` holds None or the failure's message."""

    chunk: int
    start: int
    stop: int
    seed: np.ndarray
    ok: np.ndarray
    error: list
    failed_step: np.ndarray
    failed_time: np.ndarray
    n_samples: np.ndarray
    q0: np.ndarray
    qd0: np.ndarray
    arrays: dict
    backend: str
    runs: int  # sd.simulate calls it took (1 when nothing failed)
    wall_time: float


def run_chunk(job, chunk, states=None):
    """Simulate chunk ``chunk`` of ``job``: ``states`` is (q0, qd0, tables) for its rollouts
    (tables None unless the controller is a table per rollout), or None to draw them from
    ``job.sampler`` with the rollouts' seeds. Returns a ``ChunkResult``."""
    t0 = time.perf_counter()
    start, stop = job.rollout_range(chunk)
    seeds = rollout_seeds(job.seed, start, stop)
    if states is None:
        q0, qd0 = draw_states(job, seeds, start)
        tables = None
    else:
        q0, qd0, tables = states
    runner = _Lanes(job, q0, qd0, tables)
    outcome = runner.run_all()
    n, T = stop - start, job.n_samples
    model = job.model
    widths = dict(q=(model.nq,), qd=(model.nv,), qdd=(model.nv,), tau=(model.nv,),
                  kinetic=(), potential=())
    arrays = {name: np.full((n, T) + widths[name], np.nan) for name in ARRAYS}
    ok = np.ones(n, dtype=bool)
    error, failed_step = [None] * n, np.full(n, -1, dtype=np.int64)
    failed_time, n_samples = np.full(n, np.nan), np.full(n, T, dtype=np.int64)
    for lane, (samples, failure) in outcome.items():
        count = len(samples["q"])
        for name in ARRAYS:
            arrays[name][lane, :count] = samples[name]
        if failure is not None:
            ok[lane] = False
            error[lane], failed_step[lane], failed_time[lane] = failure
            n_samples[lane] = count
    ways = {(e, s) for e, s in zip(error, failed_step, strict=True)}
    if n > 1 and not ok.any() and len(ways) == 1:
        raise RolloutError(f"every rollout of chunk {chunk} (rollouts {start} to {stop - 1}) "
                           f"failed at step {failed_step[0]}: {error[0]}; the controller or the "
                           "settings are broken, not one rollout")
    return ChunkResult(chunk, start, stop, seeds, ok, error, failed_step, failed_time, n_samples,
                       q0, qd0, arrays, runner.backend, runner.runs, time.perf_counter() - t0)


def draw_states(job, seeds, start):
    """The initial states (n, nq), (n, nv) the job's sampler draws for rollouts from ``start``
    with ``seeds``."""
    model = job.model
    q0, qd0 = np.empty((len(seeds), model.nq)), np.empty((len(seeds), model.nv))
    for lane, s in enumerate(seeds):
        drawn = job.sampler(np.random.default_rng(int(s)))
        try:
            q, qd = drawn
            q, qd = np.asarray(q, dtype=float), np.zeros(model.nv) if qd is None else \
                np.asarray(qd, dtype=float)
            if q.shape != (model.nq,) or qd.shape != (model.nv,):
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"the state sampler {job.sampler!r} must return (q0 ({model.nq},), "
                             f"qd0 ({model.nv},) or None); for rollout {start + lane} (seed {s}) "
                             f"it returned {_shape_text(drawn)}") from None
        q0[lane], qd0[lane] = q, qd
    return q0, qd0


def _shape_text(x):
    if isinstance(x, tuple):
        return "(" + ", ".join(_shape_text(v) for v in x) + ")"
    return f"shape {np.shape(x)}" if x is not None else "None"


class _Lanes:
    """Runs a chunk's rollouts as full-width batches until each has finished or failed."""

    def __init__(self, job, q0, qd0, tables):
        self.job, self.q0, self.qd0, self.tables = job, q0, qd0, tables
        self.runs, self.backend = 0, None

    def run_all(self):
        """{lane: (samples {name: (count, ...)}, None or (error, step, time))}."""
        import screwdyn as sd

        done = {}
        todo = [list(range(len(self.q0)))]
        while todo:
            live = todo.pop()
            try:
                traj = self._simulate(live)
            except sd.SimulationError as e:
                if e.trajectory is not None:
                    self.backend = e.trajectory.meta.get("backend")
                failed = self._failed_lane(e, live)
                if failed is None:  # the controller raised: which rollout is not known
                    if e.__cause__ is None:  # a wrong shape: every rollout's, not one's
                        raise
                    if len(live) > 1:
                        half = len(live) // 2
                        todo += [live[half:], live[:half]]
                        continue
                    failed = live[0]
                done[failed] = (self._samples(e.trajectory, failed),
                                (e.reason, int(e.step), float(e.time)))
                rest = [lane for lane in live if lane != failed]
                if rest:
                    todo.append(rest)
                continue
            for lane in live:
                done[lane] = (self._samples(traj, lane), None)
        return done

    def _simulate(self, live):
        """One sd.simulate of the full chunk width: lane j of the chunk in batch row j, the
        lanes not in ``live`` (and past the chunk's end) copies of ``live[0]``."""
        import screwdyn as sd

        job = self.job
        rows = np.full(job.chunk_size, live[0])
        rows[live] = live
        controller = job.controller if self.tables is None else self.tables[rows]
        self.runs += 1
        traj = sd.simulate(job.model, self.q0[rows], self.qd0[rows], controller, job.t_final,
                           job.dt, **dict(job.simulate))
        self.backend = traj.meta.get("backend")
        return traj

    @staticmethod
    def _failed_lane(error, live):
        """The lane whose rollout made the batch fail (a pad stands for the lane it copies)."""
        if not error.rollout:
            return None
        row = int(error.rollout[0])
        return row if row in live else live[0]

    @staticmethod
    def _samples(traj, lane):
        return {name: np.array(getattr(traj, name)[lane]) for name in ARRAYS}
