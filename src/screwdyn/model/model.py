"""The frozen robot model: a kinematic tree of moving bodies, with every link's frame kept.

A *body* is what one joint with degrees of freedom moves: its child link and every link welded to
it by fixed joints (their inertias merged into the body's). Bodies are numbered so that
``parent[i] < i`` (depth-first, children in the order the source lists them); ``-1`` is the world.
Each body carries, in its own frame (the joint frame after the joint's motion):

- ``placement``: the joint frame in the parent body's frame at q = 0, as (R, p);
- the joint ``kind`` (``revolute``, ``continuous``, ``prismatic``, ``free``) and its unit ``axis``;
- the inertia: ``mass``, centre of mass ``com`` and rotational inertia ``inertia`` about the centre
  of mass, in body axes;
- optional ``armature`` (reflected rotor inertia) and viscous ``damping``, zero by default.

Configuration layout follows Pinocchio: a free joint takes q = (x, y, z, qx, qy, qz, qw) and
v = (linear, angular) velocity of the body expressed in the body frame.
"""
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from ..errors import ModelError

JOINT_NQ = {"revolute": 1, "continuous": 1, "prismatic": 1, "free": 7}
JOINT_NV = {"revolute": 1, "continuous": 1, "prismatic": 1, "free": 6}


def _tuple(a):
    return tuple(float(x) for x in np.asarray(a, dtype=float).ravel())


@dataclass(frozen=True)
class Body:
    """One joint with degrees of freedom and the rigid body it moves."""

    joint: str
    link: str
    parent: int
    kind: str
    axis: tuple
    rotation: tuple  # placement R, 9 numbers row-major
    translation: tuple  # placement p
    mass: float
    com: tuple
    inertia: tuple  # 3x3 about the centre of mass, body axes, row-major
    armature: float = 0.0
    damping: float = 0.0

    @property
    def nq(self):
        return JOINT_NQ[self.kind]

    @property
    def nv(self):
        return JOINT_NV[self.kind]


@dataclass(frozen=True)
class Link:
    """A named frame: welded to ``body`` (-1: the world) at a fixed placement in its frame."""

    name: str
    body: int
    rotation: tuple
    translation: tuple
    mass: float = 0.0  # the link's own mass (before merging), for summaries


@dataclass(frozen=True)
class Model:
    """A frozen, hashable kinematic tree. Build it with a loader or ``ModelBuilder``."""

    name: str
    bodies: tuple
    links: tuple
    root_link: str = ""
    dh: tuple = ()  # the DHLink table the model was made from (``from_dh``), else empty
    dh_convention: str = ""  # "standard" or "modified" when ``dh`` is set
    # (mass, com, inertia about the com) of the links welded to the world, in the root frame:
    # no joint moves them, but a subsystem attached to a moving parent carries them along
    base_inertia: tuple = (0.0, (0.0, 0.0, 0.0), (0.0,) * 9)
    _hash_cache: list = field(default_factory=list, compare=False, repr=False)

    def __hash__(self):
        if not self._hash_cache:
            self._hash_cache.append(hash((self.name, self.bodies, self.links, self.dh)))
        return self._hash_cache[0]

    # -- sizes and names ----------------------------------------------------------------
    @property
    def nbodies(self):
        return len(self.bodies)

    @property
    def nlinks(self):
        return len(self.links)

    @cached_property
    def nq(self):
        return sum(b.nq for b in self.bodies)

    @cached_property
    def nv(self):
        return sum(b.nv for b in self.bodies)

    @property
    def joint_names(self):
        """Joints with degrees of freedom, in velocity order."""
        return tuple(b.joint for b in self.bodies)

    @property
    def link_names(self):
        return tuple(link.name for link in self.links)

    @cached_property
    def parent(self):
        return tuple(b.parent for b in self.bodies)

    @cached_property
    def q_slices(self):
        return _slices([b.nq for b in self.bodies])

    @cached_property
    def v_slices(self):
        return _slices([b.nv for b in self.bodies])

    @cached_property
    def children(self):
        kids = [[] for _ in self.bodies]
        for i, b in enumerate(self.bodies):
            if b.parent >= 0:
                kids[b.parent].append(i)
        return tuple(tuple(k) for k in kids)

    @cached_property
    def ancestors(self):
        """For each body, the bodies on its path to the world, itself first."""
        out = []
        for i, b in enumerate(self.bodies):
            out.append((i,) + (out[b.parent] if b.parent >= 0 else ()))
        return tuple(out)

    @property
    def has_floating_base(self):
        return bool(self.bodies) and self.bodies[0].kind == "free" and self.bodies[0].parent == -1

    @cached_property
    def total_mass(self):
        return float(sum(b.mass for b in self.bodies))

    # -- lookups ------------------------------------------------------------------------
    def link_index(self, link):
        """Index of a link given by name or index; ``ModelError`` if there is none."""
        if isinstance(link, (int, np.integer)):
            if not -self.nlinks <= link < self.nlinks:
                raise ModelError(f"link index {link} out of range (model has {self.nlinks} links)")
            return int(link) % self.nlinks
        try:
            return self._link_lookup[link]
        except KeyError:
            raise ModelError(f"no link named {link!r} in model {self.name!r}") from None

    @cached_property
    def _link_lookup(self):
        return {link.name: i for i, link in enumerate(self.links)}

    def joint_index(self, joint):
        """Index (in body order) of a joint with degrees of freedom, by name."""
        for i, b in enumerate(self.bodies):
            if b.joint == joint:
                return i
        raise ModelError(f"no moving joint named {joint!r} in model {self.name!r}")

    # -- derived numeric data (numpy, read-only) ------------------------------------------
    @cached_property
    def armature(self):
        return _frozen(np.concatenate([np.full(b.nv, b.armature) for b in self.bodies] or [[]]))

    @cached_property
    def damping(self):
        return _frozen(np.concatenate([np.full(b.nv, b.damping) for b in self.bodies] or [[]]))

    @cached_property
    def neutral(self):
        """The zero configuration (identity quaternion for free joints)."""
        parts = [np.array([0, 0, 0, 0, 0, 0, 1.0]) if b.kind == "free" else np.zeros(1)
                 for b in self.bodies]
        return _frozen(np.concatenate(parts or [[]]))

    # -- variants -----------------------------------------------------------------------
    def with_joint_parameters(self, armature=None, damping=None):
        """A copy with per-joint ``armature`` / ``damping`` (dicts by joint name, or scalars)."""
        def value(spec, b, old):
            if spec is None:
                return old
            if isinstance(spec, dict):
                unknown = set(spec) - set(self.joint_names)
                if unknown:
                    raise ModelError(f"no moving joint named {sorted(unknown)[0]!r}")
                return float(spec.get(b.joint, old))
            return float(spec)

        bodies = tuple(replace(b, armature=value(armature, b, b.armature),
                               damping=value(damping, b, b.damping)) for b in self.bodies)
        for b in bodies:
            if not (np.isfinite(b.armature) and b.armature >= 0
                    and np.isfinite(b.damping) and b.damping >= 0):
                raise ModelError(f"joint {b.joint!r}: armature and damping must be finite and >= 0")
        return replace(self, bodies=bodies, _hash_cache=[])

    # -- presentation ---------------------------------------------------------------------
    def __repr__(self):
        return (f"Model({self.name!r}, nq={self.nq}, nv={self.nv}, bodies={self.nbodies}, "
                f"links={self.nlinks}, mass={self.total_mass:.4g} kg)")

    def summary(self):
        """A readable table of the joints, links and masses."""
        lines = [repr(self), f"  root link: {self.root_link}",
                 f"  {'#':>3}  {'joint':<26}{'kind':<11}{'axis':<20}{'link':<22}{'parent':<22}"
                 f"{'mass [kg]':>10}"]
        for i, b in enumerate(self.bodies):
            parent = self.bodies[b.parent].link if b.parent >= 0 else "(world)"
            axis = "" if b.kind == "free" else "(" + ", ".join(f"{a:.3g}" for a in b.axis) + ")"
            lines.append(f"  {i:>3}  {b.joint:<26}{b.kind:<11}{axis:<20}{b.link:<22}{parent:<22}"
                         f"{b.mass:>10.4g}")
        welded = [l.name for l in self.links
                  if l.body < 0 or self.bodies[l.body].link != l.name]
        if welded:
            lines.append(f"  fixed-attached links: {', '.join(welded)}")
        return "\n".join(lines)

    # -- named joint values -------------------------------------------------------------
    def q_from_dict(self, values, base=None):
        """q from ``{joint: value}`` (a ROS ``joint_states`` as a dict); others from ``base``
        (default: the neutral configuration). A free joint takes its 7 numbers."""
        return self._vector_from_dict(values, base, self.neutral, self.q_slices, "q")

    def v_from_dict(self, values, base=None):
        """qd, qdd or tau from ``{joint: value}``; missing joints are zero (or from ``base``)."""
        return self._vector_from_dict(values, base, np.zeros(self.nv), self.v_slices, "v")

    def to_dict(self, vector):
        """``{joint: value}`` from a q (length nq) or v-sized vector (length nv)."""
        vector = np.asarray(vector, dtype=float)
        if vector.shape == (self.nq,):
            slices = self.q_slices
        elif vector.shape == (self.nv,):
            slices = self.v_slices
        else:
            raise ValueError(f"expected shape ({self.nq},) or ({self.nv},), got {vector.shape}")
        return {b.joint: (float(vector[s][0]) if b.nv == 1 else vector[s].copy())
                for b, s in zip(self.bodies, slices)}

    def from_joint_states(self, names, position=(), velocity=(), effort=()):
        """(q, qd, tau) from the fields of a ROS ``sensor_msgs/JointState`` message."""
        def pick(values, builder):
            values = list(values)
            if values and len(values) != len(names):
                raise ValueError(f"joint_states: {len(names)} names but {len(values)} values")
            return builder(dict(zip(names, values))) if values else builder({})
        return pick(position, self.q_from_dict), pick(velocity, self.v_from_dict), \
            pick(effort, self.v_from_dict)

    def _vector_from_dict(self, values, base, default, slices, what):
        out = np.array(default if base is None else base, dtype=float)
        if out.shape != default.shape:
            raise ValueError(f"base must have shape {default.shape}, got {out.shape}")
        index = {b.joint: s for b, s in zip(self.bodies, slices)}
        for name, value in values.items():
            if name not in index:
                raise ModelError(f"no moving joint named {name!r} in model {self.name!r}")
            value = np.atleast_1d(np.asarray(value, dtype=float))
            s = index[name]
            if value.shape != (s.stop - s.start,):
                raise ValueError(f"joint {name!r} takes {s.stop - s.start} {what} values, "
                                 f"got shape {value.shape}")
            out[s] = value
        return out


def random_configuration(model, seed=None):
    """A random configuration: angles uniform in [-pi, pi], unit quaternions uniform."""
    rng = np.random.default_rng(seed)
    parts = []
    for b in model.bodies:
        if b.kind == "free":
            quat = rng.normal(size=4)
            parts.append(np.concatenate([rng.normal(size=3), quat / np.linalg.norm(quat)]))
        else:
            parts.append(rng.uniform(-np.pi, np.pi, size=1))
    return np.concatenate(parts) if parts else np.zeros(0)


def _slices(sizes):
    out, start = [], 0
    for n in sizes:
        out.append(slice(start, start + n))
        start += n
    return tuple(out)


def _frozen(a):
    a = np.asarray(a, dtype=float)
    a.flags.writeable = False
    return a
