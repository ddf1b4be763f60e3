"""Collectives between devices: the :class:`Communicator` interface and its simulator backend.

Why its own package: a sharded entry runs as one SPMD program per device that meets its peers
only at collectives (all-reduce, all-gather, reduce-scatter, all-to-all). The interface is
NCCL's (streams, in-place or out-of-place buffers, a reduction op, communicators split per
mesh axis), so the threaded simulator here and a NCCL backend (issue 13) are interchangeable
under :func:`kinac.rt.comm.execute.run_program`. Nothing here reads or compiles a program
(``tests/test_layers.py``): it runs the ``DeviceProgram`` records the compiler produced.

- :mod:`~kinac.rt.comm.communicator`: the protocol, reduction ops and buffer checks;
- :mod:`~kinac.rt.comm.simulator`: N threads on one host, collectives through shared memory;
- :mod:`~kinac.rt.comm.execute`: one device's run of a ``DeviceProgram``;
- :mod:`~kinac.rt.comm.layout`: global arrays to local shards and back;
- one process per device (``kinac launch``, docs/distributed.md): :mod:`~kinac.rt.comm.launch`,
  :mod:`~kinac.rt.comm.rendezvous`, :mod:`~kinac.rt.comm.tcp` (the CPU process group),
  :mod:`~kinac.rt.comm.nccl` (NCCL through nccl4py) and :mod:`~kinac.rt.comm.device_run` (a GPU
  rank's program with every slot on the device), joined in :mod:`~kinac.rt.comm.distributed`.
"""

from __future__ import annotations

from kinac.rt.comm.communicator import REDUCE_OPS, Communicator
from kinac.rt.comm.simulator import CommLog, simulate

__all__ = ["REDUCE_OPS", "CommLog", "Communicator", "simulate"]
