"""Native programs inside XLA: the JAX path on the CPU, as XLA custom calls.

A ``graph.Program`` (one state of a public function, traced from its recursion, ``native``)
becomes a JAX operation: its machine code (``llvm``) is called by XLA through the FFI (XLA's
stable C interface for custom calls, ``jax.ffi``), with a small handler generated here in LLVM
IR that reads XLA's call frame and calls the program's batched kernel. So a public function
called on JAX arrays, or traced by ``jax.jit``, ``jax.vmap`` or ``jax.grad``, lowers to one
custom call instead of the thousands of scalar operations of its recursion: XLA compiles in
milliseconds whatever the batch size and however the file writes its numbers, and the call runs
the library's own program.

Transformations:

- ``jax.vmap``: the custom call's batching rule (``vmap_method="broadcast_all"``): every input
  is given the mapped axes, and the kernel runs one state per row of the flattened batch;
- ``jax.jvp`` and everything built on it (``grad``, ``jacfwd``, ``jacrev``, ``hessian``): a
  ``jax.custom_jvp`` whose tangent is J t, with J = the program of the derivatives of the outputs
  with respect to the inputs whose tangents are not zero (``graph.jacobian``, forward mode on the
  traced program), itself an ``Op``: derivatives of any order, each program compiled on first
  use. J t is a linear JAX expression, so JAX transposes it for reverse mode.

The handler follows XLA's FFI C API (``xla/ffi/api/c_api.h``, the header jaxlib ships): it
answers XLA's metadata query with the API version of the installed header, ignores the stages
before execution, and on execution reads the buffers' data and dimensions: the number of states
is the output's size over one state's, an input of one state's size is broadcast (stride 0).
Layouts of the C structs are those of the LP64 ABI (x86-64 and AArch64 Linux and macOS).
"""
import ctypes
import functools
import itertools
import os
import re
import threading

import numpy as np

from .. import _backend
from . import llvm

_LOCK = threading.RLock()
#: derivative programs of at most this many nodes get their optimised code too (in the
#: background, as every function's own program does): the Panda's are 10,000 to 150,000 (twice
#: as fast optimised); a 100-link chain's Jacobian of ID, 1.5 million, would keep the background
#: thread busy for minutes (and a process's exit waits for a compilation in progress)
OPTIMISE_DERIVATIVES_UP_TO = 200_000
_COUNTER = itertools.count()

# byte offsets in XLA's FFI structs (c_api.h, LP64)
_FRAME_EXTENSION, _FRAME_STAGE, _FRAME_ARGS, _FRAME_RETS = 8, 32, 72, 112
_EXTENSION_TYPE, _EXTENSION_METADATA = 8, 24
_BUFFER_DATA, _BUFFER_RANK, _BUFFER_DIMS = 24, 32, 40
_STAGE_EXECUTE, _EXTENSION_IS_METADATA = 3, 1


@functools.lru_cache(maxsize=None)
def available():
    """True where XLA custom calls of native programs can run: jax.ffi, llvmlite, a 64-bit
    x86-64 or AArch64 CPU (the struct layouts above)."""
    if not llvm.available() or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    try:
        import jax.ffi  # noqa: F401
    except ImportError:
        return False
    return api_version() is not None


@functools.lru_cache(maxsize=None)
def api_version():
    """(major, minor) of the FFI C API in jaxlib's header, or None where it is not shipped."""
    try:
        import jax.ffi

        header = os.path.join(jax.ffi.include_dir(), "xla", "ffi", "api", "c_api.h")
        with open(header) as f:
            text = f.read()
    except (OSError, AttributeError, ImportError):
        return None
    major = re.search(r"#define\s+XLA_FFI_API_MAJOR\s+(\d+)", text)
    minor = re.search(r"#define\s+XLA_FFI_API_MINOR\s+(\d+)", text)
    if not (major and minor):
        return None
    return int(major.group(1)), int(minor.group(1))


def handler_ir(input_sizes, output_size):
    """LLVM IR of the FFI handler ``handler`` and of the global ``kernel_pointer`` it calls the
    kernel through (``llvm.kernel_ir``'s ``kernel(n, inputs, strides, out)``; set by
    ``NativeProgram.watch`` to the code in use, first code, then optimised), for inputs of
    ``input_sizes`` doubles per state and an output of ``output_size``."""
    major, minor = api_version()
    k = max(len(input_sizes), 1)
    lines = [
        "@kernel_pointer = global ptr null",
        "define ptr @handler(ptr %frame) nounwind {",
        "entry:",
        f"  %ext.p = getelementptr i8, ptr %frame, i64 {_FRAME_EXTENSION}",
        "  %ext = load ptr, ptr %ext.p",
        "  %has.ext = icmp ne ptr %ext, null",
        "  br i1 %has.ext, label %ext.type, label %stage",
        "ext.type:",
        f"  %type.p = getelementptr i8, ptr %ext, i64 {_EXTENSION_TYPE}",
        "  %type = load i32, ptr %type.p",
        f"  %is.meta = icmp eq i32 %type, {_EXTENSION_IS_METADATA}",
        "  br i1 %is.meta, label %metadata, label %stage",
        "metadata:",  # XLA_FFI_Metadata: struct_size, api_version {size, ext, major, minor}, traits
        f"  %meta.p = getelementptr i8, ptr %ext, i64 {_EXTENSION_METADATA}",
        "  %meta = load ptr, ptr %meta.p",
        "  %v.size = getelementptr i8, ptr %meta, i64 8",
        "  store i64 24, ptr %v.size",
        "  %v.ext = getelementptr i8, ptr %meta, i64 16",
        "  store ptr null, ptr %v.ext",
        "  %v.major = getelementptr i8, ptr %meta, i64 24",
        f"  store i32 {major}, ptr %v.major",
        "  %v.minor = getelementptr i8, ptr %meta, i64 28",
        f"  store i32 {minor}, ptr %v.minor",
        "  %traits = getelementptr i8, ptr %meta, i64 32",
        "  store i32 0, ptr %traits",
        "  ret ptr null",
        "stage:",
        f"  %stage.p = getelementptr i8, ptr %frame, i64 {_FRAME_STAGE}",
        "  %stage.v = load i32, ptr %stage.p",
        f"  %run = icmp eq i32 %stage.v, {_STAGE_EXECUTE}",
        "  br i1 %run, label %execute, label %done",
        "execute:",
        f"  %ins = alloca [{k} x ptr]",
        f"  %strides = alloca [{k} x i64]",
        f"  %args.p = getelementptr i8, ptr %frame, i64 {_FRAME_ARGS}",
        "  %args = load ptr, ptr %args.p",
        f"  %rets.p = getelementptr i8, ptr %frame, i64 {_FRAME_RETS}",
        "  %rets = load ptr, ptr %rets.p",
        "  %ret0 = load ptr, ptr %rets",
    ]
    lines += _buffer("out", "%ret0")
    lines += [f"  %n = udiv i64 %out.count, {max(output_size, 1)}"]
    for j, size in enumerate(input_sizes):
        lines += [f"  %arg{j}.p = getelementptr ptr, ptr %args, i64 {j}",
                  f"  %arg{j} = load ptr, ptr %arg{j}.p"]
        lines += _buffer(f"in{j}", f"%arg{j}")
        lines += [f"  %one{j} = icmp eq i64 %in{j}.count, {size}",
                  f"  %stride{j} = select i1 %one{j}, i64 0, i64 {size}",
                  f"  %ins{j} = getelementptr ptr, ptr %ins, i64 {j}",
                  f"  store ptr %in{j}.data, ptr %ins{j}",
                  f"  %strides{j} = getelementptr i64, ptr %strides, i64 {j}",
                  f"  store i64 %stride{j}, ptr %strides{j}"]
    lines += ["  %kernel = load ptr, ptr @kernel_pointer",
              "  call void %kernel(i64 %n, ptr %ins, ptr %strides, ptr %out.data)",
              "  br label %done",
              "done:",
              "  ret ptr null",
              "}"]
    return "\n".join(lines) + "\n"


def _buffer(tag, pointer):
    """IR reading an XLA_FFI_Buffer: %tag.data and %tag.count (the product of its dims)."""
    return [f"  br label %{tag}.pre",
            f"{tag}.pre:",
            f"  %{tag}.data.p = getelementptr i8, ptr {pointer}, i64 {_BUFFER_DATA}",
            f"  %{tag}.data = load ptr, ptr %{tag}.data.p",
            f"  %{tag}.rank.p = getelementptr i8, ptr {pointer}, i64 {_BUFFER_RANK}",
            f"  %{tag}.rank = load i64, ptr %{tag}.rank.p",
            f"  %{tag}.dims.p = getelementptr i8, ptr {pointer}, i64 {_BUFFER_DIMS}",
            f"  %{tag}.dims = load ptr, ptr %{tag}.dims.p",
            f"  %{tag}.any = icmp sgt i64 %{tag}.rank, 0",
            f"  br i1 %{tag}.any, label %{tag}.loop, label %{tag}.end",
            f"{tag}.loop:",
            f"  %{tag}.i = phi i64 [ 0, %{tag}.pre ], [ %{tag}.i1, %{tag}.loop ]",
            f"  %{tag}.c = phi i64 [ 1, %{tag}.pre ], [ %{tag}.c1, %{tag}.loop ]",
            f"  %{tag}.d.p = getelementptr i64, ptr %{tag}.dims, i64 %{tag}.i",
            f"  %{tag}.d = load i64, ptr %{tag}.d.p",
            f"  %{tag}.c1 = mul i64 %{tag}.c, %{tag}.d",
            f"  %{tag}.i1 = add i64 %{tag}.i, 1",
            f"  %{tag}.more = icmp slt i64 %{tag}.i1, %{tag}.rank",
            f"  br i1 %{tag}.more, label %{tag}.loop, label %{tag}.end",
            f"{tag}.end:",
            f"  %{tag}.count = phi i64 [ 1, %{tag}.pre ], [ %{tag}.c1, %{tag}.loop ]"]


class Op:
    """A native program (``native.NativeProgram``, made by ``make(derivatives)``) as a JAX
    operation on rows: ``op.call(*rows)`` with ``rows[k]`` of shape batch + (input_sizes[k],), all
    of one batch shape, returns batch + output_shape (float64). Differentiable to any order
    (``derivative``); every program compiled on first use (and loaded from the disk cache).
    A function's own program is optimised in the background once registered (the vector loop
    for batches, ``native``); derivative programs, which grow with the number of inputs
    differentiated, too up to ``OPTIMISE_DERIVATIVES_UP_TO`` nodes."""

    def __init__(self, make, derivatives=()):
        self._make, self.derivatives = make, tuple(derivatives)
        self._native = None
        self._target = None
        self._derivative_ops = {}
        self.call = _differentiable(self)

    @property
    def native(self):
        if self._native is None:
            self._native = self._make(self.derivatives)
        return self._native

    def target(self):
        """The name of the FFI target (registered on first use); the program's optimised code
        is compiled in the background and replaces the first code in the handler."""
        with _LOCK:
            if self._target is None:
                program = self.native
                name = f"screwdyn_{next(_COUNTER)}"
                ir = handler_ir(program.input_sizes,
                                int(np.prod(program.output_shape, dtype=int)))
                library = llvm.Library(llvm.compile_object(ir, 0))
                pointer = ctypes.c_void_p.from_address(library.address("kernel_pointer"))
                program.watch(lambda address: setattr(pointer, "value", address))
                self._library = library  # its code and the pointer stay alive with the Op
                handler = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(
                    library.address("handler"))
                import jax.ffi

                jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(handler), platform="cpu")
                _backend.tune_allocator()  # results of batches: glibc keeps their memory mapped
                self._handler = handler
                self._target = name
                size = sum((program.nodes or {}).values())
                if not self.derivatives or 0 < size <= OPTIMISE_DERIVATIVES_UP_TO:
                    program.optimise(wait=False)
            return self._target

    def derivative(self, wrt):
        """The ``Op`` of the derivatives of this one's result with respect to the inputs
        ``wrt`` (names): output shape + (their sizes added up,)."""
        with _LOCK:
            op = self._derivative_ops.get(wrt)
            if op is None:
                op = self._derivative_ops[wrt] = Op(self._make, self.derivatives + (wrt,))
            return op

    def primal(self, *rows):
        import jax
        import jax.numpy as jnp

        program = self.native
        batch = rows[0].shape[:-1] if rows else ()
        shape = jax.ShapeDtypeStruct(tuple(batch) + program.output_shape, jnp.float64)
        return jax.ffi.ffi_call(self.target(), shape, vmap_method="broadcast_all")(*rows)


def _differentiable(op):
    import jax
    import jax.numpy as jnp
    from jax.custom_derivatives import SymbolicZero

    @jax.custom_jvp
    def call(*rows):
        return op.primal(*rows)

    def jvp(primals, tangents):
        y = call(*primals)
        names = op.native.input_names
        live = [k for k, t in enumerate(tangents) if not isinstance(t, SymbolicZero)]
        if not live:
            return y, jnp.zeros_like(y)
        J = op.derivative(tuple(names[k] for k in live)).call(*primals)
        t = jnp.concatenate([jnp.broadcast_to(tangents[k], primals[k].shape) for k in live],
                            axis=-1)
        batch = y.shape[:y.ndim - len(op.native.output_shape)]
        J = J.reshape(batch + (-1, t.shape[-1]))
        # a product and a sum, not a dot: XLA fuses them into one loop (a dot of (9, 90) went to
        # Eigen's threaded contraction, 20 us of its 27 for the Panda's gradient in pi)
        dy = jnp.sum(J * t[..., None, :], axis=-1).reshape(y.shape)
        return y, dy

    call.defjvp(jvp, symbolic_zeros=True)
    return call
