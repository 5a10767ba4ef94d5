"""Modular composition of branched robots (Silva, Quiroz-Omana and Adorno, "Dynamic Modeling of
Branched Robots using Modular Composition"): a robot built from subsystems attached at connection
points, each evaluated by its own W_i, black boxes included; forward dynamics, the mass matrix and
simulation across the connection points; attach, detach and replace on a built robot."""
from .assembly import Assembly, Subsystem
from .blackbox import BlackBox, ConnectionState, WrenchLog
from .function import SubsystemFunction

__all__ = ["Assembly", "BlackBox", "ConnectionState", "Subsystem", "SubsystemFunction",
           "WrenchLog"]
