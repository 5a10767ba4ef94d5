"""Featherstone's 6-D spatial algebra, in Pinocchio's layout.

Layout (components first, one trailing batch axis, see ``algebra/__init__``):
    twist   V = [v; w]   (6, N): velocity of the frame origin, angular velocity
    wrench  F = [f; n]   (6, N): force, moment about the frame origin
    pose    X = (R, p)   (3, 3, N), (3, N): the child frame's axes and origin in the parent frame
    inertia I            (6, 6, N): wrench = I twist
"""
import numpy as np

from . import Algebra


class Spatial(Algebra):
    name = "spatial"

    # -- 3-D helpers -----------------------------------------------------------------------
    def rotate(self, R, x):
        return self.xp.einsum("ij...,j...->i...", R, x)

    def rotate_back(self, R, x):
        return self.xp.einsum("ji...,j...->i...", R, x)

    def cross(self, a, b):
        return self.xp.stack([a[1] * b[2] - a[2] * b[1],
                              a[2] * b[0] - a[0] * b[2],
                              a[0] * b[1] - a[1] * b[0]])

    # -- poses -----------------------------------------------------------------------------
    def pose(self, R, p):
        return (np.asarray(R, dtype=float)[..., None], np.asarray(p, dtype=float)[..., None])

    def identity(self):
        return self.pose(np.eye(3), np.zeros(3))

    def revolute(self, axis, angle):
        """Rotation by ``angle`` (N,) about the unit ``axis``: Rodrigues' formula."""
        K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
        s, c = self.xp.sin(angle), self.xp.cos(angle)
        R = np.eye(3)[..., None] + K[..., None] * s + (K @ K)[..., None] * (1 - c)
        return R, self.xp.zeros((3,) + angle.shape, dtype=angle.dtype)

    def prismatic(self, axis, distance):
        return (np.eye(3)[..., None] + 0 * distance, np.asarray(axis)[:, None] * distance)

    def free(self, q):
        """Pose from (x, y, z, qx, qy, qz, qw); the quaternion is normalised."""
        return self.matrix_from_quaternion(q[3:7]), q[0:3]

    def compose(self, A, B):
        (Ra, pa), (Rb, pb) = A, B
        return self.xp.einsum("ij...,jk...->ik...", Ra, Rb), self.rotate(Ra, pb) + pa

    def inverse(self, X):
        R, p = X
        Rt = self.xp.einsum("ij...->ji...", R)
        return Rt, -self.rotate(Rt, p)

    def to_matrix(self, X):
        """(4, 4, N) homogeneous matrices."""
        xp = self.xp
        R, p = X
        p = p + 0 * R[0]  # broadcast constants to the batch
        top = xp.concatenate([R, p[:, None]], axis=1)
        bottom = xp.concatenate([xp.zeros((1, 3) + p.shape[1:], dtype=p.dtype),
                                 xp.ones((1, 1) + p.shape[1:], dtype=p.dtype)], axis=1)
        return xp.concatenate([top, bottom], axis=0)

    def from_matrix(self, T):
        return T[:3, :3], T[:3, 3]

    # -- twists and wrenches ---------------------------------------------------------------
    def twist(self, v):
        """Algebra twist from a public [linear; angular] 6-vector (6, ...)."""
        return v

    def twist_vector(self, V):
        return V

    wrench, wrench_vector = twist, twist_vector

    def act_twist(self, X, V):
        """The twist V of the child frame, in the parent frame."""
        R, p = X
        w = self.rotate(R, V[3:])
        return self.xp.concatenate([self.rotate(R, V[:3]) + self.cross(p, w), w])

    def inv_act_twist(self, X, V):
        """The twist V given in the parent frame, in the child frame."""
        R, p = X
        return self.xp.concatenate([self.rotate_back(R, V[:3] - self.cross(p, V[3:])),
                                    self.rotate_back(R, V[3:])])

    def act_wrench(self, X, F):
        R, p = X
        f = self.rotate(R, F[:3])
        return self.xp.concatenate([f, self.rotate(R, F[3:]) + self.cross(p, f)])

    def inv_act_wrench(self, X, F):
        R, p = X
        return self.xp.concatenate([self.rotate_back(R, F[:3]),
                                    self.rotate_back(R, F[3:] - self.cross(p, F[:3]))])

    def cross_motion(self, V, M):
        """V x M (crm): [w x m_v + v x m_w; w x m_w]."""
        v, w = V[:3], V[3:]
        return self.xp.concatenate([self.cross(w, M[:3]) + self.cross(v, M[3:]),
                                    self.cross(w, M[3:])])

    def cross_force(self, V, F):
        """V x* F (crf): [w x f; w x n + v x f]."""
        v, w = V[:3], V[3:]
        return self.xp.concatenate([self.cross(w, F[:3]),
                                    self.cross(w, F[3:]) + self.cross(v, F[:3])])

    def dot(self, M, F):
        """The power pairing M . F (batched over any shared trailing axes)."""
        return (M * F).sum(axis=0)

    # -- inertias --------------------------------------------------------------------------
    def inertia(self, mass, com, inertia_com):
        """Spatial inertia about the frame origin (Featherstone eq. 2.63, [v; w] layout)."""
        c = _skew(com)
        I = np.block([[mass * np.eye(3), -mass * c],
                      [mass * c, np.asarray(inertia_com).reshape(3, 3) + mass * c @ c.T]])
        return I[..., None]

    def inertia_apply(self, I, V):
        return self.xp.einsum("ij...,j...->i...", I, V)

    def inertia_act(self, X, I):
        """The inertia I of the child frame, in the parent frame: X* I X^-1 = Xf I Xf^T."""
        Xf = self._force_matrix(X)
        return self.xp.einsum("ij...,jk...,lk...->il...", Xf, I, Xf)

    def inertia_sub_outer(self, IA, U, Dinv):
        """IA - sum_ab U_a Dinv_ab U_b^T: the articulated-inertia update (Featherstone 7.1)."""
        for a, Ua in enumerate(U):
            for b, Ub in enumerate(U):
                IA = IA - Ua[:, None] * Ub[None, :] * Dinv[a][b]
        return IA

    def _force_matrix(self, X):
        """6x6 matrix moving wrenches from the child to the parent frame."""
        xp = self.xp
        R, p = X
        R = R + 0 * p[0]
        pR = xp.stack([self.cross(p, R[:, k]) for k in range(3)], axis=1)
        zero = 0 * R
        return xp.concatenate([xp.concatenate([R, zero], axis=1),
                               xp.concatenate([pR, R], axis=1)], axis=0)

    # -- rotations -------------------------------------------------------------------------
    def matrix_from_quaternion(self, quat):
        """Rotation matrices (3, 3, N) from unit quaternions (x, y, z, w) (4, N), normalised."""
        xp = self.xp
        quat = quat / xp.sqrt((quat * quat).sum(axis=0))
        x, y, z, w = quat
        return xp.stack([
            xp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)]),
            xp.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)]),
            xp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)])])


def _skew(a):
    return np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]], dtype=float)
