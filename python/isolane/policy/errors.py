"""Errors and warnings: :class:`PolicyError` (every problem at once, each at its place),
:class:`PolicyWarning`, and the helpers that word the problems."""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Iterable, Mapping, Sequence

from isolane._core import IsolaneError


class PolicyError(IsolaneError, ValueError):
    """A policy that cannot be used. ``errors`` lists every problem found as ``(path, message)``
    (path ``""`` is the policy itself); ``source`` is the file it came from, if any."""

    errors: list[tuple[str, str]]
    source: str | None

    def __init__(self, errors: Sequence[tuple[str, str]], source: str | os.PathLike[str] | None = None) -> None:
        self.errors = list(errors)
        self.source = None if source is None else os.fspath(source)
        super().__init__(self._render())

    def _render(self) -> str:
        lines = [_render_error(path, message) for path, message in self.errors]
        where = f"{self.source}: " if self.source else ""
        if len(lines) == 1:
            return where + lines[0]
        head = f"{where}{len(lines)} errors" if where else f"{len(lines)} errors in the policy"
        shown = lines[:_MAX_LISTED_ERRORS]
        if len(lines) > len(shown):
            shown.append(f"... and {len(lines) - len(shown)} more (all of them are in the exception's .errors)")
        return head + ":\n" + "\n".join("  " + line for line in shown)

    def __str__(self) -> str:
        return self._render()


_MAX_LISTED_ERRORS = 200


def _render_error(path: str, message: str) -> str:
    return f"{path or 'policy'}: {message}"


class PolicyWarning(UserWarning):
    """Something in a valid policy that is probably a mistake, such as a rule that can never
    match because earlier rules cover it."""


def _describe(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({_int_text(value)})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({text!r})"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


def _int_text(number: int) -> str:
    """An integer as text; one too long to print in full (Python refuses past 4300 digits) by its
    order of magnitude."""
    if number.bit_length() <= _MAX_PRINTED_BITS:
        return str(number)
    return f"{'-' if number < 0 else ''}about 10^{math.floor(math.log10(abs(number)))}"


_MAX_PRINTED_BITS = 128


def _shown(value: object) -> str:
    """A value as an error quotes it: a scalar as Python writes it (an integer too long for that
    by its size), anything else described (a list's repr could be any length or depth)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_text(value)
    if isinstance(value, (str, float, bool)) or value is None:
        return repr(value)
    return _describe(value)


def _or_list(words: Sequence[str]) -> str:
    quoted = [repr(w) for w in words]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    choices = list(choices)
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close:
        lower = {c.lower(): c for c in choices}
        if word.lower() in lower:
            close = [lower[word.lower()]]
    return f"; did you mean {close[0]!r}?" if close else ""


def _at(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if not key.isprintable():  # quoted, so that a newline in a key cannot break its error's line
        return f"{path}[{key!r}]"
    return f"{path}.{key}" if path else key
