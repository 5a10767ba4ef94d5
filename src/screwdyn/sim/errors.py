"""What a simulation raises when it cannot go on: the samples computed so far always come with it."""


class SimulationError(RuntimeError):
    """A simulation that could not go on. ``step``, ``time`` (s), ``rollout`` (the batch index of
    the first failing rollout, ``()`` for a single one), ``reason``, and ``trajectory``: the
    samples before the failing step (every rollout of a batch, cut at the same sample)."""

    def __init__(self, reason, step, time, rollout=(), trajectory=None):
        where = f" (rollout {rollout})" if rollout else ""
        super().__init__(f"simulation failed at step {step} (t = {time:.6g} s){where}: {reason}")
        self.reason, self.step, self.time, self.rollout = reason, step, time, rollout
        self.trajectory = trajectory


class SimulationInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM in the ``screwdyn simulate`` command) during a simulation. A
    ``KeyboardInterrupt``, so a script still stops, carrying ``trajectory`` (every sample
    computed before the interruption), ``step`` and ``time`` (s) where it stopped."""

    def __init__(self, step, time, trajectory=None):
        super().__init__(f"simulation interrupted at step {step} (t = {time:.6g} s); "
                         f"{0 if trajectory is None else trajectory.n_samples} samples kept")
        self.step, self.time, self.trajectory = step, time, trajectory
