"""The call from Python into a compiled kernel, at the cost of a C extension's call, without one.

A compiled kernel (``llvm.kernel_ir``) is reached from Python through one generic entry
function, itself LLVM IR (written below), made into a Python builtin function with CPython's
``METH_FASTCALL`` convention. Called with numpy arrays it does what a hand-written extension
would: for each argument, checks that it is a float64, aligned, C-contiguous ndarray of shape
(n,) (one state) or (N, n) (a batch; 1-D arguments then broadcast), allocates the result with
numpy's C API, calls the kernel and returns the result. Any other call (lists, other dtypes or
shapes, JAX arrays, a batch with several leading axes, wrong sizes) goes to a Python
``fallback`` with the same arguments, which converts, reports errors or picks another path.

It reads the fields of ``ndarray`` objects at the offsets of numpy's public struct
(``PyArrayObject_fields``), which are measured on a test array when this module sets up; if
anything does not match, ``available()`` is False and callers use ``call`` (ctypes) instead.
Batched calls release the GIL while the kernel runs.

The context of one bound kernel is an int64 numpy array passed as the builtin's ``self``::

    [kernel address, fallback (PyObject *), ndarray type, float64 descr, number of inputs,
     result ndim (0-3), result dims (3), hot (PyObject * or 0), states run, big, input sizes
     (...)]

A batch of ``big`` states or more, whose result takes ``results.MIN_BYTES`` or more, goes to the
fallback, which makes its result with ``results.fresh`` (on memory an earlier result gave back,
where a fresh array's pages would each be zeroed by the operating system).

``hot``, if set, is called once (without arguments, its result discarded) when the kernel has
run ``HOT_STATES`` states through the entry: the native programs use it to compile optimised
code in the background for the programs that are used (``native``). The kernel's address may be
replaced while the function is in use (``set_kernel``): a call reads it once.
"""
import ctypes
import sys

import numpy as np

from . import llvm, results

MAX_INPUTS = 8
MAX_OUTPUT_NDIM = 3
HOT_STATES = 1000  # states run through an entry before its ``hot`` hook is called
_HOT, _COUNT, _BIG, _SIZES = (6 + MAX_OUTPUT_NDIM, 7 + MAX_OUTPUT_NDIM, 8 + MAX_OUTPUT_NDIM,
                               9 + MAX_OUTPUT_NDIM)
_METH_FASTCALL = 0x0080
_NPY_DOUBLE = 12
_FLAGS = 0x0001 | 0x0100  # NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED
_STATE = {}


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


def _offsets():
    """Offsets of ob_type, data, nd, dimensions, descr, flags in an ndarray, checked on a test
    array; None if they are not numpy's public layout."""
    head = object.__basicsize__
    off = {"type": head - 8, "data": head, "nd": head + 8, "dims": head + 16,
           "descr": head + 40, "flags": head + 48}
    a = np.zeros((3, 5))
    base = id(a)

    def read(o, t=ctypes.c_void_p):
        return t.from_address(base + o).value

    try:
        ok = (read(off["type"]) == id(np.ndarray) and read(off["data"]) == a.ctypes.data
              and read(off["nd"], ctypes.c_int) == 2
              and ctypes.c_int64.from_address(read(off["dims"]) + 8).value == 5
              and read(off["descr"]) == id(a.dtype)
              and read(off["flags"], ctypes.c_int) & _FLAGS == _FLAGS
              and np.dtype(np.float64) is a.dtype and ctypes.sizeof(ctypes.c_void_p) == 8)
    except (ValueError, OSError):
        ok = False
    return off if ok else None


def _numpy_api():
    """numpy's C API table (void **)."""
    try:
        from numpy._core import _multiarray_umath as multiarray
    except ImportError:  # numpy 1.x
        from numpy.core import _multiarray_umath as multiarray
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get(multiarray._ARRAY_API, None)
    return (ctypes.c_void_p * 100).from_address(table)


def _entry_ir(off):
    """The generic entry (see the module docstring) as LLVM IR text."""
    H = off
    return f"""
declare ptr @screwdyn_PyArray_New(ptr, i32, ptr, i32, ptr, ptr, i32, i32, ptr)
declare ptr @screwdyn_PyObject_VectorcallDict(ptr, ptr, i64, ptr)
declare ptr @screwdyn_PyEval_SaveThread()
declare void @screwdyn_PyEval_RestoreThread(ptr)
declare void @screwdyn_Py_DecRef(ptr)

define ptr @screwdyn_entry(ptr %self, ptr %args, i64 %nargs) {{
entry:
  %ptrs = alloca [{MAX_INPUTS} x ptr]
  %strides = alloca [{MAX_INPUTS} x i64]
  %dims = alloca [{MAX_OUTPUT_NDIM + 1} x i64]
  %ctx.p = getelementptr i8, ptr %self, i64 {H['data']}
  %ctx = load ptr, ptr %ctx.p
  %nin.p = getelementptr i64, ptr %ctx, i64 4
  %nin = load i64, ptr %nin.p
  %type.p = getelementptr i64, ptr %ctx, i64 2
  %type = load ptr, ptr %type.p
  %descr.p = getelementptr i64, ptr %ctx, i64 3
  %descr = load ptr, ptr %descr.p
  %okn = icmp eq i64 %nargs, %nin
  br i1 %okn, label %check, label %slow
check:
  %k = phi i64 [ 0, %entry ], [ %k.next, %next ]
  %rows = phi i64 [ -1, %entry ], [ %rows.next, %next ]
  %finished = icmp eq i64 %k, %nin
  br i1 %finished, label %call, label %arg
arg:
  %a.p = getelementptr ptr, ptr %args, i64 %k
  %a = load ptr, ptr %a.p
  %at.p = getelementptr i8, ptr %a, i64 {H['type']}
  %at = load ptr, ptr %at.p
  %tok = icmp eq ptr %at, %type
  br i1 %tok, label %arg2, label %slow
arg2:
  %ad.p = getelementptr i8, ptr %a, i64 {H['descr']}
  %ad = load ptr, ptr %ad.p
  %dok = icmp eq ptr %ad, %descr
  %af.p = getelementptr i8, ptr %a, i64 {H['flags']}
  %af = load i32, ptr %af.p
  %afm = and i32 %af, {_FLAGS}
  %fok = icmp eq i32 %afm, {_FLAGS}
  %ok2 = and i1 %dok, %fok
  br i1 %ok2, label %arg3, label %slow
arg3:
  %nd.p = getelementptr i8, ptr %a, i64 {H['nd']}
  %nd = load i32, ptr %nd.p
  %adims.p = getelementptr i8, ptr %a, i64 {H['dims']}
  %adims = load ptr, ptr %adims.p
  %sizeidx = add i64 %k, {_SIZES}
  %size.p = getelementptr i64, ptr %ctx, i64 %sizeidx
  %size = load i64, ptr %size.p
  %is1 = icmp eq i32 %nd, 1
  br i1 %is1, label %one, label %arg4
one:
  %d0 = load i64, ptr %adims
  %ok1 = icmp eq i64 %d0, %size
  br i1 %ok1, label %next, label %slow
arg4:
  %is2 = icmp eq i32 %nd, 2
  br i1 %is2, label %two, label %slow
two:
  %r = load i64, ptr %adims
  %d1.p = getelementptr i64, ptr %adims, i64 1
  %d1 = load i64, ptr %d1.p
  %okd1 = icmp eq i64 %d1, %size
  %first = icmp eq i64 %rows, -1
  %same = icmp eq i64 %rows, %r
  %rok = or i1 %first, %same
  %ok3 = and i1 %okd1, %rok
  br i1 %ok3, label %next, label %slow
next:
  %rows.next = phi i64 [ %rows, %one ], [ %r, %two ]
  %stride = phi i64 [ 0, %one ], [ %size, %two ]
  %data.p = getelementptr i8, ptr %a, i64 {H['data']}
  %data = load ptr, ptr %data.p
  %pk = getelementptr ptr, ptr %ptrs, i64 %k
  store ptr %data, ptr %pk
  %sk = getelementptr i64, ptr %strides, i64 %k
  store i64 %stride, ptr %sk
  %k.next = add i64 %k, 1
  br label %check
call:
  %ond.p = getelementptr i64, ptr %ctx, i64 5
  %ond = load i64, ptr %ond.p
  %od.p = getelementptr i64, ptr %ctx, i64 6
  %od0 = load i64, ptr %od.p
  %od1.p = getelementptr i64, ptr %ctx, i64 7
  %od1 = load i64, ptr %od1.p
  %od2.p = getelementptr i64, ptr %ctx, i64 8
  %od2 = load i64, ptr %od2.p
  %single = icmp eq i64 %rows, -1
  br i1 %single, label %dims1, label %sized
sized:
  %big.p = getelementptr i64, ptr %ctx, i64 {_BIG}
  %big = load i64, ptr %big.p
  %isbig = icmp sge i64 %rows, %big
  br i1 %isbig, label %slow, label %dimsN
dims1:
  %e0 = getelementptr i64, ptr %dims, i64 0
  store i64 %od0, ptr %e0
  %e1 = getelementptr i64, ptr %dims, i64 1
  store i64 %od1, ptr %e1
  %e2 = getelementptr i64, ptr %dims, i64 2
  store i64 %od2, ptr %e2
  br label %alloc
dimsN:
  %f0 = getelementptr i64, ptr %dims, i64 0
  store i64 %rows, ptr %f0
  %f1 = getelementptr i64, ptr %dims, i64 1
  store i64 %od0, ptr %f1
  %f2 = getelementptr i64, ptr %dims, i64 2
  store i64 %od1, ptr %f2
  %f3 = getelementptr i64, ptr %dims, i64 3
  store i64 %od2, ptr %f3
  br label %alloc
alloc:
  %n = phi i64 [ 1, %dims1 ], [ %rows, %dimsN ]
  %extra = phi i64 [ 0, %dims1 ], [ 1, %dimsN ]
  %ndim64 = add i64 %ond, %extra
  %ndim = trunc i64 %ndim64 to i32
  %out = call ptr @screwdyn_PyArray_New(ptr %type, i32 %ndim, ptr %dims, i32 {_NPY_DOUBLE},
                                        ptr null, ptr null, i32 0, i32 0, ptr null)
  %failed = icmp eq ptr %out, null
  br i1 %failed, label %fail, label %run
run:
  %odata.p = getelementptr i8, ptr %out, i64 {H['data']}
  %odata = load ptr, ptr %odata.p
  %kern = load ptr, ptr %ctx
  %batch = icmp sgt i64 %n, 1
  br i1 %batch, label %released, label %held
held:
  call void %kern(i64 %n, ptr %ptrs, ptr %strides, ptr %odata)
  br label %count
released:
  %ts = call ptr @screwdyn_PyEval_SaveThread()
  call void %kern(i64 %n, ptr %ptrs, ptr %strides, ptr %odata)
  call void @screwdyn_PyEval_RestoreThread(ptr %ts)
  br label %count
count:
  %hot.p = getelementptr i64, ptr %ctx, i64 {_HOT}
  %hot = load ptr, ptr %hot.p
  %nohot = icmp eq ptr %hot, null
  br i1 %nohot, label %done, label %counting
counting:
  %cnt.p = getelementptr i64, ptr %ctx, i64 {_COUNT}
  %cnt = load i64, ptr %cnt.p
  %cnt.next = add i64 %cnt, %n
  store i64 %cnt.next, ptr %cnt.p
  %reached = icmp sge i64 %cnt.next, {HOT_STATES}
  br i1 %reached, label %fire, label %done
fire:
  store ptr null, ptr %hot.p
  %hres = call ptr @screwdyn_PyObject_VectorcallDict(ptr %hot, ptr null, i64 0, ptr null)
  %hnull = icmp eq ptr %hres, null
  br i1 %hnull, label %done, label %decref
decref:
  call void @screwdyn_Py_DecRef(ptr %hres)
  br label %done
done:
  ret ptr %out
fail:
  ret ptr null
slow:
  %fb.p = getelementptr i64, ptr %ctx, i64 1
  %fb = load ptr, ptr %fb.p
  %res = call ptr @screwdyn_PyObject_VectorcallDict(ptr %fb, ptr %args, i64 %nargs, ptr null)
  ret ptr %res
}}
"""


def _setup():
    """The entry's address and what binding needs, or None where the fast entry cannot be
    made (see the module docstring)."""
    if "entry" in _STATE:
        return _STATE["entry"]
    _STATE["entry"] = None
    off = _offsets()
    if off is None or not llvm.available():
        return None
    api = _numpy_api()
    if api[2] != id(np.ndarray):
        return None
    py = ctypes.pythonapi
    symbols = {"screwdyn_PyArray_New": api[93]}
    for name in ("PyObject_VectorcallDict", "PyEval_SaveThread", "PyEval_RestoreThread",
                 "Py_DecRef"):
        symbols["screwdyn_" + name] = ctypes.cast(getattr(py, name), ctypes.c_void_p).value
    ir = _entry_ir(off)
    from . import cache

    key = cache.key("entry", ir, llvm.host(), llvm.version(), sys.version)
    about = {"program": "entry"}
    obj = cache.load_object(key, about) or cache.store_object(key, llvm.compile_object(ir, 2),
                                                              about)
    library = llvm.Library(obj, symbols)
    new = py.PyCFunction_NewEx
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.py_object,
                                                   ctypes.c_void_p]
    _STATE["entry"] = (library, library.address("screwdyn_entry"), new)
    return _STATE["entry"]


def available():
    """Whether the fast entry works in this process."""
    return _setup() is not None


class _Context(bytearray):
    """The memory of a bound kernel's context, with the Python objects it points to kept alive
    as attributes (the fallback, the kernel's library, the method definition)."""


def bind(address, input_sizes, output_shape, fallback, keep, hot=None):
    """A Python callable running the kernel at ``address`` on numpy arrays (see the module
    docstring): ``fallback`` takes any other call; ``keep`` (the kernel's library) stays alive
    as long as the callable; ``hot()`` (which must not raise) is called once after
    ``HOT_STATES`` states. Returns None if the fast entry is not available here."""
    setup = _setup()
    if setup is None or len(input_sizes) > MAX_INPUTS or len(output_shape) > MAX_OUTPUT_NDIM:
        return None
    library, entry_address, new = setup
    words = [address, id(fallback), id(np.ndarray), id(np.dtype(np.float64)), len(input_sizes),
             len(output_shape)] + list(output_shape) + [0] * (MAX_OUTPUT_NDIM - len(output_shape))
    state_bytes = 8 * max(int(np.prod(output_shape, dtype=np.int64)), 1)
    words += [0 if hot is None else id(hot), 0, -(-results.MIN_BYTES // state_bytes)]
    words += list(input_sizes)
    memory = _Context(np.array(words, dtype=np.int64).tobytes())
    context = np.frombuffer(memory, dtype=np.int64)  # holds ``memory`` alive (its base)
    method = _MethodDef(b"screwdyn_kernel", entry_address, _METH_FASTCALL, None)
    memory.objects = (fallback, keep, library, method, hot)
    return new(ctypes.addressof(method), context, None)


def set_kernel(function, address):
    """Point a callable made by ``bind`` at the kernel at ``address`` (same inputs and result;
    one aligned 8-byte store, so a concurrent call uses the old or the new kernel)."""
    function.__self__[0] = address


_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                           ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p)


def caller(address):
    """A ctypes function for the kernel at ``address``: f(arrays, out) with arrays (N, n_k)
    float64 C-contiguous (or (n_k,), broadcast) and out (N, ...) float64 C-contiguous."""
    kernel = _KERNEL(address)

    def call(arrays, out, n):
        k = len(arrays)
        pointers = (ctypes.c_void_p * max(k, 1))(*(a.ctypes.data for a in arrays))
        strides = (ctypes.c_int64 * max(k, 1))(*(a.shape[-1] if a.ndim == 2 else 0
                                                  for a in arrays))
        kernel(n, pointers, strides, out.ctypes.data)

    call.kernel = kernel
    return call
