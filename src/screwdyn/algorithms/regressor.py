"""The joint-torque regressor Y(q, qd, qdd): tau = Y pi, linear in the inertial parameters.

Atkeson, An and Hollerbach (1986); Featherstone, RBDA section 5.3 run on parameters instead of
inertias. Body i's Newton-Euler wrench is linear in its 10 parameters pi_i (Pinocchio's order,
``model.inertial``)::

    f_i = I_i a_i + v_i x* I_i v_i = A_i pi_i,   A_i[:, k] = B_k a_i + v_i x* B_k v_i

with B_k the algebra's inertia of the k-th unit parameter (``algebra.inertia_basis``). The
forward pass is RNEA's (``rnea.newton_euler_forward``: body twists v_i and twist derivatives
a_i, gravity folded in as a0 = -g). The backward pass is RNEA's too, with a block of columns in
place of each wrench: F_i holds the wrenches of the columns of every body in i's subtree, moved
to frame i; joint i's rows of Y are S_i . F_i, and F_i moved to the parent joins the parent's
block. Column blocks are wrenches whose entries carry a leading column axis (C, N): every
algebra operation acts on them entry by entry, so the same algebra code moves all of a subtree's
columns at once (O(n d) work for n bodies of depth d, as Pinocchio's
``computeJointTorqueRegressor``).

Joint forces of the model itself (armature, damping, Coulomb friction) are not inertial
parameters and are not in Y.
"""
import numpy as np

from ..algebra import inertia_basis
from ..algebra.entries import ZERO, Entries, EntriesMode, value
from .rnea import newton_euler_forward

PARAMETERS = 10  # per body


def stacked_basis(alg):
    """The 10 unit-parameter inertias B_k of ``alg`` (an entries-mode algebra) as one inertia
    whose entries are (10, 1) arrays (ZERO where every B_k vanishes): applied to a twist, it
    gives the 10 columns of A_i at once."""
    if not isinstance(alg, EntriesMode):
        raise TypeError("the regressor runs in an algebra's entries mode (Algebra.entries_mode)")
    basis = inertia_basis(alg)
    entries = []
    for c in range(36):
        column = np.array([float(value(B.e[c])) for B in basis])
        entries.append(ZERO if not column.any() else column[:, None])
    return Entries(alg.xp, entries, (6, 6))


def body_regressor(alg, B, v, a):
    """A_i as a column block: the wrench f = B a + v x* B v with entries (10, N) (``B``:
    ``stacked_basis``; v None: the body is at rest)."""
    f = alg.inertia_apply(B, a)
    if v is not None:
        f = f + alg.cross_force(v, alg.inertia_apply(B, v))
    return f


def regressor(alg, model, q, qd, qdd, a0):
    """Y (nv, 10 nbodies, N) of a model on a fixed base (a0: the base's acceleration minus
    gravity, as in ``rnea.rnea``): tau = sum_c Y[:, c] pi.reshape(-1)[c], joint forces of the
    joints themselves excluded."""
    xp = alg.xp
    X, S, v, a, _ = newton_euler_forward(alg, model, q, qd, qdd, a0)
    B = stacked_basis(alg)
    batch = q.shape[1:]
    n = model.nbodies
    own = [body_regressor(alg, B, v_i, a_i) for v_i, a_i in zip(v, a)]
    below = [[] for _ in range(n)]  # per body: (bodies, moved block) of its children, in order
    rows = [None] * n
    for i in reversed(range(n)):
        bodies = [i] + [b for bodies_c, _ in below[i] for b in bodies_c]
        F = _concatenate(xp, [own[i]] + [block for _, block in below[i]], batch)
        rows[i] = [_row(xp, alg.dot(S_k, F), bodies, n, batch) for S_k in S[i]]
        parent = model.parent[i]
        if parent >= 0:
            below[parent].insert(0, (bodies, alg.act_wrench(X[i], F)))
    rows = [r for body_rows in rows for r in body_rows]
    if not rows:
        return xp.zeros((0, PARAMETERS * n) + batch, dtype=q.dtype)
    return xp.stack(rows)


def _block(xp, entry, columns, batch):
    """One entry of a column block as a (columns,) + batch array."""
    if entry is ZERO:
        return xp.zeros((columns,) + batch)
    return xp.broadcast_to(entry, (columns,) + batch)


def _concatenate(xp, blocks, batch):
    """Column blocks (wrenches of entries (C_b, N)) side by side: one wrench of entries
    (sum C_b, N)."""
    if len(blocks) == 1:
        return blocks[0]
    sizes = [_columns(block) for block in blocks]
    entries = [xp.concatenate([_block(xp, block.e[c], size, batch)
                               for block, size in zip(blocks, sizes)]) for c in range(6)]
    return Entries(xp, entries, (6,))


def _columns(block):
    """The number of columns of a block (every non-ZERO entry has them on its first axis)."""
    for e in block.e:
        if e is not ZERO and getattr(e, "ndim", 0) >= 2:
            return e.shape[0]
    return PARAMETERS  # an all-ZERO block: a body at rest in zero gravity, its own 10 columns


def _row(xp, values, bodies, n, batch):
    """A row of Y (10 n, N) from the values (C, N) of the columns of ``bodies`` (in block
    order), zero elsewhere."""
    columns = PARAMETERS * len(bodies)
    values = _block(xp, values, columns, batch)
    if bodies == list(range(bodies[0], bodies[0] + len(bodies))):  # a depth-first subtree
        start = PARAMETERS * bodies[0]
        parts = [xp.zeros((start,) + batch), values,
                 xp.zeros((PARAMETERS * n - start - columns,) + batch)]
        return xp.concatenate([p for p in parts if p.shape[0]])
    index = (PARAMETERS * np.asarray(bodies)[:, None] + np.arange(PARAMETERS)).reshape(-1)
    gather = np.full(PARAMETERS * n, columns)  # row `columns` below: a zero
    gather[index] = np.arange(columns)
    return xp.concatenate([values, xp.zeros((1,) + batch)])[gather]
