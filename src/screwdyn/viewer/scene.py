"""The robot as nodes of a viser scene, posed from link poses.

Every link is a frame node ``/robot/<link>`` placed at its world pose; what is fixed to a link
hangs below it in the link frame: its visuals (``.../visual<k>``, at the URDF visual origin), its
axes (``.../axes``, red/green/blue x/y/z) and, for the link that carries a body, the body's centre
of mass (``.../com``). The skeleton (a segment from each link origin to its parent's) and the
robot's centre of mass are drawn in the world and moved at each pose. Posing the robot sends one
message per link (and two for the skeleton and the centre of mass), in one batch.

Sizes follow the robot's ``extent`` (the largest side of the box around its link origins and
visuals, metres): skeleton thickness 2 %, axes length 8 %, centre-of-mass spheres 2.5 % and 1.5 %.
"""
from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..model import Model
from ..plot import skeleton as skeleton_pairs
from .geometry import Visual

if TYPE_CHECKING:
    import trimesh
    import viser

SKELETON_COLOR = (70, 90, 120)
JOINT_COLOR = (230, 160, 40)
COM_COLOR = (20, 20, 20)
BODY_COM_COLOR = (90, 90, 90)


def node_name(link: str) -> str:
    """The scene node of a link (``/`` in assembly link names would nest nodes: made ``:``)."""
    return "/robot/" + link.replace("/", ":")


def wxyz(rotations: np.ndarray) -> np.ndarray:
    """Unit quaternions (w, x, y, z) of rotation matrices (..., 3, 3), viser's convention."""
    from viser import transforms

    return np.asarray(transforms.SO3.from_matrix(np.asarray(rotations)).wxyz)


def load_visuals(placed: Sequence[tuple[int, Visual]], stand_in_radius: float
                 ) -> list[tuple[int, Visual, "trimesh.Scene", bool]]:
    """[(link, visual, its trimesh Scene, whether it is the real shape)]: the meshes read once,
    a stand-in sphere where one cannot be shown (``MeshWarning``)."""
    out = []
    for link, visual in placed:
        mesh, real = visual.trimesh(stand_in_radius)
        out.append((link, visual, mesh, real))
    return out


def bounds(T: np.ndarray, meshes: Sequence[tuple[int, Visual, Any, bool]] = ()
           ) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) corner (3,) of the box around the link origins and the visuals at link
    poses T (nlinks, 4, 4), world frame, metres."""
    points = [T[:, :3, 3]]
    for link, visual, mesh, _ in meshes:
        corners = np.array(np.meshgrid(*mesh.bounds.T)).reshape(3, -1).T
        pose = T[link] @ visual.origin
        points.append(corners @ pose[:3, :3].T + pose[:3, 3])
    stacked = np.vstack(points) if len(T) or meshes else np.zeros((1, 3))
    return stacked.min(axis=0), stacked.max(axis=0)


def extent(T: np.ndarray, meshes: Sequence[tuple[int, Visual, Any, bool]] = ()) -> float:
    """The largest side (m) of ``bounds``' box, with the world origin in it; 1 m for a robot
    of no size."""
    lo, hi = bounds(T, meshes)
    span = float(np.max(np.maximum(hi, 0.0) - np.minimum(lo, 0.0)))
    return span if span > 0 else 1.0


class RobotScene:
    """The nodes of one robot in ``server``'s scene (see the module's docstring).

    model: the Model whose link poses ``update`` receives. meshes: ``load_visuals``' output.
    size: the robot's extent in metres (for the sizes of markers). The toggles ``visuals``,
    ``skeleton``, ``frames`` and ``com`` show or hide each kind of node."""

    def __init__(self, server: "viser.ViserServer", model: Model,
                 meshes: Sequence[tuple[int, Visual, Any, bool]], size: float, *,
                 visuals: bool = True, skeleton: bool = False, frames: bool = False,
                 com: bool = False) -> None:
        self.server, self.model, self.size = server, model, size
        scene = server.scene
        self.links = [scene.add_frame(node_name(link.name), show_axes=False)
                      for link in model.links]
        self.visual_nodes = []
        for k, (link, visual, mesh, _) in enumerate(meshes):
            with io.BytesIO() as buffer:
                mesh.export(buffer, file_type="glb")
                data = buffer.getvalue()
            self.visual_nodes.append(scene.add_glb(
                f"{node_name(model.links[link].name)}/visual{k}", data,
                wxyz=wxyz(visual.origin[:3, :3]), position=visual.origin[:3, 3],
                visible=visuals))
        self.axes = [scene.add_frame(f"{node_name(link.name)}/axes", axes_length=0.08 * size,
                                     axes_radius=0.004 * size, visible=frames)
                     for link in model.links]
        self.pairs = np.array(skeleton_pairs(model), dtype=int).reshape(-1, 2)
        self.bones = scene.add_line_segments(
            "/skeleton/bones", np.zeros((len(self.pairs), 2, 3)), SKELETON_COLOR,
            thickness=0.02 * size, visible=skeleton and len(self.pairs) > 0)
        self.joints = [scene.add_icosphere(f"{node_name(link.name)}/joint", radius=0.018 * size,
                                           color=JOINT_COLOR, visible=skeleton)
                       for link in model.links]
        self.body_coms = [scene.add_icosphere(
            f"{node_name(body.link)}/com", radius=0.015 * size, color=BODY_COM_COLOR,
            position=np.array(body.com), visible=com) for body in model.bodies if body.mass > 0]
        self.com = scene.add_icosphere("/com", radius=0.025 * size, color=COM_COLOR, visible=com)
        self._last: np.ndarray | None = None
        self._show = {"visuals": visuals, "skeleton": skeleton, "frames": frames, "com": com}

    def update(self, T: np.ndarray, com: np.ndarray | None = None) -> None:
        """Pose the robot: T (nlinks, 4, 4) world poses of the links (``forward_kinematics``),
        com (3,) the robot's centre of mass in the world (moved only when given)."""
        quaternions = wxyz(T[:, :3, :3])
        with self.server.atomic():
            for node, q, p in zip(self.links, quaternions, T[:, :3, 3]):
                node.wxyz, node.position = q, p
            if len(self.pairs) and self._show["skeleton"]:
                self.bones.points = T[self.pairs][:, :, :3, 3].astype(np.float32)
            if com is not None:
                self.com.position = np.asarray(com, dtype=float)
        self._last = T

    def show(self, what: str, visible: bool) -> None:
        """Show or hide ``what``: ``"visuals"``, ``"skeleton"``, ``"frames"`` or ``"com"``."""
        if what not in self._show:
            raise ValueError(f"show: what must be one of {', '.join(self._show)}, got {what!r}")
        self._show[what] = bool(visible)
        groups: dict[str, list[Any]] = {
            "visuals": list(self.visual_nodes), "skeleton": [self.bones, *self.joints],
            "frames": list(self.axes), "com": [*self.body_coms, self.com]}
        nodes = groups[what]
        with self.server.atomic():
            for node in nodes:
                node.visible = bool(visible)
            if what == "skeleton" and visible and self._last is not None and len(self.pairs):
                self.bones.points = self._last[self.pairs][:, :, :3, 3].astype(np.float32)

    def shown(self, what: str) -> bool:
        """Whether ``what`` (see ``show``) is shown."""
        return self._show[what]
