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
collision shapes (``screwdyn.sim.collision``: sphere, capsule, box, cylinder) are attached to any
link with ``add_shape``. ``build`` returns the Model, the contact settings (``ShapeContact``) and
the initial configuration.

The pairs that can touch: every two shapes on different rigid bodies, except a body and its
parent in the tree joined by a joint that is not free (the usual adjacent-link filter: a link's
collision shape overlaps its parent's at the joint; an object on a free joint touches the
world's shapes) and two shapes both fixed to the world; and every moving shape with the
ground plane (``ground=True``, the plane z = ``height``). Each pair gives ``collision.contact_count``
candidate points (a box on the ground 8, two boxes 8, two spheres 1) whose depth, normal and
point ``collision.collide`` computes at every evaluation; the solver (``contact_solver``) is
the ground's, with the candidates' rows: the relative velocity of the two bodies' material
points along the normal and two tangents.
"""
from dataclasses import dataclass

import numpy as np

from ..model.builder import ModelBuilder
from . import collision
from .checks import positive
from .contact_solver import RigidContact, SolvedContact

#: scenes with more candidate contact points than this run on JAX, not in native code (the
#: solver's sweeps are unrolled into the native program, whose size grows as their square)
NATIVE_CANDIDATES = 16


@dataclass(frozen=True)
class Shape:
    """A collision shape on a link: ``shape`` (``collision.sphere`` ...) at ``rotation`` (3x3,
    row-major, 9 numbers) and ``translation`` (3,) in the link's frame."""

    name: str
    link: str
    shape: object
    rotation: tuple = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    translation: tuple = (0.0, 0.0, 0.0)


def solid_inertia(shape, mass):
    """The rotational inertia (3, 3) about the centre (kg m^2) of a solid ``shape`` of
    ``mass`` (kg), in its frame (capsule and cylinder: axis z)."""
    if isinstance(shape, collision.Sphere):
        return np.eye(3) * 0.4 * mass * shape.radius ** 2
    if isinstance(shape, collision.Box):
        x, y, z = (2 * h for h in shape.half_sizes)
        return np.diag([y * y + z * z, x * x + z * z, x * x + y * y]) * mass / 12
    if isinstance(shape, (collision.Cylinder, collision.Capsule)):
        r, h = shape.radius, 2 * shape.half_length  # a capsule as its cylinder (close enough)
        side = mass * (3 * r * r + h * h) / 12
        return np.diag([side, side, 0.5 * mass * r * r])
    raise ValueError(f"no solid inertia for {shape!r}: give inertia=")


class Scene:
    """A robot and objects with collision shapes (see the module docstring)."""

    def __init__(self, name: str = "scene"):
        self.builder = ModelBuilder(name)
        self.builder.add_link("world")
        self.shapes = []
        self._poses = {}  # object name -> (position, quaternion xyzw)

    def add_object(self, name, shape, mass, position=(0.0, 0.0, 0.0),
                   quaternion=(0.0, 0.0, 0.0, 1.0), inertia=None):
        """A free body ``name`` of ``mass`` (kg) with the collision ``shape`` centred on its
        frame, starting at ``position`` (m) and ``quaternion`` (x, y, z, w) in the world; its
        inertia that of the solid shape unless given (3x3, kg m^2, about its centre)."""
        positive(mass, f"Scene.add_object({name!r}) mass")
        inertia = solid_inertia(shape, mass) if inertia is None else inertia
        self.builder.add_link(name, mass=mass, inertia=inertia)
        self.builder.add_joint(f"{name}_free", "free", "world", name)
        q = np.asarray(quaternion, dtype=float)
        if q.shape != (4,) or not np.isfinite(q).all() or np.linalg.norm(q) == 0:
            raise ValueError(f"Scene.add_object({name!r}): quaternion must be 4 numbers "
                             f"(x, y, z, w), got {quaternion!r}")
        p = np.asarray(position, dtype=float)
        if p.shape != (3,) or not np.isfinite(p).all():
            raise ValueError(f"Scene.add_object({name!r}): position must be 3 finite numbers, "
                             f"got {position!r}")
        self._poses[name] = (p, q / np.linalg.norm(q))
        self.add_shape(name, shape, name=name)

    def add_shape(self, link, shape, xyz=(0.0, 0.0, 0.0), rotation=None, name=None):
        """The collision ``shape`` on ``link`` at ``xyz`` (m) and ``rotation`` (3x3) in the
        link's frame."""
        if not isinstance(shape, (collision.Sphere, collision.Capsule, collision.Box,
                                  collision.Cylinder)):
            raise ValueError(f"a shape is a collision.sphere, capsule, box or cylinder, got "
                             f"{shape!r}")
        R = np.eye(3) if rotation is None else np.asarray(rotation, dtype=float).reshape(3, 3)
        name = name or f"{link}/{type(shape).__name__.lower()}{len(self.shapes)}"
        self.shapes.append(Shape(name, link, shape, tuple(R.ravel().tolist()),
                                 tuple(float(x) for x in xyz)))

    def build(self, mu=0.8, ground=True, height=0.0, **solver):
        """(model, contact, q0): the Model (the builder's, fixed base at the world), the
        contact settings (a ``ShapeContact``; ``mu``, ``ground``, ``height`` and the solver's
        ``RigidContact`` options: ``timeconst``, ``dampratio``, ``restitution``,
        ``iterations``, ``regularization``, ``margin``) and the initial configuration (the
        objects at their poses, every other joint at zero)."""
        model = self.builder.build()
        q0 = np.array(model.neutral, dtype=float)
        for name, (p, quat) in self._poses.items():
            k = model.joint_names.index(f"{name}_free")
            q0[model.q_slices[k]] = np.concatenate([p, quat])
        contact = ShapeContact(shapes=tuple(self.shapes), ground=ground,
                               solver=RigidContact(mu=mu, height=height, **solver))
        return model, contact, q0


@dataclass(frozen=True, eq=False)
class ShapeContact:
    """Rigid contact between collision shapes (and with the ground plane): ``shapes`` (a
    sequence of ``Shape``), ``ground`` (whether the plane z = ``solver.height`` takes part),
    ``solver`` (a ``RigidContact``: mu, the stabilisation, the sweeps; its ``points`` unused).
    ``Settings.contact`` takes it; ``Scene.build`` makes it."""

    shapes: tuple
    ground: bool = True
    solver: RigidContact = RigidContact()

    def resolve(self, model):
        return ShapeContactModel(model, self)


class ShapeContactModel(SolvedContact):
    """A ``ShapeContact`` bound to a model: the pairs of shapes that can touch, their candidate
    points, and the solver (``SolvedContact``'s) on their rows."""

    def __init__(self, model, settings):
        self.model, self.settings, self.ground = model, settings, settings.solver
        self.nlinks = model.nlinks
        shapes = []
        for s in settings.shapes:
            shapes.append((s, model.link_index(s.link)))  # ModelError for a missing link
        self.pairs = []  # (shape a, link a, shape b or None (the ground), link b or -1)
        for i, (a, la) in enumerate(shapes):
            for b, lb in shapes[i + 1:]:
                if self._may_touch(la, lb):
                    self.pairs.append((a, la, b, lb))
            if settings.ground and model.links[la].body >= 0:  # a fixed shape: no contact
                self.pairs.append((a, la, None, -1))
        self.counts = [collision.contact_count(a.shape, collision.plane() if b is None
                                               else b.shape) for a, _, b, _ in self.pairs]
        self.links = tuple(sorted({l for _, la, _, lb in self.pairs for l in (la, lb)
                                   if l >= 0 and model.links[l].body >= 0}))
        self._labels = tuple(f"{a.name}|{'ground' if b is None else b.name}#{k}"
                             for (a, _, b, _), K in zip(self.pairs, self.counts)
                             for k in range(K))

    @property
    def labels(self):
        """One name per candidate contact point: 'shape a|shape b#k'."""
        return self._labels

    def _may_touch(self, la, lb):
        body_a, body_b = self.model.links[la].body, self.model.links[lb].body
        if body_a == body_b:  # one rigid body (or both fixed to the world)
            return False
        bodies, parent = self.model.bodies, self.model.parent

        def adjacent(child, other):  # joined by a joint that is not free
            return (child >= 0 and parent[child] == other
                    and not bodies[child].joint_model.floating)

        return not (adjacent(body_a, body_b) or adjacent(body_b, body_a))

    @property
    def key(self):
        return ("shapes", tuple((a, la, b, lb) for a, la, b, lb in self.pairs),
                self.ground.iterations)

    @property
    def native_refusal(self):
        total = sum(self.counts)
        if total > NATIVE_CANDIDATES:
            return (f"the scene has {total} candidate contact points (more than "
                    f"{NATIVE_CANDIDATES}): its solver's sweeps unrolled into a native program "
                    "would grow as their square; the JAX backend runs them in a loop")
        return None

    def params(self, xp=np):
        return self.solver_params(xp)

    # -- geometry ----------------------------------------------------------------------------
    def _pose(self, xp, T, shape, link):
        """(R (N, 3, 3), p (N, 3)): the shape's frame in the world."""
        Tl = T[..., link, :, :]
        R_l, p_l = Tl[..., :3, :3], Tl[..., :3, 3]
        R_s = np.array(shape.rotation).reshape(3, 3)
        return (xp.einsum("nij,jk->nik", R_l, R_s),
                p_l + xp.einsum("nij,j->ni", R_l, np.array(shape.translation)))

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

    def points_at(self, xp, p, T):
        return xp.concatenate([pts for pts, _, _ in self._contacts(xp, p, T)], axis=1)

    def deepest(self, model, p, T):
        depth = np.asarray(self.depths(np, p, T))
        worst = np.unravel_index(np.argmax(depth), depth.shape)
        return float(depth[worst]), self.labels[worst[-1]]

    def rows(self, xp, p, q, T):
        """(J (N, 3K, nv), depth (N, K), frames (N, K, 3, 3)) of every candidate point: the
        relative velocity of body a's material point over body b's, along the normal (b to a)
        and two tangents."""
        from ..dynamics import jacobian

        jac = {l: jacobian(self.model, q, l, frame="world") for l in self.links}
        rows, depths, frames = [], [], []
        for (a, la, b, lb), (points, normals, depth) in zip(self.pairs,
                                                           self._contacts(xp, p, T)):
            frame = _frames(xp, normals)  # (N, K, 3, 3)
            Jrel = 0.0  # one of the two moves (pairs of shapes at rest are not kept)
            for link, sign in ((la, 1.0), (lb, -1.0)):
                if link not in jac:
                    continue  # the world, the ground: at rest
                J = jac[link]
                r = points - T[..., link, None, :3, 3]  # (N, K, 3) from the link's origin
                Jp = J[:, None, :3] - xp.cross(r[..., None], J[:, None, 3:], axis=2)
                Jrel = Jrel + sign * Jp  # (N, K, 3, nv)
            rows.append(xp.einsum("nkcj,nkjv->nkcv", frame, Jrel))
            depths.append(depth)
            frames.append(frame)
        J = xp.concatenate(rows, axis=1)
        N, K = J.shape[0], J.shape[1]
        return J.reshape((N, 3 * K, J.shape[-1])), xp.concatenate(depths, axis=-1), \
            xp.concatenate(frames, axis=1)

    def describe(self, p):
        return dict(super().describe(p), pairs=[f"{a.name}|{'ground' if b is None else b.name}"
                                                for a, _, b, _ in self.pairs])


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
