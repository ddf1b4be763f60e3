"""Adversarial checks of ``kinac.metrics``: ``parse`` on what a Prometheus text exposition may
hold (timestamps, label values with spaces, braces and quotes), the server as the Python API
offers it (a port in use, closed twice), and a scrape of a running ``kinac run
--metrics-port 0`` checked against the entry's own figures."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from observe_support import mlp_workspace

from kinac.metrics import MetricsServer, RunMetrics, parse, render

ROOT = Path(__file__).resolve().parents[1]


def test_parse_takes_the_value_not_a_timestamp() -> None:
    """``name value timestamp`` gave the timestamp as the value."""
    got = parse('kinac_calls_total{entry="m"} 3 1700000000000\nkinac_x 2.5\n')
    assert got["kinac_calls_total"] == 3.0 and got['kinac_calls_total{entry="m"}'] == 3.0
    assert got["kinac_x"] == 2.5


def test_parse_label_values_with_spaces_and_braces() -> None:
    line = r'kinac_calls_total{entry="a} b\"c",target="cpu"} 7.0 17'
    assert parse(line) == {"kinac_calls_total": 7.0, line.rsplit(" ", 2)[0]: 7.0}


def test_render_parse_round_trip_with_an_odd_entry_name() -> None:
    run = RunMetrics('odd } name "q"', "cpu")
    run.calls, run.call_ms_total = 4, 10.0
    got = parse(render(run))
    assert got["kinac_calls_total"] == 4.0 and got["kinac_step_time_ms_sum_total"] == 10.0


def test_server_port_in_use_and_closed_twice() -> None:
    run = RunMetrics("m", "cpu")
    server = MetricsServer(run, 0)
    try:
        with pytest.raises(OSError):
            MetricsServer(run, server.port)
        text = urllib.request.urlopen(server.url, timeout=5).read().decode()
        assert parse(text)["kinac_calls_total"] == 0.0
    finally:
        server.close()
    server.close()  # harmless


def test_scrape_during_a_run_matches_the_entry(tmp_path: Path) -> None:
    """The CLI as a user runs it: launches = calls x steps, the arena = the entry's plan."""
    ws = mlp_workspace(tmp_path, b=16, d=32, f=64)
    cmd = [sys.executable, "-m", "kinac", "run", str(ws), "mlp", "--repeat", "100000",
           "--metrics-port", "0", "--cache-dir", str(tmp_path / ".c")]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", line)
        assert url, line
        seen = []
        for _ in range(2):
            time.sleep(0.3)
            seen.append(parse(urllib.request.urlopen(url.group(1), timeout=5).read().decode()))
    finally:
        proc.kill()
        proc.wait()
    for got in seen:
        calls = got["kinac_calls_total"]
        assert calls >= 1 and got["kinac_kernel_launches_total"] == 3 * calls
        assert got["kinac_alloc_reserved_bytes"] == got["kinac_alloc_allocated_bytes"] > 0
        assert got['kinac_alloc_frag_pct{entry="mlp",pool="host_arena",target="cpu"}'] == 0.0
        assert got["kinac_step_time_ms_sum_total"] >= got["kinac_step_time_ms"] > 0
    assert seen[1]["kinac_calls_total"] >= seen[0]["kinac_calls_total"]
