"""One step of a simulation, the same for every backend: the numpy loop runs it, the JAX loop
and ``rollout`` trace it with ``jax.numpy``, the native backend traces it into machine code."""
from .integrators import STEPPERS, Manifold


def make_step(run, xp, dt):
    """step(params, k, q, qd, hybrid, energy) -> ((q1, qd1, hybrid1, energy1), sample,
    finite): one integrator step of ``dt`` (s) from t_k = k dt, for the rollouts of ``run``
    (a ``run.Run``) in the array namespace ``xp``.

    params: {"policy": the controller's gains, "system": the system's numbers}
    (``run.all_params``); q (N, nq), qd (N, nv); hybrid: the springs' state (a dict of arrays
    (N, ...), ``System.initial_hybrid``); energy (N, 2): the work so far [input, passive] (J).
    The hybrid state's ``"controller"`` entry (N, state_size), where the controller has a
    state (``initial_hybrid``), is the state it sees during the step, advanced after it.
    ``sample`` is what the rollout records at t_k: (q, qd, qdd, tau, [elastic, work_in,
    work_passive] (N, 3)) (+ contact forces (N, points, 3) with ``record_contact_forces``);
    ``finite`` (N,): whether every stage's joint forces were finite."""
    system, policy, batch = run.system, run.policy, run.batch
    stepper = STEPPERS[run.settings.integrator]
    control = run.settings.control
    manifold = Manifold(xp, run.model, dt)
    record_forces = run.settings.record_contact_forces and system.contact is not None

    def step(params, k, q, qd, hybrid, energy):
        t = k * dt
        hybrid, elastic = system.project(xp, params["system"], q, hybrid)
        state = hybrid.get("controller")
        force = policy.force(params["policy"], k, t, q, qd, xp, batch, control, state)

        # the solvers' states at the step's last evaluation (the next step's warm starts),
        # carried through the integrator's loop over stages (``Manifold.stages``)
        last = system.solved(hybrid)
        manifold.side = last

        def rates(t_i, q_i, qd_i, xi):
            tau = force(t_i, q_i, qd_i)
            qdd, power, _, solved = system.rates(xp, params["system"], t_i, q_i, qd_i, xi, tau,
                                                 hybrid)
            last.update(solved)
            return qdd, power, tau

        s = stepper(manifold, t, q, qd, rates)
        channels = xp.concatenate([elastic[..., None], energy], axis=-1)
        sample = (q, qd, s.qdd, s.tau, channels)
        if record_forces:
            sample = sample + (system.rates(xp, params["system"], t, q, qd, 0 * qd, s.tau,
                                            hybrid)[2],)
        hybrid1 = system.advance(xp, hybrid, s.xi, last)
        if state is not None:  # once a step, from its start (MuJoCo's Euler on d.act)
            hybrid1 = dict(hybrid1, controller=policy.next_state(
                params["policy"], t, q, qd, state, dt, xp, batch))
        return (s.q, s.qd, hybrid1, energy + s.energy), sample, s.finite

    return step


def initial_hybrid(run, xp, system_params, q0):
    """The hybrid state at the start of ``run``'s rollouts from q0 (N, nq): the system's
    (``System.initial_hybrid``), and the controller's own state under ``"controller"`` (N,
    state_size) where it has one (``Controller.state_size``)."""
    hybrid = run.system.initial_hybrid(xp, system_params, q0)
    if run.policy.state_size:
        hybrid["controller"] = run.policy.initial_state(xp, q0.shape[:1])
    return hybrid
