"""``ContactModel``: what a contact model provides to the simulation, declared once.

The simulation reaches contact only through these members: ``System`` (the step) calls ``key``,
``params``, ``initial_state``, ``project`` and ``forces``; the checks before a run call
``labels`` (how many points: the size of the samples) and ``springs`` (the stability analysis);
the energy account calls ``points_at`` (the robot's extent); the trajectory's meta calls
``describe``, and the check before step 0 ``deepest``. ``contact.Contact`` (a ground plane:
Hunt-Crossley normal force, stick-slip Coulomb friction) implements it; a new model implements
the same members and is simulated unchanged on every backend.

A contact model whose forces depend on the dynamics (a constraint solver:
``contact_solver.SolvedContact``) sets ``solves = True`` and provides
``solve(xp, p, q, qd, qdd0, M, T, state) -> (qdd, tau_c, forces, state)`` (the accelerations
under its forces from the unconstrained ones qdd0 (N, nv) and the mass matrix M (N, nv, nv),
the joint forces of its forces J^T f (N, nv) for the energy balance, the forces on its points
(N, P, 3), and its state for the next step: the state of the step's last evaluation is kept);
the step calls it instead of ``forces``.

A contact model is made for one model by its settings object's ``resolve(model, dt)``, dt the
simulation's step (s) or None (today ``Settings.contact`` accepts a ``GroundContact``; a new
kind is added to that check).

Conventions (batch first, as the rollout runs): N rollouts, P contact points, ``xp`` the array
namespace (numpy, ``jax.numpy``, or the native tracer's: the same code traced for machine code,
so only array operations, no Python branches on values), T (N, nlinks, 4, 4) the link poses in
the world (m), V (N, nlinks, 6) the link twists [v; w] in link axes (m/s, rad/s).
"""
from typing import Hashable, Protocol, Sequence


class ContactModel(Protocol):
    """A contact model bound to a robot model (see the module docstring)."""

    #: what identifies the compiled code of this contact (its structure: which links, how many
    #: points, ...; never its numbers, which are ``params``): part of every compiled cache key
    key: Hashable

    #: one name per contact point (P of them), in the order of the points' forces
    labels: Sequence[str]

    def params(self, xp=None) -> dict:
        """The numbers of the contact law (default: numpy arrays; ``xp``: arrays of ``xp``): a
        dict (nested dicts allowed) of float arrays without a rollout axis, the same structure
        at every call. The compiled loops take them as arguments (JAX: a jit argument; native:
        the input every rollout shares), so new numbers reuse the compiled program, and they
        may be JAX tracers (to differentiate a rollout with respect to them)."""

    def initial_state(self, xp, p, T) -> dict:
        """The contact's state at the initial poses T: a dict of arrays (N, ...) the rollout
        carries from step to step (stick-slip anchors; {} for a stateless law). Its structure
        (keys, shapes but the leading N) must not change from step to step."""

    def project(self, xp, p, T, state) -> tuple:
        """(state, elastic): at the start of a step, at poses T, the state brought to what the
        contact can hold, and the elastic energy (N,) (J) it stores (in ``traj.elastic``; the
        rest of the work of the contact forces counts as dissipated)."""

    def forces(self, xp, p, T, V, state) -> tuple:
        """(f_ext (N, nlinks, 6), forces (N, P, 3)): the contact wrenches on the links,
        [force; torque] in link axes about the link origins (N, N m), as forward dynamics takes
        them, and the force on each contact point in the world frame (N), at poses T, twists V
        and the state of the step (fixed during the step: ``project`` updates it between
        steps). Their power enters the energy balance as passive work."""

    def points_at(self, xp, p, T):
        """The contact points (N, P, 3) in the world (m) at poses T."""

    def deepest(self, model, p, T) -> tuple:
        """(depth (m), label, overlap): the deepest penetration of any contact point into what
        it touches at the link poses T (N, nlinks, 4, 4) (numpy; negative: none touches), and
        that point's label; ``overlap`` None for a point in the ground, else a phrase naming
        the two shapes that the depth completes ("a point of 'a' is inside 'b'", "'a' and 'b'
        overlap" where the depth is how far they must move apart, or, where the depth is
        instead a shape's centre inside another, "the centre of 'a' is inside 'b'"): what
        ``simulate`` checks before step 0."""

    def springs(self, model, p, q, M) -> list:
        """The contact's stiffest linear behaviour at one configuration q (nq,) with mass
        matrix M (nv, nv): a list of (what (a phrase naming it: "the contact at 'foot'"),
        stiffness (N/m), damping (N s/m), effective mass (kg)), each a damped oscillator whose
        largest stable step ``simulate`` checks dt against. [] if it has none (a constraint
        solver stable at any step)."""

    def describe(self, p) -> dict:
        """What ``traj.meta["contact"]`` records of this contact (JSON-able numbers, lists and
        strings), from its numbers ``p``."""
