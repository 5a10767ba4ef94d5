"""Rigid ground contact solved as a constrained problem: Coulomb friction cones, no penalty
spring, so that stiff contact needs no tiny time step.

``RigidContact`` is a ground plane (as ``GroundContact``: the same contact spheres on the
robot's links, the same plane) whose contact forces are found, at every evaluation of the
dynamics, from the robot's dynamics itself rather than from a spring law. Each contact point i
(a sphere of radius r centred at c; penetration d_i = r - n . (c - h n), contact point
p_i = c - r n) has three rows of the contact Jacobian, the velocity of the link's material point
at p_i along the plane's normal n and two tangents t1, t2: v_i = J_i qd. With the unconstrained
accelerations qdd0 = FD(q, qd, tau) and the mass matrix M, the forces f_i = (f_n, f_t1, f_t2)
solve

    minimise  1/2 f^T (A + R) f + f^T (J qdd0 - a_ref)     A = J M^-1 J^T (the Delassus
                                                            matrix), R (below)
    subject to f_n >= 0, |f_t| <= mu f_n (Coulomb's cone), f_i = 0 for a point off the ground
               (farther than ``margin``),

whose optimality conditions say: a point in contact is pushed, never pulled; it sticks when the
force that holds it lies inside the cone, else it slides with |f_t| = mu f_n against its
sliding. qdd = qdd0 + M^-1 J^T f. R is diagonal, zero by default (rigid contact); with an
``impedance`` d < 1 (MuJoCo's ``solimp``: a constant, or rising from dmin to dmax as the
penetration grows, ``impedance.Impedance``; 0.9-0.95 in MuJoCo) the normal rows have
R_jj = (1 - d) / d A_jj, as MuJoCo's soft constraints: the problem strictly convex in the
normal forces, so that the load of redundant contacts (four legs) is shared and unique, and a
held point sags by (1 - d) / d times its acceleration over k. A soft point's friction is soft
too, as MuJoCo's (elliptic cones): its tangential rows have R_tt = R_nn / ``impratio``, so that
a loaded point that sticks creeps at v_t = R_tt f_t / b (1 mm/s for a 1 kg puck pushed by 2 N
at MuJoCo's default solimp and impratio 1; ``impratio`` = inf: rigid friction, no creep).
Sliding, the friction is Coulomb's, mu f_n against the slip (MuJoCo's convex cone, solved as
one problem, also lifts a sliding body a little off its surface). The reference accelerations
(MuJoCo's ``aref``, Baumgarte's stabilisation) pull a penetration and a sliding velocity to
zero:

    a_ref_n = k d - b v_n,   a_ref_t = -b v_t,   k = 1 / (timeconst dampratio)^2, b = 2 / timeconst

so that a point held in contact behaves as a damped oscillator *per unit apparent mass* (its
time constant is the same for a 1 kg ball and a 50 kg robot: this is what lets the step stay at
1-2 ms). ``restitution`` e sets the damping ratio zeta of the impact: a point hitting the ground
at speed v0 follows the damped oscillator x'' = -k x - b x' until its force k x + b x' (which
never pulls) falls to zero, at the phase theta = pi - atan2(2 zeta s, 1 - 2 zeta^2) of
x = v0 / w_d exp(-zeta w t) sin(w_d t) (s = sqrt(1 - zeta^2)), and leaves at
e v0 = v0 exp(-zeta theta / s) (zeta / s sin theta - cos theta) (zeta < 1; critically damped,
zeta = 1, x = v0 t exp(-w t) leaves at t = 2 / w with e = exp(-2) = 0.135; overdamped, the
roots r1,2 = w (-zeta +- q), q = sqrt(zeta^2 - 1), and the release time
t = ln((1 + 2 zeta r2 / w) / (1 + 2 zeta r1 / w)) / (2 w q)): ``restitution_of`` gives e of
zeta, and zeta is found from e by bisection (e from 1 at zeta = 0 down to 0.21 at
zeta = 1/sqrt(2), 0.135 at 1, 0.048 at 2, towards 0 as zeta grows; gravity during the contact
adds a little). As
MuJoCo's, the constraint acceleration is J qdd (the dJ/dt qd term is left to the stabilisation).

The problem is solved by projected Gauss-Seidel (``iterations`` sweeps over the points: the
normal row clipped at zero, its step its own diagonal of A + R (plus a small ``regularization``
relative to A's); then the two tangential rows, solved together (``SolvedContact._tangents``)
and held within the disc of radius mu f_n; A is never formed: the sweeps keep M^-1 J^T f
up to date, so a row costs the degrees of freedom, not the points), warm-started from the
previous step's forces (state the rollout carries: a contact at rest converges further at every
step), a fixed count of operations, so that the same code runs on numpy, in JAX (a
``fori_loop``) and in the native tracer (the sweeps one loop of the program, the points of a
sweep unrolled in it, each group of points (``groups``: a run on one link, a scene's pair) a
branch taken only while one of its points is within ``margin``: ``loops.when``, so that a
robot's links away from the ground and a scene's pairs apart cost a sweep one test). The
forces' power is passive work in the energy balance; the stabilisation's spring, k times each
point's apparent mass, holds the energy of a penetration (``traj.elastic``), so that pushing
one out is not counted as energy the contact made.

With the model's equality constraints (closed loops, couplings), qdd0 is the constrained
forward dynamics and the contact acts through the constrained inverse inertia (``solve``), so
both hold together. ``solve_rows`` is the solve of any block of rows (``Rows``): the contact's
points and the joint limits of ``limit_constraints.RigidLimits`` are one problem.

``cone="convex"`` gives MuJoCo's elliptic cone: the same rows and disc, but a point's normal
and friction found together, as one convex problem (the module docstring's problem, solved
exactly: each sweep minimises it over a point's three forces within its cone,
``SolvedContact._cone``), where the disc's sweeps find the normal as for a frictionless point
and then the friction within its disc (Coulomb's law: a fixed point that is not the convex
problem's optimum once a point slides). Sliding, the convex problem's friction pushes the
point off its surface a little (its optimality conditions give the normal row an
acceleration mu times the friction rows' residual): what MuJoCo does, and what its files
that ask for elliptic cones expect.

``cone="pyramidal"`` gives MuJoCo's default cone instead of the disc: each point's four edges
J_n +- mu J_t1, J_n +- mu J_t2 are one-sided rows (``SolvedContact._pyramid``), the friction
within the rhombus |f_t1| + |f_t2| <= mu f_n, each edge's a_ref = k d - b v_edge, a soft point's
edges of MuJoCo's compliance 2 mu^2 / impratio (1 - d) / d A_e0.

Torsional and rolling friction (MuJoCo's condim 4 and 6: ``RigidContact.torsion``,
``rolling``; a scene's pairs' ``Surface``) are the twist rows (``twists``), after the points'
rows: a point's two bodies' relative angular velocity along its normal (the spin) and its
tangents (the rolling), each a torque of at most c_w f_n (c_w its coefficient, m), its
a_ref = -b w, its compliance MuJoCo's, R_w c_w^2 = R_t mu^2. The disc bounds them apart
(``_twisting``: the spin's torque within +-torsion f_n, the rolling's within the disc of radius
rolling f_n); ``cone="convex"`` holds them with the friction in MuJoCo's elliptic cone,
sqrt(|f_t|^2 + sum_w (mu f_w / c_w)^2) <= mu f_n, one block step (``_cone``, in the
coordinates mu f_w / c_w); ``cone="pyramidal"`` gives each MuJoCo's two edges J_n +- c_w J_w.

Limitations (documented choices): one plane.
"""
import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from .._backend import is_jax_namespace
from ..algorithms import spd
from ..algorithms.constraints import EPSILON
from ..model.impedance import (Impedance, impedance_of, impratio_of, stabilisation_gains,
                               step_time_constant)
from .checks import boolean, positive, sweeps
from .contact import Contact, check_plane
from .geometry import contact_points
from .inverse_weights import link_inverse_weights
from .loops import loop, when


#: the friction cones a solved contact offers (``RigidContact.cone``; MuJoCo's <option cone>)
CONES = ("elliptic", "pyramidal", "convex")


@dataclass(frozen=True, eq=False)
class RigidContact:
    """A ground plane with rigid contact and Coulomb friction, solved as a constrained problem
    (see the module docstring).

    mu: Coulomb friction coefficient (>= 0).
    timeconst: the time constant (s) with which a penetration or a sliding velocity is
        removed (MuJoCo's solref[0]; >= 2 dt is stable for every integrator).
    dampratio: the damping ratio of the normal response (solref[1]); 1: critical damping, an
        impact leaves at exp(-2) = 0.135 of its speed (MuJoCo's too); above 1, less.
    restitution: if given, the coefficient of restitution e in (0, 1) of an impact: sets
        dampratio (above).
    iterations: projected Gauss-Seidel sweeps per evaluation.
    regularization: added to each row's diagonal (its Gauss-Seidel step), relative to it
        (>= 0; damps the sweeps on redundant contacts, e.g. four corners of a box).
    impedance: the normal rows' softness, MuJoCo's ``solimp``: a constant d in (0, 1], or
        (dmin, dmax, width, midpoint, power), d rising from dmin to dmax as the penetration
        grows to width (``impedance.Impedance``; stored as one): compliance
        R = (1 - d) / d A_jj (module docstring). 1 (default): rigid. MuJoCo's default
        (0.9, 0.95, 0.001) shares a body's weight among redundant contacts (four legs) as
        MuJoCo does, given ``iterations`` enough to converge (100-200).
    impratio: MuJoCo's ``impratio``, the friction's stiffness relative to the normal's
        (> 0; ``math.inf`` allowed): the tangential rows of a soft point have the compliance
        R_t = R_n / impratio (MuJoCo's elliptic cones), so that a soft contact's friction is
        soft too and a loaded point that sticks creeps at v_t = R_t f_t / b. 1 (MuJoCo's
        default): as soft as the normal; larger (MuJoCo's grasping scenes: 10-100) holds
        better; ``math.inf``: rigid friction. No effect on a rigid contact (R_n = 0).
    cone: ``"elliptic"`` (default): the friction within a disc, |f_t| <= mu f_n, solved with
        the normal (Coulomb's law: the normal as for a frictionless point, the friction
        within its disc); ``"convex"``: MuJoCo's elliptic cone, the same disc with the
        normal and friction found together, one convex problem (a sliding point lifts off a
        little, as MuJoCo's); ``"pyramidal"``: MuJoCo's default cone, its four edges
        J_n +- mu J_t1, J_n +- mu J_t2 each a row that pushes, never pulls (|f_t1| + ...
        within a square of half-side mu f_n), each edge's reference acceleration
        k d(r) / dmax r - b v_edge, all four of a soft point with MuJoCo's compliance
        R = 2 mu^2 / impratio (1 - d) / d A_e0 (A_e0: its first edge's, or MuJoCo's
        approximation of it with ``invweight0``, (1 + mu^2) times the point's inverse
        weight); a frictionless point (mu = 0, MuJoCo's
        condim 1) keeps one row, J_n, of compliance (1 - d) / d A_nn.
    invweight0: whether a soft point's compliance scales MuJoCo's approximation of its rows'
        A_jj, the translational inverse weights of its two bodies at the model's ``q0``
        (``inverse_weights``: MuJoCo's ``body_invweight0``), as MuJoCo's does, rather than the
        exact A_jj of the current state (False, the default): a cube on its four corners then
        sinks as MuJoCo's does (0.11 mm at MuJoCo's defaults, where the exact A_jj, four
        times a ball's at a corner, sinks it as much as a ball: 0.37 mm).
    margin: a point closer to the ground than this (m, >= 0) takes part in the solve (its
        force is still zero unless it approaches faster than a_ref = k d allows): a resting
        point hovering at d = 0 then never flickers in and out of contact.
    height, normal, points, links, rim_points: the plane and the contact points, as for
        ``GroundContact``.
    refsafe: MuJoCo's refsafe: a simulation with the step dt uses a time constant of at
        least 2 dt, for ``timeconst`` and for a scene's pairs' own solref in the standard form
        (``impedance.step_time_constant``). False by default; ``Scene.build`` sets it for
        MJCF files (as MuJoCo, unless a file disables it).
    torsion, rolling (m, >= 0): the torsional and rolling friction coefficients of every
        point (MuJoCo's condim 4 and 6, friction[1] and [2]; a scene's pairs take their
        surfaces', ``Surface``): a point's torque about its normal is at most torsion f_n,
        about its tangents at most rolling f_n (the module docstring's twist rows). 0
        (default): none.
    """

    mu: float = 0.8
    timeconst: float = 0.02
    dampratio: float = 1.0
    restitution: float = None
    iterations: int = 30
    regularization: float = 1e-6
    impedance: Impedance = Impedance(1.0, 1.0)
    impratio: float = 1.0
    cone: str = "elliptic"
    invweight0: bool = False
    margin: float = 1e-4
    height: float = 0.0
    normal: tuple = (0.0, 0.0, 1.0)
    points: object = None
    links: tuple = None
    rim_points: int = 8
    refsafe: bool = False
    torsion: float = 0.0
    rolling: float = 0.0

    def __post_init__(self):
        positive(self.mu, "RigidContact.mu", allow_zero=True)
        positive(self.torsion, "RigidContact.torsion", allow_zero=True)
        positive(self.rolling, "RigidContact.rolling", allow_zero=True)
        positive(self.timeconst, "RigidContact.timeconst")
        positive(self.dampratio, "RigidContact.dampratio")
        positive(self.regularization, "RigidContact.regularization", allow_zero=True)
        object.__setattr__(self, "impedance",
                           impedance_of(self.impedance, "RigidContact.impedance"))
        object.__setattr__(self, "impratio", impratio_of(self.impratio,
                                                         "RigidContact.impratio"))
        positive(self.margin, "RigidContact.margin", allow_zero=True)
        if self.cone not in CONES:
            raise ValueError(f"RigidContact.cone must be one of {CONES} (MuJoCo's friction "
                             f"cones), got {self.cone!r}")
        boolean(self.invweight0, "RigidContact.invweight0")
        boolean(self.refsafe, "RigidContact.refsafe")
        if self.restitution is not None:
            e = self.restitution
            if not (isinstance(e, (int, float)) and 0 < e < 1):
                raise ValueError(f"RigidContact.restitution must be a number in (0, 1), got "
                                 f"{e!r} (dampratio=1 for none)")
        sweeps(self.iterations, "RigidContact.iterations")
        check_plane(self.height, self.normal, "RigidContact")
        if self.links is not None and isinstance(self.links, str):
            object.__setattr__(self, "links", (self.links,))

    @property
    def damping_ratio(self):
        """The normal response's damping ratio: ``dampratio``, or the one whose impact has the
        coefficient ``restitution`` (``restitution_of``, inverted by bisection)."""
        if self.restitution is None:
            return float(self.dampratio)
        low, high = 0.0, 1.0
        while restitution_of(high) > self.restitution:  # overdamped for e < exp(-2)
            low, high = high, 2.0 * high
        for _ in range(100):
            middle = 0.5 * (low + high)
            if restitution_of(middle) > self.restitution:
                low = middle
            else:
                high = middle
        return 0.5 * (low + high)

    @property
    def gains(self):
        """(k 1/s^2, b 1/s): the stabilisation, k = 1 / (dmax (timeconst dampratio)^2),
        b = 2 / (dmax timeconst) with the impedance's dmax (MuJoCo's: its soft constraint's
        reference acceleration, k d(r) / dmax r - b v, ``impedance``; d = 1, rigid: the module
        docstring's)."""
        return stabilisation_gains(self.timeconst, self.damping_ratio, self.impedance)

    def at_step(self, dt: Optional[float]) -> "RigidContact":
        """These settings as a simulation with the step ``dt`` (s; None: none) takes them: the
        time constant at least 2 dt where ``refsafe`` (``impedance.step_time_constant``)."""
        timeconst = step_time_constant(self.timeconst, dt, self.refsafe)
        return self if timeconst == self.timeconst else replace(self, timeconst=timeconst)

    def resolve(self, model, dt: Optional[float] = None):
        """The ``SolvedContact`` of this ground and ``model``'s contact points, in a
        simulation with the step ``dt`` (s; None: none; ``at_step``)."""
        points = contact_points(model, self.points, self.links, self.rim_points)
        return SolvedContact(model, self.at_step(dt), points)


def restitution_of(zeta):
    """The coefficient of restitution of an impact on the stabilised contact with damping
    ratio zeta >= 0 (see the module docstring; gravity during the contact neglected):
    decreasing, 1 at 0, exp(-2) at 1, towards 0 as zeta grows."""
    if zeta < 1.0:
        s = math.sqrt(1.0 - zeta * zeta)
        theta = math.pi - math.atan2(2.0 * zeta * s, 1.0 - 2.0 * zeta * zeta)
        return math.exp(-zeta * theta / s) * (zeta / s * math.sin(theta) - math.cos(theta))
    if zeta == 1.0:
        return math.exp(-2.0)
    q = math.sqrt(zeta * zeta - 1.0)  # overdamped: x = (exp(r1 t) - exp(r2 t)) / (2 q), w = 1
    r1, r2 = -zeta + q, -zeta - q
    t = math.log((1.0 + 2.0 * zeta * r2) / (1.0 + 2.0 * zeta * r1)) / (2.0 * q)
    return -(r1 * math.exp(r1 * t) - r2 * math.exp(r2 * t)) / (2.0 * q)


_MIN_NORM = 1e-15  # MuJoCo's mjMINVAL: a shorter vector has no direction
_CONE_STEPS = 2  # projected-gradient steps of a sliding point's block a sweep (cone="convex")


def _basis(n):
    """Two unit tangents (3,) completing the unit normal n (3,) to a right-handed frame."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = np.cross(n, helper)
    t1 /= np.linalg.norm(t1)
    return t1, np.cross(n, t1)


class SolvedContact(Contact):
    """A ``RigidContact`` bound to a model: the points' structure (as ``Contact``) and the
    solver. A ``contact_model.ContactModel`` whose ``solves`` is True: the step calls
    ``solve`` with the dynamics instead of ``forces``."""

    solves = True

    def __init__(self, model, ground, points):
        self.ground, self.points = ground, points
        self.nlinks = model.nlinks
        self.link = points.link
        self.links = tuple(sorted(set(int(l) for l in points.link)))
        self.model = model

    @property
    def key(self):
        return ("rigid", self.points.key, self.ground.iterations, self.ground.impedance,
                self.ground.impratio, self.ground.cone, self.ground.invweight0,
                self.point_twist)

    @property
    def point_twist(self):
        """Per candidate point, (torsion, rolling) (m): its torsional and rolling friction
        coefficients (constants of the program), 0 for none: the ground's."""
        return ((float(self.ground.torsion), float(self.ground.rolling)),) * len(self.link)

    @cached_property
    def twists(self):
        """The twist rows, ((point, axis, coefficient), ...) in order: axis 0 the spin about
        the point's normal (where its torsion is > 0), 1 and 2 the rolling about its
        tangents (where its rolling is > 0)."""
        return tuple((i, axis, c) for i, (torsion, rolling) in enumerate(self.point_twist)
                     for axis, c in ((0, torsion), (1, rolling), (2, rolling)) if c > 0.0)

    @property
    def groups(self):
        """The sweeps' groups, ((first, stop), ...): runs of consecutive points on one link,
        in order. A group none of whose points may touch costs a sweep one test."""
        return runs(self.link)

    def solver_params(self, xp=np):
        """The solver's numbers: mu, the stabilisation's k and b, regularization, margin and
        the plane's height (what every solved contact has)."""
        g = self.ground
        k, b = g.gains
        out = {"mu": xp.asarray(g.mu, dtype=float), "k": xp.asarray(k, dtype=float),
               "b": xp.asarray(b, dtype=float),
               "regularization": xp.asarray(g.regularization, dtype=float),
               "margin": xp.asarray(g.margin, dtype=float),
               "height": xp.asarray(g.height, dtype=float)}
        if g.invweight0:  # each point's A_jj as MuJoCo approximates it
            out["weights"] = xp.asarray(self.point_weights, dtype=float)
        return out

    def point_links(self):
        """Per candidate point, the links whose motion moves it (its own, where it moves)."""
        return [(int(l),) if self.model.links[int(l)].body >= 0 else () for l in self.link]

    @cached_property
    def point_dofs(self):
        """Per candidate point, the velocity coordinates (of v) whose velocity can move it:
        those of its links' paths to the root, and for a coupled model the coordinates that
        drive them (the nonzero columns of ``coupling``'s G on their rows)."""
        model = self.model
        tree, G = model.tree, (model.coupling[3] if model.coupled else None)
        out = []
        for links in self.point_links():
            bodies = {a for l in links for a in tree.ancestors[tree.links[l].body]}
            dofs = [k for b in bodies for k in range(tree.v_slices[b].start,
                                                     tree.v_slices[b].stop)]
            if G is not None:
                dofs = np.flatnonzero(np.any(G[dofs] != 0.0, axis=0)).tolist()
            out.append(tuple(sorted(dofs)))
        return tuple(out)

    def _row_dofs(self, width):
        """``Rows.dofs`` of ``width`` rows a point, then ``width`` / 3 (rounded up) a twist
        row (``twists``); None for a coupled model (the sweeps treat its coordinates as one
        block)."""
        if self.model.coupled:
            return None
        return tuple(d for d in self.point_dofs for _ in range(width)) + tuple(
            self.point_dofs[i] for i, _, _ in self.twists for _ in range(-(-width // 3)))

    @cached_property
    def point_weights(self):
        """(P,): each point's MuJoCo inverse weight (1/kg), its link's body's translational
        ``body_invweight0`` at the model's ``q0`` (``inverse_weights``; the ground: 0)."""
        weights = link_inverse_weights(self.model)
        return weights[np.asarray(self.link, dtype=int)]

    def params(self, xp=np):
        n = np.asarray(self.ground.normal, dtype=float)
        n = n / np.linalg.norm(n)
        t1, t2 = _basis(n)
        return dict(self.solver_params(xp), normal=xp.asarray(n), t1=xp.asarray(t1),
                    t2=xp.asarray(t2), center=xp.asarray(self.points.center),
                    radius=xp.asarray(self.points.radius))

    def initial_state(self, xp, p, T):
        """The warm start: the previous step's forces on the points (N, P, 3), world frame (a
        pyramidal cone's: also its edges' (N, P, 4)), and the stabilisation's stiffness k m_i
        at each point (N, P) (N/m; m_i its apparent mass along the normal, 1 / A_ii)."""
        point = self.points_at(xp, p, T)
        state = {"forces": 0.0 * point, "stiffness": 0.0 * point[..., 0]}
        if self.ground.cone == "pyramidal":  # the edges' forces (N, P, 4)
            state["edges"] = xp.concatenate([0.0 * point, 0.0 * point[..., :1]], axis=-1)
        if self.twists:  # the twist rows' torques (pyramidal: their edges' forces)
            width = 2 if self.ground.cone == "pyramidal" else 1
            state["twists"] = xp.concatenate([0.0 * point[:, 0, :1]]
                                             * (width * len(self.twists)), axis=-1)
        return state

    def project(self, xp, p, T, state):
        """(state, elastic): the energy the stabilisation holds in the points' penetrations,
        sum 1/2 k m_i d_i^2 (J), the spring that pushes a penetration out (``traj.elastic``:
        what it gives back is not counted as produced by the contact)."""
        inside = xp.maximum(self.held(self.depths(xp, p, T)), 0.0)
        return state, xp.sum(0.5 * state["stiffness"] * inside * inside, axis=-1)

    def held(self, depth):
        """The depths (N, P) the solve drives to zero (``rows``'): the points' own here."""
        return depth

    def forces(self, xp, p, T, V, state):
        raise TypeError("a RigidContact's forces come from solve(), with the dynamics")

    # -- the solver --------------------------------------------------------------------------
    def depths(self, xp, p, T):
        """(N, P): each point's penetration (m; negative: apart) at link poses T."""
        return self.positions(xp, p, T)[1]

    def rows(self, xp, p, q, T, angular=False):
        """(J (N, 3P, nv): the contact rows [n, t1, t2] of every point, depth (N, P), frames
        (N, P, 3, 3): each point's [n; t1; t2] in the world) at q (N, nq) with link poses T
        (N, nlinks, 4, 4); with ``angular``, also (N, P, 3, nv): each point's body's angular
        velocity (world axes) over its other's (the twist rows')."""
        from ..dynamics import jacobian

        point, depth, _, _, origin = self.positions(xp, p, T)
        jac = {l: jacobian(self.model, q, l, frame="world") for l in self.links}  # (N, 6, nv)
        frame = xp.stack([p["normal"], p["t1"], p["t2"]])  # (3, 3)
        rows = []
        for i, l in enumerate(self.link.tolist()):
            J = jac[l]
            r = point[:, i] - origin[:, i]  # (N, 3): the point from the link's origin
            Jp = J[:, :3] - xp.cross(r[:, :, None], J[:, 3:], axis=1)  # v + w x r
            rows.append(xp.einsum("ij,njv->niv", frame, Jp))
        frames = xp.broadcast_to(frame, depth.shape + (3, 3))
        out = (xp.concatenate(rows, axis=1), depth, frames)
        if angular:
            out += (xp.stack([jac[l][:, 3:] for l in self.link.tolist()], axis=1),)
        return out

    def stiffness(self, xp, p, q, T, M):
        """(N, P): the stabilisation's stiffness k m_i at each point (N/m), m_i = 1 / A_ii its
        apparent mass along the normal, at q (N, nq), link poses T, mass matrix M."""
        J, depth, _ = self.rows(xp, p, q, T)
        if not depth.shape[-1]:
            return 0.0 * depth
        diag = row_diagonal(xp, M, J[:, 0::3], p["regularization"])  # the normal rows'
        return xp.stack([self.stabilisation(p, i)[0] / diag[:, i]
                         for i in range(depth.shape[-1])], axis=-1)

    def friction(self, xp, p, i):
        """Point i's friction coefficient: ``p["mu"]`` (the ground's, for every point)."""
        return p["mu"]

    def stabilisation(self, p, i):
        """Point i's (k 1/s^2, b 1/s), k written at its impedance's dmax
        (``impedance.stabilisation_gains``): ``p["k"], p["b"]`` (the same for every point)."""
        return p["k"], p["b"]

    def impedance(self, i):
        """Point i's ``Impedance`` (a constant of the program): the ground's."""
        return self.ground.impedance

    def solve(self, xp, p, q, qd, qdd0, M, T, state, J_eq=None):
        """(qdd (N, nv), tau_c (N, nv), forces (N, P, 3) on the points, world frame, the state
        for the next step (``initial_state``)): the contact forces f of the module docstring's
        problem at q (N, nq), qd (N, nv), with the accelerations qdd0 (N, nv) without contact,
        mass matrix M (N, nv, nv) and link poses T (N, nlinks, 4, 4), the sweeps starting from
        the previous step's forces (``state["forces"]``: at rest, the solution carries over and
        converges further at every step). tau_c: the joint forces the contact makes, J^T f.
        ``J_eq``: the model's equality constraints, which qdd0 keeps (``solve_rows``).

        The contact's rows alone (``block``); a simulation solves them with the joint limits'
        (``limit_constraints``) in one ``solve_rows``."""
        qdd, tau_c, (out,) = solve_rows(xp, self.model, M, J_eq, qdd0,
                                        [self.block(xp, p, q, qd, T, state)],
                                        self.ground.iterations, p["regularization"])
        return (qdd, tau_c) + out

    def block(self, xp, p, q, qd, T, state):
        """The contact's ``Rows`` at q (N, nq), qd (N, nv), link poses T: three rows a point
        (normal, two tangents; ``_pyramid``: four edges), warm-started from
        ``state["forces"]``; its ``finish`` gives (forces (N, P, 3) on the points, world
        frame, the state for the next step). They come first in ``solve_rows`` (their sweep
        reads f from column 0)."""
        if self.ground.cone == "pyramidal":
            return self._pyramid(xp, p, q, qd, T, state)
        J, depth, frames, *turning = self.rows(xp, p, q, T, angular=bool(self.twists))
        P = depth.shape[-1]
        if self.twists:  # after the points' rows
            J = xp.concatenate([J, self._twist_rows(xp, turning[0], frames)], axis=1)
        v = xp.einsum("niv,nv->ni", J, qd)
        touching = depth > -p["margin"]  # (N, P): in the solve
        active = xp.where(touching, 1.0, 0.0)
        a_ref, soft, weights = [], [], []
        friction = 1.0 / self.ground.impratio  # R_t = R_n / impratio (0: rigid friction)
        for i in range(P):
            k, b = self.stabilisation(p, i)
            spring, normal = self.impedance(i).terms(xp, k, depth[:, i])
            a_ref += [spring - b * v[:, 3 * i], -b * v[:, 3 * i + 1], -b * v[:, 3 * i + 2]]
            soft += [normal, friction * normal, friction * normal]
            if "weights" in p:  # MuJoCo's A_jj of the point's three rows
                weights += [p["weights"][i] + 0.0 * normal] * 3
        for w, (i, _, c) in enumerate(self.twists):  # damped, of MuJoCo's compliance
            k, b = self.stabilisation(p, i)          # R_w c^2 = R_t mu^2
            _, normal = self.impedance(i).terms(xp, k, depth[:, i])
            mu = self.friction(xp, p, i)
            a_ref.append(-b * v[:, 3 * P + w])
            soft.append(friction * normal * (mu / c) ** 2)
            if "weights" in p:
                weights.append(p["weights"][i] + 0.0 * normal)

        twisting = sorted({i for i, _, _ in self.twists})

        def point(S, i, fi, u):  # one point's three rows, Gauss-Seidel; fi (N, 3): its forces
            n, t1, t2 = 3 * i, 3 * i + 1, 3 * i + 2
            if self.ground.cone == "convex":  # the three together, within the cone
                if isinstance(i, (int, np.integer)) and i in twisting:
                    return fi, u  # with its twist rows, after the points (``_twisting``)
                new, moved = self._cone(xp, S, (n, t1, t2), fi, u, self.friction(xp, p, i),
                                        touching[:, i])
                if not twisting or isinstance(i, (int, np.integer)):
                    return new, moved
                keep = xp.asarray(np.isin(np.arange(P), twisting))[i]  # JAX: i traced
                return xp.where(keep, fi, new), xp.where(keep, u, moved)
            # a point apart keeps f_n = 0 (and so f_t = 0: its cone has no room), where
            # its group is in the solve for another point's sake
            fn, u = S.one_sided(n, fi[:, 0], u, touching[:, i])
            g1, g2 = self._tangents(xp, S, t1, t2, fi[:, 1], fi[:, 2], u,
                                    self.friction(xp, p, i) * fn)
            u = S.moved(S.moved(u, t1, g1, fi[:, 1]), t2, g2, fi[:, 2])
            return xp.stack([fn, g1, g2], axis=-1), u

        def finish(f, diag, _entry):
            fp = f[:, :3 * P].reshape(f.shape[:-1] + (P, 3))
            forces = xp.einsum("npj,npjk->npk", fp, frames)
            stiffness = xp.stack([self.stabilisation(p, i)[0] / diag[:, 3 * i]
                                  for i in range(P)], axis=-1)
            out = {"forces": forces, "stiffness": stiffness}
            if self.twists:
                out["twists"] = f[:, 3 * P:]
            return forces, out

        start = xp.einsum("npk,npjk->npj", state["forces"], frames)  # (N, P, 3) in the frames
        start = (start * active[..., None]).reshape(start.shape[:1] + (3 * P,))
        if self.twists:
            start = xp.concatenate([start, state["twists"] * xp.stack(
                [active[:, i] for i, _, _ in self.twists], axis=-1)], axis=-1)
        # every row's compliance is relative to its point's normal diagonal A_nn (MuJoCo's)
        normals = tuple(3 * (j // 3) for j in range(3 * P)) + tuple(
            3 * i for i, _, _ in self.twists)
        sweep = self._twisting(xp, self._sweep(xp, P, 3, touching, point), 3 * P, touching,
                               lambda f, i: f[:, 3 * i], one_sided=False,
                               cone=self.ground.cone == "convex" and (
                                   lambda S, i, rows, fi, u, twist: self._cone(
                                       xp, S, rows, fi, u, self.friction(xp, p, i),
                                       touching[:, i], twist)))
        return Rows(J, xp.stack(a_ref, axis=-1), start, xp.stack(soft, axis=-1), sweep,
                    finish, normals, xp.stack(weights, axis=-1) if weights else None,
                    neighbours=self.ground.cone == "convex", dofs=self._row_dofs(3))

    def _pyramid(self, xp, p, q, qd, T, state):
        """``block`` for MuJoCo's pyramidal cone (``RigidContact.cone``): four rows a point,
        its edges J_n + mu J_t1, J_n - mu J_t1, J_n + mu J_t2, J_n - mu J_t2 (MuJoCo's
        order), each one-sided; a frictionless point (mu = 0) its first edge, J_n, alone. The
        edges' forces f_e >= 0 make the point's f_n = sum f_e, f_t1 = mu (f_0 - f_1),
        f_t2 = mu (f_2 - f_3); the warm start is the previous step's edge forces
        (``state["edges"]``)."""
        J3, depth, frames, *turning = self.rows(xp, p, q, T, angular=bool(self.twists))
        P = depth.shape[-1]
        frames, c, s = self._mujoco_frames(xp, frames, self.tangent_hints(xp, p, T))
        touching = depth > -p["margin"]  # (N, P): in the solve
        ratio = 1.0 / self.ground.impratio
        rows, springs, dampings, soft, weights, mus = [], [], [], [], [], []
        for i in range(P):
            mu = self.friction(xp, p, i) + 0.0 * depth[:, i]  # (N,)
            n = J3[:, 3 * i]  # the tangents turned to MuJoCo's frame's
            t1 = c[:, i, None] * J3[:, 3 * i + 1] + s[:, i, None] * J3[:, 3 * i + 2]
            t2 = c[:, i, None] * J3[:, 3 * i + 2] - s[:, i, None] * J3[:, 3 * i + 1]
            rows += [n + mu[:, None] * t1, n - mu[:, None] * t1, n + mu[:, None] * t2,
                     n - mu[:, None] * t2]
            k, b = self.stabilisation(p, i)
            spring, normal = self.impedance(i).terms(xp, k, depth[:, i])
            springs += [spring] * 4
            dampings += [b] * 4
            # MuJoCo's: every edge 2 mu^2 / impratio times the first's (1 - d) / d A_e0; a
            # frictionless point's one row the normal's
            soft += [xp.where(mu > 0.0, 2.0 * ratio * mu * mu * normal, normal)] * 4
            if "weights" in p:  # MuJoCo's A_e0: (1 + mu^2) the point's inverse weight
                weights += [p["weights"][i] * (1.0 + mu * mu)] * 4
            mus.append(mu)
        if self.twists:  # each twist row's two edges J_n +- c J_w (MuJoCo's), after the points'
            Jw = self._twist_rows(xp, turning[0], frames)
            for w, (i, _, c_w) in enumerate(self.twists):
                rows += [J3[:, 3 * i] + c_w * Jw[:, w], J3[:, 3 * i] - c_w * Jw[:, w]]
                for parts in (springs, dampings, soft) + ((weights,) if weights else ()):
                    parts += [parts[4 * i]] * 2
        J = xp.stack(rows, axis=1)
        v = xp.einsum("niv,nv->ni", J, qd)
        a_ref = [springs[j] - dampings[j] * v[:, j] for j in range(len(rows))]
        mu = xp.stack(mus, axis=-1)  # (N, P)
        sliding = touching & (mu > 0.0)  # the other three edges in the solve

        def point(S, i, fi, u):  # one point's four edges, Gauss-Seidel; fi (N, 4)
            out = []
            for e in range(4):
                fe, u = S.one_sided(4 * i + e, fi[:, e], u,
                                    touching[:, i] if e == 0 else sliding[:, i])
                out.append(fe)
            return xp.stack(out, axis=-1), u

        def finish(f, diag, entry):
            fe = f[:, :4 * P].reshape(f.shape[:-1] + (P, 4))
            pushes = [xp.sum(fe[:, i], axis=-1) for i in range(P)]  # twist edges push too
            for w, (i, _, _) in enumerate(self.twists):
                pushes[i] = pushes[i] + f[:, 4 * P + 2 * w] + f[:, 4 * P + 2 * w + 1]
            local = xp.stack([xp.stack(pushes, axis=-1) if P else xp.sum(fe, axis=-1),
                              mu * (fe[..., 0] - fe[..., 1]),
                              mu * (fe[..., 2] - fe[..., 3])], axis=-1)
            forces = xp.einsum("npj,npjk->npk", local, frames)
            # the normal's apparent mass 1 / (A_nn + R / 4): J_n = (J_e0 + J_e1) / 2, and
            # four edges of compliance R share a normal load (frictionless: J_e0, its R)
            stiffness = []
            for i in range(P):
                e0, e1 = 4 * i, 4 * i + 1
                a00 = entry(e0, e0)
                pair = 0.25 * (a00 + entry(e1, e1) + 2.0 * entry(e0, e1) + diag[:, e0] - a00)
                a_nn = xp.where(mu[:, i] > 0.0, pair, diag[:, e0])
                stiffness.append(self.stabilisation(p, i)[0] / a_nn)
            out = {"forces": forces, "edges": fe, "stiffness": xp.stack(stiffness, axis=-1)}
            if self.twists:
                out["twists"] = f[:, 4 * P:]
            return forces, out

        start = xp.where(touching[..., None], state["edges"], 0.0)
        start = start.reshape(start.shape[:1] + (4 * P,))
        if self.twists:
            start = xp.concatenate([start, state["twists"] * xp.stack(
                [active for i, _, _ in self.twists
                 for active in (xp.where(touching[:, i], 1.0, 0.0),) * 2], axis=-1)], axis=-1)
        first_edges = tuple(4 * (j // 4) for j in range(4 * P)) + tuple(
            4 * i for i, _, _ in self.twists for _ in range(2))
        sweep = self._twisting(xp, self._sweep(xp, P, 4, touching, point), 4 * P, touching,
                               None, one_sided=True)
        return Rows(J, xp.stack(a_ref, axis=-1), start, xp.stack(soft, axis=-1), sweep,
                    finish, first_edges, xp.stack(weights, axis=-1) if weights else None,
                    dofs=self._row_dofs(4))

    def _twist_rows(self, xp, turning, frames):
        """(N, W, nv): the twist rows (``twists``): each point's relative angular velocity
        ``turning`` (N, P, 3, nv) (``rows``' with ``angular``) along its frame's axis
        (frames (N, P, 3, 3): [n; t1; t2], world)."""
        return xp.stack([xp.einsum("nj,njv->nv", frames[:, i, axis], turning[:, i])
                         for i, axis, _ in self.twists], axis=1)

    def _twisting(self, xp, sweep, first, touching, normal_force, one_sided, cone=None):
        """The sweep ``sweep`` followed by the twist rows' (``twists``, columns ``first`` on),
        each point's in turn, Gauss-Seidel, skipped where it may not touch (``touching``
        (N, P)). ``one_sided`` (the pyramid's edges): each pushes, never pulls; ``cone``
        (the convex cone's ``_cone``, cone(S, i, rows, f_i, u, twist)): the point's three
        rows and its twist rows in one step, within MuJoCo's elliptic cone (``sweep`` left
        them); else (the disc's) the spin's torque within torsion f_n, the rolling's within
        the disc of radius rolling f_n, f_n = ``normal_force(f, i)``, the point's normal
        force as the sweep left it."""
        if not self.twists:
            return sweep
        width = 2 if one_sided else 1
        points = {}  # point -> (its first column, its rows' (axis, coefficient))
        for w, (i, axis, c) in enumerate(self.twists):
            points.setdefault(i, (first + width * w, []))[1].append((axis, c))

        def twisting(S, first_, f, u):
            f, u = sweep(S, first_, f, u)
            for i, (start, rows) in points.items():
                count = width * len(rows)

                def step(x, i=i, start=start, rows=rows, count=count):
                    fg, u = x
                    if cone:  # columns 3i, 3i+1, 3i+2 and its twist rows': fg (N, 3 + count)
                        return cone(S, i, (3 * i, 3 * i + 1, 3 * i + 2) + tuple(
                            range(start, start + count)), fg, u, tuple(c for _, c in rows))
                    if one_sided:
                        out = []
                        for k in range(count):
                            fk, u = S.one_sided(start + k, fg[:, k], u, touching[:, i])
                            out.append(fk)
                        return xp.stack(out, axis=-1), u
                    fn = xp.maximum(normal_force(f, i), 0.0)
                    out, k = [], 0
                    if rows[0][0] == 0:  # the spin: a box of half-width torsion f_n
                        limit = rows[0][1] * fn
                        new, u = S.boxed(start, fg[:, 0], u, -limit, limit)
                        out, k = [new], 1
                    if k < len(rows):  # the rolling: a disc of radius rolling f_n
                        j1, j2 = start + k, start + k + 1
                        g1, g2 = self._tangents(xp, S, j1, j2, fg[:, k], fg[:, k + 1], u,
                                                rows[k][1] * fn)
                        u = S.moved(S.moved(u, j1, g1, fg[:, k]), j2, g2, fg[:, k + 1])
                        out += [g1, g2]
                    return xp.stack(out, axis=-1), u

                if cone:
                    fg, u = when(xp, touching[:, i], step, (xp.concatenate(
                        [columns(xp, f, 3 * i, 3), columns(xp, f, start, count)], axis=1), u))
                    f = put_columns(xp, put_columns(xp, f, 3 * i, fg[:, :3]), start, fg[:, 3:])
                    continue
                fg, u = when(xp, touching[:, i], step, (columns(xp, f, start, count), u))
                f = put_columns(xp, f, start, fg)
            return f, u
        return twisting

    def tangent_hints(self, xp, p, T):
        """(N, P, 3) or None: the direction each point's first tangent takes in MuJoCo's
        contact frame, where its collision sets one (a capsule on a plane: its axis; zero
        elsewhere), for the pyramidal cone's edges; None: MuJoCo's default everywhere (a
        ground's points)."""
        return None

    @staticmethod
    def _mujoco_frames(xp, frames, hints):
        """(frames (N, P, 3, 3), c (N, P), s (N, P)): the points' frames [n; t1'; t2'] as
        MuJoCo makes them (``mju_makeFrame``: t1' the hint, else (0, 1, 0), or (0, 0, 1) where
        the normal is within 60 deg of y, made normal to n; x where that leaves nothing: a
        capsule standing on its plane, its axis along n; y where n is x too, where MuJoCo's
        frame would have no second tangent; t2' = n x t1'), and t1' = c t1 +
        s t2 in the given frames' tangents (t2' = c t2 - s t1). The elliptic cone does not
        depend on the tangents; the pyramid's edges do."""
        n, t1, t2 = frames[..., 0, :], frames[..., 1, :], frames[..., 2, :]
        along_y = xp.abs(n[..., 1:2]) < 0.5
        h = xp.where(along_y, xp.asarray(np.array([0.0, 1.0, 0.0])),
                     xp.asarray(np.array([0.0, 0.0, 1.0])))
        if hints is not None:
            h = xp.where(xp.sum(hints * hints, axis=-1, keepdims=True) > 0.25, hints, h)
        u = h - xp.sum(n * h, axis=-1, keepdims=True) * n
        norm = xp.sqrt(xp.sum(u * u, axis=-1, keepdims=True))
        none = norm < _MIN_NORM  # MuJoCo's mju_normalize3 of nothing: x, unless x is n
        x = xp.asarray(np.array([1.0, 0.0, 0.0]))
        along_x = xp.abs(n[..., :1]) > 1.0 - _MIN_NORM  # (MuJoCo's frame would degenerate)
        fallback = xp.where(along_x, xp.asarray(np.array([0.0, 1.0, 0.0])), x)
        u = xp.where(none, fallback, u / xp.where(none, 1.0, norm))
        turned = xp.stack([n, u, xp.cross(n, u, axis=-1)], axis=-2)
        return turned, xp.sum(u * t1, axis=-1), xp.sum(u * t2, axis=-1)

    def _sweep(self, xp, P, width, touching, point):
        """sweep(S, first, f, u) -> (f, u) of ``Rows``: the P points in turn, ``width`` rows
        each, by ``point(S, i, f_i (N, width), u) -> (f_i, u)``, in groups (``groups``): a
        group none of whose points may touch (``touching`` (N, P)) skips its rows."""
        def group(S, first, count, near, fu):  # points first .. first+count-1 in turn, where
            f, u = fu                            # one of them may touch (near (N,))

            def rows(x):
                fg, u = x
                out = []
                for k in range(count):
                    fi, u = point(S, first + k, fg[:, width * k:width * (k + 1)], u)
                    out.append(fi)
                return xp.concatenate(out, axis=1), u

            # a group apart (every force 0 from the start) skips its rows: in native code a
            # branch, so that a robot's links away from the ground and a scene's pairs apart
            # cost one test a sweep, not one a point
            fg, u = when(xp, near, rows, (columns(xp, f, width * first, width * count), u))
            return put_columns(xp, f, width * first, fg), u

        if is_jax_namespace(xp):  # one loop over the points (a group each: an index traced)
            def sweep(S, _first, f, u):
                return loop(xp, P, lambda i, fu: group(S, i, 1, touching[:, i], fu), (f, u))
        else:  # the groups unrolled (native code: in the loop of the sweeps)
            groups = [(first, stop - first, xp.any(touching[:, first:stop], axis=-1))
                      for first, stop in self.groups]  # whether one of a group's may touch

            def sweep(S, _first, f, u):
                fu = (f, u)
                for first, count, near in groups:
                    fu = group(S, first, count, near, fu)
                return fu
        return sweep

    @staticmethod
    def _cone(xp, S, rows, fi, u, mu, active, twist=(), steps=_CONE_STEPS):
        """(f_i (N, d), u): one point's block step for ``cone="convex"`` (MuJoCo's elliptic
        cone): its forces f = (f_n, f_t1, f_t2, twist...) on its d ``rows`` (the normal, the
        two tangents, then its twist rows, ``twists``), from fi, minimising the problem's
        objective over them with the other forces held, within the cone
        sqrt(|f_t|^2 + sum_w (mu f_w / c_w)^2) <= mu f_n (MuJoCo's, of the coefficients c_w of
        ``twist``; normal and friction together: a sliding point's friction on the cone's
        surface, its normal force what the one problem gives, not the frictionless one's);
        zero where ``active`` (N,) is False. In the coordinates x_w = mu f_w / c_w the cone
        is the isotropic |x_t| <= mu x_n. The block is G = A + R of its rows (regularised as
        the sweeps; its first three rows' off-diagonal ``Sweep.neighbours``, the twist rows'
        ``Sweep.entry``), the gradient g = G f + the rows' bias; the unconstrained minimiser
        where it lies in the cone (a point that sticks: exact in one step), zero where the
        objective's gradient at zero lies in the dual cone (a point pulled off), else (a
        point that slides) ``steps`` projected-gradient steps in the metric D = s diag(G) (the
        tangents' the largest; s >= 1 the bound on G's normalised rows that makes D >= G, so
        that each step lowers the objective), from the lowest of fi, the minimiser's
        projection and the best points of the cone's surface along the minimiser's friction
        and along fi's (exact where G is isotropic in the tangents and decoupled: the steps
        then polish): any fixed point of the sweeps is the problem's optimum, the steps what
        makes it one. On numpy the steps run only where a point slides (``loops.when``); in
        native code a point's rows are inside its group's ``when``, so they run at every
        visit."""
        d, n = len(rows), rows[0]
        f0 = [fi[:, k] for k in range(d)]
        g = [S.gradient(j, f0[k], u) for k, j in enumerate(rows)]
        a, b, c = S.diag[:, n], S.neighbours[0][:, n], S.neighbours[1][:, n]
        G = [[a, b, c], [b, S.diag[:, n + 1], S.neighbours[0][:, n + 1]],
             [c, S.neighbours[0][:, n + 1], S.diag[:, n + 2]]]
        for k in range(3, d):  # the twist rows: entries found here
            G[k:k] = [[S.entry(rows[k], rows[m]) for m in range(k)] + [S.diag[:, rows[k]]]]
            for m in range(k):
                G[m].append(G[k][m])
        scale = [1.0, 1.0, 1.0] + [c_w / xp.where(mu > 0.0, mu, 1.0) for c_w in twist]
        if twist:  # to the coordinates of the isotropic cone, f = scale x
            G = [[scale[k] * G[k][m] * scale[m] for m in range(d)] for k in range(d)]
            g = [scale[k] * g[k] for k in range(d)]
            f0 = [f0[k] / scale[k] for k in range(d)]
        if d == 3:  # the unconstrained minimiser fi - G^-1 g (the adjugate; G positive definite)
            (a, b, c), e, h, f = G[0], G[1][1], G[1][2], G[2][2]
            adj = ((e * f - h * h, c * h - b * f, b * h - c * e),
                   (c * h - b * f, a * f - c * c, b * c - a * h),
                   (b * h - c * e, b * c - a * h, a * e - b * b))
            det = a * adj[0][0] + b * adj[0][1] + c * adj[0][2]
            free = [f0[k] - sum(adj[k][m] * g[m] for m in range(3)) / det for k in range(3)]
        else:  # by G's factor (a dense one: a chain)
            chain = list(range(-1, d - 1))
            step = spd.tree_solve(spd.tree_factor(G, chain), chain, g)
            free = [f0[k] - step[k] for k in range(d)]

        def norm(x):  # (N,): |x_t|, the friction's length
            return xp.sqrt(sum(x[k] * x[k] for k in range(1, d)))

        inside = norm(free) <= mu * free[0]
        # zero is the optimum where the objective's gradient there, g - G fi, lies in the
        # dual cone c_n >= mu |c_t| (a point pulled away, or unloaded by its neighbours)
        g0 = [g[k] - sum(G[k][m] * f0[m] for m in range(d)) for k in range(d)]
        off = (g0[0] >= mu * norm(g0)) & ~inside

        def objective(x):  # the block's objective relative to fi
            dx = [x[k] - f0[k] for k in range(d)]
            return sum(dx[k] * (g[k] + 0.5 * sum(G[k][m] * dx[m] for m in range(d)))
                       for k in range(d))

        def slide(_x):  # on the cone's surface: projected-gradient steps
            r = {(k, m): xp.abs(G[k][m]) / xp.sqrt(G[k][k] * G[m][m])
                 for k in range(d) for m in range(k + 1, d)}
            rows_r = [sum(r[min(k, m), max(k, m)] for m in range(d) if m != k)
                      for k in range(d)]
            widest = rows_r[0]
            for x in rows_r[1:]:
                widest = xp.maximum(widest, x)
            s = 1.0 + widest
            dt = G[1][1]
            for k in range(2, d):
                dt = xp.maximum(dt, G[k][k])
            dn, dt = s * G[0][0], s * dt

            def project(x):  # onto the cone in the metric diag(dn, dt, ...)
                t = norm(x)
                within = t <= mu * x[0]
                on = xp.maximum((dn * x[0] + mu * dt * t) / (dn + mu * mu * dt), 0.0)
                shrink = xp.where(within, 1.0, mu * on / xp.where(t > 0.0, t, 1.0))
                return [xp.where(within, x[0], on)] + [x[k] * shrink for k in range(1, d)]

            def ray(x):  # the best point of the cone's surface along x's friction
                t = norm(x)
                w = [1.0 + 0.0 * t] + [mu * x[k] / xp.where(t > 0.0, t, 1.0)
                                       for k in range(1, d)]
                along = sum(g0[k] * w[k] for k in range(d))
                curve = sum(w[k] * sum(G[k][m] * w[m] for m in range(d)) for k in range(d))
                return [w[k] * xp.maximum(-along / curve, 0.0) for k in range(d)]

            x, best = f0, 0.0 * f0[0]  # the lowest of four starts (the objective: 0 at f0)
            for guess in (project(free), ray(free), ray(f0)):
                value = objective(guess)
                lower = value < best
                x = [xp.where(lower, guess[k], x[k]) for k in range(d)]
                best = xp.where(lower, value, best)
            for _ in range(steps):
                grad = [g[k] + sum(G[k][m] * (x[m] - f0[m]) for m in range(d))
                        for k in range(d)]
                x = project([x[0] - grad[0] / dn] + [x[k] - grad[k] / dt
                                                     for k in range(1, d)])
            return xp.stack(x, axis=-1)

        x = when(xp, active & ~inside & ~off, slide, xp.stack(f0, axis=-1))
        new = [xp.where(active & ~off, xp.where(inside, free[k], x[:, k]), 0.0)
               for k in range(d)]
        if twist:
            new = [scale[k] * new[k] for k in range(d)]
        for k, j in enumerate(rows):
            u = S.moved(u, j, new[k], fi[:, k])
        return xp.stack(new, axis=-1), u

    @staticmethod
    def _tangents(xp, S, t1, t2, f1, f2, u, limit):
        """(f_t1, f_t2) (N,): a point's friction, Gauss-Seidel, from (f1, f2), within the disc
        of radius ``limit`` (mu f_n). Each tangent steps by its own diagonal of A where that
        lands inside the disc (it sticks); else both step by one, 1 / s, s the larger of their
        diagonals, and are projected on the disc: projected, steps that differed between the
        tangents would turn the friction away from the sliding (a fixed point that is not
        Coulomb's: a bar sent at 45 deg slid off at 62 deg, 16% too far). With the rows'
        compliance R_t (``RigidContact.impratio``) in their residuals: a point that sticks
        creeps at R_t f_t / b; without (rigid friction), it does not."""
        r1, r2 = S.gradient(t1, f1, u), S.gradient(t2, f2, u)
        a11, a22 = S.diag[:, t1], S.diag[:, t2]
        held1, held2 = f1 - r1 / a11, f2 - r2 / a22
        inside = held1 * held1 + held2 * held2 <= limit * limit
        step = xp.maximum(a11, a22)
        g1, g2 = f1 - r1 / step, f2 - r2 / step
        square = g1 * g1 + g2 * g2
        big = square > limit * limit
        scale = xp.where(big, limit / xp.sqrt(xp.where(big, square, 1.0)), 1.0)
        return xp.where(inside, held1, g1 * scale), xp.where(inside, held2, g2 * scale)

    # -- what the checks and the record need -------------------------------------------------
    def springs(self, model, p, q, M):
        """The stabilisation, per unit apparent mass (k 1/s^2, b 1/s, mass 1)."""
        return [(f"the rigid contact's stabilisation (timeconst {self.ground.timeconst:g} s)",
                 float(p["k"]), float(p["b"]), 1.0)]

    def describe(self, p):
        g = self.ground
        return {"kind": "rigid", "points": len(self.labels), "mu": float(p["mu"]),
                "timeconst": g.timeconst, "dampratio": g.damping_ratio,
                "iterations": g.iterations, "impedance": g.impedance.describe(),
                "impratio": g.impratio, "cone": g.cone, "invweight0": g.invweight0,
                "torsion": g.torsion, "rolling": g.rolling,
                "height": float(g.height),
                "normal": [float(x) for x in np.asarray(p.get("normal", (0.0, 0.0, 1.0)))],
                "labels": list(self.labels)}


def runs(keys):
    """((first, stop), ...): the runs of equal consecutive items of ``keys``, in order."""
    out = []
    for i, key in enumerate(keys):
        if out and keys[out[-1][0]] == key:
            out[-1][1] = i + 1
        else:
            out.append([i, i + 1])
    return tuple((first, stop) for first, stop in out)


class Rows(NamedTuple):
    """A block of constraint rows for ``solve_rows``: what one kind of constraint (the
    contact's points, the joint limits) brings to the solve."""

    #: (N, r, nv): the rows, each the velocity J qd along which one force component acts
    J: Any
    #: (N, r): the reference accelerations the rows are driven to (the stabilisation)
    a_ref: Any
    #: (N, r): the forces the sweeps start from (the previous step's: the warm start)
    start: Any
    #: (N, r): each row's compliance relative to a diagonal of A, R_jj / A_kk (k: the row's
    #: ``relative_to``): (1 - d) / d of an impedance d on a one-sided row, 0 for a rigid one;
    #: a contact's tangential rows: the normal's over ``impratio``
    compliance: Any
    #: sweep(S, first, f, u) -> (f, u): one Gauss-Seidel pass over the block's rows, columns
    #: first .. first + r - 1 of f (N, R), with u = M^-1 J^T f (N, nv) kept up to date
    #: (``Sweep``'s helpers)
    sweep: Callable
    #: finish(f (N, r), diag (N, r), entry) -> what the block's owner returns from the solve
    #: (diag: the rows' steps, A_jj + R_jj regularised; entry(i, j) (N,): A_ij of its rows)
    finish: Callable
    #: (r,) or None: for each row, the row of the block whose A_kk its compliance scales
    #: (MuJoCo's: a contact's rows all the normal's); None: each row its own
    relative_to: Any = None
    #: (N, r) or None: what the compliance scales in place of A's diagonal (MuJoCo's
    #: approximation of it, ``RigidContact.invweight0``); None: A_kk (``relative_to``)
    weights: Any = None
    #: whether the sweep reads its rows' A_j,j+1 and A_j,j+2 (``Sweep.neighbours``: found once,
    #: before the sweeps; a point's 3 x 3 block, ``SolvedContact._cone``)
    neighbours: bool = False
    #: (r,) tuples or None: for each row, velocity coordinates its J reads (a contact point's
    #: links' paths to the root, a limit's own), which tell the sweeps the trees (the world's
    #: subtrees) whose u a change of its force moves (``tree_spans``); None: any
    dofs: Any = None


class Sweep:
    """What the blocks' sweeps read: the residual of a row and the update of
    u = M^-1 J^T f (N, nv) as a force changes. A is never formed: a row's residual
    bias + A[j] . f is bias + J[j] . u (nv products a row, not R; MuJoCo's PGS forms it)."""

    def __init__(self, xp, J, MinvJT, bias, diag, R, spans=None):
        #: J (N, R, nv), M^-1 J^T (N, nv, R), bias J qdd0 - a_ref (N, R), the compliance
        #: R (N, R) and the step's diagonal, of A + R, regularised (N, R)
        self.xp, self.J, self.MinvJT, self.bias, self.diag = xp, J, MinvJT, bias, diag
        self.R = R
        #: per row, the runs (start, stop) of coordinates where its column of M^-1 J^T may
        #: be nonzero (``tree_spans``), or None: all
        self.spans = spans
        #: ((N, R), (N, R)): A_j,j+1 and A_j,j+2 of the rows of the blocks that read them
        #: (``Rows.neighbours``), zero elsewhere (``with_neighbours``)
        self.neighbours = None

    def with_neighbours(self, spans):
        """Sets ``neighbours`` for the rows of each (first, stop) of ``spans`` (those of the blocks
        whose sweeps read them): found once, before the sweeps."""
        xp, R = self.xp, self.J.shape[1]
        out = []
        for k in (1, 2):
            parts, at = [], 0
            for first, stop in spans:
                near = xp.sum(self.J[:, first:stop - k]
                              * xp.moveaxis(self.MinvJT[:, :, first + k:stop], -1, -2), axis=-1)
                parts += [0.0 * self.bias[:, at:first], near, 0.0 * self.bias[:, stop - k:stop]]
                at = stop
            parts.append(0.0 * self.bias[:, at:R])
            out.append(xp.concatenate([q for q in parts if q.shape[1]], axis=1))
        self.neighbours = tuple(out)

    def residual(self, j, u):
        """(N,): row j's acceleration error bias_j + (A f)_j."""
        return self.bias[:, j] + self.xp.sum(self.J[:, j] * u, axis=-1)

    def entry(self, i, j):
        """(N,): A_ij = J_i M^-1 J_j^T (without compliance or regularization)."""
        return self.xp.sum(self.J[:, i] * self.MinvJT[:, :, j], axis=-1)

    def moved(self, u, j, new, old):
        """u after f_j changed from old to new (N,): where ``spans`` are given (traced, j an
        int), only the coordinates of the trees row j moves, the same numbers as all of them
        (M^-1 J_j^T is exactly zero in the others) in fewer operations: 16 balls in a pile,
        12 of 96 coordinates a row (6 on the ground), ran 1.7x faster, in the same bits."""
        delta = (new - old)[:, None]
        spans = None if self.spans is None or not isinstance(j, (int, np.integer)) \
            else self.spans[j]
        if spans is None:
            return u + self.MinvJT[:, :, j] * delta
        parts, at = [], 0
        for first, stop in spans:
            parts += [u[:, at:first], u[:, first:stop] + self.MinvJT[:, first:stop, j] * delta]
            at = stop
        parts.append(u[:, at:])
        return self.xp.concatenate([x for x in parts if x.shape[1]], axis=1)

    def gradient(self, j, fj, u):
        """(N,): row j's residual with its compliance R_j (a soft constraint's), at its force
        fj (N,): bias_j + (A f)_j + R_j f_j, the gradient of the sweeps' objective along f_j."""
        return self.residual(j, u) + self.R[:, j] * fj

    def held(self, j, fj, u):
        """(N,): row j's force after its unconstrained Gauss-Seidel step from fj (N,), the one
        that zeroes its ``gradient`` (by its regularised diagonal): what a bounded row clips."""
        return fj - self.gradient(j, fj, u) / self.diag[:, j]

    def one_sided(self, j, fj, u, active):
        """(f_j, u): row j's Gauss-Seidel step for a force that pushes, never pulls
        (f_j >= 0), from fj (N,) (``held``, clipped at zero); zero where ``active`` (N,) is
        False."""
        new = self.xp.where(active, self.xp.maximum(self.held(j, fj, u), 0.0), 0.0)
        return new, self.moved(u, j, new, fj)

    def boxed(self, j, fj, u, low, high):
        """(f_j, u): row j's Gauss-Seidel step for a force bounded to [low, high] (N,) or
        scalars (a dry friction's, a spin's torque), from fj (N,) (``held``, clipped)."""
        new = self.xp.minimum(self.xp.maximum(self.held(j, fj, u), low), high)
        return new, self.moved(u, j, new, fj)


def row_diagonal(xp, M, J, regularization):
    """(N, R): the diagonal of A = J M^-1 J^T (each row's inverse apparent mass), regularised
    as the sweeps' steps (without a compliance), for rows J (N, R, nv) and the mass matrix M
    (N, nv, nv): what the stabilisation's stiffness k / A_jj of a row is made of at the
    initial states."""
    MinvJT = spd.solve(xp, M, xp.moveaxis(J, -1, -2))  # (N, nv, R)
    return xp.sum(J * xp.moveaxis(MinvJT, -1, -2), axis=-1) * (1.0 + regularization) + 1e-30


def solve_rows(xp, model, M, J_eq, qdd0, blocks, iterations, regularization,
               eq_soft=None):
    """(qdd (N, nv), tau_c (N, nv), [block.finish(f_b, diag_b, entry_b) for each block]): the
    forces f of the module docstring's problem for the rows of ``blocks`` (``Rows``) together, by
    ``iterations`` projected Gauss-Seidel sweeps (each block's sweep in turn), for the
    model's mass matrix M (N, nv, nv) and the accelerations qdd0 (N, nv) without these
    forces. qdd = qdd0 + M^-1 J^T f; tau_c = J^T f, the joint forces they make.

    ``J_eq`` (N, m, nv) or None: the model's equality constraints (``constraint_jacobian``),
    which qdd0 satisfies: the rows then act through the constrained inverse inertia
    M_c^-1 = M^-1 - M^-1 J_eq^T A_eq^-1 J_eq M^-1 (A_eq = J_eq M^-1 J_eq^T, regularised as in
    ``constrained_forward_dynamics``), so that qdd keeps them, and tau_c also holds the change
    of the equality forces, J^T f - J_eq^T A_eq^-1 J_eq M^-1 J^T f. ``eq_soft``: the soft
    equalities' ``Softness`` (``algorithms.constraints.impedance_terms``) or None (all hard):
    their compliance joins A_eq (A_eq + R_eq: the soft rows eliminated exactly, as
    ``constrained_forward_dynamics`` solves them)."""
    J = xp.concatenate([b.J for b in blocks], axis=1)  # (N, R, nv)
    firsts = np.cumsum([0] + [b.J.shape[1] for b in blocks]).tolist()
    MinvJT = inverse_inertia(xp, model, M, J)  # (N, nv, R)
    if J_eq is not None:  # project on the equality constraints
        MinvJeT = spd.solve(xp, M, xp.moveaxis(J_eq, -1, -2))  # (N, nv, m)
        A_eq = xp.einsum("niv,nvj->nij", J_eq, MinvJeT)
        m = J_eq.shape[1]
        scale = sum(A_eq[:, i, i] for i in range(m)) * (EPSILON / m) + 1e-300
        if eq_soft is not None:
            R_eq = eq_soft.rows(xp, xp.stack([A_eq[:, i, i] for i in range(m)], axis=-1))
            A_eq = A_eq + R_eq[:, :, None] * np.eye(m)
        X = spd.solve(xp, A_eq + scale[:, None, None] * np.eye(m),
                      xp.einsum("niv,nvj->nij", J_eq, MinvJT))  # (N, m, R)
        MinvJT = MinvJT - xp.einsum("nvi,nij->nvj", MinvJeT, X)
    bias = xp.einsum("niv,nv->ni", J, qdd0) - xp.concatenate([b.a_ref for b in blocks],
                                                             axis=1)
    A_diag = xp.sum(J * xp.moveaxis(MinvJT, -1, -2), axis=-1)
    scales = []  # each block's: what its compliance multiplies
    for b, first, stop in zip(blocks, firsts, firsts[1:]):
        if b.weights is not None:
            scales.append(b.weights)
        elif b.relative_to is None:
            scales.append(A_diag[:, first:stop])
        else:  # rows scaled by another's A_kk
            scales.append(xp.stack([A_diag[:, first + j] for j in b.relative_to], axis=-1))
    R = xp.concatenate(scales, axis=-1) * xp.concatenate([b.compliance for b in blocks],
                                                         axis=-1)
    # traced (native code, every operation code): each row's updates only its trees'
    trees = tree_spans(model, blocks) if getattr(xp, "traced", False) and J_eq is None \
        else None
    S = Sweep(xp, J, MinvJT, bias, A_diag * (1.0 + regularization) + R + 1e-30, R, trees)
    spans = [(first, stop) for b, first, stop in zip(blocks, firsts, firsts[1:])
             if b.neighbours]
    if spans:
        S.with_neighbours(spans)

    def sweep(_, fu):
        f, u = fu
        for b, first in zip(blocks, firsts):
            f, u = b.sweep(S, first, f, u)
        return f, u

    start = xp.concatenate([b.start for b in blocks], axis=1)
    f, _ = loop(xp, iterations, sweep, (start, xp.einsum("nvi,ni->nv", MinvJT, start)),
                indexed=False)
    tau_c = xp.einsum("niv,ni->nv", J, f)
    if J_eq is not None:
        tau_c = tau_c - xp.einsum("niv,ni->nv", J_eq, xp.einsum("nij,nj->ni", X, f))
    qdd = qdd0 + xp.einsum("nvi,ni->nv", MinvJT, f)
    return qdd, tau_c, [b.finish(f[:, first:stop], S.diag[:, first:stop],
                                 lambda i, j, first=first: S.entry(first + i, first + j))
                        for b, first, stop in zip(blocks, firsts, firsts[1:])]


def tree_spans(model, blocks):
    """Per row of ``blocks`` (in order), the runs (start, stop) of velocity coordinates of the
    trees (the world's subtrees: M is block diagonal over them) that hold the coordinates its
    J reads (``Rows.dofs``): where its column of M^-1 J^T can be nonzero. None where not
    known (a block without ``dofs``), or where every row's trees are all of them (one robot),
    or for a coupled model (mimic joints may tie trees). Equality constraints may tie trees
    too: ``solve_rows`` does not ask then."""
    from ..algorithms.derivatives import dof_parents

    if model.coupled or any(b.dofs is None for b in blocks):
        return None
    root = []  # each coordinate's tree: its first coordinate
    for k, p in enumerate(dof_parents(model)):
        root.append(k if p < 0 else root[p])
    nv, out = len(root), []
    for b in blocks:
        for dofs in b.dofs:
            trees = {root[k] for k in dofs}
            keep = [k for k in range(nv) if root[k] in trees]
            # consecutive coordinates k have one k - i
            out.append(tuple((keep[first], keep[stop - 1] + 1) for first, stop
                             in runs([k - i for i, k in enumerate(keep)])))
    if all(spans == ((0, nv),) for spans in out):
        return None
    return tuple(out)


def inverse_inertia(xp, model, M, J):
    """M^-1 J^T (N, nv, R) for ``model``'s mass matrix M (N, nv, nv) and rows J (N, R, nv).
    On arrays (numpy, JAX): all columns at once by M's dense Cholesky factor (a few wide
    operations). Traced into a native program (``xp.traced``), where every scalar
    operation is code: one solve through the tree's factor M = L^T D L
    (``spd.tree_factor``, no fill-in outside the paths to the root), traced once and
    mapped over the R columns (``entries.map_columns``: several columns at a time in
    vector lanes), so that the program does not grow with the rows (Romeo's 368
    points: 26 s to compile, 9.6 ms a step, where one solve per column took 72 s and 25
    ms). The same numbers up to rounding. A coupled model's (mimic joints) M is not a
    tree's: dense there too."""
    if not getattr(xp, "traced", False) or model.coupled:
        return spd.solve(xp, M, xp.moveaxis(J, -1, -2))
    from ..algebra.entries import map_columns
    from ..algorithms.derivatives import dof_parents

    parent = dof_parents(model)
    nv = len(parent)
    H = spd.tree_factor([[M[:, k, i] for i in range(nv)] for k in range(nv)], parent)
    solved = map_columns(xp, lambda b: spd.tree_solve(H, parent, b),
                        [[J[:, j, v] for v in range(nv)] for j in range(J.shape[1])])
    return xp.stack([xp.stack(x, axis=-1) for x in solved], axis=-1)


def columns(xp, f, first, count):
    """(N, count): columns first .. first+count-1 of f (N, R) (first: an int, or a traced one
    under JAX)."""
    if is_jax_namespace(xp):
        from jax import lax

        return lax.dynamic_slice_in_dim(f, first, count, axis=1)
    return f[:, first:first + count]


def put_columns(xp, f, first, fg):
    """f (N, R) with columns first, first+1, ... replaced by fg (N, count) (as ``columns``).
    A copy of the other columns, not a where over all of them: in the native tracer a where
    is one folded select per column, which made tracing ANYmal's 492 points quadratic (22 of
    its 32 seconds)."""
    if is_jax_namespace(xp):
        from jax import lax

        return lax.dynamic_update_slice(f, fg.astype(f.dtype), (0, first))
    return xp.concatenate([f[:, :first], fg, f[:, first + fg.shape[1]:]], axis=1)
