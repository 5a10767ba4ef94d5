"""Compiled functions bound to one model, for control loops, simulation steps and batches.

    f = sd.compile(model, "forward_dynamics")   # machine code, compiled or loaded from the cache
    qdd = f(q, qd, tau)                         # one state: (nq,), (nv,), (nv,) -> (nv,)
    qdd = f(Q, QD, TAU)                         # a batch: (N, nq), (N, nv), (N, nv) -> (N, nv)
    f.compile_time                              # seconds it took to make (or load) the program

``sd.compile`` (``backend="native"``, the default where llvmlite is installed) binds the model,
the algebra and the gravity vector into a native program of the execution plan
(``screwdyn.execution``): calling it goes straight into machine code for float64 C-contiguous
numpy arrays of one state or one batch axis (the arguments are checked, nothing else is parsed),
and through the general path for anything else (other dtypes and batch shapes, lists; JAX arrays
run the public function on JAX). The result is a new numpy array.

``backend="jax"`` compiles an ahead-of-time XLA executable instead, described below: for JAX
arrays on a device, fixed batch shapes and JAX outputs.

The model, the algebra and the gravity vector are bound at compile time (they become constants
of the compiled program, so their zeros cost nothing), and the inputs have one fixed shape:
``batch_shape + (n,)`` (``batch_shape=()``, one state, by default). The result is a JAX array; it
converts to numpy with ``np.asarray`` at no copy on CPU, or pass ``numpy=True`` to get numpy.
``batch_shape=None`` accepts any batch shape and compiles once per new shape.

The program is an ahead-of-time XLA executable (``jax.jit(...).lower(...).compile()``), called
directly: no retracing or cache lookup per call. With ``numpy=True`` (numpy in, numpy out, the
control-loop case) numpy inputs go to the device side by side in one array, one transfer instead
of one per input; otherwise inputs go as they are. Should the other kind of input come (JAX arrays
to a ``numpy=True`` function), its executable is compiled on that first call. numpy inputs are
converted to the program's dtype (float32 promoted to float64, as the public functions do).

On CPU the program is compiled with XLA's classic loop emitters
(``xla_cpu_use_fusion_emitters=False``): as fast as the default emitters on screwdyn's long scalar
programs, faster to compile, and without a slowdown the default emitters showed on some of them
(docs/performance.md).
"""
import time

import numpy as np

from . import dynamics, identification  # noqa: F401  (they register the public functions)

from .execution import plan as _plan

#: XLA options for CPU programs (see the module docstring)
CPU_COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}


def compiler_options(backend=None):
    """The XLA options screwdyn compiles with on ``backend`` (default: JAX's default backend)."""
    import jax

    return dict(CPU_COMPILER_OPTIONS) if (backend or jax.default_backend()) == "cpu" else {}


class CompiledFunction:
    """A public screwdyn function compiled for one model and one input shape.

    Call it with the inputs in the order of ``input_names`` (numpy or JAX arrays of shape
    ``batch_shape + (n,)``). Attributes: ``compile_time`` (seconds: tracing, lowering and XLA
    compilation of the first shape), ``compile_times`` (per batch shape), ``name``, ``model``,
    ``algebra``, ``batch_shape``, ``input_names``, ``input_shapes``."""

    def __init__(self, model, name, algebra, gravity, batch_shape, numpy_out, dtype,
                 static=None):
        import jax

        f = _plan.lookup(name)
        function, self.input_names = f.public, f.inputs
        _plan.public_algebra(f, algebra)  # refuses an algebra the function has not
        kwargs = dict(static or {})
        _plan.static_arguments(f, model, kwargs)  # checked as sd.plan checks them
        if _plan.takes(f, "algebra"):
            kwargs["algebra"] = algebra
        if gravity is not None:
            kwargs["gravity"] = _gravity(f, gravity)
        self.name, self.model, self.algebra = name, model, algebra
        self.numpy_out = numpy_out
        self._sizes = [_size(model, k) for k in self.input_names]
        if dtype is None:
            dtype = np.float64 if jax.config.jax_enable_x64 else np.float32
        self.dtype = np.dtype(dtype)

        def program(*args):
            return function(model, *args, **kwargs)

        def packed_program(x):  # the inputs side by side on the last axis: one transfer in
            ends = np.cumsum(self._sizes)
            return program(*(x[..., end - n:end] for n, end in zip(self._sizes, ends)))

        options = compiler_options()
        self._jitted = {False: jax.jit(program, compiler_options=options),
                        True: jax.jit(packed_program, compiler_options=options)}
        self._executables = {}
        self.compile_times = {}
        self.compile_time = None
        self.batch_shape = None if batch_shape is None else tuple(batch_shape)
        self._expected_shapes = None if batch_shape is None else list(self.input_shapes)
        if self.batch_shape is not None:
            self._executable(self.batch_shape, packed=numpy_out)

    @property
    def input_shapes(self):
        batch = () if self.batch_shape is None else self.batch_shape
        return tuple(batch + (n,) for n in self._sizes)

    def _executable(self, batch, packed):
        """The executable for inputs of batch shape ``batch``: one array per input, or, for
        ``packed``, one array holding them side by side (numpy inputs of a ``numpy=True``
        function: one transfer instead of one per input, 11 instead of 16 us for one Panda
        state)."""
        exe = self._executables.get((batch, packed))
        if exe is None:
            import jax

            start = time.perf_counter()
            sizes = [sum(self._sizes)] if packed else self._sizes
            specs = [jax.ShapeDtypeStruct(batch + (n,), self.dtype) for n in sizes]
            exe = self._jitted[packed].lower(*specs).compile()
            seconds = time.perf_counter() - start
            self.compile_times.setdefault(batch, seconds)
            if self.compile_time is None:
                self.compile_time = seconds
            self._executables[batch, packed] = exe
        return exe

    def __call__(self, *args):
        if len(args) != len(self._sizes):
            raise TypeError(f"{self.name} takes {len(self._sizes)} arrays "
                            f"({', '.join(self.input_names)}), got {len(args)}")
        numpy_in = all(type(a) is np.ndarray for a in args)
        if not numpy_in:  # JAX arrays, or lists and scalars
            import jax

            if not any(isinstance(a, jax.Array) for a in args):
                args, numpy_in = [np.asarray(a) for a in args], True
        if numpy_in:
            args = [a if a.dtype == self.dtype else a.astype(self.dtype) for a in args]
        packed = numpy_in and self.numpy_out
        batch, expected = self.batch_shape, self._expected_shapes
        if batch is None:
            batch = tuple(np.broadcast_shapes(*(a.shape[:-1] for a in args)))
            args = [a if a.shape[:-1] == batch else self._broadcast(a, batch) for a in args]
            expected = [batch + (n,) for n in self._sizes]
        try:
            if [a.shape for a in args] != expected:
                raise ValueError("shapes")
            if packed:
                out = self._executable(batch, True)(np.concatenate(args, axis=-1))
            else:
                out = self._executable(batch, False)(*args)
        except (TypeError, ValueError) as error:
            shapes = ", ".join(f"{k} {tuple(np.shape(a))} {getattr(a, 'dtype', '')}"
                               for k, a in zip(self.input_names, args))
            raise ValueError(f"{self.name} was compiled for inputs of shapes "
                             f"{self.input_shapes} and dtype {self.dtype}; got {shapes}") from error
        return np.asarray(out) if self.numpy_out else out

    @staticmethod
    def _broadcast(a, batch):
        import jax.numpy as jnp

        xp = np if type(a) is np.ndarray else jnp
        return xp.broadcast_to(a, batch + a.shape[-1:])

    def __repr__(self):
        shape = "any batch" if self.batch_shape is None else f"batch_shape={self.batch_shape}"
        return (f"CompiledFunction({self.name!r}, model={self.model.name!r}, {shape}, "
                f"compile_time={self.compile_time})")


class NativeFunction:
    """A public screwdyn function as machine code for one model (``sd.compile``, native backend).

    Call it with the inputs in the order of ``input_names``: numpy float64 arrays of one state
    (n,) or a batch (N, n) take the fast entry (1-D arguments broadcast against a batch); any
    other input goes through the general path of the plan. Attributes: ``name``, ``model``,
    ``algebra``, ``gravity``, ``input_names``, ``input_shapes``, ``output_shape``,
    ``compile_time`` (seconds to trace and compile its optimised code, or to load it from the
    disk cache), ``source`` ("compiled" or "disk cache"), ``program`` (the
    ``execution.native.NativeProgram``)."""

    def __repr__(self):
        return (f"NativeFunction({self.name!r}, model={self.model.name!r}, "
                f"algebra={self.algebra!r}, {self.source}, compile_time={self.compile_time:.3g})")


def _size(model, name):
    """The size of one state of the input ``name``."""
    return model.nq if name == "q" else model.nv


def _gravity(function, gravity):
    """``gravity`` as a (3,) array for ``function``, which must take it."""
    if "gravity" not in function.options:
        raise ValueError(f"{function.name} takes no gravity")
    return np.asarray(gravity, dtype=float).reshape(3)


def _native(model, name, algebra, gravity, static):
    from .execution import native, plan

    function = plan.lookup(name)
    algebra = plan.public_algebra(function, algebra)
    arguments = plan.static_arguments(function, model, static)
    bound = {} if gravity is None else {"gravity": _gravity(function, gravity)}
    if function.check is not None:
        function.check(model)
    form = plan.factored(function, model, algebra)
    runs = function if form is None else form.columns  # the program's function (its factors)
    program = native.get(runs, model, algebra, runs.inputs, bound, arguments, optimise=True)
    general = plan.General(runs, model, algebra, runs.inputs, arguments)
    if bound:  # the general path passes the bound gravity on
        fallback = _with_gravity(general, bound["gravity"])
    else:
        fallback = general
    fast = program.bind(fallback)
    if form is not None:  # the factors, then the result from them
        fast = plan.FactoredCall(function, form, model, algebra, static=arguments,
                                 factors=fast if fast is not None else fallback)
    attributes = {"name": name, "model": model, "algebra": algebra, "gravity": bound.get("gravity"),
                  "input_names": function.inputs,
                  "input_shapes": tuple((program.input_sizes[k],)
                                        for k in range(len(function.inputs))),
                  "output_shape": (program.output_shape if form is None
                                   else tuple(function.output(model, *arguments))),
                  "compile_time": program.compile_time + (program.optimise_time or 0.0),
                  "source": program.source, "program": program,
                  "__call__": staticmethod(fast if fast is not None else fallback)}
    return type("NativeFunction", (NativeFunction,), attributes)()


def _with_gravity(general, gravity):
    """The general path of a function with the gravity bound at compile time."""
    from .execution import plan

    with_gravity = plan.General(general.function, general.model, general.algebra,
                                general.names + ("gravity",), general.static)

    def call(*args):
        if len(args) != len(general.names):
            raise TypeError(f"{general.function.name} takes {len(general.names)} arrays "
                            f"({', '.join(general.names)}), got {len(args)}")
        return with_gravity(*args, gravity)

    return call


def compile(model, function, algebra="spatial", gravity=None, batch_shape=(), numpy=False,
            dtype=None, backend=None, **static):
    """Compile the public function ``function`` (a name, e.g. ``"inverse_dynamics"``: any of
    ``screwdyn.execution.plan.REGISTRY``, every public array function) for ``model``: call the
    result like the public function without the model, ``f(q, qd, qdd)``. ``gravity`` (3,) is
    bound at compile time (default: (0, 0, -9.81)), and so are the function's static arguments
    (``link=`` and ``frame=`` of ``jacobian``, ``frame=`` of ``link_velocities``).

    ``backend="native"`` (the default when llvmlite is installed): a ``NativeFunction``, machine
    code from the execution plan, numpy in and out, one state or any batch (see the module
    docstring). ``batch_shape``, ``numpy`` and ``dtype`` are options of the JAX backend only.

    ``backend="jax"``: a ``CompiledFunction``, an XLA executable for inputs of shape
    ``batch_shape + (n,)``: ``batch_shape=()`` compiles for one state; ``(N,)`` for batches of N;
    ``None`` compiles lazily for each new batch shape. ``numpy=True`` returns numpy arrays.
    ``dtype``: float64 when ``jax_enable_x64`` is on (the default then), float32 otherwise."""
    from .execution import llvm

    if backend is None:
        backend = "native" if llvm.available() else "jax"
    if backend == "native":
        if batch_shape != () or numpy or dtype is not None:
            raise ValueError("batch_shape, numpy and dtype are options of backend='jax'; the "
                             "native function takes one state or any batch, numpy float64")
        if not llvm.available():
            raise ImportError("backend='native' needs llvmlite: pip install llvmlite")
        return _native(model, function, algebra, gravity, static)
    if backend != "jax":
        raise ValueError(f"backend must be 'native' or 'jax', got {backend!r}")
    try:
        import jax  # noqa: F401
    except ImportError as error:
        raise ImportError("screwdyn.compile with backend='jax' needs JAX: pip install jax") \
            from error
    return CompiledFunction(model, function, algebra, gravity, batch_shape, numpy, dtype, static)
