"""Reading policy files: YAML, TOML or JSON, chosen by the extension; what cannot be read is a
:class:`~isolane.policy.PolicyError`."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

from isolane import _core
from isolane.policy.errors import PolicyError


def _read_file(path: str | os.PathLike[str]) -> Any:
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
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise PolicyError([("", f"line {err.lineno}, column {err.colno}: {err.msg}")], path) from None
    return _load_yaml(text, path)


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


def _load_yaml(text: str, path: str | os.PathLike[str]) -> Any:
    """YAML 1.2 by its core schema, read by the Rust core (docs/policy.md, "YAML")."""
    try:
        return _core.load_yaml(text)
    except _core.DuplicateKeyError as err:
        raise PolicyError([("", str(err))], path) from None
    except _core.YamlError as err:
        raise PolicyError([("", f"invalid YAML: {err}")], path) from None
