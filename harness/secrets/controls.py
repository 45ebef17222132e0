"""Control characters in text that came from files (a record's, a suite's, a server log's):
C0 and C1 controls (ESC, NUL, BEL, backspace, CR), DEL and the bidirectional overrides
(U+202E ...) would restyle or rewrite a terminal and reorder what a reader sees.
`escape` makes them visible escapes (`\\x1b`, `\\u202e`); `strip` drops them, with the
styling sequences a log's colours are written in. Newline and tab stay in both."""

from __future__ import annotations

import re

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + _BIDI + "\u2028\u2029]")
# what a terminal's own styling writes (rich on a terminal, a server's coloured log): CSI
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """Control characters (ESC, NUL, CR, BEL...), DEL, C1 and bidirectional overrides as
    visible escapes; newline and tab kept."""
    return CONTROLS.sub(_visible, text)


def strip(text: str) -> str:
    """Styling sequences and control characters removed; newline and tab kept."""
    return CONTROLS.sub("", CSI.sub("", text))
