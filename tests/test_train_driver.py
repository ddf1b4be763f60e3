"""The training driver on the ~1M decoder (``workspaces/decoder``, entry ``decoder_1m``):
the loss falls on the synthetic task within a few steps, steps after the first allocate no
runtime buffer, the Python API and ``kinac train --json`` agree, bad requests are
``kinac: error:`` lines."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from train_support import CACHE, DECODER, ROOT

from kinac.cli import main
from kinac.train import Trainer
from kinac.train.data import batch


def test_loss_falls_and_steps_allocate_nothing() -> None:
    tr = Trainer(DECODER, "decoder_1m", lr=3e-3, seed=0, cache_dir=CACHE)
    assert 0.7e6 < tr.n_weights < 1.3e6
    losses = [r.loss for r in tr.run(8)]
    assert all(math.isfinite(x) for x in losses)
    # from about ln V (uniform over 64 tokens) well towards ln 3 (the strides)
    assert losses[0] > 0.9 * math.log(64)
    assert losses[-1] < 0.6 * losses[0], losses
    assert tr.allocations_per_step[1:] == [0] * 7


def test_cli_json_lines_match_the_python_api(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["train", str(DECODER), "decoder_1m", "--steps", "3", "--json", "--seed", "4",
               "--cache-dir", CACHE])  # fmt: skip
    out = capsys.readouterr().out.splitlines()
    assert rc == 0
    events = [json.loads(line) for line in out]
    assert [e["event"] for e in events] == ["start", "step", "step", "step", "done"]
    assert events[0]["weights"] > 0 and events[0]["tokens_per_step"] == 8 * 32
    steps = events[1:4]
    tr = Trainer(DECODER, "decoder_1m", seed=4, cache_dir=CACHE)
    assert [r.loss for r in tr.run(3)] == [e["loss"] for e in steps]
    assert events[-1]["allocations_after_first"] == 0
    assert all(e["tokens_per_s"] > 0 for e in steps)


def test_cli_text_summary(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["train", str(DECODER), "decoder_1m", "--steps", "2", "--optimizer", "sgd",
               "--lr", "0.05", "--cache-dir", CACHE])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("trained decoder_1m (0.") and "for 2 steps: loss" in out


def test_synthetic_task_is_a_progression_mod_v() -> None:
    tok, tgt = batch(seed=1, step=2, b=4, s=9, vocab=64)
    assert tok.dtype == np.int32 and tok.shape == (4, 9)
    np.testing.assert_array_equal(tok[:, 1:], tgt[:, :-1])
    stride = (tgt - tok) % 64
    assert (stride == stride[:, :1]).all() and set(stride[:, 0]) <= {1, 2, 3}
    again = batch(seed=1, step=2, b=4, s=9, vocab=64)
    np.testing.assert_array_equal(again[0], tok)
    assert not np.array_equal(batch(seed=1, step=3, b=4, s=9, vocab=64)[0], tok)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["train", "DECODER", "nope"], "no entry or defn named `nope`"),
        (["train", "MLP", "mlp"], "entry `mlp` cannot be trained: it needs a parameter `tokens"),
        (["train", "DECODER", "decoder_1m", "--loss-scale", "x"], "--loss-scale takes"),
        (["train", "DECODER", "decoder_1m", "--loss-scale", "8"], "takes no `scale` parameter"),
        (["train", "DECODER", "decoder_1m", "--loss-scale", "dynamic"], "takes no `scale`"),
        (["train", "DECODER", "decoder_1m", "--lr", "-1"], "learning rate must be a positive"),
        (["train", "DECODER", "decoder_1m", "--lr", "nan"], "learning rate must be a positive"),
        (["train", "DECODER", "decoder_1m", "--weight-decay", "-0.1"], "weight decay must"),
        (["train", "DECODER", "decoder_1m_f16", "--loss-scale", "-1"], "a positive number"),
        (["train", "MISSING", "decoder_1m"], "is not a workspace directory"),
    ],
)
def test_bad_requests_are_one_error_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    where = {
        "DECODER": str(DECODER),
        "MLP": str(ROOT / "workspaces" / "mlp"),
        "MISSING": "/nonexistent",
    }
    argv = [where.get(a, a) for a in argv] + ["--steps", "1", "--cache-dir", CACHE]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert message in err and "Traceback" not in err


def test_decoder_loss_and_gradients_match_torch_autograd() -> None:
    """The whole 1M decoder (gather embedding, 4 blocks, cross-entropy by gather) against
    torch autograd in f32: the loss and every weight's gradient."""
    import torch
    from train_support import decoder_loss_torch

    from kinac.api_grad import value_and_grad
    from kinac.train.params import entry_info, init_weights

    info = entry_info(str(DECODER), "decoder_1m", cache_dir=CACHE)
    w = init_weights(info, seed=11)
    tok, tgt = batch(11, 0, *info.batch_shape, info.vocab)  # type: ignore[call-arg]
    vg = value_and_grad(DECODER, "decoder_1m", wrt=list(w), cache_dir=CACHE)
    args = [{"tokens": tok, "targets": tgt}.get(p.name, w.get(p.name)) for p in info.params]
    loss, grads = vg(*args, H=info.dims["H"], KV=info.dims["KV"])
    tw = {k: torch.tensor(v, requires_grad=True) for k, v in w.items()}
    ref = decoder_loss_torch(torch.tensor(tok), torch.tensor(tgt), tw, h=4, kv=2)
    ref.backward()
    worst = 0.0
    assert float(loss) == pytest.approx(float(ref.detach()), rel=1e-5)
    for k, t in tw.items():
        g = t.grad.numpy()  # type: ignore[union-attr]
        err = np.linalg.norm(grads[k] - g) / np.linalg.norm(g)
        assert err < 1e-4, (k, err)
        worst = max(worst, err)  # type: ignore[assignment]
    print(f"worst relative L2 gradient error: {worst:.2e}")
