"""The native layer under hostile and unusual conditions (issue 25): forks while the background
optimiser compiles, cache directories and entries that other users could write, entries that
hold another program, the cache's bounds on disk and in memory.

Forks and planted code run in subprocesses with timeouts: a regression hangs or crashes a child,
never the test process."""
import gc
import os
import stat
import subprocess
import sys
import textwrap
import warnings
import weakref

import numpy as np
import pytest

import screwdyn as sd
from conftest import erd_urdf
from screwdyn.execution import cache, llvm, native, plan
from screwdyn.sim import collision

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


def _python(code, *args, timeout=240, env=None):
    """Run ``code`` in a new Python; returns the completed process (a hang fails the test)."""
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                              capture_output=True, text=True, timeout=timeout, env=env or ENV)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child hung for {timeout} s; its output so far:\n{e.stdout}\n{e.stderr}")


# -- fork ----------------------------------------------------------------------------------------
_WAIT = """
    import os, sys, time

    def wait(pid, seconds, *about):  # the child's exit code; past seconds, kill it and end
        deadline = time.monotonic() + seconds
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                print("HUNG", *about, flush=True)
                sys.exit(3)
            time.sleep(0.01)
"""

_FORK = _WAIT + """
    import numpy as np
    import screwdyn as sd
    from screwdyn.execution import cache, native
    cache.set_directory(sys.argv[1])
    panda = sd.robots.load("panda")
    mid_compile = 0
    for i, delay in enumerate((0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)):
        model = panda.with_joint_parameters(armature=0.01 * (i + 1))  # a new program each time
        q = np.tile(model.neutral, (2000, 1))
        want = sd.forward_dynamics(model, q, q * 0, q * 0)  # the first batch: optimised later
        time.sleep(delay)
        mid_compile += native._WORKER["busy"].locked()
        pid = os.fork()
        if pid == 0:  # the child: a new program (LLVM again), the old one, then a normal exit
            m = sd.mass_matrix(model, q[:3])
            again = sd.forward_dynamics(model, q, q * 0, q * 0)
            assert np.array_equal(again, want) and m.shape == (3, 9, 9)
            sys.exit(0)  # atexit runs (native._stop)
        code = wait(pid, 60, delay)
        assert code == 0, (delay, code)
    native.wait_for_optimisation()
    print("mid-compile forks:", mid_compile)
"""


def test_a_fork_while_the_optimiser_compiles_never_hangs(tmp_path):
    """Forks at delays 0 to 1 s after a first batch (the optimised code compiling in the
    background): each child compiles a new program, calls the old one and exits normally."""
    run = _python(_FORK, tmp_path / "cache")
    assert run.returncode == 0, run.stdout + run.stderr
    mid = int(run.stdout.split("mid-compile forks:")[1])
    assert mid >= 1, "no fork happened while the optimiser compiled: the test proves nothing"


_FORK_ROLLOUT = _WAIT + """
    import numpy as np
    import screwdyn as sd
    from screwdyn import controllers
    from screwdyn.execution import cache, compiler, native
    from screwdyn.execution import rollout as native_rollout
    cache.set_directory(sys.argv[1])
    model = sd.robots.load("panda")
    pd = controllers.JointPD(model, kp=20.0, kd=2.0, q_ref=model.neutral)
    q0 = np.tile(model.neutral, (3, 1))
    first = sd.simulate(model, q0, None, pd, 0.05, 1e-3, backend="native")
    (rollout,) = native_rollout._ROLLOUTS.values()
    rollout.optimise(wait=False)  # level 2 in the background
    while compiler._CHILD["process"] is None:
        time.sleep(0.001)
    print("compiling at the fork:", rollout._compiling.locked(), flush=True)
    pid = os.fork()
    if pid == 0:  # the child makes its own level 2, and runs it in the same bits
        native_rollout.optimise_all()
        again = sd.simulate(model, q0, None, pd, 0.05, 1e-3, backend="native")
        assert rollout.level == 2 and np.array_equal(again.q, first.q)
        sys.exit(0)
    print("child exit code", wait(pid, 120), flush=True)
    native.wait_for_optimisation()
    print("parent level", rollout.level)
"""


def test_a_fork_while_a_rollout_optimises_can_optimise_in_the_child(tmp_path):
    """A fork while a rollout's level 2 compiles in the background: the child's
    ``optimise_all()`` makes its own level 2 (it waited for ever on the lock of a compilation
    it did not have) and runs the same bits; the parent's level 2 arrives."""
    run = _python(_FORK_ROLLOUT, tmp_path / "cache")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "compiling at the fork: True" in run.stdout, "no fork during the compilation"
    assert "child exit code 0" in run.stdout, run.stdout + run.stderr
    assert "parent level 2" in run.stdout, run.stdout + run.stderr


_EXIT = """
    import atexit, os, sys, time
    dropped = []
    atexit.register(lambda: print("job:", dropped, flush=True))  # after screwdyn's handlers
    from screwdyn.execution import compiler, llvm, native, trace
    xp = trace.xp

    def chain(x):
        def body(_, c):
            a, b = c[0], c[1]
            for k in range(3000):
                a, b = xp.where(a > 0.1 * (k % 5), xp.sin(a) * 0.9 + b, a * 0.5), b + a * 1e-3
            return xp.stack([a, b], axis=0)
        return trace.fori_loop(2, body, x)

    ir = llvm.kernel_ir(trace.trace(chain, {"x": 2}))  # level 2: 10 to 30 s

    def job():
        try:
            compiler.optimised_object(ir)
            dropped.append(False)
        except compiler.CompilerError:
            dropped.append(True)

    native.in_background(job)
    while compiler._CHILD["process"] is None:
        time.sleep(0.01)
    time.sleep(1.0)
    print("child", compiler._CHILD["process"].pid, flush=True)
"""


def test_the_exit_never_waits_for_optimised_code():
    """A process that ends while its optimised code compiles (a large simulation step takes
    minutes at level 2) ends at once: the compilation runs in a child process
    (``execution.compiler``), which the exit kills; the job in progress ends with a
    ``CompilerError`` and no child is left behind."""
    run = _python(_EXIT, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "job: [True]" in run.stdout, run.stdout + run.stderr
    child = int(run.stdout.split("child")[1].split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


_EXIT_WHILE_TRACING = """
    import atexit, threading
    ran = []
    atexit.register(lambda: print("job:", ran, flush=True))  # after screwdyn's handlers
    from screwdyn.execution import native, trace
    started = threading.Event()

    def prepare():  # tracing again for level 2, here without end
        started.set()
        while True:
            trace.trace(lambda x: trace.xp.sin(x) * x[::-1], {"x": 50})

    native.in_background(ran.append, prepare)
    started.wait()
    print("tracing", flush=True)
"""


def test_the_exit_never_waits_for_a_program_traced_again():
    """Where a first code came from the disk cache, its level 2 needs the program traced
    again, in the background thread (``native.in_background``'s ``prepare``): pure Python,
    which the exit does not wait for. A process that ends while it traces (here, for ever)
    ends, and its job never runs."""
    run = _python(_EXIT_WHILE_TRACING, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "tracing" in run.stdout and "job: []" in run.stdout, run.stdout + run.stderr


def test_optimised_code_from_the_child_is_the_code_compiled_here():
    """``compiler.optimised_object`` (the child process) gives the bytes that
    ``llvm.compile_object(ir, 2)`` gives in this process; LLVM's errors come back as a
    ``CompilerError`` naming them, and the child keeps serving."""
    from screwdyn.execution import compiler, trace

    program = trace.trace(lambda x: trace.xp.sin(x) * x[::-1], {"x": 3})
    ir = llvm.kernel_ir(program, width=llvm.vector_width())
    assert compiler.optimised_object(ir) == llvm.compile_object(ir, 2)
    with pytest.raises(compiler.CompilerError, match="expected"):
        compiler.optimised_object("define void @f( {")
    assert compiler.optimised_object(ir) == llvm.compile_object(ir, 2)


_START_METHODS = """
    import multiprocessing, sys
    import numpy as np
    import screwdyn as sd
    from screwdyn.execution import cache

    def work(i):
        model = sd.robots.load("panda").with_joint_parameters(armature=0.1 + i)
        q = np.tile(model.neutral, (3, 1))
        return float(sd.inverse_dynamics(model, q, q, q).sum())

    if __name__ == "__main__":
        cache.set_directory(sys.argv[1])
        panda = sd.robots.load("panda")
        q = np.tile(panda.neutral, (2000, 1))
        sd.forward_dynamics(panda, q, q * 0, q * 0)  # the optimiser starts in the background
        with multiprocessing.get_context(sys.argv[2]).Pool(2) as pool:
            got = pool.map(work, range(4))
        cache.set_directory(sys.argv[1])
        assert got == [work(i) for i in range(4)], got
        print("ok")
"""


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_multiprocessing_pools_work_with_every_start_method(tmp_path, method):
    script = tmp_path / "pool.py"  # forkserver and spawn import the main module by its path
    script.write_text(textwrap.dedent(_START_METHODS))
    try:
        run = subprocess.run([sys.executable, str(script), str(tmp_path / "cache"), method],
                             capture_output=True, text=True, timeout=300, env=ENV)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{method}: hung; {e.stderr}")
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_the_fork_handlers_leave_the_locks_free():
    """The parent's locks are given back after a fork, and the handlers nest with a thread
    that holds nothing."""
    native._before_fork()
    native._after_fork_in_parent()
    assert native._LOCK.acquire(blocking=False)
    native._LOCK.release()
    assert llvm._LOCK.acquire(blocking=False)
    llvm._LOCK.release()


# -- the cache directory ---------------------------------------------------------------------------
@pytest.fixture
def cache_dir(tmp_path):
    """An empty cache directory for this test, and no program in memory."""
    previous = cache.directory()
    folder = tmp_path / "cache"
    cache.set_directory(folder)
    native._PROGRAMS.clear()
    plan._forget()
    yield folder
    cache.set_directory(previous)
    native._PROGRAMS.clear()
    plan._forget()


def _entries(folder):
    return sorted(p for p in os.listdir(folder) if p.endswith(".o"))


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _state(model, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1, 1, (4, model.nq))
    return q, rng.uniform(-1, 1, (4, model.nv)), rng.uniform(-1, 1, (4, model.nv))


def _numpy(function, *args):
    previous = sd.execution.use_native(False)
    try:
        return function(*args)
    finally:
        sd.execution.use_native(previous)


def test_the_cache_is_created_private_whatever_the_umask(tmp_path):
    previous, old_mask = cache.directory(), os.umask(0)
    folder = tmp_path / "home" / ".cache" / "screwdyn"  # parents missing too
    cache.set_directory(folder)
    try:
        cache.store_object("ab" * 32, b"code", {"program": "test"})
    finally:
        os.umask(old_mask)
        cache.set_directory(previous)
    assert _mode(folder) == 0o700
    assert _mode(folder.parent) == 0o700 and _mode(folder.parent.parent) == 0o700
    (entry,) = _entries(folder)
    assert _mode(folder / entry) == 0o600


def _compile_into(folder, model):
    q, qd, u = _state(model)
    want = _numpy(sd.inverse_dynamics, model, q, qd, u)
    np.testing.assert_allclose(sd.inverse_dynamics(model, q, qd, u), want, atol=1e-12)
    return (q, qd, u), want


def _program(name="inverse_dynamics"):
    """The program of the function ``name`` in memory."""
    (program,) = [p for p in native._PROGRAMS.values() if p._spec[0].name == name]
    return program


def test_optimised_code_made_in_the_background_is_kept_where_it_was_asked_for(cache_dir,
                                                                             tmp_path):
    """The directory is the one in use when the program was made: a ``set_directory`` (another
    test, another user of the process) before the background compilation ends does not receive
    the entry (before: it did, and a test that set its own empty cache found code in it)."""
    model = sd.robots.load("ur5")
    later = tmp_path / "later"
    with native._WORKER["busy"]:  # the worker waits while the directory changes
        args, want = _compile_into(cache_dir, model)
        program = _program()
        assert program.level == 0
        program.optimise(wait=False)
        cache.set_directory(later)
    native.wait_for_optimisation()
    assert program.level == 2 and program.error is None
    assert f"{program.key}.o" in _entries(cache_dir)
    assert f"{program.key}-0.o" not in _entries(cache_dir)  # the first code, replaced
    assert not later.exists() or _entries(later) == []
    np.testing.assert_allclose(sd.inverse_dynamics(model, *args), want, atol=1e-12)


def test_a_directory_others_can_write_is_never_used(cache_dir):
    model = sd.robots.load("ur5")
    args, want = _compile_into(cache_dir, model)
    before = _entries(cache_dir)
    assert before
    os.chmod(cache_dir, 0o777)  # e.g. SCREWDYN_CACHE_DIR=/tmp/shared
    native._PROGRAMS.clear()
    plan._forget()
    cache.set_directory(cache_dir)  # a new process: warnings not given yet
    with pytest.warns(cache.CacheWarning, match=r"writable by its group or others \(mode 0777\)"
                      r".*chmod 700") as caught:
        np.testing.assert_allclose(sd.inverse_dynamics(model, *args), want, atol=1e-12)
        sd.mass_matrix(model, args[0])
    assert str(cache_dir) in str(caught[0].message)
    assert len([w for w in caught if issubclass(w.category, cache.CacheWarning)]) == 1
    assert _program().source == "compiled"  # not read from the directory
    assert _entries(cache_dir) == before  # and nothing written to it (the mass matrix's)


def _chown_or_skip(path, uid):
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("only root can give a file to another user (CI runs as root)")
    os.chown(path, uid, uid)


def test_a_directory_of_another_user_is_never_used(cache_dir):
    model = sd.robots.load("ur5")
    args, want = _compile_into(cache_dir, model)
    _chown_or_skip(cache_dir, 65534)  # nobody's
    native._PROGRAMS.clear()
    plan._forget()
    cache.set_directory(cache_dir)
    with pytest.warns(cache.CacheWarning, match="owned by user id 65534"):
        np.testing.assert_allclose(sd.inverse_dynamics(model, *args), want, atol=1e-12)
    assert _program().source == "compiled"


@pytest.mark.parametrize("plant", ["another user's", "group-writable", "symbolic link"])
def test_a_planted_entry_is_never_linked(cache_dir, tmp_path, plant):
    """An entry under the right name, with a valid header, that this user did not write alone:
    not read (one warning naming it), compiled afresh; the directory itself is sound."""
    model = sd.robots.load("ur5")
    args, want = _compile_into(cache_dir, model)
    entry = cache_dir / f"{_program().key}-0.o"  # the program's first code
    assert entry.exists()
    if plant == "another user's":
        _chown_or_skip(entry, 65534)
    elif plant == "group-writable":
        os.chmod(entry, 0o664)
    else:
        outside = tmp_path / "outside.o"
        entry.rename(outside)
        entry.symlink_to(outside)
    native._PROGRAMS.clear()
    plan._forget()
    cache.set_directory(cache_dir)
    with pytest.warns(cache.CacheWarning) if plant != "symbolic link" else warnings.catch_warnings():
        np.testing.assert_allclose(sd.inverse_dynamics(model, *args), want, atol=1e-12)
    assert _program().source == "compiled"


_OTHER_PROGRAM = """
    import sys, numpy as np, screwdyn as sd
    from screwdyn.execution import cache, native
    cache.set_directory(sys.argv[1])
    model = sd.robots.load("panda")
    q = np.linspace(-1, 1, model.nq)
    tau = sd.inverse_dynamics(model, q, q, q)
    print(next(iter(native._PROGRAMS.values())).source, repr(tau.tolist()))
"""


def test_an_entry_holding_another_program_is_refused_before_linking(tmp_path):
    """The mass matrix's code under inverse dynamics' key, with a valid header and checksum
    (a copied or forged entry): its description does not match, so it is not linked (before:
    a segmentation fault) and inverse dynamics is compiled again."""
    folder = tmp_path / "cache"
    first = _python(_OTHER_PROGRAM, folder)
    assert first.returncode == 0 and first.stdout.startswith("compiled"), first.stderr
    (name,) = [n for n in _entries(folder) if n.endswith("-0.o")]  # the program's first code
    key = name[:-2]
    model, q = sd.robots.load("panda"), np.linspace(-1, 1, 9)
    previous = cache.directory()
    cache.set_directory(tmp_path / "other")
    native._PROGRAMS.clear()
    plan._forget()
    try:
        sd.mass_matrix(model, q)
        mass = _program("mass_matrix")
        payload = cache.load_object(mass.key + "-0", mass.description(0))
        assert payload is not None
        cache.set_directory(folder)
        cache.store_object(key, payload, mass.description(0))  # a whole, checksummed entry
    finally:
        cache.set_directory(previous)
        native._PROGRAMS.clear()
        plan._forget()
    second = _python(_OTHER_PROGRAM, folder)
    assert second.returncode == 0, second.stderr  # no crash
    assert second.stdout.startswith("compiled")
    assert second.stdout.split(" ", 1)[1] == first.stdout.split(" ", 1)[1]  # the same bits


def test_keys_hold_the_library_version_and_the_cpu(monkeypatch):
    model = sd.robots.load("ur5")
    function = next(f for f in plan._FUNCTIONS if f.name == "inverse_dynamics")
    inputs = function.inputs

    def key():
        return native.key(function, model, "spatial", inputs, {}, ())

    k = key()
    monkeypatch.setattr(cache, "__version__", "999.0")
    assert key() != k
    monkeypatch.undo()
    triple, cpu, features = llvm.host()
    monkeypatch.setattr(llvm, "host", lambda: (triple, cpu, features + ",+nonexistent"))
    assert key() != k


# -- bounds ------------------------------------------------------------------------------------------
def test_size_limits_are_read_and_bad_ones_refused(monkeypatch):
    for text, size in (("", cache.DEFAULT_SIZE_LIMIT), ("1000", 1000), ("500M", 500 << 20),
                       ("2G", 2 << 30), ("1.5k", 1536), ("64MB", 64 << 20)):
        monkeypatch.setenv("SCREWDYN_CACHE_SIZE", text)
        assert cache.size_limit() == size
    monkeypatch.setenv("SCREWDYN_CACHE_SIZE", "lots")
    with pytest.raises(ValueError, match="SCREWDYN_CACHE_SIZE='lots'"):
        cache.size_limit()


def test_the_cache_keeps_the_recently_used_entries_within_its_limit(cache_dir, monkeypatch):
    payload = bytes(10_000)
    monkeypatch.setenv("SCREWDYN_CACHE_SIZE", "50000")  # about four entries and headers
    keys = [f"{i:064x}" for i in range(12)]
    for i, key in enumerate(keys):
        cache.store_object(key, payload, {"i": i})
        os.utime(cache_dir / f"{key}.o", (1e9 + i, 1e9 + i))  # a distinct time for each write
        if i == 3:  # the first entry is read again: recently used
            assert cache.load_object(keys[0], {"i": 0}) == payload
            os.utime(cache_dir / f"{keys[0]}.o", (1e9 + 3.5, 1e9 + 3.5))
    left = _entries(cache_dir)
    assert sum(os.path.getsize(cache_dir / n) for n in left) <= 50_000
    assert f"{keys[-1]}.o" in left  # the newest stays
    assert f"{keys[1]}.o" not in left and f"{keys[2]}.o" not in left  # the least used went
    stale = cache_dir / f".{'0' * 16}.{'1' * 16}.tmp"  # left by a crashed writer long ago
    stale.write_bytes(b"x")
    os.utime(stale, (1e9, 1e9))
    (cache_dir / "notes.txt").write_text("not ours")
    size = sum(os.path.getsize(cache_dir / n) for n in left)
    assert sd.execution.clear_cache() == size
    assert _entries(cache_dir) == [] and not stale.exists()
    assert (cache_dir / "notes.txt").exists()  # only the cache's own files are removed


def test_programs_are_dropped_from_memory_past_the_bound(cache_dir, monkeypatch):
    monkeypatch.setattr(sd.execution.config, "max_programs", 4)
    panda = sd.robots.load("panda")
    q = panda.neutral
    refs = []
    for i in range(10):  # models made afresh in a loop
        model = panda.with_joint_parameters(armature=0.01 * (i + 1))
        sd.inverse_dynamics(model, q, q, q)
        refs.append(weakref.ref(native._PROGRAMS.values()[-1]))  # the newest
    assert len(native._PROGRAMS) <= 4 and len(plan._ENTRIES) <= 4
    for f in plan._FUNCTIONS:
        f.last = (None, None, None, None)  # the last call's entry, which keeps one alive
    gc.collect()
    assert sum(r() is None for r in refs) >= 6  # their code freed
    model = panda.with_joint_parameters(armature=0.01)  # the first again: from the disk cache
    np.testing.assert_allclose(sd.inverse_dynamics(model, q, q, q),
                               _numpy(sd.inverse_dynamics, model, q, q, q), atol=1e-12)
    assert native._PROGRAMS.values()[-1].source == "disk cache"


def test_the_configuration_checks_its_settings_and_takes_effect():
    config = sd.execution.config
    for name, value, message in (("native", "maybe", "True or False"),
                                 ("max_programs", 0, "positive whole number"),
                                 ("max_programs", None, "positive whole number"),
                                 ("chunk_states", 2.5, "positive whole number or None"),
                                 ("cache_size", True, "positive whole number or None"),
                                 ("result_pool", -1, "whole number of bytes, 0 or more")):
        with pytest.raises(ValueError, match=rf"config\.{name} must be (a )?{message}"):
            setattr(config, name, value)
    with pytest.raises(AttributeError, match="no setting 'nativ'; valid: native"):
        config.nativ = False
    assert config == sd.execution.Config()  # nothing half-applied
    panda = sd.robots.load("panda")
    q = panda.neutral
    assert sd.plan(panda, "inverse_dynamics").path == "native"
    tau = sd.inverse_dynamics(panda, q, q, q)
    config.native = False  # the call entries made before are dropped: the next call is numpy
    try:
        assert sd.plan(panda, "inverse_dynamics").path == "numpy"
        np.testing.assert_allclose(sd.inverse_dynamics(panda, q, q, q), tau, atol=1e-12)
        assert all(f.last[0] is None for f in plan._FUNCTIONS if f.name != "inverse_dynamics")
    finally:
        config.native = True


# -- deep stacks -----------------------------------------------------------------------------------
_PILE = """
    import sys, threading
    import numpy as np
    import screwdyn as sd
    from screwdyn.execution import cache, rollout
    from screwdyn.sim import collision

    cache.set_directory(sys.argv[1])  # empty: the first code (level 0), the deepest frame
    scene = sd.Scene("pile")
    for i in range(8):
        scene.add_object(f"ball{i}", collision.sphere(0.05), mass=0.5,
                         position=(0.02 * (i % 3), 0.02 * (i % 2), 0.06 + 0.11 * i))
    model, contact, q0 = scene.build(mu=0.5)
    runs = []

    def simulate():
        runs.append(sd.simulate(model, q0, None, None, 0.05, 1e-3, contact=contact).q)

    simulate()  # on the main thread, whose stack is the ulimit
    if sys.argv[2] == "thread":  # and on a thread with a small stack
        threading.stack_size(1 << 18)
        worker = threading.Thread(target=simulate)
        worker.start()
        worker.join()
    bound = max(r.stack for r in rollout._ROLLOUTS.values())
    print(bound, [q.tobytes().hex() for q in runs])
"""


def _pile(tmp_path, stack, where):
    """The pile's run in a new Python whose main thread has ``stack`` bytes of stack."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_STACK,
                           (stack, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    try:
        run = subprocess.run([sys.executable, "-c", textwrap.dedent(_PILE),
                              str(tmp_path / where), where], capture_output=True, text=True,
                             timeout=300, env=ENV, preexec_fn=limit)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child hung: {e.stderr}")
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    bound, runs = run.stdout.split(" ", 1)
    return int(bound), eval(runs)  # noqa: S307  (our own child's list of hex strings)


@pytest.mark.skipif(sys.platform == "win32", reason="no ulimit")
def test_a_step_deeper_than_the_stack_runs_on_a_thread_with_room(tmp_path):
    """Eight balls in a pile: the contact solver's sweeps are one loop of machine code whose
    frame (291 kB at level 0) is more than a 256 kB stack; that was a segmentation fault, the
    end of the process (1,132 pairs of a humanoid's shapes passed the usual 8 MB). The step
    runs on a thread with the stack its bound asks (``stack.deep_call``), from the main thread
    and from a thread of 256 kB alike, in the same bits as on an 8 MB main thread."""
    bound, small = _pile(tmp_path, 256 << 10, "thread")
    assert bound > 256 << 10
    _, roomy = _pile(tmp_path, 8 << 20, "main")
    assert small == roomy * 2  # the main thread and the small thread: the same bits


def test_ctrl_c_during_a_deep_call_waits_for_it_then_stops():
    """A call on a thread of its own is not abandoned to run on in the background: Ctrl-C
    lets it finish, as a call on the main thread would, then raises ``KeyboardInterrupt``."""
    run = _python("""
        import os, signal, threading, time
        from screwdyn.execution.stack import deep_call
        finished = []

        def call():
            time.sleep(1.0)
            finished.append(threading.current_thread().name)

        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            deep_call(1 << 26, call)
        except KeyboardInterrupt:
            print("stopped after", finished)
    """)
    assert run.stdout.strip() == "stopped after ['screwdyn-deep-call']", run.stderr


def test_a_stack_no_thread_can_have_is_a_memory_error():
    from screwdyn.execution.stack import deep_call

    assert deep_call(1 << 30, lambda x: x + 1, 1) == 2  # virtual: a gigabyte is only reserved
    with pytest.raises(MemoryError, match=r"needs a stack of 4,611,686,018,42\d,\d{3},\d{3} "
                                          r"bytes .* no thread could have one"):
        deep_call(1 << 62, lambda: None)


def _frames(assembly):
    """{function: bytes of its frame} from x86-64 assembly (AT&T): its pushes and the largest
    ``subq $N, %rsp``, and 32 bytes for a realignment of the stack pointer."""
    import re

    frames, name = {}, None
    for line in assembly.splitlines():
        label = re.match(r"^([\w.$]+):", line)
        if label and not label.group(1).startswith(".L"):
            name = label.group(1)
            frames[name] = 8  # the return address
        elif name is not None:
            sub = re.search(r"\bsubq\s+\$(\d+), %rsp", line)
            if sub:
                frames[name] += int(sub.group(1))
            elif re.search(r"\bpushq\b", line):
                frames[name] += 8
            elif re.search(r"\bandq\s+\$-\d+, %rsp", line):
                frames[name] += 32
    return frames


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"),
                    reason="reads x86-64 assembly")
def test_the_stack_bound_holds_the_frames_llvm_makes(cache_dir, monkeypatch):
    """``llvm.stack_bound`` against LLVM's own frames, read from the assembly it writes for a
    scene's step (a contact solve: a loop of the program) and a batch of Talos's forward
    dynamics (segments, maps, vector lanes), at both levels of code: the entry points' frames
    plus the largest segment's, never more than the bound."""
    import llvmlite.binding as binding

    seen = []
    compile_object = llvm.compile_object
    monkeypatch.setattr(llvm, "compile_object",
                        lambda ir, opt=2: seen.append(ir) or compile_object(ir, opt))
    scene = sd.Scene("bound")
    for i in range(6):
        scene.add_object(f"ball{i}", collision.sphere(0.049), mass=0.5,
                         position=(0.02 * (i % 3), 0.02 * (i % 2), 0.06 + 0.11 * i))
    model, contact, q0 = scene.build(mu=0.5)
    sd.simulate(model, q0, None, None, 0.002, 1e-3, contact=contact)
    step = next(ir for ir in seen if "@rollout" in ir)
    talos = sd.load_urdf(erd_urdf("talos_data/robots/talos_reduced.urdf"),
                         floating_base=True, joint_order="name")
    function = plan.lookup("forward_dynamics")
    program = native.trace_program(function, talos, "spatial", function.inputs, {}, ())
    batch = llvm.with_stack_bound(llvm.kernel_ir(program, width=llvm.vector_width()))
    for ir in (step, batch):
        bound = llvm.stack_bound(ir.rsplit("@stack_bound", 1)[0])
        assert f"@stack_bound = constant i64 {bound}\n" in ir
        for level in (0, 2):
            module = binding.parse_assembly(ir)
            frames = _frames(llvm._target_machine(level).emit_assembly(module))
            inner = [f for name, f in frames.items() if ".seg" in name]
            depth = sum(f for name, f in frames.items() if ".seg" not in name) + max(inner)
            assert 0 < depth <= bound, (level, depth, bound, sorted(frames.items())[:8])
            print(f"level {level}: frames {depth:,} bytes deep, bound {bound:,}")
