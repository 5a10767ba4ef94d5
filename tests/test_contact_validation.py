"""The physical validations of ground contact (slow tier: ``pytest -m slow``; CI runs them): a
sliding box, a box on a slope, a dropped sphere against closed forms, the same scenes against
MuJoCo, and ANYmal standing and falling. The scenes are those of examples/contact_validation.py
(which also draws the figures of docs/contact.md)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
import contact_validation as scenes  # noqa: E402

pytestmark = pytest.mark.slow
G = 9.81


@pytest.fixture(scope="module")
def slide():
    pytest.importorskip("mujoco")
    return scenes.box_slide()


@pytest.fixture(scope="module")
def drop():
    pytest.importorskip("mujoco")
    return scenes.sphere_drop()


def test_sliding_box_stops_where_and_when_coulomb_says(slide):
    traj, distance, stop = slide
    mu, v = scenes.MU, scenes.SLIDE_SPEED
    assert distance == pytest.approx(v ** 2 / (2 * mu * G), rel=0.02)  # 0.408 m
    assert stop == pytest.approx(v / (mu * G), rel=0.02)  # 0.408 s
    assert np.abs(traj.qd[-1, :3]).max() < 0.02  # at rest (ringing on its stick springs)
    assert traj.energy_drift() < 1e-3
    # the kinetic energy went into friction: dissipated = 1/2 m v^2 (to the elastic rest)
    assert traj.dissipated()[-1] == pytest.approx(0.5 * v ** 2, rel=1e-3)


def test_box_on_a_slope_sticks_below_and_slides_above_the_friction_angle():
    pytest.importorskip("mujoco")
    stick, along = scenes.box_on_slope(20)  # tan 20 deg = 0.36 < 0.5
    settled = stick.t >= 1.0
    assert np.ptp(along[settled]) < 1e-3  # creep over the last 4 s under 1 mm ...
    assert abs(along[-1] - along[settled][0]) < 1e-5  # ... in fact none
    slip, along = scenes.box_on_slope(30, duration=3.0)  # tan 30 deg = 0.58 > 0.5
    a = scenes.sliding_acceleration(slip, along)
    expected = G * (np.sin(np.radians(30)) - scenes.MU * np.cos(np.radians(30)))
    assert a == pytest.approx(expected, rel=0.02)


def test_dropped_sphere_bounces_lower_each_time_and_rests_at_its_radius(drop):
    traj, apex = drop
    assert len(apex) >= 3 and np.all(np.diff(apex) < 0)
    penetration = 0.1 - traj.q[-1, 2]
    assert 0 < penetration < 1e-3
    assert np.abs(traj.qd[-1]).max() < 1e-3
    assert traj.energy_drift() < 1e-3  # T + V + elastic + dissipated constant
    assert traj.dissipated()[-1] == pytest.approx(G * (1.0 - traj.q[-1, 2]), rel=1e-3)


def test_drop_and_slide_agree_with_mujoco(slide, drop):
    height = scenes.mujoco_rollout(scenes.scene_file(scenes.SPHERE), np.zeros(6), 3.0)
    assert drop[0].q[-1, 2] == pytest.approx(height[-1, 2], rel=0.02)
    qpos = scenes.mujoco_rollout(scenes.scene_file(scenes.BOX),
                                 [scenes.SLIDE_SPEED, 0, 0, 0, 0, 0], 1.0)
    assert slide[1] == pytest.approx(qpos[-1, 0] - qpos[0, 0], rel=0.02)


def test_anymal_stands_under_pd_and_falls_and_settles_without_it():
    from conftest import erd_robots_dir

    if erd_robots_dir() is None:
        pytest.skip("example-robot-data is not installed")
    stand, fall = scenes.anymal_stand_and_fall()
    z = stand.q[:, 2]
    assert np.abs(z - z[0]).max() < 0.01  # base height within 1 cm over 5 s
    assert np.abs(stand.qd[-1]).max() < 1e-3
    # off: it sinks onto its body and comes to rest, without exploding
    assert fall.q[-1, 2] < z[0] - 0.1
    assert np.abs(fall.qd).max() < 50 and np.abs(fall.qd[-1]).max() < 0.05
    assert fall.dissipated()[-1] > 0.9 * (fall.potential[0] - fall.potential[-1])


def test_compiled_contact_rollouts_agree_in_every_algebra():
    """The sphere's first bounce, compiled, with the forward dynamics and the contact
    kinematics in conformal geometric algebra and in dual quaternions."""
    pytest.importorskip("mujoco")
    import screwdyn as sd

    model = scenes.sphere()
    runs = {a: sd.simulate(model, [0, 0, 0.15, 1, 0, 0, 0], [0.3, 0, -1, 0, 2, 0], None, 0.1,
                           1e-3, contact=sd.GroundContact(mu=scenes.MU), algebra=a)
            for a in ("spatial", "cga", "dq")}
    compiled = "native" if sd.execution.plan.native_enabled() else "jax"  # what auto takes
    assert all(r.meta["backend"] == compiled for r in runs.values())
    assert runs["spatial"].q[:, 2].min() < 0.1  # it bounced
    for a in ("cga", "dq"):
        np.testing.assert_allclose(runs[a].q, runs["spatial"].q, atol=1e-11)
