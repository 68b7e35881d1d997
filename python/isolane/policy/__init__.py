"""Tenant policies: the file format, its validation, and its compilation into classification tables.

A policy is read from YAML or TOML (:meth:`Policy.from_file`) or built from a dict
(:meth:`Policy.from_dict`). It is checked completely before anything else happens: every problem is
collected and reported at once in one :class:`PolicyError`, each naming its place
(``tenants[2].rules[5].dst: '10.0.0.0/33' is not a valid prefix``). Rules that can never match are
reported as :class:`PolicyWarning` warnings. :meth:`Policy.compile` turns a policy into the numpy
arrays of ``docs/classify-contract.md`` (:class:`CompiledPolicy`, one :class:`TenantTables` per
tenant). ``docs/policy.md`` is the user documentation; :func:`schema_text` gives the JSON Schema.

The quality-of-service part of a policy (meters, shapers, guarantees and ceilings, the egress
port; ``docs/qos.md``) is checked here too, and :meth:`Policy.compile_qos` turns it into the
integer arrays the Rust meters and schedulers take (:class:`CompiledQos`).
"""

# The modules, each with one job. At run time a module imports only modules before it in this
# list: constants, errors, units, addresses, schema, model, read, compile, shadowed, validate, qos,
# json_schema, policy (validate, compile and qos name Policy for type checking only; constants
# hands out the key sets of schema's models, importing schema when first asked for one). Every name
# that isolane/policy.py defined when it was one module is imported here, the private ones too,
# so that code that reached them through isolane.policy keeps working. Assigning to one of them
# here changes nothing for the code that reads it: set it in its module (as a test does with
# isolane.policy.shadowed._BIG_GROUP).

from __future__ import annotations

from isolane._core import IsolaneError as IsolaneError
from isolane.policy.across import (
    _MASKS as _MASKS,
)
from isolane.policy.across import (
    _guarantee as _guarantee,
)
from isolane.policy.across import (
    _policy_warnings as _policy_warnings,
)
from isolane.policy.across import (
    _port_checks as _port_checks,
)
from isolane.policy.across import (
    _rule_label as _rule_label,
)
from isolane.policy.across import (
    _tenant_weights as _tenant_weights,
)
from isolane.policy.addresses import (
    _ADDR_SHAPE_RE as _ADDR_SHAPE_RE,
)
from isolane.policy.addresses import (
    _H16 as _H16,
)
from isolane.policy.addresses import (
    _IPV4 as _IPV4,
)
from isolane.policy.addresses import (
    _IPV6 as _IPV6,
)
from isolane.policy.addresses import (
    _LEN4 as _LEN4,
)
from isolane.policy.addresses import (
    _LEN6 as _LEN6,
)
from isolane.policy.addresses import (
    _LS32 as _LS32,
)
from isolane.policy.addresses import (
    _MAPPED_V4 as _MAPPED_V4,
)
from isolane.policy.addresses import (
    _OCTET as _OCTET,
)
from isolane.policy.addresses import (
    _PORT_NUMBER as _PORT_NUMBER,
)
from isolane.policy.addresses import (
    _PORT_TEXT_RE as _PORT_TEXT_RE,
)
from isolane.policy.addresses import (
    _PREFIX_RE as _PREFIX_RE,
)
from isolane.policy.addresses import (
    PORT_PATTERN as PORT_PATTERN,
)
from isolane.policy.addresses import (
    PREFIX_PATTERN as PREFIX_PATTERN,
)
from isolane.policy.addresses import (
    Network as Network,
)
from isolane.policy.addresses import (
    PortRange as PortRange,
)
from isolane.policy.addresses import (
    _families as _families,
)
from isolane.policy.addresses import (
    _ipv6_pattern as _ipv6_pattern,
)
from isolane.policy.addresses import (
    _mapped as _mapped,
)
from isolane.policy.addresses import (
    _merge_ranges as _merge_ranges,
)
from isolane.policy.addresses import (
    _parse_prefix as _parse_prefix,
)
from isolane.policy.bursts import MAX_WINDOW_NS, MIN_WINDOW_NS
from isolane.policy.compile import (
    I32 as I32,
)
from isolane.policy.compile import (
    I64 as I64,
)
from isolane.policy.compile import (
    RULE_ROW_DTYPE,
    CompiledPolicy,
    TenantTables,
)
from isolane.policy.compile import (
    U8 as U8,
)
from isolane.policy.compile import (
    U16 as U16,
)
from isolane.policy.compile import (
    U32 as U32,
)
from isolane.policy.compile import (
    U64 as U64,
)
from isolane.policy.compile import (
    _compile as _compile,
)
from isolane.policy.compile import (
    _readonly as _readonly,
)
from isolane.policy.compile import (
    _tenant_tables as _tenant_tables,
)
from isolane.policy.compile import (
    tenant_tables as tenant_tables,
)
from isolane.policy.constants import (
    _CLASS_KEYS as _CLASS_KEYS,
)
from isolane.policy.constants import (
    _CONTRACT_KEYS as _CONTRACT_KEYS,
)
from isolane.policy.constants import (
    _DSCP_NAME as _DSCP_NAME,
)
from isolane.policy.constants import (
    _METER_BUCKETS as _METER_BUCKETS,
)
from isolane.policy.constants import (
    _METER_FIELDS as _METER_FIELDS,
)
from isolane.policy.constants import (
    _METER_KEYS as _METER_KEYS,
)
from isolane.policy.constants import (
    _METER_REQUIRED as _METER_REQUIRED,
)
from isolane.policy.constants import (
    _METER_WORDS as _METER_WORDS,
)
from isolane.policy.constants import (
    _MICROBURST_KEYS as _MICROBURST_KEYS,
)
from isolane.policy.constants import (
    _PORT_KEYS as _PORT_KEYS,
)
from isolane.policy.constants import (
    _PROTO_NAME as _PROTO_NAME,
)
from isolane.policy.constants import (
    _RULE_KEYS as _RULE_KEYS,
)
from isolane.policy.constants import (
    _SHAPER_KEYS as _SHAPER_KEYS,
)
from isolane.policy.constants import (
    _TENANT_KEYS as _TENANT_KEYS,
)
from isolane.policy.constants import (
    _TOP_KEYS as _TOP_KEYS,
)
from isolane.policy.constants import (
    ACTION_ALLOW,
    ACTION_DROP,
    COLOR_ACTIONS,
    COLORS,
    COUNT_MODES,
    COUNT_OVERHEAD,
    DEFAULT_COLOR_MAP,
    DEFAULT_LARGEST_FRAME,
    DSCP_NAMES,
    MAX_BURST_BYTES,
    MAX_DELAY_NS,
    MAX_QUEUE_BYTES,
    MAX_RATE_BYTES,
    METER_KINDS,
    METER_NONE,
    NO_CLASS,
    PORT_ALPHA_LOG2,
    PORT_MODES,
    PROTOCOLS,
    RULE_FIELDS,
)
from isolane.policy.constants import (
    ACTIONS as ACTIONS,
)
from isolane.policy.constants import (
    DEFAULT_MAX_DELAY_NS as DEFAULT_MAX_DELAY_NS,
)
from isolane.policy.constants import (
    DEFAULT_PRIORITY as DEFAULT_PRIORITY,
)
from isolane.policy.constants import (
    MAX_CLASSES as MAX_CLASSES,
)
from isolane.policy.constants import (
    MAX_LARGEST_FRAME as MAX_LARGEST_FRAME,
)
from isolane.policy.constants import (
    MAX_PORT as MAX_PORT,
)
from isolane.policy.constants import (
    MAX_PRIORITY as MAX_PRIORITY,
)
from isolane.policy.constants import (
    MAX_RULE_EXPANSION as MAX_RULE_EXPANSION,
)
from isolane.policy.constants import (
    MAX_VLAN as MAX_VLAN,
)
from isolane.policy.constants import (
    MAX_VNI as MAX_VNI,
)
from isolane.policy.constants import (
    MAX_WEIGHT as MAX_WEIGHT,
)
from isolane.policy.constants import (
    MIN_FRAME as MIN_FRAME,
)
from isolane.policy.constants import (
    PORT_PROTOCOLS as PORT_PROTOCOLS,
)
from isolane.policy.constants import (
    SCHEMA_VERSION as SCHEMA_VERSION,
)
from isolane.policy.constants import (
    ActionName as ActionName,
)
from isolane.policy.constants import (
    ColorName as ColorName,
)
from isolane.policy.constants import (
    CountMode as CountMode,
)
from isolane.policy.constants import (
    MeterKind as MeterKind,
)
from isolane.policy.constants import (
    PortMode as PortMode,
)
from isolane.policy.constants import (
    _dscp_names as _dscp_names,
)
from isolane.policy.errors import (
    _MAX_LISTED_ERRORS as _MAX_LISTED_ERRORS,
)
from isolane.policy.errors import (
    PolicyError,
    PolicyWarning,
)
from isolane.policy.errors import (
    _at as _at,
)
from isolane.policy.errors import (
    _describe as _describe,
)
from isolane.policy.errors import (
    _did_you_mean as _did_you_mean,
)
from isolane.policy.errors import (
    _or_list as _or_list,
)
from isolane.policy.errors import (
    _render_error as _render_error,
)
from isolane.policy.json_schema import (
    schema,  # the function; the models' module is reached with `from isolane.policy.schema import ...`
    schema_text,
)
from isolane.policy.model import (
    _T as _T,
)
from isolane.policy.model import (
    ColorAction as ColorAction,
)
from isolane.policy.model import (
    Contract,
    Meter,
    Microburst,
    Overload,
    Port,
    Profile,
    Remark,
    Rule,
    Shaper,
    Tenant,
    TrafficClass,
)
from isolane.policy.model import (
    _action_to_data as _action_to_data,
)
from isolane.policy.model import (
    _given as _given,
)
from isolane.policy.model import (
    _ports_to_data as _ports_to_data,
)
from isolane.policy.model import (
    _unless_none as _unless_none,
)
from isolane.policy.policy import (
    Policy,
)
from isolane.policy.policy import (
    _build as _build,
)
from isolane.policy.policy import (
    _emit as _emit,
)
from isolane.policy.qos import (
    DEFAULT_PORT_BURST_WINDOW_NS,
    BurstArrays,
    CompiledQos,
    MeterArrays,
    ShaperArrays,
)
from isolane.policy.qos import (
    OverloadRow as OverloadRow,
)
from isolane.policy.qos import (
    ProfileRow as ProfileRow,
)
from isolane.policy.qos import (
    TenantQos as TenantQos,
)
from isolane.policy.qos import (
    _column as _column,
)
from isolane.policy.qos import (
    _compile_qos as _compile_qos,
)
from isolane.policy.qos import (
    _meter_arrays as _meter_arrays,
)
from isolane.policy.qos import (
    _shaper_arrays as _shaper_arrays,
)
from isolane.policy.qos import (
    _shaper_row as _shaper_row,
)
from isolane.policy.qos import (
    qos_context as qos_context,
)
from isolane.policy.qos import (
    qos_settings as qos_settings,
)
from isolane.policy.qos import (
    tenant_qos as tenant_qos,
)
from isolane.policy.read import (
    _load_toml as _load_toml,
)
from isolane.policy.read import (
    _load_yaml as _load_yaml,
)
from isolane.policy.read import (
    _read_file as _read_file,
)
from isolane.policy.shadowed import (
    _BIG_GROUP as _BIG_GROUP,
)
from isolane.policy.shadowed import (
    _shadowed_rules as _shadowed_rules,
)
from isolane.policy.tenants import Tenants
from isolane.policy.units import (
    _ALL_RATE_UNITS as _ALL_RATE_UNITS,
)
from isolane.policy.units import (
    _ALL_SIZE_UNITS as _ALL_SIZE_UNITS,
)
from isolane.policy.units import (
    _DURATION_RE as _DURATION_RE,
)
from isolane.policy.units import (
    _NUM as _NUM,
)
from isolane.policy.units import (
    _PFX as _PFX,
)
from isolane.policy.units import (
    _RATE_RE as _RATE_RE,
)
from isolane.policy.units import (
    _RATE_UNITS as _RATE_UNITS,
)
from isolane.policy.units import (
    _SIZE_RE as _SIZE_RE,
)
from isolane.policy.units import (
    _SIZE_UNITS as _SIZE_UNITS,
)
from isolane.policy.units import (
    _SPLIT_UNIT_RE as _SPLIT_UNIT_RE,
)
from isolane.policy.units import (
    _TIME_UNITS as _TIME_UNITS,
)
from isolane.policy.units import (
    _UNIT_PREFIXES as _UNIT_PREFIXES,
)
from isolane.policy.units import (
    DURATION_PATTERN as DURATION_PATTERN,
)
from isolane.policy.units import (
    RATE_PATTERN as RATE_PATTERN,
)
from isolane.policy.units import (
    SIZE_PATTERN as SIZE_PATTERN,
)
from isolane.policy.units import (
    _format as _format,
)
from isolane.policy.units import (
    _parse_quantity as _parse_quantity,
)
from isolane.policy.units import (
    _span as _span,
)
from isolane.policy.units import (
    _unit_problem as _unit_problem,
)
from isolane.policy.units import (
    default_burst,
    format_duration,
    format_rate,
    format_size,
    parse_duration,
    parse_rate,
    parse_size,
)
from isolane.policy.validate import (
    _Checker as _Checker,
)
from isolane.policy.validate import (
    _is_int_pair as _is_int_pair,
)
from isolane.policy.validate_shapes import (
    BAD as BAD,
)
from isolane.policy.validate_shapes import (
    _Bad as _Bad,
)

__all__ = [
    "ACTION_ALLOW",
    "ACTION_DROP",
    "COLORS",
    "COLOR_ACTIONS",
    "COUNT_MODES",
    "COUNT_OVERHEAD",
    "DEFAULT_COLOR_MAP",
    "DEFAULT_LARGEST_FRAME",
    "DEFAULT_PORT_BURST_WINDOW_NS",
    "DSCP_NAMES",
    "MAX_BURST_BYTES",
    "MAX_DELAY_NS",
    "MAX_QUEUE_BYTES",
    "MAX_RATE_BYTES",
    "MAX_WINDOW_NS",
    "METER_KINDS",
    "METER_NONE",
    "MIN_WINDOW_NS",
    "NO_CLASS",
    "PORT_ALPHA_LOG2",
    "PORT_MODES",
    "PROTOCOLS",
    "RULE_FIELDS",
    "RULE_ROW_DTYPE",
    "BurstArrays",
    "CompiledPolicy",
    "CompiledQos",
    "Contract",
    "Meter",
    "MeterArrays",
    "Microburst",
    "Overload",
    "Policy",
    "PolicyError",
    "PolicyWarning",
    "Port",
    "Profile",
    "Remark",
    "Rule",
    "Shaper",
    "ShaperArrays",
    "Tenant",
    "TenantTables",
    "Tenants",
    "TrafficClass",
    "default_burst",
    "format_duration",
    "format_rate",
    "format_size",
    "parse_duration",
    "parse_rate",
    "parse_size",
    "schema",
    "schema_text",
]
