"""Robot models: the frozen Model and its loaders (URDF, DH tables, code), bundled robots."""
from . import joints, robots
from .builder import ModelBuilder
from .dh import DHLink, from_dh, load_dh_table, save_dh_table
from .mjcf import from_mujoco, load_mjcf
from .model import Body, Link, Mimic, Model
from .urdf import load_urdf

__all__ = ["Body", "DHLink", "Link", "Mimic", "Model", "ModelBuilder", "from_dh", "from_mujoco",
           "joints", "load_dh_table", "load_mjcf", "load_urdf", "robots", "save_dh_table"]
