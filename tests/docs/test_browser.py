"""The built site in a real browser: Debian's Chromium, headless, driven by playwright.

The site is served on 127.0.0.1 and every request to another host is
refused and recorded: a page must show everything with no network.  For the
home page, a claims page and a reference page the test checks that the page
is not blank (its text, and a screenshot of its first screen with real content), that
its formulas are drawn (SVG elements with a size, no raw TeX in the visible
text), that roles became links, and that verdict names in tables stay on one
line in a narrow window.  On every page of the site, at a desktop width, no
table and no signature of the reference is clipped: each fits its column
(none hides columns behind a scroll bar).

Needs ``/usr/bin/chromium`` (``apt-get install -y chromium``; ``.ci/run``
installs it when it is missing and it runs as root) and the ``playwright``
package (the ``test`` extra; its own browser downloads are never used).
Without either, the tests skip and say what to install (they fail instead
where ``KERNELCHECK_REQUIRE_BROWSER`` is set, as ``.ci/run`` does once
Chromium is there).  Set
``KERNELCHECK_SCREENSHOTS=DIR`` to keep the screenshots.
"""

from __future__ import annotations

import functools
import http.server
import io
import os
import re
import shutil
import threading
from pathlib import Path

import pytest

from tests.docs.conftest import chromium_path, missing_modules

#: Chromium flags for a closed network and a root user (see the module docstring).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: (page, at least this many drawn formulas, at least this many links of the reference)
PAGES = [
    ("index.html", 1, 0),
    ("claims/kernels/index.html", 20, 0),
    ("reference/psd/index.html", 0, 20),
]

VERDICT_NAME = re.compile(r"^[A-Z]{3,}(?:_[A-Z]+)*$|^(?:verified|refuted|inconclusive)$")


def _unavailable(reason: str) -> None:
    """Skip, or fail where ``KERNELCHECK_REQUIRE_BROWSER`` is set (``.ci/run`` sets it)."""
    if os.environ.get("KERNELCHECK_REQUIRE_BROWSER"):
        pytest.fail(f"KERNELCHECK_REQUIRE_BROWSER is set, but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    if missing_modules(["playwright"]):
        _unavailable("playwright is not installed: python3 -m pip install -e '.[test]'")
    executable = chromium_path()
    if executable is None:
        _unavailable(
            "Chromium is not installed: apt-get install -y chromium "
            "(or set KERNELCHECK_CHROMIUM to a Chromium binary)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def server(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no request log on stderr
            pass

    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _open(browser, url: str, width: int = 1280):
    """A new page at ``url``; returns (page, requests refused, page errors)."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    refused: list[str] = []
    errors: list[str] = []

    def route(r):
        if r.request.url.startswith(("http://127.0.0.1:", "data:", "blob:")):
            r.continue_()
        else:
            refused.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    response = page.goto(url, wait_until="load")
    assert response is not None and response.ok, f"{url}: {response and response.status}"
    page.wait_for_timeout(300)
    return page, refused, errors


def _not_blank(png: bytes) -> tuple[float, int]:
    """(fraction of pixels that are not background, distinct colours) of a screenshot."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=image.width * image.height)  # [(count, rgb)]
    _, background = max(colours)
    ink = sum(n for n, rgb in colours if sum(abs(a - b) for a, b in zip(rgb, background)) > 60)
    return ink / (image.width * image.height), len(colours)


@pytest.mark.parametrize(("path", "min_formulas", "min_links"), PAGES)
def test_page_renders_offline(browser, server, tmp_path, path, min_formulas, min_links):
    page, refused, errors = _open(browser, server + path)
    try:
        text = page.inner_text("body")
        assert len(text) > 500, f"{path}: only {len(text)} characters of text"
        for raw in ("\\(", "\\[", "$$", ":func:", ":class:"):
            assert raw not in text, f"{path}: {raw!r} in the visible text"
        drawn = page.eval_on_selector_all(
            ".arithmatex svg",
            "els => els.filter(e => { const r = e.getBoundingClientRect();"
            " return r.width > 0 && r.height > 0 && e.querySelector('use, path, rect'); }).length",
        )
        assert drawn >= min_formulas, f"{path}: {drawn} drawn formulas, expected {min_formulas}+"
        links = page.eval_on_selector_all(
            "a.autorefs-internal[href*='#kernelcheck.']", "els => els.length"
        )
        assert links >= min_links, f"{path}: {links} links of the reference"
        png = page.screenshot()  # the first screen, as a reader sees it
        ink, colours = _not_blank(png)
        assert ink > 0.01 and colours > 20, f"{path}: the screenshot looks blank ({ink:.3%})"
        keep = os.environ.get("KERNELCHECK_SCREENSHOTS")
        shot = tmp_path / (path.replace("/", "_").replace(".html", ".png"))
        shot.write_bytes(png)
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(keep) / shot.name)
        assert not refused, f"{path} asked the network for {refused[:5]}"
        assert not errors, f"{path}: JavaScript errors {errors[:3]}"
    finally:
        page.context.close()


@pytest.mark.parametrize("path", ["psd/index.html", "cli/index.html"])
def test_verdict_names_do_not_wrap_in_narrow_tables(browser, server, path):
    """The verdict tables of the PSD guide and the command line, 420 px wide: names on one line."""
    page, refused, _ = _open(browser, server + path, width=420)
    try:
        lines = page.eval_on_selector_all(
            "table code",
            "els => els.map(e => [e.textContent, e.getClientRects().length])",
        )
        verdicts = [(name, n) for name, n in lines if VERDICT_NAME.match(name.strip())]
        assert len(verdicts) >= 3, f"{path}: no verdict names in the tables: {lines[:10]}"
        wrapped = [name for name, n in verdicts if n != 1]
        assert not wrapped, f"verdict names broken over lines: {wrapped}"
        assert not refused
    finally:
        page.context.close()


#: Pixels a table or signature may exceed its box by (sub-pixel rounding of borders).
SLACK = 2


def clipped(browser, url: str) -> list[str]:
    """Tables and reference signatures of the page at ``url`` wider than their box."""
    page, _, _ = _open(browser, url)
    try:
        return page.evaluate(
            """slack => {
              const out = [];
              document.querySelectorAll('.md-typeset table').forEach((t, i) => {
                const box = t.closest('.md-typeset__scrollwrap') || t.parentElement;
                if (box.scrollWidth > box.clientWidth + slack)
                  out.push(`table ${i} (${t.rows[0].textContent.trim().slice(0, 40)}): `
                           + `${box.scrollWidth} px in ${box.clientWidth} px`);
              });
              document.querySelectorAll('.doc-signature').forEach((e, i) => {
                if (e.scrollWidth > e.clientWidth + slack)
                  out.push(`signature ${i} (${e.textContent.trim().slice(0, 40)}): `
                           + `${e.scrollWidth} px in ${e.clientWidth} px`);
              });
              return out;
            }""",
            SLACK,
        )
    finally:
        page.context.close()


def test_no_table_or_signature_is_clipped(browser, server, site):
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html"))
    assert len(pages) > 20
    bad = [f"{path}: {item}" for path in pages for item in clipped(browser, server + path)]
    assert not bad, f"{len(bad)} clipped tables or signatures:\n" + "\n".join(bad[:30])
