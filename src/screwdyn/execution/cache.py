"""The disk cache of compiled programs: object code by key, safe across processes.

An entry is one file, ``<key>.o`` in the cache directory: a header (magic, the key, the length
and SHA-256 of the payload) and the object code. Keys are SHA-256 digests of everything the code
depends on (``key``): the model's content (``content_hash``), the function, the algebra, the
inputs, the host CPU, LLVM's and Python's versions and the source of the modules that build
programs (``source_fingerprint``), so a change of any of them makes a new entry instead of
reusing a stale one. On reading, an entry whose header, key or checksum does not match (a
truncated or corrupted file) is ignored, and the program is compiled again and rewritten.

Writes go to a temporary file in the same directory, renamed over the entry (``os.replace``, atomic
on POSIX and Windows): two processes compiling the same program at once each write a complete
file and the last rename wins; a reader never sees half a file. Where the directory cannot be
written (read-only, no space), programs are kept in memory and one ``CacheWarning`` says so.

The directory is ``$SCREWDYN_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/screwdyn`` or
``~/.cache/screwdyn``; ``set_directory`` changes it for this process.
"""
import dataclasses
import hashlib
import math
import os
import struct
import tempfile
import warnings
import weakref

import numpy as np

MAGIC = b"SCREWDYN-OBJ-2\n"
_STATE = {"directory": None, "warned": False}


class CacheWarning(UserWarning):
    """The program cache could not be written: compiled programs live in memory only."""


def directory():
    """The cache directory (created on first write)."""
    if _STATE["directory"] is None:
        root = os.environ.get("SCREWDYN_CACHE_DIR")
        if not root:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                    ".cache")
            root = os.path.join(base, "screwdyn")
        _STATE["directory"] = root
    return _STATE["directory"]


def set_directory(path):
    """Use ``path`` as the cache directory in this process (None: back to the default)."""
    _STATE["directory"] = None if path is None else os.fspath(path)
    _STATE["warned"] = False


def path(key):
    return os.path.join(directory(), key + ".o")


def load_object(key):
    """The object code stored under ``key``, or None (missing, unreadable or corrupted)."""
    try:
        with open(path(key), "rb") as f:
            data = f.read()
    except OSError:
        return None
    head = _header(key, b"")
    if len(data) < len(head) + 32 or not data.startswith(MAGIC):
        return None
    if data[:len(head) - 8] != head[:-8]:  # magic and key
        return None
    (length,) = struct.unpack("<Q", data[len(head) - 8:len(head)])
    digest, payload = data[len(head):len(head) + 32], data[len(head) + 32:]
    if len(payload) != length or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def _header(key, payload):
    key = key.encode("ascii")
    return MAGIC + struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(payload))


def store_object(key, payload):
    """Write ``payload`` under ``key`` (atomically); returns ``payload``. A directory that
    cannot be written gives one ``CacheWarning`` per process."""
    payload = bytes(payload)
    data = _header(key, payload) + hashlib.sha256(payload).digest() + payload
    folder = directory()
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=key[:16] + ".", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path(key))
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as error:
        if not _STATE["warned"]:
            _STATE["warned"] = True
            warnings.warn(f"screwdyn: cannot write the program cache in {folder!r} ({error}); "
                          "compiled programs are kept in memory for this process only (set "
                          "SCREWDYN_CACHE_DIR to a writable directory to keep them)",
                          CacheWarning, stacklevel=4)
    return payload


# -- keys -----------------------------------------------------------------------------------
def _canonical(x, out):
    """Append a canonical byte description of x (models, dataclasses, numbers, arrays, ...)."""
    if x is None or isinstance(x, (bool, np.bool_)):
        out.append(repr(bool(x) if x is not None else None).encode())
    elif isinstance(x, (int, np.integer)):
        out.append(b"i%d" % int(x))
    elif isinstance(x, (float, np.floating)):
        x = float(x)
        out.append(b"f" + (x.hex() if math.isfinite(x) else repr(x)).encode())
    elif isinstance(x, str):
        out.append(b"s%d:" % len(x) + x.encode())
    elif isinstance(x, bytes):
        out.append(b"b%d:" % len(x) + x)
    elif isinstance(x, np.ndarray):
        out.append(b"a" + repr((x.dtype.str, x.shape)).encode())
        for e in x.reshape(-1).tolist():
            _canonical(e, out)
    elif isinstance(x, (list, tuple)):
        out.append(b"(%d" % len(x))
        for e in x:
            _canonical(e, out)
        out.append(b")")
    elif isinstance(x, dict):
        out.append(b"{%d" % len(x))
        for k in sorted(x, key=repr):
            _canonical(k, out)
            _canonical(x[k], out)
        out.append(b"}")
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        out.append(b"D" + type(x).__qualname__.encode())
        for f in dataclasses.fields(x):
            if f.compare:
                _canonical(f.name, out)
                _canonical(getattr(x, f.name), out)
        out.append(b";")
    elif (type(x).__module__.split(".")[0] == "screwdyn" and not isinstance(x, type)
          and (hasattr(x, "__dict__") or hasattr(type(x), "__slots__"))):
        # screwdyn's own objects (joints, ...) by their state; any other object (a function, a
        # user's callable) has no content hash: what it computes is not in its state
        state = dict(getattr(x, "__dict__", {}))
        for name in getattr(type(x), "__slots__", ()):
            if hasattr(x, name):
                state[name] = getattr(x, name)
        out.append(b"O" + type(x).__qualname__.encode())
        _canonical({k: v for k, v in state.items() if not k.startswith("_")}, out)
    else:
        raise TypeError(f"no content hash for {type(x).__name__}")


def content_hash(x):
    """A SHA-256 hex digest of the content of ``x`` (a Model, its bodies and joints, numbers,
    arrays): equal in every process for equal content, unlike ``hash``. Frozen screwdyn objects
    (models) are hashed once per object."""
    frozen = dataclasses.is_dataclass(x) and type(x).__dataclass_params__.frozen
    if frozen:
        try:
            return _HASHES[x]
        except (KeyError, TypeError):
            pass
    out = []
    _canonical(x, out)
    digest = hashlib.sha256(b"|".join(out)).hexdigest()
    if frozen:
        try:
            _HASHES[x] = digest
        except TypeError:  # not weakly referenceable
            pass
    return digest


_HASHES = weakref.WeakKeyDictionary()


_SOURCES = ("algebra", "algorithms", "execution", "dynamics.py", "model", "_backend.py",
            "sim", "controllers.py")


def source_fingerprint():
    """A digest of the source files of the modules that make programs (the algebras, the
    algorithms, the public functions, the tracer and code generator): a program compiled by
    other code is never reused."""
    if "source" not in _STATE:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        digest = hashlib.sha256()
        for name in _SOURCES:
            top = os.path.join(root, name)
            files = [top] if os.path.isfile(top) else sorted(
                os.path.join(folder, f) for folder, _, names in os.walk(top)
                for f in names if f.endswith(".py"))
            for file in sorted(files):
                digest.update(os.path.relpath(file, root).encode())
                with open(file, "rb") as f:
                    digest.update(f.read())
        _STATE["source"] = digest.hexdigest()
    return _STATE["source"]


def key(*parts):
    """The cache key (SHA-256 hex) of a program described by ``parts``."""
    out = []
    _canonical(parts, out)
    return hashlib.sha256(b"|".join(out)).hexdigest()
