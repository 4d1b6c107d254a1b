"""The status page at fleet size: the summary first, what needs attention first, paged, a filter
box, relative times with the absolute one on hover, links; and in a real browser (headless
Chromium) at 10,000 profiles."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import cpcreds
from tests.fakes.builders import access_provider, cluster_profile

MINT = {"name": "mint", "type": "mint", "options": {"lifetime": 3600}}


def profile(name: str, **extension: Any) -> dict[str, Any]:
    return cluster_profile(name, access_provider("mint", f"https://{name}.test:6443", exec_extension={"clusterName": name, **extension}))


def test_the_page_shows_the_summary_then_failing_profiles_first_with_relative_times(start_serve: Any, tmp_path: Path) -> None:
    profiles = {f"r{i}.yaml": profile(f"ok-{i}") for i in range(5)} | {"z.yaml": profile("zz-broken", fail=True)}
    running = start_serve([MINT], profiles, kubeconfig_dir=str(tmp_path / "kubeconfigs"))
    running.wait_ready()
    status, content_type, page = running.get("/")
    assert status == 200 and content_type.startswith("text/html")
    summary, rows = page.split('id="notices"', 1)
    assert "Ready" in summary and cpcreds.__version__ in summary
    assert f"folder {tmp_path / 'profiles'}" in summary and str(tmp_path / "kubeconfigs") in summary and "none since start" in summary
    for endpoint in ("/healthz", "/readyz", "/metrics", "/v1/clusters"):
        assert f'href="{endpoint}' in summary
    assert re.search(r'<th class="ready">.*?</th>', summary) and '<td class="n">5</td>' in summary and '<td class="n">1</td>' in summary
    links = re.findall(r'<a href="(/v1/clusters/[^"]+)">', rows)
    assert links[0] == "/v1/clusters/fleet-system/zz-broken"  # failing first, although last by name
    assert len(links) == 6
    assert re.search(r'<time datetime="[0-9T:-]+Z" title="[0-9 :-]+ UTC">in (59|60) min</time>', rows)  # expires
    assert re.search(r'<time datetime="[^"]+" title="[^"]+">\d+ s ago</time>', rows)  # last success
    # Next refresh (the column after Expires) is a time to come or "now", never one past.
    next_refresh = [cells[5] for cells in (re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows.split("<tr")) if len(cells) > 5]
    assert len(next_refresh) == 6 and not [cell for cell in next_refresh if " ago<" in cell]
    assert all(re.search(r">(in \d+ (s|min)|now)</time>", cell) for cell in next_refresh), next_refresh
    assert "Probe" not in rows and "ControlPlaneHealthy" not in rows  # probes off: no empty columns
    assert running.reload()
    assert re.search(r"Last reload</dt><dd>ok \(test\)", running.get("/")[2])


def test_the_page_filters_and_pages_keeping_the_filter(start_serve: Any) -> None:
    running = start_serve([MINT], {f"c{i}.yaml": profile(f"c{i:02d}") for i in range(7)} | {"f.yaml": profile("failer", fail=True)})
    running.wait_ready()
    page = running.get("/?state=ready&limit=3")[2]
    assert len(re.findall(r'<a href="/v1/clusters/', page)) == 3 and "failer" not in page.split('id="profiles"')[1]
    assert '<option value="ready" selected>' in page
    next_link = re.search(r'<a href="(/\?[^"]*continue=[^"]+)">next page', page)
    assert next_link and "state=ready" in next_link.group(1) and "limit=3" in next_link.group(1)
    second = running.get(next_link.group(1).replace("&amp;", "&"))[2]
    first_names, second_names = (re.findall(r'href="/v1/clusters/fleet-system/(c\d+)"', text) for text in (page, second))
    assert len(second_names) == 3 and not set(first_names) & set(second_names)  # the next three ready ones
    assert 'value="fleet-system/c"' in running.get("/?prefix=fleet-system/c")[2]
    stale = running.get("/?state=ready&limit=3&continue=garbage")
    # A stale bookmark is the first page again (the page orders by attention, then soonest expiry).
    assert stale[0] == 200 and len(re.findall(r'href="/v1/clusters/fleet-system/(c\d+)"', stale[2])) == 3


# -- in a real browser -------------------------------------------------------------------------------------------------------


def _chromium() -> str:
    browser = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)
    if browser is None:
        pytest.skip("no chromium on this machine (scripts/test.sh installs Debian's chromium under CI=true where apt-get can)")
    return browser


def _browse(browser: str, profile_dir: Path, *args: str) -> str:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]
    flags += ["--disable-component-update", "--disable-sync", f"--user-data-dir={profile_dir}", "--window-size=1280,800", "--virtual-time-budget=3000"]
    result = subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.slow
def test_the_page_in_chromium_at_10000_profiles(start_serve: Any, tmp_path: Path) -> None:
    browser = _chromium()
    profiles = {f"c{i:05d}.json": json.dumps(profile(f"c{i:05d}", **({"fail": True} if i % 1000 == 7 else {}))) for i in range(10_000)}
    running = start_serve([MINT], profiles)
    running.wait_ready(timeout=60)
    started = time.perf_counter()
    dom = _browse(browser, tmp_path / "chromium", "--dump-dom", running.url + "/")
    assert time.perf_counter() - started < 15
    # The summary (counts by state) ends within the first screen of 800 pixels.
    bottom = re.search(r'data-summary-bottom="(\d+)"', dom)
    assert bottom and 0 < int(bottom.group(1)) <= 800, bottom
    assert '<td class="n">9990</td>' in dom and '<td class="n">10</td>' in dom
    assert len(re.findall(r'href="/v1/clusters/fleet-system/', dom)) == 100  # one page, not 10,000 rows
    # Filter to failing, as the filter box submits it, and follow the first row's link.
    failing = _browse(browser, tmp_path / "chromium", "--dump-dom", running.url + "/?state=failing&provider=&prefix=")
    links = re.findall(r'href="(/v1/clusters/fleet-system/[^"]+)"', failing)
    assert links == [f"/v1/clusters/fleet-system/c{i:05d}" for i in range(7, 10_000, 1000)]
    shown = _browse(browser, tmp_path / "chromium", "--dump-dom", running.url + links[0])
    assert '"state": "failing"' in shown and '"key": "fleet-system/c00007"' in shown
    # A screenshot of the first screen: the summary is drawn (the image is not blank).
    shot = tmp_path / "page.png"
    _browse(browser, tmp_path / "chromium", f"--screenshot={shot}", running.url + "/")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    if kept := os.environ.get("CPCREDS_KEEP_SCREENSHOT"):  # docs/serve.md shows the page with this
        shutil.copyfile(shot, kept)
