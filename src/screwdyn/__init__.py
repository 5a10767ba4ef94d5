"""screwdyn: rigid-body dynamics of robots in spatial algebra, conformal geometric algebra and
dual quaternions, batched over states, on numpy or JAX."""
from ._backend import Float32Warning
from .algebra import cga_types as cga
from .algebra import dualquat as dq
from .composition import Assembly, BlackBox, ConnectionState, WrenchLog
from .compiled import compile  # noqa: A004  (sd.compile: a jitted function bound to a model)
from .derivatives import (dynamics_derivatives, forward_dynamics_derivatives,
                          inverse_dynamics_derivatives)
from .dynamics import (bias_forces, center_of_mass, coriolis_matrix, forward_dynamics,
                       forward_kinematics, gravity_torques, inverse_dynamics, jacobian,
                       kinetic_energy, mass_matrix, plan, potential_energy)
from . import execution  # noqa: E402  (sd.execution.use_native, set_directory)
from .errors import (ConstraintWarning, InertiaWarning, JointOrderWarning, ModelError,
                     PenetrationWarning, LargeSceneWarning)
from . import constraints  # noqa: E402  (sd.constraints: Connect, Weld, Coupling, ...)
from .constraints import (constrained_forward_dynamics, constraint_forces,
                          constraint_jacobian, constraint_residual)
from .identification import check_inertial_parameters, inverse_dynamics_regressor
from .model import (DHLink, Model, ModelBuilder, from_dh, from_mujoco, joints, load_dh_table,
                    load_mjcf, load_urdf, robots, save_dh_table)
from .dynamics import link_velocities
from .model.configuration import difference, integrate
from .model.model import random_configuration
from . import sim  # noqa: E402  (the simulation package)
from .sim import (ContactPoint, GroundContact, JointFriction, JointLimits, RigidContact,
                  RigidFriction, RigidLimits, Scene, SimulationError, SimulationInterrupted,
                  Trajectory, simulate)
from .rollouts import RolloutError, open_dataset as read_rollouts, rollouts  # noqa: E402
from . import controllers, plot  # noqa: E402  (plot imports matplotlib only when drawing)
from .viewer import view  # viser and trimesh are imported only when a view opens

from ._version import __version__  # noqa: E402

__all__ = [
    "Assembly", "BlackBox", "ConnectionState", "DHLink", "Float32Warning", "InertiaWarning", "ConstraintWarning", "PenetrationWarning", "LargeSceneWarning", "JointOrderWarning", "cga", "dq", "Model", "ModelBuilder", "ModelError", "bias_forces", "center_of_mass",
    "coriolis_matrix", "forward_dynamics", "forward_kinematics", "gravity_torques",
    "inverse_dynamics", "jacobian", "kinetic_energy", "load_urdf", "mass_matrix",
    "potential_energy", "random_configuration", "robots", "from_dh", "load_dh_table",
    "save_dh_table", "simulate", "Trajectory", "SimulationError", "integrate", "controllers",
    "plot", "compile", "dynamics_derivatives", "inverse_dynamics_derivatives",
    "forward_dynamics_derivatives", "load_mjcf", "from_mujoco", "joints", "difference",
    "view", "WrenchLog",
    "sim", "GroundContact", "RigidContact", "Scene", "ContactPoint", "JointLimits", "JointFriction",
    "RigidLimits", "RigidFriction",
    "SimulationInterrupted", "link_velocities",
    "rollouts", "read_rollouts", "RolloutError",
    "plan", "execution",
    "inverse_dynamics_regressor", "check_inertial_parameters",
    "constraints", "constrained_forward_dynamics", "constraint_forces", "constraint_residual",
    "constraint_jacobian",
]
