"""The validation layer at the public boundary (``screwdyn.validation``, issue 17): arguments
named in every error, empty batches, broadcasts chunked without being materialised, results too
large for the machine refused before any work, float dtypes, saves that round-trip."""
import tracemalloc

import numpy as np
import pytest

import screwdyn as sd
from screwdyn import validation
from screwdyn.execution import plan
from conftest import random_state, random_tree


@pytest.fixture(scope="module")
def panda():
    return sd.robots.load("panda")


# -- state_array -------------------------------------------------------------------------------
@pytest.mark.parametrize("value, message", [
    (None, r"q must be an array of shape \(\.\.\., 9\) \(configuration, nq\), got None"),
    ("0.1", r"q must be a real numeric array of shape \(\.\.\., 9\).*got the string '0.1'"),
    ({"a": 1}, r"q must be a real numeric array, got dtype object"),
    ([[0.0], [0.0, 1.0]], r"q must be a real numeric array of shape \(\.\.\., 9\)"),
    (np.zeros(9) + 1j, r"q must be a real numeric array, got dtype complex128"),
    (np.zeros((2, 8)), r"q must have shape \(\.\.\., 9\) \(configuration, nq\), got shape "
                       r"\(2, 8\)"),
])
def test_state_array_names_the_argument_and_the_expected_shape(value, message):
    with pytest.raises(ValueError, match=message):
        validation.state_array("q", value, 9, "configuration, nq")


def test_state_array_keeps_the_dtype_policy():
    assert validation.state_array("q", np.zeros(3, np.float32), 3, "").dtype == np.float64
    assert validation.state_array("q", [1, 2, 3], 3, "").dtype == np.float64
    a = np.zeros((0, 3))
    assert validation.state_array("q", a, 3, "").shape == (0, 3)
    f = validation.state_array("f_ext", np.zeros((2, 4, 6)), (4, 6), "")
    assert f.shape == (2, 4, 6)


@pytest.mark.parametrize("name", ["q", "qd", "qdd"])
def test_every_public_function_refuses_a_missing_required_array_by_name(panda, name):
    args = {"q": panda.neutral, "qd": np.zeros(9), "qdd": np.zeros(9)}
    args[name] = None
    with pytest.raises(ValueError, match=rf"{name} must be an array of shape \(\.\.\., 9\)"):
        sd.inverse_dynamics(panda, **args)
    with pytest.raises(ValueError, match=r"qd must be an array of shape"):
        sd.bias_forces(panda, panda.neutral, None)
    with pytest.raises(ValueError, match=r"v must be an array of shape"):
        sd.integrate(panda, panda.neutral, None)


# -- empty batches -------------------------------------------------------------------------------
EMPTY = {  # function: (arguments, per-state result shape)
    "inverse_dynamics": (3, lambda m: (m.nv,)), "forward_dynamics": (3, lambda m: (m.nv,)),
    "mass_matrix": (1, lambda m: (m.nv, m.nv)), "bias_forces": (2, lambda m: (m.nv,)),
    "gravity_torques": (1, lambda m: (m.nv,)), "coriolis_matrix": (2, lambda m: (m.nv, m.nv)),
    "forward_kinematics": (1, lambda m: (m.nlinks, 4, 4)), "kinetic_energy": (2, lambda m: ()),
    "potential_energy": (1, lambda m: ()), "center_of_mass": (1, lambda m: (3,)),
    "link_velocities": (2, lambda m: (m.nlinks, 6)),
}


@pytest.mark.parametrize("name", sorted(EMPTY) + ["jacobian"])
def test_an_empty_batch_gives_an_empty_result(panda, name):
    count, core = EMPTY.get(name, (1, lambda m: (6, m.nv)))
    args = [np.zeros((0, 2, 9))] * count + (["panda_hand"] if name == "jacobian" else [])
    result = getattr(sd, name)(panda, *args)
    assert result.shape == (0, 2) + core(panda) and result.dtype == np.float64


# -- broadcasting never materialised -------------------------------------------------------------
def test_broadcast_inputs_are_chunked_without_materialising_them(monkeypatch):
    """q (200, 1, nq) against qd (200, nv): 40,000 states. Each input, broadcast, would take
    as much memory as the result; the peak stays near the result plus one chunk."""
    model = random_tree(2, n=4)
    monkeypatch.setattr(plan.config, "chunk_states", 256)
    q, qd, qdd = random_state(model, 3, batch=(200,))

    def peak_of(call):
        tracemalloc.start()
        try:
            result = call()
            return result, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    # compiled (or loaded) before, with its optimised code: the 40,000 states would queue it,
    # and the background compilation's memory would be traced
    sd.compile(model, "inverse_dynamics")
    sd.inverse_dynamics(model, q[:256], qd[:256], qdd[:256])
    _, chunk = peak_of(lambda: sd.inverse_dynamics(model, q[:256], qd[:256], qdd[:256]))
    tau, peak = peak_of(lambda: sd.inverse_dynamics(model, q[:, None, :], qd, qdd[0]))
    assert tau.shape == (200, 200, model.nv)
    inputs = 200 * 200 * (model.nq + model.nv) * 8  # q and qd broadcast to the full batch
    gathered = 256 * (model.nq + 2 * model.nv) * 8  # one chunk of the inputs, gathered
    # the result, the intermediates of two chunks and a few gathered chunks of inputs at most:
    # far less than the broadcast inputs
    bound = tau.nbytes + 2 * chunk + 8 * gathered
    assert peak < bound < tau.nbytes + inputs / 2, (peak, tau.nbytes, chunk, gathered)
    for i, j in ((0, 0), (17, 193), (199, 5)):
        np.testing.assert_allclose(tau[i, j], sd.inverse_dynamics(model, q[i], qd[j], qdd[0]),
                                   rtol=1e-12, atol=1e-12)


def test_chunks_walk_the_broadcast_batch_in_order():
    a = np.arange(6.0).reshape(3, 1, 2)  # batch (3, 1), core 2
    b = np.arange(10.0).reshape(5, 2)  # batch (5,), core 2
    c = np.arange(2.0)  # no batch
    arrays = {"a": (a, 1), "b": (b, 1), "c": (c, 1)}
    batch = validation.batch_shape(arrays)
    assert batch == (3, 5)
    full_a = np.broadcast_to(a, (3, 5, 2)).reshape(15, 2)
    full_b = np.broadcast_to(b, (3, 5, 2)).reshape(15, 2)
    seen = 0
    for start, stop, chunk in validation.chunks(arrays, batch, 4):
        assert stop - start <= 4 and start == seen
        np.testing.assert_array_equal(chunk["a"], full_a[start:stop])
        np.testing.assert_array_equal(chunk["b"], full_b[start:stop])
        assert chunk["c"] is c
        seen = stop
    assert seen == 15


def test_batch_shapes_that_do_not_broadcast_name_every_argument():
    with pytest.raises(ValueError, match=r"batch shapes do not broadcast \(q: \(4,\), qd: \(3,\)"):
        validation.batch_shape({"q": (np.zeros((4, 2)), 1), "qd": (np.zeros((3, 2)), 1)})


def test_a_result_too_large_for_the_machine_is_refused_before_any_work(panda, monkeypatch):
    calls = []
    original = validation.chunks
    monkeypatch.setattr(validation, "chunks", lambda *a: calls.append(1) or original(*a))
    q = np.broadcast_to(panda.neutral, (100_000, 1, 9))
    qd = np.zeros((100_000, 9))
    with pytest.raises(ValueError, match=r"the result of inverse_dynamics, shape \(100000, "
                                         r"100000, 9\) float64, would take 720,000,000,000 "
                                         r"bytes"):
        sd.inverse_dynamics(panda, q, qd, np.zeros(9))
    assert not calls  # refused from the shapes alone: no chunk evaluated
    monkeypatch.setattr(validation, "memory_bytes", lambda: 1000)
    with pytest.raises(ValueError, match=r"would take 8,000 bytes.*split the batch"):
        validation.check_fits(8000, "the result")
    validation.check_fits(400, "the result")


# -- saves that round-trip -----------------------------------------------------------------------
def test_joint_states_with_repeated_names_are_refused(panda):
    with pytest.raises(ValueError, match=r"joint names repeated: \['panda_joint1'\]"):
        panda.from_joint_states(["panda_joint1", "panda_joint1"], position=[0.1, 0.2])


def test_a_dh_table_save_is_atomic(tmp_path, monkeypatch):
    """A save that fails half-way leaves the previous file whole and no temporary file."""
    model = sd.robots.load("puma560")
    path = tmp_path / "puma.csv"
    sd.save_dh_table(path, model)
    before = path.read_bytes()
    from screwdyn.model import dh

    original = dh.atomic_write

    def interrupted(path, write, binary):
        def write_then_fail(f):
            write(f)
            raise KeyboardInterrupt
        return original(path, write_then_fail, binary)

    monkeypatch.setattr(dh, "atomic_write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sd.save_dh_table(path, model)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["puma.csv"]
