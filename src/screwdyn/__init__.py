"""screwdyn: rigid-body dynamics of robots in spatial algebra, conformal geometric algebra and
dual quaternions, batched over states, on numpy or JAX."""
from .dynamics import (bias_forces, center_of_mass, coriolis_matrix, forward_dynamics,
                       forward_kinematics, gravity_torques, inverse_dynamics, jacobian,
                       kinetic_energy, mass_matrix, potential_energy)
from .errors import InertiaWarning, ModelError
from .model import Model, ModelBuilder, load_urdf
from .model.model import random_configuration

__version__ = "0.1.0"

__all__ = [
    "InertiaWarning", "Model", "ModelBuilder", "ModelError", "bias_forces", "center_of_mass",
    "coriolis_matrix", "forward_dynamics", "forward_kinematics", "gravity_torques",
    "inverse_dynamics", "jacobian", "kinetic_energy", "load_urdf", "mass_matrix",
    "potential_energy", "random_configuration",
]
