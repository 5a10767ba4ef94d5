"""Robot models: the frozen Model and its loaders (URDF, DH tables, code)."""
from .builder import ModelBuilder
from .model import Body, Link, Model
from .urdf import load_urdf

__all__ = ["Body", "Link", "Model", "ModelBuilder", "load_urdf"]
