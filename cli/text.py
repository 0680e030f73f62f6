"""Text as it reaches a terminal or a file: every character shown, the output valid UTF-8."""
from __future__ import annotations


def printable(text: str) -> str:
    """``text`` safe to print: bytes of a file name that are not UTF-8 (held as lone surrogates) as ``\\xff``,
    control and other unprintable characters (a newline or a terminal escape in a file name) as Python escapes
    them, so output is valid UTF-8 and shows every name as it is."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else ascii(ch)[1:-1]


def workflow_escape(text: str, prop: bool = False) -> str:
    """GitHub Actions workflow-command escaping of a message (a property, ``prop``, also escapes ``:`` and ``,``)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text
