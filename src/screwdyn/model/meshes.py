"""Mesh files of a robot description: found as ROS finds them, read with trimesh.

    path, searched = resolve("package://ur_description/meshes/ur5/collision/base.stl", folder)
    points = mesh_points(path, scale=(1.0, 1.0, 1.0))    # (n, 3) vertices, m, in the mesh's frame

``package://NAME/rest`` is searched in the folders of ``ROS_PACKAGE_PATH`` and
``AMENT_PREFIX_PATH`` (``share/NAME``), in the ancestors of the URDF's folder (a folder called
NAME, or one holding NAME), and in the ``share`` folder of pip packages installed with cmeel
(example-robot-data, Pinocchio); ``file://`` and absolute paths are used as they are; a relative
path is relative to the URDF's folder. Files are read with trimesh (STL, OBJ, PLY, ...; DAE with
pycollada, the ``viewer`` extra), cached by path and modification time. The viewer draws them;
``Scene.add_robot`` collides with their hulls.
"""
from __future__ import annotations

import os
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Optional

import numpy as np

if TYPE_CHECKING:
    import trimesh


def resolve(filename: str, folder: str) -> tuple[Optional[str], tuple[str, ...]]:
    """(the file that a URDF mesh ``filename`` names, or None; the folders searched). ``folder``
    is the URDF's folder (relative paths and package search through its ancestors)."""
    if filename.startswith("file://"):
        candidates = [filename[len("file://"):]]
    elif filename.startswith("package://") or filename.startswith("$(find "):
        if filename.startswith("package://"):
            package, _, rest = filename[len("package://"):].lstrip("/").partition("/")
        else:  # a xacro leftover: $(find NAME)/rest
            package, _, rest = filename[len("$(find "):].partition(")")
            rest = rest.lstrip("/")
        candidates = [os.path.join(root, rest) for root in package_folders(package, folder)]
    else:
        candidates = [os.path.join(folder, filename)]
    for path in candidates:
        if os.path.isfile(path):
            return path, ()
    return None, tuple(dict.fromkeys(os.path.dirname(p) for p in candidates))


def package_folders(package: str, folder: str) -> list[str]:
    """Where ROS package ``package`` may be, in search order (existing or not)."""
    roots = []
    for variable, suffix in (("ROS_PACKAGE_PATH", ""), ("AMENT_PREFIX_PATH", "share")):
        for entry in filter(None, os.environ.get(variable, "").split(os.pathsep)):
            base = os.path.join(entry, suffix)
            roots += [base] if os.path.basename(os.path.normpath(base)) == package else []
            roots.append(os.path.join(base, package))
    ancestor = os.path.abspath(folder)
    while True:
        if os.path.basename(ancestor) == package:
            roots.append(ancestor)
        roots.append(os.path.join(ancestor, package))
        parent = os.path.dirname(ancestor)
        if parent == ancestor:
            break
        ancestor = parent
    for share in _cmeel_shares():
        roots.append(os.path.join(share, package))
        roots.append(os.path.join(share, "example-robot-data", "robots", package))
    return list(dict.fromkeys(roots))


def _cmeel_shares() -> list[str]:
    """The share folders of pip packages built with cmeel (example-robot-data, Pinocchio...)."""
    return [p for p in (os.path.join(base, "cmeel.prefix", "share") for base in sys.path if base)
            if os.path.isdir(p)]


def read_scene(path: str) -> "trimesh.Scene":
    """The mesh file at ``path`` as a trimesh Scene (cached by path and modification time; copy
    it before changing it). ImportError without trimesh; ValueError for a file it cannot read
    (naming the cause; a DAE needs pycollada)."""
    return _read_scene(path, os.path.getmtime(path))


@lru_cache(maxsize=128)
def _read_scene(path: str, mtime: float) -> "trimesh.Scene":
    try:
        import trimesh
    except ImportError:
        raise ImportError("meshes need trimesh: pip install trimesh") from None
    try:
        return trimesh.load_scene(path)
    except Exception as e:  # trimesh and its format plugins raise anything on a bad file
        raise ValueError(f"unreadable ({type(e).__name__}: {first_line(e)})") from None


def mesh_points(path: str, scale=(1.0, 1.0, 1.0)) -> np.ndarray:
    """The vertices (n, 3) of every mesh in the file at ``path``, placed by the file's own scene
    graph and multiplied by ``scale`` (3,) per axis (the URDF's ``scale``): in the mesh's frame,
    in the file's units (m for robot descriptions). Errors as ``read_scene``, and ValueError
    for a file with no vertices."""
    scene = read_scene(path)
    parts = []
    for node in scene.graph.nodes_geometry:
        transform, name = scene.graph[node]
        vertices = np.asarray(getattr(scene.geometry[name], "vertices", np.zeros((0, 3))),
                              dtype=float)
        if len(vertices):
            parts.append(vertices @ transform[:3, :3].T + transform[:3, 3])
    if not parts:
        raise ValueError("the file holds no vertices")
    return np.concatenate(parts) * np.asarray(scale, dtype=float)


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (its type's name if it has none)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
