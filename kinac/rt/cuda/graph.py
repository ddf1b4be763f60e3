"""CUDA graphs: capture an entry's launch sequence once, replay it with one driver call.

A :class:`CapturedGraph` runs ``sequence(stream)`` under stream capture, instantiates the
resulting graph and from then on :meth:`~CapturedGraph.replay` is one ``cuGraphLaunch``.  The
graph remembers the argument *values* of the captured launches (pointers included), so it
replays on the same buffers, as with PyTorch's CUDA graphs and their static inputs.

If capture fails (the stream cannot be captured, or the sequence does something that capture
forbids), the capture is ended cleanly, a :class:`GraphCaptureWarning` says so once, and every
replay runs the sequence eagerly instead.  Errors that are not CUDA errors propagate.
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Callable
from typing import Any

from kinac.rt.cuda import driver
from kinac.rt.cuda.device import Stream
from kinac.rt.cuda.driver import check
from kinac.rt.cuda.errors import CudaError, GraphCaptureWarning
from kinac.rt.cuda.module import CAPTURING

Sequence = Callable[[Stream], None]


class CapturedGraph:
    """A captured launch sequence (or its eager fallback)."""

    def __init__(self, sequence: Sequence, stream: Stream, *, name: str = "entry") -> None:
        self.sequence = sequence
        self.name = name
        self.stream = stream
        self.fallback_reason: str | None = None
        self._graph: Any = None
        self._exec: Any = None
        self._launch: Any = None
        self.num_nodes = 0
        # (cuGraphLaunch through PyDLL, the executable graph): ``f(exec, stream.cvp)`` returns
        # the CUresult as an int; None while there is no executable graph (eager fallback)
        self.fast_launch: tuple[Any, Any] | None = None
        try:
            self._capture()
        except CudaError as e:
            self.fallback_reason = str(e)
            warnings.warn(
                f"CUDA graph capture of {name!r} failed, running its launches eagerly instead: {e}",
                GraphCaptureWarning,
                stacklevel=2,
            )

    def _capture(self) -> None:
        d = driver.api()
        mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check("cuStreamBeginCapture", d.cuStreamBeginCapture(self.stream.cu, mode))
        CAPTURING[0] += 1  # graph-path launches record plain kernel nodes
        try:
            self.sequence(self.stream)
        except BaseException:
            self._abort_capture()
            raise
        finally:
            CAPTURING[0] -= 1
        self._graph = check("cuStreamEndCapture", d.cuStreamEndCapture(self.stream.cu))
        try:
            nodes = check("cuGraphGetNodes", d.cuGraphGetNodes(self._graph, 0))
            self.num_nodes = int(nodes[1] if isinstance(nodes, tuple) else nodes)
        except (TypeError, ValueError, IndexError):  # bindings layout differs: count unknown
            self.num_nodes = -1
        self._exec = check("cuGraphInstantiate", d.cuGraphInstantiate(self._graph, 0))
        self._launch = d.cuGraphLaunch
        self.bind_fast_launch()

    def bind_fast_launch(self) -> None:
        """Prepare :attr:`fast_launch`: libcuda's ``cuGraphLaunch`` through ``ctypes.PyDLL``
        with the executable graph as a pre-built ``c_void_p`` (the bindings' call costs ~1 us
        of Python per replay: argument conversion and a result tuple; this one ~0.2 us)."""
        from kinac.rt.cuda.kernel_graph import libcuda_fn

        self.fast_launch = (libcuda_fn("cuGraphLaunch"), ctypes.c_void_p(int(self._exec)))

    def _abort_capture(self) -> None:
        """End a capture that went wrong, so the stream is usable again; drop the graph."""
        d = driver.api()
        res = d.cuStreamEndCapture(self.stream.cu)
        if res[0] == driver.OK and len(res) > 1 and res[1] is not None and int(res[1]):
            d.cuGraphDestroy(res[1])

    def nodes(self) -> list[str]:
        """Every node the captured graph holds, in the graph's order, as text: the node type
        (``KERNEL``, ``MEMSET``, ``MEMCPY``, ``EVENT_RECORD``, ``MEM_ALLOC``...) and, for a
        kernel, its function's name and grid; then one ``edges N`` line (a chain of n nodes
        has n - 1). What an entry's replay runs besides its steps' kernels (issue 14: the
        whole entry against the sum of its steps); empty for an eager fallback."""
        if self._graph is None:
            return []
        d = driver.api()
        count = int(check("cuGraphGetNodes", d.cuGraphGetNodes(self._graph, 0))[1])
        handles = check("cuGraphGetNodes", d.cuGraphGetNodes(self._graph, count))[0]
        out = []
        for node in handles:
            try:
                kind = check("cuGraphNodeGetType", d.cuGraphNodeGetType(node))
            except CudaError as e:
                out.append(f"? ({e})")
                continue
            text = getattr(kind, "name", str(kind)).removeprefix("CU_GRAPH_NODE_TYPE_")
            if text == "KERNEL":
                text += " " + _kernel_text(d, node)
            out.append(text)
        try:
            edges = check("cuGraphGetEdges", d.cuGraphGetEdges(self._graph, 0))
            out.append(f"edges {int(edges[-1])}")
        except (CudaError, TypeError, ValueError, IndexError):  # bindings differ: not counted
            pass
        return out

    @property
    def captured(self) -> bool:
        """True if replays use the graph, False if they fall back to eager launches."""
        return self._exec is not None

    def replay(self, stream: Stream | None = None) -> None:
        """Run the captured sequence on ``stream`` (default: the capture stream)."""
        s = stream if stream is not None else self.stream
        fast = self.fast_launch
        if fast is None:
            self.sequence(s)
            return
        rc = fast[0](fast[1], s.cvp)
        if rc:
            driver.fail("cuGraphLaunch", rc)

    def close(self) -> None:
        """Destroy the executable graph and the graph."""
        d = driver.api()
        self.fast_launch = None
        if self._exec is not None:
            ex, self._exec = self._exec, None
            check("cuGraphExecDestroy", d.cuGraphExecDestroy(ex))
        if self._graph is not None:
            g, self._graph = self._graph, None
            check("cuGraphDestroy", d.cuGraphDestroy(g))


def _kernel_text(d: Any, node: Any) -> str:
    """A kernel node's function name (``?`` where the driver does not give it: a library's
    kernel through ``CUkernel``) and grid x block."""
    try:
        p = check("cuGraphKernelNodeGetParams", d.cuGraphKernelNodeGetParams(node))
    except Exception:  # noqa: BLE001 - a listing for measurement: never fails the caller
        return "?"
    name = "?"
    try:
        raw = check("cuFuncGetName", d.cuFuncGetName(p.func))
        name = raw.decode() if isinstance(raw, bytes) else str(raw)
    except Exception:  # noqa: BLE001 - a library kernel launched through a CUkernel
        pass
    grid = f"{p.gridDimX}x{p.gridDimY}x{p.gridDimZ}"
    return f"{name} grid {grid} block {p.blockDimX}x{p.blockDimY}x{p.blockDimZ}"


def capture(sequence: Sequence, stream: Stream, *, name: str = "entry") -> CapturedGraph:
    """Capture ``sequence`` on ``stream`` (see :class:`CapturedGraph`)."""
    return CapturedGraph(sequence, stream, name=name)
