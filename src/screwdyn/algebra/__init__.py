"""The algebras in which screwdyn's recursions run.

An algebra is a small set of operations on its own objects (poses, twists, wrenches, inertias),
the same set for every algebra, so each algorithm in ``screwdyn.algorithms`` is written once:

    pose(R, p), identity(), revolute(axis, angle), prismatic(axis, d),
    translation(p3), rotation(quaternion xyzw)                                    joint motion
    compose(A, B), inverse(X), to_matrix(X)                                        poses
    twist(v6) / twist_vector(V), wrench(f6) / wrench_vector(F)                     public <-> algebra
    act_twist(X, V), inv_act_twist(X, V), act_wrench(X, F), inv_act_wrench(X, F)   change of frame
    cross_motion(V, M), cross_force(V, F), dot(M, F)                               brackets, power
    inertia(m, c, I_c), inertia_apply(I, V), inertia_act(X, I),
    inertia_sub_outer(IA, U, Dinv), inertia_variation(V, I)                        inertias

A pose X is the child frame seen from the parent frame (T_parent_child); ``act`` takes a twist or
wrench from the child frame to the parent frame, ``inv_act`` back. Public 6-vectors are
[linear; angular] twists and [force; torque] wrenches.

Internal layout, shared by all algebras: components first and one trailing batch axis, e.g. a
twist is (6, N) and a joint angle (N,). Model constants have a batch axis of length 1 and broadcast.
This keeps numpy's elementwise work contiguous over the batch; under JAX it is equally natural.
Coordinates of twists, wrenches and inertias are linear, so sums and scalings are plain array ops.
"""
from functools import lru_cache

import numpy as np

from .entries import ZERO, add, components, like, stack

ALGEBRAS = ("spatial", "vector", "cga", "dq")


class Algebra:
    """Base of the algebra modules: holds the array namespace ``xp`` (numpy or jax.numpy)."""

    name = None
    entries_class = None  # the algebra in entries mode (``entries.EntriesMode``), if it has one

    def __init__(self, xp):
        self.xp = xp

    def _stack(self, entries, shape, *inputs):
        """The array of component shape ``shape`` from flat entries (``entries.stack``);
        ``inputs``: the entry lists of the operands, which give the batch when every entry is
        constant. The entries mode returns ``Entries`` for twists, wrenches and inertias."""
        return stack(self.xp, entries, shape, *inputs)

    def inertia_variation(self, V, I):
        """V x* I - I (V x): the rate of change of the inertia I of a body that moves with the
        twist V (Pinocchio's ``Inertia::variation``; both in the same frame), a symmetric 6 x 6
        object of the inertias' kind (massless), for the derivatives of the dynamics. Written
        once on the protocol: in every algebra an inertia is the 6 x 6 matrix of its twists'
        and wrenches' components (``inertia_apply`` is the matrix product), so column c is
        V x* (I e_c) - I (V x e_c) for the unit twist e_c of component c."""
        M, v = components(I, 2), components(V)
        columns = []
        for c in range(6):
            e_c = self._stack([1.0 if k == c else ZERO for k in range(6)], (6,), v, like(V))
            column = self._stack(M[c::6], (6,), M, like(I))
            columns.append(components(self.cross_force(V, column)
                                      - self.inertia_apply(I, self.cross_motion(V, e_c))))
        return self._stack([columns[c][r] for r in range(6) for c in range(6)], (6, 6), M, v,
                           like(I), like(V))

    def _dot_variation(self, V, I):
        """``inertia_variation`` for an algebra whose twist-wrench pairing is the plain dot
        product of components (spatial, CGA): there (V x)^T = -V x*, so with the symmetric I,
        V x* I - I (V x) = A + A^T for A = V x* I: six brackets, no products with I."""
        M = components(I, 2)
        A = [components(self.cross_force(V, self._stack(M[c::6], (6,), M, like(I))))
             for c in range(6)]  # A[c][r]: column c
        return self._stack([add(A[c][r], A[r][c]) for r in range(6) for c in range(6)],
                           (6, 6), M, components(V), like(I), like(V))

    def entries_mode(self, checkpoints=False):
        """The same algebra in entries mode on the same backend (``algebra/entries``), or itself
        if it has none; ``checkpoints``: cut XLA's fusions at every body (``EntriesMode``)."""
        if self.entries_class is None:
            return self
        checkpoints = bool(checkpoints) and self.xp is not np
        return _entries_algebra(self.entries_class, self.xp, checkpoints)


@lru_cache(maxsize=None)
def _entries_algebra(cls, xp, checkpoints):
    return cls(xp, checkpoints)


def _implementations():
    from .spatial import Spatial

    found = {"spatial": Spatial}
    try:
        from .cga import CGA
        found["cga"] = CGA
    except ImportError:
        pass
    try:
        from .dualquat import DualQuaternion
        found["dq"] = DualQuaternion
    except ImportError:
        pass
    return found


@lru_cache(maxsize=None)
def get_algebra(name, xp=np):
    """The algebra ``name`` on backend ``xp``; ``ValueError`` listing the valid names."""
    implementations = _implementations()
    if name not in implementations:
        valid = ", ".join(repr(a) for a in ALGEBRAS if a in implementations or a == "vector")
        raise ValueError(f"unknown algebra {name!r}; valid: {valid}")
    return implementations[name](xp)


def body_constants(algebra, model):
    """Per body: the joint placement (pose), the motion subspace S (list of twists, body frame;
    None for a joint whose S depends on q, see ``algorithms.kinematics.motion_subspaces``) and
    the body inertia, in ``algebra``'s representation. Computed once per model; for a model
    holding traced inertial parameters (``Model.traced_parameters``), the inertias are
    ``parameter_inertia`` of them (computed per call: tracers are never cached)."""
    pi = model.traced_parameters
    if pi is None:
        return _body_constants(algebra, model)
    return tuple((placement, S, parameter_inertia(algebra, pi[i]))
                 for i, (placement, S, _) in enumerate(_body_constants(algebra, model.nominal)))


@lru_cache(maxsize=64)
def _body_constants(algebra, model):
    out = []
    for b in model.bodies:
        placement = algebra.pose(np.reshape(b.rotation, (3, 3)), np.array(b.translation))
        joint = b.joint_model
        S = None if joint.configuration_dependent else [
            algebra.twist(np.asarray(axis, dtype=float)[:, None]) for axis in joint.subspace()]
        inertia = algebra.inertia(b.mass, np.array(b.com), np.reshape(b.inertia, (3, 3)))
        out.append((placement, S, inertia))
    return tuple(out)


@lru_cache(maxsize=None)
def inertia_basis(algebra):
    """The inertias B_0..B_9 of ``algebra`` such that a body of inertial parameters pi (10,)
    (Pinocchio's order: m, m c, I at the origin; ``model.inertial``) has the inertia
    sum_k pi_k B_k: every algebra's inertia is linear in pi. B_0 is the unit point mass at the
    origin; B_1..3 (first moments) and B_4..9 (rotational inertia at the origin) are differences
    of inertias of unit mass (``algebra.inertia(m, c, I_c)``, I_c = I_o - m S(c)^T S(c))."""
    def inertia(c, I_o):
        S = np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])
        return algebra.inertia(1.0, np.asarray(c, dtype=float), I_o - S.T @ S)

    point = inertia(np.zeros(3), np.zeros((3, 3)))
    basis = [point]
    for axis in np.eye(3):
        basis.append(inertia(axis, np.zeros((3, 3))) - point)
    for r, k in ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2)):
        E = np.zeros((3, 3))
        E[r, k] = E[k, r] = 1.0
        basis.append(inertia(np.zeros(3), E) - point)
    return tuple(basis)


def parameter_inertia(algebra, pi):
    """The inertia of ``algebra`` of one body's inertial parameters pi (10,), numpy or traced
    JAX values: sum_k pi_k B_k (``inertia_basis``)."""
    basis = inertia_basis(algebra)
    out = basis[0] * pi[0]  # the algebra object first: it decides what a product is
    for k in range(1, 10):
        out = out + basis[k] * pi[k]
    return out


@lru_cache(maxsize=64)
def link_placements(algebra, model):
    """Per link: its fixed placement in the frame of the body it is welded to."""
    return tuple(algebra.pose(np.reshape(link.rotation, (3, 3)), np.array(link.translation))
                 for link in model.links)
