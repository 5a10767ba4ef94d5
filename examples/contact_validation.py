"""Ground contact validated against physics and against MuJoCo.

    python examples/contact_validation.py [--figures docs/figures]

runs the validations of docs/contact.md and prints each one's measured error:

- a box sliding at 2 m/s on flat ground with mu = 0.5 stops after v^2 / (2 mu g) = 0.408 m, at
  t = v / (mu g) = 0.408 s;
- the same box on a slope below its friction angle stays put (creep over 5 s); above it, it
  slides down with acceleration g (sin a - mu cos a);
- a 1 kg sphere of radius 0.1 m dropped from 1 m bounces lower each time and comes to rest at
  its radius (penetration under 1 mm); the energy balance closes;
- the same drop and slide in MuJoCo (the same MJCF files, MuJoCo's own contact model): resting
  height and stopping distance;
- ANYmal (example-robot-data) standing under joint PD with gravity compensation keeps its base
  height; with the controller off it falls and settles.

The box and the sphere are MJCF files loaded with ``screwdyn.load_mjcf`` (contact points from
their geoms), so that MuJoCo simulates exactly the same scene. The tests in
tests/test_contact_validation.py call these functions and check the numbers.
"""
import argparse
import os
import sys
import tempfile
import warnings

import numpy as np

import screwdyn as sd
from screwdyn import controllers

G = 9.81
MU = 0.5
SLIDE_SPEED = 2.0

SCENE = """<mujoco model="{name}"><option timestep="0.001"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" friction="{mu} 0.005 0.0001"/>
    <body name="{name}" pos="{pos}"><freejoint name="free"/>
      <geom type="{shape}" size="{size}" mass="1" friction="{mu} 0.005 0.0001"/>
    </body>
  </worldbody></mujoco>"""
BOX = dict(name="box", pos="0 0 0.05", shape="box", size="0.1 0.1 0.05")  # 0.2 x 0.2 x 0.1 m
SPHERE = dict(name="ball", pos="0 0 1", shape="sphere", size="0.1")  # radius 0.1 m

ANYMAL = "anymal_b_simple_description/robots/anymal.urdf"
ANYMAL_STANDING = {"LF_HAA": -0.1, "LF_HFE": 0.7, "LF_KFE": -1.0, "RF_HAA": 0.1, "RF_HFE": 0.7,
                   "RF_KFE": -1.0, "LH_HAA": -0.1, "LH_HFE": -0.7, "LH_KFE": 1.0,
                   "RH_HAA": 0.1, "RH_HFE": -0.7, "RH_KFE": 1.0}  # the SRDF's "standing"


def scene_file(body):
    """The MJCF scene of one free body (``BOX`` or ``SPHERE``) on the floor, written to a
    temporary folder (load_mjcf and MuJoCo read files)."""
    folder = os.path.join(tempfile.gettempdir(), "screwdyn_contact_validation")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{body['name']}.xml")
    with open(path, "w") as f:
        f.write(SCENE.format(mu=MU, **body))
    return path


def box():
    return sd.load_mjcf(scene_file(BOX))


def sphere():
    return sd.load_mjcf(scene_file(SPHERE))


def on_plane(angle, half_height=0.05):
    """q of the box resting on a plane through the origin tilted by ``angle`` about y, bottom
    face flat on it, pressed in as far as its weight presses it (each of the four corners
    carries m g cos(angle) / 4 on the default stiffness m g / sink) (MuJoCo's free joint:
    position, quaternion w x y z)."""
    n = np.array([-np.sin(angle), 0.0, np.cos(angle)])
    sink = sd.GroundContact().sink * np.cos(angle) / 4
    return np.r_[n * (half_height - sink), np.cos(angle / 2), 0.0, -np.sin(angle / 2), 0.0]


def slope_contact(angle):
    """The ground tilted by ``angle`` about y (it rises towards +x)."""
    return sd.GroundContact(mu=MU, normal=(-np.sin(angle), 0.0, np.cos(angle)))


def downhill(angle):
    """The unit vector down the slope: towards -x, along the tilted plane."""
    return np.array([-np.cos(angle), 0.0, -np.sin(angle)])


# -- the runs ---------------------------------------------------------------------------------
def box_slide(duration=1.0, dt=1e-3):
    """A box launched at 2 m/s along x: (trajectory, stopping distance, stopping time)."""
    traj = sd.simulate(box(), on_plane(0.0), [SLIDE_SPEED, 0, 0, 0, 0, 0], None, duration, dt,
                       contact=slope_contact(0.0))
    vx = traj.qd[:, 0]
    k = int(np.argmax(vx <= 0))  # the first time it stops: v crosses zero
    stop_time = traj.t[k - 1] + vx[k - 1] / (vx[k - 1] - vx[k]) * (traj.t[k] - traj.t[k - 1])
    return traj, traj.q[-1, 0] - traj.q[0, 0], stop_time


def box_on_slope(degrees, duration=5.0, dt=1e-3):
    """The box released on a slope: (trajectory, distance travelled downhill (T,))."""
    angle = np.radians(degrees)
    traj = sd.simulate(box(), on_plane(angle), None, None, duration, dt,
                       contact=slope_contact(angle))
    return traj, (traj.q[:, :3] - traj.q[0, :3]) @ downhill(angle)


def sliding_acceleration(traj, along, start=1.0):
    """The downhill acceleration fitted (a quadratic) to the motion after ``start`` s."""
    late = traj.t >= start
    return 2 * np.polyfit(traj.t[late], along[late], 2)[0]


def sphere_drop(duration=3.0, dt=1e-3):
    """The sphere dropped from 1 m: (trajectory, bounce apexes (heights of the centre))."""
    model = sphere()
    traj = sd.simulate(model, [0, 0, 1.0, 1, 0, 0, 0], None, None, duration, dt,
                       contact=sd.GroundContact(mu=MU))
    z = traj.q[:, 2]
    apex = [z[i] for i in range(1, len(z) - 1)
            if z[i] > z[i - 1] and z[i] >= z[i + 1] and z[i] > 0.1 + 1e-3]
    return traj, np.array(apex)


def mujoco_rollout(path, qvel0, duration):
    """MuJoCo's own simulation of an MJCF file (mj_step, its default soft contacts): qpos (T,
    nq) every timestep."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(path)
    d = mujoco.MjData(m)
    d.qvel[:] = qvel0
    steps = int(round(duration / m.opt.timestep))
    qpos = np.empty((steps + 1, m.nq))
    qpos[0] = d.qpos
    for k in range(steps):
        mujoco.mj_step(m, d)
        qpos[k + 1] = d.qpos
    return qpos


def anymal():
    """ANYmal B from example-robot-data (collision boxes, cylinders, sphere feet), floating."""
    root = _erd_robots()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.InertiaWarning)  # its base inertia is degenerate
        return sd.load_urdf(os.path.join(root, ANYMAL), floating_base=True)


def _erd_robots():
    for base in sys.path:
        path = os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")
        if os.path.isdir(path):
            return path
    raise ImportError("example-robot-data is not installed: pip install example-robot-data")


def anymal_standing_pose(model, contact):
    """The SRDF's standing pose with the base lowered until the deepest contact point just
    touches the ground."""
    q = model.q_from_dict(ANYMAL_STANDING, base=np.r_[0, 0, 0, 0, 0, 0, 1, np.zeros(12)])
    resolved = contact.resolve(model)
    T = sd.forward_kinematics(model, q)
    depth = resolved.positions(np, resolved.params(), T[None])[1][0]
    q[2] = depth.max()  # the deepest point now at the ground
    return q


class Switch(controllers.Controller):
    """A controller's joint forces times ``on`` (per rollout: 1 on, 0 off), so that one batch
    (one compilation) runs both."""

    params = ("on",)
    name = "switched"

    def __init__(self, controller, on):
        self.controller, self.on = controller, np.asarray(on, dtype=float)

    def __call__(self, t, q, qd):
        return self.on[..., None] * self.controller(t, q, qd)


def anymal_stand_and_fall(duration=5.0, dt=1e-3):
    """ANYmal on the ground, two rollouts in one batch: joint PD (kp 300, kd 10) towards the
    standing pose with gravity compensation, and no torque at all."""
    model = anymal()
    contact = sd.GroundContact(mu=0.8)
    q0 = anymal_standing_pose(model, contact)
    pd = controllers.JointPD(model, kp=300.0, kd=10.0, q_ref=q0, gravity_compensation=True)
    traj = sd.simulate(model, np.stack([q0, q0]), None, Switch(pd, [1.0, 0.0]), duration, dt,
                       contact=contact)
    return traj[0], traj[1]


# -- the report and the figures ----------------------------------------------------------------------
def main(figures=None):
    rows = []
    slide, distance, stop = box_slide()
    d_exp, t_exp = SLIDE_SPEED ** 2 / (2 * MU * G), SLIDE_SPEED / (MU * G)
    rows += [("box slide: stopping distance [m]", distance, d_exp),
             ("box slide: stopping time [s]", stop, t_exp)]
    stick, stick_along = box_on_slope(20)
    rows.append(("slope 20 deg: creep over 1..5 s [mm]",
                 1e3 * (stick_along[-1] - stick_along[stick.t.searchsorted(1.0)]), 0.0))
    slip, slip_along = box_on_slope(30)
    a_exp = G * (np.sin(np.radians(30)) - MU * np.cos(np.radians(30)))
    rows.append(("slope 30 deg: acceleration [m/s^2]", sliding_acceleration(slip, slip_along),
                 a_exp))
    drop, apex = sphere_drop()
    rows += [("sphere drop: resting height [m]", drop.q[-1, 2], 0.1),
             ("sphere drop: energy balance error / exchanged", drop.energy_drift(), 0.0)]
    drop_mj = mujoco_rollout(scene_file(SPHERE), np.zeros(6), 3.0)
    slide_mj = mujoco_rollout(scene_file(BOX), [SLIDE_SPEED, 0, 0, 0, 0, 0], 1.0)
    rows += [("MuJoCo drop: resting height [m]", drop.q[-1, 2], drop_mj[-1, 2]),
             ("MuJoCo slide: stopping distance [m]", distance, slide_mj[-1, 0] - slide_mj[0, 0])]
    stand, fall = anymal_stand_and_fall()
    z = stand.q[:, 2]
    rows += [("ANYmal standing: base height change over 5 s [mm]",
              1e3 * np.abs(z - z[0]).max(), 0.0),
             ("ANYmal off: final base height [m]", fall.q[-1, 2], float("nan"))]
    print(f"{'validation':<52}{'screwdyn':>14}{'reference':>14}{'relative error':>16}")
    for name, value, reference in rows:
        error = (value / reference - 1) if reference not in (0.0,) and np.isfinite(reference) \
            else float("nan")
        print(f"{name:<52}{value:>14.6g}{reference:>14.6g}{error:>16.2e}")
    print(f"sphere bounce apexes [m]: {np.round(apex[:6], 4).tolist()}")
    print(f"ANYmal off: max |qd| {np.abs(fall.qd).max():.3g}, final max |qd| "
          f"{np.abs(fall.qd[-1]).max():.2g}, dissipated {fall.dissipated()[-1]:.4g} J")
    if figures:
        _figures(figures, slide, stick, stick_along, slip, slip_along, drop, drop_mj, slide_mj,
                 stand, fall)
    return rows


def _figures(folder, slide, stick, stick_along, slip, slip_along, drop, drop_mj, slide_mj,
             stand, fall):
    from matplotlib.figure import Figure

    os.makedirs(folder, exist_ok=True)
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    ax = fig.subplots(1, 3)
    t_mj = np.arange(len(slide_mj)) * 1e-3
    ax[0].plot(slide.t, slide.q[:, 0], label="screwdyn")
    ax[0].plot(t_mj, slide_mj[:, 0], "--", label="MuJoCo")
    ax[0].axhline(SLIDE_SPEED ** 2 / (2 * MU * G), color="k", lw=0.7, label="v²/(2μg)")
    ax[0].axvline(SLIDE_SPEED / (MU * G), color="k", lw=0.7, ls=":")
    ax[0].set(xlabel="t [s]", ylabel="x [m]", title="box sliding at 2 m/s, μ = 0.5")
    ax[0].legend()
    ax[1].plot(stick.t, 1e3 * stick_along, label="20° (tan < μ): sticks")
    ax[1].set(xlabel="t [s]", ylabel="downhill [mm]", title="box on a slope below atan μ")
    ax[1].legend()
    a = G * (np.sin(np.radians(30)) - MU * np.cos(np.radians(30)))
    k = slip.t.searchsorted(1.0)  # from the state at 1 s: past the stick springs' loading
    v1 = np.gradient(slip_along, slip.t)[k]
    late = slip.t[k:] - slip.t[k]
    ax[2].plot(slip.t, slip_along, label="30°: slides")
    ax[2].plot(slip.t[k:], slip_along[k] + v1 * late + 0.5 * a * late ** 2, "k:",
               label="g (sin a − μ cos a) from t = 1 s")
    ax[2].set(xlabel="t [s]", ylabel="downhill [m]", title="box on a slope above atan μ")
    ax[2].legend()
    fig.savefig(os.path.join(folder, "contact_box.png"), dpi=110)

    fig = Figure(figsize=(10, 3.6), layout="constrained")
    ax = fig.subplots(1, 2)
    t_mj = np.arange(len(drop_mj)) * 1e-3
    ax[0].plot(drop.t, drop.q[:, 2], label="screwdyn")
    ax[0].plot(t_mj, drop_mj[:, 2], "--", label="MuJoCo")
    ax[0].set(xlabel="t [s]", ylabel="centre height [m]", title="1 kg sphere dropped from 1 m")
    ax[0].legend()
    balance = drop.energy + drop.elastic + drop.dissipated()
    for data, name in ((drop.kinetic, "kinetic"), (drop.potential, "potential"),
                       (drop.dissipated(), "dissipated"), (balance, "sum (+ elastic)")):
        ax[1].plot(drop.t, data, label=name)
    ax[1].set(xlabel="t [s]", ylabel="energy [J]", title="energy balance of the drop")
    ax[1].legend()
    fig.savefig(os.path.join(folder, "contact_sphere.png"), dpi=110)

    fig = Figure(figsize=(10, 3.6), layout="constrained")
    ax = fig.subplots(1, 2)
    ax[0].plot(stand.t, 1e3 * (stand.q[:, 2] - stand.q[0, 2]), label="PD + gravity compensation")
    ax[0].plot(fall.t, 1e3 * (fall.q[:, 2] - fall.q[0, 2]), label="controller off")
    ax[0].set(xlabel="t [s]", ylabel="base height change [mm]", title="ANYmal on the ground")
    ax[0].legend()
    ax[1].plot(fall.t, fall.kinetic, label="kinetic (off)")
    ax[1].plot(fall.t, fall.dissipated(), label="dissipated (off)")
    ax[1].set(xlabel="t [s]", ylabel="energy [J]", title="ANYmal falling: energy")
    ax[1].legend()
    fig.savefig(os.path.join(folder, "contact_anymal.png"), dpi=110)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--figures", help="folder to save the figures in")
    main(parser.parse_args().figures)
