"""The two ways screwdyn tells a user that a model is wrong."""


class ModelError(ValueError):
    """A robot model that cannot be built: the message names the file element at fault."""


class InertiaWarning(UserWarning):
    """Links whose inertia is physically inconsistent (loaded anyway, as Pinocchio does)."""
