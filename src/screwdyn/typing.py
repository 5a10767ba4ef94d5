"""Type aliases of the public API, for annotations and editors.

``ArrayLike``: what an array argument accepts (numpy arrays, JAX arrays, nested sequences,
scalars). ``Array``: what a function returns: a numpy array for numpy inputs, a JAX array when a
JAX array was given. ``AlgebraName``: the ``algebra=`` argument's values.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Union

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import jax

ArrayLike = npt.ArrayLike
Array = Union[np.ndarray, "jax.Array"]
AlgebraName = Literal["spatial", "cga", "dq", "vector"]

__all__ = ["AlgebraName", "Array", "ArrayLike"]
