"""Simulation: fixed-step integration of a robot's dynamics with a controller in the loop, ground
contact with friction, joint limits and friction, external wrenches; one rollout or a batch, on
numpy or compiled with JAX; the Trajectory it returns, its energy balance, files and pictures.

    traj = screwdyn.simulate(model, q0, qd0, controllers.GravityCompensation(model), 5.0, 1e-3,
                             contact=screwdyn.GroundContact(mu=0.8), joint_limits=True)
    traj.energy_drift(), traj.save("run.npz"), traj.plot("run.png")

Modules, each with one job (dependencies point down the list):

    settings      Settings, JointLimits, JointFriction: what a run does, checked up front
    inverse_weights MuJoCo's approximate inverse weights (body_invweight0, dof_invweight0)
    geometry      contact points from collision geometry (URDF, MJCF) or declared by the user
    contact_model ContactModel: what a contact model provides (the protocol the step uses)
    contact       GroundContact: the contact force law (Hunt-Crossley, stick-slip friction)
    contact_solver RigidContact: contact forces solved with the dynamics (Coulomb cones);
                  solve_rows, the projected Gauss-Seidel every solved constraint goes through
    solved_rows   what the joint-space rows solved with the dynamics share: their settings
    limit_constraints RigidLimits: joint limits as constraints, solved with the contact
    friction_constraints RigidFriction: joint and tendon dry friction as constraints (MuJoCo's
                  friction loss rows), solved with the contact and the limits
    collision     the narrow phase between primitive shapes (sphere, capsule, box, cylinder)
    scene         Scene, ShapeContact: objects and shapes, rigid contact between them
    surface       Surface: a shape's friction, solref, solimp and margin, mixed for a pair as
                  MuJoCo does
    joint_springs joint limits and Coulomb joint friction as springs
    system        the ODE's right-hand side: forces, powers, the forward-dynamics call
    integrators   RK4, semi-implicit and explicit Euler on the manifold; stability limits
    policy        controllers, torque profiles and tables as one policy
    trajectory    Trajectory: samples, energy accounting
    energy        the energies of the samples, the energy floor, the energy-balance check
    record        the samples' layout and the Trajectory made of them
    run           Run: the constants one simulation runs with
    inputs        the checks of simulate's arguments and of the run's size
    stability     the largest stable step of every spring, and the warning
    step          one step (integrator, controller, forces, energy channels), every backend
    failures      failure flags and reasons, the first failure, the samples kept before it
    pacing        the size of each uninterruptible call (memory and CHUNK_SECONDS)
    loop_numpy    the numpy backend: a Python loop over steps
    loop_jax      the JAX backend: one compiled XLA loop run in chunks
    native        the native backend: the step in machine code, the loop too
    backend       which backend runs a simulation
    rollout       simulate and rollout (for jax.grad): the public entries tying them together
    step_derivatives  d x_next / d (x, tau) of one step (what DDP and iLQR need)
    files         .npz and .csv trajectory files (atomic writes)
    summary, pictures, progress   what the command line and users look at

``screwdyn.simulate`` is the function ``simulate``; this package is ``screwdyn.sim``.
"""
from ..model.configuration import integrate
from .contact import GroundContact
from .contact_solver import RigidContact
from .friction_constraints import RigidFriction
from .limit_constraints import RigidLimits
from . import collision
from .scene import Scene, ShapeContact
from .surface import Surface
from .step_derivatives import StepDerivatives, step_derivatives
from .errors import SimulationError, SimulationInterrupted
from .geometry import ContactPoint, ContactPoints, contact_points
from .integrators import largest_stable_step
from .pictures import animate, plot_trajectory
from .rollout import rollout, simulate
from .settings import BACKENDS, CONTROL, INTEGRATORS, JointFriction, JointLimits, Settings
from .system import accelerations
from .trajectory import Trajectory, coordinate_names

__all__ = ["simulate", "rollout", "Settings", "JointLimits", "RigidLimits", "JointFriction",
           "RigidFriction",
           "GroundContact",
           "RigidContact", "Scene", "ShapeContact", "Surface", "collision", "step_derivatives",
           "StepDerivatives",
           "ContactPoint", "ContactPoints", "contact_points", "Trajectory", "SimulationError",
           "SimulationInterrupted", "coordinate_names", "integrate", "accelerations",
           "largest_stable_step", "plot_trajectory", "animate", "INTEGRATORS", "BACKENDS",
           "CONTROL"]
