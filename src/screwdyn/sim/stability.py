"""The stability analysis of a run before it starts: every spring of the system (a contact point,
a joint limit, a stick-slip joint; a joint's viscous damper, where the integrator takes it
explicitly) seen as a damped oscillator with its effective mass at the first initial state, and
a warning when dt exceeds the largest step the integrator keeps stable on the stiffest
(``integrators.largest_stable_step``)."""
import warnings

import numpy as np

from .integrators import largest_stable_step


def warn_if_unstable(run):
    """Warn (``UserWarning``, naming the spring and the largest stable step) when ``run.dt``
    exceeds the largest step the integrator keeps stable on the stiffest spring. Called by
    ``simulate`` itself: the warning points at its caller."""
    stiffest = stiffest_springs(run)
    if not stiffest:
        return
    integrator = run.settings.integrator
    limits = [(largest_stable_step(integrator, k, b, m), what, k, b, m)
              for what, k, b, m in stiffest]
    dt_max, what, k, b, m = min(limits)
    if run.dt <= dt_max:
        return
    if k == 0:  # a joint's damper
        warnings.warn(f"dt = {run.dt:g} s is too large for {what} (b = {b:.3g}, inertia "
                      f"{m:.3g}): the largest stable step of {integrator} there is about "
                      f"{dt_max:.3g} s. Use integrator='semi_implicit_euler', which integrates "
                      f"joint damping implicitly (stable at every dt, as MuJoCo's Euler), or "
                      f"dt <= {dt_max:.2g} s.", stacklevel=3)
        return
    warnings.warn(f"dt = {run.dt:g} s is too large for the stiffness of {what} (k = {k:.3g}, "
                  f"effective mass {m:.3g}): the largest stable step of {integrator} there "
                  f"is about {dt_max:.3g} s. Use dt <= {dt_max:.2g} s, or softer contact "
                  "(GroundContact(stiffness=...) / JointLimits(frequency=...)), or a longer "
                  "timeconst for a constraint.",
                  stacklevel=3)


def stiffest_springs(run):
    """(what, stiffness (N/m or N m/rad), damping (N s/m or N m s/rad), effective mass (kg or
    kg m^2)) of the springs at the first initial state: the joint limits and stick-slip joints
    (their joint's inertia), the joints' dampers (stiffness 0; none where the integrator
    takes them implicitly: ``System.implicit_damping``), then the contact model's
    (``ContactModel.springs``)."""
    from ..dynamics import mass_matrix

    system, model, q = run.system, run.model, run.q0[0]
    out = []
    M = np.asarray(mass_matrix(model, q))
    if system.solves_limits:
        out.extend(system.limits.springs(model))
    if system.solves_friction:
        out.extend(system.friction_rows.springs(model))
    for name, spring, dofs in (("joint limit", None if system.solves_limits else system.limits,
                                "v_index"),
                               ("stick-slip joint friction", system.friction, "index")):
        if spring is not None:
            p = run.params["limits" if name == "joint limit" else "friction"]
            for j, dof in enumerate(getattr(spring, dofs)):
                out.append((f"the {name} of {_dof_name(model, dof)!r}", p["k"][0, j],
                            p["b"][0, j], M[dof, dof]))
    if system.implicit_damping is None and system.assembly is None:
        for dof in np.flatnonzero(model.damping):
            out.append((f"the damping of {_dof_name(model, dof)!r}", 0.0, model.damping[dof],
                        M[dof, dof]))
    if system.contact is not None:
        out.extend(system.contact.springs(model, run.params["contact"], q, M))
    for c in system.constrained_model.constraints:  # the stabilisation at the run's step:
        # e'' = -k e - b e', per unit mass
        k, b = c.gains
        out.append((f"the stabilisation of constraint {c.describe()} (timeconst "
                    f"{c.timeconst:g} s)", k, b, 1.0))
    return out


def _dof_name(model, dof):
    from .trajectory import coordinate_names

    return coordinate_names(model)[1][dof]
