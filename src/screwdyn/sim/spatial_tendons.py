"""Spatial tendons bound to a model: each one's length and its Jacobian at a state, from the
world poses and Jacobians of the links its sites are on, and the forces of its spring and
damper (``model.constraints.SpatialTendon``).

A tendon through the sites p_0, ..., p_n (points fixed on links) has the length
L = sum_k |p_k+1 - p_k| and the rate dL/dt = J_L qd, J_L = sum_k u_k^T (J_k+1 - J_k), with
u_k = (p_k+1 - p_k) / |p_k+1 - p_k| and J_k the world-frame Jacobian of the material point p_k
(v + w x r of its link: ``dynamics.jacobian``). Two sites that coincide give the segment no
direction; its u is then zero (MuJoCo's too). Written once for numpy and JAX, batch first:
q (N, nq)."""
from functools import cached_property

import numpy as np

from ..dynamics import forward_kinematics, jacobian

#: below this segment length (m) a segment has no direction
_SHORTEST = 1e-15


class SpatialTendons:
    """``tendons`` (``SpatialTendon``s of ``model``) bound to it, their kinematics computed in
    ``algebra``."""

    def __init__(self, model, tendons, algebra="spatial"):
        self.model, self.tendons, self.algebra = model, tuple(tendons), algebra
        #: per tendon, per site: (link index, point (3,) in the link's frame)
        self.sites = tuple(tuple((model.link_index(link), np.asarray(point, dtype=float))
                                 for link, point in t.sites) for t in self.tendons)
        #: the links the sites are on (whose Jacobians a state needs), in order
        self.links = tuple(sorted({link for sites in self.sites for link, _ in sites}))

    def __len__(self):
        return len(self.tendons)

    @property
    def key(self):
        return ("spatial tendons", self.tendons, self.algebra)

    @cached_property
    def dofs(self):
        """Per tendon, the velocity coordinates that can change its length: those of its
        sites' links' paths to the root."""
        tree = self.model.tree
        out = []
        for sites in self.sites:
            bodies = {a for link, _ in sites if tree.links[link].body >= 0
                      for a in tree.ancestors[tree.links[link].body]}
            slices = [tree.v_slices[b] for b in bodies]
            out.append(tuple(sorted(k for v in slices for k in range(v.start, v.stop))))
        return tuple(out)

    def kinematics(self, xp, q):
        """(L (N, T) m: the tendons' lengths, J (N, T, nv): their Jacobians dL/dt = J qd) at
        q (N, nq)."""
        T = forward_kinematics(self.model, q, algebra=self.algebra)  # (N, nlinks, 4, 4)
        jac = {l: jacobian(self.model, q, l, frame="world", algebra=self.algebra)
               for l in self.links}  # (N, 6, nv): [v of the link's origin; w], world axes
        lengths, rows = [], []
        for sites in self.sites:
            points, Jp = [], []
            for link, point in sites:
                origin, R = T[:, link, :3, 3], T[:, link, :3, :3]
                r = R @ point  # (N, 3): the site from its link's origin, world axes
                J = jac[link]
                points.append(origin + r)
                Jp.append(J[:, :3] - xp.cross(r[:, :, None], J[:, 3:], axis=1))  # v + w x r
            L, JL = 0.0 * q[:, 0], 0.0 * q[:, :self.model.nv]
            for k in range(len(sites) - 1):
                d = points[k + 1] - points[k]
                length = xp.sqrt(xp.sum(d * d, axis=-1))
                u = xp.where(length[:, None] > _SHORTEST,
                             d / xp.maximum(length, _SHORTEST)[:, None], 0.0)
                L = L + length
                JL = JL + xp.einsum("ni,niv->nv", u, Jp[k + 1] - Jp[k])
            lengths.append(L)
            rows.append(JL)
        return xp.stack(lengths, axis=-1), xp.stack(rows, axis=1)

    def at(self, q):
        """(L (T,), J (T, nv)) at one configuration q (nq,) (numpy)."""
        L, J = self.kinematics(np, np.asarray(q, dtype=float)[None])
        return np.asarray(L)[0], np.asarray(J)[0]


class SpatialSprings:
    """The springs and dampers of a model's spatial tendons: a tendon of length L(q) feels
    f = -(k (L - L_spring) + b dL/dt), which its joints feel as tau = J_L^T f."""

    def __init__(self, model, algebra="spatial"):
        tendons = [t for t in model.spatial_tendons if t.passive]
        self.paths = SpatialTendons(model, tendons, algebra)
        self.k = np.array([t.stiffness for t in tendons])
        self.b = np.array([t.damping for t in tendons])
        self.rest = np.array([t.spring_length for t in tendons])

    @property
    def key(self):
        return ("spatial springs", self.paths.key)

    def forces(self, xp, q, qd):
        """(tau (N, nv), elastic energy (N,)) at q (N, nq), qd (N, nv)."""
        L, J = self.paths.kinematics(xp, q)
        stretch = L - self.rest
        f = -(self.k * stretch + self.b * xp.einsum("ntv,nv->nt", J, qd))
        return xp.einsum("nt,ntv->nv", f, J), xp.sum(0.5 * self.k * stretch * stretch, axis=-1)
