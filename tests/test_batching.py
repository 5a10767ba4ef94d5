"""numpy batches: batch = one-by-one loops, broadcasting, chunked = unchunked, bounded memory,
the entries mode of the spatial algebra = its array mode, and bad inputs."""
import tracemalloc

import numpy as np
import pytest

import screwdyn as sd
from conftest import random_state, random_tree
from screwdyn import dynamics
from screwdyn.algebra import get_algebra
from screwdyn.execution import plan
from screwdyn.algorithms import aba, crba, rnea


@pytest.fixture(scope="module")
def tree():
    return random_tree(11, n=7, floating_base=True)


def _functions(model, link):
    """(name, function of (q, qd, qdd) for states given with leading batch dimensions)."""
    return [
        ("inverse_dynamics", lambda q, qd, qdd: sd.inverse_dynamics(model, q, qd, qdd)),
        ("forward_dynamics", lambda q, qd, qdd: sd.forward_dynamics(model, q, qd, qdd)),
        ("mass_matrix", lambda q, qd, qdd: sd.mass_matrix(model, q)),
        ("bias_forces", lambda q, qd, qdd: sd.bias_forces(model, q, qd)),
        ("gravity_torques", lambda q, qd, qdd: sd.gravity_torques(model, q)),
        ("coriolis_matrix", lambda q, qd, qdd: sd.coriolis_matrix(model, q, qd)),
        ("forward_kinematics", lambda q, qd, qdd: sd.forward_kinematics(model, q)),
        ("jacobian", lambda q, qd, qdd: sd.jacobian(model, q, link)),
        ("kinetic_energy", lambda q, qd, qdd: sd.kinetic_energy(model, q, qd)),
        ("potential_energy", lambda q, qd, qdd: sd.potential_energy(model, q)),
        ("center_of_mass", lambda q, qd, qdd: sd.center_of_mass(model, q)),
    ]


def test_batches_equal_one_by_one_loops(tree):
    q, qd, qdd = random_state(tree, 0, batch=(3, 4))
    for name, f in _functions(tree, tree.nlinks - 1):
        batched = f(q, qd, qdd)
        looped = np.array([[f(q[i, j], qd[i, j], qdd[i, j]) for j in range(4)] for i in range(3)])
        assert batched.shape == looped.shape, name
        np.testing.assert_allclose(batched, looped, rtol=1e-12, atol=1e-12, err_msg=name)


def test_inputs_broadcast_over_batch_dimensions(tree):
    q, qd, qdd = random_state(tree, 1, batch=(4,))
    tau = sd.inverse_dynamics(tree, q, qd[0], qdd[:3, None])  # (4,) x () x (3, 1) -> (3, 4)
    assert tau.shape == (3, 4, tree.nv)
    for i in range(3):
        for j in range(4):
            np.testing.assert_allclose(tau[i, j], sd.inverse_dynamics(tree, q[j], qd[0], qdd[i]),
                                       rtol=1e-12, atol=1e-12)


@pytest.fixture
def numpy_path():
    """Calls run on the numpy path (where chunking happens) inside the test."""
    previous = plan.use_native(False)
    yield
    plan.use_native(previous)


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_chunked_evaluation_equals_unchunked(tree, chunk, monkeypatch, numpy_path):
    q, qd, qdd = random_state(tree, 2, batch=(5, 6))
    f_ext = np.random.default_rng(2).normal(size=(6, tree.nlinks, 6))  # broadcast over the 5
    gravity = np.random.default_rng(3).normal(size=(5, 1, 3))  # one per row
    calls = {name: f for name, f in _functions(tree, 2)}
    calls["inverse_dynamics_f_ext"] = lambda q, qd, qdd: sd.inverse_dynamics(
        tree, q, qd, qdd, f_ext=f_ext, gravity=gravity)
    calls["forward_dynamics_f_ext"] = lambda q, qd, qdd: sd.forward_dynamics(
        tree, q, qd, qdd, f_ext=f_ext, gravity=gravity)
    monkeypatch.setattr(plan.config, "chunk_states", 10 ** 9)
    whole = {name: f(q, qd, qdd) for name, f in calls.items()}
    monkeypatch.setattr(plan.config, "chunk_states", chunk)
    for name, f in calls.items():
        chunked = f(q, qd, qdd)
        assert chunked.shape == whole[name].shape and chunked.dtype == np.float64, name
        np.testing.assert_allclose(chunked, whole[name], rtol=1e-13, atol=1e-13, err_msg=name)


def test_chunking_bounds_the_memory_of_large_batches(monkeypatch, numpy_path):
    model = random_tree(4, n=6)
    N = 20_000
    q, qd, qdd = random_state(model, 4, batch=(N,))
    peaks = {}
    for chunk in (N, 1000):
        monkeypatch.setattr(plan.config, "chunk_states", chunk)
        sd.forward_dynamics(model, q, qd, qdd)  # warm caches outside the measurement
        tracemalloc.start()
        qdd_out = sd.forward_dynamics(model, q, qd, qdd)
        peaks[chunk] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    result_bytes = qdd_out.nbytes
    # one chunk of intermediates plus the result, instead of the intermediates of every state
    assert peaks[1000] < 0.25 * peaks[N], peaks
    assert peaks[1000] < 3 * result_bytes + peaks[N] * 1000 / N * 2, peaks


def test_default_chunk_size_bounds_intermediates():
    small, large = random_tree(0, n=5), random_tree(1, n=150)
    functions = dynamics.FUNCTIONS
    for name in ("inverse_dynamics", "forward_dynamics", "mass_matrix", "jacobian"):
        function = functions[name]
        assert plan.chunk_size(small, function) >= plan.chunk_size(large, function) >= 2048
        for model in (small, large):
            size = plan.chunk_size(model, function)
            per_state = function.bytes_per_body * model.nbodies + \
                16 * model.nv ** 2 * (name == "mass_matrix")
            assert size * per_state <= (256 << 20) or size == 2048
    ID = functions["inverse_dynamics"]
    # CGA keeps more intermediates per body
    assert plan.chunk_size(large, ID, "cga") < plan.chunk_size(large, ID, "spatial")
    assert plan.chunk_size(large, functions["mass_matrix"]) < \
        plan.chunk_size(large, functions["forward_dynamics"])


def test_entries_mode_equals_array_mode():
    """The fast entries mode of the spatial algebra computes exactly what its array mode does."""
    for model in (random_tree(5, n=8), random_tree(6, n=8, floating_base=True)):
        q, qd, qdd = (a.T.copy() for a in random_state(model, 5, batch=(3,)))
        arrays = get_algebra("spatial")
        entries = arrays.entries_mode()
        assert entries is not arrays and entries.name == "spatial"
        a0 = np.array([0.0, 0.0, 9.81, 0.0, 0.0, 0.0])[:, None]
        wrenches = np.random.default_rng(5).normal(size=(model.nbodies, 6, 3))
        for alg_name, run in [
                ("rnea", lambda alg: rnea.rnea(alg, model, q, qd, qdd, alg.twist(a0),
                                               [alg.wrench(w) for w in wrenches])),
                ("aba", lambda alg: aba.aba(alg, model, q, qd, qdd, alg.twist(a0),
                                            [alg.wrench(w) for w in wrenches])),
                ("crba", lambda alg: crba.crba(alg, model, q))]:
            np.testing.assert_allclose(np.asarray(run(entries)), run(arrays), rtol=1e-13,
                                       atol=1e-13, err_msg=alg_name)


def test_pendulum_behind_an_axis_permuting_placement():
    """A point mass on a massless rod, its hinge axis z turned to -y by a placement (roll pi/2,
    whose round-off zeros cos(pi/2) = 6e-17 the algebra makes exact): the mass is at height
    l sin q, so tau = m l^2 qdd + m g l cos q, for one state and for a batch."""
    b = sd.ModelBuilder("pendulum")
    b.add_link("base")
    b.add_link("rod", mass=2.0, com=(0.5, 0.0, 0.0), inertia=np.zeros((3, 3)))
    b.add_joint("hinge", "revolute", parent="base", child="rod", rpy=(np.pi / 2, 0.0, 0.0),
                axis=(0, 0, 1))
    model = b.build()
    q, qdd = np.array([0.3]), np.array([1.7])
    expected = 2.0 * 0.25 * qdd + 2.0 * 9.81 * 0.5 * np.cos(q)
    np.testing.assert_allclose(sd.inverse_dynamics(model, q, [0.0], qdd), expected, rtol=1e-12)
    batch = sd.inverse_dynamics(model, np.stack([q] * 5), np.zeros((5, 1)), np.stack([qdd] * 5))
    np.testing.assert_allclose(batch, np.stack([expected] * 5), rtol=1e-12)


# -- bad inputs ----------------------------------------------------------------------------------
@pytest.fixture(params=["native", "numpy"])
def path(request):
    """Each path of numpy calls in turn (native: compiled programs; numpy: chunked numpy)."""
    previous = plan.use_native(request.param == "native")
    yield request.param
    plan.use_native(previous)


def test_batch_shapes_that_do_not_broadcast_raise(tree, monkeypatch, path):
    monkeypatch.setattr(plan.config, "chunk_states", 2)  # the chunking path reports the same error
    q, qd, qdd = random_state(tree, 6, batch=(4,))
    with pytest.raises(ValueError, match=r"batch shapes do not broadcast.*\(4,\).*\(3,\)"):
        sd.inverse_dynamics(tree, q, qd[:3], qdd)
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., %d\)" % tree.nq):
        sd.forward_dynamics(tree, q[:, :-1], qd, qdd)
    with pytest.raises(ValueError, match=r"f_ext must have shape"):
        sd.inverse_dynamics(tree, q, qd, qdd, f_ext=np.zeros((4, tree.nlinks, 3)))


def test_dtype_policy_on_numpy(tree, path):
    q, qd, qdd = random_state(tree, 7, batch=(3,))
    reference = sd.inverse_dynamics(tree, q, qd, qdd)
    single = sd.inverse_dynamics(tree, q.astype(np.float32), qd.astype(np.float32),
                                 qdd.astype(np.float32))
    assert single.dtype == np.float64  # float32 is promoted, then computed in float64
    np.testing.assert_allclose(single, sd.inverse_dynamics(
        tree, q.astype(np.float32).astype(np.float64), qd.astype(np.float32).astype(np.float64),
        qdd.astype(np.float32).astype(np.float64)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(single, reference, rtol=1e-4, atol=1e-4)
    assert sd.mass_matrix(tree, np.zeros(tree.nq, dtype=int) + tree.neutral.astype(int)).dtype \
        == np.float64
    with pytest.raises(ValueError, match="real numeric"):
        sd.inverse_dynamics(tree, q + 0j, qd, qdd)
    with pytest.raises(ValueError, match="real numeric"):
        sd.mass_matrix(tree, np.array([["a"] * tree.nq]))
