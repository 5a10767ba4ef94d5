"""Pictures of a Trajectory (matplotlib, the optional extra ``screwdyn[plot]``):

    plot_trajectory(traj, "run.png")   joint positions, velocities, joint forces, energy balance
    animate(traj, "run.gif")           the robot moving along the trajectory (GIF; MP4 with ffmpeg)

``traj.plot(...)`` and ``traj.animate(...)`` call them. The robot is drawn with
``screwdyn.plot``'s pieces.
"""
import numpy as np

from ..dynamics import forward_kinematics
from .trajectory import coordinate_names


def plot_trajectory(traj, path=None, max_rollouts=8, title=None, progress=False):
    """Four panels against time: joint positions q, velocities qd, joint forces tau, and the
    energy balance: kinetic T, potential V, elastic (contact and joint springs), the work done
    on the robot W, the energy dissipated D, and the total T + V + elastic + D - W, which an
    exact integration keeps constant. A batch draws its first ``max_rollouts`` rollouts, thin.
    Saves to ``path`` if given; returns the Figure. ``progress``: a progress bar (tqdm) on
    stderr, panel by panel (shown after a second)."""
    from ..plot import figure, save

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=5, unit="panel", desc="plotting", delay=1.0)
    fig = figure(path, figsize=(9, 10), layout="constrained")
    axes = fig.subplots(4, 1, sharex=True)
    q, qd, tau = (a.reshape((-1,) + a.shape[-2:]) for a in (traj.q, traj.qd, traj.tau))
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
        if bar is not None:
            bar.update(1)
    if len(q_names) <= 12:
        axes[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    balance = traj.energy + traj.elastic + traj.dissipated() - traj.work()
    curves = [(traj.kinetic, "kinetic T", "C0", "-"), (traj.potential, "potential V", "C1", "-"),
              (traj.elastic, "elastic", "C2", "-"), (traj.work(), "work in W", "C3", "--"),
              (traj.dissipated(), "dissipated D", "C4", "--"),
              (balance, "T + V + elastic + D - W", "k", "-")]
    for data, name, color, style in curves:
        data = data.reshape((-1, data.shape[-1]))
        if not np.any(np.isfinite(data)) or (name == "elastic" and not np.any(data)):
            continue
        for r in range(n):
            axes[3].plot(traj.t, data[r], color=color, ls=style, lw=width, alpha=alpha,
                         label=name if r == 0 else None)
    axes[3].set_ylabel("energy  [J]")
    axes[3].set_xlabel("t  [s]")
    axes[3].grid(alpha=0.3)
    axes[3].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    meta = traj.meta
    fig.suptitle(title or f"{meta.get('model', '')}: {meta.get('controller', '')}, "
                 f"{meta.get('integrator', '')}, dt = {meta.get('dt', '')} s")
    if bar is None:
        return save(fig, path)
    bar.update(1)
    try:
        return save(fig, path)  # the drawing itself: most of the time
    finally:
        bar.update(1)
        bar.close()


def animate(traj, path, model=None, fps=25, max_frames=250, rollout=None, frames=False,
            dpi=80, progress=False):
    """Save the robot moving along ``traj`` as ``.gif`` (Pillow writer, ships with matplotlib) or
    ``.mp4`` (needs ffmpeg). Plays in real time at ``fps`` frames per second unless that takes
    more than ``max_frames`` frames, then faster. ``rollout`` picks one rollout of a batch
    (default the first). A ground contact's plane is drawn as a grid. ``progress``: a progress
    bar (tqdm) on stderr, frame by frame. Returns the path."""
    from ..plot import RobotArtist, require_matplotlib, robot_scale, set_limits

    require_matplotlib()
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
    set_limits(ax, points)
    contact = traj.meta.get("contact")
    if contact:
        _draw_ground(ax, contact, points)
    artist = RobotArtist(ax, model, frames, 0.08 * robot_scale(points), "0.25")
    label = ax.set_title("")

    def frame(i):
        label.set_text(f"{model.name}   t = {traj.t[index[i]]:.2f} s")
        return artist.update(T[i]) + [label]

    anim = animation.FuncAnimation(fig, frame, frames=len(index), blit=False)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(index), unit="frame", desc="animating", delay=1.0)
    try:
        anim.save(path, writer=writer, dpi=dpi,
                  progress_callback=None if bar is None else lambda i, n: bar.update(1))
    finally:
        if bar is not None:
            bar.close()
    return path


def _draw_ground(ax, contact, points):
    """The contact plane under the robot, as a light grid."""
    n = np.asarray(contact["normal"], dtype=float)
    origin = np.array([0.0, 0.0, contact["height"]])
    u = np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0])
    u /= np.linalg.norm(u)
    w = np.cross(n, u)
    centre = points.mean(axis=0)
    centre = centre - np.dot(centre - origin, n) * n
    half = 0.6 * max(np.ptp(points, axis=0).max(), 1e-3)
    s = np.linspace(-half, half, 5)
    S, R = np.meshgrid(s, s)
    grid = centre + S[..., None] * u + R[..., None] * w
    ax.plot_wireframe(grid[..., 0], grid[..., 1], grid[..., 2], color="0.7", lw=0.5)
