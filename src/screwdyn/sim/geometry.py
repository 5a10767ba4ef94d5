"""Contact points of a robot: from its collision geometry, or declared by the user.

A contact point is a sphere of radius r (r = 0: a point) fixed in a link's frame. The collision
geometry of the file the model was loaded from (``model.source``) gives them:

    geometry                      contact points
    sphere (radius r)             its centre, radius r (exact against a plane)
    capsule (radius r, length L)  the centres of its two end caps, radius r (exact)
    box (size a, b, c)            its 8 corners
    cylinder (radius r, length L) ``rim_points`` points on the rim of each end face

URDF ``<collision>`` elements are read from the file (``<origin>`` and ``<geometry>``; a
``<capsule>`` as some URDFs write it is read too); MJCF geoms come from MuJoCo's compiled model
(``geom_pos``, ``geom_quat``, ``geom_size``; geoms with ``contype`` and ``conaffinity`` both 0
collide with nothing and are skipped, as MuJoCo does; the world body's geoms are shapes of the
link ``"world"``, which carries no contact points, its planes facing up are
``CollisionGeometry.floors``). Meshes, MJCF ellipsoids (a ``Scene`` collides them:
``collision.ellipsoid``) and height fields have no points here: they are skipped with a
``UserWarning`` naming their links; declare points on those links instead.
"""
import os
import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import ModelError
from ..model.impedance import Impedance
from .surface import Surface


@dataclass(frozen=True)
class ContactPoint:
    """A contact sphere declared by the user: centred at ``position`` (m) in the frame of link
    ``link`` (a name of ``model.link_names``), of radius ``radius`` (m; 0 for a point)."""

    link: str
    position: tuple = (0.0, 0.0, 0.0)
    radius: float = 0.0


@dataclass(frozen=True, eq=False)
class ContactPoints:
    """The resolved contact spheres of a model: ``link`` (P,) link indices, ``center`` (P, 3)
    centres in the link frames (m), ``radius`` (P,) radii (m), ``labels`` (P,) what each one is
    (``'LF_FOOT sphere'``, ``'base box corner 3'``)."""

    link: np.ndarray
    center: np.ndarray
    radius: np.ndarray
    labels: tuple

    def __len__(self):
        return len(self.labels)

    @property
    def key(self):
        """What identifies the points' structure (for compiled-code caches)."""
        return tuple(int(i) for i in self.link)


NO_GEOMETRY_HINT = ("declare contact points on the links that touch the ground: "
                    "GroundContact(points={'foot': [(0, 0, 0)]}) (positions in the link frame, "
                    "m) or points=[ContactPoint('foot', (0, 0, 0), radius=0.02)]")


def contact_points(model, points=None, links=None, rim_points=8):
    """The contact points of ``model``: ``points`` as declared (a dict {link: [(x, y, z), ...]}
    of points, or a sequence of ``ContactPoint``), else the collision geometry of the model's
    file (``model.source``: URDF or MJCF), restricted to the links named in ``links`` when
    given. Returns ``ContactPoints``; ``ModelError`` when there are none, naming the way to
    declare them. Links welded to the world carry no contact points (they cannot move)."""
    rim_points = int(rim_points)
    if rim_points < 3:
        raise ValueError(f"rim_points must be at least 3, got {rim_points}")
    if points is not None:
        found = _declared(model, points)
    else:
        found = _from_source(model, rim_points)
    if links is not None:
        wanted = {model.link_index(link) for link in links}
        found = [p for p in found if p[0] in wanted]
    moving = [p for p in found if model.links[p[0]].body >= 0]
    if not moving:
        what = "the declared points" if points is not None else "its collision geometry"
        raise ModelError(f"model {model.name!r}: {what} gives no contact point on a moving "
                         f"link{'' if links is None else ' among ' + repr(list(links))}; "
                         + NO_GEOMETRY_HINT)
    link, center, radius, labels = zip(*moving)
    return ContactPoints(np.array(link, dtype=int), np.array(center, dtype=float).reshape(-1, 3),
                         np.array(radius, dtype=float), tuple(labels))


# -- declared points ----------------------------------------------------------------------------
def _declared(model, points):
    out = []
    if isinstance(points, dict):
        items = [ContactPoint(link, p) for link, ps in points.items()
                 for p in (np.atleast_2d(np.asarray(ps, dtype=float)) if len(ps) else [])]
    else:
        items = list(points)
    for k, p in enumerate(items):
        if not isinstance(p, ContactPoint):
            raise ValueError(f"points[{k}]: expected a ContactPoint(link, position, radius), got "
                             f"{type(p).__name__}")
        position = np.asarray(p.position, dtype=float)
        if position.shape != (3,) or not np.all(np.isfinite(position)):
            raise ValueError(f"contact point on {p.link!r}: position must be 3 finite numbers "
                             f"(m, link frame), got {p.position!r}")
        radius = float(p.radius)
        if not (np.isfinite(radius) and radius >= 0):
            raise ValueError(f"contact point on {p.link!r}: radius must be >= 0, got {p.radius!r}")
        out.append((model.link_index(p.link), position, radius,
                    f"{p.link} point {tuple(np.round(position, 6).tolist())}"))
    return out


# -- collision geometry of the model's file ------------------------------------------------------
@dataclass(frozen=True)
class CollisionShape:
    """One primitive collision element of a model's file: on link ``link`` (a name of the file,
    the model's link name), ``kind`` ('sphere', 'capsule', 'box', 'cylinder', 'ellipsoid' (MJCF),
    or 'plane': an MJCF plane of the world, a wall, the half-space z <= 0 of its frame), ``size``
    (m: sphere (r,), capsule and cylinder (r, half-length along z), box half-extents (3,),
    ellipsoid semi-axes (3,), plane ()), at
    ``rotation`` (3, 3) and ``translation`` (3,) (m) in the link's frame; ``name`` the element's
    name in the file ('' if none); ``contype``, ``conaffinity``: MuJoCo's collision bit masks
    (URDF: 1, 1); ``geom``: the MJCF geom's id (URDF: -1); ``surface``: how its contacts
    behave (a ``Surface``: MJCF ``friction[0]``, ``condim``, ``solref``, ``margin``, ``gap``,
    ``solimp``, ``solmix``, ``priority``; URDF: none given)."""

    link: str
    kind: str
    size: np.ndarray
    rotation: np.ndarray
    translation: np.ndarray
    name: str = ""
    contype: int = 1
    conaffinity: int = 1
    geom: int = -1
    surface: Surface = Surface()


@dataclass(frozen=True)
class Floor:
    """An MJCF plane of the world facing up (+z): a floor or a table top. ``name`` the geom's
    name (or ``geom{id}``), ``height`` (m) its z, ``contype``, ``conaffinity`` MuJoCo's
    collision bit masks, ``geom`` its id, ``surface`` as ``CollisionShape``'s."""

    name: str
    height: float
    contype: int
    conaffinity: int
    geom: int = -1
    surface: Surface = Surface()


def masks_collide(a: tuple, b: tuple) -> bool:
    """Whether two geoms with these (contype, conaffinity) bit masks collide: MuJoCo's rule,
    a's contype against b's conaffinity or b's contype against a's conaffinity."""
    return bool(a[0] & b[1] or b[0] & a[1])


@dataclass(frozen=True)
class CollisionMesh:
    """One mesh collision element of a model's file: on link ``link``, at ``rotation`` (3, 3)
    and ``translation`` (3,) (m) in the link's frame, ``name`` ('' if none), ``contype`` and
    ``conaffinity`` as ``CollisionShape``'s; ``file`` what the file names (URDF ``filename``,
    MJCF the mesh asset's name), ``path`` where it was found (None: not found, ``searched``
    lists where it was looked for; MJCF: the compiled model's own vertices, no file), ``scale``
    (3,) the URDF's per-axis scale, ``vertices`` (n, 3) the MJCF mesh's vertices in the
    element's frame (m; URDF: None, ``points()`` reads the file), ``geom`` the MJCF geom's id
    (URDF: -1), ``surface`` as ``CollisionShape``'s."""

    link: str
    rotation: np.ndarray
    translation: np.ndarray
    name: str
    file: str
    path: Optional[str] = None
    searched: tuple = ()
    scale: tuple = (1.0, 1.0, 1.0)
    vertices: Optional[np.ndarray] = None
    contype: int = 1
    conaffinity: int = 1
    geom: int = -1
    surface: Surface = Surface()

    def points(self) -> np.ndarray:
        """The mesh's vertices (n, 3) in the element's frame (m), scaled. OSError when the file
        was not found (naming where it was looked for), ValueError when it cannot be read,
        ImportError without trimesh (``model.meshes.mesh_points``)."""
        if self.vertices is not None:
            return np.asarray(self.vertices, dtype=float)
        if self.path is None:
            looked = "; ".join(self.searched) if self.searched else "nowhere"
            raise OSError(f"not found (looked in: {looked})")
        from ..model.meshes import mesh_points

        return mesh_points(self.path, self.scale)


@dataclass(frozen=True)
class CollisionGeometry:
    """What ``collision_geometry`` reads from a model's file: ``shapes`` (``CollisionShape``s,
    in file order), ``skipped`` ((link, kind) of the elements with no primitive: meshes, MJCF
    ellipsoids and height fields), ``meshes`` (the mesh elements, ``CollisionMesh``s, in file
    order), ``excluded`` (pairs of body names whose contact the file excludes: MJCF
    ``<contact><exclude>`` and MuJoCo's parent filter, a body and its parent (their welded
    bodies included: ``_parent_filtered``); URDF none), ``source`` (the file), ``format``
    ('urdf' or 'mjcf'), ``floors`` (a ``Floor`` for each MJCF plane of the world facing up, +z:
    a floor or a table top; the world's other geoms are shapes, meshes and skipped elements of
    the link ``"world"``: its walls are planes), ``contact`` (False where an MJCF file turns
    contact off, ``<option><flag contact="disable"/>`` or ``constraint="disable"``: in MuJoCo
    its geoms touch nothing), ``filterparent`` (False where an MJCF file turns MuJoCo's parent
    filter off, ``<flag filterparent="disable"/>``: there a body touches its parent too),
    ``pairs`` (the MJCF ``<contact><pair>`` elements, (geom1, geom2, ``Surface``) (geom ids):
    pairs MuJoCo checks whatever the bit masks, the parent filter and ``<exclude>`` say, with
    their own friction, solref, margin and gap; their geoms are read even with contype =
    conaffinity = 0), ``impratio`` (an MJCF file's ``<option impratio>``: its friction's
    stiffness relative to the normal's, ``RigidContact.impratio``; 1 for URDF, MuJoCo's
    default), ``invweight0`` (an MJCF file's bodies' translational inverse weights at qpos0,
    MuJoCo's ``body_invweight0``: ((body name, 1/kg), ...); none for URDF), ``refsafe`` (False
    where an MJCF file turns MuJoCo's refsafe off, ``<flag refsafe="disable"/>``: its solrefs'
    time constants are then used as given at every step, ``RigidContact.refsafe``)."""

    shapes: tuple
    skipped: tuple
    excluded: tuple
    source: str
    format: str
    meshes: tuple = ()
    floors: tuple = ()
    contact: bool = True
    filterparent: bool = True
    pairs: tuple = ()
    impratio: float = 1.0
    invweight0: tuple = ()
    refsafe: bool = True


def collision_geometry(model, hint=NO_GEOMETRY_HINT):
    """The primitive collision geometry of the file ``model`` was loaded from (``model.source``:
    URDF ``<collision>`` elements, or the geoms of MuJoCo's compiled MJCF model, as the module
    docstring says), as a ``CollisionGeometry``. ``ModelError`` (ending with ``hint``) when the
    model has no file or the file is gone or not URDF/MJCF."""
    source = model.source
    if not source:
        raise ModelError(f"model {model.name!r} has no file to read collision geometry from (it "
                         "was built in code or loaded from an XML string); " + hint)
    if not os.path.exists(source):
        raise ModelError(f"model {model.name!r}: its file {source!r} (model.source) is gone; "
                         + hint)
    from ..model.urdf import parse_xml

    with open(source, "rb") as f:
        root = parse_xml(f.read(), source)
    floors, flags = (), (True, True, (), 1.0, ())
    if root.tag == "robot":
        shapes, skipped, meshes = _urdf_shapes(root, source)
        excluded, kind = (), "urdf"
    elif root.tag == "mujoco":
        shapes, skipped, excluded, meshes, floors, flags = _mjcf_shapes(source)
        kind = "mjcf"
    else:
        raise ModelError(f"{source}: cannot read collision geometry from a <{root.tag}> file; "
                         + hint)
    return CollisionGeometry(tuple(CollisionShape(*s) for s in shapes), tuple(skipped),
                             tuple(excluded), source, kind, tuple(meshes), tuple(floors),
                             *flags)


def _from_source(model, rim_points):
    geometry = collision_geometry(model)
    source, skipped = geometry.source, geometry.skipped
    out = []
    for s in geometry.shapes:
        link_name, kind, size, R, p = s.link, s.kind, s.size, s.rotation, s.translation
        try:
            link = model.link_index(link_name)
        except ModelError:
            continue  # a link the model does not keep (never happens for files it loaded)
        if model.links[link].body < 0:
            continue  # fixed to the world (an MJCF world's geoms, its walls): no points
        if kind == "ellipsoid":  # no sphere holds it exactly: no points
            skipped = (*skipped, (link_name, kind))
            continue
        for k, (center, radius) in enumerate(_shape_points(kind, size, rim_points)):
            label = f"{link_name} {kind}" + ("" if kind == "sphere" else f" point {k}")
            out.append((link, R @ center + p, radius, label))
    skipped = [(name, kind) for name, kind in skipped if name in model.link_names
               and model.links[model.link_index(name)].body >= 0]
    if skipped:
        links = sorted({name for name, _ in skipped})
        kinds = sorted({kind for _, kind in skipped})
        warnings.warn(f"{source}: collision {' and '.join(kinds)} geometry on {len(links)} "
                      f"link(s) ({', '.join(links[:6])}{', ...' if len(links) > 6 else ''}) has "
                      "no contact points and is ignored (declare points on those links if they "
                      "touch the ground: GroundContact(points=...))", stacklevel=4)
    return out


def _shape_points(kind, size, rim_points):
    """(centre in the shape's frame, radius) of each contact sphere of a primitive shape."""
    if kind == "sphere":
        return [(np.zeros(3), size[0])]
    if kind == "capsule":  # size: radius, half-length along z
        return [(np.array([0.0, 0.0, s * size[1]]), size[0]) for s in (-1.0, 1.0)]
    if kind == "box":  # size: half-extents
        return [(np.array([sx, sy, sz]) * size, 0.0)
                for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
    if kind == "cylinder":  # size: radius, half-length along z
        angles = 2 * np.pi * np.arange(rim_points) / rim_points
        return [(np.array([size[0] * np.cos(a), size[0] * np.sin(a), s * size[1]]), 0.0)
                for s in (-1.0, 1.0) for a in angles]
    raise AssertionError(kind)


def _urdf_shapes(robot, source):
    """(link, kind, size, R, p, name) of every primitive ``<collision>``; (link, kind)
    skipped; the ``CollisionMesh`` of every ``<mesh>``."""
    from ..model.builder import rpy_to_matrix

    shapes, skipped, meshes = [], [], []
    folder = os.path.dirname(os.path.abspath(source))
    for link in robot.iterfind("link"):
        name = link.get("name")
        for c, collision in enumerate(link.iterfind("collision")):
            where = f'{source}: <link name="{name}"> <collision> {c + 1}'
            origin = collision.find("origin")
            xyz = _floats(origin, "xyz", 3, where, "0 0 0")
            rpy = _floats(origin, "rpy", 3, where, "0 0 0")
            geometry = collision.find("geometry")
            shape = None if geometry is None or len(geometry) == 0 else geometry[0]
            if shape is None:
                raise ModelError(f"{where}: no <geometry> shape")
            R = rpy_to_matrix(rpy)
            if shape.tag == "sphere":
                size = [_positive(shape, "radius", where)]
            elif shape.tag == "box":
                size = 0.5 * _floats(shape, "size", 3, where, None)
                if np.any(size < 0):
                    raise ModelError(f"{where} <box>: negative size")
            elif shape.tag in ("cylinder", "capsule"):
                size = [_positive(shape, "radius", where),
                        0.5 * _positive(shape, "length", where, allow_zero=True)]
            else:
                skipped.append((name, shape.tag))
                if shape.tag == "mesh":
                    meshes.append(_urdf_mesh(shape, name, R, xyz, collision.get("name", ""),
                                             where, folder))
                continue
            shapes.append((name, shape.tag, np.asarray(size, dtype=float), R, xyz,
                           collision.get("name", "")))
    return shapes, skipped, meshes


def _urdf_mesh(element, link, R, xyz, name, where, folder):
    """The ``CollisionMesh`` of a URDF ``<mesh>`` (its file looked for, not read)."""
    from ..model.meshes import resolve

    filename = element.get("filename")
    if not filename:
        raise ModelError(f"{where} <mesh>: no 'filename'")
    scale = _floats(element, "scale", 3, f"{where} <mesh>", "1 1 1")
    path, searched = resolve(filename, folder)
    return CollisionMesh(link, R, xyz, name, filename, path, searched,
                         tuple(float(x) for x in scale))


def _floats(element, attribute, n, where, default):
    text = default if element is None else element.get(attribute, default)
    if text is None:
        raise ModelError(f"{where}: <{element.tag}> has no {attribute!r}")
    try:
        values = np.array([float(x) for x in text.split()])
    except ValueError:
        values = np.zeros(0)
    if values.shape != (n,) or not np.all(np.isfinite(values)):
        raise ModelError(f"{where}: {attribute}={text!r} must be {n} finite numbers")
    return values


def _positive(element, attribute, where, allow_zero=False):
    text = element.get(attribute)
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ModelError(f"{where} <{element.tag}>: {attribute}={text!r} is not a number") from None
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ModelError(f"{where} <{element.tag}>: {attribute} must be positive, got {text!r}")
    return value


def _mjcf_shapes(source):
    """The geoms of MuJoCo's compiled model, as (body link, kind, size, R, p, name, contype,
    conaffinity), the world body's (link ``"world"``) included, planes (only in bodies fixed
    to the world, as MuJoCo requires) as kind 'plane' but for the world's planes facing up; the
    skipped ones as (link, kind); the pairs of body names that
    ``<contact><exclude>`` excludes; the ``CollisionMesh`` of every mesh geom (its vertices as
    MuJoCo compiled them, in the geom's frame); the world's planes facing up (``Floor``s);
    (whether the file's contact is on, whether its parent filter is on (its
    ``disableflags``), its explicit pairs ((geom1, geom2, ``Surface``) of each
    ``<contact><pair>``)). A geom with contype = conaffinity = 0 is left out unless an explicit
    pair names it."""
    try:
        import mujoco
    except ImportError:
        raise ImportError("collision geometry of an MJCF model needs MuJoCo: pip install "
                          "mujoco") from None
    m = mujoco.MjModel.from_xml_path(source)
    obj, geom = mujoco.mjtObj, mujoco.mjtGeom
    kinds = {int(geom.mjGEOM_SPHERE): "sphere", int(geom.mjGEOM_CAPSULE): "capsule",
             int(geom.mjGEOM_BOX): "box", int(geom.mjGEOM_CYLINDER): "cylinder",
             int(geom.mjGEOM_ELLIPSOID): "ellipsoid", int(geom.mjGEOM_PLANE): "plane"}
    ignored = {int(geom.mjGEOM_MESH): "mesh", int(geom.mjGEOM_HFIELD): "height field",
               int(geom.mjGEOM_SDF): "sdf"}
    shapes, skipped, meshes, floors = [], [], [], []
    def surface(friction, condim, solref, margin, gap, solimp, solmix=1.0, priority=0):
        # a geom's friction is (slide, spin, roll), a <pair>'s (slide, slide, spin, roll, roll)
        spin = 1 if len(friction) == 3 else 2
        return Surface(float(friction[0]), int(condim), tuple(float(x) for x in solref),
                       float(margin), float(gap), _solimp(solimp), float(solmix), int(priority),
                       float(friction[spin]), float(friction[spin + 1]))

    pairs = tuple((int(a), int(b), surface(*rest)) for a, b, *rest in
                  zip(m.pair_geom1, m.pair_geom2, m.pair_friction, m.pair_dim, m.pair_solref,
                      m.pair_margin, m.pair_gap, m.pair_solimp))
    paired = {g for pair in pairs for g in pair[:2]}
    for g in range(m.ngeom):
        body, kind = int(m.geom_bodyid[g]), int(m.geom_type[g])
        bits = (int(m.geom_contype[g]), int(m.geom_conaffinity[g]))
        label = mujoco.mj_id2name(m, obj.mjOBJ_GEOM, g) or ""
        own = surface(m.geom_friction[g], m.geom_condim[g], m.geom_solref[g], m.geom_margin[g],
                      m.geom_gap[g], m.geom_solimp[g], m.geom_solmix[g], m.geom_priority[g])
        R, p = _quat_matrix(m.geom_quat[g]), np.array(m.geom_pos[g], dtype=float)
        if kind == int(geom.mjGEOM_PLANE) and body == 0 and R[2, 2] > 1.0 - 1e-12:
            floors.append(Floor(label or f"geom{g}", float(p[2]), *bits, geom=g,
                                surface=own))
            continue
        if not any(bits) and g not in paired:
            continue
        name = mujoco.mj_id2name(m, obj.mjOBJ_BODY, body) or f"body{body}"
        if kind not in kinds:
            skipped.append((name, ignored.get(kind, f"type {kind}")))
            if kind == int(geom.mjGEOM_MESH):
                mesh = int(m.geom_dataid[g])
                start, count = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
                meshes.append(CollisionMesh(
                    name, R, p, label, mujoco.mj_id2name(m, obj.mjOBJ_MESH, mesh) or f"mesh{mesh}",
                    vertices=np.array(m.mesh_vert[start:start + count], dtype=float),
                    contype=bits[0], conaffinity=bits[1], geom=g, surface=own))
            continue
        size = np.array(m.geom_size[g], dtype=float) if kinds[kind] != "plane" else np.zeros(0)
        shapes.append((name, kinds[kind], size, R, p, label, *bits, g, own))
    excluded = []
    for signature in np.asarray(m.exclude_signature, dtype=np.int64).ravel():
        pair = (int(signature) >> 16, int(signature) & 0xFFFF)
        excluded.append(tuple(mujoco.mj_id2name(m, obj.mjOBJ_BODY, b) or f"body{b}"
                              for b in pair))
    bit, flags = mujoco.mjtDisableBit, int(m.opt.disableflags)
    if not flags & bit.mjDSBL_FILTERPARENT:
        excluded += _parent_filtered(mujoco, m)
    on = (not flags & (bit.mjDSBL_CONTACT | bit.mjDSBL_CONSTRAINT),
          not flags & bit.mjDSBL_FILTERPARENT)
    weights = tuple((mujoco.mj_id2name(m, obj.mjOBJ_BODY, b) or f"body{b}",
                     float(m.body_invweight0[b, 0])) for b in range(1, m.nbody))
    return shapes, skipped, excluded, meshes, floors, on + (
        pairs, float(m.opt.impratio), weights, not flags & bit.mjDSBL_REFSAFE)


def _parent_filtered(mujoco, m):
    """The pairs of body names MuJoCo's parent filter keeps apart: every body of a rigid group
    (a body and those welded to it, ``body_weldid``) and every body of its parent's group, the
    world's excepted. Between MuJoCo's bodies, not screwdyn's links: a body of several joints
    is a chain of links here (``{body}/{joint}``), and its geoms' link is not its parent's
    child (dm_control's humanoid: the upper arm's two shoulder joints; its thigh's three)."""
    weld = [int(w) for w in m.body_weldid]
    groups = {}
    for b, w in enumerate(weld):
        groups.setdefault(w, []).append(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b)
                                        or f"body{b}")
    out = []
    for w in groups:
        parent = weld[int(m.body_parentid[w])]
        if w and parent:
            out += [(a, b) for a in groups[w] for b in groups[parent]]
    return out


def _solimp(solimp):
    """A compiled MuJoCo solimp (5,) as the ``Impedance`` MuJoCo applies
    (``mjcf.applied_solimp``)."""
    from ..model.mjcf import applied_solimp

    return Impedance(*applied_solimp(solimp))


def _quat_matrix(wxyz):
    """The rotation matrix of MuJoCo's quaternion (w, x, y, z)."""
    from ..model.joints import rotation_entries

    w, x, y, z = (float(c) for c in wxyz)
    return np.array(rotation_entries(np, (x, y, z, w)), dtype=float).reshape(3, 3)
