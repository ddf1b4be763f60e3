"""Specialisation to concrete graphs: the MLP, the transformer block and the prelude, checked
numerically against PyTorch references through a numpy interpreter of the graph."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from check_support import PRELUDE, Workspace, run_graph, ws_sources

from kinac.check import DefnRef, specialise
from kinac.rules.codec import decode, encode, fingerprint

rng = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32) * 0.5


def _structure(g) -> None:
    n_params = len(g.params)
    assert [n.op for n in g.nodes[:n_params]] == ["param"] * n_params
    for i, n in enumerate(g.nodes):
        assert all(a < i for a in n.args)
        assert list(n.attrs) == sorted(n.attrs)
        ax = n.attr("axis")
        assert ax is None or 0 <= ax
    assert decode(encode(g)) == g


def test_mlp_graph_matches_torch() -> None:
    ws = Workspace(ws_sources("mlp"))
    dims = {"B": 2, "S": 3, "D": 8, "F": 16}
    sp = specialise(DefnRef("mlp.kina", "mlp"), dims, {}, ws.env)
    assert sp.diagnostics == ()
    g = sp.graph
    _structure(g)
    assert [n.op for n in g.nodes[5:]] == ["matmul", "add", "gelu", "matmul", "add"]  # type: ignore[union-attr]
    x, w1, b1, w2, b2 = rand(2, 3, 8), rand(8, 16), rand(16), rand(16, 8), rand(8)
    got = run_graph(g, [x, w1, b1, w2, b2])  # type: ignore[arg-type]
    t = [torch.tensor(a) for a in (x, w1, b1, w2, b2)]
    ref = F.gelu(t[0] @ t[1] + t[2]) @ t[3] + t[4]
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-4, atol=1e-5)


def _torch_block(x, wn1, wq, wk, wv, wo, wn2, wg, wu, wd, H, KV):
    B, S, D = x.shape
    Dh = D // H

    def rms(v, w):
        return v / torch.sqrt((v * v).mean(-1, keepdim=True) + 1e-6) * w

    h = rms(x, wn1)
    q = (h @ wq).reshape(B, S, H, Dh).transpose(1, 2)
    k = (h @ wk).reshape(B, S, KV, Dh).transpose(1, 2).repeat_interleave(H // KV, dim=1)
    v = (h @ wv).reshape(B, S, KV, Dh).transpose(1, 2).repeat_interleave(H // KV, dim=1)
    mask = torch.triu(torch.full((S, S), float("-inf")), diagonal=1)
    s = q @ k.transpose(-1, -2) / Dh**0.5 + mask
    o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, S, D) @ wo
    h1 = x + o
    n2 = rms(h1, wn2)
    return h1 + (F.silu(n2 @ wg) * (n2 @ wu)) @ wd


def test_block_graph_matches_torch() -> None:
    ws = Workspace(ws_sources("transformer"))
    dims = {"H": 4, "KV": 2, "B": 2, "S": 8, "D": 32, "F": 48}
    sp = specialise(DefnRef("block.kina", "block"), dims, {"T": "f32"}, ws.env)
    assert sp.diagnostics == ()
    assert dict(sp.dims)["Dh"] == 8 and dict(sp.dims)["G"] == 2
    g = sp.graph
    _structure(g)
    ops = [n.op for n in g.nodes]  # type: ignore[union-attr]
    assert ops.count("repeat_interleave") == 2 and ops.count("softmax") == 1
    assert "cast" not in ops  # f32 -> f32 casts vanish
    D, F_, KVDh = 32, 48, 16
    args = [
        rand(2, 8, D),
        rand(D),
        rand(D, D),
        rand(D, KVDh),
        rand(D, KVDh),
        rand(D, D),
        rand(D),
        rand(D, F_),
        rand(D, F_),
        rand(F_, D),
    ]
    got = run_graph(g, args)  # type: ignore[arg-type]
    ref = _torch_block(*[torch.tensor(a) for a in args], H=4, KV=2)  # type: ignore[misc]
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-4, atol=1e-4)


def test_block_graph_bf16_and_fingerprint_stable() -> None:
    ws = Workspace(ws_sources("transformer"))
    dims = {"H": 4, "KV": 2, "B": 2, "S": 8, "D": 32, "F": 48}
    a = specialise(DefnRef("block.kina", "block"), dims, {"T": "bf16"}, ws.env).graph
    b = specialise(DefnRef("block.kina", "block"), dims, {"T": "bf16"}, ws.env).graph
    assert a is not None and fingerprint(a) == fingerprint(b)
    dts = {n.type.dtype for n in a.nodes}
    assert dts == {"bf16", "i32", "bool", "f32"}  # the mask is built in f32, then cast
    assert sum(1 for n in a.nodes if n.op == "cast") == 1


@pytest.mark.parametrize("group", [(), (3,), (2, 3)])
def test_prelude_norms_with_groups(group: tuple[int, ...]) -> None:
    ws = Workspace({})
    D = 8
    for name, eps, nargs in (("rms-norm", 1e-6, 2), ("layer-norm", 1e-5, 3)):
        ref = DefnRef(PRELUDE, name)
        g = ws.env.checked(ref).sig.groups[0]
        sp = specialise(ref, {"D": D, g: group}, {"T": "f32"}, ws.env)
        assert sp.diagnostics == (), sp.diagnostics
        x = rand(*group, D)
        ws_ = [rand(D) for _ in range(nargs - 1)]
        got = run_graph(sp.graph, [x, *ws_])  # type: ignore[arg-type]
        tx = torch.tensor(x)
        if name == "rms-norm":
            ref = tx / torch.sqrt((tx * tx).mean(-1, keepdim=True) + eps) * torch.tensor(ws_[0])  # type: ignore[assignment]
        else:
            ref = F.layer_norm(tx, (D,), torch.tensor(ws_[0]), torch.tensor(ws_[1]), eps)  # type: ignore[assignment]
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-4, atol=1e-5)  # type: ignore[attr-defined]


def test_prelude_rope_swiglu_mask() -> None:
    ws = Workspace({})
    g = ws.env.checked(DefnRef(PRELUDE, "rope")).sig.groups[0]
    sp = specialise(DefnRef(PRELUDE, "rope"), {"S": 4, "E": 3, g: (2,)}, {"T": "f64"}, ws.env)
    assert sp.diagnostics == ()
    x, c, s = (rng.standard_normal(sh) for sh in ((2, 4, 6), (4, 6), (4, 6)))
    got = run_graph(sp.graph, [x, c, s])  # type: ignore[arg-type]
    rot = np.concatenate([-x[..., 3:], x[..., :3]], axis=-1)
    np.testing.assert_allclose(got, x * c + rot * s)
    sp = specialise(DefnRef(PRELUDE, "causal-mask"), {"S": 5}, {}, ws.env)
    m = run_graph(sp.graph, [])  # type: ignore[arg-type]
    assert np.array_equal(np.isinf(m), np.triu(np.ones((5, 5), bool), 1)) and m[2, 1] == 0
    g = ws.env.checked(DefnRef(PRELUDE, "swiglu")).sig.groups[0]
    sp = specialise(DefnRef(PRELUDE, "swiglu"), {"D": 4, "F": 6, g: ()}, {"T": "f32"}, ws.env)
    assert sp.diagnostics == ()
    ops = [n.op for n in sp.graph.nodes]  # type: ignore[union-attr]
    assert ops.count("reshape") == 6  # a rank-1 x goes through [1 K] for each matmul
    x, wg, wu, wd = rand(4), rand(4, 6), rand(4, 6), rand(6, 4)
    got = run_graph(sp.graph, [x, wg, wu, wd])  # type: ignore[arg-type]
    tx = [torch.tensor(a) for a in (x, wg, wu, wd)]
    ref = (F.silu(tx[0] @ tx[1]) * (tx[0] @ tx[2])) @ tx[3]
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-4, atol=1e-5)


def test_specialise_reports_bad_dims() -> None:
    ws = Workspace(ws_sources("transformer"))
    ref = DefnRef("block.kina", "block")
    sp = specialise(ref, {"H": 4, "KV": 3, "B": 2, "S": 8, "D": 32, "F": 48}, {"T": "f32"}, ws.env)
    assert sp.graph is None and sp.diagnostics[0].code == "K0802"
    sp = specialise(ref, {"H": 4, "KV": 2, "B": 2, "S": 8, "D": 32}, {"T": "f32"}, ws.env)
    assert sp.graph is None and "`F`" in sp.diagnostics[0].message
    sp = specialise(ref, {"H": 4, "KV": 2, "B": 2, "S": 8, "D": 32, "F": 4}, {"T": "i32"}, ws.env)
    assert sp.graph is None and sp.diagnostics[0].code == "K0802"
