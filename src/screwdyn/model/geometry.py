"""Small rigid-body geometry on plain Python floats, for building models: 3-vectors as 3-tuples,
3x3 matrices as 9-tuples (row-major). A model's constants are a few dozen such objects, for
which numpy's per-call cost (about a microsecond) would dominate the loaders' time."""
import math

from ..errors import ModelError

IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
ZERO3 = (0.0, 0.0, 0.0)


def floats(value, n, where, what):
    """``value`` (a number, a sequence or an array, nested or flat) as a tuple of ``n`` finite
    floats; a ``ModelError`` naming ``where`` and ``what`` if it is not."""
    if type(value) is float and n == 1:
        if value - value == 0.0:  # finite: inf - inf and nan - nan are nan
            return (value,)
        raise ModelError(f"{where}: {what} is not finite: {[value]}")
    if type(value) is tuple and len(value) == n:
        try:  # the common case, a flat tuple of numbers: checked at C speed
            out = tuple(map(float, value))
            total = sum(out)
            if total - total == 0.0:  # every entry finite (else nan or inf, or an overflow)
                return out
        except (TypeError, ValueError):
            pass
    if hasattr(value, "tolist"):
        value = value.tolist()
    flat = []
    try:
        _flatten(value, flat)
        out = tuple(float(x) for x in flat)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: {what} is not numeric: {value!r}") from None
    if len(out) != n:
        raise ModelError(f"{where}: {what} must have shape ({n},) (or one equivalent), got "
                         f"{len(out)} numbers")
    if not all(math.isfinite(x) for x in out):
        raise ModelError(f"{where}: {what} is not finite: {list(out)}")
    return out


def _flatten(value, out):
    if isinstance(value, (list, tuple)):
        for x in value:
            _flatten(x, out)
    else:
        out.append(value)


def rpy_matrix(rpy):
    """URDF roll-pitch-yaw (fixed axes x, y, z): Rz(yaw) Ry(pitch) Rx(roll), 9-tuple."""
    r, p, y = rpy
    if r == 0.0 and p == 0.0 and y == 0.0:
        return IDENTITY
    cr, sr, cp, sp, cy, sy = (math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y),
                              math.sin(y))
    return (cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr,
            sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr,
            -sp, cp * sr, cp * cr)


def quaternion_matrix(w, x, y, z):
    """The rotation of a quaternion (w, x, y, z), normalised, 9-tuple."""
    n = math.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / n, x / n, y / n, z / n
    return (1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
            2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
            2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y))


def matmul(A, B):
    if B is IDENTITY:
        return A
    if A is IDENTITY:
        return B
    a0, a1, a2, a3, a4, a5, a6, a7, a8 = A
    b0, b1, b2, b3, b4, b5, b6, b7, b8 = B
    return (a0 * b0 + a1 * b3 + a2 * b6, a0 * b1 + a1 * b4 + a2 * b7, a0 * b2 + a1 * b5 + a2 * b8,
            a3 * b0 + a4 * b3 + a5 * b6, a3 * b1 + a4 * b4 + a5 * b7, a3 * b2 + a4 * b5 + a5 * b8,
            a6 * b0 + a7 * b3 + a8 * b6, a6 * b1 + a7 * b4 + a8 * b7, a6 * b2 + a7 * b5 + a8 * b8)


def matvec(A, x):
    if A is IDENTITY:
        return x
    return (A[0] * x[0] + A[1] * x[1] + A[2] * x[2], A[3] * x[0] + A[4] * x[1] + A[5] * x[2],
            A[6] * x[0] + A[7] * x[1] + A[8] * x[2])


def transpose(A):
    return (A[0], A[3], A[6], A[1], A[4], A[7], A[2], A[5], A[8])


def add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def congruence(R, I):
    """R I R^T."""
    return matmul(matmul(R, I), transpose(R))


def is_rotation(R, tol=1e-9):
    """R R^T = 1 within ``tol`` and det R > 0."""
    P = matmul(R, transpose(R))
    if any(abs(P[k] - IDENTITY[k]) > tol for k in range(9)):
        return False
    det = (R[0] * (R[4] * R[8] - R[5] * R[7]) - R[1] * (R[3] * R[8] - R[5] * R[6])
           + R[2] * (R[3] * R[7] - R[4] * R[6]))
    return det > 0


def symmetric_eigenvalues(I):
    """The eigenvalues of a symmetric 3x3 matrix, ascending (the trigonometric closed form)."""
    a, b, c, d, e, f = I[0], I[4], I[8], I[1], I[5], I[2]  # xx, yy, zz, xy, yz, xz
    p1 = d * d + e * e + f * f
    if p1 == 0.0:
        return tuple(sorted((a, b, c)))
    q = (a + b + c) / 3
    p = math.sqrt(((a - q) ** 2 + (b - q) ** 2 + (c - q) ** 2 + 2 * p1) / 6)
    a, b, c, d, e, f = (a - q) / p, (b - q) / p, (c - q) / p, d / p, e / p, f / p
    r = (a * (b * c - e * e) - d * (d * c - e * f) + f * (d * e - b * f)) / 2
    phi = math.acos(max(-1.0, min(1.0, r))) / 3
    big = q + 2 * p * math.cos(phi)
    small = q + 2 * p * math.cos(phi + 2 * math.pi / 3)
    return (small, 3 * q - big - small, big)


def merged_inertia(parts):
    """(mass, com, inertia about the com) of rigid parts given as (mass, com, inertia about
    their com) in one frame, 9-tuples: the parallel-axis theorem."""
    if len(parts) == 1:
        m, c, I = parts[0]
        return float(m), (c if m > 0 else ZERO3), I
    mass = sum(m for m, _, _ in parts)
    if mass > 0:
        com = tuple(sum(m * c[k] for m, c, _ in parts) / mass for k in range(3))
    else:
        com = ZERO3
    inertia = [0.0] * 9
    for m, c, I in parts:
        x, y, z = c[0] - com[0], c[1] - com[1], c[2] - com[2]
        shift = (y * y + z * z, -x * y, -x * z, -x * y, x * x + z * z, -y * z, -x * z, -y * z,
                 x * x + y * y)  # m (|r|^2 1 - r r^T) / m
        inertia = [a + b + m * s for a, b, s in zip(inertia, I, shift)]
    return float(mass), com, tuple(inertia)
