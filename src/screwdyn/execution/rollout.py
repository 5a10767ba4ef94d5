"""Rollouts in machine code: one traced step program, run in a loop over steps, for any number of
rollouts at once (the simulation's native backend).

The step program (``trace.trace`` of a function of one rollout's state) has the inputs ``s``
(ns: the state, flattened), ``time`` (k, dt: the step's index, as a float, and the step),
optionally ``tau`` (nv, a row of a torque table),
``params`` (the numbers shared by every rollout: the controller's gains, the contact's
parameters, flat) and ``local`` (numbers of each rollout that stay fixed over the run: the
stiffness of its limit springs, flat), and the output row [s1 (ns), sample (nr), code]: the
state after the step, what is recorded of the step's start, and a failure code (0: fine). The
loop (``driver_ir``, LLVM IR) calls the program's kernel once per step for all rollouts (its
vector loop runs them four at a time, in the same bits as one at a time), records the sample of
every ``every``-th step, and keeps each rollout's first failing step and code; Python calls it
for a chunk of samples at a time.
"""
import ctypes
import functools
import os
import struct
import threading
import time

import numpy as np

from . import cache, compiler, llvm, native, trace
from .stack import deep_call
from .store import Store

_ROLLOUTS = Store("native simulation programs")
_LOCK = threading.Lock()
_MADE_IN = struct.Struct("<d")  # a first code's entry: the seconds it took to make, then it
VERSION = 6  # 3: the disk cache holds the optimised code (level 2) only; 4: @stack_bound;
#               5: and the first code (level 0) until level 2 is made; 6: with ``made_in``


def driver_ir(ns, nr, table, params, local):
    """The loop over steps (see the module docstring) as LLVM IR, calling ``@kernel``.
    ``table``: the program takes a torque-table row; ``params``, ``local``: the sizes of those
    inputs (0: none)."""
    out = ns + nr + 1
    k_in = 2 + bool(table) + bool(params) + bool(local)
    lines = [f"""
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define void @rollout(i64 %N, i64 %k0, i64 %records, i64 %every, double %dt, ptr %s,
                     ptr %table, i64 %tstride, ptr %params, ptr %local, ptr %tmp, ptr %rec,
                     ptr %badstep, ptr %badcode) {{
entry:
  %ins = alloca [{k_in} x ptr]
  %strides = alloca [{k_in} x i64]
  %time = alloca [2 x double]
  %dtp = getelementptr double, ptr %time, i64 1
  store double %dt, ptr %dtp
  store ptr %s, ptr %ins
  %in1 = getelementptr ptr, ptr %ins, i64 1
  store ptr %time, ptr %in1
  store i64 {ns}, ptr %strides
  %st1 = getelementptr i64, ptr %strides, i64 1
  store i64 0, ptr %st1"""]
    slot = 2
    if table:
        lines.append(f"""  %st.tab = getelementptr i64, ptr %strides, i64 {slot}
  store i64 %tstride, ptr %st.tab
  %in.tab = getelementptr ptr, ptr %ins, i64 {slot}""")
        slot += 1
    for name, size, stride in (("par", params, 0), ("loc", local, local)):
        if size:
            lines.append(f"""  %st.{name} = getelementptr i64, ptr %strides, i64 {slot}
  store i64 {stride}, ptr %st.{name}
  %in.{name} = getelementptr ptr, ptr %ins, i64 {slot}
  store ptr %{'params' if name == 'par' else 'local'}, ptr %in.{name}""")
            slot += 1
    lines.append("""  br label %rec.head
rec.head:
  %i = phi i64 [ 0, %entry ], [ %i.next, %rec.latch ]
  %rdone = icmp sge i64 %i, %records
  br i1 %rdone, label %exit, label %step.head
step.head:
  %j = phi i64 [ 0, %rec.head ], [ %j.next, %step.latch ]
  %ie = mul i64 %i, %every
  %kk = add i64 %k0, %ie
  %k = add i64 %kk, %j
  %kf = sitofp i64 %k to double
  store double %kf, ptr %time""")
    if table:
        lines.append(f"""  %tk = mul i64 %k, {table}
  %trow = getelementptr double, ptr %table, i64 %tk
  store ptr %trow, ptr %in.tab""")
    lines.append(f"""  call void @kernel(i64 %N, ptr %ins, ptr %strides, ptr %tmp)
  %first = icmp eq i64 %j, 0
  br i1 %first, label %record.head, label %flags.head
record.head:
  %r1 = phi i64 [ 0, %step.head ], [ %r1.next, %record.body ]
  %r1done = icmp sge i64 %r1, %N
  br i1 %r1done, label %flags.head, label %record.body
record.body:
  %iN = mul i64 %i, %N
  %row = add i64 %iN, %r1
  %ro = mul i64 %row, {nr}
  %to = mul i64 %r1, {out}
  %to.s = add i64 %to, {ns}
  %dst.r = getelementptr double, ptr %rec, i64 %ro
  %src.r = getelementptr double, ptr %tmp, i64 %to.s
  call void @llvm.memcpy.p0.p0.i64(ptr %dst.r, ptr %src.r, i64 {8 * nr}, i1 false)
  %r1.next = add i64 %r1, 1
  br label %record.head
flags.head:
  %r2 = phi i64 [ 0, %step.head ], [ 0, %record.head ], [ %r2.next, %flags.latch ]
  %r2done = icmp sge i64 %r2, %N
  br i1 %r2done, label %step.latch, label %flags.body
flags.body:
  %to2 = mul i64 %r2, {out}
  %co = add i64 %to2, {out - 1}
  %code.p = getelementptr double, ptr %tmp, i64 %co
  %code = load double, ptr %code.p
  %bs.p = getelementptr i64, ptr %badstep, i64 %r2
  %bs = load i64, ptr %bs.p
  %fine = fcmp oeq double %code, 0.0
  %known = icmp sge i64 %bs, 0
  %skip = or i1 %fine, %known
  br i1 %skip, label %copy, label %mark
mark:
  store i64 %k, ptr %bs.p
  %codei = fptosi double %code to i64
  %bc.p = getelementptr i64, ptr %badcode, i64 %r2
  store i64 %codei, ptr %bc.p
  br label %copy
copy:
  %ss2 = mul i64 %r2, {ns}
  %dst.s2 = getelementptr double, ptr %s, i64 %ss2
  %src.s2 = getelementptr double, ptr %tmp, i64 %to2
  call void @llvm.memcpy.p0.p0.i64(ptr %dst.s2, ptr %src.s2, i64 {8 * ns}, i1 false)
  br label %flags.latch
flags.latch:
  %r2.next = add i64 %r2, 1
  br label %flags.head
step.latch:
  %j.next = add i64 %j, 1
  %jdone = icmp sge i64 %j.next, %every
  br i1 %jdone, label %rec.latch, label %step.head
rec.latch:
  %i.next = add i64 %i, 1
  br label %rec.head
exit:
  ret void
}}""")
    return "\n".join(lines) + "\n"


_DRIVER = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                           ctypes.c_double, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                           *([ctypes.c_void_p] * 6))


class NativeRollout:
    """A compiled step program with its loop (see the module docstring). ``compile_time``
    (seconds to trace and compile the first code, or to load code from the disk cache),
    ``source``, ``level`` (LLVM's code generation level of the code in use: 0 or 2),
    ``optimise_time`` (seconds to compile level 2 in this process, None until done), ``stack``
    (bytes of stack a call may take, ``llvm.stack_bound``: more than the calling thread has,
    ``stack.room``, and each call runs on a thread with a stack that large, ``stack.deep_call``).

    Tiers, as a function's code (``native.NativeProgram``): a freshly traced step program is
    first compiled at level 0 (ANYmal with its 492 collision points: 3 s, where level 2 takes
    30 s), and once the rollout has run as long as that first code took to make (``running``
    reaches ``made_in``: ``compile_time``, or for a first code from the disk cache the seconds
    it took in the process that made it), level 2 (up to 1.6x faster steps) is compiled (by a child
    process, ``compiler``) for the background thread and used from the next call on. The disk
    cache keeps the first code until level 2 is made, then level 2: a process that ends
    before then leaves the next one its first code, which it loads instead of tracing and
    compiling, and traces the program again only to make level 2 (``ir``: a function that
    returns the program's IR; ``store``: (key, description, folder) of level 2's entry). Both
    levels compute the same bits (no fast-math), so the switch changes no result."""

    def __init__(self, obj, level, ns, nr, table, params, local, source, seconds, ir=None,
                 store=None, made_in=None):
        self.ns, self.nr, self.table, self.params, self.local = ns, nr, table, params, local
        self.source, self.compile_time = source, seconds
        self.made_in = seconds if made_in is None else made_in
        self.optimise_time, self.error, self.running = None, None, 0.0
        self._libraries = []  # every code loaded stays loaded: a call may be running it
        self._ir = ir if level < 2 else None  # for level 2: dropped once it is made
        self._store = store
        self._queued, self._compiling = self._ir is None, threading.Lock()
        self._install(obj, level)

    def _install(self, obj, level):
        library = llvm.Library(obj)
        driver = _DRIVER(library.address("rollout"))
        self._libraries.append(library)
        self._driver, self.level, self.stack = driver, level, library.stack_bound()

    def optimise(self, wait=True):
        """Compile the optimised code (level 2) and use it from the next call: now (``wait``)
        or in the background thread. Returns self."""
        if wait:
            self._compile_optimised()
        elif not self._queued:
            self._queued = True
            native.in_background(self._compile_optimised, self._source)
        return self

    def _source(self):
        """The program's IR for level 2 (None once level 2 is made)."""
        with self._compiling:
            return None if self._ir is None else self._ir()

    def _compile_optimised(self, ir=None):
        """Compile level 2 from ``ir`` (``_source``'s IR, or the error it raised; None: make it
        now), keep it in the disk cache and use it."""
        with self._compiling:
            if self._ir is None:  # made already (or loaded optimised)
                return
            start = time.perf_counter()
            try:
                if isinstance(ir, Exception):
                    raise ir
                obj = compiler.optimised_object(self._ir() if ir is None else ir)
                if self._store is not None:
                    key, about, folder = self._store
                    cache.store_object(key, obj, about, folder=folder,
                                       replaces=native.level_key(key, 0))
                self._install(obj, 2)
                self.optimise_time = time.perf_counter() - start
            except Exception as error:  # noqa: BLE001  (the first code stays in use)
                self.error = error
            finally:
                self._ir, self._queued = None, True

    def run(self, s, k0, records, every, dt, table=None, params=None, local=None):
        """Advance the states s (N, ns) (float64, C-contiguous, in place) by ``records * every``
        steps from step ``k0``; returns the samples (records, N, nr) of steps k0, k0 + every,
        ... and each rollout's first failing step and code (-1 and 0 where none) in this call.
        ``table``: (steps, nv), or (N, steps, nv), float64 C-contiguous; ``params``: the shared
        numbers (params,); ``local``: each rollout's numbers (N, local)."""
        N = s.shape[0]
        tmp = np.empty((N, self.ns + self.nr + 1))
        rec = np.empty((records, N, self.nr))
        bad_step, bad_code = np.full(N, -1, dtype=np.int64), np.zeros(N, dtype=np.int64)
        tstride = table.shape[-2] * table.shape[-1] if table is not None and table.ndim == 3 \
            else 0
        arrays = [None if a is None else np.ascontiguousarray(a, dtype=np.float64)
                  for a in (table, params, local)]
        pointer = (lambda a: None if a is None else a.ctypes.data)
        start = time.perf_counter()
        deep_call(self.stack, self._driver, N, k0, records, every, float(dt), s.ctypes.data,
                  pointer(arrays[0]), tstride, pointer(arrays[1]), pointer(arrays[2]),
                  tmp.ctypes.data, rec.ctypes.data, bad_step.ctypes.data, bad_code.ctypes.data)
        if not self._queued:  # the first code: optimise once it has run as long as it took
            self.running += time.perf_counter() - start
            if self.running >= self.made_in:
                self.optimise(wait=False)
        return rec, bad_step, bad_code


def _after_fork_in_child():
    """The child has no worker thread (``native``): a rollout whose level 2 was being made
    there keeps its first code (the same bits), with a fresh lock that no thread holds, and
    ``optimise`` makes level 2 again in the child. Before, a child's ``optimise_all()`` waited
    for ever on the lock of a compilation it did not have."""
    for rollout in _ROLLOUTS.values():
        rollout._compiling = threading.Lock()
        if rollout._ir is not None:
            rollout._queued = False


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def optimise_all():
    """Compile the optimised code of every rollout in this process's memory that runs its
    first code, and use it (benchmarks: the timed runs then run the code a long run gets)."""
    for rollout in list(_ROLLOUTS.values()):
        rollout.optimise(wait=True)


def get(key, memory_key, ns, nr, table, params, local, step, vector=True):
    """The ``NativeRollout`` of ``step``: from memory (``memory_key``, any hashable), from the
    disk cache (``key``, a content description valid in every process, or None where there is
    none: a plain Python controller; its optimised code, else its first), or by tracing
    ``step(**inputs)`` (a function of SymArrays s (ns, 1), time (2, 1), tau (table, 1) if
    ``table`` (the width of a table row, 0: none), params (params, 1) if ``params`` > 0, local
    (local, 1) if ``local`` > 0, returning the output row (ns + nr + 1, 1)) and compiling it.
    ``vector``: with the kernel's vector loop (for batches of rollouts; one rollout needs none,
    and compiles in half the time without)."""
    width = llvm.vector_width() if vector else 1
    memory_key = (memory_key, width)
    with _LOCK:
        rollout = _ROLLOUTS.get(memory_key)
        if rollout is not None:
            return rollout
        start = time.perf_counter()
        disk_key = None
        if key is not None:
            try:
                disk_key = cache.key("screwdyn-rollout", VERSION, key, width, llvm.host(),
                                     llvm.version(), cache.source_fingerprint())
            except TypeError:  # something in the key has no content hash (a plain function)
                disk_key = None
        about = {"program": "rollout", "state": ns, "record": nr, "table": table,
                 "params": params, "local": local, "width": width}

        def source():  # the program's IR: traced now, or for level 2 if loaded
            shapes = {"s": (ns,), "time": (2,)}
            for name, size in (("tau", table), ("params", params), ("local", local)):
                if size:
                    shapes[name] = (size,)
            program = trace.trace(step, shapes)
            if program.output_shape != (ns + nr + 1,):
                raise ValueError(f"the step program returns shape {program.output_shape}, "
                                 f"expected ({ns + nr + 1},)")
            return llvm.with_stack_bound(llvm.kernel_ir(program, width=width)
                                         + driver_ir(ns, nr, table, params, local))

        store = disk_key and (disk_key, dict(about, level=2), cache.directory())  # level 2's
        for level in (2, 0) if disk_key else ():  # the best code on disk
            obj = cache.load_object(native.level_key(disk_key, level), dict(about, level=level))
            if obj is not None:
                made_in = None
                if level == 0:  # the seconds it took to make, then the code
                    (made_in,), obj = _MADE_IN.unpack_from(obj), obj[_MADE_IN.size:]
                rollout = NativeRollout(obj, level, ns, nr, table, params, local, "disk cache",
                                        time.perf_counter() - start,
                                        ir=functools.cache(source),  # traced once, if at all
                                        store=store, made_in=made_in)
                break
        else:
            ir = source()
            obj = llvm.compile_object(ir, 0)
            seconds = time.perf_counter() - start
            if disk_key:
                cache.store_object(native.level_key(disk_key, 0), _MADE_IN.pack(seconds) + obj,
                                   dict(about, level=0))
            rollout = NativeRollout(obj, 0, ns, nr, table, params, local, "compiled", seconds,
                                    ir=lambda: ir, store=store)
        return _ROLLOUTS.put(memory_key, rollout)
