"""Flags and argument types shared by several ``kinac`` commands (cache, server, debug, run inputs,
metrics port) and the checked integer and port types argparse applies.

Split from :mod:`kinac.cli_parser` (each command and its help): these are the building blocks it
adds to several subparsers. Imports nothing heavy, so ``kinac --help`` starts fast.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_common_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="cache directory (default: $KINAC_CACHE_DIR, kina.toml's workspace.cache_dir, "
        "or WORKSPACE/.kinac-cache)",
    )
    p.add_argument("--no-cache", action="store_true", help="do not read or write the on-disk cache")
    add_debug_flag(p)


def add_no_server_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-server",
        action="store_true",
        help="build in this process even if a build server (kinac serve) runs (also "
        "KINAC_SERVER=0)",
    )


def add_debug_flag(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: a subcommand's --debug must not reset the top-level one to False
    p.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="on an internal error, print its traceback (also KINAC_DEBUG=1)",
    )


def int_at_least(least: int) -> Any:
    """An argparse type: an int >= ``least`` (argparse turns the ValueError into exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    parse.__name__ = f"int >= {least}"
    return parse


def port_number(least: int) -> Any:
    """An argparse type: a TCP port, ``least``..65535 (0: the system picks a free one). Checked
    here, not by ``bind()`` (an OverflowError, an internal error) or by each launched rank."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
        if not least <= value <= 65535:
            raise argparse.ArgumentTypeError(f"a TCP port is {least}-65535, got {value}")
        return value

    parse.__name__ = f"port {least}-65535"
    return parse


def add_run_inputs(p: argparse.ArgumentParser) -> None:
    """What ``run`` and ``profile`` share: the entry and its inputs."""
    p.add_argument("path", help="workspace directory or .kina file")
    p.add_argument("entry", help="entry name from kina.toml (or a defn name with --dims)")
    p.add_argument(
        "--seed",
        type=int_at_least(0),
        default=0,
        help="seed of the random inputs (>= 0, default 0)",
    )
    p.add_argument(
        "--inputs",
        metavar="FILE",
        help=".npz (arrays named after the parameters) or .npy (one input)",
    )
    p.add_argument(
        "--dims", metavar="K=V,...", help="concrete dims for a defn that is not a kina.toml entry"
    )
    p.add_argument(
        "--dtypes",
        metavar="T=f32,...",
        help="dtype variables for a defn that is not a kina.toml entry",
    )
    p.add_argument("--target", choices=["cpu", "cuda"], help="override kina.toml's target.kind")


def add_metrics_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-port",
        type=port_number(0),
        metavar="N",
        help="serve Prometheus metrics on 127.0.0.1:N while the runs repeat (0: any free port)",
    )
