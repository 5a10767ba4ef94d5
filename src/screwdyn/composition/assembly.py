"""A robot composed of subsystems attached at connection points.

    asm = Assembly(torso)                                       # the root, fixed to the world
    left = asm.attach(ur5, parent="torso", link="shoulder_l", placement=T, name="left_arm")
    asm.attach(BlackBox(wrench=ft_reading), parent=left, link="tool0", name="gripper")
    tau = asm.inverse_dynamics(q, qd, qdd)                      # the subsystems' tau, stacked

A subsystem is a screwdyn ``Model`` (from URDF, DH or code), a ``BlackBox``, or another
``Assembly`` (its subsystems are copied in, named ``"name/subsystem"``). Subsystem i is attached at
its connection point a_i: a frame fixed to link k of its parent at ``placement`` (T_k_ai, 4x4), on
which its model's root frame sits. Its joints take the slices ``q_slice`` and ``v_slice`` of the
assembly's q and v (and tau), in attachment order; its joint and link names are prefixed with
``"name/"`` in the assembly (``joint_names``, ``to_model``).

The dynamics follow the paper's scheme (``scheme.py``) in any algebra, dual quaternions by default;
``to_model`` gives the equivalent flat model. Links that a subsystem's model welds to its own base
(a UR5's 4 kg base_link; their inertia is ``Model.base_inertia``) move with its connection point:
no joint of the subsystem moves them, but they load its parent (the wrench at the point includes
them, and ``to_model`` merges them into the parent's body). The root's stay with the world.
"""
from dataclasses import dataclass

import numpy as np

from .. import _backend
from ..errors import ModelError
from ..model import Model
from . import scheme
from .blackbox import BlackBox, ConnectionState
from .flatten import flat_model
from .frames import homogeneous, rigid


@dataclass(frozen=True, eq=False)
class Subsystem:
    """A subsystem as attached: its ``model`` or ``black_box``, its ``parent`` (a subsystem name;
    None for the root, fixed to the world), the parent's ``link`` (or black-box connection point)
    it is attached to, the ``placement`` of its connection point in that link's frame (for the
    root: in the world), and its slices of the assembly's q and v. ``body`` is the parent's body
    that link is welded to (-1: the parent's base) and ``mount`` the connection point in that body's
    frame (16 numbers of a 4x4)."""

    name: str
    model: Model
    black_box: BlackBox
    parent: str
    link: str
    placement: np.ndarray
    q_slice: slice
    v_slice: slice
    body: int
    mount: tuple

    @property
    def joint_names(self):
        return tuple(f"{self.name}/{j}" for j in self.model.joint_names) if self.model else ()

    @property
    def where(self):
        """"'name' at connection point 'parent'/'link'", for messages."""
        return _where(self.name, self.parent, self.link)


def _where(name, parent, link):
    return repr(name) if parent is None else f"{name!r} at connection point {parent!r}/{link!r}"


class Assembly:
    """A robot composed of subsystems; ``root`` (Model, BlackBox or Assembly) is fixed to the world
    at ``placement`` (4x4, default identity) and named ``name`` (default: its own name)."""

    def __init__(self, root, name=None, placement=None):
        self._subsystems = {}
        self.name = name or root.name
        self._add(root, self.name, None, None, placement)

    # -- building ------------------------------------------------------------------------------
    def attach(self, subsystem, parent, link, placement=None, name=None):
        """Attach ``subsystem`` (Model, BlackBox or Assembly) to link ``link`` of subsystem
        ``parent`` (its name, its ``Subsystem``, or the Model attached as it) at ``placement``
        (T_link_connection, 4x4; default identity); returns its ``Subsystem`` (for an assembly,
        that of its root)."""
        return self._add(subsystem, name or subsystem.name, self._name_of(parent), link, placement)

    def _name_of(self, parent):
        """The name of a parent given as a name, a Subsystem, or the Model or BlackBox attached."""
        if isinstance(parent, Subsystem):
            return parent.name
        if isinstance(parent, (Model, BlackBox)):
            names = [s.name for s in self._subsystems.values()
                     if parent is s.model or parent is s.black_box]
            if len(names) != 1:
                raise ModelError(f"parent {parent.name!r}: attached as {len(names)} subsystems "
                                 f"{names}; name the one to attach to")
            return names[0]
        return parent

    def _add(self, item, name, parent, link, placement):
        where = "subsystem " + _where(name, parent, link)
        if item is self:
            raise ModelError(f"{where}: attaching assembly {self.name!r} to itself is a cycle")
        if isinstance(item, Assembly):
            return self._add_assembly(item, name, parent, link, rigid(placement, where))
        if not isinstance(item, (Model, BlackBox)):
            raise TypeError(f"{where}: expected a Model, a BlackBox or an Assembly, "
                            f"got {type(item).__name__}")
        if name in self._subsystems:
            raise ModelError(f"{where}: a subsystem named {name!r} is already attached "
                             "(give this one another name=)")
        box = item if isinstance(item, BlackBox) else None
        if box is not None and box.wrench is None and parent is not None:
            raise ModelError(f"{where}: black box {name!r} needs the wrench it exerts on "
                             f"{parent!r} (a measurement or a callable)")
        placement = rigid(placement, where)
        body, mount = self._mount(parent, link, placement, where)
        nq = 0 if box else item.nq
        nv = 0 if box else item.nv
        self._subsystems[name] = s = Subsystem(
            name, None if box else item, box, parent, link, placement,
            slice(self.nq, self.nq + nq), slice(self.nv, self.nv + nv), body, mount)
        return s

    def replaced(self, name, replacement):
        """A copy with subsystem ``name`` replaced by ``replacement`` (a BlackBox or a Model) at
        the same connection point; its children stay, attached by link name (a black box then
        needs a connection point named after each of those links)."""
        if name not in self._subsystems:
            raise ModelError(f"no subsystem named {name!r} (attached: {list(self._subsystems)})")
        items = [(replacement if s.name == name else s.model or s.black_box, s)
                 for s in self._subsystems.values()]
        (root_item, root), *others = items
        copy = Assembly(root_item, root.name, root.placement)
        for item, s in others:
            copy._add(item, s.name, s.parent, s.link, s.placement)
        return copy

    def _add_assembly(self, assembly, name, parent, link, placement):
        """Copy ``assembly``'s subsystems in, named ``name/...``, its root at ``placement``."""
        root, *others = assembly.subsystems
        first = self._add(root.model or root.black_box, f"{name}/{root.name}", parent, link,
                          placement @ root.placement)
        for s in others:
            self._add(s.model or s.black_box, f"{name}/{s.name}", f"{name}/{s.parent}", s.link,
                      s.placement)
        return first

    def _mount(self, parent, link, placement, where):
        """(body, T_body_a): the parent's body the connection point is fixed to, and the point's
        pose in that body's frame."""
        if parent is None:
            return -1, tuple(placement.ravel())
        if parent not in self._subsystems:
            raise ModelError(f"{where}: no subsystem named {parent!r} (attached: "
                             f"{list(self._subsystems)})")
        p = self._subsystems[parent]
        if p.model is None:
            if link not in p.black_box.points:
                raise ModelError(f"{where}: black box {parent!r} has no connection point "
                                 f"{link!r} (it has {sorted(p.black_box.points)})")
            return -1, tuple(placement.ravel())
        try:
            frame = p.model.links[p.model.link_index(link)]
        except ModelError:
            raise ModelError(f"{where}: subsystem {parent!r} (model {p.model.name!r}) has no link "
                             f"{link!r}") from None
        T_body_a = homogeneous(frame.rotation, frame.translation) @ placement
        return frame.body, tuple(T_body_a.ravel())

    # -- structure -----------------------------------------------------------------------------
    @property
    def subsystems(self):
        """Every subsystem, parents before children, in attachment order."""
        return tuple(self._subsystems.values())

    @property
    def names(self):
        return tuple(self._subsystems)

    @property
    def models(self):
        """The subsystems with a model (not black boxes)."""
        return tuple(s for s in self._subsystems.values() if s.model is not None)

    def __getitem__(self, name):
        return self._subsystems[name]

    def children(self):
        """{name: the subsystems attached to it}."""
        out = {name: [] for name in self._subsystems}
        for s in self._subsystems.values():
            if s.parent is not None:
                out[s.parent].append(s)
        return out

    @property
    def nq(self):
        return sum(s.model.nq for s in self.models)

    @property
    def nv(self):
        return sum(s.model.nv for s in self.models)

    @property
    def joint_names(self):
        return tuple(j for s in self.models for j in s.joint_names)

    def split_q(self, q):
        """{subsystem: its part of q (..., nq_i)}."""
        return {s.name: q[..., s.q_slice] for s in self.models}

    def split_v(self, v):
        """{subsystem: its part of a velocity-sized vector: qd, qdd or tau (..., nv_i)}."""
        return {s.name: v[..., s.v_slice] for s in self.models}

    def to_model(self):
        """The equivalent flat Model: every subsystem's bodies and links, named ``name/...``, in
        the assembly's q and v order. ModelError if a subsystem is a black box."""
        return flat_model(self)

    def __repr__(self):
        return (f"Assembly({self.name!r}, subsystems={len(self._subsystems)}, nq={self.nq}, "
                f"nv={self.nv})")

    # -- dynamics ------------------------------------------------------------------------------
    def inverse_dynamics(self, q, qd, qdd, f_ext=None, gravity=None, algebra="dq"):
        """Joint forces tau (..., nv) by the paper's scheme: the subsystems' own recursions joined
        at their connection points. ``f_ext``: {subsystem: (..., nlinks_i, 6)} wrenches on its
        links, as in ``screwdyn.inverse_dynamics``."""
        call = scheme.Call(self, algebra, q, qd, qdd, f_ext, gravity)
        return self._stacked(call, scheme.newton_euler(self, call).tau)

    def connection_points(self, q, qd, qdd, f_ext=None, gravity=None, algebra="dq"):
        """{subsystem: ConnectionState at its connection point} (pose, twist, twist derivative
        and the wrench it exerts on its parent, the links its model welds to its base included;
        the root's is on the world), conventions as in ``screwdyn.composition.blackbox``."""
        call = scheme.Call(self, algebra, q, qd, qdd, f_ext, gravity)
        solution = scheme.newton_euler(self, call)
        poses = scheme.connection_poses(self, call, solution)
        alg, out = call.alg, {}
        for s in self.subsystems:
            v, a = (scheme.twist_or_rest(call, V) for V in solution.motion[s.name])
            zeta = solution.wrench[s.name]
            out[s.name] = ConnectionState(
                call.public(alg.to_matrix(poses[s.name])), call.public(v), call.public(a),
                None if zeta is None else call.public(alg.wrench_vector(zeta)))
        return out

    def mass_matrix(self, q, algebra="dq"):
        """M(q) (..., nv, nv), column j the inverse dynamics of qdd = e_j at rest with gravity
        off (with gravity on, every column would also carry g(q))."""
        self._require_models("mass_matrix")
        xp = _backend.namespace(q)
        q = _backend.as_float_array(q, xp, "q")
        columns = self.inverse_dynamics(q[..., None, :], xp.zeros(self.nv), xp.eye(self.nv),
                                        gravity=xp.zeros(3), algebra=algebra)
        return xp.swapaxes(columns, -1, -2)

    def forward_dynamics(self, q, qd, tau, f_ext=None, gravity=None, algebra="dq"):
        """qdd (..., nv) solving M(q) qdd = tau - b(q, qd)."""
        self._require_models("forward_dynamics")
        xp = _backend.namespace(q, qd, tau)
        bias = self.inverse_dynamics(q, qd, xp.zeros(self.nv), f_ext, gravity, algebra)
        M = self.mass_matrix(q, algebra)
        rhs = _backend.as_float_array(tau, xp, "tau") - bias
        return xp.linalg.solve(M, rhs[..., None])[..., 0]

    def _stacked(self, call, tau):
        """The subsystems' tau (nv_i, N), stacked in attachment order, public layout."""
        return call.public(call.xp.concatenate([tau[s.name] for s in self.models]))

    def _require_models(self, what):
        boxes = [s.name for s in self._subsystems.values() if s.model is None]
        if boxes:
            raise ModelError(f"{what} needs every subsystem's inertia; {boxes} are black boxes, "
                             "known only at their connection points")
