"""A NCCL rank's watch on the rendezvous while its device waits in a collective.

Why: NCCL has no deadline. A rank whose peer died, or failed on its own, waits in the
device's stream for a collective that peer will never join: before this, such a rank hung
until ``kinac launch`` terminated it (5 s after the peer's exit, with nothing said on its own
stderr), and forever without a launcher that does. The rendezvous master already knows: it
pushes ``rank 1 died: ...`` / ``rank 1 failed: ...`` to every connected rank the moment it
learns it. This thread (one per process, started with its first NCCL world) listens for that
push while the rank is in no rendezvous round, and then aborts the rank's NCCL communicators
(``ncclCommAbort``, which ends their uncompleted operations, from another thread as NCCL
allows), so the wait returns and the rank reports the peer's failure itself
(:meth:`Watchdog.check`: a :class:`~kinac.rt.comm.rendezvous.RankFailure`, exit code 4).

The steady state pays nothing: the thread sleeps in ``select`` on the socket; the rank's own
wait stays one ``cuStreamSynchronize``. A master that closes the connection (rank 0 finished)
ends the watch without aborting anything: a rank still finishing its last call must not be
aborted by rank 0's clean exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kinac.rt.comm.rendezvous import RankFailure

POLL_S = 0.05  # how long one select waits (the thread's only cost: it sleeps in it)


class Watchdog:
    """The watch of one rendezvous client (see the module docstring)."""

    def __init__(self, client: Any, poll_s: float = POLL_S) -> None:
        self.client, self.poll_s = client, poll_s
        self.failure: str | None = None
        self._aborts: list[Callable[[str], None]] = []
        self._lock = threading.Lock()
        self._stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True, name="kinac-nccl-watchdog")
        self.thread.start()

    def guard(self, abort: Callable[[str], None]) -> None:
        """Call ``abort(failure)`` (a communicator's ``ncclCommAbort``) when a failure
        arrives; at once when one has already."""
        with self._lock:
            failure = self.failure
            if failure is None:
                if abort not in self._aborts:
                    self._aborts.append(abort)
                return
        _quietly(abort, failure)

    def check(self) -> None:
        """Raise the peer's failure when one arrived (this rank's collectives were aborted:
        whatever its wait returned is not a result)."""
        if self.failure is not None:
            raise RankFailure(self.failure)

    def stop(self) -> None:
        self._stopped = True

    def _run(self) -> None:
        while not self._stopped:
            try:
                got = self.client.pushed_failure(self.poll_s)
            except EOFError:  # the master closed (or this process closed its client)
                return
            if got is None:
                continue
            with self._lock:
                self.failure = got
                aborts, self._aborts = self._aborts, []
            for abort in aborts:
                _quietly(abort, got)
            return


def _quietly(abort: Callable[[str], None], failure: str) -> None:
    try:
        abort(failure)
    except Exception:  # noqa: BLE001 - best effort: the failure itself is what is reported
        pass


def watch(client: Any) -> Watchdog:
    """The watch of ``client`` (this process's rendezvous connection), started once; kept on
    the client, so it lives as long as the client does."""
    dog: Watchdog | None = getattr(client, "watchdog", None)
    if dog is None or (dog.failure is None and not dog.thread.is_alive()):
        dog = Watchdog(client)
        client.watchdog = dog
    return dog
