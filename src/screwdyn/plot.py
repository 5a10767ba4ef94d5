"""Pictures of robots with matplotlib (the optional extra ``screwdyn[plot]``, imported only when
used):

    draw_robot(model, q, path="q.png")   the robot at a configuration: links as segments, frames

and the pieces the trajectory pictures of ``screwdyn.sim.pictures`` (``traj.plot``,
``traj.animate``) are drawn with: ``figure``, ``save``, ``RobotArtist``, ``set_limits``.

Each function saves to ``path`` when given (no window opens: the figure is drawn off-screen) and
returns the matplotlib Figure; without a path the figure belongs to pyplot, for ``plt.show()``.
"""
import numpy as np

from .dynamics import forward_kinematics

_MISSING = ("screwdyn's pictures need matplotlib, an optional dependency: "
            "pip install 'screwdyn[plot]' (or pip install matplotlib)")


def require_matplotlib():
    """The matplotlib module, or an ImportError saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(_MISSING) from None
    return matplotlib


def figure(path, **kwargs):
    """An off-screen Figure when saving to a file, a pyplot figure otherwise."""
    require_matplotlib()
    if path is None:
        import matplotlib.pyplot as plt

        return plt.figure(**kwargs)
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def save(fig, path, dpi=120):
    """Save ``fig`` to ``path`` (if given); returns the Figure."""
    if path is not None:
        fig.savefig(str(path), dpi=dpi, bbox_inches="tight")
    return fig


# -- the robot in 3-D -----------------------------------------------------------------------
def skeleton(model):
    """Pairs of link indices (a, b) to join by a segment: each body's frame to its parent body's
    frame (or the root link's), and each welded link to the frame of its body."""
    body_link = [model.link_index(b.link) for b in model.bodies]
    root = model.link_index(model.root_link) if model.root_link else None
    pairs = []
    for i, b in enumerate(model.bodies):
        parent = body_link[b.parent] if b.parent >= 0 else root
        if parent is not None and parent != body_link[i]:
            pairs.append((parent, body_link[i]))
    for l, link in enumerate(model.links):
        if link.body >= 0 and l != body_link[link.body]:
            pairs.append((body_link[link.body], l))
    return pairs


def robot_scale(points):
    span = np.ptp(points, axis=0).max() if len(points) else 0.0
    return span if span > 0 else 1.0


def set_limits(ax, points):
    centre = (points.max(axis=0) + points.min(axis=0)) / 2
    half = 0.55 * robot_scale(points)
    for setter, c in zip((ax.set_xlim, ax.set_ylim, ax.set_zlim), centre):
        setter(c - half, c + half)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")


class RobotArtist:
    """Segments and frame triads of one model, updated in place for each configuration."""

    def __init__(self, ax, model, frames, frame_scale, color):
        self.ax, self.model, self.pairs = ax, model, skeleton(model)
        self.frames, self.frame_scale = frames, frame_scale
        self.links = [ax.plot([], [], [], "-o", color=color, lw=3, ms=4)[0] for _ in self.pairs]
        self.triads = []
        if frames:
            for _ in model.links:
                self.triads.append([ax.plot([], [], [], color=c, lw=1.2)[0]
                                    for c in ("tab:red", "tab:green", "tab:blue")])

    def update(self, T):
        """T: (nlinks, 4, 4) link poses."""
        origins = T[:, :3, 3]
        for line, (a, b) in zip(self.links, self.pairs):
            seg = origins[[a, b]]
            line.set_data_3d(seg[:, 0], seg[:, 1], seg[:, 2])
        for triad, T_l in zip(self.triads, T):
            for k, line in enumerate(triad):
                tip = T_l[:3, 3] + self.frame_scale * T_l[:3, k]
                line.set_data_3d([T_l[0, 3], tip[0]], [T_l[1, 3], tip[1]], [T_l[2, 3], tip[2]])
        return self.links + [line for triad in self.triads for line in triad]


def draw_robot(model, q, path=None, ax=None, frames=True, frame_scale=None, color="0.25",
               title=None):
    """The robot at configuration q (nq,): a segment from each link frame to its parent's, and
    (``frames``) each link's axes as red/green/blue x/y/z. Draws into ``ax`` (a 3-D axes) if
    given, else a new figure, saved to ``path`` if given. Returns the Figure."""
    q = np.asarray(q, dtype=float)
    if q.shape != (model.nq,):
        raise ValueError(f"q must have shape ({model.nq},), got {q.shape}")
    T = np.asarray(forward_kinematics(model, q))
    points = np.vstack([T[:, :3, 3], np.zeros((1, 3))])
    if ax is None:
        fig = figure(path, figsize=(6, 6))
        ax = fig.add_subplot(projection="3d")
    else:
        fig = ax.figure
    scale = frame_scale if frame_scale is not None else 0.08 * robot_scale(points)
    RobotArtist(ax, model, frames, scale, color).update(T)
    set_limits(ax, points)
    ax.set_title(title or model.name)
    return save(fig, path)


def __getattr__(name):
    """``plot.plot_trajectory`` and ``plot.animate`` moved to ``screwdyn.sim.pictures`` (the
    trajectory's pictures belong to the simulation package): still found here, with a
    ``DeprecationWarning``."""
    if name in ("plot_trajectory", "animate"):
        import warnings

        warnings.warn(f"screwdyn.plot.{name} moved to screwdyn.sim.{name} (or use traj."
                      f"{'plot' if name == 'plot_trajectory' else 'animate'}(...))",
                      DeprecationWarning, stacklevel=2)
        from .sim import pictures

        return getattr(pictures, name)
    raise AttributeError(f"module 'screwdyn.plot' has no attribute {name!r}")
