"""Inertial parameters as inputs: the joint-torque regressor and the parameters' checks.

Rigid-body inverse dynamics is linear in the bodies' inertial parameters (``Model.
inertial_parameters``: per body m, m c, and the rotational inertia at the body frame's origin,
Pinocchio's order), tau = Y(q, qd, qdd) pi, which is what identification fits: stack Y over
measured states and solve least squares for pi (``examples/identify_panda.py``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from .algorithms.regressor import regressor
from .execution.plan import Function, public, run
from .model.inertial import PARAMETER_NAMES, check_inertial_parameters, pseudo_inertia
from .typing import AlgebraName, Array, ArrayLike

if TYPE_CHECKING:
    from .model import Model

__all__ = ["inverse_dynamics_regressor", "check_inertial_parameters", "pseudo_inertia",
           "PARAMETER_NAMES"]


def _regressor(call):
    """Y (nv, 10 nbodies, N) of a call (``execution.call.Call``), in the model's coordinates."""
    return call.reduce(regressor(call.alg, call.model, call["q"], call["qd"], call["qdd"],
                                 call.gravity_twist()))


#: the regressor as the execution plan runs it (native code, numpy or JAX, as every public
#: dynamics function)
_REGRESSOR = Function("inverse_dynamics_regressor", _regressor, ("q", "qd", "qdd"),
                      lambda m: (m.nv, 10 * m.nbodies), ("gravity",), entries=True,
                      many_outputs=True, bytes_per_body=256, algebras=("spatial", "cga", "dq"))


@public(_REGRESSOR)
def inverse_dynamics_regressor(model: Model, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike,
                               gravity: Optional[ArrayLike] = None,
                               algebra: AlgebraName = "spatial") -> Array:
    """The joint-torque regressor Y: tau = Y @ pi.reshape(-1), pi = ``model.
    inertial_parameters()``.

    One Newton-Euler recursion whose backward pass carries, per body, the wrenches of the 10
    unit parameters of every body in its subtree (``algorithms/regressor.py``); the same as
    Pinocchio's ``computeJointTorqueRegressor`` where the bodies match.

    Args:
        model: the robot.
        q: configuration (..., nq) (rad, m; a free joint: position and quaternion xyzw).
        qd: joint velocities (..., nv) (rad/s, m/s; a free joint: linear and angular velocity
            of the base in the base frame).
        qdd: joint accelerations (..., nv) (rad/s^2, m/s^2).
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: ``"spatial"`` (default), ``"cga"`` or ``"dq"``: the algebra the recursion runs
            in (the DH recursion of ``"vector"`` has no regressor: ``ValueError``).

    Returns:
        Y (..., nv, 10 * nbodies): column 10 i + k is the joint forces (N m, N) per unit of body
        i's parameter k (``PARAMETER_NAMES``: kg, kg m, kg m^2), in body order. The rigid-body
        part of ``inverse_dynamics``: the joints' own forces (armature * qdd, damping, Coulomb
        friction) are not inertial parameters and are not in Y; a coupled model's (mimic) Y is
        G^T Y_tree. numpy in, numpy out; a JAX array in, a JAX array out.

    Example:
        ```python
        import numpy as np
        import screwdyn as sd

        panda = sd.robots.load("panda")
        q, qd, qdd = panda.neutral, np.ones(9), np.ones(9)
        Y = sd.inverse_dynamics_regressor(panda, q, qd, qdd)          # (9, 90)
        tau = Y @ panda.inertial_parameters().reshape(-1)              # = inverse dynamics
        assert np.allclose(tau, sd.inverse_dynamics(panda, q, qd, qdd))
        ```
    """
    if algebra == "vector":
        raise ValueError("inverse_dynamics_regressor: algebra='vector' (the DH recursion) has "
                         "no regressor; its model's body frames give the same Y in "
                         "algebra='spatial', 'cga' or 'dq'")
    return run(_REGRESSOR, model, algebra, (q, qd, qdd), (gravity,))
