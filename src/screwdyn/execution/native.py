"""Native programs: a public function, for one model, algebra and set of inputs, as machine code.

``get(function, model, algebra, inputs, bound)`` returns a ``NativeProgram``, from this
process's memory, from the disk cache (``cache``), or by tracing the function's recursion
(``trace``), generating LLVM IR (``llvm``) and compiling it. A program computes one state per row:
inputs are rows of the public layout (q (nq,), qd (nv,), ..., f_ext flattened to nlinks * 6), the
result a row of the function's output shape.

Two levels of code, the same results in every bit (``llvm.compile_object``): level 0, one state
at a time, compiles about ten times faster; level 2 runs about twice as fast for one state and,
with its vector loop (``llvm.kernel_ir``), four to five times as fast per state in batches. A
new program is compiled at level 0 and used at once; when it has run ``entry.HOT_STATES``
states through its fast entry, level 2 is compiled (by a child process, ``compiler``) for a
background thread, which replaces it (``NativeProgram.optimise``, or ``optimise=True`` to
compile level 2 before returning, as ``sd.compile`` and ``Plan.compile`` do). Both levels go
to the disk cache; a new process loads the best one there.

The program's key holds everything its code depends on (see ``cache``), so programs are never
reused across models, library sources, LLVM versions or CPUs.
"""
import atexit
import os
from dataclasses import replace
import queue
import sys
import threading
import time
import weakref

import numpy as np

from . import cache, compiler, entry, graph, llvm, trace
from .store import Store
from ..model.model import TracedParameters
from .call import Call, core_shape

VERSION = 1  # of the program format (bump when the kernel's calling convention changes)
LEVELS = (0, 2)  # LLVM code generation levels: first, then optimised
#: the programs kept in this process's memory (``store.Store``: at most ``config.max_programs``,
#: the least recently used dropped)
_PROGRAMS = Store("native programs")
#: the name of the input that carries the bodies' inertial parameters (bodies, 10) into a
#: program traced for a model holding traced parameters (``Model.with_inertial_parameters``)
PARAMETERS = "parameters"
_LOCK = threading.RLock()


class NativeProgram:
    """Machine code for one (function, model, algebra, inputs, bound constants).

    ``input_names``, ``input_sizes`` (flat sizes per state), ``output_shape`` (per state),
    ``level`` (0 or 2: LLVM's code generation level of the code in use), ``compile_time``
    (seconds until the first code was usable: tracing and compiling, or loading from the disk
    cache), ``optimise_time`` (seconds to compile level 2, None until done), ``source``
    ("compiled" or "disk cache"), ``nodes`` (the live operations by kind, when it was traced in
    this process), ``key`` (the cache key). ``call(arrays, out, n)`` runs it through ctypes;
    ``bind(fallback)`` gives the fast Python entry (``entry``)."""

    def __init__(self, key, input_names, input_sizes, output_shape, function, model, algebra,
                 bound, static, derivatives=()):
        self.key = key
        self.input_names, self.input_sizes = tuple(input_names), tuple(input_sizes)
        self.output_shape = tuple(output_shape)
        self._spec = (function, model, algebra, bound, static, derivatives)
        self.level = self.address = self.call = None
        self.source, self.compile_time, self.optimise_time, self.nodes = None, None, None, None
        self._libraries, self._watchers = [], []
        self._program = None  # the traced graph.Program while the optimised code is made
        self._optimised = threading.Event()
        self._queued = False
        self._states = 0  # states run outside the fast entry (``ran``)
        self._folder = cache.directory()  # where its optimised code is kept, made later
        self.error = None

    def _install(self, obj, level):
        library = llvm.Library(obj)
        address = library.address("kernel")
        with _LOCK:
            self._libraries.append(library)  # old code stays loaded: a call may be running it
            self.address, self.level, self.call = address, level, entry.caller(address)
            for watch in self._watchers:
                watch(address)
        if level == LEVELS[-1]:
            self._optimised.set()

    def bind(self, fallback):
        """The fast callable (``entry.bind``), or None where the fast entry is unavailable."""
        hot = None if self.level == LEVELS[-1] else self._hot
        f = entry.bind(self.address, self.input_sizes, self.output_shape, fallback, self, hot)
        if f is not None:  # pointed at the code in use (optimised meanwhile, or later)
            # weakly: the entry keeps this program alive through its context, a numpy array
            # the garbage collector cannot see into, so a strong reference back would be a
            # cycle never collected (every program of every model made in a loop kept)
            ref = weakref.ref(f)
            self.watch(lambda address: _set_kernel(ref(), address))
        return f

    def watch(self, callback):
        """Call ``callback(address)`` now and whenever other code replaces the kernel (the
        optimised code): the fast entries (``bind``) and XLA's custom calls (``custom_call``)
        point at the kernel this way."""
        with _LOCK:
            self._watchers.append(callback)
            callback(self.address)

    def ran(self, states):
        """Count ``states`` run through ``call`` (``plan.run_native``): past
        ``entry.HOT_STATES`` the optimised code is queued, as the fast entry's count does."""
        self._states += states
        if self._states >= entry.HOT_STATES and not self._queued:
            self._hot()

    def _hot(self):
        try:
            self.optimise(wait=False)
        except Exception:  # noqa: BLE001  (called from the fast entry: must not raise)
            pass

    def optimise(self, wait=True):
        """Compile the optimised code (level 2) and use it: now (``wait``) or in the background
        thread. Returns self."""
        if self._optimised.is_set():
            return self
        with _LOCK:
            queued, self._queued = self._queued, True
        if wait:
            if queued:
                self._optimised.wait()
            else:
                self._compile_optimised()
        elif not queued:
            in_background(self._compile_optimised, lambda: self._source_ir(vector=True))
        return self

    def _compile_optimised(self, ir=None):
        """Compile level 2 from ``ir`` (the kernel's IR with its vector loop, or the error
        that making it raised; None: make it now) and use it."""
        if self._optimised.is_set():
            return
        start = time.perf_counter()
        try:
            if isinstance(ir, Exception):
                raise ir
            obj = compiler.optimised_object(self._source_ir(vector=True) if ir is None else ir)
            cache.store_object(level_key(self.key, LEVELS[-1]), obj,
                               self.description(LEVELS[-1]), folder=self._folder,
                               replaces=level_key(self.key, LEVELS[0]))
            self._install(obj, LEVELS[-1])
            self.optimise_time = time.perf_counter() - start
            self._program = None
        except Exception as error:  # noqa: BLE001  (the level-0 code stays in use)
            self.error = error
            self._optimised.set()

    def _source_ir(self, vector=False):
        """The kernel's IR: one state at a time (level 0), or with a vector loop."""
        if self._program is None:
            reverse = sum(isinstance(d, graph.Reverse) for d in self._spec[-1])
            inputs = self.input_names[:len(self.input_names) - reverse]  # less cotangents
            self._program = trace_program(*self._spec[:3], inputs, *self._spec[3:])
        return llvm.kernel_ir(self._program, width=llvm.vector_width() if vector else 1)

    def description(self, level):
        """What the disk cache records with this program's code at ``level``, and checks
        before linking it: function, model hash, algebra, inputs and their sizes, output
        shape, derivatives, constants."""
        function, model, algebra, bound, static, derivatives = self._spec
        return {"function": function.name,
                "model": cache.content_hash(model), "algebra": algebra,
                "inputs": [list(pair) for pair in zip(self.input_names, self.input_sizes)],
                "output": list(self.output_shape), "derivatives": [
                    ["reverse", *d.names] if isinstance(d, graph.Reverse) else list(d)
                    for d in derivatives],
                "bound": sorted(bound), "static": repr(static), "level": level}

    def wait(self, timeout=None):
        """Wait until the optimised code is in use (after ``optimise(wait=False)``)."""
        return self._optimised.wait(timeout)

    def __repr__(self):
        return (f"NativeProgram({self.input_names} -> {self.output_shape}, level {self.level}, "
                f"{self.source}, {self.compile_time:.3g} s)")


def _set_kernel(f, address):
    if f is not None:
        entry.set_kernel(f, address)


def level_key(key, level):
    """The disk cache's key of a program's code at ``level``: ``key`` for the optimised code,
    ``key-0`` for the first."""
    return key if level == LEVELS[-1] else f"{key}-{level}"


def _bound_key(bound):
    return tuple(sorted((k, tuple(np.asarray(v, dtype=float).reshape(-1).tolist()))
                        for k, v in bound.items()))


def key(function, model, algebra, inputs, bound, static, derivatives=()):
    """The cache key of a program (see ``cache``)."""
    return cache.key("screwdyn-native", VERSION, function.name, cache.content_hash(model),
                     algebra, tuple(inputs), _bound_key(bound), static, llvm.host(),
                     llvm.version(), sys.version_info[:2], cache.source_fingerprint(),
                     *((tuple(derivatives),) if derivatives else ()))


def get(function, model, algebra, inputs, bound=None, static=(), optimise=False,
        derivatives=()):
    """The ``NativeProgram`` of ``function`` (a ``plan.Function``) for ``model`` in ``algebra``
    with the inputs ``inputs`` (names, in call order) and constants ``bound`` ({"gravity": g});
    ``optimise``: with its optimised code; ``derivatives``: a chain of input-name tuples, the
    program of the derivatives of the result with respect to the first, of those with respect
    to the second, ... (``graph.jacobian``; output shape + one axis per link, as long as the
    named inputs' sizes added up). Raises what tracing raises where the function cannot
    be compiled (``graph.DataDependentError``, ``NotImplementedError``, ``TypeError``)."""
    bound = dict(bound or {})
    derivatives = tuple(wrt if isinstance(wrt, graph.Reverse) else tuple(wrt)
                        for wrt in derivatives)
    k = key(function, model, algebra, inputs, bound, static, derivatives)
    with _LOCK:
        program = _PROGRAMS.get(k)
        if program is None:
            program = _PROGRAMS.put(k, _make(k, function, model, algebra, tuple(inputs), bound,
                                             static, derivatives))
    if optimise:
        program.optimise(wait=True)
    return program


def _make(k, function, model, algebra, inputs, bound, static, derivatives):
    start = time.perf_counter()
    names, sizes, output = chain_signature(
        inputs, [int(np.prod(core_shape(model, name), dtype=int)) for name in inputs],
        tuple(function.output(model, *static)), derivatives)
    program = NativeProgram(k, names, sizes, output, function, model, algebra, bound, static,
                            derivatives)
    for level in reversed(LEVELS):  # the best code on disk
        obj = cache.load_object(level_key(k, level), program.description(level))
        if obj is not None:
            program._install(obj, level)
            program.source = "disk cache"
            break
    else:
        traced = trace_program(function, model, algebra, inputs, bound, static, derivatives)
        if tuple(traced.output_shape) != output:
            raise AssertionError(f"{function.name}: traced output {traced.output_shape}, "
                                 f"expected {output}")
        program.nodes = traced.count()
        obj = llvm.compile_object(llvm.kernel_ir(traced), LEVELS[0])
        cache.store_object(level_key(k, LEVELS[0]), obj, program.description(LEVELS[0]))
        program._install(obj, LEVELS[0])
        program.source = "compiled"
    program.compile_time = time.perf_counter() - start
    return program


def cotangent_name(link):
    """The name of the input that carries the cotangent of a reverse link (``graph.Reverse``),
    the ``link``-th of a chain of derivatives."""
    return f"cotangent{link}"


def chain_signature(inputs, sizes, output, derivatives):
    """(input names, their flat sizes, output shape) of the program of a function whose inputs
    are ``inputs`` (sizes ``sizes``) and output ``output``, after the chain ``derivatives``: a
    forward link (a tuple of names) adds an axis as long as their sizes added up; a reverse one
    (``graph.Reverse``) adds the cotangent input (the size of the output so far) and makes the
    output (their sizes added up,)."""
    names, sizes, output = list(inputs), list(sizes), tuple(output)
    for link, wrt in enumerate(derivatives):
        reverse = isinstance(wrt, graph.Reverse)
        size_of = dict(zip(names, sizes))
        n = sum(size_of[name] for name in (wrt.names if reverse else wrt))
        if reverse:
            names.append(cotangent_name(link))
            sizes.append(int(np.prod(output, dtype=int)))
            output = (n,)
        else:
            output = output + (n,)
    return tuple(names), sizes, output


def trace_program(function, model, algebra, inputs, bound=None, static=(), derivatives=()):
    """The ``graph.Program`` of ``function``'s kernel on one symbolic state (its derivatives
    along the chain ``derivatives``, see ``get``)."""
    bound = dict(bound or {})

    def run(**arrays):
        for name, value in bound.items():
            arrays[name] = np.asarray(value, dtype=float).reshape(core_shape(model, name))[
                ..., None]
        traced = model
        if PARAMETERS in arrays:  # symbolic inertial parameters, read as a traced model's
            traced = replace(model, parameters=TracedParameters(arrays.pop(PARAMETERS)[..., 0]),
                             _hash_cache=[])
        alg = function.algebra(algebra, trace.xp)
        call = Call(traced, algebra, alg, trace.xp, arrays)
        return function.kernel(call, *static)

    shapes = {name: core_shape(model, name) for name in inputs}
    program = trace.trace(run, shapes)
    for link, wrt in enumerate(derivatives):
        program = (graph.vjp(program, wrt.names, cotangent_name(link))
                   if isinstance(wrt, graph.Reverse) else graph.jacobian(program, wrt))
    program.guard = tuple(inputs)  # call.propagate_non_finite's rule, in the kernel (llvm)
    return program


# -- the background thread that compiles optimised code ---------------------------------------
#: the worker: its thread (None until the first optimisation is queued, and in a forked child),
#: its queue, whether the process is exiting, and the lock held while it compiles
_WORKER = {"thread": None, "queue": queue.Queue(), "stopping": False, "busy": threading.Lock()}


def in_background(job, prepare=None):
    """Run ``job()`` (a compilation of optimised code: ``NativeProgram``'s, a rollout's) in the
    background thread, behind the process's own work and one at a time; with ``prepare``,
    ``job(prepare())`` (or ``job(the exception prepare raised)``), where ``prepare`` is pure
    Python (tracing a program again, writing its IR) that the process's exit does not wait
    for, as it does not wait for the child's compilation."""
    with _LOCK:
        if _WORKER["thread"] is None:
            thread = threading.Thread(target=_work, args=(_WORKER["queue"],),
                                      name="screwdyn-optimise", daemon=True)
            _WORKER["thread"] = thread
            thread.start()
        _WORKER["queue"].put((job, prepare))


def _work(jobs):
    if hasattr(os, "setpriority"):  # behind the process's own work (Linux: per thread)
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except OSError:
            pass
    while True:
        job, prepare = jobs.get()
        try:
            made = ()
            if prepare is not None and not _WORKER["stopping"]:
                try:
                    made = (prepare(),)
                except Exception as error:  # noqa: BLE001  (the job records it)
                    made = (error,)
            with _WORKER["busy"]:
                if _WORKER["stopping"]:
                    return
                job(*made)
        finally:
            jobs.task_done()


def wait_for_optimisation():
    """Wait until every optimised code queued so far is compiled and in use (benchmarks)."""
    if _WORKER["thread"] is not None:
        _WORKER["queue"].join()


@atexit.register
def _stop():
    """At exit, drop the queue and a compilation in progress (``compiler.stop``: the child
    that compiles it is killed), then let the worker finish the job it is in (installing
    code: LLVM must not be torn down under it)."""
    _WORKER["stopping"] = True
    compiler.stop()
    with _WORKER["busy"]:
        pass


# -- fork: the child gets no thread but the one that forked -----------------------------------
def _before_fork():
    """Wait until no other thread is inside LLVM or installing code, and keep it so until the
    fork is done: the copy then holds no lock taken by a thread it will not have. The worker's
    compilations run in a child process (``compiler``), so a fork waits at most for code to be
    installed or a first code (level 0) to be compiled."""
    _LOCK.acquire()
    llvm.hold()


def _after_fork_in_parent():
    llvm.release()
    _LOCK.release()


def _after_fork_in_child():
    """The child has no worker thread: forget it, its queue and its lock (a new worker starts
    with the next program queued in the child). Programs that were waiting for their optimised
    code keep their first code, the same results in every bit; ``optimise()`` still makes it."""
    llvm.release()
    _LOCK.release()
    _WORKER.update(thread=None, queue=queue.Queue(), stopping=False, busy=threading.Lock())
    for program in _PROGRAMS.values():
        if not program._optimised.is_set():
            program._queued = False
            program._optimised = threading.Event()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)
