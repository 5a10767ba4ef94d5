"""Rollout datasets read back only what belongs to them: each shard's own footer agrees with its
manifest line and dataset.json (a shard copied over another, its manifest checksum updated, is
refused on read and redone on resume), and a manifest line names only its chunk's shard in the
dataset folder (no path out of it, no link out of it). Issue #25, item 5."""
import hashlib
import json
import os
import shutil

import pytest

import screwdyn as sd
from rollout_helpers import DT, FAST, T_FINAL, pendulum
from screwdyn.rollouts import Dataset, RandomStates

pytest.importorskip("pyarrow")
N = 48  # 6 chunks of 8


@pytest.fixture(scope="module")
def model():
    return pendulum()


def write(model, out, seed=2):
    """The dataset of these tests (``seed`` changes every rollout); again: resume it."""
    return sd.rollouts(model, RandomStates(model, velocity_std=1.0), None, None, T_FINAL, DT,
                       out=out, n=N, seed=seed, **FAST)


@pytest.fixture(scope="module")
def original(model, tmp_path_factory):
    return write(model, tmp_path_factory.mktemp("original") / "ds")


@pytest.fixture
def ds(original, tmp_path):
    """A fresh copy of the original dataset folder, for a test to damage."""
    out = tmp_path / "ds"
    shutil.copytree(original.folder, out)
    return out


def edit_manifest(out, chunk, **fields):
    """Change some fields of one manifest line, the others kept."""
    path = out / "manifest.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for entry in lines:
        if entry["chunk"] == chunk:
            entry.update(fields)
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))


def replace_shard(out, chunk, source):
    """Put ``source``'s bytes in place of chunk ``chunk``'s shard and record its size and
    SHA-256 in the manifest, as someone covering the swap would."""
    data = source.read_bytes()
    (out / f"shard-{chunk:06d}.parquet").write_bytes(data)
    edit_manifest(out, chunk, bytes=len(data), sha256=hashlib.sha256(data).hexdigest())


def every_read(ds):
    """Each way of reading a dataset back, as thunks."""
    return [ds.arrays, ds.table, ds.to_pandas, ds.rollouts, lambda: list(ds.iter_shards()),
            lambda: ds.table(columns=["t", "q:wrist"])]


# ============================================================================================
# A shard's footer against its manifest line and dataset.json
# ============================================================================================
def test_a_shard_copied_over_another_is_refused_on_read(ds):
    replace_shard(ds, 2, ds / "shard-000001.parquet")
    for read in every_read(Dataset(ds)) + every_read(Dataset(ds, verify=False)):
        with pytest.raises(ValueError, match=r"shard-000002.parquet: its footer says chunk 1, "
                                             r"the manifest chunk 2; .*rerun the call"):
            read()
    assert set(Dataset(ds).verify()) == {"shard-000002.parquet"}


def test_a_shard_copied_over_another_is_redone_on_resume(model, original, ds):
    replace_shard(ds, 2, ds / "shard-000001.parquet")
    again = write(model, ds)
    assert again.run["chunks"] == 1 and again.run["skipped"] == N - 8
    assert again.verify() == {}
    assert again.rollouts().column("rollout").to_pylist() == list(range(N))
    assert [e["sha256"] for e in again.entries] == [e["sha256"] for e in original.entries]


def test_a_shard_of_another_dataset_is_refused_and_redone(model, original, ds, tmp_path):
    other = write(model, tmp_path / "other", seed=3)  # same model, chunks and ids; other seed
    replace_shard(ds, 2, tmp_path / "other" / "shard-000002.parquet")
    with pytest.raises(ValueError, match=r"shard-000002.parquet: its footer was made with "
                                         r"another seed \(3 there, 2 in dataset.json\)"):
        Dataset(ds).arrays()
    assert "another seed" in Dataset(ds).verify()["shard-000002.parquet"]
    again = write(model, ds)
    assert again.run["chunks"] == 1 and again.verify() == {}
    assert [e["sha256"] for e in again.entries] == [e["sha256"] for e in original.entries]
    assert other.entries[2]["sha256"] != original.entries[2]["sha256"]


def test_a_shard_of_another_model_is_refused(model, ds, tmp_path):
    write(model.with_joint_parameters(damping=0.1), tmp_path / "other")
    replace_shard(ds, 0, tmp_path / "other" / "shard-000000.parquet")
    with pytest.raises(ValueError, match=r"another model_hash .* in dataset.json"):
        Dataset(ds).rollouts()


def test_a_footer_without_the_manifest_lines_rollouts_is_refused(ds):
    """The last shard (rollouts 40 to 47) in place of the first: chunk and ids both differ."""
    replace_shard(ds, 0, ds / "shard-000005.parquet")
    with pytest.raises(ValueError, match=r"shard-000000.parquet: its footer says chunk 5"):
        Dataset(ds).table()


# ============================================================================================
# A manifest line names its own chunk's shard, in the folder
# ============================================================================================
@pytest.mark.parametrize("name", ["../outside.parquet", "ABSOLUTE", "sub/shard-000002.parquet",
                                  "shard-000001.parquet", "./shard-000002.parquet"])
def test_a_manifest_file_other_than_the_chunks_shard_is_refused(model, ds, tmp_path, name):
    outside = tmp_path / "outside.parquet"
    shutil.copy(ds / "shard-000002.parquet", outside)
    (ds / "sub").mkdir()
    shutil.copy(ds / "shard-000002.parquet", ds / "sub" / "shard-000002.parquet")
    name = str(outside) if name == "ABSOLUTE" else name
    edit_manifest(ds, 2, file=name)
    message = (rf"{ds}/manifest.jsonl line 3: file .* is not chunk 2's shard "
               rf"'shard-000002.parquet' .*remove that line .*{ds}")
    with pytest.raises(ValueError, match=message):
        Dataset(ds)
    with pytest.raises(ValueError, match=message):  # resuming refuses it too
        write(model, ds)
    assert outside.exists() and (ds / "sub" / "shard-000002.parquet").exists()


def test_a_shard_linked_out_of_the_folder_is_refused(model, ds, tmp_path):
    outside = tmp_path / "outside.parquet"
    shutil.move(ds / "shard-000002.parquet", outside)
    os.symlink(outside, ds / "shard-000002.parquet")
    message = (r"shard-000002.parquet \(.*manifest.jsonl line 3\) is a link to .*outside.parquet"
               r", outside the dataset folder")
    with pytest.raises(ValueError, match=message):
        Dataset(ds)
    with pytest.raises(ValueError, match=message):
        write(model, ds)
    assert outside.exists()


def test_the_manifest_lines_rollouts_must_be_the_chunks(ds):
    edit_manifest(ds, 2, rollouts=[8, 16])
    with pytest.raises(ValueError, match=r"line 3: rollouts \[8, 16\] are not chunk 2's "
                                         r"\[16, 24\]"):
        Dataset(ds)


def test_a_chunk_past_the_last_is_refused(ds):
    with open(ds / "manifest.jsonl", "a") as f:
        f.write(json.dumps({"chunk": 6, "rollouts": [48, 56], "file": "shard-000006.parquet",
                            "bytes": 1, "sha256": "0" * 64}) + "\n")
    with pytest.raises(ValueError, match=r"line 7: chunk 6 is past the dataset's last chunk"):
        Dataset(ds)


def test_a_line_cut_short_by_a_crash_is_still_ignored(ds):
    with open(ds / "manifest.jsonl", "a") as f:
        f.write('{"chunk": 5, "rollouts": [40, 4')
    assert len(Dataset(ds)) == N and Dataset(ds).verify() == {}


def test_a_dataset_reached_through_a_linked_folder_reads(original, ds, tmp_path):
    link = tmp_path / "link"
    os.symlink(ds, link)
    assert Dataset(link).verify() == {}
    assert Dataset(link).rollouts().column("rollout").to_pylist() == list(range(N))
