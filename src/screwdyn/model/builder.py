"""Build a Model in code, link by link and joint by joint; the URDF and DH loaders use it too.

    b = ModelBuilder("pendulum")
    b.add_link("base")
    b.add_link("rod", mass=1.0, com=(0, 0, -0.5), inertia=np.diag([0.1, 0.1, 0.0]))
    b.add_joint("hinge", "revolute", parent="base", child="rod", axis=(0, 1, 0))
    model = b.build()

Every check names the element at fault (``where``: the loaders pass their own file element).
"""
import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InertiaWarning, ModelError, warn
from . import geometry as g
from . import joints
from .model import GRAVITY, Body, Link, Mimic, Model


def rpy_to_matrix(rpy):
    """URDF roll-pitch-yaw (fixed axes x, y, z) to a rotation matrix: Rz(yaw) Ry(pitch) Rx(roll)."""
    return np.reshape(g.rpy_matrix(rpy), (3, 3))


@dataclass
class _LinkSpec:
    name: str
    mass: float
    com: tuple
    inertia: tuple  # about the centre of mass, link axes, 9 numbers row-major
    where: str


@dataclass
class _JointSpec:
    name: str
    model: object  # a joints.JointModel, or None for a fixed joint
    parent: str
    child: str
    R: tuple  # 9 numbers, row-major
    p: tuple
    armature: tuple
    damping: tuple
    coulomb: tuple
    where: str


class ModelBuilder:
    """Collects links and joints, then checks and freezes them into a Model."""

    def __init__(self, name="robot"):
        self.name = name
        self._links = {}
        self._joints = {}
        self._mimic = {}

    def has_link(self, name) -> bool:
        """Whether a link ``name`` was added."""
        return name in self._links

    def has_joint(self, name) -> bool:
        """Whether a joint ``name`` was added."""
        return name in self._joints

    def add_link(self, name, mass=0.0, com=(0.0, 0.0, 0.0), inertia=None, inertia_rotation=None,
                 where=None):
        """A link with its mass, centre of mass and rotational inertia about the centre of mass,
        given in axes rotated by ``inertia_rotation`` (3x3) from the link frame (URDF's inertial
        origin rpy). ``inertia=None`` is a point mass (zero rotational inertia)."""
        where = where or f"link {name!r}"
        if name in self._links:
            raise ModelError(f"{where}: duplicate link name {name!r}")
        (mass,) = g.floats(mass, 1, where, "mass")
        if mass < 0:
            raise ModelError(f"{where}: negative mass {mass}")
        com = g.floats(com, 3, where, "centre of mass")
        I = (0.0,) * 9 if inertia is None else g.floats(inertia, 9, where, "inertia")
        scale = max(map(abs, I))
        tol = 1e-12 * (1 + scale)
        if abs(I[1] - I[3]) > tol or abs(I[2] - I[6]) > tol or abs(I[5] - I[7]) > tol:
            raise ModelError(f"{where}: inertia matrix is not symmetric")
        if min(I[0], I[4], I[8]) < -1e-12 * max(1.0, scale):
            raise ModelError(f"{where}: negative moment of inertia {[I[0], I[4], I[8]]}")
        if I[1] != I[3] or I[2] != I[6] or I[5] != I[7]:  # symmetric to rounding: exactly
            xy, xz, yz = (I[1] + I[3]) / 2, (I[2] + I[6]) / 2, (I[5] + I[7]) / 2
            I = (I[0], xy, xz, xy, I[4], yz, xz, yz, I[8])
        if inertia_rotation is not None:
            I = g.congruence(_rotation(inertia_rotation, where, "inertia rotation"), I)
        self._links[name] = _LinkSpec(name, mass, com, I, where)
        return self

    def add_joint(self, name, kind, parent, child, xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0),
                  axis=(1.0, 0.0, 0.0), rotation=None, armature=0.0, damping=0.0, coulomb=0.0,
                  pitch=0.0, limits=None, where=None):
        """A joint from ``parent`` to ``child``: its frame sits at (``rotation`` or ``rpy``,
        ``xyz``) in the parent link's frame and becomes the child link's frame at q = 0.

        kind: a joint type name (``revolute``, ``continuous``, ``prismatic``, ``helical``,
            ``planar``, ``spherical``, ``free``; or ``fixed``), or a ``JointModel``
            (``screwdyn.model.joints``); axis: the unit axis (the plane's normal for planar),
            normalised here; pitch: a helical joint's, m/rad; limits: dict of ``lower``,
            ``upper``, ``velocity``, ``effort`` (see ``joints.make``); armature, damping: per
            degree of freedom, one number or nv; coulomb: Coulomb friction, a magnitude f (one
            or nv: +f at positive velocity, -f at negative) or nv (positive, negative) pairs."""
        where = where or f"joint {name!r}"
        if name in self._joints:
            raise ModelError(f"{where}: duplicate joint name {name!r}")
        model = joints.make(kind, axis=axis, pitch=pitch, limits=limits, where=where)
        p = g.floats(xyz, 3, where, "origin xyz")
        R = (_rotation(rotation, where, "origin rotation") if rotation is not None
             else g.rpy_matrix(g.floats(rpy, 3, where, "origin rpy")))
        nv = 0 if model is None else model.nv
        values = {what: _per_dof(value, nv, where, what)
                  for value, what in ((armature, "armature"), (damping, "damping"))}
        if isinstance(coulomb, (list, tuple, np.ndarray)) and np.ndim(coulomb) == 2:  # pairs
            pairs = g.floats(coulomb, 2 * nv, where, "coulomb")
            coulomb = tuple(zip(pairs[0::2], pairs[1::2]))
        else:
            coulomb = tuple((f, -f) for f in _per_dof(coulomb, nv, where, "coulomb"))
        self._joints[name] = _JointSpec(name, model, parent, child, R, p, values["armature"],
                                        values["damping"], coulomb, where)
        return self

    def add_mimic(self, joint, source, multiplier=1.0, offset=0.0, where=None):
        """Record that ``joint`` mimics ``source``: q_joint = multiplier * q_source + offset
        (both 1-DoF joints; checked in ``build``)."""
        where = where or f"joint {joint!r}"
        (m,) = g.floats(multiplier, 1, where, "mimic multiplier")
        (o,) = g.floats(offset, 1, where, "mimic offset")
        self._mimic[joint] = (Mimic(joint, str(source), m, o), where)
        return self

    def build(self, floating_base=False, strict=False, joint_order="file", mimic="independent",
              gravity=GRAVITY, source=""):
        """Check the tree and freeze it.

        floating_base: False, True (a free flyer ``root_joint`` above the root link, Pinocchio's
            convention) or a joint type / ``JointModel`` for ``root_joint`` (e.g. ``"planar"``
            for a mobile base).
        strict: inconsistent inertias raise instead of warning (``InertiaWarning``).
        joint_order: depth-first with siblings in the order they were added (``"file"``) or
            sorted by joint name (``"name"``, Pinocchio's order for URDF files).
        mimic: ``"independent"`` (mimic joints keep their own q) or ``"couple"``.
        gravity: the model's default gravity (world frame, m/s^2)."""
        if joint_order not in ("file", "name"):
            raise ValueError(f"joint_order must be 'file' or 'name', got {joint_order!r}")
        if mimic not in ("independent", "couple"):
            raise ValueError(f"mimic must be 'independent' or 'couple', got {mimic!r}")
        self._check_inertias(strict, source)
        root, order = self._tree_order(joint_order == "name")
        bodies, link_frames = [], {}
        if floating_base is not False and floating_base is not None:
            kind = "free" if floating_base is True else floating_base
            base = joints.make(kind, axis=(0.0, 0.0, 1.0), where="floating_base")
            if base is None:
                raise ModelError("floating_base: a fixed joint is no floating base")
            placements = [("root_joint", root, -1, base, g.IDENTITY, g.ZERO3, None, None, None)]
            link_frames[root] = (0, g.IDENTITY, g.ZERO3)
        else:
            placements = []
            link_frames[root] = (-1, g.IDENTITY, g.ZERO3)
        for j in order:
            body, R_b, p_b = link_frames[j.parent]
            R, p = g.matmul(R_b, j.R), g.add(g.matvec(R_b, j.p), p_b)  # in the parent body
            if j.model is None:
                link_frames[j.child] = (body, R, p)
            else:
                placements.append((j.name, j.child, body, j.model, R, p, j.armature, j.damping,
                                   j.coulomb))
                link_frames[j.child] = (len(placements) - 1, g.IDENTITY, g.ZERO3)
        links = tuple(Link(name, f[0], f[1], f[2], self._links[name].mass)
                      for name, f in link_frames.items())
        merged = self._merged_inertias(link_frames, len(placements))
        bodies = tuple(Body(name, link, parent, jm, R, p, *merged[i], armature, damping, coulomb)
                       for i, (name, link, parent, jm, R, p, armature, damping, coulomb)
                       in enumerate(placements))
        relations = self._mimic_relations(bodies, mimic == "couple")
        model = Model(self.name, bodies, links, root, base_inertia=merged[-1],
                      gravity=g.floats(gravity, 3, "gravity", "gravity"),
                      mimic=relations, coupled=mimic == "couple" and bool(relations),
                      source=str(source))
        if model.coupled:
            model.coupling  # noqa: B018  (resolves the chains now: a cycle is a ModelError)
        return model

    def _mimic_relations(self, bodies, couple):
        """The checked mimic relations. A broken one is a ``ModelError`` when the model is to
        be coupled, and otherwise (the joints stay independent, as Pinocchio loads them) a
        warning, and the relation is dropped."""
        moving = {b.joint: b for b in bodies}
        out = []
        for joint, (m, where) in self._mimic.items():
            problem = ""
            if not couple and any(self._joints.get(name) is not None
                                  and self._joints[name].model is None
                                  for name in (joint, m.source)):
                continue  # a fixed joint keeps no mimic relation (reduced models keep the tag)
            for name, role in ((joint, "mimic joint"), (m.source, "mimicked joint")):
                if name not in self._joints:
                    problem = problem or f"{role} {name!r} does not exist"
                elif name not in moving or moving[name].nv != 1:
                    problem = problem or (f"{role} {name!r} must be a 1-DoF joint (revolute, "
                                          "continuous, prismatic or helical)")
            if m.source == joint:
                problem = f"joint {joint!r} mimics itself"
            if problem and couple:
                raise ModelError(f"{where} <mimic>: {problem}")
            if problem:
                warn(f"{where} <mimic>: {problem}; the relation is ignored (the joint stays "
                     "independent)")
                continue
            out.append(m)
        # a cycle of mimics (a -> b -> a) has no independent joint to follow
        rule = {m.joint: m.source for m in out}
        for start in rule:
            seen, joint = [start], rule[start]
            while joint in rule:
                if joint in seen:
                    cycle = seen[seen.index(joint):] + [joint]
                    raise ModelError(f"{self._mimic[start][1]}: mimic joints form a cycle "
                                     f"({' -> '.join(cycle)})")
                seen.append(joint)
                joint = rule[joint]
        return tuple(out)

    # -- checks ---------------------------------------------------------------------------
    def _tree_order(self, by_name):
        """Root link and joints in depth-first order (siblings in insertion or name order)."""
        if not self._links:
            raise ModelError(f"model {self.name!r} has no links (no <link> element)")
        parent_joint = {}
        children = {name: [] for name in self._links}
        for j in self._joints.values():
            for role, link in (("parent", j.parent), ("child", j.child)):
                if link not in self._links:
                    raise ModelError(f"{j.where}: {role} link {link!r} does not exist")
            if j.parent == j.child:
                raise ModelError(f"{j.where}: joint connects link {j.child!r} to itself")
            if j.child in parent_joint:
                raise ModelError(f"{j.where}: link {j.child!r} is already the child of joint "
                                 f"{parent_joint[j.child].name!r} (a link has one parent)")
            parent_joint[j.child] = j
            children[j.parent].append(j)
        roots = [name for name in self._links if name not in parent_joint]
        if not roots:
            raise ModelError(f"model {self.name!r}: the joints form a cycle (no root link)")
        if len(roots) > 1:
            raise ModelError(f"model {self.name!r}: several root links {roots[:5]} "
                             "(every link but one must be the child of a joint)")
        def siblings(link):
            return sorted(children[link], key=lambda j: j.name) if by_name else children[link]

        order, stack = [], list(reversed(siblings(roots[0])))
        while stack:
            j = stack.pop()
            order.append(j)
            stack.extend(reversed(siblings(j.child)))
        if len(order) != len(self._joints):
            cyclic = sorted(set(self._joints) - {j.name for j in order})
            raise ModelError(f"{self._joints[cyclic[0]].where}: joints {cyclic[:5]} form a cycle "
                             "not connected to the root link")
        return roots[0], order

    def first_order_difference(self):
        """The first place where the depth-first order of the moving joints with siblings in
        insertion order differs from the one with siblings sorted by name (Pinocchio's order
        for URDF files): the pair of joint names (insertion order's, name order's) at that
        position, or None where both orders are the same (serial chains always)."""
        moving = [[j.name for j in self._tree_order(by_name)[1] if j.model is not None]
                  for by_name in (False, True)]
        for a, b in zip(*moving):
            if a != b:
                return a, b
        return None

    def _check_inertias(self, strict, source=""):
        problems = []
        for spec in self._links.values():
            what = _inertia_defect(spec.inertia) if any(spec.inertia) else ""
            if what:
                problems.append(f"{spec.where}: {what}")
        if not problems:
            return
        message = ((f"{source}: " if source else "")
                   + f"model {self.name!r}: {len(problems)} link(s) with physically inconsistent "
                   "inertia:\n  " + "\n  ".join(problems))
        if strict:
            raise ModelError(message)
        warn(message, InertiaWarning)

    def _merged_inertias(self, link_frames, nbodies):
        """Per body (and, at index -1, the world): the mass, centre of mass and rotational
        inertia (about the centre of mass, body axes) of every link welded to it."""
        parts = {i: [] for i in range(-1, nbodies)}
        for name, (b, R, p) in link_frames.items():
            s = self._links[name]
            if s.mass or any(s.inertia):
                parts[b].append((s.mass, g.add(g.matvec(R, s.com), p),
                                 g.congruence(R, s.inertia)))
        return {i: g.merged_inertia(group) for i, group in parts.items()}


def _inertia_defect(I):
    """What is physically wrong with a rotational inertia about the centre of mass (9 numbers),
    or ''."""
    scale = 1e-9 * abs(I[0] + I[4] + I[8]) + 1e-12  # rounding in a file's digits is no defect
    a, b, c = eig = g.symmetric_eigenvalues(I)
    if a < -scale:
        return f"inertia not positive semi-definite (eigenvalues {[round(x, 12) for x in eig]})"
    if a + b < c - scale:
        return (f"principal moments {[round(x, 12) for x in eig]} violate the triangle "
                "inequality (no real mass distribution has them)")
    return ""


def _per_dof(value, nv, where, what):
    """A joint's per-degree-of-freedom parameter: one number for all, or nv; finite, >= 0."""
    if type(value) is float or type(value) is int:
        if value == 0:
            return (0.0,) * nv
        values = (float(value),) * nv
    else:
        n = int(np.size(value))
        values = g.floats(value, n, where, what)
        if n == 1:
            values = values * nv
        elif n != nv:
            raise ModelError(f"{where}: {what} must be one number or {nv}, got {list(values)}")
    if not all(math.isfinite(x) for x in values):
        raise ModelError(f"{where}: {what} is not finite: {list(values)}")
    if any(x < 0 for x in values):
        raise ModelError(f"{where}: negative {what} {list(values)}")
    return values


def as_floats(value, shape, where, what):
    """``value`` as a float array of ``shape``; ModelError naming ``where`` and ``what`` if not."""
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {what} is not numeric: {value!r}") from None
    if a.shape != shape:
        raise ModelError(f"{where}: {what} must have shape {shape}, got {a.shape}")
    return a


def _rotation(R, where, what):
    R = g.floats(R, 9, where, what)
    if not g.is_rotation(R):
        raise ModelError(f"{where}: {what} is not a rotation matrix")
    return R
