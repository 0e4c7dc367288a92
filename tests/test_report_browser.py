"""The report page in a real headless browser (Debian's Chromium with its chromedriver, through
selenium): no console errors, every figure drawn, every figure and video link resolving, a
screenshot that is not blank. Skips without Chromium; fails instead under CI
(under .ci/run, which installs Chromium)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from tests.harness import must_run_in_ci

pytest.importorskip("matplotlib")
pytest.importorskip("tensorboardX")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None or CHROMEDRIVER is None:
        message = "Chromium and chromedriver are not installed (apt-get install -y chromium chromium-driver)"
        if must_run_in_ci():
            pytest.fail(f"{message}, and CI (.ci/run) must run this test")
        pytest.skip(message)
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1100,1400",
                 "--allow-file-access-from-files"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _local(url: str) -> Path:
    parsed = urlparse(url)
    assert parsed.scheme == "file", f"{url}: the page links outside its folder and the run directory"
    return Path(unquote(parsed.path))


def test_the_report_page_renders_without_errors_and_every_link_resolves(browser, tmp_path):
    from matplotlib import image

    from rlinf_eks.report import make_report
    from tests import report_logs

    run = report_logs.rlinf_run(tmp_path / "run", steps=40)
    make_report(run, tmp_path / "out", title="multi-node: default run (rlinf-embodied)", backend="prometheus")
    browser.get((tmp_path / "out" / "index.html").as_uri())
    errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]
    assert errors == []
    # every figure inlined and laid out with a size
    sizes = browser.execute_script(
        "return Array.from(document.querySelectorAll('figure svg')).map(s => [s.closest('figure').id, s.getBoundingClientRect().width, s.getBoundingClientRect().height])"
    )
    assert [name for name, _, _ in sizes] == ["figure-success", "figure-reward", "figure-loss", "figure-step_time"]
    assert all(width > 300 and height > 100 for _, width, height in sizes)
    links = browser.execute_script("return Array.from(document.querySelectorAll('a')).map(a => [a.className, a.href])")
    figures = [href for kind, href in links if kind != "video"]
    videos = [href for kind, href in links if kind == "video"]
    assert len(figures) == 8 and len(videos) == 2
    for href in figures + videos:
        assert _local(href).is_file(), href
    # a PNG figure opened by itself is an image the browser decodes
    browser.get(figures[0])
    width = browser.execute_script("return document.images.length ? document.images[0].naturalWidth : 0")
    assert width == 700
    browser.get((tmp_path / "out" / "index.html").as_uri())
    pixels = image.imread(io.BytesIO(browser.get_screenshot_as_png()), format="png")
    # not blank: many distinct colours, and a good share of non-white pixels (text, lines, axes)
    rgb = (pixels[..., :3] * 255).astype(int)
    colours = {tuple(p) for p in rgb.reshape(-1, 3)[::7]}
    non_white = (rgb.sum(axis=2) < 720).mean()
    assert len(colours) > 50 and non_white > 0.02
