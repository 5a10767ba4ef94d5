"""sd.rollouts on Ray: a real two-node cluster on this machine (ray.cluster_utils.Cluster, one
CPU per node, listening on 127.0.0.1 only), the same bits as in one process, a killed actor
replaced; a local Ray the library starts listens on 127.0.0.1 only."""
import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import screwdyn as sd
from rollout_helpers import (DT, FAST, T_FINAL, NaNWhen, datasets_on_two_engines, exposed,
                             pendulum, ray_listening_sockets, states)

ray = pytest.importorskip("ray")
pytest.importorskip("pyarrow")
from ray.cluster_utils import Cluster  # noqa: E402

from screwdyn.rollouts import RayEngine  # noqa: E402
from screwdyn.rollouts.ray_engine import LOOPBACK, connect_ray, loopback_only  # noqa: E402
from test_rollouts import assert_ctrl_c_records_every_chunk_sent, assert_same  # noqa: E402

TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def cluster():
    """Two Ray nodes of one CPU each, started once for the module, both on 127.0.0.1 only (as
    the library starts Ray); the actors import the test helpers, so this folder goes on their
    PYTHONPATH."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([TESTS] + sys.path)
    if ray.is_initialized():
        ray.shutdown()
    local = {"num_cpus": 1, "node_ip_address": LOOPBACK, "dashboard_host": LOOPBACK}
    with loopback_only(ray):
        nodes = Cluster(initialize_head=True, head_node_args=local)
        nodes.add_node(**local)
    try:
        connect_ray(ray, nodes.address)  # in the loopback mode it was started in
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def engine(cluster):
    with RayEngine() as eng:  # the connection above: one actor per CPU of the cluster
        yield eng


@pytest.fixture(scope="module")
def model():
    return pendulum()


def test_ray_engine_by_name_uses_the_connection(model, cluster):
    """First: its actors need the cluster's CPUs, which the module's engine holds later."""
    q0 = states(16)
    serial = sd.rollouts(model, q0, None, None, T_FINAL, DT, **FAST)
    named = sd.rollouts(model, q0, None, None, T_FINAL, DT, engine="ray", **FAST)
    assert_same(serial, named)
    assert named.meta["run"]["workers"] == 2 and ray.is_initialized()


def test_ray_equals_serial_bit_for_bit_on_two_nodes(model, engine):
    assert engine.workers == 2
    q0 = states(40, marked=(5, 33))
    serial = sd.rollouts(model, q0, None, NaNWhen(), T_FINAL, DT, **FAST)
    on_ray = sd.rollouts(model, q0, None, NaNWhen(), T_FINAL, DT, engine=engine, **FAST)
    assert_same(serial, on_ray)
    assert list(on_ray.failed) == [5, 33]
    where = engine.where()
    assert len({w["node"] for w in where.values()}) == 2, where  # one actor on each node
    assert ray.is_initialized()  # an existing connection is used, not closed


def test_ray_dataset_shards_equal_serial_shards(model, engine, tmp_path):
    serial, on_ray = datasets_on_two_engines(model, engine, tmp_path, n=24, seed=9)
    assert [e["sha256"] for e in serial.entries] == [e["sha256"] for e in on_ray.entries]
    assert on_ray.verify() == {} and on_ray.complete


def test_a_killed_actor_is_replaced_and_its_chunks_run_again(model, engine, tmp_path):
    q0 = states(48)
    serial = sd.rollouts(model, q0, None, None, T_FINAL, DT, **FAST)
    killed = []

    def kill_an_actor(done, total):
        if not killed:  # after the first chunk: an actor holding chunks of this job dies
            killed.append(engine.actors[0])
            ray.kill(engine.actors[0])

    replaced = engine.replaced
    ds = sd.rollouts(model, q0, None, None, T_FINAL, DT, engine=engine, out=tmp_path / "ds",
                     progress=kill_an_actor, **FAST)
    assert killed and engine.replaced == replaced + 1 and ds.run["workers_replaced"] == 1
    assert killed[0] not in engine.actors
    chunks = [e["chunk"] for e in ds.entries]
    assert chunks == list(range(6))  # nothing lost, nothing twice
    assert_same(ds.arrays(), serial)


def test_ctrl_c_records_the_chunks_done_on_ray(model, engine, tmp_path):
    """Ctrl-C while the other chunks are done on the actors (their shards written): they are
    recorded before the job stops, and the next run skips them all."""
    assert_ctrl_c_records_every_chunk_sent(model, tmp_path / "ds", engine=engine)


def test_an_unpicklable_controller_for_ray(model, engine):
    class Locked:
        def __init__(self):
            self.lock = threading.Lock()

        def __call__(self, t, q, qd):
            return 0 * qd

    with pytest.raises(ValueError, match="engine='ray' .* cannot be pickled"):
        sd.rollouts(model, states(8), None, Locked(), T_FINAL, DT, engine=engine, **FAST)


def test_no_cpu_left_for_another_engine_is_an_error(model, engine):
    """With every CPU held by the open engine's actors, new actors would wait forever."""
    with pytest.raises(RuntimeError, match="all held by the actors of other open RayEngines"):
        sd.rollouts(model, states(8), None, None, T_FINAL, DT, engine="ray", **FAST)


def test_another_cluster_address_is_refused(model, engine):
    with pytest.raises(ValueError, match="connected to the Ray cluster at .* names another"):
        sd.rollouts(model, states(8), None, None, T_FINAL, DT, engine="ray",
                    address="10.255.255.1:6379", **FAST)


def test_ray_worker_errors_reach_the_caller(model, engine):
    """A broken controller stops the job with its own error, raised where sd.rollouts runs."""
    with pytest.raises(sd.RolloutError, match="every rollout of chunk"):
        sd.rollouts(model, states(8), None, NaNWhen(limit=-10.0, after=0.0), T_FINAL, DT,
                    engine=engine, **FAST)
    result = sd.rollouts(model, states(8), None, None, T_FINAL, DT, engine=engine, **FAST)
    assert result.ok.all()  # the engine goes on after a failed job
    assert np.isfinite(result.q).all()


# ============================================================================================
# Every Ray started here listens on the loopback address only
# ============================================================================================
def test_the_test_cluster_listens_on_loopback_only(cluster):
    sockets = ray_listening_sockets()
    assert any(port == int(cluster.address.rsplit(":", 1)[1]) for _, port, _ in sockets)
    assert cluster.address.startswith(f"{LOOPBACK}:")
    assert exposed(sockets) == [], sockets


LOCAL_RAYS = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, {tests!r})
    import ray
    from rollout_helpers import ray_listening_sockets
    from screwdyn.rollouts import RayEngine
    from screwdyn.composition.distributed import RayEngine as SubsystemEngine

    found = {{}}
    with RayEngine(1):  # sd.rollouts(engine="ray") without a cluster: a local Ray
        found["rollouts"] = [ray.get_runtime_context().gcs_address, ray_listening_sockets()]
    assert not ray.is_initialized()
    SubsystemEngine()  # DistributedAssembly(..., "ray") without a cluster: a local Ray
    found["composition"] = [ray.get_runtime_context().gcs_address, ray_listening_sockets()]
    ray.shutdown()
    found["environment"] = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    print(json.dumps(found))
""")


@pytest.mark.slow  # two local Rays started in a fresh process
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net/tcp")
def test_a_local_ray_the_library_starts_listens_on_loopback_only():
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    run = subprocess.run([sys.executable, "-c", LOCAL_RAYS.format(tests=TESTS)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    for engine in ("rollouts", "composition"):
        address, sockets = found[engine]
        assert address.startswith(f"{LOOPBACK}:"), (engine, address)
        assert len(sockets) >= 3, (engine, sockets)  # the GCS, a raylet, a worker at least
        assert exposed([tuple(s) for s in sockets]) == [], (engine, sockets)
    assert found["environment"] is None  # Ray's setting is restored after it starts
