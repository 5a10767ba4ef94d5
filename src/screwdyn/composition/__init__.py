"""Modular composition of branched robots (Silva, Quiroz-Omana and Adorno, "Dynamic Modeling of
Branched Robots using Modular Composition"): a robot built from subsystems attached at connection
points, each running its own Newton-Euler recursion, black boxes included."""
from .assembly import Assembly, Subsystem
from .blackbox import BlackBox, ConnectionState

__all__ = ["Assembly", "BlackBox", "ConnectionState", "Subsystem"]
