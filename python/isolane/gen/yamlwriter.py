"""Policies written as YAML for people to read: block mappings and lists, short mappings and
lists of scalars on one line, a comment at the top. isolane reads them back as written (the
scenario tests check it); no YAML library is needed."""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./%-]*")
_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|0x[0-9a-fA-F]+|0o[0-7]+|[-+]?\.inf|\.nan", re.IGNORECASE)
_RESERVED = {"true", "false", "null", "yes", "no", "on", "off", "y", "n", "~"}
"""Words YAML 1.2 (and 1.1, for other readers) would not read as strings."""
_INLINE_WIDTH = 100


def dump(document: dict[str, Any], comment: str = "") -> str:
    """``document`` as YAML, ``comment`` (lines of text) at the top."""
    head = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    return head + "\n".join(_mapping(document, 0)) + "\n"


def _mapping(mapping: dict[str, Any], indent: int) -> list[str]:
    lines = []
    pad = " " * indent
    for key, value in mapping.items():
        inline = _inline(value)
        if inline is not None and (len(pad) + len(key) + len(inline) + 2 <= _INLINE_WIDTH or not isinstance(value, dict | list)):
            lines.append(f"{pad}{key}: {inline}")
        elif isinstance(value, dict):
            lines += [f"{pad}{key}:", *_mapping(value, indent + 2)]
        else:
            lines += [f"{pad}{key}:", *_sequence(value, indent + 2)]
    return lines


def _sequence(items: list[Any], indent: int) -> list[str]:
    lines = []
    pad = " " * indent
    for item in items:
        inline = _inline(item)
        if inline is not None and len(pad) + len(inline) + 2 <= _INLINE_WIDTH:
            lines.append(f"{pad}- {inline}")
        else:
            body = _mapping(item, indent + 2)
            lines.append(f"{pad}- {body[0].lstrip()}")
            lines += body[1:]
    return lines


def _inline(value: Any) -> str | None:
    """``value`` on one line, or None for a mapping of mappings or lists (written as a block)."""
    if isinstance(value, dict):
        parts = [_inline(v) for v in value.values()]
        if None in parts:
            return None
        return "{" + ", ".join(f"{key}: {part}" for key, part in zip(value, parts)) + "}"
    if isinstance(value, list):
        if any(isinstance(v, dict | list) for v in value):
            return None
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    return _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and not _NUMBER.fullmatch(text) and text.lower() not in _RESERVED:
        return text
    return json.dumps(text)
