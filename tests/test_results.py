"""Big batch results are made on memory that earlier results gave back (``execution.results``):
the values are the kernel's, a live result (or a view of it) is never handed out again, and
``config.result_pool`` bounds what is kept."""
import gc
import threading
import weakref

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.execution import config, results

N = 5000  # 5,000 UR5 states' FD derivatives: 4.3 MB, past results.MIN_BYTES


@pytest.fixture(scope="module")
def ur5():
    return sd.robots.load("ur5")


def _states(model, seed, n=N):
    rng = np.random.default_rng(seed)
    q = np.stack([sd.random_configuration(model, seed=seed + k) for k in range(n)])
    return q, rng.uniform(-1, 1, (n, model.nv)), rng.uniform(-1, 1, (n, model.nv))


@pytest.fixture(autouse=True)
def _empty_pool():
    gc.collect()
    saved = config.result_pool
    config.result_pool = 0  # lets go of what other tests left
    config.result_pool = saved
    yield
    config.result_pool = saved


def _check_states(model, x, D, rows=(0, 1, 2, N // 2, N - 1)):
    """D's rows equal single-state calls (results too small for the pool) to 1e-12."""
    for k in rows:
        np.testing.assert_allclose(D[k], sd.forward_dynamics_derivatives(model, *(a[k] for a in x)),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("entry", ["public call", "sd.compile"])
def test_a_big_batch_result_reuses_the_memory_of_one_that_is_gone(ur5, entry):
    f = (sd.compile(ur5, "forward_dynamics_derivatives") if entry == "sd.compile" else
         lambda *x: sd.forward_dynamics_derivatives(ur5, *x))
    x1, x2 = _states(ur5, 1), _states(ur5, 2)
    expected = np.empty((N, 6, 18))
    sd.forward_dynamics_derivatives(ur5, *x2, out=expected)
    D1 = f(*x1)
    assert D1.shape == (N, 6, 18) and D1.dtype == np.float64 and D1.flags.c_contiguous
    assert D1.flags.writeable and isinstance(D1.base, results.Lease)
    _check_states(ur5, x1, D1)
    buffer = weakref.ref(D1.base.buffer)
    assert results.kept_bytes() == 0
    del D1
    assert results.kept_bytes() == N * 6 * 18 * 8  # given back
    D2 = f(*x2)
    assert D2.base.buffer is buffer() and results.kept_bytes() == 0  # taken again
    np.testing.assert_array_equal(D2, expected)  # every entry written: nothing of D1 left
    _check_states(ur5, x2, D2)


def test_a_live_result_or_view_is_never_handed_out_again(ur5):
    x1, x2 = _states(ur5, 3), _states(ur5, 4)
    D1 = sd.forward_dynamics_derivatives(ur5, *x1)
    D2 = sd.forward_dynamics_derivatives(ur5, *x2)
    assert not np.shares_memory(D1, D2)
    view, copy = D1[7, :, 12:], D1[7, :, 12:].copy()
    parts = sd.dynamics_derivatives(ur5, *x1)  # three views of one result
    du, du_copy = parts.du, parts.du.copy()
    del D1, parts
    assert results.kept_bytes() == 0  # the views hold their results' memory
    D3 = sd.forward_dynamics_derivatives(ur5, *x2)
    assert not np.shares_memory(D3, view) and not np.shares_memory(D3, du)
    np.testing.assert_array_equal(view, copy)
    np.testing.assert_array_equal(du, du_copy)
    np.testing.assert_array_equal(D3, D2)
    del view
    assert results.kept_bytes() == D2.nbytes  # the last view of D1 gone


def test_the_pool_keeps_at_most_its_setting(ur5):
    x = _states(ur5, 5)
    nbytes = N * 6 * 18 * 8
    config.result_pool = 2 * nbytes + 100
    D = [sd.forward_dynamics_derivatives(ur5, *x) for _ in range(3)]
    D = None  # three results given back: the oldest goes
    assert D is None and results.kept_bytes() == 2 * nbytes
    config.result_pool = nbytes  # lowering it lets go at once
    assert results.kept_bytes() == nbytes
    config.result_pool = nbytes - 1  # a result bigger than the pool: never kept
    assert results.kept_bytes() == 0
    D = sd.forward_dynamics_derivatives(ur5, *x)
    assert not isinstance(D.base, results.Lease)
    del D
    assert results.kept_bytes() == 0
    config.result_pool = 0
    assert isinstance(results.fresh((N, 6, 18)), np.ndarray) and results.kept_bytes() == 0
    for bad in (-1, 2.5, True, "1G", None):
        with pytest.raises(ValueError, match=r"config\.result_pool must be a whole number of "
                                             r"bytes, 0 or more"):
            config.result_pool = bad
    assert config.result_pool == 0  # nothing half-applied


def test_results_made_and_dropped_in_threads_are_each_their_own(ur5):
    x = [_states(ur5, 10 + k, 1200) for k in range(4)]  # 1.0 MB each: lower the threshold
    expected = [sd.forward_dynamics_derivatives(ur5, *xk) for xk in x]
    failures = []

    def work(k):
        try:
            for i in range(15):
                D = results.fresh((1200, 6, 18))
                sd.forward_dynamics_derivatives(ur5, *x[k], out=D)
                if not np.array_equal(D, expected[k]):
                    failures.append((k, i))
                del D
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append(error)

    saved = results.MIN_BYTES
    results.MIN_BYTES = 1 << 20
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        results.MIN_BYTES = saved
    assert failures == []
    assert results.kept_bytes() <= 4 * 1200 * 6 * 18 * 8
