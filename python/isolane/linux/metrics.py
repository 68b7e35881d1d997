"""The engine's counters as Prometheus metrics (``docs/linux.md``, "Prometheus metrics").

:class:`EngineCollector` is a prometheus_client collector over an :class:`isolane.Engine`: it
reads the engine when scraped (no thread copies numbers in between), each reading taken between
two batches of a thread that processes. :func:`serve` serves one engine's metrics over HTTP on a
registry of its own; :func:`parse_metrics_address` reads ``--metrics`` addresses (``:9464``,
``127.0.0.1:9464``, ``[::1]:9464``). prometheus_client is in the ``linux`` extra: this module
imports it only when a collector is made or metrics are served, and never imports pyroute2.
"""

from __future__ import annotations

import ipaddress
import re
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from isolane import _core
from isolane.codes import Color, Outcome, ProfileId
from isolane.engine import DELAY_EDGES_NS, Engine

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

INSTALL_HINT = "pip install 'isolane[linux]'"
NO_TENANT = ""
"""The ``tenant`` label of packets no tenant claims (a tenant's name is never empty); also of the
port's microburst scope, which belongs to no tenant."""
NO_CLASS = ""
"""The ``cls`` and ``class`` labels of packets in no class (classifier drops), of a tenant's own
scope or profile, and ``class`` of a class the current policy no longer names."""

_ROW_LABELS = ("tenant", "cls", "class")
_SCOPE_LABELS = ("scope", "tenant", "cls", "class")
_COLORS = [(int(c), c.name.lower()) for c in Color if c != Color.NONE]
_OUTCOMES = [(int(o), o.name.lower()) for o in Outcome if o != Outcome.PENDING]
_PROFILES = [p.name.lower() for p in ProfileId]
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")


class MetricsAddressError(_core.IsolaneError, ValueError):
    """A ``--metrics`` address that is not ``[HOST]:PORT``; the message quotes it."""


def prometheus_client_module() -> Any:
    """prometheus_client, or an ImportError saying how to install it."""
    try:
        import prometheus_client
        import prometheus_client.core
        import prometheus_client.utils
    except ImportError:
        raise ImportError(f"isolane's Prometheus metrics need prometheus_client: {INSTALL_HINT}") from None
    return prometheus_client


def parse_metrics_address(text: str) -> tuple[str, int]:
    """``[HOST]:PORT`` as (host, port): ``:9464`` (every IPv4 interface, ``0.0.0.0``),
    ``127.0.0.1:9464``, ``localhost:9464``, ``[::1]:9464`` (an IPv6 address in brackets). Port 0
    asks for any free port. Raises :class:`MetricsAddressError` saying what is wrong."""
    if not isinstance(text, str):
        raise MetricsAddressError(f"a metrics address is text such as ':9464', got {text!r}")
    host, colon, port = text.rpartition(":")
    if not colon:
        raise MetricsAddressError(f"metrics address {text!r}: expected [HOST]:PORT, such as :9464, 127.0.0.1:9464 or [::1]:9464")
    if not (port.isascii() and port.isdigit()) or int(port) > 65535:
        raise MetricsAddressError(f"metrics address {text!r}: the port must be a number from 0 to 65535, got {port!r}")
    return _host(text, host), int(port)


def _host(text: str, host: str) -> str:
    if host.startswith("[") and host.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(host[1:-1]))
        except ValueError:
            raise MetricsAddressError(f"metrics address {text!r}: {host[1:-1]!r} is not an IPv6 address") from None
    if ":" in host:
        raise MetricsAddressError(f"metrics address {text!r}: put an IPv6 address in brackets, as in [::1]:9464")
    if not host:
        return "0.0.0.0"
    if not _HOST.fullmatch(host):
        raise MetricsAddressError(f"metrics address {text!r}: {host!r} is not a host name or an IPv4 address")
    return host


class EngineCollector:
    """A prometheus_client collector of an :class:`~isolane.Engine`'s statistics, classifier
    counters, microbursts and profiles, read at each scrape; safe while another thread feeds the
    engine (each call reads between two batches, so a scrape's metric families may be readings a
    batch apart, each whole). ``delay_edges_ns``: the queueing-delay histogram's bucket edges
    (:meth:`Engine.delay_histograms <isolane.Engine.delay_histograms>`), exported in seconds.
    Register it on an agent's own registry: ``registry.register(EngineCollector(engine))``."""

    def __init__(self, engine: Engine, delay_edges_ns: Sequence[int] = DELAY_EDGES_NS) -> None:
        self._prometheus = prometheus_client_module()
        if not isinstance(engine, Engine):
            raise TypeError(f"EngineCollector takes an isolane.Engine, got {type(engine).__name__}")
        self._edges_ns = tuple(np.asarray(delay_edges_ns).tolist())  # Python ints, from numpy's too
        engine.delay_histograms(self._edges_ns)  # checks the edges now, not at the first scrape
        self._engine = engine
        self._le = [self._prometheus.utils.floatToGoString(edge / 1e9) for edge in self._edges_ns] + ["+Inf"]

    def describe(self) -> list[Metric]:
        """The metric families, without samples (the registry checks their names once)."""
        return list(_Families(self._prometheus).all())

    def collect(self) -> Iterator[Metric]:
        """Every metric, read from the engine now."""
        families = _Families(self._prometheus)
        self._add_rows(families)
        self._add_classifier(families)
        self._add_bursts(families)
        self._add_profiles(families)
        return iter(families.all())

    def _add_rows(self, families: _Families) -> None:
        histograms = self._engine.delay_histograms(self._edges_ns)
        class_names = {t.name: t.class_names for t in self._engine.policy.tenants}
        rows = histograms.rows
        columns = zip(
            rows["tenant"].tolist(),
            rows["cls"].tolist(),
            rows[["packets", "bytes", "in_flight", "delay_count"]].tolist(),
            rows["color_packets"].tolist(),
            rows["color_bytes"].tolist(),
            rows["outcome_packets"].tolist(),
            rows["outcome_bytes"].tolist(),
            histograms.at_or_below.tolist(),
            histograms.sum_ns,
        )
        # Whole columns as Python ints first: reading numpy scalars row by row costs more.
        for tenant, cls, counts, color_packets, color_bytes, outcome_packets, outcome_bytes, at_or_below, sum_ns in columns:
            labels = _row_labels(histograms.tenants[tenant] if tenant >= 0 else None, cls if cls >= 0 else None, class_names)
            packets, size, in_flight, delays = counts
            families.packets.add_metric(labels, packets)
            families.bytes.add_metric(labels, size)
            for code, color in _COLORS:
                families.color_packets.add_metric([*labels, color], color_packets[code])
                families.color_bytes.add_metric([*labels, color], color_bytes[code])
            for code, outcome in _OUTCOMES:
                families.outcome_packets.add_metric([*labels, outcome], outcome_packets[code])
                families.outcome_bytes.add_metric([*labels, outcome], outcome_bytes[code])
            families.in_flight.add_metric(labels, in_flight)
            families.delay.add_metric(labels, list(zip(self._le, [*at_or_below, delays])), sum_ns / 1e9)

    def _add_classifier(self, families: _Families) -> None:
        for name, counters in self._engine.counters().items():
            tenant = NO_TENANT if name is None else name
            for verdict, counted in (("allowed", counters["classifier_allowed"]), ("dropped", counters["classifier_dropped"])):
                families.classifier_packets.add_metric([tenant, verdict], counted["packets"])
                families.classifier_bytes.add_metric([tenant, verdict], counted["bytes"])
            for reason, packets in counters["reasons"].items():
                families.classifier_reasons.add_metric([tenant, reason], packets)

    def _add_bursts(self, families: _Families) -> None:
        for scope in self._engine.burst_stats():
            labels = [scope["scope"], _label(scope["tenant"]), _label(scope["cls"]), _label(scope["class"])]
            families.bursts.add_metric([*labels, "rate"], scope["rate_events"])
            families.bursts.add_metric([*labels, "queue"], scope["queue_events"])
            families.burst_seconds.add_metric(labels, scope["time_in_burst_ns"] / 1e9)
            families.burst_peak.add_metric(labels, scope["peak_window_bps"] / 8)
            families.burst_queue.add_metric(labels, scope["max_queue_bytes"])

    def _add_profiles(self, families: _Families) -> None:
        class_names = {t.name: t.class_names for t in self._engine.policy.tenants}
        for entry in self._engine.profile_stats():
            labels = _row_labels(entry["tenant"], entry["cls"], class_names)
            for profile in _PROFILES:
                families.profile_packets.add_metric([*labels, profile], entry["packets"][profile])
            families.profile_switches.add_metric(labels, entry["switches"])


class _Families:
    """The metric families of one scrape (``docs/linux.md`` lists them)."""

    def __init__(self, prometheus: Any) -> None:
        counter, gauge = prometheus.core.CounterMetricFamily, prometheus.core.GaugeMetricFamily
        rows, scopes = list(_ROW_LABELS), list(_SCOPE_LABELS)
        self.packets = counter("isolane_packets", "Packets the engine enforced (Engine.process), by tenant and class", labels=rows)
        self.bytes = counter("isolane_bytes", "Bytes enforced, as the policy's count says", labels=rows)
        self.color_packets = counter("isolane_color_packets", "Packets the classifier let through, by the meters' colour", labels=[*rows, "color"])
        self.color_bytes = counter("isolane_color_bytes", "Bytes the classifier let through, by the meters' colour", labels=[*rows, "color"])
        fate = "by their fate: pass, remarked or the stage that dropped them"
        self.outcome_packets = counter("isolane_outcome_packets", f"Packets {fate}", labels=[*rows, "outcome"])
        self.outcome_bytes = counter("isolane_outcome_bytes", f"Bytes {fate}", labels=[*rows, "outcome"])
        self.in_flight = gauge("isolane_in_flight_packets", "Packets the shapers release to the port after the latest packet time seen", labels=rows)
        self.delay = prometheus.core.HistogramMetricFamily(
            "isolane_queueing_delay_seconds", "Queueing delay at the egress port (transmission start minus arrival)", labels=rows
        )
        self.classifier_packets = counter("isolane_classifier_packets", "Packets classified, by the classifier's verdict", labels=["tenant", "verdict"])
        self.classifier_bytes = counter("isolane_classifier_bytes", "Frame bytes classified, by the classifier's verdict", labels=["tenant", "verdict"])
        self.classifier_reasons = counter("isolane_classifier_reason_packets", "Packets classified, by the verdict's reason", labels=["tenant", "reason"])
        self.bursts = counter("isolane_microbursts", "Microbursts (events) of a watched scope, by view: rate or queue", labels=[*scopes, "view"])
        self.burst_seconds = counter("isolane_microburst_seconds", "Time in ended rate microbursts", labels=scopes)
        self.burst_peak = gauge("isolane_microburst_peak_window_bytes_per_second", "The busiest window's rate so far", labels=scopes)
        self.burst_queue = gauge("isolane_microburst_max_queue_bytes", "The deepest queue at the port so far", labels=scopes)
        self.profile_packets = counter("isolane_profile_packets", "Packets enforced under each adaptive profile", labels=[*rows, "profile"])
        self.profile_switches = counter("isolane_profile_switches", "Switches of adaptive profile", labels=rows)

    def all(self) -> list[Metric]:
        return list(vars(self).values())


def _label(value: object) -> str:
    return "" if value is None else str(value)


def _row_labels(tenant: str | None, cls: int | None, class_names: dict[str, list[str]]) -> list[str]:
    """tenant, cls and class labels; the class's name in the current policy, if it has one."""
    names = class_names.get(tenant, []) if tenant is not None else []
    name = names[cls] if cls is not None and cls < len(names) else NO_CLASS
    return [NO_TENANT if tenant is None else tenant, _label(cls), name]


class MetricsServer:
    """An HTTP server of one engine's metrics (``/metrics`` and any other path) on a thread of
    its own, from :func:`serve`; ``close()`` (or leaving a ``with`` block) stops it."""

    def __init__(self, registry: CollectorRegistry, server: Any, thread: threading.Thread) -> None:
        self.registry = registry
        """The server's own registry, holding the engine's :class:`EngineCollector`."""
        self._server, self._thread = server, thread

    @property
    def host(self) -> str:
        """The address listened on."""
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        """The port listened on (the one chosen when 0 was asked for)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stops serving and frees the port; a second call does nothing."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(engine: Engine, address: str = ":9464", delay_edges_ns: Sequence[int] = DELAY_EDGES_NS) -> MetricsServer:
    """Serves ``engine``'s metrics over HTTP at ``address`` (:func:`parse_metrics_address`) on a
    registry of its own (not prometheus_client's global one), from a daemon thread, until the
    returned :class:`MetricsServer` is closed. An address that cannot be bound is an OSError
    naming it."""
    host, port = parse_metrics_address(address)
    prometheus = prometheus_client_module()
    registry = prometheus.CollectorRegistry()
    registry.register(EngineCollector(engine, delay_edges_ns))
    try:
        server, thread = prometheus.start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        raise OSError(error.errno, f"cannot serve metrics on {address!r}: {error.strerror or error}") from error
    return MetricsServer(registry, server, thread)
