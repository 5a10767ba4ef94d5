"""How screwdyn tells a user that a model is wrong or dubious."""
import os
import sys
import warnings


class ModelError(ValueError):
    """A robot model that cannot be built: the message names the file element at fault."""


class InertiaWarning(UserWarning):
    """Links whose inertia is physically inconsistent (loaded anyway, as Pinocchio does)."""


class JointOrderWarning(UserWarning):
    """A URDF loaded with its sibling joints in file order (the default), which differs from
    Pinocchio's order (by name): q, qd and tau are a permutation of Pinocchio's. Pass
    ``joint_order="name"`` or ``"file"`` to ``load_urdf`` to choose (and silence it)."""


class ConstraintWarning(UserWarning):
    """A simulation starts from a state that violates the model's equality constraints, or
    with redundant constraint rows (an over-constrained loop, solved by least squares)."""


class PenetrationWarning(UserWarning):
    """A simulation starts with a contact point deep inside what it touches (the ground): the
    contact pushes it out at once, violently."""


class LargeSceneWarning(UserWarning):
    """A scene (``sd.Scene``) whose contact program is large: it compiles for minutes and
    takes gigabytes the first time (the disk cache keeps it); fewer pairs make it smaller."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def warn(message, category=UserWarning):
    """Warn, pointing at the first line outside screwdyn (the user's call), whatever the depth
    of the library's own calls."""
    level, frame = 2, sys._getframe(1)  # stacklevel 2 is the caller of warn()
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level)
