"""Reading policy files: YAML, TOML or JSON, chosen by the extension; what cannot be read is a
:class:`~isolane.policy.PolicyError`."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

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
    try:
        yaml: Any = importlib.import_module("yaml")
    except ModuleNotFoundError:
        raise PolicyError([("", "reading YAML needs the 'PyYAML' package (pip install pyyaml)")], path) from None

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        """SafeLoader that refuses duplicate keys instead of keeping the last one."""

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        loader.flatten_mapping(node)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise PolicyError([("", f"line {line}: duplicate key {key!r} (first at line {seen[key]})")], path)
                seen[key] = line
            except TypeError:  # an unhashable key: SafeLoader reports it below
                pass
        return loader.construct_mapping(node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise PolicyError([("", f"invalid YAML: {where}{problem}")], path) from None
