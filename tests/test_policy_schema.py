"""The policy's shape is written once (isolane/policy/schema.py): the JSON Schema generated from it
accepts every valid policy in the repository and rejects invalid ones, and the checker accepts and
requires exactly the keys the schema lists at every place of a document, so the two cannot drift."""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import tomllib
import yaml  # type: ignore[import-untyped]

from isolane import policy as P
from isolane.cli import main
from isolane.policy import Policy, PolicyError, PolicyWarning
from isolane.policy.constants import METER_KINDS
from support.locations import ROOT
from support.policy_edits import DELETE, edited

SCHEMA = P.schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def problems(data: Any) -> list[tuple[str, str]]:
    """What the checker reports about ``data`` (nothing for a valid policy)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        try:
            Policy.from_dict(data)
        except PolicyError as err:
            return err.errors
    return []


def test_the_schema_is_draft_2020_12_and_what_the_cli_prints(capsys: pytest.CaptureFixture[str]) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == SCHEMA
    assert P.schema() is not P.schema()  # each caller gets its own


# ---------------------------------------------------------------------------------------------
# Every valid policy in the repository
# ---------------------------------------------------------------------------------------------


def _doc_blocks(text: str) -> Iterator[Any]:
    for lang, body in re.findall(r"```(yaml|toml)\n(.*?)```", text, re.S):
        yield yaml.safe_load(body) if lang == "yaml" else tomllib.loads(body)


def _policies_in(value: Any, depth: int = 0) -> Iterator[Any]:
    """Policy-shaped data in a test module's value: mappings with tenants, and YAML or TOML text of one."""
    if depth > 4:
        return
    if isinstance(value, dict):
        if "tenants" in value:
            yield value
        for item in value.values():
            yield from _policies_in(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _policies_in(item, depth + 1)
    elif isinstance(value, str) and "tenants" in value and "\n" in value:
        for parse in (yaml.safe_load, tomllib.loads):
            try:
                parsed = parse(value)
            except Exception:
                continue
            if isinstance(parsed, dict) and "tenants" in parsed:
                yield parsed
                return


def _literal_policies(source: str) -> Iterator[tuple[int, Any]]:
    """Policies written as literals in a test's source (in a function too): (line, data)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "tenants" for k in node.keys):
            try:
                yield node.lineno, ast.literal_eval(node)
            except ValueError:  # built from names or calls
                continue
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "tenants:" in node.value:
            yield from ((node.lineno, data) for data in _policies_in(node.value))


def repository_policies() -> list[tuple[str, Any]]:
    """The sample policies, the docs' examples, and the tests' policies: their module-level
    values (computed ones too) and the literals in their source."""
    found: list[tuple[str, Any]] = [(str(path.relative_to(ROOT)), yaml.safe_load(path.read_text())) for path in sorted((ROOT / "pcaps").glob("*.yaml"))]
    for doc in (ROOT / "docs").glob("*.md"):
        found += [(f"{doc.name}[{i}]", data) for i, data in enumerate(_doc_blocks(doc.read_text()))]
    tests = ROOT / "tests"
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))
    for module_path in sorted(tests.glob("*.py")):
        if module_path.stem == __name__:
            continue
        found += [(f"{module_path.name}:{line}", data) for line, data in _literal_policies(module_path.read_text())]
        if module_path.stem.startswith("test_"):
            module = importlib.import_module(module_path.stem)
            for name, value in vars(module).items():
                if name.isupper():
                    found += [(f"{module_path.stem}.{name}[{i}]", data) for i, data in enumerate(_policies_in(value))]
    return found


REPOSITORY = repository_policies()
VALID = [(name, data) for name, data in REPOSITORY if not problems(data)]


def test_the_repository_has_policies_to_check() -> None:
    names = {re.split(r"[.:\[]", name)[0] for name, _ in VALID}
    assert {"pcaps/tenants", "policy", "qos", "bursts", "test_policy", "test_policy_qos", "test_bursts", "test_engine_qos"} <= names
    assert len(VALID) >= 50


@pytest.mark.parametrize(("name", "data"), VALID, ids=[name for name, _ in VALID])
def test_the_schema_accepts_every_valid_policy_in_the_repository(name: str, data: Any) -> None:
    assert [e.message for e in VALIDATOR.iter_errors(data)] == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PolicyWarning)
        canonical = Policy.from_dict(data).to_dict()
    assert [e.message for e in VALIDATOR.iter_errors(canonical)] == []
    assert [e.message for e in VALIDATOR.iter_errors(json.loads(json.dumps(data)))] == []  # as JSON: keys are text


BASE = {"tenants": [{"name": "a", "vnis": [1], "rate": "1Gbps", "rules": [{"dst": "10.0.0.0/8", "action": "allow"}]}]}
T0 = ["tenants", 0]

INVALID: list[tuple[list[Any], Any]] = [
    ([], None),  # an empty document
    (["tenants"], None),  # null is never a value: an optional key is left out
    ([*T0, "rate"], None),
    ([*T0, "description"], None),
    ([*T0, "rules", 0, "dst"], None),
    (["version"], True),
    (["tenants"], {"name": "a"}),
    ([*T0, "classes"], [{"priority": 1}]),  # a class without a name
    ([*T0, "name"], "   "),
    ([*T0, "vnis"], [1, 1]),
    ([*T0, "rate"], "1Gbit"),  # a size
    ([*T0, "rate"], 1_000_000_000),  # no unit
    ([*T0, "meter"], {"kind": "srtcm", "cir": "1Gbps", "pbs": "1MiB"}),
    ([*T0, "meter"], {"kind": "trtcm", "cir": "1Gbps"}),
    ([*T0, "meter"], {"kind": "srtcm", "cir": "1Gbps", "actions": {"red": {"remark": "af12", "drop": True}}}),
    ([*T0, "microburst"], {"window": "10us", "threshold": "80"}),
    ([*T0, "microburst"], {"window": "10us", "threshold": "80%", "queue": {"fall": "1KiB"}}),
    ([*T0, "rules", 0, "src_ports"], [[1, 2, 3]]),
    ([*T0, "rules", 0, "proto"], ["tcp", "tcpp"]),
    ([*T0, "default"], "deny"),
    (["port"], {"rate": "100Gbps", "buffer": "16MiB", "alpha": 3}),
    (["port"], {"rate": "100Gbps", "buffer": "16MiB", "reserve": 5}),
    (["color_map"], {"af12": "amber"}),
    (["color_map"], {"ef": None}),
    (["largest_frame"], "9216"),
]


@pytest.mark.parametrize(("path", "value"), INVALID, ids=[".".join(map(str, p)) + f"={v!r}"[:40] for p, v in INVALID])
def test_the_schema_and_the_checker_reject(path: list[Any], value: Any) -> None:
    data = edited(BASE, path, value) if path else value
    assert not VALIDATOR.is_valid(data), "the schema accepts it"
    assert problems(data), "isolane accepts it"


# ---------------------------------------------------------------------------------------------
# The keys the checker takes are the schema's, at every place
# ---------------------------------------------------------------------------------------------

# Every mapping of the format, each key given.
FULL: dict[str, Any] = {
    "version": 1,
    "description": "every mapping, every key",
    "unknown_tenant": "drop",
    "count": "outer",
    "largest_frame": "9216B",
    "color_map": {"af12": "yellow"},
    "port": {
        "rate": "400Gbps",
        "buffer": "64MiB",
        "mode": "per_tenant",
        "alpha": 1,
        "reserve": "1MiB",
        "microburst": {"window": "10us", "threshold": "90%", "queue": {"rise": "1MiB", "fall": "512KiB"}},
        "overload": {"above": "80%", "below": "8MiB", "stagger": "50us"},
    },
    "tenants": [
        {
            "name": "a",
            "description": "tenant a",
            "vnis": [1],
            "vlans": [2],
            "sources": ["192.0.2.0/28"],
            "weight": 1,
            "rate": "10Gbps",
            "burst": "2MiB",
            "ceil": "20Gbps",
            "meter": {
                "kind": "trtcm",
                "cir": "10Gbps",
                "cbs": "2MiB",
                "pir": "20Gbps",
                "pbs": "4MiB",
                "color_aware": False,
                "count": "wire",
                "actions": {"green": "pass", "yellow": {"remark": "af12"}, "red": "drop"},
            },
            "shaper": {"rate": "20Gbps", "burst": "1MiB", "queue": "4MiB", "max_delay": "2ms"},
            "microburst": {"window": "10us", "threshold": "15Gbps", "queue": "1MiB"},
            "on_burst": {
                "meter": {"kind": "srtcm", "cir": "5Gbps"},
                "shaper": {"rate": "15Gbps"},
                "priority": 6,
                "weight": 2,
                "hold": "200us",
                "max_switches": 1000,
            },
            "on_overload": {"meter": {"kind": "srtcm", "cir": "10Gbps"}, "shaper": {"queue": "1MiB"}, "priority": 7, "weight": 1, "borrow": False},
            "classes": [
                {
                    "name": "gold",
                    "description": "class gold",
                    "priority": 0,
                    "weight": 2,
                    "rate": "5Gbps",
                    "burst": "1MiB",
                    "ceil": "10Gbps",
                    "meter": {"kind": "srtcm", "cir": "5Gbps", "cbs": "1MiB", "ebs": "1MiB"},
                    "shaper": {"rate": "10Gbps"},
                    "microburst": {"window": "1us", "threshold": "50%"},
                    "on_burst": {"shaper": {"queue": "256KiB"}, "priority": 1, "weight": 1, "hold": "100us"},
                },
                {"name": "bulk"},
            ],
            "default_class": "bulk",
            "default": "drop",
            "rules": [
                {
                    "name": "web",
                    "description": "rule web",
                    "src": "10.0.0.0/8",
                    "dst": "10.1.0.0/16",
                    "src_ports": "1024-65535",
                    "dst_ports": [443, [8000, 8080]],
                    "proto": "tcp",
                    "dscp": ["af41", 46],
                    "action": "allow",
                    "class": "gold",
                },
                {"name": "arp", "ethertype": "arp", "action": "allow", "class": "gold"},
            ],
        },
        {"name": "b", "vnis": [3], "weight": 1, "meter": {"kind": "rfc4115", "cir": "1Gbps", "cbs": "1MiB", "eir": "1Gbps", "ebs": "1MiB"}},
    ],
}


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in node:
            node = SCHEMA["$defs"][node["$ref"].removeprefix("#/$defs/")]
        elif len(node.get("allOf", ())) == 1 and "$ref" in node["allOf"][0]:  # how older pydantic writes a $ref with a description
            node = node["allOf"][0]
        else:
            return node


def _branch(node: dict[str, Any], kind: str) -> dict[str, Any]:
    """The schema of ``node`` for a value of JSON type ``kind``, through $refs and anyOf."""
    node = _resolve(node)
    for option in node.get("anyOf", ()):
        option = _resolve(option)
        if option.get("type") == kind:
            return option
    return node


def mappings(value: Any = FULL, node: dict[str, Any] = SCHEMA, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]]:
    """Every mapping of ``value`` whose keys the schema names: (path, the mapping, its schema)."""
    if isinstance(value, dict):
        node = _branch(node, "object")
        if "properties" not in node:  # color_map: DSCPs, not keys
            return
        yield path, value, node
        for key, item in value.items():
            yield from mappings(item, node["properties"][key], (*path, key))
    elif isinstance(value, list):
        node = _branch(node, "array")
        for i, item in enumerate(value):
            yield from mappings(item, node.get("items", {}), (*path, i))


MAPPINGS = list(mappings())
KEYS = [(path, key) for path, mapping, _ in MAPPINGS for key in mapping]


def place(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def required_by_schema(node: dict[str, Any], mapping: dict[str, Any]) -> set[str]:
    required = set(node.get("required", ()))
    for rule in node.get("allOf", ()):  # the meter kinds
        kind = rule["if"]["properties"]["kind"]["const"]
        if mapping.get("kind") == kind:
            required |= set(rule["then"].get("required", ()))
    return required


def test_the_full_policy_is_valid_and_has_every_mapping() -> None:
    assert problems(FULL) == []
    assert VALIDATOR.is_valid(FULL)
    # every object of the schema is somewhere in FULL (the remark through the meter's actions)
    seen = {json.dumps(node, sort_keys=True) for _, _, node in MAPPINGS}
    defined = {json.dumps(node, sort_keys=True) for node in [SCHEMA, *SCHEMA["$defs"].values()]}
    assert defined <= seen
    # every key of each of them is given somewhere
    given: dict[str, set[str]] = {}
    for _, mapping, node in MAPPINGS:
        given.setdefault(json.dumps(node, sort_keys=True), set()).update(mapping)
    assert all(keys == set(json.loads(node)["properties"]) for node, keys in given.items())


@pytest.mark.parametrize(("path", "node"), [(p, n) for p, _, n in MAPPINGS], ids=[place(p) or "policy" for p, _, _ in MAPPINGS])
def test_the_checker_takes_the_keys_the_schema_lists(path: tuple[Any, ...], node: dict[str, Any]) -> None:
    """An unknown key makes the checker list the keys it takes there: the schema's, in its order."""
    data = edited(FULL, [*path, "zz_no_such_key"], 1)
    assert not VALIDATOR.is_valid(data)
    where = place((*path, "zz_no_such_key"))
    [message] = [m for p, m in problems(data) if p == where]
    listed = re.fullmatch(r"unknown key \(expected one of: (.*)\)", message)
    assert listed is not None, message
    assert listed.group(1).split(", ") == list(node["properties"])


@pytest.mark.parametrize(("path", "key"), KEYS, ids=[place((*p, k)) for p, k in KEYS])
def test_the_checker_needs_the_keys_the_schema_requires(path: tuple[Any, ...], key: str) -> None:
    """Leaving a key out is a missing key to the checker exactly when the schema requires it."""
    [(mapping, node)] = [(m, n) for p, m, n in MAPPINGS if p == path]
    data = edited(FULL, [*path, key], DELETE)
    required = key in required_by_schema(node, mapping)
    missing = [m for p, m in problems(data) if p == place(path) and m.startswith(f"missing key {key!r}")]
    assert bool(missing) == required
    assert VALIDATOR.is_valid(data) == (not required)


@pytest.mark.parametrize(("path", "key"), KEYS, ids=[place((*p, k)) for p, k in KEYS])
def test_the_checker_reads_every_key_the_schema_lists(path: tuple[Any, ...], key: str) -> None:
    """A key the schema lists is one the checker reads (not one it takes and ignores): a value of
    no type the key takes is an error there."""
    data = edited(FULL, [*path, key], {"zz_no_such_value": 1})
    assert not VALIDATOR.is_valid(data)
    where = place((*path, key))
    assert [p for p, _ in problems(data) if p == where or p.startswith((f"{where}.", f"{where}["))], problems(data)


METER = ["tenants", 1, "meter"]


@pytest.mark.parametrize("kind", list(METER_KINDS))
def test_each_meter_kind_takes_the_keys_the_schema_gives_it(kind: str) -> None:
    meter_schema = _resolve(SCHEMA["$defs"]["Meter"])
    base = {"kind": kind, **{key: "1Gbps" for key in required_by_schema(meter_schema, {"kind": kind}) if key != "kind"}}
    for key, value in {"cbs": "1MiB", "ebs": "1MiB", "pbs": "1MiB", "eir": "1Gbps", "pir": "1Gbps"}.items():
        data = edited(FULL, METER, {**base, key: value})
        assert VALIDATOR.is_valid(data) == (not problems(data)), (kind, key, problems(data))
