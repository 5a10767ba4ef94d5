"""The Model: names, layout, named joint values, hashing, the builder's checks."""
import numpy as np
import pytest

import screwdyn as sd
from conftest import random_tree


def arm(floating_base=False):
    b = sd.ModelBuilder("arm")
    b.add_link("base", mass=2.0, inertia=np.eye(3) * 0.1)
    b.add_link("upper", mass=1.0, com=(0, 0, 0.2), inertia=np.eye(3) * 0.01)
    b.add_link("sensor", mass=0.5, com=(0.1, 0, 0))
    b.add_link("slider", mass=0.3, inertia=np.eye(3) * 0.001)
    b.add_joint("shoulder", "revolute", "base", "upper", axis=(0, 1, 0))
    b.add_joint("mount", "fixed", "upper", "sensor", xyz=(0, 0, 0.4))
    b.add_joint("slide", "prismatic", "sensor", "slider", axis=(0, 0, 2))
    return b.build(floating_base=floating_base)


def test_names_sizes_and_layout():
    model = arm()
    assert (model.nq, model.nv, model.nbodies, model.nlinks) == (2, 2, 2, 4)
    assert model.joint_names == ("shoulder", "slide")
    assert model.link_names == ("base", "upper", "sensor", "slider")
    assert model.bodies[1].joint_model.axis == (0.0, 0.0, 1.0)  # normalised
    assert model.bodies[0].mass == pytest.approx(1.5)  # the sensor is merged into "upper"
    floating = arm(floating_base=True)
    assert floating.joint_names[0] == "root_joint" and floating.has_floating_base
    assert (floating.nq, floating.nv) == (9, 8)
    np.testing.assert_array_equal(floating.neutral[:7], [0, 0, 0, 0, 0, 0, 1])
    assert floating.total_mass == pytest.approx(3.8)


def test_merged_fixed_link_keeps_inertia_about_the_body_frame():
    merged = arm()
    b = sd.ModelBuilder("same")  # the same arm with the sensor's mass written into "upper"
    b.add_link("base")
    com = (1.0 * np.array([0, 0, 0.2]) + 0.5 * np.array([0.1, 0, 0.4])) / 1.5
    d1, d2 = np.array([0, 0, 0.2]) - com, np.array([0.1, 0, 0.4]) - com
    inertia = (np.eye(3) * 0.01 + 1.0 * (d1 @ d1 * np.eye(3) - np.outer(d1, d1))
               + 0.5 * (d2 @ d2 * np.eye(3) - np.outer(d2, d2)))
    b.add_link("upper", mass=1.5, com=com, inertia=inertia)
    b.add_link("slider", mass=0.3, inertia=np.eye(3) * 0.001)
    b.add_joint("shoulder", "revolute", "base", "upper", axis=(0, 1, 0))
    b.add_joint("slide", "prismatic", "upper", "slider", xyz=(0, 0, 0.4), axis=(0, 0, 1))
    written = b.build()
    q, qd, qdd = [0.3, 0.1], [1.0, -0.5], [0.2, 0.7]
    np.testing.assert_allclose(sd.inverse_dynamics(merged, q, qd, qdd),
                               sd.inverse_dynamics(written, q, qd, qdd), atol=1e-12)


def test_models_are_frozen_and_hashable():
    a, b = arm(), arm()
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    with pytest.raises(AttributeError):
        a.name = "other"
    assert a != arm(floating_base=True)
    assert "shoulder" in a.summary() and "sensor" in a.summary() and "arm" in repr(a)


def test_named_joint_values_and_joint_states():
    model = arm(floating_base=True)
    q = model.q_from_dict({"slide": 0.25, "root_joint": [1, 2, 3, 0, 0, 0, 1]})
    np.testing.assert_array_equal(q, [1, 2, 3, 0, 0, 0, 1, 0, 0.25])
    assert model.to_dict(q)["slide"] == 0.25
    v = model.v_from_dict({"shoulder": -1.0})
    assert v.shape == (8,) and v[6] == -1.0
    q, qd, tau = model.from_joint_states(["slide", "shoulder"], position=[0.1, 0.2],
                                         velocity=[1.0, 2.0], effort=[])
    assert q[7:].tolist() == [0.2, 0.1] and qd[6:].tolist() == [2.0, 1.0] and not tau.any()
    with pytest.raises(sd.ModelError, match="no moving joint named 'elbow'"):
        model.q_from_dict({"elbow": 1.0})
    with pytest.raises(ValueError, match="joint 'root_joint' takes 7 q values"):
        model.q_from_dict({"root_joint": [0, 0, 0]})
    with pytest.raises(ValueError, match="2 names but 1 values"):
        model.from_joint_states(["slide", "shoulder"], position=[0.1])
    with pytest.raises(ValueError, match=r"expected shape \(9,\) or \(8,\)"):
        model.to_dict(np.zeros(3))


def test_builder_rejects_bad_arguments():
    b = sd.ModelBuilder()
    b.add_link("a")
    with pytest.raises(sd.ModelError, match="link 'b': negative mass"):
        b.add_link("b", mass=-1)
    with pytest.raises(sd.ModelError, match="inertia matrix is not symmetric"):
        b.add_link("c", inertia=[[1, 2, 0], [0, 1, 0], [0, 0, 1]])
    with pytest.raises(sd.ModelError, match="not a rotation matrix"):
        b.add_link("d", inertia=np.eye(3), inertia_rotation=np.eye(3) * 2)
    with pytest.raises(sd.ModelError, match="unknown joint type 'universal'"):
        b.add_joint("j", "universal", "a", "a")
    with pytest.raises(sd.ModelError, match="centre of mass must have shape"):
        b.add_link("e", com=(0, 0))
    with pytest.raises(sd.ModelError, match="negative armature"):
        b.add_joint("j", "revolute", "a", "a", armature=-1)
    b.add_link("b")
    b.add_joint("j", "revolute", "a", "b")
    with pytest.raises(ValueError, match="joint_order must be"):
        b.build(joint_order="alphabetical")
    with pytest.raises(sd.ModelError, match="armature and damping must be finite"):
        b.build().with_joint_parameters(damping=-1.0)


def test_random_configuration_has_unit_quaternions():
    model = random_tree(1, floating_base=True)
    q = sd.random_configuration(model, 5)
    assert q.shape == (model.nq,) and np.isclose(np.linalg.norm(q[3:7]), 1.0)
