"""The robot's visual geometry: the ``<visual>`` elements of a URDF, their files found and read.

    visuals = read_visuals("panda.urdf")          # one Visual per <visual>, in file order
    mesh = visuals[0].shape.trimesh(color)         # a trimesh.Scene, materials kept

A visual belongs to a link and sits at ``origin`` (4x4) in the link frame. Its shape is a
``Box``, ``Cylinder`` (along its z axis, centred), ``Sphere`` or ``Mesh`` (STL, DAE, OBJ, anything
trimesh reads), with an RGBA colour from the URDF's ``<material>`` (inline, or by name from a
top-level ``<material>``). A mesh with materials of its own (a DAE or OBJ with colours or
textures) keeps them; the URDF colour paints meshes without any (an STL), as RViz does.

Mesh file names are resolved like ROS does: ``package://NAME/rest`` is searched in the folders of
``ROS_PACKAGE_PATH`` and ``AMENT_PREFIX_PATH`` (``share/NAME``), in the ancestors of the URDF's
folder (a folder called NAME, or one holding NAME), and in the ``share`` folder of pip packages
installed with cmeel (example-robot-data, Pinocchio); ``file://`` and absolute paths are used as
they are; a relative path is relative to the URDF's folder. A mesh that is not found or cannot
be read gives a ``MeshWarning`` naming the link and the file, and is drawn as a translucent
sphere instead.
"""
from __future__ import annotations

import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Sequence, Union

import numpy as np

from ..errors import ModelError
from ..model.builder import rpy_to_matrix
from ..model.meshes import first_line as _first_line, read_scene, resolve
from ..model.urdf import read_robot

if TYPE_CHECKING:
    import trimesh

RGBA = tuple[float, float, float, float]
DEFAULT_COLOR: RGBA = (0.7, 0.7, 0.72, 1.0)  # URDF visuals without a material: light grey
STAND_IN_COLOR: RGBA = (0.9, 0.2, 0.6, 0.5)  # a missing mesh: translucent magenta


class MeshWarning(UserWarning):
    """A mesh file of a visual that is missing or unreadable (drawn as a sphere instead)."""


# -- shapes -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Box:
    """A box of edge lengths ``size`` (x, y, z) in metres, centred on the visual frame."""

    size: tuple[float, float, float]

    def trimesh(self, color: RGBA) -> "trimesh.Scene":
        import trimesh

        return _painted(trimesh.creation.box(extents=self.size), color)


@dataclass(frozen=True)
class Cylinder:
    """A cylinder of ``radius`` and ``length`` (m) along the visual frame's z axis, centred."""

    radius: float
    length: float

    def trimesh(self, color: RGBA) -> "trimesh.Scene":
        import trimesh

        return _painted(trimesh.creation.cylinder(radius=self.radius, height=self.length,
                                                  sections=48), color)


@dataclass(frozen=True)
class Sphere:
    """A sphere of ``radius`` (m) centred on the visual frame."""

    radius: float

    def trimesh(self, color: RGBA) -> "trimesh.Scene":
        import trimesh

        return _painted(trimesh.creation.icosphere(subdivisions=3, radius=self.radius), color)


@dataclass(frozen=True)
class Mesh:
    """A mesh file: ``filename`` as the URDF writes it, ``path`` where it was found (None: not
    found; ``searched`` lists where it was looked for), and the URDF's per-axis ``scale``."""

    filename: str
    path: Optional[str]
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    searched: tuple[str, ...] = ()

    def trimesh(self, color: RGBA) -> "trimesh.Scene":
        """The mesh as a trimesh Scene, scaled; ``color`` paints it if it has no materials of
        its own. Raises OSError (not found) or ValueError (unreadable)."""
        if self.path is None:
            looked = "; ".join(self.searched) if self.searched else "nowhere"
            raise OSError(f"not found (looked in: {looked})")
        scene = read_scene(self.path).copy()
        if not scene.geometry:
            raise ValueError("the file holds no triangles")
        if not _has_own_colors(scene):
            for geometry in scene.geometry.values():
                _paint(geometry, color)
        if self.scale != (1.0, 1.0, 1.0):
            scene = scene.scaled(self.scale)
        return scene


Shape = Union[Box, Cylinder, Sphere, Mesh]


@dataclass(frozen=True)
class Visual:
    """One ``<visual>`` of a link: ``shape`` placed at ``origin`` (4x4, in the link frame), its
    ``color`` (RGBA in [0, 1]; None: no material given) and ``where`` it is in the file."""

    link: str
    shape: Shape
    origin: np.ndarray = field(default_factory=lambda: np.eye(4))
    color: Optional[RGBA] = None
    where: str = ""

    def trimesh(self, stand_in_radius: float = 0.03) -> tuple["trimesh.Scene", bool]:
        """(the visual as a trimesh Scene in its own frame, whether it is the real shape). A
        mesh that cannot be shown warns (``MeshWarning``) and gives a translucent sphere of
        ``stand_in_radius`` metres instead."""
        try:
            return self.shape.trimesh(self.color or DEFAULT_COLOR), True
        except (OSError, ValueError, ImportError) as e:  # trimesh raises ValueError for formats
            name = getattr(self.shape, "filename", type(self.shape).__name__)
            warnings.warn(f"{self.where}: cannot show mesh {name!r}: {_first_line(e)}; drawing "
                          f"a sphere of radius {stand_in_radius:.3g} m instead",
                          MeshWarning, stacklevel=2)
            return Sphere(stand_in_radius).trimesh(STAND_IN_COLOR), False


# -- reading a URDF -----------------------------------------------------------------------------
def read_visuals(source: Union[str, os.PathLike]) -> tuple[Visual, ...]:
    """Every ``<visual>`` of the URDF ``source`` (a file path, or the XML text itself, whose
    relative mesh paths are then relative to the working directory), in file order. Mesh files
    are resolved here (``Mesh.path``); malformed elements raise ``ModelError`` naming them."""
    robot, origin = read_robot(source)  # as the loader reads it (urdfdom's rules, no entities)
    folder = os.getcwd() if origin == "<string>" else os.path.dirname(os.path.abspath(origin))
    materials = {m.get("name"): _material_color(m, f'<material name="{m.get("name")}">', {})
                 for m in robot.findall("material")}
    visuals = []
    for link in robot.findall("link"):
        name = link.get("name", "")
        for k, element in enumerate(link.findall("visual")):
            where = f'{origin}: <link name="{name}"> <visual> #{k + 1}'
            shape = _shape(element.find("geometry"), where, folder)
            if shape is None:
                continue
            material = element.find("material")
            color = None if material is None else _material_color(material, where, materials)
            visuals.append(Visual(name, shape, _origin(element, where), color, where))
    return tuple(visuals)


def is_urdf(path: Union[str, os.PathLike]) -> bool:
    """Whether the file at ``path`` is a URDF (its root element is ``<robot>``; an MJCF file's
    is ``<mujoco>``). False for a file that cannot be read or parsed."""
    try:
        for _, element in ET.iterparse(path, events=("start",)):
            return element.tag == "robot"
    except (OSError, ET.ParseError):
        return False
    return False


def _shape(geometry: Optional[ET.Element], where: str, folder: str) -> Optional[Shape]:
    if geometry is None or len(geometry) == 0:
        return None  # an empty <visual>: nothing to draw (URDF requires one, some files lack it)
    element = geometry[0]
    where = f"{where} <{element.tag}>"
    if element.tag == "box":
        x, y, z = _numbers(element, "size", where, 3)
        return Box((x, y, z))
    if element.tag == "cylinder":
        return Cylinder(_positive(element, "radius", where), _positive(element, "length", where))
    if element.tag == "sphere":
        return Sphere(_positive(element, "radius", where))
    if element.tag == "mesh":
        filename = element.get("filename")
        if not filename:
            raise ModelError(f"{where}: missing attribute 'filename'")
        sx, sy, sz = _numbers(element, "scale", where, 3) if element.get("scale") else (1, 1, 1)
        scale = (float(sx), float(sy), float(sz))
        path, searched = resolve(filename, folder)
        return Mesh(filename, path, scale, searched)
    raise ModelError(f"{where}: unknown geometry (URDF has box, cylinder, sphere and mesh)")


def _origin(element: ET.Element, where: str) -> np.ndarray:
    origin = element.find("origin")
    T = np.eye(4)
    if origin is not None:
        where = f"{where} <origin>"
        if origin.get("xyz"):
            T[:3, 3] = _numbers(origin, "xyz", where, 3)
        if origin.get("rpy"):
            T[:3, :3] = rpy_to_matrix(_numbers(origin, "rpy", where, 3))
    return T


def _material_color(material: ET.Element, where: str,
                    named: dict[Optional[str], Optional[RGBA]]) -> Optional[RGBA]:
    color = material.find("color")
    if color is not None and color.get("rgba"):
        r, g, b, a = (float(np.clip(c, 0.0, 1.0))
                      for c in _numbers(color, "rgba", f"{where} <material> <color>", 4))
        return r, g, b, a
    return named.get(material.get("name"))  # by name, or a texture only: no colour


def _numbers(element: ET.Element, attribute: str, where: str, count: int
             ) -> tuple[float, ...]:
    text = element.get(attribute)
    if text is None:
        raise ModelError(f"{where}: missing attribute {attribute!r}")
    try:
        values = tuple(float(x) for x in text.split())
    except ValueError:
        values = ()
    if len(values) != count or not np.all(np.isfinite(values)):
        raise ModelError(f"{where}: {attribute}={text!r} is not {count} finite numbers")
    return values


def _positive(element: ET.Element, attribute: str, where: str) -> float:
    (value,) = _numbers(element, attribute, where, 1)
    if value <= 0:
        raise ModelError(f"{where}: {attribute}={value!r} must be positive")
    return value


def _has_own_colors(scene: "trimesh.Scene") -> bool:
    """Whether any geometry of the scene carries colours or textures of its own."""
    return any(getattr(g.visual, "kind", None) is not None for g in scene.geometry.values())


def _paint(mesh: "trimesh.Trimesh", color: RGBA) -> None:
    import trimesh

    rgba = np.round(np.array(color) * 255).astype(np.uint8)
    mesh.visual = trimesh.visual.ColorVisuals(mesh, face_colors=np.tile(rgba, (len(mesh.faces), 1)))


def _painted(mesh: "trimesh.Trimesh", color: RGBA) -> "trimesh.Scene":
    import trimesh

    _paint(mesh, color)
    return trimesh.Scene(mesh)


def visuals_for(visuals: Sequence[Visual], link_names: Sequence[str], prefix: str = ""
                ) -> tuple[list[tuple[int, Visual]], list[str]]:
    """[(link index, visual)] for the visuals whose link (named ``prefix + link``) is among
    ``link_names``; and the names of the links that are not (to report)."""
    index = {name: i for i, name in enumerate(link_names)}
    found, unknown = [], []
    for v in visuals:
        i = index.get(prefix + v.link)
        if i is None:
            unknown.append(prefix + v.link)
        else:
            found.append((i, v))
    return found, unknown
