"""Constrained forward dynamics (closed loops, couplings) beside Pinocchio, in one process.

    python benchmarks/constrained.py            # about a minute on 2 cores
    python benchmarks/constrained.py --quick    # fewer rounds

Three models, each the same tree in both libraries (Pinocchio's built joint by joint from
screwdyn's, ``examples/pinocchio_reference.py``):

- ``four_bar``: a planar crank-rocker (3 revolute joints) closed by one ``Connect`` (3 rows,
  rank 2: Pinocchio needs its proximal regularisation, mu = 1e-12, for the redundant row);
- ``delta``: a delta robot (3 upper arms on revolute joints, 3 rods on ball joints, the platform
  hanging from rod 1 on a ball joint; 15 DoF) closed by two ``Connect`` (6 rows);
- ``panda_fingers``: the Panda (9 joints) with its fingers coupled by a ``Coupling``
  (1 row). Pinocchio has no joint coupling among its constraint models: it runs
  ``pinocchio.forwardDynamics(model, data, q, v, tau, J, drift)`` (the KKT system with a given
  constraint Jacobian and drift: J is constant for a linear coupling, and the drift
  k e + b J qd, screwdyn's stabilisation, is two small numpy products in the timed call).

Timed: ``sd.constrained_forward_dynamics(model, q, qd, tau)`` (native code, 1-D numpy arrays;
and ``sd.compile(model, ...)``, model-bound) against ``pinocchio.constraintDynamics`` (Connects,
``CONTACT_3D`` in the LOCAL frame, Baumgarte gains Kp = k, Kd = b as screwdyn's), one state per
call; then a batch of 1,000 states (one screwdyn call on (1000, n) arrays against a Pinocchio
loop). Also: screwdyn's unconstrained ``forward_dynamics`` and Pinocchio's ``aba`` on the same
tree, for the cost of the constraints. Times are CPU time per state (median of interleaved
rounds, ``latency.interleaved``); in brackets our time over Pinocchio's (lower is better). Each
pair's accelerations are compared first (max relative difference printed).
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
sys.path.insert(0, HERE)

import screwdyn as sd  # noqa: E402
from latency import interleaved  # noqa: E402
from screwdyn.constraints import Connect, Coupling  # noqa: E402

AXIS = (0.0, -1.0, 0.0)


# -- models -------------------------------------------------------------------------------------
def four_bar(a=0.3, c=0.8, r=0.6, d=0.7):
    """Crank, coupler and rocker in the x-z plane, the coupler's end on the rocker's end."""
    b = sd.ModelBuilder("four_bar")
    b.add_link("ground")
    for name, length, mass in (("crank", a, 1.3), ("coupler", c, 0.8), ("rocker", r, 1.1)):
        b.add_link(name, mass=mass, com=(length / 2, 0, 0),
                   inertia=np.diag([1e-3, mass * length ** 2 / 12, mass * length ** 2 / 12]))
    b.add_joint("crank", "revolute", "ground", "crank", axis=AXIS)
    b.add_joint("coupler", "revolute", "crank", "coupler", xyz=(a, 0, 0), axis=AXIS)
    b.add_joint("rocker", "revolute", "ground", "rocker", xyz=(d, 0, 0), axis=AXIS)
    model = b.build().with_constraints(Connect("coupler", "rocker", (c, 0, 0), (r, 0, 0)))
    q = sd.constraints.project(model, np.array([0.8, 0.3, 1.6]), fixed=("crank",))
    return model, q


def delta(base=0.2, upper=0.3, rod=0.7, platform=0.06):
    """The delta robot of tests/test_constraints.py, in a closed pose found by ``project``."""
    b = sd.ModelBuilder("delta")
    b.add_link("base")
    b.add_link("platform", mass=0.4, com=(-platform, 0, 0), inertia=np.diag([4e-4, 4e-4, 7e-4]))
    b.add_joint("platform_ball", "spherical", "rod1", "platform", xyz=(0, 0, -rod))
    for k, phi in enumerate(np.arange(3) * 2 * np.pi / 3, 1):
        b.add_link(f"upper{k}", mass=0.5, com=(upper / 2, 0, 0),
                   inertia=np.diag([1e-4, 4e-3, 4e-3]))
        b.add_link(f"rod{k}", mass=0.2, com=(0, 0, -rod / 2), inertia=np.diag([8e-3, 8e-3, 2e-4]))
        b.add_joint(f"shoulder{k}", "revolute", "base", f"upper{k}",
                    xyz=(base * np.cos(phi), base * np.sin(phi), 0), rpy=(0, 0, phi),
                    axis=(0, 1, 0))
        b.add_joint(f"elbow{k}", "spherical", f"upper{k}", f"rod{k}", xyz=(upper, 0, 0))
    rim = [(platform * (np.cos(p) - 1), platform * np.sin(p), 0) for p in (2.094395102393195,
                                                                          4.18879020478639)]
    model = b.build().with_constraints(Connect("rod2", "platform", (0, 0, -rod), rim[0]),
                                       Connect("rod3", "platform", (0, 0, -rod), rim[1]))
    # a closed pose: the arms 0.5 rad down, the rods tilted in towards the platform
    guess = model.q_from_dict({f"shoulder{k}": 0.5 for k in (1, 2, 3)})
    tilt = np.arctan2(base + upper * np.cos(0.5) - platform, rod)
    for k in (1, 2, 3):  # each rod turned about its upper arm's y axis (inwards)
        guess[model.q_slices[model.joint_names.index(f"elbow{k}")]] = [
            0, np.sin((-0.5 - tilt) / 2), 0, np.cos((-0.5 - tilt) / 2)]
    guess[model.q_slices[model.joint_names.index("platform_ball")]] = [
        0, np.sin((0.5 + tilt) / 2), 0, np.cos((0.5 + tilt) / 2)]
    q = sd.constraints.project(model, guess, fixed=("shoulder1", "shoulder2", "shoulder3"))
    return model, q


def panda_fingers():
    model = sd.load_urdf(sd.robots.path("panda"), joint_order="name").with_constraints(
        Coupling("panda_finger_joint2", "panda_finger_joint1", name="fingers"))
    return model, model.neutral.copy()


# -- Pinocchio ----------------------------------------------------------------------------------
def pinocchio_twin(pin, model):
    """(model, one-state call(q, v, tau) -> qdd) of Pinocchio for a screwdyn model with
    Connects (constraintDynamics) or couplings of joints (forwardDynamics with J)."""
    from pinocchio_reference import pinocchio_model

    pm = pinocchio_model(pin, model)
    data = pm.createData()
    if all(isinstance(c, Coupling) for c in model.constraints):
        # linear couplings y = x + a0: J constant, dJ/dt qd = 0, e = J q - a0; the drift
        # J qdd = -(k e + b J qd) is screwdyn's stabilisation
        J = np.asarray(sd.constraint_jacobian(model, model.neutral))
        e0 = np.asarray(sd.constraint_residual(model, model.neutral)) - J @ model.neutral
        k, b = np.array([c.gains for c in model.constraints]).T
        return pm, lambda q, v, tau: pin.forwardDynamics(pm, data, q, v, tau, J,
                                                         k * (J @ q + e0) + b * (J @ v))
    models, datas = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for c in model.constraints:
        sites = []
        for link, point in ((c.link_a, c.point_a), (c.link_b, c.point_b)):
            frame = pm.frames[pm.getFrameId(link)]
            sites += [frame.parentJoint, frame.placement * pin.SE3(np.eye(3), np.array(point))]
        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, *sites,
                                      pin.ReferenceFrame.LOCAL)
        cm.m_baumgarte_parameters.Kp, cm.m_baumgarte_parameters.Kd = c.gains
        models.append(cm)
        datas.append(cm.createData())
    pin.initConstraintDynamics(pm, data, models, datas)
    settings = pin.ProximalSettings(1e-12, 1e-12, 20)
    return pm, lambda q, v, tau: pin.constraintDynamics(pm, data, q, v, tau, models, datas,
                                                        settings)


def pin_q(model, q):
    """Pinocchio's q: the same layout (quaternions x, y, z, w; no continuous joints here)."""
    return q


# -- the run ------------------------------------------------------------------------------------
def measure(name, model, q, pin, rounds, batch):
    rng = np.random.default_rng(0)
    J = np.asarray(sd.constraint_jacobian(model, q))
    _, s, Vt = np.linalg.svd(J)
    null = Vt[int(np.sum(s > 1e-10 * s[0])):]
    qd = rng.normal(size=len(null)) @ null  # on the loop: e = 0, e' = 0
    tau = rng.normal(size=model.nv)
    out = {"nq": model.nq, "nv": model.nv, "rows": model.nconstraints,
           "rank": sd.constraints.rank(model, q)}
    cfd = sd.compile(model, "constrained_forward_dynamics")
    fd = sd.compile(model, "forward_dynamics")
    ours = np.asarray(sd.constrained_forward_dynamics(model, q, qd, tau))
    candidates = {"screwdyn public": lambda: sd.constrained_forward_dynamics(model, q, qd, tau),
                  "screwdyn compiled": lambda: cfd(q, qd, tau),
                  "screwdyn FD (no constraints)": lambda: fd(q, qd, tau)}
    if not isinstance(pin, str):
        pm, call = pinocchio_twin(pin, model)
        data = pm.createData()
        theirs = np.asarray(call(pin_q(model, q), qd, tau))
        out["max relative difference"] = float(np.max(np.abs(ours - theirs))
                                               / max(1.0, np.max(np.abs(theirs))))
        candidates["pinocchio"] = lambda: call(q, qd, tau)
        candidates["pinocchio aba (no constraints)"] = lambda: pin.aba(pm, data, q, qd, tau)
    single = {k: v * 1e6 for k, v in interleaved(candidates, rounds).items()}
    # a batch: states near q (not on the loop: the stabilisation acts, as in a simulation)
    Q = np.asarray(sd.integrate(model, np.broadcast_to(q, (batch, model.nq)),
                                rng.normal(size=(batch, model.nv)) * 0.01))
    QD, TAU = qd + rng.normal(size=(batch, model.nv)) * 0.1, rng.normal(size=(batch, model.nv))
    candidates = {"screwdyn public": lambda: sd.constrained_forward_dynamics(model, Q, QD, TAU)}
    if not isinstance(pin, str):
        candidates["pinocchio loop"] = lambda: [call(Q[i], QD[i], TAU[i]) for i in range(batch)]
        ours = np.asarray(sd.constrained_forward_dynamics(model, Q, QD, TAU))
        theirs = np.array([call(Q[i], QD[i], TAU[i]) for i in range(batch)])
        out["batch max relative difference"] = float(
            np.max(np.abs(ours - theirs) / np.maximum(1.0, np.abs(theirs).max(axis=1))[:, None]))
    batched = {k: v * 1e6 / batch for k, v in interleaved(candidates, max(3, rounds // 3),
                                                          target=0.2).items()}
    out["single state us"], out[f"batch of {batch} us per state"] = single, batched
    return out


def print_result(name, result):
    print(f"\n{name}: nq {result['nq']}, nv {result['nv']}, {result['rows']} rows "
          f"(rank {result['rank']})"
          + (f", qdd vs Pinocchio {result['max relative difference']:.1e} relative"
             if "max relative difference" in result else "")
          + (f" (batch {result['batch max relative difference']:.1e})"
             if "batch max relative difference" in result else ""))
    for title, key in (("one state", "single state us"),
                       ("batch", [k for k in result if k.startswith("batch of")][0])):
        table = result[key]
        reference = table.get("pinocchio", table.get("pinocchio loop"))
        print(f"  {title} ({key}):")
        for k, v in table.items():
            ratio = f"  [{v / reference:.2f}x]" if reference and "pinocchio" not in k else ""
            print(f"    {k:32s} {v:9.2f}{ratio}")
        if "pinocchio aba (no constraints)" in table:
            print(f"    (constraints cost: screwdyn {table['screwdyn compiled'] / table['screwdyn FD (no constraints)']:.2f}x "  # noqa: E501
                  f"its FD, Pinocchio {table['pinocchio'] / table['pinocchio aba (no constraints)']:.2f}x its ABA)")  # noqa: E501


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()
    try:
        import pinocchio as pin
    except ImportError as error:
        pin = f"missing ({error})"
    results = {"load_average_start": os.getloadavg(), "cpus": os.cpu_count(),
               "versions": {"screwdyn": sd.__version__, "numpy": np.__version__,
                            "pinocchio": getattr(pin, "__version__", pin)}}
    print(f"load average {results['load_average_start']}, {os.cpu_count()} CPUs; "
          "microseconds of CPU time per state [our time / Pinocchio's]")
    for name, build in (("four_bar", four_bar), ("delta", delta),
                        ("panda_fingers", panda_fingers)):
        model, q = build()
        results[name] = measure(name, model, q, pin, 5 if args.quick else 15, args.batch)
        print_result(name, results[name])
    results["load_average_end"] = os.getloadavg()
    print(f"\nload average at the end {results['load_average_end']}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "constrained.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
