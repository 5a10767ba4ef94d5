"""Inertial parameters: a body's inertia as the 10 numbers that the dynamics are linear in.

Pinocchio's order (``pinocchio.Inertia.toDynamicParameters``), per body, in the body frame::

    pi = (m, m c_x, m c_y, m c_z, Ixx, Ixy, Iyy, Ixz, Iyz, Izz)

m the mass (kg), c the centre of mass (m), and I_o = I_c + m S(c)^T S(c) the rotational inertia
about the body frame's origin (kg m^2; I_c about the centre of mass, S(c) the cross-product
matrix). Every quantity of rigid-body dynamics (joint forces, the mass matrix, energies) is
linear in (m, m c, I_o); physical consistency is the positive semi-definiteness of the
pseudo-inertia (Wensing, Kim and Slotine, RA-L 2018)::

    J = [[Sigma, m c], [m c^T, m]],   Sigma = tr(I_o) / 2 * 1 - I_o

(Sigma is the second moment of the mass distribution about the origin; J >= 0 says: m >= 0 and
the principal moments about the centre of mass obey the triangle inequality).

The functions take numpy or JAX arrays and never convert a JAX tracer to numbers, so they run
under ``jax.jit``, ``jax.vmap`` and ``jax.grad``.
"""
from __future__ import annotations

import numpy as np

from .._backend import namespace
from ..typing import Array, ArrayLike

PARAMETER_NAMES = ("m", "mc_x", "mc_y", "mc_z", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")
# the (row, column) of the 3x3 inertia at the origin for parameters 4..9
_INERTIA_ENTRIES = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2))
CONSISTENCY_TOLERANCE = 1e-9  # relative to tr(J): rounding in a file's digits is no defect


def parameters_from_inertia(mass: float, com, inertia_com) -> np.ndarray:
    """The 10 inertial parameters (numpy, (10,)) of a body of ``mass`` (kg) with its centre of
    mass ``com`` (3,) (m) and rotational inertia ``inertia_com`` (3, 3) about the centre of mass
    (kg m^2), all in the body frame."""
    c = np.asarray(com, dtype=float)
    S = _skew(np.asarray, c)
    I_o = np.reshape(np.asarray(inertia_com, dtype=float), (3, 3)) + mass * (S.T @ S)
    return np.array([mass, *(mass * c), *(I_o[r, k] for r, k in _INERTIA_ENTRIES)])


def inertia_from_parameters(pi):
    """(mass, com (3,), inertia about the centre of mass (3, 3)) of a body's 10 parameters
    ``pi`` (10,), numpy or JAX. A body without mass has its centre of mass at the origin
    (its first moment must then be zero: ``check_inertial_parameters``)."""
    xp = namespace(pi)
    m, h = pi[0], pi[1:4]
    massive = m != 0
    c = h / xp.where(massive, m, 1.0)
    S = _skew(xp.stack, c)
    return m, c, rotational_inertia(pi) - m * (S.T @ S)


def rotational_inertia(pi):
    """The 3x3 rotational inertia about the body frame's origin of parameters ``pi`` (..., 10):
    (..., 3, 3)."""
    xp = namespace(pi)
    xx, xy, yy, xz, yz, zz = (pi[..., k] for k in range(4, 10))
    return xp.stack([xp.stack([xx, xy, xz], -1), xp.stack([xy, yy, yz], -1),
                     xp.stack([xz, yz, zz], -1)], -2)


def pseudo_inertia(pi):
    """The 4x4 pseudo-inertia J = [[Sigma, m c], [m c^T, m]] of parameters ``pi`` (..., 10),
    Sigma = tr(I_o)/2 - I_o: (..., 4, 4); positive semi-definite for a real mass distribution."""
    xp = namespace(pi)
    I_o = rotational_inertia(pi)
    trace = I_o[..., 0, 0] + I_o[..., 1, 1] + I_o[..., 2, 2]
    Sigma = 0.5 * trace[..., None, None] * xp.eye(3) - I_o
    h = pi[..., 1:4]
    top = xp.concatenate([Sigma, h[..., :, None]], -1)
    bottom = xp.concatenate([h, pi[..., :1]], -1)[..., None, :]
    return xp.concatenate([top, bottom], -2)


def check_inertial_parameters(pi: ArrayLike, tolerance: float = CONSISTENCY_TOLERANCE
                              ) -> "tuple[Array, Array]":
    """Which bodies' inertial parameters describe a real mass distribution.

    Traceable (``jax.jit``, ``jax.vmap``): use it where ``Model.with_inertial_parameters``
    cannot check traced values, e.g. as a constraint or a penalty in identification.

    Args:
        pi: inertial parameters (..., bodies, 10) in Pinocchio's order (module docstring).
        tolerance: an eigenvalue of the pseudo-inertia counts as negative below
            ``-tolerance * tr(J)`` (default 1e-9, the loaders' rule: a file's rounding is no
            defect).

    Returns:
        (valid (..., bodies) booleans, smallest eigenvalue of each body's pseudo-inertia
        (..., bodies), kg m^2): valid when the mass is >= 0 and the pseudo-inertia is positive
        semi-definite (equivalently: the principal moments about the centre of mass are >= 0
        and obey the triangle inequality, and a massless body has no first moment).
    """
    xp = namespace(pi)
    pi = pi if xp is not np else np.asarray(pi, dtype=float)
    J = pseudo_inertia(pi)
    smallest = xp.linalg.eigvalsh(J)[..., 0]
    scale = J[..., 0, 0] + J[..., 1, 1] + J[..., 2, 2] + J[..., 3, 3]
    valid = (pi[..., 0] >= 0) & (smallest >= -tolerance * xp.abs(scale))
    return valid, smallest


def describe_violation(pi_body, smallest: float) -> str:
    """Why one body's parameters (10,) are not physical, in words."""
    m = float(pi_body[0])
    if m < 0:
        return f"negative mass {m:.6g} kg"
    _, _, I_c = inertia_from_parameters(np.asarray(pi_body, dtype=float))
    moments = np.linalg.eigvalsh(I_c)
    if m == 0 and np.any(np.asarray(pi_body[1:4]) != 0):
        return "a first moment m*c without mass"
    return (f"pseudo-inertia not positive semi-definite (smallest eigenvalue {smallest:.3g}; "
            f"principal moments about the centre of mass {np.round(moments, 12).tolist()} must "
            "be >= 0 and obey the triangle inequality)")


def _skew(stack, c):
    zero = 0.0 * c[0]
    return stack([stack([zero, -c[2], c[1]]), stack([c[2], zero, -c[0]]),
                  stack([-c[1], c[0], zero])])
