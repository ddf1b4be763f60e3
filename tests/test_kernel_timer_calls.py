"""kinac.rt.cuda.kernel_timer.time_calls, the event-timed loop both autotuners share, over a fake
clock (no GPU): a round is sized from one timed call, and the result is the median per call."""

from __future__ import annotations

from typing import Any

import pytest

from kinac.rt.cuda import kernel_timer


class _Clock:
    """Stands in for the device: each issued call takes ``per_call`` ms of device time."""

    def __init__(self, per_call: list[float]) -> None:
        self.now = 0.0
        self.per_call = per_call
        self.calls = 0

    def issue(self) -> None:
        self.now += self.per_call[min(self.calls, len(self.per_call) - 1)]
        self.calls += 1


def _fake_event(clock: _Clock) -> type:
    class Event:
        def record(self, stream: Any) -> None:
            self.t = clock.now

        def synchronize(self) -> None:
            pass

        def elapsed_ms(self, end: Any) -> float:
            return float(end.t - self.t)

        def close(self) -> None:
            pass

    return Event


def test_rounds_are_sized_from_one_call_and_the_median_is_per_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock([0.1, 0.1, 0.2])  # the sizing call, then the first call of round 1, then 0.2
    monkeypatch.setattr(kernel_timer, "Event", _fake_event(clock))
    ms = kernel_timer.time_calls(clock.issue, None, round_ms=1.0, rounds=3, max_reps=50)  # type: ignore[arg-type]
    # 1 ms / 0.1 ms -> 10 calls a round; rounds: (0.1 + 9 x 0.2) / 10, then 0.2, 0.2
    assert clock.calls == 1 + 3 * 10
    assert ms == pytest.approx(0.2)


def test_reps_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock([1e-6])
    monkeypatch.setattr(kernel_timer, "Event", _fake_event(clock))
    kernel_timer.time_calls(clock.issue, None, round_ms=1.0, rounds=2, max_reps=7)  # type: ignore[arg-type]
    assert clock.calls == 1 + 2 * 7
    slow = _Clock([5.0])
    monkeypatch.setattr(kernel_timer, "Event", _fake_event(slow))
    assert kernel_timer.time_calls(slow.issue, None, round_ms=1.0, rounds=1, max_reps=7) == 5.0  # type: ignore[arg-type]
    assert slow.calls == 1 + 2
