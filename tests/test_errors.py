"""Every rejection isolane makes is an ``IsolaneError``: a named subclass per kind of problem,
each also the builtin exception callers caught before (``ValueError``, ``KeyError``,
``IndexError``), with the core's message. The Rust side maps ``CoreError`` variants onto these
classes (``rust/python/error.rs``, unit-tested there); these tests reach each one from Python."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import isolane
from isolane import BatchError, EngineError, IsolaneError, NoTenantError, PcapError, Policy, RuleIndexError
from isolane.policy import qos_context, qos_settings, tenant_qos, tenant_tables
from support.pcapfiles import pcap

ETH_IPV4_UDP = bytes.fromhex(
    "ffffffffffff" "020000000001" "0800"
    "450000240001000040110000" "0a000001" "0a000002"
    "303904d200100000" "6869"
)  # fmt: skip

METER = {"kind": "srtcm", "cir": "1000B/s", "cbs": "16KiB", "ebs": "0B"}


def policy() -> Policy:
    return Policy.from_dict(
        {
            "tenants": [
                {"name": "a", "vnis": [100], "meter": METER, "rules": [{"dst_ports": 80, "action": "allow"}]},
                {"name": "b", "vnis": [200], "meter": METER},
            ]
        }
    )


def ops(tables: Any = None, qos: Any = None) -> list[tuple[str, int, Any, Any]]:
    """Insert ops for ``policy()``'s tenants, tenant 0 with ``tables`` and ``qos`` if given."""
    p = policy()
    parts = [(tenant_tables(t), tenant_qos(t, qos_context(p))) for t in p.tenants]
    parts[0] = (tables or parts[0][0], qos or parts[0][1])
    return [("insert", i, *part) for i, part in enumerate(parts)]


def core_engine(settings: Any = None, **qos_changes: Any) -> isolane._core.Engine:
    """A core engine with ``policy()``, tenant 0's compiled QoS with ``qos_changes``."""
    first = tenant_qos(policy().tenants[0], qos_context(policy()))
    engine = isolane._core.Engine()
    engine.apply(ops(qos=first._replace(**qos_changes)), (1, 1), settings or qos_settings(policy(), ()), 0)
    return engine


@pytest.mark.parametrize(
    ("cls", "builtins"),
    [
        (EngineError, (ValueError,)),
        (NoTenantError, (EngineError, KeyError, ValueError)),
        (RuleIndexError, (EngineError, IndexError, ValueError)),
        (BatchError, (ValueError,)),
        (PcapError, ()),
        (isolane.PolicyError, (ValueError,)),
    ],
)
def test_each_class_is_an_isolane_error_and_the_builtins_callers_catch(cls: type[Exception], builtins: tuple[type[Exception], ...]) -> None:
    assert issubclass(cls, IsolaneError)
    assert all(issubclass(cls, builtin) for builtin in builtins)
    assert getattr(isolane._core, cls.__name__, cls) is cls


def test_key_error_subclass_shows_its_message_as_written() -> None:
    assert str(NoTenantError("no tenant 'x'")) == "no tenant 'x'"  # KeyError's own str() would quote it


# Specs the core refuses: tables, meters, shapers, the port, microburst settings.


def test_a_refused_meter_spec_is_an_engine_error_naming_tenant_and_field() -> None:
    meter = tenant_qos(policy().tenants[0], qos_context(policy())).meter
    with pytest.raises(EngineError, match=r"^tenant 'a': meter kind 7 is not 0 \(none\)"):
        core_engine(meter=meter._replace(kind=7))
    with pytest.raises(EngineError, match=r"^tenant 'a': meter: srTCM CIR is 0"):
        core_engine(meter=meter._replace(cir=0))


def test_refused_port_weights_and_bursts_are_engine_errors() -> None:
    settings = qos_settings(Policy.from_dict({"port": {"rate": "8Mbps", "buffer": "1MB"}, "tenants": []}), ())
    assert settings.port is not None
    with pytest.raises(EngineError, match="^port mode 5 is not 0"):
        core_engine(settings._replace(port=settings.port._replace(mode=5)))
    with pytest.raises(EngineError, match="^port: queue 0: weight must be >= 1"):
        classes = tenant_qos(policy().tenants[0], qos_context(policy())).classes
        core_engine(settings, classes=(classes[0]._replace(weight=0),))
    with pytest.raises(EngineError, match="^poll: polling interval 1500 ns is not a multiple of the shortest, 1000 ns"):
        core_engine(settings._replace(poll_ns=(1000, 1500)))


def test_refused_tables_are_engine_errors_naming_the_tenant() -> None:
    tables = tenant_tables(policy().tenants[0])
    rows = tables.rows.copy()
    rows["policy_rule"] = 1
    bad = dataclasses.replace(tables, packed_rows=rows.tobytes())
    with pytest.raises(EngineError, match=r"^tenant 0 \(a\): row 0: policy rule 1 after -1"):
        isolane._core.Engine().apply(ops(tables=bad), (1, 1), qos_settings(policy(), ()), 0)
    engine = core_engine()
    with pytest.raises(EngineError, match=r"^tenant 0 \(a\): row 0"):
        engine.apply([("replace", 0, bad, tenant_qos(policy().tenants[0], qos_context(policy())))], (1, 1), None, 0)
    cut = dataclasses.replace(tables, packed_rows=tables.packed_rows[:-1])
    with pytest.raises(EngineError, match=r"^tenant 'a': packed rows are 55 bytes, not whole 56-byte records"):
        engine.apply([("replace", 0, cut, tenant_qos(policy().tenants[0], qos_context(policy())))], (1, 1), None, 0)


def test_bad_policy_values_found_by_the_python_side_are_engine_errors_too() -> None:
    with pytest.raises(EngineError, match="multiple of the shortest"):
        isolane.Engine(policy(), poll=["1ms", "1.5ms"])
    with pytest.raises(EngineError, match="polling interval"):
        isolane.Engine(policy(), poll=[0])


# Arguments: thread counts, edit operations.


def test_bad_thread_counts_are_engine_errors() -> None:
    with pytest.raises(EngineError, match="threads must be at least 1"):
        isolane.Engine(policy(), threads=0)
    with pytest.raises(EngineError, match="^threads must be at least 1$"):
        isolane._core.Engine(0)


def test_an_unknown_edit_op_is_an_engine_error() -> None:
    with pytest.raises(EngineError, match=r"unknown edit 'move' \(insert, replace or remove\)"):
        core_engine().edit_tenant("a", "move", 0)


# Edits: unknown tenants, rule indices out of range, rules that are not rules.


def test_an_unknown_tenant_is_a_no_tenant_error_and_a_key_error() -> None:
    with pytest.raises(NoTenantError, match="^no tenant 'nobody'$"):
        core_engine().edit_tenant("nobody", "remove", 0)
    engine = isolane.Engine(policy())
    with pytest.raises(NoTenantError, match="no tenant 'nobody'"):
        engine.remove_rule("nobody", 0)
    with pytest.raises(KeyError):
        engine.replace_rule("nobody", 0, {"action": "drop"})


def test_a_rule_index_out_of_range_is_a_rule_index_error_and_an_index_error() -> None:
    core = core_engine()
    with pytest.raises(RuleIndexError, match=r"^no policy rule 1 \(1 policy rule\)$"):
        core.edit_tenant("a", "remove", 1)
    with pytest.raises(RuleIndexError, match=r"^no policy rule -1"):
        core.edit_tenant("a", "remove", -1)
    engine = isolane.Engine(policy())
    with pytest.raises(RuleIndexError, match=r"tenants\[0\]\.rules\[1\]: 'a' has 1 rules"):
        engine.remove_rule("a", 1)
    with pytest.raises(IndexError):
        engine.insert_rule("b", 1, {"action": "drop"})


def test_a_rule_that_is_not_a_rule_is_a_policy_error() -> None:
    with pytest.raises(isolane.PolicyError) as caught:
        isolane.Engine(policy()).insert_rule("a", 0, {"dst": "10.0.0.0/33", "action": "allow"})
    assert isinstance(caught.value, IsolaneError)


def test_rule_tables_refuse_bad_rules_and_indices() -> None:
    with pytest.raises(EngineError, match=r"^rule 1: port range is reversed$"):
        isolane.RuleTable.from_rules([{}, {"dst_ports": (90, 80)}])
    with pytest.raises(EngineError, match=r"^rule 0: dst: '10\.0\.0\.0/33' has an invalid prefix length$"):
        isolane.RuleTable.from_rules([{"dst": "10.0.0.0/33"}])
    with pytest.raises(EngineError, match="unknown key 'port'"):
        isolane.RuleTable.from_rules([{"port": 80}])
    table = isolane.RuleTable.from_rules([{}])
    with pytest.raises(RuleIndexError, match=r"^cannot insert rule 2 \(1 rule: an insertion goes at 0\.\.=1\)$"):
        table.insert(2, {})
    with pytest.raises(RuleIndexError, match=r"^no rule 1 \(1 rule\)$"):
        table.remove(1)
    with pytest.raises(EngineError, match="port range is reversed"):
        table.insert(0, {"src_ports": (2, 1)})
    assert len(table) == 1


def test_a_bad_classbench_file_is_an_engine_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "rules.txt"
    path.write_text("@10.0.0.0/8\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x06/0xFF\n@1.2.3.4/33\t0.0.0.0/0\t0 : 1\t0 : 1\t0x06/0xFF\n")
    with pytest.raises(EngineError, match=rf"^{path}: line 2: '33' is not a prefix length$"):
        isolane.RuleTable.from_classbench(path)


# Batches and captures.


def test_arrays_that_are_not_a_batch_are_isolane_errors() -> None:
    arguments: dict[str, Any] = {"data": ETH_IPV4_UDP, "offsets": [0, 0], "lengths": [42, 42], "timestamps_ns": [1, 2]}
    with pytest.raises(BatchError, match="timestamps_ns has 1 entries for 2 packets"):
        isolane.PacketBatch.from_arrays(**{**arguments, "timestamps_ns": [1]})
    with pytest.raises(BatchError, match="unsupported link type 105"):
        isolane.PacketBatch.from_arrays(**arguments, link_type=105)
    with pytest.raises(EngineError, match="offsets: values from -1 to 0 do not fit"):
        isolane.PacketBatch.from_arrays(**{**arguments, "offsets": [0, -1]})
    with pytest.raises(BatchError, match="runs past the end of data"):
        isolane.PacketBatch.from_arrays(**{**arguments, "offsets": [0, 10]})
    with pytest.raises(BatchError, match="whole parsed records"):
        core_engine().process_records(np.zeros(3, dtype=np.uint8))


def test_a_bad_capture_is_a_pcap_error_and_a_missing_one_an_os_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.pcap"
    path.write_bytes(pcap([(1, 0, ETH_IPV4_UDP, 42)] * 3)[:-1])
    with pytest.raises(PcapError, match=r"cut\.pcap: byte offset \d+, packet 3: ") as caught:
        isolane.read_pcap(path)
    assert caught.value.packet == 3 and caught.value.path == str(path)  # counted from 1, as Wireshark does
    with pytest.raises(PcapError, match="packet 3"):
        list(isolane.iter_pcap(path, batch_size=2))
    with pytest.raises(EngineError, match="batch_size must be at least 1"):
        isolane.iter_pcap(path, batch_size=0)
    with pytest.raises(FileNotFoundError):
        isolane.read_pcap(tmp_path / "missing.pcap")
