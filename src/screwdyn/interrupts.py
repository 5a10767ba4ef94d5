"""Ctrl-C and SIGTERM, held until a point where stopping is safe. Inside ``held()``, SIGINT and
SIGTERM (where Python handles them: in the main thread, with a Python handler) are noted instead
of handled; ``stop_if_noted()`` handles the first one noted at a point the caller chooses (Ctrl-C:
``KeyboardInterrupt`` raised there), and the end of the outermost ``held()`` handles one left.

Why: Python runs a signal's handler at whatever line comes next, and a ``KeyboardInterrupt``
raised inside a finaliser (``__del__``, a weakref callback, JAX's garbage-collection callback)
is printed and dropped ("Exception ignored in"): Ctrl-C was then lost and a long simulation ran
to its end. A noted signal is never lost, and a run stops at the end of a call, with the samples
so far, rather than half way through one. A second signal while one waits is handled at once
(a run whose Python controller blocks still stops), except in a ``held(whole=True)`` block, which
must finish (a temporary file made or removed, a manifest line written). Blocks nest (one hold,
the outermost's)."""
import contextlib
import signal
import threading
from typing import Iterator

#: the signals held: Ctrl-C's KeyboardInterrupt, and a command's SIGTERM handler
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM") if hasattr(signal, name))

_HELD: dict = {"depth": 0, "whole": 0, "handlers": {}, "noted": []}


def _note(signum, frame):
    """The held signals' handler: note the signal; a second one, outside a ``whole`` block, is
    also handled at once by its own handler (the first stays noted: should that handler's
    exception be dropped in a finaliser, the next ``stop_if_noted`` still stops)."""
    _HELD["noted"].append((signum, frame))
    if len(_HELD["noted"]) > 1 and not _HELD["whole"]:
        _HELD["handlers"][signum](signum, frame)


def _hold():
    for signum in _HELD["handlers"]:
        signal.signal(signum, _note)


def _release():
    """The handlers back, and the first signal noted (if any) handled by its own."""
    for signum, handler in _HELD["handlers"].items():
        signal.signal(signum, handler)
    _handle_first()


def _handle_first():
    if _HELD["noted"]:
        signum, frame = _HELD["noted"][0]
        _HELD["noted"].clear()  # Ctrl-C pressed twice is one stop
        _HELD["handlers"][signum](signum, frame)


def _in_main_thread():
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def held(whole: bool = False) -> Iterator[None]:
    """SIGINT and SIGTERM noted, not handled, inside the block (in the main thread; a signal
    that Python does not handle, ignored or SIGTERM's default, is left alone; elsewhere the block
    changes nothing). A second signal is handled at once, unless the block (or one around it)
    is ``whole``: then every signal waits. At the end of the outermost block the handlers are
    put back and the first signal noted is handled by its own handler (Ctrl-C:
    ``KeyboardInterrupt`` raised there)."""
    if not _in_main_thread():
        yield
        return
    if _HELD["depth"] == 0:
        _HELD["handlers"] = {s: h for s in SIGNALS if callable(h := signal.getsignal(s))}
        _HELD["noted"].clear()
        _hold()
    _HELD["depth"] += 1
    _HELD["whole"] += whole
    try:
        yield
    finally:
        _HELD["depth"] -= 1
        _HELD["whole"] -= whole
        if _HELD["depth"] == 0:
            _release()


def noted() -> bool:
    """Whether a held signal waits to be handled."""
    return bool(_HELD["noted"])


def stop_if_noted() -> None:
    """Inside ``held()``: the first signal noted, if any, handled now by its own handler (Ctrl-C:
    ``KeyboardInterrupt`` raised here); the signals stay held after it. Call it where stopping
    loses nothing: between two calls of machine code, after a sample is kept."""
    if _HELD["noted"] and _HELD["depth"] > 0 and _in_main_thread():
        _handle_first()


@contextlib.contextmanager
def let_through() -> Iterator[None]:
    """Inside ``held()``: signals handled as usual for a while (one noted before is handled as
    the block starts); held again after it. Outside ``held()`` it changes nothing."""
    if _HELD["depth"] == 0 or not _in_main_thread():
        yield
        return
    try:
        _release()
        yield
    finally:
        _hold()
