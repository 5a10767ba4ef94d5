"""Robot collision meshes as shapes (issue 24 item 3): ``collision.capsule_around`` (the capsule
that holds a mesh's vertices), ``collision.convex(points, max_corners)`` (a coarser hull) and
``Scene.add_robot(meshes=...)``, which stands each mesh of a URDF or MJCF robot for one of them.

Checked against independent readers: Pinocchio's collision model (its meshes read by assimp into
coal, placed by ``updateGeometryPlacements``) and MuJoCo's compiled mesh geoms (placed by
``mj_forward``): every vertex of every mesh, at random configurations, is inside the shape that
stands for it, in the world. A known capsule's surface points give that capsule back."""
import os
import warnings

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.sim import collision

from conftest import erd_urdf

UR5 = "ur_description/urdf/ur5_robot.urdf"
PANDA = "panda_description/urdf/panda.urdf"


def _outside_capsule(points, capsule, R, c):
    """How far each point (n, 3) is outside the capsule at (R, c) (m; negative: inside)."""
    local = (points - c) @ R
    z = np.clip(local[:, 2], -capsule.half_length, capsule.half_length)
    return np.linalg.norm(local - np.c_[0 * z, 0 * z, z], axis=1) - capsule.radius


def _capsule_surface(radius, half_length, n, rng):
    """n points on the side and n on the caps of a capsule about z."""
    angle = rng.uniform(0, 2 * np.pi, n)
    side = np.c_[radius * np.cos(angle), radius * np.sin(angle),
                 rng.uniform(-half_length, half_length, n)]
    u = rng.normal(size=(n, 3))
    u /= np.linalg.norm(u, axis=1)[:, None]
    caps = radius * u + np.c_[0 * u[:, :2], np.sign(u[:, 2]) * half_length]
    return np.r_[side, caps]


def _turn(rng):
    q = rng.normal(size=4)
    x, y, z, w = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def test_capsule_around_finds_a_capsule_and_a_sphere():
    """A capsule's own surface points, turned and moved: the fit is that capsule (radius and
    length to 0.5%, axis to 1 mrad); a sphere's: a sphere (no segment); every point inside."""
    rng = np.random.default_rng(3)
    for _ in range(3):
        R0, c0 = _turn(rng), rng.normal(size=3)
        points = _capsule_surface(0.05, 0.2, 1500, rng) @ R0.T + c0
        capsule, R, c = collision.capsule_around(points)
        assert capsule.radius == pytest.approx(0.05, rel=5e-3)
        assert capsule.half_length == pytest.approx(0.2, rel=5e-3)
        assert abs(R[:, 2] @ R0[:, 2]) > np.cos(1e-3)
        np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-12)
        assert np.linalg.det(R) == pytest.approx(1.0)
        assert _outside_capsule(points, capsule, R, c).max() <= 1e-12
    ball = rng.normal(size=(2000, 3))
    ball = 0.1 * ball / np.linalg.norm(ball, axis=1)[:, None] + 1.0
    capsule, R, c = collision.capsule_around(ball)
    assert capsule.half_length == 0.0 and capsule.radius == pytest.approx(0.1, rel=1e-4)
    np.testing.assert_allclose(c, 1.0, atol=1e-4)
    capsule, _, c = collision.capsule_around([[0.0, 0.0, 1.0]])  # one point: a tiny sphere
    assert capsule.radius < 1e-9 and np.allclose(c, [0, 0, 1])
    for bad in ([1.0, 2.0, 3.0], [[np.nan, 0, 0]], np.zeros((0, 3)), np.zeros((4, 2))):
        with pytest.raises(ValueError, match=r"points must be \(n >= 1, 3\) finite"):
            collision.capsule_around(bad)


def test_coarse_hull_is_inside_and_close():
    """``convex(points, max_corners)``: at most that many corners, each a corner of the full
    hull, so the coarse hull is inside it; the full hull's corners come closer to it as it is
    allowed more (a robot mesh: within 12 mm at 24 corners, 7 mm at 32)."""
    trimesh = pytest.importorskip("trimesh")
    path = os.path.join(os.path.dirname(erd_urdf(PANDA)), "..", "meshes", "collision",
                        "link3.stl")
    points = np.asarray(trimesh.load(path, force="mesh").vertices, dtype=float)
    with pytest.warns(UserWarning, match="corners"):
        full = collision.convex(points)
    corners = np.array(full.vertices)
    gaps = []
    for k in (8, 16, 24, 32):
        coarse = collision.convex(points, max_corners=k)
        V = np.array(coarse.vertices)
        assert 4 <= len(V) <= k
        assert all(np.min(np.linalg.norm(corners - v, axis=1)) == 0.0 for v in V)
        planes = np.array(coarse.planes)
        gaps.append(np.max(corners @ planes[:, :3].T - planes[:, 3], axis=1).max())
    assert gaps == sorted(gaps, reverse=True) and gaps[2] < 0.012 and gaps[3] < 0.007
    box = np.array([[x, y, z] for x in (0, 1) for y in (0, 2) for z in (0, 3)], dtype=float)
    assert len(collision.convex(box, max_corners=8).vertices) == 8  # already coarse: the same
    for bad in (3, 2.5, "8"):
        with pytest.raises(ValueError, match="max_corners must be an int >= 4"):
            collision.convex(box, max_corners=bad)


def _pinocchio_meshes(urdf, nq):
    """(pinocchio model, data, geometry model, geometry data, {link: [geometry indices of its
    meshes, in file order]}) of a URDF's collision meshes (assimp into coal)."""
    pin = pytest.importorskip("pinocchio")
    root = urdf
    for _ in range(5):  # share/example-robot-data/robots/NAME/urdf/x.urdf: share, which
        root = os.path.dirname(root)  # holds package://example-robot-data
    model = pin.buildModelFromUrdf(urdf)
    geometry = pin.buildGeomFromUrdf(model, urdf, pin.GeometryType.COLLISION,
                                     package_dirs=[root])
    assert model.nq == nq
    meshes = {}
    for k, g in enumerate(geometry.geometryObjects):
        if g.meshPath and os.path.isfile(g.meshPath):
            link = model.frames[g.parentFrame].name
            meshes.setdefault(link, []).append(k)
    return model, model.createData(), geometry, pin.GeometryData(geometry), meshes


@pytest.mark.parametrize("relative", [UR5, PANDA])
def test_robot_meshes_are_held_by_their_capsules_and_hulls(relative):
    """Every collision mesh of the UR5 and the Panda (example-robot-data) becomes a capsule (or
    a hull of at most 24 corners) on its link; at five random configurations every vertex of
    the mesh, as Pinocchio and coal read and place it, is inside its capsule, to 1e-9 m; each
    hull corner is one of those vertices and no vertex is more than 12 mm outside the hull."""
    pin = pytest.importorskip("pinocchio")
    urdf = erd_urdf(relative)
    robot = sd.load_urdf(urdf)
    pmodel, pdata, geometry, gdata, meshes = _pinocchio_meshes(urdf, robot.nq)
    scenes = {}
    for mode in ("capsule", "hull"):
        scene = sd.Scene(mode)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # every mesh read, none too big: no warning
            names = scene.add_robot(robot, meshes=mode)
        from_meshes = [s for s in scene.shapes if "/mesh" in s.name]
        assert len(from_meshes) == sum(len(v) for v in meshes.values())
        assert len(names) == len(scene.shapes)
        scenes[mode] = scene
    model, _, _ = scenes["capsule"].build()
    rng = np.random.default_rng(7)
    for _ in range(5):
        q = rng.uniform(-1.5, 1.5, robot.nq)
        pin.forwardKinematics(pmodel, pdata, q)
        pin.updateGeometryPlacements(pmodel, pdata, geometry, gdata)
        T = np.asarray(sd.forward_kinematics(model, q))
        for mode, scene in scenes.items():
            for link, indices in meshes.items():
                shapes = [s for s in scene.shapes if s.name.startswith(f"{link}/mesh")]
                assert len(shapes) == len(indices)
                for shape, k in zip(shapes, indices):
                    placement = gdata.oMg[k]
                    vertices = (np.asarray(geometry.geometryObjects[k].geometry.vertices())
                                @ placement.rotation.T + placement.translation)
                    Tl = T[model.link_index(link)]
                    R = Tl[:3, :3] @ np.reshape(shape.rotation, (3, 3))
                    c = Tl[:3, :3] @ np.array(shape.translation) + Tl[:3, 3]
                    if mode == "capsule":
                        assert _outside_capsule(vertices, shape.shape, R, c).max() < 1e-9
                        continue
                    corners = np.array(shape.shape.vertices) @ R.T + c
                    assert len(corners) <= 24
                    nearest = np.min(np.linalg.norm(corners[:, None] - vertices[None], axis=2),
                                     axis=1)
                    assert nearest.max() < 1e-9
                    planes = np.array(shape.shape.planes)
                    normals = planes[:, :3] @ R.T
                    offsets = planes[:, 3] + normals @ c
                    assert np.max(vertices @ normals.T - offsets) < 0.012


def test_mjcf_mesh_geoms_are_held_by_their_capsules():
    """dm_control's Kinova Jaco arm (MJCF mesh geoms): every vertex of every mesh geom, placed
    by MuJoCo's mj_forward at random configurations, is inside the capsule that stands for it,
    placed by screwdyn's kinematics, to 1e-6 m (MuJoCo keeps vertices in float32)."""
    mujoco = pytest.importorskip("mujoco")
    site = os.path.dirname(os.path.dirname(mujoco.__file__))
    path = os.path.join(site, "dm_control", "third_party", "kinova", "jaco_arm.xml")
    if not os.path.isfile(path):
        pytest.skip("dm_control is not installed")
    robot = sd.load_mjcf(path)
    scene = sd.Scene("jaco")
    scene.add_robot(robot)
    model, _, _ = scene.build()
    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    geoms = [g for g in range(m.ngeom) if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH
             and m.geom_bodyid[g] > 0 and (m.geom_contype[g] or m.geom_conaffinity[g])]
    shapes = [s for s in scene.shapes if "/mesh" in s.name or s.name.split("/")[1] in
              {mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in geoms}]
    assert len(geoms) == len(shapes) == 6
    rng = np.random.default_rng(5)
    assert robot.nq == m.nq
    for _ in range(5):
        d.qpos[:] = rng.uniform(-2.0, 2.0, m.nq)
        mujoco.mj_forward(m, d)
        T = np.asarray(sd.forward_kinematics(model, d.qpos.copy()))
        for g, shape in zip(geoms, shapes):
            body = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, m.geom_bodyid[g])
            assert shape.link == body
            mesh = m.geom_dataid[g]
            start = m.mesh_vertadr[mesh]
            local = m.mesh_vert[start:start + m.mesh_vertnum[mesh]].astype(float)
            vertices = local @ d.geom_xmat[g].reshape(3, 3).T + d.geom_xpos[g]
            Tl = T[model.link_index(body)]
            R = Tl[:3, :3] @ np.reshape(shape.rotation, (3, 3))
            c = Tl[:3, :3] @ np.array(shape.translation) + Tl[:3, 3]
            assert _outside_capsule(vertices, shape.shape, R, c).max() < 1e-6


def test_a_mesh_only_arm_falls_and_comes_to_rest():
    """The UR5 (collision meshes only) put upright with its joints free, as capsules: the pair
    of its base and upper arm, which overlap about the shoulder at that pose, never touch (the
    others do); it folds under gravity onto itself and the floor, and after 3 s it lies still
    (its first four joints under 0.05 rad/s) with no contact deeper than 5 mm."""
    robot = sd.load_urdf(erd_urdf(UR5))
    scene = sd.Scene("ur5")
    q = np.array([0.0, -1.57, 0.0, -1.57, 0.0, 0.0])
    scene.add_robot(robot, q=q, exclude=[("shoulder_link", "ground")])  # it sits in the floor
    model, contact, q0 = scene.build(mu=0.8)
    pairs = {frozenset((a.name, "ground" if b is None else b.name))
             for a, _, b, _ in contact.resolve(model).pairs}
    assert frozenset(("base_link/mesh0", "upper_arm_link/mesh0")) not in pairs
    assert frozenset(("base_link/mesh0", "forearm_link/mesh0")) in pairs
    assert frozenset(("upper_arm_link/mesh0", "ground")) in pairs
    traj = sd.simulate(model, q0, None, None, 3.0, 1e-3, contact=contact)
    v, q_end = np.asarray(traj.qd[-1]), np.asarray(traj.q[-1])
    assert np.abs(v[:4]).max() < 0.05  # the wrist's last joints may keep turning: no friction
    resolved = contact.resolve(model)
    depth = np.asarray(resolved.depths(np, resolved.params(np),
                                       np.asarray(sd.forward_kinematics(model, q_end[None]))))
    assert depth.max() < 0.005
    assert np.abs(q_end - q0).max() > 0.5  # it did fall


def test_unreadable_meshes_are_named(tmp_path):
    """A mesh file that is missing, or that trimesh cannot read, is skipped with a warning
    naming the link, the file and why; with nothing left, a ModelError."""
    (tmp_path / "bad.stl").write_text("not a mesh")
    inertial = ('<inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" '
                'iyz="0"/></inertial>')
    urdf = tmp_path / "r.urdf"
    urdf.write_text(f'<robot name="r"><link name="a">{inertial}'
                    '<collision><geometry><mesh filename="gone.stl"/></geometry></collision>'
                    '<collision><geometry><mesh filename="bad.stl"/></geometry></collision>'
                    '</link></robot>')
    robot = sd.load_urdf(str(urdf), floating_base=True)
    with pytest.warns(UserWarning, match=r"2 collision mesh\(es\).*a \(gone.stl: not found "
                      r"\(looked in: .*\); a \(bad.stl: "), \
            pytest.raises(sd.ModelError, match="no collision element that can be used"):
        sd.Scene("r").add_robot(robot)
