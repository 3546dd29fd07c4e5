"""MkDocs hook: formulas rendered at build time, so the site needs no network and no script.

``pymdownx.arithmatex`` (``generic: true``) wraps each formula of a page,
and of every docstring mkdocstrings renders, as ``<span class="arithmatex">\\(...\\)</span>``
or ``<div class="arithmatex">\\[...\\]</div>``.  This hook replaces the TeX
inside by an SVG drawn by MathJax (run in-process by ``quickjax``, from the
``docs`` extra): every SVG carries its own glyphs, so a page shows its
formulas offline, with JavaScript off, and in print.  The TeX source stays
on the SVG as its ``aria-label``, for screen readers.

MathJax runs with the TeX packages of quickjax's bundle less ``physics``,
which redefines standard LaTeX (``\\exp(x')`` fails, ``\\div`` becomes a
divergence): the formulas mean what they mean in LaTeX.

A formula MathJax cannot typeset (a syntax error or an undefined macro) fails
the build with the page and the formula, instead of showing red text.
"""

from __future__ import annotations

import html
import itertools
import re
from typing import Any

from mkdocs.exceptions import PluginError

_MATH = re.compile(
    r'<(span|div) class="arithmatex">\s*(\\\(|\\\[)(.*?)(\\\)|\\\])\s*</\1>', re.DOTALL
)
_IDS = re.compile(r"MJX-\d+-")
_DATA = re.compile(r'\s(?:data-[\w-]+)="[^"]*"')
_PHYSICS = '"noundefined","physics",'
_renderer = None
_cache: dict[tuple[str, bool], str] = {}
_counter = itertools.count(1)


def _new_renderer():
    """quickjax's MathJax bundle in a QuickJS context, without the ``physics`` package."""
    import json
    from pathlib import Path

    import quickjax
    import quickjs

    bundle = Path(quickjax.__file__).parent / "js" / "mathjax_bundle.js"
    source = bundle.read_text(encoding="utf-8")
    if source.count(_PHYSICS) != 1:
        raise PluginError(
            f"{bundle}: cannot find the TeX package list to drop 'physics' from; "
            "this quickjax version is not supported (see pyproject.toml, the docs extra)"
        )
    context = quickjs.Context()
    context.set_max_stack_size(4 * 1024 * 1024)
    context.set_memory_limit(256 * 1024 * 1024)
    context.eval(source.replace(_PHYSICS, '"noundefined",'))

    def render(tex: str, display: bool) -> str:
        function = "render" if display else "renderInline"
        return context.eval(f"globalThis.{function}({json.dumps(tex)})")

    return render


def _render(tex: str, display: bool) -> str:
    global _renderer
    key = (tex, display)
    if key not in _cache:
        if _renderer is None:
            _renderer = _new_renderer()
        svg = _renderer(tex, display)
        if "data-mjx-error" in svg or 'fill="red"' in svg:
            error = re.search(r'data-mjx-error="([^"]*)"', svg)
            raise ValueError(error.group(1) if error else "undefined macro")
        _cache[key] = _DATA.sub("", svg)
    # Glyph ids are unique per SVG in the page: a formula used twice gets fresh ids.
    return _IDS.sub(f"MJX-{next(_counter)}-", _cache[key])


def on_page_content(html_text: str, page: Any, **kwargs: Any) -> str:
    def replace(m: re.Match[str]) -> str:
        tag, tex = m.group(1), html.unescape(m.group(3)).strip()
        display = m.group(2) == "\\["
        try:
            svg = _render(tex, display)
        except Exception as exc:  # noqa: BLE001 - any failure names the formula
            raise PluginError(
                f"{page.file.src_uri}: cannot typeset the formula {tex!r}: {exc}"
            ) from None
        label = html.escape(tex, quote=True)
        svg = svg.replace("<svg ", f'<svg aria-label="{label}" ', 1)
        kind = "display" if display else "inline"
        return f'<{tag} class="arithmatex math-{kind}">{svg}</{tag}>'

    return _MATH.sub(replace, html_text)
