"""Calls into machine code whose frames are deeper than a thread's stack may be.

A program's loop is one function of machine code whose frame grows with the loop's body
(``llvm.stack_bound``): a simulation step of a large scene needs more than the 8 MB a thread
usually has (the main thread's ``ulimit -s``; other threads the C library's default, 128 kB on
musl, 512 kB on macOS), and running past it is a segmentation fault that ends the process. A
call whose bound is more than the calling thread surely has (``room``) runs on a thread of its
own, with a stack of that bound.
"""
import os
import threading

try:
    import resource
except ImportError:  # Windows: no ulimit to read
    resource = None

#: bytes of stack a call may take on any thread: beyond, ``deep_call`` gives it one
SHALLOW = 1 << 18
_MARGIN = 1 << 20  # bytes beyond the bound: Python's frames below, ctypes, the C library's calls
_SIZING = threading.Lock()  # threading.stack_size is the process's: one size set at a time


def _new_lock_in_child():  # a fork while another thread held it: the child's is free
    global _SIZING
    _SIZING = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def room() -> int:
    """Bytes of stack a call on this thread may take: on the main thread, its limit (``ulimit
    -s``) less a margin for the frames already on it; on another thread (whose size Python
    does not tell), ``SHALLOW``."""
    if resource is None or threading.current_thread() is not threading.main_thread():
        return SHALLOW
    soft = resource.getrlimit(resource.RLIMIT_STACK)[0]
    if soft == resource.RLIM_INFINITY:
        return 1 << 62
    return max(SHALLOW, soft - _MARGIN)


def deep_call(bound: int, function, *args):
    """``function(*args)`` (a ctypes function: it releases the GIL) with at least ``bound``
    bytes of stack: on this thread where it has that ``room``, else on a new thread with a
    stack of ``bound`` plus a margin, waited for (82 us more a call). Ctrl-C meanwhile lets
    the call finish (machine code cannot be stopped part way), then raises
    ``KeyboardInterrupt``, as a call on this thread would. A stack that cannot be had is a
    ``MemoryError`` saying how large it was."""
    if bound <= room():
        return function(*args)
    done, finished = [], threading.Event()

    def run():
        try:
            done.append((function(*args), None))
        except BaseException as error:  # noqa: BLE001  (raised again on the caller's thread)
            done.append((None, error))
        finally:
            finished.set()

    size = -(-(bound + _MARGIN) // (1 << 16)) * (1 << 16)  # whole 64 kB: what every OS takes
    with _SIZING:
        before = threading.stack_size(size)
        try:
            thread = threading.Thread(target=run, name="screwdyn-deep-call", daemon=True)
            thread.start()
        except (RuntimeError, ValueError, MemoryError) as error:
            raise MemoryError(f"a call of machine code needs a stack of {size:,} bytes "
                              f"(llvm.stack_bound), and no thread could have one: {error}") \
                from error
        finally:
            threading.stack_size(before)
    interrupted = None
    while not finished.is_set():  # (an interrupted Thread.join can leave is_alive() wrong)
        try:
            finished.wait()
        except KeyboardInterrupt as error:  # the call runs on: wait for it, then stop
            interrupted = error
    result, error = done[0]
    if error is not None:
        raise error
    if interrupted is not None:
        raise interrupted
    return result
