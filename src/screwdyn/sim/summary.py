"""The one-screen summary of a trajectory (``traj.summary()``, and the ``screwdyn simulate``
command's report)."""
import math

import numpy as np

from .trajectory import coordinate_names


def summary_lines(traj):
    """Lines: model, run, controller, contact, joint limits, wall time and real-time factor,
    the energy balance, the peak joint force and velocity, the final configuration."""
    meta = traj.meta
    lines = []
    batch = f", {int(np.prod(traj.batch_shape))} rollouts" if traj.batch_shape else ""
    end = traj.t[-1] if len(traj.t) else 0.0
    lines.append(f"model        {meta.get('model', '?')}: nq = {traj.q.shape[-1]}, "
                 f"nv = {traj.qd.shape[-1]}{batch}")
    lines.append(f"run          {end:.6g} s, {traj.n_samples} samples, dt = {meta.get('dt')} s, "
                 f"{meta.get('integrator')}, {meta.get('algebra')} algebra, "
                 f"{meta.get('backend')} backend")
    lines.append(f"controller   {meta.get('controller')}")
    contact = meta.get("contact")
    if contact and contact.get("kind") == "rigid":
        what = (f"{len(contact['pairs'])} pairs of shapes (sd.Scene)" if "pairs" in contact
                else "ground plane")
        mu, own = f"{contact['mu']:g}", ""
        if contact.get("friction"):  # a scene's pairs, each with its own
            low, high = min(contact["friction"]), max(contact["friction"])
            mu = f"{low:g}" if low == high else f"{low:g} to {high:g} (each pair's own)"
        mine = [f"{contact[key]} pairs with their own {field}"
                for key, field in (("own_stabilisation", "solref"), ("own_impedance", "solimp"))
                if contact.get(key)]
        if mine:
            own = f" ({', '.join(mine)})"
        stiffness = _stiffness(contact)
        ratio = contact.get("impratio")
        if ratio is not None and stiffness.startswith("soft"):  # its friction soft too, or not
            friction = "rigid" if math.isinf(ratio) else f"impratio {ratio:g}"
            stiffness = f"{stiffness[:-1]}; friction {friction}{_weights(contact)})"
        cone = contact.get("cone")  # elliptic, the default, unsaid
        if cone == "pyramidal":  # MuJoCo's default
            what = f"{what}, pyramidal friction cones"
        elif cone == "convex":  # MuJoCo's elliptic
            what = f"{what}, convex elliptic friction cones (MuJoCo's)"
        lines.append(f"contact      {what}, {stiffness}, {contact['points']} contact "
                     f"points, mu = {mu}, timeconst {contact['timeconst']:g} s, "
                     f"dampratio {contact['dampratio']:.3g}{own}")
    elif contact:
        lines.append(f"contact      ground plane, {contact['points']} contact points, mu = "
                     f"{contact['mu']:g}, k = {contact['stiffness']:.3g} N/m, dissipation "
                     f"{contact['dissipation']:g} s/m")
    limits = meta.get("joint_limits")
    if limits and limits.get("kind") == "rigid":
        own = (f" ({limits['own']} joints with their own solreflimit and solimplimit)"
               if limits.get("own") else "")
        lines.append(f"joint limits {limits['rows']} limits, {_softness(limits)}, timeconst "
                     f"{limits['timeconst']:g} s, dampratio {limits['dampratio']:.3g}{own}")
    elif limits:
        lines.append(f"joint limits springs, {limits['frequency']:g} Hz, damping ratio "
                     f"{limits['damping_ratio']:.3g}")
    friction = meta.get("joint_friction")
    if isinstance(friction, dict):  # RigidFriction's rows
        own = (f" ({friction['own']} joints or tendons with their own solreffriction and "
               "solimpfriction)" if friction.get("own") else "")
        lines.append(f"dry friction {friction['rows']} rows, {_softness(friction)}, timeconst "
                     f"{friction['timeconst']:g} s{own}")
    elif friction:
        lines.append(f"dry friction {friction.replace('_', '-')}")
    wall, comp = meta.get("wall_time", 0.0), meta.get("compile_time", 0.0)
    rtf = traj.real_time_factor
    rtf_text = f"{rtf:.3g}" if math.isfinite(rtf) else "n/a"
    compile_text = f" (+ {comp:.2f} s compilation, once per model and settings)" if comp else ""
    lines.append(f"wall time    {wall:.3g} s{compile_text}; real-time factor {rtf_text}")
    if traj.n_samples == 0:
        return lines
    drift = np.max(traj.energy_drift())
    scale = np.max(traj.energy_scale())
    first = (0,) * len(traj.batch_shape)
    work, lost = traj.work()[first][-1], traj.dissipated()[first][-1]
    lines.append(f"energy       E(0) = {traj.energy[first][0]:.6g} J; work in {work:.4g} J, "
                 f"dissipated {lost:.4g} J; unaccounted (drift) max {drift:.2e} of the "
                 f"{scale:.4g} J the motion exchanges")
    if traj.model is not None:
        _, names = coordinate_names(traj.model)
    else:
        names = meta.get("v_names") or [f"v{i}" for i in range(traj.qd.shape[-1])]
    for label, data, unit in (("max |tau|", traj.tau, "N m or N"),
                              ("max |qd|", traj.qd, "rad/s or m/s")):
        flat = np.abs(data).reshape(-1, data.shape[-2], data.shape[-1])
        r, k, j = np.unravel_index(int(np.argmax(flat)), flat.shape)
        lines.append(f"{label:<12} {flat[r, k, j]:.4g} {unit} ({names[j]} at t = "
                     f"{traj.t[k]:.4g} s)")
    final = traj.q.reshape(-1, traj.n_samples, traj.q.shape[-1])[0, -1]
    with np.printoptions(precision=4, suppress=True, linewidth=100):
        lines.append(f"final q      {final}")
    return lines


def _softness(solved):
    """``_stiffness`` of solved limits' or friction's ``describe()``, with ``_weights`` where
    soft."""
    stiffness = _stiffness(solved)
    if stiffness.startswith("soft") and solved.get("invweight0"):
        stiffness = f"{stiffness[:-1]}{_weights(solved)})"
    return stiffness


def _weights(solved):
    """'; MuJoCo's invweight0' where a solved contact's or limits' compliance scales MuJoCo's
    approximate inverse weights, else ''."""
    return "; MuJoCo's invweight0" if solved.get("invweight0") else ""


def _stiffness(solved):
    """'rigid (solved)', 'soft (impedance d, solved)' or 'soft (impedance dmin to dmax over
    width, solved)' for a solved contact's or limits' ``describe()``."""
    d = solved.get("impedance", 1.0)
    if isinstance(d, list):
        return f"soft (impedance {d[0]:g} to {d[1]:g} over {d[2]:g}, solved)"
    return "rigid (solved)" if d == 1 else f"soft (impedance {d:g}, solved)"
