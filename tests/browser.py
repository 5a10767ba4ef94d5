"""A real browser for the viewer's tests: Debian's headless Chromium driven by Playwright, the
pixels it draws, and where a world point lands on them (the camera the page reports to the
viewer's server)."""
import contextlib
import io
import shutil
import time

import numpy as np

# headless, as root in a container, without a GPU (WebGL runs on SwiftShader) and without
# reaching out to the network
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path():
    """Debian's chromium, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@contextlib.contextmanager
def page(url, width=1000, height=700):
    """A Playwright page of headless Chromium at ``url``, ``width`` x ``height`` CSS pixels (a
    fresh temporary profile: Playwright makes one per launch)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=FLAGS)
        try:
            tab = browser.new_page(viewport={"width": width, "height": height},
                                   device_scale_factor=1)
            tab.goto(url)
            yield tab
        finally:
            browser.close()


def screenshot(tab):
    """The page as an (H, W, 3) uint8 RGB array."""
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(tab.screenshot())).convert("RGB"))


def settled(tab, viewer, still=3, interval=0.25, timeout=120.0):
    """A screenshot once the page is connected to ``viewer`` and ``still`` screenshots in a row
    (``interval`` s apart) are identical: every message drawn. AssertionError after
    ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not viewer.server.get_clients():
        assert time.monotonic() < deadline, "the page never connected to the viewer"
        time.sleep(0.1)
    shots = [screenshot(tab)]
    while len(shots) < still or any(not np.array_equal(shots[-1], s) for s in shots[-still:]):
        assert time.monotonic() < deadline, "the page kept changing"
        time.sleep(interval)
        shots.append(screenshot(tab))
    return shots[-1]


def camera(viewer):
    """The camera of the (first) page connected to the viewer."""
    (client,) = list(viewer.server.get_clients().values())[:1]
    return client.camera


def project(cam, points):
    """Pixel coordinates (N, 2) (column, row) of world points (N, 3) in the page's picture: a
    pinhole camera at ``cam.position`` with rotation ``cam.wxyz`` (camera to world, OpenCV axes:
    x right, y down, z forward) and vertical field of view ``cam.fov``."""
    from viser import transforms

    R = np.asarray(transforms.SO3(np.asarray(cam.wxyz)).as_matrix())
    p = (np.asarray(points) - np.asarray(cam.position)) @ R  # R^T (p - c), row vectors
    assert np.all(p[:, 2] > 0), "a point behind the camera"
    f = 0.5 * cam.image_height / np.tan(0.5 * cam.fov)
    return np.column_stack([f * p[:, 0] / p[:, 2] + 0.5 * cam.image_width,
                            f * p[:, 1] / p[:, 2] + 0.5 * cam.image_height])


def changed(a, b, level=3):
    """Mask (H, W) of the pixels where pictures a and b differ by more than ``level`` in a
    channel (SwiftShader draws the same scene to the same pixels: a change is a change of the
    scene; a lit white robot can come within 10 levels of the background)."""
    return np.abs(a.astype(int) - b.astype(int)).max(axis=-1) > level


def near(mask, pixels, radius=3):
    """For each pixel (column, row), whether the mask is set within ``radius`` of it."""
    out = []
    for x, y in np.round(pixels).astype(int):
        window = mask[max(y - radius, 0):y + radius + 1, max(x - radius, 0):x + radius + 1]
        out.append(bool(window.any()))
    return np.array(out)
