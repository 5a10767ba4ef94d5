"""Which backend runs a simulation: native machine code, one compiled JAX loop, or numpy step
by step, from the ``backend`` setting and whether the controller and the external wrench
function can be traced."""
import warnings

from .loop_jax import x64


def choose_backend(backend, run):
    """The backend that runs ``run`` (a ``run.Run``) for the setting ``backend`` ("auto",
    "native", "jax", "numpy"): native when it can (``native.refusal``), else JAX when JAX is
    installed and the controller and external wrench function trace, else numpy (warning
    why). ``ValueError`` (``ImportError`` without JAX) when the backend asked for cannot run
    it."""
    policy, model, q0, qd0, batch, system = (run.policy, run.model, run.q0, run.qd0, run.batch,
                                             run.system)
    if backend == "numpy":
        return "numpy"
    if backend in ("auto", "native"):
        from .native import refusal

        why = refusal(run)
        if why is None:
            return "native"
        if backend == "native":
            raise ValueError(f"backend='native': {why}")
    try:
        import jax
    except ImportError:
        if backend == "jax":
            raise ImportError("backend='jax' needs JAX: pip install jax") from None
        return "numpy"
    key = (policy.key, model, batch, system.key)
    if policy.kind == "table" and system.external is None or _TRACEABLE.get(key):
        return "jax"
    with x64():
        q = jax.numpy.asarray(q0).reshape(batch + (model.nq,))
        qd = jax.numpy.asarray(qd0).reshape(batch + (model.nv,))
        for what, fn in (("controller " + policy.name,
                          lambda t, q, qd: policy(policy.params, 0, t, q, qd, jax.numpy)),
                         ("external wrench function", system.external)):
            if fn is None or (what.startswith("controller") and policy.kind == "table"):
                continue
            try:
                jax.eval_shape(fn, jax.numpy.zeros(()), q, qd)
            except Exception as e:  # not traceable: numpy-only code, Python control flow
                if backend == "jax":
                    raise ValueError(f"backend='jax': the {what} cannot be traced by JAX "
                                     f"({type(e).__name__}: {str(e).splitlines()[0][:200]}); "
                                     "write it with screwdyn.controllers.array_namespace(q) or use "
                                     "backend='numpy'") from e
                warnings.warn(f"the {what} cannot be traced by JAX ({type(e).__name__}); "
                              "simulating on the numpy backend, step by step (much slower). "
                              "Write it with screwdyn.controllers.array_namespace(q) (array-generic) to "
                              "compile it, or pass backend='numpy' to silence this.",
                              stacklevel=3)
                return "numpy"
    if len(_TRACEABLE) > 256:  # closures made afresh for every call would pile up
        _TRACEABLE.clear()
    _TRACEABLE[key] = True
    return "jax"


_TRACEABLE = {}
