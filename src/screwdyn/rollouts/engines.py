"""Where chunks run: in this process (``SerialEngine``) or in worker processes of this machine
(``ProcessEngine``); ``ray_engine.RayEngine`` runs them on a Ray cluster.

An engine's ``run(job, chunks, states)`` yields ``(chunk, Done)`` as chunks finish, in any order,
each chunk exactly once. Workers keep the job (model, controller, settings) and the compiled
rollout between chunks, and between calls while the engine stays open (``with`` or ``close()``).

Faults: a worker that dies (killed, out of memory, a crash in native code) is replaced and the
chunks it held run again on the new one; a chunk that kills ``max_attempts`` workers in a row
stops the job with ``RolloutError``. An exception raised by the job itself (bad input, a broken
controller) stops the job and is raised in the caller.
"""
import collections
import os
import pickle
import queue
import signal
import threading
import traceback
import uuid

from .. import interrupts
from .job import RolloutError
from .worker import execute, prepare


class States:
    """The initial states of a job's rollouts (and a torque table per rollout, if any), held by
    the driver and sent chunk by chunk; None when the workers draw them from a sampler."""

    def __init__(self, q0=None, qd0=None, tables=None):
        self.q0, self.qd0, self.tables = q0, qd0, tables

    @property
    def arrays(self):
        return (self.q0, self.qd0, self.tables)

    def chunk(self, job, chunk):
        if self.q0 is None:
            return None
        start, stop = job.rollout_range(chunk)
        return chunk_states(self.q0, self.qd0, self.tables, start, stop)


def chunk_states(q0, qd0, tables, start, stop):
    """The states of rollouts [start, stop), copied out of the job's arrays."""
    return (q0[start:stop].copy(), qd0[start:stop].copy(),
            None if tables is None else tables[start:stop].copy())


def available_cpus():
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Engine:
    """The interface every engine has: ``run``, ``close``, a context manager; ``workers``."""

    name = "engine"
    workers = 1
    replaced = 0  # workers replaced after they died

    def run(self, job, chunks, states):
        raise NotImplementedError

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def check_picklable(self, job):
        """Raise ValueError unless ``job`` (its controller and state sampler above all) can be
        sent to this engine's workers."""


class SerialEngine(Engine):
    """The chunks one after the other in this process."""

    name = "serial"

    def __init__(self, workers=None):
        if workers not in (None, 1):
            raise ValueError(f"engine='serial' runs in this process: workers must be 1 or None, "
                             f"got {workers!r} (use engine='processes' for more)")

    def run(self, job, chunks, states):
        prepare(job)
        for chunk in chunks:
            yield chunk, execute(job, chunk, states.chunk(job, chunk))


# ============================================================================================
# Worker processes of this machine
# ============================================================================================
#: seconds between two looks for a Ctrl-C while the driver waits on its workers
POLL_SECONDS = 0.1


class ProcessEngine(Engine):
    """``workers`` processes of this machine (default: one per available CPU), started with
    ``start_method`` ("spawn" by default: JAX's threads do not survive a fork) and kept until
    ``close()``. Each holds up to two chunks, so that it never waits for the driver. The job
    travels with the standard library's pickle: a controller must be importable (defined at
    module level, not a lambda or a local function)."""

    name = "processes"

    def __init__(self, workers=None, *, start_method="spawn", max_attempts=3):
        self.workers = available_cpus() if workers is None else check_workers(workers)
        self.max_attempts = int(max_attempts)
        import multiprocessing

        self._context = multiprocessing.get_context(start_method)
        self._procs = []
        self.replaced = 0

    @property
    def pids(self):
        """Process ids of the live workers."""
        return [w.process.pid for w in self._procs if w.process.is_alive()]

    def check_picklable(self, job):
        try:
            pickle.dumps(job)
        except Exception as e:  # PicklingError, AttributeError, TypeError: all mean the same
            raise ValueError(
                f"engine='processes' sends the controller and the state sampler to its worker "
                f"processes with pickle, and this job cannot be pickled ({type(e).__name__}: "
                f"{e}); define the controller at module level (not a lambda or a local "
                "function), or use engine='serial' or engine='ray' (which pickles closures)"
            ) from e

    def _start(self):
        parent, child = self._context.Pipe(duplex=True)
        process = self._context.Process(target=_process_main, args=(child,), daemon=True,
                                        name="screwdyn-rollouts")
        process.start()
        child.close()
        return _Worker(process, parent)

    def run(self, job, chunks, states):
        uid = uuid.uuid4().hex
        job_bytes = pickle.dumps(job)
        while len(self._procs) < self.workers:
            self._procs.append(self._start())
        pending = collections.deque(chunks)
        attempts = collections.Counter()
        try:
            with interrupts.held():  # Ctrl-C: the results sent so far are yielded, then it stops
                yield from self._results(job, states, (uid, job_bytes), pending, attempts)
        except BaseException:
            self.close(kill=True)  # workers may hold chunks of this run: start afresh
            raise

    def _results(self, job, states, job_id, pending, attempts):
        """(chunk, result) as the workers send them, the ``pending`` chunks handed out two per
        worker; a dead worker's chunks run again, up to ``max_attempts``. A Ctrl-C noted (run
        holds it) stops it within ``POLL_SECONDS`` s, once the results already sent are yielded."""
        from multiprocessing.connection import wait

        uid, job_bytes = job_id
        while pending or any(w.inflight for w in self._procs):
            for w in round_robin(self._procs, pending, lambda w: len(w.inflight)):
                chunk = pending.popleft()
                w.inflight.append(chunk)
                try:
                    if uid not in w.jobs:
                        w.conn.send(("job", uid, None, job_bytes))
                        w.jobs.add(uid)
                    w.conn.send(("chunk", uid, chunk, states.chunk(job, chunk)))
                except OSError:  # the worker is gone: noticed below by its sentinel
                    pass
            waitables = {}
            for w in self._procs:
                waitables[w.conn] = w
                waitables[w.process.sentinel] = w
            for r in wait(list(waitables), timeout=POLL_SECONDS):
                w = waitables[r]
                if w.dead:
                    continue
                messages = w.receive()
                if w.dead or not w.process.is_alive():  # a result sent before dying counts
                    messages += w.receive(all_pending=True)
                yield from _results_in(w, messages)
                if w.dead or not w.process.is_alive():
                    if not w.ready:
                        raise RuntimeError(_STARTUP_DIED.format(w.process.exitcode))
                    lost = w.bury()
                    for chunk in lost:
                        attempts[chunk] += 1
                        if attempts[chunk] >= self.max_attempts:
                            raise RolloutError(
                                f"chunk {chunk} killed {attempts[chunk]} worker processes "
                                f"in a row (exit code {w.process.exitcode}); stopped")
                    pending.extendleft(reversed(lost))
                    self._procs[self._procs.index(w)] = self._start()
                    self.replaced += 1
            if interrupts.noted():  # Ctrl-C: every result sent so far is recorded, then stop
                for w in self._procs:
                    yield from _results_in(w, w.receive(all_pending=True))
                interrupts.stop_if_noted()

    def close(self, kill=False):
        """Stop the workers: when their chunks are done, or at once (``kill``)."""
        for w in self._procs:
            w.stop(kill)
        self._procs = []


def _results_in(w, messages):
    """(chunk, result) of each result among the ``messages`` that worker ``w`` sent."""
    for kind, _, chunk, payload in messages:
        if kind == "ready":
            w.ready = True
            continue
        if kind == "error":
            raise _in_worker(payload, chunk)
        w.inflight.remove(chunk)
        yield chunk, payload


class _Worker:
    """The driver's handle on one worker process."""

    def __init__(self, process, conn):
        self.process, self.conn = process, conn
        self.inflight, self.jobs, self.dead, self.ready = [], set(), False, False

    def receive(self, all_pending=False):
        """Messages waiting on the pipe (all of them after the process ended): a result sent
        just before dying still counts."""
        messages = []
        try:
            while self.conn.poll():
                messages.append(self.conn.recv())
                if not all_pending:
                    break
        except (EOFError, OSError, pickle.UnpicklingError):
            self.dead = True
        return messages

    def bury(self):
        """The chunks this dead worker held, to run again."""
        lost, self.inflight = list(self.inflight), []
        self.dead = True
        self.process.join(timeout=5)
        self.conn.close()
        return lost

    def stop(self, kill=False):
        """Ask the worker to finish (it does after its chunks in hand), or kill it."""
        if self.process.is_alive() and not kill:
            try:
                self.conn.send(("stop", None, None, None))
            except OSError:
                pass
            self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        self.conn.close()


_STARTUP_DIED = (
    "a worker process exited while starting (exit code {}), before it could run anything. With "
    "engine='processes' (start method 'spawn') each worker imports the script that started "
    "it: put the script's main code under `if __name__ == \"__main__\":` (see 'Safe importing "
    "of main module' in the multiprocessing documentation)")


def round_robin(workers, pending, load, depth=2):
    """The workers to give the next pending chunks to: one each first, then a second each (a
    worker holding two never waits for the driver between chunks)."""
    for level in range(1, depth + 1):
        for w in list(workers):
            if pending and load(w) < level:
                yield w


def check_workers(workers):
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer (how many worker processes or "
                         f"actors), got {workers!r}")
    return workers


def _process_main(conn):
    """A worker process: jobs and chunks come in on ``conn`` (read by a thread, so that the
    driver never blocks sending), results go out on it. Ctrl-C is the driver's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inbox = queue.Queue()

    def read():
        try:
            while True:
                inbox.put(conn.recv())
        except (EOFError, OSError):
            inbox.put(None)  # the driver is gone

    threading.Thread(target=read, daemon=True).start()
    conn.send(("ready", None, None, os.getpid()))
    jobs = collections.OrderedDict()
    while True:
        message = inbox.get()
        if message is None or message[0] == "stop":
            return
        kind, uid, chunk, payload = message
        if kind == "job":
            jobs[uid] = pickle.loads(payload)
            prepare(jobs[uid])
            while len(jobs) > 4:
                jobs.popitem(last=False)
            continue
        try:
            reply = ("done", uid, chunk, execute(jobs[uid], chunk, payload))
        except Exception as e:
            reply = ("error", uid, chunk, _portable(e))
        conn.send(reply)


def _in_worker(error, chunk):
    """The exception a worker sent, noted with where it happened."""
    if hasattr(error, "add_note"):
        error.add_note(f"(raised in a worker while running chunk {chunk})")
    return error


def _portable(error):
    """The exception itself if it pickles, else a RuntimeError carrying its text and trace."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return RuntimeError(f"{type(error).__name__}: {error}\n{text}")
