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
- ``jax.jvp`` and everything built on it (``jacfwd``, ``hessian``): a ``jax.custom_jvp`` whose
  tangent is J t, with J = the program of the derivatives of the outputs with respect to the
  inputs whose tangents are not zero (``graph.jacobian``, forward mode on the traced program),
  itself an ``Op``: derivatives of any order, each program compiled on first use;
- reverse mode (``grad``, ``vjp``, ``jacrev``): J t is a primitive of its own (``_linear``),
  linear in t, whose transpose is the reverse-mode program of the traced graph (``graph.vjp``:
  one sweep from a cotangent of the outputs back to the inputs, a few times the function's
  work whatever the number of inputs), itself an ``Op`` with the same rules.

The handler follows XLA's FFI C API (``xla/ffi/api/c_api.h``, the header jaxlib ships): it
answers XLA's metadata query with the API version of the installed header, ignores the stages
before execution, and on execution reads the buffers' data and dimensions: the number of states
is the output's size over one state's, an input of one state's size is broadcast (stride 0).
It trusts none of it: the number of arguments and results, each buffer's kind, dtype (float64)
and size (the result a whole number of states, every input as many states, or one) are checked
before the kernel runs, and a mismatch returns an XLA error (INVALID_ARGUMENT) naming the
buffer, so a direct ``jax.ffi.ffi_call`` of the target with float32 or wrongly sized buffers
raises instead of reading or writing out of bounds. Layouts of the C structs are those of the
LP64 ABI (x86-64 and AArch64 Linux and macOS).
"""
import ctypes
import functools
import itertools
import os
import re
import threading

import numpy as np

from .. import _backend
from . import graph, llvm

_LOCK = threading.RLock()
#: derivative programs of at most this many nodes get their optimised code too (in the
#: background, as every function's own program does): the Panda's are 10,000 to 150,000 (twice
#: as fast optimised); a 100-link chain's Jacobian of ID, 1.5 million, would keep the background
#: compiler (``compiler``: a child process) busy for minutes
OPTIMISE_DERIVATIVES_UP_TO = 200_000
_COUNTER = itertools.count()
#: what every registered FFI target calls into: its handler's library, the handler and the
#: program, for the life of the process, as XLA's registration of the target is (an executable
#: compiled with the target may run after its ``Op`` is dropped from the plan's store)
_REGISTERED = []

# byte offsets in XLA's FFI structs (c_api.h, LP64): the call frame's fields (the args' and
# rets' size, types and pointer arrays), an extension's, a buffer's, the API's XLA_FFI_Error_Create
_FRAME_EXTENSION, _FRAME_API, _FRAME_STAGE = 8, 16, 32
_FRAME_ARGS_SIZE, _FRAME_ARGS_TYPES, _FRAME_ARGS = 56, 64, 72
_FRAME_RETS_SIZE, _FRAME_RETS_TYPES, _FRAME_RETS = 96, 104, 112
_EXTENSION_TYPE, _EXTENSION_METADATA = 8, 24
_BUFFER_DTYPE, _BUFFER_DATA, _BUFFER_RANK, _BUFFER_DIMS = 16, 24, 32, 40
_API_ERROR_CREATE = 48
_ERROR_CREATE_ARGS_SIZE = 28  # XLA_FFI_Error_Create_Args_STRUCT_SIZE: up to its errc
_STAGE_EXECUTE, _EXTENSION_IS_METADATA = 3, 1
_BUFFER_TYPE, _F64, _INVALID_ARGUMENT = 1, 12, 3  # XLA_FFI_ArgType/RetType, DataType, Error_Code
#: XLA_FFI_DataType codes (xla_data.proto's PrimitiveType) by their numpy names, for messages
_DTYPE_NAMES = {1: "bool", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "uint8",
                7: "uint16", 8: "uint32", 9: "uint64", 10: "float16", 11: "float32",
                12: "float64", 15: "complex64", 16: "bfloat16", 17: "a token",
                18: "complex128"}
_MESSAGE_BYTES = 512

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


def handler_ir(input_sizes, output_size, name="screwdyn", input_names=None):
    """LLVM IR of the FFI handler ``handler`` and of the global ``kernel_pointer`` it calls the
    kernel through (``llvm.kernel_ir``'s ``kernel(n, inputs, strides, out)``; set by
    ``NativeProgram.watch`` to the code in use, first code, then optimised), for inputs of
    ``input_sizes`` doubles per state and an output of ``output_size``.

    Before the kernel runs, every buffer XLA passes is checked: as many arguments as inputs and
    one result, all buffers of float64, the result a whole number n of states of
    ``output_size``, each input n states of its size (or one state, broadcast). Otherwise the
    kernel is not called and the handler returns an XLA error (INVALID_ARGUMENT) whose message
    names the custom call ``name`` and the buffer (``input_names``: the inputs' names)."""
    names = tuple(input_names) if input_names is not None else tuple(
        f"x{j}" for j in range(len(input_sizes)))
    return _Handler(name, input_sizes, output_size, names).ir()


class _Handler:
    """The text of one handler's IR: its blocks, the checks' failure blocks (each builds a
    message and returns an error) and the constant strings they use."""

    def __init__(self, name, input_sizes, output_size, input_names):
        self.name, self.input_sizes = name, tuple(int(s) for s in input_sizes)
        self.output_size, self.input_names = int(output_size), tuple(input_names)
        self.lines, self.failures, self.strings = [], [], {}

    def ir(self):
        self.lines += ["@kernel_pointer = global ptr null",
                       "define ptr @handler(ptr %frame) nounwind {",
                       "entry:"]
        self._metadata_and_stage()
        self._execute()
        self.lines += self.failures + ["}"]
        return "\n".join(self._globals() + self.lines) + "\n" + _RUNTIME_IR

    def _metadata_and_stage(self):
        """Answers XLA's metadata query (the API version of the installed header); every
        stage but execution returns at once."""
        major, minor = api_version()
        self.lines += [
            f"  %ext.p = getelementptr i8, ptr %frame, i64 {_FRAME_EXTENSION}",
            "  %ext = load ptr, ptr %ext.p",
            "  %has.ext = icmp ne ptr %ext, null",
            "  br i1 %has.ext, label %ext.type, label %stage",
            "ext.type:",
            f"  %type.p = getelementptr i8, ptr %ext, i64 {_EXTENSION_TYPE}",
            "  %type = load i32, ptr %type.p",
            f"  %is.meta = icmp eq i32 %type, {_EXTENSION_IS_METADATA}",
            "  br i1 %is.meta, label %metadata, label %stage",
            # XLA_FFI_Metadata: struct_size, api_version {size, ext, major, minor}, traits
            "metadata:",
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
            "done:",
            "  ret ptr null"]

    def _execute(self):
        """The checks of the call frame, then the kernel's call."""
        k = max(len(self.input_sizes), 1)
        self.lines += ["execute:",
                       f"  %ins = alloca [{k} x ptr]",
                       f"  %strides = alloca [{k} x i64]"]
        self._counts()
        self._result()
        for j, size in enumerate(self.input_sizes):
            self._input(j, size)
        self.lines += ["  %kernel = load ptr, ptr @kernel_pointer",
                       "  call void %kernel(i64 %n, ptr %ins, ptr %strides, ptr %out.data)",
                       "  ret ptr null"]

    def _counts(self):
        """As many arguments as inputs, one result; loads the arrays of their types and
        buffers (%arg.types, %args, %ret.types, %rets)."""
        k = len(self.input_sizes)
        names = ", ".join(self.input_names)
        self._field("nargs", "i64", _FRAME_ARGS_SIZE)
        self._check("%nargs.ok = icmp eq i64 %nargs, " + str(k), "nargs",
                    [": ", ("int", "%nargs"), f" operands, expected {k} ({names})"])
        self._field("nrets", "i64", _FRAME_RETS_SIZE)
        self._check("%nrets.ok = icmp eq i64 %nrets, 1", "nrets",
                    [": ", ("int", "%nrets"), " results, expected 1"])
        for tag, offset in (("arg.types", _FRAME_ARGS_TYPES), ("args", _FRAME_ARGS),
                            ("ret.types", _FRAME_RETS_TYPES), ("rets", _FRAME_RETS)):
            self._field(tag, "ptr", offset)

    def _result(self):
        """The result: a buffer of float64, a whole number %n of states."""
        label = "the result"
        self._buffer_of("out", "ret", 0, label)
        size = self.output_size
        if size == 0:  # nothing to write: no state is computed
            self.lines += ["  %n = add i64 0, 0"]
            return
        self.lines += [f"  %out.rest = urem i64 %out.count, {size}"]
        self._check("%out.ok = icmp eq i64 %out.rest, 0", "out.size",
                    [f": {label} has ", ("int", "%out.count"),
                     f" elements, not a whole number of states of {size}"])
        self.lines += [f"  %n = udiv i64 %out.count, {size}"]

    def _input(self, j, size):
        """Input j: a buffer of float64 of %n states of ``size`` (or one state: stride 0)."""
        tag = f"in{j}"
        label = f"input {j} ({self.input_names[j]})"
        self._buffer_of(tag, "arg", j, label)
        self.lines += [f"  %{tag}.one = icmp eq i64 %{tag}.count, {size}"]
        if self.output_size:
            self.lines += [f"  %{tag}.want = mul i64 %n, {size}",
                           f"  %{tag}.all = icmp eq i64 %{tag}.count, %{tag}.want"]
            self._check(f"%{tag}.ok = or i1 %{tag}.one, %{tag}.all", f"{tag}.size",
                        [f": {label} has ", ("int", f"%{tag}.count"),
                         f" elements, expected {size} per state for the result's ",
                         ("int", "%n"), " states (", ("int", f"%{tag}.want"),
                         f") or one state ({size})"])
        self.lines += [f"  %stride{j} = select i1 %{tag}.one, i64 0, i64 {size}",
                       f"  %ins{j} = getelementptr ptr, ptr %ins, i64 {j}",
                       f"  store ptr %{tag}.data, ptr %ins{j}",
                       f"  %strides{j} = getelementptr i64, ptr %strides, i64 {j}",
                       f"  store i64 %stride{j}, ptr %strides{j}"]

    def _buffer_of(self, tag, kind, j, label):
        """Argument or result (``kind``) j: checked to be a buffer of float64, then read
        (``_buffer``: %tag.data, %tag.count)."""
        self.lines += [f"  %{tag}.type.p = getelementptr i32, ptr %{kind}.types, i64 {j}",
                       f"  %{tag}.type = load i32, ptr %{tag}.type.p"]
        self._check(f"%{tag}.is.buffer = icmp eq i32 %{tag}.type, {_BUFFER_TYPE}",
                    f"{tag}.type", [f": {label} is not a buffer"])
        self.lines += [f"  %{tag}.p = getelementptr ptr, ptr %{kind}s, i64 {j}",
                       f"  %{tag} = load ptr, ptr %{tag}.p",
                       f"  %{tag}.dtype.p = getelementptr i8, ptr %{tag}, i64 {_BUFFER_DTYPE}",
                       f"  %{tag}.dtype = load i32, ptr %{tag}.dtype.p"]
        self._check(f"%{tag}.f64 = icmp eq i32 %{tag}.dtype, {_F64}", f"{tag}.dtype",
                    [f": {label} is ", ("dtype", f"%{tag}.dtype"), ", expected float64"])
        self.lines += _buffer(tag, f"%{tag}")

    def _field(self, tag, kind, offset):
        """%tag: the call frame's field at ``offset``, of LLVM type ``kind``."""
        self.lines += [f"  %{tag}.p = getelementptr i8, ptr %frame, i64 {offset}",
                       f"  %{tag} = load {kind}, ptr %{tag}.p"]

    def _check(self, condition, tag, message):
        """``condition`` (an instruction defining %<flag>, an i1) or else the failure block
        ``bad.<tag>``, which returns an error of the name of the call and ``message``."""
        flag = condition.split("=")[0].strip()
        self.lines += [f"  {condition}",
                       f"  br i1 {flag}, label %{tag}.checked, label %bad.{tag}",
                       f"{tag}.checked:"]
        self._failure(tag, [f"screwdyn custom call {self.name}"] + message)

    def _failure(self, tag, parts):
        """The block ``bad.<tag>``: the message of ``parts`` (text, ("int", %i64) or
        ("dtype", %i32)) written into a buffer on the stack, returned as an XLA error."""
        b = f"%bad.{tag}"
        lines = [f"bad.{tag}:", f"  {b}.buf = alloca [{_MESSAGE_BYTES} x i8]"]
        position = "0"
        for i, part in enumerate(parts):
            if isinstance(part, str):
                call = f"@append(ptr {b}.buf, i64 {position}, ptr {self._string(part)})"
            elif part[0] == "int":
                call = f"@append_int(ptr {b}.buf, i64 {position}, i64 {part[1]})"
            else:
                call = f"@append_dtype(ptr {b}.buf, i64 {position}, i32 {part[1]})"
            lines.append(f"  {b}.at{i} = call i64 {call}")
            position = f"{b}.at{i}"
        lines += [f"  {b}.error = call ptr @error(ptr %frame, ptr {b}.buf)",
                  f"  ret ptr {b}.error"]
        self.failures += lines

    def _string(self, text):
        """The global of a constant C string ``text``."""
        if text not in self.strings:
            self.strings[text] = f"@.str{len(self.strings)}"
        return self.strings[text]

    def _globals(self):
        """The definitions of the constant strings of the messages."""
        return [_c_string(name, text) for text, name in self.strings.items()]


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


def _c_string(name, text):
    """An LLVM private constant holding ``text`` as a NUL-terminated UTF-8 C string."""
    data = text.encode("utf-8") + b"\0"
    body = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else f"\\{c:02X}"
                   for c in data)
    return f'{name} = private unnamed_addr constant [{len(data)} x i8] c"{body}"'


def _dtype_ir():
    """``append_dtype(buf, position, code)``: appends the numpy name of an XLA_FFI_DataType
    (``_DTYPE_NAMES``), or "dtype <code>"; returns the new position."""
    codes = sorted(_DTYPE_NAMES)
    lines = [_c_string(f"@.dtype{c}", _DTYPE_NAMES[c]) for c in codes]
    lines += [_c_string("@.dtype", "dtype "),
              "define internal i64 @append_dtype(ptr %buf, i64 %pos, i32 %code) nounwind {",
              "entry:",
              "  switch i32 %code, label %other [" + " ".join(
                  f"i32 {c}, label %known{c}" for c in codes) + "]"]
    for c in codes:
        lines += [f"known{c}:", "  br label %named"]
    lines += ["named:",
              "  %name = phi ptr " + ", ".join(f"[ @.dtype{c}, %known{c} ]" for c in codes),
              "  %end = call i64 @append(ptr %buf, i64 %pos, ptr %name)",
              "  ret i64 %end",
              "other:",
              "  %at = call i64 @append(ptr %buf, i64 %pos, ptr @.dtype)",
              "  %code64 = zext i32 %code to i64",
              "  %end.other = call i64 @append_int(ptr %buf, i64 %at, i64 %code64)",
              "  ret i64 %end.other",
              "}"]
    return "\n".join(lines) + "\n"


# the functions the failure blocks call: append a C string or an unsigned integer to a message
# of _MESSAGE_BYTES bytes (kept NUL-terminated, cut short where too long), and make the error
_RUNTIME_IR = f"""
define internal i64 @append(ptr %buf, i64 %pos, ptr %s) nounwind {{
entry:
  br label %loop
loop:
  %i = phi i64 [ %pos, %entry ], [ %i1, %copy ]
  %j = phi i64 [ 0, %entry ], [ %j1, %copy ]
  %room = icmp ult i64 %i, {_MESSAGE_BYTES - 1}
  br i1 %room, label %char, label %end
char:
  %sp = getelementptr i8, ptr %s, i64 %j
  %c = load i8, ptr %sp
  %more = icmp ne i8 %c, 0
  br i1 %more, label %copy, label %end
copy:
  %bp = getelementptr i8, ptr %buf, i64 %i
  store i8 %c, ptr %bp
  %i1 = add i64 %i, 1
  %j1 = add i64 %j, 1
  br label %loop
end:
  %ep = getelementptr i8, ptr %buf, i64 %i
  store i8 0, ptr %ep
  ret i64 %i
}}

define internal i64 @append_int(ptr %buf, i64 %pos, i64 %v) nounwind {{
entry:
  %digits = alloca [21 x i8]
  %last = getelementptr i8, ptr %digits, i64 20
  store i8 0, ptr %last
  br label %digit
digit:
  %k = phi i64 [ 20, %entry ], [ %k1, %digit ]
  %x = phi i64 [ %v, %entry ], [ %x1, %digit ]
  %k1 = sub i64 %k, 1
  %r = urem i64 %x, 10
  %x1 = udiv i64 %x, 10
  %r8 = trunc i64 %r to i8
  %c = add i8 %r8, 48
  %p = getelementptr i8, ptr %digits, i64 %k1
  store i8 %c, ptr %p
  %more = icmp ne i64 %x1, 0
  br i1 %more, label %digit, label %done
done:
  %start = getelementptr i8, ptr %digits, i64 %k1
  %end = call i64 @append(ptr %buf, i64 %pos, ptr %start)
  ret i64 %end
}}

define internal ptr @error(ptr %frame, ptr %message) nounwind {{
entry:
  %args = alloca [4 x i64]
  store i64 {_ERROR_CREATE_ARGS_SIZE}, ptr %args
  %ext = getelementptr i8, ptr %args, i64 8
  store ptr null, ptr %ext
  %msg = getelementptr i8, ptr %args, i64 16
  store ptr %message, ptr %msg
  %errc = getelementptr i8, ptr %args, i64 24
  store i32 {_INVALID_ARGUMENT}, ptr %errc
  %api.p = getelementptr i8, ptr %frame, i64 {_FRAME_API}
  %api = load ptr, ptr %api.p
  %create.p = getelementptr i8, ptr %api, i64 {_API_ERROR_CREATE}
  %create = load ptr, ptr %create.p
  %error = call ptr %create(ptr %args)
  ret ptr %error
}}
""" + _dtype_ir()


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
                                int(np.prod(program.output_shape, dtype=int)), name,
                                program.input_names)
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
                _REGISTERED.append((library, handler, program))
                self._target = name
                size = sum((program.nodes or {}).values())
                if not self.derivatives or 0 < size <= OPTIMISE_DERIVATIVES_UP_TO:
                    program.optimise(wait=False)
            return self._target

    def derivative(self, wrt):
        """The ``Op`` of the derivatives of this one's result with respect to the inputs
        ``wrt`` (names): output shape + (their sizes added up,)."""
        return self._chained(tuple(wrt))

    def reverse(self, wrt):
        """The ``Op`` of the cotangents of the inputs ``wrt`` (names) given a cotangent of this
        one's result, its last input (``graph.vjp``): output (their sizes added up,)."""
        return self._chained(graph.Reverse(tuple(wrt)))

    def _chained(self, link):
        """The ``Op`` of this one's program with ``link`` added to its chain of derivatives."""
        with _LOCK:
            op = self._derivative_ops.get(link)
            if op is None:
                op = self._derivative_ops[link] = Op(self._make, self.derivatives + (link,))
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
        live = tuple(k for k, t in enumerate(tangents) if not isinstance(t, SymbolicZero))
        if not live:
            return y, jnp.zeros_like(y)
        t = [jnp.broadcast_to(tangents[k], primals[k].shape) for k in live]
        return y, _linear().bind(*primals, *t, op=op, live=live)

    call.defjvp(jvp, symbolic_zeros=True)
    return call


def _tangent(*args, op, live):
    """J t: the derivatives of ``op``'s result with respect to its inputs ``live`` (their
    ``Op.derivative``, forward mode) times their tangents (``args``: the rows, then a tangent per
    live input)."""
    import jax.numpy as jnp

    primals, tangents = args[:len(args) - len(live)], args[len(args) - len(live):]
    names = op.native.input_names
    J = op.derivative(tuple(names[k] for k in live)).call(*primals)
    t = jnp.concatenate(tangents, axis=-1)
    batch = primals[0].shape[:-1]
    J = J.reshape(batch + (-1, t.shape[-1]))
    # a product and a sum, not a dot: XLA fuses them into one loop (a dot of (9, 90) went to
    # Eigen's threaded contraction, 20 us of its 27 for the Panda's gradient in pi)
    return jnp.sum(J * t[..., None, :], axis=-1).reshape(batch + op.native.output_shape)


@functools.lru_cache(maxsize=None)
def _linear():
    """The JAX primitive of an ``Op``'s tangent, J t (``_tangent``), linear in t, whose
    transpose is the ``Op.reverse`` program: so ``grad``, ``vjp`` and ``jacrev`` run one
    reverse sweep of the traced program per cotangent (``graph.vjp``) instead of forming J, one
    column per input scalar. Everything else (evaluation, ``jit``, ``vmap``, ``jvp`` of it for
    higher orders) is ``_tangent``, the forward-mode J t."""
    import jax
    from jax.extend.core import Primitive
    from jax.interpreters import ad, batching, mlir

    linear = Primitive("screwdyn_tangent")
    linear.def_impl(_tangent)

    def abstract(*args, op, live):
        batch = args[0].shape[:-1]
        return jax.core.ShapedArray(batch + op.native.output_shape, np.float64)

    def vmapped(args, dims, op, live):
        return jax.vmap(functools.partial(_tangent, op=op, live=live), in_axes=dims)(*args), 0

    def jvp(primals, tangents, op, live):
        tangents = [ad.instantiate_zeros(t) for t in tangents]
        return jax.jvp(functools.partial(_tangent, op=op, live=live), primals, tangents)

    def transpose(ct, *args, op, live):
        n = len(args) - len(live)
        if type(ct) is ad.Zero:
            return [None] * len(args)
        primals = args[:n]
        if any(ad.is_undefined_primal(x) for x in primals):
            raise NotImplementedError("the rows of a native program are not linear inputs")
        names = op.native.input_names
        batch = primals[0].shape[:-1]
        bar = op.reverse(tuple(names[k] for k in live)).call(
            *primals, ct.reshape(batch + (-1,)))
        cuts = np.cumsum([primals[k].shape[-1] for k in live])[:-1]
        return [None] * n + list(jax.numpy.split(bar, cuts, axis=-1))

    linear.def_abstract_eval(abstract)
    mlir.register_lowering(linear, mlir.lower_fun(_tangent, multiple_results=False))
    batching.primitive_batchers[linear] = vmapped
    ad.primitive_jvps[linear] = jvp
    ad.primitive_transposes[linear] = transpose
    return linear
