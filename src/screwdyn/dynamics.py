"""The public algorithms: each one a kernel written once on the recursions, run by the plan.

Every function takes arrays with leading batch dimensions, ``q`` (..., nq) and ``qd``, ``qdd``,
``tau`` (..., nv), which broadcast against each other, and returns arrays with the same batch
dimensions. numpy in, numpy out (float64); a JAX array anywhere in, JAX arrays out. How a call
runs (machine code compiled from the recursion, numpy, or JAX) is decided in one place,
``screwdyn.execution.plan``; ``screwdyn.plan(model, "inverse_dynamics").explain()`` tells.

``algebra`` selects the algebra the recursion runs in: ``"spatial"`` (6-D spatial vectors, the
default), ``"cga"`` (conformal geometric algebra), ``"dq"`` (dual quaternions) or ``"vector"`` (the
classical Newton-Euler recursion on Denavit-Hartenberg frames, for models made by ``from_dh``).

External wrenches ``f_ext`` have shape (..., nlinks, 6): for each link, in ``model.link_names``
order, the wrench [force; torque] that the environment applies to the link, expressed in the
link's frame, the torque taken about the link's origin (Pinocchio's local convention).

Each kernel below takes a ``Call`` (the inputs in the internal layout: components first, one
trailing batch axis; see ``screwdyn.execution.call``) and returns its result in that layout.
"""
import numpy as np

from .algorithms import aba as _aba
from .algorithms import crba as _crba
from .algorithms import kinematics as _kin
from .algorithms import rnea as _rnea
from .execution import plan as _plan
from .execution.call import GRAVITY  # noqa: F401  (re-exported: the default gravity)
from .execution.plan import Function


# -- kernels ----------------------------------------------------------------------------------
def _forward_kinematics(call):
    alg, model = call.alg, call.model
    T = _kin.link_poses(alg, model, _kin.world_poses(alg, model,
                                                     _kin.joint_poses(alg, model, call["q"])))
    zero = call.xp.zeros(call.N)  # broadcasts links welded to the world over the batch
    mats = [alg.to_matrix(T_l) + zero for T_l in T]
    return call.xp.stack(mats) if mats else call.xp.zeros((0, 4, 4, call.N))


def _newton_euler(call, qd, qdd):
    if call.alg is None:
        from .algorithms.newton_euler_dh import newton_euler_dh

        return newton_euler_dh(call, qd, qdd)
    return _rnea.rnea(call.alg, call.model, call["q"], qd, qdd, call.gravity_twist(),
                      call.body_wrenches())


def _inverse_dynamics(call):
    return _newton_euler(call, call["qd"], call["qdd"])


def _bias_forces(call):
    return _newton_euler(call, call["qd"], call.xp.zeros_like(call["qd"]))


def _gravity_torques(call):
    zero = call.xp.zeros((call.model.nv, call.N))
    return _newton_euler(call, zero, zero)


def _forward_dynamics(call):
    if call.alg is None:
        from .algorithms.newton_euler_dh import forward_dynamics_dh

        return forward_dynamics_dh(call)
    return _aba.aba(call.alg, call.model, call["q"], call["qd"], call["tau"],
                    call.gravity_twist(), call.body_wrenches())


def _mass_matrix(call):
    if call.alg is None:
        from .algorithms.newton_euler_dh import mass_matrix_dh

        return mass_matrix_dh(call)
    return _crba.crba(call.alg, call.model, call["q"])


def _coriolis_matrix(call):
    from .algorithms.coriolis import coriolis

    return coriolis(call.alg, call.model, call["q"], call["qd"])


def _kinetic_energy(call):
    from .algorithms.energy import kinetic

    return kinetic(call.alg, call.model, call["q"], call["qd"])


def _potential_energy(call):
    from .algorithms.energy import center_of_mass_moment

    g = call.arrays.get("gravity", np.array(GRAVITY)[:, None])
    return -(g * center_of_mass_moment(call.alg, call.model, call["q"])).sum(axis=0)


def _center_of_mass(call):
    from .algorithms.energy import center_of_mass_moment

    return center_of_mass_moment(call.alg, call.model, call["q"]) / call.model.total_mass


def _jacobian(call, link, frame):
    from .algorithms.jacobian import link_jacobian

    return link_jacobian(call.alg, call.model, call["q"], link, frame)


def _nv(model):
    return (model.nv,)


def _nv_nv(model):
    return (model.nv, model.nv)


_EXTERNAL = ("f_ext", "gravity")
#: the public functions as the plan runs them, by name
FUNCTIONS = {f.name: f for f in (
    Function("forward_kinematics", _forward_kinematics, ("q",),
             lambda m: (m.nlinks, 4, 4)),
    Function("inverse_dynamics", _inverse_dynamics, ("q", "qd", "qdd"), _nv, _EXTERNAL,
             entries=True, bytes_per_body=256),
    Function("bias_forces", _bias_forces, ("q", "qd"), _nv, ("gravity",), entries=True,
             bytes_per_body=256),
    Function("gravity_torques", _gravity_torques, ("q",), _nv, ("gravity",), entries=True,
             bytes_per_body=256),
    Function("forward_dynamics", _forward_dynamics, ("q", "qd", "tau"), _nv, _EXTERNAL,
             entries=True, check=_aba.check_defined, bytes_per_body=512),
    Function("mass_matrix", _mass_matrix, ("q",), _nv_nv, entries=True, many_outputs=True,
             bytes_per_body=384),
    Function("coriolis_matrix", _coriolis_matrix, ("q", "qd"), _nv_nv, many_outputs=True),
    Function("kinetic_energy", _kinetic_energy, ("q", "qd"), lambda m: ()),
    Function("potential_energy", _potential_energy, ("q",), lambda m: (), ("gravity",)),
    Function("center_of_mass", _center_of_mass, ("q",), lambda m: (3,)),
    Function("jacobian", _jacobian, ("q",), lambda m, link, frame: (6, m.nv)),
    # d tau / d(q, qd, qdd): (nv, nq + 2 nv), native only (screwdyn.derivatives)
    Function("inverse_dynamics_derivatives", _inverse_dynamics, ("q", "qd", "qdd"),
             lambda m: (m.nv, m.nq + 2 * m.nv), ("gravity",), entries=True,
             jacobian=("q", "qd", "qdd")),
)}
_FK, _ID, _BIAS, _GRAV, _FD, _M, _C, _T, _V, _COM, _J, _DID = FUNCTIONS.values()


# -- the public functions ---------------------------------------------------------------------
def forward_kinematics(model, q, algebra="spatial"):
    """World poses of every link, (..., nlinks, 4, 4), in ``model.link_names`` order (composed
    as the algebra's poses: rotation matrices, motors or unit dual quaternions)."""
    if algebra == "vector":
        algebra = "spatial"  # DH frames are the model's link frames: one composition of poses
    return _plan.run(_FK, model, algebra, (q,))


def inverse_dynamics(model, q, qd, qdd, f_ext=None, gravity=None, algebra="spatial"):
    """Joint forces tau (..., nv) that produce accelerations qdd: M(q) qdd + b(q, qd) - J^T f_ext,
    plus armature * qdd and damping * qd when the model has them (RNEA, O(n))."""
    return _plan.run(_ID, model, algebra, (q, qd, qdd), (f_ext, gravity))


def forward_dynamics(model, q, qd, tau, f_ext=None, gravity=None, algebra="spatial"):
    """Joint accelerations qdd (..., nv) under joint forces tau (articulated-body algorithm,
    O(n); ``algebra="vector"`` solves M qdd = tau - b with the DH recursion instead)."""
    return _plan.run(_FD, model, algebra, (q, qd, tau), (f_ext, gravity))


def mass_matrix(model, q, algebra="spatial"):
    """Joint-space inertia matrix M(q) (..., nv, nv), symmetric positive definite (CRBA)."""
    return _plan.run(_M, model, algebra, (q,))


def bias_forces(model, q, qd, gravity=None, algebra="spatial"):
    """b(q, qd) = C(q, qd) qd + g(q) (+ damping * qd): inverse dynamics at zero acceleration."""
    return _plan.run(_BIAS, model, algebra, (q, qd), (gravity,))


def gravity_torques(model, q, gravity=None, algebra="spatial"):
    """g(q): the joint forces that hold the robot still against gravity."""
    return _plan.run(_GRAV, model, algebra, (q,), (gravity,))


def coriolis_matrix(model, q, qd):
    """C(q, qd) (..., nv, nv) with C qd = b - g and dM/dt - 2C skew-symmetric."""
    return _plan.run(_C, model, "spatial", (q, qd))


def kinetic_energy(model, q, qd):
    """T = qd^T M(q) qd / 2, summed over bodies as v_i . I_i v_i / 2 (armature included)."""
    return _plan.run(_T, model, "spatial", (q, qd))


def potential_energy(model, q, gravity=None):
    """V = -sum_i m_i g . c_i, zero when every centre of mass is at the world origin's height."""
    return _plan.run(_V, model, "spatial", (q,), (gravity,))


def center_of_mass(model, q):
    """The robot's centre of mass in the world frame (..., 3)."""
    return _plan.run(_COM, model, "spatial", (q,))


def jacobian(model, q, link, frame="world", algebra="spatial"):
    """The link's Jacobian (..., 6, nv), rows [linear; angular]: the velocity of the link origin
    and the link's angular velocity, in world axes (``frame="world"``) or link axes
    (``"local"``)."""
    if frame not in ("world", "local"):
        raise ValueError(f"frame must be 'world' or 'local', got {frame!r}")
    algebra = "spatial" if algebra == "vector" else algebra
    return _plan.run(_J, model, algebra, (q,), static=(model.link_index(link), frame))


def plan(model, function, algebra="spatial", inputs="numpy", gravity=False, f_ext=False,
         backend=None):
    """How a call of the public function ``function`` (a name, e.g. ``"forward_dynamics"``)
    runs for ``model`` in ``algebra`` with ``inputs`` ("numpy" or "jax"), with or without the
    optional ``gravity`` and ``f_ext`` arrays: a ``screwdyn.execution.plan.Plan``, whose
    ``explain()`` says which path, why, and what compiling costs, and whose ``compile()``
    compiles the native program ahead of the first call. ``backend``: JAX's platform (default:
    ``jax.default_backend()``)."""
    if function not in FUNCTIONS:
        raise ValueError(f"unknown function {function!r}; valid: {', '.join(FUNCTIONS)}")
    if inputs not in ("numpy", "jax"):
        raise ValueError(f"inputs must be 'numpy' or 'jax', got {inputs!r}")
    f = FUNCTIONS[function]
    options = tuple(name for name, given in (("f_ext", f_ext), ("gravity", gravity)) if given)
    unknown = [name for name in options if name not in f.options]
    if unknown:
        raise ValueError(f"{function} takes no {unknown[0]}")
    return _plan.Plan(f, model, algebra, inputs, options, backend, False, ())


def _Call(model, algebra="spatial", entries=False, many_outputs=False, **arrays):
    """The inputs ``arrays`` of a call on ``model`` in the internal layout, with the algebra a
    recursion runs in (its entries mode for ``entries``): ``screwdyn.execution.plan.call``."""
    return _plan.call(model, algebra, arrays, entries, many_outputs)
