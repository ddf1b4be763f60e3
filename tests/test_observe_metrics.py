"""``kinac run --metrics-port``: the Prometheus endpoint scraped over loopback while the runs
repeat (a bounded loop that stops by itself), its values checked against the runtime's own
statistics (the entry's steps and scratch arena, the rule engine's query events)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from observe_support import mlp_workspace

import kinac
from kinac.metrics import RunMetrics, parse, render
from kinac.observe.profile import loaded_entry

REPEAT = 50000  # long enough (about a second) for two scrapes while it runs


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return mlp_workspace(tmp_path, b=8, d=16, f=32)


def _own_entry(ws: Path) -> tuple[object, tuple[object, ...]]:
    fn = kinac.compile(str(ws), "mlp", cache_dir=str(ws / ".c"))
    rng = np.random.default_rng(0)
    arrays = tuple(rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16, 32), (32, 16)])
    fn(*arrays)
    entry, given = loaded_entry(fn, arrays, {})
    return entry, given


def test_endpoint_scraped_during_a_repeated_run(ws: Path) -> None:
    cmd = [sys.executable, "-m", "kinac", "run", str(ws), "mlp", "--metrics-port", "0",
           "--repeat", str(REPEAT), "--cache-dir", str(ws / ".c")]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("metrics: http://127.0.0.1:"), line + proc.stderr.read()  # type: ignore[union-attr]
        url = line.split()[1]
        scrapes: list[str] = []
        deadline = time.monotonic() + 30
        while len(scrapes) < 2:
            with urllib.request.urlopen(url, timeout=10) as r:
                assert r.headers["Content-Type"].startswith("text/plain")
                text = r.read().decode()
            # the endpoint is up before the first run ends: on a loaded machine the first
            # scrape can come before any call is counted (CI, 2026-12-02): wait for one
            if scrapes or parse(text)["kinac_calls_total"] >= 1 or time.monotonic() > deadline:
                scrapes.append(text)
            else:
                time.sleep(0.005)
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"over {REPEAT} runs" in rest
    entry, _ = _own_entry(ws)  # the runtime's own view of the same entry (from the cache)
    steps = len(entry.lowered.steps)  # type: ignore[attr-defined]
    first, second = (parse(s) for s in scrapes)
    for m in (first, second):
        calls = m["kinac_calls_total"]
        assert 1 <= calls <= REPEAT + 1
        assert m["kinac_kernel_launches_total"] == calls * steps
        assert m["kinac_alloc_reserved_bytes"] == entry.lowered.arena_bytes  # type: ignore[attr-defined]
        assert m["kinac_step_time_ms"] > 0
        assert 0 < m["kinac_step_time_ms_sum_total"] / calls < 10_000
        assert m["kinac_queries_run_total"] + m["kinac_queries_reused_total"] > 0
        assert 0 <= m["kinac_query_hit_pct"] <= 100
    assert second["kinac_calls_total"] >= first["kinac_calls_total"]
    assert "# TYPE kinac_calls_total counter" in scrapes[0]
    assert 'entry="mlp"' in scrapes[0] and 'pool="host_arena"' in scrapes[0]


def test_render_counts_every_call(ws: Path) -> None:
    entry, arrays = _own_entry(ws)
    run = RunMetrics("mlp", "cpu", entry=entry)
    for _ in range(5):
        t0 = time.perf_counter()
        entry(*arrays)  # type: ignore[operator]
        run.observe_call(time.perf_counter() - t0)
    m = parse(render(run))
    assert m["kinac_calls_total"] == 5
    assert m["kinac_kernel_launches_total"] == 5 * len(entry.lowered.steps)  # type: ignore[attr-defined]
    assert "kinac_graph_hit_pct" not in m  # the host has no graphs: no made-up zeros


def test_port_in_use_is_a_usage_error(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from kinac.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc = main(["run", str(ws), "mlp", "--metrics-port", str(port), "--repeat", "1",
                   "--cache-dir", str(ws / ".c")])  # fmt: skip
    assert rc == 2
    assert (
        f"kinac: error: --metrics-port: cannot listen on 127.0.0.1:{port}"
        in capsys.readouterr().err
    )


@pytest.mark.gpu
def test_gpu_metrics_match_the_entry_and_pool(ws: Path) -> None:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip("no CUDA GPU")
    fn = kinac.compile(str(ws), "mlp", target="cuda", cache_dir=str(ws / ".c"))
    rng = np.random.default_rng(0)
    arrays = tuple(rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16, 32), (32, 16)])
    fn(*arrays)
    entry, given = loaded_entry(fn, arrays, {})
    run = RunMetrics("mlp", "cuda", entry=entry)
    for _ in range(20):
        entry(*given)
        run.observe_call(0.001)
    m = parse(render(run))
    st = entry.resource.memory_stats()
    assert m["kinac_graph_captures_total"] == entry.captures
    assert m["kinac_graph_replays_total"] == entry.replays
    assert entry.captures + entry.replays >= 1
    assert m["kinac_alloc_reserved_bytes"] == st["reserved_bytes.all.current"]
    assert m["kinac_alloc_allocated_bytes"] == st["allocated_bytes.all.current"]
    want = 100.0 * entry.replays / (entry.captures + entry.replays)
    assert m["kinac_graph_hit_pct"] == pytest.approx(want)
