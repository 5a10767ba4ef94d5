"""Native programs: a public function, for one model, algebra and set of inputs, as machine code.

``get(function, model, algebra, inputs, bound)`` returns a ``NativeProgram``, from (in order)
this process's memory, the disk cache (``cache``), or by tracing the function's recursion
(``trace``), generating LLVM IR (``llvm``) and compiling it. A program computes one state per row:
inputs are rows of the public layout (q (nq,), qd (nv,), ..., f_ext flattened to nlinks * 6), the
result a row of the function's output shape.

The program's key holds everything its code depends on (see ``cache``), so programs are never
reused across models, library sources, LLVM versions or CPUs.
"""
import sys
import threading
import time

import numpy as np

from . import cache, entry, llvm, trace
from .call import Call, core_shape

VERSION = 1  # of the program format (bump when the kernel's calling convention changes)
_PROGRAMS = {}
_LOCK = threading.Lock()


class NativeProgram:
    """Machine code for one (function, model, algebra, inputs, bound constants).

    ``input_names``, ``input_sizes`` (flat sizes per state), ``output_shape`` (per state),
    ``compile_time`` (seconds spent making it in this process: tracing and compiling, or
    loading from the disk cache), ``source`` ("compiled" or "disk cache"), ``nodes`` (the live
    operations by kind, when it was traced in this process), ``key`` (the cache key).
    ``call(arrays, out, n)`` runs it through ctypes; ``bind(fallback)`` gives the fast Python
    entry (``entry``)."""

    def __init__(self, key, library, input_names, input_sizes, output_shape, source, seconds,
                 nodes=None):
        self.key, self._library = key, library
        self.input_names, self.input_sizes = tuple(input_names), tuple(input_sizes)
        self.output_shape = tuple(output_shape)
        self.source, self.compile_time, self.nodes = source, seconds, nodes
        self.address = library.address("kernel")
        self.call = entry.caller(self.address)

    def bind(self, fallback):
        """The fast callable (``entry.bind``), or None where the fast entry is unavailable."""
        return entry.bind(self.address, self.input_sizes, self.output_shape, fallback, self)

    def __repr__(self):
        return (f"NativeProgram({self.input_names} -> {self.output_shape}, {self.source}, "
                f"{self.compile_time:.3g} s)")


def _bound_key(bound):
    return tuple(sorted((k, tuple(np.asarray(v, dtype=float).reshape(-1).tolist()))
                        for k, v in bound.items()))


def key(function, model, algebra, inputs, bound, static):
    """The cache key of a program (see ``cache``)."""
    return cache.key("screwdyn-native", VERSION, function.name, cache.content_hash(model),
                     algebra, tuple(inputs), _bound_key(bound), static, llvm.host(),
                     llvm.version(), sys.version_info[:2], cache.source_fingerprint())


def get(function, model, algebra, inputs, bound=None, static=()):
    """The ``NativeProgram`` of ``function`` (a ``plan.Function``) for ``model`` in ``algebra``
    with the inputs ``inputs`` (names, in call order) and constants ``bound`` ({"gravity": g}).
    Raises what tracing raises where the function cannot be compiled (``graph.DataDependentError``,
    ``NotImplementedError``, ``TypeError``)."""
    bound = dict(bound or {})
    k = key(function, model, algebra, inputs, bound, static)
    program = _PROGRAMS.get(k)
    if program is not None:
        return program
    with _LOCK:
        program = _PROGRAMS.get(k)
        if program is None:
            program = _make(k, function, model, algebra, tuple(inputs), bound, static)
            _PROGRAMS[k] = program
    return program


def _make(k, function, model, algebra, inputs, bound, static):
    start = time.perf_counter()
    sizes = [int(np.prod(core_shape(model, name), dtype=int)) for name in inputs]
    output = tuple(function.output(model, *static))
    obj = cache.load_object(k)
    nodes = None
    if obj is None:
        program = trace_program(function, model, algebra, inputs, bound, static)
        if tuple(program.output_shape) != output:
            raise AssertionError(f"{function.name}: traced output {program.output_shape}, "
                                 f"expected {output}")
        nodes = program.count()
        obj = cache.store_object(k, llvm.compile_object(llvm.kernel_ir(program)))
        source = "compiled"
    else:
        source = "disk cache"
    library = llvm.Library(obj)
    return NativeProgram(k, library, inputs, sizes, output, source,
                         time.perf_counter() - start, nodes)


def trace_program(function, model, algebra, inputs, bound=None, static=()):
    """The ``graph.Program`` of ``function``'s kernel on one symbolic state."""
    bound = dict(bound or {})

    def run(**arrays):
        for name, value in bound.items():
            arrays[name] = np.asarray(value, dtype=float).reshape(core_shape(model, name))[
                ..., None]
        alg = function.algebra(algebra, trace.xp)
        call = Call(model, algebra, alg, trace.xp, arrays)
        return function.kernel(call, *static)

    shapes = {name: core_shape(model, name) for name in inputs}
    return trace.trace(run, shapes)

