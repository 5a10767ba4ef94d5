"""The viewer's start: how long ``sd.view`` takes to serve the scene (meshes read and converted)
and how long a browser takes from loading the page to the first frame with the robot in it.

    python benchmarks/viewer.py [--repeats 3] [--screenshot docs/viewer_panda.png]

Each measurement runs in a fresh Python process (cold caches: imports, mesh files) with Debian's
headless Chromium (software WebGL, SwiftShader) driven by Playwright, shadows off. The first
frame is the first screenshot (taken back to back from the page load; its time is when its
capture finished: an upper bound) in which the robot's pixels are drawn: those that differ
between the settled picture and the same picture with the robot hidden. Cases: the Panda of
example-robot-data (11 DAE meshes) and the bundled Panda (no meshes: a skeleton). Prints the
medians; ``--screenshot`` also saves a picture of the Panda.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, os.pardir, "tests")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import viser, trimesh  # noqa: F401  (what the first view imports)
t_import = time.perf_counter() - t0
sys.path.insert(0, {tests!r})
import numpy as np
import screwdyn as sd
import browser
from conftest import erd_urdf
case, screenshot = {case!r}, {screenshot!r}
pose = [0.0, -0.4, 0.0, -2.0, 0.0, 1.6, 0.8, 0.04, 0.04]
subject = erd_urdf("panda_description/urdf/panda.urdf") if case == "meshes" else \
    sd.robots.load("panda")
t0 = time.perf_counter()
viewer = sd.view(subject, pose, verbose=False, shadows=bool(screenshot))
t_view = time.perf_counter() - t0
shots = []
with browser.page("about:blank", 1000, 640) as tab:
    t0 = time.perf_counter()
    tab.goto(viewer.url)
    while time.perf_counter() - t0 < 120:
        shot = browser.screenshot(tab)
        shots.append((time.perf_counter() - t0, shot))  # when the capture had finished
        if len(shots) > 3 and all(np.array_equal(shots[-1][1], s) for _, s in shots[-3:]) \
                and viewer.server.get_clients():
            break
    final = shots[-1][1]
    what = "visuals" if case == "meshes" else "skeleton"
    viewer.show(what, False)
    empty = browser.settled(tab, viewer)
    robot = browser.changed(final, empty)
    first = next(t for t, s in shots if (browser.changed(s, empty) & robot).sum()
                 >= 0.9 * robot.sum())
    if screenshot:
        viewer.show(what, True)
        tab.locator(".mantine-Notification-closeButton").first.click()
        from PIL import Image
        Image.fromarray(browser.settled(tab, viewer)).save(screenshot)
viewer.close()
print(json.dumps({{"import": t_import, "view": t_view, "first_frame": first,
                  "robot_pixels": int(robot.sum())}}))
"""


def measure(case, screenshot=None):
    code = CHILD.format(tests=os.path.abspath(TESTS), case=case, screenshot=screenshot)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"the {case} measurement failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--screenshot", help="save a picture of the Panda (shadows on) here")
    args = parser.parse_args()
    results = {"meshes": [], "skeleton": []}
    for _ in range(args.repeats):  # interleaved: the machine's load hits both alike
        for case in results:
            results[case].append(measure(case))
            print(case, results[case][-1], flush=True)
    for case, runs in results.items():
        medians = {k: statistics.median(r[k] for r in runs) for k in ("import", "view",
                                                                       "first_frame")}
        print(f"{case:9s} import viser+trimesh {medians['import']:.2f} s, sd.view "
              f"{medians['view']:.2f} s, first frame {medians['first_frame']:.2f} s after the "
              f"page load (median of {len(runs)})")
    if args.screenshot:
        measure("meshes", os.path.abspath(args.screenshot))
        print("saved", args.screenshot)


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t:.0f} s)")
