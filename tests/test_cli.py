"""The screwdyn command: info, dynamics, demo, one-line errors, the options its messages advise
(--unsupported, --joint-order, --contact-points), a failed run's exit status and progress bar,
and the mode of the files it writes."""
import json
import os
import re
import stat
import subprocess
import sys
import warnings

import numpy as np
import pytest

import screwdyn as sd
from conftest import erd_urdf, soft_sink
from screwdyn.cli import build_parser, command_line_advice, main

PENDULUM = """<robot name="pendulum">
  <link name="base"/>
  <link name="rod"><inertial><origin xyz="0 0 -0.5"/><mass value="2"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.01"/></inertial></link>
  <link name="tip"><inertial><origin xyz="0 0 -0.2"/><mass value="0.5"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.001"/></inertial></link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="rod"/>
    <axis xyz="1 0 0"/><limit lower="-3" upper="3" effort="50" velocity="4"/></joint>
  <joint name="wrist" type="continuous"><parent link="rod"/><child link="tip"/>
    <origin xyz="0 0 -1"/><axis xyz="0 1 0"/></joint>
</robot>"""


@pytest.fixture
def urdf_file(tmp_path):
    path = tmp_path / "pendulum.urdf"
    path.write_text(PENDULUM)
    return str(path)


def test_info_lists_joints_links_and_masses(urdf_file, capsys):
    assert main(["info", urdf_file]) == 0
    out = capsys.readouterr().out
    for word in ("hinge", "wrist", "continuous", "rod", "tip", "nq = 2", "2.5 kg"):
        assert word in out


def test_dynamics_json_matches_the_library(urdf_file, capsys):
    assert main(["dynamics", urdf_file, "--q", "0.3", "-0.2", "--qd", "1", "2",
                 "--qdd", "0.5", "0", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    model = sd.load_urdf(urdf_file)
    q, qd, qdd = [0.3, -0.2], [1, 2], [0.5, 0]
    np.testing.assert_allclose(result["tau"], sd.inverse_dynamics(model, q, qd, qdd), rtol=1e-14)
    np.testing.assert_allclose(result["mass_matrix"], sd.mass_matrix(model, q), rtol=1e-14)
    np.testing.assert_allclose(result["gravity_torques"], sd.gravity_torques(model, q),
                               rtol=1e-14)
    assert result["joint_names"] == ["hinge", "wrist"]


def test_dynamics_table_is_readable(urdf_file, capsys):
    assert main(["dynamics", urdf_file, "--q", "0.3", "-0.2"]) == 0
    out = capsys.readouterr().out
    assert "tau" in out and "gravity" in out and "mass matrix" in out and "hinge" in out


@pytest.mark.parametrize("argv, message", [
    (["info", "no_such_robot"], "neither a bundled robot"),
    (["dynamics", "{urdf}", "--q", "1", "2", "3"], "--q needs 2 numbers, got 3"),
    (["dynamics", "{urdf}", "--algebra", "vector"], "algebra='vector'"),
    (["info", "{bad}"], "not well-formed XML"),
])
def test_errors_print_one_line_and_exit_2(argv, message, urdf_file, tmp_path, capsys):
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='x'><link name='a'>")
    argv = [a.format(urdf=urdf_file, bad=bad) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("screwdyn: error:") and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_installed_command_runs_without_traceback(urdf_file):
    run = subprocess.run([sys.executable, "-m", "screwdyn", "info", urdf_file + ".missing"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr


def test_demo_shows_every_algebra_agreeing(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "qr (ready)" in out and "spatial" in out and "vector" in out
    assert "all algebras agree" in out


# -- the options the messages advise ------------------------------------------------------------
TENDON_MJCF = """<mujoco model="tendon">
  <worldbody>
    <body name="upper">
      <joint name="a" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="b" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      </body>
    </body>
  </worldbody>
  <tendon><fixed name="t" armature="0.5">
    <joint joint="a" coef="1"/><joint joint="b" coef="-1"/></fixed></tendon>
</mujoco>"""


def one_error_line(err):
    """The single line of ``err`` (asserted single), a ``screwdyn: error:`` line."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("screwdyn: error: "), err
    return lines[0]


def test_unsupported_ignore_loads_an_mjcf_file_with_a_tendon(tmp_path, capsys):
    """A tendon with an armature (its own inertia, not modelled): the refusal names it, advises
    unsupported="ignore" and names --unsupported ignore, which loads the model without it, in
    every command that loads a model."""
    pytest.importorskip("mujoco")
    path = tmp_path / "tendon.xml"
    path.write_text(TENDON_MJCF)
    assert main(["info", str(path)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert 'MJCF <tendon name="t">' in line and "not modelled" in line
    assert 'unsupported="ignore"' in line
    assert line.endswith("(command line: --unsupported ignore)")
    assert main(["info", str(path), "--unsupported", "ignore"]) == 0
    assert "nq = 2" in capsys.readouterr().out
    assert main(["dynamics", str(path), "--unsupported", "ignore", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["joint_names"] == ["a", "b"]
    assert main(["simulate", str(path), "--unsupported", "ignore", "--duration", "0.01",
                 "--quiet", "--backend", "numpy", "--no-compile-cache"]) == 0


def test_an_mjcf_file_starts_at_its_qpos0(tmp_path, capsys):
    """Without --q0 (--q), simulate starts (dynamics evaluates) at MuJoCo's qpos0: a free body
    where the file puts it, a hinge at its ref; --q0 still sets it."""
    mujoco = pytest.importorskip("mujoco")
    xml = """<mujoco><compiler angle="radian"/><worldbody>
    <body name="box" pos="0.2 -0.1 1.5"><freejoint/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <body name="lid" pos="0 0 0.1"><joint name="hinge" axis="1 0 0" ref="0.6"/>
        <geom type="capsule" fromto="0 0 0 0 0.2 0" size="0.02"/></body></body>
    </worldbody></mujoco>"""
    path = tmp_path / "box.xml"
    path.write_text(xml)
    qpos0 = mujoco.MjModel.from_xml_string(xml).qpos0.tolist()
    assert qpos0 == [0.2, -0.1, 1.5, 1, 0, 0, 0, 0.6]
    assert main(["dynamics", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["q"] == qpos0
    fast = ["--duration", "0.01", "--quiet", "--backend", "numpy", "--no-compile-cache"]
    out = tmp_path / "t.npz"
    assert main(["simulate", str(path), "--out", str(out)] + fast) == 0
    assert sd.Trajectory.load(out).q[0].tolist() == qpos0
    q0 = [0, 0, 3, 1, 0, 0, 0, 0]
    assert main(["simulate", str(path), "--out", str(out), "--force", "--q0"]
                + [str(x) for x in q0] + fast) == 0
    assert sd.Trajectory.load(out).q[0].tolist() == q0


def test_joint_order_chooses_the_order_and_silences_the_warning(capsys):
    """Talos lists its legs before its torso: by default a one-line warning names
    --joint-order name; --joint-order name gives Pinocchio's order, silently."""
    path = erd_urdf("talos_data/robots/talos_reduced.urdf")
    assert main(["dynamics", path, "--json"]) == 0
    captured = capsys.readouterr()
    (warning,) = [line for line in captured.err.splitlines() if "joint_order" in line]
    assert warning.startswith("screwdyn: warning: ")
    assert warning.endswith("(command line: --joint-order name or --joint-order file)")
    assert json.loads(captured.out)["joint_names"] == list(sd.load_urdf(path, joint_order="file")
                                                          .joint_names)
    assert main(["dynamics", path, "--json", "--joint-order", "name"]) == 0
    captured = capsys.readouterr()
    assert "joint_order" not in captured.err
    by_name = sd.load_urdf(path, joint_order="name")
    assert json.loads(captured.out)["joint_names"] == list(by_name.joint_names)


@pytest.mark.parametrize("argv, message", [
    (["info", "puma560", "--joint-order", "name"], "--joint-order applies to URDF files, not to "
                                                   "the bundled robot 'puma560'"),
    (["info", "puma560", "--floating-base"], "--floating-base applies to URDF files"),
    (["info", "{urdf}", "--unsupported", "ignore"], "--unsupported applies to MJCF files, not "
                                                    "to a URDF file"),
])
def test_a_loading_option_for_another_kind_of_model_is_refused(argv, message, urdf_file, capsys):
    assert main([a.format(urdf=urdf_file) for a in argv]) == 2
    assert message in one_error_line(capsys.readouterr().err)


def test_contact_points_declare_the_points_the_error_advises(pendulum_urdf, tmp_path, capsys):
    """A model without collision geometry: --contact fails advising GroundContact(points=...)
    and --contact-points; --contact-points LINK:X,Y,Z:R declares them."""
    fast = ["--duration", "0.01", "--quiet", "--backend", "numpy", "--no-compile-cache"]
    assert main(["simulate", pendulum_urdf, "--contact"] + fast) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "GroundContact(points=" in line
    assert line.endswith("(command line: --contact-points LINK[:X,Y,Z[:R]])")
    out = tmp_path / "t.npz"
    assert main(["simulate", pendulum_urdf, "--contact-points", "bob:0,0,1:0.02", "bob",
                 "--out", str(out)] + fast) == 0  # above the pivot and at it: no touch
    contact = sd.Trajectory.load(out).meta["contact"]
    assert contact["labels"] == ["bob point (0.0, 0.0, 1.0)", "bob point (0.0, 0.0, 0.0)"]
    capsys.readouterr()
    for bad in ("bob:0,0", "bob:0,0,x", ":0,0,0"):
        with pytest.raises(SystemExit) as exit:
            main(["simulate", pendulum_urdf, "--contact-points", bad] + fast)
        assert exit.value.code == 2
        assert "is not LINK[:X,Y,Z[:R]]" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("message, advice", [
    ("pass unsupported='ignore' to load it", ["--unsupported ignore"]),
    ("Pass joint_order='name' for Pinocchio's order, or joint_order='file' to keep",
     ["--joint-order name", "--joint-order file"]),
    ("declare them: GroundContact(points={'foot': [(0, 0, 0)]}) or points=[ContactPoint()]",
     ["--contact-points LINK[:X,Y,Z[:R]]"]),
    ("no default stiffness: give stiffness= (N/m)", ["--contact-stiffness K"]),
    ("compile it, or pass backend='numpy' to silence this", ["--backend numpy"]),
    ("algebra='vector' needs a model made by from_dh", []),  # a statement, not advice
    ("(pass check=False to accept them)", []),  # no option for it
])
def test_advice_of_a_python_keyword_names_the_option(message, advice):
    assert command_line_advice(message) == advice


# -- help, exit statuses, one-line errors -------------------------------------------------------
@pytest.mark.parametrize("command", ["info", "dynamics", "simulate", "view", "rollouts"])
def test_help_names_every_kind_of_model_and_the_loading_options(command):
    text = " ".join(build_parser().commands[command].format_help().split())
    for word in ("bundled robot name", "URDF file", "MJCF file", "DH table (.csv)",
                 "--floating-base", "--joint-order {file,name}", "--unsupported {error,ignore}"):
        assert word in text


@pytest.mark.parametrize("argv, message", [
    (["info", "puma560", "--unsupported", "maybe"], "argument --unsupported: invalid choice"),
    (["info", "puma560", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    ([], "the following arguments are required: command"),
])
def test_a_bad_option_is_one_line_and_status_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    line = one_error_line(capsys.readouterr().err)
    assert message in line and line.endswith("--help)")


FAILING = ["--duration", "2", "--dt", "0.05", "--q0", "0.4", "--controller", "pd", "--kp", "1e6",
           "--kd", "0", "--integrator", "euler", "--no-compile-cache"]  # diverges at once


def test_a_failed_simulation_is_one_line_and_status_2(pendulum_urdf, tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert main(["simulate", pendulum_urdf, "--quiet", "--out", str(out)] + FAILING) == 2
    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    step = int(re.search(r"simulation failed at step (\d+)", line).group(1))
    kept = sd.Trajectory.load(out)  # the samples before the failure are written
    assert line.endswith(f"the {kept.n_samples} samples before the failure are written to {out}")
    assert 0 < kept.n_samples <= step + 1 and np.all(np.isfinite(kept.q))
    assert "screwdyn simulate:" in captured.out  # the summary


def test_the_progress_bar_ends_at_the_failing_step(pendulum_urdf, monkeypatch, capsys):
    """Shown from the start (no delay), the bar's last state is the failure: "failed", the
    failing step of the total, not 100%."""
    from tqdm import tqdm

    from screwdyn.sim import progress

    monkeypatch.setattr(progress, "DELAY", 0.0)
    assert main(["simulate", pendulum_urdf] + FAILING) == 2
    err = capsys.readouterr().err
    *bar, error = err.rstrip("\n").split("\n")
    step = int(re.search(r"simulation failed at step (\d+)", error).group(1))
    last = [state for state in "\n".join(bar).replace("\r", "\n").split("\n") if state][-1]
    assert last.startswith("failed:") and "100%" not in last
    assert f"| {tqdm.format_sizeof(step)}/{tqdm.format_sizeof(40)} steps" in last


# -- files honour the umask ---------------------------------------------------------------------
@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_honour_the_umask(pendulum_urdf, tmp_path, umask, mode):
    """As open() would: 0o666 less the umask (the temporary file is made 0o600)."""
    out = tmp_path / "t.npz"
    run = subprocess.run([sys.executable, "-m", "screwdyn", "simulate", pendulum_urdf,
                          "--duration", "0.01", "--quiet", "--backend", "numpy",
                          "--no-compile-cache", "--out", str(out)],
                         capture_output=True, text=True, preexec_fn=lambda: os.umask(umask))
    assert run.returncode == 0, run.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == mode


def test_rigid_contact_from_the_command_line(pendulum_urdf, tmp_path, capsys):
    """--rigid-contact simulates with sd.RigidContact (its meta says so); the penalty spring's
    --contact-stiffness is refused with it, in one line."""
    fast = ["--duration", "0.01", "--quiet", "--backend", "numpy", "--no-compile-cache"]
    out = tmp_path / "rigid.npz"
    assert main(["simulate", pendulum_urdf, "--rigid-contact", "--contact-points", "bob",
                 "--out", str(out)] + fast) == 0
    assert sd.Trajectory.load(out).meta["contact"]["kind"] == "rigid"
    capsys.readouterr()
    assert main(["simulate", pendulum_urdf, "--rigid-contact", "--contact-points", "bob",
                 "--contact-stiffness", "1e4"] + fast) == 2
    assert "--rigid-contact has none" in one_error_line(capsys.readouterr().err)


_WALLED = """<mujoco model="walled">
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <geom name="wall" type="plane" pos="0.5 0 0" zaxis="-1 0 0" size="1 1 .1"/>
    <body name="ball" pos="0.2 0 0.1"><freejoint/><geom name="ball" size="0.1" mass="1"/></body>
  </worldbody>
</mujoco>"""


def test_a_scene_from_the_command_line(tmp_path, capsys):
    """--scene simulates the model with the contact between its file's collision shapes, as
    sd.Scene does (its world's wall and floor included): a ball sent at 1 m/s (--qd0) at a
    wall 0.3 m away stops at it, and the saved trajectory equals the Python API's run of the
    same scene; the summary names the pairs, their softness (the file's geoms': MuJoCo's
    default solimp) and their friction (--mu's, else the file's: MuJoCo's default 1).
    --scene with the ground's point contact options is refused in one line."""
    path = tmp_path / "walled.xml"
    path.write_text(_WALLED)
    out = tmp_path / "scene.npz"
    assert main(["simulate", str(path), "--scene", "--mu", "0.5", "--duration", "0.6",
                 "--qd0", "1", "0", "0", "0", "0", "0", "--quiet", "--out", str(out)]) == 0
    assert "2 pairs of shapes (sd.Scene), soft (impedance 0.9 to 0.95 over 0.001, solved; " \
        "friction impratio 1), 2 contact points, mu = 0.5, timeconst 0.02 s, dampratio 1\n" \
        in capsys.readouterr().out
    assert main(["simulate", str(path), "--scene", "--duration", "0.01"]) == 0
    assert "mu = 1, timeconst 0.02 s, dampratio 1\n" in capsys.readouterr().out  # the file's
    traj = sd.Trajectory.load(out)
    assert traj.meta["contact"]["pairs"] == ["ball/ball|world/wall", "ball/ball|ground"]
    assert 0.4 < traj.q[:, 0].max() < 0.41  # the wall at 0.5 m, the ball's radius 0.1 m
    scene = sd.Scene("walled")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = scene.build(mu=0.5)
    api = sd.simulate(model, q0, np.eye(6)[0], None, 0.6, 1e-3, contact=contact)
    np.testing.assert_array_equal(traj.q, api.q)
    for extra in (["--contact"], ["--contact-points", "ball"], ["--rigid-contact"]):
        assert main(["simulate", str(path), "--scene", "--quiet"] + extra) == 2
        assert "--scene replaces it" in one_error_line(capsys.readouterr().err)


_SPRUNG = """<mujoco model="sprung">
  <worldbody><body name="arm"><joint name="hinge" axis="0 1 0" stiffness="30" springref="0.2"
    damping="0.5"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1"/></body>
  </worldbody>
</mujoco>"""


def test_joint_damping_and_springs_from_the_command_line(tmp_path, capsys, pendulum_urdf):
    """--joint-damping and --joint-springs load the file's damping and MuJoCo's joint springs,
    as load_mjcf(joint_damping=True, joint_springs=True): the simulated trajectory is the
    Python API's. --joint-springs on a URDF file is refused in one line."""
    path = tmp_path / "sprung.xml"
    path.write_text(_SPRUNG)
    out = tmp_path / "sprung.npz"
    assert main(["simulate", str(path), "--joint-damping", "--joint-springs", "--duration",
                 "0.3", "--quiet", "--out", str(out)]) == 0
    model = sd.load_mjcf(str(path), joint_damping=True, joint_springs=True)
    assert [t.name for t in model.tendons] == ["spring:hinge"] and model.damping[0] == 0.5
    api = sd.simulate(model, model.q0, None, None, 0.3, 1e-3)
    np.testing.assert_array_equal(sd.Trajectory.load(out).q, api.q)
    assert np.abs(api.q[-1, 0]) > 0.05  # the spring pulls the arm towards 0.2 rad
    capsys.readouterr()
    assert main(["simulate", pendulum_urdf, "--joint-springs", "--quiet"]) == 2
    assert "--joint-springs applies to MJCF files, not to a URDF file" in \
        one_error_line(capsys.readouterr().err)


def test_soft_equalities_from_the_command_line(tmp_path, capsys, pendulum_urdf):
    """--soft-equalities loads the file's equalities soft, as load_mjcf(soft_equalities=True):
    the simulated trajectory is the Python API's, and differs from the hard one (the four-bar's
    loop gives under its weight). On a URDF file it is refused in one line."""
    from test_mjcf_constraints import FOUR_BAR

    path = tmp_path / "four_bar.xml"
    path.write_text(FOUR_BAR)
    out = tmp_path / "soft.npz"
    assert main(["simulate", str(path), "--soft-equalities", "--duration", "0.2", "--quiet",
                 "--out", str(out)]) == 0
    model = sd.load_mjcf(str(path), soft_equalities=True)
    assert all(c.soft for c in model.constraints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.ConstraintWarning)  # its planar loop: rank 2 of 3
        api = sd.simulate(model, model.q0, None, None, 0.2, 1e-3)
        hard = sd.simulate(sd.load_mjcf(str(path)), model.q0, None, None, 0.2, 1e-3)
    np.testing.assert_array_equal(sd.Trajectory.load(out).q, api.q)
    assert np.abs(hard.q[-1] - api.q[-1]).max() > 1e-4
    capsys.readouterr()
    assert main(["simulate", pendulum_urdf, "--soft-equalities", "--quiet"]) == 2
    assert "--soft-equalities applies to MJCF files, not to a URDF file" in \
        one_error_line(capsys.readouterr().err)


#: a 1 kg ball of 0.1 m on MuJoCo's floor, its centre at z (m)
BALL = """<mujoco><worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
  <body name="ball" pos="0 0 {z}"><freejoint/><geom type="sphere" size="0.1" mass="1"/>
  </body></worldbody></mujoco>"""


def test_friction_cone_from_the_command_line(tmp_path, capsys):
    """--cone pyramidal: the scene's contact with MuJoCo's pyramidal cone (the summary says
    it), the run Scene.build(cone="pyramidal")'s; --cone convex (MuJoCo's elliptic cone)
    alike; without a solved contact, one line on stderr
    and exit status 2; a cone of another name is refused by the parser."""
    path = tmp_path / "ball.xml"
    path.write_text(BALL.format(z=0.12))
    out = tmp_path / "t.npz"
    common = ["simulate", str(path), "--duration", "0.3", "--dt", "1e-3", "--integrator",
              "semi_implicit_euler", "--quiet"]
    assert main(common + ["--scene", "--cone", "pyramidal", "--out", str(out)]) == 0
    assert "pyramidal friction cones" in capsys.readouterr().out
    scene = sd.Scene("ball")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = scene.build(cone="pyramidal")
    api = sd.simulate(model, q0, None, None, 0.3, 1e-3, contact=contact,
                      integrator="semi_implicit_euler")
    np.testing.assert_allclose(sd.Trajectory.load(out).q, api.q, atol=1e-12)
    elliptic = sd.simulate(model, q0, None, None, 0.3, 1e-3, contact=scene.build()[1],
                           integrator="semi_implicit_euler")
    assert np.abs(elliptic.q - api.q).max() > 1e-7  # another contact
    assert main(common + ["--scene"]) == 0
    assert "pyramidal" not in capsys.readouterr().out
    out = tmp_path / "convex.npz"
    assert main(common + ["--scene", "--cone", "convex", "--out", str(out)]) == 0
    assert "convex elliptic friction cones (MuJoCo's)" in capsys.readouterr().out
    convex = sd.simulate(model, q0, None, None, 0.3, 1e-3, contact=scene.build(cone="convex")[1],
                         integrator="semi_implicit_euler")
    np.testing.assert_allclose(sd.Trajectory.load(out).q, convex.q, atol=1e-12)
    assert main(common + ["--contact", "--cone", "pyramidal"]) == 2
    assert "--cone is the solved contact's friction" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(common + ["--scene", "--cone", "square"])


def test_rigid_limits_from_the_command_line(urdf_file, tmp_path, capsys):
    """--rigid-limits: the pendulum, started past its 3 rad limit, is brought back inside
    (sd.RigidLimits, the same run as simulate's), and the summary says which limits ran;
    with --joint-limits too, one line on stderr and exit status 2."""
    out = tmp_path / "t.npz"
    q0 = ["3.2", "0"]
    args = ["simulate", urdf_file, "--duration", "0.5", "--dt", "1e-3", "--integrator",
            "semi_implicit_euler", "--quiet", "--no-compile-cache", "--q0", *q0]
    assert main(args + ["--rigid-limits", "--out", str(out)]) == 0
    assert "joint limits 2 limits, rigid (solved), timeconst 0.02 s" in capsys.readouterr().out
    model = sd.load_urdf(urdf_file)
    expected = sd.simulate(model, [3.2, 0.0], None, None, 0.5, 1e-3,
                           integrator="semi_implicit_euler", joint_limits=sd.RigidLimits())
    traj = sd.Trajectory.load(out)
    np.testing.assert_allclose(traj.q, expected.q, atol=1e-12)
    assert traj.q[100:, 0].max() < 3.0 + 1e-6  # back inside within 0.1 s, then swinging
    with pytest.raises(SystemExit) as exit_:
        main(args + ["--rigid-limits", "--joint-limits"])
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_rigid_limits_of_an_mjcf_file_are_its_own(tmp_path, capsys):
    """--rigid-limits on an MJCF file: each joint's own solreflimit and solimplimit, as MuJoCo
    has them (sd.RigidLimits.from_mjcf: the same run), the summary counting them; with
    --impedance, that one for all."""
    path = tmp_path / "slider.xml"
    path.write_text("""<mujoco><worldbody><body name="block" pos="0 0 1">
      <joint name="lift" type="slide" axis="0 0 1" range="0 1" solreflimit="0.01 1.5"
             solimplimit="0.8 0.95 0.002"/>
      <geom type="box" size="0.1 0.1 0.1" mass="2"/></body></worldbody></mujoco>""")
    common = ["simulate", str(path), "--duration", "0.5", "--dt", "1e-3", "--integrator",
              "semi_implicit_euler", "--quiet", "--no-compile-cache", "--q0", "0.05",
              "--rigid-limits"]
    own, one = tmp_path / "own.npz", tmp_path / "one.npz"
    assert main(common + ["--out", str(own)]) == 0
    assert "joint limits 2 limits, soft (impedance 0.8 to 0.95 over 0.002, solved), " \
        "timeconst 0.02 s, dampratio 1 (1 joints with their own solreflimit and solimplimit)" \
        in capsys.readouterr().out
    model = sd.load_mjcf(str(path))
    assert main(common + ["--impedance", "0.9", "--out", str(one)]) == 0
    assert "soft (impedance 0.9, solved)" in capsys.readouterr().out
    for out, limits in ((own, sd.RigidLimits.from_mjcf(path)),
                        (one, sd.RigidLimits(impedance=0.9))):
        expected = sd.simulate(model, [0.05], None, None, 0.5, 1e-3,
                               integrator="semi_implicit_euler", joint_limits=limits)
        np.testing.assert_allclose(sd.Trajectory.load(out).q, expected.q, atol=1e-12)


def test_impedance_from_the_command_line(tmp_path, capsys):
    """--impedance 0.9 with --scene: MuJoCo's soft contact, a 0.1 m ball resting
    (1 - d) g timeconst^2 = 0.392 mm into its floor; the summary says so. Without
    --impedance, the file's geoms' own (MuJoCo's default solimp: the run is Scene.build()'s,
    0.37 mm in; --impedance with MuJoCo's five numbers, the same run); --impedance 1, rigid:
    on its radius. --impratio sets the soft friction's stiffness (the summary says it; inf:
    rigid friction). Without a solved contact, or out of (0, 1], or a bad solimp or
    impratio: one line on stderr, exit status 2."""
    path = tmp_path / "ball.xml"
    path.write_text(BALL.format(z=0.3))
    out = tmp_path / "t.npz"
    common = ["simulate", str(path), "--duration", "2", "--dt", "1e-3", "--integrator",
              "semi_implicit_euler", "--quiet", "--no-compile-cache"]
    assert main(common + ["--scene", "--impedance", "0.9", "--out", str(out)]) == 0
    assert "soft (impedance 0.9, solved; friction impratio 1)" in capsys.readouterr().out
    assert 0.1 - sd.Trajectory.load(out).q[-1, 2] == pytest.approx(0.1 * 9.81 * 0.02 ** 2,
                                                                   abs=1e-9)
    own = tmp_path / "own.npz"
    assert main(common + ["--scene", "--out", str(own)]) == 0
    assert "soft (impedance 0.9 to 0.95 over 0.001, solved; friction impratio 1)" \
        in capsys.readouterr().out
    scene = sd.Scene("ball")
    scene.add_robot(sd.load_mjcf(str(path)))
    model, contact, q0 = scene.build()
    api = sd.simulate(model, q0, None, None, 2.0, 1e-3, contact=contact,
                      integrator="semi_implicit_euler")
    np.testing.assert_allclose(sd.Trajectory.load(own).q, api.q, atol=1e-12)
    assert 0.1 - api.q[-1, 2] == pytest.approx(3.67e-4, abs=1e-6)
    rigid = tmp_path / "rigid.npz"
    assert main(common + ["--scene", "--impedance", "1", "--out", str(rigid)]) == 0
    assert "rigid (solved)" in capsys.readouterr().out
    assert sd.Trajectory.load(rigid).q[-1, 2] == pytest.approx(0.1, abs=1e-9)
    for alone in (["--contact", "--impedance", "0.9"], ["--iterations", "100"]):
        assert main(common + alone) == 2  # nothing solved that they could set
        assert "add --rigid-contact" in capsys.readouterr().err
    assert main(common + ["--scene", "--impedance", "1.5"]) == 2
    assert "impedance must be a number in (0, 1]" in capsys.readouterr().err
    solimp = tmp_path / "solimp.npz"  # MuJoCo's five numbers: the file's own, given
    assert main(common + ["--scene", "--impedance", "0.9", "0.95", "0.001", "0.5", "2",
                          "--out", str(solimp)]) == 0
    assert "soft (impedance 0.9 to 0.95 over 0.001, solved; friction impratio 1)" \
        in capsys.readouterr().out
    np.testing.assert_allclose(sd.Trajectory.load(solimp).q, api.q, atol=1e-12)
    assert main(common + ["--scene", "--impedance", "0.9", "0.95", "-1"]) == 2
    assert "the impedance's width must be >= 0" in capsys.readouterr().err
    for ratio, said in (("10", "friction impratio 10"), ("inf", "friction rigid")):
        assert main(common + ["--scene", "--impratio", ratio, "--duration", "0.01"]) == 0
        assert f"solved; {said})" in capsys.readouterr().out
    assert main(common + ["--contact", "--impratio", "10"]) == 2
    assert "--impratio is the solved contact's friction" in capsys.readouterr().err
    assert main(common + ["--scene", "--impratio", "0"]) == 2
    assert "RigidContact.impratio must be a number > 0" in capsys.readouterr().err
    cube = tmp_path / "cube.xml"  # --invweight0: MuJoCo's approximate A_jj, 1 / m a corner
    cube.write_text("""<mujoco><worldbody><geom name="floor" type="plane" size="5 5 0.1"/>
      <body name="cube" pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"
      mass="1"/></body></worldbody></mujoco>""")
    weighed = tmp_path / "weighed.npz"
    assert main(["simulate", str(cube), "--duration", "1", "--dt", "1e-3", "--integrator",
                 "semi_implicit_euler", "--quiet", "--scene", "--invweight0", "--iterations",
                 "200", "--out", str(weighed)]) == 0
    assert "friction impratio 1; MuJoCo's invweight0)" in capsys.readouterr().out
    assert 0.1 - sd.Trajectory.load(weighed).q[-1, 2] == pytest.approx(soft_sink(9.81 / 4),
                                                                       abs=1e-9)
    assert main(common + ["--contact", "--invweight0"]) == 2
    assert "add --rigid-contact" in capsys.readouterr().err


def test_rigid_friction_from_the_command_line(tmp_path, capsys):
    """--joint-friction reads an MJCF file's frictionloss; --rigid-friction solves it as
    MuJoCo's friction loss rows, with the file's own solreffriction and solimpfriction
    (sd.RigidFriction.from_mjcf: the same run), the summary saying so; without
    --rigid-friction the stick-slip springs run (the summary names them). --rigid-friction on
    a model without dry friction, or with a URDF-only option on an MJCF file: one line on
    stderr, exit status 2."""
    path = tmp_path / "slider.xml"
    path.write_text("""<mujoco><worldbody><body name="block" pos="0 0 1">
      <joint name="lift" type="slide" axis="0 0 1" frictionloss="12" solimpfriction="0.95 0.99"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/></body></worldbody></mujoco>""")
    common = ["simulate", str(path), "--duration", "0.6", "--dt", "1e-3", "--integrator",
              "semi_implicit_euler", "--quiet", "--no-compile-cache", "--qd0", "-1"]
    out = tmp_path / "rows.npz"
    assert main(common + ["--joint-friction", "--rigid-friction", "--out", str(out)]) == 0
    assert "dry friction 1 rows, soft (impedance 0.95 to 0.99 over 0.001, solved), timeconst " \
        "0.02 s (1 joints or tendons with their own solreffriction and solimpfriction)" \
        in capsys.readouterr().out
    model = sd.load_mjcf(str(path), joint_friction=True)
    expected = sd.simulate(model, [0.0], [-1.0], None, 0.6, 1e-3,
                           integrator="semi_implicit_euler",
                           joint_friction=sd.RigidFriction.from_mjcf(path))
    traj = sd.Trajectory.load(out)
    np.testing.assert_allclose(traj.q, expected.q, atol=1e-12)
    # 12 N against a 9.81 N weight: it stops after 1 / 2.19 s, then creeps (soft rows)
    assert abs(traj.qd[-1, 0]) < 1e-2 < abs(traj.qd[100, 0])
    assert main(common + ["--joint-friction"]) == 0
    assert "dry friction stick-slip" in capsys.readouterr().out
    assert main(common + ["--rigid-friction"]) == 2
    assert "--rigid-friction: the model has no joint or tendon dry friction (load a file's " \
        "with --joint-friction)" in capsys.readouterr().err
    assert main(common + ["--joint-friction", "--iterations", "50"]) == 2
    assert "--rigid-friction" in capsys.readouterr().err


def test_an_mjcf_files_actuators_from_the_command_line(tmp_path, urdf_file, capsys):
    """--controller actuators --ctrl U: the MJCF file's own actuators driven by U, held
    (sd.controllers.MjcfActuators: the same run), the summary naming them; --ctrl without
    it, actuators on a URDF file, or the wrong number of controls: one line on stderr, exit
    status 2."""
    path = tmp_path / "servo.xml"
    path.write_text("""<mujoco><worldbody><body><joint name="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="1"/></body></worldbody>
      <actuator><position name="servo" joint="hinge" kp="50" kv="5"/></actuator></mujoco>""")
    common = ["simulate", str(path), "--duration", "1", "--dt", "1e-3", "--integrator",
              "semi_implicit_euler", "--quiet", "--no-compile-cache"]
    out = tmp_path / "servo.npz"
    assert main(common + ["--controller", "actuators", "--ctrl", "0.5", "--out", str(out)]) == 0
    assert "controller   MJCF actuators" in capsys.readouterr().out
    model = sd.load_mjcf(str(path))
    expected = sd.simulate(model, [0.0], None, sd.controllers.MjcfActuators(model, path, [0.5]),
                           1.0, 1e-3, integrator="semi_implicit_euler")
    np.testing.assert_allclose(sd.Trajectory.load(out).q, expected.q, atol=1e-12)
    assert sd.Trajectory.load(out).q[-1, 0] > 0.4
    for extra, message in (
            (["--ctrl", "0.5"], "--ctrl is the controls of --controller actuators"),
            (["--controller", "actuators", "--ctrl", "1", "2"],
             r"ctrl must have shape (..., 1): one control per actuator of")):
        assert main(common + extra) == 2
        assert message in capsys.readouterr().err
    assert main(["simulate", urdf_file, "--duration", "0.1", "--quiet", "--no-compile-cache",
                 "--controller", "actuators"]) == 2
    assert "--controller actuators drives an MJCF file's actuators" in capsys.readouterr().err
