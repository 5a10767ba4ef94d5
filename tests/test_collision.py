"""The narrow phase (screwdyn.sim.collision) against MuJoCo's own collision functions.

Each scene has two bodies: ``a`` on a free joint, ``b`` a mocap body (so the pair collides and its
pose is set directly); mj_forward gives ``d.contact``: MuJoCo's normal points from geom1 to geom2
(here flipped to b -> a when geom1 is a's) and dist = -depth.
"""
import functools

import numpy as np
import pytest

from screwdyn.sim import collision as C

mujoco = pytest.importorskip("mujoco")

def _geom_xml(g, mesh="m"):
    if g.kind == "convex":
        return f'type="mesh" mesh="{mesh}"'
    if g.kind == "sphere":
        return f'type="sphere" size="{g.radius!r}"'
    if g.kind in ("capsule", "cylinder"):
        return f'type="{g.kind}" size="{g.radius!r} {g.half_length!r}"'
    if g.kind == "box":
        return 'type="box" size="%r %r %r"' % g.half_sizes
    if g.kind == "ellipsoid":
        return 'type="ellipsoid" size="%r %r %r"' % g.radii
    return 'type="plane" size="0 0 1"'


def _vertex_text(g):
    return " ".join(f"{x:.17g}" for v in g.vertices for x in v)


class Scene:
    """MuJoCo model of geometry a (free body) and b (mocap body), with ``margin`` on both;
    ``ccd``: its general convex solver (GJK/EPA, for an ellipsoid's pairs) run to 1e-14."""

    def __init__(self, a, b, margin=0.0, ccd=False):
        meshes = "".join(f'<mesh name="{name}" vertex="{_vertex_text(g)}"/>'
                         for name, g in (("ma", a), ("mb", b)) if g.kind == "convex")
        xml = f"""<mujoco><asset>{meshes}</asset><worldbody>
          <body name="a"><freejoint/><geom {_geom_xml(a, "ma")} margin="{margin}"/></body>
          <body name="b" mocap="true"><geom {_geom_xml(b, "mb")} margin="{margin}"/></body>
        </worldbody></mujoco>"""
        self.m = mujoco.MjModel.from_xml_string(xml)
        if ccd:
            self.m.opt.ccd_tolerance, self.m.opt.ccd_iterations = 1e-14, 10000
        self.d = mujoco.MjData(self.m)

    def contacts(self, pa, qa, pb, qb):
        """[(pos (3,), normal b -> a (3,), depth)] of MuJoCo for these poses."""
        d = self.d
        d.qpos[:3], d.qpos[3:7], d.mocap_pos[0], d.mocap_quat[0] = pa, qa, pb, qb
        mujoco.mj_forward(self.m, d)
        out = []
        for c in d.contact[:d.ncon]:
            n = c.frame[:3].copy()
            if c.geom[0] == 0:  # geom1 is a's: MuJoCo's normal points a -> b
                n = -n
            out.append((c.pos.copy(), n, -c.dist))
        return out


def _quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def _mat(q):
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, q)
    return R.reshape(3, 3)


def _poses(rng, n, spread_a, spread_b):
    pa = rng.uniform(-1, 1, (n, 3)) * spread_a
    pb = rng.uniform(-1, 1, (n, 3)) * spread_b
    qa = np.array([_quat(rng) for _ in range(n)])
    qb = np.array([_quat(rng) for _ in range(n)])
    return pa, qa, pb, qb


def _ours(a, b, pa, qa, pb, qb, xp=np, **kw):
    Ra = np.array([_mat(q) for q in qa])
    Rb = np.array([_mat(q) for q in qb])
    return C.collide(xp, a, (Ra, pa), b, (Rb, pb), **kw)


def _box_sdf(x, h):
    q = np.abs(x) - h
    return np.linalg.norm(np.maximum(q, 0), axis=-1) + np.minimum(q.max(axis=-1), 0)


@functools.lru_cache(maxsize=None)
def _hull_planes(g):
    from scipy.spatial import ConvexHull

    return ConvexHull(np.array(g.vertices)).equations


def _sdf(g, R, p, x):
    """Signed distance (m) of world points x (..., 3) to geometry g at (R, p) (brute force; a
    convex polytope's inside and on its surface only: the largest of its hull's plane
    distances, from scipy's hull of its corners)."""
    y = (x - p) @ R
    if g.kind == "convex":
        planes = _hull_planes(g)
        return (y @ planes[:, :3].T + planes[:, 3]).max(axis=-1)
    if g.kind == "sphere":
        return np.linalg.norm(y, axis=-1) - g.radius
    if g.kind == "capsule":
        z = np.clip(y[..., 2], -g.half_length, g.half_length)
        return np.linalg.norm(y - np.stack([0 * z, 0 * z, z], -1), axis=-1) - g.radius
    if g.kind == "box":
        return _box_sdf(y, np.array(g.half_sizes))
    if g.kind == "cylinder":
        dr = np.linalg.norm(y[..., :2], axis=-1) - g.radius
        dz = np.abs(y[..., 2]) - g.half_length
        return np.hypot(np.maximum(dr, 0), np.maximum(dz, 0)) + np.minimum(np.maximum(dr, dz), 0)
    return y[..., 2]


SPHERE, SPHERE2 = C.sphere(0.3), C.sphere(0.4)
CAPSULE, CAPSULE2 = C.capsule(0.2, 0.4), C.capsule(0.25, 0.3)
BOX, BOX2 = C.box([0.3, 0.2, 0.4]), C.box([0.25, 0.35, 0.15])
CYLINDER, CYLINDER2, PLANE = C.cylinder(0.3, 0.2), C.cylinder(0.25, 0.35), C.plane()

# pairs whose every MuJoCo contact is exact here: (a, b), compared to 1e-9
EXACT = [(SPHERE, PLANE), (CAPSULE, PLANE), (BOX, PLANE), (SPHERE, SPHERE2), (SPHERE, CAPSULE),
         (CAPSULE, SPHERE), (CAPSULE, CAPSULE2), (SPHERE, BOX), (BOX, SPHERE),
         (SPHERE, CYLINDER), (CYLINDER, SPHERE)]


def _compare_deepest(a, b, n, seed, spread=0.4, margin=0.0, tol=1e-9, ntol=1e-9):
    """Compare our deepest slot with MuJoCo's deepest contact over n random poses; returns the
    number of poses MuJoCo reported contacts for and the largest depth difference."""
    rng = np.random.default_rng(seed)
    scene = Scene(a, b, margin)
    pa, qa, pb, qb = _poses(rng, n, spread, spread)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    assert P.shape == (n, C.contact_count(a, b), 3) and D.shape == (n, C.contact_count(a, b))
    assert np.all(np.isfinite(P)) and np.all(np.isfinite(N)) and np.all(np.isfinite(D))
    assert np.allclose(np.linalg.norm(N, axis=-1), 1.0, atol=1e-12)
    seen, worst = 0, 0.0
    for i in range(n):
        mj = scene.contacts(pa[i], qa[i], pb[i], qb[i])
        if not mj:
            assert D[i].max() < margin + 1e-9  # MuJoCo finds nothing: neither do we
            continue
        seen += 1
        pos, normal, depth = max(mj, key=lambda c: c[2])
        k = int(np.argmax(D[i]))
        worst = max(worst, abs(D[i, k] - depth))
        assert D[i, k] == pytest.approx(depth, abs=tol)
        np.testing.assert_allclose(N[i, k], normal, atol=ntol)
        np.testing.assert_allclose(P[i, k], pos, atol=max(tol, ntol))
    return seen, worst


@pytest.mark.parametrize("a,b", EXACT, ids=[f"{a.kind}-{b.kind}" for a, b in EXACT])
def test_exact_pairs_match_mujoco(a, b):
    """Overlapping poses: every MuJoCo contact is one of our slots (point, normal, depth, 1e-9)."""
    rng = np.random.default_rng(7)
    scene = Scene(a, b)
    n = 60
    pa, qa, pb, qb = _poses(rng, n, 0.4, 0.4)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    seen = 0
    for i in range(n):
        for pos, normal, depth in scene.contacts(pa[i], qa[i], pb[i], qb[i]):
            seen += 1
            k = int(np.argmin(np.linalg.norm(P[i] - pos, axis=-1) + np.abs(D[i] - depth)))
            assert D[i, k] == pytest.approx(depth, abs=1e-9)
            np.testing.assert_allclose(P[i, k], pos, atol=1e-9)
            np.testing.assert_allclose(N[i, k], normal, atol=1e-9)
    assert seen >= 20


@pytest.mark.parametrize("a,b", EXACT + [(CYLINDER, PLANE)],
                         ids=[f"{a.kind}-{b.kind}" for a, b in EXACT + [(CYLINDER, PLANE)]])
def test_separated_pairs_give_the_distance(a, b):
    """With a margin MuJoCo reports features apart too: our negative depths are its distances;
    and collide(margin=...) marks what is further apart than the margin as NO_CONTACT."""
    seen, _ = _compare_deepest(a, b, 40, seed=3, spread=0.8, margin=2.0)
    assert seen >= 20
    rng = np.random.default_rng(3)
    pa, qa, pb, qb = _poses(rng, 40, 0.8, 0.8)
    _, _, D = _ours(a, b, pa, qa, pb, qb)
    _, _, Dm = _ours(a, b, pa, qa, pb, qb, margin=0.05)
    near = D >= -0.05
    assert np.array_equal(Dm[near], D[near]) and np.all(Dm[~near] == C.NO_CONTACT)
    assert np.any(~near & (D > C.NO_CONTACT))


def test_cylinder_plane_deepest_rim_points_are_mujocos():
    """Slot 0 (the near face's deepest rim point) is MuJoCo's first contact, slot 4 (the far
    face's) its second when within reach; its two extra points (inside the near disc) are not
    deeper."""
    rng = np.random.default_rng(11)
    scene = Scene(CYLINDER, PLANE)
    n = 80
    pa, qa, pb, qb = _poses(rng, n, 0.3, 0.3)
    P, N, D = _ours(CYLINDER, PLANE, pa, qa, pb, qb)
    seen = far = 0
    for i in range(n):
        mj = scene.contacts(pa[i], qa[i], pb[i], qb[i])
        if not mj:
            assert D[i].max() < 1e-12
            continue
        seen += 1
        assert D[i, 0] == pytest.approx(mj[0][2], abs=1e-9) and D[i, 0] == D[i].max()
        np.testing.assert_allclose(P[i, 0], mj[0][0], atol=1e-9)
        np.testing.assert_allclose(N[i, 0], mj[0][1], atol=1e-12)
        for pos, normal, depth in mj[1:]:
            if np.linalg.norm(P[i, 4] - pos) < 1e-9:  # the far face's deepest point
                assert D[i, 4] == pytest.approx(depth, abs=1e-9)
                far += 1
            else:  # MuJoCo's two points inside the near disc: not deeper than slot 0
                assert depth <= D[i, 0] + 1e-12
    assert seen >= 30 and far >= 5


@pytest.mark.parametrize("b,point_tol,normal_tol", [(BOX, 1e-9, 1e-6), (CYLINDER, 1e-5, 1e-5)],
                         ids=["box", "cylinder"])
def test_capsule_solid_matches_mujoco_and_the_brute_force_minimum(b, point_tol, normal_tol):
    """Where the capsule's segment stays out of the box or cylinder (depth < radius) MuJoCo's
    deepest contact is ours (depth 1e-9; point and normal: MuJoCo's capsule-box normal is
    computed less precisely, 1e-6, and its capsule-cylinder is its general convex solver,
    which stops at about 1e-6). Deeper, MuJoCo's answers are approximate or another measure:
    ours is the segment's least signed distance to the solid, checked against a dense sampling
    of the segment."""
    rng = np.random.default_rng(5)
    a = CAPSULE
    scene = Scene(a, b)
    n = 240
    pa, qa, pb, qb = _poses(rng, n, 0.8, 0.8)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    shallow = 0
    ts = np.linspace(-a.half_length, a.half_length, 2001)
    dropped = 0
    for i in range(n):
        Ra, Rb = _mat(qa[i]), _mat(qb[i])
        sdf = lambda t: _sdf(b, Rb, pb[i], pa[i] + Ra[:, 2] * t[:, None])  # noqa: E731
        t0 = ts[np.argmin(sdf(ts))]  # then a finer grid around the best sample
        fine = np.clip(np.linspace(t0 - 4e-4, t0 + 4e-4, 8001), -a.half_length, a.half_length)
        brute = a.radius - sdf(fine).min()
        k = int(np.argmax(D[i]))  # slot 0, or the end (or face edge) it is, where it is one
        assert D[i, k] == pytest.approx(brute, abs=1e-6) and D[i, k] >= brute - 1e-12
        mj = scene.contacts(pa[i], qa[i], pb[i], qb[i])
        if mj and D[i, k] < a.radius:
            shallow += 1
            pos, normal, depth = max(mj, key=lambda c: c[2])
            assert D[i, k] == pytest.approx(depth, abs=1e-9)
            np.testing.assert_allclose(P[i, k], pos, atol=point_tol)
            np.testing.assert_allclose(N[i, k], normal, atol=normal_tol)
        dropped += D[i, 0] == C.NO_CONTACT
    assert shallow >= 15 and dropped >= 30  # at an end in some: its slot has it


ELLIPSOID = C.ellipsoid([0.3, 0.15, 0.22])
ELLIPSOID_PAIRS = [(ELLIPSOID, PLANE), (SPHERE, ELLIPSOID), (ELLIPSOID, SPHERE),
                   (CAPSULE, ELLIPSOID), (ELLIPSOID, CAPSULE)]


def _nearest_on_ellipsoid(e, x, rng):
    """The distance (m) from x (3,) to the surface of the ellipsoid of semi-axes e (3,), found
    without screwdyn: the best of 20,000 surface points, refined by Nelder-Mead over the two
    angles of the surface's parametrisation (an upper bound of the distance, tight to ~1e-12)."""
    from scipy.optimize import minimize

    u = rng.normal(size=(20000, 3))
    u /= np.linalg.norm(u, axis=1)[:, None]
    d = np.linalg.norm(u * e - x, axis=1)
    best = u[np.argmin(d)]

    def f(angles):
        th, ph = angles
        y = e * [np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)]
        return float(np.sum((y - x) ** 2))

    start = [np.arccos(np.clip(best[2], -1, 1)), np.arctan2(best[1], best[0])]
    r = minimize(f, start, method="Nelder-Mead",
                 options=dict(xatol=1e-14, fatol=1e-30, maxiter=5000))
    return min(np.sqrt(r.fun), d.min())


def test_ellipsoid_signed_distance_is_the_distance_to_its_surface():
    """The ellipsoid's signed distance (what its pairs measure with): for points near and
    far, inside and out, on its axes and planes, on flat ellipsoids (radii 1e-3 to 1 m), the
    nearest surface point it implies (c = x - sdf * gradient) is on the surface, x - c is
    along the surface's normal at c (a critical point of the distance), and no surface point
    found without screwdyn is nearer by 1e-9 m; on ellipsoids of radii 0.05 to 1 m, where that
    search is reliable, it finds the same distance to 1e-9 m (1e-15 measured)."""
    rng = np.random.default_rng(2)
    worst = 0.0
    for k in range(300):
        e = np.exp(rng.uniform(np.log(1e-3), 0.0, 3)) if k % 3 else rng.uniform(0.05, 1.0, 3)
        x = rng.normal(size=3) * rng.choice([1e-3, 0.3, 1.0, 3.0]) * e.max()
        if k % 5 == 0:
            x[np.argmin(e)] = 0.0  # on the plane of the shortest axis (its pole inside)
        if k % 7 == 0:
            x[rng.integers(3)] = 0.0
        if k % 11 == 0:  # on the surface, or a hair off it
            u = rng.normal(size=3)
            x = e * u / np.linalg.norm(u) * (1.0 + rng.normal() * 1e-9)
        sdf, grad = C._ellipsoid_sdf(np, x[None], tuple(e))
        sdf, grad = float(sdf[0]), grad[0]
        assert np.isfinite(sdf) and np.linalg.norm(grad) == pytest.approx(1.0, abs=1e-12)
        c = x - sdf * grad
        assert abs(np.sum((c / e) ** 2) - 1.0) < 1e-9
        normal = c / e ** 2
        assert np.linalg.norm(np.cross(normal / np.linalg.norm(normal), grad)) < 1e-9
        inside = np.sum((x / e) ** 2) < 1.0
        assert (sdf < 0) == inside or abs(sdf) < 1e-12
        found = _nearest_on_ellipsoid(e, x, rng)
        assert abs(sdf) <= found + 1e-9
        if k % 3 == 0:
            worst = max(worst, abs(abs(sdf) - found))
    assert worst < 1e-9, worst
    sdf, grad = C._ellipsoid_sdf(np, np.zeros((1, 3)), (0.3, 0.15, 0.22))  # its centre
    assert sdf[0] == pytest.approx(-0.15, abs=1e-15) and abs(grad[0, 1]) == 1.0


@pytest.mark.parametrize("a,b", ELLIPSOID_PAIRS, ids=[f"{a.kind}-{b.kind}" for a, b in
                                                      ELLIPSOID_PAIRS])
def test_ellipsoid_pairs_match_mujoco(a, b):
    """An ellipsoid against a plane (its support point: MuJoCo's mjc_PlaneConvex), a sphere and
    a capsule (the least signed distance of the centre, of the segment: one contact, as
    MuJoCo's) is MuJoCo's contact: the depth to 1e-9 m (its general convex solver run to
    1e-14: 8e-11 measured), the normal to 5e-5 and the point to 1e-5 m, what that solver
    reaches on a curved surface (its polytope of the Minkowski difference: 8e-6 and 2e-6
    measured), against the plane to 1e-12. A capsule whose segment enters the ellipsoid
    (depth above its radius) has the depth of the segment's deepest point, a lower bound of
    MuJoCo's (the distance to move it out)."""
    rng = np.random.default_rng(7)
    scene = Scene(a, b, ccd=True)
    n = 120
    pa, qa, pb, qb = _poses(rng, n, 0.4, 0.4)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    assert D.shape == (n, 1) and np.all(np.isfinite(P)) and np.all(np.isfinite(N))
    plane = b.kind == "plane"
    capsule = next((g for g in (a, b) if g.kind == "capsule"), None)
    seen = deep = 0
    for i in range(n):
        mj = scene.contacts(pa[i], qa[i], pb[i], qb[i])
        if not mj:
            assert D[i, 0] < 1e-9
            continue
        (pos, normal, depth), = mj
        if capsule is not None and D[i, 0] >= capsule.radius:
            deep += 1
            assert D[i, 0] <= depth + 1e-9
            continue
        seen += 1
        assert D[i, 0] == pytest.approx(depth, abs=1e-12 if plane else 1e-9)
        np.testing.assert_allclose(N[i, 0], normal, atol=1e-12 if plane else 5e-5)
        np.testing.assert_allclose(P[i, 0], pos, atol=1e-12 if plane else 1e-5)
    assert seen >= 30 and (capsule is None or deep >= 5)


def test_ellipsoid_pairs_are_counted_and_bad_radii_refused():
    """An ellipsoid collides with every kind, one slot a pair, either order (a plane second);
    bad radii are refused."""
    for other in (PLANE, SPHERE, CAPSULE, BOX, CYLINDER, CONVEX, ELLIPSOID):
        assert C.contact_count(ELLIPSOID, other) == 1 and C.supported(other, ELLIPSOID)
        assert other.kind == "plane" or C.contact_count(other, ELLIPSOID) == 1
    I, z = np.eye(3)[None], np.zeros((1, 3))
    with pytest.raises(ValueError, match="'plane' and 'ellipsoid'"):
        C.collide(np, PLANE, (I, z), ELLIPSOID, (I, z))
    for radii in ([0.1, 0.2], [0.1, -0.2, 0.3], [0.1, np.inf, 0.2], [0.0, 0.1, 0.1]):
        with pytest.raises(ValueError, match="radii must be 3 finite positive"):
            C.ellipsoid(radii)
    # resting on the ground on its z axis
    P, N, D = C.collide(np, ELLIPSOID, (I, np.array([[0.0, 0.0, 0.219]])), PLANE, (I, z))
    assert D[0, 0] == pytest.approx(0.001, abs=1e-15)
    np.testing.assert_allclose(P[0, 0], [0, 0, -0.0005], atol=1e-15)
    np.testing.assert_allclose(N[0, 0], [0, 0, 1], atol=0)


def _float32_points(points):
    """Points MuJoCo stores exactly (it keeps a mesh's vertices in float32)."""
    return np.asarray(points, dtype=np.float32).astype(float)


_rng = np.random.default_rng(31)
_dirs = _rng.normal(size=(16, 3))
CONVEX = C.convex(_float32_points(_dirs / np.linalg.norm(_dirs, axis=1)[:, None]
                                  * [0.3, 0.2, 0.25]))   # 16 points on an ellipsoid
CONVEX2 = C.convex(_float32_points(_rng.uniform(-1, 1, (12, 3)) * [0.2, 0.3, 0.15]))
CYLINDER_PAIRS = [(CYLINDER, BOX2), (BOX2, CYLINDER), (CYLINDER, CYLINDER2)]
CONVEX_PAIRS = [(CONVEX, BOX2), (CYLINDER, CONVEX), (CONVEX, CONVEX2)]


def _support(g, R, p, n):
    """max over geometry g at (R, p) of n . x, for world directions n (3,) (m)."""
    m = R.T @ n
    if g.kind == "convex":
        return n @ p + (np.array(g.vertices) @ m).max()
    if g.kind == "box":
        return n @ p + np.abs(m) @ np.array(g.half_sizes)
    if g.kind == "ellipsoid":
        return n @ p + np.sqrt(np.sum((np.array(g.radii) * m) ** 2))
    return n @ p + abs(m[2]) * g.half_length + g.radius * np.hypot(m[0], m[1])


def _overlap(a, Ra, pa, b, Rb, pb, n):
    """How far a must move along n (unit, b -> a) to separate from b: the exact penetration
    depth is the least of it over all directions, so a point's depth is never more."""
    return _support(b, Rb, pb, n) + _support(a, Ra, pa, -n)


def _hull_points(g):
    """A box's corners or a polytope's vertices (m, 3), in its frame."""
    if g.kind == "box":
        return np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) \
            * g.half_sizes
    return np.array(g.vertices)


def _separating_axis_depth(a, Ra, pa, b, Rb, pb):
    """The exact penetration depth of two polytopes (negative: a lower bound of their
    distance): the least overlap over the normals of their hulls' triangles (scipy) and the
    cross products of every pair of their triangles' edges, a superset of the axes that can
    separate them (each axis's overlap bounds the depth from above)."""
    from scipy.spatial import ConvexHull

    hulls = [(pa + _hull_points(a) @ Ra.T), (pb + _hull_points(b) @ Rb.T)]
    axes, edges = [], []
    for V in hulls:
        hull = ConvexHull(V)
        axes.extend(hull.equations[:, :3])
        edges.append(np.array([V[t[j]] - V[t[k]] for t in hull.simplices
                               for j, k in ((0, 1), (1, 2), (2, 0))]))
    cross = np.cross(edges[0][:, None, :], edges[1][None, :, :]).reshape(-1, 3)
    length = np.linalg.norm(cross, axis=1)
    U = np.r_[np.array(axes), cross[length > 1e-9] / length[length > 1e-9, None]]
    A, B = hulls[0] @ U.T, hulls[1] @ U.T
    return float(np.minimum(B.max(0) - A.min(0), A.max(0) - B.min(0)).min())


def _least_overlap(a, Ra, pa, b, Rb, pb):
    """The exact penetration depth of two convex shapes, numerically: the least overlap
    (``_overlap``) over 4,000 directions spread over the sphere, then Nelder-Mead (scipy)
    from the 6 best of them."""
    from scipy.optimize import minimize

    k = np.arange(4000) + 0.5
    polar, azimuth = np.arccos(1 - 2 * k / len(k)), np.pi * (1 + 5 ** 0.5) * k
    U = np.c_[np.cos(azimuth) * np.sin(polar), np.sin(azimuth) * np.sin(polar), np.cos(polar)]

    def overlap(n):
        return _overlap(a, Ra, pa, b, Rb, pb, n / np.linalg.norm(n))

    values = [overlap(u) for u in U]
    return min(minimize(overlap, U[j], method="Nelder-Mead",
                        options=dict(xatol=1e-13, fatol=1e-14, maxiter=4000)).fun
               for j in np.argsort(values)[:6])


ELLIPSOID2 = C.ellipsoid([0.12, 0.25, 0.08])
ELLIPSOID_SOLIDS = [(ELLIPSOID, ELLIPSOID2), (ELLIPSOID, BOX2), (BOX2, ELLIPSOID),
                    (ELLIPSOID, CYLINDER), (CYLINDER2, ELLIPSOID), (ELLIPSOID, CONVEX)]


@pytest.mark.parametrize("a,b", ELLIPSOID_SOLIDS, ids=[f"{a.kind}-{b.kind}" for a, b in
                                                       ELLIPSOID_SOLIDS])
def test_an_ellipsoid_against_a_solid_is_the_least_overlap(a, b):
    """An ellipsoid against an ellipsoid, a box, a cylinder or a polytope: one contact, the
    direction of least overlap. Against MuJoCo's general convex solver (run to 1e-14), on
    random poses: overlapping less than the ellipsoid's least radius of curvature
    (min(radii)^2 / max(radii); two ellipsoids: however deep), the depth is MuJoCo's to 1e-9 m
    (a mesh, which MuJoCo keeps in float32 and solves to ~1e-8: 3e-8 m); the overlap along our
    normal, from the two support functions here, is our depth, and along MuJoCo's normal it is
    no less (ours is the least of the two: MuJoCo's normal is 1e-4 off on an edge, where the
    overlap is flat); the normals agree to 5e-5 where MuJoCo's is as good. Deeper (a corner
    or an edge near the ellipsoid's centre), the depth is an upper bound: no less than
    MuJoCo's. The point is the middle of the overlap: the ellipsoid's support point towards
    the other, moved half the depth along the normal. Apart (MuJoCo's margin 1 m), the depth
    is minus the distance, to 1e-9 m (3e-8 m for the mesh)."""
    ellipsoid_first = a.kind == "ellipsoid"
    e = np.array((a if ellipsoid_first else b).radii)
    reach = e.min() ** 2 / e.max()
    two = a.kind == b.kind
    tol = 3e-8 if "convex" in (a.kind, b.kind) else 1e-9
    rng = np.random.default_rng(17)
    shallow = deep = 0
    for margin, spread in ((0.0, 0.35), (1.0, 0.8)):
        scene = Scene(a, b, margin=margin, ccd=True)
        pa, qa, pb, qb = _poses(rng, 150, spread, spread)
        P, N, D = _ours(a, b, pa, qa, pb, qb)
        assert D.shape == (150, 1) and C.contact_count(a, b) == 1 == C.contact_count(b, a)
        for i in range(150):
            Ra, Rb = _mat(qa[i]), _mat(qb[i])
            n, depth = N[i, 0], D[i, 0]
            assert abs(np.linalg.norm(n) - 1.0) < 1e-12
            assert _overlap(a, Ra, pa[i], b, Rb, pb[i], n) == pytest.approx(depth, abs=1e-12)
            towards = n if ellipsoid_first else -n  # from the other to the ellipsoid
            R, p = (Ra, pa[i]) if ellipsoid_first else (Rb, pb[i])
            m = R.T @ -towards
            lowest = p + R @ (e ** 2 * m / np.sqrt(np.sum((e * m) ** 2)))
            np.testing.assert_allclose(P[i, 0], lowest + towards * depth / 2, atol=1e-12)
            mj = scene.contacts(pa[i], qa[i], pb[i], qb[i])
            if not mj:
                assert depth < -margin + tol
                continue
            (pos, normal, mj_depth), = mj
            if depth < reach or two:
                shallow += 1
                assert depth == pytest.approx(mj_depth, abs=tol)
                along_mujocos = _overlap(a, Ra, pa[i], b, Rb, pb[i], normal)
                assert along_mujocos >= depth - 1e-12
                if along_mujocos < depth + 1e-12:
                    np.testing.assert_allclose(n, normal, atol=5e-5)
            else:
                deep += 1
                assert depth >= mj_depth - tol
    assert shallow >= 60 and (two or deep >= 10)


def _slot_is_a_point_of_one_surface_inside_the_other(a, Ra, pa, b, Rb, pb, P, N, D):
    """Slot k of a pair: the point P - N D/2 of a's surface at depth D in b (signed distance
    -D), or P + N D/2 of b's surface at depth D in a (brute-force signed distances here)."""
    half = N * (D / 2)[:, None]
    xa, xb = P - half, P + half
    on_a = (np.abs(_sdf(a, Ra, pa, xa)) < 1e-9) & (np.abs(_sdf(b, Rb, pb, xa) + D) < 1e-9)
    on_b = (np.abs(_sdf(b, Rb, pb, xb)) < 1e-9) & (np.abs(_sdf(a, Ra, pa, xb) + D) < 1e-9)
    return on_a | on_b


POINT_PAIRS = CYLINDER_PAIRS + CONVEX_PAIRS


@pytest.mark.parametrize("a,b", POINT_PAIRS, ids=[f"{a.kind}-{b.kind}" for a, b in
                                                  POINT_PAIRS])
def test_point_pairs_are_points_inside_and_bound_mujocos_depth(a, b):
    """A cylinder against a box or a cylinder, a convex polytope against a box, a cylinder or
    another polytope (MuJoCo: its mesh geoms, the same hulls): every slot is a point of one
    surface inside the other, at its exact depth (brute-force signed distances), but the last
    of a polytope's pairs, the axis of least overlap. A point's depth never exceeds the exact
    penetration depth (the least overlap of the two shapes' supports over all directions):
    checked along MuJoCo's normal and along ours. With a polytope (a box included), the
    deepest slot is the exact depth, and the last slot's overlap along its own normal: two
    polytopes', the least overlap over the axes of an independent separating-axis test
    (scipy's hull: each triangle's normal, the cross products of all pairs of triangle edges)
    to 1e-9 m; a cylinder and a polytope or a cylinder, the least overlap found numerically
    (4,000 directions and Nelder-Mead, ``_least_overlap``) to 1e-9 m, where a rim crossing an
    edge or a rim makes it deeper than every point in about half of the contacts. MuJoCo's
    depth equals it (1e-6) in 40% or more of the shallow contacts (< 5 cm); its general convex
    solver stops short, or past the exact depth (two polytopes: by up to 2.5% in 2,000 random
    poses). MuJoCo finds no contact: neither do we."""
    rng = np.random.default_rng(11)
    scene = Scene(a, b)
    n = 800 if "convex" in (a.kind, b.kind) else 400  # the polytopes are smaller
    pa, qa, pb, qb = _poses(rng, n, 0.5, 0.5)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    K = C.contact_count(a, b)
    assert P.shape == (n, K, 3) and D.shape == (n, K)
    assert np.all(np.isfinite(P)) and np.all(np.isfinite(N)) and np.all(np.isfinite(D))
    assert np.allclose(np.linalg.norm(N, axis=-1), 1.0, atol=1e-12)
    seen, differences = 0, []
    polytopes = "cylinder" not in (a.kind, b.kind)
    points = slice(0, K - 1)  # the last slot: the axis of least overlap
    crossings, checked = 0, 0
    for i in range(n):
        Ra, Rb = _mat(qa[i]), _mat(qb[i])
        # slots within 0.3 m: every slot of a touching pair (with a polytope: the slots inside,
        # where the brute-force signed distance is exact)
        real = D[i, points] > (1e-9 if "convex" in (a.kind, b.kind) else -0.3)
        ok = _slot_is_a_point_of_one_surface_inside_the_other(
            a, Ra, pa[i], b, Rb, pb[i], P[i, points], N[i, points], D[i, points])
        assert ok[real].all(), (i, np.nonzero(real & ~ok))
        k = int(np.argmax(D[i]))
        ours = D[i, k]
        if ours > 1e-9 and (polytopes or checked < 60):
            exact = (_separating_axis_depth if polytopes else _least_overlap)(
                a, Ra, pa[i], b, Rb, pb[i])
            checked += 1
            assert abs(ours - exact) < 1e-9, (i, ours, exact)
            if polytopes or k == K - 1:  # the axis's normal (a point's: its own gradient)
                assert abs(_overlap(a, Ra, pa[i], b, Rb, pb[i], N[i, k]) - exact) < 1e-9
            crossings += D[i, -1] > 1e-9
        mj = scene.contacts(pa[i], qa[i], pb[i], qb[i])
        if not mj:
            assert D[i].max() < 1e-9
            continue
        seen += 1
        _, normal, depth = max(mj, key=lambda c: c[2])
        for direction in (normal, N[i, k]):
            assert ours <= _overlap(a, Ra, pa[i], b, Rb, pb[i], direction) + 1e-9
        if depth < 0.05:  # deeper, a point's depth is bounded by the other's inner radius
            assert ours >= 0.97 * depth - 1e-6
            differences.append(abs(ours - depth))
    assert crossings >= 20  # the axis is deeper than every point
    assert seen >= 40 and len(differences) >= 20
    assert np.mean(np.array(differences) < 1e-6) >= 0.4  # MuJoCo's depth


AXIS_PAIRS = [(CYLINDER, CYLINDER2), (CYLINDER, BOX2), (CYLINDER, CONVEX)]


@pytest.mark.parametrize("a,b", AXIS_PAIRS, ids=[f"{a.kind}-{b.kind}" for a, b in AXIS_PAIRS])
def test_the_axis_of_least_overlap_is_exact_shallow_and_gone_apart(a, b):
    """Where the axis of least overlap is the deepest slot (a rim or an edge crossing a rim or
    an edge), moving ``a`` along its normal by the depth less 1 mm leaves exactly 1 mm (the
    overlap along that normal falls by the move, and no direction's falls more), and by the
    depth and 1 mm more leaves them 1 mm apart: the deepest slot is then 1 mm to 1e-9 m
    (where the searches' minima along a rim are narrowest: rims 1 mm apart), and no slot is
    deeper than -1 mm. Each starting depth equals the numerical minimisation's to 1e-9 m."""
    rng = np.random.default_rng(5)
    pa, qa, pb, qb = _poses(rng, 300, 0.5, 0.5)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    crossing = [i for i in range(len(D)) if D[i, -1] > 1e-9 and D[i, -1] == D[i].max()][:12]
    assert len(crossing) >= 8
    for i in crossing:
        Ra, Rb = _mat(qa[i]), _mat(qb[i])
        depth, n = D[i, -1], N[i, -1]
        assert abs(depth - _least_overlap(a, Ra, pa[i], b, Rb, pb[i])) < 1e-9
        for move, expected in ((depth - 1e-3, 1e-3), (depth + 1e-3, -1e-3)):
            moved = (pa[i] + move * n)[None]
            _, _, d = _ours(a, b, moved, qa[i][None], pb[i][None], qb[i][None])
            if expected > 0:
                assert abs(d.max() - expected) < 1e-9, (i, d.max())
            else:
                assert d.max() < expected + 1e-9, (i, d.max())


def test_the_hull_of_a_box_is_the_box():
    """A box's corners with points inside it and on its faces and edges: the hull keeps the 8
    corners, 6 faces (their coplanar triangles merged) and 12 edges; its signed distance is the
    box's (brute force here, inside and out, to 1e-14), and so are its contacts with a sphere,
    a capsule and the ground (the box's are MuJoCo's); as a box's partner, a cylinder sees the
    same points."""
    rng = np.random.default_rng(2)
    h = np.array(BOX.half_sizes)
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
    on_faces = rng.uniform(-1, 1, (20, 3))
    on_faces[np.arange(20), rng.integers(0, 3, 20)] = 1.0
    points = np.r_[signs, rng.uniform(-1, 1, (30, 3)), on_faces, [[1, 1, 0], [0, -1, 1]]] * h
    hull = C.convex(points)
    assert len(hull.vertices) == 8 and len(hull.planes) == 6 and len(hull.edges) == 12
    assert sorted(map(tuple, np.sign(hull.vertices))) == sorted(map(tuple, signs))
    x = rng.uniform(-0.8, 0.8, (3000, 3))
    sdf, grad = C._convex_sdf(np, x, hull)
    np.testing.assert_allclose(sdf, _box_sdf(x, h), rtol=0, atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(grad, axis=-1), 1.0, atol=1e-12)
    pa, qa, pb, qb = _poses(rng, 300, 0.4, 0.4)
    for other in (SPHERE, CAPSULE, PLANE):
        if other.kind == "plane":
            qb = np.tile([1.0, 0, 0, 0], (300, 1))
        ours = _ours(hull, other, pa, qa, pb, qb)
        boxes = _ours(BOX, other, pa, qa, pb, qb)
        np.testing.assert_allclose(ours[2].max(axis=1), boxes[2].max(axis=1), rtol=0,
                                   atol=1e-12)


@pytest.mark.parametrize("a,b", [(CONVEX, PLANE), (SPHERE, CONVEX), (CAPSULE, CONVEX)],
                         ids=["convex-plane", "sphere-convex", "capsule-convex"])
def test_convex_against_the_ground_a_sphere_and_a_capsule_is_mujocos(a, b):
    """A convex polytope (16 points on an ellipsoid: MuJoCo's mesh geom, the same hull)
    against the ground (its corners: the deepest is MuJoCo's, 1e-7: MuJoCo keeps a mesh in
    float32 around its centre of mass), a sphere and a capsule (the exact signed distance of
    the centre, or of the segment's nearest point: the sphere's is MuJoCo's general convex
    solver's to its 1e-6 in contacts up to 5 cm deep; the capsule's is the distance of the
    segment to the hull found by a QP (1e-7), and at least MuJoCo's, whose capsule-mesh
    contacts are sometimes shallower, by centimetres here)."""
    rng = np.random.default_rng(12)
    scene = Scene(a, b)
    n = 400
    pa, qa, pb, qb = _poses(rng, n, 0.4, 0.4)
    if b.kind == "plane":
        pb, qb = np.zeros((n, 3)), np.tile([1.0, 0, 0, 0], (n, 1))
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    assert D.shape == (n, C.contact_count(a, b))
    assert np.all(np.isfinite(P)) and np.allclose(np.linalg.norm(N, axis=-1), 1.0)
    tol = 1e-7 if b.kind == "plane" else 1e-6
    seen = 0
    for i in range(n):
        mj = scene.contacts(pa[i], qa[i], pb[i], qb[i])
        if not mj:
            assert D[i].max() < tol
            continue
        pos, normal, depth = max(mj, key=lambda c: c[2])
        if b.kind != "plane" and depth > 0.05:  # deep inside: MuJoCo's solver, another measure
            continue
        seen += 1
        k = int(np.argmax(D[i]))
        if a.kind == "capsule":  # MuJoCo's capsule-mesh contacts can be shallower: the QP
            exact = a.radius - _segment_hull_distance(b, _mat(qb[i]), pb[i], pa[i],
                                                      _mat(qa[i])[:, 2] * a.half_length)
            assert D[i, k] == pytest.approx(exact, abs=1e-7)
            assert D[i, k] >= depth - 1e-6
            continue
        assert D[i, k] == pytest.approx(depth, abs=tol)
        np.testing.assert_allclose(N[i, k], normal, atol=1e-5)
    assert seen >= 30


def _segment_hull_distance(g, R, p, c, half):
    """The distance (m) from the segment c +- half (world) to convex polytope g at (R, p): the
    least |V l - x(t)| over the convex combinations l of its corners and t in [-1, 1], by
    scipy's SLSQP (brute force, independent of the library)."""
    from scipy.optimize import minimize

    V = p + np.array(g.vertices) @ R.T
    m = len(V)

    def f(z):
        return np.sum((V.T @ z[:m] - (c + half * z[m])) ** 2)

    best = np.inf
    for t0 in (-1.0, 0.0, 1.0):
        r = minimize(f, np.r_[np.ones(m) / m, t0], method="SLSQP",
                     bounds=[(0, 1)] * m + [(-1, 1)],
                     constraints=({"type": "eq", "fun": lambda z: z[:m].sum() - 1},),
                     options=dict(ftol=1e-16, maxiter=1000))
        best = min(best, r.fun)
    return np.sqrt(best)


def test_convex_points_are_refused_when_they_span_no_volume():
    many = np.random.default_rng(3).normal(size=(400, 3))
    with pytest.warns(UserWarning, match=r"the hull has \d+ corners \(more than 64\)"):
        C.convex(many / np.linalg.norm(many, axis=1)[:, None])
    with pytest.raises(ValueError, match=r"\(n >= 4, 3\) finite numbers.*\(3, 3\)"):
        C.convex(np.eye(3))
    with pytest.raises(ValueError, match="finite"):
        C.convex([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, np.nan]])
    with pytest.raises(ValueError, match="span no volume .they lie on one plane or line."):
        C.convex([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0], [0.5, 0.5, 0]])


def test_cylinders_resting_give_their_exact_supports():
    """Configurations with closed forms, each also MuJoCo's depth (1e-6): a cylinder standing
    on a box (its 4 bottom rim points at the depth), lying on a box (the two ends of its
    lowest line), on the top face of a larger cylinder, two logs crossed, a log lying across a
    box's ridge, and a box's corner pointing down into a cylinder's top face."""
    I = np.eye(3)
    lying_x = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # axis along x
    lying_y = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])  # axis along y
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
    ridge = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])  # an edge on top, along x
    v, down = np.ones(3) / np.sqrt(3), np.array([0.0, 0.0, -1.0])  # the corner (1, 1, 1) down
    k = np.cross(v, down) / np.linalg.norm(np.cross(v, down))
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    angle = np.arccos(v @ down)
    corner_down = np.eye(3) + np.sin(angle) * K + (1 - np.cos(angle)) * K @ K  # Rodrigues
    table, log = C.box([0.5, 0.5, 0.1]), C.cylinder(0.1, 0.4)
    cube = C.box([0.1, 0.1, 0.1])
    d = 0.004
    cases = [  # (a, Ra, pa, b, Rb, pb, slots of depth d, normal)
        (CYLINDER, I, [0.1, -0.1, 0.1 + 0.2 - d], table, I, [0, 0, 0], 4, [0, 0, 1]),
        (log, lying_x, [0.0, 0.1, 0.1 + 0.1 - d], table, I, [0, 0, 0], 3, [0, 0, 1]),
        (C.cylinder(0.1, 0.05), I, [0.05, 0, 0.35 + 0.05 - d], CYLINDER2, I, [0, 0, 0], 4,
         [0, 0, 1]),
        (log, lying_x, [0.0, 0.0, 0.2 - d], log, lying_y, [0, 0, 0], 1, [0, 0, 1]),
        (log, lying_y, [0.0, 0.0, 0.1 * np.sqrt(2) + 0.1 - d], cube, ridge, [0, 0, 0], 1,
         [0, 0, 1]),
        (cube, corner_down, [0.0, 0.0, 0.2 + 0.1 * np.sqrt(3) - d], C.cylinder(0.3, 0.2),
         I, [0, 0, 0], 1, [0, 0, 1]),
    ]
    for a, Ra, pa, b, Rb, pb, count, normal in cases:
        pa, pb = np.array(pa, float), np.array(pb, float)
        P, N, D = C.collide(np, a, (Ra[None], pa[None]), b, (Rb[None], pb[None]))
        deep = np.abs(D[0] - d) < 1e-12
        assert deep.sum() >= count, (a, b, D[0])
        np.testing.assert_allclose(N[0, deep], np.broadcast_to(normal, N[0, deep].shape),
                                   atol=1e-7)
        assert D[0].max() == pytest.approx(d, abs=1e-12)
        scene = Scene(a, b)
        mj = scene.contacts(pa, _quat_of(Ra), pb, _quat_of(Rb))
        assert max(c[2] for c in mj) == pytest.approx(d, abs=1e-6)
    # standing on the table: the 4 bottom rim points, at the radius around the axis
    P, N, D = C.collide(np, CYLINDER, (I[None], np.array([[0.1, -0.1, 0.3 - d]])), table,
                        (I[None], np.zeros((1, 3))))
    rim = P[0, 7:11] - np.array([0.1, -0.1, 0.1 - d / 2])
    np.testing.assert_allclose(np.linalg.norm(rim, axis=1), 0.3, atol=1e-12)
    np.testing.assert_allclose(rim[:, 2], 0.0, atol=1e-12)
    # lying: the two ends of its lowest line, 0.8 m apart (the rims' deepest points, and the
    # ends of the side line's deep part)
    P, N, D = C.collide(np, log, (lying_x[None], np.array([[0.0, 0.1, 0.2 - d]])), table,
                        (I[None], np.zeros((1, 3))))
    for ends in (P[0, [3, 7]], P[0, [2, 1]]):  # the rims' deepest points, the line's ends
        np.testing.assert_allclose(ends, [[0.4, 0.1, 0.1 - d / 2], [-0.4, 0.1, 0.1 - d / 2]],
                                   atol=1e-9)


def _quat_of(R):
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R).reshape(-1))
    return q


def _box_box_cases(rng, n, spread):
    a, b = BOX, BOX2
    pa, qa, pb, qb = _poses(rng, n, spread, spread)
    return a, b, pa, qa, pb, qb


def _corners(g, R, p):
    s = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)])
    return p + (s * np.array(g.half_sizes)) @ R.T


def _check_box_box(a, b, pa, qa, pb, qb, P, N, D, scene, shallow_tol=0.01):
    """Returns the number of shallow contacts compared with MuJoCo (depth, normal, every MuJoCo
    point among our slots, to 1e-9; in <= 5% of them, near ties of two axes, MuJoCo took
    another axis: then the depths agree to 1e-6, ours the lesser)."""
    rng = np.random.default_rng(0)
    dirs = rng.normal(size=(300, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    shallow = others = 0
    for i in range(len(pa)):
        Ra, Rb = _mat(qa[i]), _mat(qb[i])
        ca, cb = _corners(a, Ra, pa[i]), _corners(b, Rb, pb[i])
        k = int(np.argmax(D[i]))
        depth, n = D[i, k], N[i, k]
        # in contact, the depth is the overlap of the projections on the normal, the least of all
        # directions (apart, the slots' distances along the normal are at least the axis' gap)
        along = lambda u: min((cb @ u).max() - (ca @ u).min(),  # noqa: E731
                              (ca @ u).max() - (cb @ u).min())
        sat = (cb @ n).max() - (ca @ n).min()
        assert depth <= sat + 1e-9
        if depth > 0:
            assert depth == pytest.approx(sat, abs=1e-9)
            assert min(along(u) for u in dirs) >= depth - 1e-9
        # every slot in contact: point -+ normal depth/2 lie on a's and b's surfaces, and the
        # point within both boxes up to depth/2 (the middle of the overlap along the normal can
        # leave a box near its edges)
        inside = D[i] > 0
        half = 0.5 * D[i][inside][:, None] * N[i][inside]
        on_a = _sdf(a, Ra, pa[i], P[i][inside] - half)
        on_b = _sdf(b, Rb, pb[i], P[i][inside] + half)
        np.testing.assert_allclose(on_a, 0.0, atol=1e-9)
        np.testing.assert_allclose(on_b, 0.0, atol=1e-9)
        tol = 1e-9 + 0.5 * D[i][inside]
        assert np.all(_sdf(a, Ra, pa[i], P[i][inside]) <= tol)
        assert np.all(_sdf(b, Rb, pb[i], P[i][inside]) <= tol)
        assert np.all((D[i] == C.NO_CONTACT) | (D[i] <= depth + 1e-9))
        mj = scene.contacts(pa[i], qa[i], pb[i], qb[i])
        if not mj:
            assert depth < 1e-9
            continue
        mj_deepest = max(c[2] for c in mj)
        assert depth <= mj_deepest + 1e-9  # MuJoCo may pick a deeper axis, never a shallower one
        if mj_deepest < shallow_tol:  # shallow contacts: MuJoCo's manifold is ours
            shallow += 1
            pos, normal, d = max(mj, key=lambda c: c[2])
            assert depth == pytest.approx(d, abs=1e-6)
            if abs(depth - d) > 1e-9 or np.linalg.norm(n - normal) > 1e-9:
                others += 1  # a rare near tie: MuJoCo took another axis, not less deep
                continue
            valid = P[i][D[i] > C.NO_CONTACT]
            for pos, normal, d in mj:
                j = np.argmin(np.linalg.norm(valid - pos, axis=1))
                np.testing.assert_allclose(valid[j], pos, atol=1e-9)
    assert others <= 0.05 * shallow + 1
    return shallow


def test_box_box_against_mujoco():
    """Separating-axis depth and normal equal MuJoCo's for shallow contacts, and every MuJoCo
    contact point is one of our slots; for every pose the depth is the least overlap over all
    directions and the slots in contact lie within both boxes."""
    rng = np.random.default_rng(1)
    a, b, pa, qa, pb, qb = _box_box_cases(rng, 400, 0.72)
    scene = Scene(a, b)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    assert P.shape == (400, 8, 3)
    assert _check_box_box(a, b, pa, qa, pb, qb, P, N, D, scene) >= 8


def _touching(rng, a, b, n, depth_max):
    """Poses where b's centre is moved along a random direction until the boxes' separating-axis
    depth (ours) is a random value in (0, depth_max): shallow contacts of every kind."""
    pa, qa, pb, qb = _poses(rng, n, 0.0, 0.0)
    u = rng.normal(size=(n, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    target = rng.uniform(0, depth_max, n)
    lo, hi = np.zeros(n), np.full(n, 2.0)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        _, _, D = _ours(a, b, pa, qa, pb + u * mid[:, None], qb)
        deeper = D.max(axis=1) > target
        lo, hi = np.where(deeper, mid, lo), np.where(deeper, hi, mid)
    return pa, qa, pb + u * hi[:, None], qb


def test_box_box_shallow_contacts_match_mujoco():
    rng = np.random.default_rng(2)
    a, b = BOX, BOX2
    pa, qa, pb, qb = _touching(rng, a, b, 60, 0.01)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    assert _check_box_box(a, b, pa, qa, pb, qb, P, N, D, Scene(a, b)) >= 55


def test_box_box_face_contact_gives_the_overlap_polygon():
    """A box resting rotated 45 degrees on an equal one, 1 mm deep: the overlap is an octagon;
    the 8 slots are its vertices, each 1 mm deep, normal +z."""
    a = b = C.box([0.1, 0.1, 0.1])
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
    Ra = np.array([[[c, -s, 0], [s, c, 0], [0, 0, 1]]])
    P, N, D = C.collide(np, a, (Ra, np.array([[0, 0, 0.199]])), b,
                        (np.eye(3)[None], np.zeros((1, 3))))
    np.testing.assert_allclose(D[0], 0.001, atol=1e-12)
    np.testing.assert_allclose(N[0], np.tile([0, 0, 1.0], (8, 1)), atol=1e-12)
    np.testing.assert_allclose(P[0, :, 2], 0.0995, atol=1e-12)
    r = np.linalg.norm(P[0, :, :2], axis=1)
    np.testing.assert_allclose(r, 0.1 / np.cos(np.pi / 8), atol=1e-12)  # octagon's vertices


def _about_y(angle):
    """The unit quaternion (w, x, y, z) of a turn by ``angle`` (rad) about y."""
    return np.array([np.cos(angle / 2), 0.0, np.sin(angle / 2), 0.0])


@pytest.mark.parametrize("case", ["box edge on a face", "capsule on its end",
                                  "capsule lying flat"])
def test_no_contact_point_is_counted_twice(case):
    """Where a pair's slots would meet at one point (a box resting on an edge: the overlap
    polygon a segment, its ends found twice; a capsule standing on its end or lying flat: its
    segment's deepest point an end sphere's), the pair counts it once (two soft contacts at
    one point would be one twice as stiff): the contacts are MuJoCo's, as many (2, 1, 2), at
    its points and depths (to 1e-9 m), on a box turned 20 deg (dm_control's manipulator's
    slot, its stacker's boxes)."""
    b = C.box([0.04, 0.01, 0.035])
    qb = _about_y(np.radians(20.0))
    Rb = _mat(qb)
    top = Rb @ np.array([0.0, 0.0, 0.035])  # the middle of b's top face
    up = Rb[:, 2]
    depth = 1e-3
    if case == "box edge on a face":  # a cube turned 30 deg more: one edge down, along y
        a = C.box([0.022, 0.022, 0.022])
        qa = _about_y(np.radians(50.0))
        lowest = min(_corners(a, _mat(qa), np.zeros(3)) @ up)
        pa = top - up * (lowest + depth)
    else:
        a = C.capsule(0.005, 0.05)
        turn = 0.0 if case == "capsule on its end" else np.pi / 2 + np.radians(20.0)
        qa = _about_y(turn)
        lowest = min(s * (_mat(qa)[:, 2] @ up) * 0.05 for s in (-1, 1)) - 0.005
        pa = top - up * (lowest + depth)
    P, N, D = _ours(a, b, pa[None], qa[None], np.zeros((1, 3)), qb[None])
    touching = D[0] > -1e-6
    mj = Scene(a, b).contacts(pa, qa, np.zeros(3), qb)
    assert int(touching.sum()) == len(mj) == {"box edge on a face": 2, "capsule on its end": 1,
                                              "capsule lying flat": 2}[case]
    for pos, normal, d in mj:
        j = np.argmin(np.linalg.norm(P[0][touching] - pos, axis=1))
        np.testing.assert_allclose(P[0][touching][j], pos, atol=1e-9)
        np.testing.assert_allclose(N[0][touching][j], normal, atol=1e-9)
        assert D[0][touching][j] == pytest.approx(d, abs=1e-9)


def test_degenerate_poses_are_finite():
    """Coincident centres, parallel and coaxial capsules, a corner exactly on a face, identical
    boxes, an upright cylinder: finite outputs, unit normals, the expected depths."""
    I, z = np.eye(3)[None], np.zeros((1, 3))
    up = lambda x: np.array([[0, 0, x]], dtype=float)  # noqa
    cases = [
        (SPHERE, (I, z), SPHERE2, (I, z), 0.7),
        (SPHERE, (I, z), CAPSULE, (I, z), 0.5),
        (CAPSULE, (I, z), CAPSULE2, (I, z), 0.45),           # coaxial
        (CAPSULE, (I, up(0.0) + [[0.3, 0, 0]]), CAPSULE2, (I, z), 0.15),  # parallel, side by side
        (SPHERE, (I, z), BOX, (I, z), 0.5),                   # centre at the box's centre
        (CAPSULE, (I, z), BOX, (I, z), 0.4),
        (BOX, (I, z), BOX, (I, z), 0.4),                      # identical boxes
        (BOX, (I, up(0.8)), BOX, (I, z), 0.0),                # face on face, exactly touching
        (CYLINDER, (I, up(0.2)), PLANE, (I, z), 0.0),         # upright on the plane
        (CAPSULE, (I, up(0.4)), PLANE, (I, z), 0.2),
    ]
    # a box standing on a corner exactly on the other's top face
    R = np.array(_mat(np.array([np.cos(0.4), np.sin(0.4) / np.sqrt(2), np.sin(0.4) / np.sqrt(2),
                                0.0])))[None]
    corner = (_corners(BOX2, R[0], np.zeros(3))[:, 2]).min()
    cases.append((BOX2, (R, up(0.4 - corner)), BOX, (I, z), 0.0))
    for a, pose_a, b, pose_b, depth in cases:
        P, N, D = C.collide(np, a, pose_a, b, pose_b)
        assert np.all(np.isfinite(P)) and np.all(np.isfinite(N)) and np.all(np.isfinite(D)), a
        np.testing.assert_allclose(np.linalg.norm(N, axis=-1), 1.0, atol=1e-12)
        assert D.max() == pytest.approx(depth, abs=1e-12), (a, b)
    # an ellipsoid: concentric with another ellipsoid, a box, a cylinder (coaxial) and a
    # polytope; its centre on the line of a box's edge and on a cylinder's axis line
    ellipsoid_cases = [
        (ELLIPSOID, (I, z), ELLIPSOID2, (I, z), 0.22 + 0.08),   # along z, their least sum
        (ELLIPSOID, (I, z), BOX, (I, z), None), (ELLIPSOID, (I, z), CYLINDER, (I, z), None),
        (ELLIPSOID, (I, z), CONVEX, (I, z), None),
        (ELLIPSOID, (I, np.array([[0.3, 0.2, 0.0]])), BOX, (I, z), None),  # on an edge's line
        (ELLIPSOID, (I, up(0.5)), CYLINDER, (I, z), 0.22 + 0.2 - 0.5),     # above, coaxial
    ]
    for a, pose_a, b, pose_b, depth in ellipsoid_cases:
        P, N, D = C.collide(np, a, pose_a, b, pose_b)
        assert np.all(np.isfinite(P)) and np.all(np.isfinite(N)) and np.all(np.isfinite(D)), b
        np.testing.assert_allclose(np.linalg.norm(N, axis=-1), 1.0, atol=1e-12)
        n = N[0, 0]
        assert D[0, 0] == pytest.approx(_overlap(a, *[x[0] for x in pose_a], b,
                                                 *[x[0] for x in pose_b], n), abs=1e-12)
        if depth is not None:
            assert D[0, 0] == pytest.approx(depth, abs=1e-12), b
    # parallel capsules side by side: a line contact, the two ends of the overlap
    P, N, D = C.collide(np, CAPSULE, (I, np.array([[0.3, 0, 0.2]])), CAPSULE2, (I, z))
    np.testing.assert_allclose(D[0], [0.15, 0.15], atol=1e-12)
    np.testing.assert_allclose(P[0, :, 2], [-0.2, 0.3], atol=1e-12)
    np.testing.assert_allclose(N[0], [[1, 0, 0], [1, 0, 0]], atol=1e-12)
    # upright cylinder: the 4 rim points of the bottom face at depth 0.1
    P, N, D = C.collide(np, CYLINDER, (I, up(0.1)), PLANE, (I, z))
    np.testing.assert_allclose(D[0, :4], 0.1, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(P[0, :4, :2], axis=1), 0.3, atol=1e-12)


def test_counts_order_and_unsupported_pairs():
    K = {("sphere", "plane"): 1, ("capsule", "plane"): 2, ("box", "plane"): 8,
         ("cylinder", "plane"): 8, ("sphere", "sphere"): 1, ("sphere", "capsule"): 1,
         ("capsule", "capsule"): 2, ("sphere", "box"): 1, ("capsule", "box"): 3,
         ("box", "box"): 8, ("sphere", "cylinder"): 1, ("capsule", "cylinder"): 3,
         ("cylinder", "box"): 21, ("cylinder", "cylinder"): 23}
    geoms = {"sphere": SPHERE, "capsule": CAPSULE, "box": BOX, "cylinder": CYLINDER,
             "plane": PLANE}
    for a, b, k in ((CONVEX, PLANE, 16), (SPHERE, CONVEX, 1), (CAPSULE, CONVEX, 3),
                    (CYLINDER, CONVEX, 29), (CONVEX, BOX, 27), (CONVEX, CONVEX2, 16 + 10 + 3)):
        assert len(CONVEX.vertices) == 16 and len(CONVEX2.vertices) == 10
        assert C.contact_count(a, b) == k
        assert b.kind == "plane" or C.contact_count(b, a) == k
    for (ka, kb), k in K.items():
        assert C.contact_count(geoms[ka], geoms[kb]) == k
        if kb != "plane":
            assert C.contact_count(geoms[kb], geoms[ka]) == k
    for a, b in [(PLANE, SPHERE), (PLANE, PLANE), (PLANE, CYLINDER)]:
        with pytest.raises(ValueError, match=f"'{a.kind}' and '{b.kind}'"):
            C.collide(np, a, (np.eye(3)[None], np.zeros((1, 3))), b,
                      (np.eye(3)[None], np.zeros((1, 3))))
    # either order: the same contacts, the normal flipped
    rng = np.random.default_rng(4)
    pa, qa, pb, qb = _poses(rng, 10, 0.3, 0.3)
    P1, N1, D1 = _ours(CAPSULE, BOX, pa, qa, pb, qb)
    P2, N2, D2 = _ours(BOX, CAPSULE, pb, qb, pa, qa)
    assert np.array_equal(P1, P2) and np.array_equal(N1, -N2) and np.array_equal(D1, D2)


PORTABLE = [(BOX, BOX2), (CAPSULE, BOX), (CAPSULE, CAPSULE2), (CYLINDER, PLANE), (SPHERE, BOX),
            (CAPSULE, CYLINDER), (CYLINDER, BOX2), (CYLINDER, CYLINDER2), (CONVEX, PLANE),
            (CONVEX2, BOX2), (ELLIPSOID, PLANE), (SPHERE, ELLIPSOID), (CAPSULE, ELLIPSOID),
            (ELLIPSOID, ELLIPSOID2), (BOX2, ELLIPSOID), (ELLIPSOID, CYLINDER),
            (ELLIPSOID, CONVEX)]


@pytest.mark.parametrize("a,b", PORTABLE, ids=[f"{a.kind}-{b.kind}" for a, b in PORTABLE])
def test_jax_jit_gives_the_same_numbers(a, b):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from screwdyn.sim.loop_jax import x64

    rng = np.random.default_rng(9)
    pa, qa, pb, qb = _poses(rng, 16, 0.4, 0.4)
    Ra = np.array([_mat(q) for q in qa])
    Rb = np.array([_mat(q) for q in qb])
    want = C.collide(np, a, (Ra, pa), b, (Rb, pb))
    with x64():
        f = jax.jit(lambda Ra, pa, Rb, pb: C.collide(jnp, a, (Ra, pa), b, (Rb, pb)))
        got = f(*(jnp.asarray(x) for x in (Ra, pa, Rb, pb)))
        assert got[2].dtype == jnp.float64
    # capsule-box: near its minimum the signed distance along the segment is flat (or constant)
    # and rounding moves the point of least distance found: its point and normal to 1e-8 there
    # (a polytope's deepest edge point, found by the same search along each edge: 1e-7 apart)
    # (capsule-ellipsoid: the distance is quadratic at its minimum along the segment, so
    # rounding moves the point found by ~sqrt(1e-16) of the length: 1e-7)
    # (an ellipsoid against a solid: the overlap is quadratic at its least direction, so
    # rounding in the comparisons of Newton's steps leaves the normal ~1e-8 apart)
    loose = 1e-8 if (a, b) in ((CAPSULE, BOX), (CAPSULE, CYLINDER)) else \
        1e-7 if (a, b) in ((CONVEX2, BOX2), (CAPSULE, ELLIPSOID)) or \
        "ellipsoid" in (a.kind, b.kind) and "plane" not in (a.kind, b.kind) else 1e-12
    if a.kind == "cylinder" and b.kind != "plane":
        # the same searches, on lines and circles: the angle of a rim's deepest point is found
        # to ~1e-8 rad (the distance is flat there), and the rim points 90 degrees on move
        # with it (depths to 1e-8 m); deep inside (5 cm and more here) the signed distance has
        # plateaus (a side line through a box at its inner radius) where rounding picks
        # another point of the same depth: points and normals compared where shallower
        shallow = want[2] < 0.05
        np.testing.assert_allclose(np.asarray(got[2]), want[2], rtol=0, atol=1e-8)
        for w, g in zip(want[:2], got[:2]):
            np.testing.assert_allclose(np.asarray(g)[shallow], w[shallow], rtol=0, atol=1e-7)
        return
    for w, g, tol in zip(want, got, (loose, loose, 1e-12)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=0, atol=tol)


TRACED = PORTABLE[:3] + [(SPHERE, CAPSULE), (CYLINDER, SPHERE), (CYLINDER, BOX2),
                         (CYLINDER, CYLINDER2), (CONVEX, PLANE), (SPHERE, CONVEX),
                         (CONVEX2, BOX2), (ELLIPSOID, PLANE), (ELLIPSOID, SPHERE),
                         (CAPSULE, ELLIPSOID), (ELLIPSOID, ELLIPSOID2), (ELLIPSOID, BOX2),
                         (CYLINDER2, ELLIPSOID), (ELLIPSOID, CONVEX)]


@pytest.mark.parametrize("a,b", TRACED, ids=[f"{a.kind}-{b.kind}" for a, b in TRACED])
def test_native_tracer_gives_the_same_numbers(a, b):
    """The pair traced into screwdyn's straight-line program (components first, batch last, as
    every traced function), evaluated, equals numpy."""
    from screwdyn.execution import trace

    xp = trace.xp

    def fn(Ra, pa, Rb, pb):
        first = lambda x: xp.moveaxis(x, -1, 0)  # noqa: E731  (batch axis first)
        P, N, D = C.collide(xp, a, (first(Ra), first(pa)), b, (first(Rb), first(pb)))
        flat = xp.concatenate([P.reshape(1, -1), N.reshape(1, -1), D.reshape(1, -1)], axis=1)
        return xp.moveaxis(flat, 0, -1)

    program = trace.trace(fn, {"Ra": (3, 3), "pa": 3, "Rb": (3, 3), "pb": 3})
    rng = np.random.default_rng(10)
    pa, qa, pb, qb = _poses(rng, 6, 0.4, 0.4)
    for i in range(6):
        Ra, Rb = _mat(qa[i]), _mat(qb[i])
        got = program.evaluate(Ra=Ra, pa=pa[i], Rb=Rb, pb=pb[i]).reshape(-1)
        P, N, D = C.collide(np, a, (Ra[None], pa[i][None]), b, (Rb[None], pb[i][None]))
        want = np.concatenate([P.reshape(-1), N.reshape(-1), D.reshape(-1)])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("a,b", EXACT, ids=[f"{a.kind}-{b.kind}" for a, b in EXACT])
def test_exact_pairs_sweep(a, b):
    """2,000 random poses per pair, overlapping or apart (MuJoCo margin 1 m)."""
    seen, worst = _compare_deepest(a, b, 2000, seed=21, spread=0.6, margin=1.0)
    assert seen >= 1000 and worst < 1e-9


@pytest.mark.slow
def test_box_box_sweep():
    rng = np.random.default_rng(22)
    a, b, pa, qa, pb, qb = _box_box_cases(rng, 3000, 0.72)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    assert _check_box_box(a, b, pa, qa, pb, qb, P, N, D, Scene(a, b)) >= 20
    pa, qa, pb, qb = _touching(rng, a, b, 500, 0.01)
    P, N, D = _ours(a, b, pa, qa, pb, qb)
    assert _check_box_box(a, b, pa, qa, pb, qb, P, N, D, Scene(a, b)) >= 450
