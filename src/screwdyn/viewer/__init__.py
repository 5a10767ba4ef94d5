"""The robot in a browser: ``view(model)``, ``view(trajectory)`` (the optional extra
``screwdyn[viewer]``: viser and trimesh, imported only when a view opens).

    geometry.py   the URDF's <visual> elements, mesh files found (package://) and read
    scene.py      the robot as viser scene nodes, posed from link poses
    viewer.py     view() and the running Viewer: server, controls, playback
"""
from .geometry import MeshWarning, Visual, read_visuals
from .viewer import Viewer, view

__all__ = ["MeshWarning", "Viewer", "Visual", "read_visuals", "view"]
