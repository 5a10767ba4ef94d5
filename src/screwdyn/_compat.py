"""Names kept for code written against older layouts of the package.

``screwdyn.simulate`` was a module (``simulate.py``) and is now the function ``simulate``; the
simulation lives in the package ``screwdyn.sim``. ``from screwdyn.simulate import X`` keeps
working through an alias module that forwards to ``screwdyn.sim`` with a ``DeprecationWarning``.
(``import screwdyn.simulate as m`` gives the function, as ``screwdyn.simulate`` always does.)
"""
import sys
import types
import warnings


class _SimulateAlias(types.ModuleType):
    def __getattr__(self, name):
        from . import sim

        if name.startswith("__"):
            raise AttributeError(name)
        try:
            value = getattr(sim, name)
        except AttributeError:
            raise AttributeError(f"screwdyn.simulate (now screwdyn.sim) has no attribute "
                                 f"{name!r}") from None
        warnings.warn(f"the module screwdyn.simulate is now the package screwdyn.sim: import "
                      f"{name} from screwdyn.sim (or use screwdyn.{name})", DeprecationWarning,
                      stacklevel=2)
        return value


def install_simulate_alias():
    """Register the alias module ``screwdyn.simulate`` (without rebinding the attribute
    ``screwdyn.simulate``, which stays the function)."""
    name = __package__ + ".simulate"
    if name not in sys.modules:
        sys.modules[name] = _SimulateAlias(name, "alias of screwdyn.sim (deprecated)")
