"""``kinac train --metrics-port N`` and ``kinac train --deterministic [--manifest F]``.

Both reuse ``kinac run``'s machinery (``docs/observability.md``): the metrics are a
:class:`kinac.metrics.TrainMetrics` (``kinac run``'s :class:`~kinac.metrics.RunMetrics` plus the
``kinac_train_*`` gauges) served by the same :class:`~kinac.metrics.MetricsServer`; the
manifest is ``kinac run``'s (:mod:`kinac.observe.determinism`: the first step's loss-and-
gradient call recorded kernel by kernel by ``record_host`` / ``record_gpu``, compared by
``first_difference``, read and written by the same functions), extended with what a training
run adds: its options, every step's loss (bit for bit, as ``float.hex``) and a checksum of
each final weight. ``graph_hash`` is the hash of the whole step: the lowered records of the
loss-and-gradient entry and of every optimizer entry it ran.

The trainer calls two hooks (:class:`kinac.train.trainer.Trainer`): ``first_call(entry,
args)`` once, just before the first loss-and-gradient call, and each of ``observers`` after
every step.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from kinac.errors import KinaUsageError

CONFIG_FLAGS = {"seed": "--seed", "lr": "--lr", "optimizer": "--optimizer",
                "weight_decay": "--weight-decay", "loss_scale": "--loss-scale"}  # fmt: skip


def step_entries(trainer: Any) -> tuple[Any, ...]:
    """The runtime entries one step runs after the loss-and-gradient call: the optimizer's
    (and the loss scaler's) specialised defns, and a fused AdamW kernel's entry."""
    found: list[Any] = []
    for owner in (trainer.opt, trainer.scaler):
        for fn in getattr(owner, "_fns", {}).values():
            found.extend(getattr(fn, "_entries", {}).values())
        found.extend(getattr(owner, "_fused", {}).values())
    return tuple(e for e in found if hasattr(getattr(e, "lowered", None), "steps"))


def loss_entry(trainer: Any) -> Any:
    """The loss-and-gradient runtime entry (None before the first step, or when the step is
    sharded: ``--simulate``, ``kinac launch``)."""
    spec = getattr(trainer, "_entry", None)
    return getattr(spec, "entry", None)


def serve_metrics(trainer: Any, port: int) -> Any:
    """Serve ``trainer``'s metrics on 127.0.0.1:``port`` (0: a free one) until the returned
    server's ``close()``; every later step updates them."""
    from kinac.metrics import MetricsServer, TrainMetrics

    metrics = TrainMetrics(trainer.entry, trainer.target, db=_db(trainer))

    def observe(tr: Any, result: Any) -> None:
        if metrics.entry is None:
            metrics.entry = loss_entry(tr)
        metrics.step_entries = step_entries(tr)
        metrics.observe_step(result.seconds, result.tokens, result.loss)

    try:
        server = MetricsServer(metrics, port)
    except OSError as e:
        raise KinaUsageError(
            f"--metrics-port: cannot listen on 127.0.0.1:{port}: {e.strerror or e}"
        ) from None
    trainer.observers.append(observe)
    return server


def _db(trainer: Any) -> Any:
    sess = getattr(getattr(trainer, "vg", None), "sess", None)
    if sess is None:
        sess = getattr(getattr(getattr(trainer, "vg", None), "fn", None), "sess", None)
    return getattr(sess, "db", None)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


class Recorder:
    """Installed on a trainer (:meth:`install`), records what :meth:`manifest` returns after
    its steps. ``plant``: as ``record_host``'s, for the first step's loss-and-gradient call."""

    def __init__(self, config: dict[str, Any], plant: Any = None) -> None:
        self.config = config
        self.plant = plant
        self.first: dict[str, Any] | None = None
        self.losses: list[str] = []
        self.target = "cpu"

    def install(self, trainer: Any) -> None:
        if trainer.parallel is not None:
            raise KinaUsageError(
                "--deterministic records one process's training step: it does not combine "
                "with --simulate or kinac launch (record a single-device run)"
            )
        self.target = trainer.target
        trainer.first_call = self._first_call
        trainer.observers.append(lambda _tr, r: self.losses.append(float(r.loss).hex()))

    def _first_call(self, entry: Any, args: tuple[Any, ...]) -> None:
        from kinac.observe.determinism import record_gpu, record_host

        record = record_gpu if self.target == "cuda" else record_host
        self.first = record(entry, args, "", self.plant)

    def manifest(self, trainer: Any) -> dict[str, Any]:
        """The training run's manifest (``kinac run``'s fields, then the training's)."""
        import numpy as np

        from kinac.rules.codec import fingerprint
        from kinac.train.optim import to_numpy

        if self.first is None:
            raise RuntimeError("the trainer ran no step: nothing was recorded")
        entries = (loss_entry(trainer), *step_entries(trainer))
        graph_hash = fingerprint(tuple(e.lowered for e in entries))
        weights = {
            k: _sha(np.ascontiguousarray(to_numpy(v)).tobytes())
            for k, v in sorted(trainer.weights.items())
        }
        return {
            **self.first,
            "entry": trainer.entry,
            "graph_hash": graph_hash if isinstance(graph_hash, str) else graph_hash.hex(),
            "train": {"config": self.config, "losses": self.losses, "weights": weights},
        }


def train_problem(doc: dict[str, Any]) -> str | None:
    """What in a manifest's ``train`` part is not as :class:`Recorder` writes it, or None."""
    from kinac.observe.determinism import json_brief

    part = doc.get("train")
    if part is None:
        return "it records a `kinac run`, not a training run: give another --manifest file"
    if not isinstance(part, dict):
        return f"its train is {json_brief(part)}, not an object"
    losses, weights = part.get("losses"), part.get("weights")
    if not isinstance(losses, list) or not all(isinstance(x, str) for x in losses):
        return f"its train.losses is {json_brief(losses)}, not a list of hex floats"
    if not isinstance(weights, dict) or not all(isinstance(x, str) for x in weights.values()):
        return f"its train.weights is {json_brief(weights)}, not an object of checksums"
    if not isinstance(part.get("config"), dict):
        return f"its train.config is {json_brief(part.get('config'))}, not an object"
    return None


def _shown(flag: str, value: Any) -> str:
    """``--seed 1``, or ``no --loss-scale`` for an option left at its default."""
    return f"no {flag} (its default)" if value is None else f"{flag} {value}"


def train_difference(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """``None`` if training run ``new`` reproduces ``old``, else what differs first: an
    option, then (as ``kinac run``) the graph, the first batch and first weights, the first
    kernel of the first step; then the first step whose loss differs, the first weight."""
    from kinac.observe.determinism import first_difference

    if old.get("version") != new.get("version"):
        return first_difference(old, new)
    was, now = old["train"]["config"], new["train"]["config"]
    for key, flag in CONFIG_FLAGS.items():
        if was.get(key) != now.get(key):
            old_v, new_v = (_shown(flag, c.get(key)) for c in (was, now))
            return f"it was recorded with {old_v}, this run has {new_v}"
    why = first_difference(old, new)
    if why is not None and old.get("graph_hash") == new["graph_hash"] and "target" not in why:
        return f"step 1: {why}"  # the first batch or weights, or a kernel of the first step
    if why is not None:
        return why  # another target, defn or step graph: not a step's
    a, b = old["train"]["losses"], new["train"]["losses"]
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return (
                f"step {i + 1} is the first whose loss differs ({float.fromhex(x)!r} recorded, "
                f"{float.fromhex(y)!r} now)"
            )
    if len(a) != len(b):
        return f"{len(a)} steps recorded, {len(b)} now: run the same --steps"
    wa, wb = old["train"]["weights"], new["train"]["weights"]
    if sorted(wa) != sorted(wb):
        return f"the weights recorded ({', '.join(sorted(wa))}) are not this run's"
    for k in sorted(wb):
        if wa[k] != wb[k]:
            return f"weight `{k}` is the first whose final value differs (checksum {wa[k]} recorded, {wb[k]} now)"
    return None


def check_manifest(manifest: str) -> dict[str, Any] | None:
    """The training manifest at ``manifest`` (None when there is none yet: one is recorded);
    a file that is not one kinac train wrote is a ``KinaUsageError`` saying why."""
    from kinac.observe.determinism import read_manifest

    if not Path(manifest).exists():
        return None
    old = read_manifest(Path(manifest))
    if isinstance(old, str):
        raise KinaUsageError(f"--manifest: {old}")
    why = train_problem(old)
    if why is not None:
        raise KinaUsageError(f"--manifest: {manifest} is not a training manifest: {why}")
    return old


def gate(now: dict[str, Any], manifest: str | None, again: Any) -> str:
    """Compare ``now`` with the manifest at ``manifest`` (written there when absent) or, with
    none, with ``again()`` (a second training run's manifest); what to print. A difference is a
    ``KinaRuntimeError``, a damaged manifest a ``KinaUsageError``."""
    from kinac.errors import KinaRuntimeError
    from kinac.observe.determinism import write_manifest

    n, steps = len(now["kernels"]), len(now["train"]["losses"])
    old = check_manifest(manifest) if manifest else again()
    if old is None:  # no manifest there yet: this run is recorded
        assert manifest is not None
        try:
            write_manifest(Path(manifest), now)
        except OSError as e:
            raise KinaUsageError(
                f"--manifest: cannot write {manifest}: {e.strerror or e}"
            ) from None
        return (
            f"deterministic: recorded {steps} steps ({n} kernels of the first) to {manifest} "
            f"(graph {now['graph_hash'][:12]})"
        )
    against = manifest or "a second run"
    why = train_difference(old, now)
    if why is not None:
        raise KinaRuntimeError(f"not deterministic against {against}: {why}")
    return (
        f"deterministic: {n} kernels of the first step, {steps} losses and "
        f"{len(now['train']['weights'])} weights bit-identical to {against}"
    )
