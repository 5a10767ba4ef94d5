"""A progress bar for simulations (tqdm), as the ``progress(steps_done, steps_total)`` callable
that ``simulate`` calls from time to time."""
import sys

#: seconds a run lasts before its bar is shown (shorter runs show none)
DELAY = 1.0


class ProgressBar:
    """A tqdm bar on ``stream`` (stderr) counting steps, with the simulated time; shown only
    once the run has lasted ``delay`` seconds (default ``DELAY``). ``close()`` ends it
    (``simulate`` does), unless ``held``: then ``close()`` waits for ``end(step)``, so that the
    caller, who learns how the run ended, has the bar end there (at the failing step, not
    100%)."""

    def __init__(self, total, dt, stream=None, delay=None, description="simulating",
                 held=False):
        from tqdm.auto import tqdm

        self.dt, self.held = dt, held
        self.bar = tqdm(total=int(total), unit="step", unit_scale=True, file=stream or sys.stderr,
                        delay=DELAY if delay is None else delay, desc=description,
                        dynamic_ncols=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} steps "
                                   "[{elapsed}<{remaining}, {rate_fmt}]{postfix}")

    def __call__(self, done, total):
        if total != self.bar.total:
            self.bar.total = int(total)
        self.bar.update(int(done) - self.bar.n)
        self._show_time(done)

    def _show_time(self, done):
        self.bar.set_postfix_str(f"t = {done * self.dt:.4g} s", refresh=False)

    def close(self):
        """End the bar where it stands (a held bar: nothing until ``end``)."""
        if not self.held:
            self.bar.close()

    def end(self, step=None, outcome="failed"):
        """End the bar: where it stands (``step`` None), or at ``step`` with ``outcome`` as its
        description (``"failed"``, ``"interrupted"``): the run stopped there, whatever the
        steps computed past it in the same chunk."""
        if step is not None:
            self.bar.n = max(0, min(int(step), self.bar.total))
            self.bar.set_description_str(outcome, refresh=False)
            self._show_time(step)
        self.bar.close()
