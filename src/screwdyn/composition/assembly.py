"""A robot composed of subsystems attached at connection points.

    asm = Assembly(torso)                                       # the root, fixed to the world
    left = asm.attach(ur5, parent="torso", link="shoulder_l", placement=T, name="left_arm")
    asm.attach(BlackBox(wrench=ft_reading), parent=left, link="tool0", name="gripper")
    tau = asm.inverse_dynamics(q, qd, qdd)                      # the subsystems' tau, stacked

A subsystem is a screwdyn ``Model`` (from URDF, DH or code), a ``BlackBox``, or another
``Assembly`` (its subsystems are copied in, named ``"name/subsystem"``, and ``name`` names the
group: it can be replaced or detached as one). Subsystem i is attached at its connection point
a_i: a frame fixed to link k of its parent at ``placement`` (T_k_ai, 4x4), on which its model's
root frame sits. Its joints take the slices ``q_slice`` and ``v_slice`` of the assembly's q and v
(and tau), in attachment order; its joint and link names are prefixed with ``"name/"`` in the
assembly (``joint_names``, ``to_model``).

Reconfiguration: ``attach`` adds a module in time proportional to the module (the others are not
touched); ``detach`` removes a subsystem or group with everything attached to it and returns them
as an assembly; ``replace`` swaps a subsystem or group for a Model, BlackBox or Assembly at the
same connection point, its children staying attached by link name. The subsystems before the
change keep their records; those after it get new q and v slices. Every operation checks all it
needs before it changes anything: on a bad input it raises ``ModelError`` naming the subsystem
and the assembly is left as it was.

The dynamics follow the paper's scheme (``scheme.py``: each subsystem's W_i, composed) in any
algebra (the spatial algebra by default, as everywhere; ``algebra="dq"`` runs the paper's own
dual-quaternion Newton-Euler at the centres of mass); forward dynamics, the mass matrix and the energies run the
articulated-body and composite-body recursions across the connection points (``articulated``).
``to_model`` gives the equivalent flat model. Links that a subsystem's model welds to its own
base (a UR5's 4 kg base_link; their inertia is ``Model.base_inertia``) move with its connection
point: no joint of the subsystem moves them, but they load its parent (the wrench at the point
includes them, and ``to_model`` merges them into the parent's body). The root's stay with the
world.
"""
from dataclasses import dataclass, replace

import numpy as np

from ..errors import ModelError
from ..model import Model
from .blackbox import BlackBox
from .flatten import configuration_model, flat_model
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

    @property
    def item(self):
        """What is attached: the Model or the BlackBox."""
        return self.model if self.model is not None else self.black_box


def _where(name, parent, link):
    return repr(name) if parent is None else f"{name!r} at connection point {parent!r}/{link!r}"


class Assembly:
    """A robot composed of subsystems; ``root`` (Model, BlackBox or Assembly) is fixed to the world
    at ``placement`` (4x4, default identity) and named ``name`` (default: its own name)."""

    def __init__(self, root, name=None, placement=None):
        self._subsystems, self._children, self._groups = {}, {}, {}
        self._nq = self._nv = 0
        self.version = 0  # increases with every change (caches of the dynamics key on it)
        self.name = name or root.name
        self._commit(*self._plan(root, self.name, None, None, placement))

    @classmethod
    def split(cls, model, cuts, name=None):
        """``model`` cut into subsystems at the joints ``cuts`` ({subsystem: joint name}): each
        cut joint's subtree a subsystem, attached where the joint was (``split.split_model``)."""
        from .split import split_model

        return split_model(model, cuts, name)

    # -- building ------------------------------------------------------------------------------
    def attach(self, subsystem, parent, link, placement=None, name=None):
        """Attach ``subsystem`` (Model, BlackBox or Assembly) to link ``link`` of subsystem
        ``parent`` (its name, its ``Subsystem``, or the Model attached as it) at ``placement``
        (T_link_connection, 4x4; default identity); returns its ``Subsystem`` (for an assembly,
        that of its root). Costs what the attached subsystem costs, whatever the size of the
        assembly."""
        name = name or subsystem.name
        entries, groups = self._plan(subsystem, name, self._name_of(parent), link, placement)
        self._commit(entries, groups)
        return self._subsystems[entries[0].name]

    def detach(self, name):
        """Remove subsystem or group ``name`` and everything attached to it; returns them as an
        assembly rooted at ``name`` (fixed to the world at the identity, to be attached again
        elsewhere). ModelError for the root."""
        members = self._members(name)
        root = self.subsystems[0].name
        if root in members:
            raise ModelError(f"cannot detach {name!r}: it is the root of assembly {self.name!r}, "
                             "which every other subsystem hangs from")
        removed = self._subtree(members)
        prefix = f"{name}/" if name in self._groups else ""
        rename = {n: n[len(prefix):] if prefix and n.startswith(prefix) else n for n in removed}
        part = Assembly.__new__(Assembly)
        part._subsystems, part._children, part._groups = {}, {}, {}
        part._nq = part._nv = 0
        part.version, part.name = 0, name
        entries = []
        for n in self._subsystems:
            if n in removed:
                s = self._subsystems[n]
                top = n == members[0]
                entries.append(replace(
                    s, name=rename[n], parent=None if top else rename[s.parent],
                    link=None if top else s.link, placement=rigid(None, "") if top else
                    s.placement, body=-1 if top else s.body,
                    mount=tuple(np.eye(4).ravel()) if top else s.mount))
        groups = {(g[len(prefix):] if prefix and g.startswith(prefix) else g):
                  tuple(rename[m] for m in ms)
                  for g, ms in self._groups.items() if g != name and set(ms) <= removed}
        part._commit(entries, groups)
        self._remove(removed)
        return part

    def replace(self, name, replacement):
        """Replace subsystem or group ``name`` by ``replacement`` (a Model, a BlackBox or an
        Assembly, named ``name``) at the same connection point; the subsystems attached to it
        stay, attached by link name to the replacement (its root, for an assembly; a black box
        needs a connection point named after each of those links)."""
        members = self._members(name)
        top = self._subsystems[members[0]]
        removed = set(members)
        entries, groups = self._plan(replacement, name, top.parent, top.link, top.placement,
                                     removed=removed)
        new_root = entries[0]
        moved = {}
        for m in members:
            for child in self._children[m]:
                if child in removed:
                    continue
                c = self._subsystems[child]
                where = "subsystem " + _where(child, name, c.link)
                body, mount = self._mount(new_root, c.link, c.placement, where,
                                          f"the replacement of {name!r}")
                moved[child] = replace(c, parent=new_root.name, body=body, mount=mount)
        order = []
        for n, s in self._subsystems.items():
            if n == members[0]:
                order.extend(entries)
            elif n not in removed:
                order.append(moved.get(n, s))
        new = tuple(e.name for e in entries)
        kept = {}
        for g, ms in self._groups.items():
            if set(ms) <= removed:
                continue  # inside what is replaced
            if set(ms) & removed:  # a group around it: the replacement takes its place
                at = next(k for k, m in enumerate(ms) if m in removed)
                ms = tuple(m for m in ms[:at]) + new + tuple(m for m in ms[at:]
                                                            if m not in removed)
            kept[g] = ms
        self._rebuild(order, {**kept, **groups})
        if top.parent is None:
            self.name = name

    def replaced(self, name, replacement):
        """A copy with subsystem or group ``name`` replaced by ``replacement`` (see ``replace``);
        this assembly is left as it is."""
        copy = self.copy()
        copy.replace(name, replacement)
        return copy

    def copy(self):
        """A new assembly with the same subsystems (models and black boxes shared)."""
        out = Assembly.__new__(Assembly)
        out._subsystems, out._groups = dict(self._subsystems), dict(self._groups)
        out._children = {n: list(c) for n, c in self._children.items()}
        out._nq, out._nv, out.version, out.name = self._nq, self._nv, 0, self.name
        return out

    # -- planning and committing changes -------------------------------------------------------
    def _plan(self, item, name, parent, link, placement, removed=frozenset()):
        """The Subsystem records (slices unset) and groups that attaching ``item`` as ``name``
        would add, all checked against the assembly (less ``removed``); nothing is changed."""
        where = "subsystem " + _where(name, parent, link)
        if item is self:
            raise ModelError(f"{where}: attaching assembly {self.name!r} to itself is a cycle")
        if parent is not None and parent == name:
            raise ModelError(f"{where}: a subsystem attached to itself is a cycle")
        staged = {}
        if isinstance(item, Assembly):
            placement = rigid(placement, where)
            root, *others = item.subsystems
            self._stage(root.item, f"{name}/{root.name}", parent, link,
                        placement @ root.placement, staged, removed)
            for s in others:
                self._stage(s.item, f"{name}/{s.name}", f"{name}/{s.parent}", s.link,
                            s.placement, staged, removed)
            groups = {name: tuple(staged)}
            groups.update({f"{name}/{g}": tuple(f"{name}/{m}" for m in ms)
                           for g, ms in item._groups.items()})
            self._check_new_name(name, where, removed, staged, group=True)
            return list(staged.values()), groups
        self._stage(item, name, parent, link, placement, staged, removed)
        return list(staged.values()), {}

    def _stage(self, item, name, parent, link, placement, staged, removed):
        where = "subsystem " + _where(name, parent, link)
        if not isinstance(item, (Model, BlackBox)):
            raise TypeError(f"{where}: expected a Model, a BlackBox or an Assembly, "
                            f"got {type(item).__name__}")
        self._check_new_name(name, where, removed, staged)
        box = item if isinstance(item, BlackBox) else None
        if box is not None:
            if box.wrench is None and parent is not None:
                raise ModelError(f"{where}: black box {name!r} needs the wrench it exerts on "
                                 f"{parent!r} (a measurement, a WrenchLog or a callable)")
            box.check(where)
        placement = rigid(placement, where)
        if parent is None:
            body, mount = -1, tuple(placement.ravel())
        else:
            known = staged.get(parent) or (self._subsystems.get(parent)
                                           if parent not in removed else None)
            if known is None:
                raise ModelError(f"{where}: no subsystem named {parent!r} (attached: "
                                 f"{[n for n in self._subsystems if n not in removed]})")
            body, mount = self._mount(known, link, placement, where, f"subsystem {parent!r}")
        staged[name] = Subsystem(name, None if box else item, box, parent, link, placement,
                                 None, None, body, mount)

    def _check_new_name(self, name, where, removed, staged, group=False):
        taken = (name in self._subsystems and name not in removed) or (
            name in self._groups and not set(self._groups[name]) <= set(removed)) or (
            not group and name in staged)
        if taken:
            raise ModelError(f"{where}: a subsystem named {name!r} is already attached "
                             "(give this one another name=)")

    @staticmethod
    def _mount(parent, link, placement, where, what):
        """(body, T_body_a): the parent's body the connection point is fixed to, and the point's
        pose in that body's frame (16 numbers)."""
        if parent.model is None:
            if link not in parent.black_box.points:
                raise ModelError(f"{where}: black box {parent.name!r} has no connection point "
                                 f"{link!r} (it has {sorted(parent.black_box.points)})")
            return -1, tuple(placement.ravel())
        try:
            frame = parent.model.links[parent.model.link_index(link)]
        except ModelError:
            raise ModelError(f"{where}: {what} (model {parent.model.name!r}) has no link "
                             f"{link!r}") from None
        T_body_a = homogeneous(frame.rotation, frame.translation) @ placement
        return frame.body, tuple(T_body_a.ravel())

    def _commit(self, entries, groups):
        for s in entries:
            nq, nv = (s.model.nq, s.model.nv) if s.model is not None else (0, 0)
            self._subsystems[s.name] = replace(s, q_slice=slice(self._nq, self._nq + nq),
                                               v_slice=slice(self._nv, self._nv + nv))
            self._nq, self._nv = self._nq + nq, self._nv + nv
            self._children[s.name] = []
            if s.parent is not None:
                self._children[s.parent].append(s.name)
        self._groups.update(groups)
        self.version += 1

    def _rebuild(self, order, groups):
        """Set the subsystems to ``order`` (records, parents first), new slices where they moved."""
        subsystems, children, nq, nv = {}, {}, 0, 0
        for s in order:
            size_q, size_v = (s.model.nq, s.model.nv) if s.model is not None else (0, 0)
            if s.q_slice != slice(nq, nq + size_q) or s.v_slice != slice(nv, nv + size_v):
                s = replace(s, q_slice=slice(nq, nq + size_q), v_slice=slice(nv, nv + size_v))
            subsystems[s.name], children[s.name] = s, []
            if s.parent is not None:
                children[s.parent].append(s.name)
            nq, nv = nq + size_q, nv + size_v
        self._subsystems, self._children, self._groups = subsystems, children, groups
        self._nq, self._nv = nq, nv
        self.version += 1

    def _remove(self, removed):
        order = [s for n, s in self._subsystems.items() if n not in removed]
        self._rebuild(order, {g: tuple(m for m in ms if m not in removed)
                              for g, ms in self._groups.items() if not set(ms) <= removed})

    def _members(self, name):
        """The subsystems of group ``name`` (its root first), or [name] for a subsystem."""
        if name in self._groups:
            return list(self._groups[name])
        if name in self._subsystems:
            return [name]
        raise ModelError(f"no subsystem or group named {name!r} (subsystems: "
                         f"{list(self._subsystems)}; groups: {list(self._groups)})")

    def _subtree(self, names):
        out, stack = set(), list(names)
        while stack:
            n = stack.pop()
            if n not in out:
                out.add(n)
                stack.extend(self._children[n])
        return out

    def _name_of(self, parent):
        """The name of a parent given as a name, a Subsystem, or the Model or BlackBox attached."""
        if isinstance(parent, Subsystem):
            return parent.name
        if isinstance(parent, (Model, BlackBox)):
            names = [s.name for s in self._subsystems.values() if parent is s.item]
            if len(names) != 1:
                raise ModelError(f"parent {parent.name!r}: attached as {len(names)} subsystems "
                                 f"{names}; name the one to attach to")
            return names[0]
        return parent

    # -- structure -----------------------------------------------------------------------------
    @property
    def subsystems(self):
        """Every subsystem, parents before children, in attachment order."""
        return tuple(self._subsystems.values())

    @property
    def names(self):
        return tuple(self._subsystems)

    @property
    def groups(self):
        """{group: its subsystems' names} for the assemblies attached as one subsystem."""
        return dict(self._groups)

    @property
    def models(self):
        """The subsystems with a model (not black boxes)."""
        return tuple(s for s in self._subsystems.values() if s.model is not None)

    def __getitem__(self, name):
        try:
            return self._subsystems[name]
        except KeyError:
            raise KeyError(f"no subsystem named {name!r}" + (
                f" ({name!r} is a group: see .groups)" if name in self._groups else "")) from None

    def __contains__(self, name):
        return name in self._subsystems

    def children(self):
        """{name: the subsystems attached to it}."""
        return {n: [self._subsystems[c] for c in cs] for n, cs in self._children.items()}

    @property
    def nq(self):
        return self._nq

    @property
    def nv(self):
        return self._nv

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

    @property
    def configuration_model(self):
        """A Model with the assembly's q and v layout and joint names: ``to_model()`` with the
        black boxes left out (what integrates a configuration and names coordinates; its
        dynamics is not the assembly's when there are black boxes)."""
        return configuration_model(self)

    def __repr__(self):
        return (f"Assembly({self.name!r}, subsystems={len(self._subsystems)}, nq={self.nq}, "
                f"nv={self.nv})")

    # -- dynamics ------------------------------------------------------------------------------
    def inverse_dynamics(self, q, qd, qdd, f_ext=None, gravity=None, algebra="spatial", time=None):
        """Joint forces tau (..., nv) by the paper's scheme: the subsystems' W_i composed at their
        connection points. ``f_ext``: {subsystem: (..., nlinks_i, 6)} wrenches on its links, as
        in ``screwdyn.inverse_dynamics``; ``time`` (...): the times at which black boxes driven
        by a ``WrenchLog`` are read."""
        from . import scheme

        return scheme.inverse_dynamics(self, algebra, q, qd, qdd, f_ext, gravity, time)

    def connection_points(self, q, qd, qdd, f_ext=None, gravity=None, algebra="spatial", time=None):
        """{subsystem: ConnectionState at its connection point} (pose, twist, twist derivative
        and the wrench it exerts on its parent, the links its model welds to its base included;
        the root's is on the world), conventions as in ``screwdyn.composition.blackbox``."""
        from . import scheme

        return scheme.connection_points(self, algebra, q, qd, qdd, f_ext, gravity, time)

    def function(self, name, algebra="spatial"):
        """W_i of subsystem ``name`` (``SubsystemFunction``): its joint forces and the wrench it
        passes up from its joint state, the motion at its connection point and the wrenches at
        its successors' connection points, evaluated on its own."""
        from .function import SubsystemFunction

        return SubsystemFunction(self, name, algebra)

    def forward_dynamics(self, q, qd, tau, f_ext=None, gravity=None, algebra="spatial", time=None):
        """qdd (..., nv): the articulated-body algorithm across the connection points, O(n);
        black boxes act as the known wrenches they exert (measured or logged)."""
        from . import articulated

        return articulated.forward_dynamics(self, algebra, q, qd, tau, f_ext, gravity, time)

    def mass_matrix(self, q, algebra="spatial"):
        """M(q) (..., nv, nv): composite rigid bodies across the connection points. A black box
        is a known wrench, so it adds no inertia: M is that of the subsystems with models."""
        from . import articulated

        return articulated.mass_matrix(self, algebra, q)

    def kinetic_energy(self, q, qd, algebra="spatial"):
        """(...,): the subsystems' kinetic energy (black boxes have none known)."""
        from . import articulated

        return articulated.kinetic_energy(self, algebra, q, qd)

    def potential_energy(self, q, gravity=None, algebra="spatial"):
        """(...,): -sum m g . c over the subsystems' bodies and base links (world frame)."""
        from . import articulated

        return articulated.potential_energy(self, algebra, q, gravity)

