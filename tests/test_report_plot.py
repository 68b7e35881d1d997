"""isolane.report.plot: the replay report's pictures, drawn from reports of generated scenarios
(tests/support/report_fixture.py), and the fixture's reference timeline checked against what
the engine reported for the same packets."""

from __future__ import annotations

import copy
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from isolane.report import plot
from support.burst_traffic import Burst
from support.pcapfiles import pcap
from support.report_fixture import DEFAULT_NAMES, MS, reference_for, report_for, scenario_policy, scenario_report

matplotlib_image = pytest.importorskip("matplotlib.image", reason="matplotlib is the extra isolane[plot]")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return scenario_report(tmp_path_factory.mktemp("scenario"))


@pytest.fixture(scope="module")
def many_tenants(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    names = [f"tenant-{i:04d}" for i in range(1000)]
    return scenario_report(tmp_path_factory.mktemp("many"), names, duration_ns=2 * MS, background_bps=50_000_000, port=False)


def pixels(png: bytes) -> np.ndarray:
    """(height, width, 3) RGB bytes of a PNG."""
    image = matplotlib_image.imread(io.BytesIO(png), format="png")
    return np.round(image[..., :3] * 255).astype(np.uint8)  # type: ignore[no-any-return]


def colours(png: bytes) -> int:
    return len(np.unique(pixels(png).reshape(-1, 3), axis=0))


def shows_colour(png: bytes, rgb: tuple[float, float, float], tolerance: int = 3) -> int:
    """How many pixels are within ``tolerance`` of ``rgb`` in every channel."""
    return int(np.all(np.abs(pixels(png).astype(int) - np.array(rgb)) <= tolerance, axis=-1).sum())


def shade(hex_colour: str) -> tuple[float, float, float]:
    """``hex_colour`` at the bursts' alpha over white, as Agg blends it."""
    rgb = [int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)]
    return tuple(255 - plot.SHADE_ALPHA * (255 - c) for c in rgb)  # type: ignore[return-value]


# --- the fixture's timeline against the engine --------------------------------------------------


def test_the_engines_timeline_is_the_reference_timeline(tmp_path: Path) -> None:
    """The Rust timeline against reference_timeline's numpy, on a scenario with bursts that
    overflow the port: every series, bin for bin."""
    report = scenario_report(tmp_path)
    timeline = report["timeline"]
    expected = reference_for(tmp_path / "scenario.pcap", scenario_policy(list(DEFAULT_NAMES)), timeline["window_ns"])
    assert {k: timeline[k] for k in ("start_ns", "bin_ns", "window_ns", "bins")} == {k: expected[k] for k in ("start_ns", "bin_ns", "window_ns", "bins")}
    fields = ("bytes", "packets", "dropped", "peak_bytes")
    assert [{k: t[k] for k in ("tenant", *fields)} for t in timeline["tenants"]] == expected["tenants"]
    assert sum(sum(t["dropped"]) for t in timeline["tenants"]) > 0
    queued = [c for c in expected["classes"] if sum(c["delay_count"])]
    assert [{**c, "delay_mean_ns": None} for c in timeline["classes"]] == [{**c, "delay_mean_ns": None} for c in queued]
    for mine, theirs in zip(timeline["classes"], queued):
        assert mine["delay_mean_ns"] == pytest.approx(theirs["delay_mean_ns"], abs=0.1)


def test_the_timeline_adds_up_to_what_the_engine_reported(report: dict[str, Any]) -> None:
    timeline = report["timeline"]
    assert 0 < timeline["bins"] <= 512 and timeline["bin_ns"] % timeline["window_ns"] == 0
    assert (timeline["bins"] - 1) * timeline["bin_ns"] <= report["duration_ns"] < timeline["bins"] * timeline["bin_ns"]
    series = {s["tenant"]: s for s in timeline["tenants"]}
    scopes = {s["tenant"]: s for s in report["burst_scopes"] if s["scope"] == "tenant"}
    for tenant in report["tenants"]:
        mine = series.get(tenant["tenant"])
        if mine is None:
            assert tenant["packets"] == 0
            continue
        assert [sum(mine[key]) for key in ("packets", "bytes", "dropped")] == [tenant["packets"], tenant["bytes"], tenant["dropped"]]
        peak_bps = max(mine["peak_bytes"]) * 8_000_000_000 // timeline["window_ns"]
        assert peak_bps == scopes[tenant["tenant"]]["peak_window_bps"], "the busiest window, as the burst detector saw it"
        assert tenant["dropped"] > 0, "the scenario's bursts overflow the port"
    delays = {(c["tenant"], c["cls"]): c for c in timeline["classes"]}
    for tenant in report["tenants"]:
        for cls in tenant["classes"]:
            if cls["cls"] is None:
                continue
            mine = delays[(tenant["tenant"], cls["cls"])]
            assert sum(mine["delay_count"]) == cls["delay_ns"]["count"]
            assert max((m for m in mine["delay_max_ns"] if m is not None), default=None) == cls["delay_ns"]["max"]


def test_polled_rates_split_the_bins_across_poll_boundaries() -> None:
    # bins of 250 ns from 900 ns; polls every 1,000 ns: the first poll gets 100/250 of bin 0
    edges, rates = plot.polled_rates([100, 200, 300, 400], start_ns=900, bin_ns=250, poll_ns=1000)
    assert edges.tolist() == [900, 1000, 1900]
    assert rates.tolist() == [40 * 8e6, 960 * 8e6]  # bytes x 8e9 / 1000 ns
    edges, rates = plot.polled_rates([100, 200], start_ns=10**9 + 5, bin_ns=1000)
    assert edges.tolist() == [10**9 + 5, 10**9 + 2005] and rates.tolist() == [300 * 8], "a capture shorter than a poll: one poll"


def test_polled_rates_agree_with_the_engines_polled_views(report: dict[str, Any]) -> None:
    timeline = report["timeline"]
    for series in timeline["tenants"]:
        scope = next(s for s in report["burst_scopes"] if s["scope"] == "tenant" and s["tenant"] == series["tenant"])
        for poll in scope["polls"]:
            interval = poll["interval_ns"]
            edges, rates = plot.polled_rates(series["bytes"], timeline["start_ns"], timeline["bin_ns"], interval, timeline["start_ns"] + report["duration_ns"])
            assert len(rates) == poll["polls"]
            # the engine counts whole packets per poll; the timeline splits the bin across a boundary
            slack = max(series["bytes"]) * 8e9 / interval
            assert abs(rates.max() - poll["peak_bps"]) <= slack + 1, interval
            if poll["polls"] == 1:
                assert int(rates.max()) == poll["peak_bps"]


# --- the pictures -----------------------------------------------------------------------------


def test_the_pictures_are_written_readable_and_always_the_same(report: dict[str, Any], tmp_path: Path) -> None:
    paths = plot.plot_report(report, tmp_path / "out")
    names = [p.name for p in paths]
    assert names == ["rate-01-training.png", "rate-02-inference.png", "rate-03-evaluation.png", "delay.png", "bursts.png"]
    again = plot.render(copy.deepcopy(report))
    assert [p.read_bytes() for p in paths] == [p.png for p in again], "the same report gives the same bytes"
    for path in paths:
        png = path.read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 20_000, path.name
        height, width, _ = pixels(png).shape
        assert width == 11 * plot.DPI and 300 <= height <= 1200, path.name
        assert colours(png) > 50, f"{path.name} is all but blank"


def test_a_tenants_bursts_are_shaded_on_its_picture_alone(report: dict[str, Any]) -> None:
    tenant_bursts_only = dict(report, microbursts=[e for e in report["microbursts"] if e["scope"] == "tenant"])
    pictures = {p.name: p.png for p in plot.render(tenant_bursts_only)}
    shaded = shade(plot.BURST_COLORS[("tenant", "rate")])
    assert shows_colour(pictures["rate-01-training.png"], shaded) > 1000
    assert shows_colour(pictures["rate-02-inference.png"], shaded) > 1000
    assert shows_colour(pictures["rate-03-evaluation.png"], shaded) < 100, "evaluation has no burst (a few antialiased pixels of red lines)"


def test_tenants_can_be_chosen(report: dict[str, Any]) -> None:
    names = [p.name for p in plot.render(report, tenants=["evaluation"])]
    assert names == ["rate-01-evaluation.png", "delay.png", "bursts.png"]


def test_a_thousand_tenants_are_capped_and_the_cap_is_said(many_tenants: dict[str, Any]) -> None:
    pictures = plot.render(many_tenants, max_tenants=12)
    rates = [p for p in pictures if p.name.startswith("rate-")]
    assert len(rates) == 12 and pictures[-1].name == "bursts.png"
    assert not any(p.name == "delay.png" for p in pictures), "no port, no delays"
    assert {"rate-01-tenant-0000.png", "rate-02-tenant-0001.png"} <= {p.name for p in rates}, "the tenants with bursts come first"
    selection = plot.select_tenants(many_tenants, max_tenants=12)
    assert selection.note == "12 of 1,000 tenants drawn: those with the most bursts, then bytes"


def test_one_tenant_with_a_dollar_in_its_name_and_no_bursts(tmp_path: Path) -> None:
    report = scenario_report(tmp_path, ["cost$center$1"], duration_ns=3 * MS, bursts=[])
    assert report["microbursts"] == []
    names = [p.name for p in plot.render(report)]
    assert names == ["rate-01-cost_center_1.png", "delay.png", "bursts.png"]


def test_a_long_capture_gets_seconds_and_several_polls(tmp_path: Path) -> None:
    burst = Burst(0, ("10.0.9.1", "10.0.9.2", 49152, 4791, 17), 1_500 * MS, 2 * MS, 9_000_000_000)
    report = scenario_report(tmp_path, ["training"], duration_ns=3_000 * MS, background_bps=2_000_000, bursts=[burst])
    assert plot.time_axis(report["timeline"]["bins"] * report["timeline"]["bin_ns"]) == (10**9, "s")
    series = report["timeline"]["tenants"][0]
    edges, _ = plot.polled_rates(series["bytes"], report["timeline"]["start_ns"], report["timeline"]["bin_ns"], last_ns=report["end_ns"])
    seconds_touched = report["end_ns"] // 10**9 - report["start_ns"] // 10**9 + 1
    assert len(edges) - 1 == seconds_touched >= 3, "a poll for every second the capture touches"
    assert [p.name for p in plot.render(report)][0] == "rate-01-training.png"


def test_zero_packets_give_the_burst_timeline_alone(tmp_path: Path) -> None:
    (tmp_path / "empty.pcap").write_bytes(pcap([]))
    report = report_for(tmp_path / "empty.pcap", scenario_policy(["a", "b"]))
    assert report["packets"] == 0 and report["timeline"]["bins"] == 0
    pictures = plot.render(report)
    assert [p.name for p in pictures] == ["bursts.png"] and colours(pictures[0].png) > 10


def test_a_report_without_a_timeline_gets_the_burst_timeline_alone(report: dict[str, Any]) -> None:
    older = {key: value for key, value in report.items() if key not in ("timeline", "duration_ns", "warnings", "schema_version")}
    pictures = plot.render(older)
    assert [p.name for p in pictures] == ["bursts.png"]
    assert shows_colour(pictures[0].png, tuple(int(plot.BURST_COLORS[("tenant", "rate")][i : i + 2], 16) for i in (1, 3, 5)), 0) > 100


def test_time_and_rate_units_follow_the_span() -> None:
    assert plot.time_axis(800_000) == (1_000, "µs")
    assert plot.time_axis(20_000_000) == (1_000_000, "ms")
    assert plot.time_axis(3 * 10**9) == (10**9, "s")


def test_without_matplotlib_plotting_says_how_to_install_it(report: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(ImportError, match=r"pip install 'isolane\[plot\]'"):
        plot.render(report)


def test_the_report_modules_import_no_matplotlib() -> None:
    code = "import sys, isolane, isolane.report.plot, isolane.report.html; print(sorted(m for m in sys.modules if m.startswith('matplotlib')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
