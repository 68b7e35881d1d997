"""isolane.linux.metrics: the engine's counters scraped over HTTP on localhost and parsed by
prometheus_client's own parser, against Engine.stats(), counters(), burst_stats() and
profile_stats(); the delay histogram against the statistics' quantiles; an update that renames
a tenant; scrapes while another thread processes; addresses; a missing prometheus_client."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml  # type: ignore[import-untyped]

import isolane
from isolane import Engine, Policy
from isolane.linux.metrics import EngineCollector, MetricsAddressError, parse_metrics_address, serve

SCENARIO = Path(__file__).resolve().parents[1] / "pcaps" / "scenarios" / "invisible-loss"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


STRAY_VNI = 2999  # one packet in 40 is moved to it: no tenant's until the update adds one


def scenario_policy(rename: dict[str, str] | None = None, stray_tenant: bool = False) -> Policy:
    """invisible-loss's policy watching the port and the collective class too (rate and queue
    views); tenants renamed by ``rename``; ``stray_tenant``: a third one claims STRAY_VNI."""
    data = yaml.safe_load(SCENARIO.with_suffix(".yaml").read_text())
    data["port"]["microburst"] = {"window": "10us", "threshold": "50%", "queue": "64KiB"}
    data["tenants"][0]["classes"][1]["microburst"] = {"window": "10us", "threshold": "50Gbps", "queue": "32KiB"}
    for tenant in data["tenants"]:
        tenant["name"] = (rename or {}).get(tenant["name"], tenant["name"])
    if stray_tenant:
        data["tenants"].append({"name": "stray", "vnis": [STRAY_VNI]})
    return Policy.from_dict(data)


@pytest.fixture(scope="module")
def records() -> np.ndarray:
    rows = isolane.parse(isolane.read_pcap(SCENARIO.with_suffix(".pcap")))
    rows["vni"][::40] = STRAY_VNI
    return rows


@pytest.fixture(scope="module")
def prometheus() -> Any:
    return pytest.importorskip("prometheus_client", reason="prometheus_client is not installed (pip install 'isolane[linux]')")


@pytest.fixture
def replayed(prometheus: Any, records: np.ndarray) -> Iterator[tuple[Engine, str]]:
    """An engine through the first half of the capture, served on localhost."""
    engine = Engine(scenario_policy())
    engine.process(records[: len(records) // 2])
    with serve(engine, "127.0.0.1:0") as server:
        yield engine, server.url


def scrape(url: str) -> tuple[Samples, dict[str, str]]:
    """Every sample by (name, labels), and each family's type, parsed by prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    samples: Samples = {}
    types = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in samples, f"{key} twice"
            samples[key] = sample.value
    return samples, types


def labelled(name: str, value: float, **labels: Any) -> tuple[tuple[str, frozenset[tuple[str, str]]], float]:
    return (name, frozenset((k.rstrip("_"), "" if v is None else str(v)) for k, v in labels.items())), value


def expected_counters(engine: Engine) -> Samples:
    """What every counter and gauge must read, from the engine's own dict views."""
    out: Samples = {}
    class_names = {t.name: t.class_names for t in engine.policy.tenants}
    stats: list[Any] = engine.stats()
    for entry in stats:
        row = {"tenant": entry["tenant"], "cls": entry["cls"], "class_": entry["class"]}
        out.update([labelled("isolane_packets_total", entry["packets"], **row), labelled("isolane_bytes_total", entry["bytes"], **row)])
        out.update([labelled("isolane_in_flight_packets", entry["in_flight"], **row)])
        for family, label in (("colors", "color"), ("outcomes", "outcome")):
            for key, counted in entry[family].items():
                out.update(labelled(f"isolane_{label}_{unit}_total", counted[unit], **{label: key}, **row) for unit in ("packets", "bytes"))
    counters: dict[str | None, Any] = engine.counters()
    for name, counted in counters.items():
        for verdict in ("allowed", "dropped"):
            by_verdict = counted[f"classifier_{verdict}"]
            out.update(labelled(f"isolane_classifier_{unit}_total", by_verdict[unit], tenant=name, verdict=verdict) for unit in ("packets", "bytes"))
        out.update(labelled("isolane_classifier_reason_packets_total", n, tenant=name, reason=reason) for reason, n in counted["reasons"].items())
    for scope in engine.burst_stats():
        where = {"scope": scope["scope"], "tenant": scope["tenant"], "cls": scope["cls"], "class_": scope["class"]}
        out.update(labelled("isolane_microbursts_total", scope[f"{view}_events"], view=view, **where) for view in ("rate", "queue"))
        out.update(
            [
                labelled("isolane_microburst_seconds_total", scope["time_in_burst_ns"] / 1e9, **where),
                labelled("isolane_microburst_peak_window_bytes_per_second", scope["peak_window_bps"] / 8, **where),
                labelled("isolane_microburst_max_queue_bytes", scope["max_queue_bytes"], **where),
            ]
        )
    for entry in engine.profile_stats():
        cls = entry["cls"]
        row = {"tenant": entry["tenant"], "cls": cls, "class_": None if cls is None else class_names[entry["tenant"]][cls]}
        out.update(labelled("isolane_profile_packets_total", n, profile=profile, **row) for profile, n in entry["packets"].items())
        out.update([labelled("isolane_profile_switches_total", entry["switches"], **row)])
    return out


def without(labels: frozenset[tuple[str, str]], name: str) -> frozenset[tuple[str, str]]:
    """``labels`` but ``name``."""
    return frozenset(label for label in labels if label[0] != name)


def histogram_samples(samples: Samples) -> Samples:
    return {key: value for key, value in samples.items() if key[0].startswith("isolane_queueing_delay_seconds")}


def assert_scrape_is_the_engine(engine: Engine, url: str) -> Samples:
    samples, types = scrape(url)
    counters = {key: value for key, value in samples.items() if key not in histogram_samples(samples)}
    assert counters == expected_counters(engine)
    assert types["isolane_queueing_delay_seconds"] == "histogram" and types["isolane_packets"] == "counter"
    assert_histograms_follow_the_statistics(engine, samples)
    return samples


def assert_histograms_follow_the_statistics(engine: Engine, samples: Samples) -> None:
    """Per statistics row: _count = delay_count, monotone buckets ending at it, the exact sum,
    and the bucket holding the nearest-rank p99 agrees with delay_p99_ns within 1/128."""
    histograms = engine.delay_histograms()
    sums = {(e["tenant"], e["cls"]): s for e, s in zip(engine.stats(), histograms.sum_ns)}
    stats: list[Any] = engine.stats()
    for entry in stats:
        labels = {"tenant": "" if entry["tenant"] is None else entry["tenant"], "cls": "" if entry["cls"] is None else str(entry["cls"])}
        labels["class"] = entry["class"] or ""
        row = frozenset(labels.items())
        count = entry["delay_ns"]["count"]
        assert samples[("isolane_queueing_delay_seconds_count", row)] == count
        assert round(samples[("isolane_queueing_delay_seconds_sum", row)] * 1e9) == sums[(entry["tenant"], entry["cls"])]
        buckets = sorted(
            (float(dict(key[1])["le"]), value)
            for key, value in samples.items()
            if key[0] == "isolane_queueing_delay_seconds_bucket" and without(key[1], "le") == row
        )
        assert [le for le, _ in buckets] == [edge / 1e9 for edge in isolane.DELAY_EDGES_NS] + [math.inf]
        cumulative = [value for _, value in buckets]
        assert cumulative == sorted(cumulative) and cumulative[-1] == count
        if count:
            rank = math.ceil(count * 99 / 100)
            holding = next(i for i, value in enumerate(cumulative) if value >= rank)
            below_ns = isolane.DELAY_EDGES_NS[holding - 1] + 1 if holding else 0  # the p99 sample is in [below_ns, top_ns]
            top_ns = isolane.DELAY_EDGES_NS[holding] if holding < len(isolane.DELAY_EDGES_NS) else entry["delay_ns"]["max"]
            p99 = entry["delay_ns"]["p99"]
            assert p99 is not None and below_ns * 127 / 128 <= p99 <= top_ns * 129 / 128, (entry["tenant"], entry["cls"], p99, below_ns, top_ns)


def test_a_scrape_equals_the_engines_counters(replayed: tuple[Engine, str]) -> None:
    engine, url = replayed
    samples = assert_scrape_is_the_engine(engine, url)
    engine.drain()
    assert_scrape_is_the_engine(engine, url)
    # What the comparison covers: packets of no tenant, drops at the port, bursts in every scope.
    stats = engine.stats()
    assert any(e["tenant"] is None and e["packets"] for e in stats) and any(e["outcomes"]["drop_port_queue"]["packets"] for e in stats)
    assert {s["scope"] for s in engine.burst_stats() if s["rate_events"]} == {"port", "tenant", "class"}
    assert any(s["queue_events"] for s in engine.burst_stats())
    assert samples[labelled("isolane_classifier_reason_packets_total", 0, tenant="", reason="unknown_tenant")[0]] > 0
    assert sum(v for k, v in samples.items() if k[0] == "isolane_queueing_delay_seconds_count") > 1000


def test_the_overload_scenarios_adaptive_profiles_are_scraped(prometheus: Any) -> None:
    overload = SCENARIO.with_name("overload")
    engine = Engine(Policy.from_file(overload.with_suffix(".yaml")))
    engine.process(isolane.read_pcap(overload.with_suffix(".pcap")))
    engine.drain()
    with serve(engine, "127.0.0.1:0") as server:
        samples = assert_scrape_is_the_engine(engine, server.url)
    switches = [v for (name, _), v in samples.items() if name == "isolane_profile_switches_total"]
    assert switches and sum(switches) > 0, "the profiles switched"


def test_after_an_update_the_scrape_follows_renamed_and_new_tenants(replayed: tuple[Engine, str], records: np.ndarray) -> None:
    engine, url = replayed
    engine.update(scenario_policy(rename={"training": "learning"}, stray_tenant=True))
    engine.process(records[len(records) // 2 :])
    engine.drain()
    samples = assert_scrape_is_the_engine(engine, url)
    tenants = {dict(labels).get("tenant") for name, labels in samples if name == "isolane_packets_total"}
    assert {"training", "learning", "inference", "stray", ""} <= tenants
    learning = labelled("isolane_packets_total", 0, tenant="learning", cls=1, class_="collective")[0]
    assert samples[learning] > 0


def test_scrapes_while_another_thread_processes_are_whole_and_never_go_back(prometheus: Any, records: np.ndarray) -> None:
    """The feeder replays the capture again and again (later in time each round) until five
    scrapes were taken while it ran; every scrape's rows add up and no counter goes back."""
    engine = Engine(scenario_policy())
    scrapes: list[Samples] = []
    done = threading.Event()
    span = int(records["timestamp_ns"].max() - records["timestamp_ns"].min()) + 1_000_000

    def feed() -> None:
        shifted = records.copy()
        for _ in range(2000):
            for part in np.array_split(shifted, 8):
                engine.process(part)
            shifted["timestamp_ns"] += span
            if len(scrapes) >= 5:
                break
        done.set()

    feeder = threading.Thread(target=feed)
    with serve(engine, "127.0.0.1:0") as server:
        feeder.start()
        last: Samples = {}
        while not done.is_set():
            samples, _ = scrape(server.url)
            for (name, labels), value in samples.items():
                if name.endswith(("_total", "_count", "_bucket")):
                    assert value >= last.get((name, labels), 0), (name, labels)
            for (name, labels), value in samples.items():
                if name == "isolane_packets_total":
                    fates = sum(v for (other, row), v in samples.items() if other == "isolane_outcome_packets_total" and without(row, "outcome") == labels)
                    assert fates + samples[("isolane_in_flight_packets", labels)] == value, "a row read whole"
            last = samples
            scrapes.append(samples)
        feeder.join()
        assert len(scrapes) >= 5
        assert_scrape_is_the_engine(engine, server.url)


def test_the_server_has_a_registry_of_its_own_and_closes(replayed: tuple[Engine, str], prometheus: Any) -> None:
    engine, _ = replayed
    assert not any(name.startswith("isolane_") for family in prometheus.REGISTRY.collect() for name in [family.name])
    server = serve(engine, "127.0.0.1:0")
    assert scrape(server.url)[0]
    server.close()
    server.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(server.url, timeout=5)
    registry = prometheus.CollectorRegistry()
    registry.register(EngineCollector(engine))
    assert prometheus.generate_latest(registry).decode().count("isolane_packets_total{") == len(engine.stats())


def test_serving_on_ipv6_localhost(replayed: tuple[Engine, str]) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python")
    engine, _ = replayed
    try:
        server = serve(engine, "[::1]:0")
    except OSError as error:
        pytest.skip(f"cannot listen on [::1]: {error}")
    with server:
        assert server.url.startswith("http://[::1]:") and scrape(server.url)[0]


def test_a_port_in_use_is_an_error_naming_the_address(replayed: tuple[Engine, str]) -> None:
    engine, url = replayed
    taken = url.split(":")[2].split("/")[0]
    with pytest.raises(OSError, match=f"cannot serve metrics on '127.0.0.1:{taken}'"):
        serve(engine, f"127.0.0.1:{taken}")


@pytest.mark.parametrize(
    "address, expected",
    [(":9464", ("0.0.0.0", 9464)), ("127.0.0.1:9464", ("127.0.0.1", 9464)), ("[::1]:9464", ("::1", 9464)), ("localhost:0", ("localhost", 0))],
)
def test_metrics_addresses(address: str, expected: tuple[str, int]) -> None:
    assert parse_metrics_address(address) == expected


@pytest.mark.parametrize(
    "address, message",
    [
        ("9464", "expected \\[HOST\\]:PORT"),
        ("", "expected \\[HOST\\]:PORT"),
        (":65536", "port must be a number from 0 to 65535, got '65536'"),
        (":http", "port must be a number"),
        ("127.0.0.1:", "port must be a number"),
        ("::1:9464", "put an IPv6 address in brackets"),
        ("[::g]:9464", "'::g' is not an IPv6 address"),
        ("a host:9464", "'a host' is not a host name"),
    ],
)
def test_a_bad_metrics_address_says_what_is_wrong(address: str, message: str) -> None:
    with pytest.raises(MetricsAddressError, match=f"metrics address {address!r}: {message}|{message}") as raised:
        parse_metrics_address(address)
    assert isinstance(raised.value, (isolane.IsolaneError, ValueError))


def test_without_prometheus_client_serving_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "prometheus_client" or m.startswith("prometheus_client.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # `import prometheus_client` raises ImportError
    engine = Engine(scenario_policy())
    with pytest.raises(ImportError, match="pip install 'isolane\\[linux\\]'"):
        serve(engine, "127.0.0.1:0")
    with pytest.raises(ImportError, match="prometheus_client"):
        EngineCollector(engine)
    assert parse_metrics_address(":9464") == ("0.0.0.0", 9464), "addresses are read without it"


def test_importing_the_module_imports_neither_prometheus_client_nor_pyroute2() -> None:
    code = "import sys, isolane.linux, isolane.linux.metrics; print(sorted({'prometheus_client', 'pyroute2'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_the_collector_checks_what_it_is_given(prometheus: Any) -> None:
    with pytest.raises(TypeError, match="isolane.Engine"):
        EngineCollector(object())  # type: ignore[arg-type]
    with pytest.raises(isolane.EngineError, match="edges"):
        EngineCollector(Engine(scenario_policy()), delay_edges_ns=[10, 5])
    with pytest.raises(isolane.EngineError, match="edges"):
        EngineCollector(Engine(scenario_policy()), delay_edges_ns=[0.5, 1])



def test_the_collector_takes_other_edges_as_numpy_arrays(prometheus: Any, records: np.ndarray) -> None:
    engine = Engine(scenario_policy())
    engine.process(records)
    registry = prometheus.CollectorRegistry()
    registry.register(EngineCollector(engine, delay_edges_ns=np.array([0, 1023, 2**20 - 1], dtype=np.uint64)))
    text = prometheus.generate_latest(registry).decode()
    assert text.count("isolane_queueing_delay_seconds_bucket{") == 4 * len(engine.stats()) == 4 * text.count('le="1.023e-06"')
