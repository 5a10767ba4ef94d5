"""The native path: machine code traced from the recursions (screwdyn.execution).

Against independent references: the numpy path of the same recursions (a different evaluation,
the entries layer on numpy arrays), closed forms (a pendulum), IEEE arithmetic for NaN and inf,
Pinocchio (in test_robots and test_dynamics through the public functions, which now run here).
Structure: results do not depend on the batch size in any bit; the fast entry refuses nothing
silently (every wrong input gets the public ValueError); the disk cache detects corrupted
entries, survives concurrent writers and read-only directories."""
import os
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import screwdyn as sd
from conftest import random_state, random_tree
from screwdyn.execution import cache, entry, graph, llvm, native, plan, trace

pytestmark = pytest.mark.skipif(not llvm.available(), reason="llvmlite is not installed")

ALGEBRAS = ("spatial", "cga", "dq")


@pytest.fixture(scope="module")
def tree():
    return random_tree(41, n=7, floating_base=True)


def _calls(model, link=None):
    """Every public function of (q, qd, u) (u: qdd or tau), by name."""
    link = model.nlinks - 1 if link is None else link
    return {
        "inverse_dynamics": lambda q, qd, u, a: sd.inverse_dynamics(model, q, qd, u, algebra=a),
        "forward_dynamics": lambda q, qd, u, a: sd.forward_dynamics(model, q, qd, u, algebra=a),
        "mass_matrix": lambda q, qd, u, a: sd.mass_matrix(model, q, algebra=a),
        "bias_forces": lambda q, qd, u, a: sd.bias_forces(model, q, qd, algebra=a),
        "gravity_torques": lambda q, qd, u, a: sd.gravity_torques(model, q, algebra=a),
        "forward_kinematics": lambda q, qd, u, a: sd.forward_kinematics(model, q, algebra=a),
        "jacobian": lambda q, qd, u, a: sd.jacobian(model, q, link, algebra=a),
        "jacobian_local": lambda q, qd, u, a: sd.jacobian(model, q, 1, frame="local", algebra=a),
        "coriolis_matrix": lambda q, qd, u, a: sd.coriolis_matrix(model, q, qd),
        "kinetic_energy": lambda q, qd, u, a: sd.kinetic_energy(model, q, qd),
        "potential_energy": lambda q, qd, u, a: sd.potential_energy(model, q),
        "center_of_mass": lambda q, qd, u, a: sd.center_of_mass(model, q),
    }


def _on_numpy(f, *args):
    previous = plan.use_native(False)
    try:
        return f(*args)
    finally:
        plan.use_native(previous)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_every_function_equals_the_numpy_path(tree, algebra):
    q, qd, u = random_state(tree, 1, batch=(5,))
    for name, f in _calls(tree).items():
        if algebra != "spatial" and name in ("coriolis_matrix", "kinetic_energy",
                                             "potential_energy", "center_of_mass"):
            continue
        assert plan.decide(sd.dynamics.FUNCTIONS[name.replace("_local", "")], tree, algebra)[0] \
            == "native"
        got, want = f(q, qd, u, algebra), _on_numpy(f, q, qd, u, algebra)
        assert isinstance(got, np.ndarray) and got.dtype == np.float64, name
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11, err_msg=name)
        one = f(q[2], qd[2], u[2], algebra)  # one state, through the fast entry
        np.testing.assert_allclose(one, want[2], rtol=1e-11, atol=1e-11, err_msg=name)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_external_wrenches_and_gravity_equal_the_numpy_path(tree, algebra):
    q, qd, u = random_state(tree, 2, batch=(3, 2))
    rng = np.random.default_rng(2)
    f_ext = rng.normal(size=(2, tree.nlinks, 6))  # broadcast over the 3
    gravity = rng.normal(size=(3, 1, 3))
    for f in (sd.inverse_dynamics, sd.forward_dynamics):
        for kw in ({"f_ext": f_ext}, {"gravity": gravity}, {"f_ext": f_ext, "gravity": gravity},
                   {"gravity": (0.0, 1.0, -3.0)}):
            got = f(tree, q, qd, u, algebra=algebra, **kw)
            want = _on_numpy(lambda: f(tree, q, qd, u, algebra=algebra, **kw))
            np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)
    for f, args in ((sd.bias_forces, (q, qd)), (sd.gravity_torques, (q,))):
        got = f(tree, *args, gravity=gravity, algebra=algebra)
        np.testing.assert_allclose(got, _on_numpy(lambda: f(tree, *args, gravity=gravity,
                                                             algebra=algebra)),
                                   rtol=1e-11, atol=1e-11)
    got = sd.potential_energy(tree, q, gravity=gravity)
    np.testing.assert_allclose(got, _on_numpy(lambda: sd.potential_energy(tree, q,
                                                                          gravity=gravity)),
                               rtol=1e-11, atol=1e-11)


def test_dh_models_run_native_in_the_vector_algebra():
    model = sd.robots.load("puma560")
    q, qd, u = random_state(model, 3, batch=(4,))
    for f in (sd.inverse_dynamics, sd.forward_dynamics):
        got = f(model, q, qd, u, algebra="vector")
        np.testing.assert_allclose(got, _on_numpy(lambda: f(model, q, qd, u, algebra="vector")),
                                   rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(sd.mass_matrix(model, q, algebra="vector"),
                               sd.mass_matrix(model, q), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("algebra", ALGEBRAS)
def test_results_do_not_depend_on_the_batch_size_in_any_bit(tree, algebra):
    q, qd, u = random_state(tree, 4, batch=(130,))
    for name in ("inverse_dynamics", "forward_dynamics", "mass_matrix", "forward_kinematics"):
        f = _calls(tree)[name]
        whole = f(q, qd, u, algebra)
        for n in (1, 2, 63, 64, 65, 129):
            assert np.array_equal(f(q[:n], qd[:n], u[:n], algebra), whole[:n]), (name, n)
        for i in (0, 64, 129):
            assert np.array_equal(f(q[i], qd[i], u[i], algebra), whole[i]), (name, i)
        # one vector broadcast against a batch, and a batch of several leading axes
        assert np.array_equal(f(q[:6], qd[0], u[0], algebra),
                              f(q[:6], np.tile(qd[0], (6, 1)), np.tile(u[0], (6, 1)), algebra))
        assert np.array_equal(f(q[:12].reshape(3, 4, -1), qd[:12].reshape(3, 4, -1),
                                u[:12].reshape(3, 4, -1), algebra),
                              whole[:12].reshape((3, 4) + whole.shape[1:]))


def test_the_optimised_code_gives_the_same_bits_as_the_first(tree):
    """Level 0 and level 2 code (no fast-math: no operation may change)."""
    F = sd.dynamics.FUNCTIONS["forward_dynamics"]
    program = native.trace_program(F, tree, "spatial", F.inputs)
    ir = llvm.kernel_ir(program)
    q, qd, u = random_state(tree, 5, batch=(50,))
    q[3, 2], qd[7, 1], u[9, 0] = np.nan, np.inf, -np.inf
    outs = []
    for level in (0, 2):
        library = llvm.Library(llvm.compile_object(ir, level))
        out = np.empty((50, tree.nv))
        entry.caller(library.address("kernel"))([q, qd, u], out, 50)
        outs.append(out)
    assert np.array_equal(outs[0], outs[1], equal_nan=True)
    np.testing.assert_allclose(outs[0][10:], sd.forward_dynamics(tree, q, qd, u)[10:],
                               rtol=1e-11, atol=1e-11)


def test_segmented_and_vector_programs_equal_whole_scalar_ones(tree):
    """Programs split into several functions (large trees) and programs running several states
    in SIMD lanes (batches) compute the same bits as one function, one state at a time."""
    F = sd.dynamics.FUNCTIONS["mass_matrix"]
    program = native.trace_program(F, tree, "spatial", F.inputs)
    q = random_state(tree, 6, batch=(23,))[0]
    q[3, 0], q[4, 1], q[5, 2] = np.inf, np.nan, 1e9  # sine and cosine from the C library there
    outs = []
    for segment, width in ((10 ** 9, 1), (97, 1), (10 ** 9, 4), (97, 4), (300, 2)):
        ir = llvm.kernel_ir(program, segment=segment, width=width)
        assert ("kernel.w1.seg1" in ir) == (segment < 10 ** 9)
        library = llvm.Library(llvm.compile_object(ir, 0 if width == 1 else 2))
        out = np.empty((23, tree.nv, tree.nv))
        entry.caller(library.address("kernel"))([q], out, 23)
        outs.append(out)
    for out in outs[1:]:
        assert np.array_equal(out, outs[0], equal_nan=True)
    np.testing.assert_allclose(outs[0], _on_numpy(sd.mass_matrix, tree, q), rtol=1e-11,
                               atol=1e-11)


# -- IEEE: NaN and inf --------------------------------------------------------------------------
def _pendulum():
    b = sd.ModelBuilder("pendulum")
    b.add_link("base")
    b.add_link("rod", mass=2.0, com=(0.5, 0.0, 0.0), inertia=np.zeros((3, 3)))
    b.add_joint("hinge", "revolute", parent="base", child="rod", rpy=(np.pi / 2, 0.0, 0.0),
                axis=(0, 0, 1))
    return b.build()


def test_nan_and_inf_propagate_as_ieee_says():
    """tau = m l^2 qdd + m g l cos q for a point mass: qdd = +-inf gives +-inf, NaN gives NaN,
    q = inf gives cos(inf) = NaN; never a finite number."""
    model = _pendulum()
    q = np.array([[0.3], [0.3], [0.3], [np.inf], [np.nan]])
    qdd = np.array([[np.inf], [-np.inf], [np.nan], [1.0], [1.0]])
    tau = sd.inverse_dynamics(model, q, np.zeros((5, 1)), qdd)[:, 0]
    assert tau[0] == np.inf and tau[1] == -np.inf and np.isnan(tau[2:]).all()
    for i in range(5):  # one state at a time: the same
        one = sd.inverse_dynamics(model, q[i], [0.0], qdd[i])
        assert np.array_equal(one, tau[i:i + 1], equal_nan=True)
    assert sd.forward_dynamics(model, [0.3], [0.0], [np.inf])[0] == np.inf


def test_nan_and_inf_make_the_same_pattern_as_the_numpy_path(tree):
    q, qd, u = random_state(tree, 7, batch=(6,))
    q[0, 0], qd[1, 3], u[2, 5], u[3, 1], q[4, tree.nq - 1] = np.nan, np.inf, -np.inf, np.nan, \
        np.inf
    for name, f in _calls(tree).items():
        got, want = f(q, qd, u, "spatial"), _on_numpy(f, q, qd, u, "spatial")
        assert np.array_equal(np.isnan(got), np.isnan(want)), name
        assert np.array_equal(np.isinf(got), np.isinf(want)), name
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-11, atol=1e-11,
                                   err_msg=name)
        assert np.isfinite(got[5]).all(), name  # the clean state is untouched


@pytest.mark.slow  # a long validation: CI's slow tier (python -m pytest -m slow)
def test_a_non_finite_input_never_gives_a_finite_result():
    """A NaN or inf in a state's inputs makes every finite output of that state NaN, on every
    path. The Panda's first axis is vertical: at rest its gravity torques never meet sin(q0) and
    cos(q0) (products with the model's exact zeros are left out), so a NaN q0 gave finite
    torques before the rule (``execution.call.propagate_non_finite``)."""
    panda = sd.robots.load("panda")
    q = np.stack([sd.random_configuration(panda, seed) for seed in range(4)])
    zero = np.zeros((4, panda.nv))
    clean = sd.inverse_dynamics(panda, q[:1], zero[:1], zero[:1])
    assert np.isfinite(clean).all()
    q[1, 0], q[2, 0] = np.nan, np.inf
    qd = zero.copy()
    qd[3, 0] = np.nan  # joint 0's rate: it meets only exact zeros at rest too
    ID = sd.compile(panda, "inverse_dynamics")
    for native in (True, False):
        previous = plan.use_native(native)
        try:
            results = dict(_calls(panda), compiled=lambda q, qd, u, a: ID(q, qd, u),
                           derivatives=lambda q, qd, u, a: sd.dynamics_derivatives(
                               panda, q, qd, qdd=u).dq)
            for name, f in results.items():
                if name in ("forward_kinematics", "jacobian", "jacobian_local",
                            "center_of_mass", "mass_matrix", "gravity_torques",
                            "potential_energy"):
                    bad = (1, 2)  # functions of q alone
                else:
                    bad = (1, 2, 3)
                with np.errstate(all="ignore"):
                    out = np.asarray(f(q, qd, zero, "spatial"))
                for state in range(4):
                    assert np.isnan(out[state]).all() == (state in bad), (name, native, state)
                np.testing.assert_allclose(out[0], np.asarray(f(q[:1], zero[:1], zero[:1],
                                                                "spatial"))[0], rtol=1e-13,
                                           atol=1e-13, err_msg=name)
        finally:
            plan.use_native(previous)
    import jax.numpy as jnp

    with np.errstate(all="ignore"):
        tau = np.asarray(sd.inverse_dynamics(panda, jnp.asarray(q), jnp.asarray(qd),
                                             jnp.asarray(zero)))
    assert np.isnan(tau[1:]).all() and np.isfinite(tau[0]).all()


# -- bad input through the fast entry -----------------------------------------------------------
def test_wrong_inputs_get_the_public_value_errors(tree):
    q, qd, u = random_state(tree, 8, batch=(4,))
    fd = sd.compile(tree, "forward_dynamics")
    for f in (lambda *a: sd.forward_dynamics(tree, *a), fd):
        with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., %d\)" % tree.nq):
            f(q[:, :-1], qd, u)
        with pytest.raises(ValueError, match=r"qd must have shape \(\.\.\., %d\)" % tree.nv):
            f(q[0], qd[0, :-1], u[0])
        with pytest.raises(ValueError, match=r"tau must have shape"):
            f(q, qd, u[:, None, :-1])
        with pytest.raises(ValueError, match=r"batch shapes do not broadcast"):
            f(q, qd[:3], u)
        with pytest.raises(ValueError, match=r"real numeric"):
            f(q + 0j, qd, u)
        with pytest.raises(ValueError, match=r"real numeric"):
            f(np.array([["a"] * tree.nq]), qd, u)
        with pytest.raises(ValueError, match=r"real numeric"):
            f(q.astype(object), qd, u)
        with pytest.raises(ValueError, match=r"q must have shape"):
            f(q[0, 0], qd[0], u[0])  # a scalar
        with pytest.raises(TypeError, match="takes 3 arrays|missing 1 required"):
            f(q, qd)
    # what the fast entry does not take goes through the general path: the same bits for the
    # same float64 values, float32 and lists converted as the dtype policy says
    want = sd.forward_dynamics(tree, q, qd, u)
    for same in (np.asfortranarray(q), q.astype(">f8"), q[:, ::-1][:, ::-1], q.tolist()):
        assert np.array_equal(fd(same, qd, u), want)
        assert np.array_equal(sd.forward_dynamics(tree, same, qd, u), want)
    single = q.astype(np.float32)
    np.testing.assert_array_equal(fd(single, qd, u), fd(single.astype(float), qd, u))
    ints = sd.mass_matrix(tree, np.zeros(tree.nq, dtype=int) + tree.neutral.astype(int))
    assert ints.dtype == np.float64


def test_zero_states_and_empty_batches(tree):
    q, qd, u = (np.zeros((0, n)) for n in (tree.nq, tree.nv, tree.nv))
    assert sd.inverse_dynamics(tree, q, qd, u).shape == (0, tree.nv)
    assert sd.mass_matrix(tree, q.reshape(0, 3, tree.nq)).shape == (0, 3, tree.nv, tree.nv)


# -- sd.compile ----------------------------------------------------------------------------------
def test_compile_binds_the_model_and_gravity(tree):
    q, qd, u = random_state(tree, 9, batch=(7,))
    g = (0.5, -1.0, -3.0)
    f = sd.compile(tree, "inverse_dynamics", gravity=g)
    assert f.source in ("compiled", "disk cache") and f.program.level == 2
    assert f.input_names == ("q", "qd", "qdd") and f.output_shape == (tree.nv,)
    want = sd.inverse_dynamics(tree, q, qd, u, gravity=g)
    np.testing.assert_allclose(f(q, qd, u), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f(q[1], qd[1], u[1]), want[1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f(q.reshape(7, 1, -1), qd, u),  # (7, 1) x (7,): (7, 7)
                               sd.inverse_dynamics(tree, q.reshape(7, 1, -1), qd, u, gravity=g),
                               rtol=1e-12, atol=1e-12)
    M = sd.compile(tree, "mass_matrix", algebra="dq")
    np.testing.assert_allclose(M(q), sd.mass_matrix(tree, q), rtol=1e-11, atol=1e-11)
    with pytest.raises(ValueError, match="unknown function"):
        sd.compile(tree, "inverse_dynamic")
    with pytest.raises(ValueError, match="takes no gravity"):
        sd.compile(tree, "mass_matrix", gravity=g)
    with pytest.raises(ValueError, match="options of backend='jax'"):
        sd.compile(tree, "mass_matrix", batch_shape=(3,))


def test_plan_explains_the_path(tree):
    text = sd.plan(tree, "forward_dynamics").explain()
    assert "path 'native'" in text
    p = sd.plan(tree, "forward_dynamics", gravity=True)
    program = p.compile()
    assert program.level == 2 and program.input_names == ("q", "qd", "tau", "gravity")
    assert "optimised" in sd.plan(tree, "forward_dynamics", gravity=True).explain()
    on_jax = "custom_call" if sd._backend.x64_enabled() else "jax"  # float32: jax.numpy
    assert f"path '{on_jax}'" in sd.plan(tree, "forward_dynamics", inputs="jax").explain()
    previous = plan.use_native(False)
    try:
        assert "path 'numpy'" in sd.plan(tree, "forward_dynamics").explain()
    finally:
        plan.use_native(previous)
    with pytest.raises(ValueError, match="takes no f_ext"):
        sd.plan(tree, "mass_matrix", f_ext=True)


# -- the disk cache ---------------------------------------------------------------------------
def _forget_programs():
    native._PROGRAMS.clear()
    plan._forget()


@pytest.fixture
def fresh_cache(tmp_path):
    previous = cache.directory()
    cache.set_directory(tmp_path / "cache")
    _forget_programs()
    yield tmp_path / "cache"
    cache.set_directory(previous)
    _forget_programs()


def _entries(folder):
    return sorted(p for p in os.listdir(folder) if p.endswith(".o")) if os.path.isdir(folder) \
        else []


def test_corrupted_or_stale_entries_are_rebuilt(tree, fresh_cache):
    q, qd, u = random_state(tree, 10, batch=(3,))
    want = _on_numpy(sd.inverse_dynamics, tree, q, qd, u)
    np.testing.assert_allclose(sd.inverse_dynamics(tree, q, qd, u), want, rtol=1e-11, atol=1e-11)
    files = _entries(fresh_cache)
    assert len(files) == 1  # the level-0 program
    path = fresh_cache / files[0]
    good = path.read_bytes()
    about = next(iter(native._PROGRAMS.values())).description(0)  # what the entry must hold
    damages = {"truncated": good[:len(good) // 2], "flipped": good[:-100] + bytes(
        [good[-100] ^ 0xFF]) + good[-99:], "empty": b"", "garbage": os.urandom(len(good)),
        "other key": good.replace(files[0][:-2].encode(), b"0" * len(files[0][:-2]))}
    for what, data in damages.items():
        path.write_bytes(data)
        assert cache.load_object(files[0][:-2], about) is None, what
        _forget_programs()
        np.testing.assert_allclose(sd.inverse_dynamics(tree, q, qd, u), want, rtol=1e-11,
                                   atol=1e-11, err_msg=what)
        assert native._PROGRAMS and next(iter(native._PROGRAMS.values())).source == "compiled"
        assert cache.load_object(files[0][:-2], about) is not None, what  # rewritten
    _forget_programs()
    sd.inverse_dynamics(tree, q, qd, u)
    assert next(iter(native._PROGRAMS.values())).source == "disk cache"


def test_an_unwritable_cache_warns_once_and_computes(tree, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    previous = cache.directory()
    cache.set_directory(blocker / "cache")  # cannot be created, even by root
    _forget_programs()
    try:
        q, qd, u = random_state(tree, 11, batch=(2,))
        with pytest.warns(cache.CacheWarning, match="cannot write the program cache"):
            tau = sd.inverse_dynamics(tree, q, qd, u)
            sd.mass_matrix(tree, q)
        np.testing.assert_allclose(tau, _on_numpy(sd.inverse_dynamics, tree, q, qd, u),
                                   rtol=1e-11, atol=1e-11)
        with warnings.catch_warnings():
            warnings.simplefilter("error", cache.CacheWarning)  # once per process
            sd.forward_dynamics(tree, q, qd, u)
    finally:
        cache.set_directory(previous)
        _forget_programs()


_CHILD = textwrap.dedent("""
    import sys, numpy as np, screwdyn as sd
    from screwdyn.execution import cache, native
    cache.set_directory(sys.argv[1])
    model = sd.robots.load("ur5")
    q = np.linspace(-1, 1, model.nq)
    tau = sd.inverse_dynamics(model, q, q, q)
    program = next(iter(native._PROGRAMS.values()))
    print(program.source.split()[0], cache.content_hash(model), repr(tau.tolist()))
""")


def test_processes_share_the_cache_and_compile_safely_at_once(tmp_path):
    """Two processes compiling the same program into one directory at once: both work, the
    entry is whole; a third process loads it from disk; the model's content hash is the same in
    every process."""
    folder = str(tmp_path / "cache")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    children = [subprocess.Popen([sys.executable, "-c", _CHILD, folder], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outputs = [c.communicate(timeout=300) for c in children]
    for child, (out, err) in zip(children, outputs):
        assert child.returncode == 0, err
    results = [out.split(" ", 2) for out, _ in outputs]
    assert results[0][1:] == results[1][1:]  # the same hash and the same bits
    third = subprocess.run([sys.executable, "-c", _CHILD, folder], capture_output=True,
                           text=True, env=env, timeout=300)
    assert third.returncode == 0, third.stderr
    source, digest, tau = third.stdout.split(" ", 2)
    assert source == "disk" and digest == results[0][1] and tau == results[0][2]
    assert digest == cache.content_hash(sd.robots.load("ur5"))
    assert not [f for f in os.listdir(folder) if f.endswith(".tmp")]


def test_content_hash_follows_the_content():
    a, b = random_tree(3, n=4), random_tree(3, n=4)
    assert a is not b and cache.content_hash(a) == cache.content_hash(b)
    c = a.with_joint_parameters(armature=0.1)
    assert cache.content_hash(c) != cache.content_hash(a)
    assert cache.content_hash(-0.0) != cache.content_hash(0.0)
    for opaque in (lambda t: t, np.sin, object()):  # what a function computes is not its state
        with pytest.raises(TypeError):
            cache.content_hash(("reference", opaque))


# -- the scalar program -------------------------------------------------------------------------
def test_graph_shares_folds_and_keeps_ieee():
    g = graph.Graph()
    x, y = g.input("x", 0), g.input("x", 1)
    assert (x * y) is (y * x) and (x + y) is (y + x)  # one node (hash-consing)
    assert (x - y) is not (y - x)
    assert x * 1.0 is x and (x * -1.0) is -x and x + 0.0 is x and x / 1.0 is x and --x is x
    two = g.constant(2.0)
    assert g.const_value((two * 3.0 + 1.0).i) == 7.0
    assert g.const_value((g.constant(1.0) / 0.0).i) == np.inf
    assert np.isnan(g.const_value((g.constant(0.0) / 0.0).i))
    assert g.const_value((x * 0.0).i) is None  # x * 0 is NaN for x = inf: never folded
    assert g.const_value((x - x).i) is None
    with pytest.raises(graph.DataDependentError):
        if x > y:
            pass
    program = graph.Program(g, [("x", 2)], [x * y + 1.0, g.apply("sin", x)], (2,))
    np.testing.assert_allclose(program.evaluate(x=[0.5, 3.0]), [2.5, np.sin(0.5)])


def test_sine_and_cosine_are_accurate_to_two_ulps():
    """The compiled sine and cosine (a reduction by pi/2 and polynomials, the C library beyond
    |x| = 823549.6) against Python's math module (the C library): within 2 ulps, and within
    1 ulp for 99.9 % of arguments, over small, large and special arguments."""
    rng = np.random.default_rng(13)
    x = np.concatenate([rng.uniform(-4, 4, 20000), rng.uniform(-1e5, 1e5, 20000),
                        np.arange(-200, 200) * np.pi / 2, np.arange(-200, 200) * np.pi / 4,
                        rng.uniform(-1e-8, 1e-8, 1000), [0.0, -0.0, 823549.5, 823549.7, 1e300,
                                                         np.inf, -np.inf, np.nan, 5e-324]])
    g = graph.Graph()
    t = g.input("x", 0)
    program = graph.Program(g, [("x", 1)], [g.apply("sin", t), g.apply("cos", t)], (2,))
    for width, level in ((1, 0), (4, 2)):
        library = llvm.Library(llvm.compile_object(llvm.kernel_ir(program, width=width), level))
        out = np.empty((len(x), 2))
        entry.caller(library.address("kernel"))([x[:, None].copy()], out, len(x))
        for k, f in enumerate((np.sin, np.cos)):
            want = np.array([getattr(__import__("math"), f.__name__)(v) if np.isfinite(v)
                             else np.nan for v in x])
            got = out[:, k]
            assert np.array_equal(np.isnan(got), np.isnan(want))
            ok = ~np.isnan(want)
            ulps = np.abs(got[ok] - want[ok]) / np.spacing(np.abs(want[ok]))
            assert ulps.max() <= 2.0, (f.__name__, x[ok][np.argmax(ulps)], ulps.max())
            assert np.mean(ulps <= 1.0) > 0.999


def test_tracing_handles_where_sqrt_and_small_linear_algebra():
    rng = np.random.default_rng(12)
    A = rng.normal(size=(4, 4))
    b = rng.normal(size=4)

    def f(a, v):
        M = a.reshape(4, 4)
        x = trace.xp.linalg.solve(M, v[:, 0])[:, None]
        w = trace.xp.where(v > 0.0, trace.xp.sqrt(v * v + 1.0), -v)
        return trace.xp.concatenate([x, w, trace.xp.sum(a, axis=0, keepdims=True)])

    program = trace.trace(f, {"a": (16,), "v": (4,)})
    got = program.evaluate(a=A.reshape(-1), v=b)
    want = np.concatenate([np.linalg.solve(A, b), np.where(b > 0, np.sqrt(b * b + 1), -b),
                           [A.sum()]])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    lib = llvm.Library(llvm.compile_object(llvm.kernel_ir(program), 0))
    out = np.empty((1, 9))
    entry.caller(lib.address("kernel"))([A.reshape(-1), b], out, 1)
    np.testing.assert_allclose(out[0], want, rtol=1e-12)


def _every_derivative_rule(x):
    """Five outputs of three inputs that use every operation the derivative rules cover."""
    xp = trace.xp
    a, b, c = x[0], x[1], x[2]
    return xp.stack([xp.sin(a) * b / (c + 3.0), xp.sqrt(a * a + 1.0) - xp.cos(b * c),
                     xp.where(a > b, a * c, xp.exp(b) - xp.log(c + 4.0)),
                     xp.arctan2(a, c + 2.0) + xp.abs(b) + xp.tan(c) + a ** 3,
                     xp.maximum(a, c) - xp.minimum(b, c) + xp.floor(a) * b])


def test_jacobians_of_programs_are_exact():
    """graph.jacobian against central differences of the compiled program, on every operation
    it differentiates."""
    program = trace.trace(_every_derivative_rule, {"x": (3,)})
    J = graph.jacobian(program, ("x",))
    assert J.output_shape == (5, 3)
    nodes = [program.graph._handles[i] for i in program.outputs + J.outputs]
    lib = llvm.Library(llvm.compile_object(llvm.kernel_ir(graph.Program(
        program.graph, program.inputs, nodes, (20,))), 0))
    call = entry.caller(lib.address("kernel"))
    for x in ([0.3, -0.7, 0.4], [1.2, 0.5, -0.2], [-0.4, 0.9, 0.8]):
        x = np.array(x)
        out = np.empty((1, 20))
        call([x], out, 1)
        value, jac = out[0, :5], out[0, 5:].reshape(5, 3)
        h = 1e-6
        for k in range(3):
            e = np.eye(3)[k] * h
            plus, minus = np.empty((1, 20)), np.empty((1, 20))
            call([x + e], plus, 1)
            call([x - e], minus, 1)
            np.testing.assert_allclose(jac[:, k], (plus[0, :5] - minus[0, :5]) / (2 * h),
                                       rtol=1e-7, atol=1e-7)


def test_reverse_mode_programs_are_the_transposed_jacobian():
    """graph.vjp (one reverse sweep) against graph.jacobian (forward mode) of the same compiled
    program, on every operation either differentiates, with the cotangent as a program input;
    and its size is a small multiple of the function's, where the Jacobian's grows with the
    number of inputs."""
    program = trace.trace(_every_derivative_rule, {"x": (3,)})
    J = graph.jacobian(program, ("x",))
    V = graph.vjp(program, ("x",), "w")
    assert V.inputs == [("x", 3), ("w", 5)] and V.output_shape == (3,)
    run = {}
    for name, p in (("J", J), ("V", V)):
        lib = llvm.Library(llvm.compile_object(llvm.kernel_ir(p), 0))
        run[name] = (lib, entry.caller(lib.address("kernel")))
    rng = np.random.default_rng(3)
    for x in ([0.3, -0.7, 0.4], [1.2, 0.5, -0.2], [-0.4, 0.9, 0.8], [0.5, 0.5, 0.5]):
        x, w = np.array(x), rng.normal(size=5)
        jac, bar = np.empty((1, 15)), np.empty((1, 3))
        run["J"][1]([x], jac, 1)
        run["V"][1]([x, w], bar, 1)
        np.testing.assert_allclose(bar[0], w @ jac[0].reshape(5, 3), rtol=1e-13, atol=1e-14)
    # a chain's program: reverse stays a few times the function, forward mode grows with n
    model = random_tree(5, n=12)
    F = native.trace_program(sd.dynamics.FUNCTIONS["forward_dynamics"], model, "spatial",
                             ("q", "qd", "tau"))
    size = sum(F.count().values())
    reverse = native.trace_program(sd.dynamics.FUNCTIONS["forward_dynamics"], model, "spatial",
                                   ("q", "qd", "tau"), derivatives=(graph.Reverse(("q", "qd")),))
    forward = native.trace_program(sd.dynamics.FUNCTIONS["forward_dynamics"], model, "spatial",
                                   ("q", "qd", "tau"), derivatives=(("q", "qd"),))
    assert reverse.inputs[-1] == ("cotangent0", model.nv)
    assert sum(reverse.count().values()) < 4 * size < sum(forward.count().values())


def test_native_derivatives_equal_the_jax_path():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    model = random_tree(42, n=5, floating_base=True)
    q, qd, u = random_state(model, 14, batch=(3,))
    for kw in ({"qdd": u}, {"tau": u}):
        native_d = sd.dynamics_derivatives(model, q, qd, **kw)
        jax_d = sd.dynamics_derivatives(model, jax.numpy.asarray(q), qd, **kw)
        for a, b in zip(native_d, jax_d):
            assert isinstance(a, np.ndarray)
            np.testing.assert_allclose(a, np.asarray(b), rtol=1e-10, atol=1e-10)
    for name, kw in (("inverse_dynamics_derivatives", "qdd"),
                     ("forward_dynamics_derivatives", "tau")):
        F = sd.dynamics.FUNCTIONS[name]
        assert plan.decide(F, model)[0] == "native"
        native = plan.run(F, model, "spatial", (q, qd, u), (None, None))
        previous = plan.use_native(False)
        try:  # the same kernel on numpy
            assert plan.decide(F, model)[0] == "numpy"
            np.testing.assert_allclose(plan.run(F, model, "spatial", (q, qd, u), (None, None)),
                                       native, rtol=1e-10, atol=1e-10)
        finally:
            plan.use_native(previous)


def test_a_kernel_that_does_not_trace_runs_on_numpy_with_one_warning(tree):
    """Python control flow on a traced value cannot be compiled: the plan says so once
    (NativeCompileWarning), remembers it, and runs the numpy path with the right result."""
    def kernel(call):
        q = call["q"]
        if float(np.asarray(q).reshape(-1)[0]) > 0:  # data-dependent: no straight-line code
            return 2.0 * q
        return -q

    function = plan.Function("data_dependent", kernel, ("q",), lambda m: (m.nq,))
    q = np.abs(random_state(tree, 15)[0]) + 0.1
    with pytest.warns(plan.NativeCompileWarning, match="could not be compiled"):
        out = plan.run(function, tree, "spatial", (q,))
    np.testing.assert_array_equal(out, 2.0 * q)
    assert plan.decide(function, tree)[0] == "numpy"
    assert "could not be compiled" in " ".join(plan.decide(function, tree)[1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", plan.NativeCompileWarning)
        np.testing.assert_array_equal(plan.run(function, tree, "spatial", (-q,)), q)


# -- loops: a body traced once, run n times ----------------------------------------------------
def _looped(x, y):
    """A program with a loop (7 iterations) whose body holds a nested loop (3), a select, sine
    and cosine (the C library's beyond the reduction), an unchanged carry and a value from
    outside; its numpy twin is ``_looped_numpy``."""
    xp = trace.xp

    def body(_, c):
        inner = trace.fori_loop(3, lambda _, d: d * 0.9 + xp.cos(c[0:2]) * 0.1, c[0:2])
        return xp.stack([c[0] * 0.5 + y[0] * xp.sin(c[1]) + inner[0],
                         c[1] - c[0] * c[0] * 0.1 + 1.0, c[2],
                         xp.where(c[0] > 0.2, c[3] + x[1], c[3] - 1.0)], axis=0)

    c = trace.fori_loop(7, body, xp.stack([x[0], x[1], y[0] * 2.0, 0.0 * x[0]], axis=0))
    return xp.concatenate([c * 3.0, xp.sin(x) + c[0:2]], axis=0)


def _looped_numpy(x, y):
    c = np.array([x[0], x[1], 2.0 * y[0], 0.0 * x[0]])
    for _ in range(7):
        d = c[0:2].copy()
        for _ in range(3):
            d = d * 0.9 + np.cos(c[0:2]) * 0.1
        c = np.array([c[0] * 0.5 + y[0] * np.sin(c[1]) + d[0], c[1] - c[0] * c[0] * 0.1 + 1.0,
                      c[2], c[3] + x[1] if c[0] > 0.2 else c[3] - 1.0])
    return np.concatenate([c * 3.0, np.sin(x) + c[0:2]])


def _compiled_alike(program, unrolled, x, y):
    """The outputs (states, size) of ``program`` and of ``unrolled`` compiled whole and in
    segments of 5 nodes, in one lane and in four, with LLVM's basic blocks as long as usual and
    ended every 2 lines, on the states x, y: checked to be the same bits; the first."""
    outs = []
    for p in (program, unrolled):
        for segment, width, block in ((10 ** 9, 1, llvm.BLOCK), (5, 1, llvm.BLOCK),
                                      (10 ** 9, 4, llvm.BLOCK), (5, 4, llvm.BLOCK),
                                      (10 ** 9, 1, 2), (5, 4, 2)):
            ir = llvm.kernel_ir(p, segment=segment, width=width, block=block)
            library = llvm.Library(llvm.compile_object(ir, 0 if width == 1 else 2))
            out = np.empty((len(x), len(p.outputs)))
            entry.caller(library.address("kernel"))([x, y], out, len(x))
            outs.append(out)
    for out in outs[1:]:
        assert np.array_equal(out, outs[0], equal_nan=True)
    return outs


def test_loops_compute_the_bits_of_the_unrolled_program():
    """A loop of the program (``trace.fori_loop``) against the same program unrolled
    (``graph.unroll``) and numpy: the same bits compiled whole or in segments, in one lane or
    four; the loop's program is a body long, not n bodies."""
    program = trace.trace(_looped, {"x": 2, "y": 1})
    unrolled = graph.unroll(program)
    ops = program.count()
    assert ops["loop"] == 1 and sum(ops.values()) < 30 < sum(unrolled.count().values())
    assert "loop" not in unrolled.count()
    _agrees(program, unrolled, _looped_numpy, seed=8)


def _agrees(program, unrolled, twin, seed):
    """``program`` compiled (``_compiled_alike``) and evaluated against ``unrolled`` (the same
    bits) and its numpy ``twin`` (to 1e-12) on 9 random states, one with a NaN and one large."""
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(9, 2)), rng.normal(size=(9, 1))
    x[3, 0], x[4, 1] = np.nan, 1e9
    outs = _compiled_alike(program, unrolled, x, y)
    for k in range(9):
        assert np.array_equal(program.evaluate(x=x[k], y=y[k]),
                              unrolled.evaluate(x=x[k], y=y[k]), equal_nan=True)
        np.testing.assert_allclose(outs[0][k], twin(x[k], y[k]), rtol=1e-12, atol=1e-12)


def test_fori_loop_edge_cases():
    xp = trace.xp
    double = trace.trace(lambda x: trace.fori_loop(0, lambda _, c: c * 2.0, x), {"x": 2})
    assert double.count() == {"input": 2}
    once = trace.trace(lambda x: trace.fori_loop(1, lambda _, c: c * 2.0, x), {"x": 2})
    assert "loop" not in once.count()
    # a body that reads no carry: its value, no loop
    same = trace.trace(lambda x: trace.fori_loop(5, lambda _, c: xp.sin(x), x), {"x": 2})
    assert "loop" not in same.count()
    np.testing.assert_array_equal(same.evaluate(x=[0.1, 0.2]), np.sin([0.1, 0.2]))
    # constants as the start: the first iteration in Python, then a loop
    grow = trace.trace(lambda x: trace.fori_loop(
        4, lambda _, c: (c[0] + x[0:1], c[1] * 2.0), (np.zeros((1, 1)), np.ones((2, 1))))[0]
        + 0.0 * x[0:1], {"x": 2})
    assert grow.evaluate(x=[0.5, 0.0])[0] == 2.0
    with pytest.raises(ValueError, match="shape"):
        trace.trace(lambda x: trace.fori_loop(3, lambda _, c: c[0:1], x), {"x": 2})


# -- maps: a body traced once, run on each column -------------------------------------------
def _mapped(x, y):
    """A program with a map over 7 columns (not a multiple of the lanes) of 3 values each (an
    input, a product, a constant or a comparison: only in arithmetic, see ``Graph.map``),
    whose body holds sine and cosine (the C library's beyond the reduction), a select on a
    value from outside, and results that are an item, a constant and a value from outside;
    its numpy twin is ``_mapped_numpy``."""
    xp = trace.xp
    outside = y[0] * 2.0
    flag = y[0] > 0.0

    def body(c):
        s = xp.sin(c[0] * c[1]) + outside * xp.cos(c[0]) - c[2] / 3.0
        return [s, xp.where(flag, s * c[1], c[0] - 1.0), c[2], 5.0, outside]

    columns = [[x[k % 2], x[0] * (k + 1.0), float(k) if k % 3 else (x[1] > 0.5)]
               for k in range(7)]
    results = trace.map_columns(body, columns)
    return xp.concatenate([xp.stack(r, axis=0) for r in results], axis=0)


def _mapped_numpy(x, y):
    out = []
    for k in range(7):
        c = [x[k % 2], x[0] * (k + 1.0), float(k) if k % 3 else float(x[1] > 0.5)]
        s = np.sin(c[0] * c[1]) + 2.0 * y[0] * np.cos(c[0]) - c[2] / 3.0
        out += [s, s * c[1] if y[0] > 0 else c[0] - 1.0, c[2], 5.0, 2.0 * y[0]]
    return np.array(out)


def test_maps_compute_the_bits_of_the_unrolled_program():
    """A map of the program (``trace.map_columns``) against the same program unrolled
    (``graph.unroll``) and numpy: the same bits compiled whole or in segments, in scalar code
    (the map: columns in the vector lanes) or four states at a time (the map unrolled,
    ``graph.unroll_maps``); the map's program is one body long."""
    program = trace.trace(_mapped, {"x": 2, "y": 1})
    unrolled = graph.unroll(program)
    ops = program.count()
    assert ops["map"] == 1 and ops["map_out"] == 35
    g = program.graph
    body = [g.op[i] for i in g.value[next(i for i in program.schedule()
                                          if g.op[i] == "map")].order]
    assert body.count("sin") == 1 and len(body) < 14
    assert "map" not in unrolled.count() and unrolled.count()["sin"] == 7
    rng = np.random.default_rng(9)
    x, y = rng.normal(size=(9, 2)), rng.normal(size=(9, 1))
    x[3, 0], x[4, 1], x[5, 0], y[6, 0] = np.nan, 1e9, np.inf, -0.5
    outs = _compiled_alike(program, unrolled, x, y)
    # scalar code runs the map (columns in the lanes); vector code its unrolled columns
    functions = llvm.kernel_ir(program, width=4).split("define ")
    assert any("%mp" in f for f in functions if f.startswith("internal void @kernel.w1"))
    assert not any("%mp" in f for f in functions if f.startswith("internal void @kernel.w4"))
    for k in range(9):
        assert np.array_equal(program.evaluate(x=x[k], y=y[k]),
                              unrolled.evaluate(x=x[k], y=y[k]), equal_nan=True)
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(outs[0][k], _mapped_numpy(x[k], y[k]), rtol=1e-12,
                                       atol=1e-12)


def _chained_maps(x, y):
    """Two maps at the top of the program: the second's columns hold the first's results,
    values made long before (shared by several columns, and by the first map), constants and
    inputs; its numpy twin is ``_chained_maps_numpy``."""
    xp = trace.xp
    early = [xp.sin(x[0] + 0.1 * k) * y[0] for k in range(6)]
    first = trace.map_columns(lambda d: [d[0] * d[1] + 1.0, xp.cos(d[0]) - d[1]],
                              [[early[k], early[(k + 1) % 6]] for k in range(5)])
    later = [xp.exp(0.1 * early[k]) for k in range(6)]
    second = trace.map_columns(lambda d: [d[0] * d[1] - d[2], xp.sqrt(d[2] * d[2] + 1.0)],
                               [[first[k][0], later[k], early[2 * k % 6] if k % 2 else 0.0]
                                for k in range(5)] + [[x[1], later[5], early[3]]])
    return xp.stack([r[j] + 0.5 for r in first + second for j in range(2)], axis=0)


def _chained_maps_numpy(x, y):
    early = [np.sin(x[0] + 0.1 * k) * y[0] for k in range(6)]
    first = [(early[k] * early[(k + 1) % 6] + 1.0, np.cos(early[k]) - early[(k + 1) % 6])
             for k in range(5)]
    later = [np.exp(0.1 * early[k]) for k in range(6)]
    columns = [(first[k][0], later[k], early[2 * k % 6] if k % 2 else 0.0)
               for k in range(5)] + [(x[1], later[5], early[3])]
    second = [(a * b - c, np.sqrt(c * c + 1.0)) for a, b, c in columns]
    return np.array([r[j] + 0.5 for r in first + second for j in range(2)])


@pytest.mark.parametrize("segment", [3, 5, 8, 10 ** 9])
def test_maps_keep_their_tables_in_the_scratch_array_across_segments(segment):
    """Split into segments, a map whose columns were made by earlier segments reads them where
    those segments stored them, and a map whose results later segments read leaves them in its
    table (``llvm._layout``): no copies, the same bits as whole and unrolled, in one lane and
    four, and numpy's values."""
    program = trace.trace(_chained_maps, {"x": 2, "y": 1})
    g = program.graph
    maps = [i for i in program.schedule() if g.op[i] == "map"]
    assert len(maps) == 2
    tables = llvm._layout(program, segment)[4]
    if segment == 3:  # both maps' columns come from earlier segments, their results go on
        assert set(tables) == set(maps) and all(set(t) == {"in", "out"}
                                                 for t in tables.values())
        ir = llvm.kernel_ir(program, segment=segment)
        for m in maps:
            assert f"%mp{m}.in = getelementptr double, ptr %scratch" in ir
            assert f"%mp{m}.out = getelementptr double, ptr %scratch" in ir
    if segment == 10 ** 9:
        assert tables == {}
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(9, 2)), rng.normal(size=(9, 1))
    x[3, 0], y[4, 0] = np.nan, np.inf
    outs = []
    for p in (program, graph.unroll(program)):
        for width in (1, 4):
            ir = llvm.kernel_ir(p, segment=segment, width=width)
            library = llvm.Library(llvm.compile_object(ir, 0 if width == 1 else 2))
            out = np.empty((len(x), len(p.outputs)))
            entry.caller(library.address("kernel"))([x, y], out, len(x))
            outs.append(out)
    whole = llvm.kernel_ir(program, segment=10 ** 9)
    library = llvm.Library(llvm.compile_object(whole, 0))
    reference = np.empty((len(x), len(program.outputs)))
    entry.caller(library.address("kernel"))([x, y], reference, len(x))
    for out in outs:
        assert np.array_equal(out, reference, equal_nan=True)
    with np.errstate(invalid="ignore"):
        for k in range(len(x)):
            np.testing.assert_allclose(reference[k], _chained_maps_numpy(x[k], y[k]),
                                       rtol=1e-12, atol=1e-12)


def _loop_of_maps(x, y):
    """A loop (5 iterations) whose body holds a map over 3 columns of the carry (sine, a value
    from outside); its numpy twin is ``_loop_of_maps_numpy``."""
    xp = trace.xp
    outside = y[0] * 0.5

    def body(_, c):
        r = trace.map_columns(lambda d: [xp.sin(d[0]) * d[1] + outside, d[0] * 0.9],
                              [[c[k], c[(k + 1) % 3]] for k in range(3)])
        return xp.stack([r[k][0] + r[(k + 1) % 3][1] for k in range(3)], axis=0)

    c = trace.fori_loop(5, body, xp.stack([x[0], x[1], y[0]], axis=0))
    return xp.concatenate([c, xp.cos(x)], axis=0)


def _loop_of_maps_numpy(x, y):
    c = np.array([x[0], x[1], y[0]])
    for _ in range(5):
        r = [(np.sin(c[k]) * c[(k + 1) % 3] + y[0] * 0.5, c[k] * 0.9) for k in range(3)]
        c = np.array([r[k][0] + r[(k + 1) % 3][1] for k in range(3)])
    return np.concatenate([c, np.cos(x)])


def test_a_loop_body_may_hold_a_map():
    """A map inside a loop's body (the contact solver's M^-1 J^T inside RK4's stages): one
    loop and one map in the program, the body's sine traced once; the same bits as the
    unrolled program compiled whole or in segments, in one lane (columns in the lanes) or four
    (states in the lanes), and numpy's values."""
    program = trace.trace(_loop_of_maps, {"x": 2, "y": 1})
    unrolled = graph.unroll(program)
    g = program.graph
    loop = next(i for i in program.schedule() if g.op[i] == "loop")
    inside = [g.op[i] for i in g.value[loop].order]
    assert inside.count("map") == 1 and "sin" not in inside
    assert "map" not in program.count() and unrolled.count()["sin"] == 15
    # scalar code runs the map inside the loop (columns in the lanes); vector code (states in
    # the lanes) the loop with its map unrolled
    functions = llvm.kernel_ir(program, width=4).split("define ")
    assert any("%mp" in f for f in functions if f.startswith("internal void @kernel.w1"))
    assert not any("%mp" in f for f in functions if f.startswith("internal void @kernel.w4"))
    assert any("%lp" in f for f in functions if f.startswith("internal void @kernel.w4"))
    _agrees(program, unrolled, _loop_of_maps_numpy, seed=10)


def _blocks(ir):
    """The basic blocks of LLVM IR text: (function, label, instruction lines), in order."""
    blocks, function = [], None
    for line in ir.splitlines():
        if line.startswith("define "):
            function = line.split("@")[1].split("(")[0]
        elif function and re.fullmatch(r"[\w.]+:", line):
            blocks.append((function, line[:-1], []))
        elif function and line.startswith("  ") and blocks and blocks[-1][0] == function:
            blocks[-1][2].append(line.strip())
    return blocks


def _long_body(x, y):
    """A loop (3 iterations) whose body is about 1,000 nodes: a chain of selects on
    comparisons, sines and an ``and`` of two conditions, then a map over the carry's columns
    with a value from outside, and one over 300 columns (its tables' stores and loads: 1,800
    lines)."""
    xp = trace.xp
    outside = y[0] * 0.25

    def body(_, c):
        a, b = c[0], c[1]
        for k in range(120):
            hot = (a > 0.1 * (k % 5)) & (b < 2.0)
            a, b = xp.where(hot, xp.sin(a) * 0.9 + b * 0.01, a * 0.5 + 0.3), b + a * 1e-3
        r = trace.map_columns(lambda d: [d[0] * d[1] + outside], [[a, b], [b, a], [a, a]])
        wide = trace.map_columns(lambda d: [d[0] * d[1]], [[a + 0.01 * k, b] for k in range(300)])
        total = sum(out[0] for out in wide)
        return xp.stack([a + r[0][0], b - r[1][0], c[2] + r[2][0] + 1e-3 * total], axis=0)

    c = trace.fori_loop(3, body, xp.stack([x[0], x[1], y[0]], axis=0))
    return xp.concatenate([c, x * 2.0], axis=0)


def test_a_long_loop_body_is_cut_into_short_blocks():
    """A loop body is one function, but its basic blocks end every ``block`` lines and a map's
    vector broadcasts of outside values have a block of their own: at level 0 LLVM hands the
    whole block above an instruction its fast selector cannot take (a broadcast) to the slow
    selector, and splits a block at each select whose condition it cannot fuse, each at a cost
    that grows with the block (six stacked boxes' step, mostly three blocks of 60,000 to
    190,000 lines, compiled in 91 s; in blocks of 1,000 lines, 3 s). A map's table stores and
    loads are cut too (the boxes' step had two blocks of 37,000 lines of them; its level 2
    ran 6.9 ms a step, and 5.2 ms cut). The cut changes no bit."""
    program = trace.trace(_long_body, {"x": 2, "y": 1})
    loop = next(i for i in program.schedule() if program.graph.op[i] == "loop")
    assert len(program.graph.value[loop].order) > 900
    sincos = 80  # the most lines one node emits here (a sine: reduction, polynomial, libm)
    for block in (200, llvm.BLOCK):
        blocks = _blocks(llvm.kernel_ir(program, block=block))
        assert max(len(lines) for *_, lines in blocks) <= block + sincos
        assert sum(len(lines) for *_, lines in blocks) > 3 * 200
        splats = [lines for *_, lines in blocks
                  if any(line.split(" = ")[-1].startswith("shufflevector") for line in lines)]
        assert splats and all(len(lines) <= 2 * 3 + 1 for lines in splats)
    rng = np.random.default_rng(14)
    x, y = rng.normal(size=(9, 2)), rng.normal(size=(9, 1))
    x[3, 0] = np.nan
    outs = []
    for block in (10 ** 9, 200, 7):
        ir = llvm.kernel_ir(program, block=block)
        library = llvm.Library(llvm.compile_object(ir, 0))
        out = np.empty((len(x), len(program.outputs)))
        entry.caller(library.address("kernel"))([x, y], out, len(x))
        outs.append(out)
        assert np.array_equal(out, outs[0], equal_nan=True)
    for k in range(9):  # the graph's own evaluation (numpy's sine: to an ulp or two)
        np.testing.assert_allclose(outs[0][k], program.evaluate(x=x[k], y=y[k]), rtol=1e-12,
                                   atol=1e-12)


# -- whens: a body run only where a condition holds ------------------------------------------
def _guarded(x, y):
    """Whens (``trace.when``): one at the top, whose body (a sine, a value from outside) runs
    where x0 > 0 and returns one passed value unchanged, one from outside and a constant; one in
    a loop's body (6 iterations), which updates the carry's first two values while the first is
    below 1 and passes the third; its numpy twin is ``_guarded_numpy``."""
    xp = trace.xp
    outside = y[0] * 2.0

    def top(v):
        return xp.stack([xp.sin(v[0] * v[1]) + outside, v[1], outside, 0.0 * outside + 5.0],
                        axis=0)

    a = trace.when(x[0] > 0.0, top, xp.stack([x[0], x[1], y[0], x[1]], axis=0))

    def body(_, c):
        def step(d):
            return xp.stack([d[0] * 0.5 + xp.cos(d[1]) + outside, d[1] - d[0] * 0.1], axis=0)

        head = trace.when(c[0] < 1.0, step, c[0:2])
        return xp.concatenate([head, c[2:3] + 1.0], axis=0)

    c = trace.fori_loop(6, body, xp.stack([x[0], x[1], y[0]], axis=0))
    return xp.concatenate([a, c], axis=0)


def _guarded_numpy(x, y):
    a = np.array([x[0], x[1], y[0], x[1]])
    if x[0] > 0:
        a = np.array([np.sin(x[0] * x[1]) + 2.0 * y[0], x[1], 2.0 * y[0], 5.0])
    c = np.array([x[0], x[1], y[0]])
    for _ in range(6):
        if c[0] < 1.0:
            c[0:2] = [c[0] * 0.5 + np.cos(c[1]) + 2.0 * y[0], c[1] - c[0] * 0.1]
        c[2] += 1.0
    return np.concatenate([a, c])


def test_whens_compute_the_bits_of_the_unrolled_program():
    """A when of the program (``trace.when``: the contact solver's rows of a point that may
    touch) against the same program unrolled (``graph.unroll``: selects) and numpy: the same
    bits compiled whole or in segments, in one lane (a branch) or four (a branch taken where
    any lane's condition holds, then selects lane by lane: the random states mix them); a
    passed value returned unchanged is no result of the when."""
    program = trace.trace(_guarded, {"x": 2, "y": 1})
    unrolled = graph.unroll(program)
    g = program.graph
    ops = program.count()
    assert ops["when"] == 1 and ops["loop"] == 1 and ops["when_out"] == 3
    loop = next(i for i in program.schedule() if g.op[i] == "loop")
    assert [g.op[i] for i in g.value[loop].order].count("when") == 1
    assert "when" not in unrolled.count() and "select" in unrolled.count()
    ir = llvm.kernel_ir(program, width=4)
    assert ir.count("%wh") > 2 and "@llvm.vector.reduce.or.v4i1" in ir
    _agrees(program, unrolled, _guarded_numpy, seed=12)
    rng = np.random.default_rng(13)  # all lanes one way, then the other
    for sign in (1.0, -1.0):
        x, y = sign * np.abs(rng.normal(size=(8, 2))) + sign * 1.5, rng.normal(size=(8, 1))
        out = _compiled_alike(program, unrolled, x, y)[0]
        np.testing.assert_allclose(out, [_guarded_numpy(a, b) for a, b in zip(x, y)],
                                   rtol=1e-12, atol=1e-12)


def test_when_edge_cases():
    xp = trace.xp
    # a condition known when traced: the body, or the values, and no when
    taken = trace.trace(lambda x: trace.when(True, lambda v: v * 2.0, x), {"x": 2})
    assert "when" not in taken.count()
    np.testing.assert_array_equal(taken.evaluate(x=[1.0, 2.0]), [2.0, 4.0])
    passed = trace.trace(lambda x: trace.when(False, lambda v: v * 2.0, x), {"x": 2})
    assert passed.count() == {"input": 2}
    # a body that reads nothing it is passed: selects, no when
    outside = trace.trace(lambda x: trace.when(x[0] > 0.0, lambda v: xp.sin(x), x), {"x": 2})
    assert "when" not in outside.count()
    np.testing.assert_array_equal(outside.evaluate(x=[1.0, 2.0]), np.sin([1.0, 2.0]))
    np.testing.assert_array_equal(outside.evaluate(x=[-1.0, 2.0]), [-1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        trace.trace(lambda x: trace.when(x[0] > 0.0, lambda v: v[0:1], x), {"x": 2})
    with pytest.raises(ValueError, match="one scalar"):
        trace.trace(lambda x: trace.when(x > 0.0, lambda v: v, x), {"x": 2})
    with pytest.raises(TypeError, match="boolean"):
        trace.trace(lambda x: trace.when(x[0] * 1.0, lambda v: v * 2.0, x), {"x": 2})
    with pytest.raises(NotImplementedError, match="when body holds no loop"):
        trace.trace(lambda x: trace.when(x[0] > 0.0, lambda v: trace.fori_loop(
            3, lambda _, c: c * v[0], v), x), {"x": 2})


@pytest.mark.parametrize("traced", [_mapped, _loop_of_maps], ids=["map", "loop of maps"])
def test_tables_on_the_heap_give_the_same_bits(traced, monkeypatch):
    """The maps' tables and the kernel's scratch array on the heap (``llvm.STACK_TABLE``: a
    large scene's are megabytes, which overflowed the stack): the same bits as on the stack."""
    program = trace.trace(traced, {"x": 2, "y": 1})
    rng = np.random.default_rng(11)
    x, y = rng.normal(size=(9, 2)), rng.normal(size=(9, 1))
    on_stack = _compiled_alike(program, graph.unroll(program), x, y)[0]
    monkeypatch.setattr(llvm, "STACK_TABLE", 0)
    assert "@aligned_alloc" in llvm.kernel_ir(program, segment=5, width=4)
    on_heap = _compiled_alike(program, graph.unroll(program), x, y)[0]
    assert np.array_equal(on_heap, on_stack, equal_nan=True)


@pytest.mark.parametrize("traced,twin,x", [(_looped, _looped_numpy, [0.3, -0.7]),
                                            (_mapped, _mapped_numpy, [0.3, 0.7]),
                                            (_loop_of_maps, _loop_of_maps_numpy, [0.3, -0.7]),
                                            (_guarded, _guarded_numpy, [0.3, -0.7])],
                         ids=["loop", "map", "loop of maps", "whens"])
def test_derivatives_of_loops_and_maps_are_those_of_the_unrolled_program(traced, twin, x):
    """Forward and reverse derivatives of a program with a loop, a map or whens: the bits of
    the unrolled program's, and central differences of the numpy twin."""
    program = trace.trace(traced, {"x": 2, "y": 1})
    unrolled = graph.unroll(program)
    x, y = np.array(x), np.array([1.3])
    size = len(program.outputs)
    for p, q in ((graph.jacobian(program, ("x", "y")), graph.jacobian(unrolled, ("x", "y"))),
                 (graph.vjp(program, ("x",), "w"), graph.vjp(unrolled, ("x",), "w"))):
        w = np.linspace(-1, 1, size)
        assert np.array_equal(p.evaluate(x=x, y=y, w=w), q.evaluate(x=x, y=y, w=w))
    J = graph.jacobian(program, ("x",)).evaluate(x=x, y=y)
    h = 1e-6
    for k in range(2):
        e = np.eye(2)[k] * h
        np.testing.assert_allclose(J[:, k], (twin(x + e, y) - twin(x - e, y)) / (2 * h),
                                   rtol=1e-6, atol=1e-7)


def test_map_columns_edge_cases():
    xp = trace.xp
    one = trace.trace(lambda x: xp.stack(trace.map_columns(
        lambda c: [c[0] * 2.0], [[x[0]]])[0], axis=0), {"x": 2})
    assert "map" not in one.count()  # one column: the body applied to it
    same = trace.trace(lambda x: xp.stack([r[0] for r in trace.map_columns(
        lambda c: [xp.sin(x[1])], [[x[0]], [x[1]]])], axis=0), {"x": 2})
    assert "map" not in same.count()  # a body that reads no item: its value, no map
    np.testing.assert_array_equal(same.evaluate(x=[0.1, 0.2]), np.sin([0.2, 0.2]))
    constant = trace.map_columns(lambda c: [c[0] + 1.0], [[1.0], [2.0]])
    assert constant == [[2.0], [3.0]]  # nothing traced: a Python loop
    with pytest.raises(ValueError, match="as many"):
        trace.trace(lambda x: xp.stack(trace.map_columns(
            lambda c: [c[0]], [[x[0]], [x[0], x[1]]])[0], axis=0), {"x": 2})
    with pytest.raises(NotImplementedError, match="map body holds no loop, map or when"):
        trace.trace(lambda x: xp.stack(trace.map_columns(lambda d: [trace.fori_loop(
            3, lambda _, c: c * d[0], x[0:1])[0]], [[x[0]], [x[1]]])[0], axis=0), {"x": 2})
