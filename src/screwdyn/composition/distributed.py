"""Whole-body inverse dynamics with every subsystem evaluated elsewhere: one worker per subsystem,
in its own process (``engine="processes"``) or as a Ray actor (``engine="ray"``), exchanging
only connection-point data, serialized (npz bytes).

Each worker holds one subsystem's W_i (``SubsystemFunction``: its model and where its successors
are attached) and answers two requests: forward (its joint state, the twist and twist derivative
at its connection point -> those at its successors' points) and backward (its successors'
wrenches -> its joint forces and the wrench at its own point). The coordinator runs the paper's
two sweeps over the workers, one level of the tree at a time (the workers of a level run in
parallel); black boxes stay with the coordinator, as data. The result is bit for bit what
``Assembly.inverse_dynamics`` computes in one process: every W_i is the same code on the same
numbers, which cross the processes exactly.
"""
import io
import multiprocessing
import pickle

import numpy as np

from .scheme import Call


def pack(**arrays):
    """npz bytes of the named arrays (None values are left out; nothing: no bytes)."""
    if all(v is None for v in arrays.values()):
        return b""
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items() if v is not None})
    return buffer.getvalue()


def unpack(data):
    """{name: array} of npz bytes."""
    if not data:
        return {}
    with np.load(io.BytesIO(data)) as npz:
        return {k: npz[k] for k in npz.files}


class Worker:
    """One subsystem's W_i behind a bytes-in, bytes-out interface (what crosses a process)."""

    def __init__(self, function_bytes):
        self.function = pickle.loads(function_bytes)
        self.forward_pass = None

    def forward(self, data):
        """npz in: q, qd, qdd, [twist], twist_derivative, [f_ext]; npz out: per successor
        ``<name>.twist`` (if moving) and ``<name>.twist_derivative``."""
        a = unpack(data)
        self.forward_pass = self.function.forward(a["q"], a["qd"], a["qdd"], a.get("twist"),
                                                  a["twist_derivative"], a.get("f_ext"))
        out = {}
        for name, (twist, derivative) in self.forward_pass.motion.items():
            out[f"{name}.twist"], out[f"{name}.twist_derivative"] = twist, derivative
        return pack(**out)

    def backward(self, data):
        """npz in: ``<successor>`` wrenches; npz out: tau, wrench."""
        tau, wrench = self.function.backward(self.forward_pass, unpack(data))
        return pack(tau=tau, wrench=wrench)


def _serve(connection):
    """A worker process: requests (method, bytes) until None."""
    worker = None
    while True:
        request = connection.recv()
        if request is None:
            return
        method, data = request
        try:
            if method == "init":
                worker, reply = Worker(data), b""
            else:
                reply = getattr(worker, method)(data)
            connection.send((True, reply))
        except Exception as e:  # reported to the coordinator, which raises it
            connection.send((False, f"{type(e).__name__}: {e}"))


class ProcessEngine:
    """One spawned Python process per subsystem (nothing shared but the bytes sent)."""

    def __init__(self):
        self.context = multiprocessing.get_context("spawn")
        self.workers, self.starting = {}, set()

    def start(self, name, function_bytes):
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_serve, args=(child,), daemon=True)
        process.start()
        self.workers[name] = (process, parent)
        parent.send(("init", function_bytes))  # answered before the first request (``submit``)
        self.starting.add(name)
        return name

    def submit(self, handle, method, data):
        if handle in self.starting:
            self.starting.discard(handle)
            self.result(handle)
        self.workers[handle][1].send((method, data))
        return handle

    def result(self, handle):
        ok, reply = self.workers[handle][1].recv()
        if not ok:
            raise RuntimeError(f"subsystem {handle!r}: {reply}")
        return reply

    def close(self):
        for process, connection in self.workers.values():
            connection.send(None)
            process.join(timeout=10)
        self.workers.clear()


class RayEngine:
    """One Ray actor per subsystem (a local Ray runtime, listening on 127.0.0.1 only, is started
    if none is running)."""

    def __init__(self):
        import ray

        from ..rollouts.ray_engine import start_local_ray

        if not ray.is_initialized():
            start_local_ray(ray, include_dashboard=False, log_to_driver=False)
        self.ray = ray
        self.actor_class = ray.remote(num_cpus=0)(Worker)
        self.actors, self.pending = {}, {}

    def start(self, name, function_bytes):
        self.actors[name] = self.actor_class.remote(function_bytes)
        return name

    def submit(self, handle, method, data):
        self.pending[handle] = getattr(self.actors[handle], method).remote(data)
        return handle

    def result(self, handle):
        return self.ray.get(self.pending.pop(handle))

    def close(self):
        for actor in self.actors.values():
            self.ray.kill(actor)
        self.actors.clear()


ENGINES = {"processes": ProcessEngine, "ray": RayEngine}


class DistributedAssembly:
    """``assembly``'s inverse dynamics with a worker per subsystem with a model, in ``engine``
    ("processes", "ray", or an engine object with start, submit, result and close). A context
    manager: the workers live until ``close``. The assembly's structure is copied to the workers
    when they start (a later change to the assembly needs a new DistributedAssembly)."""

    def __init__(self, assembly, engine="processes", algebra="spatial"):
        self.assembly, self.algebra = assembly, algebra
        self.engine = ENGINES[engine]() if isinstance(engine, str) else engine
        self.handles = {s.name: self.engine.start(s.name, pickle.dumps(
            assembly.function(s.name, algebra))) for s in assembly.models}
        self.levels = _levels(assembly)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.engine.close()

    def inverse_dynamics(self, q, qd, qdd, f_ext=None, gravity=None, time=None):
        """tau (..., nv), as ``Assembly.inverse_dynamics`` (bit for bit)."""
        asm, engine = self.assembly, self.engine
        call = Call(asm, self.algebra, q, qd, qdd, f_ext, gravity, time)
        q, qd, qdd = (np.broadcast_to(np.asarray(a, dtype=float), call.shape + (n,))
                      for a, n in ((q, asm.nq), (qd, asm.nv), (qdd, asm.nv)))
        f_ext = dict(f_ext or {})
        motion, outgoing = {}, {}
        for level in self.levels:  # forward sweep
            submitted = []
            for s in level:
                motion[s.name] = self._motion(call, s, outgoing)
                if s.model is not None:
                    twist, derivative = motion[s.name]
                    submitted.append((s, engine.submit(self.handles[s.name], "forward", pack(
                        q=q[..., s.q_slice], qd=qd[..., s.v_slice], qdd=qdd[..., s.v_slice],
                        twist=twist, twist_derivative=derivative, f_ext=f_ext.get(s.name)))))
            for s, handle in submitted:
                outgoing[s.name] = unpack(engine.result(handle))
        children, wrench, tau = asm.children(), {}, {}
        for level in reversed(self.levels):  # backward sweep
            submitted = []
            for s in level:
                if s.model is None:
                    zeta = call.black_box_wrench(s, tuple(
                        call.twist(call.alg, m, "motion") for m in motion[s.name]))
                    wrench[s.name] = None if zeta is None else call.public(
                        call.alg.wrench_vector(zeta))
                    continue
                data = pack(**{c.name: wrench[c.name] for c in children[s.name]})
                submitted.append((s, engine.submit(self.handles[s.name], "backward", data)))
            for s, handle in submitted:
                reply = unpack(engine.result(handle))
                tau[s.name], wrench[s.name] = reply["tau"], reply["wrench"]
        return np.concatenate([tau[s.name] for s in asm.models], axis=-1)

    def _motion(self, call, s, outgoing):
        """(twist or None, twist derivative) at s's connection point, public arrays."""
        if s.parent is None:
            V, A = call.root_motion(s)
        elif self.assembly[s.parent].model is None:
            V, A = call.measured_motion(self.assembly[s.parent], s)
        else:
            out = outgoing[s.parent]
            return out.get(f"{s.name}.twist"), out[f"{s.name}.twist_derivative"]
        return (None if V is None else call.twist_public(call.alg, V),
                call.twist_public(call.alg, A))


def _levels(assembly):
    """The subsystems by depth in the tree of attachments: [[root], [its children], ...]."""
    depth, levels = {}, []
    for s in assembly.subsystems:
        depth[s.name] = 0 if s.parent is None else depth[s.parent] + 1
        if depth[s.name] == len(levels):
            levels.append([])
        levels[depth[s.name]].append(s)
    return levels
