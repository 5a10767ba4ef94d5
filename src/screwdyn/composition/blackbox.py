"""Black boxes: subsystems known only at their connection points, and what crosses a point.

Conventions at a connection point (public layout, leading batch dimensions; ``ConnectionState``):

- ``pose`` (..., 4, 4): the point's frame in the world, T_world_point;
- ``twist`` (..., 6): [linear; angular] velocity of the frame's origin, in the frame's axes;
- ``twist_derivative`` (..., 6): the time derivative of that twist, with gravity folded in as the
  recursions do (the world accelerates at -g): a frame at rest with its z axis up reads
  [0, 0, 9.81, 0, 0, 0], and the weight of a payload comes out of m * twist_derivative;
- ``wrench`` (..., 6): [force; torque about the frame's origin], in the frame's axes, that the
  subsystem beyond the point (everything attached through it, the links its model welds to its
  base included) exerts on the subsystem before it: a payload of mass m at rest under a frame with
  z up gives [0, 0, -m g, 0, 0, 0], its weight.

Force/torque sensors. A six-axis sensor mounted at the point, with its measuring frame on the
point's frame, reads this wrench directly if it reports the load the tool side applies to it (a
hanging payload reads its weight, force pointing down); if it reports the wrench it applies to
the tool (the reaction: force pointing up), pass its reading negated. If its frame differs from
the point's, make the connection point's ``placement`` the sensor frame.
"""
from typing import NamedTuple


class ConnectionState(NamedTuple):
    """The pose, twist, twist derivative and wrench at a connection point (see the module)."""

    pose: object
    twist: object
    twist_derivative: object
    wrench: object = None


class BlackBox:
    """A subsystem whose inside is unknown, described at its connection points (the paper's
    black box: the rest of the robot's torques are exactly those with the real subsystem).

    wrench: what it exerts on its parent at its own connection point (see the module's
        conventions): an array (..., 6), e.g. a force/torque sensor reading, or a callable
        ``wrench(twist, twist_derivative)`` of the point's twist and twist derivative (..., 6)
        returning (..., 6). It is the whole wrench through the point: what the real subsystem
        would exert, its parts welded to its base and the loads of subsystems attached to the
        black box included. Only a black box at the root may leave it None.
    points: ``{name: motion}`` for the connection points its children attach to (by
        ``link=name``): the ``ConnectionState`` (or tuple pose, twist, twist_derivative) the
        black box imposes there, as measured; the pose is only read by ``connection_points``.
    name: the subsystem's name unless ``attach`` gives one.
    """

    def __init__(self, wrench=None, points=None, name="black_box"):
        self.wrench = wrench
        self.points = {point: ConnectionState(*motion) for point, motion in (points or {}).items()}
        self.name = name

    def __repr__(self):
        return f"BlackBox({self.name!r}, points={sorted(self.points)})"
