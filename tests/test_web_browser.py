"""End to end in a real headless Chromium (Debian's ``chromium``, driven by Playwright): the
pages load without console errors, a form submission shows results, a comparison renders
its chart. Skipped where the browser or Playwright is missing, unless GPUARCH_REQUIRE_BROWSER
is set (CI sets it, so there it must run)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_REQUIRED = bool(os.environ.get("GPUARCH_REQUIRE_BROWSER"))

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

if (CHROMIUM is None or sync_playwright is None) and not _REQUIRED:
    pytest.skip("headless Chromium or Playwright not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    from werkzeug.serving import make_server

    from gpuarch.web.app import create_app

    server = make_server("127.0.0.1", 0, create_app(), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert CHROMIUM is not None and sync_playwright is not None, "browser required"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM,
                              args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def _page(browser: Any) -> tuple[Any, list[str]]:
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, errors


def test_pages_load_without_console_errors(browser: Any, base_url: str) -> None:
    page, errors = _page(browser)
    for path in ("/", "/gpus", "/gpu?name=b200", "/evolution", "/compare", "/estimate/train",
                 "/estimate/infer", "/advise/train", "/advise/infer", "/validate/bands",
                 "/validate/ops", "/models", "/api"):
        response = page.goto(base_url + path)
        assert response is not None and response.status == 200, path
    assert errors == []


def test_form_submission_shows_results(browser: Any, base_url: str) -> None:
    page, errors = _page(browser)
    page.goto(base_url + "/estimate/infer")
    page.fill("input[name=gpu]", "h200")
    page.fill("input[name=batch]", "16")
    page.click("button")
    page.wait_for_selector("#result")
    text = page.inner_text("#result")
    assert "H200 SXM 141GB" in text and "TPOT" in text and "batch 16" in text
    assert errors == []


def test_comparison_renders_its_chart(browser: Any, base_url: str) -> None:
    page, errors = _page(browser)
    page.goto(base_url + "/compare")
    page.fill("input[name=gpus]", "a100 h100 b200")
    page.click("button")
    page.wait_for_selector("svg rect")
    assert page.locator("svg rect").count() >= 6
    box = page.locator("svg").bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 100
    assert errors == []


def test_report_opens_from_disk(browser: Any, tmp_path: Any) -> None:
    """The HTML report, opened as a file: no console errors, its six charts drawn (the
    advice's two fronts, the roofline, the evolution, the two models' errors)."""
    from gpuarch.cli.main import main

    out = tmp_path / "report.html"
    assert main(["report", "--out", str(out), "--max-gpus", "16", "--tokens", "1e10"]) == 0
    page, errors = _page(browser)
    page.goto(out.resolve().as_uri())
    assert page.locator("svg").count() == 6
    assert page.locator("h2").count() >= 6
    for i in range(6):
        box = page.locator("svg").nth(i).bounding_box()
        assert box is not None and box["width"] > 200
    assert errors == []
