"""Loaded robots in a Scene (issue 24 item 3): ``Scene.add_robot`` copies a URDF/MJCF robot into
the scene with the collision shapes of its own file, so that it touches the ground, itself and
objects through ``ShapeContact``. Checked: the robot keeps its dynamics; the shapes are the
file's; self-contact depths equal MuJoCo's ``mj_collision`` on dm_control's manipulator and
coal's distances on example-robot-data's Panda; the contact rows move the depth as the
configuration does; dm_control's pendulum comes to rest on a box where geometry says, the box
carrying its weight; bad inputs are clear errors."""
import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.sim import collision

from conftest import bundled_mjcf, erd_urdf, erd_urdfs, soft_sink

G = 9.81


def _dm_control(name):
    path = bundled_mjcf("dm_control", name)
    if path is None:
        pytest.skip("dm_control is not installed")
    return path


def _panda_files():
    urdf = erd_urdf("panda_description/urdf/panda_collision.urdf")
    return urdf, os.path.join(os.path.dirname(os.path.dirname(urdf)), "srdf", "panda.srdf")


def _depths(contact, model, q):
    """(resolved contact, depths (N, K)) at configurations q (N, nq)."""
    resolved = contact.resolve(model)
    T = sd.forward_kinematics(model, np.atleast_2d(q))
    return resolved, np.asarray(resolved.depths(np, resolved.params(), T))


def test_a_robot_in_a_scene_keeps_its_dynamics_and_its_files_shapes():
    """example-robot-data's Panda (panda_collision.urdf: each link a cylinder capped by two
    spheres of its radius) mounted at 0.3 m turned 40 degrees about z: the same joints, mass
    matrix and gravity torques as the loaded robot, its links placed by the mount, and one capsule
    per link whose size and pose are the file's cylinder."""
    urdf, srdf = _panda_files()
    robot = sd.load_urdf(urdf)
    scene = sd.Scene("panda")
    angle = np.radians(40)
    quat = (0, 0, np.sin(angle / 2), np.cos(angle / 2))
    q = sd.random_configuration(robot, seed=3)
    names = scene.add_robot(robot, q=q, position=(0.2, -0.1, 0.3), quaternion=quat, srdf=srdf)
    model, contact, q0 = scene.build()
    assert model.joint_names == robot.joint_names
    np.testing.assert_array_equal(q0, q)
    np.testing.assert_allclose(sd.mass_matrix(model, q), sd.mass_matrix(robot, q), atol=1e-12)
    # gravity is along z, the mount turns about z: the same gravity torques
    np.testing.assert_allclose(sd.gravity_torques(model, q), sd.gravity_torques(robot, q),
                               atol=1e-10)
    c, s = np.cos(angle), np.sin(angle)
    mount = np.array([[c, -s, 0, 0.2], [s, c, 0, -0.1], [0, 0, 1, 0.3], [0, 0, 0, 1]])
    T_scene, T_robot = sd.forward_kinematics(model, q), sd.forward_kinematics(robot, q)
    for link in robot.link_names:
        np.testing.assert_allclose(T_scene[model.link_index(link)],
                                   mount @ T_robot[robot.link_index(link)], atol=1e-12)
    # the file's cylinders, read here with ElementTree: one capsule each, same radius, half
    # the length, same origin
    cylinders = []
    for link in ET.parse(urdf).getroot().iterfind("link"):
        for element in link.iterfind("collision"):
            cyl = element.find("geometry/cylinder")
            if cyl is not None:
                xyz = element.find("origin").get("xyz", "0 0 0")
                cylinders.append((link.get("name"), float(cyl.get("radius")),
                                  float(cyl.get("length")) / 2, [float(x) for x in xyz.split()]))
    shapes = [sh for sh in contact.shapes if sh.name in names]
    assert len(shapes) == len(cylinders) == 13
    for shape, (link, radius, half, xyz) in zip(shapes, cylinders):
        assert shape.link == link and isinstance(shape.shape, collision.Capsule)
        assert (shape.shape.radius, shape.shape.half_length) == (radius, half)
        np.testing.assert_allclose(shape.translation, xyz)


def test_panda_self_distances_equal_coals():
    """The Panda's self-collision pairs (the SRDF's disabled pairs left out): at 200 random
    configurations, the depth of every capsule pair equals minus coal's distance between the
    same capsules (coal's capsule-capsule is exact), to 1e-9 m; where the pairs overlap coal's
    penetration depth too. The SRDF's pairs and the adjacent links have no pair."""
    coal = pytest.importorskip("coal")
    urdf, srdf = _panda_files()
    robot = sd.load_urdf(urdf)
    scene = sd.Scene("panda")
    scene.add_robot(robot, srdf=srdf)
    model, contact, _ = scene.build(ground=False)
    qs = np.array([sd.random_configuration(robot, seed=k) for k in range(200)])
    resolved, depth = _depths(contact, model, qs)
    disabled = {frozenset((e.get("link1"), e.get("link2")))
                for e in ET.parse(srdf).getroot().iter("disable_collisions")}
    assert resolved.pairs, "no self-collision pair"
    T = sd.forward_kinematics(model, qs)
    start, overlaps = 0, 0
    for a, la, b, lb in resolved.pairs:
        assert frozenset((a.link, b.link)) not in disabled
        assert model.links[la].body != model.links[lb].body
        K = resolved.counts[resolved.pairs.index((a, la, b, lb))]
        ours = depth[:, start:start + K].max(axis=1)
        start += K
        for n in range(len(qs)):
            objects = []
            for shape, link in ((a, la), (b, lb)):
                pose = T[n, link] @ np.block([[np.reshape(shape.rotation, (3, 3)),
                                               np.reshape(shape.translation, (3, 1))],
                                              [np.zeros((1, 3)), np.ones((1, 1))]])
                geometry = coal.Capsule(shape.shape.radius, 2 * shape.shape.half_length)
                objects.append(coal.CollisionObject(geometry, coal.Transform3s(
                    pose[:3, :3], pose[:3, 3])))
            result = coal.DistanceResult()
            coal.distance(objects[0], objects[1], coal.DistanceRequest(), result)
            assert ours[n] == pytest.approx(-result.min_distance, abs=1e-9)
            overlaps += result.min_distance < 0
    assert overlaps > 20  # the random configurations do fold the arm onto itself


def _self_contacts_as_mujocos(name, links, configurations, seed=0):
    """(model, contact, resolved, depth (N, K), qs (N, nq), compared): dm_control's ``name``
    with the shapes of ``links`` in a scene, at random configurations in its joints' ranges
    (its free joint's at qpos0): in each, the pairs of those links' geoms that overlap are
    the very pairs MuJoCo's own mj_collision finds overlapping (its filters: parent and
    child, contype and conaffinity), at its depths to 1e-9 m; ``compared``: how many."""
    mujoco = pytest.importorskip("mujoco")
    path = _dm_control(name)
    robot = sd.load_mjcf(path)
    scene = sd.Scene(name)
    scene.add_robot(robot, links=links)
    model, contact, _ = scene.build(ground=False)
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    lo, hi = m.jnt_range[:, 0], m.jnt_range[:, 1]
    unlimited = m.jnt_limited == 0
    lo, hi = np.where(unlimited, -np.pi, lo), np.where(unlimited, np.pi, hi)
    qs = np.tile(m.qpos0, (configurations, 1))
    for j in range(m.njnt):
        if m.jnt_type[j] in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            qs[:, m.jnt_qposadr[j]] = rng.uniform(lo[j], hi[j], size=configurations)
    resolved, depth = _depths(contact, model, qs)
    geoms = {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g): g for g in range(m.ngeom)}
    bodies = {mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, b) for b in links}
    slots, start = {}, 0
    for (a, _, b, _), K in zip(resolved.pairs, resolved.counts):
        key = frozenset(geoms[s.name.split("/")[1]] for s in (a, b))
        slots[key] = slice(start, start + K)
        start += K
    compared = 0
    for n, q in enumerate(qs):
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        theirs = {}
        for c in d.contact[:d.ncon]:
            if {m.geom_bodyid[c.geom1], m.geom_bodyid[c.geom2]} <= bodies and c.dist < 0:
                key = frozenset((c.geom1, c.geom2))
                theirs[key] = max(theirs.get(key, -np.inf), -c.dist)
        ours = {key: depth[n, s].max() for key, s in slots.items() if depth[n, s].max() > 1e-12}
        assert set(ours) == set(theirs), n
        for key, value in theirs.items():
            assert ours[key] == pytest.approx(value, abs=1e-9)
            compared += 1
    return model, contact, resolved, depth, qs, compared


def test_manipulator_self_contact_equals_mujocos_collision():
    """dm_control's manipulator (a planar arm of capsules with sphere fingertips, and its ball,
    peg and cup): at random configurations, the pairs of the arm's geoms that overlap and their
    depths equal MuJoCo's own mj_collision (capsule-capsule, capsule-sphere and sphere-sphere
    are exact in both) to 1e-9 m, with MuJoCo's filters (parent and child, contype and
    conaffinity); the contact rows' normal velocities are the rate of the depth (central
    differences, 1e-6)."""
    arm = ["upper_arm", "middle_arm", "lower_arm", "hand", "thumb", "thumbtip", "finger",
           "fingertip"]
    model, contact, resolved, depth, qs, compared = _self_contacts_as_mujocos(
        "manipulator", arm, 400)
    assert compared >= 20
    rng = np.random.default_rng(1)
    # the rows: the normal velocity of each overlapping pair's deepest point is minus the rate
    # of its depth (shallow overlaps: in this planar arm deep ones have crossing axes, where
    # the depth is flat at the sum of the radii and the normal is a choice)
    hits = np.argwhere((depth > 1e-4) & (depth < 5e-3))[:10]
    assert len(hits) >= 5
    p = resolved.params()
    for n, k in hits:
        q = qs[n]
        qd = rng.normal(size=model.nv)
        J, dep, _ = resolved.rows(np, p, q[None], sd.forward_kinematics(model, q[None]))
        h = 1e-6
        plus = _depths(contact, model, q + h * qd)[1][0, k]
        minus = _depths(contact, model, q - h * qd)[1][0, k]
        assert dep[0, k] == pytest.approx(depth[n, k], abs=1e-12)
        assert (J[0, 3 * k] @ qd) == pytest.approx(-(plus - minus) / (2 * h), abs=1e-6)



def test_humanoid_self_contact_keeps_mujocos_parent_filter_across_its_joints():
    """dm_control's humanoid, whose bodies have up to three joints (a chain of links here,
    ``{body}/{joint}``, so that a geom's link is not its parent's child): at random
    configurations its overlapping pairs are MuJoCo's. Its parent filter holds between
    MuJoCo's bodies: the upper arm (two shoulder joints) never touches the torso, the thigh
    (three hip joints) never the pelvis. Before, those pairs were in the scene: the arms
    pressed on the torso with 500 N where MuJoCo's do not, and a fall left mj_step's by
    0.8 rad in 1 s."""
    links = ["torso", "head", "lower_waist", "pelvis", "right_thigh", "right_shin",
             "right_foot", "left_thigh", "left_shin", "left_foot", "right_upper_arm",
             "right_lower_arm", "left_upper_arm", "left_lower_arm"]
    model, contact, resolved, depth, qs, compared = _self_contacts_as_mujocos(
        "humanoid", links, 300)
    assert compared >= 50
    names = {frozenset(s.link for s in (a, b)) for a, _, b, _ in resolved.pairs}
    for parent, child in (("torso", "right_upper_arm"), ("pelvis", "left_thigh"),
                          ("torso", "lower_waist")):
        assert frozenset((parent, child)) not in names
    assert frozenset(("torso", "right_lower_arm")) in names  # a grandchild: MuJoCo's too

def test_pendulum_comes_to_rest_on_a_box():
    """dm_control's pendulum (a 1 kg ball of radius 0.05 m at 0.5 m from a hinge 0.6 m high;
    its collision geoms from the file) starts 0.6 rad from upright and falls onto a 2 kg cube
    of 0.2 m on the ground (frictionless: the forces are vertical). It rests where the ball
    touches the cube's top: 0.6 + 0.5 cos(q) = 0.2 + 0.05, q = arccos(-0.7); the ball carries
    its whole weight on the cube (all the mass is in the ball, above the contact), and the
    ground carries both weights; the cube does not move. Twelve candidate points: native.
    Rigid (impedance=1): the file's geoms are soft (MuJoCo's solimp), which would rest the
    ball a fraction of a millimetre inside the cube."""
    pendulum = sd.load_mjcf(_dm_control("pendulum"))
    scene = sd.Scene("pendulum_on_box")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every pair has a narrow phase (its cylinder too)
        with pytest.warns(UserWarning, match="turns contact off"):  # not against the box
            scene.add_robot(pendulum, q=[0.6], exclude=[("pole", "ground")])
        scene.add_object("box", collision.box((0.1, 0.1, 0.1)), mass=2.0,
                         position=(0.4, 0, 0.1))
        model, contact, q0 = scene.build(mu=0.0, impedance=1.0)
        traj = sd.simulate(model, q0, t_final=2.0, dt=1e-3, contact=contact,
                           integrator="semi_implicit_euler", record_contact_forces=True)
    assert traj.meta["backend"] == "native"
    assert traj.q[-1, 0] == pytest.approx(np.arccos(-0.7), abs=1e-5)
    np.testing.assert_allclose(traj.q[-1, 1:], q0[1:], atol=1e-6)  # the cube unmoved
    assert np.abs(traj.qd[-1]).max() < 1e-4
    labels = traj.meta["contact"]["labels"]
    force = traj.contact_force[-1, :, 2]  # vertical (world z) components
    on = {what: sum(force[i] for i, label in enumerate(labels) if label.startswith(what))
          for what in ("pole/mass|box", "box|ground", "pole/pole|box", "pole/base|box")}
    assert on["pole/mass|box"] == pytest.approx(1.0 * G, rel=1e-4)
    assert on["box|ground"] == pytest.approx(3.0 * G, rel=1e-4)
    assert on["pole/pole|box"] == pytest.approx(0.0, abs=1e-6)
    assert on["pole/base|box"] == pytest.approx(0.0, abs=1e-6)  # the base's cylinder, far off


def test_two_robots_need_prefixes_and_filters_hold():
    """The same robot twice: refused without a prefix, named apart with one; exclude and
    self_collision=False leave out pairs, the adjacent links never touch, and the robots
    touch each other."""
    urdf, srdf = _panda_files()
    robot = sd.load_urdf(urdf)
    scene = sd.Scene("two")
    scene.add_robot(robot, srdf=srdf, exclude=[("panda_link1", "ground")])
    with pytest.raises(sd.ModelError, match="prefix="):
        scene.add_robot(robot)
    scene.add_robot(robot, prefix="b/", position=(0.0, 0.6, 0.0), self_collision=False)
    model, contact, q0 = scene.build()
    assert model.nq == 2 * robot.nq
    pairs = [(a.name, "ground" if b is None else b.name) for a, _, b, _ in
             contact.resolve(model).pairs]
    assert ("panda_link1/capsule0", "ground") not in pairs
    assert ("b/panda_link1/capsule0", "ground") in pairs
    assert not [p for p in pairs if p[0].startswith("b/") and p[1].startswith("b/")]
    assert ("panda_link0/capsule0", "b/panda_hand/capsule0") in pairs
    assert not [p for p in pairs if {p[0].split("/")[0], p[1].split("/")[0]}
                == {"panda_link3", "panda_link4"}]


def test_bad_robots_are_clear_errors():
    """No file, a file with meshes only, unknown links, a wrong q, an object."""
    scene = sd.Scene("bad")
    with pytest.raises(sd.ModelError, match="no file.*shapes=False"):
        scene.add_robot(sd.robots.load("panda"))  # bundled: loaded from a string
    scene.add_robot(sd.robots.load("panda"), shapes=False)  # its dynamics only: fine
    assert not scene.shapes
    solo = sd.load_urdf(erd_urdf("solo_description/robots/solo12.urdf"), floating_base=True)
    with pytest.raises(sd.ModelError, match="all mesh: no primitive"):
        sd.Scene("solo").add_robot(solo, meshes="skip")
    panda = sd.load_urdf(erd_urdf("panda_description/urdf/panda.urdf"))
    with pytest.warns(UserWarning, match=r"mesh geometry on 9 link\(s\) \(panda_hand, "):
        names = sd.Scene("fingers").add_robot(panda, meshes="skip")
    assert len(names) == 8 and all("finger" in n for n in names)  # the fingers' boxes
    with pytest.raises(sd.ModelError, match="no primitive"):
        sd.Scene("arm").add_robot(panda, links=["panda_link3"], meshes="skip")
    for bad, match in ((dict(meshes="spheres"), "meshes must be one of 'capsule', 'hull'"),
                       (dict(mesh_corners=3), "mesh_corners must be an int >= 4"),
                       (dict(mesh_corners=True), "mesh_corners must be an int >= 4")):
        scene = sd.Scene("x")
        with pytest.raises(ValueError, match=match):
            scene.add_robot(panda, **bad)
        assert not scene.shapes and not scene.builder.has_link("panda_link1")  # nothing applied
    with pytest.raises(sd.ModelError, match="nowhere"):
        sd.Scene("x").add_robot(panda, links=["nowhere"])
    with pytest.raises(sd.ModelError, match="'nowhere' is not a link"):
        sd.Scene("x").add_robot(panda, shapes=False, exclude=[("nowhere", "panda_link1")])
    with pytest.raises(ValueError, match="q must be 9 finite numbers"):
        sd.Scene("x").add_robot(panda, q=np.zeros(7), shapes=False)
    with pytest.raises(TypeError, match="Model"):
        sd.Scene("x").add_robot("panda.urdf")
    boxes = sd.Scene("x")
    boxes.add_object("box", collision.box((0.1, 0.1, 0.1)), 1.0, position=(0, 0, 0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # only boxes: no warning about cylinders
        model, contact, _ = boxes.build()
        contact.resolve(model)
    with pytest.warns(UserWarning, match="no two shapes can touch"):  # an empty scene
        assert sd.Scene("x").build()[1] is None


def test_a_robot_that_cannot_move_says_so_and_one_that_overlaps_itself_is_filtered():
    """romeo.urdf's thumbs have no mass and no inertia: its scene's contact solver needs M^-1,
    and simulate names the joint (the ModelError forward dynamics gives) before step 0, on
    every backend, not numpy's "Matrix is not positive definite". Two of a robot's primitive
    shapes that overlap at its q (ANYmal's base cylinder and its thigh's by design, the Panda's
    link 5 and hand at q = 0) are left out (the contact threw ANYmal apart at step 2: "the
    springs gave out 240 J"), and kept at a q where they are apart. Two objects overlapping
    warn, naming both."""
    romeo = sd.load_urdf(erd_urdf("romeo_description/urdf/romeo.urdf"), floating_base=True)
    scene = sd.Scene("romeo")
    scene.add_robot(romeo, links=["l_ankle"], position=(0, 0, 1.0))
    model, contact, q0 = scene.build()
    for backend in ("numpy", "native"):
        with pytest.raises(sd.ModelError, match="joint '[LR]Thumb[0-9]' moves a subtree with no "
                                                "mass and no inertia"):
            sd.simulate(model, q0, t_final=0.002, dt=1e-3, contact=contact, backend=backend)

    def depth_and_pairs(robot, links, q, a, b):
        scene = sd.Scene("s")
        scene.add_robot(robot, links=links, q=q)
        model, contact, q0 = scene.build()
        T = np.asarray(sd.forward_kinematics(model, q0))
        shape = {s.name: s for s in scene.shapes}
        depth = _depth(T, shape[a], model.link_index(shape[a].link), shape[b],
                       model.link_index(shape[b].link))
        pairs = {frozenset((x.name, y.name)) for x, _, y, _ in contact.resolve(model).pairs
                 if y is not None}
        return depth, frozenset((a, b)) in pairs

    anymal = sd.load_urdf(erd_urdf("anymal_b_simple_description/robots/anymal.urdf"),
                          floating_base=True)
    depth, kept = depth_and_pairs(anymal, ["base", "LF_THIGH"], None, "base/cylinder1",
                                  "LF_THIGH/cylinder2")
    assert 0.001 < depth < 0.005 and not kept
    panda = sd.load_urdf(erd_urdf("panda_description/urdf/panda_collision.urdf"))
    pair = ("panda_link5/capsule1", "panda_hand/capsule0")
    depth, kept = depth_and_pairs(panda, ["panda_link5", "panda_hand"], None, *pair)
    assert depth > 0.05 and not kept
    ready = [0, -0.785, 0, -2.356, 0, 1.571, 0.785, 0.04, 0.04]
    depth, kept = depth_and_pairs(panda, ["panda_link5", "panda_hand"], ready, *pair)
    assert depth < 0 and kept
    scene = sd.Scene("objects")  # a ball 3 cm into a box above it, centres outside each other
    scene.add_object("ball", collision.sphere(0.1), 1.0, position=(0, 0, 1.0))
    scene.add_object("box", collision.box((0.1, 0.1, 0.1)), 1.0, position=(0, 0, 1.17))
    model, contact, q0 = scene.build()
    with pytest.warns(sd.PenetrationWarning,
                      match=r"a point of '(ball|box)' is inside '(box|ball)' by 3 cm .* exclude "
                            r"the pair \(sd.Scene's exclude= or srdf=\)"):
        sd.simulate(model, q0, t_final=0.002, dt=1e-3, contact=contact)


@pytest.mark.slow
@pytest.mark.parametrize("path", erd_urdfs(), ids=lambda p: os.path.basename(p))
def test_every_example_robot_goes_into_a_scene_apart_from_itself(path):
    """Every URDF of example-robot-data, as its file mounts it: into a scene (a clear
    ModelError for a file with no link or no collision element), and no two of its own shapes
    that may touch start overlapping (they threw ANYmal, TIAGo and Baxter apart in the first
    steps): the least distance of every pair of its shapes at q, computed shape by shape here,
    is positive or the pair is left out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            robot = sd.load_urdf(path)
        except sd.ModelError as e:
            assert "no <link>" in str(e)  # ur3.urdf: a xacro's empty output
            return
        scene = sd.Scene("s")
        try:
            scene.add_robot(robot)
        except sd.ModelError as e:
            assert "has no collision element" in str(e) or "all mesh" in str(e)
            return
        model, contact, q0 = scene.build()
    if contact is None:  # every shape on a link its fixed base holds: no pair can touch
        assert all(model.links[model.link_index(s.link)].body < 0 for s in scene.shapes)
        return
    resolved = contact.resolve(model)
    T = np.asarray(sd.forward_kinematics(model, q0))
    for a, la, b, lb in resolved.pairs:
        if b is None:
            continue
        depth = _depth(T, a, la, b, lb)
        assert depth <= 0.0, (a.name, b.name, depth)


def _depth(T, a, link_a, b, link_b):
    """The deepest point of shape a in shape b (m; negative: apart) with their links at poses
    T (nlinks, 4, 4): the shapes' world poses from their offsets in the links, one by one."""
    poses = []
    for s, link in ((a, link_a), (b, link_b)):
        offset = np.eye(4)
        offset[:3, :3], offset[:3, 3] = np.reshape(s.rotation, (3, 3)), s.translation
        T_s = T[link] @ offset
        poses.append((T_s[None, :3, :3], T_s[None, :3, 3]))
    return float(np.max(collision.collide(np, a.shape, poses[0], b.shape, poses[1])[2]))


def _written(path, xml):
    """(path as a str, MuJoCo's model of ``xml`` written there with a 1 ms step, its data)."""
    mujoco = pytest.importorskip("mujoco")
    path.write_text(xml)
    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.timestep = 1e-3
    return str(path), m, mujoco.MjData(m)


def _at_qpos0(path):
    """MuJoCo's compiled model of the file and its data after mj_forward at qpos0."""
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    return m, d


def test_an_mjcf_robot_starts_where_its_file_places_it():
    """dm_control's humanoid with the default q starts at MuJoCo's qpos0 (the torso at its
    height in the file, mj_forward's xpos), its feet above the ground: no "inside the ground"
    warning, which q = neutral (the torso at the origin) gives."""
    mujoco = pytest.importorskip("mujoco")
    path = _dm_control("humanoid")
    m, d = _at_qpos0(path)
    torso = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "torso")
    assert d.xpos[torso][2] > 1.0
    robot = sd.load_mjcf(path)
    found = {}
    for q in (None, robot.neutral):
        scene = sd.Scene("humanoid")
        scene.add_robot(robot, q=q)
        model, contact, q0 = scene.build()
        T = np.asarray(sd.forward_kinematics(model, q0))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sd.simulate(model, q0, None, None, t_final=1e-3, dt=1e-3, contact=contact,
                        backend="numpy")
        found["default" if q is None else "neutral"] = (
            q0, T[model.link_index("torso"), :3, 3],
            [str(w.message) for w in caught if "inside the ground" in str(w.message)])
    q0, position, inside = found["default"]
    assert inside == []
    assert np.array_equal(q0, m.qpos0)  # the scene's q is the robot's: nothing else moves
    assert np.abs(position - d.xpos[torso]).max() < 1e-12
    q0, position, inside = found["neutral"]
    assert inside and abs(position[2]) < 1e-12  # the defect this guards against


def _gymnasium(name):
    path = bundled_mjcf("gymnasium", name)
    if path is None:
        pytest.skip("gymnasium is not installed")
    return path


def test_an_mjcf_files_floor_is_the_ground():
    """gymnasium's pusher stands on a table, a world plane at z = -0.325 m: the scene's ground
    is there (build's default height, read from MuJoCo's geom_pos; moved with the robot's
    position), and the depths of the shapes on it at qpos0 equal MuJoCo's (its contacts with
    the table, dist ~ 0): 0.3 s run with no "inside the ground" warning (at z = 0 the object
    started 32.5 cm inside it and the run diverged). The floor's contype/conaffinity hold:
    inverted_double_pendulum's (contype 0, conaffinity 1) touches none of its geoms (contype 0;
    MuJoCo: no contact), so build warns and returns no contact (its rail, a shape of the world,
    touches nothing either). Two files whose floors differ: refused, nothing added."""
    mujoco = pytest.importorskip("mujoco")
    path = _gymnasium("pusher")
    m, d = _at_qpos0(path)
    table = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "table")
    on_table = [-c.dist for c in d.contact[:d.ncon] if table in (c.geom1, c.geom2)]
    assert on_table
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)
        robot = sd.load_mjcf(path)
    scene = sd.Scene("pusher")
    scene.add_robot(robot)
    model, contact, q0 = scene.build()
    assert contact.solver.height == m.geom_pos[table][2] == -0.325
    resolved, depth = _depths(contact, model, q0)
    ground = [k for k, label in enumerate(resolved.labels) if "|ground#" in label]
    assert abs(depth[0, ground].max() - max(on_table)) < 1e-9
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traj = sd.simulate(model, q0, None, None, t_final=0.3, dt=1e-3, contact=contact,
                           integrator="semi_implicit_euler")
    assert not [w for w in caught if "inside the ground" in str(w.message)]
    assert np.all(np.isfinite(traj.q))
    raised = sd.Scene("raised")
    raised.add_robot(robot, position=(0.0, 0.0, 1.0))
    assert raised.build()[1].solver.height == pytest.approx(0.675, abs=1e-15)

    # a floor nothing touches: MuJoCo finds no contact, and neither does the scene
    path = _gymnasium("inverted_double_pendulum")
    m, d = _at_qpos0(path)
    assert d.ncon == 0
    pendulum = sd.Scene("pendulum")
    assert "world/rail" in pendulum.add_robot(sd.load_mjcf(path))  # a shape fixed to the world
    with pytest.warns(UserWarning, match="no two shapes can touch"):
        model, contact, q0 = pendulum.build()
    assert contact is None
    with pytest.raises(sd.ModelError, match="no two shapes can touch"):
        sd.sim.ShapeContact(shapes=tuple(pendulum.shapes), ground=False,
                            exclude=frozenset(pendulum._excluded)).resolve(model)

    # dm_control's floor (z = 0) and the pusher's table: one ground, refused before any change
    cartpole = sd.Scene("two floors")
    with pytest.warns(UserWarning, match="turns contact off"):
        added = cartpole.add_robot(sd.load_mjcf(_dm_control("cartpole")))
    assert {"world/rail1", "world/rail2"} <= set(added)
    shapes = list(cartpole.shapes)
    with pytest.raises(sd.ModelError, match=r"table.*-0\.325 m.*floor.*-0\.05 m.*position="):
        cartpole.add_robot(robot, prefix="pusher/")
    assert cartpole.shapes == shapes and not cartpole.builder.has_link("pusher/world")


_ROOM = """<mujoco model="room">
  <option timestep="0.001"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <geom name="wall" type="plane" pos="0.5 0 0" zaxis="-1 0 0" size="1 1 .1"/>
    <geom name="table" type="box" pos="-0.5 0 0.2" size="0.2 0.2 0.2"/>
    <geom name="rail" type="capsule" fromto="0 -0.5 0.05 0 0.5 0.05" size="0.05"/>
    <body name="ball" pos="0.2 0 0.1"><freejoint/><geom name="ball" size="0.1" mass="1"/></body>
    <body name="cube" pos="-0.5 0 0.5">
      <freejoint/><geom name="cube" type="box" size="0.05 0.05 0.05" mass="1"/>
    </body>
  </worldbody>
</mujoco>"""


def test_an_mjcf_files_world_geoms_are_shapes_fixed_to_the_world(tmp_path):
    """The geoms of an MJCF file's world other than its floor are shapes fixed to the scene's
    world, as in MuJoCo: its walls (planes not facing up, ``collision.plane()``), its rails and
    tables (primitives). dm_control's quadruped with its back feet pushed into the ramp of its
    arena (wall_px, tilted 45 degrees): the depths of every pair with a wall equal MuJoCo's,
    and the walls stay with self_collision=False (they are not the robot's self); world=False
    leaves them out, the floor still the ground. dm_control's
    point mass turns contact off: its geoms touch neither each other nor its walls (MuJoCo:
    nothing), but a ball the scene adds touches them. A room (a wall, a box table, a capsule
    rail; a ball and a cube on free joints) run 1 s beside mj_step at the same dt: the ball
    sent at the wall at 1 m/s stops at it (its farthest x 0.4 m plus the contact's give, within
    1 mm of MuJoCo's) and the cube dropped on the table rests on its top, sunk as the file's
    soft contact (MuJoCo's solimp) holds it (``conftest.soft_sink``, to 1e-9 m). Placed at
    position=, the walls move with the world. A plane on a link that moves: ModelError."""
    mujoco = pytest.importorskip("mujoco")
    path = _dm_control("quadruped")
    m, d = _at_qpos0(path)
    d.qpos[0] = -14.9  # the back feet 15 to 33 cm inside the ramp at x + z < -15
    mujoco.mj_forward(m, d)
    walls = {}
    for c in d.contact[:d.ncon]:
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in (c.geom1, c.geom2)]
        wall, other = names if names[0].startswith("wall") else names[::-1]
        if wall.startswith("wall"):
            walls[wall, other] = max(walls.get((wall, other), -1.0), -c.dist)
    assert len(walls) == 6 and min(walls.values()) > 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its height field is skipped
        robot = sd.load_mjcf(path)
        for self_collision in (True, False):
            scene = sd.Scene("quadruped")
            added = scene.add_robot(robot, self_collision=self_collision)
            assert {f"world/wall_{w}" for w in ("px", "py", "nx", "ny")} <= set(added)
            model, contact, q0 = scene.build()
            q0[0] = -14.9
            resolved, depth = _depths(contact, model, q0)
            ours = {}
            for k, label in enumerate(resolved.labels):
                a, b = label.split("#")[0].split("|")
                if b.startswith("world/wall") and depth[0, k] > 0:
                    key = (b[len("world/"):], a.split("/")[1])
                    ours[key] = max(ours.get(key, -1.0), depth[0, k])
            assert ours.keys() == walls.keys()
            assert ours == pytest.approx(walls, abs=1e-12)
        bare = sd.Scene("quadruped without its arena")
        kept = bare.add_robot(robot, world=False)  # no walls: 76 pairs fewer
        assert kept == [name for name in added if not name.startswith("world/")]
        assert bare.build()[1].solver.height == 0.0  # the floor is still the ground

    scene = sd.Scene("point mass")
    with pytest.warns(UserWarning, match="point_mass.xml turns contact off"):
        added = scene.add_robot(sd.load_mjcf(_dm_control("point_mass")))
    assert "world/wall_x" in added and "pointmass/pointmass" in added
    scene.add_object("ball", collision.sphere(0.05), mass=0.1, position=(-0.27, 0.1, 0.05))
    model, contact, q0 = scene.build()
    pairs = {frozenset((a.name, b.name if b else "ground")) for a, _, b, _ in
             contact.resolve(model).pairs}
    assert all("ball" in pair for pair in pairs)  # the point mass touches only the ball
    assert {frozenset(("ball", "world/wall_x")), frozenset(("ball", "pointmass/pointmass")),
            frozenset(("ball", "ground"))} <= pairs

    room = tmp_path / "room.xml"
    room.write_text(_ROOM)
    m = mujoco.MjModel.from_xml_path(str(room))
    d = mujoco.MjData(m)
    d.qvel[0] = 1.0  # the ball at 1 m/s towards the wall
    farthest = []
    while d.time < 1.0 - 1e-9:
        mujoco.mj_step(m, d)
        farthest.append(d.qpos[0])
    scene = sd.Scene("room")
    added = scene.add_robot(sd.load_mjcf(str(room)))
    assert {"world/wall", "world/table", "world/rail"} <= set(added)
    model, contact, q0 = scene.build(mu=0.5)
    v0 = np.zeros(model.nv)
    v0[0] = 1.0
    traj = sd.simulate(model, q0, v0, None, t_final=1.0, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    assert 0.4 < traj.q[:, 0].max() < 0.4 + 0.01
    assert abs(traj.q[:, 0].max() - max(farthest)) < 1e-3
    assert abs(traj.q[-1, 9] - (0.45 - soft_sink())) < 1e-9  # on the table
    assert abs(d.qpos[9] - 0.45) < 5e-4
    assert np.abs(traj.q[-1, 7:9] - (-0.5, 0.0)).max() < 1e-6

    moved = sd.Scene("moved room")
    moved.add_robot(sd.load_mjcf(str(room)), position=(1.0, 0.0, 0.0))
    wall = next(s for s in moved.shapes if s.name == "world/wall")
    assert wall.translation == pytest.approx((1.5, 0.0, 0.0))
    assert np.reshape(wall.rotation, (3, 3))[:, 2] == pytest.approx((-1.0, 0.0, 0.0))

    bad = sd.Scene("moving wall")
    bad.add_object("box", collision.box((0.1, 0.1, 0.1)), mass=1.0, position=(0, 0, 0.1))
    bad.add_shape("box", collision.plane(), name="wall")
    with pytest.raises(sd.ModelError, match="plane 'wall' is on 'box', a link that moves"):
        bad.build()


_CART = """<mujoco model="cart on a rail">
  <worldbody>
    <geom name="rail" type="box" size="1 0.05 0.05"/>
    <body name="cart" pos="0 0 0.15">
      <joint name="lift" type="slide" axis="0 0 1"/>
      <geom name="cart" type="box" size="0.4 0.1 0.05" mass="2"/>
      <body name="pole" pos="0 0 0.09" euler="0 20 0">
        <joint name="hinge" type="hinge" axis="0 1 0"/>
        <geom name="pole" type="capsule" fromto="0 0 0 0 0 0.3" size="0.03" mass="0.5"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_mujocos_parent_filter_spares_the_world_and_can_be_turned_off(tmp_path):
    """MuJoCo's parent filter keeps a body from touching its parent, but not the world's geoms
    (nor, with ``<flag filterparent="disable"/>``, its parent): a cart on a vertical slider
    joined to the world drops 5 cm onto the world's rail and a pole hinged on it falls. With
    the filter on, the pole passes the cart and stops on the rail; with it off, it stops on
    the cart. 1 s at 1 ms beside mj_step: the cart rests on the rail (rigid, impedance=1:
    -5 cm to 0.1 mm; MuJoCo's within its soft penetration of 0.1 mm) and the pole's final
    angle is MuJoCo's within 1e-3 rad, each case on its own pairs. Before, the adjacent-link rule left the cart and the rail apart,
    and the cart fell through it."""
    mujoco = pytest.importorskip("mujoco")
    rest = {}
    for filterparent in ("enable", "disable"):
        path, m, d = _written(tmp_path / f"cart_{filterparent}.xml", _CART.replace(
            "<worldbody>", f'<option><flag filterparent="{filterparent}"/></option><worldbody>'))
        while d.time < 1.0 - 1e-9:
            mujoco.mj_step(m, d)
        touching = {frozenset(m.geom(g).name for g in (c.geom1, c.geom2))
                    for c in d.contact[:d.ncon]}
        scene = sd.Scene("cart")
        scene.add_robot(sd.load_mjcf(path))
        with pytest.warns(UserWarning, match="no ground"):  # rigid: on the rail exactly
            model, contact, q0 = scene.build(mu=1.0, impedance=1.0)
        pairs = {frozenset((a.name, b.name)) for a, _, b, _ in contact.resolve(model).pairs}
        expected = {frozenset(("world/rail", "cart/cart")), frozenset(("world/rail", "pole/pole"))}
        if filterparent == "disable":
            expected.add(frozenset(("cart/cart", "pole/pole")))
        assert pairs == expected
        traj = sd.simulate(model, q0, t_final=1.0, dt=1e-3, contact=contact,
                           integrator="semi_implicit_euler")
        assert abs(traj.q[-1, 0] + 0.05) < 1e-4 and abs(d.qpos[0] + 0.05) < 1e-4
        assert abs(traj.q[-1, 1] - d.qpos[1]) < 1e-3
        rest[filterparent] = traj.q[-1, 1], touching
    on_rail, on_cart = rest["enable"], rest["disable"]
    assert frozenset(("rail", "pole")) in on_rail[1] and frozenset(("cart", "pole")) in on_cart[1]
    assert on_rail[0] - on_cart[0] > 0.3  # the rail is lower than the cart: the pole falls on


_PAIRS = """<mujoco model="explicit pairs">
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <geom name="table" type="box" size="0.2 0.2 0.1" pos="0.6 0 0.1"/>
    <body name="box" pos="0 0 0.5">
      <freejoint/><geom name="box" type="box" size="0.05 0.05 0.05" mass="1"/>
    </body>
    <body name="ball" pos="0.6 0 0.5">
      <freejoint/><geom name="ball" type="sphere" size="0.05" mass="0.5"/>
    </body>
    <body name="ghost" pos="0.3 0 0.5">
      <freejoint/><geom name="ghost" type="sphere" size="0.05" mass="0.5"/>
    </body>
  </worldbody>
  <contact>
    <pair geom1="box" geom2="floor"/>
    <pair geom1="ball" geom2="table"/>
  </contact>
</mujoco>"""


def test_an_mjcf_files_explicit_pairs_touch_whatever_the_filters_say(tmp_path):
    """MuJoCo checks a file's ``<contact><pair>``s whatever contype/conaffinity, the parent
    filter and ``<exclude>`` say, so a file may turn every geom's bit masks off and name its
    pairs (before, such a file came in with no shapes, touching nothing). Here: a box dropped
    on the floor, a ball on a world table, a third sphere in no pair. As mj_step at 1 ms for
    1 s: the box rests on the floor and the ball on the table, soft as the file's geoms are
    (MuJoCo's solimp): each sinks ``conftest.soft_sink`` = 0.367 mm, to 1e-9 m, the ball as
    mj_step's to 1e-9 m (MuJoCo's box 0.11 mm: MuJoCo takes a row's compliance from the body's
    translational inverse mass, 1 / m, where screwdyn takes its exact A_jj, four times that at
    a cube's corner); rigid (impedance=1), both exactly on their supports. The third falls
    through (its height equal to 1e-9). A cube the scene adds (a shape of no solimp: rigid)
    meets the file's floor: the mean of the two, (0.95, 0.975), as MuJoCo mixes two geoms'
    (0.18 mm). A geom of
    contype = conaffinity = 0 touches only its pairs, in the scene too: a cube added to the
    scene touches the ground, not them (it falls through the table). An exclude= of the
    caller still wins over the file's pair."""
    mujoco = pytest.importorskip("mujoco")
    path, m, d = _written(tmp_path / "pairs.xml", _PAIRS)
    while d.time < 1.0 - 1e-9:
        mujoco.mj_step(m, d)
    robot = sd.load_mjcf(path)
    scene = sd.Scene("pairs")
    assert scene.add_robot(robot) == ["world/table", "box/box", "ball/ball"]
    scene.add_object("cube", collision.box((0.05, 0.05, 0.05)), mass=0.2,
                     position=(0.6, 0.1, 0.5))
    model, contact, q0 = scene.build()
    pairs = {frozenset((a.name, b.name if b else "ground"))
             for a, _, b, _ in contact.resolve(model).pairs}
    assert pairs == {frozenset(("box/box", "ground")), frozenset(("ball/ball", "world/table")),
                     frozenset(("cube", "ground"))}
    sink = soft_sink()
    mixed = soft_sink(solimp=(0.95, 0.975, 0.001, 0.5, 2.0))  # the cube's: floor and rigid
    for impedance, r, r_cube in ((None, sink, mixed), (1.0, 0.0, 0.0)):
        model, contact, q0 = scene.build(**({} if impedance is None else
                                            {"impedance": impedance}))
        traj = sd.simulate(model, q0, None, None, 1.0, 1e-3, contact=contact,
                           integrator="semi_implicit_euler")
        z = traj.q[-1, [2, 9, 16, 23]]  # the box, the ball, the third sphere, the cube
        assert abs(z[0] - (0.05 - r)) < 1e-9 and abs(d.qpos[2] - 0.05) < 5e-4
        assert abs(z[1] - (0.25 - r)) < 1e-9
        assert abs(z[2] - d.qpos[16]) < 1e-9 and z[2] < -4.0
        assert abs(z[3] - (0.05 - r_cube)) < 1e-9  # through the table, onto the ground
    assert abs(d.qpos[9] - (0.25 - sink)) < 1e-9
    excluded = sd.Scene("pairs, one excluded")
    excluded.add_robot(robot, exclude=[("ball", "world")])
    model, contact, q0 = excluded.build()
    assert [(a.name, b and b.name) for a, _, b, _ in contact.resolve(model).pairs] == \
        [("box/box", None)]


_SLIDE = """<mujoco model="slide">
  <option cone="elliptic"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" friction="0.3"/>
    <body name="box" pos="0 0 0.1">
      <freejoint/><geom name="box" type="box" size="0.1 0.1 0.1" mass="1" friction="0.2"/>
    </body>
    <body name="puck" pos="0 1 0.1">
      <freejoint/><geom name="puck" type="box" size="0.1 0.1 0.1" mass="1" friction="0.2"
                        condim="4"/>
    </body>
  </worldbody>
  <contact><pair geom1="puck" geom2="floor" friction="0.1 0.1 0.005 0.0001 0.0001"/></contact>
</mujoco>"""


def test_an_mjcf_files_friction_is_each_pairs_own(tmp_path):
    """build() (mu=None) gives each pair its own sliding friction, as MuJoCo: the larger of its
    two geoms' friction[0] (a box of 0.2 on a floor of 0.3: 0.3), a <contact><pair>'s own
    (0.1); build(mu=0.8) sets every pair's. Two boxes sent at 2 m/s slide, 2.5 s at 1 ms:
    Coulomb's v^2 / (2 mu g) is 0.680 m and 2.039 m; ours within 1 mm of it and 5e-5 m of
    mj_step's (elliptic cones; 3e-6 and 1.7e-5 m); with mu=0.8, 0.255 m both. An object's own
    friction (add_object(surface=Surface(friction=1.2))) meets the others' (DEFAULT_MU, 0.8,
    where none is given): the larger holds. JAX (its loop over the points indexes their
    coefficients) equals native code. Two geoms of condim 1 touch without friction
    (gymnasium's pusher: every pair); the puck's condim 4 gives its pair with the box
    torsional friction (MuJoCo's: the larger condim, the larger friction[1]), where its own
    <pair> with the floor has the pair's condim, 3, none. Bad friction, or a surface not a
    Surface: ValueError."""
    mujoco = pytest.importorskip("mujoco")
    path, m, d = _written(tmp_path / "slide.xml", _SLIDE)
    d.qvel[0] = d.qvel[6] = 2.0
    while d.time < 2.5 - 1e-9:
        mujoco.mj_step(m, d)
    coulomb = [4.0 / (2 * mu * 9.81) for mu in (0.3, 0.1)]
    for mu, expected in ((None, coulomb), (0.8, [4.0 / (2 * 0.8 * 9.81)] * 2)):
        scene = sd.Scene("slide")
        scene.add_robot(sd.load_mjcf(path))
        model, contact, q0 = scene.build(mu=mu)
        resolved = contact.resolve(model)
        assert dict(zip((label.split("#")[0] for label in resolved.labels),
                        resolved.point_twist)) == {"box/box|puck/puck": (0.005, 0.0),
                                                   "box/box|ground": (0.0, 0.0),
                                                   "puck/puck|ground": (0.0, 0.0)}
        assert resolved.describe(resolved.params())["friction"] == \
            ([0.2, 0.3, 0.1] if mu is None else [0.8] * 3)  # box|puck, box|ground, puck|ground
        v0 = np.zeros(model.nv)
        v0[0] = v0[6] = 2.0
        traj = sd.simulate(model, q0, v0, None, 2.5, 1e-3, contact=contact,
                           integrator="semi_implicit_euler")
        slid = traj.q[-1, [0, 7]]  # both start at x = 0
        assert np.abs(slid - expected).max() < 1e-3
        if mu is None:
            assert np.abs(slid - d.qpos[[0, 7]]).max() < 5e-5
            jax = sd.simulate(model, q0, v0, None, 0.05, 1e-3, contact=contact,
                              integrator="semi_implicit_euler", backend="jax")
            assert np.abs(jax.q - traj.q[:51]).max() < 1e-12  # each point's mu, traced
    scene = sd.Scene("rubber puck")
    scene.add_object("puck", collision.box((0.1, 0.1, 0.1)), mass=1.0, position=(0, 0, 0.1),
                     surface=sd.sim.Surface(friction=1.2))
    scene.add_object("brick", collision.box((0.1, 0.1, 0.1)), mass=1.0, position=(0, 1, 0.1))
    model, contact, q0 = scene.build()  # no floor of a file: the ground's is DEFAULT_MU
    resolved = contact.resolve(model)
    assert resolved.describe(resolved.params())["friction"] == [1.2, 1.2, 0.8]
    with pytest.raises(ValueError, match="Surface.friction must be >= 0"):
        sd.sim.Surface(friction=-0.1)
    with pytest.raises(ValueError, match="the surface of shape 'puck' is a screwdyn.sim.Surface"):
        sd.Scene("bad").add_object("puck", collision.sphere(0.1), mass=1.0, surface=0.5)
    pusher = _gymnasium("pusher")  # condim 1 everywhere: MuJoCo's contacts have no friction
    assert set(mujoco.MjModel.from_xml_path(pusher).geom_condim) == {1}
    scene = sd.Scene("pusher")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scene.add_robot(sd.load_mjcf(pusher))
        model, contact, q0 = scene.build()
    resolved = contact.resolve(model)
    assert set(resolved.describe(resolved.params())["friction"]) == {0.0}


_DROP = """<mujoco model="drop">
  <option cone="elliptic"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="ball" pos="0 0 0.1">
      <freejoint/><geom name="ball" type="sphere" size="0.1" mass="1" solref="TIME 1"/>
    </body>
  </worldbody>
</mujoco>"""


def test_an_mjcf_geoms_solref_and_margin_set_its_contacts(tmp_path):
    """A geom's solref (time constant, damping ratio) sets how fast its contacts correct a
    penetration, as in MuJoCo (the mean of the two geoms'; MuJoCo's direct (-k, -b) read as
    they are): a ball arriving at 1 m/s on the floor sinks 4.0 mm with solref 0.005 and 12.4 mm
    with 0.05 (mj_step: 4.7 mm and 13.2 mm: its first step, from the floor's surface, is a free
    fall, where screwdyn's contact brakes from its margin), and at 0.3 s is where mj_step's
    is, to 2 um (the geoms' solimp, MuJoCo's soft contact); with the scene's time
    constant for all (build(timeconst=0.02)), 6.8 mm both. A pair's own stabilisation is
    checked for the step (the warning names it). A geom's margin holds the surfaces apart: a
    ball of margin 1 cm rests 1 cm above the floor, less its soft contact's sink
    (``conftest.soft_sink``); with the floor's 2 cm, 3 cm above it (MuJoCo adds two geoms'
    margins; their gaps only widen its detection); a <pair>'s own margin 1.5 cm, 1.5 cm above
    it; mj_step's too, each to 1e-9 m. A bad solref: ValueError."""
    mujoco = pytest.importorskip("mujoco")
    sunk = {}
    for time in ("0.005", "0.05"):
        path, m, d = _written(tmp_path / f"drop_{time}.xml", _DROP.replace("TIME", time))
        d.qvel[2] = -1.0
        lowest = 1.0
        while d.time < 0.3 - 1e-9:
            mujoco.mj_step(m, d)
            lowest = min(lowest, d.qpos[2])
        for options in ({}, {"timeconst": 0.02}):
            scene = sd.Scene("drop")
            scene.add_robot(sd.load_mjcf(path))
            model, contact, q0 = scene.build(**options)
            traj = sd.simulate(model, q0, [0, 0, -1.0, 0, 0, 0], None, 0.3, 1e-3,
                               contact=contact, integrator="semi_implicit_euler")
            sunk[time, bool(options)] = 0.1 - traj.q[:, 2].min()
            if not options:
                assert abs(sunk[time, False] - (0.1 - lowest)) < 1e-3
                assert traj.q[-1, 2] == pytest.approx(d.qpos[2], abs=2e-6)
    assert sunk["0.005", False] == pytest.approx(4.0e-3, abs=2e-4)
    assert sunk["0.05", False] == pytest.approx(12.4e-3, abs=2e-4)
    assert sunk["0.005", True] == sunk["0.05", True] == pytest.approx(6.8e-3, abs=2e-4)
    scene = sd.Scene("stiff")
    scene.add_object("ball", collision.sphere(0.1), mass=1.0, position=(0, 0, 0.1),
                     surface=sd.sim.Surface(solref=(0.0005, 1.0)))
    scene.add_shape("world", collision.box((1, 1, 0.1)), xyz=(0, 0, -0.1), name="table",
                    surface=sd.sim.Surface(solref=(0.0005, 1.0)))
    model, contact, q0 = scene.build(ground=False)
    with pytest.warns(UserWarning, match="too large for the stiffness of the stabilisation of "
                                         "'ball|table' \\(its solref\\)"):
        sd.simulate(model, q0, None, None, 0.01, 1e-3, contact=contact,
                    integrator="semi_implicit_euler")
    margins = {  # the ball's geom, the floor's, a <pair>; where the ball rests, less its sink
        "margin": ('margin="0.01"', "", "", 0.11),
        "margins": ('margin="0.01" gap="0.003"', ' margin="0.02" gap="0.004"', "", 0.13),
        "pair": ('margin="0.01" contype="0" conaffinity="0"', "",
                 '<contact><pair geom1="floor" geom2="ball" margin="0.015" gap="0.005"/>'
                 '</contact>', 0.115)}
    for name, (ball, floor, pair, rest) in margins.items():
        text = (_DROP.replace('solref="TIME 1"', ball)
                .replace('size="5 5 0.1"/>', f'size="5 5 0.1"{floor}/>')
                .replace("</worldbody>", "</worldbody>" + pair))
        path, m, d = _written(tmp_path / f"{name}.xml", text)
        while d.time < 1.0 - 1e-9:
            mujoco.mj_step(m, d)
        scene = sd.Scene(name)
        scene.add_robot(sd.load_mjcf(path))
        model, contact, q0 = scene.build()
        traj = sd.simulate(model, q0, None, None, 1.0, 1e-3, contact=contact,
                           integrator="semi_implicit_euler")
        assert traj.q[-1, 2] == pytest.approx(rest - soft_sink(), abs=1e-9), name
        assert d.qpos[2] == pytest.approx(traj.q[-1, 2], abs=1e-9), name
    for bad in ((0.02,), (0.02, -1.0), (float("nan"), 1.0)):
        with pytest.raises(ValueError, match="Surface.solref must be"):
            sd.sim.Surface(solref=bad)


_MIXED = """<mujoco model="mixed">
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" solimp="0.85 0.9 0.002" solmix="2"/>
    <body name="a" pos="0 0 0.099"><freejoint/>
      <geom name="a" size="0.1" mass="1" friction="0.4" solref="0.01 1.2"
            solimp="0.95 0.99 0.003 0.4 3"/></body>
    <body name="b" pos="0.31 0 0.099"><freejoint/>
      <geom name="b" size="0.1" mass="1" friction="1.1" solref="0.03 0.8"
            solimp="0.7 0.8 0.01 0.6 1" priority="2"/></body>
    <body name="c" pos="0 0.5 0.099"><freejoint/>
      <geom name="c" size="0.1" mass="1" solmix="0" solref="-5000 -40"/></body>
    <body name="e" pos="0.155 0 0.099"><freejoint/>
      <geom name="e" type="box" size="0.05 0.05 0.1" mass="1" condim="1" solmix="0.5"
            margin="0.01"/></body>
  </worldbody>
</mujoco>"""


def test_a_pairs_softness_is_mixed_from_its_geoms_as_mujoco_mixes_them(tmp_path):
    """Each pair's friction, solref and solimp are MuJoCo's own mix of its two geoms'
    (``mj_contactParam``, read from mj_forward's contacts): of equal priority, solref and
    solimp weighted by solmix (the floor's 2 against a ball's 1; a geom of solmix 0 gives way;
    a direct solref, the elementwise least), friction the larger (a frictionless box's
    condim 1 meets a ball's 3: friction); of different priority, the higher geom's friction,
    solref and solimp. The box is within its margin of the balls beside it, the balls and the
    box touch the floor: every pair MuJoCo finds is checked."""
    mujoco = pytest.importorskip("mujoco")
    from screwdyn.sim.surface import stabilisation

    path, m, d = _written(tmp_path / "mixed.xml", _MIXED)
    mujoco.mj_forward(m, d)
    theirs = {}
    for c in d.contact[:d.ncon]:
        names = frozenset(m.geom(g).name for g in (c.geom1, c.geom2))
        theirs[names] = (float(c.friction[0]) if c.dim > 1 else 0.0, stabilisation(c.solref),
                         tuple(float(x) for x in c.solimp))
    assert len(theirs) == 6  # four on the floor, the box with a and b
    scene = sd.Scene("mixed")
    scene.add_robot(sd.load_mjcf(path))
    model, contact, q0 = scene.build()
    resolved = contact.resolve(model)
    ours = {}
    for i, (a, _, b, _) in enumerate(resolved._pair_of):
        names = frozenset(x.split("/")[-1] for x in (a.name, "floor" if b is None else b.name))
        ours[names] = (resolved.point_friction[i], resolved.point_stabilisation[i],
                       resolved.point_impedance[i].as_tuple())
    for names, (friction, (k, b), solimp) in theirs.items():
        mine = ours[names]
        assert mine[0] == pytest.approx(friction, abs=1e-12), names
        assert mine[1] == pytest.approx((k, b), rel=1e-12), names
        assert mine[2] == pytest.approx(solimp, abs=1e-12), names
    for bad, match in (({"solimp": (0.9, 1.2)}, "dmax"), ({"solimp": (0.9,)}, "solimp"),
                       ({"solimp": (0.9, 0.95, -1)}, "width"),
                       ({"solimp": (0.9, 0.95, 0.001, 1.0)}, "midpoint"),
                       ({"solimp": (0.9, 0.95, 0.001, 0.5, 0.5)}, "power"),
                       ({"solmix": -1}, "solmix"), ({"priority": 1.5}, "priority")):
        with pytest.raises(ValueError, match=f"Surface.*{match}"):
            sd.sim.Surface(**bad)


def test_dm_control_manipulator_in_a_scene_moves_as_in_mujoco():
    """dm_control's manipulator put into a scene as it is (its world, its geoms' friction and
    solref, its joints' damping integrated implicitly), passive for 0.5 s at 1 ms beside
    mj_step's Euler: the ball rolls off and spins at mj_step's rate (-53.7 rad/s, 1% apart) and
    the final state is mj_step's within 0.05 (rad, m); with the scene's friction and
    stabilisation for all and no damping, as before, the spin was 7.8 rad off."""
    mujoco = pytest.importorskip("mujoco")
    path = _dm_control("manipulator")
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.timestep = 1e-3
    d = mujoco.MjData(m)
    while d.time < 0.5 - 1e-9:
        mujoco.mj_step(m, d)
    scene = sd.Scene("manipulator")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its meshes are capsules
        scene.add_robot(sd.load_mjcf(path, joint_damping=True))
        model, contact, q0 = scene.build()
    assert model.joint_names == tuple(m.joint(j).name for j in range(m.njnt))
    traj = sd.simulate(model, q0, None, None, 0.5, 1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    spin = model.joint_names.index("ball_y")
    assert d.qvel[spin] < -50.0
    assert traj.qd[-1, spin] == pytest.approx(d.qvel[spin], rel=0.01)
    assert np.abs(traj.q[-1] - d.qpos).max() < 0.05


def test_an_mjcf_world_without_a_floor_has_no_ground():
    """gymnasium's inverted pendulum has no floor (its file comments it out), and its cart sits
    at z = 0: MuJoCo has no ground there, and neither has the scene by default (a warning says
    so; at z = 0 the cart would start 10 cm inside one, and the run diverged at step 0). No pair
    can touch (its geoms have contype 0), as in MuJoCo (ncon 0 all along): 0.5 s from the pole
    at 0.1 rad, RK4 at 1 ms, equal mj_step's to 1e-9 (joint damping read, as MuJoCo has it).
    ground=True puts the plane back."""
    mujoco = pytest.importorskip("mujoco")
    path = _gymnasium("inverted_pendulum")
    m, d = _at_qpos0(path)
    m.opt.timestep = 1e-3
    d.qpos[1] = 0.1
    contacts = 0
    while d.time < 0.5 - 1e-9:
        mujoco.mj_step(m, d)
        contacts += d.ncon
    assert contacts == 0
    robot = sd.load_mjcf(path, joint_damping=True)
    scene = sd.Scene("pendulum")
    scene.add_robot(robot)
    with pytest.warns(UserWarning, match="no ground: the world of inverted_pendulum.xml has no "
                                         "floor"):
        with pytest.warns(UserWarning, match="no two shapes can touch"):
            model, contact, q0 = scene.build()
    assert contact is None
    q0[1] = 0.1
    traj = sd.simulate(model, q0, t_final=0.5, dt=1e-3, contact=contact, integrator="rk4")
    assert np.abs(traj.q[-1] - d.qpos).max() < 1e-9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        contact = scene.build(ground=True)[1]
    assert contact.ground and any("|ground#" in label for label in contact.resolve(model).labels)


def test_an_mjcf_file_whose_geoms_collide_with_nothing_goes_in_without_shapes():
    """gymnasium's swimmer: every geom has contype = conaffinity = 0 (its floor too), so MuJoCo
    finds no contact; in a scene it comes in with no shape and a warning saying why (it was a
    ModelError, "no collision element"), and build returns no contact. Asked for the shapes of
    given links (links=), it stays a ModelError: there are none."""
    mujoco = pytest.importorskip("mujoco")
    path = _gymnasium("swimmer")
    m, d = _at_qpos0(path)
    assert not (np.any(m.geom_contype) or np.any(m.geom_conaffinity))
    scene = sd.Scene("swimmer")
    with pytest.warns(UserWarning, match="no geom of .*swimmer.xml collides"):
        assert scene.add_robot(sd.load_mjcf(path)) == []
    with pytest.warns(UserWarning, match="no two shapes can touch"):
        model, contact, q0 = scene.build()
    assert contact is None and model.nv == m.nv
    with pytest.raises(sd.ModelError, match="swimmer.xml has no collision element on links"):
        sd.Scene("swimmer").add_robot(sd.load_mjcf(path), links=["torso"])


def test_a_scene_keeps_its_robots_gravity(tmp_path):
    """A scene's model has its robots' gravity: gymnasium's pusher (<option gravity="0 0 0">)
    stays where it starts, as in mj_step, where it fell under Earth's gravity (its shoulder
    1.4 rad down in 1 s). Scene(gravity=...) sets another; robots whose files disagree are a
    ValueError naming them, as a gravity that is not 3 finite numbers is."""
    mujoco = pytest.importorskip("mujoco")
    path = bundled_mjcf("gymnasium", "pusher")
    if path is None:
        pytest.skip("gymnasium is not installed")
    pusher = sd.load_mjcf(path)
    assert pusher.gravity == (0.0, 0.0, 0.0)
    scene = sd.Scene("pusher")
    scene.add_robot(pusher)
    model, contact, q0 = scene.build()
    assert model.gravity == (0.0, 0.0, 0.0)
    traj = sd.simulate(model, q0, t_final=1.0, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler")
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.timestep = 1e-3
    d = mujoco.MjData(m)
    for _ in range(1000):
        mujoco.mj_step(m, d)
    np.testing.assert_allclose(traj.q[-1], d.qpos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(traj.q[-1], q0, rtol=0, atol=1e-12)
    moon = sd.Scene("moon", gravity=(0, 0, -1.62))
    moon.add_robot(pusher)
    assert moon.build()[0].gravity == (0.0, 0.0, -1.62)
    mixed = sd.Scene("mixed")
    mixed.add_robot(pusher)
    ball = tmp_path / "ball.xml"  # MuJoCo's default gravity
    ball.write_text('<mujoco><worldbody><body name="ball" pos="0 0 1"><freejoint/>'
                    '<geom size="0.1"/></body></worldbody></mujoco>')
    mixed.add_robot(sd.load_mjcf(str(ball)), prefix="b/")
    with pytest.raises(ValueError, match="its robots' gravities differ .*pusher.xml: "
                                         "\\(0.0, 0.0, 0.0\\).*gravity=\\.\\.\\."):
        mixed.build()
    for bad in ((0, -9.81), (0, 0, float("nan")), "down"):
        with pytest.raises(ValueError, match="gravity must be 3 finite numbers"):
            sd.Scene("bad", gravity=bad)


def test_a_robots_ellipsoids_collide_with_its_other_shapes(tmp_path):
    """A robot whose links carry an ellipsoid and a cylinder (dm_control's dog and its target;
    its ellipsoids against each other on the CMU humanoid, the rodent, the fruit fly) goes into
    a scene and the pair is collided: add_robot's overlap check at q raised "collision between
    'ellipsoid' and 'cylinder' is not supported" before the ellipsoid had those pairs, and it
    now skips any pair ``collision`` has no method for (build leaves such a pair out with a
    warning)."""
    path = tmp_path / "arm.xml"
    path.write_text(
        '<mujoco><worldbody><geom type="plane" size="5 5 0.1"/>'
        '<body name="upper" pos="0 0 1.2"><joint name="shoulder" axis="0 1 0"/>'
        '<geom type="ellipsoid" size="0.1 0.05 0.3" pos="0 0 -0.3"/>'
        '<body name="middle" pos="0 0 -0.6"><joint name="elbow" axis="0 1 0"/>'
        '<geom type="capsule" size="0.03 0.1" pos="0 0 -0.1"/>'
        '<body name="lower" pos="0 0 -0.2"><joint name="wrist" axis="0 1 0"/>'
        '<geom type="cylinder" size="0.04 0.25" pos="0 0 -0.25"/></body></body></body>'
        '</worldbody></mujoco>')
    scene = sd.Scene("arm")
    scene.add_robot(sd.load_mjcf(str(path)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, contact, q0 = scene.build()
        pairs = {frozenset((x.name, y.name)) for x, _, y, _ in contact.resolve(model).pairs
                 if y is not None}
    assert frozenset(("upper/ellipsoid0", "lower/cylinder0")) in pairs
    traj = sd.simulate(model, q0 + 0.5, t_final=0.01, dt=1e-3, contact=contact)
    assert np.all(np.isfinite(traj.q))


def test_an_mjcf_files_primitives_that_overlap_at_the_start_touch():
    """gymnasium's humanoidstandup lies with its hands on its hips and thighs (up to 1.35 cm
    in) and its forearms on its hips, all capsules and spheres: MuJoCo's own shapes, so by
    default (``keep_overlapping=None``) and with ``keep_overlapping=True`` the file's filters
    alone decide, as MuJoCo's: the self pairs that overlap at qpos0 are mj_collision's, at
    its depths to 1e-9 m; ``keep_overlapping=False`` leaves every overlapping pair out."""
    mujoco = pytest.importorskip("mujoco")
    path = bundled_mjcf("gymnasium", "humanoidstandup")
    if path is None:
        pytest.skip("gymnasium is not installed")
    robot = sd.load_mjcf(path)
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    theirs = {}
    for c in d.contact[:d.ncon]:
        if m.geom_bodyid[c.geom1] and m.geom_bodyid[c.geom2] and c.dist < 0:  # not the floor
            key = frozenset(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)
                            for g in (c.geom1, c.geom2))
            theirs[key] = max(theirs.get(key, -np.inf), -c.dist)
    assert len(theirs) == 6 and max(theirs.values()) > 0.013
    for keep in (False, None, True):
        scene = sd.Scene("standup")
        scene.add_robot(robot, keep_overlapping=keep)
        model, contact, q0 = scene.build(ground=False)
        resolved, depth = _depths(contact, model, q0)
        ours, start = {}, 0
        for (a, _, b, _), K in zip(resolved.pairs, resolved.counts):
            deepest = depth[0, start:start + K].max()
            start += K
            if deepest > 1e-12:
                ours[frozenset(s.name.split("/")[1] for s in (a, b))] = deepest
        if keep is False:
            assert not set(ours) & set(theirs)
            continue
        assert set(ours) == set(theirs)
        for key, value in theirs.items():
            assert ours[key] == pytest.approx(value, abs=1e-9)


def _on_a_table(tmp_path, body, asset=""):
    """(path, mj_step's qpos (501, nq) over 0.5 s at Euler 1 ms) of an MJCF file of ``body``
    (with its ``asset``) over a table, a box welded to the world whose top is at z = 0.42 m,
    on a floor."""
    mujoco = pytest.importorskip("mujoco")
    path = tmp_path / "table.xml"
    path.write_text(f"""<mujoco model="table">
  <option timestep="0.001" integrator="Euler"/>
  <asset>{asset}</asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="table" pos="0 0 0.4">
      <geom name="top" type="box" size="0.4 0.4 0.02"/>
    </body>{body}
  </worldbody>
</mujoco>""")
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    reference = [d.qpos.copy()]
    for _ in range(500):
        mujoco.mj_step(m, d)
        reference.append(d.qpos.copy())
    return path, np.array(reference)


def _on_the_table(path, **options):
    """screwdyn's 0.5 s of ``_on_a_table``'s file (``Scene.add_robot(robot, **options)``,
    MuJoCo's inverse weights and cone, 500 sweeps, semi-implicit Euler at 1 ms)."""
    scene = sd.Scene("table")
    scene.add_robot(sd.load_mjcf(str(path)), **options)
    model, contact, q0 = scene.build(cone="pyramidal", invweight0=True, margin=0.0,
                                     iterations=500)
    return sd.simulate(model, q0, t_final=0.5, dt=1e-3, contact=contact,
                       integrator="semi_implicit_euler")


def test_an_object_set_into_a_table_welded_to_the_world_rests_on_it_as_in_mujoco(tmp_path):
    """metaworld's scenes set their objects on a table, a body welded to the world, a few
    millimetres into it (the hammer 1.8 cm, the basketball 1e-5 m): a hammer whose handle
    starts 5 mm and head 2.5 mm into the table top is pressed out and rests on it, its 0.5 s
    equal to mj_step's (Euler 1 ms, MuJoCo's inverse weights, 500 sweeps) to 1e-12; before,
    the overlapping pairs were left out and it fell through the table to the floor, as it
    still does with ``keep_overlapping=False``. A keep_overlapping that is not None, True or
    False: ValueError."""
    path, reference = _on_a_table(tmp_path, """
    <body name="hammer" pos="0 0 0.435">
      <freejoint/>
      <geom name="handle" type="capsule" fromto="-0.1 0 0 0.08 0 0" size="0.02" mass="0.2"/>
      <geom name="head" type="box" pos="0.1 0 0" size="0.02 0.05 0.0175" mass="0.5"/>
    </body>""")
    rests = _on_the_table(path)
    np.testing.assert_allclose(rests.q, reference, rtol=0, atol=1e-12)
    assert rests.q[-1, 2] == pytest.approx(0.4398, abs=1e-4)  # pressed 4.8 mm up, at rest
    assert _on_the_table(path, keep_overlapping=False).q[-1, 2] < 0.1  # on the floor
    with pytest.raises(ValueError, match="keep_overlapping must be None .*, True or False, "
                                         "got 'yes'"):
        sd.Scene("bad").add_robot(sd.load_mjcf(str(path)), keep_overlapping="yes")


def test_a_mesh_set_into_a_table_rests_on_it_as_its_hull(tmp_path):
    """metaworld's box scene sets its lid, a mesh, 0.7 mm into its box: a 0.3 kg plate (a
    mesh) set 0.7 mm into a table top rests on it as its hull (``meshes="hull"``, inside
    MuJoCo's), 0.5 s within 5e-5 m of mj_step's (its own mesh collision; 1.5e-5 measured),
    and the run's energy check passes (the contact lifting the plate out of the table gives
    out the work of its weight through the depth, ``penetration_energy``: the check stopped
    this run at step 100). As a capsule around the mesh (larger than it, the default), the
    overlapping pair is left out and the plate falls through the table."""
    path, reference = _on_a_table(tmp_path, """
    <body name="lid" pos="0 0 0.4293">
      <freejoint/>
      <geom name="plate" type="mesh" mesh="plate" mass="0.3"/>
    </body>""", asset="""
    <mesh name="plate" vertex="-0.1 -0.1 -0.01  0.1 -0.1 -0.01  0.1 0.1 -0.01  -0.1 0.1 -0.01
                               -0.1 -0.1 0.01   0.1 -0.1 0.01   0.1 0.1 0.01   -0.1 0.1 0.01"/>""")
    rests = _on_the_table(path, meshes="hull")
    np.testing.assert_allclose(rests.q, reference, rtol=0, atol=5e-5)
    assert rests.meta["penetration_energy"] == pytest.approx(0.3 * 9.81 * 7e-4, rel=1e-3)
    assert rests.q[-1, 2] == pytest.approx(0.4299, abs=1e-4)  # pressed 0.6 mm up, at rest
    assert _on_the_table(path, meshes="capsule").q[-1, 2] < 0.2  # through the table
