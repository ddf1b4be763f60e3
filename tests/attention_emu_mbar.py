"""The CPU emulation's asynchronous copies and mbarriers (for ``tests/test_attention_emu.py``).

The emulation of the fused attention kernel normally copies at the ``cp.async`` itself. A
kernel with per-stage mbarriers (``AttnParams.mbar``) is emulated more strictly, so that a
missing wait or arrive is a failure and not a lucky race: each thread's copies stay pending
until that thread's ``cp.async.wait_group`` or until it hands them to a barrier with
``cp.async.mbarrier.arrive.noinc``; a barrier's copies land only when a thread's
``try_wait.parity`` on that barrier succeeds (lazily, so nobody waiting means nobody sees the
data: :func:`check_launch` reports copies never waited for), and a wait that does not succeed
within :data:`TIMEOUT` seconds (an arrival that never comes) is an error. Parity follows the
PTX ISA: ``try_wait.parity P`` succeeds once the phase of parity ``P`` has completed, which on a
fresh barrier is at once for ``P = 1`` (the "empty" barriers' first round).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Any

TIMEOUT = 30.0


@dataclass
class _Copy:
    dst: int
    src: int
    n: int
    landed: bool = False

    def land(self) -> None:
        if not self.landed:
            if self.n == 16:
                ctypes.memmove(self.dst, self.src, 16)
            else:  # past the sequence end: zero fill
                ctypes.memset(self.dst, 0, 16)
            self.landed = True


@dataclass
class _Bar:
    expected: int
    pending: int
    completed: int = 0
    copies: list[_Copy] = field(default_factory=list)  # handed in during the current phase
    landable: list[_Copy] = field(default_factory=list)  # of completed phases, not yet seen


class MbarState:
    """One block's barriers (keyed by shared address) and the errors its threads met."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.bars: dict[int, _Bar] = {}
        self.errors: list[str] = []
        self.dead = False  # after an error: waits return, so every thread finishes
        self.named: dict[int, list[int]] = {}  # named barrier id -> [arrivals, generation]


STATE = MbarState()
_local = threading.local()


def start_block() -> None:
    """A fresh state for the next block (blocks run one after another)."""
    global STATE
    STATE = MbarState()


def start_thread() -> None:
    _local.copies = []


def _cp(dst: int, src: int, n: int) -> None:
    _local.copies.append(_Copy(dst, src, n))


def _cp_wait() -> None:
    for c in _local.copies:
        c.land()
    _local.copies = []


def _fail(st: MbarState, msg: str) -> None:
    st.errors.append(msg)
    st.dead = True
    st.cond.notify_all()


def _mb(op: int, addr: int, arg: int) -> None:
    """0 init(count), 1 arrive, 2 cp.async arrive (.noinc), 3 / 4 wait full / empty(parity)."""
    st = STATE
    with st.cond:
        if op == 0:
            st.bars[addr] = _Bar(arg, arg)
            return
        bar = st.bars.get(addr)
        if bar is None:
            _fail(st, f"mbarrier op {op} on an uninitialised barrier at +{addr % 4096}")
            return
        if op in (1, 2):
            if op == 2:
                bar.copies += _local.copies
                _local.copies = []
            bar.pending -= 1
            if bar.pending == 0:
                bar.completed += 1
                bar.pending = bar.expected
                bar.landable += bar.copies
                bar.copies = []
                st.cond.notify_all()
            return
        ok = st.cond.wait_for(lambda: st.dead or (bar.completed & 1) != arg, timeout=TIMEOUT)
        if not ok:
            kind = "full" if op == 3 else "empty"
            _fail(st, f"mbarrier wait ({kind}, parity {arg}) timed out: an arrival never came")
            return
        for c in bar.landable:
            c.land()
        bar.landable = []


def _nb(op: int, bar_id: int) -> None:
    """Named barrier ``bar_id`` of 256 threads: 0 ``barrier.sync`` (arrive and wait for the
    256th arrival), 1 ``barrier.arrive``."""
    st = STATE
    with st.cond:
        nb = st.named.setdefault(bar_id, [0, 0])
        gen = nb[1]
        nb[0] += 1
        if nb[0] == 256:
            nb[0], nb[1] = 0, gen + 1
            st.cond.notify_all()
        if op == 0 and not st.cond.wait_for(lambda: st.dead or nb[1] != gen, timeout=TIMEOUT):
            _fail(st, f"named barrier {bar_id} timed out: an arrival never came")


def check_launch() -> list[str]:
    """The block's errors, and copies that no thread ever waited for."""
    st = STATE
    errs = list(st.errors)
    unseen = sum(len(b.copies) + len(b.landable) for b in st.bars.values())
    if unseen:
        errs.append(f"{unseen} cp.async copies handed to mbarriers were never waited for")
    left = {i: nb[0] for i, nb in st.named.items() if nb[0]}
    if left:
        errs.append(f"named barriers left part-way at exit (id: arrivals): {left}")
    return errs


_P = ctypes.c_void_p
CALLBACKS: dict[str, Any] = {
    "kemu_cp": ctypes.CFUNCTYPE(None, _P, _P, ctypes.c_int32)(_cp),
    "kemu_cp_wait": ctypes.CFUNCTYPE(None)(_cp_wait),
    "kemu_mb": ctypes.CFUNCTYPE(None, ctypes.c_int32, _P, ctypes.c_int32)(_mb),
    "kemu_nb": ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32)(_nb),
}

DECLS = """
declare void @kemu_cp(ptr, ptr, i32)
declare void @kemu_cp_wait()
declare void @kemu_mb(i32, ptr, i32)
declare void @kemu_nb(i32, i32)
"""


def host_defs(name: str) -> str:
    """Host stand-ins for the kernel ``name``'s ``@<name>_mb_*`` and ``@<name>_nb_*``
    functions (unused ones are harmless)."""
    ops = {"init": (0, True), "arrive": (1, False), "cp_arrive": (2, False),
           "wait_full": (3, True), "wait_empty": (4, True)}  # fmt: skip
    out = []
    for what, (op, has_arg) in ops.items():
        params = "ptr %b, i32 %x" if has_arg else "ptr %b"
        arg = "i32 %x" if has_arg else "i32 0"
        out.append(
            f"define internal void @{name}_mb_{what}({params}) {{\n"
            f"  call void @kemu_mb(i32 {op}, ptr %b, {arg})\n  ret void\n}}"
        )
    for what, op in (("sync", 0), ("arrive", 1)):
        out.append(
            f"define internal void @{name}_nb_{what}(i32 %id) {{\n"
            f"  call void @kemu_nb(i32 {op}, i32 %id)\n  ret void\n}}"
        )
    return "\n".join(out) + "\n"
