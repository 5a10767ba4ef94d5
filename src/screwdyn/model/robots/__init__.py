"""Bundled robots: ``load(name)`` returns a frozen Model, ``names()`` lists them.

    name      nq  joints                 source (details in each data file's header)
    puma560    6  standard DH            Corke & Armstrong-Helouvry (ICRA 1994), as tabulated in
                                         Corke's Robotics Toolbox (RTB ``models.DH.Puma560``);
                                         armature = Jm G^2 is on, friction is off
    stanford   6  standard DH, joint 3   RTB ``models.DH.Stanford`` (Paul's Stanford arm with the
              prismatic                  toolbox's inertias); armature = Jm G^2 is on
    panda      9  URDF: 7 arm joints and Franka Emika Panda from example-robot-data 6.0.0
                  2 prismatic fingers    (franka_description, Apache-2.0), stripped to
                                         kinematics and inertias
    ur5        6  URDF                   Universal Robots UR5 from example-robot-data 6.0.0
                                         (ROS-Industrial ur_description, BSD), stripped likewise
    dual_arm  15  branched: torso yaw    built here from the bundled panda: a 20 kg torso on a
                  and two 7-joint arms   yaw joint carrying two Panda arms (``left_`` and
                                         ``right_`` prefixes, hands welded, fingers fixed)

The DH robots are ``puma560.csv`` and ``stanford.csv`` beside this file (``load_dh_table``
format), so they run with ``algebra="vector"``; their link-1 (Puma) and link-5 (Stanford)
inertias are the toolbox's, which no rigid body has, and load without an ``InertiaWarning``.
Loading is cached: the same name gives the same (immutable) Model.
"""
import copy
import math
import warnings
import xml.etree.ElementTree as ET
from functools import lru_cache
from importlib import resources

from ...errors import InertiaWarning
from ..dh import parse_dh_table
from ..urdf import load_urdf

_FILES = {"puma560": "puma560.csv", "stanford": "stanford.csv", "panda": "panda.urdf",
          "ur5": "ur5.urdf"}


def names():
    """The names of the bundled robots."""
    return ("puma560", "stanford", "panda", "ur5", "dual_arm")


@lru_cache(maxsize=None)
def load(name):
    """The bundled robot ``name`` (see ``names()``) as a Model."""
    if name not in names():
        raise ValueError(f"no bundled robot {name!r}; bundled: {', '.join(names())}")
    if name == "dual_arm":
        return load_urdf(_dual_arm_urdf())
    text = _read(_FILES[name])
    if _FILES[name].endswith(".csv"):
        with warnings.catch_warnings():  # the toolbox's inertias, documented in the file
            warnings.simplefilter("ignore", InertiaWarning)
            return parse_dh_table(text, origin=_FILES[name], default_name=name)
    return load_urdf(text)


def path(name):
    """The data file of a bundled robot (a URDF or a DH table), e.g. to load it with options:
    ``sd.load_urdf(sd.robots.path("ur5"), floating_base=True)``. ``dual_arm`` is built in code
    and has none."""
    if name not in _FILES:
        raise ValueError(f"no data file for {name!r}; robots with one: {', '.join(_FILES)}")
    return str(resources.files(__name__).joinpath(_FILES[name]))


def _read(filename):
    return resources.files(__name__).joinpath(filename).read_text(encoding="utf-8")


# -- dual_arm ------------------------------------------------------------------------------------
TORSO = dict(height=0.5, mass=20.0, size=(0.3, 0.4, 0.6), shoulder=(0.0, 0.2, 0.6))


def _dual_arm_urdf():
    """A torso yawing about the world z axis at 0.5 m, with two Panda arms mounted on its
    shoulders (0, +-0.2, 0.6) pointing sideways (arm base z along +-y)."""
    panda = ET.fromstring(_read("panda.urdf"))
    robot = ET.Element("robot", name="dual_arm")
    sx, sy, sz = TORSO["size"]
    m = TORSO["mass"]
    ixx, iyy, izz = (m * (sy**2 + sz**2) / 12, m * (sx**2 + sz**2) / 12, m * (sx**2 + sy**2) / 12)
    ET.SubElement(robot, "link", name="base")
    torso = ET.SubElement(robot, "link", name="torso")
    inertial = ET.SubElement(torso, "inertial")
    ET.SubElement(inertial, "origin", xyz=f"0 0 {sz / 2}", rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=str(m))
    ET.SubElement(inertial, "inertia", ixx=str(ixx), iyy=str(iyy), izz=str(izz), ixy="0",
                  ixz="0", iyz="0")
    _joint(robot, "torso_yaw", "revolute", "base", "torso", f"0 0 {TORSO['height']}", "0 0 0",
           axis="0 0 1")
    x, y, z = TORSO["shoulder"]
    for prefix, side in (("left_", 1), ("right_", -1)):
        _joint(robot, f"{prefix}mount", "fixed", "torso", f"{prefix}panda_link0",
               f"{x} {side * y} {z}", f"{-side * math.pi / 2} 0 0")
        for element in panda:
            robot.append(_prefixed(element, prefix))
    return ET.tostring(robot, encoding="unicode")


def _joint(robot, name, kind, parent, child, xyz, rpy, axis=None):
    joint = ET.SubElement(robot, "joint", name=name, type=kind)
    ET.SubElement(joint, "parent", link=parent)
    ET.SubElement(joint, "child", link=child)
    ET.SubElement(joint, "origin", xyz=xyz, rpy=rpy)
    if axis:
        ET.SubElement(joint, "axis", xyz=axis)
        ET.SubElement(joint, "limit", effort="300", velocity="2", lower="-2.8", upper="2.8")


def _prefixed(element, prefix):
    """A copy of a Panda <link> or <joint> with its names prefixed; finger joints fixed."""
    element = copy.deepcopy(element)
    element.set("name", prefix + element.get("name"))
    if element.tag == "joint":
        for tag in ("parent", "child"):
            element.find(tag).set("link", prefix + element.find(tag).get("link"))
        if "finger" in element.get("name"):
            element.set("type", "fixed")
            for tag in ("axis", "limit", "mimic", "dynamics"):
                for child in element.findall(tag):
                    element.remove(child)
    return element
