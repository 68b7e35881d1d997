"""Two schema libraries, pydantic v2 and msgspec, against isolane's own checker on the policy format.

    python bench/schema_library_compare.py [--tenants 10000] [--repeat 5]

The document's raw shape (every key of docs/policy.md and docs/qos.md, with its type and its
allowed values) is written as models in each library; quantities are strings checked by calling
``isolane.policy.units``' parsers and prefixes by isolane's prefix parser, so that the libraries
do the same work the checker does on them. Then:

* **time**: a document of ``--tenants`` tenants, each ``{name, vnis: [n], rate: 10Mbps, ceil: 1Gbps,
  meter: {kind: srtcm, cir: 10Mbps}, rules: [{dst: 10.x.y.0/24, dst_ports: 443, proto: tcp,
  action: allow}]}``, validated by each library (median of ``--repeat`` runs), beside
  ``isolane.Policy.from_dict`` (the whole read: every check, the warnings, the rule tables the
  shadowed-rule warning needs) and the checker's per-tenant pass alone (``_Checker.tenant``, the
  part a library's structural pass would stand in for);
* **messages**: what each gives for typical mistakes, one at a time in ``tenants[3]`` of a small
  document, and how many of six mistakes in one document each reports;
* **weight**: installed size of the library and its dependencies, and the time to import it and
  define a model, in a fresh interpreter.

Models here are for measuring only; ``isolane.policy.schema`` holds the ones isolane uses.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.metadata
import ipaddress
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

import msgspec
import pydantic
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, TypeAdapter

import isolane
from isolane.policy import addresses, units
from isolane.policy.constants import DSCP_NAMES, MAX_PORT, MAX_PRIORITY, MAX_VLAN, MAX_VNI, MAX_WEIGHT, PROTOCOLS
from isolane.policy.validate import _Checker

Action = Literal["allow", "drop"]
CountMode = Literal["inner", "outer", "wire", "wire_fcs"]
Colour = Literal["green", "yellow", "red"]
ProtoName = Literal[tuple(PROTOCOLS)]  # type: ignore[valid-type]
DscpName = Literal[tuple(DSCP_NAMES)]  # type: ignore[valid-type]


# The parsers every side calls, by kind; stub_parsers() swaps them for near no-ops, to show what
# the structure costs by itself.
PARSERS: dict[str, Callable[[Any], Any]] = {
    "rate": units.parse_rate,
    "size": units.parse_size,
    "duration": units.parse_duration,
    "prefix": addresses._parse_prefix,
}


def _parsed(kind: str) -> Callable[[Any], Any]:
    """A check that runs an isolane parser and keeps the raw value (the models hold the raw shape)."""

    def check(value: Any) -> Any:
        PARSERS[kind](value)
        return value

    return check


def _prefix(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f"expected a prefix such as '10.0.0.0/8' or 'fd00::/64', got {value!r}")
    parsed = PARSERS["prefix"](value)
    if isinstance(parsed, str):
        raise ValueError(parsed)
    return value


@contextlib.contextmanager
def stub_parsers() -> Iterator[None]:
    """Every side's unit and prefix parsers replaced by one that returns a fixed good value."""
    import isolane.policy.validate as validate

    network = ipaddress.ip_network("10.0.0.0/24")
    stubs = {"rate": lambda v: 80_000_000, "size": lambda v: 1500, "duration": lambda v: 10_000, "prefix": lambda v: network}
    names = {"rate": "parse_rate", "size": "parse_size", "duration": "parse_duration", "prefix": "_parse_prefix"}
    saved = dict(PARSERS)
    PARSERS.update(stubs)
    for kind, name in names.items():
        setattr(validate, name, stubs[kind])
    try:
        yield
    finally:
        PARSERS.update(saved)
        for kind, name in names.items():
            setattr(validate, name, saved[kind])


# -- pydantic v2 -------------------------------------------------------------------------------

# Quantities take any value and hand it to isolane's parser, whose message is better than a
# type error ("5 has no unit: write it as a string with its unit, e.g. '40Gbps'").
PRate = Annotated[Any, AfterValidator(_parsed("rate"))]
PSize = Annotated[Any, AfterValidator(_parsed("size"))]
PDuration = Annotated[Any, AfterValidator(_parsed("duration"))]
PPrefix = Annotated[Any, AfterValidator(_prefix)]
PName = Annotated[StrictStr, Field(min_length=1, pattern=r"\S")]
PPortNumber = Annotated[StrictInt, Field(ge=0, le=MAX_PORT)]
PPort = PPortNumber | Annotated[StrictStr, Field(pattern=addresses.PORT_PATTERN)]
PPorts = PPort | Annotated[list[PPort | Annotated[list[PPortNumber], Field(min_length=2, max_length=2)]], Field(min_length=1)]
PProto = Annotated[StrictInt, Field(ge=0, le=255)] | ProtoName
PDscp = Annotated[StrictInt, Field(ge=0, le=63)] | DscpName
PWeight = Annotated[StrictInt, Field(ge=1, le=MAX_WEIGHT)]


class _P(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PRemark(_P):
    remark: PDscp


PColourAction = Literal["pass", "drop"] | PRemark


class PActions(_P):
    green: PColourAction | None = None
    yellow: PColourAction | None = None
    red: PColourAction | None = None


class _PMeter(_P):
    cir: PRate
    cbs: PSize | None = None
    color_aware: StrictBool = False
    count: CountMode | None = None
    actions: PActions | None = None


class PSrTcm(_PMeter):
    kind: Literal["srtcm"]
    ebs: PSize | None = None


class PTrTcm(_PMeter):
    kind: Literal["trtcm"]
    pir: PRate
    pbs: PSize | None = None


class PRfc4115(_PMeter):
    kind: Literal["rfc4115"]
    eir: PRate
    ebs: PSize | None = None


PMeter = Annotated[PSrTcm | PTrTcm | PRfc4115, Field(discriminator="kind")]


class PShaper(_P):
    rate: PRate | None = None
    burst: PSize | None = None
    queue: PSize | None = None
    max_delay: PDuration | None = None


class PQueueView(_P):
    rise: PSize
    fall: PSize | None = None


class PMicroburst(_P):
    window: PDuration
    threshold: StrictStr
    queue: PQueueView | PSize | None = None


class _PContract(_P):
    rate: PRate | None = None
    burst: PSize | None = None
    ceil: PRate | None = None
    meter: PMeter | None = None
    shaper: PShaper | None = None
    microburst: PMicroburst | None = None


class PRule(_P):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    name: StrictStr | None = None
    description: StrictStr | None = None
    src: PPrefix | None = None
    dst: PPrefix | None = None
    src_ports: PPorts | None = None
    dst_ports: PPorts | None = None
    proto: PProto | Annotated[list[PProto], Field(min_length=1)] | None = None
    dscp: PDscp | Annotated[list[PDscp], Field(min_length=1)] | None = None
    action: Action
    class_: PName | None = Field(None, alias="class")


class PClass(_PContract):
    name: PName
    description: StrictStr | None = None
    priority: Annotated[StrictInt, Field(ge=0, le=MAX_PRIORITY)] | None = None
    weight: PWeight | None = None


class PTenant(_PContract):
    name: PName
    description: StrictStr | None = None
    vnis: list[Annotated[StrictInt, Field(ge=0, le=MAX_VNI)]] = []
    vlans: list[Annotated[StrictInt, Field(ge=0, le=MAX_VLAN)]] = []
    sources: list[PPrefix] = []
    weight: PWeight | None = None
    classes: Annotated[list[PClass], Field(min_length=1)] | None = None
    default_class: PName | None = None
    default: Action = "allow"
    rules: list[PRule] = []


class PPort_(_P):
    rate: PRate
    buffer: PSize
    mode: Literal["per_tenant", "shared_fifo"] = "per_tenant"
    alpha: float = 1
    reserve: PSize | None = None
    microburst: PMicroburst | None = None


class PPolicy(_P):
    version: Literal[1] = 1
    description: StrictStr | None = None
    unknown_tenant: Action = "drop"
    count: CountMode = "outer"
    largest_frame: PSize | None = None
    color_map: dict[DscpName | Annotated[StrictInt, Field(ge=0, le=63)] | Annotated[StrictStr, Field(pattern=r"^[0-9]+$")], Colour] | None = None
    port: PPort_ | None = None
    tenants: list[PTenant]


PYDANTIC = TypeAdapter(PPolicy)


def pydantic_validate(doc: Any) -> Any:
    return PYDANTIC.validate_python(doc)


def pydantic_errors(doc: Any) -> list[tuple[str, str]]:
    try:
        pydantic_validate(doc)
    except pydantic.ValidationError as err:
        return [(_pydantic_place(e["loc"]), e["msg"]) for e in err.errors(include_url=False)]
    return []


def _pydantic_place(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# -- msgspec -----------------------------------------------------------------------------------


class _Quantity(str):
    kind: str


class Rate(_Quantity):
    kind = "rate"


class Size(_Quantity):
    kind = "size"


class Duration(_Quantity):
    kind = "duration"


class Prefix(str):
    pass


def _msgspec_hook(kind: type, value: Any) -> Any:
    """msgspec calls this for the custom types: run isolane's parser (a ValueError becomes a
    ValidationError at the value's place)."""
    if issubclass(kind, _Quantity):
        PARSERS[kind.kind](value)
        return kind(value)
    if kind is Prefix:
        return Prefix(_prefix(value))
    raise NotImplementedError(kind)


MName = Annotated[str, msgspec.Meta(min_length=1, pattern=r"\S")]
# msgspec 0.21 and 0.22 crash on this schema's ports as first written, a number with bounds or text with
# isolane's PORT_PATTERN in a union with a list: the interpreter aborts at exit ("double free or
# corruption", MSGSPEC_CRASH below) or segfaults in the garbage collector during convert(). So a
# port here is any integer or string.
MPortNumber = int
MPortText = str
MPorts = MPortNumber | MPortText | Annotated[list[MPortNumber | MPortText | tuple[MPortNumber, MPortNumber]], msgspec.Meta(min_length=1)]
# ... and one str type, so a protocol's name is any string here (isolane's checker looks it up).
MProto = Annotated[int, msgspec.Meta(ge=0, le=255)] | str
MWeight = Annotated[int, msgspec.Meta(ge=1, le=MAX_WEIGHT)]


class _M(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    pass


class MRemark(_M):
    remark: Annotated[int, msgspec.Meta(ge=0, le=63)] | str


class MActions(_M):
    green: str | MRemark | None = None
    yellow: str | MRemark | None = None
    red: str | MRemark | None = None


class _MMeter(_M, tag_field="kind"):
    cir: Rate
    cbs: Size | None = None
    color_aware: bool = False
    count: CountMode | None = None
    actions: MActions | None = None


class MSrTcm(_MMeter, tag="srtcm"):
    ebs: Size | None = None


class MTrTcm(_MMeter, tag="trtcm", kw_only=True):
    pir: Rate
    pbs: Size | None = None


class MRfc4115(_MMeter, tag="rfc4115", kw_only=True):
    eir: Rate
    ebs: Size | None = None


class MShaper(_M):
    rate: Rate | None = None
    burst: Size | None = None
    queue: Size | None = None
    max_delay: Duration | None = None


class MQueueView(_M):
    rise: Size
    fall: Size | None = None


class MMicroburst(_M):
    window: Duration
    threshold: str
    # msgspec takes no custom type in a union: a queue's size is any string here.
    queue: str | MQueueView | None = None


class MRule(_M):
    action: Action
    name: str | None = None
    description: str | None = None
    src: Prefix | None = None
    dst: Prefix | None = None
    src_ports: MPorts | None = None
    dst_ports: MPorts | None = None
    proto: MProto | Annotated[list[MProto], msgspec.Meta(min_length=1)] | None = None
    dscp: Annotated[int, msgspec.Meta(ge=0, le=63)] | str | list[int | str] | None = None
    class_: MName | None = msgspec.field(default=None, name="class")


class MClass(_M):
    name: MName
    description: str | None = None
    priority: Annotated[int, msgspec.Meta(ge=0, le=MAX_PRIORITY)] | None = None
    weight: MWeight | None = None
    rate: Rate | None = None
    burst: Size | None = None
    ceil: Rate | None = None
    meter: MSrTcm | MTrTcm | MRfc4115 | None = None
    shaper: MShaper | None = None
    microburst: MMicroburst | None = None


class MTenant(_M):
    name: MName
    description: str | None = None
    vnis: list[Annotated[int, msgspec.Meta(ge=0, le=MAX_VNI)]] = []
    vlans: list[Annotated[int, msgspec.Meta(ge=0, le=MAX_VLAN)]] = []
    sources: list[Prefix] = []
    weight: MWeight | None = None
    rate: Rate | None = None
    burst: Size | None = None
    ceil: Rate | None = None
    meter: MSrTcm | MTrTcm | MRfc4115 | None = None
    shaper: MShaper | None = None
    microburst: MMicroburst | None = None
    classes: Annotated[list[MClass], msgspec.Meta(min_length=1)] | None = None
    default_class: MName | None = None
    default: Action = "allow"
    rules: list[MRule] = []


class MPort(_M):
    rate: Rate
    buffer: Size
    mode: Literal["per_tenant", "shared_fifo"] = "per_tenant"
    alpha: float = 1
    reserve: Size | None = None
    microburst: MMicroburst | None = None


class MPolicy(_M):
    tenants: list[MTenant]
    version: Literal[1] = 1
    description: str | None = None
    unknown_tenant: Action = "drop"
    count: CountMode = "outer"
    largest_frame: Size | None = None
    color_map: dict[str, Colour] | None = None
    port: MPort | None = None


def msgspec_validate(doc: Any) -> Any:
    return msgspec.convert(doc, MPolicy, dec_hook=_msgspec_hook)


def msgspec_errors(doc: Any) -> list[tuple[str, str]]:
    try:
        msgspec_validate(doc)
    except msgspec.ValidationError as err:
        message, _, place = str(err).rpartition(" - at `")
        if not message:
            return [("", str(err))]
        return [(place.rstrip("`").removeprefix("$").lstrip("."), message)]
    return []


# -- isolane today -----------------------------------------------------------------------------


def isolane_from_dict(doc: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", isolane.PolicyWarning)
        return isolane.Policy.from_dict(doc)


def checker_tenants(doc: Any) -> list[tuple[str, str]]:
    """The checker's per-tenant pass alone (what a library's structural pass could stand in for)."""
    ck = _Checker()
    for i, tenant in enumerate(doc["tenants"]):
        ck.tenant(tenant, f"tenants[{i}]")
    return ck.errors


def parsers_alone(doc: Any) -> None:
    for tenant in doc["tenants"]:
        PARSERS["rate"](tenant["rate"])
        PARSERS["rate"](tenant["ceil"])
        PARSERS["rate"](tenant["meter"]["cir"])
        PARSERS["prefix"](tenant["rules"][0]["dst"])


def isolane_errors(doc: Any) -> list[tuple[str, str]]:
    try:
        isolane_from_dict(doc)
    except isolane.PolicyError as err:
        return list(err.errors)
    return []


# -- the documents -----------------------------------------------------------------------------


def document(n: int) -> dict[str, Any]:
    return {
        "tenants": [
            {
                "name": f"t{i}",
                "vnis": [i + 1],
                "rate": "10Mbps",
                "ceil": "1Gbps",
                "meter": {"kind": "srtcm", "cir": "10Mbps"},
                "rules": [{"dst": f"10.{i // 256 % 256}.{i % 256}.0/24", "dst_ports": 443, "proto": "tcp", "action": "allow"}],
            }
            for i in range(n)
        ]
    }


def _edit(doc: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    change(out["tenants"][3])
    return out


MISTAKES: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("unknown key, a typo: rulez", lambda t: t.update(rulez=t.pop("rules"))),
    ("a size where a rate goes: rate '10 Gbit'", lambda t: t.update(rate="10 Gbit")),
    ("a wrong type: vnis '100'", lambda t: t.update(vnis="100")),
    ("a missing name", lambda t: t.pop("name")),
    ("a meter kind's case: srTCM", lambda t: t["meter"].update(kind="srTCM")),
    ("an unknown action: permit", lambda t: t["rules"][0].update(action="permit")),
]

LIBRARIES: list[tuple[str, Callable[[Any], list[tuple[str, str]]]]] = [
    ("isolane _Checker", isolane_errors),
    (f"pydantic {pydantic.VERSION}", pydantic_errors),
    (f"msgspec {msgspec.__version__}", msgspec_errors),
]


def _median_time(run: Callable[[Any], Any], doc: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        addresses._parse_prefix.cache_clear()  # each run parses its prefixes afresh
        start = time.perf_counter()
        run(doc)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


_DISTRIBUTIONS = {
    "pydantic": ("pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions"),
    "msgspec": ("msgspec",),
}
_IMPORT = {
    "pydantic": "import pydantic\nclass M(pydantic.BaseModel):\n    a: int\nM(a=1)",
    "msgspec": "import msgspec\nclass M(msgspec.Struct):\n    a: int\nmsgspec.convert({'a': 1}, M)",
}


def _installed_kib(names: tuple[str, ...]) -> int:
    total = 0
    for name in names:
        dist = importlib.metadata.distribution(name)
        total += sum(f.size or 0 for f in dist.files or ())
    return total // 1024


def _import_ms(code: str, repeat: int) -> float:
    timed = f"import time\nstart = time.perf_counter()\n{code}\nprint(time.perf_counter() - start)"
    runs = [float(subprocess.run([sys.executable, "-c", timed], capture_output=True, text=True, check=True).stdout) for _ in range(repeat)]
    return statistics.median(runs) * 1000


MSGSPEC_CRASH = f"""
from typing import Annotated, Union
import msgspec
class Rule(msgspec.Struct):
    dst_ports: Union[Annotated[str, msgspec.Meta(pattern={addresses.PORT_PATTERN!r})], list[int], None] = None
print(msgspec.convert({{"dst_ports": "80"}}, Rule))
"""
"""A port as text or a list of ports, the text checked by isolane's PORT_PATTERN."""


def _crash_probe() -> str:
    run = subprocess.run([sys.executable, "-c", MSGSPEC_CRASH], capture_output=True, text=True)
    if run.returncode == 0:
        return "exits cleanly"
    return f"exit status {run.returncode} after printing {run.stdout.strip()!r}; stderr {run.stderr.strip()[-60:]!r}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    doc = document(args.tenants)
    for name, check in LIBRARIES:  # the document is valid for all of them
        assert check(doc) == [], (name, check(doc)[:3])
    print(f"## Validating a {args.tenants:,}-tenant document (median of {args.repeat}, Python {sys.version.split()[0]})\n")
    print("| what | time | per tenant | with the parsers stubbed |")
    print("|---|---:|---:|---:|")
    runs = [
        ("isolane `Policy.from_dict` (every check, warnings, rule tables)", isolane_from_dict),
        ("isolane `_Checker.tenant` on each tenant (the checks a library's pass would stand in for)", checker_tenants),
        (f"pydantic {pydantic.VERSION} `TypeAdapter.validate_python`", pydantic_validate),
        (f"msgspec {msgspec.__version__} `msgspec.convert`", msgspec_validate),
        ("the parsers alone (3 rates and a prefix a tenant)", parsers_alone),
    ]
    for label, run in runs:
        seconds = _median_time(run, doc, args.repeat)
        with stub_parsers():
            stubbed = _median_time(run, doc, args.repeat) if run is not parsers_alone else None
        cell = "" if stubbed is None else f"{stubbed * 1000:.0f} ms"
        print(f"| {label} | {seconds * 1000:.0f} ms | {seconds / args.tenants * 1e6:.1f} us | {cell} |")

    small = document(10)
    print("\n## Messages: one mistake in tenants[3] of a 10-tenant document\n")
    for what, change in MISTAKES:
        bad = _edit(small, change)
        print(f"**{what}**\n")
        for name, check in LIBRARIES:
            found = check(bad)
            shown = "; ".join(f"`{place}`: {message}" for place, message in found) or "(accepted)"
            print(f"- {name} ({len(found)}): {shown}")
        print()

    every = copy.deepcopy(small)
    for k, (_, change) in enumerate(MISTAKES):
        change(every["tenants"][k + 2])
    print(f"## All {len(MISTAKES)} mistakes at once (tenants[2] to tenants[{len(MISTAKES) + 1}])\n")
    print("| library | errors reported |")
    print("|---|---:|")
    for name, check in LIBRARIES:
        print(f"| {name} | {len(check(every))} |")

    print("\n## Weight\n")
    print("| library | installed (with its dependencies) | import and define a model |")
    print("|---|---:|---:|")
    for name, dists in _DISTRIBUTIONS.items():
        print(f"| {name} ({', '.join(dists)}) | {_installed_kib(dists):,} KiB | {_import_ms(_IMPORT[name], args.repeat):.0f} ms |")
    print(f"\nmsgspec {msgspec.__version__}, a Struct with `Union[Annotated[str, Meta(pattern=PORT_PATTERN)], list[int], None]`: {_crash_probe()}")


if __name__ == "__main__":
    main()
