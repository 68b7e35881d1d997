"""Validation: :class:`_Checker` reads the data of a policy piece by piece and collects every
problem: values by their shape (``validate_shapes``), QoS settings (``validate_qos``), then rules,
classes and tenants here; the checks across tenants and the warnings are in ``across``."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from isolane.policy.addresses import _PORT_TEXT_RE, Network, PortRange, _as_network, _families, _merge_ranges
from isolane.policy.compile import keep_rows
from isolane.policy.constants import (
    _CLASS_KEYS,
    _PROTO_NAME,
    _RULE_KEYS,
    _TENANT_KEYS,
    ACTIONS,
    DSCP_NAMES,
    ETHERTYPES,
    MAX_CLASSES,
    MAX_PORT,
    MAX_PRIORITY,
    MAX_RULE_EXPANSION,
    MAX_VLAN,
    MAX_VNI,
    MIN_ETHERTYPE,
    PORT_PROTOCOLS,
    PROTOCOLS,
    VLAN_TPIDS,
)
from isolane.policy.errors import _at, _describe, _did_you_mean, _int_text
from isolane.policy.model import Contract, Rule, Tenant, TrafficClass
from isolane.policy.profiles import read_class_profile, read_profiles
from isolane.policy.sharing import shared
from isolane.policy.units import (
    format_rate,
    read_number,
)
from isolane.policy.validate_qos import _QosChecks
from isolane.policy.validate_shapes import BAD, _Bad

#: The keys of a rule that match IP packets by their fields (none goes with ``ethertype``).
_IP_KEYS = ("src", "dst", "src_ports", "dst_ports", "proto", "dscp")

_RULE_KEY_SET = frozenset(_RULE_KEYS)

_T = TypeVar("_T")

_DEFAULT_CLASSES = (TrafficClass("default"),)
"""The classes of a tenant that names none."""

PlainRules = Callable[[list[str] | None, str | None], tuple[list[Rule | None], int, bytes | None] | None]
"""What makes a tenant's rules that the core found plainly valid (``YamlStream.plain_rules``), given
its class names and default class: the rules, None where one must be read here, how many are, and
where it made them all, their table rows."""

#: Values read by :meth:`_Checker.known`, by reader, type and value (``True`` is not ``1``).
_READ: dict[tuple[Any, ...], Any] = {}
_READ_LIMIT = 1 << 16
_NOT_READ = object()
_PLAIN = (str, int)


def _memo_key(read: Any, value: Any) -> tuple[Any, ...] | None:
    """The key of ``value`` read by ``read``: of a string, an integer or a flat list of them."""
    kind = value.__class__
    if kind in _PLAIN:
        return (read, kind, value)
    if kind is list and all(item.__class__ in _PLAIN for item in value):
        return (read, kind, *((item.__class__, item) for item in value))
    return None


class _Checker(_QosChecks):
    def port(self, value: Any, path: str, *, in_list: bool) -> PortRange | None:
        """One port or range: an integer, "port" or "lo-hi"; in a list also [lo, hi]."""
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value <= MAX_PORT:
                self.error(path, f"port {_int_text(value)} is outside 0-{MAX_PORT}")
                return None
            return (value, value)
        if isinstance(value, str):
            match = _PORT_TEXT_RE.fullmatch(value)
            if not match:
                self.error(path, f"{value!r} is not a port or a port range (write 80 or '8000-8080')")
                return None
            try:
                lo = int(read_number(match.group(1), value))
                hi = int(read_number(match.group(2), value)) if match.group(2) is not None else lo
            except ValueError as err:
                self.error(path, str(err))
                return None
            return self._range(lo, hi, path, value)
        if in_list and _is_int_pair(value):
            lo, hi = value
            return self._range(lo, hi, path, list(value))
        expected = "a port (integer) or a range ('80-90' or [80, 90])" if in_list else "a port (integer), a range ('80-90') or a list of them"
        self.error(path, f"expected {expected}, got {_describe(value)}")
        return None

    def _range(self, lo: int, hi: int, path: str, text: Any) -> PortRange | None:
        bad = [p for p in (lo, hi) if not 0 <= p <= MAX_PORT]
        if bad:
            self.error(path, f"port {_int_text(bad[0])} is outside 0-{MAX_PORT}")
            return None
        if lo > hi:
            fixed: Any = [hi, lo] if isinstance(text, list) else f"{hi}-{lo}"
            self.error(path, f"{text!r} is reversed ({lo} > {hi}); did you mean {fixed!r}?")
            return None
        return (lo, hi)

    def ports(self, value: Any, path: str) -> tuple[PortRange, ...] | None | _Bad:
        """A port or range, or a list of them: a list is never a range itself, so [80, 443] is
        two ports (a range in a list is "80-443" or [80, 443] as an entry)."""
        if isinstance(value, (list, tuple)):
            if not value:
                self.error(path, "an empty list matches no packet: leave the key out to match any port")
                return BAD
            ranges = [self.port(item, _at(path, i), in_list=True) for i, item in enumerate(value)]
            if any(r is None for r in ranges):
                return BAD
            merged = _merge_ranges(r for r in ranges if r is not None)
        else:
            one = self.port(value, path, in_list=False)
            if one is None:
                return BAD
            merged = (one,)
        return None if merged == ((0, MAX_PORT),) else merged

    def numbers(self, value: Any, path: str, names: Mapping[str, int], hi: int, what: str) -> tuple[int, ...] | _Bad:
        """proto / dscp: a name or number, or a list of them."""
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if isinstance(value, (list, tuple)) and not value:
            self.error(path, f"an empty list matches no packet: leave the key out to match any {what}")
            return BAD
        out: set[int] = set()
        ok = True
        for i, item in enumerate(items):
            where = _at(path, i) if isinstance(value, (list, tuple)) else path
            if isinstance(item, str):
                if item in names:
                    out.add(names[item])
                    continue
                hint = _did_you_mean(item, names) or f" (names: {', '.join(sorted(names))}; or a number 0-{hi})"
                self.error(where, f"{item!r} is not a {what} name{hint}")
                ok = False
                continue
            number = self.integer(item, where, 0, hi, what)
            if isinstance(number, _Bad):
                ok = False
            else:
                out.add(number)
        return tuple(sorted(out)) if ok else BAD

    def ethertype(self, value: Any, path: str) -> int | _Bad:
        """A rule's ``ethertype``: a name, a number, or a number in hexadecimal text ('0x88cc')."""
        if isinstance(value, str) and value.lower().startswith("0x"):
            try:
                value = int(value, 16)
            except ValueError:
                self.error(path, f"{value!r} is not a hexadecimal number")
                return BAD
        hints = ("an EtherType name", "a number such as 0x88cc")
        number = self.named_integer(value, path, ETHERTYPES, hints, MIN_ETHERTYPE, 0xFFFF, "EtherType", " (below 0x0600 the field is a length)")
        if number in VLAN_TPIDS:
            self.error(path, f"0x{number:04x} is a VLAN tag: isolane looks past VLAN tags to the frame's EtherType")
            return BAD
        return number

    def rule_name(self, value: Any, path: str) -> str | _Bad:
        return self.name(value, path, "a string")

    def action(self, value: Any, path: str) -> str | _Bad:
        return self.choice(value, path, ACTIONS, "an action")

    def protocols(self, value: Any, path: str) -> tuple[int, ...] | _Bad:
        return self.numbers(value, path, PROTOCOLS, 255, "protocol")

    def dscps(self, value: Any, path: str) -> tuple[int, ...] | _Bad:
        return self.numbers(value, path, DSCP_NAMES, 63, "DSCP")

    def known(self, read: Callable[[_Checker, Any, str], _T], data: Mapping[str, Any], key: str, path: str) -> _T:
        """``read(data[key])`` at ``path.key``, taken from the values read before when this one
        was: rules repeat most of their values (ports, protocols, actions), and these reads
        depend on the value alone. A value with errors is read again each time, for its place."""
        value = data[key]
        memo = _memo_key(read, value)
        found = _READ.get(memo, _NOT_READ) if memo is not None else _NOT_READ
        if found is not _NOT_READ:
            return found  # type: ignore[return-value]  # stored by the same reader
        errors_before = len(self.errors)
        result = read(self, value, _at(path, key))
        if memo is not None and len(self.errors) == errors_before:
            if len(_READ) >= _READ_LIMIT:
                _READ.clear()
            _READ[memo] = result
        return result

    def rule(self, value: Any, path: str, class_names: list[str] | None, default_class: str | None) -> Rule | None:
        simple = value.__class__ is dict and "action" in value and value.keys() <= _RULE_KEY_SET
        data = value if simple else self.mapping(value, path, _RULE_KEYS, required=("action",))
        if data is None:
            return None
        errors_before = len(self.errors)
        name = self.known(_Checker.rule_name, data, "name", path) if "name" in data else None
        description = self.string(data["description"], _at(path, "description")) if "description" in data else None
        action = self.known(_Checker.action, data, "action", path) if "action" in data else BAD
        cls: str | _Bad | None = None
        if "class" in data:
            cls = self.known(_Checker.name_reference, data, "class", path)
            if action == "drop":
                self.error(_at(path, "class"), "a drop rule puts packets in no class: remove 'class' or make the action 'allow'")
            elif isinstance(cls, str) and class_names is not None and cls not in class_names:
                hint = _did_you_mean(cls, class_names) or f" (the tenant's classes: {', '.join(map(repr, class_names))})"
                self.error(_at(path, "class"), f"unknown class {cls!r}{hint}")
        elif action == "allow":
            cls = default_class
        # Prefixes are mostly unique, and _parse_rule_prefix keeps its own cache.
        src = self.rule_prefix(data, path, "src") if "src" in data else None
        dst = self.rule_prefix(data, path, "dst") if "dst" in data else None
        if src is not None and dst is not None and not isinstance(src, _Bad) and not isinstance(dst, _Bad) and not (_families(src) & _families(dst)):
            src_net, dst_net = _as_network(src), _as_network(dst)
            self.error(
                _at(path, "dst"),
                f"{str(dst_net)!r} is IPv{dst_net.version} but src {str(src_net)!r} is IPv{src_net.version}: no packet can match both",
            )
        src_ports = self.known(_Checker.ports, data, "src_ports", path) if "src_ports" in data else None
        dst_ports = self.known(_Checker.ports, data, "dst_ports", path) if "dst_ports" in data else None
        proto = self.known(_Checker.protocols, data, "proto", path) if "proto" in data else None
        dscp = self.known(_Checker.dscps, data, "dscp", path) if "dscp" in data else None
        if isinstance(proto, tuple) and ("src_ports" in data or "dst_ports" in data):
            portless = [p for p in proto if p not in PORT_PROTOCOLS]
            if portless:
                names = ", ".join(repr(_PROTO_NAME.get(p, p)) for p in portless)
                self.error(
                    _at(path, "proto"),
                    f"{names} {'has' if len(portless) == 1 else 'have'} no ports, but the rule matches ports "
                    "(ports exist for tcp, udp, sctp, dccp and udplite)",
                )
        ethertype = self.known(_Checker.ethertype, data, "ethertype", path) if "ethertype" in data else None
        ip_keys = [key for key in _IP_KEYS if key in data] if ethertype is not None else None
        if ip_keys:
            self.error(
                _at(path, "ethertype"),
                f"a rule that matches frames by EtherType takes no IP keys: remove {', '.join(ip_keys)} (or ethertype, to match IP packets by their fields)",
            )
        if len(self.errors) > errors_before or isinstance(action, _Bad):
            return None
        # No value is BAD here: each BAD came with an error.
        rule = Rule(action, cls, src, dst, src_ports, dst_ports, proto, dscp, name, description, ethertype)  # type: ignore[arg-type]
        if rule.expansion > MAX_RULE_EXPANSION:
            self.error(path, f"the rule expands into {rule.expansion:,} table rules (at most {MAX_RULE_EXPANSION:,}): use port ranges")
            return None
        return rule

    # -- tenants and classes -------------------------------------------------------------------

    def traffic_class(self, value: Any, path: str) -> TrafficClass | None:
        data = self.mapping(value, path, _CLASS_KEYS, required=("name",))
        if data is None:
            return None
        before = len(self.errors)
        name = self.name(data["name"], _at(path, "name"), "a class name", non_empty=True) if "name" in data else BAD
        description = self.string(data["description"], _at(path, "description")) if "description" in data else None
        priority = self.integer(data["priority"], _at(path, "priority"), 0, MAX_PRIORITY, "priority") if "priority" in data else None
        weight = self.weight(data["weight"], _at(path, "weight")) if "weight" in data else None
        contract = self.contract(data, path)
        on_burst = read_class_profile(self, data, path, contract)
        if len(self.errors) > before or isinstance(name, _Bad):
            return None
        assert not isinstance(priority, _Bad) and not isinstance(weight, _Bad) and not isinstance(description, _Bad)
        return TrafficClass(name, priority, weight, contract, description, on_burst)

    def tenant(self, value: Any, path: str, plain_rules: PlainRules | None = None) -> Tenant | None:
        """The tenant ``value`` at ``path``, or None where it has errors. ``plain_rules``: what
        makes its rules that the core found plainly valid, which are taken as they are."""
        data = self.mapping(value, path, _TENANT_KEYS, required=("name",))
        if data is None:
            return None
        before = len(self.errors)
        name = self.name(data["name"], _at(path, "name"), "a tenant name", non_empty=True) if "name" in data else BAD
        description = self.string(data["description"], _at(path, "description")) if "description" in data else None
        vnis = self.unique_ints(data["vnis"], _at(path, "vnis"), MAX_VNI, "VNI", " (24 bits)") if "vnis" in data else ()
        vlans = self.unique_ints(data["vlans"], _at(path, "vlans"), MAX_VLAN, "VLAN id", " (12 bits)") if "vlans" in data else ()
        sources: list[Network] = []
        for i, item in enumerate(self.sequence(data["sources"], _at(path, "sources"), "prefixes") or [] if "sources" in data else ()):
            where = _at(_at(path, "sources"), i)
            prefix = self.prefix(item, where)
            if prefix is None:
                self.error(where, "'any' cannot be a source: list the prefixes the tenant owns")
            elif not isinstance(prefix, _Bad):
                sources.append(prefix)
        weight = self.weight(data["weight"], _at(path, "weight")) if "weight" in data else None
        contract = self.contract(data, path)

        # class_names stays None when a class could not be read: rules naming it are not reported.
        classes: Sequence[TrafficClass] = _DEFAULT_CLASSES
        class_names: list[str] | None = ["default"]
        if "classes" in data:
            classes_path = _at(path, "classes")
            items = self.sequence(data["classes"], classes_path, "classes (mappings with a name)")
            if items is not None and not items:
                self.error(classes_path, "a tenant needs at least one class: leave 'classes' out for one class 'default'")
            if items is not None and len(items) >= MAX_CLASSES:
                self.error(classes_path, f"at most {MAX_CLASSES - 1} classes")
            listed: list[TrafficClass] = []
            classes, class_names = listed, []
            seen: dict[str, tuple[int, str]] = {}  # each class name (NFC): where it is, and as written there
            for i, item in enumerate(items or []):
                tc = self.traffic_class(item, _at(classes_path, i))
                if tc is None:
                    class_names = None
                elif tc.name in seen:
                    first, written = seen[tc.name]
                    note = _spelt_apart(written, item["name"])
                    self.error(_at(_at(classes_path, i), "name"), f"class {tc.name!r} is already defined at {classes_path}[{first}]{note}")
                else:
                    seen[tc.name] = (i, item["name"])
                    listed.append(tc)
            if items is None or not items:
                class_names = None
            elif class_names is not None:
                class_names = [c.name for c in classes]
                self.class_contracts(contract, classes, path)

        on_burst, on_overload = read_profiles(self, data, path, contract, classes if class_names is not None else None)

        default_class: str | None = class_names[0] if class_names else None
        if "default_class" in data:
            given = self.name_reference(data["default_class"], _at(path, "default_class"))
            if isinstance(given, str):
                if class_names is not None and given not in class_names:
                    hint = _did_you_mean(given, class_names) or f" (the tenant's classes: {', '.join(map(repr, class_names))})"
                    self.error(_at(path, "default_class"), f"unknown class {given!r}{hint}")
                default_class = given
        default = self.choice(data["default"], _at(path, "default"), ACTIONS, "an action") if "default" in data else "allow"

        rules: list[Rule] = []
        rules_path = _at(path, "rules")
        rule_items = self.sequence(data["rules"], rules_path, "rules (mappings)") or [] if "rules" in data else ()
        made = plain_rules(class_names, default_class) if plain_rules is not None and rule_items else None
        rows = None
        if made is not None and made[1] == 0 and len(made[0]) == len(rule_items):
            rules, rows = made[0], made[2]  # type: ignore[assignment]  # no None among them
        else:
            ready = made[0] if made is not None and len(made[0]) == len(rule_items) else (None,) * len(rule_items)
            for i, (item, rule) in enumerate(zip(rule_items, ready)):
                if rule is None:
                    rule = self.rule(item, _at(rules_path, i), class_names, default_class)
                if rule is not None:
                    rules.append(rule)
        if len(self.errors) > before or isinstance(name, _Bad) or isinstance(default, _Bad) or isinstance(weight, _Bad):
            return None
        assert default_class is not None and not isinstance(description, _Bad)
        tenant = Tenant(
            name=name,
            vnis=vnis,
            vlans=vlans,
            sources=tuple(sources),
            classes=classes if classes is _DEFAULT_CLASSES else shared(tuple(classes)),  # most tenants have the default class alone, or a common set
            default_class=default_class,
            default=default,  # type: ignore[arg-type]
            rules=tuple(rules),
            contract=contract,
            description=description,
            weight=weight,
            on_burst=on_burst,
            on_overload=on_overload,
        )
        if rows is not None:
            keep_rows(tenant, rows)
        return tenant

    def class_contracts(self, tenant: Contract, classes: Sequence[TrafficClass], path: str) -> None:
        """A class's guarantee and ceiling against its tenant's."""
        if tenant.ceil_bps is not None:
            for k, tc in enumerate(classes):
                where = _at(_at(path, "classes"), k)
                limit = format_rate(tenant.ceil_bps)
                if tc.contract.rate_bps is not None and tc.contract.rate_bps > tenant.ceil_bps:
                    self.error(_at(where, "rate"), f"rate {format_rate(tc.contract.rate_bps)} is above the tenant's ceil {limit}: it cannot be guaranteed")
                if tc.contract.ceil_bps is not None and tc.contract.ceil_bps > tenant.ceil_bps:
                    self.error(_at(where, "ceil"), f"ceil {format_rate(tc.contract.ceil_bps)} is above the tenant's ceil {limit}")
        guaranteed = sum(tc.contract.rate_bps or 0 for tc in classes)
        if tenant.rate_bps is not None and guaranteed > tenant.rate_bps:
            self.error(
                _at(path, "classes"),
                f"the classes' rates add up to {format_rate(guaranteed)}, more than the tenant's rate {format_rate(tenant.rate_bps)}: "
                "they cannot all be guaranteed",
            )


def _comparable_name(value: Any) -> str | None:
    """A name as names are compared (NFC), if it is text that is not blank."""
    return unicodedata.normalize("NFC", value) if isinstance(value, str) and value.strip() else None


def _spelt_apart(first: str, again: str) -> str:
    """What the error of a repeated name adds when the two are the same only in NFC."""
    return "" if first == again else " (written with other code points, but the same name in Unicode NFC: they print alike)"


def _is_int_pair(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


