"""Ctrl-C, for real: native and JAX simulations, rollouts to a dataset and saves, interrupted by
signals sent to real processes. A call into machine code or a compiled JAX loop cannot be
interrupted, so each call is sized to a fraction of a second (``pacing.Paced``); Ctrl-C stops
the run when the call returns, keeps the samples so far, and ``screwdyn simulate`` saves them
and exits with status 130. A save interrupted half way leaves the previous file as it was and no
temporary file. The only times here are generous hang guards (a shared, noisy machine)."""
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.sim import Trajectory, simulate

HANG = 60  # seconds: the process must have exited by then (it stops in under a second)


def pendulums():
    b = sd.ModelBuilder("pendulum")
    b.add_link("base")
    b.add_link("bob", mass=1.0, com=(0, 0, -1.0))
    b.add_joint("hinge", "revolute", "base", "bob", axis=(0, 1, 0))
    return b.build(), np.array([[0.5], [1.0], [-2.0]])


# -- the chunks change nothing ---------------------------------------------------------------------
@pytest.mark.parametrize("backend, every", [("native", 1), ("native", 7), ("jax", 3)])
def test_the_calls_sizes_do_not_change_the_bits(backend, every, monkeypatch):
    """One step per native call (split inside every record) or one sample per JAX call, against
    calls as large as memory allows: the same bits."""
    pacing = sys.modules["screwdyn.sim.pacing"]
    model, q0 = pendulums()
    runs = []
    for seconds in (1e9, 1e-9):
        monkeypatch.setattr(pacing, "CHUNK_SECONDS", seconds)
        runs.append(simulate(model, q0, None, None, 0.2, 1e-3, backend=backend,
                             record_every=every))
    assert runs[0].n_samples == -(-200 // every) + 1
    for field in Trajectory.ARRAYS:
        np.testing.assert_array_equal(getattr(runs[1], field), getattr(runs[0], field), field)


def test_paced_calls_grow_to_the_time_and_memory_bounds(monkeypatch):
    pacing = sys.modules["screwdyn.sim.pacing"]
    paced = pacing.Paced(most=1000)
    assert paced.take(10 ** 9) == 1
    monkeypatch.setattr(pacing, "CHUNK_SECONDS", 1e9)
    sizes = []
    for _ in range(6):
        n = paced.take(10 ** 9)
        paced.took(n)
        sizes.append(n)
    assert sizes == [1, 8, 64, 512, 512, 512]  # 8-fold at most, powers of two, <= most
    assert paced.take(3) == 3  # never more than is left
    monkeypatch.setattr(pacing, "CHUNK_SECONDS", 0.0)
    paced.took(512)
    assert paced.take(10 ** 9) == 1  # a call that took too long: the next is small


class _SignalsItselfWhenFreed:
    """Sends this process Ctrl-C from its finaliser: the handler then runs inside ``__del__``,
    where a raised KeyboardInterrupt is printed and dropped ("Exception ignored in"), as it is
    in JAX's garbage-collection callback or in any weakref callback."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(100):  # a loop: where Python runs the signal's handler
            time.sleep(0)


@pytest.mark.parametrize("backend", ["native", "jax", "numpy"])
def test_ctrl_c_that_lands_in_a_finaliser_still_stops_the_run(backend):
    """A Ctrl-C that Python handles inside a finaliser (here one freed by the progress callback)
    used to be dropped, and the run went on to the end (seen once in CI: a JAX run still going
    60 s after Ctrl-C). The run notes the signal and stops at the end of the call it is in."""
    model, q0 = pendulums()
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 2:
            _SignalsItselfWhenFreed()  # made and freed at once

    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(sd.sim.SimulationInterrupted) as stopped:
        simulate(model, q0[0], None, None, 2000.0, 1e-3, backend=backend, record_every=100,
                 progress=progress)
    assert signal.getsignal(signal.SIGINT) is handler  # put back
    traj = stopped.value.trajectory
    assert 0 < traj.n_samples < 20001 and np.all(np.isfinite(traj.q))
    assert len(calls) == 2 or backend == "numpy"  # native, JAX: after the signal's call


def test_a_second_ctrl_c_stops_a_run_whose_controller_blocks():
    """The first Ctrl-C waits for the step to end; a Python controller that blocks (waiting on
    hardware, say) would hold it for ever, so a second Ctrl-C is handled at once."""
    model, q0 = pendulums()
    pressed = []

    def controller(t, q, qd):
        if t >= 0.05 and not pressed:
            pressed.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)  # noted: the step goes on
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
            time.sleep(60)  # blocks until the second Ctrl-C
        return np.zeros(1)

    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(sd.sim.SimulationInterrupted) as stopped:
        simulate(model, q0[0], None, controller, 1.0, 1e-3, backend="numpy")
    assert time.monotonic() - pressed[0] < 30
    assert signal.getsignal(signal.SIGINT) is handler
    kept = stopped.value.trajectory.n_samples  # the steps before the blocked one (t = 0.05 s
    assert stopped.value.step == kept and kept in (49, 50)  # is reached inside step 49 by RK4)


# -- real signals ---------------------------------------------------------------------------------
def _start(argv, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=str(cwd))


def _wait_for(process, marker):
    """Read the process's stderr until ``marker`` shows (or it exits); returns what was read."""
    seen = b""
    deadline = time.monotonic() + 300  # a hang guard: compiling may be slow on a busy machine
    while marker not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([process.stderr], [], [], 1.0)
        if ready:
            chunk = os.read(process.stderr.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
        elif process.poll() is not None:
            break
    assert marker in seen, seen.decode()[-2000:]
    return seen


def _interrupt(process, seen=b"", signum=signal.SIGINT):
    """Send ``signum``; (stdout, stderr) once the process has exited (HANG: a hang guard)."""
    process.send_signal(signum)
    try:
        stdout, stderr = process.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"still running {HANG} s after the signal: {stderr.decode()[-2000:]}")
    return stdout, seen + stderr


def _temporaries(folder):
    return [f for f in os.listdir(folder) if f.endswith((".part", ".tmp"))]


@pytest.mark.parametrize("backend, every", [("native", 10 ** 5), ("jax", 1000)])
def test_ctrl_c_stops_a_long_simulation_and_the_command_saves_it(tmp_path, backend, every):
    """A Puma for a day of simulated time (minutes of computing): few samples, each record
    many steps long, which made a native or JAX call run for minutes before; Ctrl-C one second
    into the run stops it, saves the samples so far, exits 130."""
    out = tmp_path / "t.npz"
    process = _start([sys.executable, "-m", "screwdyn", "simulate", "puma560", "--duration",
                      "86400", "--dt", "1e-3", "--record-every", str(every), "--backend",
                      backend, "--no-compile-cache", "--out", str(out)], tmp_path)
    seen = _wait_for(process, b"simulating")  # the progress bar: the run has begun
    time.sleep(1.0)
    _, stderr = _interrupt(process, seen)
    assert process.returncode == 130, stderr.decode()[-2000:]
    assert b"interrupted at step" in stderr and str(out).encode() in stderr
    traj = Trajectory.load(out)
    assert 0 < traj.n_samples < 86400 * 1000 // every + 1 and np.all(np.isfinite(traj.q))
    assert traj.meta["backend"] == backend
    assert _temporaries(tmp_path) == []


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_save_leaves_the_previous_file_and_no_temporary(tmp_path, second):
    """Ctrl-C, then Ctrl-C or SIGTERM while the samples so far are being written (a SIGTERM
    there used to kill the command and leave a hidden .part file): the save is abandoned, the
    previous file is left as it was (or the save had just finished), exit 130."""
    out = tmp_path / "t.npz"
    out.write_bytes(b"previous")
    process = _start([sys.executable, "-m", "screwdyn", "simulate", "puma560", "--duration",
                      "5000", "--backend", "native", "--no-compile-cache", "--force", "--out",
                      str(out)], tmp_path)
    seen = _wait_for(process, b"simulating")
    time.sleep(1.0)  # some hundred thousand samples: seconds to save
    process.send_signal(signal.SIGINT)
    seen = _wait_for(process, b"writing the")
    _, stderr = _interrupt(process, seen, second)
    assert process.returncode == 130, stderr.decode()[-2000:]
    if b"interrupted while writing" in stderr:
        assert out.read_bytes() == b"previous", stderr.decode()[-2000:]
    else:  # the save was done before the signal came
        assert out.read_bytes() != b"previous", stderr.decode()[-2000:]
        assert Trajectory.load(out).n_samples > 0
    assert _temporaries(tmp_path) == []


ROLLOUTS = textwrap.dedent("""
    import sys
    import numpy as np
    import screwdyn as sd

    if __name__ == "__main__":
        model = sd.robots.load("puma560")
        q0 = np.asarray(model.neutral) + 0.01 * np.arange(256)[:, None]
        try:
            sd.rollouts(model, q0, None, None, 200.0, 1e-3, chunk_size=4, engine=sys.argv[1],
                        workers=None if sys.argv[1] == "serial" else 2, out="ds",
                        backend="native", record_every=1000, progress=False)
        except KeyboardInterrupt:
            sys.exit(130)
""")


@pytest.mark.parametrize("engine", ["serial", "processes"])
def test_ctrl_c_stops_rollouts_and_keeps_the_finished_shards(tmp_path, engine):
    """Rollouts to a dataset folder: Ctrl-C once the first shard is recorded (its manifest
    line written: a shard file whose line is not yet written is redone on resume) stops the job
    at once (the serial engine inside a native call of a chunk); the recorded shards stay,
    readable, and the same call would resume from them; no temporary file is left."""
    script = tmp_path / "job.py"
    script.write_text(ROLLOUTS)
    process = _start([sys.executable, str(script), engine], tmp_path)
    manifest = tmp_path / "ds" / "manifest.jsonl"
    deadline = time.monotonic() + 300  # a hang guard

    def recorded():
        return manifest.exists() and manifest.read_text().endswith("\n")

    while not recorded() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert recorded(), process.communicate()[1].decode()[-2000:]
    _, stderr = _interrupt(process)
    assert process.returncode == 130, stderr.decode()[-2000:]
    from screwdyn.rollouts import open_dataset

    dataset = open_dataset(tmp_path / "ds")
    assert 4 <= len(dataset) < 256 and not dataset.complete
    assert np.all(np.isfinite(dataset.arrays().q))
    assert _temporaries(tmp_path / "ds") == []


# -- saves interrupted in process ------------------------------------------------------------------
def _trajectory():
    model, q0 = pendulums()
    return simulate(model, q0[0], None, None, 0.01, 1e-3, backend="numpy")


def test_ctrl_c_while_writing_leaves_the_previous_file(tmp_path, monkeypatch):
    traj, target = _trajectory(), tmp_path / "t.npz"
    target.write_bytes(b"previous")

    def interrupted(f, **arrays):  # Ctrl-C half way through writing
        f.write(b"PK partial")
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)  # the signal's handler raises KeyboardInterrupt here

    monkeypatch.setattr(np, "savez_compressed", interrupted)
    with pytest.raises(KeyboardInterrupt):
        traj.save(target)
    assert target.read_bytes() == b"previous"
    assert sorted(os.listdir(tmp_path)) == ["t.npz"]


@pytest.mark.parametrize("moment", ["creating", "removing"])
def test_ctrl_c_while_the_temporary_file_is_made_or_removed_leaves_none(tmp_path, monkeypatch,
                                                                        moment):
    """Ctrl-C just as the temporary file is created (before the writer holds it), or while a
    failed save removes it: it waits until the file is dealt with, then raises."""
    import tempfile

    from screwdyn import atomic

    traj, target = _trajectory(), tmp_path / "t.npz"
    target.write_bytes(b"previous")
    real = {"creating": tempfile.mkstemp, "removing": os.unlink}[moment]

    def with_a_signal(*args, **kwargs):
        result = real(*args, **kwargs) if moment == "creating" else None
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # a handled signal would raise in here
        return result if moment == "creating" else real(*args, **kwargs)

    if moment == "creating":
        monkeypatch.setattr(atomic.tempfile, "mkstemp", with_a_signal)
    else:
        def broken(f, **arrays):
            raise OSError("disk full")

        monkeypatch.setattr(np, "savez_compressed", broken)
        monkeypatch.setattr(atomic.os, "unlink", with_a_signal)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        traj.save(target)
    monkeypatch.undo()
    assert target.read_bytes() == b"previous"
    assert sorted(os.listdir(tmp_path)) == ["t.npz"]
    assert signal.getsignal(signal.SIGINT) is handler  # put back


def test_a_huge_empty_batch_is_refused_at_once():
    """No rollout, 10^11 sample times: they alone would not fit (a billion took a minute, deaf
    to Ctrl-C, before)."""
    model, _ = pendulums()
    with pytest.raises(ValueError, match=r"would take [\d,.]+ GiB \(100000000001 samples x 0 "
                                         r"rollouts.*and the sample times"):
        simulate(model, np.zeros((0, 1)), None, None, 1e7, 1e-4)
