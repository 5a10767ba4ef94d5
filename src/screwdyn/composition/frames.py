"""Rigid transforms as 4x4 matrices: the placements of connection points."""
import numpy as np

from ..errors import ModelError


def homogeneous(rotation, translation):
    """The 4x4 matrix of a rotation (9 numbers, row-major) and a translation (3)."""
    T = np.eye(4)
    T[:3, :3] = np.reshape(rotation, (3, 3))
    T[:3, 3] = translation
    return T


def rigid(T, where):
    """``T`` (4x4, or None for the identity) checked to be a rigid transform: a rotation (R R^T = 1,
    det R = +1), a finite translation and the last row (0, 0, 0, 1). ModelError naming ``where``."""
    if T is None:
        return np.eye(4)
    try:
        T = np.array(T, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: placement is not numeric") from None
    if T.shape != (4, 4):
        raise ModelError(f"{where}: placement must be a 4x4 homogeneous transform, "
                         f"got shape {T.shape}")
    R = T[:3, :3]
    if not (np.all(np.isfinite(T)) and np.allclose(T[3], [0, 0, 0, 1], rtol=0, atol=1e-12)
            and np.allclose(R @ R.T, np.eye(3), rtol=0, atol=1e-9) and np.linalg.det(R) > 0):
        raise ModelError(f"{where}: placement is not a rigid transform (a rotation matrix and a "
                         f"translation over the row 0 0 0 1): {np.round(T, 6).tolist()}")
    T.flags.writeable = False
    return T
