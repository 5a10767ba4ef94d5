"""Nothing lost, nothing silent: simulations and their files under bad input, failures and
interruptions (Ctrl-C, SIGTERM), and the ``screwdyn simulate`` command's outputs checked before
it runs."""
import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.sim import SimulationError, SimulationInterrupted, Trajectory, simulate



def pendulum(name="hinge"):
    b = sd.ModelBuilder("pendulum")
    b.add_link("base")
    b.add_link("bob", mass=1.0, com=(0, 0, -1.0))
    b.add_joint(name, "revolute", "base", "bob", axis=(0, 1, 0))
    return b.build()


# -- arguments --------------------------------------------------------------------------------
def test_bad_arguments_are_refused_before_anything_runs():
    model = pendulum()
    with pytest.raises(ValueError, match=r"dt = 0.5 s is longer than t_final = 0.1 s"):
        simulate(model, [0.1], None, None, 0.1, 0.5)
    with pytest.raises(ValueError, match=r"q0 must be an array of shape \(\.\.\., 1\).*None"):
        simulate(model, None)
    with pytest.raises(ValueError, match="q0 must be real numbers, got dtype complex"):
        simulate(model, [0.1 + 1j])
    with pytest.raises(ValueError, match="qd0 must be real numbers"):
        simulate(model, [0.1], ["fast"])
    with pytest.raises(ValueError, match="dt must be a positive number, got 1j"):
        simulate(model, [0.1], None, None, 1.0, 1j)
    with pytest.raises(TypeError, match="unexpected keyword argument 'integrater'.*integrator"):
        simulate(model, [0.1], integrater="rk4")
    with pytest.raises(ValueError, match="contact must be a GroundContact"):
        simulate(model, [0.1], contact=0.8)
    with pytest.raises(ValueError, match="joint_limits must be True, False, a JointLimits or a "
                                         "RigidLimits, got str"):
        simulate(model, [0.1], joint_limits="yes")
    with pytest.raises(ValueError, match="JointLimits.frequency must be positive"):
        sd.JointLimits(frequency=0)
    with pytest.raises(ValueError, match="JointFriction.model must be one of stick_slip, sign"):
        sd.JointFriction(model="viscous")
    with pytest.raises(ValueError, match="a torque table must be real numbers"):
        simulate(model, [0.1], None, np.zeros((200, 1), dtype=complex), 0.1)


def test_an_empty_batch_gives_an_empty_trajectory():
    traj = simulate(pendulum(), np.zeros((0, 1)), None, None, 0.01, 1e-3)
    assert traj.q.shape == (0, 11, 1) and traj.batch_shape == (0,) and len(traj.t) == 11


def test_a_run_too_big_for_memory_fails_at_once_and_a_long_one_warns():
    with pytest.raises(ValueError, match=r"would take [\d,.]+ GiB \(1000000001 samples"):
        simulate(pendulum(), np.zeros((1000, 1)), None, None, 1e6, 1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the warning stops the run before it starts
        with pytest.raises(UserWarning, match=r"a long simulation: 1,000,000,000 steps"):
            simulate(pendulum(), [0.1], None, None, 1e6, 1e-3, record_every=10 ** 6)


def test_a_diverging_passive_run_is_reported_with_the_samples_before_it():
    """Steps far too long for the pendulum: explicit Euler pumps energy in at every step. The
    energy balance catches it while |qd| is still far under divergence_limit."""
    with pytest.raises(SimulationError, match="energy balance broke") as e:
        simulate(pendulum(), [1.0], None, None, 20.0, 0.05, integrator="euler",
                 backend="numpy")
    err = e.value
    assert 0 < err.trajectory.n_samples == err.step
    assert np.abs(err.trajectory.qd).max() < 100
    error = np.abs(err.trajectory.energy_error())
    assert error.max() < 0.5 * max(err.trajectory.kinetic.max(), 1e-3 * 9.81)


def test_a_contact_too_stiff_for_the_step_is_reported_as_a_divergence():
    """A 1 kg ball on a 1e8 N/m contact at 1 ms: one step takes it 0.54 mm into the spring
    (14.6 J stored that no force put in), the next throws it up at 50 m/s. The springs give out
    far more than they took in: negative dissipation, reported at the sample where it appears,
    with the samples before."""
    b = sd.ModelBuilder("ball")
    b.add_link("ball", mass=1.0, inertia=np.eye(3) * 4e-3)
    ball = b.build(floating_base=True)
    contact = sd.GroundContact(points=[sd.ContactPoint("ball", radius=0.1)], stiffness=1e8,
                               dissipation=0.0)
    with pytest.warns(UserWarning, match="too large"), \
            pytest.raises(SimulationError, match=r"step 10 \(t = 0.01 s\).*springs gave out"
                                                 r".*more than they took in") as e:
        simulate(ball, [0, 0, 0.11, 0, 0, 0, 1], [0, 0, -1, 0, 0, 0], None, 0.2, 1e-3,
                 contact=contact, backend="numpy", integrator="semi_implicit_euler")
    assert e.value.trajectory.n_samples == 10
    assert np.all(e.value.trajectory.q[:, 2] > 0.1)  # kept: the samples before it touched


def test_dt_too_large_for_the_contact_stiffness_warns_with_the_largest_stable_step():
    b = sd.ModelBuilder("ball")
    b.add_link("ball", mass=1.0, inertia=np.eye(3) * 4e-3)
    ball = b.build(floating_base=True)
    contact = sd.GroundContact(points=[sd.ContactPoint("ball", radius=0.1)], stiffness=1e8)
    with pytest.warns(UserWarning, match=r"dt = 0.001 s is too large for the stiffness of the "
                                         r"contact at 'ball.*largest stable step of rk4 there is "
                                         r"about 0.000[12]"):
        simulate(ball, [0, 0, 1, 0, 0, 0, 1], None, None, 2e-3, 1e-3, contact=contact,
                 backend="numpy")


# -- interruptions ------------------------------------------------------------------------------
@pytest.mark.parametrize("backend, dt", [("numpy", 1e-3), ("jax", 1e-4), ("native", 1e-4)])
def test_ctrl_c_keeps_the_samples_computed_so_far(backend, dt, monkeypatch):
    """Ctrl-C half way (raised here by the progress callback, as the signal would be): on
    numpy at the step (the callback called at every step here, not every 0.1 s of wall time,
    so that the test does not depend on the machine's speed), on JAX and native between two
    compiled chunks of samples (1024 at most)."""
    monkeypatch.setattr(sys.modules["screwdyn.sim.loop_numpy"], "PROGRESS_PERIOD", 0.0)

    def progress(done, total):
        if done >= total // 2:
            raise KeyboardInterrupt

    with pytest.raises(SimulationInterrupted) as e:
        simulate(pendulum(), [0.5], None, None, 0.3, dt, progress=progress, backend=backend)
    traj = e.value.trajectory
    assert isinstance(e.value, KeyboardInterrupt)  # a script still stops on Ctrl-C
    assert 10 < traj.n_samples < 0.9 * 0.3 / dt and np.all(np.isfinite(traj.q))
    assert e.value.time == pytest.approx(e.value.step * dt)
    # the samples are the run's own: the same as an uninterrupted run's first ones
    full = simulate(pendulum(), [0.5], None, None, 0.3, dt, backend=backend)
    np.testing.assert_allclose(traj.q, full.q[:traj.n_samples], rtol=1e-13)


# -- files ----------------------------------------------------------------------------------------
def test_saves_are_atomic_and_outputs_are_checked(tmp_path, monkeypatch):
    traj = simulate(pendulum(), [0.5], None, None, 0.01, 1e-3, backend="numpy")
    with pytest.raises(ValueError, match="unknown trajectory file type"):
        traj.save(tmp_path / "t.txt")
    with pytest.raises(ValueError, match="does not exist"):
        traj.save(tmp_path / "missing" / "t.npz")
    target = tmp_path / "t.npz"
    traj.save(target)
    before = target.read_bytes()

    def broken(f, **arrays):  # a crash half way through writing
        f.write(b"PK partial")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez_compressed", broken)
    with pytest.raises(OSError, match="disk full"):
        traj.save(target)
    assert target.read_bytes() == before  # the old file is intact ...
    assert sorted(os.listdir(tmp_path)) == ["t.npz"]  # ... and no partial file is left


def test_files_that_are_not_trajectories_are_clear_errors(tmp_path):
    garbage = tmp_path / "g.npz"
    garbage.write_bytes(b"this is not a zip file")
    with pytest.raises(ValueError, match=r"g.npz: not a screwdyn trajectory file \(not an .npz"):
        Trajectory.load(garbage)
    truncated = tmp_path / "cut.npz"
    simulate(pendulum(), [0.5], None, None, 0.01, 1e-3, backend="numpy").save(truncated)
    truncated.write_bytes(truncated.read_bytes()[:200])  # a copy cut short
    with pytest.raises(ValueError, match=r"cut.npz: not a screwdyn trajectory file \(BadZip"):
        Trajectory.load(truncated)
    other = tmp_path / "o.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(ValueError, match=r"o.npz: not a screwdyn trajectory \(no t, q"):
        Trajectory.load(other)
    text = tmp_path / "t.csv"
    text.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a screwdyn trajectory CSV"):
        Trajectory.load(text)
    with pytest.raises(ValueError, match="no such file"):
        Trajectory.load(tmp_path / "nothing.npz")


def test_a_trajectory_loads_only_against_its_own_model(tmp_path):
    traj = simulate(pendulum(), [0.5], None, None, 0.01, 1e-3, backend="numpy")
    path = traj.save(tmp_path / "t.npz")
    arm = sd.robots.load("puma560")
    with pytest.raises(ValueError, match=r"nq = 1, nv = 1 but model 'puma560' has nq = 6"):
        Trajectory.load(path, model=arm)
    with pytest.raises(ValueError, match=r"coordinates \['hinge'\] are not those"):
        Trajectory.load(path, model=pendulum("elbow"))
    assert Trajectory.load(path, model=pendulum()).model is not None


def test_csv_round_trips_awkward_names_and_reads_a_byte_order_mark(tmp_path):
    name = 'knee, "left" \u00e9'
    model = pendulum(name)
    traj = simulate(model, [0.5], None, None, 0.01, 1e-3, backend="numpy")
    path = traj.save(tmp_path / "t.csv")
    loaded = Trajectory.load(path, model=model)
    assert loaded.meta["q_names"] == [name]
    for field in Trajectory.ARRAYS:
        np.testing.assert_array_equal(getattr(loaded, field), getattr(traj, field))
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + open(path, "rb").read())  # as spreadsheets save
    np.testing.assert_array_equal(Trajectory.load(bom).q, traj.q)


def test_no_module_is_rewritten_at_import():
    """``screwdyn.simulate`` is the function; the old module of that name (renamed screwdyn.sim
    before any release) is no longer faked in ``sys.modules`` (issue 26)."""
    import sys

    assert "screwdyn.simulate" not in sys.modules
    assert callable(sd.simulate) and sd.sim.SimulationError is SimulationError


# -- the command ----------------------------------------------------------------------------------
def test_command_checks_its_outputs_before_running(pendulum_urdf, tmp_path, capsys):
    from screwdyn.cli import main

    out = tmp_path / "t.npz"
    out.write_bytes(b"precious")
    for argv, message in (
            (["--out", str(out)], "exists: pass --force"),
            (["--out", str(tmp_path / "no" / "t.npz")], "does not exist"),
            (["--out", str(tmp_path / "t.json")], "unknown trajectory file type"),
            (["--plot", str(tmp_path / "p.bmp")], "expected a file ending in .png"),
            (["--animate", str(tmp_path / "no" / "a.gif")], "does not exist")):
        assert main(["simulate", pendulum_urdf, "--duration", "0.01", "--quiet", "--backend",
                     "numpy", "--no-compile-cache"] + argv) == 2
        captured = capsys.readouterr()
        assert message in captured.err and "screwdyn simulate:" not in captured.out  # no run
    assert out.read_bytes() == b"precious"
    assert main(["simulate", pendulum_urdf, "--duration", "0.01", "--quiet", "--backend", "numpy",
                 "--no-compile-cache", "--out", str(out), "--force"]) == 0
    assert Trajectory.load(out).n_samples == 11


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_command_interrupted_writes_the_samples_so_far(pendulum_urdf, tmp_path, signum):
    out = tmp_path / "t.npz"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    process = subprocess.Popen(
        [sys.executable, "-m", "screwdyn", "simulate", pendulum_urdf, "--duration", "100",
         "--backend", "numpy", "--no-compile-cache", "--out", str(out), "--q0", "0.5"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(tmp_path))
    seen = b""
    while b"simulating" not in seen:  # the progress bar shows once the run has begun
        chunk = process.stderr.read1(256) if hasattr(process.stderr, "read1") else b""
        if not chunk and process.poll() is not None:
            break
        seen += chunk
    time.sleep(0.5)  # a few hundred steps more
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr.decode()[-2000:]
    assert b"interrupted at step" in stderr and str(out).encode() in stderr
    traj = Trajectory.load(out)
    assert traj.n_samples > 10 and np.all(np.isfinite(traj.q))
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".part")]
