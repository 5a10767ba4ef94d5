"""MuJoCo's approximate inverse weights of the bodies (``body_invweight0``): what MuJoCo scales a
soft constraint's compliance by in place of the exact diagonal A_jj of J M^-1 J^T.

MuJoCo computes them once, at the model's reference configuration (``qpos0``): for each body,
A = J M^-1 J^T with J (6, nv) the Jacobian of its centre of mass (world axes), and keeps the
means of A's translational and rotational diagonals,

    tran = (A_00 + A_11 + A_22) / 3,   rot = (A_33 + A_44 + A_55) / 3,

0 for a body welded to the world; 1 / mass and 0 for a body that only slides and carries no
other (every joint from the world to it a slide, no child: MuJoCo's ``body_simple`` 2). A
contact's rows then have R = (1 - d) / d (tran_a + tran_b), its frictional rows the normal's
over ``impratio`` (``contact_solver.RigidContact(invweight0=True)``): a cube on its four
corners sinks as MuJoCo's does (the exact A_jj at a corner is four times a ball's).

An MJCF file's bodies take MuJoCo's own numbers (its compiled ``body_invweight0``, read by
``geometry.collision_geometry``): MuJoCo keeps a body welded to its parent without a joint as
a body of its own, with its own centre of mass, where screwdyn merges it into its parent's.
"""
import numpy as np

#: MuJoCo's mjMINVAL (the least mass it divides by)
MINVAL = 1e-15


def body_inverse_weights(model, q=None) -> np.ndarray:
    """(nbodies, 2): each body's (translational 1/kg, rotational 1/(kg m^2)) inverse weight,
    MuJoCo's ``body_invweight0`` (module docstring), at the configuration q (nq,) (default
    ``model.q0``: an MJCF file's qpos0, a scene's start)."""
    from ..dynamics import jacobian, mass_matrix, forward_kinematics

    q = np.asarray(model.q0 if q is None else q, dtype=float)
    M = np.asarray(mass_matrix(model, q))
    T = np.asarray(forward_kinematics(model, q))
    out = np.zeros((len(model.bodies), 2))
    for b, body in enumerate(model.bodies):
        if _slides_only(model, b):  # MuJoCo's simple body with no rotation
            out[b] = (1.0 / max(MINVAL, body.mass), 0.0)
            continue
        link = model.link_index(body.link)
        J = np.asarray(jacobian(model, q, link, frame="world"))
        r = T[link, :3, :3] @ np.asarray(body.com, dtype=float)  # the centre of mass, world
        J_com = np.concatenate([J[:3] - np.cross(r[:, None], J[3:], axis=0), J[3:]])
        A = J_com @ np.linalg.solve(M, J_com.T)
        out[b] = (np.trace(A[:3, :3]) / 3.0, np.trace(A[3:, 3:]) / 3.0)
    return out


def link_inverse_weights(model, q=None, given=()) -> np.ndarray:
    """(nlinks,): the translational inverse weight of each link's body
    (``body_inverse_weights``), 0 for a link welded to the world; ``given``: ((link name,
    weight), ...) that replace the computed ones (an MJCF file's own)."""
    bodies = body_inverse_weights(model, q)[:, 0]
    out = np.array([bodies[link.body] if link.body >= 0 else 0.0 for link in model.links])
    for name, weight in given:
        if name in model.link_names and model.links[model.link_index(name)].body >= 0:
            out[model.link_index(name)] = weight
    return out


def _slides_only(model, b):
    """Whether body b is a MuJoCo body that only slides (``body_simple`` 2): it carries no
    other, and the joints from the world to it are all slides, its own (the bodies between
    are massless links of one chain: a MuJoCo body's several joints)."""
    chain = model.ancestors[b]  # b first
    return (not model.children[b]
            and all(_slides(model.bodies[k].joint_model) for k in chain)
            and all(model.bodies[k].mass == 0.0 and len(model.children[k]) == 1
                    for k in chain[1:]))


def _slides(joint):
    """Whether the joint only translates (a slide, or several)."""
    return (not joint.configuration_dependent and joint.nv > 0
            and not np.any(np.asarray(joint.subspace())[:, 3:] != 0.0))


def dof_inverse_weights(model, q=None) -> np.ndarray:
    """(nv,): each degree of freedom's inverse weight (1/kg or 1/(kg m^2)), MuJoCo's
    ``dof_invweight0``: the diagonal of M^-1 at q (default ``model.q0``), averaged over a
    ball joint's three and over a free joint's translations and its rotations; 1 / mass for
    the slides of a body that only slides (MuJoCo's ``body_simple`` 2). What a joint
    limit's compliance scales (``limit_constraints.RigidLimits(invweight0=True)``)."""
    from ..dynamics import mass_matrix

    q = np.asarray(model.q0 if q is None else q, dtype=float)
    diagonal = np.diag(np.linalg.inv(np.asarray(mass_matrix(model, q))))
    out = diagonal.copy()
    for body, dofs in zip(model.bodies, model.v_slices):
        joint = body.joint_model
        groups = ([dofs] if joint.type_name == "spherical" else
                  [slice(dofs.start, dofs.start + 3), slice(dofs.start + 3, dofs.stop)]
                  if joint.floating else [])
        for group in groups:
            out[group] = diagonal[group].mean()
    for b, body in enumerate(model.bodies):
        if _slides_only(model, b):  # MuJoCo's simple body: 1 / mass (no armature)
            for k in model.ancestors[b]:
                out[model.v_slices[k]] = 1.0 / max(MINVAL, body.mass)
    return out
