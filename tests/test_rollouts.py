"""sd.rollouts: chunks, engines (serial and worker processes), failures, faults, datasets, the
command. The reference for every rollout is sd.simulate itself; Ray is in test_rollouts_ray.py."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc

import numpy as np
import pytest

import screwdyn as sd
from rollout_helpers import (DT, FAST, PENDULUM, T_FINAL, KillOnce, NaNWhen, RaiseWhen,
                             datasets_on_two_engines, pendulum, states)
from screwdyn.rollouts import (Dataset, ProcessEngine, RandomStates, RolloutError,
                               rollout_seeds)
from screwdyn.rollouts.identity import content_hash

pytest.importorskip("pyarrow")
ARRAYS = ("q", "qd", "qdd", "tau", "kinetic", "potential")
PER_ROLLOUT = ("index", "seed", "ok", "failed_step", "failed_time", "n_samples", "q0", "qd0")
TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def model():
    return pendulum()


@pytest.fixture(scope="module")
def two_workers():
    """Two worker processes kept warm for the whole module (they are spawned once)."""
    with ProcessEngine(2) as engine:
        yield engine


def assert_same(a, b):
    """Two RolloutResults equal to the last bit (NaN where NaN)."""
    for name in ARRAYS + PER_ROLLOUT:
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape, name
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name
    assert a.error == b.error


# ============================================================================================
# Chunks: a rollout is computed by one fixed-width batch of sd.simulate
# ============================================================================================
def test_each_chunk_is_one_simulate_batch_of_the_chunk_width(model):
    q0 = states(20)
    result = sd.rollouts(model, q0, None, None, T_FINAL, DT, **FAST)
    for start in (0, 8):
        ref = sd.simulate(model, q0[start:start + 8], None, None, T_FINAL, DT,
                          integrator=FAST["integrator"])
        for name in ARRAYS:
            assert np.array_equal(getattr(result, name)[start:start + 8], getattr(ref, name))
    # the last chunk (4 rollouts) runs padded to the full width with copies of its first one
    padded = np.concatenate([q0[16:20], np.repeat(q0[16:17], 4, axis=0)])
    ref = sd.simulate(model, padded, None, None, T_FINAL, DT, integrator=FAST["integrator"])
    for name in ARRAYS:
        assert np.array_equal(getattr(result, name)[16:], getattr(ref, name)[:4])
    assert result.ok.all() and (result.n_samples == 51).all() and len(result.t) == 51
    np.testing.assert_allclose(result.t, np.arange(51) * DT, rtol=0, atol=1e-15)
    assert result.meta["run"]["chunks"] == 3 and result.meta["run"]["runs"] == 3


def test_results_do_not_depend_on_the_order_or_the_other_chunks(model):
    """A rollout's bits depend on its own chunk only: the same rollouts in a longer job, or
    resumed alone, are the same."""
    q0 = states(24)
    whole = sd.rollouts(model, q0, None, None, T_FINAL, DT, **FAST)
    part = sd.rollouts(model, q0[8:16], None, None, T_FINAL, DT, **FAST)
    for name in ARRAYS:
        assert np.array_equal(getattr(whole, name)[8:16], getattr(part, name))


# ============================================================================================
# Engines: the same bits on one core, one worker process or two
# ============================================================================================
def test_processes_equal_serial_bit_for_bit(model, two_workers):
    q0 = states(20, marked=(3, 17))  # two rollouts fail: failures must match too
    kw = dict(FAST, seed=5)
    serial = sd.rollouts(model, q0, None, NaNWhen(), T_FINAL, DT, **kw)
    two = sd.rollouts(model, q0, None, NaNWhen(), T_FINAL, DT, engine=two_workers, **kw)
    assert_same(serial, two)
    assert list(serial.failed) == [3, 17]
    assert two.meta["run"]["engine"] == "processes" and two.meta["run"]["workers"] == 2


def test_one_worker_process_by_name(model):
    q0 = states(20)
    serial = sd.rollouts(model, q0, None, None, T_FINAL, DT, **FAST)
    named = sd.rollouts(model, q0, None, None, T_FINAL, DT, engine="processes", workers=1,
                        **FAST)
    assert_same(serial, named)
    assert named.meta["run"]["workers"] == 1


# ============================================================================================
# Failures are per rollout
# ============================================================================================
def test_a_failing_rollout_is_marked_and_the_others_kept(model):
    q0 = states(8, marked=(2, 5))
    result = sd.rollouts(model, q0, None, NaNWhen(), T_FINAL, DT, **FAST)
    assert list(result.failed) == [2, 5]
    for i in (2, 5):
        assert "non-finite joint force" in result.error[i]
        assert result.failed_step[i] == 20 and result.failed_time[i] == pytest.approx(0.02)
        assert result.n_samples[i] == 20
        assert np.isnan(result.q[i, 20:]).all() and np.isfinite(result.q[i, :20]).all()
        with pytest.raises(sd.SimulationError) as alone:  # the rollout simulated by itself
            sd.simulate(model, q0[i], None, NaNWhen(), T_FINAL, DT,
                        integrator=FAST["integrator"])
        assert alone.value.step == 20
        np.testing.assert_allclose(result.q[i, :20], alone.value.trajectory.q, rtol=0,
                                   atol=1e-13)
    good = [0, 1, 3, 4, 6, 7]
    assert result.ok[good].all() and all(result.error[i] is None for i in good)
    ref = sd.simulate(model, q0[good], None, None, T_FINAL, DT, integrator=FAST["integrator"])
    np.testing.assert_allclose(result.q[good], ref.q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(result.tau[good], 0.0, atol=0)
    assert result.meta["run"]["runs"] == 3  # the chunk ran again after each failure


def test_a_controller_that_raises_in_one_rollout_numpy(model):
    """A numpy controller raises for the whole batch: the chunk is split until the raising
    rollouts are alone; each is marked with the controller's error."""
    q0 = states(8, marked=(2, 5))
    result = sd.rollouts(model, q0, None, RaiseWhen(), T_FINAL, DT, backend="numpy", **FAST)
    assert list(result.failed) == [2, 5]
    for i in (2, 5):
        assert result.error[i] == "the controller raised ValueError: wrist past 2.9"
        assert result.failed_step[i] == 10 and result.n_samples[i] == 10
    good = [0, 1, 3, 4, 6, 7]
    ref = sd.simulate(model, q0[good], None, None, T_FINAL, DT, backend="numpy",
                      integrator=FAST["integrator"])
    np.testing.assert_allclose(result.q[good], ref.q, rtol=0, atol=1e-13)
    assert result.ok[good].all()


def test_every_rollout_failing_the_same_way_stops_the_job(model):
    with pytest.raises(RolloutError, match="every rollout of chunk 0 .* failed at step 0: "
                                           "the controller returned a non-finite"):
        sd.rollouts(model, states(8), None, NaNWhen(limit=-10.0, after=0.0), T_FINAL, DT,
                    **FAST)


def test_a_job_error_in_a_worker_reaches_the_caller(model, two_workers):
    """Raised where sd.rollouts runs, noted with its chunk; the workers, which may still hold
    chunks of the failed job, are stopped and fresh ones serve the next call."""
    before = set(two_workers.pids)
    with pytest.raises(RolloutError, match="every rollout of chunk") as error:
        sd.rollouts(model, states(16), None, NaNWhen(limit=-10.0, after=0.0), T_FINAL, DT,
                    engine=two_workers, **FAST)
    assert any("raised in a worker while running chunk" in n for n in error.value.__notes__)
    assert two_workers.pids == []
    result = sd.rollouts(model, states(16), None, None, T_FINAL, DT, engine=two_workers, **FAST)
    assert result.ok.all() and not set(two_workers.pids) & before


def test_a_controller_of_the_wrong_shape_is_an_error(model):
    with pytest.raises(sd.SimulationError, match="joint forces of shape"):
        sd.rollouts(model, states(8), None, lambda t, q, qd: np.zeros(3), T_FINAL, DT, **FAST)


# ============================================================================================
# Faults: a worker killed in the middle of a chunk is replaced, its chunk run again
# ============================================================================================
@pytest.mark.slow  # a long validation: CI's slow tier (python -m pytest -m slow)
def test_a_killed_worker_process_is_replaced(model, two_workers, tmp_path):
    marker = str(tmp_path / "killed")
    controller = KillOnce(marker)
    q0 = states(40)
    replaced = two_workers.replaced
    ds = sd.rollouts(model, q0, None, controller, T_FINAL, DT, engine=two_workers,
                     out=tmp_path / "ds", **FAST)
    assert os.path.exists(marker), "no worker was killed"
    assert two_workers.replaced == replaced + 1 and ds.run["workers_replaced"] == 1
    with open(tmp_path / "ds" / "manifest.jsonl") as f:  # each chunk recorded once
        chunks = [json.loads(line)["chunk"] for line in f]
    assert sorted(chunks) == [0, 1, 2, 3, 4]
    # the same controller in this process now (the marker exists: it kills nobody)
    serial = sd.rollouts(model, q0, None, controller, T_FINAL, DT, **FAST)
    assert_same(ds.arrays(), serial)
    assert len(two_workers.pids) == 2


# ============================================================================================
# Datasets
# ============================================================================================
def test_dataset_round_trip_and_metadata(model, tmp_path):
    sampler = RandomStates(model, velocity_std=0.5)
    kw = dict(FAST, n=20, seed=7)
    memory = sd.rollouts(model, sampler, None, NaNWhen(limit=2.0), T_FINAL, DT, **kw)
    ds = sd.rollouts(model, sampler, None, NaNWhen(limit=2.0), T_FINAL, DT, out=tmp_path / "ds",
                     **kw)
    assert isinstance(ds, Dataset) and ds.complete and len(ds) == 20
    assert ds.verify() == {}
    assert_same(ds.arrays(), memory)
    assert isinstance(sd.read_rollouts(tmp_path / "ds"), Dataset)
    # one row per sample, named columns
    table = ds.table()
    assert table.column_names == ["rollout", "t", "q:hinge", "q:wrist", "qd:hinge", "qd:wrist",
                                  "qdd:hinge", "qdd:wrist", "tau:hinge", "tau:wrist",
                                  "kinetic", "potential"]
    assert table.num_rows == int(memory.n_samples.sum())
    frame = ds.to_pandas(columns=["rollout", "t", "q:wrist"])
    first = frame[frame.rollout == 3]
    np.testing.assert_array_equal(first["q:wrist"].to_numpy(), memory.q[3, :, 1])
    np.testing.assert_array_equal(first["t"].to_numpy(), memory.t)
    # per rollout: seed, status, error
    per = ds.rollouts().to_pandas()
    assert list(per.rollout) == list(range(20))
    np.testing.assert_array_equal(per.seed.to_numpy(np.uint64), rollout_seeds(7, 0, 20))
    assert list(per.ok) == list(memory.ok)
    assert ds.rollouts().column("error").to_pylist() == memory.error
    assert not all(memory.ok)  # some random states start past the limit
    # what the rollouts were made from, in dataset.json and in every shard's footer
    meta = ds.meta
    assert meta["model_hash"] == content_hash(model) and meta["model"] == "pendulum"
    assert meta["integrator"] == "semi_implicit_euler" and meta["dt"] == DT
    assert meta["controller"] == NaNWhen.name and meta["seed"] == 7
    assert meta["versions"]["screwdyn"] == sd.__version__
    assert meta["chunk_size"] == 8 and meta["n"] == 20 and meta["states"].startswith("Random")
    import pyarrow.parquet as pq

    for entry in ds.entries:
        footer = pq.read_schema(tmp_path / "ds" / entry["file"]).metadata
        shard_meta = json.loads(footer[b"screwdyn.dataset"])
        assert {k: shard_meta[k] for k in ("model_hash", "integrator", "dt", "controller")} == \
            {k: meta[k] for k in ("model_hash", "integrator", "dt", "controller")}
    # the streamed form: one shard at a time
    parts = list(ds.iter_shards())
    assert [len(p) for p in parts] == [8, 8, 4]
    np.testing.assert_array_equal(parts[2].q, memory.q[16:], strict=True)


def test_shards_are_the_same_bytes_on_every_engine(model, two_workers, tmp_path):
    a, b = datasets_on_two_engines(model, two_workers, tmp_path, n=20, seed=1)
    assert [e["sha256"] for e in a.entries] == [e["sha256"] for e in b.entries]
    for entry in a.entries:  # the manifest's checksum is the file's
        data = (tmp_path / "b" / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]


class StopAfter:
    """A progress callback that interrupts the run (as Ctrl-C would) after some chunks."""

    def __init__(self, chunks):
        self.chunks, self.calls = chunks, 0

    def __call__(self, done, total):
        self.calls += 1
        if self.calls == self.chunks:
            raise KeyboardInterrupt


class CtrlCOnceAllAreSent:
    """A progress callback: at the first chunk recorded, waits until the workers have written
    every shard (and so sent their results), then presses Ctrl-C."""

    def __init__(self, folder, shards):
        self.folder, self.shards, self.pressed = folder, shards, False

    def __call__(self, done, total):
        if self.pressed:
            return
        self.pressed = True
        deadline = time.monotonic() + 120  # a hang guard
        while len(list(self.folder.glob("shard-*.parquet"))) < self.shards \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # each result follows its file down the pipe
        os.kill(os.getpid(), signal.SIGINT)


def assert_ctrl_c_records_every_chunk_sent(model, out, **engine):
    """Four chunks on ``engine`` (two workers or actors, two chunks each), Ctrl-C once all
    four shards are written: all four are recorded, and the next run skips them all."""
    with pytest.raises(KeyboardInterrupt):
        sd.rollouts(model, states(32), None, None, T_FINAL, DT, out=out,
                    progress=CtrlCOnceAllAreSent(out, 4), **engine, **FAST)
    dataset = Dataset(out)
    assert len(dataset.entries) == 4 and dataset.verify() == {}
    again = sd.rollouts(model, states(32), None, None, T_FINAL, DT, out=out, **engine, **FAST)
    assert again.run["chunks"] == 0 and again.run["skipped"] == 32


def test_ctrl_c_records_the_shards_whose_results_were_sent(model, tmp_path):
    """Worker processes, two chunks each: a Ctrl-C while the other three chunks' results wait
    in the pipes records them before the job stops (before, one shard was recorded and the
    three others, whole on disk, were run again on resume)."""
    assert_ctrl_c_records_every_chunk_sent(model, tmp_path / "ds", engine="processes",
                                           workers=2)


def test_resume_skips_verified_shards_and_redoes_damaged_ones(model, tmp_path):
    kw = dict(FAST, n=48, seed=2)  # 6 chunks
    sampler = RandomStates(model, velocity_std=1.0)
    out = tmp_path / "ds"
    with pytest.raises(KeyboardInterrupt):
        sd.rollouts(model, sampler, None, None, T_FINAL, DT, out=out, progress=StopAfter(4),
                    **kw)
    partial = Dataset(out)
    assert not partial.complete and len(partial.entries) == 4 and partial.verify() == {}
    # damage: a flipped byte in shard 0, shard 1 cut short, a temporary file left by a crash
    data = bytearray((out / "shard-000000.parquet").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (out / "shard-000000.parquet").write_bytes(bytes(data))
    with open(out / "shard-000001.parquet", "r+b") as f:
        f.truncate(1000)
    (out / "shard-000004.parquet.123.tmp").write_bytes(b"half a shard")
    assert set(Dataset(out).verify()) == {"shard-000000.parquet", "shard-000001.parquet"}
    with pytest.raises(ValueError, match="corrupted"):
        Dataset(out).arrays()
    calls = []
    ds = sd.rollouts(model, sampler, None, None, T_FINAL, DT, out=out,
                     progress=lambda done, total: calls.append(done), **kw)
    assert ds.complete and ds.verify() == {}
    assert ds.run["skipped"] == 16 and ds.run["chunks"] == 4  # shards 2 and 3 were kept
    assert calls[-1] == 48
    assert not any(name.endswith(".tmp") for name in os.listdir(out))
    assert_same(ds.arrays(), sd.rollouts(model, sampler, None, None, T_FINAL, DT, **kw))
    again = sd.rollouts(model, sampler, None, None, T_FINAL, DT, out=out, **kw)
    assert again.run["chunks"] == 0 and again.run["skipped"] == 48


def test_a_folder_of_another_dataset_is_refused(model, tmp_path):
    out = tmp_path / "ds"
    kw = dict(FAST, n=8)
    sd.rollouts(model, states(8), None, None, T_FINAL, DT, out=out, **kw)
    other = model.with_joint_parameters(damping=0.1)
    with pytest.raises(ValueError, match="another model .*never mixed"):
        sd.rollouts(other, states(8), None, None, T_FINAL, DT, out=out, **kw)
    with pytest.raises(ValueError, match=r"other settings \(dt: 0.001 there, 0.002 now\)"):
        sd.rollouts(model, states(8), None, None, T_FINAL, 2e-3, out=out, **kw)
    with pytest.raises(ValueError, match="controller_hash"):
        sd.rollouts(model, states(8), None, NaNWhen(), T_FINAL, DT, out=out, **kw)
    assert Dataset(out).verify() == {} and len(Dataset(out)) == 8  # untouched
    stranger = tmp_path / "photos"
    stranger.mkdir()
    (stranger / "cat.jpg").write_bytes(b"...")
    with pytest.raises(ValueError, match="not empty and holds no screwdyn dataset"):
        sd.rollouts(model, states(8), None, None, T_FINAL, DT, out=stranger, **kw)


def test_a_folder_without_shards_takes_new_settings(model, tmp_path):
    """A run that stopped before its first shard (a broken controller) leaves nothing to mix
    with: the fixed call may use the folder."""
    out = tmp_path / "ds"
    with pytest.raises(RolloutError):
        sd.rollouts(model, states(8), None, NaNWhen(limit=-10.0, after=0.0), T_FINAL, DT,
                    out=out, **FAST)
    ds = sd.rollouts(model, states(8), None, None, T_FINAL, DT, out=out, **FAST)
    assert ds.complete and ds.meta["controller"] == "none"


def test_two_runs_never_write_one_folder_at_once(model, tmp_path):
    from screwdyn.rollouts.dataset import DatasetWriter

    out = tmp_path / "ds"
    sd.rollouts(model, states(8), None, None, T_FINAL, DT, out=out, **FAST)
    meta = Dataset(out).meta
    other = DatasetWriter(out, meta)  # a run in progress holds the folder
    other.open()
    try:
        with pytest.raises(RuntimeError, match="another run is writing the dataset"):
            sd.rollouts(model, states(8), None, None, T_FINAL, DT, out=out, **FAST)
    finally:
        other.close()
    assert sd.rollouts(model, states(8), None, None, T_FINAL, DT, out=out,
                       **FAST).run["skipped"] == 8


def test_samples_and_times_match_simulate_for_any_duration(model):
    """t_final not a multiple of dt * record_every: rounded up to whole recorded intervals as
    sd.simulate does."""
    q0 = states(3)
    result = sd.rollouts(model, q0, None, None, 0.0205, DT, record_every=3, **FAST)
    ref = sd.simulate(model, q0, None, None, 0.0205, DT, record_every=3,
                      integrator=FAST["integrator"])
    assert np.array_equal(result.t, ref.t) and result.q.shape == ref.q.shape
    assert result.trajectory().energy_drift().shape == (3,)


def test_memory_stays_bounded_while_streaming(model, tmp_path):
    """What the driver holds does not grow with the number of rollouts written."""
    from screwdyn.execution import native
    from screwdyn.execution import rollout as native_rollout

    peaks = []
    sampler = RandomStates(model)
    # only this test's programs in memory: optimising an earlier test's (a large scene's
    # step) took 15 minutes once
    native_rollout._ROLLOUTS.clear()
    native._PROGRAMS.clear()
    sd.rollouts(model, sampler, None, None, T_FINAL, DT, n=8, out=tmp_path / "warm", **FAST)
    # every optimised code made now, not in the background thread while memory is traced (a
    # compilation's allocations counted in a peak: 218 kB, then 484 kB, in one CI run)
    native_rollout.optimise_all()
    for program in list(native._PROGRAMS.values()):
        program.optimise(wait=True)
    native.wait_for_optimisation()
    for n in (16, 96):
        tracemalloc.start()
        sd.rollouts(model, sampler, None, None, T_FINAL, DT, n=n, out=tmp_path / f"n{n}",
                    **FAST)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 1.5 * peaks[0], peaks  # 6x the rollouts, about the same peak


def unshare_available():
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"
                            " 2>/dev/null || mount -t tmpfs -o size=64k tmpfs /tmp"],
                           capture_output=True)
    return probe.returncode == 0


FULL_DISK = """
import json, sys
sys.path[:0] = {paths!r}
import screwdyn as sd
from rollout_helpers import DT, FAST, T_FINAL, pendulum
from screwdyn.rollouts import Dataset, RandomStates
model = pendulum()
try:
    sd.rollouts(model, RandomStates(model, 1.0), None, None, T_FINAL, DT, n=400,
                out={out!r}, **FAST)
    print(json.dumps({{"error": None}}))
except OSError as e:
    ds = Dataset({out!r})
    print(json.dumps({{"error": str(e), "shards": len(ds.entries), "bad": ds.verify(),
                      "rollouts": len(ds.arrays())}}))
"""


@pytest.mark.skipif(not unshare_available(), reason="needs unshare -rm and tmpfs mounts")
def test_a_full_disk_stops_with_the_shards_so_far_intact(tmp_path):
    """A real full file system: a 320 KiB tmpfs, mounted in a private mount namespace."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = FULL_DISK.format(paths=[TESTS] + sys.path, out=str(disk / "ds"))
    run = subprocess.run(["unshare", "-rm", "sh", "-c",
                          f"mount -t tmpfs -o size=320k tmpfs {disk} && "
                          f"{sys.executable} -c \"$SCRIPT\""],
                         capture_output=True, text=True, env={**os.environ, "SCRIPT": script},
                         timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["error"] is not None, "the disk did not fill up"
    assert "No space left on device" in report["error"]
    assert "shards written before it are intact" in report["error"] or \
        "recorded before are intact" in report["error"]
    assert report["shards"] >= 1 and report["bad"] == {}
    assert report["rollouts"] == 8 * report["shards"]


NATIVE_THREADS = """
import json, os, sys, threading
sys.path[:0] = {paths!r}
import pyarrow
import screwdyn as sd
from rollout_helpers import DT, FAST, T_FINAL, pendulum
from screwdyn.rollouts import Dataset, RandomStates


def native():  # threads of this process that Python did not start (Arrow's pools among them)
    return len(os.listdir("/proc/self/task")) - threading.active_count()


model = pendulum()
sd.rollouts(model, RandomStates(model, 1.0), None, None, T_FINAL, DT, n=16, out={out!r}, **FAST)
before = native()
ds = Dataset({out!r})
ds.verify(), ds.arrays(), ds.table(), ds.rollouts(), list(ds.iter_shards()), ds.to_pandas()
print(json.dumps([before, native()]))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_reading_a_dataset_starts_no_arrow_thread(tmp_path):
    """Arrow's thread pools, once started, can abort the process at exit (apache/arrow#34314:
    "terminate called without an active exception", seen once in the full-disk test above).
    Every read of a dataset stays on the calling thread, so none is started."""
    script = NATIVE_THREADS.format(paths=[TESTS] + sys.path, out=str(tmp_path / "ds"))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    before, after = json.loads(run.stdout.strip().splitlines()[-1])
    assert after == before, f"reading the dataset started {after - before} native threads"


def test_an_unwritable_folder_is_a_clear_error(model, tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("not a folder")
    with pytest.raises(OSError, match="cannot create the dataset folder"):
        sd.rollouts(model, states(8), None, None, T_FINAL, DT, out=a_file / "ds", **FAST)
    if not unshare_available():
        return
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {[TESTS] + sys.path!r}
        import screwdyn as sd
        from rollout_helpers import DT, FAST, T_FINAL, pendulum, states
        try:
            sd.rollouts(pendulum(), states(8), None, None, T_FINAL, DT, out={str(tmp_path)!r},
                        **FAST)
        except OSError as e:
            print(e)
    """)
    run = subprocess.run(["unshare", "-rm", "sh", "-c",
                          f"mount -t tmpfs -o ro,size=64k tmpfs {tmp_path} && "
                          f"{sys.executable} -c \"$SCRIPT\""],
                         capture_output=True, text=True, env={**os.environ, "SCRIPT": script},
                         timeout=300)
    assert "cannot write the dataset folder" in run.stdout and "Read-only" in run.stdout, \
        run.stdout + run.stderr


# ============================================================================================
# Inputs: seeds, samplers, tables, bad arguments
# ============================================================================================
def test_seeds_are_per_rollout_and_reproduce_the_states(model):
    seeds = rollout_seeds(11, 0, 10)
    assert len(set(seeds.tolist())) == 10
    assert rollout_seeds(11, 4, 6).tolist() == seeds[4:6].tolist()
    expected = np.random.SeedSequence(11, spawn_key=(3,)).generate_state(1, np.uint64)[0]
    assert seeds[3] == expected
    sampler = RandomStates(model, velocity_std=2.0)
    result = sd.rollouts(model, sampler, None, None, T_FINAL, DT, n=10, seed=11, **FAST)
    for i in (0, 3, 9):
        q, qd = sampler(np.random.default_rng(int(seeds[i])))
        assert np.array_equal(result.q0[i], q) and np.array_equal(result.qd0[i], qd)
        assert np.array_equal(result.q[i, 0], q)
    other = sd.rollouts(model, sampler, None, None, T_FINAL, DT, n=10, seed=12, **FAST)
    assert not np.array_equal(other.q0, result.q0)


def test_a_torque_table_per_rollout(model):
    rng = np.random.default_rng(3)
    tables = rng.normal(size=(10, 50, 2))
    q0 = states(10)
    result = sd.rollouts(model, q0, None, tables, T_FINAL, DT, **FAST)
    ref = sd.simulate(model, q0[:8], None, tables[:8], T_FINAL, DT,
                      integrator=FAST["integrator"])
    assert np.array_equal(result.q[:8], ref.q)
    np.testing.assert_array_equal(result.tau[:8, :50], tables[:8])
    shared = sd.rollouts(model, q0, None, tables[0].tolist(), T_FINAL, DT, **FAST)  # a list
    np.testing.assert_array_equal(shared.tau[5, :50], tables[0])


def test_progress_bar_shows_rate_and_eta(model, capsys):
    sd.rollouts(model, states(16), None, None, T_FINAL, DT, progress=True, **FAST)
    err = capsys.readouterr().err
    assert "16/16" in err and ("rollout/s" in err or "s/rollout" in err)  # the rate
    assert "<" in err and "steps/s" in err  # elapsed<remaining (the ETA), steps per second


def test_model_hash_is_the_same_in_another_process(model):
    code = ("import sys; sys.path[:0] = %r\n"
            "from rollout_helpers import pendulum\n"
            "from screwdyn.rollouts.identity import content_hash\n"
            "print(content_hash(pendulum()))" % ([TESTS] + sys.path,))
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120)
    assert other.stdout.strip() == content_hash(model), other.stderr
    assert content_hash(model.with_joint_parameters(damping=0.1)) != content_hash(model)
    pd = sd.controllers.JointPD(model, 10.0, 1.0)
    assert content_hash(pd) == content_hash(sd.controllers.JointPD(pendulum(), 10.0, 1.0))
    assert content_hash(pd) != content_hash(sd.controllers.JointPD(model, 11.0, 1.0))


@pytest.mark.parametrize("change, message", [
    (dict(workers=0), "workers must be a positive integer"),
    (dict(engine="threads"), "unknown engine 'threads'"),
    (dict(engine="serial", workers=2), "engine='serial' runs in this process"),
    (dict(chunk_size=0), "chunk_size must be a positive integer"),
    (dict(t_final=-1.0), "t_final must be positive"),
    (dict(seed=-1), "seed must be a non-negative integer"),
    (dict(q0=np.zeros((4, 3))), r"q0 must have shape \(N, 2\)"),
    (dict(q0=np.zeros(2)), r"q0 must have shape \(N, 2\)"),
    (dict(qd0=np.zeros((3, 2))), r"qd0 must have shape \(4, 2\)"),
    (dict(q0=np.full((4, 2), np.nan)), "must be finite"),
    (dict(n=5), "n = 5 but q0 holds 4 rollouts"),
    (dict(integrator="rk5"), "unknown integrator 'rk5'"),
    (dict(control="sometimes"), "unknown control"),
    (dict(controller=np.zeros((10, 2))), "torque table has 10 rows but each rollout takes 50"),
    (dict(controller=np.zeros((3, 50, 2))), r"one torque table per rollout must have shape \(4,"),
])
def test_bad_inputs(model, tmp_path, change, message):
    args = dict(q0=np.zeros((4, 2)), qd0=None, controller=None, t_final=T_FINAL, dt=DT,
                out=tmp_path / "ds", **FAST)
    args.update(change)
    with pytest.raises(ValueError, match=message):
        sd.rollouts(model, **args)
    assert not (tmp_path / "ds").exists()  # nothing written before the error


def test_bad_sampler_inputs(model):
    with pytest.raises(ValueError, match="n \\(how many rollouts\\) is needed"):
        sd.rollouts(model, RandomStates(model), None, None, T_FINAL, DT, **FAST)
    with pytest.raises(ValueError, match="qd0 must be None"):
        sd.rollouts(model, RandomStates(model), np.zeros(2), None, T_FINAL, DT, n=4, **FAST)
    with pytest.raises(ValueError, match=r"must return \(q0 \(2,\), qd0 \(2,\) or None\)"):
        sd.rollouts(model, lambda rng: np.zeros(5), None, None, T_FINAL, DT, n=4, **FAST)
    with pytest.raises(ValueError, match=r"it returned \(shape \(\), None\)"):  # no broadcast
        sd.rollouts(model, lambda rng: (0.5, None), None, None, T_FINAL, DT, n=4, **FAST)


def test_an_unpicklable_controller_for_processes(model):
    with pytest.raises(ValueError, match="cannot be pickled.*module level"):
        sd.rollouts(model, states(4), None, lambda t, q, qd: 0 * qd, T_FINAL, DT,
                    engine="processes", workers=1, **FAST)


def test_ray_missing_says_how_to_install(model, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(ImportError, match=r'pip install "screwdyn\[ray\]"'):
        sd.rollouts(model, states(4), None, None, T_FINAL, DT, engine="ray", **FAST)


# ============================================================================================
# The command
# ============================================================================================
def command(*args):
    return [sys.executable, "-m", "screwdyn", "rollouts", *args]


@pytest.mark.slow  # a long validation: CI's slow tier (python -m pytest -m slow)
def test_command_writes_and_resumes_after_being_killed(tmp_path):
    urdf = tmp_path / "pendulum.urdf"
    urdf.write_text(PENDULUM)
    out = tmp_path / "ds"
    argv = command(str(urdf), "--n", "400", "--out", str(out), "--duration", "0.05",
                   "--chunk-size", "8", "--integrator", "semi-implicit-euler", "--engine",
                   "processes", "--workers", "1", "--velocity-std", "1", "--seed", "4",
                   "--quiet")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # the rerun loads the compiled rollout
    job = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    manifest = out / "manifest.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and job.poll() is None:
        if manifest.exists() and manifest.read_text().count("\n") >= 3:
            break
        time.sleep(0.05)
    job.send_signal(signal.SIGKILL)
    job.wait()
    done = Dataset(out)
    assert 3 <= len(done.entries) < 50, "the command finished before it could be killed"
    rerun = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "resumed" in rerun.stdout and "400 of 400 rollouts, 50 shards (complete)" in \
        rerun.stdout
    ds = Dataset(out)
    assert ds.verify() == {} and ds.meta["seed"] == 4
    model = sd.load_urdf(str(urdf))
    ref = sd.rollouts(model, RandomStates(model, 1.0), None, sd.controllers.ZeroTorque(),
                      T_FINAL, DT, n=400, seed=4, **FAST)
    assert_same(ds.arrays(), ref)


def test_command_bad_arguments(tmp_path, capsys):
    from screwdyn.cli import main

    assert main(["rollouts", "puma560", "--n", "0", "--out", str(tmp_path / "x")]) == 2
    assert "n must be a positive integer" in capsys.readouterr().err
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "notes.txt").write_text("mine")
    assert main(["rollouts", "puma560", "--n", "4", "--out", str(tmp_path / "y")]) == 2
    assert "not empty" in capsys.readouterr().err
