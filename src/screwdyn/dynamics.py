"""The public algorithms: shape checks, batching, backend and algebra dispatch.

Every function takes arrays with leading batch dimensions, ``q`` (..., nq) and ``qd``, ``qdd``,
``tau`` (..., nv), which broadcast against each other, and returns arrays with the same batch
dimensions. numpy in, numpy out (float64); a JAX array anywhere in, JAX arrays out.

``algebra`` selects the algebra the recursion runs in: ``"spatial"`` (6-D spatial vectors, the
default), ``"cga"`` (conformal geometric algebra), ``"dq"`` (dual quaternions) or ``"vector"`` (the
classical Newton-Euler recursion on Denavit-Hartenberg frames, for models made by ``from_dh``).

External wrenches ``f_ext`` have shape (..., nlinks, 6): for each link, in ``model.link_names``
order, the wrench [force; torque] that the environment applies to the link, expressed in the
link's frame, the torque taken about the link's origin (Pinocchio's local convention).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
from typing import TYPE_CHECKING, Iterator, Optional, Union

import numpy as np

from . import _backend
from .algebra import ALGEBRAS, get_algebra, link_placements
from .algorithms import aba as _aba
from .algorithms import crba as _crba
from .algorithms import kinematics as _kin
from .algorithms import rnea as _rnea
from .model.model import GRAVITY  # noqa: F401  (the default of Model.gravity)
from .typing import AlgebraName, Array, ArrayLike

if TYPE_CHECKING:
    from .model import Model

CHECKPOINT_BODIES = 12  # JAX: trees with more bodies compile in per-body pieces (entries mode)


_CUT_PER_BODY = contextvars.ContextVar("screwdyn_cut_per_body", default=False)


@contextlib.contextmanager
def cut_per_body() -> Iterator[None]:
    """Programs traced inside are cut at every body (``EntriesMode.checkpoint``) whatever the
    tree's size. For bodies of XLA while loops (simulation rollouts): there, uncut single-state
    programs ran 4 to 45 times slower in some algebras (Puma RK4: spatial 0.65 s per simulated
    second, dual quaternions 2.2 s), cut ones 0.03 to 0.05 s in every algebra."""
    token = _CUT_PER_BODY.set(True)
    try:
        yield
    finally:
        _CUT_PER_BODY.reset(token)


def _checkpoints(model, xp, many_outputs):
    """Whether an XLA program is cut at every body (``EntriesMode.checkpoint``): for trees of more
    than CHECKPOINT_BODIES bodies, whose compile and run time would grow as n^2, and on
    accelerators for results with many outputs per state (the mass matrix: XLA's GPU fusions
    would recompute the composite inertias for each of its nv^2 entries; the cuts made it 11x
    faster on an H200, and did not help on CPU)."""
    if xp is np:
        return False
    if model.nbodies > CHECKPOINT_BODIES or _CUT_PER_BODY.get():
        return True
    import jax

    return many_outputs and jax.default_backend() != "cpu"


class _Call:
    """Inputs of one public call in the internal layout: (n, N) arrays and the batch shape.

    ``entries=True`` runs the algebra in its entries mode (``algebra.entries.EntriesMode``:
    twists, wrenches and inertias as lists of components, faster on numpy and much faster under
    XLA); only for recursions that do nothing but linear arithmetic on algebra objects (RNEA,
    ABA, CRBA). For a coupled model (mimic joints tied to their sources) the inputs are
    expanded to the whole tree (``model.tree``, on which the recursions run) and ``reduce``
    brings the tree's results back (``model.coupling``)."""

    def __init__(self, model, algebra="spatial", entries=False, many_outputs=False, **arrays):
        self.user_model = model
        specs = {"q": (model.nq, "configuration, nq"), "qd": (model.nv, "velocity, nv"),
                 "qdd": (model.nv, "acceleration, nv"), "tau": (model.nv, "joint forces, nv"),
                 "gravity": (3, "gravity vector in the world frame"),
                 "f_ext": ((model.nlinks, 6), "one [force; torque] wrench per link, nlinks x 6")}
        given = {k: v for k, v in arrays.items() if v is not None}
        self.xp = xp = _backend.namespace(*given.values(), model.traced_parameters)
        self.algebra_name = algebra
        if algebra not in ALGEBRAS:
            raise ValueError(f"unknown algebra {algebra!r}; valid: "
                             + ", ".join(repr(a) for a in ALGEBRAS))
        parsed, cores = {}, []
        for name, value in given.items():
            size, meaning = specs[name]
            a = _backend.as_float_array(value, xp, name)
            shape = size if isinstance(size, tuple) else (size,)
            if a.ndim < len(shape) or tuple(a.shape[a.ndim - len(shape):]) != shape:
                raise ValueError(f"{name} must have shape (..., {', '.join(map(str, shape))}) "
                                 f"({meaning}), got shape {tuple(a.shape)}")
            parsed[name] = (a, shape)
            cores.append((name, a, len(shape)))
        self.batch = _backend.broadcast_batch(cores)
        self.N = int(np.prod(self.batch, dtype=int))
        self.arrays = {}
        for name, (a, shape) in parsed.items():
            if name == "gravity" and a.ndim == 1:
                self.arrays[name] = a[:, None]  # one gravity for the whole batch
                continue
            a = xp.broadcast_to(a, self.batch + shape).reshape((self.N,) + shape)
            a = xp.moveaxis(a, 0, -1)
            self.arrays[name] = np.ascontiguousarray(a) if xp is np else a  # rows contiguous
        self.model = model.tree
        self.coupling = model.coupling
        if self.coupling is not None:
            q_index, q_scale, q_offset, G = self.coupling
            if "q" in self.arrays:
                self.arrays["q"] = (self.arrays["q"][q_index] * q_scale[:, None]
                                    + q_offset[:, None])
            for name in ("qd", "qdd"):
                if name in self.arrays:
                    self.arrays[name] = xp.tensordot(G, self.arrays[name], axes=1)
        self.alg = None if algebra == "vector" else get_algebra(algebra, xp)
        if entries and hasattr(self.alg, "entries_mode"):
            self.alg = self.alg.entries_mode(checkpoints=_checkpoints(self.model, xp,
                                                                      many_outputs))

    def reduce(self, result, axes=1):
        """A tree result (tree nv, ..., N) with ``axes`` leading velocity axes brought to the
        model's v (G^T tau, G^T M G); itself when the model is not coupled."""
        if self.coupling is None:
            return result
        G = self.coupling[3]
        result = self.xp.tensordot(G.T, result, axes=1)
        if axes == 2:
            result = self.xp.moveaxis(self.xp.tensordot(G.T, self.xp.moveaxis(result, 1, 0),
                                                        axes=1), 0, 1)
        return result

    def __getitem__(self, name):
        return self.arrays[name]

    def gravity_twist(self):
        """a0 = -g, the base acceleration that stands for gravity, as an algebra twist."""
        g = self.arrays.get("gravity")
        g = np.array(self.model.gravity)[:, None] if g is None else g
        return self.alg.twist(self.xp.concatenate([-g, 0 * g]))

    def body_wrenches(self):
        """External link wrenches gathered on bodies, in body frames (None if none given)."""
        if "f_ext" not in self.arrays:
            return None
        alg, model = self.alg, self.model
        F = self.arrays["f_ext"]  # (nlinks, 6, N)
        out = [0.0 * alg.wrench(F[0])] * model.nbodies
        for l, (link, placement) in enumerate(zip(model.links, link_placements(alg, model))):
            if link.body >= 0:
                out[link.body] = out[link.body] + alg.act_wrench(placement, alg.wrench(F[l]))
        return out

    def vector(self, result):
        """(n, N) -> (..., n)"""
        return self.xp.moveaxis(result, -1, 0).reshape(self.batch + result.shape[:-1])

    matrix = vector


# -- chunked numpy evaluation -------------------------------------------------------------------
CHUNK_STATES = None  # states per chunk of a numpy batch; None: chosen from the model's size
_BATCH_ARGS = {"q": 1, "qd": 1, "qdd": 1, "tau": 1, "gravity": 1, "f_ext": 2}  # name: core ndim


# bytes of intermediates per state and body in the spatial algebra, measured with tracemalloc
# (Panda and a 100-link chain; dual quaternions stay within these, CGA takes 1.4 to 1.7 times as
# much: beyond glibc's trim threshold, a 100-link chain in CGA ran 2.8x slower)
_BYTES_PER_BODY = {"inverse_dynamics": 256, "forward_dynamics": 512, "mass_matrix": 384}
_ALGEBRA_FACTOR = {"cga": 1.75}


def chunk_size(model: Model, function: str = "forward_dynamics", algebra: str = "spatial") -> int:
    """States per chunk when ``function`` (a public function's name) evaluates a numpy batch:
    about 256 MiB of intermediates, at least 2048 and at most 32768 states (``CHUNK_STATES``
    overrides). Larger chunks amortise Python's per-operation overhead (about a microsecond),
    smaller ones stay in cache and bound memory: a million states cost one chunk of
    intermediates plus the result."""
    if CHUNK_STATES:
        return max(1, int(CHUNK_STATES))
    per_state = (_BYTES_PER_BODY.get(function, 512) * _ALGEBRA_FACTOR.get(algebra, 1.0)
                 * max(model.nbodies, 1))
    if function in ("mass_matrix", "coriolis_matrix"):
        per_state += 16 * model.nv ** 2  # the entries of the nv x nv result
    return int(min(32768, max(2048, (256 << 20) // int(per_state))))


def _chunked(function):
    """Evaluate a numpy batch larger than ``chunk_size(model)`` chunk by chunk into one result
    array, so that the intermediates of a million states never exist at once. JAX inputs pass
    through unchanged (XLA plans their memory), as do inputs with wrong shapes (the call reports
    them with the user's shapes)."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        model = bound.arguments["model"]
        given = {k: v for k, v in bound.arguments.items() if k in _BATCH_ARGS and v is not None}
        if any(_backend._is_jax(v) for v in given.values()) or model.parameters is not None:
            return function(*args, **kwargs)
        expected = {"q": (model.nq,), "qd": (model.nv,), "qdd": (model.nv,), "tau": (model.nv,),
                    "gravity": (3,), "f_ext": (model.nlinks, 6)}
        arrays = {k: np.asarray(v) for k, v in given.items()}
        if any(a.ndim < len(expected[k]) or a.shape[a.ndim - len(expected[k]):] != expected[k]
               for k, a in arrays.items()):
            return function(*args, **kwargs)
        try:
            batch = np.broadcast_shapes(*(a.shape[:a.ndim - _BATCH_ARGS[k]]
                                          for k, a in arrays.items()))
        except ValueError:
            return function(*args, **kwargs)
        N = int(np.prod(batch, dtype=int))
        if N >= 256:
            _backend.tune_allocator()
        size = chunk_size(model, function.__name__, bound.arguments.get("algebra", "spatial"))
        if N <= size:
            return function(*args, **kwargs)
        flat = {}
        for k, a in arrays.items():
            core = a.shape[a.ndim - _BATCH_ARGS[k]:]
            flat[k] = a if a.ndim == len(core) else \
                np.broadcast_to(a, batch + core).reshape((N,) + core)
        out = None
        for start in range(0, N, size):
            for k, a in flat.items():
                bound.arguments[k] = a if a.ndim == _BATCH_ARGS[k] else a[start:start + size]
            result = np.asarray(function(*bound.args, **bound.kwargs))
            if out is None:
                out = np.empty((N,) + result.shape[1:], dtype=result.dtype)
            out[start:start + size] = result
        return out.reshape(batch + out.shape[1:])

    return wrapper


@_chunked
def forward_kinematics(model: Model, q: ArrayLike, algebra: AlgebraName = "spatial") -> Array:
    """World poses of every link, in ``model.link_names`` order.

    Composed as the algebra's poses (rotation matrices, motors or unit dual quaternions) and
    returned as homogeneous matrices.

    Args:
        model: the robot.
        q: configuration (..., nq): joint angles (rad) and displacements (m); a free joint takes
            (x, y, z, qx, qy, qz, qw) (Pinocchio's layout).
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` (``"vector"``: as ``"spatial"``).

    Returns:
        (..., nlinks, 4, 4): T such that p_world = T[l] @ p_link for a point given in link l's
        frame (metres).

    Example:
        ```python
        import screwdyn as sd

        panda = sd.robots.load("panda")
        T = sd.forward_kinematics(panda, panda.neutral)
        print(T[panda.link_index("panda_hand"), :3, 3])   # the hand's origin in the world, m
        ```
    """
    if algebra == "vector":
        algebra = "spatial"  # DH frames are the model's link frames: one composition of poses
    call = _Call(model, algebra, q=q)
    alg, tree = call.alg, call.model
    T = _kin.link_poses(alg, tree, _kin.world_poses(alg, tree, _kin.joint_poses(alg, tree,
                                                                                 call["q"])))
    zero = call.xp.zeros(call.N)  # broadcasts links welded to the world over the batch
    mats = [alg.to_matrix(T_l) + zero for T_l in T]
    return call.matrix(call.xp.stack(mats)) if mats else call.xp.zeros(call.batch + (0, 4, 4))


@_chunked
def inverse_dynamics(model: Model, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike,
                     f_ext: Optional[ArrayLike] = None, gravity: Optional[ArrayLike] = None,
                     algebra: AlgebraName = "spatial") -> Array:
    """Joint forces that produce the accelerations ``qdd``: the recursive Newton-Euler
    algorithm, O(n).

    tau = M(q) qdd + b(q, qd) - J(q)^T f_ext, plus the joints' own forces when the model has
    them (armature * qdd, damping * qd, Coulomb friction).

    Args:
        model: the robot.
        q: configuration (..., nq) (rad, m; a free joint: position and quaternion xyzw).
        qd: joint velocities (..., nv) (rad/s, m/s; a free joint: linear and angular velocity of
            the base in the base frame).
        qdd: joint accelerations (..., nv) (rad/s^2, m/s^2).
        f_ext: external wrenches (..., nlinks, 6), one per link in ``model.link_names`` order:
            [force (N); torque (N m) about the link origin], in the link frame. Default none.
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: the algebra the recursion runs in: ``"spatial"`` (default), ``"cga"``,
            ``"dq"``, or ``"vector"`` (Corke's DH recursion, for models made by ``from_dh``).

    Returns:
        tau (..., nv): joint torques (N m) and forces (N); the batch dimensions of the inputs,
        broadcast. numpy in, numpy out; a JAX array in, a JAX array out.

    Example:
        ```python
        import numpy as np
        import screwdyn as sd

        puma = sd.robots.load("puma560")
        tau = sd.inverse_dynamics(puma, np.zeros(6), np.zeros(6), np.zeros(6))  # = gravity
        taus = sd.inverse_dynamics(puma, np.random.default_rng(0).normal(size=(100, 6)),
                                   np.zeros(6), np.zeros(6))                   # (100, 6)
        ```
    """
    call = _Call(model, algebra, entries=True, q=q, qd=qd, qdd=qdd, f_ext=f_ext, gravity=gravity)
    return call.vector(call.reduce(_tree_inverse_dynamics(call, call["qd"], call["qdd"])))


def _tree_inverse_dynamics(call, qd, qdd):
    """RNEA (or the DH recursion) on the call's tree: (tree nv, N)."""
    if call.algebra_name == "vector":
        from .algorithms.newton_euler_dh import newton_euler_dh

        return newton_euler_dh(call, qd, qdd)
    if call.algebra_name == "dq":  # the paper's Newton-Euler at the centres of mass
        from .algorithms.dq_newton_euler import inverse_dynamics as newton_euler_com

        return newton_euler_com(call.alg, call.model, call["q"], qd, qdd, call.gravity_twist(),
                                call.body_wrenches())
    return _rnea.rnea(call.alg, call.model, call["q"], qd, qdd, call.gravity_twist(),
                      call.body_wrenches())


@_chunked
def forward_dynamics(model: Model, q: ArrayLike, qd: ArrayLike, tau: ArrayLike,
                     f_ext: Optional[ArrayLike] = None, gravity: Optional[ArrayLike] = None,
                     algebra: AlgebraName = "spatial") -> Array:
    """Joint accelerations under the joint forces ``tau``: the articulated-body algorithm,
    O(n).

    Solves M(q) qdd = tau - b(q, qd) + J(q)^T f_ext (``algebra="vector"`` and coupled models
    solve it with the mass matrix instead). ``ModelError`` when a moving subtree has no mass
    (the mass matrix is singular).

    Args:
        model: the robot.
        q: configuration (..., nq) (rad, m; a free joint: position and quaternion xyzw).
        qd: joint velocities (..., nv) (rad/s, m/s).
        tau: joint torques (N m) and forces (N) (..., nv).
        f_ext: external wrenches (..., nlinks, 6), [force; torque about the link origin] in
            each link's frame. Default none.
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.

    Returns:
        qdd (..., nv): joint accelerations (rad/s^2, m/s^2).

    Example:
        ```python
        import numpy as np
        import screwdyn as sd

        panda = sd.robots.load("panda")
        qdd = sd.forward_dynamics(panda, panda.neutral, np.zeros(9), np.zeros(9))  # it falls
        ```
    """
    _aba.check_defined(model.tree.nominal)
    call = _Call(model, algebra, entries=True, q=q, qd=qd, tau=tau, f_ext=f_ext, gravity=gravity)
    if call.coupling is not None:  # M qdd = tau - b in the model's (reduced) coordinates
        b = call.reduce(_tree_inverse_dynamics(call, call["qd"], 0 * call["qd"]))
        M = call.reduce(_crba.crba(call.alg, call.model, call["q"]), axes=2)
        return call.vector(_solve(call.xp, M, call["tau"] - b))
    if algebra == "vector":
        from .algorithms.newton_euler_dh import forward_dynamics_dh

        return call.vector(forward_dynamics_dh(call))
    qdd = _aba.aba(call.alg, call.model, call["q"], call["qd"], call["tau"], call.gravity_twist(),
                   call.body_wrenches())
    return call.vector(qdd)


def _solve(xp, M, rhs):
    """x (n, N) with M x = rhs for M (n, n, N)."""
    x = xp.linalg.solve(xp.moveaxis(M, -1, 0), xp.moveaxis(rhs, -1, 0)[..., None])[..., 0]
    return xp.moveaxis(x, 0, -1)


@_chunked
def mass_matrix(model: Model, q: ArrayLike, algebra: AlgebraName = "spatial") -> Array:
    """The joint-space inertia matrix M(q): the composite-rigid-body algorithm.

    Args:
        model: the robot.
        q: configuration (..., nq).
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.

    Returns:
        M (..., nv, nv), symmetric positive definite (kg m^2, kg, kg m); armature on the
        diagonal when the model has it. Kinetic energy is qd^T M qd / 2.
    """
    call = _Call(model, algebra, entries=True, many_outputs=True, q=q)
    if algebra == "vector":
        from .algorithms.newton_euler_dh import mass_matrix_dh

        return call.matrix(call.reduce(mass_matrix_dh(call), axes=2))
    return call.matrix(call.reduce(_crba.crba(call.alg, call.model, call["q"]), axes=2))


def bias_forces(model: Model, q: ArrayLike, qd: ArrayLike, gravity: Optional[ArrayLike] = None,
                algebra: AlgebraName = "spatial") -> Array:
    """b(q, qd) = C(q, qd) qd + g(q) (+ joint friction): inverse dynamics at zero acceleration.

    Args:
        model: the robot.
        q: configuration (..., nq).
        qd: joint velocities (..., nv).
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.

    Returns:
        b (..., nv): N m and N.
    """
    qd_arr = _backend.as_float_array(qd, _backend.namespace(q, qd), "qd")
    return inverse_dynamics(model, q, qd, 0 * qd_arr, gravity=gravity, algebra=algebra)


def gravity_torques(model: Model, q: ArrayLike, gravity: Optional[ArrayLike] = None,
                    algebra: AlgebraName = "spatial") -> Array:
    """g(q): the joint forces that hold the robot still against gravity.

    Args:
        model: the robot.
        q: configuration (..., nq).
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` or ``"vector"``.

    Returns:
        g (..., nv): N m and N; for 1-DoF joints, the gradient of ``potential_energy``.
    """
    xp = _backend.namespace(q)
    zero = xp.zeros(model.nv)
    return inverse_dynamics(model, q, zero, zero, gravity=gravity, algebra=algebra)


def _kinematic_algebra(algebra):
    """Kinematic quantities of algebra="vector" (DH frames, which are the model's link frames)
    are composed in the spatial algebra, as ``forward_kinematics`` does."""
    return "spatial" if algebra == "vector" else algebra


@_chunked
def coriolis_matrix(model: Model, q: ArrayLike, qd: ArrayLike,
                    algebra: AlgebraName = "spatial") -> Array:
    """The Coriolis and centrifugal matrix C(q, qd) (the one Pinocchio computes).

    Args:
        model: the robot.
        q: configuration (..., nq).
        qd: joint velocities (..., nv).
        algebra: the algebra the recursion runs in (``"vector"``: spatial).

    Returns:
        C (..., nv, nv) with C qd = b - g and dM/dt - 2C skew-symmetric.
    """
    from .algorithms.coriolis import coriolis

    call = _Call(model, _kinematic_algebra(algebra), q=q, qd=qd)
    return call.matrix(call.reduce(coriolis(call.alg, call.model, call["q"], call["qd"]),
                                   axes=2))


@_chunked
def kinetic_energy(model: Model, q: ArrayLike, qd: ArrayLike,
                   algebra: AlgebraName = "spatial") -> Array:
    """Kinetic energy T = qd^T M(q) qd / 2, summed over bodies as v_i . I_i v_i / 2 (armature
    included).

    Args:
        model: the robot.
        q: configuration (..., nq).
        qd: joint velocities (..., nv).
        algebra: the algebra the recursion runs in (``"vector"``: spatial).

    Returns:
        T (...): joules.
    """
    from .algorithms.energy import kinetic

    call = _Call(model, _kinematic_algebra(algebra), q=q, qd=qd)
    return call.vector(kinetic(call.alg, call.model, call["q"], call["qd"])[None])[..., 0]


@_chunked
def potential_energy(model: Model, q: ArrayLike, gravity: Optional[ArrayLike] = None,
                     algebra: AlgebraName = "spatial") -> Array:
    """Gravitational potential energy V = -sum_i m_i g . c_i, zero when every centre of mass is
    at the world origin's height.

    Args:
        model: the robot.
        q: configuration (..., nq).
        gravity: gravity (..., 3) in the world frame (m/s^2); default ``model.gravity``.
        algebra: the algebra the recursion runs in (``"vector"``: spatial).

    Returns:
        V (...): joules.
    """
    from .algorithms.energy import center_of_mass_moment

    call = _Call(model, _kinematic_algebra(algebra), q=q, gravity=gravity)
    g = call.arrays.get("gravity", np.array(model.gravity)[:, None])
    moment = center_of_mass_moment(call.alg, call.model, call["q"])  # sum m_i c_i (3, N)
    return call.vector(-(g * moment).sum(axis=0)[None])[..., 0]


@_chunked
def center_of_mass(model: Model, q: ArrayLike) -> Array:
    """The robot's centre of mass, in the world frame.

    Args:
        model: the robot.
        q: configuration (..., nq).

    Returns:
        c (..., 3): metres, world frame (the moving bodies' masses; links welded to the world
        are not included).
    """
    from .algorithms.energy import center_of_mass_moment

    call = _Call(model, q=q)
    return call.vector(center_of_mass_moment(call.alg, call.model, call["q"]) / model.total_mass)


@_chunked
def jacobian(model: Model, q: ArrayLike, link: Union[str, int], frame: str = "world",
             algebra: AlgebraName = "spatial") -> Array:
    """The link's Jacobian: its velocity per unit rate of each velocity coordinate.

    Args:
        model: the robot.
        q: configuration (..., nq).
        link: the link's name or index (``model.link_names``).
        frame: ``"world"``: the velocity of the link origin and the link's angular velocity in
            world axes; ``"local"``: the same in the link's axes.
        algebra: ``"spatial"`` (default), ``"cga"``, ``"dq"`` (``"vector"``: as ``"spatial"``).

    Returns:
        J (..., 6, nv), rows [linear (m/s); angular (rad/s)]: [v; w] = J @ qd.

    Example:
        ```python
        import screwdyn as sd

        panda = sd.robots.load("panda")
        J = sd.jacobian(panda, panda.neutral, "panda_hand")   # (6, 9)
        ```
    """
    from .algorithms.jacobian import link_jacobian

    if frame not in ("world", "local"):
        raise ValueError(f"frame must be 'world' or 'local', got {frame!r}")
    call = _Call(model, "spatial" if algebra == "vector" else algebra, q=q)
    J = link_jacobian(call.alg, call.model, call["q"], model.link_index(link), frame)
    if call.coupling is not None:
        J = call.xp.moveaxis(call.xp.tensordot(call.coupling[3].T, call.xp.moveaxis(J, 1, 0),
                                               axes=1), 0, 1)
    return call.matrix(J)
