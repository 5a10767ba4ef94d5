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
the point's, make the connection point's ``placement`` the sensor frame. A recorded log of such
readings along a trajectory is a ``WrenchLog`` (from a CSV or npz file): the assembly's
functions then take the trajectory's times (``time=``) and read the log there.
"""
import csv
import pathlib
from typing import NamedTuple

import numpy as np

from .. import _backend
from ..errors import ModelError

WRENCH_COLUMNS = ("fx", "fy", "fz", "tx", "ty", "tz")


class ConnectionState(NamedTuple):
    """The pose, twist, twist derivative and wrench at a connection point (see the module)."""

    pose: object
    twist: object
    twist_derivative: object
    wrench: object = None


class WrenchLog:
    """A time series of connection-point wrenches, e.g. a force/torque sensor's log: ``times``
    (T,) in seconds, strictly increasing, and ``wrenches`` (T, 6) [force; torque] in the
    conventions of this module. ``at(t)`` interpolates linearly (exact at the samples); a time
    outside [times[0], times[-1]] is an error: the log must cover the trajectory it drives."""

    def __init__(self, times, wrenches, name="wrench log"):
        self.name = name
        times = np.array(times, dtype=float)
        wrenches = np.array(wrenches, dtype=float)
        if times.ndim != 1 or len(times) < 1:
            raise ValueError(f"{name}: times must have shape (T,) with T >= 1, "
                             f"got shape {times.shape}")
        if wrenches.shape != (len(times), 6):
            raise ValueError(f"{name}: wrenches must have shape ({len(times)}, 6) (one [force; "
                             f"torque] per time), got shape {wrenches.shape}")
        if not (np.all(np.isfinite(times)) and np.all(np.isfinite(wrenches))):
            bad = int(np.flatnonzero(~np.all(np.isfinite(np.column_stack([times, wrenches])),
                                             axis=1))[0])
            raise ValueError(f"{name}: sample {bad} (t = {times[bad]}) is not finite")
        if np.any(np.diff(times) <= 0):
            bad = int(np.flatnonzero(np.diff(times) <= 0)[0]) + 1
            raise ValueError(f"{name}: times must increase strictly; sample {bad} "
                             f"(t = {times[bad]}) does not")
        times.flags.writeable = wrenches.flags.writeable = False
        self.times, self.wrenches = times, wrenches

    @classmethod
    def load(cls, path):
        """A log from a CSV file with the columns ``t, fx, fy, fz, tx, ty, tz`` (a header line
        naming them) or an npz file with the arrays ``t`` (or ``time``) and ``wrench`` (T, 6)."""
        path = pathlib.Path(path)
        name = f"wrench log {path.name}"
        if path.suffix == ".npz":
            with np.load(path) as data:
                key = "t" if "t" in data else "time" if "time" in data else None
                if key is None or "wrench" not in data:
                    raise ValueError(f"{name}: expected the arrays 't' (or 'time') and 'wrench', "
                                     f"found {sorted(data.files)}")
                return cls(data[key], data["wrench"], name)
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        header = [h.strip() for h in rows[0]] if rows else []
        wanted = ("t",) + WRENCH_COLUMNS
        if not set(wanted) <= set(header):
            raise ValueError(f"{name}: the header must name the columns {', '.join(wanted)}; "
                             f"got {header}")
        index = [header.index(c) for c in wanted]
        try:
            table = np.array([[float(row[k]) for k in index] for row in rows[1:]])
        except (ValueError, IndexError) as e:
            raise ValueError(f"{name}: a row is not numeric or is short ({e})") from None
        return cls(table[:, 0] if len(table) else [], table[:, 1:] if len(table) else [], name)

    def save(self, path):
        """Write the log as CSV (``.csv``) or npz (any other suffix)."""
        path = pathlib.Path(path)
        if path.suffix == ".csv":
            with open(path, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(("t",) + WRENCH_COLUMNS)
                writer.writerows(np.column_stack([self.times, self.wrenches]).tolist())
        else:
            np.savez(path, t=self.times, wrench=self.wrenches)

    def at(self, t, where=None):
        """The wrench (..., 6) at times t (...,), linearly interpolated. Outside the log: a
        ValueError naming ``where`` (the black box), or NaN where t is traced by JAX (a compiled
        simulation then stops there with a SimulationError)."""
        xp = _backend.namespace(t)
        first, last = self.times[0], self.times[-1]
        slack = 1e-9 * max(1.0, abs(last))
        if xp is np:
            t = np.asarray(t, dtype=float)
            if t.size and (np.min(t) < first - slack or np.max(t) > last + slack):
                raise ValueError(f"{where or self.name}: the {self.name} covers t = {first:g} to "
                                 f"{last:g} s, but the trajectory runs from t = {np.min(t):g} to "
                                 f"{np.max(t):g} s (a log shorter than the trajectory)")
        times = xp.asarray(self.times)
        out = xp.stack([xp.interp(t, times, xp.asarray(self.wrenches[:, k])) for k in range(6)],
                       axis=-1)
        if xp is np:
            return out
        inside = (t >= first - slack) & (t <= last + slack)
        return xp.where(inside[..., None], out, xp.nan)

    def __len__(self):
        return len(self.times)

    def __repr__(self):
        return (f"WrenchLog({self.name!r}, {len(self)} samples, t = {self.times[0]:g} to "
                f"{self.times[-1]:g} s)")


class BlackBox:
    """A subsystem whose inside is unknown, described at its connection points (the paper's
    black box: the rest of the robot's torques are exactly those with the real subsystem).

    wrench: what it exerts on its parent at its own connection point (see the module's
        conventions): an array (..., 6), e.g. a force/torque sensor reading; a ``WrenchLog``
        (a recorded time series, read at the call's ``time``); or a callable
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

    def check(self, where):
        """Raise ModelError naming ``where`` if a measured wrench has the wrong shape or is not
        finite (a callable is checked when it is called)."""
        w = self.wrench
        if w is None or callable(w) or isinstance(w, WrenchLog):
            return
        try:
            a = _backend.as_float_array(w, _backend.namespace(w), "wrench")
        except ValueError as e:
            raise ModelError(f"{where}: black box wrench: {e}") from None
        if a.ndim < 1 or a.shape[-1] != 6:
            raise ModelError(f"{where}: black box wrench must have shape (..., 6) ([force; "
                             f"torque]), got shape {tuple(a.shape)}")
        if _backend.namespace(a) is np and not np.all(np.isfinite(a)):
            raise ModelError(f"{where}: black box wrench is not finite (NaN or inf)")

    def __repr__(self):
        return f"BlackBox({self.name!r}, points={sorted(self.points)})"
