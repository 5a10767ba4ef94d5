"""Rollouts beyond one process: ``sd.rollouts`` runs many rollouts on one core, the cores of this
machine or a Ray cluster, bit-identical on each, fault-tolerant, kept in memory or streamed to a
sharded, checksummed Parquet dataset that a rerun resumes.

    result = sd.rollouts(model, q0, qd0, controller, t_final=1.0, dt=1e-3, engine="processes")
    ds = sd.rollouts(model, RandomStates(model), None, controller, 1.0, 1e-3, n=100_000,
                     engine="ray", out="puma-dataset/")
    ds.arrays(), ds.table(), ds.to_pandas()

Modules: ``job`` (the job and one chunk's work), ``engines`` (serial, worker processes),
``ray_engine`` (Ray actors), ``worker`` (a chunk in a worker), ``dataset`` (the files),
``result`` (rollouts in memory), ``identity`` (content hashes), ``driver`` (``rollouts``).
"""
import numpy as np

from .dataset import Dataset, open_dataset
from .driver import rollouts
from .engines import Engine, ProcessEngine, SerialEngine
from .job import ENGINES, RolloutError, rollout_seeds
from .result import RolloutResult

__all__ = ["rollouts", "Dataset", "open_dataset", "RolloutResult", "RolloutError",
           "RandomStates", "Engine", "SerialEngine", "ProcessEngine", "RayEngine", "ENGINES",
           "rollout_seeds"]


def __getattr__(name):
    if name == "RayEngine":  # imports nothing of Ray until asked for
        from .ray_engine import RayEngine

        return RayEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RandomStates:
    """A state sampler: q uniform over the joint ranges (``sd.random_configuration``: angles in
    [-pi, pi], uniform unit quaternions for a free joint), qd normal with standard deviation
    ``velocity_std`` (rad/s or m/s; 0: at rest). ``sampler(rng) -> (q (nq,), qd (nv,))``."""

    def __init__(self, model, velocity_std=0.0):
        self.model, self.velocity_std = model, float(velocity_std)
        if not (np.isfinite(self.velocity_std) and self.velocity_std >= 0):
            raise ValueError(f"velocity_std must be >= 0, got {velocity_std!r}")

    def __call__(self, rng):
        import screwdyn as sd

        q = sd.random_configuration(self.model, rng)
        qd = self.velocity_std * rng.standard_normal(self.model.nv)
        return q, qd

    def __repr__(self):
        return f"RandomStates({self.model.name!r}, velocity_std={self.velocity_std})"
