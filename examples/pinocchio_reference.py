"""The Pinocchio twin of a screwdyn assembly, for the examples' and tests' comparisons.

``pinocchio_assembly`` rebuilds an assembly with ``pinocchio.appendModel``, one subsystem at a
time: a subsystem loaded from a URDF is parsed by Pinocchio from that file (so nothing of
screwdyn's loader enters), one built in code is converted joint by joint. ``PinocchioState``
maps screwdyn's q, v (continuous joints: one angle) to Pinocchio's (cos, sin) and back, joints
matched by name.
"""
import numpy as np


def pinocchio_assembly(pin, robot, urdfs):
    """``robot`` rebuilt with pinocchio.appendModel: each subsystem's model parsed by Pinocchio
    from its URDF (``urdfs[name]``: a path) or else converted from its screwdyn Model, names
    prefixed ``name/``. Universe inertias are kept: appendModel adds the inertia of the links a
    part welds to its base to the parent's body it is mounted on (the root's stays with the
    world)."""
    model = pin.Model()
    for s in robot.subsystems:
        part = pin.buildModelFromUrdf(urdfs[s.name]) if s.name in urdfs else pinocchio_model(
            pin, s.model)
        for i in range(1, part.njoints):
            part.names[i] = f"{s.name}/{part.names[i]}"
        for i, frame in enumerate(part.frames):
            frame.name = f"{s.name}/{frame.name}"
            part.frames[i] = frame
        frame = 0 if s.parent is None else model.getFrameId(f"{s.parent}/{s.link}", pin.BODY)
        model = pin.appendModel(model, part, frame, pin.SE3(s.placement))
    return model


def pinocchio_model(pin, model):
    """A screwdyn Model built in code, as a Pinocchio model, joint by joint (revolute,
    continuous, prismatic, helical, planar, spherical, free flyer), with its base inertia, its
    gravity and a frame per link: an independent reference. A planar joint of normal n is
    Pinocchio's xy-plane joint behind the rotation A that takes z to n; its child frame is
    Pinocchio's joint frame turned by A^T."""
    from screwdyn.model import joints as J

    out, ids, turn = pin.Model(), [], []
    out.gravity = pin.Motion(np.concatenate([model.gravity, np.zeros(3)]))
    mass, com, inertia = model.base_inertia
    out.inertias[0] = pin.Inertia(mass, np.array(com), np.reshape(inertia, (3, 3)))

    def in_body(i, placement):  # a placement given in body i's frame, in Pinocchio's frame
        return placement if i < 0 else turn[i] * placement

    for i, b in enumerate(model.tree.bodies):
        jm = b.joint_model
        X = in_body(b.parent, pin.SE3(np.reshape(b.rotation, (3, 3)), np.array(b.translation)))
        A = pin.SE3.Identity()
        if isinstance(jm, J.Planar):
            A = pin.SE3(jm.frame, np.zeros(3))
            joint = pin.JointModelPlanar()
        elif isinstance(jm, J.Helical):
            joint = pin.JointModelHelicalUnaligned(np.array(jm.axis), jm.pitch)
        elif isinstance(jm, J.Revolute):
            joint = pin.JointModelRevoluteUnaligned(np.array(jm.axis))
        elif isinstance(jm, J.Prismatic):
            joint = pin.JointModelPrismaticUnaligned(np.array(jm.axis))
        elif isinstance(jm, J.Spherical):
            joint = pin.JointModelSpherical()
        elif isinstance(jm, J.FreeFlyer):
            joint = pin.JointModelFreeFlyer()
        else:
            raise NotImplementedError(f"no Pinocchio joint for {type(jm).__name__}")
        turn.append(pin.SE3(A.rotation.T, np.zeros(3)))
        ids.append(out.addJoint(0 if b.parent < 0 else ids[b.parent], joint, X * A, b.joint))
        body_inertia = pin.Inertia(b.mass, np.array(b.com), np.reshape(b.inertia, (3, 3)))
        out.appendBodyToJoint(ids[-1], turn[i].act(body_inertia), pin.SE3.Identity())
    for link in model.links:
        placement = pin.SE3(np.reshape(link.rotation, (3, 3)), np.array(link.translation))
        out.addFrame(pin.Frame(link.name, 0 if link.body < 0 else ids[link.body],
                               in_body(link.body, placement), pin.FrameType.BODY))
    return out


class PinocchioState:
    """screwdyn's q and v (of a flat model, ``flat``) in Pinocchio's model ``reference``, joints
    matched by name (``name`` -> Pinocchio's joint name: ``rename``, default the same)."""

    def __init__(self, pin, reference, flat, rename=None):
        self.pin, self.reference = pin, reference
        rename = rename or (lambda name: name)
        self.joints = []
        self.order = np.zeros(flat.nv, dtype=int)
        for b, qs, vs in zip(flat.bodies, flat.q_slices, flat.v_slices):
            joint = reference.joints[reference.getJointId(rename(b.joint))]
            angle = joint.nq == 2 and b.nq == 1  # a continuous joint: cos, sin in Pinocchio
            self.joints.append((joint, qs, angle))
            self.order[vs] = np.arange(joint.idx_v, joint.idx_v + joint.nv)
        self.nq = flat.nq

    def q(self, q):
        """Pinocchio's configuration of screwdyn's q (nq,)."""
        out = self.pin.neutral(self.reference)
        for joint, qs, angle in self.joints:
            out[joint.idx_q:joint.idx_q + joint.nq] = [np.cos(q[qs][0]), np.sin(q[qs][0])] \
                if angle else q[qs]
        return out

    def q_back(self, qp):
        """screwdyn's configuration of Pinocchio's q."""
        out = np.zeros(self.nq)
        for joint, qs, angle in self.joints:
            out[qs] = np.arctan2(qp[joint.idx_q + 1], qp[joint.idx_q]) if angle \
                else qp[joint.idx_q:joint.idx_q + joint.nq]
        return out

    def v(self, v):
        """Pinocchio's velocity-sized vector of screwdyn's (nv,)."""
        out = np.zeros(self.reference.nv)
        out[self.order] = v
        return out
