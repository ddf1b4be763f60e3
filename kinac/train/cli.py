"""``kinac train WORKSPACE ENTRY --steps N``: the trainer behind a progress bar or JSON lines.

Text mode draws a rich progress bar on stderr in a terminal (step, loss, tokens/s) and prints
a one-line summary on stdout; ``--json`` prints one JSON object per step
(``{"event": "step", ...}``) and a last one (``{"event": "done", ...}``) on stdout, nothing
else. Bad flags and entries that cannot be trained are ``kinac: error:`` lines (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from kinac.errors import EXIT_OK, EXIT_USAGE, KinaUsageError


def _loss_scale(text: str | None) -> str | float | None:
    if text is None or text == "dynamic":
        return text
    try:
        return float(text)
    except ValueError:
        raise KinaUsageError(f"--loss-scale takes 'dynamic' or a number, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    """The ``train`` command (see :mod:`kinac.cli_parser` for its flags)."""
    from pathlib import Path

    from kinac.train.trainer import StepResult

    if not Path(args.path).is_dir():
        print(f"kinac: error: {args.path} is not a workspace directory", file=sys.stderr)
        return EXIT_USAGE
    if args.layout != "dp" and args.simulate is None:
        raise KinaUsageError(
            f"--layout {args.layout} needs --simulate N: tensor parallel runs on simulated "
            "devices (under kinac launch every rank is data parallel)"
        )
    from kinac.train.launched import launch_rank

    save = _save_path(args.save) if args.save else None  # a bad path fails before training
    rank = launch_rank()
    all_ranks = bool(getattr(args, "all_ranks", False))
    quiet = rank not in (None, 0) and not all_ranks  # a launch: rank 0 speaks for the others
    tag = {"rank": rank} if all_ranks and rank is not None else {}
    if getattr(args, "manifest", None):
        args.deterministic = True  # --manifest alone asks for the gate too
    _refuse_sharded_gate(args, rank)
    t0 = time.perf_counter()
    trainer = _trainer(args)
    recorder = _recorder(args, trainer)
    server = _metrics_server(args, trainer) if rank in (None, 0) else None  # rank 0 serves
    results: list[StepResult] = []
    try:
        results = _train(args, trainer, quiet, tag)
    finally:
        if server is not None:
            server.close()
    total = time.perf_counter() - t0
    done = _summary(trainer, results, total)
    if quiet:
        pass
    elif args.json:
        _json_line({**done, **tag})
    else:
        print(_summary_line(args.entry, trainer, done, f"rank {rank}: " if tag else ""))
    if recorder is not None:
        _gate(args, trainer, recorder)
    if save is not None and rank in (None, 0):  # every rank holds the same weights: one file
        _save(trainer, str(save), say=not args.json)  # --json: stdout holds JSON lines only
    return EXIT_OK


def _trainer(args: argparse.Namespace) -> Any:
    from kinac.train.trainer import Trainer

    return Trainer(
        args.path,
        args.entry,
        lr=args.lr,
        seed=args.seed,
        target=args.target or "cpu",
        optimizer=args.optimizer,
        weight_decay=args.weight_decay,
        loss_scale=_loss_scale(args.loss_scale),
        simulate=args.simulate,
        layout=args.layout,
        cache_dir=args.cache_dir,
        no_cache=args.no_cache,
    )


def _refuse_sharded_gate(args: argparse.Namespace, rank: int | None) -> None:
    """``--deterministic`` records one process's step: refused with ``--simulate`` and under
    ``kinac launch`` before anything is built (docs/training.md)."""
    if not getattr(args, "deterministic", False):
        return
    where = (
        "--simulate" if args.simulate is not None else "kinac launch" if rank is not None else ""
    )
    if where:
        raise KinaUsageError(
            f"--deterministic/--manifest records a single-device training step and does not "
            f"combine with {where}: record a run without it"
        )


def _config(args: argparse.Namespace) -> dict[str, Any]:
    return {"seed": args.seed, "lr": args.lr, "optimizer": args.optimizer,
            "weight_decay": args.weight_decay, "loss_scale": args.loss_scale}  # fmt: skip


def _recorder(args: argparse.Namespace, trainer: Any) -> Any:
    if not getattr(args, "deterministic", False):
        return None
    from kinac.train.observe import Recorder, check_manifest

    if args.manifest:
        check_manifest(args.manifest)  # a damaged one fails before training, not after
    rec = Recorder(_config(args))
    rec.install(trainer)
    return rec


def _gate(args: argparse.Namespace, trainer: Any, recorder: Any) -> None:
    """Compare the recorded run with ``--manifest`` or a second run; say so on stderr with
    ``--json`` (stdout holds JSON lines only)."""
    from kinac.train.observe import gate

    def again() -> dict[str, Any]:
        second = _trainer(args)
        rec = _recorder(args, second)
        list(second.steps(args.steps))
        return rec.manifest(second)  # type: ignore[no-any-return]

    text = gate(recorder.manifest(trainer), args.manifest, again)
    print(text, file=sys.stderr if args.json else sys.stdout)


def _metrics_server(args: argparse.Namespace, trainer: Any) -> Any:
    """``--metrics-port``: the server (else None), its address said first: a ``{"event":
    "metrics"}`` line with ``--json``."""
    port = getattr(args, "metrics_port", None)
    if port is None:
        return None
    server = trainer.serve_metrics(port)
    if args.json:
        _json_line({"event": "metrics", "url": server.url})
    else:
        print(f"metrics: {server.url} while training", flush=True)
    return server


def _train(args: argparse.Namespace, trainer: Any, quiet: bool, tag: dict[str, Any]) -> list[Any]:
    results: list[Any] = []
    if quiet:
        results = list(trainer.steps(args.steps))
    elif args.json:
        head = {
            "event": "start",
            "entry": args.entry,
            "weights": trainer.n_weights,
            "tokens_per_step": trainer.tokens_per_step,
            "target": trainer.target,
            "seed": args.seed,
            "simulate": args.simulate,
            "layout": args.layout if args.simulate else None,
            **tag,
        }
        _json_line(head)
        for r in trainer.steps(args.steps):
            results.append(r)
            _json_line({**r.as_json(), **tag})
    else:
        results = _with_progress(trainer, args.steps, sys.stderr.isatty())
    return results


def _save_path(text: str) -> Any:
    """Where ``--save`` writes, decided before training as ``kinac run --save`` decides it
    (:func:`kinac.run.save_path`: a directory refused, ``.npz`` added to another name)."""
    from kinac.run import save_path as decide

    return decide(text)


def _summary_line(entry: str, trainer: Any, done: dict[str, Any], prefix: str) -> str:
    """The text summary. One step gives no rate: it includes compiling the gradient and the
    optimizer, so "N tokens/s after the first step" from it was the first step's own."""
    n = done["steps"]
    rate = (
        f", {done['tokens_per_s']:,.0f} tokens/s after the first step"
        if n > 1 and done["tokens_per_s"] is not None
        else ""
    )
    return (
        f"{prefix}trained {entry} ({trainer.n_weights / 1e6:.2f}M weights) for "
        f"{n} step{'s' * (n != 1)}: loss {done['first_loss']:.4f} -> {done['last_loss']:.4f}"
        + rate
        + (f", {done['skipped']} skipped" if done["skipped"] else "")
    )


def _summary(trainer: Any, results: list[Any], total: float) -> dict[str, Any]:
    """The ``done`` event. Rates are of the steps after the first (which compiles), so one
    step has none (null), never the first step's own."""
    later = results[1:]
    secs = sum(r.seconds for r in later)
    return {
        "event": "done",
        "steps": len(results),
        "first_loss": results[0].loss if results else None,
        "last_loss": results[-1].loss if results else None,
        "tokens_per_s": round(sum(r.tokens for r in later) / secs, 1) if secs else None,
        "steps_per_s": round(len(later) / secs, 3) if secs else None,
        "skipped": sum(r.skipped for r in results),
        "allocations_after_first": sum(trainer.allocations_per_step[1:]),
        "seconds": round(total, 3),
    }


def _with_progress(trainer: Any, steps: int, enabled: bool) -> list[Any]:
    results: list[Any] = []
    if not enabled:
        return list(trainer.steps(steps))
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("[bold]train[/] {task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss [cyan]{task.fields[loss]}[/]"),
        TextColumn("{task.fields[tps]} tok/s"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        # the first step compiles the loss's gradient and the optimizer (cached afterwards)
        task = bar.add_task(f"{trainer.entry} (compiling)", total=steps, loss="-", tps="-")
        for r in trainer.steps(steps):
            results.append(r)
            bar.update(
                task,
                description=trainer.entry,
                advance=1,
                loss=f"{r.loss:.4f}" + (" (skipped)" if r.skipped else ""),
                tps=f"{r.tokens_per_s:,.0f}",
            )
    return results


def _save(trainer: Any, text: str, say: bool = True) -> None:
    """The trained weights as a .npz (arrays named after the parameters), at the name
    :func:`_save_path` decides, said on stdout (``say``)."""
    import numpy as np

    from kinac.train.optim import to_numpy

    path = _save_path(text)
    weights = {k: to_numpy(v) for k, v in trainer.weights.items()}
    try:
        np.savez(path, **weights)
    except OSError as e:
        raise KinaUsageError(f"--save: cannot write {path}: {e.strerror or e}") from None
    n = len(weights)
    if say:
        print(f"saved {n} weight array{'s' * (n != 1)} to {path} (named after the parameters)")


def _json_line(doc: dict[str, Any]) -> None:
    """One ``--json`` line, written with one ``write`` and flushed: the ranks of ``kinac launch
    --all-ranks`` share one stdout, and ``print`` writes the text and its newline apart (two
    system calls on an unbuffered stream), so two ranks' lines could run together."""
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
