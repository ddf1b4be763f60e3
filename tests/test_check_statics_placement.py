"""Placements at the edges: device numbers must be non-negative integers, and a host build
refuses GPU placements with K0803 (it raised a ValueError in lowering)."""

from __future__ import annotations

from pathlib import Path

from cli_support import kinac_process

from kinac.check import DefnRef, specialise
from kinac.check.env import InMemoryEnv

PLACED = """
(defn p [(x : (tensor f32 [N] @cuda(0)))] -> (tensor f32 [N] @cpu) (to-host x))
(defn i [(x : (tensor f32 [N] @cpu))] -> (tensor f32 [N])
  (add x (to-host (iota f32 [N] @cuda(1) :axis 0))))
(defn t [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (to-host (to-device x @cuda(0))))
(defn h [(x : (tensor f32 [N] @cpu))] -> (tensor f32 [N]) (add x 1.0))
"""


def test_host_specialisation_refuses_gpu_placements() -> None:
    env = InMemoryEnv.from_sources({"p.kina": PLACED})
    for name in "pit":
        ref = DefnRef("p.kina", name)
        assert env.checked(ref).diagnostics == ()
        host = specialise(ref, {"N": 3}, {}, env, default_device="cpu")
        assert host.graph is None and [d.code for d in host.diagnostics] == ["K0803"], name
        assert "targets the host" in host.diagnostics[0].message
        gpu = specialise(ref, {"N": 3}, {}, env, default_device="cuda:0")
        assert gpu.graph is not None and gpu.diagnostics == (), name
    assert specialise(DefnRef("p.kina", "h"), {"N": 3}, {}, env).graph is not None


def test_host_build_of_to_device_is_k0803_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "kina.toml").write_text(
        '[workspace]\nname = "td"\n[target]\nkind = "cpu"\n'
        '[[entry]]\nname = "t"\ndefn = "t"\ndims = { N = 4 }\n'
    )
    (tmp_path / "m.kina").write_text(PLACED)
    p = kinac_process("build", str(tmp_path))
    out = p.stdout + p.stderr
    assert p.returncode == 1 and "K0803" in out and "`to-device`" in out, out
    assert "Traceback" not in out and "internal error" not in out


def test_negative_and_non_integer_device_numbers_are_refused() -> None:
    src = (
        "(defn a [(x : (tensor f32 [N] @cuda(-1)))] -> (tensor f32 [N]) (to-host x))\n"
        "(defn b [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (to-host (to-device x @cuda(-2))))\n"
        "(defn c [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n"
        "  (to-host (iota f32 [N] @cuda(-1) :axis 0)))\n"
        "(defn d [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (to-host (full f32 [N] 1.0 @cuda(-1))))\n"
        "(defn e [(x : (tensor f32 [N] @cuda(gpu)))] -> (tensor f32 [N]) (to-host x))\n"
        "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (to-host (to-device x @cuda(y))))\n"
        "(defn g [(x : (tensor f32 [N] @cuda(1)))] -> (tensor f32 [N] @cpu) (to-host x))\n"
    )
    env = InMemoryEnv.from_sources({"p.kina": src})
    for name in "abcd":
        ds = env.checked(DefnRef("p.kina", name)).diagnostics
        assert [(d.code, "negative" in d.message) for d in ds] == [("K0702", True)], name
    for name in "ef":
        ds = env.checked(DefnRef("p.kina", name)).diagnostics
        assert [(d.code, "malformed" in d.message) for d in ds] == [("K0702", True)], name
    assert env.checked(DefnRef("p.kina", "g")).diagnostics == ()
