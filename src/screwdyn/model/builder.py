"""Build a Model in code, link by link and joint by joint; the URDF and DH loaders use it too.

    b = ModelBuilder("pendulum")
    b.add_link("base")
    b.add_link("rod", mass=1.0, com=(0, 0, -0.5), inertia=np.diag([0.1, 0.1, 0.0]))
    b.add_joint("hinge", "revolute", parent="base", child="rod", axis=(0, 1, 0))
    model = b.build()

Every check names the element at fault (``where``: the loaders pass their own file element).
"""
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InertiaWarning, ModelError, warn
from . import joints
from .model import GRAVITY, Body, Link, Mimic, Model


def rpy_to_matrix(rpy):
    """URDF roll-pitch-yaw (fixed axes x, y, z) to a rotation matrix: Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


@dataclass
class _LinkSpec:
    name: str
    mass: float
    com: np.ndarray
    inertia: np.ndarray  # about the centre of mass, link axes
    where: str


@dataclass
class _JointSpec:
    name: str
    model: object  # a joints.JointModel, or None for a fixed joint
    parent: str
    child: str
    R: np.ndarray
    p: np.ndarray
    armature: object
    damping: object
    coulomb: object
    where: str


class ModelBuilder:
    """Collects links and joints, then checks and freezes them into a Model."""

    def __init__(self, name="robot"):
        self.name = name
        self._links = {}
        self._joints = {}
        self._mimic = {}

    def add_link(self, name, mass=0.0, com=(0.0, 0.0, 0.0), inertia=None, inertia_rotation=None,
                 where=None):
        """A link with its mass, centre of mass and rotational inertia about the centre of mass,
        given in axes rotated by ``inertia_rotation`` (3x3) from the link frame (URDF's inertial
        origin rpy). ``inertia=None`` is a point mass (zero rotational inertia)."""
        where = where or f"link {name!r}"
        if name in self._links:
            raise ModelError(f"{where}: duplicate link name {name!r}")
        mass = _finite(mass, (), where, "mass")
        if mass < 0:
            raise ModelError(f"{where}: negative mass {mass}")
        com = _finite(com, (3,), where, "centre of mass")
        inertia = np.zeros((3, 3)) if inertia is None else _finite(inertia, (3, 3), where, "inertia")
        if not np.allclose(inertia, inertia.T, rtol=0, atol=1e-12 * (1 + np.abs(inertia).max())):
            raise ModelError(f"{where}: inertia matrix is not symmetric")
        if np.any(np.diag(inertia) < -1e-12 * max(1.0, np.abs(inertia).max())):
            raise ModelError(f"{where}: negative moment of inertia {np.diag(inertia).tolist()}")
        if inertia_rotation is not None:
            R = _rotation(inertia_rotation, where, "inertia rotation")
            inertia = R @ inertia @ R.T
        self._links[name] = _LinkSpec(name, mass, com, inertia, where)
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
        p = _finite(xyz, (3,), where, "origin xyz")
        R = (_rotation(rotation, where, "origin rotation") if rotation is not None
             else rpy_to_matrix(_finite(rpy, (3,), where, "origin rpy")))
        nv = 0 if model is None else model.nv
        values = {}
        for value, what in ((armature, "armature"), (damping, "damping"), (coulomb, "coulomb")):
            a = as_floats(value, np.shape(value), where, what)
            pairs = what == "coulomb" and a.ndim == 2
            if not np.all(np.isfinite(a)):
                raise ModelError(f"{where}: {what} is not finite: {a.tolist()}")
            if not pairs and np.any(a < 0):
                raise ModelError(f"{where}: negative {what} {a.tolist()}")
            if a.ndim and a.shape != ((nv, 2) if pairs else (nv,)):
                raise ModelError(f"{where}: {what} must be one number or {nv}"
                                 + (f" (or {nv} pairs)" if what == "coulomb" else "")
                                 + f", got {a.tolist()}")
            values[what] = a if pairs else np.broadcast_to(a, (nv,))
        c = values["coulomb"]
        coulomb = (tuple((float(p), float(m)) for p, m in c) if c.ndim == 2
                   else tuple((float(f), -float(f)) for f in c))
        self._joints[name] = _JointSpec(name, model, parent, child, R, p, values["armature"],
                                        values["damping"], coulomb, where)
        return self

    def add_mimic(self, joint, source, multiplier=1.0, offset=0.0, where=None):
        """Record that ``joint`` mimics ``source``: q_joint = multiplier * q_source + offset
        (both 1-DoF joints; checked in ``build``)."""
        where = where or f"joint {joint!r}"
        m = _finite(multiplier, (), where, "mimic multiplier")
        o = _finite(offset, (), where, "mimic offset")
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
            bodies.append(_new_body("root_joint", root, -1, base, np.eye(3), np.zeros(3)))
            link_frames[root] = (0, np.eye(3), np.zeros(3))
        else:
            link_frames[root] = (-1, np.eye(3), np.zeros(3))
        for j in order:
            body, R_b, p_b = link_frames[j.parent]
            R, p = R_b @ j.R, R_b @ j.p + p_b  # joint frame in the parent body's frame
            if j.model is None:
                link_frames[j.child] = (body, R, p)
            else:
                bodies.append(_new_body(j.name, j.child, body, j.model, R, p, j.armature,
                                        j.damping, j.coulomb))
                link_frames[j.child] = (len(bodies) - 1, np.eye(3), np.zeros(3))
        links = tuple(Link(name, f[0], _tup(f[1]), _tup(f[2]), self._links[name].mass)
                      for name, f in link_frames.items())
        merged = self._merged_inertias(link_frames, len(bodies))
        bodies = tuple(replace(b, mass=merged[i][0], com=merged[i][1], inertia=merged[i][2])
                       for i, b in enumerate(bodies))
        relations = self._mimic_relations(bodies, mimic == "couple")
        g = _finite(gravity, (3,), "gravity", "gravity")
        model = Model(self.name, bodies, links, root, base_inertia=merged[-1], gravity=_tup(g),
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

    def _check_inertias(self, strict, source=""):
        problems = []
        for spec in self._links.values():
            what = _inertia_defect(spec.inertia)
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
            parts[b].append((s.mass, R @ s.com + p, R @ s.inertia @ R.T))
        return {i: merged_inertia(group) for i, group in parts.items()}


def merged_inertia(parts):
    """(mass, com, inertia about the com) of rigid parts given as (mass, com, inertia about
    their com) in one frame: the parallel-axis theorem, as tuples."""
    mass = sum(m for m, _, _ in parts)
    com = sum(m * c for m, c, _ in parts) / mass if mass > 0 else np.zeros(3)
    inertia = sum((I + m * (np.dot(c - com, c - com) * np.eye(3) - np.outer(c - com, c - com))
                   for m, c, I in parts), np.zeros((3, 3)))
    return float(mass), _tup(com), _tup(inertia)


def _inertia_defect(I):
    """What is physically wrong with a rotational inertia about the centre of mass, or ''."""
    scale = 1e-9 * abs(np.trace(I)) + 1e-12  # rounding in the file's digits is not a defect
    eig = np.linalg.eigvalsh(I)
    if eig[0] < -scale:
        return f"inertia not positive semi-definite (eigenvalues {np.round(eig, 12).tolist()})"
    a, b, c = eig
    if a + b < c - scale:
        return (f"principal moments {np.round(eig, 12).tolist()} violate the triangle inequality "
                "(no real mass distribution has them)")
    return ""


def _new_body(joint, link, parent, model, R, p, armature=None, damping=None, coulomb=None):
    return Body(joint, link, parent, model, _tup(R), _tup(p), 0.0, (0.0,) * 3, (0.0,) * 9,
                None if armature is None else _tup(armature),
                None if damping is None else _tup(damping), coulomb)


def _tup(a):
    return tuple(float(x) for x in np.asarray(a, dtype=float).ravel())


def as_floats(value, shape, where, what):
    """``value`` as a float array of ``shape``; ModelError naming ``where`` and ``what`` if not."""
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {what} is not numeric: {value!r}") from None
    if a.shape != shape:
        raise ModelError(f"{where}: {what} must have shape {shape}, got {a.shape}")
    return a


def _finite(value, shape, where, what):
    a = as_floats(value, shape, where, what)
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{where}: {what} is not finite: {a.tolist()}")
    return float(a) if shape == () else a


def _rotation(R, where, what):
    R = _finite(R, (3, 3), where, what)
    if not np.allclose(R @ R.T, np.eye(3), atol=1e-9) or np.linalg.det(R) < 0:
        raise ModelError(f"{where}: {what} is not a rotation matrix")
    return R
