"""Metrics of a running entry in the Prometheus text format (``kinac run --metrics-port N``).

A :class:`RunMetrics` is what the run loop updates: plain counters (one addition per call,
nothing else on the hot path). Everything else is read when a scraper asks: the entry's own
statistics (CUDA pool bytes and fragmentation, graph captures and replays, the host scratch
arena), and the rule engine's query events. :func:`serve` exposes them on 127.0.0.1 only.
``prometheus-client`` is imported lazily, by this module only. Names and units:
``docs/observability.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

PREFIX = "kinac_"


@dataclass
class RunMetrics:
    """Counters of one entry's repeated calls, and where to read the rest at scrape time."""

    entry_name: str
    target: str
    entry: Any = None  # the loaded entry (HostEntry / GpuEntry), once the first call built it
    db: Any = None  # the rule engine's database (query events)
    calls: int = 0
    call_ms_total: float = 0.0
    last_call_ms: float = 0.0
    launches: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def observe_call(self, seconds: float) -> None:
        """One completed call of the entry (device work included)."""
        ms = seconds * 1000.0
        self.calls += 1
        self.call_ms_total += ms
        self.last_call_ms = ms
        self.launches += launches_per_call(self.entry)

    def samples(self) -> Iterator[tuple[str, str, str, float, dict[str, str]]]:
        """``(name, type, help, value, labels)`` of every metric, read now."""
        lab = {"entry": self.entry_name, "target": self.target}
        yield "calls", "counter", "completed calls of the entry", self.calls, lab
        yield "step_time_ms", "gauge", "wall time of the last call (ms)", self.last_call_ms, lab
        yield "step_time_ms_sum", "counter", "wall time of all calls (ms)", self.call_ms_total, lab
        yield "kernel_launches", "counter", "kernels run (graph replays count theirs)", \
            self.launches, lab  # fmt: skip
        yield from _graph_samples(self.entry, lab)
        yield from _alloc_samples(self.entry, lab)
        yield from _pinned_samples(self.entry, lab)
        yield from _query_samples(self.db)


@dataclass
class TrainMetrics(RunMetrics):
    """:class:`RunMetrics` of a training run (``kinac train --metrics-port N``): a call is a
    step (the loss-and-gradient call and the optimizer's update), ``entry`` the loss-and-gradient
    entry (its pools and graphs), plus the ``kinac_train_*`` gauges. A step's update and a
    scrape hold one lock (once a step, not per kernel), so a scrape never sees half a step."""

    step_entries: tuple[Any, ...] = ()  # the optimizer's entries: their kernels count too
    last: tuple[int, float, float, float] = (0, 0.0, 0.0, 0.0)  # steps, loss, ms, tokens/s
    _later: tuple[int, float] = (0, 0.0)  # tokens and seconds of the steps after the first
    _lock: Any = field(default_factory=threading.Lock)

    def observe_step(self, seconds: float, tokens: int, loss: float) -> None:
        """One completed step: ``tokens`` seen in ``seconds`` (device work included)."""
        with self._lock:
            self._observe_step(seconds, tokens, loss)

    def _observe_step(self, seconds: float, tokens: int, loss: float) -> None:
        self.observe_call(seconds)
        self.launches += sum(launches_per_call(e) for e in self.step_entries)
        steps = self.last[0] + 1
        if steps > 1:  # the first step compiles: its rate is not the training's
            self._later = (self._later[0] + tokens, self._later[1] + seconds)
        toks, secs = self._later if steps > 1 else (tokens, seconds)
        self.last = (steps, loss, seconds * 1000.0, toks / secs if secs > 0 else 0.0)

    def samples(self) -> Iterator[tuple[str, str, str, float, dict[str, str]]]:
        with self._lock:
            run = list(super().samples())
            steps, loss, ms, tps = self.last
        lab = {"entry": self.entry_name, "target": self.target}
        yield from run
        yield "train_steps", "counter", "training steps completed", steps, lab
        yield "train_step_time_ms", "gauge", "wall time of the last step (ms)", ms, lab
        yield "train_tokens_per_s", "gauge", "tokens per second of the steps after the first " \
            "(the first step's own until a second ends)", tps, lab  # fmt: skip
        yield "train_loss", "gauge", "loss of the last step (unscaled)", loss, lab


def launches_per_call(entry: Any) -> int:
    """Kernels one call of ``entry`` runs: host steps, or GPU launches and library calls."""
    if entry is None:
        return 0
    steps = entry.lowered.steps
    return sum(max(len(getattr(s, "launches", ())), 1) for s in steps)


def _graph_samples(entry: Any, lab: dict[str, str]) -> Iterator[Any]:
    if entry is None or not hasattr(entry, "captures"):
        return
    captures, replays = entry.captures, getattr(entry, "replays", 0)
    yield "graph_captures", "counter", "CUDA graphs captured", captures, lab
    yield "graph_replays", "counter", "calls run by replaying a CUDA graph", replays, lab
    total = captures + replays
    hit = 100.0 * replays / total if total else 0.0
    yield "graph_hit_pct", "gauge", "replays / (replays + captures), percent", hit, lab


def _alloc_samples(entry: Any, lab: dict[str, str]) -> Iterator[Any]:
    """CUDA pool statistics (``memory_stats``) where the entry has a pool, else the host
    runtime's per-thread scratch arena (the host has no pool of its own)."""
    if entry is None:
        return
    resource = getattr(entry, "resource", None)
    if resource is not None and hasattr(resource, "memory_stats"):
        st = resource.memory_stats()
        pool = {**lab, "pool": "cuda"}
        reserved = st.get("reserved_bytes.all.current", 0)
        allocated = st.get("allocated_bytes.all.current", 0)
        frag = st.get("fragmentation_pct", 0.0)
    else:
        pool = {**lab, "pool": "host_arena"}
        reserved = allocated = entry.lowered.arena_bytes
        frag = 0.0
    yield "alloc_reserved_bytes", "gauge", "bytes the allocator holds", reserved, pool
    yield "alloc_allocated_bytes", "gauge", "bytes handed out", allocated, pool
    yield "alloc_frag_pct", "gauge", "external fragmentation of free memory, percent", frag, pool


def _pinned_samples(entry: Any, lab: dict[str, str]) -> Iterator[Any]:
    """GPU entries fed host arrays: the page-locked pool (``pool="pinned"``, process-wide) and
    the entry's staged copies."""
    stager = getattr(entry, "_stager", None)
    if stager is None:
        return
    st = stager.pool.memory_stats()
    pool = {**lab, "pool": "pinned"}
    yield "alloc_reserved_bytes", "gauge", "bytes the allocator holds", \
        st["reserved_bytes.all.current"], pool  # fmt: skip
    yield "alloc_allocated_bytes", "gauge", "bytes handed out", \
        st["allocated_bytes.all.current"], pool  # fmt: skip
    yield "alloc_frag_pct", "gauge", "external fragmentation of free memory, percent", \
        st["fragmentation_pct"], pool  # fmt: skip
    yield "host_input_copies", "counter", "host arrays copied in through pinned slots", \
        stager.copies, lab  # fmt: skip
    yield "host_input_bytes", "counter", "bytes copied in from host arrays", stager.bytes, lab


def _query_samples(db: Any) -> Iterator[Any]:
    events = getattr(db, "events", None)
    if events is None:
        return
    run, reused = len(events.executed_events), len(events.reused_events)
    yield "queries_run", "counter", "rule-engine queries executed", run, {}
    yield "queries_reused", "counter", "rule-engine queries reused from the cache", reused, {}
    hit = 100.0 * reused / (run + reused) if run + reused else 0.0
    yield "query_hit_pct", "gauge", "reused / (run + reused), percent", hit, {}


class _Collector:
    """A prometheus-client collector reading a :class:`RunMetrics` at each scrape."""

    def __init__(self, run: RunMetrics) -> None:
        self.run = run

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families: dict[str, Any] = {}  # one family per name: samples differ by labels (pool)
        for name, kind, text, value, labels in list(self.run.samples()):
            fam = families.get(name)
            if fam is None:
                cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                fam = families[name] = cls(PREFIX + name, text, labels=list(labels))
            fam.add_metric(list(labels.values()), float(value))
        yield from families.values()


def registry(run: RunMetrics) -> Any:
    """A ``CollectorRegistry`` holding ``run``'s metrics (nothing of the process's default)."""
    from prometheus_client import CollectorRegistry

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Collector(run))  # type: ignore[arg-type]
    return reg


def render(run: RunMetrics) -> str:
    """The Prometheus text exposition of ``run`` now."""
    from prometheus_client import generate_latest

    return bytes(generate_latest(registry(run))).decode()


class MetricsServer:
    """``/metrics`` on 127.0.0.1:``port`` (0: a free port) until :meth:`close`."""

    def __init__(self, run: RunMetrics, port: int) -> None:
        from prometheus_client import start_http_server

        self.httpd, self.thread = start_http_server(port, addr="127.0.0.1", registry=registry(run))
        self.port = int(self.httpd.server_port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def parse(text: str) -> dict[str, float]:
    """``{name: value}`` of a text exposition, for tests and scripts: the bare name holds the
    first sample of that name (``pool="cuda"`` before ``pool="pinned"``), and every sample is
    also under its name with labels as written (``kinac_alloc_reserved_bytes{...}``)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, rest = _split_sample(line)
        value = float(rest.split()[0])  # a timestamp may follow the value
        out.setdefault(head.split("{", 1)[0], value)
        out[head] = value
    return out


def _split_sample(line: str) -> tuple[str, str]:
    """``name{labels}`` and what follows it; a label value may hold spaces, braces and
    escaped quotes."""
    brace = line.find("{")
    space = line.find(" ")
    if brace < 0 or 0 <= space < brace:
        return line[:space], line[space + 1 :]
    quoted, escaped = False, False
    for i in range(brace + 1, len(line)):
        c = line[i]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            quoted = not quoted
        elif c == "}" and not quoted:
            return line[: i + 1], line[i + 1 :]
    raise ValueError(f"not a Prometheus sample line: {line!r}")
