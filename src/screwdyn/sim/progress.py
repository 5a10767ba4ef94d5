"""A progress bar for simulations (tqdm), as the ``progress(steps_done, steps_total)`` callable
that ``simulate`` calls from time to time."""
import sys


class ProgressBar:
    """A tqdm bar on ``stream`` (stderr) counting steps, with the simulated time; shown only
    once the run has lasted ``delay`` seconds. ``close()`` ends it (``simulate`` does)."""

    def __init__(self, total, dt, stream=None, delay=1.0, description="simulating"):
        from tqdm.auto import tqdm

        self.dt = dt
        self.bar = tqdm(total=int(total), unit="step", unit_scale=True, file=stream or sys.stderr,
                        delay=delay, desc=description, dynamic_ncols=True,
                        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} steps "
                                   "[{elapsed}<{remaining}, {rate_fmt}]{postfix}")

    def __call__(self, done, total):
        if total != self.bar.total:
            self.bar.total = int(total)
        self.bar.update(int(done) - self.bar.n)
        self.bar.set_postfix_str(f"t = {done * self.dt:.4g} s", refresh=False)

    def close(self):
        self.bar.close()
