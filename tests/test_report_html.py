"""isolane.report.html: the replay report as one self-contained page, read as text and loaded
in a real headless browser (Debian's chromium), with a tenant whose name is a script."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from isolane.report.html import html_report
from isolane.report.plot import tenant_label
from isolane.report.units import rate_text
from support.report_fixture import scenario_report

pytest.importorskip("matplotlib", reason="the page's pictures need matplotlib, the extra isolane[plot]")

HOSTILE = "<script>alert(1)</script>"
NAMES = ("training", HOSTILE, "eval & co")
BROWSER_SECONDS = 120
_BEFORE = "<script>window.alert = function () { window.__alerted = true; };</script>"
# After the page's scripts: sort the burst list by bytes, then say what the browser made of the page.
_PROBE = """<script>
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var list = document.querySelector("table.sortable");
  list.tHead.rows[0].cells[5].click();
  var result = {
    images: images.length,
    decoded: images.filter(function (i) { return i.naturalWidth > 0 && i.src.indexOf("data:image/png;base64,") === 0; }).length,
    text: document.body.innerText,
    alerted: window.__alerted === true,
    bytes_sorted: Array.prototype.map.call(list.tBodies[0].rows, function (r) { return parseFloat(r.cells[5].dataset.v); }),
    page_width: document.documentElement.scrollWidth,
    window_width: window.innerWidth
  };
  var out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    report = scenario_report(tmp_path_factory.mktemp("scenario"), NAMES)
    report["warnings"] = ["tenants[2]: no traffic can reach <this> tenant"]
    return report


@pytest.fixture(scope="module")
def page(report: dict[str, Any]) -> str:
    return html_report(report)


def test_the_page_is_one_self_contained_file(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>") and page.count("<html") == 1 and page.rstrip().endswith("</html>")
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page and "url(" not in page, "no stylesheet or font fetched"
    sources = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert sources and all(source.startswith("data:image/png;base64,") for source in sources)


def test_every_string_of_the_report_is_escaped(page: str) -> None:
    assert HOSTILE not in page and html.escape(HOSTILE) in page
    assert page.count("<script") == 1, "the sort script alone"
    assert "eval &amp; co" in page and "eval & co" not in page
    assert "no traffic can reach &lt;this&gt; tenant" in page


def test_the_page_has_the_tables_the_warnings_and_the_pictures(report: dict[str, Any], page: str) -> None:
    warnings, tenants = page.index('class="warnings"'), page.index("<h2>Tenants</h2>")
    assert warnings < tenants, "warnings at the top"
    for heading in ("Microbursts", "What polled counters showed, beside the truth", "Bursts", "Pictures"):
        assert f"<h2>{heading}</h2>" in page
    assert page.count('<tr class="tenant">') == len(report["tenants"])
    classes = sum(len(t["classes"]) for t in report["tenants"] if t["tenant"] is not None)
    assert page.count('<tr class="class">') == classes, "classes under their tenants; the packets of no tenant have none"
    assert page.count("<img ") == 5  # three tenants' rates, the delays, the burst timeline
    assert 'alt="training: arrival rate over time (scenario.pcap)"' in page and f'alt="{html.escape(HOSTILE)}: arrival rate' in page
    training = next(s for s in report["burst_scopes"] if s["scope"] == "tenant" and s["tenant"] == "training")
    second = next(p for p in training["polls"] if p["interval_ns"] == 1_000_000_000)
    assert f"{rate_text(second['peak_bps'])}, 0 B (1 poll)" in page and rate_text(training["peak_window_bps"]) in page
    assert f"all {len(report['microbursts']):,}" in page


def test_a_page_of_tables_needs_no_matplotlib(report: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    page = html_report(report, plots=False)
    assert "<img" not in page and "<h2>Pictures</h2>" not in page and "<h2>Tenants</h2>" in page
    with pytest.raises(ImportError, match=r"isolane\[plot\]"):
        html_report(report)


def test_an_older_report_says_what_it_lacks(report: dict[str, Any]) -> None:
    older = {key: value for key, value in report.items() if key not in ("timeline", "duration_ns", "warnings", "schema_version")}
    page = html_report(older)
    assert "has no timeline" in page and "not in this report" in page
    assert page.count("<img ") == 1, "the burst timeline alone"


def test_profile_switches_are_listed(report: dict[str, Any]) -> None:
    switch = {"tenant": HOSTILE, "cls": 1, "class": "bulk", "time_ns": 0, "offset_ns": 1_500_000, "from": "base", "to": "degraded", "cause": "rate"}
    page = html_report(dict(report, profile_switches=[switch]), plots=False)
    assert "<h2>Profile switches</h2>" in page and f"{html.escape(HOSTILE)} / bulk" in page and "1.5 ms" in page


def test_without_a_port_there_are_no_delay_columns(tmp_path: Path) -> None:
    report = scenario_report(tmp_path, ["solo"], duration_ns=2_000_000, port=False)
    page = html_report(report, plots=False)
    assert "delay p99" not in page and "none in the policy: no queueing delays" in page
    assert page.count('<tr class="class">') == 2 and "<h2>Bursts</h2>" in page


# --- in a browser -----------------------------------------------------------------------------


def _browser() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no chromium on PATH (Debian: apt-get install chromium): the page is not loaded in a browser")


def _open(browser: str, page_path: Path, profile: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--window-size=1280,2000", *options]
    return subprocess.run([*command, page_path.as_uri()], capture_output=True, text=True, timeout=BROWSER_SECONDS, check=True)


def test_chromium_shows_every_tenant_and_decodes_every_picture(report: dict[str, Any], page: str, tmp_path: Path) -> None:
    browser = _browser()
    probed = page.replace("<head>", "<head>" + _BEFORE, 1).replace("</body>", _PROBE + "</body>", 1)
    (tmp_path / "report.html").write_text(probed, encoding="utf-8")
    dom = _open(browser, tmp_path / "report.html", tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom").stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, f"the probe did not run: {dom[-500:]!r}"
    result = json.loads(html.unescape(found.group(1)))
    for tenant in report["tenants"]:
        assert tenant_label(tenant["tenant"]) in result["text"]
    assert result["images"] == 5 and result["decoded"] == 5, "every picture decoded"
    assert not result["alerted"], "a tenant's name ran as a script"
    assert result["bytes_sorted"] == sorted(result["bytes_sorted"]) and len(result["bytes_sorted"]) == len(report["microbursts"])
    assert result["page_width"] <= result["window_width"], "the page fits a 1280-pixel window"


def test_chromium_draws_the_page(page: str, tmp_path: Path) -> None:
    browser = _browser()
    (tmp_path / "report.html").write_text(page, encoding="utf-8")
    _open(browser, tmp_path / "report.html", tmp_path / "profile", f"--screenshot={tmp_path / 'shot.png'}")
    import matplotlib.image

    shot = matplotlib.image.imread(tmp_path / "shot.png")
    assert shot.shape[:2] == (2000, 1280)
    colours = np.unique(np.round(shot[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50, "tables and text drawn, not a blank page"

