"""The one kind of store of compiled programs (and callables bound to them) in memory: a mapping
bounded by ``config.max_programs`` that drops its least recently used entry past the bound.

Every store of programs in ``screwdyn.execution`` is a ``Store``: one bound, one eviction rule.
A dropped program's code is freed once nothing else holds it (a fast entry, a plan, an XLA custom
call keep theirs alive), and it is made again, or loaded from the disk cache, when next needed.
"""
import collections
import os
import threading

from .config import config


class Store:
    """A thread-safe least-recently-used mapping, at most ``config.max_programs`` entries."""

    def __init__(self, name):
        self.name = name
        self._items = collections.OrderedDict()
        self._lock = threading.RLock()
        if hasattr(os, "register_at_fork"):  # a child has no thread that could hold the lock
            os.register_at_fork(after_in_child=self._new_lock)

    def _new_lock(self):
        self._lock = threading.RLock()

    def get(self, key, default=None):
        """The value under ``key`` (now the most recently used), or ``default``. Without the
        lock: each step is one operation of the ordered dictionary, atomic under the GIL, and a
        key dropped between them reads as absent (this is on the path of every call)."""
        items = self._items
        try:
            items.move_to_end(key)
            return items[key]
        except KeyError:
            return default

    def put(self, key, value):
        """Store ``value`` under ``key``; the least recently used entries go past the bound."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > config.max_programs:
                self._items.popitem(last=False)
        return value

    def clear(self):
        with self._lock:
            self._items.clear()

    def values(self):
        with self._lock:
            return list(self._items.values())

    def __len__(self):
        return len(self._items)

    def __contains__(self, key):
        return key in self._items

    def __repr__(self):
        return f"Store({self.name!r}, {len(self)} of {config.max_programs})"
