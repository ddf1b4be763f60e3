"""The ``kinac`` command line's arguments: every command, flag and its help text.

Split from :mod:`kinac.cli` (the commands and their exit codes). Imports nothing heavy, so
``kinac --help`` starts fast.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kinac.cli_flags import (
    add_common_flags,
    add_debug_flag,
    add_metrics_flags,
    add_no_server_flag,
    add_run_inputs,
    int_at_least,
    port_number,
)

DESCRIPTION = """\
kinac compiles Kina, a shape-typed tensor language, for the CPU and NVIDIA GPUs.
Every stage is an incremental query cached on disk: rebuilds redo only what changed.

common tasks:
  kinac check model.kina            type-check one file (shape errors with counterexamples)
  kinac build workspaces/mlp        check and build a workspace (reads its kina.toml)
  kinac run workspaces/mlp mlp      run an entry point on random inputs and time it
  kinac watch workspaces/mlp        rebuild on every save, redraw the diagnostics
  kinac serve workspaces/mlp        a build server: later builds and checks forward to it
  kinac train workspaces/decoder decoder_1m --steps 20
                                    train a loss entry (AdamW, synthetic tokens; docs/training.md)
  kinac explain K0203               the long explanation of a diagnostic code
  kinac cache stats                 what the cache holds (also: gc, verify, clear)

exit codes: 0 clean, 1 errors in the program, 2 usage or configuration errors,
            3 internal error (a kinac bug; --debug or KINAC_DEBUG=1 shows its traceback)
colour: --color always|never, else NO_COLOR=1 turns it off and FORCE_COLOR=1 on
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kinac", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version="kinac 0.1.0")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an internal error, print its traceback (also KINAC_DEBUG=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "check",
        help="type-check a file or workspace",
        description="Type-check a .kina file or a workspace directory; print diagnostics.",
    )
    p.add_argument(
        "path", nargs="?", default=".", help="a .kina file or a workspace directory (default: .)"
    )
    p.add_argument(
        "--format", choices=["text", "json"], default="text", help="diagnostics as text or JSON"
    )
    p.add_argument(
        "--types", action="store_true", help="also print the inferred type of every let binding"
    )
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    add_common_flags(p)
    add_no_server_flag(p)

    p = sub.add_parser(
        "build",
        help="check and build a workspace's entry points",
        description="Check every file and build every entry point of kina.toml.",
    )
    p.add_argument(
        "path", nargs="?", default=".", help="workspace directory or .kina file (default: .)"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: queries run/reused, diagnostics, artifacts",
    )
    p.add_argument(
        "--why", action="store_true", help="for each query that re-ran, the change that caused it"
    )
    p.add_argument(
        "--shardings",
        action="store_true",
        help="print each entry's tensor layouts per mesh axis and its planned collectives",
    )
    p.add_argument(
        "--visualize",
        action="store_true",
        help="--shardings, and a picture of each 1-D and 2-D tensor's blocks over the mesh "
        "with the devices holding each",
    )
    p.add_argument("--target", choices=["cpu", "cuda"], help="override kina.toml's target.kind")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    add_common_flags(p)
    add_no_server_flag(p)

    p = sub.add_parser(
        "run",
        help="build and run one entry point",
        description="Build an entry point and run it on random inputs (from --seed) or on "
        "arrays from a .npz/.npy file; print a summary of the outputs and the time.",
    )
    add_run_inputs(p)
    p.add_argument(
        "--repeat",
        type=int_at_least(1),
        default=10,
        help="timed repetitions after the first call (>= 1, default 10)",
    )
    p.add_argument("--save", metavar="FILE", help="save the outputs to a .npz file")
    p.add_argument(
        "--simulate",
        nargs="?",
        const="",
        metavar="MESH",
        help="run the entry's sharded program on simulated devices (threads): alone, on the "
        "mesh its annotations name; N or a shape (2x2) resizes that mesh (an entry without "
        "annotations runs replicated); or a mesh name. Prints the global outputs and the "
        "collectives run",
    )
    p.add_argument(
        "--distributed",
        nargs="?",
        const="",
        metavar="MESH",
        help="run the entry's sharded program as this process's rank of a launched group "
        "(kinac launch -n N, torchrun or SLURM: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); "
        "MESH as for --simulate (default: WORLD_SIZE devices). Rank 0 prints the global outputs",
    )
    add_metrics_flags(p)
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="checksum every kernel's output; compare with --manifest, or with a second run "
        "(host target)",
    )
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="determinism manifest: written if FILE does not exist, else compared against; "
        "names the first kernel whose output differs",
    )
    add_common_flags(p)

    p = sub.add_parser(
        "profile",
        help="time every kernel of an entry point, write a trace",
        description="Build an entry point, run it on random inputs (or --inputs) and print "
        "a table of every kernel: time, share, bytes, GB/s; --trace writes a Chrome/Perfetto "
        "trace (open it in ui.perfetto.dev or chrome://tracing).",
    )
    add_run_inputs(p)
    p.add_argument(
        "--repeat", type=int_at_least(1), default=10, help="profiled calls (>= 1, default 10)"
    )
    p.add_argument("--trace", metavar="FILE", help="write a Trace Event Format JSON file")
    add_common_flags(p)

    p = sub.add_parser(
        "train",
        help="train a loss entry on a synthetic token task",
        description="Train a kina.toml entry whose defn returns a scalar loss (docs/training.md): "
        "value_and_grad of its weights, an optimizer from std/optim.kina, a synthetic "
        "learnable token task. A progress bar (step, loss, tokens/s), or --json lines.",
    )
    p.add_argument("path", help="workspace directory")
    p.add_argument("entry", help="entry name from kina.toml (e.g. decoder_1m)")
    p.add_argument("--steps", type=int_at_least(1), default=20, help="training steps (default 20)")
    p.add_argument("--lr", type=float, default=3e-3, help="learning rate (default 3e-3)")
    p.add_argument(
        "--seed", type=int_at_least(0), default=0, help="seed of weights and data (default 0)"
    )
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    p.add_argument("--weight-decay", type=float, default=0.0, help="(default 0)")
    p.add_argument(
        "--loss-scale",
        metavar="dynamic|X",
        help="loss scaling of a mixed-precision entry (default: dynamic for f16, 1 otherwise)",
    )
    p.add_argument("--target", choices=["cpu", "cuda"], help="where to train (default cpu)")
    p.add_argument(
        "--simulate",
        type=int_at_least(1),
        metavar="N",
        help="data-parallel on N simulated devices (threads): each computes the gradients of "
        "B/N sequences, then they are all-reduced",
    )
    p.add_argument(
        "--layout",
        choices=["dp", "tp", "2d"],
        default="dp",
        help="with --simulate: data parallel (default), tensor parallel (Megatron), or both "
        "on a 2 x N/2 mesh",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per step on stdout")
    p.add_argument(
        "--all-ranks",
        action="store_true",
        help="under kinac launch: every rank prints its progress and summary (--json lines "
        'carry "rank"); by default only rank 0 does, the others print errors only',
    )
    p.add_argument("--save", metavar="FILE", help="save the trained weights to a .npz file")
    p.add_argument(
        "--metrics-port",
        type=port_number(0),
        metavar="N",
        help="serve Prometheus metrics (step time, tokens/s, loss, ...) on 127.0.0.1:N while "
        "training (0: any free port)",
    )
    p.add_argument(
        "--deterministic",
        action="store_true",
        help="record the step's graph hash, the first step's kernels, every loss and the final "
        "weights; compare with --manifest, or with a second run",
    )
    p.add_argument(
        "--manifest",
        metavar="FILE",
        help="training determinism manifest: written if FILE does not exist, else compared "
        "against (implies --deterministic)",
    )
    add_common_flags(p)

    p = sub.add_parser(
        "launch",
        help="run N ranks of a command on this machine (torchrun's environment)",
        description="Start N processes of COMMAND with RANK, WORLD_SIZE, LOCAL_RANK, "
        "MASTER_ADDR, MASTER_PORT set as torchrun sets them (docs/distributed.md), e.g. "
        "kinac launch -n 2 -- kinac run WS ENTRY --distributed. The first rank that fails is "
        "named and the others stopped.",
    )
    p.add_argument("-n", "--nproc", type=int_at_least(1), required=True, help="number of ranks")
    p.add_argument(
        "--master-port", type=port_number(1), metavar="PORT", help="rendezvous port (default: free)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="seconds a rank waits for its peers at the rendezvous and in a collective "
        "(KINAC_DIST_TIMEOUT; default 60)",
    )
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    add_debug_flag(p)

    p = sub.add_parser(
        "watch",
        help="rebuild on every save",
        description="Watch a workspace; on each save rebuild only what changed and redraw "
        "the diagnostics. Ctrl-C exits.",
    )
    p.add_argument("path", nargs="?", default=".")
    add_common_flags(p)
    add_no_server_flag(p)

    p = sub.add_parser(
        "serve",
        help="keep a workspace's compiler resident; build and check forward to it",
        description="A build server: keeps the workspace's query engine, memo tables and "
        "imports in memory and listens on a Unix socket under the cache directory; kinac "
        "build and kinac check in other processes forward to it (same output, exit code). "
        "Exits after --idle-timeout seconds without a request. docs/incremental.md.",
    )
    p.add_argument(
        "path", nargs="?", default=".", help="workspace directory or .kina file (default: .)"
    )
    p.add_argument("--cache-dir", metavar="DIR", help="cache directory (as for kinac build)")
    p.add_argument("--target", choices=["cpu", "cuda"], help="override kina.toml's target.kind")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=900.0,
        metavar="S",
        help="exit after S seconds without a request (default 900)",
    )
    add_debug_flag(p)

    p = sub.add_parser(
        "cache",
        help="inspect or maintain the cache",
        description="stats: what the cache holds; gc: drop unused entries; verify: check every "
        "entry's checksum; clear: delete everything.",
    )
    p.add_argument("action", choices=["stats", "gc", "verify", "clear"])
    p.add_argument("path", nargs="?", default=".", help="workspace whose cache to use (default: .)")
    add_common_flags(p)

    p = sub.add_parser(
        "explain",
        help="explain a diagnostic code",
        description="Print the long explanation of a diagnostic code, e.g. kinac explain K0203.",
    )
    p.add_argument("code")
    add_debug_flag(p)
    return parser


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str] | None) -> Any:
    """``parser.parse_args(argv)``, but a mistyped command or flag is reported by the command
    it belongs to, with the nearest spelling: argparse printed the top-level usage (``kinac
    [-h] [--version] [--debug] COMMAND ...``) for ``kinac run ws e --sed 3``, which lists
    none of ``run``'s flags."""
    import difflib

    subs: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            subs = dict(action.choices)
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((w for w in words if not w.startswith("-")), None)
    if command is not None and subs and command not in subs:
        near = difflib.get_close_matches(command, list(subs), n=1)
        if near:
            parser.error(f"unknown command {command!r}; did you mean {near[0]}?")
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = subs.get(getattr(args, "command", None) or "", parser)
        flags = [o for a in sub._actions for o in a.option_strings]  # noqa: SLF001
        near = [
            m[0]
            for w in extra
            if w.startswith("-")
            for m in [difflib.get_close_matches(w.partition("=")[0], flags, n=1)]
            if m
        ]
        hint = f"; did you mean {' '.join(near)}?" if near else ""
        sub.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    return args
