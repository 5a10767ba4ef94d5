"""Pictures with matplotlib (the optional extra ``screwdyn[plot]``, imported only when used):

    plot_trajectory(traj, "run.png")     joint positions, velocities, joint forces, energy vs time
    draw_robot(model, q, path="q.png")   the robot at a configuration: links as segments, frames
    animate(traj, "run.gif")             the robot moving along a trajectory (GIF; MP4 with ffmpeg)

Each function saves to ``path`` when given (no window opens: the figure is drawn off-screen) and
returns the matplotlib Figure; without a path the figure belongs to pyplot, for ``plt.show()``.
"""
import numpy as np

from .dynamics import forward_kinematics

_MISSING = ("screwdyn's pictures need matplotlib, an optional dependency: "
            "pip install 'screwdyn[plot]' (or pip install matplotlib)")


def _matplotlib():
    try:
        import matplotlib
    except ImportError:
        raise ImportError(_MISSING) from None
    return matplotlib


def _figure(path, **kwargs):
    """An off-screen Figure when saving to a file, a pyplot figure otherwise."""
    _matplotlib()
    if path is None:
        import matplotlib.pyplot as plt

        return plt.figure(**kwargs)
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _save(fig, path, dpi=120):
    if path is not None:
        fig.savefig(str(path), dpi=dpi, bbox_inches="tight")
    return fig


# -- time plots ---------------------------------------------------------------------------
def plot_trajectory(traj, path=None, max_rollouts=8, title=None):
    """Four panels against time: joint positions q, velocities qd, joint forces tau, and energy
    (kinetic, potential, total). A batch draws its first ``max_rollouts`` rollouts, thin."""
    from .simulate import coordinate_names

    fig = _figure(path, figsize=(9, 10), layout="constrained")
    axes = fig.subplots(4, 1, sharex=True)
    q, qd, tau = (a.reshape((-1,) + a.shape[-2:]) for a in (traj.q, traj.qd, traj.tau))
    energies = [a.reshape((-1, a.shape[-1])) for a in (traj.kinetic, traj.potential, traj.energy)]
    n = min(len(q), max_rollouts)
    if traj.model is not None:
        q_names, v_names = coordinate_names(traj.model)
    else:
        q_names = traj.meta.get("q_names") or [f"q{i}" for i in range(q.shape[-1])]
        v_names = traj.meta.get("v_names") or [f"v{i}" for i in range(qd.shape[-1])]
    width, alpha = (1.2, 1.0) if n == 1 else (0.7, 0.6)
    for ax, data, names, label in ((axes[0], q, q_names, "q  [rad, m]"),
                                   (axes[1], qd, v_names, "qd  [rad/s, m/s]"),
                                   (axes[2], tau, v_names, "tau  [N m, N]")):
        for j, name in enumerate(names):
            color = f"C{j % 10}"
            for r in range(n):
                ax.plot(traj.t, data[r, :, j], color=color, lw=width, alpha=alpha,
                        label=name if r == 0 else None)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    if len(q_names) <= 12:
        axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    for (data, name), color in zip(zip(energies, ("kinetic", "potential", "total")),
                                   ("C0", "C1", "k")):
        for r in range(n):
            axes[3].plot(traj.t, data[r], color=color, lw=width, alpha=alpha,
                         label=name if r == 0 else None)
    axes[3].set_ylabel("energy  [J]")
    axes[3].set_xlabel("t  [s]")
    axes[3].grid(alpha=0.3)
    axes[3].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    meta = traj.meta
    fig.suptitle(title or f"{meta.get('model', '')}: {meta.get('controller', '')}, "
                 f"{meta.get('integrator', '')}, dt = {meta.get('dt', '')} s")
    return _save(fig, path)


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


def _robot_scale(points):
    span = np.ptp(points, axis=0).max() if len(points) else 0.0
    return span if span > 0 else 1.0


def _set_limits(ax, points):
    centre = (points.max(axis=0) + points.min(axis=0)) / 2
    half = 0.55 * _robot_scale(points)
    for setter, c in zip((ax.set_xlim, ax.set_ylim, ax.set_zlim), centre):
        setter(c - half, c + half)
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x [m]")
    ax.set_ylabel("y [m]")
    ax.set_zlabel("z [m]")


class _RobotArtist:
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
        fig = _figure(path, figsize=(6, 6))
        ax = fig.add_subplot(projection="3d")
    else:
        fig = ax.figure
    scale = frame_scale if frame_scale is not None else 0.08 * _robot_scale(points)
    _RobotArtist(ax, model, frames, scale, color).update(T)
    _set_limits(ax, points)
    ax.set_title(title or model.name)
    return _save(fig, path)


def animate(traj, path, model=None, fps=25, max_frames=250, rollout=None, frames=False,
            dpi=80):
    """Save the robot moving along ``traj`` as ``.gif`` (Pillow writer, ships with matplotlib) or
    ``.mp4`` (needs ffmpeg). Plays in real time at ``fps`` frames per second unless that takes
    more than ``max_frames`` frames, then faster. ``rollout`` picks one rollout of a batch
    (default the first). Returns the path."""
    _matplotlib()
    from matplotlib import animation

    model = model if model is not None else traj.model
    if model is None:
        raise ValueError("animate needs the model: animate(traj, path, model=...) for a "
                         "trajectory loaded from a file")
    path = str(path)
    kind = path.lower().rsplit(".", 1)[-1]
    if kind == "gif":
        writer = animation.PillowWriter(fps=fps)
    elif kind == "mp4":
        if not animation.writers.is_available("ffmpeg"):
            raise RuntimeError("an .mp4 animation needs ffmpeg on the PATH; save a .gif instead")
        writer = animation.FFMpegWriter(fps=fps)
    else:
        raise ValueError(f"animation files are .gif or .mp4, got {path!r}")
    q = traj.q
    if traj.batch_shape:
        index = (0,) * len(traj.batch_shape) if rollout is None else np.atleast_1d(rollout)
        q = q[tuple(index)]
    if len(traj.t) == 0:
        raise ValueError("the trajectory has no samples to animate")
    sample_dt = traj.t[1] - traj.t[0] if len(traj.t) > 1 else 1.0
    stride = max(1, int(round(1.0 / (fps * sample_dt))))
    stride = max(stride, int(np.ceil(len(traj.t) / max_frames)))
    index = np.arange(0, len(traj.t), stride)
    if index[-1] != len(traj.t) - 1:
        index = np.append(index, len(traj.t) - 1)
    T = np.asarray(forward_kinematics(model, q[index]))  # (F, nlinks, 4, 4)
    points = np.vstack([T[:, :, :3, 3].reshape(-1, 3), np.zeros((1, 3))])
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 5))
    ax = fig.add_subplot(projection="3d")
    _set_limits(ax, points)
    artist = _RobotArtist(ax, model, frames, 0.08 * _robot_scale(points), "0.25")
    label = ax.set_title("")

    def frame(i):
        label.set_text(f"{model.name}   t = {traj.t[index[i]]:.2f} s")
        return artist.update(T[i]) + [label]

    anim = animation.FuncAnimation(fig, frame, frames=len(index), blit=False)
    anim.save(path, writer=writer, dpi=dpi)
    return path
