"""The stable surfaces of docs/abi.md: each has a golden under tests/golden/abi/ and a test that
fails on an incompatible change.

Why: a stable surface may only change compatibly (docs/abi.md says how it moves and how a
deprecation is announced). Exact goldens (public API signatures, the ``kina.toml`` JSON schema,
the DLPack interface, the cache format) fail on any change, so each change is reviewed against
the policy and the golden is rewritten on purpose (``--update-goldens``). Append-only lists
(diagnostic codes, CLI commands and flags) fail only when something is removed or renamed.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path

from goldens import HOW, compare, updating

GOLDEN = Path(__file__).resolve().parent / "golden" / "abi"


def _sig(obj: object) -> str:
    return str(inspect.signature(obj))  # type: ignore[arg-type]


def public_api() -> str:
    """``kinac``'s names, ``kinac.compile``, the compiled callable, the error classes and the
    runtime's public names and DLPack-facing signatures."""
    import kinac
    from kinac import errors
    from kinac.api import CompiledDefn
    from kinac.rt import cuda

    lines = [f"kinac.__all__ = {sorted(kinac.__all__)}", f"kinac.compile{_sig(kinac.compile)}"]
    lines.append(f"CompiledDefn{_sig(CompiledDefn.__init__)}")
    lines.append(f"CompiledDefn.__call__{_sig(CompiledDefn.__call__)}")
    for name in sorted(n for n in dir(errors) if n.startswith("Kina")):
        cls = getattr(errors, name)
        bases = ", ".join(b.__name__ for b in cls.__bases__)
        lines.append(f"class {name}({bases}) exit_code={cls.exit_code}")
    lines.append(
        "exit codes: "
        + ", ".join(
            f"{n}={getattr(errors, n)}" for n in sorted(dir(errors)) if n.startswith("EXIT_")
        )
    )
    lines.append(f"kinac.rt.cuda.__all__ = {sorted(cuda.__all__)}")
    for name in (
        "available",
        "unavailable_reason",
        "get_device",
        "load_module",
        "make_resource",
        "default_resource",
        "capture",
        "order_streams",
        "current_device",
    ):
        lines.append(f"cuda.{name}{_sig(getattr(cuda, name))}")
    for name in (
        "empty",
        "from_numpy",
        "host",
        "from_dlpack",
        "numpy",
        "clone",
        "copy_from_host",
        "__dlpack__",
        "__dlpack_device__",
    ):
        lines.append(f"cuda.Tensor.{name}{_sig(getattr(cuda.Tensor, name))}")
    for name in ("allocate", "deallocate", "memory_stats"):
        lines.append(f"cuda.MemoryResource.{name}{_sig(getattr(cuda.MemoryResource, name))}")
    return "\n".join(lines) + "\n"


def dlpack_interface() -> str:
    from kinac.rt.cuda import dlpack

    return f"DLPack version {dlpack.VERSION[0]}.{dlpack.VERSION[1]}\n"


def kina_toml_schema() -> str:
    from kinac.workspace.schema import _models

    return json.dumps(_models().model_json_schema(), indent=1, sort_keys=True) + "\n"


def cache_format() -> str:
    """The on-disk index's format marker and codec version, with a digest of the index schema:
    a schema change that keeps the same marker is an incompatible change."""
    from kinac.rules import codec, store

    digest = hashlib.sha256("\n".join(store.SCHEMA).encode()).hexdigest()[:16]
    return (
        f"store.FORMAT {store.FORMAT.decode()}\nindex schema {digest}\n"
        f"codec.CODEC_VERSION {codec.CODEC_VERSION}\n"
    )


def diagnostic_codes() -> list[str]:
    from kinac.check.codes import CODES
    from kinac.diag import explain

    documented = {p.stem for p in (Path(explain.__file__).parent / "explain").glob("K*.md")}
    return sorted(set(CODES) | documented)


def cli_surface() -> list[str]:
    """``command flag`` for every subcommand and its options (and the commands themselves)."""
    import argparse

    from kinac.cli_parser import build_parser

    out: list[str] = []
    parser = build_parser()
    for act in parser._actions:
        if isinstance(act, argparse._SubParsersAction):
            for cmd, sub in act.choices.items():
                out.append(cmd)
                for a in sub._actions:
                    if isinstance(a, argparse._SubParsersAction):
                        out.extend(f"{cmd} {c}" for c in a.choices)
                    out.extend(f"{cmd} {o}" for o in a.option_strings)
        else:
            out.extend(act.option_strings)
    return sorted(set(out))


def test_public_api_signatures() -> None:
    compare(GOLDEN / "api.txt", public_api(), "public API (docs/abi.md)")


def test_dlpack_version() -> None:
    compare(GOLDEN / "dlpack.txt", dlpack_interface(), "DLPack interface")


def test_kina_toml_schema() -> None:
    compare(GOLDEN / "kina_toml.schema.json", kina_toml_schema(), "kina.toml JSON schema")


def test_cache_format_is_versioned() -> None:
    got = cache_format()
    golden = GOLDEN / "cache.txt"
    if not updating() and golden.exists():
        want = golden.read_text().splitlines()
        have = got.splitlines()
        if want[1] != have[1]:  # the index schema changed: the format marker must change too
            assert want[0] != have[0], f"the cache index schema changed: bump store.FORMAT ({HOW})"
    compare(golden, got, "cache format")


def _removed(golden_text: str, current: list[str]) -> list[str]:
    return sorted(set(golden_text.split("\n")) - set(current) - {""})


def _append_only(name: str, current: list[str], what: str) -> None:
    golden = GOLDEN / name
    if updating():
        compare(golden, "\n".join(current) + "\n")
    assert golden.exists(), f"missing golden {golden}: {HOW}"
    removed = _removed(golden.read_text(), current)
    assert not removed, (
        f"{what} removed or renamed: {removed}; stable surfaces only grow (docs/abi.md: deprecate "
        f"first, remove at the next major version)"
    )


def test_diagnostic_codes_are_never_removed() -> None:
    _append_only("diagnostic_codes.txt", diagnostic_codes(), "diagnostic codes")


def test_cli_commands_and_flags_are_never_removed() -> None:
    _append_only("cli.txt", cli_surface(), "CLI commands or flags")


def test_the_checks_catch_an_incompatible_change(tmp_path: Path) -> None:
    """The checks themselves: a removed code is caught, and so is a changed default of
    ``kinac.compile`` (against a copy of the golden)."""
    import pytest

    codes = diagnostic_codes()
    assert _removed("\n".join(codes), codes[1:]) == [codes[0]]
    api = public_api()
    changed = api.replace("target: 'str' = 'cpu'", "target: 'str' = 'cuda'", 1)
    assert changed != api
    copy = tmp_path / "api.txt"
    copy.write_text(api)
    if not updating():
        with pytest.raises(AssertionError, match="differs"):
            compare(copy, changed)
