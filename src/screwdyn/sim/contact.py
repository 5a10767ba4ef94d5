"""Ground contact: contact spheres on the robot's links against a ground plane, with a compliant
normal force and stick-slip Coulomb friction.

The plane passes through (0, 0, ``height``) with unit ``normal`` n (default (0, 0, 1)). A contact
sphere of radius r centred at c (world) penetrates it by d = r - n . (c - (0, 0, height)); its
contact point is p = c - r n, moving at v (the velocity of the link's material point there).

**Normal force** (Hunt and Crossley, with a linear spring):

    F_n = k d (1 + c_d d')   for d > 0 and 1 + c_d d' > 0, else 0,      d' = -n . v

k (N/m) is ``stiffness``, c_d (s/m) is ``dissipation``. The force grows from zero at first touch
(no jump, no pull when the bodies separate), and its damping grows with the penetration, so that
a loaded contact is damped and a grazing one is not. Defaults: k is chosen from the model, so
that its whole weight resting on one contact point sinks ``sink`` = 0.75 mm (k = total mass x
9.81 / sink: 4e5 N/m for a 30 kg quadruped, 1.3e4 N/m for a 1 kg ball); four feet sink a quarter
of it. c_d = 1 s/m: a 1 m drop rebounds a little (restitution 0.2) and settles within a second; a
resting contact rings at sqrt(9.81 / sink) = 114 rad/s (18 Hz), lightly damped.

**Friction** (stick-slip: an elasto-plastic spring per contact point, the Cundall-Strack model of
discrete-element codes). A point that touches the ground sticks to an anchor on the plane; the
tangential force is the spring-damper

    F_t = -(k_t delta + b_t v_t),   delta = tangential offset from the anchor of the material
                                            point under the contact (accumulated step by step:
                                            a sphere rolling without slip does not load it),
                                    b_t = c_t k d  (the normal spring force times c_t)

clipped to the friction cone |F_t| <= mu F_n. After each step the anchor follows the point so that
k_t |delta| <= mu k d (the spring cannot hold more than the cone): a point pushed beyond the cone
slides with |F_t| = mu F_n against its sliding direction; below it, it stays put at a deflection
of at most mu F_n / k_t (a few tenths of a millimetre with the defaults): a robot on a slope below
its friction angle stands still, without creep (a regularised Coulomb law would creep at a rate
set by its regularisation, and stiffen the equations by mu F_n / v_s). ``tangential_stiffness``
k_t defaults to k / 4 (it only sets that deflection; the lightest direction of a robot's foot is
often sideways, where a softer spring lets longer steps stay stable), ``tangential_dissipation``
c_t to c_d. The springs are state that the rollout carries from step to step; a point off the
ground has none (its anchor follows it).

**Energy**: the springs store k d^2 / 2 + k_t |delta|^2 / 2 (``traj.elastic``); what the dampers,
the cone and the sliding anchors take is the dissipated energy (``traj.dissipated``).

Everything is written once for numpy and JAX (traced, batched, differentiable: the clips and the
cone have finite gradients everywhere), in the batch-first layout of the rollout: q (N, nq),
points (N, P, 3).
"""
from dataclasses import dataclass

import numpy as np

from .checks import is_traced, positive
from .geometry import ContactPoint, contact_points  # noqa: F401  (ContactPoint: public here too)

STANDARD_GRAVITY = 9.81  # m/s^2: the weight the default stiffness is scaled by
TANGENTIAL_FRACTION = 0.25  # the default stick-slip spring's stiffness, a fraction of k


@dataclass(frozen=True, eq=False)
class GroundContact:
    """A ground plane the robot's contact points touch (see the module docstring).

    mu: Coulomb friction coefficient (>= 0).
    stiffness: normal stiffness k per contact point (N/m); None: total mass x 9.81 / sink.
    dissipation: Hunt-Crossley dissipation c_d (s/m, >= 0).
    tangential_stiffness: k_t of the stick-slip spring (N/m); None: a quarter of the normal
        stiffness.
    height: the plane passes through (0, 0, height) (m).
    normal: the plane's normal, pointing out of the ground (3,), normalised here.
    points: the contact points: None (the collision geometry of ``model.source``), a dict
        {link: [(x, y, z), ...]} of points in link frames (m), or a sequence of
        ``ContactPoint(link, position, radius)``.
    links: only the collision geometry of these links (names), e.g. the feet.
    rim_points: points on each end rim of a collision cylinder.
    sink: the default stiffness lets the model's whole weight sink this much (m) on one point.

    Every number may be a JAX array (e.g. to differentiate a rollout with respect to mu).
    """

    mu: float = 0.8
    stiffness: float = None
    dissipation: float = 1.0
    tangential_stiffness: float = None
    tangential_dissipation: float = None
    height: float = 0.0
    normal: tuple = (0.0, 0.0, 1.0)
    points: object = None
    links: tuple = None
    rim_points: int = 8
    sink: float = 0.75e-3

    def __post_init__(self):
        positive(self.mu, "GroundContact.mu", allow_zero=True)
        for name in ("stiffness", "tangential_stiffness"):
            if getattr(self, name) is not None:
                positive(getattr(self, name), f"GroundContact.{name}")
        positive(self.dissipation, "GroundContact.dissipation", allow_zero=True)
        if self.tangential_dissipation is not None:
            positive(self.tangential_dissipation, "GroundContact.tangential_dissipation",
                     allow_zero=True)
        positive(self.sink, "GroundContact.sink")
        check_plane(self.height, self.normal, "GroundContact")
        if self.links is not None and isinstance(self.links, str):
            object.__setattr__(self, "links", (self.links,))

    def resolve(self, model, dt=None):
        """The ``Contact`` of this ground and ``model``'s contact points (``dt``, the step:
        unused, a spring has no time constant to make safe)."""
        points = contact_points(model, self.points, self.links, self.rim_points)
        return Contact(model, self, points)


def check_plane(height, normal, owner):
    """Raise ``ValueError`` (naming ``owner``'s field) unless ``height`` is a finite number and
    ``normal`` a nonzero finite 3-vector (traced JAX values pass unchecked)."""
    if not is_traced(height):
        h = np.asarray(height)
        if h.shape != () or h.dtype.kind not in "biuf" or not np.isfinite(h):
            raise ValueError(f"{owner}.height must be a finite number (m), got {height!r}")
    if not is_traced(normal):
        n = np.asarray(normal)
        if n.dtype.kind not in "biuf" or n.shape != (3,) or not np.all(np.isfinite(n)) \
                or np.linalg.norm(n) == 0:
            raise ValueError(f"{owner}.normal must be a nonzero 3-vector, got {normal!r}")


class Contact:
    """A ground contact bound to a model: the static structure (which link each point is on)
    and the parameters, as arrays the compiled rollout takes as arguments (``params``). A
    ``contact_model.ContactModel``: the simulation calls nothing else of it."""

    def __init__(self, model, ground, points):
        self.ground, self.points = ground, points
        self.nlinks = model.nlinks
        self.link = points.link
        # incidence (nlinks, P): sums the points' wrenches onto their links
        self.incidence = np.zeros((model.nlinks, len(points)))
        self.incidence[points.link, np.arange(len(points))] = 1.0
        weight = model.total_mass * STANDARD_GRAVITY
        self.default_stiffness = weight / float(ground.sink) if weight > 0 else None
        if ground.stiffness is None and self.default_stiffness is None:
            raise ValueError(f"model {model.name!r} has no mass, so GroundContact has no default "
                             "stiffness: give stiffness= (N/m)")

    @property
    def key(self):
        return ("ground", self.points.key)

    @property
    def labels(self):
        """What each contact point is (P,)."""
        return self.points.labels

    def params(self, xp=np):
        """The numbers of the force law: stiffness k, k_t, dissipation, mu, plane normal and
        height, point centres (P, 3) and radii (P,)."""
        g = self.ground
        k = g.stiffness if g.stiffness is not None else self.default_stiffness
        kt = g.tangential_stiffness if g.tangential_stiffness is not None \
            else TANGENTIAL_FRACTION * k
        ct = g.tangential_dissipation if g.tangential_dissipation is not None else g.dissipation
        n = xp.asarray(g.normal, dtype=float)
        return {"k": xp.asarray(k, dtype=float), "kt": xp.asarray(kt, dtype=float),
                "c": xp.asarray(g.dissipation, dtype=float),
                "ct": xp.asarray(ct, dtype=float), "mu": xp.asarray(g.mu, dtype=float),
                "normal": n / xp.sqrt(xp.sum(n * n)), "height": xp.asarray(g.height, dtype=float),
                "center": xp.asarray(self.points.center), "radius": xp.asarray(self.points.radius)}

    # -- kinematics ------------------------------------------------------------------------
    def positions(self, xp, p, T):
        """From link poses T (N, nlinks, 4, 4): the contact points (N, P, 3) in the world (the
        lowest point of each sphere), the penetration d (N, P) (positive in the ground), the
        points relative to their link origins in link axes (N, P, 3), and the links' rotations
        (N, P, 3, 3) and origins (N, P, 3)."""
        Tp = T[..., self.link, :, :]  # (N, P, 4, 4): the pose of each point's link
        R, origin = Tp[..., :3, :3], Tp[..., :3, 3]
        n = p["normal"]
        center = xp.einsum("...ij,...j->...i", R, xp.broadcast_to(p["center"], R.shape[:-1])) \
            + origin
        depth = p["radius"] - (xp.einsum("...i,i->...", center, n) - p["height"] * n[2])
        point = center - p["radius"][:, None] * n
        arm = xp.einsum("...ji,...j->...i", R, point - origin)  # R^T (point - origin)
        return point, depth, arm, R, origin

    def points_at(self, xp, p, T):
        """The contact points (N, P, 3) in the world (m) at link poses T (N, nlinks, 4, 4)."""
        return self.positions(xp, p, T)[0]

    def deepest(self, model, p, T):
        """(depth (m), label, None): the deepest penetration of a contact sphere into the
        ground at the link poses T (N, nlinks, 4, 4) (numpy; negative: none touches), and its
        point's label: what ``simulate`` checks before step 0 (``ContactModel.deepest``)."""
        depth = self.positions(np, p, T)[1]
        worst = np.unravel_index(np.argmax(depth), depth.shape)
        return float(depth[worst]), self.points.labels[worst[-1]], None

    def velocities(self, xp, V, arm, R):
        """World velocity (N, P, 3) of the links' material points at the contact points, from
        the link twists V (N, nlinks, 6) in link axes."""
        v, w = V[..., self.link, :3], V[..., self.link, 3:]
        return xp.einsum("...ij,...j->...i", R, v + xp.cross(w, arm))

    def _deflection(self, xp, p, R, origin, state):
        """The stick springs' deflection now: the deflection at the step's start plus the
        tangential displacement since then of the material point that was under the contact
        (for a rolling sphere, the point it rolls on: no slip, no deflection)."""
        moved = xp.einsum("...ij,...j->...i", R, state["material"]) + origin - state["start"]
        return state["delta"] + _tangential(xp, moved, p["normal"])

    # -- forces ----------------------------------------------------------------------------
    def forces(self, xp, p, T, V, state):
        """The contact forces at the configuration with link poses T and twists V, the springs
        in ``state``: (f_ext (N, nlinks, 6) link-frame wrenches, forces (N, P, 3) on the contact
        points in the world frame)."""
        point, depth, arm, R, origin = self.positions(xp, p, T)
        vel = self.velocities(xp, V, arm, R)
        n = p["normal"]
        inside = xp.maximum(depth, 0.0)
        spring = p["k"] * inside
        rate = -xp.einsum("...i,i->...", vel, n)
        normal = spring * xp.maximum(1.0 + p["c"] * rate, 0.0)
        delta = self._deflection(xp, p, R, origin, state)
        v_t = _tangential(xp, vel, n)
        trial = -(p["kt"] * delta + (p["ct"] * spring)[..., None] * v_t)
        friction = cone(xp, trial, p["mu"] * normal)
        force = normal[..., None] * n + friction
        local = xp.einsum("...ji,...j->...i", R, force)  # R^T F
        wrench = xp.concatenate([local, xp.cross(arm, local)], axis=-1)  # (N, P, 6)
        f_ext = xp.einsum("lp,...pk->...lk", self.incidence, wrench)
        return f_ext, force

    def project(self, xp, p, T, state):
        """The springs at the start of a step: each deflection brought inside what the spring
        may hold, k_t |delta| <= mu k d (none at all off the ground: the anchor follows), the
        material point under each contact noted; and the elastic energy (N,) they store."""
        point, depth, arm, R, origin = self.positions(xp, p, T)
        inside = xp.maximum(depth, 0.0)
        delta = cone(xp, self._deflection(xp, p, R, origin, state),
                     p["mu"] * p["k"] * inside / p["kt"])
        elastic = 0.5 * p["k"] * inside ** 2 + 0.5 * p["kt"] * xp.sum(delta * delta, axis=-1)
        return {"delta": delta, "material": arm, "start": point}, xp.sum(elastic, axis=-1)

    def initial_state(self, xp, p, T):
        """The springs at the initial state: unloaded (no tangential force)."""
        point, _, arm, _, _ = self.positions(xp, p, T)
        return {"delta": 0 * point, "material": arm, "start": point}

    # -- what the checks and the record need -------------------------------------------------
    def springs(self, model, p, q, M):
        """(what, stiffness (N/m), damping (N s/m), effective mass (kg)) of the normal and the
        stick-slip spring of every point at the configuration q (nq,) with mass matrix M
        (nv, nv): each spring damped as when its point carries the model's whole weight (the
        worst case), its mass the point's apparent mass along the normal and along the
        lightest tangential direction."""
        from ..dynamics import forward_kinematics, jacobian

        Minv = np.linalg.inv(M)
        T = np.asarray(forward_kinematics(model, q))
        n = np.asarray(p["normal"])
        point = self.points_at(np, p, T[None])
        weight = model.total_mass * 9.81
        k, kt, c = (float(p[name]) for name in ("k", "kt", "c"))
        out, seen = [], {}
        for i, (link, label) in enumerate(zip(self.link, self.points.labels)):
            if link not in seen:
                seen[link] = np.asarray(jacobian(model, q, int(link), frame="world"))
            J = seen[link]
            r = point[0, i] - T[link, :3, 3]
            Jp = J[:3] - np.cross(r, J[3:].T).T  # velocity of the point: v + w x r
            inverse = Jp @ Minv @ Jp.T  # (3, 3): the point's inverse apparent inertia
            normal = float(n @ inverse @ n)
            tangent = np.eye(3) - np.outer(n, n)
            lightest = float(np.linalg.eigvalsh(tangent @ inverse @ tangent).max())
            # the springs, damped as when the point carries the whole weight (the worst case)
            if normal > 0:
                out.append((f"the contact at {label!r}", k, c * weight, 1 / normal))
            if lightest > 0:
                out.append((f"the friction spring at {label!r}", kt, c * weight, 1 / lightest))
        return out

    def describe(self, p):
        """The ground's numbers for ``traj.meta["contact"]``."""
        return {"points": len(self.points), "mu": float(p["mu"]),
                "stiffness": float(p["k"]), "tangential_stiffness": float(p["kt"]),
                "dissipation": float(p["c"]), "height": float(self.ground.height),
                "normal": [float(x) for x in np.asarray(p["normal"])],
                "labels": list(self.points.labels)}


def _tangential(xp, x, n):
    """The component of x (..., 3) in the plane normal to n."""
    return x - xp.einsum("...i,i->...", x, n)[..., None] * n


def cone(xp, x, limit):
    """x (..., k) scaled down to length at most ``limit`` (...) >= 0; finite gradients
    everywhere (at x = 0 too)."""
    square = xp.sum(x * x, axis=-1)
    nonzero = square > 0
    length = xp.sqrt(xp.where(nonzero, square, 1.0))
    scale = xp.where(nonzero, xp.minimum(1.0, limit / length), 1.0)
    return x * scale[..., None]
