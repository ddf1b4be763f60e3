"""``kinac train --metrics-port``: the Prometheus endpoint scraped while a bounded ``kinac
train --json`` runs in a subprocess, each scrape checked against the trainer's own statistics
in its JSON lines (steps done, the last step's time and loss, tokens per step x steps over
the step times) and the loss-and-gradient entry's (kernels per step, its scratch arena)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from train_observe_support import TOKENS_PER_STEP, tiny_workspace

from kinac.metrics import TrainMetrics, parse, render
from kinac.train import Trainer
from kinac.train.observe import loss_entry, step_entries

STEPS = 20000  # a few seconds: scrapes while it runs


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_workspace(tmp_path_factory.mktemp("trainmetrics"))


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        return bytes(r.read()).decode()


def test_endpoint_scraped_during_kinac_train(ws: Path) -> None:
    cmd = [sys.executable, "-m", "kinac", "train", str(ws), "tiny", "--steps", str(STEPS),
           "--json", "--metrics-port", "0", "--cache-dir", str(ws / ".c")]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["event"] == "metrics" and first["url"].startswith("http://127.0.0.1:")
        scrapes: list[str] = []
        deadline = time.monotonic() + 60
        while len(scrapes) < 2 and time.monotonic() < deadline:
            text = _scrape(first["url"])
            if parse(text).get("kinac_train_steps_total", 0) >= 2 + 100 * len(scrapes):
                scrapes.append(text)
            time.sleep(0.01)
        rest, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert len(scrapes) == 2, "the training ended before two scrapes"
    lines = [json.loads(x) for x in rest.splitlines()]
    steps = {d["step"]: d for d in lines if d["event"] == "step"}
    done = lines[-1]
    assert done["event"] == "done" and done["steps"] == STEPS == len(steps)
    tr = Trainer(str(ws), "tiny", cache_dir=str(ws / ".c"))  # the runtime's own view
    tr.step()
    kernels = sum(len(e.lowered.steps) for e in (loss_entry(tr), *step_entries(tr)))
    arena = loss_entry(tr).lowered.arena_bytes
    for text in scrapes:
        m = parse(text)
        n = int(m["kinac_train_steps_total"])
        assert 2 <= n <= STEPS
        mine = steps[n]  # the step the scrape saw last: its loss and time, as printed
        assert m["kinac_train_loss"] == mine["loss"]
        assert m["kinac_train_step_time_ms"] == pytest.approx(mine["seconds"] * 1000, abs=1e-3)
        later = [steps[i]["seconds"] for i in range(2, n + 1)]  # the first step compiles
        rate = m["kinac_train_tokens_per_s"]
        assert (
            TOKENS_PER_STEP / (max(later) + 1e-6)
            <= rate
            <= TOKENS_PER_STEP / max(min(later) - 1e-6, 1e-9)
        )
        want = TOKENS_PER_STEP * len(later) / sum(later)
        assert rate == pytest.approx(want, rel=0.01)  # printed seconds are rounded to 1 us
        assert m["kinac_calls_total"] == n  # a step is one call: the same scrape, one lock
        assert m["kinac_kernel_launches_total"] == n * kernels
        assert m["kinac_alloc_reserved_bytes"] == arena
        assert m["kinac_queries_run_total"] + m["kinac_queries_reused_total"] > 0
    second = parse(scrapes[1])
    assert second["kinac_train_steps_total"] > parse(scrapes[0])["kinac_train_steps_total"]
    assert "# TYPE kinac_train_steps_total counter" in scrapes[0]
    assert "# TYPE kinac_train_tokens_per_s gauge" in scrapes[0]
    assert 'entry="tiny"' in scrapes[0] and 'pool="host_arena"' in scrapes[0]
    assert done["tokens_per_s"] == pytest.approx(
        TOKENS_PER_STEP * (STEPS - 1) / sum(steps[i]["seconds"] for i in range(2, STEPS + 1)),
        rel=0.01,
    )


def test_trainer_serve_metrics_from_python(ws: Path) -> None:
    tr = Trainer(str(ws), "tiny", cache_dir=str(ws / ".c"))
    server = tr.serve_metrics(0)
    try:
        results = list(tr.steps(3))
        m = parse(_scrape(server.url))
    finally:
        server.close()
    assert m["kinac_train_steps_total"] == 3 == m["kinac_calls_total"]
    assert m["kinac_train_loss"] == results[-1].loss
    assert m["kinac_train_step_time_ms"] == pytest.approx(results[-1].seconds * 1000)
    want = sum(r.tokens for r in results[1:]) / sum(r.seconds for r in results[1:])
    assert m["kinac_train_tokens_per_s"] == pytest.approx(want)
    assert "kinac_graph_hit_pct" not in m  # the host has no graphs: absent, not zero


def test_first_step_rate_until_a_second(ws: Path) -> None:
    run = TrainMetrics("tiny", "cpu")
    run.observe_step(0.5, 32, 3.0)
    assert parse(render(run))["kinac_train_tokens_per_s"] == 64.0
    run.observe_step(0.001, 32, 2.5)
    run.observe_step(0.003, 32, 2.0)
    m = parse(render(run))
    assert m["kinac_train_tokens_per_s"] == pytest.approx(64 / 0.004)
    assert m["kinac_train_steps_total"] == 3 and m["kinac_train_loss"] == 2.0
    assert m["kinac_train_step_time_ms"] == pytest.approx(3.0)


def test_port_in_use_is_a_usage_error(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    from kinac.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        rc = main(["train", str(ws), "tiny", "--steps", "1", "--metrics-port", str(port),
                   "--cache-dir", str(ws / ".c")])  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert f"kinac: error: --metrics-port: cannot listen on 127.0.0.1:{port}" in err


def test_simulated_step_has_train_metrics_and_no_entry_pools(ws: Path) -> None:
    tr = Trainer(str(ws), "tiny", simulate=2, cache_dir=str(ws / ".c"))
    server = tr.serve_metrics(0)
    try:
        results = list(tr.steps(2))
        m = parse(_scrape(server.url))
    finally:
        server.close()
    assert m["kinac_train_steps_total"] == 2
    assert m["kinac_train_loss"] == results[-1].loss
    assert "kinac_alloc_reserved_bytes" not in m  # a sharded step has no one entry: absent
