"""Partial derivatives of inverse and forward dynamics, the counterpart of Pinocchio's
``computeRNEADerivatives`` and ``computeABADerivatives``.

    dtau_dq, dtau_dqd, M = sd.dynamics_derivatives(model, q, qd, qdd=qdd)
    dqdd_dq, dqdd_dqd, Minv = sd.dynamics_derivatives(model, q, qd, tau=tau)

They are analytic: Carpentier and Mansard's recursive derivatives of RNEA in world-frame
quantities, O(n d) for n joints of depth d, and forward dynamics' from them with M^-1 applied
through the tree's sparse factor (``algorithms.derivatives``), one kernel written on the algebra
operations like every public function, run by the plan (machine code for numpy inputs, the same
machine code as a JAX custom call for JAX inputs; numpy or JAX where native code is off). The
derivative with respect to ``q`` is taken in the tangent space, as Pinocchio's: column k is
d/de out(q (+) e_k e) at e = 0 (``screwdyn.integrate``), nv columns for every joint type (for
revolute and prismatic joints, the plain derivative in q).
"""
from typing import TYPE_CHECKING, NamedTuple, Optional

import numpy as np

from . import dynamics
from .execution import plan
from .typing import AlgebraName, Array, ArrayLike

if TYPE_CHECKING:
    from .model import Model


class DynamicsDerivatives(NamedTuple):
    """Jacobians of the output (tau for inverse, qdd for forward dynamics) with respect to the
    inputs, each of shape batch + (nv, nv)."""

    dq: object  # d out / d q      (..., nv, nv), in the tangent space of q
    dqd: object  # d out / d qd    (..., nv, nv)
    du: object  # d out / d qdd (inverse dynamics: M) or d tau (forward dynamics: M^-1)


def dynamics_derivatives(model: "Model", q: ArrayLike, qd: ArrayLike,
                         qdd: Optional[ArrayLike] = None, *, tau: Optional[ArrayLike] = None,
                         f_ext: Optional[ArrayLike] = None, gravity: Optional[ArrayLike] = None,
                         algebra: AlgebraName = "spatial",
                         out: Optional[np.ndarray] = None) -> DynamicsDerivatives:
    """Derivatives of inverse dynamics (pass ``qdd``) or forward dynamics (pass ``tau``).

    Inverse dynamics: d tau/dq, d tau/dqd and d tau/dqdd = M(q). Forward dynamics, as Pinocchio
    does: with qdd = FD(q, qd, tau), differentiating ID(q, qd, qdd) = tau gives
    d qdd/dx = -M^-1 d ID/dx for x = q, qd, and d qdd/d tau = M^-1.

    Args:
        model: the robot.
        q: configuration (..., nq); the derivative in q is taken in its tangent space (nv
            columns: column k is d/de at q (+) e_k e, ``sd.integrate``).
        qd: joint velocities (..., nv).
        qdd: joint accelerations (..., nv), for inverse dynamics' derivatives; or
        tau: joint forces (..., nv), keyword only, for forward dynamics'.
        f_ext: external wrenches (..., nlinks, 6) as in ``inverse_dynamics`` (link frames; they
            move with their links).
        gravity: (..., 3) in the world frame; default ``model.gravity``.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` (``"vector"``: as ``"spatial"``).
        out: optional float64 C-contiguous numpy array (..., nv, 3 nv) to write the result into
            (``dq``, ``dqd``, ``du`` side by side, as ``inverse_dynamics_derivatives``): an
            optimal-control loop that reuses one array per call touches no fresh memory, which
            for a batch is a sizeable part of the time (a batch of 1,000 Talos states: 7.8
            against 11 us per state). numpy inputs only; the fields returned are views of it.

    Returns:
        ``DynamicsDerivatives(dq, dqd, du)``, each (..., nv, nv) for the inputs' batch
        dimensions, broadcast: rows the outputs (tau in N m and N, or qdd), columns the inputs.
        numpy in, numpy out (float64); a JAX array in, JAX arrays out (traceable: jit, vmap and
        differentiation work through it).

    Raises:
        ValueError: neither or both of ``qdd`` and ``tau``, or a shape that is not (..., nq) /
            (..., nv) (named); an ``out`` of another shape, dtype or layout, one that shares
            memory with an input, or ``out`` with JAX inputs.
        ModelError: forward dynamics undefined for the model (a joint moving no mass).

    Example:
        ```python
        import numpy as np
        import screwdyn as sd

        panda = sd.robots.load("panda")
        q, qd = panda.neutral, np.zeros(9)
        d = sd.dynamics_derivatives(panda, q, qd, qdd=np.zeros(9))
        print(d.dq.shape, np.allclose(d.du, sd.mass_matrix(panda, q)))   # (9, 9) True
        ```
    """
    if (qdd is None) == (tau is None):
        raise ValueError("pass exactly one of qdd (inverse dynamics derivatives) and tau "
                         "(forward dynamics derivatives)")
    D = (inverse_dynamics_derivatives(model, q, qd, qdd, f_ext, gravity, algebra, out)
         if tau is None else
         forward_dynamics_derivatives(model, q, qd, tau, f_ext, gravity, algebra, out))
    nv = model.nv
    return DynamicsDerivatives(D[..., :nv], D[..., nv:2 * nv], D[..., 2 * nv:])


_DID = dynamics.FUNCTIONS["inverse_dynamics_derivatives"]
_DFD = dynamics.FUNCTIONS["forward_dynamics_derivatives"]


@plan.public(_DID)
def inverse_dynamics_derivatives(model: "Model", q: ArrayLike, qd: ArrayLike, qdd: ArrayLike,
                                 f_ext: Optional[ArrayLike] = None,
                                 gravity: Optional[ArrayLike] = None,
                                 algebra: AlgebraName = "spatial",
                                 out: Optional[np.ndarray] = None) -> Array:
    """[d tau/dq, d tau/dqd, d tau/dqdd] side by side: (..., nv, 3 nv), the registered form of
    ``dynamics_derivatives(model, q, qd, qdd=qdd)`` (which splits it), for ``sd.plan`` and
    ``sd.compile``. Arguments as ``inverse_dynamics``; d/dq in q's tangent space; ``out`` as
    ``dynamics_derivatives``'.

    Example:
        ```python
        import numpy as np
        import screwdyn as sd

        ur5 = sd.robots.load("ur5")
        f = sd.compile(ur5, "inverse_dynamics_derivatives")
        D = f(ur5.neutral, np.ones(6), np.zeros(6))         # (6, 18)
        print(np.allclose(D[:, 12:], sd.mass_matrix(ur5, ur5.neutral)))   # True
        ```
    """
    return plan.run(_DID, model, plan.kinematic_algebra(algebra), (q, qd, qdd),
                    (f_ext, gravity), out=out)


@plan.public(_DFD)
def forward_dynamics_derivatives(model: "Model", q: ArrayLike, qd: ArrayLike, tau: ArrayLike,
                                 f_ext: Optional[ArrayLike] = None,
                                 gravity: Optional[ArrayLike] = None,
                                 algebra: AlgebraName = "spatial",
                                 out: Optional[np.ndarray] = None) -> Array:
    """[d qdd/dq, d qdd/dqd, d qdd/d tau] side by side: (..., nv, 3 nv) at qdd = FD(q, qd, tau),
    the registered form of ``dynamics_derivatives(model, q, qd, tau=tau)`` (which splits it).
    Arguments as ``forward_dynamics``; d/dq in q's tangent space; ``out`` as
    ``dynamics_derivatives``'; ``ModelError`` where forward dynamics is undefined.

    Example:
        ```python
        import numpy as np
        import screwdyn as sd

        ur5 = sd.robots.load("ur5")
        D = sd.forward_dynamics_derivatives(ur5, ur5.neutral, np.zeros(6), np.zeros(6))
        M = sd.mass_matrix(ur5, ur5.neutral)
        print(np.allclose(D[:, 12:] @ M, np.eye(6)))   # d qdd/d tau = M^-1: True
        ```
    """
    return plan.run(_DFD, model, plan.kinematic_algebra(algebra), (q, qd, tau),
                    (f_ext, gravity), out=out)


__all__ = ["DynamicsDerivatives", "dynamics_derivatives", "inverse_dynamics_derivatives",
           "forward_dynamics_derivatives"]
