"""Build a Model in code, link by link and joint by joint; the URDF and DH loaders use it too.

    b = ModelBuilder("pendulum")
    b.add_link("base")
    b.add_link("rod", mass=1.0, com=(0, 0, -0.5), inertia=np.diag([0.1, 0.1, 0.0]))
    b.add_joint("hinge", "revolute", parent="base", child="rod", axis=(0, 1, 0))
    model = b.build()

Every check names the element at fault (``where``: the loaders pass their own file element).
"""
import warnings
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InertiaWarning, ModelError
from .model import Body, Link, Model

KINDS = ("revolute", "continuous", "prismatic", "fixed", "free")


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
    kind: str
    parent: str
    child: str
    R: np.ndarray
    p: np.ndarray
    axis: np.ndarray
    armature: float
    damping: float
    where: str


class ModelBuilder:
    """Collects links and joints, then checks and freezes them into a Model."""

    def __init__(self, name="robot"):
        self.name = name
        self._links = {}
        self._joints = {}

    def add_link(self, name, mass=0.0, com=(0.0, 0.0, 0.0), inertia=None, inertia_rotation=None,
                 where=None):
        """A link with its mass, centre of mass and rotational inertia about the centre of mass,
        given in axes rotated by ``inertia_rotation`` (3x3) from the link frame (URDF's inertial
        origin rpy)."""
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
                  axis=(1.0, 0.0, 0.0), rotation=None, armature=0.0, damping=0.0, where=None):
        """A joint from ``parent`` to ``child``: its frame sits at (``rotation`` or ``rpy``,
        ``xyz``) in the parent link's frame and becomes the child link's frame."""
        where = where or f"joint {name!r}"
        if name in self._joints:
            raise ModelError(f"{where}: duplicate joint name {name!r}")
        if kind not in KINDS:
            raise ModelError(f"{where}: unknown joint type {kind!r} (expected one of {', '.join(KINDS)})")
        p = _finite(xyz, (3,), where, "origin xyz")
        R = (_rotation(rotation, where, "origin rotation") if rotation is not None
             else rpy_to_matrix(_finite(rpy, (3,), where, "origin rpy")))
        axis = _finite(axis, (3,), where, "axis")
        if kind in ("revolute", "continuous", "prismatic"):
            norm = np.linalg.norm(axis)
            if norm < 1e-12:
                raise ModelError(f"{where}: zero joint axis")
            axis = axis / norm
        else:
            axis = np.zeros(3)
        for value, what in ((armature, "armature"), (damping, "damping")):
            if _finite(value, (), where, what) < 0:
                raise ModelError(f"{where}: negative {what}")
        self._joints[name] = _JointSpec(name, kind, parent, child, R, p, axis,
                                        float(armature), float(damping), where)
        return self

    def build(self, floating_base=False, strict=False, joint_order="file"):
        """Check the tree and freeze it. ``floating_base`` adds a free joint ``root_joint`` above
        the root link. Inconsistent inertias warn (``InertiaWarning``) or, if ``strict``, raise.
        ``joint_order``: depth-first with siblings in the order they were added (``"file"``) or
        sorted by joint name (``"name"``, Pinocchio's order for URDF files)."""
        if joint_order not in ("file", "name"):
            raise ValueError(f"joint_order must be 'file' or 'name', got {joint_order!r}")
        self._check_inertias(strict)
        root, order = self._tree_order(joint_order == "name")
        bodies, link_frames = [], {}
        if floating_base:
            bodies.append(_new_body("root_joint", root, -1, "free", np.zeros(3), np.eye(3),
                                    np.zeros(3), 0.0, 0.0))
            link_frames[root] = (0, np.eye(3), np.zeros(3))
        else:
            link_frames[root] = (-1, np.eye(3), np.zeros(3))
        for j in order:
            body, R_b, p_b = link_frames[j.parent]
            R, p = R_b @ j.R, R_b @ j.p + p_b  # joint frame in the parent body's frame
            if j.kind == "fixed":
                link_frames[j.child] = (body, R, p)
            else:
                bodies.append(_new_body(j.name, j.child, body, j.kind, j.axis, R, p,
                                        j.armature, j.damping))
                link_frames[j.child] = (len(bodies) - 1, np.eye(3), np.zeros(3))
        links = tuple(Link(name, f[0], _tup(f[1]), _tup(f[2]), self._links[name].mass)
                      for name, f in link_frames.items())
        bodies = tuple(replace(b, **dict(zip(("mass", "com", "inertia"),
                                             self._merged_inertia(i, link_frames))))
                       for i, b in enumerate(bodies))
        return Model(self.name, bodies, links, root,
                     base_inertia=self._merged_inertia(-1, link_frames))

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

    def _check_inertias(self, strict):
        problems = []
        for spec in self._links.values():
            what = _inertia_defect(spec.inertia)
            if what:
                problems.append(f"{spec.where}: {what}")
        if not problems:
            return
        message = (f"model {self.name!r}: {len(problems)} link(s) with physically inconsistent "
                   "inertia:\n  " + "\n  ".join(problems))
        if strict:
            raise ModelError(message)
        warnings.warn(message, InertiaWarning, stacklevel=3)

    def _merged_inertia(self, index, link_frames):
        """Mass, centre of mass and rotational inertia (about the centre of mass, body axes) of
        every link welded to body ``index`` (-1: the world)."""
        parts = []
        for name, (b, R, p) in link_frames.items():
            if b == index:
                s = self._links[name]
                parts.append((s.mass, R @ s.com + p, R @ s.inertia @ R.T))
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


def _new_body(joint, link, parent, kind, axis, R, p, armature, damping):
    return Body(joint, link, parent, kind, _tup(axis), _tup(R), _tup(p), 0.0, (0.0,) * 3,
                (0.0,) * 9, armature, damping)


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
