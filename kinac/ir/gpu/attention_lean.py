"""The lazy online softmax of the Hopper attention kernel (``AttnParams.lazy``, issue 14).

Read off the SASS of the H200's kernels (``nvdisasm`` of ``ptxas -arch=sm_90a``): a key tile's
softmax is, per thread at 128x128, a serial chain of 33 ``FMNMX`` per row before the first
``MUFU.EX2``, 66 ``MUFU.EX2``, 64 ``FFMA``, a serial chain of 32 ``FADD`` per row and 64
``FMUL`` rescaling ``O``. In the overlapped kernel (``wgmma_ovl``) the rescale sits between
the P V wait and the next step's issue, on the path the tensor cores wait for.

``lazy``: the row max and the row sum are pairwise trees (depth 5 instead of chains of 32),
and the running max moves only when a row's tile max exceeds it by more than
:data:`LAZY_LOG2` (in log2 units of the scaled scores; FlashAttention-4's conditional
rescale): P then stays at most ``2^8`` (exact in bf16/f16 operands, f32 sums), and ``O`` is
rescaled only when some row of the warp moved its max (``vote.any``: warp-uniform, so no
divergence), which after the first tiles of a row is rare. The final ``O / l`` is exact
whatever max was used.

Measured on the H200 (2026-12-02 00:5x UTC, causal GQA d128, same run as SDPA): with
``wgmma_ovl 128x128 s3 mbar pingpong ws lpt`` 0.505 ms against 0.568 at bf16 B4 S4096 (11%),
1.954 against 2.104 at S8192; on the plain mbar kernel (rescale before P V) it was 8% slower
(0.608 against 0.561), so it is offered with ``wgmma_ovl`` only. Also measured and dropped:
issuing the next tile's ``cp.async`` after the step's Q K^T (under the wgmmas) instead of
before the "full" wait: 3-4% slower at every shape (0.579 against 0.561 ms at S4096).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kinac.ir.gpu.attention_kernel import AttnEmitter, StraightLineIr

# the running max moves only past this growth (log2 units): P <= 2^LAZY_LOG2
LAZY_LOG2 = "8.0"
NEG_INF = "0xFFF0000000000000"


def tree(xs: list[str], op: Callable[[str, str], str]) -> str:
    """``op`` over ``xs`` as a balanced pairwise tree (independent operations per level)."""
    while len(xs) > 1:
        nxt = [op(xs[i], xs[i + 1]) for i in range(0, len(xs) - 1, 2)]
        xs = nxt + ([xs[-1]] if len(xs) % 2 else [])
    return xs[0]


def neg_scaled_max_and_alpha(f: StraightLineIr, mn: str, m_old: str, c: str) -> tuple[str, str]:
    """The tail of an online-softmax step, shared by the plain and the lazy softmax: the row's
    negated scaled max ``-(mn * c)`` (0 while every key of the row so far was masked, ``mn``
    -inf: else each masked score's ``fma`` would be -inf + inf, NaN) and the factor ``alpha = exp2(m_old * c - mn * c)`` that
    rescales what was accumulated under the old max ``m_old`` (one ``fma``: the difference is
    not rounded before the ``ex2``)."""
    isinf = f.v(f"fcmp oeq float {mn}, {NEG_INF}")
    ms = f.v(f"fmul float {mn}, {c}")
    ms = f.v(f"select i1 {isinf}, float 0.0, float {ms}")
    nms = f.v(f"fneg float {ms}")
    ao = f.v(f"call float @llvm.fma.f32(float {m_old}, float {c}, float {nms})")
    return nms, f.v(f"call float @llvm.nvvm.ex2.approx.ftz.f32(float {ao})")


def lazy_online(e: AttnEmitter, s: list[list[str]], c: str) -> tuple[list[list[str]], list[str]]:
    """The online softmax of one key tile's (masked) scores ``s`` with ``c`` the scale times
    log2 e: running max and sum stored; returns (P, each row's factor for O, exactly 1.0 where
    the row's max did not move)."""
    f = e.f
    nn = len(s)
    m_old = e.load_state("mrow", 2)
    l_old = e.load_state("lrow", 2)
    alphas, m_new, l_new = [], [], []
    pv = [[""] * 4 for _ in range(nn)]

    def mx2(a: str, b: str) -> str:
        return f.v(f"call float @llvm.maxnum.f32(float {a}, float {b})")

    def add2(a: str, b: str) -> str:
        return f.v(f"fadd float {a}, {b}")

    for hr in range(2):
        idx = [(nt, x) for nt in range(nn) for x in (2 * hr, 2 * hr + 1)]
        mx = e.shfl_max(tree([s[nt][x] for nt, x in idx], mx2))
        grow = f.v(f"fmul float {f.v(f'fsub float {mx}, {m_old[hr]}')}, {c}")
        need = f.v(f"fcmp ogt float {grow}, {LAZY_LOG2}")  # both -inf: NaN, false
        mn = f.v(f"select i1 {need}, float {mx}, float {m_old[hr]}")
        m_new.append(mn)
        nms, a = neg_scaled_max_and_alpha(f, mn, m_old[hr], c)
        alpha = f.v(f"select i1 {need}, float {a}, float 1.0")
        alphas.append(alpha)
        for nt, x in idx:
            y = f.v(f"call float @llvm.fma.f32(float {s[nt][x]}, float {c}, float {nms})")
            pv[nt][x] = f.v(f"call float @llvm.nvvm.ex2.approx.ftz.f32(float {y})")
        acc = tree([pv[nt][x] for nt, x in idx], add2)
        l_new.append(f.v(f"fadd float {f.v(f'fmul float {l_old[hr]}, {alpha}')}, {acc}"))
    e.store_state("mrow", m_new)
    e.store_state("lrow", l_new)
    return pv, alphas


def rescale_if_moved(e: AttnEmitter, o: list[str], alphas: list[str]) -> None:
    """Store ``O`` (``o``, as loaded from the state) times its row factors only when some
    thread of the warp has a factor other than 1 (a warp-uniform branch)."""
    f = e.f
    c0 = f.v(f"fcmp une float {alphas[0]}, 1.0")
    c1 = f.v(f"fcmp une float {alphas[1]}, 1.0")
    moved = f.v(f"zext i1 {f.v(f'or i1 {c0}, {c1}')} to i32")
    anyv = f.v(f"call i32 @{e.name}_vote_any(i32 {moved})")
    go = f.v(f"icmp ne i32 {anyv}, 0")
    lab = f"rs{f.n}"
    f.do(f"br i1 {go}, label %{lab}, label %{lab}_c")
    f.label(lab)
    e.store_state("oacc", e.rescale(o, alphas))
    f.do(f"br label %{lab}_c")
    f.label(f"{lab}_c")


def vote_helper(kname: str) -> str:
    """``@<kname>_vote_any(i32) -> i32``: whether any lane of the warp passed non-zero (one
    function, so the CPU emulation replaces it by its own warp collective)."""
    return (
        f"define internal i32 @{kname}_vote_any(i32 %x) alwaysinline {{\n"
        "  %b = icmp ne i32 %x, 0\n"
        "  %r = call i1 @llvm.nvvm.vote.any.sync(i32 -1, i1 %b)\n"
        "  %z = zext i1 %r to i32\n"
        "  ret i32 %z\n}\n"
    )
