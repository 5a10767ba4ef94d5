"""Scenes: a robot and objects (free bodies) with collision shapes, and the rigid contact between
every pair of shapes and with the ground, solved as ``RigidContact`` solves the ground's.

    scene = sd.Scene("stack")
    for i in range(3):
        scene.add_object(f"box{i}", collision.box((0.1, 0.1, 0.1)), mass=1.0,
                         position=(0, 0, 0.1 + 0.2 * i))
    model, contact, q0 = scene.build(mu=0.6)
    traj = sd.simulate(model, q0, contact=contact, integrator="semi_implicit_euler")

A ``Scene`` holds a ``ModelBuilder`` (``scene.builder``, its root link ``"world"``): a robot is
built into it with ``add_link``/``add_joint`` (fixed to the world, or on a free joint), objects
with ``add_object`` (a link on a free joint, its inertia that of a solid shape of its mass), and
collision shapes (``screwdyn.sim.collision``: sphere, capsule, box, cylinder, convex; a plane,
a wall, on the world or a link fixed to it) are attached to any link with ``add_shape``; a
loaded robot (URDF, MJCF) comes in with the collision shapes of its own file (an MJCF file's
world too: its floor, walls, rails, tables) with ``add_robot``. ``build`` returns the Model,
the contact settings (``ShapeContact``) and the initial configuration.

The pairs that can touch: every two shapes on different rigid bodies, except a body and its
parent in the tree joined by a joint that is not free (the usual adjacent-link filter: a link's
collision shape overlaps its parent's at the joint; an object on a free joint touches the
world's shapes; ``ShapeContact.touch_parent`` names the exceptions: MuJoCo's, for an MJCF
file) and two shapes both fixed to the world, and pairs ``ShapeContact.exclude`` names; and
every moving shape with the ground plane (``ground=True``, the plane z = ``height``).
A pair that can never touch is left out (a static broad phase, ``_reach``): a link whose joints
up to the world all turn about their origins (revolute, continuous, spherical) stays in a ball
about its top joint's origin at every q, and a pair whose two balls (a fixed shape's own; a
plane, the ground) stay more than 1 mm apart cannot touch (dm_control's finger: 12 of its 15
pairs, the ground 0.4 m below it among them). Each pair gives ``collision.contact_count``
candidate points (a box on the ground 8, two boxes 8, two spheres 1) whose depth, normal and
point ``collision.collide`` computes at every evaluation; the solver (``contact_solver``) is the
ground's, with the candidates' rows: the relative velocity of the two bodies' material points
along the normal and two tangents.
"""
import os
import warnings
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import NamedTuple, Optional

import numpy as np

from ..errors import LargeSceneWarning, ModelError, warn
from ..model.builder import ModelBuilder
from ..model.model import GRAVITY
from ..model.meshes import first_line
from . import collision
from .checks import gravity as check_gravity, positive
from .contact_solver import RigidContact, SolvedContact, runs
from .geometry import masks_collide
from .inverse_weights import link_inverse_weights
from .surface import Surface, mix, own as own_surface, stabilisation

#: scenes whose native program is larger than this (``ShapeContactModel.native_size``: per
#: candidate contact point, the degrees of freedom that move it) warn at ``build`` that they
#: compile for minutes (``LargeSceneWarning``). The program holds each point's rows, and one
#: sweep of the solver over them (a loop), over those degrees of freedom, so its size, time to
#: compile and memory grow with this sum, not with the points alone. Measured to the first
#: step (an empty program cache, 2 shared cores; size, points: native, JAX): a UR5 as capsules
#: (314, 61): 1.3 s; a Panda of capsules and a box (979, 127): 4.1 s; six stacked boxes (1,728,
#: 168): 8.4 s; panda.urdf's meshes as capsules and a box (2,663, 293): 12 s; Go2 (3,320,
#: 314): 14 s, JAX 85 s; Romeo (5,296, 368): 26 s, JAX 180 s; iCub (9,420, 688): 58 s and
#: 2.3 GB, JAX 253 s (and 18 ms a step, JAX's 85); Talos (45,068, 2,698): 7.9 min and 9.3 GB,
#: where JAX ran out of 22 GB after 12 minutes. So every scene runs natively, whatever its size
LARGE_SCENE = 12_000

#: the sliding friction coefficient of a pair when ``Scene.build`` is given no ``mu`` and
#: neither of its shapes has its own (objects, URDF links; MuJoCo's geoms default to 1)
DEFAULT_MU = 0.8


@dataclass(frozen=True)
class Shape:
    """A collision shape on a link: ``shape`` (``collision.sphere`` ...) at ``rotation`` (3x3,
    row-major, 9 numbers) and ``translation`` (3,) in the link's frame; ``surface``: how its
    contacts behave (``surface.Surface``: friction, condim, solref, margin; an MJCF geom's)."""

    name: str
    link: str
    shape: object
    rotation: tuple = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    translation: tuple = (0.0, 0.0, 0.0)
    surface: Surface = Surface()


def solid_inertia(shape, mass):
    """The rotational inertia (3, 3) about the centre (kg m^2) of a solid ``shape`` of
    ``mass`` (kg), in its frame (capsule and cylinder: axis z)."""
    if isinstance(shape, collision.Sphere):
        return np.eye(3) * 0.4 * mass * shape.radius ** 2
    if isinstance(shape, collision.Box):
        x, y, z = (2 * h for h in shape.half_sizes)
        return np.diag([y * y + z * z, x * x + z * z, x * x + y * y]) * mass / 12
    if isinstance(shape, collision.Cylinder):
        r, h = shape.radius, 2 * shape.half_length
        side = mass * (3 * r * r + h * h) / 12
        return np.diag([side, side, 0.5 * mass * r * r])
    if isinstance(shape, collision.Capsule):  # its cylinder and two half balls, one density
        r, h = shape.radius, 2 * shape.half_length
        m_c = mass * h / (h + 4.0 * r / 3.0)
        m_s = mass - m_c  # the two half balls: one ball's mass
        side = m_c * (h * h / 12 + r * r / 4) + m_s * (0.4 * r * r + h * h / 4 + 3 * h * r / 8)
        return np.diag([side, side, (0.5 * m_c + 0.4 * m_s) * r * r])
    if isinstance(shape, collision.Ellipsoid):
        a2, b2, c2 = (r * r for r in shape.radii)
        return np.diag([b2 + c2, a2 + c2, a2 + b2]) * 0.2 * mass
    if isinstance(shape, collision.Convex):
        volume, _, second = _polyhedron(shape)
        return (np.trace(second) * np.eye(3) - second) * mass / volume
    raise ValueError(f"no solid inertia for {shape!r}: give inertia=")


def solid_centre(shape):
    """The centre of mass (3,) (m) of a solid ``shape`` of uniform density, in its frame: the
    origin, but for a convex polytope (its points' frame) the hull's centroid."""
    if isinstance(shape, collision.Convex):
        return _polyhedron(shape)[1]
    return np.zeros(3)


def _polyhedron(shape):
    """Volume (m^3), centroid (3,) and second moment about the centroid (3, 3) (m^5) of a
    convex polytope's solid, from its outward triangles: the tetrahedra they make with the
    origin (signed volumes det/6; their integral of x x^T is det/120 (a a^T + b b^T + c c^T +
    s s^T), s = a + b + c)."""
    t = np.array(shape.triangles).reshape(-1, 3, 3)
    a, b, c = t[:, 0], t[:, 1], t[:, 2]
    det = np.einsum("ij,ij->i", a, np.cross(b, c))
    volume = det.sum() / 6.0
    s = a + b + c
    centre = (det[:, None] * s).sum(axis=0) / (24.0 * volume)
    second = sum(np.einsum("i,ij,ik->jk", det, v, v) for v in (a, b, c, s)) / 120.0
    return volume, centre, second - volume * np.outer(centre, centre)


class Scene:
    """A robot and objects with collision shapes (see the module docstring)."""

    def __init__(self, name: str = "scene", gravity=None):
        """``gravity`` (3,) (m/s^2, world frame) or None: the model's gravity; None: its robots'
        (``add_robot``: an MJCF file's ``<option gravity>``, gymnasium's pusher's 0), the same
        for all of them, else (no robot) ``GRAVITY``, (0, 0, -9.81)."""
        self.builder = ModelBuilder(name)
        self.gravity = None if gravity is None else check_gravity(gravity,
                                                                  f"Scene({name!r}) gravity")
        self._gravities = {}  # the robots' own: {source: gravity}
        self.builder.add_link("world")
        self.shapes = []
        self._poses = {}  # object name -> (position, quaternion xyzw)
        self._robots = []  # (model, prefix, q) of each add_robot
        self._excluded = set()  # frozensets of two shape names that never touch
        self._excluded_links = set()  # frozensets of two link names whose shapes never touch
        self._touch_parent = set()  # frozensets of two shape names: ShapeContact.touch_parent
        self._explicit = {}  # {two shape names: Surface} of a file's <contact><pair>s
        self._paired_only = set()  # shapes that touch only their <pair>s (contype 0)
        self._constraints, self._tendons, self._couple = [], [], False
        self._floor = None  # an MJCF file's floor (geometry.Floor), in the scene
        self._floorless = []  # the MJCF files added whose world has no floor
        self._impratios = []  # the MJCF files' <option impratio>
        self._refsafe = []  # the MJCF files' refsafe flags
        self._invweight0 = []  # (link, MuJoCo's body_invweight0) of the MJCF files' bodies

    def add_object(self, name, shape, mass, position=(0.0, 0.0, 0.0),
                   quaternion=(0.0, 0.0, 0.0, 1.0), inertia=None, surface=None):
        """A free body ``name`` of ``mass`` (kg) with the collision ``shape`` centred on its
        frame (a convex polytope: where its points are), starting at ``position`` (m) and
        ``quaternion`` (x, y, z, w) in the world; its centre of mass that of the solid shape
        of uniform density, and its inertia too unless ``inertia`` is given (3x3, kg m^2, about
        the centre of mass). ``surface``: as ``add_shape``'s."""
        positive(mass, f"Scene.add_object({name!r}) mass")
        if isinstance(shape, collision.Plane):
            raise ValueError(f"Scene.add_object({name!r}): a plane is infinite, not an object; "
                             "a wall is add_shape('world', collision.plane(), xyz=, rotation=)")
        pose = _pose(position, quaternion, f"Scene.add_object({name!r})")  # checked first
        inertia = solid_inertia(shape, mass) if inertia is None else inertia
        self.builder.add_link(name, mass=mass, com=solid_centre(shape), inertia=inertia)
        self.builder.add_joint(f"{name}_free", "free", "world", name)
        self._poses[name] = pose
        self.add_shape(name, shape, name=name, surface=surface)

    def add_shape(self, link, shape, xyz=(0.0, 0.0, 0.0), rotation=None, name=None,
                  surface=None):
        """The collision ``shape`` on ``link`` at ``xyz`` (m) and ``rotation`` (3x3) in the
        link's frame; ``surface``: how its contacts behave (a ``screwdyn.sim.Surface``:
        friction, condim, solref, margin, gap, as MuJoCo's geoms have them; None: none given;
        ``build`` says how a pair's are found). A ``collision.plane()`` (the half-space
        z <= 0 of its frame: a wall, a tilted floor) only on a link that does not move
        (``"world"``, or one welded to it; ``ModelError`` at ``build`` otherwise):
        ``add_shape("world", collision.plane(), xyz=(1, 0, 0), rotation=R)`` with R's third
        column (-1, 0, 0) is the wall x <= 1 m facing -x."""
        if not isinstance(shape, (collision.Sphere, collision.Capsule, collision.Box,
                                  collision.Cylinder, collision.Ellipsoid, collision.Convex,
                                  collision.Plane)):
            raise ValueError(f"a shape is a collision.sphere, capsule, box, cylinder, ellipsoid, "
                             f"convex or plane, got {shape!r}")
        if surface is not None and not isinstance(surface, Surface):
            raise ValueError(f"the surface of shape {name or link!r} is a screwdyn.sim.Surface, "
                             f"got {surface!r}")
        R = np.eye(3) if rotation is None else np.asarray(rotation, dtype=float).reshape(3, 3)
        name = name or f"{link}/{type(shape).__name__.lower()}{len(self.shapes)}"
        self.shapes.append(Shape(name, link, shape, tuple(R.ravel().tolist()),
                                 tuple(float(x) for x in xyz), surface or Surface()))

    def add_robot(self, model, q=None, position=(0.0, 0.0, 0.0),
                  quaternion=(0.0, 0.0, 0.0, 1.0), prefix="", shapes=True, links=None,
                  self_collision=True, exclude=(), srdf=None, meshes="capsule",
                  mesh_corners=24, world=True, keep_overlapping=None):
        """Put a loaded robot (a ``Model`` from ``sd.load_urdf`` or ``sd.load_mjcf``) into the
        scene, with the collision shapes of its own file; returns the names of the shapes added.

        The robot's bodies, joints (with their limits, armature, damping and friction), links,
        mimic relations, equality constraints and fixed tendons are copied into
        ``scene.builder`` under the names ``prefix + name``: its joints keep their order in the
        scene's q and v (after what was added before it), and ``build`` puts them at ``q``
        (the robot's own q, ``model.nq``; default ``model.q0``: an MJCF model's ``qpos0``,
        where the file places its bodies, as MuJoCo starts; ``model.neutral`` for others,
        e.g. ``q=model.reference_configurations["home"]`` for a keyframe). Its root frame sits at
        ``position`` (m) and ``quaternion`` (x, y, z, w) in the world: a fixed base is welded
        there, a floating base's q (its free joint) is measured from there. A root link named
        ``"world"`` (every MJCF model) is the scene's world (moved to ``position``), and an MJCF
        file's floor (the first plane of its world facing up that collides) is the scene's
        ground: ``build``'s default ``height``, its contype/conaffinity holding against the
        robot's geoms. The world's other geoms are shapes fixed to the world, as MuJoCo has
        them: its walls (its other planes: ``collision.plane()``), its rails and tables
        (primitives; a mesh is its hull, coarsened to ``mesh_corners``, unless ``meshes`` is
        ``"skip"``: a capsule around a table would swallow what stands on it). They are not
        the robot: ``self_collision=False`` keeps them, and they touch what they overlap at
        ``q``, as in MuJoCo. ``world=False`` leaves them out (the floor stays the ground): each
        is a pair with every moving shape that can reach it, and dm_control's quadruped's four
        ramps, 15 m away, add half to its scene's compile time and step. A file that turns
        contact off (``<option><flag contact="disable"/>``, dm_control's cartpole, pendulum,
        point mass, reacher) keeps MuJoCo's world without contact: its geoms touch neither each
        other nor its world (floor, walls), with a ``UserWarning``; they touch the scene's
        objects and other robots. ``ModelError`` when another file put the floor at another
        height.

        Shapes (``shapes=True``): the primitive collision geometry of ``model.source``
        (``sim.geometry.collision_geometry``: URDF ``<collision>`` box, sphere, cylinder,
        capsule; MJCF geoms sphere, capsule, box, cylinder, ellipsoid, those with contype =
        conaffinity = 0 left out as MuJoCo does), each a ``Shape`` named ``prefix + link + "/"
        +`` its name in the file (or its kind and number) at its origin in the link's frame
        (m). A cylinder capped by two spheres of its radius at its end faces (MoveIt's way of
        writing a capsule in URDF, e.g. ``panda_collision.urdf``) becomes one capsule. MJCF
        height fields are skipped with a ``UserWarning`` naming their links; an ellipsoid
        collides with every kind (``collision``'s pairs).
        ``links``: only the shapes on these links (robot link names). ``shapes=False``: none
        (declare them with ``add_shape(prefix + link, ...)``).

        Meshes (URDF ``<mesh>``, found as ROS finds ``package://`` files and read with
        trimesh; MJCF mesh geoms, MuJoCo's compiled vertices), named ``prefix + link + "/" +``
        their name in the file or ``"mesh"`` and their number, by ``meshes``:

        - ``"capsule"`` (default): the capsule that holds every vertex, of least volume found
          (``collision.capsule_around``; 1.4 to 2.4 times the hull's volume on the Panda's
          links, 1.6 to 1.9 on the UR5's arm, 5.7 on its flat base): two contact slots a pair,
          so a whole arm compiles and steps fast. Conservative: the robot touches a little
          early (up to centimetres where a link is far from a capsule, as an elbow housing is).
        - ``"hull"``: the convex hull of the vertices, coarsened to at most ``mesh_corners``
          corners (``collision.convex(points, max_corners)``: inside the full hull, within 4
          to 11 mm of it on those links at 24): the shape itself, but each pair costs its
          corners in slots (m + 11 against a box), so keep it to the few links that grasp or
          touch (``links=``), or the scene compiles for minutes.
        - ``"skip"``: none, with a ``UserWarning`` naming their links.

        A mesh file that is not found, cannot be read (a DAE needs pycollada) or (``"hull"``)
        spans no volume is skipped with a ``UserWarning`` naming the link, the file and why.
        Two of the robot's shapes that already overlap at ``q`` never touch each other where
        the file is a URDF, or one of them is a capsule standing in for an MJCF mesh (a link's
        capsule reaches into its neighbours' about their joints; a file's motor housings
        overlap by design, ANYmal's base and thighs by 2.5 mm, TIAGo's hand and its fingers by
        6 cm; MoveIt's setup assistant disables the pairs in collision at the default pose the
        same way): the contact would fight the joints from step 0, and throw the robot apart.
        An MJCF file's own primitives are MuJoCo's shapes, and its meshes' hulls
        (``meshes="hull"``) lie inside MuJoCo's: two of them touch however they overlap, as in
        MuJoCo, where only the file's filters decide (metaworld's hammer and basketball start
        up to 1.8 cm into their table, which holds them up, its box's lid, a mesh, 0.7 mm into
        the box, which holds it up as its hull; gymnasium's humanoidstandup lies with its hands
        1.35 cm into its hips and thighs, pressed apart from step 0). ``keep_overlapping``:
        None (default) this rule; True keeps every pair that overlaps (the capsules around
        meshes too); False leaves out every pair that overlaps, an MJCF file's primitives too.

        Which pairs touch: the scene's rule (module docstring: not a link and its parent across
        a joint that is not free), and: ``self_collision=False`` leaves out every pair of two of
        this robot's shapes; ``exclude``: pairs (link_a, link_b) of robot link names that never
        touch (``"ground"`` for the ground plane: ``exclude=[("panda_link1", "ground")]`` for a
        link whose shape dips into the floor it is mounted on); ``srdf``: an SRDF file whose
        ``<disable_collisions link1= link2=>`` pairs never touch (MoveIt's list of adjacent
        and never-colliding links); an MJCF model's own filters hold between its geoms
        (contype/conaffinity bit masks, ``<exclude>``, and MuJoCo's parent filter: its world
        and the bodies welded to it touch the bodies jointed to them, a cart its rail; with
        ``<flag filterparent="disable"/>`` every body touches its parent), and its
        ``<contact><pair>``s touch whatever those filters say (``exclude`` and
        ``self_collision=False`` still win; the pair's friction, solref and margin are read); a
        geom with contype = conaffinity = 0 touches only the pairs that name it. A geom's
        condim and its friction's torsional and rolling coefficients hold (``Surface``:
        condim 4, 6).

        Errors: ``ModelError`` when the model has no file (built in code, loaded from a
        string; use ``shapes=False`` and ``add_shape``), when its file (or ``links``) gives no
        shape (but an MJCF file whose geoms all have contype = conaffinity = 0 says nothing
        collides, as gymnasium's swimmer: a ``UserWarning``, and no shape); ``ValueError`` for
        a ``meshes`` not named above or ``mesh_corners`` not an int >= 4; when a link or joint
        name is already in the scene (give ``prefix``), or when a link of
        ``links``/``exclude``/``srdf`` is not the robot's.

        Example (a Panda arm of example-robot-data reaching over a box on the ground)::

            robot = sd.load_urdf(".../panda_description/urdf/panda_collision.urdf")
            scene = sd.Scene("reach")
            scene.add_robot(robot, srdf=".../panda_description/srdf/panda.srdf")
            scene.add_object("box", collision.box((0.05, 0.05, 0.05)), mass=0.5,
                             position=(0.5, 0.0, 0.05))
            model, contact, q0 = scene.build(mu=0.8)
        """
        from ..model.model import Model

        if not isinstance(model, Model):
            raise TypeError(f"Scene.add_robot takes a screwdyn Model (sd.load_urdf, "
                            f"sd.load_mjcf), got {type(model).__name__}")
        where = f"Scene.add_robot({model.name!r})"
        prefix = str(prefix)
        if keep_overlapping is not None and not isinstance(keep_overlapping, bool):
            raise ValueError(f"{where}: keep_overlapping must be None (an MJCF file's "
                             "primitives and hulls touch however they overlap, URDF shapes "
                             "and capsules around meshes do not), True or False, got "
                             f"{keep_overlapping!r}")
        q = _robot_q(model, q, where)
        T = _placement(position, quaternion, where)
        file_world = _file_world(model)
        found, excluded, floor = [], (), None
        if shapes:  # read first: a bad file changes nothing
            found, excluded, geometry = _robot_shapes(model, links, where, meshes, mesh_corners)
            floor, planes = self._file_floor(geometry, T, where)
            if links is None or model.root_link in links:  # the file's other floors: planes
                found += [_FileShape(model.root_link, collision.plane(), np.eye(3),
                                     np.array([0.0, 0.0, f.height]), f.name,
                                     (f.contype, f.conaffinity), False, f.geom, f.surface)
                          for f in planes]
            if not world:
                found = [f for f in found if f.link != file_world]
        own = not shapes or geometry.contact  # False: the file turns its contact off
        # the file's <contact><pair>s ({geom ids: Surface}), which MuJoCo checks
        # whatever the filters say
        explicit = {frozenset(p[:2]): p[2] for p in geometry.pairs} if shapes and own else {}
        pairs, user = set(), set()  # excluded link pairs; those the caller excludes
        for names, what, by_user in ((exclude, "exclude", True),
                                     (_srdf_pairs(srdf) if srdf else (), srdf, True),
                                     (excluded, f"{model.source} <exclude>", False)):
            for pair in names:
                a, b = (str(x) for x in pair)
                for link in (a, b):
                    if link not in model.link_names and link != "ground":
                        raise ModelError(f"{where}: {what}: {link!r} is not a link of the "
                                         f"robot (links: {', '.join(model.link_names[:8])}...)")
                pair = frozenset(x if x == "ground" else prefix + x for x in (a, b))
                pairs.add(pair)
                if by_user:
                    user.add(pair)
        self._graft(model, prefix, T, where)
        added = []
        for f in found:
            name, R, p = f"{prefix}{f.link}/{f.label}", f.R, f.p
            if prefix + f.link == "world":  # the scene's world: the file's world at T
                R, p = T[0] @ R, T[0] @ p + T[1]
            self.add_shape(prefix + f.link, f.shape, xyz=p, rotation=R, name=name,
                           surface=f.surface)
            added.append((name, prefix + f.link, f.bits, f.link == file_world,
                          model.links[model.link_index(f.link)].body, f.geom, f.mesh))
            if explicit and not any(f.bits):  # it touches only what a <pair> names
                self._paired_only.add(name)
        names = [a[0] for a in added]
        T_q = None
        if len(found) > 1:  # the links' poses at q
            from ..dynamics import forward_kinematics

            T_q = np.asarray(forward_kinematics(model, q))
        mjcf = shapes and geometry.format == "mjcf"
        for i, (a, link_a, bits_a, world_a, body_a, geom_a, mesh_a) in enumerate(added):
            for j, (b, link_b, bits_b, world_b, body_b, geom_b, mesh_b) in enumerate(
                    added[i + 1:], i + 1):
                environment = world_a or world_b  # the file's world: as MuJoCo, overlap or not
                # an overlap at q leaves the pair out unless it is meant (the docstring): a
                # URDF's, or a capsule's around an MJCF mesh (larger than MuJoCo's hull)
                overlap_excludes = not environment and (
                    keep_overlapping is False
                    or (keep_overlapping is None and (
                        not mjcf or ((mesh_a or mesh_b) and meshes == "capsule"))))
                paired = explicit.get(frozenset((geom_a, geom_b)))  # a <pair>'s Surface
                if (paired is not None and (self_collision or environment)
                        and frozenset((link_a, link_b)) not in user):
                    self._explicit[frozenset((a, b))] = paired
                elif (not own or (not self_collision and not environment)
                        or not masks_collide(bits_a, bits_b)
                        or frozenset((link_a, link_b)) in pairs
                        or (overlap_excludes
                            and _overlap(model, T_q, found[i], found[j]))):
                    self._excluded.add(frozenset((a, b)))
                elif (mjcf and _adjacent(model, body_a, body_b)
                      and (min(body_a, body_b) < 0 or not geometry.filterparent)):
                    # MuJoCo's parent filter spares its world (and what is welded to it)
                    self._touch_parent.add(frozenset((a, b)))
        if mjcf and not geometry.floors:
            self._floorless.append(os.path.basename(geometry.source))
        if mjcf:
            self._impratios.append(geometry.impratio)
            self._refsafe.append(geometry.refsafe)
            self._invweight0 += [(prefix + name, w) for name, w in geometry.invweight0]
        if floor is not None:  # the file's floor is the ground: its contype/conaffinity hold
            self._floor = floor
            for a, link, bits, _, _, geom, _ in added:
                paired = explicit.get(frozenset((geom, floor.geom)))
                if paired is not None and frozenset((link, "ground")) not in user:
                    self._explicit[frozenset((a, "ground"))] = paired
                elif not own or not masks_collide(bits, (floor.contype, floor.conaffinity)):
                    self._excluded.add(frozenset((a, "ground")))
        self._excluded_links.update(p for p in pairs if len(p) == 2)
        self._robots.append((model, prefix, q))
        self._gravities[model.source or model.name] = tuple(model.gravity)
        if not own:
            warnings.warn(f"{where}: {model.source} turns contact off (<option><flag contact="
                          "\"disable\"/> or constraint=): as in MuJoCo, its geoms touch neither "
                          "each other nor its world (floor, walls); they touch what else the "
                          "scene holds", UserWarning, stacklevel=2)
        return names

    def _file_floor(self, geometry, T, where):
        """(floor, planes): the floor an MJCF file declares, in the scene (the ``Floor`` of its
        first world plane facing up that collides, the first of them if none does, raised by
        the robot's placement ``T``; None without one: a URDF file, or a placement that tilts
        it), and the file's other floors that collide (``Floor``s in the file's world: planes
        fixed to the world, as its walls). ``ModelError`` when another file put the floor at
        another height."""
        R_T, p_T = T
        floors = list(geometry.floors)
        paired = {g for pair in geometry.pairs for g in pair[:2]}
        colliding = [f for f in floors if f.contype or f.conaffinity or f.geom in paired]
        chosen = (colliding or floors or [None])[0]
        planes = [f for f in colliding if f is not chosen]
        floor = None
        if chosen is not None and R_T[2, 2] > 1.0 - 1e-12:  # still facing up
            floor = replace(chosen, height=float(chosen.height + p_T[2]))
        elif chosen in colliding:
            planes.insert(0, chosen)
        if (floor is not None and self._floor is not None
                and floor.height != self._floor.height):
            raise ModelError(f"{where}: the floor of {geometry.source} ({floor.name!r}) is at "
                             f"z = {floor.height:g} m, the scene's ({self._floor.name!r}) at "
                             f"z = {self._floor.height:g} m: one ground for both; move the robot "
                             "(position=) or take its shapes only (links=)")
        return floor, planes

    def _graft(self, model, prefix, T, where):
        """Copy ``model``'s tree into the builder (see ``add_robot``)."""
        root_fixed = model.links[model.link_index(model.root_link)].body < 0
        # the root link is the scene's world (MJCF), or a link of its own welded to the world
        # at T, or (a floating base) moved by the first body, whose joint then sits at T
        merge_world = root_fixed and model.root_link == "world" and not prefix
        own_root = root_fixed and not merge_world
        skip = {"world"} if merge_world else set()
        new_links = [prefix + l for l in model.link_names if l not in skip]
        main = {b.link for b in model.bodies}
        fixed = [l for l in model.links if l.name not in main and l.name not in skip
                 and not (own_root and l.name == model.root_link)]
        new_joints = ([prefix + b.joint for b in model.bodies]
                      + [f"{prefix}{l.name}_fixed" for l in fixed]
                      + ([f"{prefix}{model.root_link}_mount"] if own_root else []))
        taken = ([n for n in new_links if self.builder.has_link(n)]
                 + [n for n in new_joints if self.builder.has_joint(n)])
        if taken:
            raise ModelError(f"{where}: the scene already has {', '.join(map(repr, taken[:4]))} "
                             "(an object or another robot): give the robot a prefix= "
                             "(add_robot(model, prefix='left/'))")
        if model.coupled:
            self._couple = True
        R_T, p_T = T
        b = self.builder
        if own_root:  # the links welded to the base, with their inertia
            mass, com, inertia = model.base_inertia
            b.add_link(prefix + model.root_link, mass=mass, com=com, inertia=inertia)
            b.add_joint(f"{prefix}{model.root_link}_mount", "fixed", "world",
                        prefix + model.root_link, xyz=p_T, rotation=R_T)

        def base(R, p):  # (parent link, R, p) of something placed in the root frame
            if own_root:
                return prefix + model.root_link, R, p
            return "world", R_T @ R, R_T @ p + p_T

        for body in model.bodies:
            b.add_link(prefix + body.link, mass=body.mass, com=body.com, inertia=body.inertia)
        for body in model.bodies:  # in body order: the scene's q keeps the robot's
            R = np.reshape(body.rotation, (3, 3))
            p = np.asarray(body.translation, dtype=float)
            if body.parent < 0:
                parent, R, p = base(R, p)
            else:
                parent = prefix + model.bodies[body.parent].link
            b.add_joint(prefix + body.joint, body.joint_model, parent, prefix + body.link,
                        xyz=p, rotation=R, armature=body.armature or 0.0,
                        damping=body.damping or 0.0,
                        coulomb=[list(c) for c in body.coulomb] if body.coulomb else 0.0)
        for link in fixed:  # the links welded to a body (or to the base) by fixed joints
            R = np.reshape(link.rotation, (3, 3))
            p = np.asarray(link.translation, dtype=float)
            if link.body >= 0:
                parent = prefix + model.bodies[link.body].link
            else:
                parent, R, p = base(R, p)
            b.add_link(prefix + link.name)
            b.add_joint(f"{prefix}{link.name}_fixed", "fixed", parent, prefix + link.name,
                        xyz=p, rotation=R)
        for m in model.mimic:
            b.add_mimic(prefix + m.joint, prefix + m.source, m.multiplier, m.offset)
        self._constraints += [_renamed(c, prefix) for c in model.constraints]
        self._tendons += [_renamed(t, prefix) for t in model.tendons + model.spatial_tendons]

    def build(self, mu=None, ground=None, height=None, **solver):
        """(model, contact, q0): the Model (the builder's, fixed base at the world), the
        contact settings (a ``ShapeContact``; ``mu``, ``ground``, ``height`` and the solver's
        ``RigidContact`` options: ``timeconst``, ``dampratio``, ``restitution``,
        ``iterations``, ``regularization``, ``impedance``, ``impratio``, ``cone``,
        ``invweight0``, ``margin``, ``refsafe``) and the initial configuration (the objects at
        their poses, the robots at their ``q``, every other joint at zero).
        ``height`` (m): the ground plane's z; default the floor of an MJCF file added with
        ``add_robot`` (its world plane facing up, e.g. gymnasium's pusher table at -0.325 m),
        else 0. ``ground``: whether that plane takes part; default yes, unless the scene's
        robots come from MJCF files whose worlds have no floor (gymnasium's inverted pendulum:
        MuJoCo has no ground there, and at z = 0 its cart would start 10 cm inside one), which
        a ``UserWarning`` says (``ground=True`` adds it). ``contact`` is None, with a
        ``UserWarning``, when no pair can touch.

        Each pair's friction, stabilisation and margin are its own, as MuJoCo mixes its two
        geoms' (``surface.mix``: its shapes' ``Surface``, an MJCF geom's or ``add_shape``'s;
        an MJCF floor's for the ground; a ``<contact><pair>``'s own), unless given here:
        ``mu`` sets every pair's sliding friction (None, the default: each pair's own, and
        ``DEFAULT_MU``, 0.8, for a shape that has none: an object, a URDF link, a ground of no
        file; a pair of condim 1 then slides too, one of condim 4 or 6 keeps its twist);
        ``torsion`` or ``rolling`` set every pair's torsional and rolling friction
        (``RigidContact.torsion``, ``rolling``; 0 where only the other is given; by default
        each pair's, from its surfaces' condim, none below 4); ``timeconst``, ``dampratio``
        or ``restitution`` set every pair's stabilisation, ``impedance`` every pair's
        impedance (by default each pair's solimp: an MJCF geom's, MuJoCo's (0.9, 0.95,
        0.001, 0.5, 2) unless the file sets one, so that a file's contacts are soft as in
        MuJoCo; rigid for shapes that have none).
        ``impratio``: the soft pairs' friction stiffness relative to their normal's
        (``RigidContact.impratio``); default the MJCF files' ``<option impratio>`` (the largest
        where they differ), MuJoCo's 1 for a scene of no file: a soft pair's friction is as
        soft as its normal, as in MuJoCo. ``cone``: the friction cone (``RigidContact.cone``):
        ``"elliptic"`` (the default, Coulomb's isotropic cone, whatever a file's ``<option
        cone>``), ``"convex"`` (MuJoCo's elliptic cone: normal and friction one convex
        problem) or ``"pyramidal"``, MuJoCo's default (its approximation: four edges).
        ``invweight0=True``: a soft pair's compliance
        scales MuJoCo's approximation of its rows' A_jj, its bodies' ``body_invweight0`` at the
        scene's start (an MJCF file's bodies: MuJoCo's own numbers), as MuJoCo's does
        (``RigidContact.invweight0``). ``refsafe``: MuJoCo's refsafe, each time constant at
        least 2 dt of the simulation's step (``RigidContact.refsafe``); default on for a
        scene of MJCF files (off where one disables it, ``<flag refsafe="disable"/>``), off
        for a scene of no file."""
        if height is None:
            height = self._floor.height if self._floor is not None else 0.0
        if ground is None:
            ground = self._floor is not None or not self._floorless
            if not ground:
                warnings.warn(f"scene {self.builder.name!r}: no ground: the world of "
                              f"{', '.join(self._floorless)} has no floor, as in MuJoCo "
                              "(build(ground=True) adds the plane z = height)", UserWarning,
                              stacklevel=2)
        model = self.builder.build(mimic="couple" if self._couple else "independent",
                                   gravity=self._scene_gravity())
        if self._constraints or self._tendons:
            model = model.with_constraints(*self._constraints, tendons=self._tendons)
        q0 = np.array(model.neutral, dtype=float)
        for name, (p, quat) in self._poses.items():
            k = model.joint_names.index(f"{name}_free")
            q0[model.q_slices[k]] = np.concatenate([p, quat])
        for robot, prefix, q in self._robots:
            for k, joint in enumerate(robot.joint_names):
                q0[model.q_slices[model.joint_names.index(prefix + joint)]] = \
                    q[robot.q_slices[k]]
        excluded = set(self._excluded)
        if self._excluded_links:
            by_link = {"ground": ["ground"]}
            for shape in self.shapes:
                by_link.setdefault(shape.link, []).append(shape.name)
            for pair in self._excluded_links:
                a, b = tuple(pair)
                excluded.update(frozenset((x, y)) for x in by_link.get(a, ())
                                for y in by_link.get(b, ()))
        everything = [shape.name for shape in self.shapes] + ["ground"]
        for name in self._paired_only:  # contype = conaffinity = 0: only its <pair>s
            excluded.update(frozenset((name, other)) for other in everything if other != name)
        excluded -= set(self._explicit)  # a file's <contact><pair>s, whatever the filters say
        shapes, floor = tuple(self.shapes), self._floor
        given = {}  # what build sets for every pair: the surfaces' own left out
        if mu is not None:
            given.update(friction=None)
        if {"timeconst", "dampratio", "restitution"} & set(solver):
            given.update(solref=None)
        if "impedance" in solver:
            given.update(solimp=None)
        if "impratio" not in solver and self._impratios:  # the files': the largest
            solver["impratio"] = max(self._impratios)
        if "refsafe" not in solver and self._refsafe:  # the files': where all have it
            solver["refsafe"] = all(self._refsafe)

        def kept(surface):
            condim = surface.condim
            if {"torsion", "rolling"} & set(solver):  # every pair's twist is the solver's
                condim = 1 if condim == 1 and mu is None else 3
            elif mu is not None:  # every pair slides with mu, and keeps its twist
                condim = max(condim, 3)
            return replace(surface, condim=condim, **given)

        shapes = tuple(replace(shape, surface=kept(shape.surface)) for shape in shapes)
        contact = ShapeContact(
            shapes=shapes, ground=ground,
            solver=RigidContact(mu=DEFAULT_MU if mu is None else mu, height=height, **solver),
            exclude=frozenset(excluded),
            touch_parent=frozenset(self._touch_parent | set(self._explicit)),
            ground_surface=Surface() if floor is None else kept(floor.surface),
            pair_surfaces=tuple((k, kept(v)) for k, v in self._explicit.items()),
            inverse_weights=tuple(self._invweight0), reference=tuple(q0.tolist()))
        resolved = ShapeContactModel(model, contact)  # contact.resolve, unless it has no pair
        if not resolved.pairs:
            warnings.warn(f"scene {self.builder.name!r}: no two shapes can touch, nor a shape "
                          "and the ground (their contype/conaffinity, exclude=, a file's floor "
                          "that nothing touches): build returns contact None, a simulation "
                          "without contact", UserWarning, stacklevel=2)
            return model, None, q0
        size = resolved.native_size
        if size > LARGE_SCENE:
            warn(f"scene {self.builder.name!r}: {sum(resolved.counts):,} candidate contact "
                 f"points in {len(resolved.pairs):,} pairs; each point times the degrees of "
                 f"freedom that move it (a third more a twist row: condim 4, 6): {size:,} "
                 f"(more than LARGE_SCENE = {LARGE_SCENE:,}). "
                 "Its program compiles for minutes and takes gigabytes the first time "
                 "(Talos's 45,068: 8 minutes, 9.3 GB). Fewer pairs make it smaller: "
                 "add_robot's links=, exclude=, srdf=, self_collision=False", LargeSceneWarning)
        return model, contact, q0

    def _scene_gravity(self):
        """The model's gravity: ``Scene(gravity=)``, else its robots' one gravity, else
        ``GRAVITY``; robots whose files disagree are a ``ValueError`` naming them."""
        if self.gravity is not None:
            return self.gravity
        distinct = set(self._gravities.values())
        if len(distinct) > 1:
            raise ValueError(f"scene {self.builder.name!r}: its robots' gravities differ ("
                             + ", ".join(f"{source}: {g}" for source, g in
                                         self._gravities.items())
                             + "); Scene(name, gravity=...) chooses the scene's")
        return distinct.pop() if distinct else GRAVITY


# -- robots from their files -------------------------------------------------------------------
_NO_SHAPES_HINT = ("put it into the scene without them (Scene.add_robot(model, shapes=False)) and "
                   "declare shapes on its links with Scene.add_shape(link, collision.box(...)) "
                   "(m, link frame)")


def _robot_q(model, q, where):
    if q is None:  # where the file places the robot (MJCF's qpos0), else neutral
        return np.array(model.q0, dtype=float)
    q = np.asarray(q, dtype=float)
    if q.shape != (model.nq,) or not np.isfinite(q).all():
        raise ValueError(f"{where}: q must be {model.nq} finite numbers (the robot's "
                         f"configuration), got shape {q.shape}")
    return q


def _pose(position, quaternion, where):
    """(position (3,), unit quaternion (x, y, z, w)) checked: ``ValueError`` naming ``where``."""
    p = np.asarray(position, dtype=float)
    if p.shape != (3,) or not np.isfinite(p).all():
        raise ValueError(f"{where}: position must be 3 finite numbers (m), got {position!r}")
    quat = np.asarray(quaternion, dtype=float)
    if quat.shape != (4,) or not np.isfinite(quat).all() or np.linalg.norm(quat) == 0:
        raise ValueError(f"{where}: quaternion must be 4 numbers (x, y, z, w), got "
                         f"{quaternion!r}")
    return p, quat / np.linalg.norm(quat)


def _placement(position, quaternion, where):
    """(R (3, 3), p (3,)) of a checked ``_pose``."""
    from ..model.joints import rotation_entries

    p, quat = _pose(position, quaternion, where)
    return np.array(rotation_entries(np, tuple(quat)), dtype=float).reshape(3, 3), p


def _file_world(model):
    """The link of a robot that is its file's world (an MJCF model's root, ``"world"``: its
    floor, walls and fixed shapes, the environment rather than the robot), or None."""
    return model.root_link if model.root_link == "world" else None


_KINDS = {"sphere": lambda s: collision.sphere(s[0]),
          "capsule": lambda s: collision.capsule(s[0], s[1]),
          "box": lambda s: collision.box(s[:3]),
          "cylinder": lambda s: collision.cylinder(s[0], s[1]),
          "ellipsoid": lambda s: collision.ellipsoid(s[:3]),
          "plane": lambda s: collision.plane()}


class _FileShape(NamedTuple):
    """A collision element of a robot's file, as ``add_robot`` adds it: on ``link`` (the
    robot's), ``shape`` at (R (3, 3), p (3,)) in the link's frame, named ``label``, its MJCF
    bit masks ``bits`` (contype, conaffinity), whether it comes from a ``mesh``, its MJCF
    ``geom`` id (-1: URDF) and ``surface``."""

    link: str
    shape: object
    R: np.ndarray
    p: np.ndarray
    label: str
    bits: tuple
    mesh: bool
    geom: int
    surface: Surface


def _robot_shapes(model, links, where, meshes="capsule", corners=24):
    """([``_FileShape``], excluded link pairs, the file's ``CollisionGeometry``) of the model's
    file, its meshes as ``meshes`` says (``Scene.add_robot``)."""
    from .geometry import collision_geometry

    if meshes not in _MESH_MODES:
        raise ValueError(f"{where}: meshes must be one of {', '.join(map(repr, _MESH_MODES))}, "
                         f"got {meshes!r}")
    if isinstance(corners, bool) or not isinstance(corners, (int, np.integer)) or corners < 4:
        raise ValueError(f"{where}: mesh_corners must be an int >= 4, got {corners!r}")
    geometry = collision_geometry(model, hint=_NO_SHAPES_HINT)
    wanted = None
    if links is not None:
        wanted = {model.links[model.link_index(l)].name for l in links}  # ModelError if none
    keep = [s for s in geometry.shapes if s.link in model.link_names
            and (wanted is None or s.link in wanted)]
    skipped = [(l, k) for l, k in geometry.skipped if (wanted is None or l in wanted)
               and (k != "mesh" or meshes == "skip")]
    keep = _capsules(keep)
    from_meshes, unread = [], []
    if meshes != "skip":
        for m in geometry.meshes:
            if m.link in model.link_names and (wanted is None or m.link in wanted):
                world = m.link == _file_world(model)  # a table: its hull, not a capsule
                try:
                    from_meshes.append((m, _mesh_shape(m.points(), "hull" if world else meshes,
                                                       corners)))
                except (OSError, ValueError, ImportError) as e:
                    unread.append(f"{m.link} ({m.file}: {first_line(e)})")
    if unread:
        warnings.warn(f"{where}: {len(unread)} collision mesh(es) of {geometry.source} cannot "
                      f"be used and are ignored: {'; '.join(unread[:4])}"
                      f"{'; ...' if len(unread) > 4 else ''}", UserWarning, stacklevel=3)
    if not keep and not from_meshes and geometry.format == "mjcf" and links is None \
            and not skipped and not unread:  # the file says: nothing collides
        warnings.warn(f"{where}: no geom of {geometry.source} collides (their contype and "
                      "conaffinity are 0): the robot has no shapes and touches nothing, as in "
                      "MuJoCo", UserWarning, stacklevel=3)
    elif not keep and not from_meshes:
        kinds = " or ".join(sorted({k for _, k in skipped}))
        what = (f"{len(skipped)} collision element(s), all {kinds}" if skipped
                else "no collision element" + (" that can be used" if unread else ""))
        raise ModelError(f"{where}: {geometry.source} has {what}"
                         f"{'' if links is None else ' on links ' + repr(list(links))}: no "
                         "primitive (sphere, capsule, box, cylinder, ellipsoid) or mesh to "
                         "collide with; " + _NO_SHAPES_HINT)
    if skipped:
        names = sorted({l for l, _ in skipped})
        kinds = sorted({k for _, k in skipped})
        warnings.warn(f"{where}: collision {' and '.join(kinds)} geometry on {len(names)} "
                      f"link(s) ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''}) of "
                      f"{geometry.source} is ignored (only primitives and meshes collide: "
                      "add_shape on those links, e.g. a coarse hull, collision.convex(points))",
                      UserWarning, stacklevel=3)
    out, count = [], {}
    for s in keep:
        k = count[s.link] = count.get(s.link, 0) + 1
        label = s.name or f"{s.kind}{k - 1}"
        out.append(_FileShape(s.link, _KINDS[s.kind](np.asarray(s.size, dtype=float)),
                              np.asarray(s.rotation, dtype=float),
                              np.asarray(s.translation, dtype=float), label,
                              (s.contype, s.conaffinity), False, s.geom, s.surface))
    count = {}
    for m, (shape, R, p) in from_meshes:
        k = count[m.link] = count.get(m.link, 0) + 1
        out.append(_FileShape(m.link, shape, m.rotation @ R, m.rotation @ p + m.translation,
                              m.name or f"mesh{k - 1}", (m.contype, m.conaffinity), True,
                              m.geom, m.surface))
    excluded = [pair for pair in geometry.excluded if all(l in model.link_names for l in pair)]
    return out, excluded, geometry


_MESH_MODES = ("capsule", "hull", "skip")


def _overlap(model, T, a, b):
    """Whether two of a robot's shapes (``_robot_shapes``'s entries) on two links overlap where
    its links are at poses T (nlinks, 4, 4); False for a pair ``collision`` has no method for
    (``ShapeContactModel`` leaves it out, with a warning)."""
    if isinstance(a[1], collision.Plane):
        a, b = b, a
    (link_a, shape_a, Ra, pa, *_), (link_b, shape_b, Rb, pb, *_) = a, b  # _FileShapes
    if (link_a == link_b or isinstance(shape_a, collision.Plane)
            or not collision.supported(shape_a, shape_b)):
        return False
    poses = [_world_pose(np, T[None, model.link_index(link)], R, p)
             for link, R, p in ((link_a, Ra, pa), (link_b, Rb, pb))]
    depths = collision.collide(np, shape_a, poses[0], shape_b, poses[1])[2]
    return bool(np.max(depths) > 0.0)


def _world_pose(xp, T_link, R, p):
    """(R (N, 3, 3), p (N, 3)) in the world of a frame at (R (3, 3), p (3,)) in a link whose
    poses are T_link (N, 4, 4)."""
    R_l, p_l = T_link[..., :3, :3], T_link[..., :3, 3]
    return xp.einsum("nij,jk->nik", R_l, R), p_l + xp.einsum("nij,j->ni", R_l, p)


def _mesh_shape(points, meshes, corners):
    """(shape, R (3, 3), p (3,) in the mesh's frame) standing for a mesh's vertices."""
    if meshes == "capsule":
        return collision.capsule_around(points)
    return collision.convex(points, max_corners=int(corners)), np.eye(3), np.zeros(3)


def _capsules(shapes, tol=1e-3):
    """The shapes with each cylinder that two spheres of its radius cap at its end faces (on the
    same link, same bit masks; radii equal to 1e-9, centres within ``tol`` of the cylinder's
    size from the face centres: files round their angles) replaced by one capsule (the
    spheres dropped)."""
    used, out = set(), []
    for i, c in enumerate(shapes):
        if c.kind != "cylinder":
            continue
        r, h = float(c.size[0]), float(c.size[1])
        ends = [c.translation + s * h * c.rotation[:, 2] for s in (-1.0, 1.0)]
        caps = []
        for end in ends:
            for j, s in enumerate(shapes):
                if (j not in used and j not in caps and s.kind == "sphere" and s.link == c.link
                        and abs(float(s.size[0]) - r) <= 1e-9 * r
                        and np.abs(s.translation - end).max() <= tol * max(r, h)
                        and (s.contype, s.conaffinity) == (c.contype, c.conaffinity)):
                    caps.append(j)
                    break
        if len(caps) == 2:
            used.update(caps)
            used.add(i)
            out.append((i, replace(c, kind="capsule")))
    merged = dict(out)
    return [merged.get(i, s) for i, s in enumerate(shapes) if i in merged or i not in used]


def _srdf_pairs(path):
    """The (link1, link2) of an SRDF file's ``<disable_collisions>``."""
    from ..model.urdf import parse_xml

    with open(path, "rb") as f:
        root = parse_xml(f.read(), str(path))
    pairs = []
    for element in root.iter("disable_collisions"):
        a, b = element.get("link1"), element.get("link2")
        if not a or not b:
            raise ModelError(f"{path}: <disable_collisions> needs link1 and link2")
        pairs.append((a, b))
    return pairs


def _renamed(item, prefix):
    """A constraint or tendon with its link, joint and tendon names prefixed."""
    if not prefix:
        return item
    changes = {}
    for f in fields(item):
        value = getattr(item, f.name)
        if f.name in ("link_a", "link_b", "target", "source", "name") and value:
            changes[f.name] = prefix + value
        elif f.name == "joints":
            changes[f.name] = tuple(prefix + j for j in value)
        elif f.name == "sites":
            changes[f.name] = tuple((prefix + link, point) for link, point in value)
    return replace(item, **changes)


@dataclass(frozen=True, eq=False)
class ShapeContact:
    """Rigid contact between collision shapes (and with the ground plane): ``shapes`` (a
    sequence of ``Shape``), ``ground`` (whether the plane z = ``solver.height`` takes part),
    ``solver`` (a ``RigidContact``: mu, the stabilisation, the sweeps; its ``points`` unused).
    ``exclude``: pairs of shape names (frozensets of two; ``"ground"`` names the ground
    plane) that never touch. ``touch_parent``: pairs of shape names that touch although one's
    link is the other's parent across a joint (the adjacent-link filter's exceptions: an MJCF
    file's world and the bodies welded to it, as MuJoCo exempts its world body; every pair of
    a file with ``<flag filterparent="disable"/>``); ``exclude`` still holds for them.
    A pair's friction, stabilisation and margin: its entry in ``pair_surfaces`` ((frozenset of
    two shape names, ``Surface``) items: an MJCF ``<contact><pair>``'s own), else its two
    shapes' ``surface`` mixed as MuJoCo mixes two geoms' (``surface.mix``; the ground's is
    ``ground_surface``), ``solver``'s mu, timeconst and dampratio standing in for what a
    surface leaves None. With ``solver.invweight0``, the pairs' compliance is scaled by
    MuJoCo's inverse weights of their bodies (``inverse_weights``): taken at ``reference``
    (a configuration, nq; None: the model's ``q0``; ``Scene.build``: the scene's start), an
    MJCF file's bodies' given in ``inverse_weights`` ((link name, 1/kg) items: MuJoCo's own).
    ``Settings.contact`` takes it; ``Scene.build`` makes it."""

    shapes: tuple
    ground: bool = True
    solver: RigidContact = RigidContact()
    exclude: frozenset = frozenset()
    touch_parent: frozenset = frozenset()
    ground_surface: Surface = Surface()
    pair_surfaces: tuple = ()
    inverse_weights: tuple = ()
    reference: tuple = None

    def resolve(self, model, dt: Optional[float] = None):
        """The ``ShapeContactModel`` of these shapes on ``model``, in a simulation with the
        step ``dt`` (s; None: none), at which a refsafe solver takes its time constants
        (``RigidContact.refsafe``)."""
        resolved = ShapeContactModel(model, self, dt)
        if not resolved.pairs:
            raise ModelError(f"ShapeContact on model {model.name!r}: no two shapes can touch, "
                             "nor a shape and the ground (their links, exclude, ground=False): "
                             "simulate without contact (contact=None)")
        return resolved


class ShapeContactModel(SolvedContact):
    """A ``ShapeContact`` bound to a model: the pairs of shapes that can touch, their candidate
    points, and the solver (``SolvedContact``'s) on their rows."""

    def __init__(self, model, settings, dt=None):
        """``settings`` (a ``ShapeContact``) bound to ``model``, in a simulation with the step
        ``dt`` (s; None: none): a refsafe solver's time constants, its own and the pairs',
        are at least 2 dt (``RigidContact.refsafe``)."""
        self.model, self.settings = model, settings
        self.ground = settings.solver.at_step(dt)
        self.nlinks = model.nlinks
        shapes = []
        for s in settings.shapes:
            shapes.append((s, model.link_index(s.link)))  # ModelError for a missing link
            if isinstance(s.shape, collision.Plane) and model.links[shapes[-1][1]].body >= 0:
                raise ModelError(f"ShapeContact on model {model.name!r}: the plane {s.name!r} is "
                                 f"on {s.link!r}, a link that moves; a plane is infinite: put "
                                 "it on the world or a link welded to it (a box for a moving "
                                 "wall)")
        exclude = settings.exclude
        reach = _reach(model)
        bounds = [_bound(reach, s, l) for s, l in shapes]  # once a shape, not once a pair
        ground = ("plane", np.array([0.0, 0.0, 1.0]),
                  np.array([0.0, 0.0, settings.solver.height]))
        self.pairs = []  # (shape a, link a, shape b or None (the ground), link b or -1)
        unsupported = []  # pairs that may touch, of kinds ``collision`` has no method for
        for i, (a, la) in enumerate(shapes):
            for j, (b, lb) in enumerate(shapes[i + 1:], i + 1):
                names = frozenset((a.name, b.name))
                if (self._may_touch(la, lb, names in settings.touch_parent)
                        and names not in exclude
                        and _within_reach(bounds[i], bounds[j])):
                    if not collision.supported(a.shape, b.shape):
                        unsupported.append(f"{a.name} ({a.shape.kind}) and {b.name} "
                                           f"({b.shape.kind})")
                        continue
                    plane_first = isinstance(a.shape, collision.Plane)  # a plane goes second
                    self.pairs.append((b, lb, a, la) if plane_first else (a, la, b, lb))
            if (settings.ground and model.links[la].body >= 0  # a fixed shape: no contact
                    and frozenset((a.name, "ground")) not in exclude
                    and _within_reach(bounds[i], ground)):
                self.pairs.append((a, la, None, -1))
        if unsupported:
            warnings.warn(f"ShapeContact on model {model.name!r}: {len(unsupported)} pair(s) "
                          f"of shapes can touch but are not collided, there is no method for "
                          f"their kinds (collision.supported): {'; '.join(unsupported[:4])}"
                          f"{'; ...' if len(unsupported) > 4 else ''}. They pass through each "
                          "other; exclude them to silence this, or give one of each pair "
                          "another shape", UserWarning,
                          stacklevel=3)
        self.counts = [collision.contact_count(a.shape, collision.plane() if b is None
                                               else b.shape) for a, _, b, _ in self.pairs]
        self.links = tuple(sorted({l for _, la, _, lb in self.pairs for l in (la, lb)
                                   if l >= 0 and model.links[l].body >= 0}))
        self._labels = tuple(f"{a.name}|{'ground' if b is None else b.name}#{k}"
                             for (a, _, b, _), K in zip(self.pairs, self.counts)
                             for k in range(K))
        self._pair_of = [pair for pair, K in zip(self.pairs, self.counts)  # each point's pair
                         for _ in range(K)]
        own, solver = dict(settings.pair_surfaces), settings.solver

        def parameters(a, b):  # a <pair>'s own, else its two shapes' surfaces mixed
            names = frozenset((a.name, "ground" if b is None else b.name))
            if names in own:
                return own_surface(own[names])
            return mix(a.surface, settings.ground_surface if b is None else b.surface,
                       solver.mu, (solver.timeconst, solver.damping_ratio), solver.impedance)

        self._mixed = [parameters(a, b) for a, _, b, _ in self.pairs]  # each pair's
        per_point = [m for m, K in zip(self._mixed, self.counts) for _ in range(K)]
        #: each point's friction coefficient (a number, or None: ``solver.mu``, an argument)
        self.point_friction = tuple(m.friction for m in per_point)
        #: each pair's own stabilisation (k, b) at d = 1 (its solref at the step dt), or None:
        #: the solver's (arguments)
        self._pair_stabilisation = [None if m.solref is None else
                                    stabilisation(m.solref, dt, settings.solver.refsafe)
                                    for m in self._mixed]
        #: each point's (its pair's)
        self.point_stabilisation = tuple(s for s, K in zip(self._pair_stabilisation,
                                                           self.counts) for _ in range(K))
        #: each point's impedance (an ``Impedance``), or None: the solver's
        self.point_impedance = tuple(m.impedance for m in per_point)
        #: each point's offset (m): its pair holds the surfaces this far apart (their margin)
        self.point_offset = np.array([m.offset for m in per_point], dtype=float)
        #: each point's (torsion, rolling) (m): its pair's (condim 4, 6), else the solver's
        self._point_twist = tuple(
            (float(solver.torsion), float(solver.rolling)) if m.twist is None else m.twist
            for m in per_point)

    @property
    def point_twist(self):
        """Per candidate point, (torsion, rolling) (m): its pair's torsional and rolling
        friction coefficients (``Surface``: condim 4 and 6), else the solver's."""
        return self._point_twist

    @property
    def labels(self):
        """One name per candidate contact point: 'shape a|shape b#k'."""
        return self._labels

    def _may_touch(self, la, lb, parent=False):
        """Whether shapes on links la and lb can touch: on two rigid bodies, not a body and its
        parent across a joint that is not free (unless ``parent``: ``touch_parent``)."""
        body_a, body_b = self.model.links[la].body, self.model.links[lb].body
        if body_a == body_b:  # one rigid body (or both fixed to the world)
            return False
        return parent or not _adjacent(self.model, body_a, body_b)

    @property
    def key(self):
        return ("shapes", tuple((a, la, b, lb) for a, la, b, lb in self.pairs),
                self.ground.iterations, self.point_friction, self.point_stabilisation,
                self.ground.impedance, self.point_impedance,  # constants of the program
                self.ground.impratio, self.ground.cone, self.ground.invweight0,
                tuple(self.point_offset.tolist()), self.point_twist)

    def friction(self, xp, p, i):
        """Point i's friction coefficient: its pair's own (a constant), else ``p["mu"]``; i an
        int, or traced (JAX's loop over the points: a table of them, indexed)."""
        if all(mu is None for mu in self.point_friction):
            return p["mu"]
        if isinstance(i, (int, np.integer)):
            mu = self.point_friction[i]
            return p["mu"] if mu is None else mu
        return xp.stack([p["mu"] if mu is None else xp.asarray(mu, dtype=float)
                         for mu in self.point_friction])[i]

    def stabilisation(self, p, i):
        """Point i's (k 1/s^2, b 1/s), k written at its impedance's dmax (MuJoCo's scaling of
        a soft constraint's gains, ``impedance.stabilisation_gains``): its pair's own
        (constants), else ``p["k"], p["b"]`` (at the solver's dmax: rescaled to the pair's)."""
        own, dmax = self.point_stabilisation[i], self.impedance(i).dmax
        if own is None:
            ratio = self.ground.impedance.dmax / dmax
            return (p["k"], p["b"]) if ratio == 1.0 else (p["k"] * ratio, p["b"] * ratio)
        return own[0] / dmax, own[1] / dmax

    def impedance(self, i):
        """Point i's ``Impedance``: its pair's own, else the solver's (constants)."""
        own = self.point_impedance[i]
        return self.ground.impedance if own is None else own

    def springs(self, model, p, q, M):
        """The solver's stabilisation, and each distinct one of the pairs' own (their solref),
        per unit apparent mass (``SolvedContact.springs``)."""
        own = {kbd: i for i, kbd in enumerate(zip(self.point_stabilisation,
                                                  self.point_impedance)) if any(kbd)}
        return super().springs(model, p, q, M) + [
            (f"the stabilisation of {self.labels[i].split('#')[0]!r} (its "
             f"{' and '.join(n for n, x in zip(('solref', 'solimp'), kbd) if x)})",
             *self.stabilisation(p, i), 1.0) for kbd, i in own.items()]

    @cached_property
    def groups(self):
        """The sweeps' groups (``SolvedContact.groups``): each pair's points."""
        return runs([k for k, K in enumerate(self.counts) for _ in range(K)])

    @property
    def native_size(self):
        """The size of the scene's native program (``LARGE_SCENE``): per candidate point, the
        degrees of freedom that move it (``point_dofs``: its pair's moving links'), a third
        more for each of its twist rows (``twists``: its three rows' size each)."""
        rows = [3] * len(self.point_dofs)
        for i, _, _ in self.twists:
            rows[i] += 1
        return sum(len(dofs) * r // 3 for dofs, r in zip(self.point_dofs, rows))

    def params(self, xp=np):
        return self.solver_params(xp)

    # -- geometry ----------------------------------------------------------------------------
    def _pose(self, xp, T, shape, link):
        """(R (N, 3, 3), p (N, 3)): the shape's frame in the world."""
        return _world_pose(xp, T[..., link, :, :], np.array(shape.rotation).reshape(3, 3),
                           np.array(shape.translation))

    def _contacts(self, xp, p, T):
        """[(points (N, K, 3), normals (N, K, 3), depths (N, K))] per pair."""
        out = []
        for a, la, b, lb in self.pairs:
            pose_a = self._pose(xp, T, a, la)
            if b is None:
                N = T.shape[0]
                eye = xp.broadcast_to(xp.asarray(np.eye(3)), (N, 3, 3))
                up = xp.stack([0.0 * p["height"], 0.0 * p["height"], p["height"]])
                out.append(collision.collide(xp, a.shape, pose_a, collision.plane(),
                                             (eye, xp.broadcast_to(up, (N, 3)))))
            else:
                out.append(collision.collide(xp, a.shape, pose_a, b.shape,
                                             self._pose(xp, T, b, lb)))
        return out

    def depths(self, xp, p, T):
        return xp.concatenate([d for _, _, d in self._contacts(xp, p, T)], axis=-1)

    def tangent_hints(self, xp, p, T):
        """(N, K, 3) or None (``SolvedContact.tangent_hints``): a capsule's axis for the
        points of a capsule on a plane (the ground, a wall), as MuJoCo's plane-capsule
        collision sets its contact frames; zero elsewhere. None where no pair is one."""
        hints, found = [], False
        for (a, la, b, lb), count in zip(self.pairs, self.counts):
            plane = b is None or isinstance(b.shape, collision.Plane)
            capsule = a if isinstance(a.shape, collision.Capsule) and plane else None
            if b is not None and isinstance(b.shape, collision.Capsule) \
                    and isinstance(a.shape, collision.Plane):
                capsule, la = b, lb
            if capsule is None:
                hints.append(xp.broadcast_to(0.0 * T[:, :1, 0, :3], T.shape[:1] + (count, 3)))
                continue
            found = True
            axis = self._pose(xp, T, capsule, la)[0][..., :, 2]  # (N, 3): its z axis
            hints.append(xp.broadcast_to(axis[:, None, :], axis.shape[:1] + (count, 3)))
        return xp.concatenate(hints, axis=1) if found else None

    def points_at(self, xp, p, T):
        return xp.concatenate([pts for pts, _, _ in self._contacts(xp, p, T)], axis=1)

    def deepest(self, model, p, T):
        """(depth (m), label, overlap) (``ContactModel.deepest``): the deepest candidate point
        (``overlap`` names its two shapes, None for a point in the ground; a pair's axis of
        least overlap, ``collision.axis_slot``: how far they must move apart), or a shape's
        centre inside another shape (two shapes overlapping deeply can have shallow points: two
        cylinders, one inside the other) when that is deeper."""
        depth = np.asarray(self.depths(np, p, T))
        worst = np.unravel_index(np.argmax(depth), depth.shape)
        i = worst[-1]
        a, _, b, _ = self._pair_of[i]
        slot = i - next(first for first, stop in self.groups if first <= i < stop)
        if b is None:
            overlap = None
        elif slot == collision.axis_slot(a.shape, b.shape):
            overlap = f"{a.name!r} and {b.name!r} overlap"
        else:
            overlap = f"a point of {a.name!r} is inside {b.name!r}"
        found = (float(depth[worst]), self.labels[i], overlap)
        centre = collision.sphere(0.0)
        for a, la, b, lb in self.pairs:
            if b is None:
                continue
            for x, lx, y, ly in ((a, la, b, lb), (b, lb, a, la)):
                if isinstance(x.shape, collision.Plane):
                    continue  # a plane has no centre
                R, origin = self._pose(np, T, x, lx)
                c = origin + np.einsum("nij,j->ni", R, _centre(x.shape))
                inside = collision.collide(np, centre, (R, c), y.shape,
                                           self._pose(np, T, y, ly))[2][..., 0]
                if inside.max() > found[0]:
                    found = (float(inside.max()), f"{x.name}|{y.name}",
                             f"the centre of {x.name!r} is inside {y.name!r}")
        return found

    def rows(self, xp, p, q, T, angular=False):
        """(J (N, 3K, nv), depth (N, K), frames (N, K, 3, 3)) of every candidate point: the
        relative velocity of body a's material point over body b's, along the normal (b to a)
        and two tangents; the depth its pair's solve drives to zero (``held``); with
        ``angular``, also (N, K, 3, nv): body a's angular velocity over body b's (world
        axes; the twist rows')."""
        from ..dynamics import jacobian

        jac = {l: jacobian(self.model, q, l, frame="world") for l in self.links}
        rows, depths, frames, turning = [], [], [], []
        for (a, la, b, lb), (points, normals, depth) in zip(self.pairs,
                                                           self._contacts(xp, p, T)):
            frame = _frames(xp, normals)  # (N, K, 3, 3)
            Jrel = Jw = 0.0  # one of the two moves (pairs of shapes at rest are not kept)
            for link, sign in ((la, 1.0), (lb, -1.0)):
                if link not in jac:
                    continue  # the world, the ground: at rest
                J = jac[link]
                r = points - T[..., link, None, :3, 3]  # (N, K, 3) from the link's origin
                Jp = J[:, None, :3] - xp.cross(r[..., None], J[:, None, 3:], axis=2)
                Jrel = Jrel + sign * Jp  # (N, K, 3, nv)
                Jw = Jw + sign * J[:, 3:]  # (N, 3, nv)
            rows.append(xp.einsum("nkcj,nkjv->nkcv", frame, Jrel))
            depths.append(depth)
            frames.append(frame)
            turning.append(xp.broadcast_to(Jw[:, None], Jrel.shape))
        J = xp.concatenate(rows, axis=1)
        N, K = J.shape[0], J.shape[1]
        out = (J.reshape((N, 3 * K, J.shape[-1])), self.held(xp.concatenate(depths, axis=-1)),
               xp.concatenate(frames, axis=1))
        return out + (xp.concatenate(turning, axis=1),) if angular else out

    def held(self, depth):
        """The depths (N, K) plus each point's offset: a pair with a margin (``Surface``) holds
        its surfaces that far apart, as MuJoCo's contacts do."""
        return depth + self.point_offset if self.point_offset.any() else depth

    @cached_property
    def point_weights(self):
        """(P,): each point's MuJoCo inverse weight (1/kg), the sum of its pair's bodies'
        translational ``body_invweight0`` (``ShapeContact.inverse_weights``, at its
        ``reference``; the ground and the world: 0)."""
        s = self.settings
        weights = link_inverse_weights(self.model, s.reference, s.inverse_weights)
        return np.array([weights[la] + (weights[lb] if lb >= 0 else 0.0)
                         for _, la, _, lb in self._pair_of])

    def point_links(self):
        """Per candidate point, the moving links of its pair (the world and the ground do
        not move)."""
        return [tuple(l for l in (la, lb) if l in self.links) for _, la, _, lb in self._pair_of]

    def describe(self, p):
        """``SolvedContact.describe``'s, with the pairs, their friction and twist (torsion,
        rolling), and how many have their own solref and solimp; "impedance" is the pairs'
        where they all have one (an MJCF file's geoms: MuJoCo's default solimp), else the
        solver's."""
        imp = self.ground.impedance
        solver = np.multiply((float(p["k"]), float(p["b"])), imp.dmax)  # at d = 1
        pairs_imp = {imp if m.impedance is None else m.impedance for m in self._mixed}
        if len(pairs_imp) == 1:
            imp = pairs_imp.pop()
        return dict(super().describe(p), pairs=[f"{a.name}|{'ground' if b is None else b.name}"
                                                for a, _, b, _ in self.pairs],
                    impedance=imp.describe(),
                    friction=[float(p["mu"]) if m.friction is None else m.friction
                              for m in self._mixed],
                    twist=[[self.ground.torsion, self.ground.rolling] if m.twist is None
                           else list(m.twist) for m in self._mixed],
                    own_stabilisation=sum(  # pairs whose solref is not the solver's
                        s is not None and not np.allclose(s, solver, rtol=1e-12)
                        for s in self._pair_stabilisation),
                    own_impedance=sum(m.impedance is not None and m.impedance != imp
                                      for m in self._mixed))


# -- pairs that can never touch ---------------------------------------------------------------
def _adjacent(model, body_a, body_b):
    """Whether bodies a and b (indices, -1: the world) are a body and its parent joined by a
    joint that is not free (the adjacent-link filter)."""
    def child_of(child, other):
        return (child >= 0 and model.parent[child] == other
                and not model.bodies[child].joint_model.floating)

    return child_of(body_a, body_b) or child_of(body_b, body_a)


def _reach(model):
    """{link index: (anchor (3,), radius (m), rotation (3, 3) or None)}: for each link whose
    frame origin stays within ``radius`` of the world point ``anchor`` at every configuration
    (its bodies up to one on the world all turn about their joint's origin: revolute,
    continuous, spherical joints), whatever the joint limits, the velocities or the
    constraints; a link fixed to the world: its origin, radius 0 and its rotation. A link
    moved by another joint (prismatic, planar, free) is not in it."""
    from ..dynamics import forward_kinematics

    T = np.asarray(forward_kinematics(model, np.asarray(model.neutral, dtype=float)))
    body_reach = {}
    for k, body in enumerate(model.bodies):  # parents come first
        try:
            turns = not np.any(np.asarray(body.joint_model.subspace())[:, :3])
        except NotImplementedError:  # a subspace that changes with q: planar, free
            turns = False
        if not turns:
            continue
        if body.parent < 0:  # its joint's origin, fixed in the world
            body_reach[k] = (T[model.link_index(body.link), :3, 3], 0.0)
        elif body.parent in body_reach:
            anchor, radius = body_reach[body.parent]
            body_reach[k] = (anchor, radius + float(np.linalg.norm(body.translation)))
    out = {}
    for i, link in enumerate(model.links):
        if link.body < 0:
            out[i] = (T[i, :3, 3], 0.0, T[i, :3, :3])
        elif link.body in body_reach:
            anchor, radius = body_reach[link.body]
            out[i] = (anchor, radius + float(np.linalg.norm(link.translation)), None)
    return out


def _extent(shape):
    """The radius (m) of a ball about a shape's frame origin that holds it."""
    if isinstance(shape, collision.Sphere):
        return shape.radius
    if isinstance(shape, collision.Capsule):
        return shape.radius + shape.half_length
    if isinstance(shape, collision.Box):
        return float(np.linalg.norm(shape.half_sizes))
    if isinstance(shape, collision.Cylinder):
        return float(np.hypot(shape.radius, shape.half_length))
    if isinstance(shape, collision.Ellipsoid):
        return max(shape.radii)
    return float(np.max(np.linalg.norm(np.array(shape.vertices), axis=1)))


_REACH_TOLERANCE = 1e-3  # m: a pair that comes no closer than this is left out


def _bound(reach, shape, link):
    """What holds ``shape`` (a ``Shape`` on link index ``link``) wherever its link goes
    (``_reach``): ``("ball", centre (3,), radius)``, ``("plane", normal (3,), point (3,))``
    (a plane fixed to the world: its half-space), or None (its link can go anywhere)."""
    if link not in reach:
        return None
    anchor, radius, R_link = reach[link]
    p = np.asarray(shape.translation, dtype=float)
    if R_link is None:  # a moving link: its ball, widened by the shape's
        return "ball", anchor, radius + float(np.linalg.norm(p)) + _extent(shape.shape)
    if isinstance(shape.shape, collision.Plane):  # fixed to the world: where the shape is
        return "plane", (R_link @ np.reshape(shape.rotation, (3, 3)))[:, 2], anchor + R_link @ p
    return "ball", anchor + R_link @ p, _extent(shape.shape)


def _within_reach(a, b):
    """Whether two shapes with these ``_bound``s (the ground: its plane) may touch at some
    configuration: False only where both balls are more than ``_REACH_TOLERANCE`` apart, or
    a ball is that far above a plane (a wall, the ground)."""
    if a is None or b is None:
        return True
    (kind_a, *ga), (kind_b, *gb) = a, b
    if kind_a == kind_b == "ball":
        return bool(np.linalg.norm(ga[0] - gb[0]) <= ga[1] + gb[1] + _REACH_TOLERANCE)
    if kind_a == kind_b:
        return True
    (centre, radius), (normal, point) = (ga, gb) if kind_a == "ball" else (gb, ga)
    return float(np.dot(centre - point, normal)) <= radius + _REACH_TOLERANCE


def _centre(shape):
    """A point inside a shape, in its frame: its origin, a polytope's mean corner."""
    if isinstance(shape, collision.Convex):
        return np.mean(np.array(shape.vertices), axis=0)
    return np.zeros(3)


def _frames(xp, n):
    """(N, K, 3, 3): rows n, t1, t2 for unit normals n (N, K, 3) (t1 normal to n and to x, or
    to y where n is near x)."""
    near_x = xp.abs(n[..., 0:1]) > 0.9
    helper = xp.where(near_x, xp.asarray(np.array([0.0, 1.0, 0.0])),
                      xp.asarray(np.array([1.0, 0.0, 0.0])))
    t1 = xp.cross(n, helper, axis=-1)
    t1 = t1 / xp.sqrt(xp.sum(t1 * t1, axis=-1, keepdims=True))
    t2 = xp.cross(n, t1, axis=-1)
    return xp.stack([n, t1, t2], axis=-2)
