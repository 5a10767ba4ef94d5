"""Rollout datasets on disk: sharded, checksummed Parquet files, written as chunks finish,
resumed after an interruption, read back as arrays or tables.

A dataset is a folder::

    dataset.json          what the rollouts were made from (model hash, versions, integrator,
                          dt, controller, seed, chunk size, ...): written first, checked on resume
    shard-000000.parquet  the rollouts of chunk 0, one row per sample (rollout, t, q:..., qd:...,
    shard-000001.parquet  qdd:..., tau:..., kinetic, potential), the per-rollout records (seed,
    ...                   status, error, initial state) and the dataset's metadata in the footer
    manifest.jsonl        one line per finished shard: its chunk, rollouts, size and SHA-256

Why Parquet: the samples are a table, and Parquet is the table format every tool a user feeds
(pandas, pyarrow, polars, DuckDB, Spark, Hugging Face datasets) reads directly; it compresses
float columns (byte-stream split + zstd), checksums every page, and carries key-value metadata
in each file, so a shard describes itself. Zarr suits n-dimensional arrays sliced in place; a
dataset of variable-length rollouts (failed ones stop early) read whole or by rollout is a table.

A shard is written to a temporary file, flushed to disk and renamed into place; only then is
its line appended to the manifest (and flushed). A crash leaves at worst a temporary file or an
unrecorded shard, which the next run removes and redoes; a shard whose bytes no longer match
its SHA-256 (a corrupted or truncated file) is redone as well.

A manifest line names only its own chunk's shard (``shard_name(chunk)``, a plain file in the
folder: never a path, nor a link leading out of it), and each shard's own footer must agree
with its line and with dataset.json (chunk, rollout ids, model hash and the other settings), so
that a shard copied over another, even with its manifest checksum updated, is refused on read
and redone on resume.
"""
import contextlib
import hashlib
import json
import os

import numpy as np

from .. import interrupts
from ..atomic import atomic_write

from .job import sample_times
from .result import RolloutResult

FORMAT = "screwdyn-rollouts/1"
META_FILE = "dataset.json"
MANIFEST = "manifest.jsonl"
LOCK = ".lock"
# the fields of dataset.json that make two runs the same dataset (resume) or not (refuse)
IDENTITY = ("format", "model", "model_hash", "nq", "nv", "integrator", "algebra", "backend",
            "control", "gravity", "dt", "t_final", "record_every", "divergence_limit",
            "controller", "controller_hash", "states", "states_hash", "seed", "n", "chunk_size",
            "versions")


def shard_name(chunk):
    return f"shard-{chunk:06d}.parquet"


def coordinate_columns(model):
    """Column names of the sample table: ``q:<coordinate>`` ... as ``Trajectory.save`` writes."""
    from ..sim import coordinate_names

    q_names, v_names = coordinate_names(model)
    return ([f"q:{n}" for n in q_names], [f"qd:{n}" for n in v_names],
            [f"qdd:{n}" for n in v_names], [f"tau:{n}" for n in v_names])


# ============================================================================================
# Writing: a chunk's rollouts as the bytes of one Parquet file
# ============================================================================================
def encode_shard(chunk, job):
    """The Parquet bytes of a ``ChunkResult``: one row per sample of every rollout (a failed
    rollout's samples before its failure), the per-rollout records and ``job``'s dataset
    metadata in the footer. The bytes depend on the rollouts only, not on where they ran."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n, T = chunk.stop - chunk.start, job.n_samples
    valid = (np.arange(T) < chunk.n_samples[:, None]).ravel()  # row-major: rollout, sample
    columns = {"rollout": np.repeat(np.arange(chunk.start, chunk.stop, dtype=np.int64), T)[valid],
               "t": np.tile(job.times(), n)[valid]}
    for names, key in zip(coordinate_columns(job.model), ("q", "qd", "qdd", "tau"), strict=True):
        block = chunk.arrays[key].reshape(n * T, -1)[valid]
        columns.update({name: block[:, j] for j, name in enumerate(names)})
    for key in ("kinetic", "potential"):
        columns[key] = chunk.arrays[key].reshape(n * T)[valid]
    records = [{"rollout": chunk.start + i, "seed": int(chunk.seed[i]), "ok": bool(chunk.ok[i]),
                "error": chunk.error[i],
                "failed_step": int(chunk.failed_step[i]) if not chunk.ok[i] else None,
                "failed_time": float(chunk.failed_time[i]) if not chunk.ok[i] else None,
                "n_samples": int(chunk.n_samples[i]), "q0": chunk.q0[i].tolist(),
                "qd0": chunk.qd0[i].tolist()} for i in range(n)]
    shard = {"chunk": chunk.chunk, "rollouts": [chunk.start, chunk.stop],
             "backend": chunk.backend}
    metadata = {b"screwdyn.dataset": job.dataset_meta[0].encode(),
                b"screwdyn.shard": json.dumps(shard).encode(),
                b"screwdyn.rollouts": json.dumps(records).encode()}
    table = pa.table(columns).replace_schema_metadata(metadata)
    floats = [name for name in columns if name != "rollout"]
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", use_dictionary=["rollout"],
                   use_byte_stream_split=floats, write_statistics=["rollout", "t"],
                   write_page_checksum=True, row_group_size=max(1, n * T))
    return sink.getvalue().to_pybytes()


def write_file(path, data):
    """Write ``data`` to ``path`` atomically: a temporary file in the same folder, flushed to
    disk, then renamed; on failure (a full disk) the temporary file is removed and nothing is
    left half written."""
    atomic_write(path, lambda f: f.write(data), binary=True)
    _sync_folder(os.path.dirname(path))


def _sync_folder(folder):
    with contextlib.suppress(OSError):  # not every platform can open a folder
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def shard_entry(chunk, data):
    """The manifest line of a shard: chunk, rollouts, file, size, SHA-256, failures."""
    return {"chunk": chunk.chunk, "rollouts": [chunk.start, chunk.stop],
            "file": shard_name(chunk.chunk), "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "failed": int((~chunk.ok).sum())}


def write_shard(folder, entry, data):
    """Write a shard's bytes in ``folder`` under its manifest ``entry``'s name."""
    if entry["file"] != shard_name(entry["chunk"]):
        raise ValueError(f"the entry of chunk {entry['chunk']} names {entry['file']!r}, not its "
                         f"shard {shard_name(entry['chunk'])!r}: nothing written in {folder}")
    path = os.path.join(folder, entry["file"])
    try:
        write_file(path, data)
    except OSError as e:
        raise OSError(e.errno, f"cannot write {path} ({e.strerror or e}); the shards written "
                               "before it are intact, and running the same call again resumes "
                               "from them") from e
    return entry


# ============================================================================================
# The folder: create or resume, refuse another dataset, record finished shards
# ============================================================================================
class DatasetWriter:
    """The driver's side of a dataset folder: ``open()`` checks or creates it and returns the
    chunks already done (verified); ``record(entry)`` appends a finished shard."""

    def __init__(self, folder, meta):
        self.folder, self.meta = os.path.abspath(os.fspath(folder)), meta
        self._manifest = self._lock = None

    def open(self):
        """Create the folder, or check that it holds this very dataset; remove what a crash
        left (temporary files, shards missing from the manifest, not matching their checksum
        or whose footer disagrees with their manifest line or this dataset: a shard copied
        over another). Returns {chunk: entry} of the verified shards."""
        folder = self.folder
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            raise OSError(e.errno, f"cannot create the dataset folder {folder}: "
                                   f"{e.strerror or e}") from e
        meta_path = os.path.join(folder, META_FILE)
        if not os.path.exists(meta_path):
            stray = sorted(n for n in os.listdir(folder) if n != LOCK)
            if stray:
                raise ValueError(f"{folder} is not empty and holds no screwdyn dataset "
                                 f"({', '.join(stray[:3])}{', ...' if len(stray) > 3 else ''}"
                                 "): give an empty or new folder for the rollouts")
        self._lock = _lock(folder)
        if os.path.exists(meta_path) and (read_manifest(folder) or _shard_files(folder)):
            check_same_dataset(folder, read_json(meta_path), self.meta)
        else:  # a new dataset, or one without a rollout yet: nothing to mix with
            self._write(meta_path, (json.dumps(self.meta, indent=1) + "\n").encode())
        entries = read_manifest(folder, self.meta)
        done = {c: e for c, e in entries.items() if shard_problem(folder, e, self.meta) is None}
        for name in os.listdir(folder):
            chunk = _chunk_of(name)
            stale = (name.endswith(".tmp") or name.startswith(".screwdyn-run-")
                     or (name.startswith(".screwdyn-") and name.endswith(".part")))
            if stale or (chunk is not None and chunk not in done):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(folder, name))
        lines = "".join(json.dumps(done[c]) + "\n" for c in sorted(done))
        self._write(os.path.join(folder, MANIFEST), lines.encode())
        try:
            self._manifest = open(os.path.join(folder, MANIFEST), "a")
        except OSError as e:
            raise OSError(e.errno, f"cannot write the dataset folder {folder}: "
                                   f"{e.strerror or e}") from e
        return done

    def _write(self, path, data):
        try:
            write_file(path, data)
        except OSError as e:
            raise OSError(e.errno, f"cannot write the dataset folder {self.folder} "
                                   f"({os.path.basename(path)}: {e.strerror or e})") from e

    def record(self, entry):
        """Append a finished shard to the manifest, flushed to disk: a whole line, Ctrl-C and
        SIGTERM waiting until it is written."""
        try:
            with interrupts.held(whole=True):
                self._manifest.write(json.dumps(entry) + "\n")
                self._manifest.flush()
                os.fsync(self._manifest.fileno())
        except OSError as e:
            raise OSError(e.errno, f"cannot append to {self.folder}/{MANIFEST} "
                                   f"({e.strerror or e}); the shards recorded before are "
                                   "intact, and running the same call again resumes") from e

    def close(self):
        if self._manifest is not None:
            with contextlib.suppress(OSError):
                self._manifest.close()
            self._manifest = None
        if self._lock is not None:
            self._lock.close()  # releases the lock
            self._lock = None


def _lock(folder):
    """Hold an exclusive lock on the folder's lock file, so that two runs never write one
    dataset at once (POSIX; elsewhere no lock)."""
    try:
        import fcntl
    except ImportError:
        return None
    try:
        handle = open(os.path.join(folder, LOCK), "a")
    except OSError as e:
        raise OSError(e.errno, f"cannot write the dataset folder {folder}: "
                               f"{e.strerror or e}") from e
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise RuntimeError(f"another run is writing the dataset in {folder} right now; wait "
                           "for it to finish (or stop it) before running this one") from None
    return handle


def _shard_files(folder):
    return [name for name in os.listdir(folder) if _chunk_of(name) is not None]


def _chunk_of(name):
    if name.startswith("shard-") and name.endswith(".parquet"):
        try:
            return int(name[len("shard-"):-len(".parquet")])
        except ValueError:
            return None
    return None


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_same_dataset(folder, old, new):
    """Raise ValueError unless dataset.json ``old`` and this run's ``new`` describe the same
    rollouts: another model, another controller or other settings are never mixed in."""
    if old.get("format") != FORMAT:
        raise ValueError(f"{folder} holds {old.get('format')!r} data, not a {FORMAT} dataset: "
                         "give another folder")
    if old.get("model_hash") != new.get("model_hash"):
        raise ValueError(f"{folder} holds rollouts of another model ({old.get('model')!r}, "
                         f"hash {str(old.get('model_hash'))[:12]}...) than this call's "
                         f"({new.get('model')!r}, hash {new.get('model_hash')[:12]}...); "
                         "datasets are never mixed: give another folder")
    differ = [k for k in IDENTITY if old.get(k) != new.get(k)]
    if differ:
        what = "; ".join(f"{k}: {_short(old.get(k))} there, {_short(new.get(k))} now"
                         for k in differ)
        raise ValueError(f"{folder} holds a dataset made with other settings ({what}); "
                         "rerun with the same settings to resume it, or give another folder")


def _short(value):
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_manifest(folder, meta=None):
    """{chunk: entry} from manifest.jsonl, the last entry of a chunk winning; a line cut short
    by a crash is ignored. Every line must name its own chunk's shard (``check_line``) and,
    given dataset.json's ``meta``, that chunk's rollouts (``check_rollouts``): ValueError."""
    entries = {}
    try:
        with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                check_line(folder, entry, f"line {number}")
                if meta is not None:
                    check_rollouts(folder, entry, meta, f"line {number}")
                entries[entry["chunk"]] = entry
    except FileNotFoundError:
        pass
    return entries


ENTRY_KEYS = ("chunk", "rollouts", "file", "bytes", "sha256")


def check_line(folder, entry, where):
    """Raise ValueError unless manifest ``entry`` (``where``: its line) has every field and
    names its own chunk's shard, ``shard_name(chunk)``: a plain file in ``folder``, never a
    path (``..``, an absolute path) nor a link that leads out of the folder."""
    chunk = entry.get("chunk") if isinstance(entry, dict) else None
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 0 or \
            any(k not in entry for k in ENTRY_KEYS):
        raise _bad_line(folder, where, f"{_short(entry)} is not a shard entry (with "
                                       f"{', '.join(ENTRY_KEYS)})")
    if entry["file"] != shard_name(chunk):
        raise _bad_line(folder, where, f"file {_short(entry['file'])} is not chunk {chunk}'s "
                                       f"shard {shard_name(chunk)!r} in the dataset folder")
    path = os.path.join(folder, entry["file"])
    if os.path.dirname(os.path.realpath(path)) != os.path.realpath(folder):
        raise ValueError(f"{path} ({os.path.join(folder, MANIFEST)} {where}) is a link to "
                         f"{os.path.realpath(path)}, outside the dataset folder {folder}; a "
                         "shard is read only from its own folder: put the file itself there, "
                         "or remove the link and that line (the next run of the call that made "
                         "the dataset redoes its shard)")


def check_rollouts(folder, entry, meta, where):
    """Raise ValueError unless manifest ``entry`` holds the rollouts its chunk implies in the
    dataset ``meta`` describes: [chunk * chunk_size, min(n, (chunk + 1) * chunk_size))."""
    chunk, n, size = entry["chunk"], meta["n"], meta["chunk_size"]
    expected = [chunk * size, min(n, (chunk + 1) * size)]
    if expected[0] >= n:
        raise _bad_line(folder, where, f"chunk {chunk} is past the dataset's last chunk "
                                       f"({-(-n // size) - 1}: {n} rollouts of {size})")
    if entry["rollouts"] != expected:
        raise _bad_line(folder, where, f"rollouts {_short(entry['rollouts'])} are not chunk "
                                       f"{chunk}'s {expected} ({size} rollouts a chunk)")


def _bad_line(folder, where, what):
    return ValueError(f"{os.path.join(folder, MANIFEST)} {where}: {what}; the manifest was "
                      "edited or damaged: remove that line (the next run of the call that made "
                      f"the dataset redoes its shard), or give another folder than {folder}")


def verify_entry(folder, entry, data=None):
    """None if the shard file matches its manifest entry (size and SHA-256), else the reason."""
    path = os.path.join(folder, entry["file"])
    if data is None:
        try:
            size = os.path.getsize(path)
        except OSError:
            return "missing"
        if size != entry["bytes"]:
            return f"{size} bytes instead of {entry['bytes']}"
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
        digest = digest.hexdigest()
    else:
        digest = hashlib.sha256(data).hexdigest()
    return None if digest == entry["sha256"] else "checksum mismatch"


def footer_problem(footer, entry, meta):
    """None if a shard's own footer (``footer``: its Parquet key-value metadata) describes the
    manifest ``entry``'s chunk and rollouts and the dataset ``meta`` (dataset.json) describes,
    else what disagrees."""
    try:
        shard = json.loads(footer[b"screwdyn.shard"])
        chunk, rollouts = shard["chunk"], shard["rollouts"]
        ids = [r["rollout"] for r in json.loads(footer[b"screwdyn.rollouts"])]
        made = dict(json.loads(footer[b"screwdyn.dataset"]))
    except (TypeError, KeyError, ValueError):
        return "its footer holds no screwdyn shard metadata"
    if chunk != entry["chunk"]:
        return f"its footer says chunk {chunk}, the manifest chunk {entry['chunk']}"
    expected = list(range(*entry["rollouts"]))
    if rollouts != entry["rollouts"] or ids != expected:
        return (f"its footer holds rollouts {_ids(ids)}, the manifest says chunk "
                f"{entry['chunk']} holds {_ids(expected)}")
    differ = [k for k in IDENTITY if made.get(k) != meta.get(k)]
    if differ:
        return "its footer was made with another " + "; ".join(
            f"{k} ({_short(made.get(k))} there, {_short(meta.get(k))} in {META_FILE})"
            for k in differ)
    return None


def _ids(ids):
    """Rollout ids in a message: "8 to 15" for a range, else the list (shortened)."""
    if not ids:
        return "none"
    if ids == list(range(ids[0], ids[0] + len(ids))):
        return f"{ids[0]} to {ids[-1]}"
    return _short(ids)


def read_footer(path):
    """A shard file's Parquet key-value metadata (read from its footer only)."""
    import pyarrow.parquet as pq

    return pq.read_schema(path).metadata


def shard_problem(folder, entry, meta):
    """None if the shard matches its manifest entry (size, SHA-256) and its footer agrees with
    the entry and ``meta`` (``footer_problem``), else the reason."""
    problem = verify_entry(folder, entry)
    if problem is not None:
        return problem
    try:
        footer = read_footer(os.path.join(folder, entry["file"]))
    except (OSError, ValueError) as e:
        return f"unreadable footer ({e})"
    return footer_problem(footer, entry, meta)


# ============================================================================================
# Reading
# ============================================================================================
class Dataset:
    """A rollout dataset folder, read back.

    ``meta``: dataset.json; ``len(ds)``: the rollouts in finished shards; ``complete``: whether
    every shard is there. ``arrays()``: a ``RolloutResult`` (arrays (N, T, ...));
    ``table()``: a ``pyarrow.Table`` of the samples, one row per sample; ``to_pandas()``: the
    same as a DataFrame; ``rollouts()``: a table of one row per rollout (seed, ok, error,
    n_samples, q0, qd0); ``iter_shards()``: one ``RolloutResult`` per shard (bounded memory).
    Each shard's bytes are checked against their SHA-256 as they are read (``verify=False``
    skips it), and its footer against its manifest line and dataset.json (chunk, rollout ids,
    model hash, settings: always); ``verify()`` checks them all. A manifest line naming
    another file than its chunk's shard in this folder is refused when the dataset is opened."""

    run = None  # what the call that returned it did (sd.rollouts sets it)

    def __init__(self, folder, verify=True):
        self.folder, self.check = os.path.abspath(os.fspath(folder)), verify
        path = os.path.join(self.folder, META_FILE)
        if not os.path.exists(path):
            raise ValueError(f"{self.folder} is not a screwdyn rollouts dataset (no {META_FILE})")
        self.meta = read_json(path)
        entries = read_manifest(self.folder, self.meta)
        self.entries = [entries[c] for c in sorted(entries)
                        if os.path.exists(os.path.join(self.folder, entries[c]["file"]))]

    @property
    def n_chunks(self):
        return -(-self.meta["n"] // self.meta["chunk_size"])

    @property
    def complete(self):
        return len(self.entries) == self.n_chunks

    def __len__(self):
        return sum(e["rollouts"][1] - e["rollouts"][0] for e in self.entries)

    def __repr__(self):
        state = "complete" if self.complete else f"{len(self.entries)} of {self.n_chunks} shards"
        return (f"Dataset({self.folder!r}: {len(self)} rollouts of {self.meta['model']!r}, "
                f"{state})")

    def verify(self):
        """{file: reason} of the shards that do not match their checksum, or whose footer
        disagrees with their manifest line or dataset.json (empty: all good)."""
        return {e["file"]: r for e in self.entries
                if (r := shard_problem(self.folder, e, self.meta)) is not None}

    def _check_footer(self, entry, footer):
        problem = footer_problem(footer, entry, self.meta)
        if problem is not None:
            path = os.path.join(self.folder, entry["file"])
            raise ValueError(f"{path}: {problem}; the shard does not belong there (copied from "
                             "another chunk or dataset?): rerun the call that made the dataset "
                             "to redo it")

    def _read(self, entry, columns=None):
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = os.path.join(self.folder, entry["file"])
        with open(path, "rb") as f:
            data = f.read()
        if self.check:
            problem = verify_entry(self.folder, entry, data)
            if problem is not None:
                raise ValueError(f"{path}: {problem}; the shard is corrupted (rerun the call that "
                                 "made the dataset to redo it)")
        # the file reader, on this thread: Arrow's thread pools, once started, can abort the
        # process at exit (apache/arrow#34314: "terminate called without an active
        # exception", seen here in a full-disk test). ``pq.read_table`` goes through Arrow's
        # dataset scanner, which starts a pool thread even with use_threads=False
        reader = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True,
                                pre_buffer=False)
        table = reader.read(columns=columns, use_threads=False)
        self._check_footer(entry, table.schema.metadata)
        self._check_rows(entry, table)
        return table

    def _check_rows(self, entry, table):
        """ValueError unless the shard's rollout column holds its manifest line's rollouts."""
        if "rollout" not in table.column_names or table.num_rows == 0:
            return
        ids = table.column("rollout").to_numpy()
        first, stop = entry["rollouts"]
        if ids.min() < first or ids.max() >= stop:
            path = os.path.join(self.folder, entry["file"])
            raise ValueError(f"{path}: its rows hold rollouts {ids.min()} to {ids.max()}, the "
                             f"manifest says chunk {entry['chunk']} holds {first} to "
                             f"{stop - 1}; rerun the call that made the dataset to redo it")

    def table(self, columns=None):
        """The samples of every finished shard as one ``pyarrow.Table`` (``columns``: a subset
        of rollout, t, q:<coordinate>, qd:..., qdd:..., tau:..., kinetic, potential)."""
        import pyarrow as pa

        tables = [self._read(e, columns) for e in self.entries]
        if not tables:
            return self._read_schema().empty_table()
        return pa.concat_tables(tables)

    def _read_schema(self):
        import pyarrow as pa

        names = ["rollout", "t"] + [c for group in self._columns() for c in group] + \
            ["kinetic", "potential"]
        return pa.schema([(n, pa.int64() if n == "rollout" else pa.float64()) for n in names])

    def _columns(self):
        m = self.meta
        return ([f"q:{n}" for n in m["q_names"]], [f"qd:{n}" for n in m["v_names"]],
                [f"qdd:{n}" for n in m["v_names"]], [f"tau:{n}" for n in m["v_names"]])

    def to_pandas(self, columns=None):
        """``table(columns)`` as a pandas DataFrame (converted on this thread, like every read
        here, so that no Arrow thread pool is left to abort the process at exit)."""
        return self.table(columns).to_pandas(use_threads=False)

    def rollouts(self):
        """One row per rollout: rollout, seed, ok, error, failed_step, failed_time,
        n_samples, q0, qd0 (a ``pyarrow.Table``; ``.to_pandas()`` for a DataFrame)."""
        import pyarrow as pa

        records = [r for e in self.entries for r in self._records(e)]
        return pa.Table.from_pylist(records, schema=pa.schema([
            ("rollout", pa.int64()), ("seed", pa.uint64()), ("ok", pa.bool_()),
            ("error", pa.string()), ("failed_step", pa.int64()), ("failed_time", pa.float64()),
            ("n_samples", pa.int64()), ("q0", pa.list_(pa.float64())),
            ("qd0", pa.list_(pa.float64()))]))

    def _records(self, entry):
        footer = read_footer(os.path.join(self.folder, entry["file"]))
        self._check_footer(entry, footer)
        return json.loads(footer[b"screwdyn.rollouts"])

    def iter_shards(self):
        """One ``RolloutResult`` per finished shard, in order (a shard in memory at a time)."""
        for entry in self.entries:
            yield self._result(entry)

    def arrays(self):
        """Every finished shard's rollouts as one ``RolloutResult`` (N, T, ...)."""
        meta = self.meta
        index = np.concatenate([np.arange(*e["rollouts"]) for e in self.entries]) \
            if self.entries else np.zeros(0, np.int64)
        result = RolloutResult.empty(index, meta["n_samples"], meta["nq"], meta["nv"],
                                     self._times(), meta)
        row = 0
        for entry in self.entries:
            count = entry["rollouts"][1] - entry["rollouts"][0]
            self._fill(result, slice(row, row + count), entry)
            row += count
        return result

    def _times(self):
        m = self.meta
        return sample_times(m["n_samples"], m["dt"], m["record_every"])

    def _result(self, entry):
        m = self.meta
        result = RolloutResult.empty(np.arange(*entry["rollouts"]), m["n_samples"], m["nq"],
                                     m["nv"], self._times(), m)
        self._fill(result, slice(0, len(result)), entry)
        return result

    def _fill(self, result, rows, entry):
        table = self._read(entry)
        records = json.loads(table.schema.metadata[b"screwdyn.rollouts"])
        n, T = len(records), self.meta["n_samples"]
        n_samples = np.array([r["n_samples"] for r in records], dtype=np.int64)
        valid = np.arange(T) < n_samples[:, None]
        arrays = {}
        for key, names in zip(("q", "qd", "qdd", "tau"), self._columns(), strict=True):
            block = np.full((n, T, len(names)), np.nan)
            block[valid] = np.column_stack([table.column(c).to_numpy() for c in names])
            arrays[key] = block
        for key in ("kinetic", "potential"):
            block = np.full((n, T), np.nan)
            block[valid] = table.column(key).to_numpy()
            arrays[key] = block
        result.fill(rows, dict(
            arrays=arrays, seed=np.array([r["seed"] for r in records], dtype=np.uint64),
            ok=np.array([r["ok"] for r in records]), error=[r["error"] for r in records],
            failed_step=np.array([-1 if r["failed_step"] is None else r["failed_step"]
                                  for r in records], dtype=np.int64),
            failed_time=np.array([np.nan if r["failed_time"] is None else r["failed_time"]
                                  for r in records]),
            n_samples=n_samples, q0=np.array([r["q0"] for r in records]).reshape(n, -1),
            qd0=np.array([r["qd0"] for r in records]).reshape(n, -1)))


def open_dataset(folder, verify=True):
    """Read a rollout dataset folder (see ``Dataset``)."""
    return Dataset(folder, verify=verify)
