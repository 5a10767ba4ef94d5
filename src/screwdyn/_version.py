"""The library's version: one place (the package metadata and the program cache's keys read it)."""
__version__ = "0.1.0"
