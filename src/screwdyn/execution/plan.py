"""The execution plan: how a public call runs, decided in one place from explicit inputs.

Every public function (``screwdyn.dynamics``) is a ``Function``: a kernel written once on the
recursions (its internal layout: components first, one trailing batch axis), its input names
and output shape. ``run`` executes a call; ``decide`` says how, from these inputs only:

=================  ========================================================================
inputs             numpy arrays (also lists and scalars) or JAX arrays (any JAX array makes
                   the call JAX, as in ``_backend``'s dtype policy)
native setting     ``use_native(True)`` (the default) or ``use_native(False)``
llvmlite           installed or not (it is a dependency; a platform without wheels lacks it)
the function       whether its kernel traces to a straight-line program (every built-in one
                   does; a failure is reported once and remembered)
JAX backend        ``jax.default_backend()`` for JAX inputs
=================  ========================================================================

Paths:

- ``"native"`` (numpy inputs): the machine code of the function for this model, algebra and
  inputs (``native``), compiled on first use or loaded from the disk cache, one state per row.
  One state, a batch of N, any batch shape: every state runs the same code, so a result does
  not depend on the batch size in any bit, and NaN and inf propagate as IEEE arithmetic does.
  Memory: the result, plus a copy of inputs that are not float64 and contiguous.
- ``"numpy"`` (numpy inputs, native off or unavailable): the recursions on numpy arrays,
  entries mode for RNEA, ABA and CRBA, evaluated in chunks of ``chunk_size`` states (bounded
  memory, about 256 MiB of intermediates).
- ``"custom_call"`` (JAX inputs on the CPU, float64): the native program as one XLA custom
  call (``custom_call``), under the caller's ``jax.jit``, ``vmap``, ``grad``, ``jacfwd``,
  ``jacrev``, ``hessian`` or eagerly: XLA compiles a handful of operations whatever the batch
  size or the model's numbers, and runs the library's own machine code; derivatives of any order
  are the native programs of ``graph.jacobian``. Traced inertial parameters
  (``Model.with_inertial_parameters`` under tracing) are one more input of the program.
- ``"jax"`` (JAX inputs on accelerators, in float32, or where custom calls are unavailable or
  switched off, ``use_custom_calls(False)``): the recursions on jax.numpy, traced by the
  caller's ``jax.jit``/``vmap``/``grad`` or run eagerly, with two rules for XLA
  (``jax_options``): on CPU, the sine and cosine of every
  joint angle and every quaternion norm are computed once (``xla.namespace``); trees of more than
  ``CHECKPOINT_BODIES`` bodies, programs inside loops (simulation rollouts) and, on accelerators,
  functions with many outputs (the mass matrix) are cut once per body. Neither rule depends on
  the batch size, and both leave every value unchanged (a division by an exact 1).

A function whose straight-line program would grow faster than its model (the mass matrix, whose
program has an operation per entry of M: 10 million for a 1,000-link chain) can be ``Factored``:
where its ``size`` (for the mass matrix, the entries of M the tree does not make zero) exceeds
``limit``, the call computes per-state factors (a ``Function`` of O(n) work, on whichever path
above its inputs choose) and then the result from them with one array product (``finish``, in
numpy or jax.numpy, chunked to bounded memory). Which form runs depends on the model only,
never on the batch or the path.

On every path a state with a NaN or infinite input gets NaN for every result that would
otherwise be finite (``call.propagate_non_finite``): the recursions leave out products with the
model's exact zeros, and with them, sometimes, an input (the Panda at rest never multiplies its
first joint angle's sine and cosine by anything but zeros).

``plan(model, function, ...)`` returns a ``Plan`` that tells what a call will do
(``Plan.explain()``) and what compiling it costs.
"""
import functools
import inspect
import threading
import warnings

import numpy as np

from .. import _backend
from ..algebra import ALGEBRAS, get_algebra
from . import custom_call, llvm, native, results, xla
from .. import validation
from .call import Call, core_shape, parse, propagate_non_finite, validate
from .config import _LISTENERS, config
from .graph import DataDependentError
from .store import Store

CHECKPOINT_BODIES = 12  # JAX: trees with more bodies are cut once per body (see jax_options)
_FAILED = {}  # (function name, model, algebra, inputs) -> why it could not be compiled
_ENTRIES = Store("call entries")  # (function, model, algebra, static[, given]) -> callable
_FUNCTIONS = []
_LOCK = threading.RLock()
TRACE_ERRORS = (DataDependentError, NotImplementedError, TypeError)


class NativeCompileWarning(UserWarning):
    """A function could not be compiled to machine code and runs on the numpy path."""


def use_native(enabled=True):
    """Run numpy calls through compiled machine code (True, the default) or on numpy (False),
    in this process (``config.native``). Returns the previous setting."""
    previous, config.native = config.native, enabled
    _forget()
    return previous


def _forget(setting=None):
    """Drop the callables made for calls (after a change of setting)."""
    with _LOCK:
        _ENTRIES.clear()
        _INTO.clear()
        for function in list(_FUNCTIONS):
            function.last = (None, None, None, None)


_LISTENERS.append(_forget)


def use_custom_calls(enabled=True):
    """Run JAX calls on the CPU through the native programs as XLA custom calls (True, the
    default) or on jax.numpy (False), in this process (``config.custom_calls``). Returns the
    previous setting. Functions JAX has traced already keep the path they were traced with (JAX
    caches the trace)."""
    previous, config.custom_calls = config.custom_calls, enabled
    return previous


def native_enabled():
    return config.native and llvm.available()


class Function:
    """A public function as the plan runs it.

    ``kernel(call, *static)`` computes the result in the internal layout (output shape + (N,))
    from a ``call.Call``; ``inputs`` are the required array arguments in call order, ``options``
    the optional ones (``f_ext``, ``gravity``); ``output(model, *static)`` the output shape of
    one state; ``entries``: the recursion runs in the algebra's entries mode (RNEA, ABA, CRBA);
    ``many_outputs``: a result with many outputs per state (XLA rule, see ``jax_options``);
    ``check(model)``: raises if the model cannot run it (once per model); ``bytes_per_body``:
    intermediates per state and body on the numpy path (for ``chunk_size``); ``factored``:
    None, or a ``Factored`` form used for
    large models. ``static``: the names of the static arguments (a link, a frame), in the
    order ``kernel`` and ``output`` take them; ``kinematic``: ``algebra="vector"`` (DH frames,
    which are the model's link frames) runs as ``"spatial"``; ``algebras``: the algebras its
    recursion exists in (None: every one); ``public``: the public callable,
    once registered (``public``)."""

    def __init__(self, name, kernel, inputs, output, options=(), entries=False,
                 many_outputs=False, check=None, bytes_per_body=512,
                 factored=None, static=(), kinematic=False, algebras=None):
        self.name, self.kernel, self.inputs, self.options = name, kernel, tuple(inputs), \
            tuple(options)
        self.static = tuple(static)  # names of the static arguments (kernel(call, *static))
        self.kinematic = kinematic  # algebra="vector" (DH frames) runs as "spatial"
        self.algebras = tuple(algebras) if algebras is not None else None  # None: every one
        self.public = None  # the public callable (``public``)
        self.output, self.entries, self.many_outputs = output, entries, many_outputs
        self.check, self.bytes_per_body = check, bytes_per_body
        self.factored = factored
        self.last = (None, None, None, None)  # (model, algebra, static, callable) of the last call
        _FUNCTIONS.append(self)

    def __repr__(self):
        return f"Function({self.name!r})"

    def algebra(self, name, xp, checkpoints=False):
        """The algebra object the kernel runs in (None for ``"vector"``, which has none)."""
        if name == "vector":
            return None
        alg = get_algebra(name, xp)
        return alg.entries_mode(checkpoints=checkpoints) if self.entries else alg


#: the public array functions by name: what ``sd.plan``, ``sd.compile``, the custom calls and
#: the reference are built from (``public`` registers them)
REGISTRY = {}


def public(function):
    """Decorator: register the public callable it decorates as ``function``'s (a ``Function``)
    under the function's name. Returns the callable unchanged."""
    def register(callable_):
        if function.name in REGISTRY:
            raise ValueError(f"a public function {function.name!r} is registered already")
        function.public = callable_
        REGISTRY[function.name] = function
        return callable_
    return register


def lookup(name):
    """The registered ``Function`` named ``name``; ``ValueError`` listing the valid names."""
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown function {name!r}; valid: {', '.join(sorted(REGISTRY))}") \
            from None


def static_arguments(function, model, given, required=True):
    """The static arguments of ``function`` from the keyword arguments ``given`` ({"link":
    "panda_hand", "frame": "world"}), in the kernel's order, checked (links as indices).
    ``required=False`` (a plan that only says the path): None where one is missing."""
    unknown = sorted(set(given) - set(function.static))
    if unknown:
        raise ValueError(f"{function.name} takes no {unknown[0]}"
                         + (f" (static arguments: {', '.join(function.static)})"
                            if function.static else ""))
    defaults = signature_defaults(function)
    missing = [n for n in function.static if n not in given and n not in defaults]
    if missing and not required:
        return None
    if missing:
        raise ValueError(f"{function.name} needs {missing[0]}= (static arguments: "
                         f"{', '.join(function.static)})")
    values = {**defaults, **given}
    out = []
    for name in function.static:
        value = values[name]
        if name == "link":
            value = model.link_index(value)
        elif name == "frame":
            check_frame(value)
        out.append(value)
    return tuple(out)


def check_frame(frame):
    """A ``frame`` argument is ``"world"`` or ``"local"`` (``ValueError`` otherwise)."""
    if frame not in ("world", "local"):
        raise ValueError(f"frame must be 'world' or 'local', got {frame!r}")


def signature_defaults(function):
    """{name: default} of the public callable's keyword arguments (its signature)."""
    if function.public is None:
        return {}
    return {name: p.default for name, p in inspect.signature(function.public).parameters.items()
            if p.default is not inspect.Parameter.empty}


def public_algebra(function, algebra):
    """The algebra a call of ``function``'s public callable with ``algebra`` runs in: DH frames
    are the model's link frames for kinematic functions (``"vector"`` runs as ``"spatial"``);
    a function without an ``algebra`` argument runs in ``"spatial"`` only."""
    if not takes(function, "algebra"):
        if algebra != "spatial":
            raise ValueError(f"{function.name} runs in the spatial algebra only")
        return algebra
    algebra = kinematic_algebra(algebra) if function.kinematic else algebra
    if function.algebras is not None and algebra not in function.algebras:
        raise ValueError(f"{function.name} has no recursion in algebra {algebra!r}; valid: "
                         + ", ".join(repr(a) for a in function.algebras))
    return algebra


def kinematic_algebra(algebra):
    """Kinematic quantities of algebra="vector" (DH frames, which are the model's link frames)
    are composed in the spatial algebra, as ``forward_kinematics`` does."""
    return "spatial" if algebra == "vector" else algebra


def takes(function, argument):
    """Whether the public callable of ``function`` takes ``argument`` (e.g. "algebra")."""
    return function.public is not None and \
        argument in inspect.signature(function.public).parameters


class Factored:
    """A function computed in two steps for large models (see the module docstring).

    ``columns``: the ``Function`` of the per-state factors (same inputs and options as the
    function it stands for); ``finish(xp, model, factors, out)``: the result (public layout,
    batch first) from the factors (public layout, batch first), in the namespace ``xp``, on
    numpy written into ``result_array(out, ...)`` (``out``: None or the caller's array);
    ``size(model)``: the number the decision compares with ``limit`` (the form is used above
    it); ``algebras``: the algebras that have the factors (the DH recursion has none)."""

    def __init__(self, columns, finish, size, limit, algebras):
        self.columns, self.finish, self.size = columns, finish, size
        self.limit, self.algebras = int(limit), tuple(algebras)

    def applies(self, model, algebra):
        return algebra in self.algebras and self.size(model) > self.limit

    def __repr__(self):
        return f"Factored({self.columns.name!r}, limit={self.limit})"


def factored(function, model, algebra):
    """The ``Factored`` form that a call of ``function`` for ``model`` in ``algebra`` runs, or
    None where it runs as one program."""
    form = function.factored
    return form if form is not None and form.applies(model, algebra) else None


# -- the decisions ----------------------------------------------------------------------------
def jax_options(function, model, backend, loop=False):
    """{"cut_sines": bool, "checkpoints": bool} for a JAX call (see the module docstring).
    ``backend``: JAX's platform ("cpu", "gpu", "tpu"); ``loop``: the program is the body of an
    XLA loop (a simulation rollout), where uncut single-state programs ran 4 to 45 times
    slower in some algebras."""
    on_cpu = backend == "cpu"
    checkpoints = (loop or model.nbodies > CHECKPOINT_BODIES
                   or (function.many_outputs and not on_cpu))
    return {"cut_sines": on_cpu, "checkpoints": checkpoints}


def decide(function, model, algebra="spatial", inputs="numpy", options=(), backend=None,
           loop=False):
    """(path, reasons): how ``function`` runs for ``model`` in ``algebra`` with ``inputs``
    ("numpy" or "jax") and the optional inputs ``options`` given (names)."""
    if inputs == "jax":
        backend = backend or _jax_backend()
        why = _custom_call_refusal(function, model, algebra, options, backend)
        if why is None:
            return "custom_call", ["JAX inputs on the CPU: the native program (machine code "
                                   "compiled from the recursion) as one XLA custom call; "
                                   "derivatives of any order are native programs too"]
        o = jax_options(function, model, backend, loop)
        return "jax", [f"JAX inputs: the recursion runs on jax.numpy (backend {backend!r}): "
                       f"{why}",
                       f"sine/cosine computed once: {o['cut_sines']} (CPU only)",
                       f"cut once per body: {o['checkpoints']} (loop bodies, trees over "
                       f"{CHECKPOINT_BODIES} bodies, many outputs on accelerators)"]
    if not config.native:
        return "numpy", ["native code is switched off (screwdyn.execution.use_native(False))"]
    if not llvm.available():
        return "numpy", ["llvmlite is not installed: no machine code (pip install llvmlite)"]
    failed = _FAILED.get((function.name, model, algebra, tuple(options)))
    if failed:
        return "numpy", [f"the function could not be compiled: {failed}"]
    return "native", ["numpy inputs: machine code compiled from the recursion for this model, "
                      "algebra and inputs (one state per row, any batch)"]


def _custom_call_refusal(function, model, algebra, options, backend):
    """None where a JAX call runs as a custom call (see the module docstring), else why not."""
    if backend != "cpu":
        return f"custom calls run on the CPU only (backend {backend!r})"
    if not (config.custom_calls and config.native):
        return "custom calls are switched off (use_custom_calls / use_native)"
    if not custom_call.available():
        return "XLA custom calls of native code are unavailable here (llvmlite, jax.ffi)"
    if not _backend.x64_enabled():
        return "jax_enable_x64 is off: float32 (native programs compute in float64)"
    if model.parameters is not None and algebra == "vector":
        return "the DH recursion reads its table, not traced inertial parameters"
    failed = _FAILED.get((function.name, model, algebra, tuple(options)))
    if failed:
        return f"the function could not be compiled: {failed}"
    return None


def _jax_backend():
    import jax

    return jax.default_backend()


# -- running a call ---------------------------------------------------------------------------
def run(function, model, algebra, args, options=(), static=(), out=None):
    """``function`` on the arrays ``args`` (its ``inputs``, in order) and ``options`` (its
    ``options``, in order, None where not given), with static arguments ``static``; written
    into ``out`` where given (``run_into``)."""
    if out is not None:
        return run_into(out, function, model, algebra, args, options, static)
    if model.parameters is not None:  # inertial parameters traced by JAX: the JAX path
        form = factored(function, model, algebra)
        if form is not None:
            given = tuple(o is not None for o in options)
            return FactoredCall(function, form, model, algebra, given, static)(
                *args, *(o for o in options if o is not None))
        if function.check is not None:
            function.check(model)
        names = function.inputs + tuple(n for n, o in zip(function.options, options)
                                        if o is not None)
        values = tuple(args) + tuple(o for o in options if o is not None)
        return run_jax(function, model, algebra, dict(zip(names, values)), static)
    for option in options:
        if option is not None:
            break
    else:  # no optional input
        last = function.last  # the last model called (a loop over states: no dictionary lookup)
        if last[0] is model and last[1] == algebra and last[2] == static:
            return last[3](*args)
        f = _ENTRIES.get((function, model, algebra, static))
        if f is None:
            f = _entry(function, model, algebra, (), static)
        function.last = (model, algebra, static, f)
        return f(*args)
    given = tuple(o is not None for o in options)
    f = _ENTRIES.get((function, model, algebra, static, given))
    if f is None:
        f = _entry(function, model, algebra, given, static)
    return f(*args, *(o for o in options if o is not None))


def run_into(out, function, model, algebra, args, options=(), static=()):
    """``run`` writing the result into ``out``, a float64, C-contiguous, writeable numpy array
    of the result's shape (batch + the function's output shape) that shares no memory with the
    inputs; returns ``out``. Every path writes into it as it would into a new result (a loop
    that reuses one array per call touches no fresh memory), once the inputs are checked.
    ``ValueError`` for JAX inputs or traced inertial parameters (JAX arrays cannot be written
    into) and for an ``out`` that is not such an array (naming the expected shape)."""
    values = tuple(args) + tuple(o for o in options if o is not None)
    if not isinstance(out, np.ndarray):
        raise ValueError(f"out must be a numpy array, got {type(out).__name__}")
    if model.parameters is not None or _backend.namespace(*values) is not np:
        raise ValueError("out= takes numpy inputs (JAX arrays cannot be written into: use the "
                         "result)")
    for name, value in zip(function.inputs + function.options, tuple(args) + tuple(options)):
        if isinstance(value, np.ndarray) and np.may_share_memory(out, value):
            raise ValueError(f"out shares memory with the input {name}: pass a separate array")
    given = tuple(o is not None for o in options)
    key = (function, model, algebra, static, given)
    f = _INTO.get(key)
    if f is None:
        f = _entry(function, model, algebra, given, static, bind=False)
        _INTO.put(key, f)
    return f(*values, out=out)


def check_out(out, shape, name):
    """``ValueError`` unless ``out`` is a float64, C-contiguous, writeable array of ``shape``."""
    if out.shape != tuple(shape) or out.dtype != np.float64 or not out.flags.c_contiguous \
            or not out.flags.writeable:
        raise ValueError(f"out for {name} must be a writeable, C-contiguous float64 array of "
                         f"shape {tuple(shape)}; got {out.dtype} {out.shape}"
                         + ("" if out.flags.c_contiguous else ", not C-contiguous")
                         + ("" if out.flags.writeable else ", read-only"))


#: the callables of ``run_into`` (the general path or a ``FactoredCall``), by kind of call
_INTO = Store("calls into a given array")


def _entry(function, model, algebra, given, static, bind=True):
    """The callable for one kind of call: the native program's fast entry (numpy arrays of one
    state or one batch axis) with the general path as its fallback, the general path, or for a
    ``Factored`` form its ``FactoredCall``. ``bind=False``: never the fast entry, and nothing
    kept (``run_into`` keeps its own)."""
    if algebra not in ALGEBRAS:
        raise ValueError(f"unknown algebra {algebra!r}; valid: "
                         + ", ".join(repr(a) for a in ALGEBRAS))
    names = function.inputs + tuple(n for n, g in zip(function.options, given) if g)
    if function.check is not None:
        function.check(model)
    form = factored(function, model, algebra)
    if form is not None:
        f = FactoredCall(function, form, model, algebra, given, static)
    else:
        general = f = General(function, model, algebra, names, static)
        if bind and decide(function, model, algebra, "numpy",
                           names[len(function.inputs):])[0] == "native":
            program = general.native()
            if program is not None:
                f = program.bind(general) or general
    if not bind:
        return f
    key = (function, model, algebra, static) + ((given,) if given else ())
    return _ENTRIES.put(key, f)  # models made afresh in a loop: the least recently used goes


class General:
    """Any call of one kind (function, model, algebra, inputs given): checks and converts the
    arguments and runs the planned path. The fast entry hands it every call it does not take
    itself."""

    def __init__(self, function, model, algebra, names, static):
        self.function, self.model, self.algebra = function, model, algebra
        self.names, self.static = tuple(names), static
        self._program = None

    def native(self):
        """The native program, compiled (or loaded) now; None if the function cannot be
        compiled (reported once with a ``NativeCompileWarning``)."""
        if self._program is None:
            key = (self.function.name, self.model, self.algebra,
                   self.names[len(self.function.inputs):])
            try:
                self._program = native.get(self.function, self.model, self.algebra, self.names,
                                           static=self.static)
            except TRACE_ERRORS as error:
                _FAILED[key] = f"{type(error).__name__}: {error}"
                warnings.warn(f"screwdyn: {self.function.name} could not be compiled for model "
                              f"{self.model.name!r} ({type(error).__name__}: {error}); it runs "
                              "on the numpy path", NativeCompileWarning, stacklevel=4)
                return None
        return self._program

    def __call__(self, *args, out=None):
        if len(args) != len(self.names):
            raise TypeError(f"{self.function.name} takes {len(self.names)} arrays "
                            f"({', '.join(self.names)}), got {len(args)}")
        given = dict(zip(self.names, args))
        xp = _backend.namespace(*args)
        if xp is not np:  # JAX, or a trace (a caller is being compiled)
            return run_jax(self.function, self.model, self.algebra, given, self.static)
        path = decide(self.function, self.model, self.algebra, "numpy",
                      self.names[len(self.function.inputs):])[0]
        program = self.native() if path == "native" and xp is np else None
        if program is None:
            return run_numpy(self.function, self.model, self.algebra, given, self.static, out)
        return run_native(program, self.model, given, self.function.name, out)


class FactoredCall:
    """Any call of one kind of a ``Factored`` function (``given``: which options it passes):
    its factors, then ``finish`` in the factors' namespace. ``factors``: a callable of the
    arrays (inputs, then the options given) returning the factors; default ``run`` of the
    columns function, on the path the inputs choose (``sd.compile`` passes its fast entry)."""

    def __init__(self, function, form, model, algebra, given=(), static=(), factors=None):
        self.function, self.form, self.model, self.algebra = function, form, model, algebra
        self.given, self.static = given, static
        self.names = function.inputs + tuple(n for n, g in zip(function.options, given) if g)
        self.factors = self._run if factors is None else factors

    def _run(self, *args):
        n = len(self.function.inputs)
        present = iter(args[n:])
        options = tuple(next(present) if g else None for g in self.given)
        return run(self.form.columns, self.model, self.algebra, args[:n], options, self.static)

    def __call__(self, *args, out=None):
        if len(args) != len(self.names):
            raise TypeError(f"{self.function.name} takes {len(self.names)} arrays "
                            f"({', '.join(self.names)}), got {len(args)}")
        factors = self.factors(*args)
        xp = _backend.namespace(factors)
        if xp is not np:
            return self.form.finish(xp, self.model, factors, out)
        with _backend.one_blas_thread():
            return self.form.finish(xp, self.model, factors, out)


def run_native(program, model, given, name="the native program", out=None):
    """A native program on public numpy inputs of any batch shape: checked and converted
    (float64, contiguous rows), a single vector passed once (broadcast by the kernel), a batch
    that broadcasts gathered chunk by chunk (``validation.chunks``); into ``out`` where given
    (``run_into``), else a new array."""
    inputs = program.input_names
    _, arrays, batch, N = validate(model, {k: given[k] for k in inputs}, np)
    shape = tuple(batch) + program.output_shape
    result = result_array(out, shape, name)
    out = result.reshape((N,) + program.output_shape)  # a view: C-contiguous
    if N == 0:
        return result
    program.ran(N)
    cores = {k: (arrays[k], len(core_shape(model, k))) for k in inputs}
    states = config.chunk_states or NATIVE_CHUNK_STATES
    for start, stop, chunk in validation.chunks(cores, batch, states):
        rows = []
        for k, width in zip(inputs, program.input_sizes):
            a = chunk[k]
            rows.append(np.ascontiguousarray(a.reshape(width) if a.ndim == cores[k][1]
                                             else a.reshape(stop - start, width)))
        program.call(rows, out[start:stop], stop - start)
    return result


#: states per chunk of a native batch (an input that broadcasts is gathered a chunk at a time);
#: ``config.chunk_states``, when set, overrides it as it does the numpy path's
NATIVE_CHUNK_STATES = 1 << 16


def result_array(out, shape, name):
    """The numpy array a result of ``shape`` is written into: ``out`` where given (checked,
    ``check_out``), else a new one (``results.fresh``: a big one on memory an earlier result
    gave back), refused at once (``ValueError`` naming the bytes) when it could not fit in this
    machine's memory."""
    if out is not None:
        check_out(out, shape, name)
        return out
    validation.check_fits(int(np.prod(shape, dtype=np.int64)) * 8,
                          f"the result of {name}, shape {tuple(shape)} float64,")
    return results.fresh(shape)


def run_jax(function, model, algebra, given, static=(), loop=False):
    """The kernel as a custom call (see the module docstring), on jax.numpy (see
    ``jax_options``), or on the traced arrays of ``trace`` (the caller's own program is being
    compiled: the recursion joins it)."""
    xp = _backend.namespace(*given.values(), model.traced_parameters)
    if xp is not np and not getattr(xp, "traced", False):  # JAX arrays or JAX tracers
        options = tuple(given)[len(function.inputs):]
        if decide(function, model, algebra, "jax", options, loop=loop)[0] == "custom_call":
            try:
                return run_custom_call(function, model, algebra, given, static)
            except TRACE_ERRORS as error:
                _FAILED[(function.name, model, algebra, options)] = \
                    f"{type(error).__name__}: {error}"
    call = _call(function, model, algebra, given, loop)
    return call.vector(_kernel(function, call, static))


def run_custom_call(function, model, algebra, given, static=()):
    """The native program of ``function`` as an XLA custom call (``custom_call.Op``) on the
    JAX (or traced) inputs ``given``: checked (``validate``: shapes at trace time), broadcast
    to one batch, flattened to rows; the result batch + output shape, float64."""
    import jax.numpy as jnp

    _, arrays, batch, N = validate(model, given, jnp)
    names = tuple(arrays)
    if model.parameters is not None:
        names += (native.PARAMETERS,)
        arrays[native.PARAMETERS] = model.parameters.array
    model = model.nominal
    if function.check is not None:
        function.check(model)
    op = _custom_call_op(function, model, algebra, names, static)
    shape = tuple(op.native.output_shape)
    if N == 0:
        return jnp.zeros(batch + shape)
    rows = []
    for name in names:
        core = core_shape(model, name)
        a = jnp.asarray(arrays[name], dtype=jnp.float64)
        rows.append(jnp.broadcast_to(a, batch + core).reshape(batch + (int(np.prod(core)),)))
    return op.call(*rows)


_OPS = Store("custom call operations")


def _custom_call_op(function, model, algebra, names, static):
    """The ``custom_call.Op`` of a function's native program (one per kind of call)."""
    key = (function, model, algebra, names, static)
    with _LOCK:
        op = _OPS.get(key)
        if op is None:
            op = _OPS.put(key, custom_call.Op(lambda derivatives: native.get(
                function, model, algebra, names, static=static, derivatives=derivatives)))
    return op


def _kernel(function, call, static):
    """The kernel's result with ``call.propagate_non_finite``'s rule (on the inputs given)."""
    inputs = [call[name] for name in call.given]
    return propagate_non_finite(call.xp, inputs, function.kernel(call, *static))


def _call(function, model, algebra, given, loop=False):
    xp, arrays, batch, N = parse(model, given)
    if xp is np or getattr(xp, "traced", False):
        return Call(model, algebra, function.algebra(algebra, xp), xp, arrays, batch, N)
    options = jax_options(function, model, _jax_backend(), loop)
    ns = xla.namespace(options["cut_sines"])
    alg = function.algebra(algebra, ns, checkpoints=options["checkpoints"])
    return Call(model, algebra, alg, ns, arrays, batch, N)


def call(model, algebra, given, entries=False, many_outputs=False, loop=False):
    """A ``Call`` of the public inputs ``given`` {name: array or None} for a recursion run outside
    a ``Function`` (the subsystems of an assembly), its algebra chosen as for a function with
    these ``entries`` and ``many_outputs`` flags."""
    if algebra not in ALGEBRAS:
        raise ValueError(f"unknown algebra {algebra!r}; valid: "
                         + ", ".join(repr(a) for a in ALGEBRAS))
    return _call(_recursion(bool(entries), bool(many_outputs)), model, algebra, given, loop)


@functools.lru_cache(maxsize=None)
def _recursion(entries, many_outputs):
    return Function("recursion", None, (), None, entries=entries, many_outputs=many_outputs)


# -- the numpy path: chunks of states ---------------------------------------------------------
_ALGEBRA_FACTOR = {"cga": 1.75}  # CGA keeps 1.4 to 1.7 times the intermediates per body


def chunk_size(model, function, algebra="spatial"):
    """States per chunk when ``function`` (a ``Function``) evaluates a numpy batch on the numpy
    path: about 256 MiB of intermediates, at least 2048 and at most 32768 states
    (``config.chunk_states`` overrides). Larger chunks amortise Python's per-operation overhead
    (about a microsecond), smaller ones stay in cache and bound memory: a million states cost one
    chunk of intermediates plus the result. Bytes per state and body were measured with tracemalloc
    (Panda and a 100-link chain); beyond glibc's trim threshold a 100-link chain in CGA ran 2.8x
    slower."""
    if config.chunk_states:
        return config.chunk_states
    per_state = function.bytes_per_body * _ALGEBRA_FACTOR.get(algebra, 1.0) * max(model.nbodies, 1)
    if function.many_outputs:
        per_state += 16 * model.nv ** 2  # the entries of an nv x nv result
    return int(min(32768, max(2048, (256 << 20) // int(per_state))))


def run_numpy(function, model, algebra, given, static=(), out=None):
    """The kernel on numpy arrays, in chunks of ``chunk_size`` states; inputs that broadcast are
    gathered one chunk at a time (``validation.chunks``), an empty batch gives an empty result,
    a result that cannot fit is refused before any work, and non-finite states propagate
    without floating-point warnings. Into ``out`` where given (``run_into``)."""
    _, arrays, batch, N = validate(model, given, np)
    shape = tuple(function.output(model, *static))
    result = result_array(out, tuple(batch) + shape, function.name)
    out = result.reshape((N,) + shape)
    if N == 0:
        return result
    if N >= 256:
        _backend.tune_allocator()
    size = chunk_size(model, function, algebra)
    alg = function.algebra(algebra, np)
    cores = {name: (a, len(core_shape(model, name))) for name, a in arrays.items()}
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for start, stop, chunk in validation.chunks(cores, batch, size):
            _, internal, part, n = parse(model, chunk, np)
            call = Call(model, algebra, alg, np, internal, part, n)
            out[start:stop] = np.asarray(call.vector(_kernel(function, call, static))) \
                .reshape((stop - start,) + shape)
    return result


# -- sd.plan ----------------------------------------------------------------------------------
class Plan:
    """How a call of ``function`` runs (see the module docstring): ``path`` ("native", "numpy",
    "jax"), ``reasons``, ``factored`` (the ``Factored`` form used for this model, or None),
    ``runs`` (the function the program computes: ``function``, or the factored form's
    ``columns``), and for the native path the ``program`` (a ``native.NativeProgram`` once
    compiled or loaded: ``compile_time``, ``source``, ``nodes``)."""

    def __init__(self, function, model, algebra, inputs, options, backend, loop, static):
        self.function, self.model, self.algebra = function, model, algebra
        self.inputs, self.options, self.static = inputs, tuple(options), static
        self.factored = factored(function, model, algebra)
        runs = self.runs = function if self.factored is None else self.factored.columns
        self.path, self.reasons = decide(runs, model, algebra, inputs, self.options, backend,
                                         loop)
        if self.factored is not None:
            self.reasons.append(
                f"factored: {self.factored.size(model):,} > {self.factored.limit:,} (see "
                f"screwdyn.dynamics): the program computes the factors ({runs.name}, O(n) "
                "operations per state) and one array product the result from them")
        self.program = None
        if self.path == "native":
            key = native.key(runs, model, algebra, runs.inputs + self.options, {}, static)
            self.program = native._PROGRAMS.get(key)
            self.cached_on_disk = native.cache.has(key)
            self.cache_file = native.cache.path(key)

    def compile(self):
        """Compile (or load) the native program now, with its optimised code; returns it."""
        if self.path != "native":
            raise ValueError(f"this call runs on the {self.path} path: nothing to compile")
        if self.static is None:
            raise ValueError(f"{self.function.name} compiles for given static arguments: "
                             f"sd.plan(model, {self.function.name!r}, "
                             + ", ".join(f"{n}=..." for n in self.function.static) + ")")
        self.program = native.get(self.runs, self.model, self.algebra,
                                  self.runs.inputs + self.options, static=self.static,
                                  optimise=True)
        return self.program

    def explain(self):
        """A few lines: what runs, why, and what compiling costs."""
        lines = [f"{self.function.name} of model {self.model.name!r} (nq={self.model.nq}, "
                 f"nv={self.model.nv}, {self.model.nbodies} bodies), algebra {self.algebra!r}, "
                 f"{self.inputs} inputs: path {self.path!r}"]
        lines += [f"  - {r}" for r in self.reasons]
        if self.path == "native":
            if self.program is not None:
                p = self.program
                what = (f"compiled in this process in {p.compile_time:.3g} s"
                        if p.source == "compiled" else
                        f"loaded from the disk cache in {p.compile_time * 1e3:.3g} ms")
                lines.append(f"  - program: {what}; code level {p.level} "
                             + ("(optimised)" if p.level == native.LEVELS[-1] else
                                "(fast to compile; the optimised code is compiled in the "
                                "background once it has run 1,000 states)"))
                if p.optimise_time is not None:
                    lines.append(f"  - optimised code compiled in {p.optimise_time:.3g} s")
                if p.nodes:
                    lines.append("  - operations per state: " + ", ".join(
                        f"{k} {v}" for k, v in sorted(p.nodes.items(), key=lambda kv: -kv[1])
                        if k not in ("input", "const", "bool_const")))
            elif self.cached_on_disk:
                lines.append(f"  - program: on disk ({self.cache_file}), loads in milliseconds")
            else:
                lines.append("  - program: not compiled yet; the first call traces and compiles "
                             "it (Panda forward dynamics: about 0.1 s, a 38-DoF humanoid's: "
                             "about a second), then it is cached in "
                             f"{native.cache.directory()}")
            lines.append("  - per call: the fast entry takes float64 C-contiguous arrays of one "
                         "state (n,) or one batch axis (N, n); anything else is converted first")
        elif self.path == "numpy":
            lines.append(f"  - chunks of {chunk_size(self.model, self.function, self.algebra)} "
                         "states (bounded memory)")
        return "\n".join(lines)

    def __repr__(self):
        return f"Plan({self.function.name!r}, path={self.path!r})"

