"""``sd.rollouts``: many rollouts of one model, on one core, all cores or a Ray cluster, the same
bits everywhere, kept in memory or streamed to a dataset folder."""
import contextlib
import json
import math
import os
import sys
import time
import uuid

import numpy as np

from .dataset import FORMAT, Dataset, DatasetWriter, coordinate_columns, write_shard
from .engines import Engine, ProcessEngine, SerialEngine, States, check_workers
from .identity import content_hash, describe
from .job import ENGINES, Job, RolloutError, draw_states, rollout_seeds
from .result import RolloutResult
from .worker import run_marker

SEED_RULE = "numpy.random.SeedSequence(seed, spawn_key=(rollout,)).generate_state(1, uint64)[0]"


def rollouts(model, q0, qd0=None, controller=None, t_final=1.0, dt=1e-3, *, n=None, seed=0,
             engine="serial", workers=None, chunk_size=256, out=None, address=None,
             integrator="rk4", algebra="spatial", backend="auto", control="continuous",
             gravity=None, record_every=1, divergence_limit=1e6, progress=None,
             max_attempts=3):
    """Simulate many rollouts of ``model``, as ``sd.simulate`` does one batch, on one core
    (``engine="serial"``), the cores of this machine (``"processes"``) or a Ray cluster
    (``"ray"``), with the same results to the last bit on each.

    q0: the initial configurations (N, nq), or a sampler ``q0(rng) -> (q, qd)`` that draws one
        rollout's initial state (q (nq,), qd (nv,) or None) from ``numpy.random.Generator``
        ``rng``, seeded per rollout (see ``screwdyn.rollouts.RandomStates``); then ``n`` says
        how many rollouts.
    qd0: the initial velocities (N, nv) or (nv,) (default zero); None with a sampler.
    controller: as for ``sd.simulate``: None, ``controller(t, q, qd) -> tau``, ``profile(t)``,
        a torque table (steps, nv) for every rollout, or one table per rollout (N, steps, nv).
    t_final, dt, integrator, algebra, backend, control, gravity, record_every,
        divergence_limit: as for ``sd.simulate`` (s, s, ...).
    seed: the job's seed; rollout i's seed is ``rollout_seeds(seed, i, i + 1)[0]``, which the
        sampler's ``rng`` is made from, and is stored with the rollout.
    engine: "serial", "processes", "ray", or an engine object (``ProcessEngine(4)``,
        ``RayEngine()``, ...) kept open between calls so that its workers stay warm.
    workers: worker processes or Ray actors (default: every available CPU; serial: 1).
    chunk_size: rollouts per chunk, the unit of work (and of a dataset's shards). Each chunk is
        one compiled batch of exactly this width; the results depend on it, to the last bit,
        and on nothing else about how the job is split.
    out: a folder to write the rollouts to (sharded Parquet, see ``screwdyn.rollouts.dataset``)
        instead of returning them; rerunning the same call resumes an interrupted run.
    address: the Ray cluster for ``engine="ray"`` (default: the connection this process has,
        else ``RAY_ADDRESS``, else a local Ray).
    progress: a bar with rate and ETA on stderr (True; None: when stderr is a terminal), or a
        callable ``progress(done, total)`` of rollouts.
    max_attempts: how many workers a chunk may lose (killed, crashed) before the job stops.

    Returns a ``RolloutResult`` (arrays (N, T, ...) and per-rollout status), or with ``out`` the
    ``Dataset`` written. A rollout that fails (a non-finite joint force or state, divergence, a
    controller that raises) is marked failed with its error and its samples before the failure;
    the others go on. Raises ``RolloutError`` when every rollout of a chunk fails the same way
    (a broken controller) or a chunk keeps killing workers.
    """
    settings = _settings(integrator, algebra, backend, control, gravity, record_every,
                         divergence_limit)
    t_final, dt = _positive(t_final, "t_final"), _positive(dt, "dt")
    chunk_size = _positive_int(chunk_size, "chunk_size")
    seed = _seed(seed)
    sampler, states, controller, table, n = _states(model, q0, qd0, controller, n)
    made_engine = not isinstance(engine, Engine)
    if made_engine:
        if engine not in ENGINES:
            raise ValueError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}, or an "
                             "engine object (screwdyn.rollouts.ProcessEngine, RayEngine)")
        if workers is not None:
            check_workers(workers)
    elif workers is not None:
        raise ValueError("workers goes with an engine name; an engine object has its own")
    job = Job(model=model, controller=controller if table is None else None, t_final=t_final,
              dt=dt, simulate=tuple(sorted(settings.items())), n=n, chunk_size=chunk_size,
              seed=seed, sampler=sampler, per_rollout_table=table is not None)
    if out is not None:
        _require("pyarrow", "out= (datasets)")
    _check_first(job, states)
    meta = dataset_meta(job, controller, states)
    job = _replace(job, dataset_meta=(json.dumps(meta, sort_keys=True),),
                   jax_cache_dir=_jax_cache_dir(), uid=uuid.uuid4().hex,
                   out=None if out is None else os.path.abspath(os.fspath(out)))
    if made_engine:
        engine = _make_engine(engine, workers, address, max_attempts)
    try:
        engine.check_picklable(job)
        return _run(job, engine, states, meta, progress)
    finally:
        if made_engine:
            engine.close()


def _run(job, engine, states, meta, progress):
    with contextlib.ExitStack() as stack:
        writer, result, todo = None, None, list(range(job.n_chunks))
        if job.out is not None:
            created = time.strftime("%Y-%m-%dT%H:%M:%S")
            writer = DatasetWriter(job.out, {**meta, "created": created})
            stack.callback(writer.close)
            stack.push(_remove_temporaries_on_error(job.out))  # after the workers stopped
            done = writer.open()
            todo = [c for c in todo if c not in done]
            stack.enter_context(_run_marker(job))
        else:
            result = RolloutResult.empty(np.arange(job.n), job.n_samples, job.model.nq,
                                         job.model.nv, job.times(), meta, job.model)
        skipped = job.n - sum(job.chunk_length(c) for c in todo)
        bar = stack.enter_context(contextlib.closing(
            _progress_bar(progress, job, engine, skipped)))
        stats = {"failed": 0, "runs": 0, "chunks": 0, "busy_time": 0.0}
        start, replaced, finished = time.perf_counter(), engine.replaced, skipped
        stream = stack.enter_context(contextlib.closing(engine.run(job, todo, states)))
        try:
            for chunk, done in stream:
                first, stop = job.rollout_range(chunk)
                if writer is not None:
                    if done.data is not None:  # the worker could not see the folder
                        write_shard(job.out, done.entry, done.data)
                    writer.record(done.entry)
                else:
                    result.fill(slice(first, stop), done.result)
                stats["failed"] += done.failed
                stats["runs"] += done.runs
                stats["chunks"] += 1
                stats["busy_time"] += done.wall_time
                finished += stop - first
                bar(finished, job.n)
        except RolloutError as e:
            e.result = result
            raise
    run = {"engine": engine.name, "workers": engine.workers, "wall_time":
           time.perf_counter() - start, "workers_replaced": engine.replaced - replaced,
           "skipped": int(skipped), **stats}
    if writer is not None:
        dataset = Dataset(job.out)
        dataset.run = run
        return dataset
    result.meta["run"] = run
    return result


def _remove_temporaries_on_error(folder):
    """An exit callback: when the run stops on an error or Ctrl-C (the workers stopped, killed
    ones included), remove the temporary files of shards that were being written in
    ``folder``; the dataset's lock keeps any other writer out of it."""
    def remove(exc_type, exc, tb):
        if exc_type is None:
            return False
        with contextlib.suppress(OSError):
            for name in os.listdir(folder):
                if name.startswith(".screwdyn-") and name.endswith(".part"):
                    with contextlib.suppress(OSError):
                        os.remove(os.path.join(folder, name))
        return False

    return remove


@contextlib.contextmanager
def _run_marker(job):
    """The file that tells the workers they see the dataset folder, for the run's length."""
    marker = run_marker(job)
    with open(marker, "w"):
        pass
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.remove(marker)


# ============================================================================================
# Inputs
# ============================================================================================
def _settings(integrator, algebra, backend, control, gravity, record_every, divergence_limit):
    settings = dict(integrator=str(integrator).replace("-", "_").lower(), algebra=algebra,
                    backend=backend, control=control,
                    gravity=None if gravity is None else tuple(
                        float(g) for g in np.asarray(gravity, dtype=float).reshape(3)),
                    record_every=record_every, divergence_limit=divergence_limit)
    return settings


def _positive(x, name):
    try:
        value = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {x!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be positive and finite, got {x!r}")
    return value


def _positive_int(x, name):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise ValueError(f"{name} must be a positive integer, got {x!r}")
    return int(x)


def _seed(seed):
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _states(model, q0, qd0, controller, n):
    """(sampler, States, controller (a table as a float array), per-rollout tables or None, N)
    from the user's q0, qd0, controller."""
    table = None
    if controller is not None and not callable(controller):
        controller = np.asarray(controller, dtype=float)
        if controller.ndim == 3:
            table = controller
        elif controller.ndim != 2:
            raise ValueError(f"a torque table must have shape (steps, {model.nv}) or one per "
                             f"rollout (N, steps, {model.nv}), got {controller.shape}")
    if callable(q0) and not isinstance(q0, np.ndarray):
        if qd0 is not None:
            raise ValueError("with a state sampler q0(rng) -> (q, qd), qd0 must be None (the "
                             "sampler draws the velocities)")
        if n is None:
            raise ValueError("with a state sampler q0(rng) -> (q, qd), n (how many rollouts) "
                             "is needed")
        n = _positive_int(n, "n")
        if table is not None:
            raise ValueError("one torque table per rollout goes with initial-state arrays, "
                             "not a sampler")
        return q0, States(), controller, None, n
    q0 = np.array(q0, dtype=float)
    if q0.ndim != 2 or q0.shape[1] != model.nq:
        raise ValueError(f"q0 must have shape (N, {model.nq}) (one configuration per rollout) "
                         f"or be a sampler q0(rng) -> (q, qd), got shape {q0.shape}")
    N = len(q0)
    if N == 0:
        raise ValueError("q0 holds no rollouts (shape (0, nq))")
    if n is not None and n != N:
        raise ValueError(f"n = {n!r} but q0 holds {N} rollouts (n goes with a sampler)")
    qd0 = np.zeros((N, model.nv)) if qd0 is None else np.array(qd0, dtype=float)
    if qd0.shape not in ((model.nv,), (N, model.nv)):
        raise ValueError(f"qd0 must have shape ({N}, {model.nv}) or ({model.nv},), got "
                         f"{qd0.shape}")
    qd0 = np.ascontiguousarray(np.broadcast_to(qd0, (N, model.nv)))
    if not (np.isfinite(q0).all() and np.isfinite(qd0).all()):
        raise ValueError("q0 and qd0 must be finite")
    if table is not None and (table.shape[0] != N or table.shape[2] != model.nv):
        raise ValueError(f"one torque table per rollout must have shape ({N}, steps, "
                         f"{model.nv}), got {table.shape}")
    return None, States(q0, qd0, table), controller, table, N


def _check_first(job, states):
    """Check the settings and rollout 0's initial state (and table) with one numpy step of
    sd.simulate under zero torque (or the table): a typo fails here, before any worker starts
    or any file is written, and never in the user's controller."""
    import screwdyn as sd

    if job.sampler is not None:
        q, qd = draw_states(job, rollout_seeds(job.seed, 0, 1), 0)
    else:
        q, qd = states.q0[:1], states.qd0[:1]
    settings = dict(job.simulate, backend="numpy")
    table = states.tables[0] if states.tables is not None else job.controller
    if table is not None and not callable(table):
        if table.shape[-2] < job.steps:
            raise ValueError(f"the torque table has {table.shape[-2]} rows but each rollout "
                             f"takes {job.steps} steps")
    else:
        table = None
    try:
        sd.simulate(job.model, q, qd, table, job.dt, job.dt, **settings)
    except sd.SimulationError:
        pass  # rollout 0 itself may fail: that is its result, not a bad input


def _require(package, what):
    try:
        __import__(package)
    except ImportError:
        raise ImportError(f'{what} needs {package}, which is not installed: '
                          'pip install "screwdyn[datasets]"') from None


def _replace(job, **changes):
    import dataclasses

    return dataclasses.replace(job, **changes)


def _jax_cache_dir():
    jax = sys.modules.get("jax")
    return jax.config.jax_compilation_cache_dir if jax is not None else None


def _make_engine(name, workers, address, max_attempts):
    if name == "serial":
        return SerialEngine(workers)
    if name == "processes":
        return ProcessEngine(workers, max_attempts=max_attempts)
    from .ray_engine import RayEngine

    return RayEngine(workers, address=address, max_attempts=max_attempts)


def _version(package):
    import importlib.metadata

    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def dataset_meta(job, controller, states):
    """What the rollouts were made from, for dataset.json and every shard's footer."""
    import screwdyn as sd

    model = job.model
    q_cols, v_cols = coordinate_columns(model)[:2]
    if job.sampler is not None:
        states_name, states_hash = describe(job.sampler), content_hash(job.sampler)
    else:
        states_name = f"arrays q0 {states.q0.shape}, qd0 {states.qd0.shape}"
        states_hash = content_hash((states.q0, states.qd0))
    settings = dict(job.simulate)
    return {
        "format": FORMAT, "model": model.name, "model_hash": content_hash(model),
        "nq": model.nq, "nv": model.nv, "q_names": [c[2:] for c in q_cols],
        "v_names": [c[3:] for c in v_cols], **{k: settings[k] for k in sorted(settings)},
        "gravity": None if settings["gravity"] is None else list(settings["gravity"]),
        "dt": job.dt, "t_final": job.t_final, "n_samples": job.n_samples,
        "controller": describe(controller), "controller_hash": content_hash(controller),
        "states": states_name, "states_hash": states_hash, "seed": job.seed,
        "seed_rule": SEED_RULE, "n": job.n, "chunk_size": job.chunk_size,
        "n_shards": job.n_chunks, "damping": model.damping.tolist(),
        "versions": {"screwdyn": sd.__version__, "jax": _version("jax"),
                     "numpy": np.__version__},
        "pyarrow": _version("pyarrow")}


# ============================================================================================
# Progress
# ============================================================================================
class _NoBar:
    def __call__(self, done, total):
        pass

    def close(self):
        pass


class _Callback(_NoBar):
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, done, total):
        self.fn(done, total)


class _Bar:
    """tqdm over rollouts: rate (rollouts/s), steps/s, ETA."""

    def __init__(self, job, engine, finished):
        from tqdm.auto import tqdm

        self.steps = job.steps
        self.start, self.initial = time.perf_counter(), finished
        self.bar = tqdm(total=job.n, initial=finished, unit="rollout",
                        desc=f"rollouts ({engine.name}, {engine.workers} "
                             f"worker{'s' if engine.workers != 1 else ''})",
                        smoothing=0.1, file=sys.stderr, dynamic_ncols=True)

    def __call__(self, done, total):
        elapsed = time.perf_counter() - self.start
        if elapsed > 0:
            rate = (done - self.initial) / elapsed
            self.bar.set_postfix_str(f"{rate * self.steps:.3g} steps/s", refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self):
        self.bar.close()


def _progress_bar(progress, job, engine, finished):
    if callable(progress):
        return _Callback(progress)
    if progress is None:
        progress = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()
        try:
            import tqdm  # noqa: F401
        except ImportError:  # no bar unless asked for
            progress = False
    if progress:
        _require("tqdm", "progress=True")
    return _Bar(job, engine, finished) if progress else _NoBar()
