"""Robot models: the frozen Model and its loaders (URDF, DH tables, code), bundled robots."""
from . import robots
from .builder import ModelBuilder
from .dh import DHLink, from_dh, load_dh_table, save_dh_table
from .model import Body, Link, Model
from .urdf import load_urdf

__all__ = ["Body", "DHLink", "Link", "Model", "ModelBuilder", "from_dh", "load_dh_table",
           "load_urdf", "robots", "save_dh_table"]
