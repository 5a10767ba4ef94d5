"""Denavit-Hartenberg models: ``DHLink``, ``from_dh`` and the DH table file (CSV).

A serial robot is a list of ``DHLink`` rows, one per joint, in the standard convention (Corke's
"A Robotics Toolbox for MATLAB", 1996; Robotics Toolbox for Python's ``RevoluteDH`` /
``PrismaticDH``) or the modified one (Craig; RTB's ``RevoluteMDH`` / ``PrismaticMDH``). Row i
holds, with the joint variable q_i:

    standard:  A_i = Rz(theta_i) Tz(d_i) Tx(a_i) Rx(alpha_i)       frame i at the far end of link i
    modified:  A_i = Rx(alpha_i) Tx(a_i) Rz(theta_i) Tz(d_i)       frame i on joint i's axis
    revolute:  theta_i = q_i + offset_i, d_i = d                   (the ``theta`` field must be 0)
    prismatic: d_i = q_i + offset_i, theta_i = theta               (the ``d`` field must be 0)

(in the modified convention row i holds a_{i-1} and alpha_{i-1}, as RTB's MDH links do). The
dynamic parameters are RTB's: ``mass`` (m), ``com`` (r), the centre of mass in frame i, and
``inertia`` (I), the rotational inertia about the centre of mass in frame-i axes. The drive is
RTB's too: motor inertia ``Jm``, gear ratio ``G``, viscous friction ``B`` and Coulomb friction
``Tc = (positive, negative)``, all referred to the motor, so that the joint adds, as RTB's
``rne``, G^2 Jm qdd + G^2 B qd + |G| Tc[0] (qd > 0) or |G| Tc[1] (qd < 0); ``armature`` and
``damping`` add G^2 Jm and G^2 B directly at the joint.

Porting an RTB model::

    DHLink(a=L.a, alpha=L.alpha, d=L.d, offset=L.offset, theta=L.theta if L.isprismatic else 0,
           joint="prismatic" if L.isprismatic else "revolute", mass=L.m, com=L.r, inertia=L.I,
           Jm=L.Jm, G=L.G, B=L.B, Tc=L.Tc)

and ``from_dh(links, base=robot.base.A, tool=robot.tool.A)``.

The Model that ``from_dh`` builds names its frames so that forward kinematics of ``link0`` (the
base) ... ``link{n}`` equals RTB's ``fkine_all``. In the standard convention each moving body is
the *joint frame* ``link{i}_proximal`` (frame i-1 carried by joint i's motion, z along joint i's
axis) with the DH frame ``link{i}`` welded to it at Tx(a_i) Rx(alpha_i); in the modified
convention frame i is the body frame itself. Joints are ``joint1`` ... ``joint{n}`` unless named.

The DH table file is a CSV file (see ``load_dh_table``).
"""
import csv
import math
import os
import re
from dataclasses import dataclass, fields, replace

import numpy as np

from ..errors import ModelError
from .builder import ModelBuilder, as_floats
from .model import Model

CONVENTIONS = ("standard", "modified")
JOINTS = ("revolute", "prismatic")


@dataclass(frozen=True)
class DHLink:
    """One row of a DH table (see the module docstring); lengths in m, angles in rad, SI units.

    ``inertia`` may be given as a 3x3 matrix, as RTB's 6-vector (Ixx, Iyy, Izz, Ixy, Iyz, Ixz),
    as 3 principal moments or as 0; it is stored as 9 numbers, row-major (also accepted). Every
    field is a float or a tuple of floats (``joint`` a string), so a DHLink is hashable: a Model
    keeps its DH table.
    """

    a: float = 0.0
    alpha: float = 0.0
    d: float = 0.0
    offset: float = 0.0
    joint: str = "revolute"
    theta: float = 0.0
    mass: float = 0.0
    com: tuple = (0.0, 0.0, 0.0)
    inertia: tuple = (0.0,) * 9
    armature: float = 0.0
    damping: float = 0.0
    Jm: float = 0.0  # motor inertia, kg m^2 (at the motor)
    G: float = 1.0  # gear ratio (motor turns per joint turn; its sign is ignored)
    B: float = 0.0  # viscous friction at the motor, N m s/rad
    Tc: tuple = (0.0, 0.0)  # Coulomb friction at the motor for positive and negative velocity

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "joint":
                converted = str(value)
            elif f.name == "com":
                converted = _floats(value, (3,), f.name)
            elif f.name == "Tc":
                a = np.broadcast_to(np.asarray(value, dtype=float), (2,))
                converted = (float(a[0]), float(a[1]))
            elif f.name == "inertia":
                converted = _inertia_tuple(value)
            else:
                converted = _floats(value, (), f.name)
            object.__setattr__(self, f.name, converted)

    @property
    def inertia_matrix(self):
        return np.reshape(self.inertia, (3, 3))

    @property
    def is_prismatic(self):
        return self.joint == "prismatic"

    @property
    def joint_armature(self):
        """The reflected inertia at the joint: armature + G^2 Jm."""
        return self.armature + self.G ** 2 * self.Jm

    @property
    def joint_damping(self):
        """The viscous friction at the joint: damping + G^2 B."""
        return self.damping + self.G ** 2 * self.B

    @property
    def joint_coulomb(self):
        """The Coulomb friction at the joint for positive and negative velocity: |G| Tc."""
        return (abs(self.G) * self.Tc[0], abs(self.G) * self.Tc[1])


def _floats(value, shape, what):
    a = as_floats(value, shape, "DH link", what)
    return float(a) if shape == () else tuple(float(x) for x in a)


def _inertia_tuple(value):
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"DH link: inertia is not numeric: {value!r}") from None
    if a.shape == ():
        if a != 0:
            raise ModelError("DH link: a scalar inertia must be 0 (give 3 moments or a 3x3 matrix)")
        a = np.zeros((3, 3))
    elif a.shape == (3,):
        a = np.diag(a)
    elif a.shape == (6,):  # RTB: Ixx, Iyy, Izz, Ixy, Iyz, Ixz
        xx, yy, zz, xy, yz, xz = a
        a = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    elif a.shape not in ((3, 3), (9,)):  # (9,): the stored form, row-major
        raise ModelError("DH link: inertia must be 0, 3 moments, RTB's 6 numbers "
                         f"(Ixx, Iyy, Izz, Ixy, Iyz, Ixz) or a 3x3 matrix, got shape {a.shape}")
    a = a.reshape(3, 3)
    if np.allclose(a, a.T, rtol=0, atol=1e-12 * (1 + np.abs(a).max())):
        a = (a + a.T) / 2  # exactly symmetric (an asymmetric one is left for check_link)
    return tuple(float(x) for x in a.ravel())


def check_link(link, index):
    """Raise ``ModelError("DH link {index}: ...")`` if ``link`` is not a valid DHLink."""
    where = f"DH link {index}"
    if not isinstance(link, DHLink):
        raise ModelError(f"{where}: expected a DHLink, got {type(link).__name__}")
    if link.joint not in JOINTS:
        raise ModelError(f"{where}: joint must be 'revolute' or 'prismatic', got {link.joint!r}")
    numbers = {f.name: getattr(link, f.name) for f in fields(link) if f.name != "joint"}
    for name, value in numbers.items():
        if not np.all(np.isfinite(value)):
            raise ModelError(f"{where}: {name} is not finite: {value}")
    for name in ("mass", "armature", "damping", "Jm", "B"):
        if numbers[name] < 0:
            raise ModelError(f"{where}: negative {name} {numbers[name]}")
    if link.joint == "revolute" and link.theta != 0:
        raise ModelError(f"{where}: a revolute joint's angle is q + offset; give the fixed angle "
                         f"{link.theta} as offset, not theta")
    if link.joint == "prismatic" and link.d != 0:
        raise ModelError(f"{where}: a prismatic joint's length is q + offset; give the fixed "
                         f"length {link.d} as offset, not d")
    I = link.inertia_matrix
    if not np.allclose(I, I.T, rtol=0, atol=1e-12 * (1 + np.abs(I).max())):
        raise ModelError(f"{where}: inertia matrix is not symmetric")
    if np.any(np.diag(I) < 0):
        raise ModelError(f"{where}: negative moment of inertia {np.diag(I).tolist()}")


def check_convention(convention):
    if convention not in CONVENTIONS:
        raise ModelError(f"DH convention must be 'standard' or 'modified', got {convention!r}")


def dh_transform(link, q, convention):
    """The 4x4 transform A_i of one DH row at joint value ``q`` (a float), numpy."""
    theta, d = ((link.theta, q + link.offset) if link.is_prismatic
                else (q + link.offset, link.d))
    rz, tz, tx, rx = _rot_z(theta), _trans(0, 0, d), _trans(link.a, 0, 0), _rot_x(link.alpha)
    return rz @ tz @ tx @ rx if convention == "standard" else rx @ tx @ rz @ tz


def from_dh(links, convention: str = "standard", name: str = "dh_robot", joint_names=None,
            strict: bool = False, base=None, tool=None, gravity=(0.0, 0.0, -9.81)) -> "Model":
    """A Model of the serial robot described by the DH table ``links`` (a sequence of DHLink).

    convention: ``"standard"`` (Corke, RTB's ``DHRobot``) or ``"modified"`` (Craig, RTB's MDH).
    joint_names: names of the n joints (default ``joint1`` ... ``joint{n}``).
    strict: raise ``ModelError`` for physically inconsistent inertias instead of warning.
    base: 4x4, the pose of the base frame ``link0`` in the world (RTB's ``base``); the world is
        then the root link ``world``, and gravity stays in world axes.
    tool: 4x4, the pose of the tool frame ``tool`` in the last link's frame (RTB's ``tool``).
    gravity: the model's default gravity in the world frame (RTB's ``gravity``).
    The Model keeps the table (``model.dh``, ``model.dh_convention``) for ``algebra="vector"``.
    """
    check_convention(convention)
    links = tuple(links)
    if not links:
        raise ModelError("a DH table needs at least one link")
    for i, link in enumerate(links, 1):
        check_link(link, i)
    n = len(links)
    names = [f"joint{i}" for i in range(1, n + 1)] if joint_names is None else list(joint_names)
    if len(names) != n or len(set(names)) != n or not all(isinstance(s, str) and s for s in names):
        raise ModelError(f"joint_names must be {n} distinct non-empty strings, got {joint_names!r}")
    builder = ModelBuilder(name)
    if base is not None:
        T = _transform(base, "base")
        builder.add_link("world")
        builder.add_joint("base", "fixed", "world", "link0", xyz=T[:3, 3], rotation=T[:3, :3],
                          where="DH base transform")
    builder.add_link("link0")
    for i, (link, joint) in enumerate(zip(links, names), 1):
        _add_row(builder, i, link, joint, convention)
    if tool is not None:
        T = _transform(tool, "tool")
        builder.add_link("tool")
        builder.add_joint("tool", "fixed", f"link{n}", "tool", xyz=T[:3, 3], rotation=T[:3, :3],
                          where="DH tool transform")
    model = builder.build(strict=strict, gravity=gravity)
    return replace(model, dh=links, dh_convention=convention, _hash_cache=[])


def _transform(T, what):
    """A 4x4 homogeneous transform (numpy or an object with ``.A``, as spatialmath's SE3)."""
    T = as_floats(getattr(T, "A", T), (4, 4), f"DH {what} transform", "the matrix")
    if not np.all(np.isfinite(T)) or not np.allclose(T[3], [0, 0, 0, 1]):
        raise ModelError(f"DH {what} transform: not a homogeneous transform (last row "
                         f"{T[3].tolist()}, expected [0, 0, 0, 1])")
    return T


def _add_row(builder, i, link, joint, convention):
    """Joint i and the frame(s) of link i. The joint placement is A_i at q = 0 split so that the
    joint's motion (about or along z) comes where the convention puts it."""
    where = f"DH link {i}"
    kind = link.joint
    inertia = dict(mass=link.mass, com=link.com, inertia=link.inertia_matrix, where=where)
    if kind == "revolute":
        motion_free = _trans(0, 0, link.d) @ _rot_z(link.offset)  # joint motion Rz(q) follows
    else:
        motion_free = _rot_z(link.theta) @ _trans(0, 0, link.offset)  # Tz(q) follows
    common = dict(kind=kind, parent=f"link{i - 1}", axis=(0.0, 0.0, 1.0),
                  armature=link.joint_armature, damping=link.joint_damping,
                  coulomb=[link.joint_coulomb], where=f"{where} (joint {joint!r})")
    if convention == "standard":
        body = f"link{i}_proximal"
        builder.add_link(body, where=f"{where} (joint frame)")
        builder.add_joint(joint, child=body, rotation=motion_free[:3, :3],
                          xyz=motion_free[:3, 3], **common)
        builder.add_link(f"link{i}", **inertia)
        T = _trans(link.a, 0, 0) @ _rot_x(link.alpha)
        builder.add_joint(f"link{i}_fixed", "fixed", body, f"link{i}", xyz=T[:3, 3],
                          rotation=T[:3, :3], where=where)
    else:
        builder.add_link(f"link{i}", **inertia)
        T = _rot_x(link.alpha) @ _trans(link.a, 0, 0) @ motion_free
        builder.add_joint(joint, child=f"link{i}", rotation=T[:3, :3], xyz=T[:3, 3], **common)


def _rot_z(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def _rot_x(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])


def _trans(x, y, z):
    T = np.eye(4)
    T[:3, 3] = (x, y, z)
    return T


# -- the DH table file ------------------------------------------------------------------------
COLUMNS = ("name", "joint", "a", "alpha", "d", "theta", "offset", "mass", "cx", "cy", "cz",
           "Ixx", "Iyy", "Izz", "Ixy", "Iyz", "Ixz", "armature", "damping", "Jm", "G", "B",
           "Tc_plus", "Tc_minus")
REQUIRED = ("a", "alpha", "d")
_NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
_PI_EXPR = re.compile(rf"^([-+]?)(?:({_NUMBER})\s*\*\s*)?pi(?:\s*/\s*({_NUMBER}))?$")


def load_dh_table(path, strict=False):
    """Load a DH table file (CSV) into a Model (``from_dh``).

    The format: ``#`` lines are comments, except the directives ``# convention: modified`` (default
    ``standard``) and ``# name: my_robot`` (default: the file name). The first other line is a
    header naming the columns, in any order:

        a, alpha, d            required (m, rad, m)
        joint                  revolute (default) or prismatic
        theta, offset          rad / m, default 0 (see DHLink: q + offset is theta or d)
        mass, cx, cy, cz       kg; centre of mass in frame i (m)
        Ixx, Iyy, Izz, Ixy, Iyz, Ixz   kg m^2, about the centre of mass, frame-i axes
        armature, damping      reflected rotor inertia, viscous friction at the joint
        Jm, G, B, Tc_plus, Tc_minus   RTB's drive: motor inertia, gear ratio (default 1),
                               viscous and Coulomb friction at the motor
        name                   the joint's name (default joint1 ... joint{n})

    then one row per joint. A number may also be written ``pi``, ``-pi/2``, ``2*pi/3``, an empty
    field is 0. Errors raise ``ModelError`` naming the file, line and column.
    """
    path = os.fspath(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # a spreadsheet's BOM
            text = f.read()
    except OSError as e:
        raise ModelError(f"cannot read DH table {path!r}: {e.strerror}") from None
    default_name = os.path.splitext(os.path.basename(path))[0] or "dh_robot"
    return parse_dh_table(text, origin=path, default_name=default_name, strict=strict)


def parse_dh_table(text, origin="<string>", default_name="dh_robot", strict=False):
    """``load_dh_table`` on the text of a DH table file."""
    settings = {"convention": "standard", "name": default_name}
    header, rows = None, []
    text = text.removeprefix("\ufeff")
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            _directive(stripped, settings, f"{origin}, line {lineno}")
        elif header is None:
            header = _header(line, f"{origin}, line {lineno}")
        else:
            rows.append((lineno, line))
    if header is None or not rows:
        raise ModelError(f"{origin}: no DH table (expected a header line naming the columns, "
                         "then one row per joint)")
    links, names = [], []
    for i, (lineno, line) in enumerate(rows, 1):
        where = f"{origin}, line {lineno}"
        link, joint_name = _row(line, header, where)
        try:
            check_link(link, i)
        except ModelError as e:
            raise ModelError(f"{where}: {e}") from None
        links.append(link)
        names.append(joint_name or f"joint{i}")
    try:
        check_convention(settings["convention"])
        return from_dh(links, settings["convention"], settings["name"], names, strict)
    except ModelError as e:
        raise ModelError(f"{origin}: {e}") from None


def _directive(line, settings, where):
    match = re.match(r"#\s*(convention|name)\s*:\s*(.*?)\s*$", line, re.IGNORECASE)
    if match:
        key, value = match.group(1).lower(), match.group(2)
        if key == "convention" and value.lower() not in CONVENTIONS:
            raise ModelError(f"{where}: convention must be 'standard' or 'modified', "
                             f"got {value!r}")
        settings[key] = value.lower() if key == "convention" else value


def _header(line, where):
    columns = [c.strip() for c in next(csv.reader([line], skipinitialspace=True))]
    lookup = {c.lower(): c for c in COLUMNS}
    out = []
    for c in columns:
        if c.lower() not in lookup:
            raise ModelError(f"{where}: unknown column {c!r} (columns: {', '.join(COLUMNS)})")
        out.append(lookup[c.lower()])
    for c in set(out):
        if out.count(c) > 1:
            raise ModelError(f"{where}: column {c!r} appears twice")
    missing = [c for c in REQUIRED if c not in out]
    if missing:
        raise ModelError(f"{where}: missing required column(s) {', '.join(missing)}")
    return out


def _row(line, header, where):
    values = [v.strip() for v in next(csv.reader([line], skipinitialspace=True))]
    if len(values) != len(header):
        raise ModelError(f"{where}: {len(values)} fields, but the header names {len(header)} "
                         "columns")
    row = dict(zip(header, values))
    numbers = {}
    for column, text in row.items():
        if column not in ("name", "joint"):
            numbers[column] = _number(text, f"{where}, column {column!r}")
    get = lambda c: numbers.get(c, 0.0)  # noqa: E731
    joint = row.get("joint", "") or "revolute"
    if joint.lower() not in JOINTS:
        raise ModelError(f"{where}, column 'joint': expected revolute or prismatic, "
                         f"got {joint!r}")
    inertia = [get(c) for c in ("Ixx", "Iyy", "Izz", "Ixy", "Iyz", "Ixz")]
    link = DHLink(a=get("a"), alpha=get("alpha"), d=get("d"), offset=get("offset"),
                  joint=joint.lower(), theta=get("theta"), mass=get("mass"),
                  com=(get("cx"), get("cy"), get("cz")), inertia=inertia,
                  armature=get("armature"), damping=get("damping"), Jm=get("Jm"),
                  G=numbers["G"] if row.get("G", "") != "" else 1.0, B=get("B"), Tc=(get("Tc_plus"), get("Tc_minus")))
    return link, row.get("name", "")


def _number(text, where):
    if text == "":
        return 0.0
    match = _PI_EXPR.match(text.replace(" ", ""))
    if match:
        sign, factor, divisor = match.groups()
        if divisor and float(divisor) == 0:
            raise ModelError(f"{where}: division by zero in {text!r}")
        value = (float(factor) if factor else 1.0) * math.pi / (float(divisor) if divisor else 1.0)
        return -value if sign == "-" else value
    try:
        value = float(text)
    except ValueError:
        raise ModelError(f"{where}: not a number: {text!r}") from None
    if not math.isfinite(value):
        raise ModelError(f"{where}: not finite: {text!r}")
    return value


def dh_table_text(links, convention="standard", name="dh_robot", joint_names=None):
    """The DH table file text of ``links`` (exact: floats are written with ``repr``)."""
    check_convention(convention)
    links = tuple(links)
    names = joint_names or [f"joint{i}" for i in range(1, len(links) + 1)]
    lines = [f"# name: {name}", f"# convention: {convention}", ", ".join(COLUMNS)]
    for joint_name, link in zip(names, links):
        I = link.inertia_matrix
        values = [link.a, link.alpha, link.d, link.theta, link.offset, link.mass, *link.com,
                  I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[1, 2], I[0, 2], link.armature,
                  link.damping, link.Jm, link.G, link.B, *link.Tc]
        quoted = '"' + joint_name.replace('"', '""') + '"'  # commas, quotes, a leading '#'
        lines.append(", ".join([quoted, link.joint] + [repr(float(v)) for v in values]))
    return "\n".join(lines) + "\n"


def save_dh_table(path, model):
    """Write the DH table of a Model made by ``from_dh`` (or ``load_dh_table``) to ``path``."""
    if not model.dh:
        raise ModelError(f"model {model.name!r} has no DH table (it was not made by from_dh)")
    text = dh_table_text(model.dh, model.dh_convention, model.name, model.joint_names)
    with open(os.fspath(path), "w", encoding="utf-8", newline="") as f:
        f.write(text)
