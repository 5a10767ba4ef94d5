"""Chunks on a Ray cluster (``pip install "screwdyn[ray]"``): workers are Ray actors, one CPU
each, that keep the job and the compiled rollout warm; the initial states are put in Ray's object
store once and each actor reads its chunk's rows from there.

The cluster: the one this process is already connected to (``ray.init`` called before), else
``address`` or the ``RAY_ADDRESS`` environment variable (a running cluster: ``ray start --head``
on one machine, ``ray start --address=HEAD:6379`` on the others), else a local Ray started for
the engine and stopped by ``close()``. screwdyn must be installed on every node.

A local Ray started here listens on the loopback address 127.0.0.1 only (``start_local_ray``):
its servers (GCS, raylets, workers, agents) take no connection from another machine.

A dead actor (killed, its node lost) is replaced by a new one and the chunks it held run again.
"""
import collections
import contextlib
import ipaddress
import os
import uuid
import weakref

from .. import interrupts
from .engines import POLL_SECONDS, Engine, check_workers, chunk_states, round_robin
from .job import RolloutError
from .worker import execute, prepare


def import_ray():
    try:
        import ray
    except ImportError:
        raise ImportError('engine="ray" needs Ray, which is not installed: '
                          'pip install "screwdyn[ray]"') from None
    return ray


# ============================================================================================
# A local Ray of this machine only: every server on the loopback address
# ============================================================================================
LOOPBACK = "127.0.0.1"
# Ray's "cluster mode" switch: on (Linux), a node address of 127.0.0.1 is replaced by the
# machine's network address; off, the loopback address is kept
CLUSTER_MODE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextlib.contextmanager
def loopback_only(ray):
    """While Ray starts in this block, its nodes take the loopback address as their own, and
    so listen there only. Ray binds its gRPC servers (GCS, raylet, workers, agents) to every
    interface unless the node's address is the loopback one, and turns a node address of
    127.0.0.1 into the machine's network address unless its cluster mode is off: the block
    turns it off, in this process (read when ray was imported) and in the processes Ray spawns
    (the environment variable), and restores both after."""
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    saved = os.environ.get(CLUSTER_MODE), getattr(constants, "ENABLE_RAY_CLUSTER", None)
    os.environ[CLUSTER_MODE] = "0"
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if saved[0] is None:
            os.environ.pop(CLUSTER_MODE, None)
        else:
            os.environ[CLUSTER_MODE] = saved[0]
        if constants is not None:
            constants.ENABLE_RAY_CLUSTER = saved[1]


def start_local_ray(ray, **options):
    """``ray.init(**options)`` of a new Ray on this machine that listens on 127.0.0.1 only (its
    dashboard, if any, too); RuntimeError if this Ray version put it on another address. A new
    one always (``address="local"``): a plain ``ray.init()`` would join the cluster another
    program last started on this machine, if any."""
    with loopback_only(ray):
        ray.init(address="local", _node_ip_address=LOOPBACK, dashboard_host=LOOPBACK, **options)
    address = ray.get_runtime_context().gcs_address
    if not is_loopback(address):
        ray.shutdown()
        raise RuntimeError(f"the local Ray started for this process took the address {address}, "
                           f"not the loopback one, and would listen on every interface "
                           f"(Ray {ray.__version__}); it was stopped. Start a cluster yourself "
                           "(ray start --head ...) and give its address")
    return address


def connect_ray(ray, address):
    """``ray.init(address=address)``: a running cluster. One on this machine's loopback address
    (a cluster started as ``start_local_ray`` starts one) is reached in the same mode, or Ray
    would look for it at the machine's network address."""
    if is_loopback(address):
        with loopback_only(ray):
            ray.init(address=address)
    else:
        ray.init(address=address)


def is_loopback(address):
    """Whether a Ray address "host:port" (or a bare host) names this machine's loopback."""
    host = address.rsplit(":", 1)[0] if address.count(":") == 1 or "]" in address else address
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name, "auto", "local"
        return False


class RolloutActor:
    """A Ray actor's state: the jobs it was given (a few, newest last)."""

    def __init__(self):
        self.jobs = collections.OrderedDict()

    def setup(self, uid, job):
        """Keep ``job`` (resolved from the object store) under ``uid``; returns where it runs."""
        import ray

        self.jobs[uid] = job
        prepare(job)
        while len(self.jobs) > 4:
            self.jobs.popitem(last=False)
        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def run(self, uid, chunk, q0=None, qd0=None, tables=None):
        """Run a chunk; the state arrays are the job's whole arrays, read in place (zero-copy)
        from the object store."""
        job = self.jobs[uid]
        states = None
        if q0 is not None:
            states = chunk_states(q0, qd0, tables, *job.rollout_range(chunk))
        return execute(job, chunk, states)


class RayEngine(Engine):
    """``workers`` Ray actors of one CPU each (default: one per CPU of the cluster, less those
    that other open RayEngines of this process hold). See the module docstring."""

    name = "ray"

    def __init__(self, workers=None, *, address=None, max_attempts=3, actor_options=None):
        ray = import_ray()
        self._ray = ray
        self._owns = False
        if ray.is_initialized() and address and address != "auto":
            current = ray.get_runtime_context().gcs_address
            if current != address:
                raise ValueError(f"this process is connected to the Ray cluster at {current}; "
                                 f"address={address!r} names another: ray.shutdown() first")
        if not ray.is_initialized():
            address = address or os.environ.get("RAY_ADDRESS")
            if address:
                connect_ray(ray, address)
            else:
                start_local_ray(ray, num_cpus=workers, include_dashboard=False)
            self._owns = True
        if workers is None:  # one actor per CPU that the engines of this process leave
            total = int(ray.cluster_resources().get("CPU", 0))
            workers = total - sum(e.workers for e in _OPEN)
            if workers < 1:
                raise RuntimeError(
                    f"the Ray cluster's {total} CPUs are all held by the actors of other open "
                    "RayEngines of this process: close them, or give workers=")
        self.workers = check_workers(workers)
        self.max_attempts = int(max_attempts)
        options = {"num_cpus": 1, "max_restarts": 0, **(actor_options or {})}
        self._actor_class = ray.remote(**options)(RolloutActor)
        self.actors, self.nodes = [], {}
        self._jobs = [set() for _ in range(self.workers)]
        self.replaced = 0
        _OPEN.add(self)

    def check_picklable(self, job):
        from ray import cloudpickle

        try:
            cloudpickle.dumps(job)
        except Exception as e:
            raise ValueError(f"engine='ray' sends the controller and the state sampler to its "
                             f"actors with cloudpickle, and this job cannot be pickled "
                             f"({type(e).__name__}: {e}); keep locks, open files and other "
                             "process-bound objects out of the controller, or use "
                             "engine='serial'") from e

    def run(self, job, chunks, states):
        ray = self._ray
        uid = uuid.uuid4().hex
        job_ref = ray.put(job)
        arrays = [None, None, None] if states.q0 is None else \
            [None if a is None else ray.put(a) for a in states.arrays]
        while len(self.actors) < self.workers:
            self.actors.append(self._actor_class.remote())
        pending = collections.deque(chunks)
        attempts = collections.Counter()
        inflight = {}  # result ref -> (slot, actor, chunk)
        load = collections.Counter()
        try:
            with interrupts.held():  # Ctrl-C: the chunks done so far are yielded, then it stops
                yield from self._results(uid, job_ref, arrays, pending, attempts, inflight,
                                         load)
        except BaseException:
            self._kill_actors()  # they may hold chunks of this run: start afresh next time
            raise

    def _results(self, uid, job_ref, arrays, pending, attempts, inflight, load):
        """(chunk, result) as the actors finish them; a Ctrl-C noted (``run`` holds it) stops
        it within ``POLL_SECONDS`` s, once every chunk done by then is yielded."""
        ray = self._ray
        while pending or inflight:
            stopping = interrupts.noted()
            for slot in () if stopping else round_robin(range(self.workers), pending,
                                                        load.__getitem__):
                actor, chunk = self.actors[slot], pending.popleft()
                if uid not in self._jobs[slot]:
                    self._setup(slot, uid, job_ref)
                inflight[actor.run.remote(uid, chunk, *arrays)] = (slot, actor, chunk)
                load[slot] += 1
            refs = list(inflight)
            ready = [] if stopping else ray.wait(refs, num_returns=1, timeout=POLL_SECONDS)[0]
            if stopping or (ready and len(refs) > 1):  # every other done by now: one pass
                ready = ray.wait(refs, num_returns=len(refs), timeout=0)[0] or ready
            for ref in ready:
                slot, actor, chunk = inflight.pop(ref)
                load[slot] -= 1
                try:
                    done = ray.get(ref)
                except ray.exceptions.RayTaskError as e:  # the job itself raised
                    raise _cause(e, chunk) from None
                except ray.exceptions.RayError as e:  # the actor died or its node was lost
                    attempts[chunk] += 1
                    if attempts[chunk] >= self.max_attempts:
                        raise RolloutError(f"chunk {chunk} was lost with "
                                           f"{attempts[chunk]} actors in a row; stopped"
                                           ) from e
                    pending.appendleft(chunk)
                    if self.actors[slot] is actor:  # replace it once, not per lost chunk
                        self.actors[slot] = self._actor_class.remote()
                        self._jobs[slot] = set()
                        self.replaced += 1
                    continue
                yield chunk, done
            if stopping:
                interrupts.stop_if_noted()

    def _setup(self, slot, uid, job_ref):
        self._jobs[slot].add(uid)
        info_ref = self.actors[slot].setup.remote(uid, job_ref)
        self.nodes[slot] = info_ref  # resolved lazily by ``where()``

    def where(self):
        """{slot: {"node": node id, "pid": process id}} of the live actors."""
        out = {}
        for slot, ref in self.nodes.items():
            try:
                out[slot] = self._ray.get(ref)
            except self._ray.exceptions.RayError:
                continue
        return out

    def close(self):
        """Kill the actors; stop Ray if this engine started it."""
        self._kill_actors()
        _OPEN.discard(self)
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns = False

    def _kill_actors(self):
        for actor in self.actors:
            try:
                self._ray.kill(actor)
            except Exception:  # already dead or the cluster is gone
                pass
        self.actors, self.nodes = [], {}
        self._jobs = [set() for _ in range(self.workers)]


_OPEN: "weakref.WeakSet[RayEngine]" = weakref.WeakSet()  # this process's open RayEngines


def _cause(error, chunk):
    cause = getattr(error, "cause", None)
    error = cause if isinstance(cause, BaseException) else error
    if hasattr(error, "add_note"):
        error.add_note(f"(raised in a Ray actor while running chunk {chunk})")
    return error
