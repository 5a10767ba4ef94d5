"""The native backend of ``simulate``: the simulation's own step (``step.make_step``: the
integrator, the controller, contact, joint limits, stick-slip friction and the energy channels),
traced for one rollout with ``execution.trace``'s array namespace into a straight-line program,
compiled to machine code, and run in a loop over steps in machine code too
(``execution.rollout``), for one rollout or a batch (four rollouts at a time in SIMD lanes, in
the same bits as one at a time).

The step's carry (q, qd, the hybrid state of the springs, the energy channels) is flattened into
one state vector per rollout and its sample (q, qd, qdd, tau, [elastic, work_in, work_passive],
contact forces) into one record vector; the controller's gains and the contact's numbers are an
input shared by every rollout, the limit and friction springs' numbers (set per rollout from its
initial inertia) an input per rollout, so new gains or a new ground reuse the program. Gravity
is a constant of the program (part of its cache key).

What it runs with is explicit, its imports: the ``run.Run``, the step (``step.make_step``), the
failure flags and bookkeeping (``failures``), the sizes of its calls (``pacing``) and the
samples' layout (``record.empty_samples``), the same as the JAX loop's.
"""
import copy
import time as _time

import numpy as np

from .. import interrupts
from ..execution import cache, plan
from ..execution import rollout as native_rollout
from ..execution import trace
from .failures import Interrupted, bad_flags, finish
from .pacing import Paced, chunk_length
from .policy import BadOutput
from .record import empty_samples
from .step import initial_hybrid, make_step
from .system import ExternalWrenchError

_REFUSALS = {}


# -- flattening trees of arrays (N, ...) into rows (N, size) --------------------------------------
def _leaves(tree, path=()):
    """(path, array) of every array of a tree of dicts (sorted keys) and tuples."""
    if isinstance(tree, dict):
        for k in sorted(tree):
            yield from _leaves(tree[k], path + (k,))
    elif isinstance(tree, (tuple, list)):
        for i, e in enumerate(tree):
            yield from _leaves(e, path + (i,))
    else:
        yield path, tree


class Layout:
    """Where each array of a tree (leading axis: the rollouts) lies in a flat row."""

    def __init__(self, tree):
        self.leaves = [(path, tuple(np.shape(a)[1:])) for path, a in _leaves(tree)]
        self.template = tree
        self.size = sum(int(np.prod(s, dtype=int)) for _, s in self.leaves)

    def flatten(self, xp, tree):
        """(N, size): the leaves of ``tree``, each (N, ...) flattened, side by side."""
        parts = [xp.reshape(xp.asarray(a), (np.shape(a)[0], -1)) for _, a in _leaves(tree)]
        return xp.concatenate(parts, axis=-1) if parts else None

    def unflatten(self, flat):
        """The tree of ``flat`` (N, size) (numpy or traced)."""
        values, start = {}, 0
        for path, shape in self.leaves:
            size = int(np.prod(shape, dtype=int))
            values[path] = flat[:, start:start + size].reshape((flat.shape[0],) + shape)
            start += size
        return _rebuild(self.template, values)


def _rebuild(tree, values, path=()):
    if isinstance(tree, dict):
        return {k: _rebuild(tree[k], values, path + (k,)) for k in tree}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_rebuild(e, values, path + (i,)) for i, e in enumerate(tree))
    return values[path]


# -- what the native backend runs ------------------------------------------------------------
def refusal(run):
    """None if the native backend can run ``run`` (a ``run.Run``), else why not."""
    policy, system = run.policy, run.system
    if not plan.native_enabled():
        return "native code is switched off or llvmlite is not installed"
    if system.assembly is not None:
        return ("an assembly simulates through its own forward dynamics, which has no native "
                "program")
    if policy.kind != "table" and any(np.ndim(v) > 1 for v in policy.params.values()):
        return f"the controller {policy.name} has gains with batch axes"
    key = (policy.key, run.model, system.key, run.batch,
           tuple((k, np.shape(v)) for k, v in sorted(policy.params.items())))
    if key not in _REFUSALS:
        if len(_REFUSALS) > 256:  # closures made afresh for every call would pile up
            _REFUSALS.clear()
        _REFUSALS[key] = _probe(run)
    return _REFUSALS[key]


def _probe(run):
    """Trace the controller and the external wrench function alone on one state: None if both
    trace, else why not (numpy-only code, Python control flow on values)."""
    model, policy = run.model, run.policy
    shapes = {"q": (model.nq,), "qd": (model.nv,), "time": (1,)}
    if policy.kind != "table":
        def controller(q, qd, time, params=None):
            p = _unflatten_gains(params, policy.params)
            return policy.torque(p, 0, time[0, 0], q.T, qd.T, trace.xp, ()).T
        what, fn = f"the controller {policy.name}", controller
        extra = _gain_size(policy.params)
        try:
            trace.trace(fn, dict(shapes, **({"params": (extra,)} if extra else {})))
        except BadOutput:  # a wrong shape for one state: wrong for the batch too?
            if run.batch and _fits_the_batch(run):
                return (f"{what} returns joint forces of the batch's shape for one state (gains "
                        "per rollout): the native program runs one rollout at a time")
            # else a wrong shape: the native run reports it at step 0, as the others do
        except Exception as e:  # noqa: BLE001
            return f"{what} cannot be traced ({type(e).__name__}: {_first_line(e)})"
    if run.system.external is not None:
        def external(q, qd, time):
            return run.system._external(trace.xp, time[0, 0], q.T, qd.T).reshape(-1, 1)
        try:
            trace.trace(external, shapes)
        except ExternalWrenchError:
            pass
        except Exception as e:  # noqa: BLE001
            return (f"the external wrench function cannot be traced ({type(e).__name__}: "
                    f"{_first_line(e)})")
    return None


def _fits_the_batch(run):
    """Whether the policy's joint forces have the right shape for the whole batch (numpy)."""
    policy = run.policy
    try:
        with np.errstate(all="ignore"):
            policy.torque(policy.params, 0, 0.0, run.q0, run.qd0, np, run.batch)
    except Exception:  # noqa: BLE001  (wrong for the batch too, or failing: reported later)
        return False
    return True


def _first_line(e):
    return (str(e).splitlines() or [""])[0][:200]


def _gain_size(params):
    return int(sum(np.size(v) for v in params.values()))


def _unflatten_gains(flat, params):
    """The controller's gains as traced arrays in the shapes of ``params``, from the flat
    traced input (p, 1)."""
    out, start = {}, 0
    for name in sorted(params):
        shape = np.shape(params[name])
        size = int(np.prod(shape, dtype=int))
        out[name] = flat[start:start + size, 0].reshape(shape)
        start += size
    return out


def _split_system(run):
    """(shared, local): the system's numbers but gravity, as the trees of the numbers every
    rollout shares and of those set per rollout (their leading axis the rollouts)."""
    system = run.system
    numbers = {k: v for k, v in run.params.items() if k != "gravity"}
    one = system.params(run.q0[:1])
    two = system.params(np.repeat(run.q0[:1], 2, axis=0))
    shared, local = {}, {}
    for path, a in _leaves(numbers):
        per_rollout = np.shape(_at(one, path)) != np.shape(_at(two, path))
        _put(local if per_rollout else shared, path, np.asarray(a, dtype=float))
    return shared, local


def _at(tree, path):
    for k in path:
        tree = tree[k]
    return tree


def _put(tree, path, value):
    for k in path[:-1]:
        tree = tree.setdefault(k, {})
    tree[path[-1]] = value


def _merge(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and k in out else v
    return out


class _Program:
    """The layouts of one run's step and the function the tracer runs."""

    def __init__(self, run):
        self.run = one = copy.copy(run)
        one.batch = ()  # the program sees one rollout
        system, policy = run.system, run.policy
        q, qd = run.q0[:1], run.qd0[:1]
        params = {"system": system.params(q)}  # of the first rollout: for the layouts
        hybrid = initial_hybrid(run, np, params["system"], q)
        self.state = Layout({"q": q, "qd": qd, "hybrid": hybrid, "energy": np.zeros((1, 2))})
        self.shared, self.local = _split_system(run)
        self.shared_layout = [(p, np.shape(a)) for p, a in _leaves(self.shared)]
        self.local_layout = Layout(self.local) if self.local else None
        self.table = policy.kind == "table"
        self.gains = 0 if self.table else _gain_size(policy.params)
        self.n_shared = self.gains + sum(int(np.prod(s, dtype=int))
                                         for _, s in self.shared_layout)
        step_fn = make_step(one, np, run.dt)
        gains = {"row": np.zeros(run.model.nv)} if policy.kind == "table" else policy.params
        with np.errstate(all="ignore"):
            _, sample, _ = step_fn(dict(params, policy=gains), 0, q, qd, hybrid,
                                   np.zeros((1, 2)))
        self.sample = Layout(sample)
        self.gravity = np.asarray(run.params["gravity"], dtype=float)

    def shared_numbers(self):
        """The flat shared input: the controller's gains, then the system's shared numbers."""
        parts = [] if self.table else [np.ravel(np.asarray(self.run.policy.params[k], float))
                                       for k in sorted(self.run.policy.params)]
        parts += [np.ravel(a) for _, a in _leaves(self.shared)]
        return np.concatenate(parts) if parts else None

    def local_numbers(self):
        return None if self.local_layout is None else np.ascontiguousarray(
            self.local_layout.flatten(np, self.local))

    def __call__(self, s, time, tau=None, params=None, local=None):
        """The output row [s1, sample, code] (ns + nr + 1, 1) of one step (traced)."""
        xp, one = trace.xp, self.run
        k, dt = time[0, 0], time[1, 0]
        system = {"gravity": self.gravity}
        start = 0
        if self.table:
            gains = {"row": tau[:, 0]}
        else:
            gains = _unflatten_gains(params[:self.gains], one.policy.params) \
                if self.gains else {}
            start = self.gains
        shared = {}
        for path, shape in self.shared_layout:
            size = int(np.prod(shape, dtype=int))
            _put(shared, path, params[start:start + size, 0].reshape(shape))
            start += size
        system = _merge(system, shared)
        if self.local_layout is not None:
            system = _merge(system, self.local_layout.unflatten(local.T))
        state = self.state.unflatten(s.T)
        step_fn = make_step(one, xp, dt)
        (q1, qd1, hybrid1, energy1), sample, tau_ok = step_fn(
            {"policy": gains, "system": system}, k, state["q"], state["qd"], state["hybrid"],
            state["energy"])
        code = bad_flags(xp, tau_ok, sample[2], q1, qd1, one.settings.divergence_limit)
        code = xp.reshape(code, (1, 1)) * 1.0
        s1 = self.state.flatten(xp, {"q": q1, "qd": qd1, "hybrid": hybrid1, "energy": energy1})
        return xp.concatenate([s1, self.sample.flatten(xp, sample), code], axis=-1).T

    def memory_key(self):
        run, s = self.run, self.run.settings
        return ("sim", run.system.key, run.policy.key, s.integrator, s.control,
                s.divergence_limit, s.record_contact_forces, tuple(self.gravity.tolist()),
                tuple(self.state.leaves), tuple(self.sample.leaves),
                tuple(self.shared_layout), self.gains,
                None if self.local_layout is None else tuple(self.local_layout.leaves))

    def disk_key(self):
        """A description valid in every process, or None (a plain Python controller or
        external wrench function has no content hash)."""
        policy = self.run.policy
        try:
            if self.table:
                controller = ("table",)
            else:
                controller = (policy.kind, f"{type(policy.fn).__module__}."
                                           f"{type(policy.fn).__qualname__}",
                              cache.content_hash(policy.key[2]))
            key = self.memory_key()
            return ("simulate", cache.content_hash(key[1]), controller,
                    cache.content_hash(key[3:]))
        except (TypeError, IndexError, AttributeError):
            return None


def run_native(run, progress):
    """The rollouts of ``run`` (a ``run.Run``) on the native backend: (samples (T, N, ...),
    failure or ``Interrupted`` or None, timing {"wall_time", "compile_time"} (s)), as the other
    backends return them; ``progress(done, total)`` (steps), or None, is called after every
    call. A call into machine code cannot be interrupted: ``pacing.Paced`` sizes each call in
    steps, to a fraction of a second and at most ``pacing.chunk_length(N, width)`` samples, so
    that Ctrl-C stops the run at once."""
    t0 = _time.perf_counter()
    N = len(run.q0)
    try:
        program = _Program(run)
        compiled = native_rollout.get(program.disk_key(), program.memory_key(),
                                      program.state.size, program.sample.size,
                                      run.model.nv if program.table else 0, program.n_shared,
                                      0 if program.local_layout is None
                                      else program.local_layout.size, program, vector=N > 1)
    except (BadOutput, ExternalWrenchError) as e:
        return empty_samples(run), (str(e), 0, ()), \
            {"wall_time": 0.0, "compile_time": _time.perf_counter() - t0}
    compile_time = _time.perf_counter() - t0
    n_steps, every, total = run.n_steps, run.record_every, run.n_records + 1
    table = None
    if program.table:
        rows = run.policy.table
        if rows.ndim > 2:
            rows = np.broadcast_to(rows, run.batch + rows.shape[-2:]).reshape(
                (N,) + rows.shape[-2:])
        need = total * every  # past the last row (the final sample) the last row holds
        table = np.ascontiguousarray(np.concatenate(
            [rows, np.repeat(rows[..., -1:, :], max(0, need - rows.shape[-2]), axis=-2)],
            axis=-2))
    shared, local = program.shared_numbers(), program.local_numbers()
    hybrid = initial_hybrid(run, np, run.params, run.q0)
    s = np.ascontiguousarray(program.state.flatten(
        np, {"q": run.q0, "qd": run.qd0, "hybrid": hybrid, "energy": np.zeros((N, 2))}))
    inputs = (table, shared, local)
    steps = Paced(chunk_length(N, program.sample.size) * every)
    outputs, bad_step, bad_code = [], np.full(N, -1, np.int64), np.zeros(N, np.int64)
    t1 = _time.perf_counter()
    k, done = 0, 0  # steps run, samples recorded
    stopped = None
    try:
        with np.errstate(all="ignore"), interrupts.held():
            while done < total:
                budget = steps.take(total * every - k)
                rec, m, step, code = _call(compiled, s, k, done, total, every, budget, run.dt,
                                           inputs)
                steps.took(m)
                new = (bad_step < 0) & (step >= 0)
                bad_step[new], bad_code[new] = step[new], code[new]
                k, done = k + m, done + len(rec)
                outputs.append(rec)  # after k: a Ctrl-C in between reports the samples kept
                if progress is not None:
                    progress(min(k, n_steps), n_steps)
                if done < total and np.any((bad_step >= 0) & (bad_step < n_steps)):
                    break  # a rollout failed: stop here, keep what came before
                interrupts.stop_if_noted()  # Ctrl-C: between two calls, the samples kept
    except KeyboardInterrupt:
        stopped = Interrupted(min(k, sum(len(r) for r in outputs) * every))
    flat = np.concatenate(outputs) if outputs else np.zeros((0, N, program.sample.size))
    samples = tuple(program.sample.unflatten(flat.reshape(-1, program.sample.size)))
    samples = tuple(a.reshape((len(flat), N) + a.shape[1:]) for a in samples)
    wall = _time.perf_counter() - t1
    timing = {"wall_time": wall, "compile_time": compile_time}
    if stopped is not None:
        return samples, stopped, timing
    return (*finish(run, samples, bad_step, bad_code), timing)


def _call(compiled, s, k, done, total, every, budget, dt, inputs):
    """One call of the compiled loop on the states ``s`` (in place), from step ``k`` with
    ``done`` of ``total`` samples recorded, running at most ``budget`` steps (of ``dt`` s):
    whole records of ``every`` steps when ``k`` starts one and the budget holds one, else part
    of a record (whose first step records its sample; the last sample needs no step after it).
    Returns (the samples recorded (n, N, nr), the steps run, each rollout's first failing step
    and code in this call). The steps are the same whatever the split: the same bits."""
    table, shared, local = inputs
    if k % every == 0 and budget >= every:
        n = min(budget // every, total - done)
        rec, step, code = compiled.run(s, k, n, every, dt, table, shared, local)
        return rec, n * every, step, code
    starts = k % every == 0
    m = 1 if starts and done == total - 1 else min(budget, every - k % every)
    rec, step, code = compiled.run(s, k, 1, m, dt, table, shared, local)
    return (rec if starts else rec[:0]), m, step, code
