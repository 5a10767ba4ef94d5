"""The flat Model of an assembly: the reference its scheme is checked against."""
from dataclasses import replace

import numpy as np

from ..errors import ModelError
from ..model import Model
from ..model.geometry import merged_inertia
from .frames import homogeneous


def flat_model(assembly):
    """One Model with every subsystem's bodies and links, named ``"subsystem/name"``. Bodies keep
    the attachment order, so the flat q and v are the assembly's. A subsystem's root bodies and the
    links welded to its base hang from the body its connection point is fixed to, and the inertia
    of those links (``Model.base_inertia``) is merged into that body's. What ends up welded to the
    world (the root subsystem's base links, and any subsystem mounted on them) is the flat model's
    ``base_inertia``, in the world frame."""
    for s in assembly.subsystems:
        if s.model is None:
            raise ModelError(f"to_model: subsystem {s.name!r} is a black box, known only at its "
                             "connection point; a flat model needs every subsystem's model")
    return _flattened(assembly)


def configuration_model(assembly):
    """The flat model of the subsystems with models (black boxes left out): the assembly's q and
    v layout and names. What hangs from a black box is placed in the world at the pose the black
    box gives its connection point (when that is one constant 4x4), else at the origin."""
    return _flattened(assembly)


def _flattened(assembly):
    bodies, links = [], []
    first_body, base = {}, {}  # per subsystem: its first body; (body, T_body_base) of its base
    world = []  # (mass, com, inertia) parts welded to the world, world frame
    for s in assembly.subsystems:
        if s.model is None:
            base[s.name] = (-1, np.eye(4))
            continue
        base[s.name] = _base(assembly, s, first_body, base)
        first_body[s.name] = len(bodies)
        for b in s.model.bodies:
            parent, frame = _placed(b, b.parent, first_body[s.name], base[s.name])
            bodies.append(replace(b, joint=f"{s.name}/{b.joint}", link=f"{s.name}/{b.link}",
                                  parent=parent, **frame))
        for link in s.model.links:
            parent, frame = _placed(link, link.body, first_body[s.name], base[s.name])
            links.append(replace(link, name=f"{s.name}/{link.name}", body=parent, **frame))
        body, T = base[s.name]
        part = _placed_inertia(s.model.base_inertia, T)
        if part is None:
            continue
        if body < 0:
            world.append(part)
        else:
            b = bodies[body]
            bodies[body] = replace(b, **_merged([(b.mass, np.array(b.com),
                                                  np.reshape(b.inertia, (3, 3))), part]))
    root = assembly.subsystems[0]
    welded = _merged(world) if world else None
    root_link = f"{root.name}/{root.model.root_link}" if root.model is not None else ""
    return Model(assembly.name, tuple(bodies), tuple(links), root_link,
                 base_inertia=(0.0, (0.0,) * 3, (0.0,) * 9) if welded is None else
                 (welded["mass"], welded["com"], welded["inertia"]))


def _placed_inertia(inertia, T):
    """(mass, com, inertia about the com) of a base inertia (root frame) in the frame where T
    (T_frame_root) places the root frame; None when it is zero."""
    mass, com, I = inertia
    if mass == 0 and not any(I):
        return None
    R = T[:3, :3]
    return mass, R @ np.asarray(com) + T[:3, 3], R @ np.reshape(I, (3, 3)) @ R.T


def _merged(parts):
    """Body fields (mass, com, inertia about the com) of rigidly joined parts (mass, com (3,),
    inertia about their com (3, 3)) in one frame: ``model.geometry.merged_inertia``."""
    mass, com, inertia = merged_inertia([(float(m), tuple(map(float, c)),
                                          tuple(map(float, np.ravel(I)))) for m, c, I in parts])
    return {"mass": mass, "com": tuple(map(float, com)), "inertia": tuple(map(float, inertia))}


def _base(assembly, s, first_body, base):
    """(flat body, T_body_base): where subsystem s's base frame, its connection point, is fixed."""
    mount = np.reshape(s.mount, (4, 4))
    if s.parent is None:
        return -1, mount
    parent = assembly[s.parent]
    if parent.model is None:  # on a black box: at the pose it gives the point, if constant
        pose = parent.black_box.points[s.link].pose
        return -1, (np.asarray(pose, dtype=float) if np.shape(pose) == (4, 4) else np.eye(4)) \
            @ mount
    if s.body >= 0:
        return first_body[s.parent] + s.body, mount
    body, T = base[s.parent]  # a link welded to the parent's base
    return body, T @ mount


def _placed(element, local_parent, offset, base):
    """The flat parent index of a body or link, and, for one hanging from its subsystem's base,
    its placement in the flat parent's frame."""
    if local_parent >= 0:
        return local_parent + offset, {}
    body, T_base = base
    T = T_base @ homogeneous(element.rotation, element.translation)
    return body, {"rotation": tuple(map(float, T[:3, :3].ravel())),
                  "translation": tuple(map(float, T[:3, 3]))}
