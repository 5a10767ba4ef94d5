"""The disk cache of compiled programs: object code by key, safe across processes and users.

An entry is one file, ``<key>.o`` in the cache directory: a header (magic, the key, a description
of the program it holds, the length and SHA-256 of description and payload) and the object code.
Keys are SHA-256 digests of everything the code depends on (``key``): the library's version, the
model's content (``content_hash``), the function, the algebra, the inputs, the host CPU and its
features, LLVM's and Python's versions and the source of the modules that build programs
(``source_fingerprint``), so a change of any of them makes a new entry instead of reusing a
stale one. On reading, an entry whose header, key, checksum or description (which function, model
hash, inputs and output shape; checked before the code is linked) does not match what the caller
expects is ignored, and the program is compiled again and rewritten.

Object code is run: an entry planted by someone else would run their code in this process. So
the directory is created 0700 (missing parents too), and a directory or entry that is not owned
by this user, or that its group or others may write, is never read nor written: programs are
compiled in memory and one ``CacheWarning`` names the path and the fix. Entries are opened
relative to the checked directory, never through a symbolic link, and checked again once open.

Writes go to a temporary file (mode 0600) in the same directory, renamed over the entry
(``os.replace``, atomic): two processes compiling the same program at once each write a complete
file and the last rename wins; a reader never sees half a file. Where the directory cannot be
written (read-only, no space), programs are kept in memory and one ``CacheWarning`` says so.

The cache is bounded: after each write, while its entries add up to more than ``size_limit()``
bytes (``$SCREWDYN_CACHE_SIZE``: bytes, or with a K, M or G suffix; 1G by default), the least
recently used are removed (a read marks an entry used). ``clear_cache()`` removes every entry.

The directory is ``$SCREWDYN_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/screwdyn`` or
``~/.cache/screwdyn``; ``set_directory`` changes it for this process.
"""
import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import secrets
import stat
import struct
import time
import warnings
import weakref

import numpy as np

from .._version import __version__

MAGIC = b"SCREWDYN-OBJ-3\n"
DEFAULT_SIZE_LIMIT = 1 << 30  # bytes (``$SCREWDYN_CACHE_SIZE``)
#: what ``prune`` leaves: this fraction of the limit (so that a full cache is not pruned at
#: every write)
PRUNE_TO = 0.75
_ENTRY = re.compile(r"^[0-9a-f]{64}(-\d+)?\.o$")
_TEMPORARY = re.compile(r"^\.[0-9a-f]{16}\.[0-9a-f]{16}\.tmp$")
STALE_TEMPORARY = 3600.0  # seconds: a temporary file older than this was left by a crash
_STATE = {"directory": None, "warned": set()}


class CacheWarning(UserWarning):
    """The program cache cannot be used (not writable, or not safe to read): compiled programs
    live in memory only."""


def directory():
    """The cache directory (created on first write)."""
    if _STATE["directory"] is None:
        root = os.environ.get("SCREWDYN_CACHE_DIR")
        if not root:
            base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                    ".cache")
            root = os.path.join(base, "screwdyn")
        _STATE["directory"] = os.path.abspath(root)
    return _STATE["directory"]


def set_directory(path):
    """Use ``path`` as the cache directory in this process (None: back to the default)."""
    _STATE["directory"] = None if path is None else os.path.abspath(os.fspath(path))
    _STATE["warned"] = set()


def path(key):
    return os.path.join(directory(), key + ".o")


def size_limit():
    """The most bytes the cache's entries may take: ``config.cache_size``, else
    ``$SCREWDYN_CACHE_SIZE`` (e.g. ``500M``, ``2G`` or a number of bytes), else 1G."""
    from .config import config

    if config.cache_size is not None:
        return config.cache_size
    text = os.environ.get("SCREWDYN_CACHE_SIZE", "").strip()
    if not text:
        return DEFAULT_SIZE_LIMIT
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kKmMgG]?)[bB]?", text)
    if match is None:
        raise ValueError(f"SCREWDYN_CACHE_SIZE={text!r}: expected a number of bytes, or with a "
                         "K, M or G suffix (e.g. 500M)")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return int(float(match.group(1)) * scale)


def _warn(key, message):
    """One ``CacheWarning`` per process and cache directory for each kind of problem."""
    if key not in _STATE["warned"]:
        _STATE["warned"].add(key)
        warnings.warn(f"screwdyn: {message}; compiled programs are kept in memory for this "
                      "process only", CacheWarning, stacklevel=5)


# -- the directory: created private, checked before every use ------------------------------
def _unsafe(st):
    """Why a file or directory with status ``st`` must not be trusted, or None."""
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"owned by user id {st.st_uid}, not by this user ({os.geteuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _make_private(folder):
    """Create ``folder`` and its missing parents with mode 0700 (whatever the umask)."""
    missing = []
    while not os.path.isdir(folder):
        missing.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass


@contextlib.contextmanager
def _open_directory(create, folder=None):
    """The cache directory (``folder``, else ``directory()``) as an open file descriptor
    (entries are opened relative to it), or None where it does not exist (and ``create`` is
    false) or is not safe (one warning)."""
    folder = directory() if folder is None else folder
    if not {os.open, os.unlink, os.rename, os.utime} <= os.supports_dir_fd:  # (replace: as rename)
        _warn(("platform", folder), "the program cache opens its entries relative to the checked "
              "directory (dir_fd), which this platform lacks, so it is not used")
        yield None
        return
    if create:
        _make_private(folder)
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        yield None
        return
    try:
        why = _unsafe(os.fstat(fd))
        if why is not None:
            _warn(("directory", folder),
                  f"the program cache {folder!r} is {why}, so it is not used (another user could "
                  f"plant code in it); fix: chmod 700 {folder!r} if it is yours, or set "
                  "SCREWDYN_CACHE_DIR to a directory of your own")
            yield None
        else:
            yield fd
    finally:
        os.close(fd)


def _open_entry(name, fd):
    """The bytes of entry ``name`` in the open directory ``fd``, or None (missing, a link, not a
    regular file, or not safe: one warning)."""
    try:
        entry = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
    except OSError:
        return None
    with os.fdopen(entry, "rb") as f:
        st = os.fstat(f.fileno())
        why = "not a regular file" if not stat.S_ISREG(st.st_mode) else _unsafe(st)
        if why is not None:
            where = os.path.join(directory(), name)
            _warn(("entry", where), f"the cache entry {where!r} is {why}, so it is not read; "
                  "fix: remove it (screwdyn.execution.clear_cache())")
            return None
        return f.read()


# -- entries --------------------------------------------------------------------------------
def _describe(description):
    return json.dumps(description, sort_keys=True, separators=(",", ":"), default=repr).encode()


def _header(key, about, payload):
    key = key.encode("ascii")
    return (MAGIC + struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(about)) + about
            + struct.pack("<Q", len(payload)))


def _parse(key, data):
    """(description bytes, payload) of an entry's bytes, or None if not a whole entry of
    ``key`` whose checksum matches."""
    head = MAGIC + struct.pack("<Q", len(key)) + key.encode("ascii")
    if not data.startswith(head) or len(data) < len(head) + 8:
        return None
    at = len(head)
    (n,) = struct.unpack_from("<Q", data, at)
    about, at = data[at + 8:at + 8 + n], at + 8 + n
    if len(about) != n or len(data) < at + 8 + 32:
        return None
    (length,) = struct.unpack_from("<Q", data, at)
    digest, payload = data[at + 8:at + 40], data[at + 40:]
    if len(payload) != length or hashlib.sha256(about + payload).digest() != digest:
        return None
    return about, payload


def load_object(key, description=None):
    """The object code stored under ``key``, or None: missing, unreadable, corrupted, not safe
    to read, or holding another program than ``description`` (a JSON-able dict of what the
    caller expects: function, model hash, inputs, output shape, ...). A hit marks the entry as
    recently used."""
    with _open_directory(create=False) as fd:
        if fd is None:
            return None
        data = _open_entry(key + ".o", fd)
        parsed = None if data is None else _parse(key, data)
        if parsed is None or parsed[0] != _describe(description):
            return None
        with contextlib.suppress(OSError):
            os.utime(key + ".o", dir_fd=fd)
        return parsed[1]


def has(key):
    """Whether a whole, safe entry is stored under ``key`` (what it holds is checked when it is
    loaded, ``load_object``)."""
    with _open_directory(create=False) as fd:
        data = None if fd is None else _open_entry(key + ".o", fd)
        return data is not None and _parse(key, data) is not None


def store_object(key, payload, description=None, folder=None, replaces=None):
    """Write ``payload`` under ``key`` with its ``description`` (atomically, mode 0600), then
    remove the entry ``replaces`` (the key of one it makes obsolete: a program's first code,
    once its optimised code is stored) and prune the cache to its size limit; returns
    ``payload``. ``folder``: the cache directory to write in, else ``directory()`` now (code
    compiled in the background passes the directory of the call that asked for it, so a later
    ``set_directory`` does not receive it). A directory that cannot be written, or is not safe,
    gives one ``CacheWarning`` per process."""
    payload = bytes(payload)
    folder = directory() if folder is None else folder
    about = _describe(description)
    data = _header(key, about, payload) + hashlib.sha256(about + payload).digest() + payload
    try:
        with _open_directory(create=True, folder=folder) as fd:
            if fd is None:
                if not os.path.isdir(folder):
                    raise FileNotFoundError(f"cannot create {folder!r}")
                return payload  # not safe: warned
            _write(fd, key + ".o", data)
            if replaces is not None:
                with contextlib.suppress(OSError):  # gone already: another process's doing
                    os.unlink(replaces + ".o", dir_fd=fd)
            prune(fd=fd)
    except OSError as error:
        _warn(("write", folder), f"cannot write the program cache in {folder!r} "
              f"({error}) (set SCREWDYN_CACHE_DIR to a writable directory to keep them)")
    return payload


def _write(fd, name, data):
    """Write ``data`` to ``name`` in the directory ``fd``: a temporary file, then a rename."""
    tmp = f".{name[:16]}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    out = os.open(tmp, flags, 0o600, dir_fd=fd)
    try:
        with os.fdopen(out, "wb") as f:
            f.write(data)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise


def _entries(fd):
    """[(mtime, size, name)] of the cache's entries (this user's own files) and the names of
    temporary files left by a crash."""
    entries, stale, now = [], [], time.time()
    with os.scandir(fd) as it:
        for e in it:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or _unsafe(st) is not None:
                continue
            if _ENTRY.match(e.name):
                entries.append((st.st_mtime, st.st_size, e.name))
            elif _TEMPORARY.match(e.name) and now - st.st_mtime > STALE_TEMPORARY:
                stale.append(e.name)
    return entries, stale


def prune(limit=None, fd=None):
    """Remove the least recently used entries while they add up to more than ``limit`` bytes
    (``size_limit()``), down to ``PRUNE_TO`` of it, and temporary files left by a crash.
    Returns the bytes removed."""
    if fd is None:
        with _open_directory(create=False) as fd:
            return 0 if fd is None else prune(limit, fd)
    limit = size_limit() if limit is None else limit
    entries, stale = _entries(fd)
    total, removed = sum(size for _, size, _ in entries), 0
    if total > limit:
        for _, size, name in sorted(entries):
            if total - removed <= PRUNE_TO * limit:
                break
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
                removed += size
    for name in stale:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fd)
    return removed


def clear_cache():
    """Remove every entry of the program cache (this user's own files in ``directory()``);
    returns the bytes removed. Programs already loaded in this process stay in use."""
    return prune(limit=0)


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


#: packages whose code makes programs beside the plan's functions (the simulation: its step,
#: contact models, integrators and controllers); the plan's functions name their own
PROGRAM_MAKERS = ("screwdyn.sim",)


def source_files():
    """The source files whose code can reach a program, computed: the modules of the kernels of
    every function of the execution plan and ``PROGRAM_MAKERS``, and every screwdyn module they
    import, transitively (read from their import statements, function-level ones included;
    the package's ``__init__``, the public namespace, is not followed)."""
    return _source_files(_roots())


def _roots():
    """The modules the fingerprint starts from (cheap: a set of names)."""
    from . import plan

    return frozenset({f.kernel.__module__ for f in plan._FUNCTIONS if f.kernel is not None}
                     | set(PROGRAM_MAKERS))  # (a Function without kernel: recursions outside)


def _source_files(roots):
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    seen, todo = set(), [m for m in roots if m.startswith("screwdyn.")]
    while todo:
        file = _module_file(package, todo.pop())
        if file is None or file in seen:
            continue
        seen.add(file)
        todo.extend(_imports(package, file))
    return sorted(seen)


def _module_file(package, module):
    """The file of screwdyn module ``module`` (a package: its ``__init__.py``), or None."""
    parts = module.split(".")[1:]
    if not parts:
        return None  # screwdyn's own __init__: the public namespace
    base = os.path.join(package, *parts)
    for file in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(file):
            return file
    return None


#: the import statements of a source file, read as text (a statement in a string counts too:
#: more files in the digest, never fewer): ``from <dots><module> import <names>``, the names in
#: parentheses over several lines, and ``import <modules>``
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([^\n]*)", re.M)


def _imports(package, file):
    """The screwdyn modules ``file`` imports (anywhere in it), as dotted names: its import
    statements read as text (every module parsed by ``ast`` took 0.4 s of a first call)."""
    with open(file, encoding="utf-8") as f:
        text = f.read().replace("\\\n", " ")
    relative = os.path.relpath(file, os.path.dirname(package))[:-3].split(os.sep)
    here = relative[:-1]
    out = []
    for statement in _IMPORT.finditer(text):
        out += [part.split()[0] for part in statement.group(1).split("#")[0].split(",")
                if part.strip()]
    for dots, module, names in _FROM.findall(text):
        base = module.split(".") if module else []
        if dots:
            base = here[:len(here) - len(dots) + 1] + base
        module = ".".join(base)
        out.append(module)
        names = re.sub(r"#[^\n]*", "", names).strip("()")
        out += [f"{module}.{name.split()[0]}" for name in names.split(",") if name.strip()]
    return [m for m in out if m.startswith("screwdyn.")]


def source_fingerprint():
    """A digest of ``source_files()`` (names and contents): a program compiled by other code is
    never reused. Computed once per set of root modules (a module defining functions imported
    later adds roots), not per call. Finding the files reads their imports (about 30 ms for
    the package's 90 modules, as text), so the digest is also kept in the disk cache under a
    digest of the whole package's sources and the roots: a later process with the same
    sources reads it (milliseconds); any edit anywhere in the package makes it computed
    again."""
    roots = _roots()
    state = _STATE.get("source")
    if state is None or state[0] != roots:
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        whole = hashlib.sha256(b"screwdyn-source-fingerprint|" + __version__.encode())
        for file in _package_files(package):
            whole.update(os.path.relpath(file, package).encode() + b"\0")
            with open(file, "rb") as f:
                whole.update(hashlib.sha256(f.read()).digest())
        whole.update("|".join(sorted(roots)).encode())
        stored_key, about = whole.hexdigest(), {"what": "source fingerprint"}
        stored = load_object(stored_key, about)
        if stored is not None and len(stored) == 64:
            digest = stored.decode("ascii")
        else:
            digest = _fingerprint(package, roots)
            store_object(stored_key, digest.encode("ascii"), about)
        _STATE["source"] = state = (roots, digest)
    return state[1]


def _fingerprint(package, roots):
    """The digest of the files reachable from ``roots`` (names and contents)."""
    digest = hashlib.sha256()
    for file in _source_files(roots):
        digest.update(os.path.relpath(file, package).encode())
        with open(file, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def _package_files(package):
    """Every .py file of the package, sorted."""
    return sorted(os.path.join(folder, name) for folder, _, names in os.walk(package)
                  for name in names if name.endswith(".py"))


def key(*parts):
    """The cache key (SHA-256 hex) of a program described by ``parts`` (and the library's
    version)."""
    out = []
    _canonical(("screwdyn", __version__) + parts, out)
    return hashlib.sha256(b"|".join(out)).hexdigest()
