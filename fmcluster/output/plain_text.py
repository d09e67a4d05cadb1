"""Output streams that cannot encode fmcluster's marks (an ASCII locale: ``LANG=C`` without UTF-8 mode) get
plain stand-ins instead of a UnicodeEncodeError: ``✓`` becomes ``ok``, ``…`` becomes ``...``, box lines become
``-``, ``|`` and ``+``.

Done once per stream, as an encoding error handler, so every writer (rich consoles, ``print``, ``sys.stderr.write``)
degrades the same way and UTF-8 terminals are untouched.
"""

from __future__ import annotations

import codecs
import sys
import unicodedata
from typing import TextIO

HANDLER = "fmcluster-plain"

# The characters fmcluster prints (grep its sources for non-ASCII) and rich draws, by their plain stand-in.
_PLAIN = {
    "✓": "ok", "✗": "x", "…": "...", "—": "-", "–": "-", "→": "->", "←": "<-", "↔": "<->", "≥": ">=", "≤": "<=",
    "×": "x", "·": "*", "•": "*", "›": ">", "◀": "<", "█": "#", "§": "S", "━": "-", "╸": "-", "╺": "-",
}
# What a stream must be able to encode to be left as it is.
_PROBE = "✓…─"


def _box_drawing(char: str) -> str | None:
    """Rich's lines and corners (U+2500..U+257F) by shape: horizontal ``-``, vertical ``|``, anything else ``+``."""
    if not "\u2500" <= char <= "\u257f":
        return None
    name = unicodedata.name(char, "")
    if "HORIZONTAL" in name and "VERTICAL" not in name and "AND" not in name:
        return "-"
    if "VERTICAL" in name and "HORIZONTAL" not in name and "AND" not in name:
        return "|"
    return "+"


def plain(char: str) -> str:
    """The ASCII stand-in for one character: its own, a line's shape, its decomposition (é → e), else ``?``."""
    if char in _PLAIN:
        return _PLAIN[char]
    box = _box_drawing(char)
    if box is not None:
        return box
    decomposed = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
    return decomposed or "?"


def _handle(error: UnicodeError) -> tuple[str | bytes, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start:error.end]
    if all("\udc80" <= char <= "\udcff" for char in text):  # bytes a surrogateescape read kept: write them back
        return bytes(ord(char) - 0xDC00 for char in text), error.end
    return "".join(plain(char) for char in text), error.end


codecs.register_error(HANDLER, _handle)


def degrade_if_needed(stream: TextIO) -> None:
    """Give ``stream`` the plain stand-ins when its encoding cannot write fmcluster's marks."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        _PROBE.encode(encoding)
        return
    except (UnicodeEncodeError, LookupError):
        pass
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors=HANDLER)


def degrade_standard_streams() -> None:
    """stdout and stderr, before the command writes anything."""
    for stream in (sys.stdout, sys.stderr):
        degrade_if_needed(stream)
