"""MkDocs hook: the site never shows a private ``kernelcheck._src`` path.

mkdocstrings and autorefs give links and base classes a tooltip (``title``)
naming the object's canonical path, which for kernelcheck is a private module
under ``kernelcheck._src``.  Users import public names only, so after
autorefs has fixed the links this hook removes every ``title`` attribute
that names a private path; the link itself (to the public page) stays.
"""

from __future__ import annotations

import re
from typing import Any

from mkdocs.plugins import event_priority

_PRIVATE_TITLE = re.compile(r'\s+title="[^"]*kernelcheck\._src[^"]*"')


@event_priority(-100)  # after mkdocs-autorefs (-50) has written its links
def on_post_page(output: str, **kwargs: Any) -> str:
    return _PRIVATE_TITLE.sub("", output)
