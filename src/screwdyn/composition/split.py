"""A flat Model cut into subsystems at chosen joints: the assembly of its parts.

The subtree a cut joint moves becomes a subsystem, attached to the subsystem that holds the
joint's parent body, at the joint's placement (its connection point is the joint frame at
q = 0). Links go with the body they are welded to; links welded to the world, and the model's
``base_inertia``, stay with the root subsystem. Its q and v are the parts' in attachment order
(the root's, then each cut's in the order given): not the flat model's when a part comes
between two others.
"""
from dataclasses import replace

import numpy as np

from ..errors import ModelError
from .frames import homogeneous

NO_BASE = (0.0, (0.0, 0.0, 0.0), (0.0,) * 9)


def split_model(model, cuts, name=None):
    """An ``Assembly`` of ``model`` cut at the joints ``cuts`` ({subsystem name: joint name}); the
    rest is the root subsystem, named ``name`` (default: the model's)."""
    from .assembly import Assembly

    owner = [None] * model.nbodies  # the subsystem of each body (None: the root's)
    roots = {}
    for part, joint in cuts.items():
        try:
            roots[model.joint_index(joint)] = part
        except ModelError:
            raise ModelError(f"subsystem {part!r}: model {model.name!r} has no moving joint "
                             f"{joint!r} to cut at") from None
    root_name = name or model.name
    if root_name in cuts:
        raise ModelError(f"subsystem {root_name!r}: the root's name is also a cut's; name them "
                         "apart (name=)")
    for i, p in enumerate(model.parent):
        owner[i] = roots.get(i, owner[p] if p >= 0 else None)
    parts = {None: _part(model, owner, None, root_name, model.base_inertia)}
    for i, part in sorted(roots.items()):
        parts[part] = _part(model, owner, part, part, NO_BASE)
    assembly = Assembly(parts[None][0], name=root_name)
    for i, part in sorted(roots.items()):
        b, p = model.bodies[i], model.parent[i]
        if p < 0:
            raise ModelError(f"subsystem {part!r}: joint {b.joint!r} hangs from the world; cut "
                             "below the root's first joints")
        parent_model, index = parts[owner[p]]
        link = model.bodies[p].link
        frame = parent_model.links[parent_model.link_index(link)]
        T_body_link = homogeneous(frame.rotation, frame.translation)
        T_body_joint = homogeneous(b.rotation, b.translation)
        assembly.attach(parts[part][0], parent=root_name if owner[p] is None else owner[p],
                        link=link, placement=np.linalg.inv(T_body_link) @ T_body_joint,
                        name=part)
    return assembly


def _part(model, owner, part, name, base_inertia):
    """(the Model of the bodies ``owner`` gives ``part``, their index map): the part's root
    bodies sit on its base frame, the joint frame of the cut at q = 0."""
    index = {}
    bodies = []
    for i, b in enumerate(model.bodies):
        if owner[i] != part:
            continue
        index[i] = len(bodies)
        p = model.parent[i]
        if p >= 0 and owner[p] == part:
            bodies.append(replace(b, parent=index[p]))
        elif p < 0:  # a root body of the model: on the world, or on the root's base
            bodies.append(b)
        else:  # the cut joint: its placement becomes the connection point's
            bodies.append(replace(b, parent=-1, rotation=tuple(np.eye(3).ravel()),
                                  translation=(0.0, 0.0, 0.0)))
    links = [replace(link, body=index.get(link.body, -1)) for link in model.links
             if (link.body >= 0 and owner[link.body] == part)
             or (link.body < 0 and part is None)]
    root_link = model.root_link if part is None else bodies[0].link if bodies else ""
    out = replace(model, name=name, bodies=tuple(bodies), links=tuple(links),
                  root_link=root_link, base_inertia=base_inertia,
                  configurations=_part_configurations(model, owner, part), _hash_cache=[])
    for attribute in ("dh", "dh_convention"):  # a DH table describes the whole chain only
        if getattr(out, attribute, None):
            out = replace(out, **{attribute: type(getattr(out, attribute))()}, _hash_cache=[])
    return out, index


def _part_configurations(model, owner, part):
    """The model's named configurations restricted to the part's joints (its q is theirs, in
    body order); none for a coupled model, whose parts' q layouts the mimics decide."""
    if model.coupled or not model.configurations:
        return ()
    index = np.concatenate([np.arange(s.start, s.stop, dtype=int)
                            for i, s in enumerate(model.q_slices) if owner[i] == part]
                           or [np.zeros(0, dtype=int)])
    return tuple((name, tuple(float(x) for x in np.asarray(q)[index]))
                 for name, q in model.configurations)
