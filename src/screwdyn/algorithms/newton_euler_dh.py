"""The Newton-Euler recursion on Denavit-Hartenberg frames (``algebra="vector"``).

Standard DH: Corke, "A Robotics Toolbox for MATLAB" (1996), eqs. (12)-(25), after Luh, Walker and
Paul; transcribed in the project's note ``newton-euler-dh.md`` and checked index by index against
Robotics Toolbox for Python's ``DHRobot.rne``. Two corrections to that note: for a revolute joint
the axis z0 is joint i+1's axis in frame i, so it is rotated with the rest,

    (12) w_{i+1}    = R^T (w_i + z0 qd_{i+1})
    (13) wdot_{i+1} = R^T (wdot_i + z0 qdd_{i+1} + w_i x z0 qd_{i+1})

(the note's ``R^T w_i + z0 qd`` is the modified-DH form below). Modified DH: Craig, "Introduction
to Robotics", eqs. (6.45)-(6.53), the recursion RTB runs for MDH models.

Everything of link i is in frame i, as 3-vectors with one trailing batch axis (3, N): angular
velocity ``w`` and acceleration ``wdot``, acceleration of the frame origin ``vdot`` (gravity
enters as vdot_0 = -g), of the centre of mass ``vbardot``; the net force ``F`` and moment ``N``
on the link; the force ``f`` and moment ``n`` that link i-1 exerts on link i. ``R`` is
^{i-1}R_i, ``pstar`` the origin of frame i seen from the origin of frame i-1, ``s`` the centre
of mass, ``J`` the inertia about it. The velocity v (eqs. 14, 18) is not computed: no later
equation uses it. Joint forces add ``armature * qdd + damping * qd``, as the spatial RNEA does.

External wrenches may act on every link of the model (each is welded to one DH link); a wrench
on ``link0``, which is welded to the world, moves no joint and is ignored, as in the spatial
recursion.
"""
import numpy as np

from .._backend import namespace
from .joint_forces import add_diagonal, add_joint_forces

Z0 = np.array([0.0, 0.0, 1.0])


# -- entry points (called by screwdyn.dynamics with its internal _Call) -----------------------
def newton_euler_dh(call, qd, qdd):
    """Joint forces tau (n, N): inverse dynamics with gravity and external wrenches."""
    model, xp = call.model, call.xp
    links = _dh_table(model)
    tau = _rne(xp, model, call["q"], qd, qdd, _vdot0(call), _external_wrenches(call, links))
    return add_joint_forces(xp, model, tau, qd, qdd)


def mass_matrix_dh(call):
    """M(q) (n, n, N): column j is the recursion with qdd = e_j, qd = 0 and gravity off."""
    model, xp = call.model, call.xp
    _dh_table(model)
    q = call["q"]
    n, N = q.shape[0], q.shape[-1]
    q_columns = xp.concatenate([q] * n, axis=1)  # batch index: column * N + state
    qdd = np.repeat(np.eye(n), N, axis=1) + 0 * q_columns
    zero = 0 * q_columns
    tau = _rne(xp, model, q_columns, zero, qdd, np.zeros((3, 1)) + zero[:1], None)
    tau = add_diagonal(xp, tau, model.armature, qdd)
    return tau.reshape((n, n, N))


def forward_dynamics_dh(call):
    """qdd (n, N) solving M(q) qdd = tau - b(q, qd), b from the recursion at qdd = 0."""
    xp = call.xp
    qd = call["qd"]
    b = newton_euler_dh(call, qd, 0 * qd)
    M = mass_matrix_dh(call)
    rhs = xp.moveaxis(call["tau"] - b, -1, 0)[..., None]  # (N, n, 1)
    qdd = xp.linalg.solve(xp.moveaxis(M, -1, 0), rhs)[..., 0]
    return xp.moveaxis(qdd, 0, -1)


# -- the recursion ---------------------------------------------------------------------------
def _rne(xp, model, q, qd, qdd, vdot0, wrenches):
    """tau (n, N) without armature and damping; ``wrenches``: None or per link (fe, ne), the
    external force and moment in frame i about its origin."""
    links = model.dh
    standard = model.dh_convention == "standard"
    R, pstar = _link_transforms(xp, links, q, standard)
    outward = _outward_standard if standard else _outward_modified
    inward = _inward_standard if standard else _inward_modified
    w, wdot, vdot = outward(links, R, pstar, qd, qdd, vdot0)
    F, N = zip(*[_newton_euler(link, *state) for link, state in zip(links, zip(w, wdot, vdot))])
    if wrenches is not None:  # the external wrench, taken about the centre of mass, joins F, N
        s = [np.array(link.com)[:, None] for link in links]
        F = [F_i - fe for F_i, (fe, _) in zip(F, wrenches)]
        N = [N_i - (ne - _cross(s_i, fe)) for N_i, s_i, (fe, ne) in zip(N, s, wrenches)]
    return xp.stack(inward(links, R, pstar, F, N))


def _link_transforms(xp, links, q, standard):
    """Per link: R = ^{i-1}R_i (3, 3, N) and pstar (3, N), from theta_i and d_i at q."""
    R, pstar = [], []
    for link, q_i in zip(links, q):
        zero = 0 * q_i
        theta = link.theta + zero if link.is_prismatic else q_i + link.offset
        d = q_i + link.offset if link.is_prismatic else link.d + zero
        ct, st = xp.cos(theta), xp.sin(theta)
        ca, sa = np.cos(link.alpha), np.sin(link.alpha)
        if standard:  # Rz(theta) Rx(alpha); pstar = (a, d sin(alpha), d cos(alpha)) in frame i
            rows = [[ct, -st * ca, st * sa], [st, ct * ca, -ct * sa], [zero, zero + sa, zero + ca]]
            pstar.append(xp.stack([link.a + zero, d * sa, d * ca]))
        else:  # Rx(alpha) Rz(theta); pstar = (a, -d sin(alpha), d cos(alpha)) in frame i-1
            rows = [[ct, -st, zero], [ca * st, ca * ct, zero - sa], [sa * st, sa * ct, zero + ca]]
            pstar.append(xp.stack([link.a + zero, -d * sa, d * ca]))
        R.append(xp.stack([xp.stack(row) for row in rows]))
    return R, pstar


def _outward_standard(links, R, pstar, qd, qdd, vdot0):
    """Eqs. (12)-(19), base to tip: w, wdot, vdot of every link in its own frame."""
    w = wdot = 0 * vdot0
    vdot = vdot0
    out_w, out_wdot, out_vdot = [], [], []
    for link, R_i, p, qd_i, qdd_i in zip(links, R, pstar, qd, qdd):
        if not link.is_prismatic:
            wdot = _rot_t(R_i, wdot + _z0(qdd_i) + _cross(w, _z0(qd_i)))  # (13)
            w = _rot_t(R_i, w + _z0(qd_i))  # (12)
            vdot = _cross(wdot, p) + _cross(w, _cross(w, p)) + _rot_t(R_i, vdot)  # (15)
        else:
            w = _rot_t(R_i, w)  # (16)
            wdot = _rot_t(R_i, wdot)  # (17)
            vdot = (_rot_t(R_i, _z0(qdd_i) + vdot) + _cross(wdot, p)  # (19)
                    + 2 * _cross(w, _rot_t(R_i, _z0(qd_i))) + _cross(w, _cross(w, p)))
        out_w.append(w)
        out_wdot.append(wdot)
        out_vdot.append(vdot)
    return out_w, out_wdot, out_vdot


def _newton_euler(link, w, wdot, vdot):
    """Eqs. (20)-(22): the net force F and moment N (about the centre of mass) on link i."""
    s, J = np.array(link.com)[:, None], link.inertia_matrix
    vbardot = _cross(wdot, s) + _cross(w, _cross(w, s)) + vdot  # (20)
    F = link.mass * vbardot  # (21)
    N = _matvec(J, wdot) + _cross(w, _matvec(J, w))  # (22)
    return F, N


def _inward_standard(links, R, pstar, F, N):
    """Eqs. (23)-(25), tip to base. f_i, n_i act at the origin of frame i-1 (n_i about it) and are
    expressed in frame i; Q_i projects them on joint i's axis z_{i-1}, i.e. R_i^T z0."""
    f = n = 0 * F[-1]
    Q = [None] * len(links)
    for i in reversed(range(len(links))):
        s = np.array(links[i].com)[:, None]
        if i + 1 < len(links):  # R = ^{i}R_{i+1}; f, n are still f_{i+1}, n_{i+1}
            R_next = R[i + 1]
            n = _rot(R_next, n + _cross(_rot_t(R_next, pstar[i]), f))  # (24), first term
            f = _rot(R_next, f)  # (23), first term
        n = n + _cross(pstar[i] + s, F[i]) + N[i]  # (24)
        f = f + F[i]  # (23)
        axis = _rot_t(R[i], Z0[:, None])
        Q[i] = _dot(f if links[i].is_prismatic else n, axis)  # (25)
    return Q


def _outward_modified(links, R, pstar, qd, qdd, vdot0):
    """Craig (6.45)-(6.49): frame i sits on joint i's axis; pstar is in frame i-1."""
    w = wdot = 0 * vdot0
    vdot = vdot0
    out_w, out_wdot, out_vdot = [], [], []
    for link, R_i, p, qd_i, qdd_i in zip(links, R, pstar, qd, qdd):
        vdot_origin = _rot_t(R_i, _cross(wdot, p) + _cross(w, _cross(w, p)) + vdot)
        if not link.is_prismatic:
            wdot = _rot_t(R_i, wdot) + _cross(_rot_t(R_i, w), _z0(qd_i)) + _z0(qdd_i)  # (6.46)
            w = _rot_t(R_i, w) + _z0(qd_i)  # (6.45)
            vdot = vdot_origin  # (6.47)
        else:
            w, wdot = _rot_t(R_i, w), _rot_t(R_i, wdot)
            vdot = vdot_origin + 2 * _cross(w, _z0(qd_i)) + _z0(qdd_i)
        out_w.append(w)
        out_wdot.append(wdot)
        out_vdot.append(vdot)
    return out_w, out_wdot, out_vdot


def _inward_modified(links, R, pstar, F, N):
    """Craig (6.51)-(6.53): f_i, n_i act at the origin of frame i, expressed in frame i, and
    tau_i is their component along z_i."""
    f = n = 0 * F[-1]
    Q = [None] * len(links)
    for i in reversed(range(len(links))):
        s = np.array(links[i].com)[:, None]
        if i + 1 < len(links):
            f_next = _rot(R[i + 1], f)
            n = _rot(R[i + 1], n) + _cross(pstar[i + 1], f_next)  # (6.52), moved terms
            f = f_next  # (6.51), moved term
        n = n + N[i] + _cross(s, F[i])  # (6.52)
        f = f + F[i]  # (6.51)
        Q[i] = (f if links[i].is_prismatic else n)[2]  # (6.53)
    return Q


# -- inputs -------------------------------------------------------------------------------------
def _dh_table(model):
    if model.parameters is not None:
        raise ValueError("algebra='vector' reads the inertias of the DH table, not traced "
                         "inertial parameters: use algebra='spatial', 'cga' or 'dq'")
    if not model.dh or model.dh_convention not in ("standard", "modified") \
            or len(model.dh) != model.nbodies:
        raise ValueError(f"algebra='vector' needs a model made by from_dh (a DH table); model "
                         f"{model.name!r} has none: use algebra='spatial'")
    return model.dh


def _vdot0(call):
    """vdot_0 = -g in the base frame link0 (rotated from the world frame by the DH base
    transform, the placement of link0 in the world)."""
    g = call.arrays.get("gravity")
    g = np.array(call.model.gravity)[:, None] if g is None else g
    R_base = _base_rotation(call.model)
    if R_base is not None:
        g = _rot_t(R_base[..., None], g)
    return -g + 0 * call["q"][:1]


def _base_rotation(model):
    """R of the DH base transform (the world placement of ``link0``), None for the identity."""
    index = model.link_index("link0")
    link = model.links[index]
    R = np.reshape(link.rotation, (3, 3))
    return None if link.body >= 0 or np.array_equal(R, np.eye(3)) else R


def _external_wrenches(call, links):
    """Per DH link i: (fe, ne), the external wrench on every link welded to it, in frame i about
    the origin of frame i; None if no f_ext was given."""
    if "f_ext" not in call.arrays:
        return None
    model = call.model
    F = call.arrays["f_ext"]  # (nlinks, 6, N), link frames
    zero = 0 * F[0, :3]
    fe, ne = [zero] * model.nbodies, [zero] * model.nbodies
    for l, link in enumerate(model.links):
        if link.body < 0:
            continue  # welded to the world
        R_b_link = np.reshape(link.rotation, (3, 3))  # link frame in the body frame
        p_b_link = np.array(link.translation)
        R_b_dh, p_b_dh = _dh_frame_in_body(links[link.body], model.dh_convention)
        R = R_b_dh.T @ R_b_link  # link frame in DH frame i
        p = R_b_dh.T @ (p_b_link - p_b_dh)
        f = _matvec(R, F[l, :3])
        fe[link.body] = fe[link.body] + f
        ne[link.body] = ne[link.body] + _matvec(R, F[l, 3:]) + _cross(p[:, None], f)
    return list(zip(fe, ne))


def _dh_frame_in_body(link, convention):
    """DH frame i in the body frame of joint i: Tx(a) Rx(alpha) (standard), identity (modified)."""
    if convention == "modified":
        return np.eye(3), np.zeros(3)
    ca, sa = np.cos(link.alpha), np.sin(link.alpha)
    return np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]]), np.array([link.a, 0, 0])


# -- 3-vector helpers (components first, trailing batch axis; numpy or JAX) --------------------
def _cross(a, b):
    return namespace(a, b).cross(a, b, axis=0)


def _rot(R, x):
    """R x for R (3, 3, N) and x (3, N)."""
    return (R * x[None]).sum(axis=1)


def _rot_t(R, x):
    """R^T x."""
    return (R * x[:, None]).sum(axis=0)


def _matvec(J, x):
    """J x for a constant 3x3 numpy J."""
    return (J[:, :, None] * x[None]).sum(axis=1)


def _dot(a, b):
    return (a * b).sum(axis=0)


def _z0(rate):
    """z0 * rate (3, N)."""
    return Z0[:, None] * rate
