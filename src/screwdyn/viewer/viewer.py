"""``view``: the robot in a browser, served locally by viser; ``Viewer``: the running view.

viser (BSD/Apache-2.0, pip-installable, made for robotics: Pinocchio, Brax and nerfstudio users
view robots with it) serves a three.js client over HTTP and a websocket from a background
thread. The server needs no display, no GPU and no browser: it prints the URL, and any browser
that reaches the port draws the scene with WebGL. It listens on 127.0.0.1 unless told otherwise,
and viser's share tunnel (a public URL a client could request) is turned off.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from ..composition import Assembly
from ..dynamics import center_of_mass, forward_kinematics
from ..model import Model, load_urdf
from ..sim import Trajectory, coordinate_names, integrate
from .geometry import Visual, is_urdf, read_visuals, visuals_for
from .scene import RobotScene, bounds, extent, load_visuals

if TYPE_CHECKING:
    import viser

FPS = 30.0  # playback: poses sent per second of wall time
# a vertical grey-blue gradient behind the scene: white robots (the Panda) stand out from it
BACKGROUND = np.linspace([180, 192, 212], [226, 231, 238], 64).astype(np.uint8)[:, None, :]
URDF = Union[str, "os.PathLike[str]"]
_MISSING = ("the viewer needs viser and trimesh, optional dependencies: "
            "pip install 'screwdyn[viewer]'")


class Viewer:
    """A robot in the browser: a viser server in a background thread, the robot's scene, and
    controls (show visuals, skeleton, link frames, centres of mass; joint sliders for a pose, or
    a time slider, play/pause, speed and loop for a trajectory). Made by ``view``.

    ``url`` is the address to open; ``server`` the ``viser.ViserServer`` (to add your own
    nodes); ``close()`` stops it (also on ``with Viewer ... :`` exit); ``wait()`` blocks until
    Ctrl-C. The robot's configuration is ``q`` (set it to pose the robot); with a trajectory,
    ``time``, ``seek(t)``, ``play()`` and ``pause()`` move along it at ``speed`` times real
    time."""

    def __init__(self, model: Model, visuals: Sequence[tuple[int, Visual]] = (),
                 q: Optional[npt.ArrayLike] = None, trajectory: Optional[Trajectory] = None, *,
                 host: str = "127.0.0.1", port: int = 8080, skeleton: Optional[bool] = None,
                 frames: bool = False, com: bool = False, shadows: bool = True,
                 speed: float = 1.0, loop: bool = True, verbose: bool = True) -> None:
        try:
            import viser
        except ImportError:
            raise ImportError(_MISSING) from None
        started = time.perf_counter()
        self.model = model
        self.visuals = list(visuals)
        """[(link index, Visual)]: the URDF visuals drawn, each on its link."""
        self.trajectory = trajectory
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._playing, self._syncing = False, False
        self._time, self._sample = 0.0, 0  # trajectory playback: time shown, sample shown
        self._sliders: list[Any] = []  # viser GUI handles
        self._checkboxes: dict[str, Any] = {}
        self._time_slider: Any = None
        self._play_button: Any = None
        self._speed_input: Any = None
        self._reference = np.zeros(0)
        self._speed, self._loop = _positive(speed, "speed"), bool(loop)
        q0 = model.q0 if q is None else _configuration(model, q, "q")
        if trajectory is not None:
            if q is not None:
                raise ValueError("view: give q or a trajectory, not both")
            q0 = np.asarray(trajectory.q[0], dtype=float)
        T0 = np.asarray(forward_kinematics(model, q0))
        meshes = load_visuals(visuals, stand_in_radius=0.025 * extent(T0))
        self.size = extent(T0, meshes)

        with contextlib.redirect_stdout(io.StringIO()):  # viser's own banner: ours is below
            self.server = viser.ViserServer(host=host, port=port,
                                            label=f"screwdyn: {model.name}", verbose=False)
        _disable_share_tunnel(self.server)
        self.server.scene.set_up_direction("+z")
        self.server.scene.configure_default_lights(True, cast_shadow=shadows)
        self.server.scene.set_background_image(BACKGROUND, format="png")
        lo, hi = bounds(T0, meshes)
        self.server.scene.add_grid(  # the world's xy plane, or below the robot if it reaches lower
            "/ground", width=4 * self.size, height=4 * self.size, cell_size=_grid_cell(self.size),
            section_size=10 * _grid_cell(self.size), position=(0.0, 0.0, min(0.0, lo[2])))
        self._aim_camera(lo, hi)
        self.scene = RobotScene(self.server, model, meshes, self.size,
                                skeleton=not meshes if skeleton is None else bool(skeleton),
                                frames=frames, com=com)
        self._add_display_controls()
        self._q = q0
        if trajectory is None:
            self._add_joint_controls(q0)
        else:
            self._add_playback_controls()
        self._pose(q0)
        self.start_time = time.perf_counter() - started
        """Seconds from the call to a served scene (meshes read and sent included)."""
        self._player = threading.Thread(target=self._run, name="screwdyn-viewer", daemon=True)
        self._player.start()
        host_shown = "localhost" if host in ("0.0.0.0", "::") else host
        self.url = f"http://{host_shown}:{self.server.get_port()}"
        """The address to open in a browser."""
        if verbose:
            moved = "" if self.port == port else f" (port {port} was in use)"
            print(f"screwdyn viewer: {model.name} at {self.url}{moved}; open it in a browser",
                  flush=True)

    # -- the configuration ------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The port served (the next free one at or above the requested port)."""
        return int(self.server.get_port())

    @property
    def q(self) -> np.ndarray:
        """The configuration shown (nq,); assign a configuration to show it."""
        return self._q.copy()

    @q.setter
    def q(self, q: npt.ArrayLike) -> None:
        q = _configuration(self.model, q, "q")
        if self.trajectory is None:
            self._set_sliders(q)
        self._pose(q)

    def _pose(self, q: np.ndarray) -> None:
        T = np.asarray(forward_kinematics(self.model, q))
        com = np.asarray(center_of_mass(self.model, q)) if self.model.total_mass > 0 else None
        with self._lock:
            self._q = np.array(q, dtype=float)
            self.scene.update(T, com)

    # -- trajectory playback ----------------------------------------------------------------
    @property
    def time(self) -> float:
        """The trajectory time shown (s)."""
        self._require_trajectory("time")
        return self._time

    @property
    def playing(self) -> bool:
        return self._playing

    @property
    def speed(self) -> float:
        """Playback speed: trajectory seconds per second of wall time (1: real time)."""
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        self._speed = _positive(value, "speed")
        if self.trajectory is not None:
            _set_value(self._speed_input, self._speed)

    def seek(self, t: float) -> None:
        """Show the trajectory's sample at time t (s): the last sample at or before t."""
        traj = self._require_trajectory("seek")
        t = float(np.clip(t, traj.t[0], traj.t[-1]))
        k = int(np.clip(np.searchsorted(traj.t, t, side="right") - 1, 0, len(traj.t) - 1))
        with self._lock:
            self._time = t
            if k != self._sample:
                self._sample = k
                self._pose(np.asarray(traj.q[k], dtype=float))
            if abs(self._time_slider.value - t) > 0.5 * self._time_slider.step:
                self._syncing = True
                try:
                    _set_value(self._time_slider, t)
                finally:
                    self._syncing = False

    def play(self) -> None:
        """Move along the trajectory at ``speed`` times real time (from the start if at the
        end)."""
        traj = self._require_trajectory("play")
        with self._lock:
            if self._time >= traj.t[-1]:
                self.seek(traj.t[0])
            self._playing = True
            self._play_button.label = "Pause"

    def pause(self) -> None:
        """Stop moving along the trajectory."""
        self._require_trajectory("pause")
        with self._lock:
            self._playing = False
            self._play_button.label = "Play"

    def _run(self) -> None:
        last = time.perf_counter()
        while not self._closed.wait(1.0 / FPS):
            now = time.perf_counter()
            elapsed, last = now - last, now
            if not self._playing or self.trajectory is None:
                continue
            t0, t1 = float(self.trajectory.t[0]), float(self.trajectory.t[-1])
            t = self._time + elapsed * self._speed
            if t > t1:
                if self._loop and t1 > t0:
                    t = t0 + (t - t0) % (t1 - t0)
                else:
                    t = t1
                    self.pause()
            self.seek(t)

    def _require_trajectory(self, what: str) -> Trajectory:
        if self.trajectory is None:
            raise ValueError(f"{what}: this view shows a configuration, not a trajectory "
                             "(view(trajectory) plays one)")
        return self.trajectory

    # -- the life of the server -------------------------------------------------------------
    def close(self) -> None:
        """Stop playback and the server (the browser tab shows it disconnected)."""
        if not self._closed.is_set():
            self._closed.set()
            self._player.join(timeout=2.0)
            with contextlib.redirect_stdout(io.StringIO()):  # viser's "server stopped"
                self.server.stop()

    def wait(self) -> None:
        """Block until Ctrl-C (or ``close()`` from another thread), then close."""
        try:
            while not self._closed.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            self.close()

    def __enter__(self) -> "Viewer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        what = f", {self.trajectory!r}" if self.trajectory is not None else ""
        state = "closed" if self._closed.is_set() else self.url
        return f"Viewer({self.model.name!r}{what}, {state})"

    # -- controls ---------------------------------------------------------------------------
    def _aim_camera(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """The initial camera: towards the middle of the robot's box (lo, hi) from the front
        right and above, 1.4 times the box's largest side away, aimed a little to the right
        so that the robot stands clear of the control panel."""
        span = float(np.max(hi - lo)) or self.size
        back = np.array([1.0, 0.8, 0.55]) / np.linalg.norm([1.0, 0.8, 0.55])
        right = np.cross(-back, [0.0, 0.0, 1.0])
        target = 0.5 * (lo + hi) + 0.2 * span * right / np.linalg.norm(right)
        camera = self.server.initial_camera
        camera.look_at = target
        camera.position = target + 1.4 * span * back
        camera.up = (0.0, 0.0, 1.0)

    def show(self, what: str, visible: bool = True) -> None:
        """Show or hide ``what``: ``"visuals"`` (the URDF's visual geometry), ``"skeleton"``,
        ``"frames"`` (every link's axes) or ``"com"`` (the centres of mass), as the checkboxes
        in the browser do."""
        if what not in self._checkboxes:
            raise ValueError(f"show: what must be one of {', '.join(self._checkboxes)}, "
                             f"got {what!r}")
        _set_value(self._checkboxes[what], bool(visible))  # its callback shows or hides

    def _add_display_controls(self) -> None:
        gui = self.server.gui
        with gui.add_folder("Show"):
            for what, label in (("visuals", "visual geometry"), ("skeleton", "skeleton"),
                                ("frames", "link frames"), ("com", "centres of mass")):
                box = gui.add_checkbox(label, self.scene.shown(what),
                                       disabled=what == "visuals" and not self.visuals)
                box.on_update(self._toggle(what))
                self._checkboxes[what] = box

    def _toggle(self, what: str) -> Callable[[Any], None]:
        """The callback of ``what``'s checkbox: show or hide it as the box says."""
        def toggled(event: Any) -> None:
            self.scene.show(what, event.target.value)
        return toggled

    def _add_joint_controls(self, q0: np.ndarray) -> None:
        """One slider per joint coordinate. A 1-DoF joint's slider is its q, over the joint's
        position limits (widened to hold a q given beyond them); the sliders of a joint with
        more (a free joint: vx, vy, vz, wx, wy, wz) move it from the reference configuration by
        ``integrate``: exponential coordinates, not Euler angles."""
        model, gui = self.model, self.server.gui
        _, v_names = coordinate_names(model)
        lower, upper = _slider_limits(model)
        with gui.add_folder("Joints"):
            for body, vs in zip(model.active_bodies, model.v_slices):
                for k in range(vs.start, vs.stop):
                    lo, hi = (lower[k], upper[k]) if body.nq == body.nv == 1 else (-math.pi,
                                                                                   math.pi)
                    slider = gui.add_slider(v_names[k], min=lo, max=hi, step=(hi - lo) / 1000,
                                            initial_value=float(np.clip(0.0, lo, hi)))
                    slider.on_update(lambda _event: self._from_sliders())
                    self._sliders.append(slider)
            reset = gui.add_button("Reset")
            reset.on_click(lambda _event: self._set_sliders(q0))
        self._set_sliders(q0)

    def _set_sliders(self, q: np.ndarray) -> None:
        """Sliders showing q: 1-DoF joints their q, the others zero from q as the reference."""
        with self._lock:
            self._reference = np.array(q, dtype=float)
            self._syncing = True
            try:
                for body, qs, vs in zip(self.model.active_bodies, self.model.q_slices,
                                        self.model.v_slices):
                    scalar = body.nq == body.nv == 1
                    if scalar:
                        self._reference[qs] = 0.0
                    for k in range(vs.start, vs.stop):
                        s, value = self._sliders[k], float(q[qs][0]) if scalar else 0.0
                        s.min, s.max = min(s.min, value), max(s.max, value)  # q beyond limits
                        _set_value(s, value)
            finally:
                self._syncing = False
        self._pose(np.asarray(q, dtype=float))

    def _from_sliders(self) -> None:
        if self._syncing:
            return
        v = np.array([s.value for s in self._sliders], dtype=float)
        self._pose(np.asarray(integrate(self.model, self._reference, v)))

    def _add_playback_controls(self) -> None:
        traj, gui = self.trajectory, self.server.gui
        assert traj is not None
        t0, t1 = float(traj.t[0]), float(traj.t[-1])
        step = float(np.min(np.diff(traj.t))) if len(traj.t) > 1 else 1.0
        step = max(step, (t1 - t0) / 100_000, 1e-9)
        self._time = t0
        with gui.add_folder("Playback"):
            self._time_slider = gui.add_slider("t [s]", min=t0, max=max(t1, t0 + step),
                                               step=step, initial_value=t0)
            self._play_button = gui.add_button("Play")
            self._speed_input = gui.add_number("speed", self._speed, min=0.01, max=100.0,
                                               step=0.01, hint="trajectory seconds per second")
            loop = gui.add_checkbox("loop", self._loop)
        self._time_slider.on_update(lambda e: None if self._syncing else self.seek(e.target.value))
        self._play_button.on_click(lambda _e: self.pause() if self._playing else self.play())
        self._speed_input.on_update(lambda e: setattr(self, "_speed", max(e.target.value, 0.01)))
        loop.on_update(lambda e: setattr(self, "_loop", bool(e.target.value)))


# -- view ---------------------------------------------------------------------------------------
def view(subject: Union[Model, Assembly, Trajectory, URDF], q: Optional[npt.ArrayLike] = None,
         *, model: Optional[Union[Model, Assembly]] = None,
         urdf: Optional[Union[URDF, Mapping[str, URDF]]] = None, rollout: Any = 0,
         host: str = "127.0.0.1", port: int = 8080, skeleton: Optional[bool] = None,
         frames: bool = False, com: bool = False, shadows: bool = True, speed: float = 1.0,
         loop: bool = True, open_browser: bool = False, verbose: bool = True) -> Viewer:
    """Show a robot in the browser: its visual geometry from the URDF (meshes with their
    materials, boxes, cylinders, spheres), posed at ``q``, or moving along a trajectory.

    Serves the scene with viser on ``host``:``port`` (the next free port if taken) and prints
    the URL; returns at once with the running ``Viewer`` (``viewer.wait()`` blocks until Ctrl-C;
    the server stops with the Python process or ``viewer.close()``). Nothing needs a display on
    the machine that serves: open the URL in any browser that reaches it (for a remote machine,
    forward the port: ``ssh -L 8080:localhost:8080 host``). Needs ``pip install
    'screwdyn[viewer]'``.

    Args:
        subject: a ``Model``, an ``Assembly`` (shown as ``to_model()``), a ``Trajectory``
            (played back; its model is ``traj.model`` or ``model=``), or the path of a URDF file
            (loaded with ``load_urdf``).
        q: the configuration (nq,) to show; default ``model.q0`` (an MJCF file's qpos0, else
            ``model.neutral``).
        model: the model of a trajectory loaded from a file (``Trajectory.load``); it must be
            the model the trajectory was made with (same name and coordinates), else
            ``ValueError``.
        urdf: the URDF file to read the visual geometry from (``<visual>`` elements); default:
            the file the model was loaded from (``model.source``, when it is a URDF). For an
            assembly, ``{subsystem name: URDF file}`` (default: each subsystem's own). A string
            starting with ``<`` is URDF text. A model without visual geometry (a bundled robot,
            whose URDFs are stripped; a DH table; an MJCF model) is drawn as a skeleton: a
            segment from each link origin to its parent's, a sphere at each link origin.
        rollout: which rollout of a batched trajectory to play (an index into its batch).
        host: the address to listen on: ``"127.0.0.1"`` this machine only, ``"0.0.0.0"`` every
            interface (anyone who reaches the port sees the robot and can move its sliders).
        port: the port to serve on; the next free one if it is taken (the printed line says).
        skeleton: show the skeleton (default: when there is no visual geometry).
        frames: show every link's axes (x, y, z: red, green, blue).
        com: show the centres of mass: each body's, and the robot's (larger). The browser's
            checkboxes change these three and the visual geometry's visibility.
        shadows: soft shadows from the lights (a browser without a GPU draws a frame about
            20 times faster without them).
        speed: playback speed, trajectory seconds per second (1: real time).
        loop: start the trajectory again at its end.
        open_browser: also open the URL with Python's ``webbrowser`` (where there is one).
        verbose: print the URL.

    Returns:
        Viewer: ``viewer.q = q`` poses the robot, ``viewer.seek(t)``, ``play()``, ``pause()``
        move along a trajectory, ``viewer.server`` is the ``viser.ViserServer``.

    Example:
        ```python
        import screwdyn as sd

        viewer = sd.view(sd.robots.load("panda"), port=8090)   # a skeleton: no meshes bundled
        viewer.q = sd.random_configuration(viewer.model, seed=1)
        viewer.close()
        ```
    """
    trajectory = None
    if isinstance(subject, Trajectory):
        trajectory = subject
        subject = model if model is not None else subject.model
        if subject is None:
            raise ValueError("view: this trajectory carries no model (loaded from a file?): "
                             "pass it, view(trajectory, model=...)")
    elif model is not None:
        raise ValueError("view: model= is for a trajectory; pass the model as the subject")
    if isinstance(subject, (str, os.PathLike)):
        urdf = subject if urdf is None else urdf
        subject = load_urdf(subject)
    if isinstance(subject, Assembly):
        flat, visuals = subject.to_model(), _assembly_visuals(subject, urdf)
    elif isinstance(subject, Model):
        flat = subject
        source = urdf if urdf is not None else model_urdf(subject)
        if isinstance(source, Mapping):
            raise ValueError("view: urdf={subsystem: file} is for an assembly; a model takes "
                             "one URDF file")
        visuals = _placed(flat, read_visuals(source) if source is not None else (), "")
    else:
        raise TypeError(f"view: expected a Model, Assembly, Trajectory or URDF path, got "
                        f"{type(subject).__name__}")
    if trajectory is not None:
        trajectory = _rollout(check_trajectory(trajectory, flat), rollout)
    viewer = Viewer(flat, visuals, q, trajectory, host=host, port=port, skeleton=skeleton,
                    frames=frames, com=com, shadows=shadows, speed=speed, loop=loop,
                    verbose=verbose)
    if open_browser:
        import webbrowser

        if not webbrowser.open(viewer.url) and verbose:
            print("screwdyn viewer: no browser to open here; open the URL above in one",
                  flush=True)
    return viewer


def model_urdf(model: Model) -> Optional[str]:
    """The URDF file a model was loaded from (``Model.source``, when it is a URDF), else None."""
    return model.source if model.source and is_urdf(model.source) else None


def check_trajectory(trajectory: Trajectory, model: Model) -> Trajectory:
    """The trajectory, with ``model`` attached, if it was made with that model: same name (when
    recorded), same nq and coordinate names; else ``ValueError`` saying what differs."""
    made_with = trajectory.meta.get("model")
    nq = trajectory.q.shape[-1]
    if nq != model.nq:
        raise ValueError(f"the trajectory is of {made_with or 'a model'!r} with nq = {nq}; "
                         f"model {model.name!r} has nq = {model.nq}: view it with its own model")
    if made_with is not None and made_with != model.name:
        raise ValueError(f"the trajectory was made with model {made_with!r}, not "
                         f"{model.name!r}: view it with its own model")
    q_names = trajectory.meta.get("q_names")
    if q_names and list(q_names) != list(coordinate_names(model)[0]):
        raise ValueError(f"the trajectory's coordinates ({', '.join(q_names[:4])}, ...) are "
                         f"not model {model.name!r}'s: view it with its own model")
    if len(trajectory.t) == 0:
        raise ValueError("the trajectory has no samples to show")
    return Trajectory(trajectory.t, trajectory.q, trajectory.qd, trajectory.qdd, trajectory.tau,
                      trajectory.kinetic, trajectory.potential, model=model,
                      meta=trajectory.meta)


def _rollout(trajectory: Trajectory, rollout: Any) -> Trajectory:
    if not trajectory.batch_shape:
        return trajectory
    try:
        one = trajectory[rollout]
    except IndexError as e:
        raise ValueError(f"view: rollout={rollout!r} is not in the trajectory's batch "
                         f"{trajectory.batch_shape} ({e})") from None
    if one.batch_shape:
        raise ValueError(f"view: rollout={rollout!r} leaves a batch {one.batch_shape}: give an "
                         f"index for each of the batch dimensions {trajectory.batch_shape}")
    return one


def _assembly_visuals(assembly: Assembly, urdf: Any) -> list[tuple[int, Visual]]:
    flat = assembly.to_model()
    files = dict(urdf or {}) if isinstance(urdf, Mapping) or urdf is None else None
    if files is None:
        raise ValueError("view: an assembly takes urdf={subsystem name: URDF file}")
    unknown = set(files) - set(assembly.names)
    if unknown:
        raise ValueError(f"view: urdf names {sorted(unknown)[0]!r}, not a subsystem of "
                         f"{assembly.name!r} (subsystems: {', '.join(assembly.names)})")
    placed: list[tuple[int, Visual]] = []
    for s in assembly.models:
        source = files.get(s.name) or model_urdf(s.model)
        if source is not None:
            placed += _placed(flat, read_visuals(source), f"{s.name}/")
    return placed


def _placed(model: Model, visuals: Sequence[Visual], prefix: str) -> list[tuple[int, Visual]]:
    found, unknown = visuals_for(visuals, model.link_names, prefix)
    if unknown:
        warnings.warn(f"view: {len(unknown)} visual(s) belong to links that model "
                      f"{model.name!r} does not have ({', '.join(sorted(set(unknown))[:3])}): "
                      "is the URDF the model's?", stacklevel=3)
    return found


def _configuration(model: Model, q: npt.ArrayLike, name: str) -> np.ndarray:
    q = np.asarray(q, dtype=float)
    if q.shape != (model.nq,):
        raise ValueError(f"{name} must have shape ({model.nq},) (configuration, nq), "
                         f"got {q.shape}")
    if not np.all(np.isfinite(q)):
        raise ValueError(f"{name} must be finite")
    return q


def _disable_share_tunnel(server: "viser.ViserServer") -> None:
    """Turn viser's share tunnel off. viser answers a client's ShareUrlRequest (its share
    button, or any page that reaches the port) by opening a public tunnel to this server through
    share.viser.studio: the handler of that message is unregistered and the button hidden. Where
    this viser's internals differ, the server's ``request_share_url`` refuses instead. A program
    may still share on purpose with ``viser.ViserServer.request_share_url(viewer.server)``."""
    server.gui.configure_theme(show_share_button=False)
    try:
        from viser import _messages

        server._websock_server.unregister_handler(_messages.ShareUrlRequest)
    except (ImportError, AttributeError, AssertionError, KeyError, ValueError):
        setattr(server, "request_share_url", _share_refused)


def _share_refused(verbose: bool = True) -> None:
    """``request_share_url`` of a viewer's server where its handler could not be unregistered:
    no tunnel, None (viser's value for a share URL that could not be made)."""
    return None


def _positive(value: float, name: str) -> float:
    value = float(value)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return value


def _slider_limits(model: Model) -> tuple[np.ndarray, np.ndarray]:
    """Slider ranges per velocity coordinate: a 1-DoF joint's finite position limits, else
    [-pi, pi] (rad, or m for a prismatic joint)."""
    lower = np.full(model.nv, -math.pi)
    upper = np.full(model.nv, math.pi)
    lo, hi = model.lower_position_limit, model.upper_position_limit
    for body, qs, vs in zip(model.active_bodies, model.q_slices, model.v_slices):
        if body.nq == body.nv == 1 and np.isfinite(lo[qs][0]) and np.isfinite(hi[qs][0]) \
                and hi[qs][0] > lo[qs][0]:
            lower[vs], upper[vs] = lo[qs][0], hi[qs][0]
    return lower, upper


def _set_value(handle: Any, value: Any) -> None:
    """Assign a viser GUI input's value (its callbacks run, the browsers follow). The handle is
    typed Any: mypy cannot read viser's property with a wider setter than getter."""
    handle.value = value


def _grid_cell(size: float) -> float:
    """Ground grid cells: a power of ten near a tenth of the robot's size (m)."""
    return float(10.0 ** math.floor(math.log10(max(size, 1e-3) / 2)))
