"""Optimised code (LLVM's level 2) compiled in a child process, so that nothing in this one
waits for it.

A program's first code is LLVM's level 0, compiled here in seconds; its optimised code follows
in the background (``native.in_background``) and may take minutes for a large simulation step
(six stacked boxes: 4 to 9 minutes). LLVM cannot be stopped inside a compilation, so a
compilation in this process held the process's exit, and any fork, until it was done. The
child (``serve``: one per process, started at the first optimisation, ``sys.executable`` with
this process's ``sys.path``, at nice 10 as the background thread) compiles one program at a
time; at exit it is killed, and a fork's copy of this process starts its own. It ignores Ctrl-C
(this process decides whether to stop), and reads its IR from a pipe: when this process dies it
reads the end of the pipe and ends.

``optimised_object(ir)`` is ``llvm.compile_object(ir, 2)``: the same LLVM, the same host, the
same object code. Where no child can be started (an interpreter that cannot run itself), the
compilation runs in this process, as it did before.
"""
import os
import signal
import struct
import subprocess
import sys
import threading

from . import llvm

_HEADER = struct.Struct("<BQ")  # a reply: 0 (object code) or 1 (an error's text), its length
#: the child, the pid of the process that started it, and whether this process is exiting
_CHILD = {"process": None, "pid": None, "stopped": False}
_LOCK = threading.Lock()  # one compilation at a time through the pipe
_STARTING = threading.Lock()  # a child is started, or the process stops, never both at once


class CompilerError(RuntimeError):
    """The child process could not compile a program (LLVM's error, or the child's end)."""


def optimised_object(ir: str) -> bytes:
    """Object code (bytes) of LLVM IR text at level 2, compiled by the child process."""
    with _LOCK:
        try:
            process = _child()
        except OSError:  # no child possible: compile here
            return llvm.compile_object(ir, 2)
        data = ir.encode()
        try:
            process.stdin.write(struct.pack("<Q", len(data)) + data)
            process.stdin.flush()
            status, size = _HEADER.unpack(_read(process.stdout, _HEADER.size))
            payload = _read(process.stdout, size)
        except (OSError, EOFError) as error:
            _CHILD["process"] = None
            code = process.poll()
            raise CompilerError(f"the compiler process ended (exit code {code}) while it "
                                f"compiled a program of {len(data)} bytes of IR") from error
        if status:
            raise CompilerError(payload.decode(errors="replace"))
        return payload


def _child():
    """The running child (started, or started again after it ended, or in a forked copy)."""
    with _STARTING:
        process = _CHILD["process"]
        if process is not None and _CHILD["pid"] == os.getpid() and process.poll() is None:
            return process
        if _CHILD["stopped"]:
            raise CompilerError("the process is exiting: no more optimised code")
        # the replies on a copy of the child's stdout, and its stdout itself on stderr:
        # whatever an import prints cannot fall into the replies
        code = "import os, sys; out = os.dup(1); os.dup2(2, 1); sys.path[:0] = sys.argv[1:]; " \
               "from screwdyn.execution.compiler import serve; serve(out)"
        process = subprocess.Popen([sys.executable, "-c", code, *[p for p in sys.path if p]],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        _CHILD.update(process=process, pid=os.getpid())
        return process


def _read(stream, size):
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def serve(out: int):
    """The child's loop: read a program's IR (length, text) from stdin, compile it at level 2,
    write the object code (or LLVM's error) to the file descriptor ``out``; end at the end of
    the input."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(os, "setpriority"):  # behind the parent's own work, as its background thread
        os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), 10))
    source, sink = sys.stdin.buffer, os.fdopen(out, "wb")
    while True:
        head = source.read(8)
        if len(head) < 8:
            return
        ir = _read(source, struct.unpack("<Q", head)[0]).decode()
        try:
            status, payload = 0, llvm.compile_object(ir, 2)
        except Exception as error:  # noqa: BLE001  (sent to the parent, which keeps level 0)
            status, payload = 1, f"{type(error).__name__}: {error}".encode()
        try:
            sink.write(_HEADER.pack(status, len(payload)) + payload)
            sink.flush()
        except BrokenPipeError:  # the parent is gone
            return


def stop():
    """Kill the child (a compilation in progress ends with a ``CompilerError``: the first code
    stays in use). At exit, from ``native``'s exit handler, before it waits for the worker."""
    with _STARTING:
        process = _CHILD["process"]
        _CHILD.update(process=None, stopped=True)
    if process is not None and _CHILD["pid"] == os.getpid():
        process.kill()
        process.wait()


def _after_fork_in_child():
    """A fork's copy starts its own child at its first optimisation (the pipe is its
    parent's), with a fresh lock (the parent's worker may have held it)."""
    global _LOCK, _STARTING
    _LOCK, _STARTING = threading.Lock(), threading.Lock()
    _CHILD.update(process=None, pid=None, stopped=False)


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
