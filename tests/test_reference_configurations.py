"""Named configurations of a model's file (``Model.configurations``, read as
``reference_configurations`` and ``q0``): MJCF's qpos0 and keyframes (tests/test_mjcf.py checks
them against MuJoCo); other sources have none and start at ``neutral``; variants of a model with
the same q layout keep them, those with another layout map them (coupled trees, split parts) or
drop them (flat assemblies)."""
import numpy as np
import pytest

import screwdyn as sd
from screwdyn.composition.split import split_model

mujoco = pytest.importorskip("mujoco")

ARM = """<mujoco model="arm"><compiler angle="radian"/><worldbody>
  <body name="upper" pos="0 0 0.5"><joint name="shoulder" axis="0 1 0" ref="0.3"/>
    <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
    <body name="lower" pos="0.3 0 0"><joint name="elbow" axis="0 1 0" ref="-0.2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.025"/>
      <body name="hand" pos="0.3 0 0"><joint name="wrist" type="ball"/>
        <geom type="sphere" size="0.04"/></body></body></body>
</worldbody>
<keyframe><key name="home" qpos="0.1 0.2 0.7071068 0 0.7071068 0"/></keyframe></mujoco>"""

MIMIC = """<robot name="mimic">
  <link name="base"/>
  <link name="a"><inertial><mass value="2"/>
    <inertia ixx="0.02" iyy="0.03" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="b"><inertial><origin xyz="0 0.1 0.1"/><mass value="1"/>
    <inertia ixx="0.01" iyy="0.01" izz="0.005" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="c"><inertial><origin xyz="0 0 0.1"/><mass value="0.5"/>
    <inertia ixx="0.002" iyy="0.002" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
    <limit lower="-2" upper="2" effort="50" velocity="3"/></joint>
  <joint name="j2" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0 0 0.3"/>
    <axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="30" velocity="3"/></joint>
  <joint name="j3" type="revolute"><parent link="b"/><child link="c"/><origin xyz="0 0.2 0.2"/>
    <axis xyz="1 0 0"/><limit lower="-4" upper="4" effort="30" velocity="3"/>
    <mimic joint="j2" multiplier="-1.5" offset="0.3"/></joint>
</robot>"""


def _arm():
    m = mujoco.MjModel.from_xml_string(ARM)
    return sd.from_mujoco(m), m


def _same_configurations(a, b):
    assert list(a.reference_configurations) == list(b.reference_configurations)
    for name, q in a.reference_configurations.items():
        assert np.array_equal(q, b.reference_configurations[name]), name


def test_models_without_a_file_configuration_start_at_neutral():
    """URDF files, DH tables and ModelBuilder models name no configuration: q0 is neutral
    (identity quaternions for a free joint)."""
    urdf = sd.load_urdf(MIMIC)
    floating = sd.load_urdf(MIMIC, floating_base=True)
    dh = sd.robots.load("puma560")
    builder = sd.ModelBuilder("pendulum")
    builder.add_link("base")
    builder.add_link("pole", mass=1.0, com=(0, 0, -0.5), inertia=np.eye(3) * 0.01)
    builder.add_joint("hinge", "revolute", "base", "pole", axis=(0, 1, 0))
    built = builder.build(floating_base=True)
    for model in (urdf, floating, dh, built, sd.robots.load("panda")):
        assert model.configurations == () and dict(model.reference_configurations) == {}
        assert np.array_equal(model.q0, model.neutral) and model.q0.shape == (model.nq,)
        assert not model.q0.flags.writeable
    assert built.q0.tolist() == [0, 0, 0, 0, 0, 0, 1, 0]  # Pinocchio's free flyer: x y z w


def test_variants_with_the_same_layout_keep_the_configurations():
    """with_constraints, with_inertial_parameters (numbers and traced), with_gravity,
    with_joint_parameters, nominal: the same qpos0 and keyframes; equality and hash ignore
    them."""
    model, m = _arm()
    assert model.q0.tolist() == m.qpos0.tolist() == [0.3, -0.2, 1.0, 0.0, 0.0, 0.0]
    assert list(model.reference_configurations) == ["qpos0", "home"]
    from screwdyn.constraints import Coupling

    variants = [model.with_constraints(Coupling("elbow", "shoulder", name="tie")),
                model.with_inertial_parameters(model.inertial_parameters() * 1.1),
                model.with_gravity((0.0, 0.0, -1.62)),
                model.with_joint_parameters(damping=0.1, armature=0.01),
                model.nominal, model.tree]
    jax = pytest.importorskip("jax")

    @jax.jit
    def traced_q0(pi):
        traced = model.with_inertial_parameters(pi)
        assert traced.configurations == model.configurations
        return traced.q0 + 0 * traced.total_mass

    assert np.allclose(traced_q0(model.inertial_parameters()), model.q0, rtol=1e-6)  # x64 off
    for variant in variants:
        _same_configurations(variant, model)
    bare = sd.from_mujoco(mujoco.MjModel.from_xml_string(ARM.split("<keyframe>")[0]
                                                         + "</mujoco>"))
    assert bare == model and hash(bare) == hash(model)  # the keyframe changes no dynamics
    assert list(bare.reference_configurations) == ["qpos0"]


def test_with_configurations_checks_and_replaces():
    model, _ = _arm()
    home = model.reference_configurations["home"]
    moved = model.with_configurations(qpos0=home, lifted=np.zeros(model.nq) + [0, 0, 1, 0, 0, 0])
    assert np.array_equal(moved.q0, home) and list(moved.reference_configurations) == [
        "qpos0", "home", "lifted"]
    assert np.array_equal(model.q0, [0.3, -0.2, 1, 0, 0, 0])  # the original is unchanged
    with pytest.raises(ValueError, match="'short'.*6 finite numbers"):
        model.with_configurations(short=[0.0, 1.0])
    with pytest.raises(ValueError, match="'bad'"):
        model.with_configurations({"bad": [np.nan] * 6})


def test_a_coupled_tree_and_split_parts_map_them_a_flat_assembly_drops_them():
    """The tree of a coupled model holds q_mimic = multiplier q_source + offset (its links
    where the coupled model's are); a split model's parts hold their joints' values; the flat
    model of an assembly (another layout) holds none."""
    coupled = sd.load_urdf(MIMIC, mimic="couple").with_configurations(qpos0=[0.4, -0.7])
    tree = coupled.tree
    assert tree.q0.tolist() == pytest.approx([0.4, -0.7, -1.5 * -0.7 + 0.3], abs=1e-15)
    assert np.allclose(sd.forward_kinematics(coupled, coupled.q0),
                       sd.forward_kinematics(tree, tree.q0), atol=1e-14)
    model, _ = _arm()
    assembly = split_model(model, {"forearm": "elbow"})
    for s in assembly.models:
        assert s.model.nq < model.nq
        for name, q in model.reference_configurations.items():
            part = s.model.reference_configurations[name]
            assert part.shape == (s.model.nq,)
            expected = model.to_dict(q)
            for joint, value in s.model.to_dict(part).items():
                assert np.array_equal(value, expected[joint]), (name, joint)
    flat = assembly.to_model()
    assert flat.configurations == () and np.array_equal(flat.q0, flat.neutral)
    assert flat.q0.shape == (model.nq,)


def test_a_configuration_that_is_not_finite_names_the_joint():
    """A free body at a NaN position (MuJoCo compiles it; its qpos0 is NaN) and a keyframe
    with an infinite qpos: ModelError naming the keyframe or qpos0 and the joint."""
    mujoco = pytest.importorskip("mujoco")
    xml = """<mujoco><worldbody><body pos="0 0 {z}"><freejoint name="f"/><geom size="0.1"/>
      </body></worldbody><keyframe><key name="home" qpos="0 0 {k} 1 0 0 0"/></keyframe>
    </mujoco>"""
    for z, k, match in (("nan", "1", r"qpos0 .*joint 'f' \(qpos\[2\] = nan\)"),
                        ("1", "inf", r"<key name=\"home\"> qpos.*joint 'f' \(qpos\[2\] = inf\)")):
        m = mujoco.MjModel.from_xml_string(xml.format(z=z, k=k))
        with pytest.raises(sd.ModelError, match=match):
            sd.from_mujoco(m)


def test_a_model_whose_configurations_were_read_still_pickles():
    """Process pools pickle the model (rollouts' engine="processes"): reading q0 and
    reference_configurations keeps nothing that pickle refuses (a mapping proxy did)."""
    import pickle

    model = sd.from_mujoco(mujoco.MjModel.from_xml_string(ARM))
    assert set(model.reference_configurations) == {"qpos0", "home"}
    copy = pickle.loads(pickle.dumps(model))
    assert np.array_equal(copy.q0, model.q0) and copy.configurations == model.configurations
    np.testing.assert_array_equal(copy.reference_configurations["home"],
                                  model.reference_configurations["home"])
