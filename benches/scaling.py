"""Compile-time scaling with depth: a model chaining the transformer block L times.

    python benches/scaling.py [--layers 1 4 16 32] [--targets cpu cuda]
    python benches/scaling.py --speed [--reps N]
    python benches/scaling.py --resident [--layers ...] [--targets ...] [--repeat N]
    python benches/scaling.py --server [--layers ...] [--targets ...] [--repeat N]

Each layer has its own weights (B=2 S=32 D=64 H=4 KV=2 F=176, f32), so the L layers lower to
the same kernels L times over. For each L and target (``cuda`` builds PTX only: no GPU is
needed) it times, each in a fresh ``kinac build`` process: a cold build (empty cache), a build
after editing only the last layer's wiring (one extra ``mul``), and a no-op rebuild. Prints a
markdown table, wall clock and CPU seconds (on a shared machine the CPU time is steadier).
Issue 19's goals: cold L=32 within 2x of cold L=1; the one-layer edit at L=32 within 10% of
its cold build; the no-op unchanged.

``--resident``: the same edit in a long-lived session (what ``kinac watch`` does: imports and
the interpreter paid once; after each build the session collects and freezes its survivors,
as ``kinac watch`` does while it waits), CPU seconds of the cold build and of the edit's
build, in one fresh process per L and target.

``--server``: the same edit built by a fresh ``kinac build`` process that forwards to a warm
``kinac serve`` (kinac.server): the client's CPU seconds plus the server's for the request
(from the server's own log, ``KINAC_SERVER_CPU_LOG``: the end of the previous request to the
end of this one, its collection after answering included);
and, in the same run, the same edit in a resident session (as ``--resident``), the floor the
server's part is compared with.

``--speed``: steady-state run time, same run, of entries built as the pipeline builds them
(cut into pieces at their calls, kernels stitched, wrapper at -O0) against the same graph
lowered whole (one piece, wrapper at -O3, as before the pieces) and as one module
(``lower_graph``: kernels inlined, -O3). Entries: the transformer workspace's block and
attention, and this model at L = 4.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BLOCK_WS = ROOT / "workspaces" / "transformer"
DIMS = {"H": 4, "KV": 2, "B": 2, "S": 32, "D": 64, "F": 176}
WEIGHTS = (
    ("wn1", "[D]"), ("wq", "[D D]"), ("wk", "[D (* KV Dh)]"), ("wv", "[D (* KV Dh)]"),
    ("wo", "[D D]"), ("wn2", "[D]"), ("wg", "[D F]"), ("wu", "[D F]"), ("wd", "[F D]"),
)  # fmt: skip


def model_source(layers: int, edited: bool, wrap: dict[int, str] | None = None) -> str:
    """``model``: ``x`` through ``layers`` blocks, layer ``i``'s weights named ``wq-i`` etc.;
    ``edited`` squares the last layer's input, ``wrap`` applies a unary op to layer ``i``'s."""
    params = ["(H : dim) (KV : dim) (x : (tensor T [B S D]))"]
    params += [f"({w}-{i} : (tensor T {t}))" for i in range(layers) for w, t in WEIGHTS]
    lets, prev = [], "x"
    for i in range(layers):
        arg = f"(mul {prev} {prev})" if edited and i == layers - 1 else prev
        if wrap and i in wrap:
            arg = f"({wrap[i]} {arg})"
        ws = " ".join(f"{w}-{i}" for w, _ in WEIGHTS)
        lets.append(f"(h{i} (block H KV {arg} {ws}))")
        prev = f"h{i}"  # layer i reads layer i - 1's output
    return (
        '(module model)\n(import "block.kina")\n\n'
        f"(defn model [{' '.join(params)}]\n  -> (tensor T [B S D])\n"
        "  (where (= D (* H Dh)) (= H (* KV G)))\n"
        f"  (let [{' '.join(lets)}]\n    h{layers - 1}))\n"
    )


def make_workspace(where: Path, layers: int) -> Path:
    ws = where / f"ws{layers}"
    shutil.copytree(BLOCK_WS, ws, ignore=shutil.ignore_patterns(".kinac-cache", "kina.toml"))
    dims = ", ".join(f"{k} = {v}" for k, v in DIMS.items())
    (ws / "kina.toml").write_text(
        '[workspace]\nname = "scaling"\nsources = ["**/*.kina"]\n\n[target]\nkind = "cpu"\n\n'
        f'[[entry]]\nname = "model"\ndefn = "model"\ndims = {{ {dims} }}\ndtypes = {{ T = "f32" }}\n'
    )
    (ws / "model.kina").write_text(model_source(layers, edited=False))
    return ws


def timed_build(ws: Path, cache: Path, target: str, server: bool = False) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) seconds of one ``kinac build`` process: on a shared
    machine the CPU time is the steadier of the two. Without ``server`` the process builds
    itself (``KINAC_SERVER=0``); with it, it is a client that forwards to a running server."""
    cmd = [sys.executable, "-m", "kinac", "build", str(ws), "--cache-dir", str(cache)]
    env = {**os.environ, "KINAC_SERVER": "1" if server else "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [*cmd, "--target", target], capture_output=True, text=True, cwd=ROOT, env=env
    )
    took = time.perf_counter() - t0
    if server and "kinac: note" in done.stderr:
        raise SystemExit(f"the build was not forwarded:\n{done.stderr}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"build failed ({target}):\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


RESIDENT = """
import sys, time
sys.path[:0] = [{root!r}, {benches!r}]
from pathlib import Path
import scaling
from kinac.compiler_gc import compiler_gc, settle
from kinac.session import Session
compiler_gc()  # as `kinac watch` (the command line) does
ws = Path({ws!r})
s = Session(ws, cache_dir={cache!r}, target={target!r})
t = time.process_time(); s.build(); cold = time.process_time() - t
settle()  # what `kinac watch` does after each build, while it waits for the next save
(ws / "model.kina").write_text(scaling.model_source({n}, edited=True))
s.invalidate_paths([ws / "model.kina"])
t = time.process_time(); s.build(); edit = time.process_time() - t
print(cold, edit)
"""


def _resident_once(where: Path, n: int, target: str) -> tuple[float, float]:
    """One fresh session's cold build and one-layer edit (CPU seconds), its own cache: a cache
    shared between L would hand the deeper model's cold build the shallower one's kernels."""
    ws = make_workspace(where, n)
    code = RESIDENT.format(root=str(ROOT), benches=str(ROOT / "benches"), ws=str(ws), n=n,
                           target=target, cache=str(where / f"cache{n}"))  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    c, e = (float(x) for x in done.stdout.split()[-2:])
    return c, e


def resident(layers: list[int], targets: list[str], repeat: int = 1) -> None:
    """Cold build and one-layer edit in one session per L and target (CPU seconds; the
    least of ``repeat`` sessions for each)."""
    print(
        "| target | L | cold, in session (CPU s) | one-layer edit, same session (CPU s) | edit / cold |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="kinac-resident-") as tmp:
        for target in targets:
            for n in layers:
                runs = [_resident_once(Path(tmp) / target / str(r), n, target)
                        for r in range(repeat)]  # fmt: skip
                cold, edit = min(c for c, _ in runs), min(e for _, e in runs)
                print(f"| {target} | {n} | {cold:.2f} | {edit:.2f} | {edit / cold:.0%} |")


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a running process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _logged_cpu(log: Path, lines: int) -> float | None:
    """The server's CPU seconds after its ``lines``-th logged point (``KINAC_SERVER_CPU_LOG``:
    its start, then the end of each request, collection included), waiting for it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = log.read_text().split() if log.exists() else []
        if len(got) >= lines:
            return float(got[lines - 1])
        time.sleep(0.01)
    return None


def _via_server(proc: Any, ws: Path, cache: Path, target: str) -> tuple[float, float, float]:
    """A forwarded build: its wall time, the client's CPU plus the server's for the request,
    and the client's alone. The server's: from its CPU log when it keeps one (exact: from the
    end of the previous request to the end of this one, its collection after answering
    included), else from /proc (ticks of 10 ms), sampled until it stops working."""
    log = getattr(proc, "cpu_log", None)
    if log is not None:
        n = proc.cpu_lines  # its start and each request so far
        wall, cpu = timed_build(ws, cache, target, server=True)
        before, after = _logged_cpu(log, n), _logged_cpu(log, n + 1)
        if before is None or after is None:
            raise SystemExit("the server logged no CPU for the request")
        proc.cpu_lines = n + 1
        return wall, cpu + after - before, cpu
    s0 = _proc_cpu(proc.pid)
    wall, cpu = timed_build(ws, cache, target, server=True)
    s1 = _proc_cpu(proc.pid)
    while True:  # what the server does after answering (collecting, for the next request)
        time.sleep(0.1)
        s1, last = _proc_cpu(proc.pid), s1
        if s1 == last:
            return wall, cpu + s1 - s0, cpu


def _served_once(where: Path, n: int, target: str) -> tuple[Any, ...] | None:
    """One row's measurements on a fresh workspace, cache and server: cold, edit and no-op
    via the server, a fresh process's no-op, the resident session's edit; None when kinac's
    sources changed meanwhile (the server and the client then name different sockets, and the
    client would build alone)."""
    from kinac.server.address import socket_path, version_fingerprint

    version = version_fingerprint(fresh=True)
    ws = make_workspace(where, n)
    cache = where / f"cache{n}"
    cold = timed_build(ws, cache, target)
    cpu_log = where / f"server-cpu-{n}-{target}.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kinac", "serve", str(ws), "--cache-dir",
         str(cache), "--target", target, "--idle-timeout", "600"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "KINAC_SERVER_CPU_LOG": str(cpu_log)},
    )  # fmt: skip
    proc.cpu_log, proc.cpu_lines = cpu_log, 1  # type: ignore[attr-defined]
    try:
        sock = socket_path(ws.resolve(), cache.resolve(), os.environ)
        deadline = time.monotonic() + 300
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("kinac serve did not start")
            if version_fingerprint(fresh=True) != version:
                return None
            time.sleep(0.05)
        if not cpu_log.exists():  # a server that keeps no CPU log (an older kinac): /proc
            time.sleep(1.0)
            if not cpu_log.exists():
                proc.cpu_log = None  # type: ignore[attr-defined]
        timed_build(ws, cache, target, server=True)  # the server's session warm
        proc.cpu_lines = 2  # its start, this request
        (ws / "model.kina").write_text(model_source(n, edited=True))
        edit = _via_server(proc, ws, cache, target)
        noop = _via_server(proc, ws, cache, target)
        if version_fingerprint(fresh=True) != version:  # the client may have built alone
            return None
    finally:
        proc.terminate()
        proc.wait(60)
    local_noop = timed_build(ws, cache, target)
    _, res_edit = _resident_once(where / "resident", n, target)
    return cold, edit, noop, local_noop, (res_edit, res_edit)


def served(layers: list[int], targets: list[str], repeat: int = 1) -> None:
    """Cold build (fresh process, no server, empty cache) against the one-layer edit built by a
    fresh ``kinac build`` that forwards to a warm ``kinac serve``, counting the client's CPU
    seconds plus the server's for that request (and wall time); the no-op the same way, and a
    fresh process's no-op without the server. The least of ``repeat`` runs of each."""
    sys.path.insert(0, str(ROOT))
    rows = []
    with tempfile.TemporaryDirectory(prefix="kinac-served-") as tmp:
        for target in targets:
            for n in layers:
                runs = []
                for r in range(repeat):
                    for attempt in range(5):  # another session may edit kinac meanwhile
                        run = _served_once(Path(tmp) / target / f"{r}-{attempt}", n, target)
                        if run is not None:
                            runs.append(run)
                            break
                        print(f"  kinac's sources changed during {target} L={n}: again",
                              file=sys.stderr)  # fmt: skip
                    else:
                        raise SystemExit("kinac's sources keep changing: rerun later")
                best = [min(x, key=lambda t: t[1]) for x in zip(*runs, strict=True)]
                rows.append((target, n, *best))
                print(f"  {target} L={n}: " + ", ".join(f"{b[0]:.2f} s (CPU {b[1]:.2f})" for b in best),
                      file=sys.stderr)  # fmt: skip
    print("| target | L | cold, fresh process | one-layer edit via server: client + server = total "
          "(wall) | edit / cold | same edit, resident session | no-op via server: total (wall) "
          "| no-op, fresh process |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for target, n, cold, edit, noop, local_noop, res in rows:
        print(f"| {target} | {n} | {cold[1]:.2f} | {edit[2]:.3f} + {edit[1] - edit[2]:.3f} = "
              f"{edit[1]:.3f} ({edit[0]:.2f}) | {edit[1] / cold[1]:.1%} | {res[1]:.3f} | "
              f"{noop[1]:.3f} ({noop[0]:.2f}) | {local_noop[1]:.2f} |")  # fmt: skip


def _built_three_ways(ws: Path, cache: Path) -> list[tuple[str, Any, Any, Any, Any]]:
    """Each cpu entry of ``ws``: (name, graph, pipeline entry, whole entry, one-module entry)."""
    from dataclasses import replace

    from kinac import pipeline
    from kinac.codegen.llvm import compile_object, host_target
    from kinac.graph_build import compile_graph
    from kinac.ir.host.kernels import lower_kernel, split_graph
    from kinac.rt.host import load_entry
    from kinac.session import Session

    sess = Session(ws, cache_dir=str(cache))
    assert sess.build().error_count == 0
    out = []
    for _, key in [(n, k) for n, k in sess.db.events.executed_names(None) if n == "lowered"]:
        graph = pipeline.entry_graph(sess.db, key).graph
        piped = load_entry(pipeline.lowered(sess.db, key), pipeline.object_code(sess.db, key))
        lo = split_graph(graph)
        codes = {k.symbol: lower_kernel(k) for k in lo.kernels}
        calls = set(lo.library_calls).union(*(c.library_calls for c in codes.values()))
        lo = replace(lo, library_calls=tuple(sorted(calls)))
        objs = (compile_object(lo.llvm_ir, host_target(), 3),
                *(compile_object(c.llvm_ir, host_target()) for c in codes.values()))  # fmt: skip
        out.append((key.defn, graph, piped, load_entry(lo, objs), compile_graph(graph)))
    sess.close()
    return out


def speed(reps: int) -> None:
    """Best-of-``reps`` batch time of each entry built three ways, in alternation."""
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="kinac-speed-") as tmp:
        ws = Path(tmp) / "transformer"
        shutil.copytree(BLOCK_WS, ws, ignore=shutil.ignore_patterns(".kinac-cache"))
        entries = _built_three_ways(ws, Path(tmp) / "c1")
        entries += _built_three_ways(make_workspace(Path(tmp), 4), Path(tmp) / "c2")
    rng = np.random.default_rng(0)
    print("| entry | pieces (ms) | whole (ms) | one module (ms) | pieces / whole |")
    print("|---|---|---|---|---|")
    for name, graph, *fns in entries:
        args = [(rng.standard_normal(t.shape) * 0.1).astype(np.float32) for _, t in graph.params]
        np.testing.assert_allclose(fns[0](*args), fns[2](*args), rtol=1e-5, atol=1e-5)
        best = [float("inf")] * 3
        for _ in range(reps):
            for i, f in enumerate(fns):
                t0 = time.perf_counter()
                for _ in range(5):
                    f(*args)
                best[i] = min(best[i], (time.perf_counter() - t0) / 5)
        print(f"| {name} ({len(graph.nodes)} nodes) | {best[0] * 1e3:.3f} | {best[1] * 1e3:.3f} | "
              f"{best[2] * 1e3:.3f} | {best[0] / best[1]:.3f} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 4, 16, 32])
    ap.add_argument("--targets", nargs="+", default=["cpu", "cuda"])
    ap.add_argument("--speed", action="store_true", help="steady-state run time, three ways")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--resident", action="store_true", help="the edit in a long-lived session")
    ap.add_argument("--server", action="store_true", help="the edit forwarded to kinac serve")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run each row N times, report the least CPU time of each build")  # fmt: skip
    args = ap.parse_args()
    if args.server:
        served(args.layers, args.targets, args.repeat)
        return
    if args.resident:
        resident(args.layers, args.targets, args.repeat)
        return
    if args.speed:
        sys.path.insert(0, str(ROOT))
        speed(args.reps)
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="kinac-scaling-") as tmp:
        for target in args.targets:
            for n in args.layers:
                runs = []
                for r in range(args.repeat):
                    ws = make_workspace(Path(tmp) / target / str(r), n)
                    cache = Path(tmp) / target / str(r) / f"cache{n}"
                    cold = timed_build(ws, cache, target)
                    (ws / "model.kina").write_text(model_source(n, edited=True))
                    edit = timed_build(ws, cache, target)
                    runs.append((cold, edit, timed_build(ws, cache, target)))
                cold, edit, noop = (min(x, key=lambda t: t[1]) for x in zip(*runs, strict=True))
                rows.append((target, n, cold, edit, noop))
                print(
                    f"  {target} L={n}: cold {cold[0]:.2f} s, edit {edit[0]:.2f} s, "
                    f"no-op {noop[0]:.2f} s (CPU {cold[1]:.2f} / {edit[1]:.2f} / {noop[1]:.2f})",
                    file=sys.stderr,
                )
    print("| target | L | cold build (s) | one-layer edit (s) | edit / cold | no-op (s) |")
    print("|---|---|---|---|---|---|")
    for target, n, cold, edit, noop in rows:
        print(
            f"| {target} | {n} | {cold[0]:.2f} (CPU {cold[1]:.2f}) | {edit[0]:.2f} "
            f"(CPU {edit[1]:.2f}) | {edit[1] / cold[1]:.0%} | {noop[0]:.2f} (CPU {noop[1]:.2f}) |"
        )


if __name__ == "__main__":
    main()
