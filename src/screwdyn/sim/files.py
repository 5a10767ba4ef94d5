"""Trajectory files: ``.npz`` (any batch, compressed, metadata as JSON) and ``.csv`` (one rollout:
a ``#`` line of metadata, a header ``t, q:joint..., qd:..., qdd:..., tau:..., kinetic, ...``, one
row per sample, floats written exactly). Writes are atomic: a temporary file in the same folder,
renamed over the target when complete. Reading accepts a UTF-8 byte-order mark (spreadsheets
write one), and a file that is not a trajectory is a ``ValueError`` naming it."""
import csv
import io
import json
import os
import zipfile

import numpy as np

from ..atomic import atomic_write

FORMATS = (".npz", ".csv")
CSV_MAGIC = "# screwdyn trajectory "


def check_writable(path):
    """``ValueError`` unless ``path`` ends in .npz or .csv and its folder can be written (checked
    before a run, so that a long simulation is not lost at the end)."""
    path = os.fspath(path)
    if not path.lower().endswith(FORMATS):
        raise ValueError(f"unknown trajectory file type {path!r}: use .npz or .csv")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"cannot write {path!r}: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ValueError(f"cannot write {path!r}: permission denied")
    if os.path.isdir(path):
        raise ValueError(f"cannot write {path!r}: it is a folder")
    return path


def save(traj, path):
    path = check_writable(path)
    if path.lower().endswith(".csv"):
        return _save_csv(traj, path)
    arrays = {n: getattr(traj, n) for n in traj.ARRAYS}
    if traj.contact_force is not None:
        arrays["contact_force"] = traj.contact_force
    meta = np.array(_dumps(_meta_with_names(traj)))
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays, meta=meta), binary=True)
    return path


def load(cls, path, model=None):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"cannot read trajectory {path!r}: no such file")
    if path.lower().endswith(".csv"):
        traj = _load_csv(cls, path, model)
    else:
        with open(path, "rb") as f:
            if f.read(4) != b"PK\x03\x04":
                raise ValueError(f"{path}: not a screwdyn trajectory file (not an .npz archive)")
        try:
            with np.load(path, allow_pickle=False) as data:
                missing = [n for n in cls.ARRAYS[:7] + ("meta",) if n not in data.files]
                if missing:
                    raise ValueError(f"{path}: not a screwdyn trajectory (no "
                                     f"{', '.join(missing)})")
                arrays = {n: data[n] for n in cls.ARRAYS if n in data.files}
                forces = data["contact_force"] if "contact_force" in data.files else None
                meta = json.loads(str(data["meta"]))
        except (zipfile.BadZipFile, OSError, EOFError, json.JSONDecodeError, KeyError) as e:
            raise ValueError(f"{path}: not a screwdyn trajectory file ({type(e).__name__}: "
                             f"{e})") from None
        traj = cls(**arrays, model=model, meta=meta, contact_force=forces)
    _check_consistent(traj, path)
    if model is not None:
        _check_model(traj, model, path)
    return traj


def _check_consistent(traj, path):
    T = len(traj.t)
    q, qd = np.asarray(traj.q), np.asarray(traj.qd)
    if q.ndim < 2 or q.shape[-2] != T or qd.shape[:-1] != q.shape[:-1] or any(
            np.shape(getattr(traj, n))[:-1] != qd.shape[:-1] for n in ("qdd", "tau")):
        raise ValueError(f"{path}: inconsistent trajectory arrays (t {np.shape(traj.t)}, q "
                         f"{q.shape}, qd {qd.shape})")


def _check_model(traj, model, path):
    from .trajectory import coordinate_names

    nq, nv = traj.q.shape[-1], traj.qd.shape[-1]
    if (nq, nv) != (model.nq, model.nv):
        raise ValueError(f"{path}: the trajectory has nq = {nq}, nv = {nv} but model "
                         f"{model.name!r} has nq = {model.nq}, nv = {model.nv}: it was simulated "
                         f"with another model ({traj.meta.get('model', '?')!r})")
    names = traj.meta.get("q_names")
    if names is not None and list(names) != coordinate_names(model)[0]:
        raise ValueError(f"{path}: the trajectory's coordinates {names} are not those of model "
                         f"{model.name!r} {coordinate_names(model)[0]}")


def _meta_with_names(traj):
    meta = dict(traj.meta)
    if traj.model is not None:
        from .trajectory import coordinate_names

        meta["q_names"], meta["v_names"] = coordinate_names(traj.model)
    return meta


_CSV_GROUPS = ("q", "qd", "qdd", "tau")
_CSV_SCALARS = ("kinetic", "potential", "elastic", "work_in", "work_passive")


def _save_csv(traj, path):
    if traj.batch_shape:
        raise ValueError(f"CSV holds one rollout; this trajectory has batch "
                         f"{traj.batch_shape}: save traj[i] or use .npz")
    meta = _meta_with_names(traj)
    q_names = meta.get("q_names") or [f"q{i}" for i in range(traj.q.shape[-1])]
    v_names = meta.get("v_names") or [f"v{i}" for i in range(traj.qd.shape[-1])]
    header = (["t"] + [f"q:{n}" for n in q_names] + [f"qd:{n}" for n in v_names]
              + [f"qdd:{n}" for n in v_names] + [f"tau:{n}" for n in v_names]
              + list(_CSV_SCALARS))
    table = np.column_stack([traj.t, traj.q, traj.qd, traj.qdd, traj.tau]
                            + [getattr(traj, n) for n in _CSV_SCALARS])

    def write(f):
        f.write(CSV_MAGIC + _dumps(meta) + "\n")
        writer = csv.writer(f)
        writer.writerow(header)
        for row in table:
            writer.writerow([repr(float(x)) for x in row])

    return atomic_write(path, write, binary=False)


def _load_csv(cls, path, model):
    with open(path, newline="", encoding="utf-8-sig") as f:
        text = f.read()
    stream = io.StringIO(text)
    first = stream.readline()
    if not first.startswith(CSV_MAGIC):
        raise ValueError(f"{path}: not a screwdyn trajectory CSV (first line {first[:80]!r})")
    try:
        meta = json.loads(first[len(CSV_MAGIC):])
        reader = csv.reader(stream)
        header = next(reader)
        rows = [row for row in reader if row]
        if any(len(row) != len(header) for row in rows):
            raise ValueError("a row has a different number of fields than the header")
        table = np.array([[float(x) for x in row] for row in rows], dtype=float)
    except (ValueError, StopIteration) as e:
        raise ValueError(f"{path}: unreadable screwdyn trajectory CSV ({e})") from None
    table = table.reshape(-1, len(header))
    cols = {name: table[:, i] for i, name in enumerate(header)}
    if "t" not in cols:
        raise ValueError(f"{path}: the CSV has no 't' column")

    def group(prefix):
        names = [h for h in header if h.startswith(prefix + ":")]
        return np.column_stack([cols[h] for h in names]) if names else np.zeros((len(table), 0))

    scalars = {n: cols.get(n) for n in _CSV_SCALARS}
    if scalars["kinetic"] is None or scalars["potential"] is None:
        raise ValueError(f"{path}: the CSV has no kinetic/potential columns")
    return cls(cols["t"], *(group(g) for g in _CSV_GROUPS), **scalars, model=model, meta=meta)


def _dumps(obj):
    return json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
