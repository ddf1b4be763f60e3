"""``kinac launch`` with real processes on the CPU: a sharded entry run with ``--distributed``
on 2 and 4 ranks prints and saves what ``--simulate`` does (bit-identical outputs); and every
way a rank can fail (killed mid-run, exiting with an error, never starting, rank 0 dying)
makes every rank exit with a ``kinac: error:`` line naming it, within the timeout, never a
hang."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from kinac.cli import main
from kinac.rt.comm.launch import free_port

ROOT = Path(__file__).resolve().parents[1]
TOML = """[workspace]
name = "dist"

[[mesh]]
name = "tp"
shape = [2]

[[entry]]
name = "mlp"
defn = "mlp"
dims = { N = 8, D = 4, F = 8 }
"""
SOURCE = """(defn mlp [(x : (tensor f32 [N D]))
           (w1 : (tensor f32 [D F] @sharded(axis=1, mesh=tp)))
           (w2 : (tensor f32 [F D] @sharded(axis=0, mesh=tp)))]
  -> (tensor f32 [N D])
  (matmul (relu (matmul x w1)) w2))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("dist")
    (d / "kina.toml").write_text(TOML)
    (d / "m.kina").write_text(SOURCE)
    assert main(["build", str(d)]) == 0  # one build: the ranks load it from the cache
    return d


# 4 ranks only: the same code as 2 (the mesh resized to WORLD_SIZE), and the one where the
# order of a reduction over the ranks shows (a + b == b + a); 2 launched ranks run in
# test_launch_train.py and test_launch_quiet.py
@pytest.mark.parametrize("n", [4])
def test_distributed_run_equals_the_simulator(
    ws: Path, tmp_path: Path, n: int, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = tmp_path / "sim.npz"
    assert (
        main(["run", str(ws), "mlp", "--simulate", str(n), "--repeat", "1", "--save", str(sim)])
        == 0
    )
    sim_out = capsys.readouterr().out
    dist = tmp_path / "dist.npz"
    cmd = [sys.executable, "-m", "kinac", "launch", "-n", str(n), "--timeout", "20", "--"]
    cmd += ["kinac", "run", str(ws), "mlp", "--distributed", "--repeat", "1", "--save", str(dist)]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=120, cwd=ROOT)
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    a, b = np.load(sim), np.load(dist)
    assert a["arr_0"].tobytes() == b["arr_0"].tobytes()
    # rank 0 alone prints, the same output lines as the simulator
    outs = [line for line in p.stdout.splitlines() if line.strip().startswith("out ")]
    assert outs == [line for line in sim_out.splitlines() if line.strip().startswith("out ")]
    assert (
        f"ran on {n} processes, mesh `tp` (tp={n}): 1 collectives per device (1 all-reduce over tp)"
        in p.stdout
    )
    assert took < 60


WORKER = """
import os, sys, signal
rank = int(os.environ["RANK"])
mode = sys.argv[1]
if mode == "never" and rank == 2:
    sys.exit(3)  # exits before joining the rendezvous
import numpy as np
from kinac.errors import KinaError
from kinac.rt.comm import tcp
try:
    comm = tcp.world((int(os.environ["WORLD_SIZE"]),), ("tp",))
    comm.all_reduce(np.ones(4, np.float32), tag=("all-reduce", "w.kina:1:1"))
    if rank == int(sys.argv[2]):
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "fail":
            print("kinac: error: rank %d: a runtime check failed" % rank, file=sys.stderr)
            sys.exit(1)
    comm.all_reduce(np.ones(4, np.float32), tag=("all-reduce", "w.kina:2:1"))
    tcp.close_process_client()
except KinaError as e:
    print(f"kinac: error: {e}", file=sys.stderr, flush=True)
    sys.exit(e.exit_code)
"""


def _launch(
    tmp_path: Path, n: int, *args: str, timeout_s: float = 30
) -> tuple[int, int, str, float]:
    """Launch ``n`` workers. A failure that closes a connection (a kill, an exit) is reported
    at once, so the rendezvous timeout there is long (30 s): it only bounds a hang, and the
    ``took`` checks below it prove the report did not wait for it. A short timeout there
    made a loaded machine's late rank a "never joined" failure instead of the one tested."""
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    log = tmp_path / "err.txt"
    t0 = time.monotonic()
    with open(log, "w") as err:
        code = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from kinac.rt.comm.launch import launch; "
                f"o = launch({n}, [sys.executable, {str(script)!r}, *sys.argv[1:]], timeout_s={timeout_s}, grace_s=8); "
                "print(o.message, file=sys.stderr); sys.exit(o.code)",
                *args,
            ],
            env=_env(),
            stderr=err,
            timeout=60,
            cwd=ROOT,
        ).returncode
    return code, 0, log.read_text(), time.monotonic() - t0


def test_a_rank_killed_mid_run(tmp_path: Path) -> None:
    code, _, err, took = _launch(tmp_path, 4, "kill", "1")
    assert code == 1
    assert "rank 1 was killed by SIGKILL" in err
    died = "rank 1 died: its connection to the rendezvous closed (its last call: all-reduce(sum) over tp of f32[4] at w.kina:1:1)"
    assert err.count(died) == 3, err  # ranks 0, 2 and 3 each say so
    assert took < 15


def test_a_rank_failing_with_an_error(tmp_path: Path) -> None:
    code, _, err, _ = _launch(tmp_path, 2, "fail", "1")
    assert code == 1
    assert "kinac: error: rank 1: a runtime check failed" in err
    assert "rank 1 exited with code 1" in err
    assert "rank 1 returned without calling it" in err  # rank 0 learned it from the rendezvous


def test_rank_zero_dying_stops_the_others(tmp_path: Path) -> None:
    code, _, err, took = _launch(tmp_path, 2, "kill", "0")
    assert code == 1 and "rank 0 was killed by SIGKILL" in err
    assert "rank 1 lost the rendezvous master (rank 0) while in all-reduce(sum) over tp" in err
    assert "rank 0 died or stopped" in err
    assert took < 15


NCCL_WORKER = """
import os, signal, sys, threading
import numpy as np
from kinac.errors import KinaError
from kinac.rt.comm import nccl, tcp

rank = int(os.environ["RANK"])


class Lib:  # fake NCCL: an all-reduce waits, as NCCL's kernel waits on the device, until aborted
    aborted = threading.Event()

    def get_unique_id(self):
        return bytes(128)

    def comm_init_rank_scalable(self, n, r, nids, ids, cfg):
        return object()

    def all_reduce(self, s, r, n, dt, op, comm, st):
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # dies mid-step
        self.aborted.wait(60)

    def comm_abort(self, comm):
        self.aborted.set()


try:
    world = nccl.world((2,), ("tp",), tcp.process_client(), alloc=np.empty, lib=Lib())
    world.all_reduce(np.ones(4, np.float32))
    world.all_reduce(np.ones(4, np.float32))  # the aborted world: says why
except KinaError as e:
    print(f"kinac: error: {e}", file=sys.stderr, flush=True)
    sys.exit(e.exit_code)
"""


def test_a_rank_killed_while_its_peer_waits_in_nccl(tmp_path: Path) -> None:
    """Rank 1 is killed inside a NCCL all-reduce while rank 0 waits in it (a fake NCCL whose
    call waits until ``ncclCommAbort``, as a kernel waits for its peer on the device). Rank
    0's watchdog hears the rendezvous say rank 1 died, aborts its communicator, and rank 0
    exits on its own naming rank 1 (exit 4); the launcher blames rank 1. Before, rank 0 sat
    in NCCL, said nothing, and was terminated after the launcher's grace period."""
    script = tmp_path / "nccl_worker.py"
    script.write_text(NCCL_WORKER)
    t0 = time.monotonic()
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from kinac.rt.comm.launch import launch; "
            f"o = launch(2, [sys.executable, {str(script)!r}], timeout_s=30, grace_s=8); "
            "print(o.message, file=sys.stderr); sys.exit(o.code)",
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    took = time.monotonic() - t0
    assert p.returncode == 1, p.stderr
    assert "kinac: error: rank 1 died: its connection to the rendezvous closed" in p.stderr
    assert "rank 1 was killed by SIGKILL" in p.stderr and "stopped rank" not in p.stderr
    assert took < 8, took  # rank 0 stopped itself, well within the launcher's grace


def test_a_rank_that_never_starts(tmp_path: Path) -> None:
    # only a timeout can tell that a rank never came: a short one (the test waits for it)
    code, _, err, took = _launch(tmp_path, 3, "never", "-1", timeout_s=3)
    assert code == 3 and "rank 2 exited with code 3" in err
    # (a loaded machine may make rank 1 late too: it is then named with rank 2)
    assert len(re.findall(r"ranks? (1 )?2 never joined the rendezvous", err)) == 2, err
    assert took < 15


def test_run_distributed_with_a_missing_rank_exits_naming_it(ws: Path) -> None:
    """No launcher: two of four torchrun-style ranks started by hand; both name the others
    and exit with code 4 (stopped because of another rank)."""
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kinac",
                "run",
                str(ws),
                "mlp",
                "--distributed",
                "--repeat",
                "1",
            ],
            env=_env(
                RANK=str(r),
                WORLD_SIZE="4",
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
                KINAC_DIST_TIMEOUT="3",
            ),
            stderr=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for r in (0, 2)
    ]
    errs = [p.communicate(timeout=60)[1] for p in procs]
    for p, err in zip(procs, errs, strict=True):
        assert p.returncode == 4, errs
        assert re.search(r"kinac: error: ranks 1 (2 )?3 never joined the rendezvous on port", err)


def test_rank_zero_tells_every_peer_why_before_it_exits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay lives in rank 0's process: when it fails a run it must deliver the cause to
    every peer before rank 0 exits (its daemon threads die with it). The failure went to rank
    0 first and rank 0 closed at once, so a peer saw only "lost the rendezvous master" (the
    flake of ``test_a_rank_that_never_starts``); here the send to rank 1 is slowed down to
    make that race certain."""
    import threading

    from kinac.errors import KinaError
    from kinac.rt.comm import rendezvous as rz

    port = free_port()
    c0 = rz.join(rz.DistEnv(0, 3, 0, "127.0.0.1", port, 0.5))
    c1 = rz.join(rz.DistEnv(1, 3, 1, "127.0.0.1", port, 0.5))
    server = c0.server
    assert server is not None
    told_rank_1 = threading.Event()
    real = rz.send_msg

    def slow_to_rank_1(sock: object, head: dict[str, object], payload: bytes = b"") -> None:
        if "error" in head and sock is server.conns.get(1):
            time.sleep(0.3)
            real(sock, head, payload)  # type: ignore[arg-type]
            told_rank_1.set()
            return
        real(sock, head, payload)  # type: ignore[arg-type]

    monkeypatch.setattr(rz, "send_msg", slow_to_rank_1)
    with pytest.raises(KinaError, match="rank 2 never joined"):
        c0.barrier()  # rank 2 never comes: the relay fails the run after 0.5 s
    c0.close()  # what rank 0's exit runs
    assert told_rank_1.is_set()
    got = rz.recv_msg(c1.sock)
    assert got is not None and "rank 2 never joined" in str(got[0]["error"])
    c1.sock.close()
