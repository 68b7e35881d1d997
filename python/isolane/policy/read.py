"""Reading policy files: YAML, TOML or JSON, chosen by the extension; what cannot be read is a
:class:`~isolane.policy.PolicyError`."""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isolane import _core
from isolane.policy.constants import RULE_VOCABULARY
from isolane.policy.errors import PolicyError, _at

Sequence.register(_core.YamlStream)


def _read_file(path: str | os.PathLike[str], stream_tenants: bool = False) -> Any:
    """The document in the file at ``path``. ``stream_tenants``: a YAML document as a
    ``YamlStream``, read by the core on a thread of its own while its tenants are taken, each
    made a Python object as it is read (so that reading a policy never holds every tenant's
    document at once), with the rules the core found plainly valid; its errors are raised where
    it is read, inside :func:`yaml_errors`."""
    suffix = Path(path).suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml", ".json"):
        raise PolicyError(
            [("", f"cannot tell the format from the extension {suffix or '(none)'!r}: use .yaml, .yml, .toml or .json")],
            path,
        )
    raw = Path(path).read_bytes()  # FileNotFoundError as it is
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PolicyError([("", f"not UTF-8 text (byte {err.start})")], path) from None
    if suffix == ".toml":
        return _load_toml(text, path)
    if suffix == ".json":
        return _load_json(text, path)
    if stream_tenants:
        return _core.stream_yaml(text, "tenants", RULE_VOCABULARY)
    return _load_yaml(text, path)


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping = dict(pairs)
    if len(mapping) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return mapping


def _load_json(text: str, path: str | os.PathLike[str]) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicate_keys)
    except _DuplicateKey as dup:
        raise PolicyError([_json_duplicate(text, dup.key)], path) from None
    except json.JSONDecodeError as err:
        raise PolicyError([("", f"line {err.lineno}, column {err.colno}: {err.msg}")], path) from None
    except (RecursionError, ValueError) as err:  # nested too deep, or an integer too long for int()
        raise PolicyError([("", _unreadable(text, _JSON_TOKENS, err))], path) from None


def _load_toml(text: str, path: str | os.PathLike[str]) -> Any:
    try:
        toml: Any = importlib.import_module("tomllib")
    except ModuleNotFoundError:  # Python 3.10
        try:
            toml = importlib.import_module("tomli")
        except ModuleNotFoundError:
            raise PolicyError([("", "reading TOML needs Python 3.11 or the 'tomli' package")], path) from None
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as err:
        raise PolicyError([("", f"invalid TOML: {err}")], path) from None
    except (RecursionError, ValueError) as err:  # nested too deep, or an integer too long for int()
        raise PolicyError([("", _unreadable(text, _TOML_TOKENS, err))], path) from None


def _load_yaml(text: str, path: str | os.PathLike[str]) -> Any:
    """YAML 1.2 by its core schema, read by the Rust core (docs/policy.md, "YAML")."""
    with yaml_errors(path):
        return _core.load_yaml(text)


@contextmanager
def yaml_errors(path: str | os.PathLike[str]) -> Iterator[None]:
    """The core's YAML errors raised in the block, as the :class:`PolicyError` of ``path``."""
    try:
        yield
    except _core.DuplicateKeyError as err:
        raise PolicyError([("", str(err))], path) from None
    except _core.YamlError as err:
        raise PolicyError([("", f"invalid YAML: {err}")], path) from None


# What locating a problem in the text needs of it, strings and comments skipped whole so that
# what they hold is not taken for brackets or numbers.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]|[0-9]+')
_TOML_TOKENS = re.compile(
    r"'{3}.*?'{3}"  # multi-line literal string
    r'|"{3}(?:[^\\]|\\.)*?"{3}'  # multi-line basic string
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"'  # basic string
    r"|'[^'\n]*'"  # literal string
    r"|#[^\n]*"  # comment
    r"|[\[\]{}]|[0-9_]+",
    re.S,
)


@dataclass
class _Container:
    """An open JSON object or array, while its text is walked."""

    path: str
    keys: dict[str, int] | None  # an object's keys so far, at their offsets; None for an array
    key: str = ""  # the object's current key
    key_next: bool = True  # whether a key comes next in the object
    index: int = 0  # the array's current index

    def child(self) -> str:
        return _at(self.path, self.index if self.keys is None else self.key)


def _json_duplicate(text: str, key: str) -> tuple[str, str]:
    """(path of the object, problem) for the first key that repeats in its object: the decoder
    tells neither, so the text is walked again."""
    for where, repeated, first, again in _repeated_keys(text):
        return where, f"{_line_column(text, again)}: duplicate key {repeated!r} (first at {_line_column(text, first)})"
    return "", f"duplicate key {key!r}"


def _repeated_keys(text: str) -> Iterator[tuple[str, str, int, int]]:
    """(path of the object, key, offset of the key, offset of its repeat) for each key that
    repeats in a JSON text, without recursion (the nesting may be deep)."""
    open_: list[_Container] = []
    for token in _JSON_TOKENS.finditer(text):
        mark = token.group()
        if mark in ("{", "["):
            open_.append(_Container(open_[-1].child() if open_ else "", {} if mark == "{" else None))
            continue
        if mark in ("}", "]"):
            open_.pop()
            continue
        if not open_ or mark[0].isdigit():
            continue
        here = open_[-1]
        if here.keys is None:
            here.index += mark == ","
        elif mark in (",", ":"):
            here.key_next = mark == ","
        elif here.key_next:
            key = json.loads(mark)
            if key in here.keys:
                yield here.path, key, here.keys[key], token.start()
            here.keys.setdefault(key, token.start())
            here.key = key


def _unreadable(text: str, tokens: re.Pattern[str], err: BaseException) -> str:
    """Where a text the parser could not hold is: its deepest nesting (a RecursionError), or the
    first integer too long for Python's ``int`` (a ValueError)."""
    if isinstance(err, RecursionError):
        depth, deepest, at = 0, 0, 0
        for token in tokens.finditer(text):
            if token.group() in ("[", "{"):
                depth += 1
                if depth > deepest:
                    deepest, at = depth, token.start()
            elif token.group() in ("]", "}"):
                depth -= 1
        return f"{_line_column(text, at)}: nested {deepest} levels deep, too deep to read"
    most = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
    for token in tokens.finditer(text):
        digits = token.group().replace("_", "")
        if most and digits.isdigit() and len(digits) > most:
            return f"{_line_column(text, token.start())}: a number of {len(digits)} digits, too long to read (at most {most})"
    return f"cannot read it: {err}"


def _line_column(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - text.rfind("\n", 0, offset)
    return f"line {line}, column {column}"
