"""Memoised demand-driven evaluation without Python recursion.

Why: kernel bodies are read by index, each value from the values it uses (an ``add`` from
its two operands, a view from its source). Written as plain recursion, the depth of that walk
is the length of the longest chain of fused ops, which follows program size: a defn with 1,500
chained ``let``\\ s hit ``RecursionError``. Here each value's reader is a generator that
*yields* the requests it depends on and receives their results; :func:`evaluate` keeps the
pending readers on an explicit stack. The code runs in exactly the order the recursion would
(so the emitted IR is unchanged) and each request is computed once (memoised by the caller's
``lookup``/``store``), so the walk is linear in the number of distinct requests.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TypeVar

Req = TypeVar("Req")
Res = TypeVar("Res")

Reader = Generator[Req, Res, Res]


def evaluate(
    root: Req,
    lookup: Callable[[Req], Res | None],
    reader: Callable[[Req], Generator[Req, Res, Res]],
    store: Callable[[Req, Res], None],
) -> Res:
    """The result of ``root``: ``lookup`` (a memo hit) or run ``reader(root)``.

    A reader yields requests; each is answered from ``lookup`` or by running its own reader
    first (on the explicit stack). A finished reader's result is passed to ``store``.
    """
    hit = lookup(root)
    if hit is not None:
        return hit
    stack: list[tuple[Req, Generator[Req, Res, Res]]] = [(root, reader(root))]
    answer: Res | None = None
    while True:
        req, gen = stack[-1]
        try:
            want = gen.send(answer) if answer is not None else next(gen)
        except StopIteration as done:
            result: Res = done.value
            store(req, result)
            stack.pop()
            if not stack:
                return result
            answer = result
            continue
        answer = lookup(want)
        if answer is None:
            stack.append((want, reader(want)))
