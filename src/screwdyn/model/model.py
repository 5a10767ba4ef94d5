"""The frozen robot model: a kinematic tree of moving bodies, with every link's frame kept.

A *body* is what one joint with degrees of freedom moves: its child link and every link welded to
it by fixed joints (their inertias merged into the body's). Bodies are numbered so that
``parent[i] < i`` (depth-first, children in the order the source lists them); ``-1`` is the world.
Each body carries, in its own frame (the joint frame after the joint's motion):

- ``placement``: the joint frame in the parent body's frame at q = 0, as (R, p);
- ``joint_model``: the joint type and its geometry and limits (``model.joints``: revolute,
  continuous, prismatic, helical, planar, spherical, free flyer, MuJoCo's free joint);
- the inertia: ``mass``, centre of mass ``com`` and rotational inertia ``inertia`` about the centre
  of mass, in body axes;
- per degree of freedom, the joint's own forces: ``armature`` (reflected rotor inertia),
  ``damping`` (viscous friction) and ``coulomb`` (Coulomb friction for positive and negative
  velocity), zero by default.

The configuration layout follows each joint type (``model/joints.py``); a floating base
(``FreeFlyer``) takes q = (x, y, z, qx, qy, qz, qw) and v = (linear, angular) velocity of the
body expressed in the body frame, as in Pinocchio.

Mimic joints (URDF ``<mimic>``) are recorded in ``mimic``. A *coupled* model (``coupled=True``,
``load_urdf(..., mimic="couple")``) keeps the whole tree in ``bodies`` but has the mimicking
joints' configuration tied to their source, q_mimic = multiplier * q_source + offset: its q and v
hold the independent joints only (``active``), ``tree`` is the same model with every joint
independent, and ``coupling`` the map between the two.

Named configurations of the source file are kept in ``configurations`` and read as
``reference_configurations`` (a read-only mapping name -> q, as Pinocchio's
``model.referenceConfigurations``): an MJCF model has ``"qpos0"`` (where the file places its
bodies; MuJoCo's ``qpos0``) and one entry per ``<key>`` keyframe. ``q0`` is the configuration a
simulation of the file starts from: ``"qpos0"`` when the file gives it, else ``neutral`` (URDF
files, DH tables and ``ModelBuilder`` models give none). ``neutral`` stays the zero
configuration. The configurations do not take part in a model's equality or hash (they do not
change its dynamics); variants with the same q layout keep them (``with_constraints``,
``with_inertial_parameters``, ...).
"""
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType

import numpy as np

from ..errors import ModelError
from ..typing import Array, ArrayLike
from . import inertial
from .joints import JointModel

GRAVITY = (0.0, 0.0, -9.81)


def _tuple(a):
    return tuple(float(x) for x in np.asarray(a, dtype=float).ravel())


@dataclass(frozen=True)
class Body:
    """One joint with degrees of freedom and the rigid body it moves."""

    joint: str  # the joint's name
    link: str
    parent: int
    joint_model: JointModel
    rotation: tuple  # placement R, 9 numbers row-major
    translation: tuple  # placement p
    mass: float
    com: tuple
    inertia: tuple  # 3x3 about the centre of mass, body axes, row-major
    armature: tuple = None  # per degree of freedom (nv numbers); None: zeros
    damping: tuple = None
    coulomb: tuple = None  # per degree of freedom (positive-velocity, negative-velocity) forces

    def __post_init__(self):
        nv = self.joint_model.nv
        for name in ("armature", "damping"):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, (0.0,) * nv)
            elif not (type(value) is tuple and len(value) == nv
                      and _finite_non_negative(value)):  # as the builder passes them
                object.__setattr__(self, name, _per_dof(value, nv, self.joint, name))
        c = self.coulomb
        if c is None:
            object.__setattr__(self, "coulomb", ((0.0, 0.0),) * nv)
        elif not (type(c) is tuple and len(c) == nv and (nv == 0 or type(c[0]) is tuple)):
            object.__setattr__(self, "coulomb", tuple(
                (float(a), float(b)) for a, b in (c if np.ndim(c) == 2 else [c] * nv)))

    @property
    def nq(self):
        return self.joint_model.nq

    @property
    def nv(self):
        return self.joint_model.nv


def _finite_non_negative(values):
    """True for numbers all finite and >= 0 (at C speed: the sum equals the sum of absolute
    values, and is finite)."""
    total = sum(values)
    return total == sum(map(abs, values)) and total - total == 0.0


def _per_dof(value, nv, joint, name):
    a = np.asarray(value, dtype=float)
    if a.ndim == 0:
        a = np.full(nv, float(a))
    if a.shape != (nv,):
        raise ModelError(f"joint {joint!r}: {name} must be one number or {nv}, got {a.tolist()}")
    if not (np.all(np.isfinite(a)) and np.all(a >= 0)):
        raise ModelError(f"joint {joint!r}: {name} must be finite and >= 0, got {a.tolist()}")
    return tuple(float(x) for x in a)


@dataclass(frozen=True)
class Mimic:
    """A URDF ``<mimic>``: q_joint = multiplier * q_source + offset."""

    joint: str
    source: str
    multiplier: float = 1.0
    offset: float = 0.0


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
    gravity: tuple = GRAVITY  # the default gravity of the dynamics calls, world frame, m/s^2
    mimic: tuple = ()  # Mimic relations of the source file
    coupled: bool = False  # mimicking joints tied to their sources (see the module docstring)
    # equality constraints on the tree (``model/constraints.py``: Connect, Weld, Coupling), the
    # fixed tendons they (and simulations) may name, and the spatial tendons (strings through
    # points on links, whose springs and length limits act in simulations);
    # ``with_constraints`` sets them
    constraints: tuple = ()
    tendons: tuple = ()
    spatial_tendons: tuple = ()
    # None, or the bodies' inertial parameters as traced JAX values (``with_inertial_parameters``
    # under ``jax.jit``/``jax.grad``): the recursions then read them (``traced_parameters``)
    parameters: "TracedParameters | None" = field(default=None, repr=False)
    source: str = field(default="", compare=False)  # the file the model was loaded from
    # named configurations of the source file: ((name, (nq floats)), ...), e.g. MJCF's "qpos0"
    # and its keyframes (``reference_configurations``, ``q0``); not part of equality or hash
    configurations: tuple = field(default=(), compare=False, repr=False)
    _hash_cache: list = field(default_factory=list, compare=False, repr=False)

    def __hash__(self):
        if not self._hash_cache:
            self._hash_cache.append(hash((self.name, self.bodies, self.links, self.dh,
                                          self.gravity, self.mimic, self.coupled,
                                          self.constraints, self.tendons,
                                          self.spatial_tendons)))
        return self._hash_cache[0]

    # -- the tree ---------------------------------------------------------------------------
    @property
    def nbodies(self):
        return len(self.bodies)

    @property
    def nlinks(self):
        return len(self.links)

    @property
    def link_names(self):
        return tuple(link.name for link in self.links)

    @cached_property
    def parent(self):
        return tuple(b.parent for b in self.bodies)

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
        return (bool(self.bodies) and self.bodies[0].parent == -1
                and self.bodies[0].joint_model.floating)

    @cached_property
    def total_mass(self):
        """The moving bodies' mass (kg): a float, or a traced JAX scalar when the model holds
        traced inertial parameters."""
        if self.parameters is not None:
            return self.parameters.array[:, 0].sum()
        return float(sum(b.mass for b in self.bodies))

    # -- inertial parameters ----------------------------------------------------------------
    @property
    def traced_parameters(self):
        """The (bodies, 10) traced inertial parameters the recursions read, or None when the
        bodies' own (float) inertias hold (see ``with_inertial_parameters``)."""
        return None if self.parameters is None else self.parameters.array

    @cached_property
    def nominal(self):
        """The model with its bodies' float inertias: itself, or, for a model holding traced
        inertial parameters, the model they were substituted into (for structural checks)."""
        return self if self.parameters is None else replace(self, parameters=None,
                                                            _hash_cache=[])

    def inertial_parameters(self) -> Array:
        """The bodies' inertial parameters, (bodies, 10), in body order, Pinocchio's order and
        frames (``pinocchio.Inertia.toDynamicParameters``): mass (kg), first moment m c
        (kg m), and the rotational inertia about the body frame's origin Ixx, Ixy, Iyy, Ixz,
        Iyz, Izz (kg m^2), in the body frame (the joint frame after the joint's motion).
        Links welded to a body by fixed joints are merged into it; ``base_inertia`` (links
        welded to the world) is not a parameter: no joint moves it. A numpy array, or the
        traced array of a model made by ``with_inertial_parameters`` under JAX tracing.

        Example:
            ```python
            import screwdyn as sd

            panda = sd.robots.load("panda")
            pi = panda.inertial_parameters()          # (9, 10)
            heavier = panda.with_inertial_parameters(pi * 1.1)
            ```
        """
        if self.parameters is not None:
            return self.parameters.array
        return _frozen(np.array([inertial.parameters_from_inertia(b.mass, b.com, b.inertia)
                                 for b in self.bodies]).reshape(self.nbodies, 10))

    def with_inertial_parameters(self, pi: ArrayLike, check: bool = True) -> "Model":
        """The model with the bodies' inertias given by ``pi`` (bodies, 10) (the layout of
        ``inertial_parameters``).

        numpy (or concrete JAX) values give a plain model (floats in its bodies; the mass,
        centre of mass and inertia about it recovered from pi to rounding). A traced JAX array
        (inside ``jax.jit``, ``jax.grad``, ``jax.vmap``) gives a model that carries it
        (``traced_parameters``): every dynamics function (inverse and forward dynamics, mass
        matrix, bias forces, energies, centre of mass) in the spatial, CGA and dual-quaternion
        algebras differentiates through it. (``algebra="vector"`` reads the DH table and does
        not; the bodies' floats are kept for structural checks such as the one of forward
        dynamics.) A model made by ``from_dh`` loses its DH table (which holds the old
        inertias): ``algebra="vector"`` then raises ``ValueError``.

        Args:
            pi: (bodies, 10) parameters.
            check: raise ``ValueError`` for physically invalid values (negative mass, a
                pseudo-inertia that is not positive semi-definite: ``check_inertial_parameters``);
                traced values cannot be checked here: call ``check_inertial_parameters`` on them.

        Raises:
            ValueError: pi has another shape than (bodies, 10), is not finite, or (``check``)
                describes no real mass distribution; the message names the body.
        """
        from .._backend import _is_jax

        shape = tuple(getattr(pi, "shape", np.shape(pi)))
        if shape != (self.nbodies, 10):
            raise ValueError(f"inertial parameters must have shape (bodies, 10) = "
                             f"({self.nbodies}, 10) for model {self.name!r}, got shape {shape}")
        if _is_jax(pi) and not _is_concrete(pi):
            return replace(self, parameters=TracedParameters(pi), _hash_cache=[])
        a = np.array(pi, dtype=float)
        if not np.all(np.isfinite(a)):
            raise ValueError("inertial parameters must be finite")
        if check:
            valid, smallest = inertial.check_inertial_parameters(a)
            for i in np.flatnonzero(~valid):
                raise ValueError(f"inertial parameters of body {i} (link "
                                 f"{self.bodies[i].link!r}) describe no real mass "
                                 f"distribution: {inertial.describe_violation(a[i], smallest[i])}"
                                 " (pass check=False to accept them)")
        bodies = []
        for b, p in zip(self.bodies, a):
            m, c, I_c = inertial.inertia_from_parameters(p)
            bodies.append(replace(b, mass=float(m), com=_tuple(c),
                                  inertia=_tuple((I_c + I_c.T) / 2)))
        # a DH table holds the old inertias in its own frames: dropped, as split models drop it
        # (algebra="vector" then says the model has none)
        return replace(self, bodies=tuple(bodies), parameters=None, dh=(), dh_convention="",
                       _hash_cache=[])

    @cached_property
    def tree(self):
        """The same tree with every joint independent (itself when not coupled): what the
        recursions run on. Its named configurations are the model's, mapped through
        ``coupling``."""
        if not self.coupled:
            return self
        if not self.configurations:
            return self._independent
        q_index, q_scale, q_offset, _ = self.coupling
        configurations = tuple((name, _tuple(np.asarray(q)[q_index] * q_scale + q_offset))
                               for name, q in self.configurations)
        return replace(self._independent, configurations=configurations, _hash_cache=[])

    @cached_property
    def _independent(self):
        """The tree's layout: the model with every joint independent, without configurations
        (``coupling`` maps them)."""
        return replace(self, coupled=False, configurations=(), _hash_cache=[])

    # -- the configuration layout: q (nq), v (nv), over the independent joints ------------------
    @cached_property
    def active(self):
        """Indices of the bodies whose joints carry q and v: every body, or, for a coupled
        model, all but the mimicking ones."""
        if not self.coupled:
            return tuple(range(self.nbodies))
        mimicking = {m.joint for m in self.mimic}
        return tuple(i for i, b in enumerate(self.bodies) if b.joint not in mimicking)

    @cached_property
    def active_bodies(self):
        return tuple(self.bodies[i] for i in self.active)

    @cached_property
    def nq(self):
        return sum(b.nq for b in self.active_bodies)

    @cached_property
    def nv(self):
        return sum(b.nv for b in self.active_bodies)

    @property
    def joint_names(self):
        """Joints with degrees of freedom, in velocity order."""
        return tuple(b.joint for b in self.active_bodies)

    @property
    def joints(self):
        """The joint models (``model/joints.py``) of ``joint_names``, in order."""
        return tuple(b.joint_model for b in self.active_bodies)

    @cached_property
    def q_slices(self):
        """Per active body (``active_bodies``), its slice of q."""
        return _slices([b.nq for b in self.active_bodies])

    @cached_property
    def v_slices(self):
        """Per active body, its slice of v (qd, qdd, tau)."""
        return _slices([b.nv for b in self.active_bodies])

    @cached_property
    def coupling(self):
        """For a coupled model, how the tree's q and v follow from the model's:
        (q_index, q_scale, q_offset, G) with q_tree = q[..., q_index] * q_scale + q_offset and
        v_tree = v @ G.T, G (tree nv, nv); tau = tau_tree @ G. None when not coupled."""
        if not self.coupled:
            return None
        tree = self._independent
        position = {self.bodies[i].joint: (qs.start, vs.start)
                    for i, qs, vs in zip(self.active, self.q_slices, self.v_slices)}
        rule = {m.joint: m for m in self.mimic}

        def resolve(joint, seen=()):
            if joint in position:
                return position[joint] + (1.0, 0.0)
            if joint in seen:
                raise ModelError(f"mimic joints {list(seen)} form a cycle")
            m = rule[joint]
            qi, vi, scale, offset = resolve(m.source, seen + (joint,))
            return qi, vi, m.multiplier * scale, m.multiplier * offset + m.offset

        q_index, q_scale, q_offset = [], [], []
        G = np.zeros((tree.nv, self.nv))
        for b, qs, vs in zip(tree.bodies, tree.q_slices, tree.v_slices):
            if b.joint in position:
                q0, v0 = position[b.joint]
                q_index += range(q0, q0 + b.nq)
                q_scale += [1.0] * b.nq
                q_offset += [0.0] * b.nq
                G[vs, v0:v0 + b.nv] = np.eye(b.nv)
            else:
                qi, vi, scale, offset = resolve(b.joint)
                q_index.append(qi)
                q_scale.append(scale)
                q_offset.append(offset)
                G[vs.start, vi] = scale
        return (np.array(q_index), _frozen(q_scale), _frozen(q_offset), _frozen(G))

    # -- per degree of freedom (numpy, read-only) ---------------------------------------------
    def _per_v(self, field_name):
        return _frozen(np.concatenate([getattr(b, field_name) for b in self.active_bodies]
                                      or [[]]))

    @cached_property
    def armature(self):
        """Reflected rotor inertia per degree of freedom (nv)."""
        return self._per_v("armature")

    @cached_property
    def damping(self):
        """Viscous joint friction per degree of freedom (nv), N m s/rad or N s/m."""
        return self._per_v("damping")

    @cached_property
    def coulomb(self):
        """Coulomb joint friction (nv, 2): the force added to tau at positive and at negative
        velocity (zero at rest)."""
        out = np.array([c for b in self.active_bodies for c in b.coulomb], dtype=float)
        return _frozen(out.reshape(self.nv, 2))

    @cached_property
    def has_joint_friction(self):
        """Whether any joint has damping or Coulomb friction."""
        return bool(np.any(self.damping) or np.any(self.coulomb))

    def _limit(self, kind):
        return _frozen(np.array([x for b in self.active_bodies
                                 for x in getattr(b.joint_model.limits, kind)], dtype=float))

    @cached_property
    def lower_position_limit(self):
        """Lower position limits (nq), -inf where there is none."""
        return self._limit("lower")

    @cached_property
    def upper_position_limit(self):
        """Upper position limits (nq), inf where there is none."""
        return self._limit("upper")

    @cached_property
    def velocity_limit(self):
        """Velocity limits (nv), inf where there is none."""
        return self._limit("velocity")

    @cached_property
    def effort_limit(self):
        """Effort (force or torque) limits (nv), inf where there is none."""
        return self._limit("effort")

    @cached_property
    def neutral(self):
        """The zero configuration (identity quaternions)."""
        return _frozen(np.concatenate([b.joint_model.neutral() for b in self.active_bodies]
                                      or [[]]))

    @property
    def reference_configurations(self) -> "MappingProxyType[str, np.ndarray]":
        """The named configurations of the source file, a read-only mapping name -> q (nq,
        read-only arrays), as Pinocchio's ``model.referenceConfigurations``: for an MJCF model
        ``"qpos0"`` (MuJoCo's ``qpos0``, where the file places its bodies) and one entry per
        ``<key>`` keyframe (its name, or ``"key0"``, ``"key1"``, ... for unnamed keys). Empty
        for models whose source gives none (URDF, DH tables, ``ModelBuilder``)."""
        return MappingProxyType(self._configuration_arrays)  # a view: not kept (no pickle)

    @cached_property
    def _configuration_arrays(self):
        return {name: _frozen(q) for name, q in self.configurations}

    @cached_property
    def q0(self) -> np.ndarray:
        """The configuration a simulation of the file starts from (nq, read-only): MJCF's
        ``qpos0`` (``reference_configurations["qpos0"]``: a free body where the file puts it,
        hinges and slides at their ``ref``), else ``neutral``. ``Scene.add_robot`` and
        ``screwdyn simulate`` start there by default, as MuJoCo's ``MjData`` does."""
        return self.reference_configurations.get("qpos0", self.neutral)

    def with_configurations(self, configurations: "dict[str, ArrayLike] | None" = None,
                            **named: ArrayLike) -> "Model":
        """A copy with these named configurations (name -> q of nq finite numbers) added to
        the model's (an existing name is replaced); ``"qpos0"`` sets ``q0``.

        Raises ``ValueError`` naming a configuration that is not nq finite numbers."""
        given = dict(configurations or {}, **named)
        merged = dict(self.configurations)
        for name, q in given.items():
            a = np.asarray(q, dtype=float)
            if a.shape != (self.nq,) or not np.all(np.isfinite(a)):
                raise ValueError(f"configuration {name!r} of model {self.name!r} must be "
                                 f"{self.nq} finite numbers (nq), got shape {a.shape}")
            merged[str(name)] = _tuple(a)
        return replace(self, configurations=tuple(merged.items()), _hash_cache=[])

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

    # -- variants -----------------------------------------------------------------------
    def with_joint_parameters(self, armature=None, damping=None, coulomb=None):
        """A copy with per-joint ``armature``, viscous ``damping`` and Coulomb friction
        ``coulomb`` (a magnitude f >= 0: +f at positive velocity, -f at negative), each a
        scalar for every joint or a dict by joint name (a number, or one per degree of
        freedom)."""
        names = {b.joint for b in self.bodies}

        def value(spec, b, old):
            if spec is None:
                return old
            if isinstance(spec, dict):
                unknown = set(spec) - names
                if unknown:
                    raise ModelError(f"no moving joint named {sorted(unknown)[0]!r}")
                if b.joint not in spec:
                    return old
                spec = spec[b.joint]
            a = np.broadcast_to(np.asarray(spec, dtype=float), (b.nv,))
            if not (np.all(np.isfinite(a)) and np.all(a >= 0)):
                raise ModelError(f"joint {b.joint!r}: armature and damping must be finite and "
                                 f">= 0 (and so must coulomb), got {a.tolist()}")
            return tuple(float(x) for x in a)

        def friction(b):
            f = value(coulomb, b, None)
            return b.coulomb if f is None else tuple((x, -x) for x in f)

        bodies = tuple(replace(b, armature=value(armature, b, b.armature),
                               damping=value(damping, b, b.damping), coulomb=friction(b))
                       for b in self.bodies)
        return replace(self, bodies=bodies, _hash_cache=[])

    def with_gravity(self, gravity):
        """A copy whose dynamics default to ``gravity`` (3,), world frame, m/s^2."""
        g = np.asarray(gravity, dtype=float)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ModelError(f"gravity must be 3 finite numbers, got {gravity!r}")
        return replace(self, gravity=_tuple(g), _hash_cache=[])

    def with_constraints(self, *constraints, tendons=None) -> "Model":
        """A copy with these equality constraints (``screwdyn.constraints``: ``Connect``,
        ``Weld``, ``Coupling``) added to the model's, and ``tendons`` (None keeps the model's):
        ``FixedTendon``s, which couplings may name (``tendons``), and ``SpatialTendon``s
        (``spatial_tendons``).

        Raises ``ModelError`` naming the constraint that refers to a link, joint or tendon the
        model has not (or a joint with more than one coordinate in a coupling); nothing is
        changed then. Redundant constraints (an over-constrained loop) are allowed:
        ``constrained_forward_dynamics`` takes the least-squares forces, and
        ``constraints.rank`` reports the deficiency.

        Example:
            ```python
            import screwdyn as sd
            from screwdyn.constraints import Coupling

            panda = sd.robots.load("panda")
            tied = panda.with_constraints(      # the second finger follows the first
                Coupling("panda_finger_joint2", "panda_finger_joint1", name="fingers"))
            assert tied.nconstraints == 1
            ```
        """
        from . import constraints as _constraints

        tendons = self.tendons + self.spatial_tendons if tendons is None else tuple(tendons)
        for t in tendons:
            if not isinstance(t, (_constraints.FixedTendon, _constraints.SpatialTendon)):
                raise ModelError(f"tendons must be FixedTendon or SpatialTendon objects, got "
                                 f"{t!r}")
        fixed = tuple(t for t in tendons if isinstance(t, _constraints.FixedTendon))
        model = replace(self, tendons=fixed, constraints=self.constraints + constraints,
                        spatial_tendons=tuple(t for t in tendons
                                              if not isinstance(t, _constraints.FixedTendon)),
                        _hash_cache=[])
        _constraints.check(model, model.constraints, tendons)
        return model

    def at_step(self, dt: float) -> "Model":
        """The model as a simulation with the step ``dt`` (s) holds its constraints: each
        ``refsafe`` one with a time constant of at least 2 dt (``Constraint.at_step``,
        MuJoCo's refsafe); the model itself where none is shorter."""
        constraints = tuple(c.at_step(dt) for c in self.constraints)
        if all(a is b for a, b in zip(constraints, self.constraints)):
            return self
        return replace(self, constraints=constraints, _hash_cache=[])

    @cached_property
    def nconstraints(self):
        """The number of scalar constraint rows of ``constraints``."""
        return sum(c.rows for c in self.constraints)

    # -- presentation ---------------------------------------------------------------------
    def __repr__(self):
        mass = ("traced" if self.parameters is not None else f"{self.total_mass:.4g} kg")
        return (f"Model({self.name!r}, nq={self.nq}, nv={self.nv}, bodies={self.nbodies}, "
                f"links={self.nlinks}, mass={mass})")

    def summary(self):
        """A readable table of the joints (type, geometry, limits), links and masses."""
        lines = [repr(self), f"  root link: {self.root_link}"
                 + ("" if self.gravity == GRAVITY else f"   gravity: {self.gravity}"),
                 f"  {'#':>3}  {'joint':<24}{'type':<18}{'axis':<30}{'limits q':<18}"
                 f"{'vel':>8}{'effort':>8}  {'link':<20}{'parent':<20}{'mass [kg]':>10}"]
        mimic = {m.joint: m for m in self.mimic}
        for i, b in enumerate(self.bodies):
            parent = self.bodies[b.parent].link if b.parent >= 0 else "(world)"
            jm, lim = b.joint_model, b.joint_model.limits
            rng = (f"[{lim.lower[0]:.3g}, {lim.upper[0]:.3g}]" if b.nq == 1 else
                   "" if all(map(math.isinf, lim.lower + lim.upper)) else "per q")
            vel = f"{lim.velocity[0]:.3g}" if b.nv == 1 else ""
            eff = f"{lim.effort[0]:.3g}" if b.nv == 1 else ""
            kind = jm.type_name + (" (mimic)" if b.joint in mimic else "")
            lines.append(f"  {i:>3}  {b.joint:<24}{kind:<18}{jm.describe():<30}{rng:<18}"
                         f"{vel:>8}{eff:>8}  {b.link:<20}{parent:<20}{b.mass:>10.4g}")
        welded = [l.name for l in self.links
                  if l.body < 0 or self.bodies[l.body].link != l.name]
        if welded:
            lines.append(f"  fixed-attached links: {', '.join(welded)}")
        for m in self.mimic:
            lines.append(f"  mimic: {m.joint} = {m.multiplier:g} * {m.source} + {m.offset:g}"
                         + (" (coupled)" if self.coupled else " (independent)"))
        return "\n".join(lines)

    # -- named joint values -------------------------------------------------------------
    def q_from_dict(self, values, base=None):
        """q from ``{joint: value}`` (a ROS ``joint_states`` as a dict); others from ``base``
        (default: the neutral configuration). A multi-DoF joint takes its nq numbers."""
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
        return {b.joint: (float(vector[s][0]) if s.stop - s.start == 1 else vector[s].copy())
                for b, s in zip(self.active_bodies, slices)}

    def from_joint_states(self, names, position=(), velocity=(), effort=()):
        """(q, qd, tau) from the fields of a ROS ``sensor_msgs/JointState`` message."""
        names = list(names)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"joint_states: joint names repeated: {repeated}")

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
        index = {b.joint: s for b, s in zip(self.active_bodies, slices)}
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


class TracedParameters:
    """A model's traced inertial parameters (``Model.parameters``): equal only to itself, so
    that models holding different traced values never compare equal."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)


def _is_concrete(a):
    """Whether a JAX array has values (not a tracer of jit, grad or vmap)."""
    import jax

    return not isinstance(a, jax.core.Tracer)


def random_configuration(model: Model, seed: "int | np.random.Generator | None" = None
                         ) -> np.ndarray:
    """A random configuration (nq): uniform inside finite position limits, angles uniform in
    [-pi, pi] and positions standard normal where a joint has none, unit quaternions uniform.
    ``seed``: an int, a ``numpy.random.Generator`` or None."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    parts = [b.joint_model.random(rng) for b in model.active_bodies]
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
