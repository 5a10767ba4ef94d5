"""URDF loader: links, joints and inertias; meshes, sensors and transmissions are ignored.

Joint types: revolute, continuous, prismatic, fixed, floating (a free joint). Mimic joints load as
independent joints. Every error names the file element: ``<joint name="elbow">: ...``.
"""
import os
import xml.etree.ElementTree as ET

import numpy as np

from ..errors import ModelError
from .builder import ModelBuilder, rpy_to_matrix

URDF_KINDS = {"revolute": "revolute", "continuous": "continuous", "prismatic": "prismatic",
              "fixed": "fixed", "floating": "free"}


def load_urdf(source, floating_base=False, strict=False, joint_damping=False, joint_order="file"):
    """Load a URDF file (path) or XML string into a Model.

    floating_base: add a free joint ``root_joint`` (Pinocchio's convention) above the root link.
    strict: raise ``ModelError`` for physically inconsistent inertias instead of warning.
    joint_damping: read ``<dynamics damping>`` into the model (off by default: Pinocchio's
        dynamics ignore it too).
    joint_order: ``"file"`` (depth-first, siblings as the file lists them) or ``"name"``
        (siblings sorted by joint name: the order Pinocchio's URDF parser gives).
    """
    robot, origin = _parse(source)
    name = robot.get("name") or os.path.splitext(os.path.basename(origin))[0] or "robot"
    builder = ModelBuilder(name)
    for element in robot.findall("link"):
        _add_link(builder, element)
    for element in robot.findall("joint"):
        _add_joint(builder, element, joint_damping)
    return builder.build(floating_base=floating_base, strict=strict, joint_order=joint_order)


def _parse(source):
    text = str(source)
    if text.lstrip().startswith("<"):
        origin, data = "<string>", text
    else:
        try:
            with open(source, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ModelError(f"cannot read URDF file {source!r}: {e.strerror}") from None
        origin = str(source)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise ModelError(f"{origin}: not well-formed XML ({e})") from None
    if root.tag != "robot":
        raise ModelError(f"{origin}: the root element is <{root.tag}>, expected <robot>")
    return root, origin


def _add_link(builder, element):
    name = _name(element, "link")
    where = f'<link name="{name}">'
    inertial = element.find("inertial")
    if inertial is None:
        builder.add_link(name, where=where)
        return
    xyz, rpy = _origin(inertial, where + " <inertial>")
    mass_el = inertial.find("mass")
    inertia_el = inertial.find("inertia")
    if mass_el is None:
        raise ModelError(f"{where} <inertial>: no <mass> element")
    if inertia_el is None:
        raise ModelError(f"{where} <inertial>: no <inertia> element")
    mass = _number(mass_el, "value", where + " <mass>")
    I = {k: _number(inertia_el, k, where + " <inertia>", default=0.0)
         for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    inertia = np.array([[I["ixx"], I["ixy"], I["ixz"]],
                        [I["ixy"], I["iyy"], I["iyz"]],
                        [I["ixz"], I["iyz"], I["izz"]]])
    builder.add_link(name, mass=mass, com=xyz, inertia=inertia,
                     inertia_rotation=rpy_to_matrix(rpy), where=where)


def _add_joint(builder, element, joint_damping):
    name = _name(element, "joint")
    where = f'<joint name="{name}">'
    kind = element.get("type")
    if kind not in URDF_KINDS:
        raise ModelError(f"{where}: unsupported joint type {kind!r} "
                         f"(supported: {', '.join(URDF_KINDS)})")
    xyz, rpy = _origin(element, where)
    links = {}
    for role in ("parent", "child"):
        el = element.find(role)
        if el is None or not el.get("link"):
            raise ModelError(f"{where}: missing <{role} link=...>")
        links[role] = el.get("link")
    axis_el = element.find("axis")
    axis = _vector(axis_el, "xyz", where + " <axis>", (1.0, 0.0, 0.0))
    dynamics = element.find("dynamics")
    damping = (_number(dynamics, "damping", where + " <dynamics>", default=0.0)
               if joint_damping and dynamics is not None else 0.0)
    builder.add_joint(name, URDF_KINDS[kind], links["parent"], links["child"], xyz=xyz, rpy=rpy,
                      axis=axis, damping=damping, where=where)


def _name(element, tag):
    name = element.get("name")
    if not name:
        raise ModelError(f"a <{tag}> element has no name attribute")
    return name


def _origin(element, where):
    origin = element.find("origin")
    return (_vector(origin, "xyz", where + " <origin>", (0.0, 0.0, 0.0)),
            _vector(origin, "rpy", where + " <origin>", (0.0, 0.0, 0.0)))


def _vector(element, attribute, where, default):
    text = None if element is None else element.get(attribute)
    if text is None:
        return np.array(default)
    try:
        values = [float(x) for x in text.split()]
    except ValueError:
        raise ModelError(f"{where}: {attribute}={text!r} is not three numbers") from None
    if len(values) != 3:
        raise ModelError(f"{where}: {attribute}={text!r} is not three numbers")
    if not np.all(np.isfinite(values)):
        raise ModelError(f"{where}: {attribute}={text!r} is not finite")
    return np.array(values)


def _number(element, attribute, where, default=None):
    text = element.get(attribute)
    if text is None:
        if default is None:
            raise ModelError(f"{where}: missing attribute {attribute!r}")
        return default
    try:
        return float(text)
    except ValueError:
        raise ModelError(f"{where}: {attribute}={text!r} is not a number") from None
