"""Narrow phase between primitive geometries and convex polytopes: contact points, normals and
depths of a pair.

``collide(xp, a, pose_a, b, pose_b)`` is pure and array-generic: the same code runs with ``xp`` =
``numpy``, ``jax.numpy`` and screwdyn's tracer namespace (``screwdyn.execution.trace.xp``). It has
no Python control flow on values, no sorting, no boolean indexing: every choice is an ``xp.where``
and every division is guarded, so degenerate poses (coincident centres, parallel axes, a corner
exactly on a face) give finite numbers.

Geometries (sizes in m, Python floats: they are part of the program's structure)

    sphere(radius)                 centred on its frame's origin
    capsule(radius, half_length)   the segment z in [-half_length, half_length] of its frame,
                                   inflated by radius (MuJoCo's capsule)
    box(half_sizes)                |x_i| <= half_sizes[i] in its frame
    cylinder(radius, half_length)  x^2 + y^2 <= radius^2, |z| <= half_length (axis z)
    ellipsoid(radii)               sum_i (x_i / radii[i])^2 <= 1 (MuJoCo's ellipsoid geom)
    convex(points)                 the convex hull of points (n >= 4, 3) of its frame (a mesh's
                                   vertices: a non-convex mesh becomes its hull)
    plane()                        the half-space z <= 0 of its frame (surface z = 0, normal +z),
                                   infinite; only as the second geometry ``b`` of a pair

Conventions

* Poses are world arrays with a leading batch axis: ``pose = (R, p)``, ``R`` (N, 3, 3) the
  geometry frame's rotation (columns: its axes in world coordinates), ``p`` (N, 3) its origin (m).
* Outputs, K slots per pair (K depends only on the kinds and a polytope's corners, see
  ``contact_count``):
  ``points`` (N, K, 3) world (m): the middle of the overlap, halfway between the two surfaces along
  the normal (MuJoCo's ``contact.pos``); ``normals`` (N, K, 3) unit, world, pointing from ``b`` to
  ``a`` (the direction ``a`` must move to separate; MuJoCo's ``contact.frame[0:3]`` points from its
  geom1 to geom2); ``depths`` (N, K) (m): penetration, > 0 when overlapping, negative = distance
  apart along the normal (MuJoCo's ``-contact.dist``).
* A slot that carries no contact (an unused slot of a manifold, or, with ``margin``, a feature
  further apart than ``margin``) has depth ``NO_CONTACT`` (-1e6 m), a finite point and the pair's
  normal: a solver keeps slots with ``depths > -margin`` (or ``> 0``).
* Pairs given the other way round (``box``, ``sphere``) are computed as (``sphere``, ``box``) with
  the normals flipped.

Pairs (a, b): K, method

    sphere-plane       1  exact (MuJoCo's mjc_PlaneSphere)
    capsule-plane      2  the two end spheres against the plane, exact (as MuJoCo)
    box-plane          8  the 8 corners, each with its signed distance (MuJoCo keeps <= 4 of
                          them, those within its margin)
    cylinder-plane     8  4 rim points per end face, 90 degrees apart, starting at the rim point
                          deepest along -normal (slot 0: the near face's deepest point, MuJoCo's
                          first contact; slot 4: the far face's, MuJoCo's second). The deepest
                          depth is exact; MuJoCo's two extra points lie inside the disc, ours on
                          the rim (a square inscribed in it, a wider support)
    sphere-sphere      1  exact; coincident centres: normal +z (world)
    sphere-capsule     1  exact (closest point of the segment, then sphere-sphere)
    capsule-capsule    2  slot 0: the closest points of the two segments (exact, Ericson's
                          clamping); slot 1 unused, except for (near-)parallel axes (sin^2 of the
                          angle < 1e-10), where the slots are the two ends of the overlap of the
                          segments along the axis (a line contact, as MuJoCo's parallel case)
    sphere-box         1  exact: the box's signed distance at the centre and its gradient
                          (inside: the nearest face, first axis on ties)
    sphere-cylinder    1  exact: the cylinder's signed distance at the centre and its gradient
                          (inside: the nearer of the side and the end face, the side on ties)
    capsule-box        3  slot 0: the segment point of least signed distance to the box (the
                          signed distance of a convex set is convex along a line: 21 rounds of 9
                          samples, each round around the best one of the last, bracket the
                          minimum to ~2e-13 of the length; the depth is exact to that);
                          slots 1, 2: the farthest points of the segment each way from it
                          whose projections stay on the face of its normal (an end where that
                          is over the face; MuJoCo's second point: a capsule lying across a
                          box rests on the face's two edges), as spheres against the box; slot
                          0 carries no contact where it is one of them (no point counted twice)
    capsule-cylinder   3  as capsule-box, with the cylinder's signed distance (also convex),
                          slots 1, 2 the two end spheres
    box-box            8  separating-axis test over the 15 axes (face axes preferred over edge
                          axes within 1e-9 m): the axis of least overlap gives the normal and the
                          deepest depth. Face axis: the reference face (on the box of that axis)
                          and the incident face (the other box's face most anti-parallel to it)
                          projected on the reference plane are clipped against each other
                          (segment clipping of each polygon's edges against the other one, same
                          orientation): each slot is the start of one clipped edge, so the slots
                          are the vertices of the overlap polygon (<= 8), each with the depth of
                          the incident face below the reference face there; an edge clipped away
                          leaves its slot unused (if all are, slot 0 is the incident box's
                          deepest corner at the separating-axis depth). Edge axis: slot 0 the
                          middle of the closest points of the two edges, depth the overlap;
                          slots 1-7 unused. Boxes apart: the slots' depths are at most minus the
                          largest gap along the 15 axes (not the exact distance). Shallow
                          contacts equal MuJoCo's mjc_BoxBox (depth, normal, points); deep ones
                          can differ: MuJoCo may take a deeper axis than the least overlap.

    cylinder-box      21  points of one surface inside the other, each at its own signed
    cylinder-cylinder 23  distance and gradient (the other's signed distance: exact). The
                          cylinder's (11): [0] the deepest point of its side line facing the
                          other (``_on_line``), [1], [2] the two ends of the part of that line
                          at least half as deep, with [0]'s normal (a side on a face or across a
                          box rests on both); [3:7], [7:11] four rim points of each end face, 90
                          degrees apart from the rim's deepest point (``_on_circle``). A box's
                          (9): its 8 corners and the deepest point of its 12 edges; a second
                          cylinder's: its 11. The deepest point is the exact penetration depth
                          where a point is deepest (a rim or corner on a face, a side on a face
                          or an edge: MuJoCo's depth to its solver's 1e-6, and deeper than
                          MuJoCo's where its solver stops short), and a lower bound of it where
                          an edge crosses an edge (a rim across a box edge or another rim: down
                          to 1/sqrt(2) of it across right-angled edges). The last slot: the
                          axis of least overlap (``_cylinder_axes``: against a box, its face
                          normals, the end faces, side lines across edges, the side against
                          corners, and a rim across an edge, searched over the rim's angle;
                          against a cylinder, the end faces, the side lines across each other,
                          a rim across a side line, and a rim across a rim: from 8 angles of
                          each of the 4 pairs of rims, then Newton's steps to the rims'
                          critical points), where it is deeper than every point: the deepest
                          slot is then the exact penetration depth (to 1e-9 m of a numerical
                          minimisation over all directions)

    convex-plane       m  the polytope's m corners, each with its signed distance (exact)
    sphere-convex      1  exact: the polytope's signed distance at the centre and its gradient
                          (``_convex_sdf``: inside, the largest face-plane distance; outside,
                          the least distance to a face holding the projection, or to an edge)
    capsule-convex     3  as capsule-box, with the polytope's signed distance
    cylinder-convex  13+m as cylinder-box, the polytope's m corners for the box's 8
    convex-box      m+11  each one's corners and deepest edge point against the other's signed
    convex-convex m+m'+3  distance, as cylinder-box (exact where a point is deepest); the
                          searches along edges, lines and rims minimise the largest face-plane
                          distance (the signed distance inside, a few operations a face), and
                          the points found are measured exactly. The last slot: the
                          separating-axis test (Gregorius; face normals, and the pairs of edges
                          that make a face of the Minkowski difference), where its least overlap
                          is deeper than every point (an edge crossing an edge or a face's
                          edge): the deepest slot is then the exact penetration depth

A convex polytope costs its corners in slots and its faces and edges in each signed distance:
give coarse hulls (tens of corners, ``convex(points, max_corners)``; a robot link's collision
mesh has 100 to 150, MuJoCo collides those with a general convex solver, which this module does
not have), or the capsule that holds a mesh (``capsule_around``: two slots a pair).

    ellipsoid-plane    1  its support point along -normal, exact (MuJoCo's mjc_PlaneConvex)
    sphere-ellipsoid   1  exact: the ellipsoid's signed distance at the centre and its gradient
                          (``_ellipsoid_sdf``: the nearest surface point by Newton's steps on
                          Eberly's equation, to rounding)
    capsule-ellipsoid  1  the segment point of least signed distance to the ellipsoid (30
                          bisections on the sign of its slope along the segment, then
                          measured exactly): exact where the segment stays outside (depth
                          < radius; one contact, as MuJoCo's general convex solver gives);
                          where it enters, the depth of its deepest point (less than the
                          distance to move it out)
    ellipsoid-         1  the direction n of least overlap f(n) = h_a(n) + h_b(n) (support
    ellipsoid             functions, in the ellipsoid's frame): the penetration depth, or
                          minus the distance apart; the point the middle of the overlap.
                          Two ellipsoids: f is smooth, Newton's steps on the sphere of
                          directions from 7 starts (``_least_support``): exact apart (one
                          minimum) and, on every random pose tested, overlapping
    ellipsoid-box      1  f measured at one candidate direction per feature of the other (a
    ellipsoid-convex   1  corner: the ellipsoid's normal nearest to it, exact; an edge, a
    ellipsoid-cylinder 1  cylinder's side line: Newton's steps on the circle of directions
                          across it; a rim: the rim's point of least signed distance,
                          bisection on its slope; a face: its normal), the least kept: exact
                          apart, and overlapping where the feature that touches is no deeper
                          in the ellipsoid than the centre of curvature of its nearest
                          surface (below min(radii)^2 / max(radii) always); deeper, an upper
                          bound (the overlap along a direction that separates them). As
                          MuJoCo's general convex solver (one contact), to 1e-9 m

Not supported (``ValueError`` naming the pair; ``supported`` says which are): plane as ``a``
or against a plane, height fields.
"""
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from .loops import loop

#: the depth (m) of a slot that carries no contact
NO_CONTACT = -1.0e6
_SAME_POINT = 1e-9  # two slots of a pair closer than this times its shapes' sizes are one point
#: ``convex`` warns about hulls with more corners than this (each is a contact slot)
COARSE_CORNERS = 64

_TINY = 1e-12        # guards of divisions and normalisations
_PARALLEL = 1e-10    # capsule-capsule: sin^2 of the angle below which the axes are parallel
_EDGE_SIN = 1e-6     # box-box: edge axes with |a_i x b_j| below this are skipped
_FACE_BIAS = 1e-9    # box-box: an edge axis wins only if its overlap is less by this much (m)
_NEWTON = 8  # two cylinders: Newton steps to a rim-rim critical point
_RIM_STARTS, _RIM_ROUNDS = 8, 5  # two cylinders: 8 searches along each rim (several minima)
# of 5 rounds each (then Newton's steps)
_GRID, _ROUNDS = 9, 21  # capsule-box: 9 samples a round, 21 rounds (bracket 4^-21 ~ 2e-13 of L)
_BISECTIONS = 30  # capsule-ellipsoid: halvings of the segment (2^-30 ~ 1e-9 of its length: the
                  # depth is quadratic there, exact; the point to that, as rounding allows)
_ELLIPSOID_NEWTON = 14  # Newton's steps to an ellipsoid's nearest point (12 reach rounding on
                        # 400,000 points, radii 1e-3 to 1 m, near, far, on axes and planes)
_SEARCH_NEWTON = 10     # the same, in the search along a capsule's segment (the point found is
                        # measured with 14: the same depths on 20,000 random poses)
_SPHERE_NEWTON = 10     # an ellipsoid's pairs: Newton's steps on the sphere of directions (8
_TURN = 0.5             # reach rounding on 12,000 poses), each turning it by at most this (rad)
_FLAT = 1e-9         # cylinder-box/cylinder: a line's points this close to its least signed
                     # distance (m) are on its flat part

Pose = Tuple[Any, Any]
#: a box's corners as signs of its half sizes, MuJoCo's order: bit 0 x, bit 1 y, bit 2 z
_SIGNS = np.array([[1.0 if i & 1 else -1.0, 1.0 if i & 2 else -1.0, 1.0 if i & 4 else -1.0]
                   for i in range(8)])


@dataclass(frozen=True)
class Sphere:
    """A sphere of ``radius`` (m) centred on its frame's origin."""
    radius: float
    kind = "sphere"


@dataclass(frozen=True)
class Capsule:
    """The points within ``radius`` (m) of the segment z in [-half_length, half_length] (m)."""
    radius: float
    half_length: float
    kind = "capsule"


@dataclass(frozen=True)
class Box:
    """The box |x_i| <= ``half_sizes[i]`` (m) in its frame."""
    half_sizes: Tuple[float, float, float]
    kind = "box"


@dataclass(frozen=True)
class Cylinder:
    """The solid cylinder of ``radius`` (m) about the frame's z axis, |z| <= ``half_length``."""
    radius: float
    half_length: float
    kind = "cylinder"


@dataclass(frozen=True)
class Convex:
    """The convex hull of points (``collision.convex``): its corners (m, (m, 3)), the planes
    of its faces (unit outward normal and offset: n . x <= d inside), its edges (pairs of
    corner indices between two faces), each face's boundary (a point of each of its edges and
    the edge's outward normal in the face's plane) and its triangles (outward; for its mass
    properties). Tuples of floats: part of a program's structure, as every size."""
    vertices: Tuple[Tuple[float, float, float], ...]
    planes: Tuple[Tuple[float, float, float, float], ...]
    edges: Tuple[Tuple[int, int], ...]
    boundaries: Tuple[Tuple[Tuple[float, ...], ...], ...]
    triangles: Tuple[Tuple[float, ...], ...]   # 9 coordinates each (m), outward
    kind = "convex"


@dataclass(frozen=True)
class Ellipsoid:
    """The solid ellipsoid sum_i (x_i / radii[i])^2 <= 1 (radii in m) in its frame."""
    radii: Tuple[float, float, float]
    kind = "ellipsoid"


@dataclass(frozen=True)
class Plane:
    """The half-space z <= 0 of its frame (surface z = 0, outward normal +z), infinite."""
    kind = "plane"


Geometry = Any  # Sphere | Capsule | Box | Cylinder | Ellipsoid | Convex | Plane


def sphere(radius: float) -> Sphere:
    """A sphere of ``radius`` (m)."""
    return Sphere(float(radius))


def capsule(radius: float, half_length: float) -> Capsule:
    """A capsule of ``radius`` (m) about the segment z in [-half_length, half_length] (m)."""
    return Capsule(float(radius), float(half_length))


def box(half_sizes) -> Box:
    """A box of ``half_sizes`` (3,) (m) along its frame's x, y, z."""
    h = tuple(float(x) for x in np.asarray(half_sizes, dtype=float).reshape(3))
    return Box(h)


def cylinder(radius: float, half_length: float) -> Cylinder:
    """A cylinder of ``radius`` (m) about its frame's z axis, |z| <= ``half_length`` (m)."""
    return Cylinder(float(radius), float(half_length))


def ellipsoid(radii) -> Ellipsoid:
    """An ellipsoid of semi-axes ``radii`` (3,) (m) along its frame's x, y, z (MuJoCo's
    ellipsoid geom: its size). ValueError unless three finite positive numbers."""
    e = np.asarray(radii, dtype=float).ravel()
    if e.shape != (3,) or not np.all(np.isfinite(e)) or np.any(e <= 0.0):
        raise ValueError(f"collision.ellipsoid: radii must be 3 finite positive numbers (m), "
                         f"got {radii!r}")
    return Ellipsoid(tuple(float(x) for x in e))


def convex(points, max_corners: Optional[int] = None) -> Convex:
    """The convex hull of ``points`` (n >= 4, 3) (m, in the shape's frame), e.g. a mesh's
    vertices: a non-convex mesh becomes its hull (what MuJoCo collides for a mesh geom too).
    ValueError for points that are not (n, 3) finite numbers or span no volume (all on one
    plane or line). Coplanar triangles of the hull are merged into one face, and the points
    inside it or on its faces and edges are dropped.

    ``max_corners`` (an int >= 4, or None: every corner): a coarser hull, of at most that many
    of the hull's corners (``_support_corners``: the extreme ones along x, y, z, then one at a
    time the corner furthest outside the hull of those chosen): inside the full hull."""
    P = np.asarray(points, dtype=float)
    if P.ndim != 2 or P.shape[-1] != 3 or len(P) < 4 or not np.all(np.isfinite(P)):
        raise ValueError(f"collision.convex: points must be (n >= 4, 3) finite numbers (m), "
                         f"got shape {P.shape}")
    if max_corners is not None and (int(max_corners) != max_corners or max_corners < 4):
        raise ValueError(f"collision.convex: max_corners must be an int >= 4, got "
                         f"{max_corners!r}")
    from scipy.spatial import ConvexHull, QhullError

    try:
        hull = ConvexHull(P)
        if max_corners is not None and len(hull.vertices) > max_corners:
            P = _support_corners(P[hull.vertices], int(max_corners))
            hull = ConvexHull(P)
    except QhullError:
        raise ValueError(f"collision.convex: the {len(P)} points span no volume (they lie on "
                         "one plane or line)") from None
    size = float(np.ptp(P, axis=0).max())
    planes, face_of = [], []
    for row in hull.equations:  # n . x + c <= 0 inside: the plane (n, d = -c)
        for k, other in enumerate(planes):
            if (np.abs(other[:3] - row[:3]).max() < 1e-9
                    and abs(other[3] + row[3]) < 1e-9 * size):
                face_of.append(k)
                break
        else:
            face_of.append(len(planes))
            planes.append(np.r_[row[:3], -row[3]])
    triangles, by_edge = [], {}
    for simplex, row, face in zip(hull.simplices, hull.equations, face_of):
        a, b, c = P[simplex]
        t = simplex if np.cross(b - a, c - a) @ row[:3] > 0 else simplex[[0, 2, 1]]
        triangles.append(t)
        for i, j in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0])):
            by_edge.setdefault((min(i, j), max(i, j)), set()).add(face)
    edges = sorted(e for e, faces in by_edge.items() if len(faces) == 2)
    corners = sorted({i for e in edges for i in e})
    index = {v: k for k, v in enumerate(corners)}
    centres = [np.mean([P[i] for t, f in zip(triangles, face_of) if f == face for i in t],
                       axis=0) for face in range(len(planes))]
    boundaries = [[] for _ in planes]
    for i, j in edges:
        for face in by_edge[i, j]:
            m = np.cross(P[j] - P[i], planes[face][:3])
            m = m / np.linalg.norm(m)
            if (centres[face] - P[i]) @ m > 0:
                m = -m
            boundaries[face].append(tuple(P[i]) + tuple(m))
    if len(corners) > COARSE_CORNERS:
        import warnings

        warnings.warn(f"collision.convex: the hull has {len(corners)} corners (more than "
                      f"{COARSE_CORNERS}): a pair with it has that many contact slots and each "
                      f"signed distance {len(planes)} faces and {len(edges)} edges, so a scene "
                      "with it compiles and steps slowly; a coarser hull (tens of corners) "
                      "keeps it fast", UserWarning, stacklevel=2)
    return Convex(vertices=tuple(tuple(P[i]) for i in corners),
                  planes=tuple(tuple(float(x) for x in p) for p in planes),
                  edges=tuple((index[i], index[j]) for i, j in edges),
                  boundaries=tuple(tuple(b) for b in boundaries),
                  triangles=tuple(tuple(float(x) for x in P[t].reshape(-1))
                                  for t in triangles))


def _support_corners(V, count):
    """``count`` of the points V (n > count, 3), the hull of which is near V's: the furthest
    along +-x, +-y, +-z, then, one at a time, the point furthest outside the hull of those
    chosen (the greedy choice that shrinks the largest gap first)."""
    from scipy.spatial import ConvexHull, QhullError

    chosen = list(dict.fromkeys(np.concatenate([np.argmax(V, axis=0),
                                                np.argmin(V, axis=0)]).tolist()))
    distance = np.linalg.norm(V - V[chosen[0]], axis=1)
    while len(chosen) < count:
        try:
            planes = ConvexHull(V[chosen]).equations
            distance = np.max(V @ planes[:, :3].T + planes[:, 3], axis=1)
        except QhullError:  # fewer than 4 points, or flat so far: the farthest from them
            distance = np.min(np.linalg.norm(V[:, None] - V[chosen][None], axis=2), axis=1)
        far = int(np.argmax(distance))
        if distance[far] <= 0.0:
            break
        chosen.append(far)
    return V[chosen]


def capsule_around(points) -> Tuple[Capsule, np.ndarray, np.ndarray]:
    """A capsule that holds every one of ``points`` (n >= 1, 3) (m), e.g. a robot link's
    collision mesh: (``Capsule``, its rotation R (3, 3) and centre c (3,) in the points'
    frame: the capsule's axis is R's third column). The least volume found over six axes (the
    points' principal axes and the frame's x, y, z), then the best axis turned while that
    shrinks it (steps of 0.1 rad halved down to 1 mrad), and over radii: for an axis, the
    radius runs from that of the smallest circle holding the points seen along it (Welzl) up
    to 3 times it, each with the shortest segment that holds every point. Cheap to collide
    (two slots against anything) where a hull has tens; MoveIt describes robot arms with
    capsules for this. ValueError for points that are not (n, 3) finite numbers."""
    P = np.asarray(points, dtype=float)
    if P.ndim != 2 or P.shape[-1] != 3 or len(P) < 1 or not np.all(np.isfinite(P)):
        raise ValueError(f"collision.capsule_around: points must be (n >= 1, 3) finite numbers "
                         f"(m), got shape {P.shape}")
    if len(P) >= 4:
        from scipy.spatial import ConvexHull, QhullError

        try:
            P = P[ConvexHull(P).vertices]  # the rest are inside
        except QhullError:
            pass  # flat or on a line: every point
    centred = P - P.mean(axis=0)
    _, axes = np.linalg.eigh(centred.T @ centred)
    best = min((_capsule_along(P, axis) for axis in list(axes.T) + list(np.eye(3))),
               key=lambda fit: fit[0])
    step = 0.1  # then turn the best axis while that shrinks the capsule: 0.1 rad down to 1 mrad
    while step > 1e-3:
        R = best[3]
        turned = [_capsule_along(P, R[:, 2] + sign * step * R[:, k])
                  for k in (0, 1) for sign in (1.0, -1.0)]
        better = min(turned, key=lambda fit: fit[0])
        if better[0] < best[0]:
            best = better
        else:
            step *= 0.5
    _, r, half, R, centre = best
    return Capsule(max(r, _TINY), half), R, centre


def _capsule_along(P, axis):
    """(volume, radius, half length, R, centre) of the least capsule along ``axis`` (3,)
    holding the points P (n, 3) found over radii from the smallest one (the smallest circle
    holding the points seen along the axis) to 3 times it."""
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    e1 = np.cross(axis, np.eye(3)[int(np.argmin(np.abs(axis)))])
    e1 /= np.linalg.norm(e1)
    R = np.stack([e1, np.cross(axis, e1), axis], axis=1)
    local = P @ R                                      # (n, 3) in the capsule's axes
    c = _circle_centre(local[:, :2])
    rho2 = np.sum((local[:, :2] - c) ** 2, axis=1)
    t = local[:, 2]
    r = np.sqrt(rho2.max()) * np.linspace(1.0, 3.0, 41)[:, None]         # (41, 1)
    reach = np.sqrt(np.maximum(r * r - rho2, 0.0))                       # (41, n)
    top, bottom = np.max(t - reach, axis=1), np.min(t + reach, axis=1)
    middle, half = 0.5 * (top + bottom), np.maximum(0.0, 0.5 * (top - bottom))
    # where a sphere holds them (top < bottom): its radius from its centre
    r = np.where(top < bottom, np.sqrt(np.max(rho2 + (t - middle[:, None]) ** 2, axis=1)),
                 r[:, 0])
    volume = np.pi * r * r * (2.0 * half + 4.0 * r / 3.0)
    k = int(np.argmin(volume))
    return float(volume[k]), float(r[k]), float(half[k]), R, R @ np.r_[c, middle[k]]


def _circle_centre(X):
    """The centre of the smallest circle holding the points X (n, 2) (Welzl's algorithm, its
    loop form, over the corners of their hull in a fixed shuffled order: expected O(n))."""
    from scipy.spatial import ConvexHull, QhullError

    try:
        X = X[ConvexHull(X).vertices]  # the circle touches corners only
    except QhullError:
        pass  # on a line or a point: every point
    P = X[np.random.default_rng(0).permutation(len(X))]
    tol = 1e-12 * (1.0 + float(np.abs(P).max()))

    def outside(x, c, r):
        return np.hypot(*(x - c)) > r + tol

    c, r = P[0], 0.0
    for i in range(1, len(P)):
        if not outside(P[i], c, r):
            continue
        c, r = P[i], 0.0
        for j in range(i):
            if not outside(P[j], c, r):
                continue
            c = 0.5 * (P[i] + P[j])
            r = float(np.hypot(*(P[i] - c)))
            for k in range(j):
                if outside(P[k], c, r):
                    c = _circumcentre(P[i], P[j], P[k], c)
                    r = float(np.hypot(*(P[i] - c)))
    return c


def _circumcentre(a, b, c, fallback):
    """The centre of the circle through a, b, c (2,) (``fallback`` if they are on a line)."""
    d = 2.0 * ((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))
    if abs(d) < 1e-300:
        return fallback
    ab, ac = b - a, c - a
    return a + np.array([(ac[1] * (ab @ ab) - ab[1] * (ac @ ac)) / d,
                         (ab[0] * (ac @ ac) - ac[0] * (ab @ ab)) / d])


def plane() -> Plane:
    """The plane z = 0 of its frame (normal +z), the half-space z <= 0 solid."""
    return Plane()


# ------------------------------------------------------------------------------------------------
# small vector helpers (last axis: xyz)

def _dot(xp, u, v):
    return xp.sum(u * v, axis=-1)


def _norm(xp, v):
    return xp.sqrt(_dot(xp, v, v))


def _col(R, k):
    return R[..., :, k]


def _rot(xp, R, v):
    """R v for R (..., 3, 3), v (..., 3)."""
    return xp.sum(R * v[..., None, :], axis=-1)


def _rot_t(xp, R, v):
    """R^T v."""
    return xp.sum(R * v[..., :, None], axis=-2)


def _safe(xp, x):
    """x with tiny magnitudes replaced by 1 (for a guarded division)."""
    return xp.where(xp.abs(x) > _TINY, x, 1.0)


def _unit(xp, v, fallback):
    """(v / |v| or ``fallback`` where |v| is tiny, |v|)."""
    n = _norm(xp, v)
    ok = n > _TINY
    return xp.where(ok[..., None], v / xp.where(ok, n, 1.0)[..., None], fallback), n


def _sign(xp, x):
    """+1 for x >= 0, else -1."""
    return xp.where(x >= 0.0, 1.0, -1.0)


def _first_min(xp, values):
    """One-hot flags (a list, as ``values``) of the first of ``values`` equal to their minimum."""
    m = values[0]
    for v in values[1:]:
        m = xp.minimum(m, v)
    flags, taken = [], None
    for v in values:
        hit = v == m
        flag = hit if taken is None else hit & ~taken
        taken = flag if taken is None else taken | flag
        flags.append(flag)
    return flags, m


def _pick(xp, flags, options):
    """The option of the raised flag (flags one-hot; options broadcastable, trailing dims ok)."""
    out = options[-1]
    for flag, option in zip(flags[-2::-1], options[-2::-1]):
        f = flag
        while getattr(f, "ndim", 0) < getattr(option, "ndim", 0):
            f = f[..., None]
        out = xp.where(f, option, out)
    return out


def _spheres(xp, ca, ra, cb, rb):
    """Sphere a against sphere b: (point, normal b->a, depth), shapes (..., 3), (..., 3), (...)."""
    n, dist = _unit(xp, ca - cb, np.array([0.0, 0.0, 1.0]))
    depth = ra + rb - dist
    return cb + n * (rb - 0.5 * depth)[..., None], n, depth


def _segment_point(xp, c, d, h, x):
    """The point of the segment c + d t, |t| <= h (d unit) nearest to x."""
    t = xp.clip(_dot(xp, x - c, d), -h, h)
    return c + d * t[..., None]


def _segments(xp, c1, d1, h1, c2, d2, h2):
    """Closest points of the segments c1 + d1 s (|s| <= h1) and c2 + d2 t (|t| <= h2), d unit or
    zero, h (...) or float: (x1, x2, parallel)."""
    A1 = d1 * (h1 if isinstance(h1, float) else h1[..., None])
    A2 = d2 * (h2 if isinstance(h2, float) else h2[..., None])
    r = c1 - c2
    ma, mb, mc = _dot(xp, A1, A1), -_dot(xp, A1, A2), _dot(xp, A2, A2)
    u, v = -_dot(xp, A1, r), _dot(xp, A2, r)
    det = ma * mc - mb * mb
    parallel = det <= _PARALLEL * ma * mc + _TINY
    x1 = xp.clip(xp.where(parallel, 0.0, (mc * u - mb * v) / xp.where(parallel, 1.0, det)),
                 -1.0, 1.0)
    x2 = xp.where(mc > _TINY, (v - mb * x1) / _safe(xp, mc), 0.0)
    x2c = xp.clip(x2, -1.0, 1.0)
    x1 = xp.where(x2 != x2c, xp.clip(xp.where(ma > _TINY, (u - mb * x2c) / _safe(xp, ma), 0.0),
                                     -1.0, 1.0), x1)
    return c1 + A1 * x1[..., None], c2 + A2 * x2c[..., None], parallel


def _box_sdf(xp, x, h):
    """Signed distance (m) of local points x (..., 3) to the box |x_i| <= h_i and its unit
    gradient (local; inside: the nearest face's normal, the first axis on ties)."""
    s = _sign(xp, x)
    q = xp.abs(x) - h
    outside = xp.maximum(q, 0.0)
    out_len = _norm(xp, outside)
    qs = [q[..., 0], q[..., 1], q[..., 2]]
    qmax = xp.maximum(xp.maximum(qs[0], qs[1]), qs[2])
    sdf = out_len + xp.minimum(qmax, 0.0)
    flags, _ = _first_min(xp, [-qs[0], -qs[1], -qs[2]])
    grad_in = xp.stack([xp.where(f, s[..., i], 0.0) for i, f in enumerate(flags)], axis=-1)
    ok = out_len > _TINY
    grad_out = s * outside / xp.where(ok, out_len, 1.0)[..., None]
    return sdf, xp.where(ok[..., None], grad_out, grad_in)


def _cylinder_sdf(xp, x, radius, half_length):
    """Signed distance (m) of local points x (..., 3) to the solid cylinder rho <= radius,
    |z| <= half_length (rho = |x_xy|) and its unit gradient (local; inside: the nearest of the
    side and the end face, the side on ties; on the axis, the radial direction is +x)."""
    u, rho = _unit(xp, xp.stack([x[..., 0], x[..., 1], xp.zeros_like(x[..., 2])], axis=-1),
                   np.array([1.0, 0.0, 0.0]))
    ez = np.array([0.0, 0.0, 1.0]) * _sign(xp, x[..., 2])[..., None]
    dr, dz = rho - radius, xp.abs(x[..., 2]) - half_length
    a, b = xp.maximum(dr, 0.0), xp.maximum(dz, 0.0)
    out_len = xp.sqrt(a * a + b * b)
    sdf = out_len + xp.minimum(xp.maximum(dr, dz), 0.0)
    ok = out_len > _TINY
    grad_out = (u * a[..., None] + ez * b[..., None]) / xp.where(ok, out_len, 1.0)[..., None]
    grad_in = xp.where((dr >= dz)[..., None], u, ez)
    return sdf, xp.where(ok[..., None], grad_out, grad_in)


def _convex_sdf(xp, x, g):
    """Signed distance (m) of local points x (..., 3) to the convex polytope g (``Convex``) and
    its unit gradient (local). Inside: the largest of the faces' plane distances (exact), the
    gradient that face's normal (the first on ties). Outside: the least distance to a face
    whose plane holds the point's projection inside the face, or to an edge (the corners are
    edges' ends), exact; the gradient from the nearest point to x."""
    s = _plane_distances(x, g)
    inside, grad_in = _largest_plane(xp, x, g, s)
    distances, nearest = [], []
    for (n0, n1, n2, d), boundary, sf in zip(g.planes, g.boundaries, s):
        ok = sf >= 0.0
        for b in boundary:  # the projection within each edge of the face
            ok = ok & ((x[..., 0] - b[0]) * b[3] + (x[..., 1] - b[1]) * b[4]
                       + (x[..., 2] - b[2]) * b[5] <= 0.0)
        distances.append(xp.where(ok, sf, np.inf))
        nearest.append(x - np.array([n0, n1, n2]) * sf[..., None])
    V = np.array(g.vertices)
    for i, j in g.edges:
        a, e = V[i], V[j] - V[i]
        t = xp.clip(_dot(xp, x - a, e) / float(e @ e), 0.0, 1.0)
        c = a + e * t[..., None]
        distances.append(_norm(xp, x - c))
        nearest.append(c)
    flags, outside = _first_min(xp, distances)
    c = _pick(xp, flags, nearest)
    grad_out = (x - c) / xp.maximum(outside, _TINY)[..., None]
    out = inside > 0.0
    return xp.where(out, outside, inside), xp.where(out[..., None], grad_out, grad_in)


def _ellipsoid_sdf(xp, x, e, steps=_ELLIPSOID_NEWTON):
    """Signed distance (m) of local points x (..., 3) to the solid ellipsoid of semi-axes e
    (3 floats) and its unit gradient (local: the outward normal at the nearest surface point),
    exact. The nearest point is c_i = e_i^2 x_i / (t + e_i^2) with t the root of
    S(t) = sum_i (e_i x_i / (t + e_i^2))^2 = 1 right of the largest pole -min(e)^2 (Eberly's
    distance from a point to an ellipsoid), S decreasing and convex there. Newton's steps on
    S^(-1/2) = 1 (increasing and concave: linear for one term, as a trust region's secular
    equation) rise to the root from any start left of it without overshooting. The start is
    the largest of four such lower bounds: each term alone at most 1 (t >= e_i |x_i| - e_i^2),
    all poles at the farthest (t >= |e x| - max(e)^2), Newton's step on S from t = 0 (S is
    convex: right for points near the surface) and the pole. A point inside, on the plane
    of the shortest axis and far from it, has no root (S < 1 at the pole): t stays at the
    pole and the nearest point is on that axis' side, c_k = +-e_k sqrt(1 - sum of the
    others' (c_j / e_j)^2)."""
    e = np.asarray(e, dtype=float)
    k = int(np.argmin(e))
    e2 = e * e
    gap = e2 - e2[k]  # t + e_i^2 = u + gap_i, u = t + min(e)^2: no cancellation near the pole
    ex = x * e
    floor = e2[k] * 1e-30  # u's least (the pole)
    s0 = xp.sum((x / e) ** 2, axis=-1)
    ds0 = 2.0 * xp.sum(x * x / (e2 * e2), axis=-1)
    u = xp.maximum(xp.maximum(xp.max(xp.abs(ex) - gap, axis=-1), _norm(xp, ex) - float(gap.max())),
                   xp.maximum(e2[k] + (s0 - 1.0) / xp.maximum(ds0, 1e-300), floor))

    def newton(_, u):
        inverse = 1.0 / (u[..., None] + gap)
        r2 = (ex * inverse) ** 2
        S = xp.sum(r2, axis=-1)
        slope = xp.sum(r2 * inverse, axis=-1)  # -dS/dt / 2
        return xp.maximum(u + (S * xp.sqrt(S) - S) / xp.maximum(slope, 1e-300), floor)

    u = loop(xp, steps, newton, u, indexed=False)
    c = x * e2 / (u[..., None] + gap)
    rest = sum((c[..., j] / e[j]) ** 2 for j in range(3) if j != k)
    on_pole = (u <= floor) & (rest < 1.0)
    ck = _sign(xp, x[..., k]) * e[k] * xp.sqrt(xp.maximum(1.0 - rest, 0.0))
    c = xp.stack([xp.where(on_pole, ck, c[..., j]) if j == k else c[..., j] for j in range(3)],
                 axis=-1)
    grad, _ = _unit(xp, c / e2, np.array([0.0, 0.0, 1.0]))
    inside = s0 < 1.0
    dist = _norm(xp, x - c)
    return xp.where(inside, -dist, dist), grad


def _plane_distances(x, g):
    """Local points x (..., 3) against each face plane of convex polytope g: n . x - d, a list
    (one (...) array per face)."""
    return [x[..., 0] * n0 + x[..., 1] * n1 + x[..., 2] * n2 - d for n0, n1, n2, d in g.planes]


def _largest_plane(xp, x, g, s):
    """The largest of the plane distances ``s`` (``_plane_distances``) and its face's normal
    (the first on ties)."""
    flags, least = _first_min(xp, [-v for v in s])
    zero = xp.zeros_like(x)
    return -least, _pick(xp, flags, [zero + np.array(p[:3]) for p in g.planes])


def _plane_sdf(xp, x, g):
    """The largest of convex polytope g's plane distances at local points x (..., 3), and its
    face's normal: its signed distance inside (exact) and a lower bound of it outside, convex
    along a line, and a few operations a face (the searches' objective: ``_search_sdf``)."""
    return _largest_plane(xp, x, g, _plane_distances(x, g))


def _search_sdf(b):
    """What the searches on lines and circles minimise against ``b``: its signed distance
    (``_solid_sdf``), for a convex polytope the largest plane distance (``_plane_sdf``: the
    same inside, where contacts are; the point found is then measured exactly)."""
    if b.kind == "convex":
        return lambda xp, x: _plane_sdf(xp, x, b)
    if b.kind == "ellipsoid":
        return lambda xp, x: _ellipsoid_sdf(xp, x, b.radii, _SEARCH_NEWTON)
    return _solid_sdf(b)


def _solid_sdf(b):
    """The signed distance function (xp, local points) -> (sdf, unit gradient) of a box, a
    cylinder, an ellipsoid or a convex polytope ``b``."""
    if b.kind == "box":
        h = np.array(b.half_sizes)
        return lambda xp, x: _box_sdf(xp, x, h)
    if b.kind == "convex":
        return lambda xp, x: _convex_sdf(xp, x, b)
    if b.kind == "ellipsoid":
        return lambda xp, x: _ellipsoid_sdf(xp, x, b.radii)
    return lambda xp, x: _cylinder_sdf(xp, x, b.radius, b.half_length)


def _spheres_solid(xp, c, r, Rb, pb, sdf_of):
    """Spheres centred at c (..., 3) of radius r against a convex solid whose local signed
    distance is ``sdf_of`` (``_solid_sdf``): (point, normal b->a, depth)."""
    Rb_, pb_ = Rb, pb
    while Rb_.ndim < c.ndim + 1:  # a slot axis in c: broadcast the pose over it
        Rb_, pb_ = Rb_[..., None, :, :], pb_[..., None, :]
    sdf, g = sdf_of(xp, _rot_t(xp, Rb_, c - pb_))
    n = _rot(xp, Rb_, g)
    depth = r - sdf
    return c - n * (r - 0.5 * depth)[..., None], n, depth


# ------------------------------------------------------------------------------------------------
# pairs: each returns (points (N, K, 3), normals (N, K, 3), depths (N, K)), normals b -> a

def _sphere_plane(xp, a, Ra, pa, b, Rb, pb):
    return _spheres_plane(xp, pa[:, None, :], a.radius, Rb, pb)


def _spheres_plane(xp, c, r, Rb, pb):
    """Spheres c (N, K, 3) of radius r against the plane of (Rb, pb)."""
    n = _col(Rb, 2)[:, None, :]
    dist = _dot(xp, c - pb[:, None, :], n) - r
    depth = -dist
    point = c - n * (r - 0.5 * depth)[..., None]
    return point, xp.broadcast_to(n, point.shape), depth


def _capsule_plane(xp, a, Ra, pa, b, Rb, pb):
    axis = _col(Ra, 2) * a.half_length
    ends = xp.stack([pa + axis, pa - axis], axis=1)
    return _spheres_plane(xp, ends, a.radius, Rb, pb)


def _to_world(xp, R, p, local):
    """Points of a frame at (R (N, 3, 3), p (N, 3)) given in it, local (K, 3) or (N, K, 3), in
    the world: (N, K, 3)."""
    return p[:, None, :] + xp.sum(R[:, None, :, :] * local[..., None, :], axis=-1)


def _polytope_plane(xp, a, Ra, pa, b, Rb, pb):
    """A box's or a convex polytope's corners against the plane (``_corners``: a box's in
    MuJoCo's order)."""
    return _spheres_plane(xp, _to_world(xp, Ra, pa, _corners(a)[0]), 0.0, Rb, pb)


def _ellipsoid_plane(xp, a, Ra, pa, b, Rb, pb):
    """An ellipsoid's support point along -normal (its deepest point) against the plane:
    exact (MuJoCo's mjc_PlaneConvex for an ellipsoid)."""
    up = _rot_t(xp, Ra, _col(Rb, 2))  # the plane's normal, a's frame
    _, x = _ellipsoid_lowest(xp, np.asarray(a.radii, dtype=float) ** 2, up)
    return _spheres_plane(xp, (pa + _rot(xp, Ra, x))[:, None, :], 0.0, Rb, pb)


def _cylinder_plane(xp, a, Ra, pa, b, Rb, pb):
    n = _col(Rb, 2)
    axis = _col(Ra, 2)
    prj = _dot(xp, n, axis)
    axis = xp.where((prj > 0.0)[..., None], -axis, axis)   # towards the plane
    prj = -xp.abs(prj)
    v, _ = _unit(xp, axis * prj[..., None] - n, _col(Ra, 0))  # deepest rim direction
    w = xp.cross(axis, v)
    r, h = a.radius, a.half_length
    rim = [v * r, w * r, -v * r, -w * r]
    pts = [pa + axis * h + e for e in rim] + [pa - axis * h + e for e in rim]
    return _spheres_plane(xp, xp.stack(pts, axis=1), 0.0, Rb, pb)


def _sphere_sphere(xp, a, Ra, pa, b, Rb, pb):
    p, n, d = _spheres(xp, pa, a.radius, pb, b.radius)
    return p[:, None, :], n[:, None, :], d[:, None]


def _sphere_capsule(xp, a, Ra, pa, b, Rb, pb):
    q = _segment_point(xp, pb, _col(Rb, 2), b.half_length, pa)
    p, n, d = _spheres(xp, pa, a.radius, q, b.radius)
    return p[:, None, :], n[:, None, :], d[:, None]


def _capsule_capsule(xp, a, Ra, pa, b, Rb, pb):
    da, db = _col(Ra, 2), _col(Rb, 2)
    ha, hb = a.half_length, b.half_length
    x1, x2, parallel = _segments(xp, pa, da, ha, pb, db, hb)
    p0, n0, d0 = _spheres(xp, x1, a.radius, x2, b.radius)
    # parallel axes: the two ends of the overlap of the segments along a's axis
    c = _dot(xp, pb - pa, da)
    e = hb * xp.abs(_dot(xp, da, db))
    lo, hi = xp.maximum(-ha, c - e), xp.minimum(ha, c + e)
    overlap = lo < hi
    s0 = xp.where(overlap, lo, xp.clip(0.5 * (lo + hi), -ha, ha))
    ends = []
    for s in (s0, hi):
        y1 = pa + da * s[..., None]
        ends.append(_spheres(xp, y1, a.radius, _segment_point(xp, pb, db, hb, y1), b.radius))
    (p1, n1, d1), (p2, n2, d2) = ends
    par = parallel[..., None]
    points = xp.stack([xp.where(par, p1, p0), p2], axis=1)
    normals = xp.stack([xp.where(par, n1, n0), xp.where(par & overlap[..., None], n2, n0)],
                       axis=1)
    depths = xp.stack([xp.where(parallel, d1, d0),
                       xp.where(parallel & overlap, d2, NO_CONTACT)], axis=1)
    return points, normals, depths


def _sphere_solid(xp, a, Ra, pa, b, Rb, pb):
    """A sphere against a box, a cylinder, an ellipsoid or a convex polytope: its centre's
    signed distance and gradient."""
    p, n, d = _spheres_solid(xp, pa, a.radius, Rb, pb, _solid_sdf(b))
    return p[:, None, :], n[:, None, :], d[:, None]


def _search(xp, f, t, half, lo=None, hi=None, rounds=_ROUNDS):
    """The t of least ``f(ts)`` (ts (N, G) -> values (N, G)) near ``t`` (N,): 9 samples spaced
    over t +- half (clipped to [lo, hi] where given), then ``rounds`` rounds of 9 around the
    best one of the last, each a quarter as wide (the best sample and its two neighbours
    bracket the minimum of a convex f). One loop of a compiled program (``loops.loop``); the
    first of equal values wins."""
    grid = np.linspace(-1.0, 1.0, _GRID)
    far = 1e300

    def round_(_, search):
        t, half = search
        ts = t[..., None] + half[..., None] * grid
        if lo is not None:
            ts = xp.clip(ts, lo, hi)
        v = f(ts)
        best = xp.min(v, axis=-1)
        t = xp.min(xp.where(v <= best[..., None], ts, far), axis=-1)
        return t, half * (2.0 / (_GRID - 1))

    return loop(xp, rounds, round_, (t, half), indexed=False)[0]


def _on_line(xp, sdf_of, x0, u, L):
    """The t in [-L, L] of least signed distance ``sdf_of`` along x0 + u t (local points of the
    solid, x0 (N, 3), u (N, 3) unit): the signed distance of a convex set is convex along a
    line, so ``_search`` brackets its minimum to ~4^-21 of the length."""
    t = xp.zeros_like(x0[..., 0])
    if L <= 0:
        return t
    return _search(xp, lambda ts: sdf_of(xp, x0[..., None, :] + u[..., None, :] * ts[..., None])[0],
                   t, t + L, -L, L)


def _on_line_by_slope(xp, sdf_of, x0, u, L):
    """``_on_line``'s t for a signed distance whose gradient is exact (an ellipsoid's): its
    slope along the line, gradient . u, is nondecreasing (convex along a line), so bisection
    on its sign brackets the minimum, ``_BISECTIONS`` halvings of [-L, L], one evaluation
    each where ``_search`` takes 9 a round; a minimum at an end (the slope of one sign
    throughout) is that end exactly."""
    zero = xp.zeros_like(x0[..., 0])
    if L <= 0:
        return zero
    lo, hi = _bisect_on_slope(
        xp, lambda t: _dot(xp, sdf_of(xp, x0 + u * t[..., None])[1], u) > 0.0, zero - L,
        zero + L)
    return xp.where(hi >= L, L, xp.where(lo <= -L, -L, 0.5 * (lo + hi)))  # an end, exactly


def _bisect_on_slope(xp, rising, lo, hi):
    """The bracket (lo, hi) (N,) of a minimum after ``_BISECTIONS`` halvings on the sign of
    the slope: ``rising(t)`` (N,) says where the function rises at t, the minimum below it."""

    def halve(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        up = rising(mid)
        return xp.where(up, lo, mid), xp.where(up, mid, hi)

    return loop(xp, _BISECTIONS, halve, (lo, hi), indexed=False)


def _sublevel_ends(xp, sdf_of, x0, u, t, L, level):
    """The two ends (lo, hi) of the interval of [-L, L] around ``t`` (the minimum,
    ``_on_line``) where the signed distance along x0 + u t is at most ``level`` (N,) (an
    interval: convex along the line). Each end by ``_ROUNDS`` rounds of 9 samples from the
    inside end of a bracket to its outside end: the samples within the level are a prefix,
    and the bracket shrinks to the last of them and the next."""
    grid = np.linspace(0.0, 1.0, _GRID)
    last = float(_GRID - 1)

    def round_(_, bracket):
        inside, outside = bracket
        width = outside - inside
        ts = inside[..., None] + width[..., None] * grid
        f = sdf_of(xp, x0[..., None, :] + u[..., None, :] * ts[..., None])[0]
        count = xp.sum(xp.where(f <= level[..., None], 1.0, 0.0), axis=-1)
        return (inside + width * (xp.maximum(count, 1.0) - 1.0) / last,
                inside + width * xp.minimum(count, last) / last)

    return [loop(xp, _ROUNDS, round_, (t, t * 0.0 + far), indexed=False)[0] for far in (-L, L)]


def _on_circle_by_slope(xp, sdf_of, c, e1, e2, r):
    """``_on_circle``'s angle for a signed distance whose gradient is exact (an ellipsoid's):
    the least of 8 samples around the circle, then ``_BISECTIONS`` halvings of the 90 degrees
    around it on the sign of the distance's slope along the circle (gradient . tangent)."""
    samples = np.arange(8) * (0.25 * np.pi)
    zero = xp.zeros_like(c[..., 0])
    f = sdf_of(xp, c[..., None, :] + r * _rim(xp, zero[..., None] + samples, e1, e2))[0]
    best = xp.min(f, axis=-1)
    t = xp.min(xp.where(f <= best[..., None], samples, 10.0), axis=-1)

    def rising(a):
        tangent = _rim(xp, a + 0.5 * np.pi, e1, e2)
        return _dot(xp, sdf_of(xp, c + r * _rim(xp, a, e1, e2))[1], tangent) > 0.0

    lo, hi = _bisect_on_slope(xp, rising, t - 0.25 * np.pi, t + 0.25 * np.pi)
    return 0.5 * (lo + hi)


def _rim(xp, t, e1, e2):
    """cos t e1 + sin t e2: a rim's radial directions at the angles t (N, ...) for its axes e1,
    e2 (N, 3): (N, ..., 3)."""
    shape = (e1.shape[0],) + (1,) * (t.ndim - 1) + (3,)
    return (xp.cos(t)[..., None] * xp.reshape(e1, shape)
            + xp.sin(t)[..., None] * xp.reshape(e2, shape))


def _on_circle(xp, sdf_of, c, e1, e2, r):
    """The angle t of least signed distance ``sdf_of`` on the circle c + r (cos t e1 + sin t e2)
    (local points of the solid; c, e1, e2 (N, 3)): 9 samples over the whole circle, then
    ``_search``'s rounds (exact where the distance has one minimum on the circle near the
    best sample, as for a circle meeting a convex solid's face, edge or curved side)."""
    t = xp.zeros_like(c[..., 0])

    def f(ts):
        return sdf_of(xp, c[..., None, :] + r * _rim(xp, ts, e1, e2))[0]

    return _search(xp, f, t, t + np.pi)


def _capsule_solid(xp, a, Ra, pa, b, Rb, pb):
    """A capsule against a box, a cylinder or a convex polytope: the segment's point of least
    signed distance, and two more along it: against a box, the farthest points of the
    segment each way whose projections stay on the face of the first's normal (MuJoCo's
    second point: a capsule lying across a box rests on the face's two edges, not on one
    point; one over the face: its end), against the others its two ends. The first carries
    no contact where it is one of the other two (a capsule standing on its end, or lying
    flat: that slot has it), so that no point is counted twice (two soft contacts at one
    point would be one twice as stiff)."""
    sdf_of = _solid_sdf(b)
    L = a.half_length
    x0, u = _rot_t(xp, Rb, pa - pb), _rot_t(xp, Rb, _col(Ra, 2))  # the segment, b's frame
    t = _on_line(xp, sdf_of, x0, u, L)
    if b.kind == "box" and L > 0:
        ends = _over_face(xp, np.array(b.half_sizes), sdf_of, x0, u, t, L)
    else:
        ends = (t * 0.0 + L, t * 0.0 - L)
    axis = _col(Ra, 2)
    centres = xp.stack([pa + axis * x[..., None] for x in (t,) + ends], axis=1)
    points, normals, depths = _spheres_solid(xp, centres, a.radius, Rb, pb, sdf_of)
    tolerance = _SAME_POINT * L
    twice = (xp.abs(t - ends[0]) <= tolerance) | (xp.abs(t - ends[1]) <= tolerance)
    slots = [xp.where(twice, NO_CONTACT, depths[:, 0]), depths[:, 1], depths[:, 2]]
    if L <= 0:  # a sphere: its two ends are one
        slots[2] = NO_CONTACT + 0.0 * slots[2]
    return points, normals, xp.stack(slots, axis=1)


def _capsule_ellipsoid(xp, a, Ra, pa, b, Rb, pb):
    """A capsule against an ellipsoid: the segment's point of least signed distance only (a
    strictly convex surface meets a segment in one place, as a capsule meets a sphere or a
    capsule; MuJoCo's general convex solver reports this one contact too)."""
    x0, u = _rot_t(xp, Rb, pa - pb), _rot_t(xp, Rb, _col(Ra, 2))  # the segment, b's frame
    t = _on_line_by_slope(xp, _search_sdf(b), x0, u, a.half_length)
    centre = pa + _col(Ra, 2) * t[..., None]
    p, n, d = _spheres_solid(xp, centre, a.radius, Rb, pb, _solid_sdf(b))
    return p[:, None, :], n[:, None, :], d[:, None]


# -- an ellipsoid against another ellipsoid, a box, a polytope or a cylinder: the direction of
# least overlap. In a's (the ellipsoid's) frame, a must move along the unit n by
# f(n) = h_a(n) + h_b(n) to clear b, h the support functions (h_a(n) = sqrt(n^T diag(e^2) n);
# h_b with b's position); min f over n is the penetration depth (> 0) or minus the distance
# (< 0), the minimiser the normal, and the middle of the overlap is a's support point along -n
# moved by f/2 along n (b's support point along n is f n from it there).

def _ellipsoid_support(xp, e2, n):
    """An ellipsoid's support function h(n) = sqrt(n^T diag(e^2) n) (...), for directions n
    (..., 3) in its frame."""
    return xp.sqrt(xp.sum(e2 * n * n, axis=-1))


def _ellipsoid_lowest(xp, e2, n):
    """An ellipsoid's support function h(n) (...) and its lowest point along n, -e^2 n / h
    (its frame), for directions n (..., 3)."""
    h = _ellipsoid_support(xp, e2, n)
    return h, -e2 * n / h[..., None]


def _perpendicular(xp, v):
    """A unit vector perpendicular to the unit v (..., 3)."""
    other = xp.where((xp.abs(v[..., 0]) < 0.9)[..., None], np.array([1.0, 0.0, 0.0]),
                     np.array([0.0, 1.0, 0.0]))
    return _unit(xp, xp.cross(v, other), np.array([0.0, 0.0, 1.0]))[0]


def _least_support(xp, e2, Q, c, n, axis=None):
    """Minimise f(n) = sqrt(n^T diag(e2) n) + sqrt(n^T Q n) + n . c over unit n (..., 3)
    (perpendicular to ``axis`` (..., 3) where given: a circle), from the starts n, by
    ``_SPHERE_NEWTON`` Newton's steps in a trust region (a step that does not lower f is
    undone and the region shrinks; each turns n by ``_TURN`` at most). ``Q``: (..., 3, 3)
    symmetric positive definite, or None for no such term (an ellipsoid's in another's frame,
    R diag(e^2) R^T). f is the support function of a convex body: apart (f < 0) it has one
    minimum on the sphere (its sublevel sets are cones of separating directions) and on a
    great circle. Returns the n reached and f there."""
    def terms(n):  # f, grad f, and the parts of the Hessian
        qa = e2 * n
        ha = xp.sqrt(_dot(xp, n, qa))
        f, grad, parts = ha + _dot(xp, n, c), qa / ha[..., None] + c, [(qa, ha, None)]
        if Q is not None:
            qb = xp.sum(Q * n[..., None, :], axis=-1)
            hb = xp.sqrt(xp.maximum(_dot(xp, n, qb), _TINY * _TINY))
            f, grad = f + hb, grad + qb / hb[..., None]
            parts.append((qb, hb, Q))
        return f, grad, parts

    def curvature(u, v, parts):  # u^T (Hessian of f) v, f extended to R^3 as degree 1
        total = 0.0
        for q, h, M in parts:
            Mv = e2 * v if M is None else xp.sum(M * v[..., None, :], axis=-1)
            total = total + (_dot(xp, u, Mv) - _dot(xp, q, u) * _dot(xp, q, v) / (h * h)) / h
        return total

    def step(_, state):
        n, radius = state
        f, grad, parts = terms(n)
        # the Hessian on the sphere: the tangent block, less f (n . grad f = f: degree 1)
        floor = 1e-6 * parts[0][1]  # made positive definite: at least this
        if axis is None:
            t1 = _perpendicular(xp, n)
            t2 = xp.cross(n, t1)
            g1, g2 = _dot(xp, t1, grad), _dot(xp, t2, grad)
            h11, h22 = curvature(t1, t1, parts) - f, curvature(t2, t2, parts) - f
            h12 = curvature(t1, t2, parts)
            least = 0.5 * (h11 + h22) - xp.sqrt(0.25 * (h11 - h22) ** 2 + h12 * h12)
            shift = xp.maximum(floor - least, 0.0)
            k11, k22 = h11 + shift, h22 + shift
            det = k11 * k22 - h12 * h12
            s1, s2 = (h12 * g2 - k22 * g1) / det, (h12 * g1 - k11 * g2) / det
            move = t1 * s1[..., None] + t2 * s2[..., None]
        else:
            t1 = xp.cross(axis, n)  # unit: n is a unit vector perpendicular to the axis
            s1 = -_dot(xp, t1, grad) / xp.maximum(curvature(t1, t1, parts) - f, floor)
            move = t1 * s1[..., None]
        length = _norm(xp, move)
        scale = xp.minimum(1.0, radius / xp.maximum(length, _TINY))
        trial, _ = _unit(xp, n + move * scale[..., None], n)
        better = terms(trial)[0] <= f
        return (xp.where(better[..., None], trial, n),
                xp.where(better, xp.minimum(2.0 * radius, _TURN), 0.25 * radius))

    if axis is not None:  # a start along the axis: any direction across it
        n, _ = _unit(xp, n - axis * _dot(xp, n, axis)[..., None], _perpendicular(xp, axis))
    n, _ = loop(xp, _SPHERE_NEWTON, step, (n, xp.zeros_like(n[..., 0]) + _TURN), indexed=False)
    return n, terms(n)[0]


def _least_overlap_point(xp, a, Ra, pa, n, depth):
    """(point (N, 1, 3), normal (N, 1, 3), depth (N, 1)) world, from a's frame direction n
    (N, 3) and the overlap ``depth`` (N,) along it."""
    _, low = _ellipsoid_lowest(xp, np.asarray(a.radii, dtype=float) ** 2, n)
    local = low + n * (0.5 * depth)[..., None]
    return ((pa + _rot(xp, Ra, local))[:, None, :], _rot(xp, Ra, n)[:, None, :],
            depth[:, None])


def _pick_least(xp, f, n):
    """The direction of least f (N, C) among n (N, C, 3) (the first on ties), and that f."""
    least = xp.min(f, axis=-1)
    return _first_of(xp, f == least[..., None], n), least


def _two_ellipsoids(xp, a, Ra, pa, b, Rb, pb):
    """Two ellipsoids: f(n) = h_a(n) + h_b(n) + n . c (c: b's centre in a's frame) is smooth;
    ``_least_support`` from the centres' direction and a's axes both ways (7 starts), the
    least kept. Apart: the distance, exact. Overlapping: the least of the local minima from
    those starts, the penetration depth where it is among them (on 12,000 random poses of
    random ellipsoids, however deep, always)."""
    Rab, c = _relative(xp, Ra, pa, Rb, pb)
    Q = xp.sum(Rab[:, :, None, :] * (Rab * np.asarray(b.radii, dtype=float) ** 2)[:, None, :, :],
               axis=-1)[:, None, :, :]                                  # b's e^2 in a's frame
    toward, _ = _unit(xp, -c, np.array([0.0, 0.0, 1.0]))
    starts = xp.stack([toward] + [xp.zeros_like(toward) + s * np.eye(3)[k] for k in range(3)
                                  for s in (1.0, -1.0)], axis=1)
    n, f = _least_support(xp, np.asarray(a.radii, dtype=float) ** 2, Q, c[:, None, :], starts)
    n, depth = _pick_least(xp, f, n)
    return _least_overlap_point(xp, a, Ra, pa, n, depth)


def _ellipsoid_solid(xp, a, Ra, pa, b, Rb, pb):
    """An ellipsoid against a box, a convex polytope or a cylinder: f(n) = h_a(n) + h_b(n) is
    measured exactly (h_b: the largest of the corners' n . x; a cylinder's from its centre,
    radius and axis) at a candidate direction from each feature of b that can be the one
    touching, the least kept. Each candidate is the minimum of f's part for that feature (the
    support function of a plus the feature: smooth), which is f's minimum where it lies in
    the directions that feature supports: a corner's, a's inward normal at the point nearest
    to it (``_ellipsoid_sdf``: exact); an edge's (a cylinder's side line's), over the circle
    of directions across it (``_least_support`` from a's centre's direction); a rim's, a's
    inward normal nearest to the rim's point of least signed distance
    (``_on_circle_by_slope``); a face's (an end face's), its normal. Apart, each part has one
    minimum: the distance, exact. Overlapping,
    exact wherever the feature that touches is no deeper in a than the centre of curvature
    of a's surface nearest to it (a depth below min(radii)^2 / max(radii) always); deeper, an
    upper bound (the overlap along a direction that does separate them)."""
    e2 = np.asarray(a.radii, dtype=float) ** 2
    Rab, c = _relative(xp, Ra, pa, Rb, pb)

    def in_a(x):  # b's points or directions (K, 3), b's frame -> (N, K, 3) in a's frame
        return xp.sum(Rab[:, None, :, :] * np.asarray(x)[None, :, None, :], axis=-1)

    def away(x):  # a start: from x (..., 3) towards a's centre
        return _unit(xp, -x, np.array([0.0, 0.0, 1.0]))[0]

    if b.kind == "cylinder":
        k, r, L = Rab[..., :, 2], b.radius, b.half_length
        x_axis, y_axis = Rab[..., :, 0], Rab[..., :, 1]
        side, _ = _least_support(xp, e2, None, c, away(c), axis=k)
        candidates = [k, -k, side]
        for end in (1.0, -1.0):
            centre = c + k * (end * L)
            t = _on_circle_by_slope(xp, _search_sdf(a), centre, x_axis, y_axis, r)
            rim = centre + r * _rim(xp, t, x_axis, y_axis)
            candidates.append(-_ellipsoid_sdf(xp, rim, a.radii)[1])
        n = xp.stack(candidates, axis=1)
        along = _dot(xp, n, k[:, None, :])
        across = _norm(xp, n - k[:, None, :] * along[..., None])  # not sqrt(1 - along^2)
        h_b = _dot(xp, n, c[:, None, :]) + r * across + L * xp.abs(along)
    else:
        V, edges = _corners(b)
        corners = c[:, None, :] + in_a(V)
        middles = c[:, None, :] + in_a([(V[i] + V[j]) / 2 for i, j in edges])
        u, _ = _unit(xp, in_a([V[j] - V[i] for i, j in edges]), np.array([0.0, 0.0, 1.0]))
        n = xp.concatenate([-_ellipsoid_sdf(xp, corners, a.radii)[1],
                            _least_support(xp, e2, None, middles, away(middles), axis=u)[0],
                            in_a(_polytope(b)[1][:, :3])], axis=1)
        h_b = xp.max(xp.sum(n[:, :, None, :] * corners[:, None, :, :], axis=-1), axis=-1)
    n, depth = _pick_least(xp, _ellipsoid_support(xp, e2, n) + h_b, n)
    return _least_overlap_point(xp, a, Ra, pa, n, depth)


def _over_face(xp, h, sdf_of, x0, u, t, L):
    """(t_plus, t_minus) (N,): the farthest parameters of the segment x0 + u t' (b's frame,
    t' in [-L, L]) from ``t`` each way whose points stay within the box |x_i| <= h_i across
    the face of the box's gradient at t (its two other axes): where the segment leaves that
    face's rectangle, or its end."""
    _, g = sdf_of(xp, x0 + u * t[..., None])
    across, _ = _first_min(xp, [-xp.abs(g[..., i]) for i in range(3)])  # the face's axis
    big = 1e30
    plus, minus = t * 0.0 + big, t * 0.0 - big
    for i in range(3):
        moves = (xp.abs(u[..., i]) > _TINY) & ~across[i]
        ui = xp.where(moves, u[..., i], 1.0)
        side = _sign(xp, ui) * h[i]
        plus = xp.minimum(plus, xp.where(moves, (side - x0[..., i]) / ui, big))
        minus = xp.maximum(minus, xp.where(moves, (-side - x0[..., i]) / ui, -big))
    return (xp.minimum(L, xp.maximum(t, plus)), xp.maximum(-L, xp.minimum(t, minus)))


def _cylinder_into(xp, a, Ra, pa, b, Rb, pb, flip=False):
    """Cylinder ``a``'s surface points that meet a box or cylinder ``b`` first, against ``b``'s
    signed distance (``_points_into``; (N, 11) slots):

    * [0]: the point of least signed distance on the side line facing ``b``
      (its azimuth: away from ``b``'s distance gradient at the axis point of least distance,
      the middle of the axis's flat part: a log across a box faces its face, not an edge);
    * [1], [2]: the two ends of the part of that line at least half as deep (``_sublevel_ends``;
      apart: within ``_FLAT`` of its least distance), with the normal of [0]: a side resting
      on a face, or across a box, rests on both ends (the gradient of a point there, near the
      face's edges, would be the side face's);
    * [3:7], [7:11]: four rim points of each end face, 90 degrees apart, starting at the rim
      point of least signed distance (``_on_circle``): the deepest rim points and a support
      around them (a cylinder standing on a face, a rim on an edge)."""
    sdf_of = _search_sdf(b)  # the final points measured exactly: _points_into
    r, h = a.radius, a.half_length
    x0 = _rot_t(xp, Rb, pa - pb)
    axis = _rot_t(xp, Rb, _col(Ra, 2))
    t = _on_line(xp, sdf_of, x0, axis, h)
    flat = sdf_of(xp, x0 + axis * t[..., None])[0] + _FLAT
    lo, hi = _sublevel_ends(xp, sdf_of, x0, axis, t, h, flat)
    _, g = sdf_of(xp, x0 + axis * (0.5 * (lo + hi))[..., None])  # the middle of a flat part
    g = g - axis * _dot(xp, g, axis)[..., None]
    v, _ = _unit(xp, -g, _rot_t(xp, Rb, _col(Ra, 0)))   # towards b, across the axis
    side = x0 + v * r
    s = _on_line(xp, sdf_of, side, axis, h)
    deepest = sdf_of(xp, side + axis * s[..., None])[0]
    level = xp.maximum(deepest + _FLAT, 0.5 * deepest)  # inside: at least half as deep
    points = [side + axis * s[..., None]]
    points += [side + axis * e[..., None]
               for e in _sublevel_ends(xp, sdf_of, side, axis, s, h, level)]
    e1, e2 = _rot_t(xp, Rb, _col(Ra, 0)), _rot_t(xp, Rb, _col(Ra, 1))
    for end in (h, -h):
        c = x0 + axis * end
        t0 = _on_circle(xp, sdf_of, c, e1, e2, r)
        for k in range(4):
            angle = t0 + k * (np.pi / 2)
            points.append(c + r * _rim(xp, angle, e1, e2))
    world = _to_world(xp, Rb, pb, xp.stack(points, axis=1))          # (N, 11, 3) from b's frame
    p, n, d = _points_into(xp, world, Rb, pb, b, flip)
    ends = world[:, 1:3]
    n_ends = xp.broadcast_to(n[:, 0:1], ends.shape)                  # the deepest point's
    p_ends = ends + n_ends * ((-0.5 if flip else 0.5) * d[:, 1:3])[..., None]
    return (xp.concatenate([p[:, :1], p_ends, p[:, 3:]], axis=1),
            xp.concatenate([n[:, :1], n_ends, n[:, 3:]], axis=1), d)


def _points_into(xp, points, Rb, pb, b, flip):
    """Surface points of one geometry (world, (N, K, 3)) against the solid ``b`` at (Rb, pb):
    (points in the middle of the overlap, normals, depths = minus each point's signed
    distance). Normals point from ``b`` towards the points (``flip``: the other way)."""
    p, n, d = _spheres_solid(xp, points, 0.0, Rb, pb, _solid_sdf(b))
    return p, (-n if flip else n), d


def _corners(g):
    """A box's or a convex polytope's corners (m, 3) and edges [(i, j)] in its frame."""
    if g.kind == "box":
        edges = [(i, i | 1 << k) for i in range(8) for k in range(3) if not i & 1 << k]
        return _SIGNS * np.array(g.half_sizes), edges
    return np.array(g.vertices), list(g.edges)


def _relative(xp, Ra, pa, Rb, pb):
    """b's pose in a's frame: the rotation Ra^T Rb (N, 3, 3) and the position Ra^T (pb - pa)
    (N, 3)."""
    return (xp.sum(Ra[..., :, :, None] * Rb[..., :, None, :], axis=-3),
            _rot_t(xp, Ra, pb - pa))


def _polytope_points(xp, b, Rb, pb, a, Ra, pa):
    """The points of a box's or convex polytope's surface (``b``) that meet the solid ``a``
    first (world, (N, m + 1, 3)): its m corners, then the point of least signed distance to
    ``a`` over its edges (one search per edge, ``_on_line``: an edge crossing ``a``'s side or
    rim with both corners outside)."""
    V, edges = _corners(b)
    corners = _to_world(xp, Rb, pb, V)
    centres = np.array([(V[i] + V[j]) / 2 for i, j in edges])
    spans = np.array([(V[j] - V[i]) / 2 for i, j in edges])
    Rab, t = _relative(xp, Ra, pa, Rb, pb)
    x0 = (t[:, None, :]
          + xp.sum(Rab[:, None, :, :] * centres[None, :, None, :], axis=-1))
    u = xp.sum(Rab[:, None, :, :] * spans[None, :, None, :], axis=-1)   # (N, E, 3) in a's
    sdf_of = _search_sdf(a)  # the deepest edge point measured exactly later
    t = _on_line(xp, sdf_of, x0, u, 1.0)
    local = x0 + u * t[..., None]
    f = sdf_of(xp, local)[0]
    flags, _ = _first_min(xp, [f[:, e] for e in range(len(edges))])
    deepest = _pick(xp, flags, [local[:, e] for e in range(len(edges))])
    edge = pa + _rot(xp, Ra, deepest)
    return xp.concatenate([corners, edge[:, None, :]], axis=1)


def _surface_into(xp, g, R, p, other, Ro, po, flip=False):
    """The points of g's surface that meet ``other`` first against ``other``'s signed
    distance (points, normals from ``other`` to g (``flip``: the other way), depths): a
    cylinder's (``_cylinder_into``: 11), a box's or a polytope's corners and deepest edge point
    (``_polytope_points``: m + 1)."""
    if g.kind == "cylinder":
        return _cylinder_into(xp, g, R, p, other, Ro, po, flip)
    return _points_into(xp, _polytope_points(xp, g, R, p, other, Ro, po), Ro, po, other, flip)


def _points_solid(xp, a, Ra, pa, b, Rb, pb):
    """A cylinder or a convex polytope against a box, a cylinder or a convex polytope: ``a``'s
    surface points that meet ``b`` first against ``b``'s signed distance, then ``b``'s against
    ``a``'s, normals flipped (``_surface_into``); two polytopes, then the separating axis of
    least overlap where the points are shallower (``_separating_axes``)."""
    parts = [_surface_into(xp, a, Ra, pa, b, Rb, pb),
             _surface_into(xp, b, Rb, pb, a, Ra, pa, flip=True)]
    deepest = xp.maximum(xp.max(parts[0][2], axis=1), xp.max(parts[1][2], axis=1))
    if a.kind != "cylinder" and b.kind != "cylinder":
        parts.append(_separating_axes(xp, a, Ra, pa, b, Rb, pb, deepest))
    else:  # a cylinder against a box, a polytope or a cylinder
        parts.append(_cylinder_axes(xp, a, Ra, pa, b, Rb, pb, deepest))
    return tuple(xp.concatenate(x, axis=1) for x in zip(*parts))


def _edge_directions(g):
    """A box's or a convex polytope's edge directions (E, 3), unit, one of each parallel set
    (a box's 3), in its frame."""
    V, edges = _corners(g)
    out = []
    for i, j in edges:
        e = (V[j] - V[i]) / np.linalg.norm(V[j] - V[i])
        if not any(abs(e @ d) > 1.0 - 1e-12 for d in out):
            out.append(e)
    return np.array(out)


def _cylinder_axes(xp, a, Ra, pa, b, Rb, pb, deepest):
    """A cylinder ``a`` against a box, a convex polytope or a cylinder ``b``: the axis of least
    overlap, one slot ((N, 1, ...)), as ``_separating_axes`` for two polytopes. The overlap
    along a unit n (b -> a) is b's support along n plus a's along -n: the exact penetration
    depth is its least value over all directions, at one of the directions where a feature of
    one shape meets a feature of the other (``_polytope_features``, ``_cylinder_features``).
    Each is a direction, so each overlap bounds the depth from above; their least is the exact
    depth (the flat faces' normals preferred within 1e-9 m). The point: a's support along -n
    moved by half the depth along n (the middle of the overlap). Kept where the shapes overlap
    and it is deeper than ``deepest`` (N,) (the points inside, ``_surface_into``, a lower bound
    where an edge or a rim crosses an edge or a rim) by more than 1e-9 m; else
    ``NO_CONTACT``."""
    r, h = a.radius, a.half_length
    R, c = _relative(xp, Rb, pb, Ra, pa)            # a in b's frame
    w, e1, e2 = _col(R, 2), _col(R, 0), _col(R, 1)  # (N, 3)

    def overlap(n):  # (N, ..., 3) unit -> (N, ...)
        shape = (n.shape[0],) + (1,) * (n.ndim - 2) + (3,)
        axis = xp.reshape(w, shape)
        nw = _dot(xp, n, axis)
        side = _norm(xp, n - nw[..., None] * axis)  # not sqrt(1 - nw^2): exact near the axis
        return _support(xp, b, n) + r * side + h * xp.abs(nw) - _dot(xp, n, xp.reshape(c, shape))

    features = _cylinder_features if b.kind == "cylinder" else _polytope_features
    faces, others = features(xp, b, a, w, e1, e2, c, overlap)
    preferred = xp.concatenate([faces, xp.stack([w, -w], axis=1)], axis=1)  # and a's end faces
    normals = xp.concatenate([preferred, others], axis=1)
    depths = xp.concatenate([overlap(preferred), overlap(others) + _FACE_BIAS], axis=1)
    least = xp.min(depths, axis=1)
    first = depths == least[:, None]
    n = _first_of(xp, first, normals)
    depth = least - xp.where(xp.any(first[:, preferred.shape[1]:], axis=1), _FACE_BIAS, 0.0)
    nw = _dot(xp, n, w)
    radial, _ = _unit(xp, n - nw[..., None] * w, 0.0 * w)  # 0 along the axis: an end's centre
    support = c - w * (h * _sign(xp, nw))[..., None] - radial * r  # a's least along n
    local = support + n * (0.5 * depth)[..., None]
    kept = (depth > 0.0) & (depth > deepest + _FACE_BIAS)
    return ((pb + _rot(xp, Rb, local))[:, None, :], _rot(xp, Rb, n)[:, None, :],
            xp.where(kept, depth, NO_CONTACT)[:, None])


def _support(xp, g, n):
    """max over the box, polytope or cylinder g of n . x, for directions n (N, ..., 3) in its
    frame (m)."""
    if g.kind == "cylinder":
        return (g.half_length * xp.abs(n[..., 2])
                + g.radius * xp.sqrt(n[..., 0] * n[..., 0] + n[..., 1] * n[..., 1]))
    V, _ = _corners(g)
    return xp.max(xp.sum(n[..., None, :] * V, axis=-1), axis=-1)


def _across(xp, rho, axis, line):
    """The unit directions normal to a rim's tangent and to a line (rho (..., 3): the rim's
    radial directions, axis (..., 3): its cylinder's axis, line (..., 3)): (rho . line) axis -
    (axis . line) rho, which is normal to both (the tangent is axis x rho); rho where the
    tangent is along the line."""
    n = _dot(xp, rho, line)[..., None] * axis - _dot(xp, axis, line)[..., None] * rho
    return _unit(xp, n, rho)[0]


def _polytope_features(xp, b, a, w, e1, e2, c, overlap):
    """The candidate directions of ``_cylinder_axes`` against a box or a convex polytope b (in
    its frame; a's axes w, e1, e2 and centre c (N, 3)): b's face normals (flat, preferred), and
    a's side lines across b's edges (axis x edge), a's side against b's corners (from the
    corner to the axis), a rim across an edge (``_across``: one direction per rim angle, the
    least overlap over the angles searched as ``_on_circle`` does)."""
    V, planes, _ = _polytope(b)
    E = _edge_directions(b)
    zero = xp.zeros_like(c[:, :1])                                     # (N, 1)
    faces = zero[..., None] + planes[None, :, :3]                      # (N, F, 3)
    lines = _unit(xp, xp.cross(w[:, None, :] + 0.0 * E[None], E[None] + zero[..., None]),
                  e1[:, None, :])[0]
    lines = xp.concatenate([lines, -lines], axis=1)                    # (N, 2E, 3)
    out = c[:, None, :] - V[None]                                      # corner -> centre
    corners = _unit(xp, out - _dot(xp, out, w[:, None, :])[..., None] * w[:, None, :],
                    e1[:, None, :])[0]                                 # (N, m, 3)

    def across(t):  # (N, E, G) rim angles -> (N, E, G, 3)
        return _across(xp, _rim(xp, t, e1, e2), w[:, None, None, :], E[None, :, None, :])

    t0 = xp.zeros_like(c[:, :1] + 0.0 * E[None, :, 0])                 # (N, E)
    rims = across(_search(xp, lambda ts: overlap(across(ts)), t0, t0 + np.pi)[..., None])[:, :, 0]
    return faces, xp.concatenate([lines, corners, rims], axis=1)


def _cylinder_features(xp, b, a, w, e1, e2, c, overlap):
    """The candidate directions of ``_cylinder_axes`` against a cylinder b (in its frame: axis
    z; a's axes w, e1, e2 and centre c (N, 3)): b's end faces (+-z, flat, preferred), and the
    side lines across each other (+-w x z), a's rims across b's side lines and b's rims across
    a's (``_across``, searched over the rim's angle), and a rim across a rim: the line from the
    nearest point of b's rim to a point of a's (normal to both tangents at the rims' critical
    points), its length and its overlap (either way) each searched over a's rim angle for
    each of the 4 pairs of rims from 8 starts 45 degrees apart (``_RIM_STARTS``: both have
    several minima along a rim, the overlap's narrow where the rims are close, the length's
    not always the depth's), then ``_NEWTON`` Newton steps from the best to the rims' critical
    point (d . x'(s) = d . y'(t) = 0, d = x(s) - y(t)): the lines found and Newton's are
    candidates."""
    x_, y_, z = (xp.zeros_like(c) + np.eye(3)[k] for k in range(3))   # b's axes (N, 3)
    faces = xp.stack([z, -z], axis=1)
    line = _unit(xp, xp.cross(w, z), e1)[0]
    t0 = xp.zeros_like(c[:, :1])                                       # (N, 1)

    def like(v, t):  # v (N, 3) broadcast against directions at the angles t (N, ...)
        return xp.reshape(v, (v.shape[0],) + (1,) * (t.ndim - 1) + (3,))

    def a_across(t):  # a's rims across b's side lines
        return _across(xp, _rim(xp, t, e1, e2), like(w, t), like(z, t))

    def b_across(t):  # b's rims across a's side lines
        return _across(xp, _rim(xp, t, x_, y_), like(z, t), like(w, t))

    sides = [f(_search(xp, lambda ts: overlap(f(ts)), t0, t0 + np.pi))
             for f in (a_across, b_across)]
    ends = [(sa, sb) for sa in (1.0, -1.0) for sb in (1.0, -1.0)]
    centres_a = xp.stack([c + w * (sa * a.half_length) for sa, _ in ends], axis=1)   # (N, 4, 3)
    centres_b = np.array([[0.0, 0.0, sb * b.half_length] for _, sb in ends])          # (4, 3)

    def rim_a(t):  # (N, 4, ...) angles of a's rims -> (points, tangents d/dt), b's frame
        extra = (1,) * (t.ndim - 2)
        centre = xp.reshape(centres_a, centres_a.shape[:2] + extra + (3,))
        return (centre + a.radius * _rim(xp, t, e1, e2),
                a.radius * _rim(xp, t + np.pi / 2, e1, e2))

    def nearest_b(x):  # points (N, 4, ..., 3) -> the nearest points of b's rims, their radials
        centre = np.reshape(centres_b, (1, 4) + (1,) * (x.ndim - 3) + (3,))
        radial, _ = _unit(xp, (x - centre) * np.array([1.0, 1.0, 0.0]), np.eye(3)[0])
        return centre + b.radius * radial, radial

    def rim_rim(t):  # from b's nearest rim point to a's rim point at t: (unit, length); a's
        x = rim_a(t)[0]  # axis where they meet (a direction: its overlap bounds the depth too)
        return _unit(xp, x - nearest_b(x)[0], like(w, t) + 0.0 * x)

    def gap(t):  # the distance between the rims
        return rim_rim(t)[1]

    def least(t):  # the overlap along +-rim_rim(t) (apart, or crossing), huge where they meet
        n, length = rim_rim(t)
        return xp.where(length > _TINY, xp.minimum(overlap(n), overlap(-n)), 1e300)

    def newton(_, st):  # one Newton step towards d . x'(s) = d . y'(t) = 0, d = x(s) - y(t)
        s, u = st  # a's rim angle, b's rim point's radial (its angle t, as a unit vector)
        x, dx = rim_a(s)
        du = xp.cross(like(z, s) + 0.0 * u, u)      # the radial turned by 90 degrees about z
        y = np.reshape(centres_b, (1, 4, 3)) + b.radius * u
        dy = b.radius * du
        d = x - y
        g1, g2 = _dot(xp, d, dx), _dot(xp, d, dy)
        j11 = _dot(xp, dx, dx) - _dot(xp, d, x - xp.reshape(centres_a, x.shape))
        j12 = -_dot(xp, dy, dx)
        j22 = -_dot(xp, dy, dy) + _dot(xp, d, -b.radius * u)
        det = j11 * j22 + j12 * j12                 # J = [[j11, j12], [-j12, j22]]
        ok = xp.abs(det) > _TINY
        det = xp.where(ok, det, 1.0)
        ds = xp.where(ok, -(j22 * g1 - j12 * g2) / det, 0.0)
        dt = xp.where(ok, -(j12 * g1 + j11 * g2) / det, 0.0)
        return s + ds, xp.cos(dt)[..., None] * u + xp.sin(dt)[..., None] * du

    spacing = 2 * np.pi / _RIM_STARTS
    starts = xp.zeros_like(centres_a[..., :1]) + spacing * np.arange(_RIM_STARTS)  # (N, 4, S)
    rims = []
    for f in (gap, least):
        t = _search(xp, f, starts, 0.0 * starts + spacing / 2, rounds=_RIM_ROUNDS)
        best = f(t)
        t = xp.sum(xp.where(_first_rows(xp, best == xp.min(best, axis=-1)[..., None]), t, 0.0),
                   axis=-1)                                                      # (N, 4)
        s, u = loop(xp, _NEWTON, newton, (t, nearest_b(rim_a(t)[0])[1]), indexed=False)
        y = np.reshape(centres_b, (1, 4, 3)) + b.radius * u
        for n in (rim_rim(t)[0], _unit(xp, rim_a(s)[0] - y, like(w, t) + 0.0 * y)[0]):
            rims += [n, -n]
    return faces, xp.concatenate([xp.stack([line, -line], axis=1)] + sides + rims, axis=1)


def _polytope(g):
    """A box's or a convex polytope's corners (m, 3), face planes (f, 4: outward unit normal n
    and offset d, n . x <= d inside) and edges [(i, j, normal of one face, of the other)], in
    its frame: what the separating-axis test reads (``_separating_axes``)."""
    V, edges = _corners(g)
    if g.kind == "box":
        h = np.array(g.half_sizes)
        planes = np.array([np.r_[s * np.eye(3)[k], h[k]] for k in range(3) for s in (1, -1)])
    else:
        planes = np.array(g.planes)
    tol = 1e-9 * max(1.0, float(np.abs(V).max()))
    on = np.abs(V @ planes[:, :3].T - planes[:, 3]) < tol          # (m, f): corner on face
    adjacent = []
    for i, j in edges:
        faces = np.nonzero(on[i] & on[j])[0]
        adjacent.append((i, j, planes[faces[0], :3], planes[faces[-1], :3]))
    return V, planes, adjacent


def _separating_axes(xp, a, Ra, pa, b, Rb, pb, deepest):
    """Two polytopes (boxes or convex): the separating-axis test (Gregorius, "The separating
    axis test between convex polyhedra", GDC 2013), one slot ((N, 1, ...)). Axes: each face's
    normal (the other's corners against its plane) and the cross products of the pairs of
    edges that make a face of the Minkowski difference (their arcs on the Gauss map cross: the
    other pairs are no axis). The axis of least overlap (faces preferred within 1e-9 m) is the
    normal and its overlap the exact penetration depth; the point the middle of the overlap at
    the other polytope's deepest corner past a face, or at the closest points of the two edges.
    Kept where it is deeper than ``deepest`` (N,) (the points inside, ``_surface_into``, which
    bound it from below where an edge crosses an edge or a face's edge) by more than 1e-9 m;
    else ``NO_CONTACT``. Computed in ``a``'s frame, on arrays of every face and every pair of
    edges at once (a few large operations: JAX compiles them as fast as a small pair); normals
    b -> a."""
    VA, planes_a, edges_a = _polytope(a)
    VB, planes_b, edges_b = _polytope(b)
    Rab, t = _relative(xp, Ra, pa, Rb, pb)

    def into_a(x):  # b's vectors (..., 3) in a's frame: (N, ..., 3)
        R = Rab.reshape((Rab.shape[0],) + (1,) * (x.ndim - 1) + (3, 3))
        return xp.sum(R * x[..., None, :], axis=-1)

    vB = t[:, None, :] + into_a(VB)                                          # (N, mB, 3)
    # b's corners past a's faces (a moves along -n), a's past b's (a moves along +n)
    nA, dA = planes_a[:, :3], planes_a[:, 3]
    past_a = xp.sum(vB[:, None, :, :] * nA[None, :, None, :], axis=-1)       # (N, fA, mB)
    low_a = xp.min(past_a, axis=-1)
    nB = into_a(planes_b[:, :3])                                             # (N, fB, 3)
    past_b = xp.sum(nB[:, :, None, :] * VA[None, None, :, :], axis=-1)      # (N, fB, mA)
    low_b = xp.min(past_b, axis=-1)
    face_depths = xp.concatenate([dA - low_a, planes_b[:, 3] + _dot(xp, nB, t[:, None, :])
                                  - low_b], axis=1)
    face_normals = xp.concatenate([xp.zeros_like(nB[:, :1, :]) - nA, nB], axis=1)
    witness = xp.concatenate([_first_of(xp, past_a == low_a[..., None], vB[:, None, :, :]),
                              _first_of(xp, past_b == low_b[..., None], VA)], axis=1)
    # pairs of edges (i of a, j of b): (N, EA, EB)
    ia, ja = [e[0] for e in edges_a], [e[1] for e in edges_a]
    ib, jb = [e[0] for e in edges_b], [e[1] for e in edges_b]
    u1 = np.array([e[2] for e in edges_a])[None, :, None, :]
    v1 = np.array([e[3] for e in edges_a])[None, :, None, :]
    ea = (VA[ja] - VA[ia])[None, :, None, :]
    out_a = (VA[ia] - VA.mean(axis=0))[None, :, None, :]
    c = -into_a(np.array([e[2] for e in edges_b]))[:, None, :, :]   # b's normals, negated
    d = -into_a(np.array([e[3] for e in edges_b]))[:, None, :, :]
    pB, qB = vB[:, ib, :][:, None, :, :], vB[:, jb, :][:, None, :, :]
    ba, dc = np.cross(v1, u1), xp.cross(d, c)
    cba, dba = _dot(xp, c, ba), _dot(xp, d, ba)
    adc, bdc = _dot(xp, u1, dc), _dot(xp, v1, dc)
    face = (cba * dba < 0.0) & (adc * bdc < 0.0) & (cba * bdc > 0.0)
    eb = qB - pB
    n, length = _unit(xp, xp.cross(ea + 0.0 * eb, eb), u1)  # ea broadcast to the pairs
    n = n * _sign(xp, _dot(xp, n, out_a))[..., None]                          # out of a
    ok = face & (length > _EDGE_SIN * np.linalg.norm(ea, axis=-1) * _norm(xp, eb))
    edge_depths = xp.where(ok, _dot(xp, n, VA[ia][None, :, None, :] - pB), -NO_CONTACT)
    shape = (Rab.shape[0], len(edges_a) * len(edges_b))
    depths = xp.concatenate([face_depths, edge_depths.reshape(shape) + _FACE_BIAS], axis=1)
    normals = xp.concatenate([face_normals, -n.reshape(shape + (3,))], axis=1)
    least = xp.min(depths, axis=1)
    first = depths == least[:, None]
    n = _first_of(xp, first, normals)
    faces = face_depths.shape[1]
    on_edges = ~xp.any(first[:, :faces], axis=1)
    depth = least - xp.where(on_edges, _FACE_BIAS, 0.0)
    half = n * (0.5 * depth)[..., None]
    on_a = xp.any(first[:, :len(planes_a)], axis=1) & ~on_edges
    local = _first_of(xp, first[:, :faces], witness) + xp.where(on_a[..., None], -half, half)
    chosen = first[:, faces:].reshape((shape[0], len(edges_a), len(edges_b)))
    # the chosen pair's edges: a's the first row holding it, b's the first column
    in_a = xp.any(chosen, axis=2)
    in_b = xp.any(chosen & _first_rows(xp, in_a)[..., None], axis=1)
    ends_a = [_first_of(xp, in_a, xp.zeros_like(vB[:, :1, :]) + V) for V in (VA[ia], VA[ja])]
    ends_b = [_first_of(xp, in_b, vB[:, idx, :]) for idx in (ib, jb)]
    dA_, hA = _unit(xp, ends_a[1] - ends_a[0], xp.zeros_like(t))
    dB_, hB = _unit(xp, ends_b[1] - ends_b[0], xp.zeros_like(t))
    xA, xB, _ = _segments(xp, 0.5 * (ends_a[0] + ends_a[1]), dA_, 0.5 * hA,
                          0.5 * (ends_b[0] + ends_b[1]), dB_, 0.5 * hB)
    local = xp.where(on_edges[..., None], 0.5 * (xA + xB), local)
    kept = depth > deepest + _FACE_BIAS
    return ((pa + _rot(xp, Ra, local))[:, None, :], _rot(xp, Ra, n)[:, None, :],
            xp.where(kept, depth, NO_CONTACT)[:, None])


def _first_rows(xp, flags):
    """flags (N, k) with only the first raised entry of each row kept."""
    k = flags.shape[-1]
    index = xp.min(xp.where(flags, np.arange(k), k), axis=-1)
    return np.arange(k) == index[..., None]


def _first_of(xp, flags, options):
    """The option (..., k, 3) at the first raised flag (..., k) of each row (zeros where none
    is): a one-hot sum, exact."""
    one = _first_rows(xp, flags)
    return xp.sum(xp.where(one[..., None], options, 0.0), axis=-2)


def _liang_barsky(xp, P, Q, planes):
    """Clip the 2-D segments P -> Q (..., 2) to the half-planes [(n (..., 2), c (...)), ...]
    (n . x <= c): (start point, non-empty)."""
    d = Q - P
    t0, t1 = 0.0, 1.0
    empty = None
    for n, c in planes:
        an = _dot(xp, n, d)
        bn = c - _dot(xp, n, P)
        ratio = bn / _safe(xp, an)
        t1 = xp.minimum(t1, xp.where(an > _TINY, ratio, 1.0))
        t0 = xp.maximum(t0, xp.where(an < -_TINY, ratio, 0.0))
        out = (xp.abs(an) <= _TINY) & (bn < 0.0)
        empty = out if empty is None else empty | out
    valid = (t0 <= t1) & ~empty
    return P + d * t0[..., None], valid


def _box_box(xp, a, Ra, pa, b, Rb, pb):
    ha, hb = np.array(a.half_sizes), np.array(b.half_sizes)
    d = pa - pb
    A = [_col(Ra, i) for i in range(3)]
    B = [_col(Rb, j) for j in range(3)]
    C = [[_dot(xp, A[i], B[j]) for j in range(3)] for i in range(3)]
    absC = [[xp.abs(C[i][j]) for j in range(3)] for i in range(3)]

    overlaps, normals = [], []
    for i in range(3):  # faces of a
        s = _dot(xp, d, A[i])
        rb = hb[0] * absC[i][0] + hb[1] * absC[i][1] + hb[2] * absC[i][2]
        overlaps.append(ha[i] + rb - xp.abs(s))
        normals.append(A[i] * _sign(xp, s)[..., None])
    for j in range(3):  # faces of b
        s = _dot(xp, d, B[j])
        ra = ha[0] * absC[0][j] + ha[1] * absC[1][j] + ha[2] * absC[2][j]
        overlaps.append(ra + hb[j] - xp.abs(s))
        normals.append(B[j] * _sign(xp, s)[..., None])
    face_overlaps = list(overlaps)
    for i in range(3):  # edges a_i x b_j
        for j in range(3):
            axis, length = _unit(xp, xp.cross(A[i], B[j]), A[i])
            ok = length > _EDGE_SIN
            s = _dot(xp, d, axis)
            ra = sum(ha[k] * xp.abs(_dot(xp, A[k], axis)) for k in range(3) if k != i)
            rb = sum(hb[k] * xp.abs(_dot(xp, B[k], axis)) for k in range(3) if k != j)
            overlaps.append(xp.where(ok, ra + rb - xp.abs(s), -NO_CONTACT) + _FACE_BIAS)
            normals.append(axis * _sign(xp, s)[..., None])
    flags, _ = _first_min(xp, overlaps)
    n = _pick(xp, flags, normals)
    depth = _pick(xp, flags, overlaps[:6] + [o - _FACE_BIAS for o in overlaps[6:]])
    is_edge = flags[6]
    for f in flags[7:]:
        is_edge = is_edge | f

    # ---- face manifold: reference face on the box of the least face overlap
    fa, ma = _first_min(xp, face_overlaps[:3])
    fb, mb = _first_min(xp, face_overlaps[3:])
    ref_a = ma <= mb
    face_n = xp.where(ref_a[..., None], _pick(xp, fa, normals[:3]), _pick(xp, fb, normals[3:6]))
    one_hot = lambda flags: xp.stack([xp.where(f, 1.0, 0.0) for f in flags], axis=-1)  # noqa
    ra_ = ref_a[..., None]
    ra2 = ref_a[..., None, None]
    R_ref, p_ref = xp.where(ra2, Ra, Rb), xp.where(ra_, pa, pb)
    R_inc, p_inc = xp.where(ra2, Rb, Ra), xp.where(ra_, pb, pa)
    h_ref, h_inc = xp.where(ra_, ha, hb), xp.where(ra_, hb, ha)
    w = xp.where(ra_, one_hot(fa), one_hot(fb))
    u = xp.where(ra_, -face_n, face_n)  # the reference face's outward normal
    w1 = xp.stack([w[..., 2], w[..., 0], w[..., 1]], axis=-1)
    w2 = xp.stack([w[..., 1], w[..., 2], w[..., 0]], axis=-1)
    f1, f2 = _rot(xp, R_ref, w1), _rot(xp, R_ref, w2)
    hx, hy = _dot(xp, h_ref, w1), _dot(xp, h_ref, w2)
    c_ref = p_ref + u * _dot(xp, h_ref, w)[..., None]

    z = _rot_t(xp, R_inc, u)
    fz, _ = _first_min(xp, [-xp.abs(z[..., k]) for k in range(3)])
    v = one_hot(fz)
    zj = _dot(xp, z, v)
    m = _rot(xp, R_inc, v) * (-_sign(xp, zj))[..., None]  # incident face's outward normal
    v1 = xp.stack([v[..., 2], v[..., 0], v[..., 1]], axis=-1)
    v2 = xp.stack([v[..., 1], v[..., 2], v[..., 0]], axis=-1)
    c_inc = p_inc + m * _dot(xp, h_inc, v)[..., None]
    e1 = _rot(xp, R_inc, v1) * _dot(xp, h_inc, v1)[..., None]
    e2 = _rot(xp, R_inc, v2) * _dot(xp, h_inc, v2)[..., None]

    def plane2(X):
        Y = X - c_ref
        return xp.stack([_dot(xp, Y, f1), _dot(xp, Y, f2)], axis=-1)

    inc = [plane2(c_inc + e1 + e2), plane2(c_inc - e1 + e2), plane2(c_inc - e1 - e2),
           plane2(c_inc + e1 - e2)]
    area = sum(inc[k][..., 0] * inc[(k + 1) % 4][..., 1] - inc[(k + 1) % 4][..., 0] * inc[k][..., 1]
               for k in range(4))
    ccw = (area >= 0.0)[..., None]
    inc = [inc[0], xp.where(ccw, inc[1], inc[3]), inc[2], xp.where(ccw, inc[3], inc[1])]
    zero = xp.zeros_like(hx)
    one = zero + 1.0
    rect = [xp.stack([hx, hy], -1), xp.stack([-hx, hy], -1), xp.stack([-hx, -hy], -1),
            xp.stack([hx, -hy], -1)]
    rect_planes = [(xp.stack([one, zero], -1), hx), (xp.stack([-one, zero], -1), hx),
                   (xp.stack([zero, one], -1), hy), (xp.stack([zero, -one], -1), hy)]
    inc_planes = []
    for k in range(4):
        e = inc[(k + 1) % 4] - inc[k]
        nk = xp.stack([e[..., 1], -e[..., 0]], -1)
        inc_planes.append((nk, _dot(xp, nk, inc[k])))
    starts = []
    for k in range(4):
        starts.append(_liang_barsky(xp, inc[k], inc[(k + 1) % 4], rect_planes))
    for k in range(4):
        starts.append(_liang_barsky(xp, rect[k], rect[(k + 1) % 4], inc_planes))
    mu = _dot(xp, m, u)  # <= -1/sqrt(3)
    face_pts, face_depths, any_valid = [], [], None
    for x2d, valid in starts:
        P0 = c_ref + f1 * x2d[..., 0:1] + f2 * x2d[..., 1:2]
        lam = _dot(xp, m, c_inc - P0) / xp.where(mu < -_TINY, mu, -1.0)
        face_pts.append(P0 + u * (0.5 * lam)[..., None])
        face_depths.append(xp.where(valid, -lam, NO_CONTACT))
        any_valid = valid if any_valid is None else any_valid | valid
    # faces whose projections miss each other (boxes apart): slot 0 is the incident box's
    # deepest corner along -u, at the separating-axis depth
    corner = p_inc
    for k in range(3):
        col = _col(R_inc, k)
        corner = corner - col * (h_inc[..., k] * _sign(xp, _dot(xp, col, u)))[..., None]
    face_pts[0] = xp.where(any_valid[..., None], face_pts[0], corner + u * (0.5 * depth)[..., None])
    face_depths[0] = xp.where(any_valid, face_depths[0], depth)

    # ---- edge manifold: the middle of the closest points of the two support edges
    wa = [fl for fl in flags[6:]]
    wA = [xp.where(wa[3 * i] | wa[3 * i + 1] | wa[3 * i + 2], 1.0, 0.0) for i in range(3)]
    wB = [xp.where(wa[j] | wa[3 + j] | wa[6 + j], 1.0, 0.0) for j in range(3)]
    cA, dA, hA = pa, 0.0 * pa, 0.0 * depth
    cB, dB, hB = pb, 0.0 * pb, 0.0 * depth
    for k in range(3):
        sa = -_sign(xp, _dot(xp, A[k], n))   # a's support towards b (along -n)
        sb = _sign(xp, _dot(xp, B[k], n))    # b's support towards a (along +n)
        cA = cA + A[k] * ((1.0 - wA[k]) * ha[k] * sa)[..., None]
        cB = cB + B[k] * ((1.0 - wB[k]) * hb[k] * sb)[..., None]
        dA, hA = dA + A[k] * wA[k][..., None], hA + wA[k] * ha[k]
        dB, hB = dB + B[k] * wB[k][..., None], hB + wB[k] * hb[k]
    xA, xB, _ = _segments(xp, cA, dA, hA, cB, dB, hB)
    edge_pt = 0.5 * (xA + xB)

    ie = is_edge[..., None]
    points = [xp.where(ie, edge_pt, face_pts[0])] + [
        xp.where(ie, edge_pt, p) for p in face_pts[1:]]
    depths = [xp.where(is_edge, depth, face_depths[0])] + [
        xp.where(is_edge, NO_CONTACT, dd) for dd in face_depths[1:]]
    # a vertex of the overlap found twice (an edge resting on a face: the polygon a segment)
    # is one contact, not two (two soft contacts at one point would be one twice as stiff)
    tolerance = (_SAME_POINT * float(np.sum(ha) + np.sum(hb))) ** 2
    for k in range(1, len(points)):
        for j in range(k):
            gap = points[k] - points[j]
            same = (depths[j] > NO_CONTACT) & (_dot(xp, gap, gap) < tolerance)
            depths[k] = xp.where(same, NO_CONTACT, depths[k])
    points = xp.stack(points, axis=1)
    depths = xp.stack(depths, axis=1)
    return points, xp.broadcast_to(n[:, None, :], points.shape), depths


_PAIRS = {
    ("sphere", "plane"): (_sphere_plane, 1),
    ("capsule", "plane"): (_capsule_plane, 2),
    ("box", "plane"): (_polytope_plane, 8),
    ("cylinder", "plane"): (_cylinder_plane, 8),
    ("sphere", "sphere"): (_sphere_sphere, 1),
    ("sphere", "capsule"): (_sphere_capsule, 1),
    ("capsule", "capsule"): (_capsule_capsule, 2),
    ("sphere", "box"): (_sphere_solid, 1),
    ("capsule", "box"): (_capsule_solid, 3),
    ("sphere", "cylinder"): (_sphere_solid, 1),
    ("capsule", "cylinder"): (_capsule_solid, 3),
    ("box", "box"): (_box_box, 8),
    ("cylinder", "box"): (_points_solid, 21),
    ("cylinder", "cylinder"): (_points_solid, 23),
    ("convex", "plane"): (_polytope_plane, lambda a, b: len(a.vertices)),
    ("ellipsoid", "plane"): (_ellipsoid_plane, 1),
    ("sphere", "ellipsoid"): (_sphere_solid, 1),
    ("capsule", "ellipsoid"): (_capsule_ellipsoid, 1),
    ("ellipsoid", "ellipsoid"): (_two_ellipsoids, 1),
    ("ellipsoid", "box"): (_ellipsoid_solid, 1),
    ("ellipsoid", "convex"): (_ellipsoid_solid, 1),
    ("ellipsoid", "cylinder"): (_ellipsoid_solid, 1),
    ("sphere", "convex"): (_sphere_solid, 1),
    ("capsule", "convex"): (_capsule_solid, 3),
    ("cylinder", "convex"): (_points_solid, lambda a, b: 13 + len(b.vertices)),
    ("convex", "box"): (_points_solid, lambda a, b: len(a.vertices) + 11),
    ("convex", "convex"): (_points_solid, lambda a, b: len(a.vertices) + len(b.vertices) + 3),
}


def _lookup(a, b):
    ka, kb = getattr(a, "kind", None), getattr(b, "kind", None)
    if (ka, kb) in _PAIRS:
        return _PAIRS[ka, kb], False
    if ka != "plane" and (kb, ka) in _PAIRS:
        return _PAIRS[kb, ka], True
    hint = " (a plane is supported only as the second geometry)" if ka == "plane" else ""
    raise ValueError(f"collision between {ka!r} and {kb!r} is not supported{hint}; supported "
                     f"pairs: {', '.join(f'{x}-{y}' for x, y in _PAIRS)} (either order, but a "
                     f"plane second)")


def supported(a: Geometry, b: Geometry) -> bool:
    """Whether ``collide`` has a method for the two geometries, in one order or the other (a
    plane goes second)."""
    for first, second in ((a, b), (b, a)):
        try:
            _lookup(first, second)
            return True
        except ValueError:
            pass
    return False


def contact_count(a: Geometry, b: Geometry) -> int:
    """K, the number of contact slots ``collide`` returns for the pair (a, b) (ValueError if
    the pair is not supported): fixed by the kinds, and a convex polytope's corners."""
    (_, count), swapped = _lookup(a, b)
    if callable(count):
        return count(*((b, a) if swapped else (a, b)))
    return count


def axis_slot(a: Geometry, b: Geometry) -> Optional[int]:
    """The slot of the pair (a, b) that is its axis of least overlap (two polytopes, a cylinder
    and a polytope or a cylinder: the last; its depth is how far the two must move apart, its
    point the middle of the overlap), or None where every slot is a point of one surface
    inside the other."""
    kinds = {getattr(a, "kind", None), getattr(b, "kind", None)}
    if kinds <= {"box", "convex", "cylinder"} and kinds != {"box"}:
        return contact_count(a, b) - 1
    return None


def collide(xp, a: Geometry, pose_a: Pose, b: Geometry, pose_b: Pose, margin=None):
    """Contacts between geometry ``a`` at ``pose_a`` and ``b`` at ``pose_b``.

    ``xp``: the array namespace (numpy, jax.numpy or ``screwdyn.execution.trace.xp``).
    ``pose_a``, ``pose_b``: (R (N, 3, 3), p (N, 3)), each geometry frame in world (m).
    ``margin`` (m, >= 0, or None): None reports every slot's signed depth; a number reports the
    slots further apart than ``margin`` (depth < -margin) as ``NO_CONTACT``, as MuJoCo drops them.

    Returns ``(points (N, K, 3), normals (N, K, 3), depths (N, K))``: world points in the middle
    of the overlap (m), unit world normals pointing from ``b`` to ``a``, penetration depths (m;
    negative: apart). K = ``contact_count(a, b)``. See the module docstring
    for each pair's method. Raises ValueError for an unsupported pair.
    """
    (fn, _k), swapped = _lookup(a, b)
    Ra, pa = pose_a
    Rb, pb = pose_b
    if swapped:
        points, normals, depths = fn(xp, b, Rb, pb, a, Ra, pa)
        normals = -normals
    else:
        points, normals, depths = fn(xp, a, Ra, pa, b, Rb, pb)
    if margin is not None:
        depths = xp.where(depths < -margin, NO_CONTACT, depths)
    return points, normals, depths
