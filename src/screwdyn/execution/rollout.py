"""Rollouts in machine code: one traced step program, run in a loop over steps, for any number of
rollouts at once (the simulation's native backend).

The step program (``trace.trace`` of a function of one state) has the inputs ``q`` (nq), ``qd``
(nv), ``time`` (t, dt), optionally ``tau`` (nv, a row of a torque table) and ``params`` (the
controller's gains, flat), and the output row [q1 (nq), qd1 (nv), qdd (nv), tau (nv), code]:
the state after the step, the acceleration and joint forces at its start, and a failure code
(0: fine). The loop (``driver_ir``, LLVM IR) calls the program's kernel once per step for all
rollouts (its vector loop runs them four at a time, in the same bits as one at a time), records
every ``every``-th state with its acceleration and joint forces, and keeps each rollout's first
failing step and code; Python calls it for a chunk of samples at a time.
"""
import ctypes
import threading
import time

import numpy as np

from . import cache, llvm, trace

_ROLLOUTS = {}
_LOCK = threading.Lock()
VERSION = 1


def driver_ir(nq, nv, table, params):
    """The loop over steps (see the module docstring) as LLVM IR, calling ``@kernel``."""
    out = nq + 3 * nv + 1
    k_in = 3 + bool(table) + bool(params)
    lines = [f"""
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)

define void @rollout(i64 %N, i64 %k0, i64 %records, i64 %every, double %dt, ptr %q, ptr %qd,
                     ptr %table, i64 %tstride, ptr %params, ptr %tmp, ptr %rq, ptr %rqd,
                     ptr %rqdd, ptr %rtau, ptr %badstep, ptr %badcode) {{
entry:
  %ins = alloca [{k_in} x ptr]
  %strides = alloca [{k_in} x i64]
  %time = alloca [2 x double]
  %dtp = getelementptr double, ptr %time, i64 1
  store double %dt, ptr %dtp
  store ptr %q, ptr %ins
  %in1 = getelementptr ptr, ptr %ins, i64 1
  store ptr %qd, ptr %in1
  %in2 = getelementptr ptr, ptr %ins, i64 2
  store ptr %time, ptr %in2
  store i64 {nq}, ptr %strides
  %st1 = getelementptr i64, ptr %strides, i64 1
  store i64 {nv}, ptr %st1
  %st2 = getelementptr i64, ptr %strides, i64 2
  store i64 0, ptr %st2"""]
    slot = 3
    if table:
        lines.append(f"""  %st.tab = getelementptr i64, ptr %strides, i64 {slot}
  store i64 %tstride, ptr %st.tab
  %in.tab = getelementptr ptr, ptr %ins, i64 {slot}""")
        slot += 1
    if params:
        lines.append(f"""  %st.par = getelementptr i64, ptr %strides, i64 {slot}
  store i64 0, ptr %st.par
  %in.par = getelementptr ptr, ptr %ins, i64 {slot}
  store ptr %params, ptr %in.par""")
    lines.append(f"""  br label %rec.head
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
  %t = fmul double %kf, %dt
  store double %t, ptr %time""")
    if table:
        lines.append(f"""  %tk = mul i64 %k, {nv}
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
  %qo = mul i64 %row, {nq}
  %vo = mul i64 %row, {nv}
  %qs = mul i64 %r1, {nq}
  %vs = mul i64 %r1, {nv}
  %to = mul i64 %r1, {out}
  %dst.q = getelementptr double, ptr %rq, i64 %qo
  %src.q = getelementptr double, ptr %q, i64 %qs
  call void @llvm.memcpy.p0.p0.i64(ptr %dst.q, ptr %src.q, i64 {8 * nq}, i1 false)
  %dst.qd = getelementptr double, ptr %rqd, i64 %vo
  %src.qd = getelementptr double, ptr %qd, i64 %vs
  call void @llvm.memcpy.p0.p0.i64(ptr %dst.qd, ptr %src.qd, i64 {8 * nv}, i1 false)
  %dst.qdd = getelementptr double, ptr %rqdd, i64 %vo
  %to.qdd = add i64 %to, {nq + nv}
  %src.qdd = getelementptr double, ptr %tmp, i64 %to.qdd
  call void @llvm.memcpy.p0.p0.i64(ptr %dst.qdd, ptr %src.qdd, i64 {8 * nv}, i1 false)
  %dst.tau = getelementptr double, ptr %rtau, i64 %vo
  %to.tau = add i64 %to, {nq + 2 * nv}
  %src.tau = getelementptr double, ptr %tmp, i64 %to.tau
  call void @llvm.memcpy.p0.p0.i64(ptr %dst.tau, ptr %src.tau, i64 {8 * nv}, i1 false)
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
  %qs2 = mul i64 %r2, {nq}
  %vs2 = mul i64 %r2, {nv}
  %dst.q2 = getelementptr double, ptr %q, i64 %qs2
  %src.q2 = getelementptr double, ptr %tmp, i64 %to2
  call void @llvm.memcpy.p0.p0.i64(ptr %dst.q2, ptr %src.q2, i64 {8 * nq}, i1 false)
  %dst.qd2 = getelementptr double, ptr %qd, i64 %vs2
  %to2v = add i64 %to2, {nq}
  %src.qd2 = getelementptr double, ptr %tmp, i64 %to2v
  call void @llvm.memcpy.p0.p0.i64(ptr %dst.qd2, ptr %src.qd2, i64 {8 * nv}, i1 false)
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
                           ctypes.c_double, *([ctypes.c_void_p] * 3), ctypes.c_int64,
                           *([ctypes.c_void_p] * 8))


class NativeRollout:
    """A compiled step program with its loop (see the module docstring). ``compile_time``
    (seconds to trace and compile, or to load from the disk cache), ``source``."""

    def __init__(self, obj, nq, nv, table, params, source, seconds):
        self.nq, self.nv, self.table, self.params = nq, nv, table, params
        self.source, self.compile_time = source, seconds
        self._library = llvm.Library(obj)
        self._driver = _DRIVER(self._library.address("rollout"))

    def run(self, q, qd, k0, records, every, dt, table=None, params=None):
        """Advance the states q (N, nq) and qd (N, nv) (float64, C-contiguous, in place) by
        ``records * every`` steps from step ``k0``; returns the samples (records, N, ...) of q,
        qd, qdd, tau at steps k0, k0 + every, ... and each rollout's first failing step and
        code (-1 and 0 where none) in this call. ``table``: (steps, nv), or (N, steps, nv);
        ``params``: the flat gains."""
        N, nq, nv = q.shape[0], self.nq, self.nv
        out = nq + 3 * nv + 1
        tmp = np.empty((N, out))
        rec = [np.empty((records, N, n)) for n in (nq, nv, nv, nv)]
        bad_step, bad_code = np.full(N, -1, dtype=np.int64), np.zeros(N, dtype=np.int64)
        tstride = 0
        if table is not None:
            table = np.ascontiguousarray(table, dtype=np.float64)
            tstride = table.shape[-2] * nv if table.ndim == 3 else 0
        if params is not None:
            params = np.ascontiguousarray(params, dtype=np.float64)
        pointer = (lambda a: None if a is None else a.ctypes.data)
        self._driver(N, k0, records, every, float(dt), q.ctypes.data, qd.ctypes.data,
                     pointer(table), tstride, pointer(params), tmp.ctypes.data,
                     *(a.ctypes.data for a in rec), bad_step.ctypes.data, bad_code.ctypes.data)
        return rec, bad_step, bad_code


def get(key, memory_key, nq, nv, table, params, step, vector=True):
    """The ``NativeRollout`` of ``step``: from memory (``memory_key``, any hashable), from the
    disk cache (``key``, a content description valid in every process, or None where there is
    none: a plain Python controller), or by tracing ``step(**inputs)`` (a function of SymArrays
    q (nq, 1), qd (nv, 1), time (2, 1), tau (nv, 1) if ``table``, params (params, 1) if
    ``params`` > 0, returning the output row (nq + 3 nv + 1, 1)) and compiling it. ``vector``:
    with the kernel's vector loop (for batches of rollouts; one rollout needs none, and compiles
    in half the time without)."""
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
        obj = cache.load_object(disk_key) if disk_key else None
        source = "disk cache"
        if obj is None:
            shapes = {"q": (nq,), "qd": (nv,), "time": (2,)}
            if table:
                shapes["tau"] = (nv,)
            if params:
                shapes["params"] = (params,)
            program = trace.trace(step, shapes)
            ir = llvm.kernel_ir(program, width=width) + driver_ir(
                nq, nv, table, params)
            obj = llvm.compile_object(ir, 2)
            if disk_key:
                cache.store_object(disk_key, obj)
            source = "compiled"
        rollout = NativeRollout(obj, nq, nv, table, params, source, time.perf_counter() - start)
        if len(_ROLLOUTS) > 64:  # controllers made afresh for every call would pile up
            _ROLLOUTS.clear()
        _ROLLOUTS[memory_key] = rollout
        return rollout
