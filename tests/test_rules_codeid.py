"""Code identity from the import graph, and records that decode whatever was imported (issue 10.4)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import kinac.pipeline as pipeline
from kinac.rules.codeid import KINAC_DIR, CodeIndex
from kinac.rules.query import REGISTRY, Query

QUERY_SKIP = [(q.fn.__module__, q.fn.__name__) for q in REGISTRY.values()]


def _identity(index: CodeIndex, q: Query[object, object]) -> str:
    return index.identity(q.fn.__module__, q.fn.__name__, QUERY_SKIP)


def _edited(rel: str, old: str, new: str) -> CodeIndex:
    """An index that reads ``rel`` as if ``old`` had been replaced by ``new`` (no file is edited)."""
    target = KINAC_DIR / rel
    text = target.read_text()
    assert old in text, f"{old!r} not in {rel}"

    def read(p: Path) -> bytes:
        return text.replace(old, new, 1).encode() if p == target else p.read_bytes()

    return CodeIndex(read=read)


def test_editing_the_dtype_table_invalidates_check_defn() -> None:
    """``dtypes.py`` is reached from ``check_defn`` only through the checker's imports."""
    base = CodeIndex()
    edited = _edited("dtypes.py", '"f32"', '"f32" ')
    assert _identity(edited, pipeline.check_defn) != _identity(base, pipeline.check_defn)  # type: ignore[arg-type]
    assert _identity(edited, pipeline.parse) == _identity(base, pipeline.parse)  # type: ignore[arg-type]  # precise, too
    assert "kinac.dtypes" not in base.closure("kinac.pipeline", "parse", QUERY_SKIP)


def test_other_queries_called_through_db_are_not_code() -> None:
    base = CodeIndex()
    closure = base.closure("kinac.pipeline", "signature", QUERY_SKIP)
    assert "kinac.reader.parse" not in closure  # parse runs as its own query
    assert "kinac.reader.parse" in base.closure("kinac.pipeline", "parse", QUERY_SKIP)


def _fake_kinac(tmp_path: Path, files: dict[str, str]) -> CodeIndex:
    root = tmp_path / "kinac"
    for rel, text in {"__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return CodeIndex(root=root)


def test_lazy_and_string_imports_are_followed(tmp_path: Path) -> None:
    index = _fake_kinac(
        tmp_path,
        {
            "q.py": "def run():\n    from kinac.lazy import go\n    return go()\n\ndef other():\n    import kinac.never\n",
            "lazy.py": "import importlib\n\ndef go():\n    return importlib.import_module('kinac.named')\n",
            "named.py": "X = 1\n",
            "never.py": "",
            "table.py": "import importlib\nT = {'a': 'kinac.named'}\n\ndef get(n):\n    return importlib.import_module(T[n])\n",
            "usetable.py": "from kinac.table import get\n\ndef run():\n    return get('a')\n",
        },
    )
    assert index.closure("kinac.q", "run", [("kinac.q", "other")]) == [
        "kinac",
        "kinac.lazy",
        "kinac.named",
        "kinac.q",
    ]
    assert "kinac.named" in index.closure("kinac.usetable", "run")  # import_module(table[name])


def test_a_seeded_index_reads_no_source(tmp_path: Path) -> None:
    first = CodeIndex()
    want = _identity(first, pipeline.check_defn)  # type: ignore[arg-type]
    reads: list[Path] = []
    second = CodeIndex(read=lambda p: reads.append(p) or p.read_bytes())  # type: ignore[func-returns-value]
    files = json.loads(json.dumps(first.export_files()))
    loaded: list[int] = []
    second.seed(json.loads(json.dumps(first.export_ids())), lambda: loaded.append(1) or files)  # type: ignore[func-returns-value]
    assert _identity(second, pipeline.check_defn) == want and reads == [] and loaded == []  # type: ignore[arg-type]


def _record_tags() -> list[str]:
    """Every ``@record`` class in kinac's sources, found statically (nothing is imported)."""
    tags = []
    for f in sorted(KINAC_DIR.rglob("*.py")):
        tree = ast.parse(f.read_text())
        mod = ".".join(f.relative_to(KINAC_DIR).with_suffix("").parts)
        mod = mod.removesuffix(".__init__")
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(d, ast.Name) and d.id == "record" for d in node.decorator_list
            ):
                tags.append(f"{mod}.{node.name}")
    return tags


def test_every_record_decodes_in_a_fresh_process() -> None:
    """By construction: a tag names its module, so no list of stage modules can go stale
    (``kinac run --target cuda`` after a build used to warn ``unknown record tag
    'artifacts.gpu.GpuLoweredEntry'``)."""
    tags = _record_tags()
    assert "artifacts.gpu.GpuLoweredEntry" in tags and len(tags) > 30
    code = (
        "import sys, json\n"
        "from kinac.rules import codec\n"
        "tags = json.loads(sys.argv[1])\n"
        "assert 'kinac.artifacts.gpu' not in sys.modules\n"
        "for t in tags:\n"
        "    cls = codec._RECORDS.get(t) or codec._record_class(t)\n"
        "    assert cls is not None, t\n"
        "    v = codec.decode(json.dumps({'$t': t, **{f: None for f in codec.fields_of(cls)}}).encode())\n"
        "    assert codec._tag(type(v)) == t, t\n"
        "print('ok', len(tags))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(tags)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-2000:]


def test_foreign_tags_import_nothing() -> None:
    from kinac.rules.codec import CodecError, decode

    for tag in ("os.system", "subprocess.Popen", "..x", "tests.whatever.Record"):
        with pytest.raises(CodecError, match="unknown record tag"):
            decode(json.dumps({"$t": tag}).encode())


# The engine importing no language package is a layer rule: tests/test_layers.py.
