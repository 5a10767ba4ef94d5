"""The screwdyn command: info, dynamics, demo, and one-line errors."""
import json
import subprocess
import sys

import numpy as np
import pytest

import screwdyn as sd
from screwdyn.cli import main

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
