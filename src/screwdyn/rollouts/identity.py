"""Content hashes that say what a dataset was made from: the model, the controller, the states.

A hash is the SHA-256 of a canonical text of the object, built from its content, never from
``id()``, ``hash()`` (salted per process) or pickle bytes (which change with the pickler): the
same model loaded in two processes, or on two machines, hashes the same. Floats are written
exactly (``float.hex``), arrays by dtype, shape and the SHA-256 of their bytes, dataclasses by
their compared fields, functions by their module, name, bytecode, constants, defaults, closure
and the data globals they read, other objects by their type and attributes.
"""
import dataclasses
import functools
import hashlib
import types

import numpy as np

_DEPTH = 12  # nesting depth at which a description stops (a model is about 5 deep)


def content_hash(obj):
    """The SHA-256 (hex, 64 characters) of ``obj``'s canonical description."""
    return hashlib.sha256(canonical(obj).encode()).hexdigest()


def canonical(obj, _depth=0, _seen=None):
    """A text that two objects share exactly when they have the same content."""
    if _depth > _DEPTH:
        return f"<{_qualname(type(obj))}: too deep>"
    seen = set() if _seen is None else _seen

    def inner(x):
        return canonical(x, _depth + 1, seen)

    if obj is None or isinstance(obj, (bool, int, str, bytes)):
        return repr(obj)
    if isinstance(obj, float):
        return float.hex(obj)
    if isinstance(obj, complex):
        return f"complex({float.hex(obj.real)},{float.hex(obj.imag)})"
    if isinstance(obj, np.generic):
        return inner(obj.item())
    if isinstance(obj, np.ndarray):
        data = np.ascontiguousarray(obj)
        if data.dtype == object:
            return "object-array(" + ",".join(inner(x) for x in data.ravel()) + ")"
        return f"array({data.dtype.str},{data.shape},{hashlib.sha256(data.tobytes()).hexdigest()})"
    if isinstance(obj, (types.ModuleType, type)):
        return f"<{type(obj).__name__} {_qualname(obj)}>"
    if id(obj) in seen:
        return f"<cycle {_qualname(type(obj))}>"
    seen.add(id(obj))
    try:
        if isinstance(obj, (tuple, list, frozenset, set)):
            items = [inner(x) for x in obj]
            if isinstance(obj, (set, frozenset)):
                items.sort()
            return f"{type(obj).__name__}(" + ",".join(items) + ")"
        if isinstance(obj, dict):
            return "dict(" + ",".join(sorted(f"{inner(k)}:{inner(v)}"
                                             for k, v in obj.items())) + ")"
        if isinstance(obj, types.CodeType):
            return _code(obj, inner)
        if isinstance(obj, types.FunctionType):
            return _function(obj, inner)
        if isinstance(obj, types.MethodType):
            return f"method({inner(obj.__self__)},{inner(obj.__func__)})"
        if isinstance(obj, functools.partial):
            return f"partial({inner(obj.func)},{inner(obj.args)},{inner(obj.keywords)})"
        if hasattr(obj, "__array__") and hasattr(obj, "shape"):  # a JAX array, say
            return inner(np.asarray(obj))
        if dataclasses.is_dataclass(obj):
            fields = [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.compare]
            return f"{_qualname(type(obj))}(" + ",".join(f"{k}={inner(v)}"
                                                         for k, v in fields) + ")"
        state = _attributes(obj)
        if state is not None:
            return f"{_qualname(type(obj))}(" + ",".join(f"{k}={inner(v)}"
                                                         for k, v in sorted(state.items())) + ")"
        text = repr(obj)
        return f"<{_qualname(type(obj))}{'' if ' at 0x' in text else ' ' + text}>"
    finally:
        seen.discard(id(obj))


def _qualname(cls):
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', cls.__name__)}"


def _attributes(obj):
    state = {}
    if hasattr(obj, "__dict__"):
        state.update(vars(obj))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                state[slot] = getattr(obj, slot)
    if not state and not hasattr(obj, "__dict__") and not getattr(type(obj), "__slots__", None):
        return None
    return state


def _code(code, inner):
    consts = ",".join(inner(c) for c in code.co_consts)
    return (f"code({code.co_name},{hashlib.sha256(code.co_code).hexdigest()},({consts}),"
            f"{code.co_names},{code.co_varnames})")


def _function(fn, inner):
    """A function is its code, defaults, closure, and the data globals it reads (numbers, arrays,
    models; modules and other functions by name, so that a changed global table changes the
    hash but an imported library does not make it depend on the library's internals)."""
    closure = tuple(c.cell_contents for c in fn.__closure__ or () if _filled(c))
    data_globals = {}
    for name in _global_names(fn.__code__):
        if name in fn.__globals__:
            value = fn.__globals__[name]
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
                value = f"<function {getattr(value, '__module__', '?')}.{value.__qualname__}>"
            data_globals[name] = value
    return (f"function({fn.__module__}.{fn.__qualname__},{_code(fn.__code__, inner)},"
            f"{inner(fn.__defaults__)},{inner(fn.__kwdefaults__)},{inner(closure)},"
            f"{inner(data_globals)})")


def _filled(cell):
    try:
        _ = cell.cell_contents
    except ValueError:  # an empty cell (a name assigned later in the enclosing function)
        return False
    return True


def _global_names(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return sorted(names)


def describe(obj):
    """A short human name: ``name`` attribute, function name, type name or array shape."""
    if obj is None:
        return "none"
    if isinstance(obj, np.ndarray):
        return f"array {obj.shape}"
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(obj, "__qualname__", None) or type(obj).__qualname__
