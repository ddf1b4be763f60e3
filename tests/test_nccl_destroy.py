"""NCCL communicators are destroyed (``ncclCommDestroy``) when the process's communicator cache
is dropped (:func:`kinac.rt.comm.nccl.forget_worlds`, registered to run at exit): the splits
before their parent, each once, and a destroyed communicator refuses further use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nccl_fakes import FakeLib

from kinac.errors import KinaRuntimeError
from kinac.rt.comm import nccl

ROOT = Path(__file__).resolve().parents[1]


class OneRank:
    """The rendezvous client of a world of one (rank 0 makes the unique id)."""

    size, rank = 1, 0

    def unique_id(self, make: Any) -> bytes:
        return bytes(make())

    def barrier(self) -> None:
        pass


def test_forgetting_the_worlds_destroys_every_communicator_once() -> None:
    nccl.forget_worlds()
    lib = FakeLib()
    w = nccl.world((1, 1), ("dp", "tp"), OneRank(), lib=lib)
    tp, dp = w.sub("tp"), w.sub("dp")
    assert tp is not w and dp is not w
    nccl.forget_worlds()
    destroys = [c for c in lib.calls if c[0] == "destroy"]
    assert destroys == [("destroy", ()), ("destroy", ()), ("destroy", (0,))]  # splits, then world
    nccl.forget_worlds()  # nothing cached: nothing destroyed twice
    assert len([c for c in lib.calls if c[0] == "destroy"]) == 3
    with pytest.raises(KinaRuntimeError, match="was destroyed"):
        w.all_reduce(np.zeros(4, np.float32), np.zeros(4, np.float32), op="sum")
    again = nccl.world((1, 1), ("dp", "tp"), OneRank(), lib=lib)  # a fresh one is made
    assert again is not w
    nccl.forget_worlds()


def test_the_worlds_are_destroyed_at_exit() -> None:
    code = (
        "import sys; sys.path.insert(0, 'tests')\n"
        "from nccl_fakes import FakeLib\nfrom kinac.rt.comm import nccl\n"
        "class C:\n  size, rank = 1, 0\n  def unique_id(self, f): return bytes(f())\n"
        "  def barrier(self): pass\n"
        "lib = FakeLib()\nlib.comm_destroy = lambda h: print('destroyed', h.members)\n"
        "nccl.world((1,), ('tp',), C(), lib=lib)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n") == ["destroyed (0,)", ""]
