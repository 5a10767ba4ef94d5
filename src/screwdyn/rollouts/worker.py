"""What a worker does with a chunk, in any engine: simulate it, then keep it in memory, or write
its shard (in the dataset folder when the worker sees it, else the bytes go back to the driver)."""
import dataclasses
import os
from typing import Optional

from .dataset import encode_shard, shard_entry, write_shard
from .job import run_chunk


@dataclasses.dataclass
class Done:
    """A finished chunk as it travels back: ``result`` (a ChunkResult) when kept in memory;
    ``entry`` (its manifest line) when written, with ``data`` (the shard's bytes) when the
    driver has to write them."""

    chunk: int
    failed: int
    runs: int
    wall_time: float
    result: object = None
    entry: Optional[dict] = None
    data: Optional[bytes] = None


def run_marker(job):
    """The file that tells a worker it sees the driver's dataset folder (a shared file system)."""
    return os.path.join(job.out, f".screwdyn-run-{job.uid}")


def execute(job, chunk, states=None):
    """Run chunk ``chunk`` of ``job`` (see ``job.run_chunk``) and package it as a ``Done``."""
    result = run_chunk(job, chunk, states)
    done = Done(chunk, int((~result.ok).sum()), result.runs, result.wall_time)
    if job.out is None:
        done.result = result
        return done
    data = encode_shard(result, job)
    done.entry = shard_entry(result, data)
    if os.path.exists(run_marker(job)):
        write_shard(job.out, done.entry, data)
    else:
        done.data = data
    return done


def prepare(job):
    """Once per job in a worker process: use the driver's persistent JAX compilation cache."""
    if job.jax_cache_dir:
        import jax

        if not jax.config.jax_compilation_cache_dir:
            jax.config.update("jax_compilation_cache_dir", job.jax_cache_dir)
