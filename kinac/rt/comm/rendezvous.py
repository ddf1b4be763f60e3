"""The TCP rendezvous of a distributed run: torchrun's environment, a relay on the master.

Why our own (small) rendezvous: NCCL needs one opaque id (its 128-byte unique id) made by rank
0 and known to every rank before ``ncclCommInitRank``, and a launcher needs every rank to learn
at once that a peer died or never came, rather than hang in a collective. Both need only a
star of TCP connections to ``MASTER_ADDR:MASTER_PORT``, the address torchrun and SLURM scripts
already set, so several machines work unchanged.

The master process (``RANK=0``) runs a :class:`RendezvousServer` thread; every rank, rank 0
included, connects a :class:`RendezvousClient`. Everything the ranks do together is a *round*:
each member of a group sends one request (group, call number, what it calls, its bytes) and
the server answers each member once all have arrived. The same rounds carry the unique id, the
barrier and the CPU communicator's collectives (:mod:`kinac.rt.comm.tcp`). The server sees
every rank, so it reports what one rank cannot know:

- a connection that closes before its rank said goodbye: **that rank died**; every other rank
  gets an error naming it (and what it was doing: its last call);
- a rank that never connects within the timeout: **that rank never started**;
- a round some member has not reached within the timeout: the ranks missing, and what each
  waiting rank is in;
- a round whose calls differ (kind, reduction, shape, dtype): NCCL's contract, each rank's call
  with its source span, as the simulator reports it.

A client whose master connection closes says so ("the master (rank 0) closed the
connection"). Every wait has a deadline: never a hang. Wire format: a 12-byte header (JSON
length, payload length), a JSON object, raw payload bytes (numpy buffers); no pickle.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kinac.errors import KinaRuntimeError, KinaUsageError

UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES
DEFAULT_TIMEOUT_S = 60.0
_HEADER = struct.Struct("!IQ")


EXIT_PEER_FAILED = 4  # this rank stopped because of another rank (kinac launch blames that one)


class RankFailure(KinaRuntimeError):
    """A distributed run stopped: a rank died, never came, timed out or broke the call order.
    The message names the rank(s); ``rank`` is the one that failed (-1: several). Its exit
    code (4) tells ``kinac launch`` that this rank is not the one to blame."""

    exit_code = EXIT_PEER_FAILED

    def __init__(self, message: str, rank: int = -1) -> None:
        super().__init__(message)
        self.rank = rank


# -- the environment ------------------------------------------------------------------------


@dataclass(frozen=True)
class DistEnv:
    """torchrun's variables: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
    ``MASTER_PORT`` (and ``KINAC_DIST_TIMEOUT``, seconds, for every rendezvous wait)."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str
    master_port: int
    timeout_s: float = DEFAULT_TIMEOUT_S

    @staticmethod
    def from_env(environ: dict[str, str] | None = None) -> DistEnv | None:
        """The launch environment, or None when ``WORLD_SIZE`` is not set (not launched)."""
        env = os.environ if environ is None else environ
        if not env.get("WORLD_SIZE"):
            return None

        def num(name: str, default: str | None, least: int) -> int:
            text = env.get(name, default)
            if text is None:
                raise KinaUsageError(
                    f"WORLD_SIZE is set but {name} is not: launch with `kinac launch -n N -- ...` "
                    "or torchrun, which set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT"
                )
            try:
                value = int(text)
            except ValueError:
                raise KinaUsageError(f"{name}={text!r} is not an integer") from None
            if value < least:
                raise KinaUsageError(f"{name}={value} must be at least {least}")
            return value

        world = num("WORLD_SIZE", None, 1)
        rank = num("RANK", None, 0)
        if rank >= world:
            raise KinaUsageError(f"RANK={rank} is not below WORLD_SIZE={world}")
        local = num("LOCAL_RANK", str(rank), 0)
        port = num("MASTER_PORT", "29500" if world == 1 else None, 1)
        if port > 65535:
            raise KinaUsageError(f"MASTER_PORT={port} is not a TCP port (1-65535)")
        timeout = env.get("KINAC_DIST_TIMEOUT", "")
        try:
            t = float(timeout) if timeout else DEFAULT_TIMEOUT_S
        except ValueError:
            raise KinaUsageError(f"KINAC_DIST_TIMEOUT={timeout!r} is not a number") from None
        if t <= 0:
            raise KinaUsageError(f"KINAC_DIST_TIMEOUT={timeout} must be positive")
        return DistEnv(rank, world, local, env.get("MASTER_ADDR", "127.0.0.1"), port, t)


# -- framing --------------------------------------------------------------------------------


def send_msg(sock: socket.socket, head: dict[str, Any], payload: bytes | memoryview = b"") -> None:
    text = json.dumps(head, separators=(",", ":")).encode()
    sock.sendall(_HEADER.pack(len(text), len(payload)) + text)
    if len(payload):
        sock.sendall(payload)


def _recv_exact(sock: socket.socket, n: int) -> bytearray | None:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            return None  # the peer closed
        got += k
    return buf


def recv_msg(sock: socket.socket) -> tuple[dict[str, Any], bytes] | None:
    """One message, or None when the peer closed the connection (a clean or dead exit)."""
    raw = _recv_exact(sock, _HEADER.size)
    if raw is None:
        return None
    hlen, plen = _HEADER.unpack(raw)
    head = _recv_exact(sock, hlen)
    payload = _recv_exact(sock, plen) if plen else bytearray()
    if head is None or payload is None:
        return None
    return json.loads(head.decode()), bytes(payload)


# -- the server (on the master) -------------------------------------------------------------

Combine = Callable[[list[dict[str, Any]], list[bytes]], list[tuple[dict[str, Any], bytes]]]


@dataclass
class _Round:
    members: tuple[int, ...]
    heads: dict[int, dict[str, Any]] = field(default_factory=dict)
    data: dict[int, bytes] = field(default_factory=dict)
    since: float = field(default_factory=time.monotonic)


def describe_call(head: dict[str, Any]) -> str:
    """``all-reduce(sum) over tp of f32[4 8] at m.kina:3:5`` (what the simulator says)."""
    kind, axis = head.get("kind", "?"), head.get("axis", "")
    if kind in ("barrier", "unique-id", "hello"):
        what = f"{kind} over {axis}" if axis else kind
    else:
        op = f"({head.get('op')})" if kind in ("all-reduce", "reduce-scatter") else ""
        dims = " ".join(map(str, head.get("shape", ())))
        what = f"{kind}{op} over {axis} of {head.get('dtype', '?')}[{dims}]"
    span = head.get("span") or ""
    return f"{what} at {span}" if span else what


def _signature(head: dict[str, Any]) -> tuple[Any, ...]:
    kind = head.get("kind")
    op = head.get("op") if kind in ("all-reduce", "reduce-scatter") else ""
    return (kind, op, tuple(head.get("shape", ())), head.get("dtype"))


class RendezvousServer:
    """The master's relay: accepts ``world_size`` ranks, runs rounds, reports failures."""

    def __init__(
        self,
        world_size: int,
        host: str = "",
        port: int = 0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        combine: dict[str, Combine] | None = None,
    ) -> None:
        self.world_size, self.timeout_s = world_size, timeout_s
        self.combine: dict[str, Combine] = dict(combine or {})
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
        except OSError as e:
            self.sock.close()
            raise KinaRuntimeError(
                f"rank 0 cannot listen on {host or '*'}:{port} for the rendezvous: "
                f"{e.strerror or e} (another run on MASTER_PORT?)"
            ) from None
        self.sock.listen(max(world_size, 8))
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.conns: dict[int, socket.socket] = {}
        self.last: dict[int, str] = {}  # rank -> its last call, for "died while ..." reports
        self.gone: set[int] = set()  # said goodbye
        self.rounds: dict[tuple[str, int], _Round] = {}
        self.failed: str | None = None
        # set once the failure went out to every connected rank: rank 0's process must not
        # exit (killing this daemon thread) before its peers have been told why
        self.delivered = threading.Event()
        self.stopped = False
        self.started = time.monotonic()
        threading.Thread(target=self._accept, daemon=True, name="kinac-rdzv-accept").start()
        threading.Thread(target=self._watch, daemon=True, name="kinac-rdzv-watch").start()

    # every rank gets the failure once; later requests get it too
    def _fail(self, message: str) -> None:
        with self.lock:
            if self.failed is not None:
                return
            self.failed = message
            conns = list(self.conns.items())
        for _, c in conns:
            try:
                send_msg(c, {"error": message})
            except OSError:
                pass
        self.delivered.set()

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stopped and len(self.conns) < self.world_size:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _watch(self) -> None:
        """Deadlines: ranks that never connect, rounds whose members never arrive."""
        while not self.stopped and self.failed is None:
            time.sleep(0.1)
            now = time.monotonic()
            with self.lock:
                missing = [r for r in range(self.world_size) if r not in self.conns]
                late = [(k, rd) for k, rd in self.rounds.items() if now - rd.since > self.timeout_s]
            if missing and now - self.started > self.timeout_s:
                who = " ".join(map(str, missing))
                self._fail(
                    f"rank{'s' * (len(missing) > 1)} {who} never joined the rendezvous on port "
                    f"{self.port} within {self.timeout_s:g} s (did not start, or cannot reach "
                    f"MASTER_ADDR:MASTER_PORT)"
                )
            elif late:
                (_, seq), rd = late[0]
                absent = [m for m in rd.members if m not in rd.heads]
                lines = [
                    f"  rank {r}: waits in {describe_call(h)} (its call #{seq + 1})"
                    for r, h in sorted(rd.heads.items())
                ] + [
                    f"  rank {r}: not there (last: {self.last.get(r, 'nothing yet')})"
                    for r in absent
                ]
                self._fail(
                    f"collective timeout: rank{'s' * (len(absent) > 1)} "
                    f"{' '.join(map(str, absent))} did not reach call #{seq + 1} within "
                    f"{self.timeout_s:g} s:\n" + "\n".join(lines)
                )

    def _serve(self, conn: socket.socket) -> None:
        rank = -1
        try:
            got = recv_msg(conn)
            if got is None or got[0].get("kind") != "hello":
                conn.close()
                return
            rank = int(got[0]["rank"])
            with self.lock:
                bad = (
                    f"RANK={rank} outside WORLD_SIZE={self.world_size}"
                    if not 0 <= rank < self.world_size
                    else f"two processes with RANK={rank}"
                    if rank in self.conns
                    else None
                )
                if bad is None:
                    self.conns[rank] = conn
            if bad is not None:
                send_msg(conn, {"error": bad})
                self._fail(f"rendezvous: {bad}")
                conn.close()
                return
            send_msg(conn, {"ok": True})
            if self.failed is not None:
                send_msg(conn, {"error": self.failed})
            while True:
                msg = recv_msg(conn)
                if msg is None:
                    break
                head, data = msg
                if head.get("kind") == "bye":
                    with self.lock:
                        self.gone.add(rank)
                    self._check_gone()
                    continue
                if head.get("kind") == "abort":  # the rank failed: the others learn why
                    with self.lock:
                        self.gone.add(rank)
                    self._fail(f"rank {rank} failed: {head.get('message', '')}")
                    continue
                self._arrive(rank, head, data)
        except OSError:
            pass
        with self.lock:
            died = rank >= 0 and rank not in self.gone and not self.stopped
            last = self.last.get(rank, "")
        if died:
            self._fail(
                f"rank {rank} died: its connection to the rendezvous closed"
                + (f" (its last call: {last})" if last else " before its first collective")
            )

    def _check_gone(self) -> None:
        """A round waiting on a rank that said goodbye can never complete."""
        with self.lock:
            stuck = [
                (k, rd)
                for k, rd in self.rounds.items()
                if any(m in self.gone and m not in rd.heads for m in rd.members)
            ]
        if stuck:
            (_, seq), rd = stuck[0]
            waiting = min(rd.heads)
            gone = [m for m in rd.members if m in self.gone and m not in rd.heads]
            self._fail(
                f"collective mismatch: rank {waiting} waits in "
                f"{describe_call(rd.heads[waiting])}, but rank{'s' * (len(gone) > 1)} "
                f"{', '.join(map(str, gone))} returned without calling it\n"
                "every rank must call the same collectives in the same order (NCCL's contract)"
            )

    def _arrive(self, rank: int, head: dict[str, Any], data: bytes) -> None:
        key = (str(head["group"]), int(head["seq"]))
        members = tuple(int(m) for m in head["members"])
        with self.lock:
            if self.failed is not None:
                failure = self.failed
            else:
                failure = None
                self.last[rank] = describe_call(head)
                rd = self.rounds.setdefault(key, _Round(members))
                rd.heads[rank], rd.data[rank] = head, data
                ready = len(rd.heads) == len(rd.members)
                if ready:
                    del self.rounds[key]
        if failure is not None:
            send_msg(self.conns[rank], {"error": failure})
            return
        if not ready:
            self._check_gone()
            return
        heads = [rd.heads[m] for m in rd.members]
        sigs = [_signature(h) for h in heads]
        if len(set(sigs)) > 1:
            most = max(sigs, key=sigs.count)
            self._fail(
                f"collective mismatch over {head.get('axis', '?')} (ranks "
                f"{' '.join(map(str, rd.members))}): their call #{key[1] + 1} differs:\n"
                + "\n".join(
                    f"  rank {m}: {describe_call(h)}" + ("" if s == most else "  <- differs")
                    for m, h, s in zip(rd.members, heads, sigs, strict=True)
                )
                + "\nevery rank must call the same collectives in the same order (NCCL's contract)"
            )
            return
        kind = str(head["kind"])
        datas = [rd.data[m] for m in rd.members]
        try:
            if kind in self.combine:
                replies = self.combine[kind](heads, datas)
            elif kind == "barrier":
                replies = [({"ok": True}, b"")] * len(heads)
            elif kind == "unique-id":  # the first member's bytes to every member
                replies = [({"ok": True}, datas[0])] * len(heads)
            else:
                raise KinaRuntimeError(f"the rendezvous has no rule for {kind!r}")
        except KinaRuntimeError as e:
            self._fail(str(e))
            return
        for m, (h, payload) in zip(rd.members, replies, strict=True):
            try:
                send_msg(self.conns[m], h, payload)
            except OSError:
                pass  # that rank's own connection reports it

    def close(self) -> None:
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass


# -- the client (every rank) ----------------------------------------------------------------


class RendezvousClient:
    """One rank's connection to the master's relay: rounds, the unique id, the barrier."""

    def __init__(self, env: DistEnv, server: RendezvousServer | None = None) -> None:
        self.env, self.server = env, server
        self.rank, self.size, self.timeout_s = env.rank, env.world_size, env.timeout_s
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()
        self.watchdog: Any = None  # kinac.rt.comm.watchdog's, once a NCCL world is made
        self.sock = self._connect()

    def _connect(self) -> socket.socket:
        env = self.env
        deadline = time.monotonic() + self.timeout_s
        last: OSError | None = None
        while time.monotonic() < deadline:  # the master may start after us
            try:
                sock = socket.create_connection((env.master_addr, env.master_port), timeout=2)
                break
            except OSError as e:
                last = e
                time.sleep(0.05)
        else:
            why = f": {last.strerror or last}" if last is not None else ""
            raise RankFailure(
                f"rank {env.rank} could not reach the rendezvous master (rank 0) at "
                f"{env.master_addr}:{env.master_port} within {self.timeout_s:g} s{why}",
                0,
            )
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.timeout_s * 2 + 5)  # the server's own deadline fires first
        send_msg(sock, {"kind": "hello", "rank": env.rank})
        self._reply(sock, "joining")
        return sock

    def _reply(self, sock: socket.socket, what: str) -> tuple[dict[str, Any], bytes]:
        try:
            got = recv_msg(sock)
        except TimeoutError:
            got = None
            raise RankFailure(
                f"rank {self.rank}: no answer from the rendezvous master (rank 0) while "
                f"{what} (waited {self.timeout_s * 2 + 5:g} s)",
                0,
            ) from None
        except OSError as e:
            raise RankFailure(
                f"rank {self.rank} lost the rendezvous master (rank 0) while in {what}: rank 0 "
                f"died or stopped ({e.strerror or e})",
                0,
            ) from None
        if got is None:
            raise RankFailure(
                f"rank {self.rank} lost the rendezvous master (rank 0) while in {what}: rank 0 "
                "died or stopped (connection closed)",
                0,
            )
        if "error" in got[0]:
            raise RankFailure(str(got[0]["error"]))
        return got

    def round(
        self, group: str, members: tuple[int, ...], head: dict[str, Any], payload: bytes = b""
    ) -> tuple[dict[str, Any], bytes]:
        """Take part in the group's next round; the server's answer to this rank."""
        with self._lock:
            seq = self._seq.get(group, 0)
            self._seq[group] = seq + 1
            msg = {**head, "group": group, "seq": seq, "members": list(members)}
            what = describe_call(msg)
            try:
                send_msg(self.sock, msg, payload)
            except OSError as e:  # the same report whether the send or the wait found it gone
                raise RankFailure(
                    f"rank {self.rank} lost the rendezvous master (rank 0) while in {what}: "
                    f"rank 0 died or stopped ({e.strerror or e})",
                    0,
                ) from None
            return self._reply(self.sock, what)

    def unique_id(self, make: Callable[[], bytes] | None = None) -> bytes:
        """Rank 0 makes the id (``make()``, e.g. ``ncclGetUniqueId``); every rank gets it."""
        mine = b""
        if self.rank == 0:
            mine = make() if make is not None else os.urandom(UNIQUE_ID_BYTES)
            if len(mine) != UNIQUE_ID_BYTES:
                raise KinaRuntimeError(
                    f"a unique id is {UNIQUE_ID_BYTES} bytes (NCCL's), got {len(mine)}"
                )
        _, got = self.round(
            "world:id", tuple(range(self.size)), {"kind": "unique-id", "axis": "world"}, mine
        )
        return got

    def barrier(self, group: str = "world", members: tuple[int, ...] | None = None) -> None:
        members = tuple(range(self.size)) if members is None else members
        self.round(group, members, {"kind": "barrier", "axis": group})

    def pushed_failure(self, wait_s: float) -> str | None:
        """A failure the master pushed to this rank while it is in no round (the master tells
        every connected rank at once: a peer died, failed, never came), read within
        ``wait_s``; None when none came, or when a round is under way (its own reply reports
        the failure). Raises EOFError once the master closed the connection. For a watch on
        the rendezvous while this rank waits on something else (a NCCL collective on the
        device): :mod:`kinac.rt.comm.watchdog`."""
        try:
            ready, _, _ = select.select([self.sock], [], [], wait_s)
        except (OSError, ValueError):  # closed by this process
            raise EOFError from None
        if not ready:
            return None
        if not self._lock.acquire(blocking=False):  # a round is under way: its reply reads it
            time.sleep(wait_s)
            return None
        try:
            ready, _, _ = select.select([self.sock], [], [], 0)
            got = recv_msg(self.sock) if ready else ()
        except (OSError, ValueError):
            got = None
        finally:
            self._lock.release()
        if got is None:
            raise EOFError
        return str(got[0]["error"]) if got and "error" in got[0] else None

    def abort(self, message: str) -> None:
        """This rank failed (its own error, not a peer's): every other rank is told why."""
        try:
            send_msg(self.sock, {"kind": "abort", "message": message.splitlines()[0][:500]})
        except OSError:
            pass

    def close(self) -> None:
        """Say goodbye (a clean exit is not a death) and close."""
        try:
            send_msg(self.sock, {"kind": "bye"})
        except OSError:
            pass
        if self.server is not None:
            # rank 0 hosts the relay: wait (bounded) for the others to say goodbye before the
            # process exits, so a peer's last answer is not cut off
            deadline = time.monotonic() + min(self.timeout_s, 10.0)
            while time.monotonic() < deadline and self.server.failed is None:
                with self.server.lock:
                    if len(self.server.gone) >= len(self.server.conns) == self.size:
                        break
                time.sleep(0.02)
            if self.server.failed is not None:
                # the relay lives in this process: tell every peer the cause before exiting,
                # or a peer sees only "lost the rendezvous master" (bounded: a stuck socket)
                self.server.delivered.wait(2.0)
            self.server.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass
        if self.server is not None:
            self.server.close()


def join(env: DistEnv, combine: dict[str, Combine] | None = None) -> RendezvousClient:
    """Join the rendezvous of ``env``: rank 0 starts the relay on ``MASTER_PORT`` first."""
    server = None
    if env.rank == 0:
        server = RendezvousServer(
            env.world_size, "", env.master_port, env.timeout_s, combine=combine
        )
    try:
        return RendezvousClient(env, server)
    except BaseException:
        if server is not None:
            server.close()
        raise
