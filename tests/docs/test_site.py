"""The built site reads like a library's documentation and works offline.

Each test reads every HTML page of the site built by ``mkdocs build --strict``
(the ``site`` fixture) and fails, naming the page and the text, on:

* a raw numpydoc role (``:func:``, ``:class:`` ... left as text);
* a raw formula delimiter (``\\(``, ``\\[``, ``$$``) in the text, or a formula
  element without its typeset SVG;
* a raw table row (a line of text that starts and ends with ``|``: a
  Markdown table broken by a blank line renders its rows as text);
* a formula left as ASCII in a code block (a block with no language whose
  text reads as mathematics: ``gamma_k``, ``sum_{``, ``<=`` ...): typeset it;
* a private path ``kernelcheck._src`` anywhere in a page;
* an internal link, image, script or stylesheet that points to no file, or to
  an anchor the target page does not have;
* a script, stylesheet, font or image loaded from the network.

Text inside ``<code>`` and ``<pre>`` is code shown as code and is not read
for roles and delimiters.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROLE = re.compile(r":(?:py:)?(?:func|class|data|mod|meth|attr|exc|obj|const):")
RAW_MATH = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$")
_VOID_CODE = {"code", "pre", "script", "style", "svg", "kbd", "samp"}


#: ASCII mathematics in a code block: an index in braces (``sum_{j <= i}``), a
#: rounding constant with its subscript (``gamma_k``, ``gamma_(n+2)``), ``expm1(``.
ASCII_MATH = re.compile(r"_\{|\b(?:gamma|eta|rho|theta)_(?:\(|[a-z0-9]\b)|\bexpm1\(")


class Page(HTMLParser):
    """One HTML page: its visible text outside code, its links, its ids and formulas."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth_code = 0
        self.depth_table = 0
        self.prose: list[str] = []  # text outside code and tables
        self.blocks: list[list[str]] = []  # code blocks without a language
        self._plain_pre = 0
        self._language = False
        self.text: list[str] = []
        self.all_text: list[str] = []  # code included
        self.links: list[tuple[str, str, str]] = []  # (tag, attribute, url)
        self.ids: set[str] = set()
        self.math: list[bool] = []  # per formula element: has an SVG
        self._open_math: list[list] = []  # [tag, has svg, depth]
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._depth += 1
        if tag == "table":
            self.depth_table += 1
        classes = (a.get("class") or "").split()
        if tag == "div" and "highlight" in classes:  # a code block; the language is here
            self._language = any(c.startswith("language-") for c in classes)
        if tag == "code" and self.depth_code == 1 and self._plain_pre:
            if not any(c.startswith("language-") for c in classes):
                self.blocks.append([])
            else:
                self._plain_pre = 0
        if tag == "pre":
            self._plain_pre = 0 if self._language else 1
            self._language = False
        if tag in _VOID_CODE:
            self.depth_code += 1
        for key in ("id", "name"):
            if a.get(key):
                self.ids.add(a[key])
        for key in ("href", "src"):
            if a.get(key) is not None:
                self.links.append((tag, key, a[key]))
        if "arithmatex" in (a.get("class") or "").split():
            self._open_math.append([tag, False, self._depth])
        if tag == "svg" and self._open_math:
            self._open_math[-1][1] = True

    def handle_endtag(self, tag):
        if self._open_math and self._open_math[-1][0::2] == [tag, self._depth]:
            self.math.append(self._open_math.pop()[1])
        if tag in _VOID_CODE and self.depth_code:
            self.depth_code -= 1
        if tag == "pre":
            self._plain_pre = 0
        if tag == "table" and self.depth_table:
            self.depth_table -= 1
        self._depth -= 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)

    def handle_data(self, data):
        self.all_text.append(data)
        if not self.depth_code:
            self.text.append(data)
            if not self.depth_table:
                self.prose.append(data)
        elif self._plain_pre and self.blocks:
            self.blocks[-1].append(data)


def _pages(site: Path) -> dict[Path, tuple[str, Page]]:
    out = {}
    for path in sorted(site.rglob("*.html")):
        if path.name == "404.html":
            continue
        html = path.read_text(encoding="utf-8")
        page = Page()
        page.feed(html)
        out[path] = (html, page)
    return out


@pytest.fixture(scope="module")
def pages(site):
    found = _pages(site)
    assert len(found) > 20, f"only {len(found)} pages built"
    return found


def _context(text: str, m: re.Match) -> str:
    return " ".join(text[max(0, m.start() - 60) : m.end() + 60].split())


def raw_roles(site: Path, pages) -> list[str]:
    """Numpydoc roles left as text."""
    bad = []
    for path, (_, page) in pages.items():
        text = "".join(page.text)
        bad += [f"{path.relative_to(site)}: ...{_context(text, m)}..." for m in ROLE.finditer(text)]
    return bad


def raw_math(site: Path, pages) -> list[str]:
    """TeX delimiters left as text, and formula elements without their SVG."""
    bad = []
    for path, (_, page) in pages.items():
        text = "".join(page.text)
        bad += [
            f"{path.relative_to(site)}: ...{_context(text, m)}..." for m in RAW_MATH.finditer(text)
        ]
        if not all(page.math):
            bad.append(f"{path.relative_to(site)}: {page.math.count(False)} formulas without SVG")
    return bad


def raw_table_rows(site: Path, pages) -> list[str]:
    """Lines of prose that are Markdown table rows (``| a | b |``) left as text."""
    bad = []
    for path, (_, page) in pages.items():
        for line in "".join(page.prose).splitlines():
            line = line.strip()
            if len(line) > 2 and line.startswith("|") and line.endswith("|"):
                bad.append(f"{path.relative_to(site)}: {line[:100]}")
    return bad


def ascii_math(site: Path, pages) -> list[str]:
    """Code blocks of the guides whose text is a formula (typeset it instead).

    Doctest blocks (``>>>``) are code; the API reference shows docstrings as
    their authors wrote them for a terminal, so it is not read here.
    """
    bad = []
    for path, (_, page) in pages.items():
        if "reference" in path.relative_to(site).parts:
            continue
        for block in page.blocks:
            text = "".join(block)
            if ">>>" in text:
                continue
            m = ASCII_MATH.search(text)
            if m:
                bad.append(f"{path.relative_to(site)}: ...{_context(text, m)}...")
    return bad


def private_paths(site: Path, pages) -> list[str]:
    """Mentions of ``kernelcheck._src`` anywhere in a page (attributes included)."""
    bad = []
    for path, (html, _) in pages.items():
        for m in re.finditer(r"kernelcheck\._src\b", html):
            bad.append(f"{path.relative_to(site)}: ...{_context(html, m)}...")
    return bad


def _target(page: Path, url: str) -> tuple[Path, str]:
    parts = urlsplit(url)
    fragment = unquote(parts.fragment)
    if not parts.path:
        return page.resolve(), fragment
    target = (page.parent / unquote(parts.path)).resolve()
    if parts.path.endswith("/") or target.is_dir():
        target = target / "index.html"
    return target, fragment


def broken_links(site: Path, pages) -> tuple[list[str], int]:
    """Internal links to no file or to a missing anchor; and how many links were checked."""
    by_path = {p.resolve(): page for p, (_, page) in pages.items()}
    bad, checked = [], 0
    for path, (_, page) in pages.items():
        for tag, key, url in page.links:
            if urlsplit(url).scheme or url.startswith("//"):
                continue
            target, fragment = _target(path, url)
            checked += 1
            where = f"{path.relative_to(site)}: <{tag} {key}={url!r}>"
            if not target.exists():
                bad.append(f"{where}: no file {target}")
            elif fragment and target in by_path and fragment not in by_path[target].ids:
                bad.append(f"{where}: no anchor #{fragment}")
    return bad, checked


def network_loads(site: Path, pages) -> list[str]:
    """Scripts, stylesheets, fonts or images a page would fetch from the network."""
    bad = []
    for path, (html, page) in pages.items():
        for tag, key, url in page.links:
            remote = urlsplit(url).scheme in ("http", "https") or url.startswith("//")
            if remote and not (tag == "a" and key == "href"):
                bad.append(f"{path.relative_to(site)}: <{tag} {key}={url!r}>")
        for m in re.finditer(r"@import\s+url\(\s*['\"]?(https?:)?//", html):
            bad.append(f"{path.relative_to(site)}: {_context(html, m)}")
    return bad


def test_no_raw_numpydoc_role(site, pages):
    bad = raw_roles(site, pages)
    assert not bad, f"{len(bad)} raw roles, e.g.:\n" + "\n".join(bad[:20])


def test_formulas_are_typeset(site, pages):
    bad = raw_math(site, pages)
    assert not bad, "raw TeX in the pages:\n" + "\n".join(bad[:20])
    formulas = sum(len(page.math) for _, page in pages.values())
    assert formulas > 100, f"only {formulas} formulas on the whole site"


def test_no_raw_table_row(site, pages):
    bad = raw_table_rows(site, pages)
    assert not bad, f"{len(bad)} table rows rendered as text:\n" + "\n".join(bad[:20])


def test_no_formula_left_as_ascii_in_a_code_block(site, pages):
    bad = ascii_math(site, pages)
    assert not bad, f"{len(bad)} formulas in code blocks:\n" + "\n".join(bad[:20])


def test_no_private_path(site, pages):
    bad = private_paths(site, pages)
    assert not bad, "private paths in the pages:\n" + "\n".join(bad[:20])


def test_internal_links_resolve(site, pages):
    bad, checked = broken_links(site, pages)
    assert not bad, f"{len(bad)} broken internal links:\n" + "\n".join(bad[:30])
    assert checked > 1000, f"only {checked} internal links found"


def test_nothing_is_loaded_from_the_network(site, pages):
    bad = network_loads(site, pages)
    assert not bad, "pages load from the network:\n" + "\n".join(bad[:20])


_BAD_PAGE = """<html><head><link rel="stylesheet" href="https://cdn.example/x.css"></head><body>
<p>See :func:<code>check_psd</code> and <span class="arithmatex">\\(\\kappa\\)</span>,
<span class="arithmatex"><svg></svg></span>.</p>
<p>From kernelcheck._src.psd import it; <a href="other/">ok</a> <a href="other/#there">ok</a>
<a href="missing/">broken</a> <a href="other/#nowhere">no anchor</a> <a href="#top">self</a></p>
<pre><code>:func:`shown as code` \\(also code\\)</code></pre>
<p>| `a` | b |</p><table><tr><td>| in a table |</td></tr></table>
<pre><code>E = gamma_k |x| |y|</code></pre>
<pre><code class="language-python">x = y[0] if a <= b else sum_{x}</code></pre></body></html>"""


def test_the_checks_find_what_they_look_for(tmp_path):
    """Each check above, on a small site with one fault of each kind, finds exactly it."""
    (tmp_path / "other").mkdir()
    (tmp_path / "index.html").write_text(_BAD_PAGE, encoding="utf-8")
    (tmp_path / "other" / "index.html").write_text('<h1 id="there">x</h1>', encoding="utf-8")
    pages = _pages(tmp_path)
    assert len(raw_roles(tmp_path, pages)) == 1
    math = raw_math(tmp_path, pages)
    assert len(math) == 3 and "formulas without SVG" in math[-1], math  # \( \) and the element
    assert len(private_paths(tmp_path, pages)) == 1
    links, checked = broken_links(tmp_path, pages)
    assert checked == 5 and len(links) == 3, links  # missing/, #nowhere, #top
    assert len(network_loads(tmp_path, pages)) == 1
    assert len(raw_table_rows(tmp_path, pages)) == 1
    assert len(ascii_math(tmp_path, pages)) == 1


def test_the_home_page_shows_the_four_verifiers(site, pages):
    _, page = pages[site / "index.html"]
    text = "".join(page.all_text)
    for call in (
        "check_psd(",
        "verify.kernel(",
        "verify.feature_map(",
        "verify.attention(",
        "verify.unbiased(",
    ):
        assert call in text, f"the home page has no example calling {call}...)"


def test_the_claims_are_on_the_site(site, pages):
    text = " ".join(" ".join(p.text) for path, (_, p) in pages.items() if "claims" in path.parts)
    for i in range(1, 21):
        assert re.search(rf"\bC{i}\b", text), f"claim C{i} is on no claims page"
    html = " ".join(h for _, (h, _) in pages.items())
    assert "CLAIMS.md" not in html, "the docs cite CLAIMS.md, which is not in the repository"
