"""The joint forces of a simulation: a controller, a torque profile or a torque table, as one
*policy* ``tau(params, k, t, q, qd)``, with the key that identifies its compiled code and the
arrays passed to that code (so new gains or a new table of the same shape reuse it)."""
import inspect

import numpy as np


class BadOutput(Exception):
    """A policy returned joint forces of the wrong shape (reported as a ``SimulationError``)."""


class ControllerFailed(Exception):
    """The user's controller raised (numpy backend); ``cause`` is its exception."""

    def __init__(self, cause):
        super().__init__(str(cause))
        self.cause = cause


class Policy:
    """tau(params, k, t, q, qd) for every kind of ``controller``: None (zero torque), a
    controller(t, q, qd), a profile(t) (a callable of one argument) or a table (steps, nv)."""

    def __init__(self, spec, model, n_steps):
        self.model = model
        self.table = None
        self.kind = "controller"
        #: the size of the controller's own state (``Controller.state_size``; 0: none)
        self.state_size = 0
        if spec is None:
            from ..controllers import ZeroTorque

            spec = ZeroTorque()
        if not callable(spec):
            table = np.asarray(spec)
            if table.dtype.kind not in "biuf":
                raise ValueError(f"a torque table must be real numbers, got dtype {table.dtype}")
            table = table.astype(float)
            if table.ndim < 2 or table.shape[-1] != model.nv:
                raise ValueError(f"a torque table must have shape (steps, {model.nv}) or "
                                 f"(..., steps, {model.nv}), got {table.shape}")
            if table.shape[-2] < n_steps:
                raise ValueError(f"the torque table has {table.shape[-2]} rows but the simulation "
                                 f"takes {n_steps} steps")
            if not np.all(np.isfinite(table)):
                raise ValueError("the torque table holds non-finite values")
            self.kind, self.table, self.name = "table", table, f"torque table {table.shape}"
            self.key, self.params = ("table",), {"table": table}
            return
        if _takes_one_argument(spec):
            self.kind, self.name = "profile", f"torque profile {_name(spec)}"
        else:
            self.name = getattr(spec, "name", None) or _name(spec)
        self.fn = spec
        if self.kind == "controller":
            self.state_size = int(getattr(spec, "state_size", 0))
            if self.state_size:
                start = np.shape(spec.initial_state())
                if start != (self.state_size,):
                    raise ValueError(f"the controller {self.name}'s initial_state() has shape "
                                     f"{start}; expected ({self.state_size},): its "
                                     "state_size")
        split = getattr(spec, "split_params", None)
        if split is not None:  # a screwdyn controller: arrays apart, the rest in the cache key
            static, self.params = split()
            self.key = (self.kind, type(spec), static)
        else:  # a plain function or callable object: its identity (kept alive by the key)
            from ..controllers import Identity

            self.key, self.params = (self.kind, Identity(spec)), {}

    def __call__(self, params, k, t, q, qd, xp, state=None):
        if self.kind == "table":
            if "row" in params:  # the row of step k, taken by the caller (the native loop)
                return params["row"]
            table = params["table"]
            if xp is np:  # past the last row (the final sample) the last row holds
                return table[..., min(k, table.shape[-2] - 1), :]
            return _take_row(table, k)
        fn = self.fn.with_params(params) if params else self.fn
        if self.kind == "profile":
            return fn(t)
        if not self.state_size:
            return fn(t, q, qd)
        if state is None:
            state = self.initial_state(xp, q.shape[:-1])
        return fn(t, q, qd, state)

    def torque(self, params, k, t, q, qd, xp, batch, state=None):
        """The joint forces as (N, nv) for q (N, nq), qd (N, nv) and the controller's state
        (N, state_size) (None: its initial state, ``__call__``), checked for shape
        (``BadOutput`` if wrong); the policy sees the batch shape ``batch``."""
        nv = self.model.nv
        N = int(np.prod(batch, dtype=int))
        if state is not None:
            state = state.reshape(batch + (self.state_size,))
        tau = self(params, k, t, q.reshape(batch + q.shape[-1:]), qd.reshape(batch + (nv,)), xp,
                   state)
        tau = xp.asarray(tau)
        try:
            if tau.ndim < 1 or tau.shape[-1] != nv:
                raise ValueError
            tau = xp.broadcast_to(tau, batch + (nv,))
        except ValueError:
            expected = f"({nv},)" + (f" or {batch + (nv,)}" if batch else "")
            raise BadOutput(f"the controller {self.name} returned joint forces of shape "
                            f"{tuple(tau.shape)}; expected {expected}") from None
        if xp.issubdtype(tau.dtype, xp.complexfloating):
            raise BadOutput(f"the controller {self.name} returned complex joint forces")
        if not xp.issubdtype(tau.dtype, xp.floating):
            tau = tau.astype(float)
        return tau.reshape(N, nv)

    def initial_state(self, xp, batch):
        """The controller's state at the start, batch + (state_size,) (batch: a shape)."""
        start = np.asarray(self.fn.initial_state(), dtype=float)
        return xp.asarray(np.broadcast_to(start, tuple(batch) + (self.state_size,)))

    def next_state(self, params, t, q, qd, state, dt, xp, batch):
        """The controller's state (N, state_size) after the step of dt (s) that starts at
        time t (s) from q (N, nq), qd (N, nv) and state (N, state_size)."""
        fn = self.fn.with_params(params) if params else self.fn
        nv, N = self.model.nv, int(np.prod(batch, dtype=int))
        new = fn.next_state(t, q.reshape(batch + q.shape[-1:]), qd.reshape(batch + (nv,)),
                            state.reshape(batch + (self.state_size,)), dt)
        return xp.reshape(xp.broadcast_to(new, batch + (self.state_size,)),
                          (N, self.state_size))

    def force(self, params, k, t, q, qd, xp, batch, control, state=None):
        """The joint forces over step k as a function force(t, q, qd): the policy itself
        (``control="continuous"``), or its value at the step's start, held (``"hold"``, and
        tables); a controller with a state sees ``state`` (N, state_size) throughout the
        step. An exception of the user's controller on numpy becomes ``ControllerFailed``."""
        def evaluate(t, q, qd):
            try:
                return self.torque(params, k, t, q, qd, xp, batch, state)
            except (BadOutput, ControllerFailed):
                raise
            except Exception as e:
                if xp is not np:
                    raise
                raise ControllerFailed(e) from e

        if control == "hold" or self.kind == "table":
            tau = evaluate(t, q, qd)
            return lambda t, q, qd: tau
        return evaluate


def _take_row(table, k):
    import jax

    return jax.lax.dynamic_index_in_dim(table, k, axis=table.ndim - 2, keepdims=False)


def _takes_one_argument(fn):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    return not varargs and len(required) == 1


def _name(fn):
    return getattr(fn, "__name__", None) or type(fn).__name__
