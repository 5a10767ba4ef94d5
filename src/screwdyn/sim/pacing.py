"""The sizes of the uninterruptible calls a compiled loop makes (one native call or one compiled
JAX chunk): bounded in memory (``chunk_length``) and in time (``Paced``, ``CHUNK_SECONDS``), so
that Ctrl-C, which Python sees only when a call returns, stops a run within a fraction of a
second. The split does not change the results: the calls run one after the other on the same
state."""
import time as _time

_CHUNK = 1024  # samples per compiled call at most (fewer for big batches: bounded memory)
_CHUNK_BYTES = 64 << 20

#: seconds one uninterruptible call (a native or compiled JAX chunk) aims to take: Python sees
#: Ctrl-C only when the call returns
CHUNK_SECONDS = 0.25


def chunk_length(N, width):
    """Samples per call for N rollouts of ``width`` numbers per sample: 1024, or the power of
    two that keeps one call's samples in 64 MiB."""
    fit = max(1, _CHUNK_BYTES // (8 * N * width))
    return min(_CHUNK, 1 << (fit.bit_length() - 1))


class Paced:
    """The sizes of successive uninterruptible calls (machine code, a compiled JAX loop), in
    units of work (steps, samples): ``first`` unit(s), then as many as the measured time per
    unit fits in ``CHUNK_SECONDS`` (growing at most ``growth``-fold from one call to the next),
    never more than ``most`` (the memory bound). So Ctrl-C waits a fraction of a second
    whatever the model, the batch or ``record_every``. The chunking does not change the
    results: the calls run one after the other on the same state."""

    def __init__(self, most, first=1, growth=8):
        self.most, self.growth = max(1, int(most)), growth
        self.next, self._start = min(self.most, max(1, int(first))), None

    def take(self, left):
        """The next call's size in units (1 to ``left``); starts its clock."""
        self._start = _time.perf_counter()
        return max(1, min(self.next, int(left)))

    def took(self, n):
        """The call of ``n`` units taken by ``take`` has returned: size the next one."""
        elapsed = _time.perf_counter() - self._start
        fit = CHUNK_SECONDS * n / elapsed if elapsed > 0 else self.most
        size = int(max(1, min(self.most, self.growth * n, fit)))
        self.next = 1 << (size.bit_length() - 1)  # a power of two: few distinct call shapes
