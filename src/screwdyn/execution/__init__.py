"""How screwdyn's public functions run: the execution plan and the native code generator.

``plan`` decides the path of every call (machine code compiled from the recursions, numpy, or
JAX); ``trace`` runs the recursions on symbolic scalars into a straight-line program (``graph``);
``llvm`` compiles it; ``entry`` calls it from Python; ``cache`` keeps it on disk (private,
bounded: ``clear_cache`` empties it); ``store`` keeps programs in memory; ``config`` holds the
switches (native code, custom calls, chunk size, bounds) in one object; ``native`` ties
them together; ``custom_call`` runs them inside XLA (JAX on the CPU); ``call`` parses a call's
inputs; ``xla`` shapes JAX programs for XLA.
"""
from .cache import CacheWarning, clear_cache, set_directory
from .config import Config, config
from .plan import NativeCompileWarning, use_custom_calls, use_native

__all__ = ["CacheWarning", "Config", "NativeCompileWarning", "clear_cache", "config",
           "set_directory", "use_custom_calls", "use_native"]
