"""URDF loader: links, joints (with their limits, mimic relations and dynamics), inertias.
Visual and collision geometry, sensors, transmissions and unknown elements are ignored.

Joint types: revolute, continuous, prismatic, fixed, floating (a free flyer) and planar (motion in
the plane normal to the joint's axis). A closed chain's ``<loop_joint>`` (Isaac Sim's extension:
``<loop_joint name= type="spherical"><link1 link= xyz= rpy=/><link2 link= xyz= rpy=/>``) is
the model's constraint that closes the loop (``Model.constraints``): ``"spherical"`` a
``Connect`` of the two frames' origins, ``"fixed"`` a ``Weld`` of the frames; other types are
refused. What urdfdom (ROS's parser, which Pinocchio uses) accepts
loads here too: XML namespace prefixes that are never declared (``drake:``, ``sensor:``),
whitespace before ``<?xml``, a point-mass ``<inertial>`` (a ``<mass>`` without ``<inertia>``:
zero rotational inertia). What it refuses is refused with a ``ModelError`` naming the element:
a revolute or prismatic joint without ``<limit>``, a ``<limit>`` without ``effort`` or
``velocity``. Hostile XML is refused: entity declarations (the "billion laughs") and external
entities never expand. Every error names the file element: ``<joint name="elbow">: ...``.
"""
import os
import xml.etree.ElementTree as ET
from xml.parsers import expat

import math

from ..errors import JointOrderWarning, ModelError, warn
from .builder import ModelBuilder
from .constraints import Connect, Weld
from .geometry import matmul, rpy_matrix, transpose
from .model import Model

#: URDF joint type -> screwdyn joint type (``model/joints.py``)
URDF_TYPES = {"revolute": "revolute", "continuous": "continuous", "prismatic": "prismatic",
              "fixed": "fixed", "floating": "free", "planar": "planar"}
_NEEDS_LIMIT = ("revolute", "prismatic")


def load_urdf(source: "str | os.PathLike | bytes", floating_base: "bool | str" = False,
              strict: bool = False, joint_damping: bool = False, joint_friction: bool = False,
              joint_order: "str | None" = None, mimic: str = "independent") -> "Model":
    """Load a URDF file (a path) or XML text into a Model.

    floating_base: add a free joint ``root_joint`` (Pinocchio's convention) above the root link
        (or a joint type for it, e.g. ``"planar"`` for a mobile base).
    strict: raise ``ModelError`` for physically inconsistent inertias instead of warning.
    joint_damping, joint_friction: read ``<dynamics damping>`` (viscous) and ``<dynamics
        friction>`` (Coulomb) into the model (off by default: Pinocchio's dynamics ignore them).
    joint_order: ``"file"`` (depth-first, siblings as the file lists them) or ``"name"``
        (siblings sorted by joint name: the order Pinocchio's URDF parser gives). None (the
        default) is ``"file"``, with a ``JointOrderWarning`` where the two orders differ (a
        branched robot whose file does not list siblings by name): q, qd and tau are then a
        permutation of Pinocchio's. Serial chains have one order.
    mimic: ``"independent"`` (a ``<mimic>`` joint keeps its own q, as Pinocchio by default) or
        ``"couple"`` (q_mimic = multiplier * q_source + offset: the model has fewer DoF and the
        coupled joints' forces add up on the source).
    Joint limits (``<limit lower upper velocity effort>``) become ``model.lower_position_limit``,
    ``upper_position_limit``, ``velocity_limit``, ``effort_limit`` (inf where a joint has none:
    continuous, floating and planar joints have no position limits, as in Pinocchio).
    A ``<loop_joint>`` (Isaac Sim's extension) closes a loop: the model's ``constraints``
    (module docstring).
    """
    robot, origin = read_robot(source)
    name = robot.get("name") or os.path.splitext(os.path.basename(origin))[0] or "robot"
    builder = ModelBuilder(name)
    for element in robot.iterfind("link"):
        _add_link(builder, element)
    for element in robot.iterfind("joint"):
        _add_joint(builder, element, joint_damping, joint_friction)
    links = {element.get("name") for element in robot.iterfind("link")}
    loops = [_loop_joint(element, links) for element in robot.iterfind("loop_joint")]
    if joint_order is None:
        joint_order = "file"
        _warn_joint_order(builder, name)
    model = builder.build(floating_base=floating_base, strict=strict, joint_order=joint_order,
                          mimic=mimic, source="" if origin == "<string>" else origin)
    return model.with_constraints(*loops) if loops else model


def _warn_joint_order(builder, name):
    """A ``JointOrderWarning`` where the file's order of sibling joints is not Pinocchio's."""
    try:
        difference = builder.first_order_difference()
    except ModelError:
        return  # the tree is broken: build() says why
    if difference is not None:
        warn(f"{name}: sibling joints are ordered as the file lists them (joint_order='file', "
             f"the default), but Pinocchio orders them by name: here {difference[0]!r} comes "
             f"where Pinocchio has {difference[1]!r}, so q, qd, tau, M are a permutation of "
             "Pinocchio's. Pass joint_order='name' for Pinocchio's order, or joint_order='file' "
             "to keep the file's; either silences this warning", JointOrderWarning)


# -- XML ------------------------------------------------------------------------------------
def read_robot(source):
    """The <robot> element of a URDF (a path, XML text or bytes) read as the loader reads it,
    and its origin: the file name, or ``"<string>"`` for XML text."""
    if isinstance(source, bytes):
        origin, data = "<string>", source
    else:
        text = str(source)
        if text.lstrip().startswith("<"):
            origin, data = "<string>", text.encode("utf-8")
        else:
            try:
                with open(source, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise ModelError(f"cannot read URDF file {source!r}: {e.strerror}") from None
            origin = str(source)
    root = parse_xml(data, origin)
    if root.tag != "robot":
        raise ModelError(f"{origin}: the root element is <{root.tag}>, expected <robot>")
    return root, origin


def parse_xml(data, origin):
    """An ElementTree element from XML bytes, read as urdfdom (TinyXML) reads them: namespace
    prefixes are part of the names (an undeclared ``drake:`` is no error), leading whitespace
    and a byte-order mark are skipped; a DOCTYPE that declares entities, and any reference to
    an entity that is not predefined, is a ``ModelError`` (no expansion, no file access)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    data = data.lstrip()
    if b"<!" not in data.replace(b"<!--", b""):  # no DOCTYPE, no entity: ElementTree's C parser
        try:
            root = ET.fromstring(data)
            if not root.tag.startswith("{"):  # no default namespace: names as written
                return root
        except ET.ParseError as e:
            if "unbound prefix" not in str(e):
                raise ModelError(f"{origin}: not well-formed XML ({e})") from None
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def refuse(*_):
        raise ModelError(f"{origin}: the XML declares or uses entities (refused: entity "
                         "expansion and external entities are not allowed in a robot file)")

    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse
    parser.SkippedEntityHandler = refuse
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        raise ModelError(f"{origin}: not well-formed XML ({e})") from None
    try:
        return builder.close()
    except AssertionError:  # no element at all
        raise ModelError(f"{origin}: not well-formed XML (no element)") from None


# -- elements -----------------------------------------------------------------------------------
def _add_link(builder, element):
    name = _name(element, "link")
    where = f'<link name="{name}">'
    inertial = element.find("inertial")
    if inertial is None:
        builder.add_link(name, where=where)
        return
    xyz, rpy = _origin(inertial, where + " <inertial>")
    mass_el = inertial.find("mass")
    if mass_el is None:
        raise ModelError(f"{where} <inertial>: no <mass> element")
    mass = _number(mass_el, "value", where + " <mass>")
    inertia_el = inertial.find("inertia")
    inertia = None  # a point mass
    if inertia_el is not None:
        xx, xy, xz, yy, yz, zz = (_number(inertia_el, k, where + " <inertia>", default=0.0)
                                  for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
        inertia = (xx, xy, xz, xy, yy, yz, xz, yz, zz)
    rotation = None if inertia is None or rpy == (0.0, 0.0, 0.0) else rpy_matrix(rpy)
    builder.add_link(name, mass=mass, com=xyz, inertia=inertia, inertia_rotation=rotation,
                     where=where)


def _add_joint(builder, element, joint_damping, joint_friction):
    name = _name(element, "joint")
    where = f'<joint name="{name}">'
    kind = element.get("type")
    if kind not in URDF_TYPES:
        raise ModelError(f"{where}: unsupported joint type {kind!r} "
                         f"(supported: {', '.join(URDF_TYPES)})")
    xyz, rpy = _origin(element, where)
    links = {}
    for role in ("parent", "child"):
        el = element.find(role)
        if el is None or not el.get("link"):
            raise ModelError(f"{where}: missing <{role} link=...>")
        links[role] = el.get("link")
    axis = _vector(element.find("axis"), "xyz", where + " <axis>", (1.0, 0.0, 0.0))
    dynamics = element.find("dynamics")
    damping = coulomb = 0.0
    if dynamics is not None:
        if joint_damping:
            damping = _number(dynamics, "damping", where + " <dynamics>", default=0.0)
        if joint_friction:
            coulomb = _number(dynamics, "friction", where + " <dynamics>", default=0.0)
    builder.add_joint(name, URDF_TYPES[kind], links["parent"], links["child"], xyz=xyz,
                      rpy=rpy, axis=axis, damping=damping, coulomb=coulomb,
                      limits=_limits(element, kind, where), where=where)
    mimic = element.find("mimic")
    if mimic is not None:
        source = mimic.get("joint")
        if not source:
            raise ModelError(f"{where} <mimic>: missing attribute 'joint'")
        builder.add_mimic(name, source,
                          _number(mimic, "multiplier", where + " <mimic>", default=1.0),
                          _number(mimic, "offset", where + " <mimic>", default=0.0), where=where)


def _loop_joint(element, links):
    """A ``<loop_joint>`` (Isaac Sim's URDF extension for closed chains: two links and a
    frame on each, ``<link1 link= xyz= rpy=/>``, ``<link2 .../>``) as the constraint that
    closes the loop: ``type="spherical"`` a ``Connect`` of the frames' origins, ``"fixed"`` a
    ``Weld`` of the frames."""
    name = _name(element, "loop_joint")
    where = f'<loop_joint name="{name}">'
    kind = element.get("type")
    if kind not in ("spherical", "fixed"):
        raise ModelError(f"{where}: type {kind!r} is not modelled (a loop joint of type "
                         "\"spherical\" closes the loop with a ball joint, \"fixed\" welds it)")
    ends = []
    for tag in ("link1", "link2"):
        end = element.find(tag)
        if end is None or not end.get("link"):
            raise ModelError(f"{where}: missing <{tag} link=...>")
        if end.get("link") not in links:
            raise ModelError(f"{where} <{tag}>: the file has no <link name=\"{end.get('link')}\">")
        ends.append((end.get("link"), _vector(end, "xyz", f"{where} <{tag}>", (0.0, 0.0, 0.0)),
                     rpy_matrix(_vector(end, "rpy", f"{where} <{tag}>", (0.0, 0.0, 0.0)))))
    (link_a, point_a, R_a), (link_b, point_b, R_b) = ends
    frames = dict(link_a=link_a, link_b=link_b, point_a=point_a, point_b=point_b, name=name)
    if kind == "spherical":
        return Connect(**frames)
    # the frames coincide: R_a R1 = R_b R2 (world), so R_b^T R_a = R2 R1^T
    return Weld(rotation=matmul(R_b, transpose(R_a)), **frames)


def _limits(element, kind, where):
    """The joint's limits as urdfdom reads them: ``lower``, ``upper`` default 0; ``effort`` and
    ``velocity`` required; required for revolute and prismatic joints; position limits only for
    those (continuous joints take effort and velocity; planar and floating ones none)."""
    limit = element.find("limit")
    if limit is None:
        if kind in _NEEDS_LIMIT:
            raise ModelError(f"{where}: a {kind} joint needs a <limit lower upper effort "
                             "velocity> element (urdfdom and Pinocchio refuse it without)")
        return None
    if kind not in _NEEDS_LIMIT and kind != "continuous":
        return None  # planar, floating, fixed: urdfdom and Pinocchio ignore it
    where = where + " <limit>"
    out = {"effort": _number(limit, "effort", where), "velocity": _number(limit, "velocity", where)}
    if kind in _NEEDS_LIMIT:
        out["lower"] = _number(limit, "lower", where, default=0.0)
        out["upper"] = _number(limit, "upper", where, default=0.0)
    return out


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
        return default
    try:
        values = tuple(map(float, text.split()))
    except ValueError:
        raise ModelError(f"{where}: {attribute}={text!r} is not three numbers") from None
    if len(values) != 3:
        raise ModelError(f"{where}: {attribute}={text!r} is not three numbers")
    total = values[0] + values[1] + values[2]
    if total - total != 0.0 and not all(map(math.isfinite, values)):  # an inf or a nan
        raise ModelError(f"{where}: {attribute}={text!r} is not finite")
    return values


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
