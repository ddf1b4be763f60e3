"""Incrementality of checking: ``check_defn`` depends on its own defn and on what it asks the
environment (callee signatures), nothing else. A small verify-then-rerun driver (what the rule
engine does with early cutoff) shows that a body edit re-checks that defn only, a signature
edit re-checks the defn and its callers only, and a user edit never re-checks the prelude."""

from __future__ import annotations

from typing import Any

from check_support import PRELUDE, ws_sources

from kinac.check import DefnRef, check_defn
from kinac.check.env import InMemoryEnv, prelude_text
from kinac.reader.parse import parse_file
from kinac.rules.codec import fingerprint


class _Recording:
    """Forwards to an env and records each question with its answer's fingerprint."""

    def __init__(self, env: InMemoryEnv) -> None:
        self.env, self.budget_ms = env, env.budget_ms
        self.deps: list[tuple[str, tuple[Any, ...], str]] = []

    def lookup(self, file: str, name: str) -> Any:
        r = self.env.lookup(file, name)
        self.deps.append(("lookup", (file, name), fingerprint(r)))
        return r

    def visible(self, file: str) -> tuple[str, ...]:
        r = self.env.visible(file)
        self.deps.append(("visible", (file,), fingerprint(r)))
        return r

    def meshes(self, file: str) -> Any:
        r = self.env.meshes(file)
        self.deps.append(("meshes", (file,), fingerprint(r)))
        return r

    def solve(self, formula: Any) -> Any:
        return self.env.solve(formula)  # a pure function of the formula


class Driver:
    """Memoises check_defn per (file, name) with its recorded dependencies."""

    def __init__(self) -> None:
        self.memo: dict[DefnRef, tuple[str, list[tuple[str, tuple[Any, ...], str]], Any]] = {}
        self.rechecked: list[str] = []

    def check(self, env: InMemoryEnv, ref: DefnRef) -> Any:
        d = env.defn(ref)
        key = fingerprint(d)
        old = self.memo.get(ref)
        if (
            old is not None
            and old[0] == key
            and all(fingerprint(getattr(env, kind)(*args)) == fp for kind, args, fp in old[1])
        ):
            return old[2]
        rec = _Recording(env)
        out = check_defn(ref.file, d, rec)  # type: ignore[arg-type]
        self.memo[ref] = (key, rec.deps, out)
        self.rechecked.append(ref.name)
        return out

    def check_all(self, sources: dict[str, str]) -> list[str]:
        self.rechecked = []
        files = {p: parse_file(p, t) for p, t in sources.items()}
        files[PRELUDE] = parse_file(PRELUDE, prelude_text())
        env = InMemoryEnv(files)
        for p, pf in files.items():
            for d in pf.defns:
                c = self.check(env, DefnRef(p, d.name))
                assert c.ok, c.diagnostics
        return sorted(self.rechecked)


def test_body_and_signature_edits() -> None:
    src = ws_sources("transformer")
    drv = Driver()
    first = drv.check_all(src)
    every = {**src, PRELUDE: prelude_text()}  # the workspace and the prelude: all checked once
    assert first == sorted(d.name for p, t in every.items() for d in parse_file(p, t).defns)
    assert "block" in first and "rms-norm" in first
    assert drv.check_all(src) == []  # nothing changed
    # a comment and whitespace edit: nothing re-checked
    src2 = dict(src)
    src2["ffn.kina"] = src["ffn.kina"].replace("(swiglu", ";; note\n  (swiglu")
    assert drv.check_all(src2) == []
    # a body edit in ffn: only ffn
    src3 = dict(src)
    src3["ffn.kina"] = src["ffn.kina"].replace(
        "(swiglu (rms-norm x wn) wg wu wd)", "(swiglu (rms-norm (mul x 1.0) wn) wg wu wd)"
    )
    assert drv.check_all(src3) == ["ffn"]
    # a body edit in attention: only attention (block calls it by signature)
    src4 = dict(src3)
    src4["attention.kina"] = src["attention.kina"].replace("(rsqrt Dh)", "(recip (sqrt Dh))")
    assert drv.check_all(src4) == ["attention"]
    # a signature edit in ffn (a parameter renamed): ffn and its caller block
    src5 = dict(src4)
    src5["ffn.kina"] = (
        src4["ffn.kina"]
        .replace("(wn : ", "(wnorm : ")
        .replace("(rms-norm (mul x 1.0) wn)", "(rms-norm (mul x 1.0) wnorm)")
    )
    assert drv.check_all(src5) == ["block", "ffn"]


def test_prelude_is_never_rechecked_by_user_edits() -> None:
    src = ws_sources("transformer")
    drv = Driver()
    drv.check_all(src)
    prelude_names = {d.name for d in parse_file(PRELUDE, prelude_text()).defns}
    for edit in ("(defn extra [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (neg x))\n", ""):
        src2 = dict(src)
        src2["block.kina"] = src["block.kina"] + edit
        again = drv.check_all(src2)
        assert not (set(again) & prelude_names)
