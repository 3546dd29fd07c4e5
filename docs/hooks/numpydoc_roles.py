"""Griffe extension: numpydoc roles in docstrings become links of the API reference.

Docstrings are written for numpydoc (``:func:`check_psd```,
``:class:`~kernelcheck.errors.InvalidArgument```, ``:data:``, ``:mod:``,
``:meth:``, ``:attr:``, ``:exc:``, ``:obj:``).  mkdocstrings renders
Markdown, where such a role would show as raw text.  Once the package is
loaded, this extension rewrites every role of every docstring:

* a name that resolves (in the scope of the docstring's object, as Python
  would resolve it there, else by its last component among the public names)
  to an object the API reference renders becomes the cross-reference
  ``[`name`][kernelcheck.module.name]`` to its public path (never a private
  ``kernelcheck._src`` path);
* any other name (NumPy, SciPy, the standard library, a private helper)
  becomes inline code.

The text shown follows numpydoc: ``~a.b.c`` shows ``c``; a private path
shows its public path when there is one, else its last component.

Loaded by ``mkdocs.yml`` (``plugins.mkdocstrings.handlers.python.options.extensions``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(func|class|data|mod|meth|attr|exc|obj|const|term):`([^`]+)`")
_DIRECTIVE = re.compile(r"^::: ([\w.]+)\n((?:[ \t]+.*\n?)*)", re.MULTILINE)
REFERENCE = Path(__file__).resolve().parents[1] / "reference"
PACKAGE = "kernelcheck"


def rendered_modules(reference: Path = REFERENCE) -> list[str]:
    """Public modules whose members the API reference renders (``::: module`` pages)."""
    found = []
    for page in sorted(reference.glob("*.md")):
        for m in _DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            if "members: false" not in m.group(2):
                found.append(m.group(1))
    return found


def _public_members(obj: Any) -> list[Any]:
    out = []
    for name, member in obj.members.items():
        if name.startswith("_") or member.is_alias:
            continue
        out.append(member)
    return out


class NumpydocRoles(griffe.Extension):
    """Rewrite numpydoc roles into autorefs cross-references (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.public: dict[str, str] = {}  # canonical path -> public path
        self.by_name: dict[str, list[str]] = {}  # last component -> public paths
        self.modules: set[str] = set()

    # -- the map of what the reference renders -------------------------------------------

    def _add(self, canonical: str, public: str) -> None:
        self.public.setdefault(canonical, public)
        self.by_name.setdefault(public.rsplit(".", 1)[-1], []).append(public)

    def _build_map(self, pkg: Any) -> None:
        modules = rendered_modules()
        self.modules = set(modules)
        pairs = []  # (not the room's own facade, rank, target, public path)
        for rank, module_path in enumerate(modules):
            module = pkg if module_path == PACKAGE else pkg[module_path[len(PACKAGE) + 1 :]]
            for name in module.exports or ():
                name = name if isinstance(name, str) else getattr(name, "name", str(name))
                member = module.members.get(name)
                if member is None:
                    continue
                try:
                    target = member.final_target if member.is_alias else member
                except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                    continue
                if target.is_module:
                    continue
                parts = target.path.split(".")
                room = parts[2] if parts[:2] == [PACKAGE, "_src"] and len(parts) > 2 else ""
                own_room = module_path == f"{PACKAGE}.{room}"
                pairs.append((not own_room, rank, target, f"{module_path}.{name}"))
        # An object two facades export links to the facade of its own room.
        for _, _, target, public in sorted(pairs, key=lambda p: (p[0], p[1])):
            self._add(target.path, public)
            if target.is_class:
                for member in _public_members(target):
                    self._add(member.path, f"{public}.{member.name}")

    # -- resolution -----------------------------------------------------------------------

    def _canonical(self, path: str, pkg: Any) -> str:
        """The canonical path of a ``kernelcheck...`` path (public paths are followed)."""
        if path in self.public:
            return path
        try:
            obj = pkg[path[len(PACKAGE) + 1 :]] if path != PACKAGE else pkg
            return obj.final_target.path if obj.is_alias else obj.path
        except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError, ValueError):
            return path

    def resolve(self, name: str, scope: Any, pkg: Any) -> str | None:
        """The public path a role's target names, or None when the reference does not render it."""
        name = name.strip().rstrip("()")
        head, _, rest = name.lstrip(".").partition(".")
        candidates = []
        if name.startswith(PACKAGE + ".") or name == PACKAGE:
            candidates.append(name)
        else:
            try:
                resolved = scope.resolve(head)
                candidates.append(f"{resolved}.{rest}" if rest else resolved)
            except (griffe.NameResolutionError, AttributeError, ValueError):
                pass
        for path in candidates:
            if path in self.modules:
                return path
            canonical = self._canonical(path, pkg)
            if canonical in self.public:
                return self.public[canonical]
            for public in self.public.values():
                if public == path:
                    return public
        if "." not in name:  # a bare name: unique among the public names
            found = sorted(set(self.by_name.get(name, ())))
            here = scope.path.split(".")[:3]
            same_room = [p for p in found if self._canonical_room(p, pkg) == here]
            if len(found) == 1:
                return found[0]
            if len(same_room) == 1:
                return same_room[0]
        return None

    def _canonical_room(self, public: str, pkg: Any) -> list[str]:
        for canonical, pub in self.public.items():
            if pub == public:
                return canonical.split(".")[:3]
        return []

    def rewrite(self, text: str, scope: Any, pkg: Any) -> str:
        """``text`` with every role replaced by a cross-reference or inline code."""

        def replace(m: re.Match[str]) -> str:
            target = m.group(2).strip()
            short = target.startswith("~")
            target = target.lstrip("~!")
            public = self.resolve(target, scope, pkg)
            shown = target.rsplit(".", 1)[-1] if short else target
            if "._src." in shown or shown.startswith("_src."):
                shown = public if public else shown.rsplit(".", 1)[-1]
            if public is None:
                return f"`{shown}`"
            return f"[`{shown}`][{public}]"

        return ROLE.sub(replace, text)

    # -- the event ------------------------------------------------------------------------

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:
        if pkg.name != PACKAGE:
            return
        self._build_map(pkg)
        stack = [pkg]
        while stack:
            obj = stack.pop()
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = self.rewrite(obj.docstring.value, obj, pkg)
            stack.extend(m for m in obj.members.values() if not m.is_alias)
