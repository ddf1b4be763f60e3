"""The parameters of one fused attention kernel: its canonical key.

Everything the generated code depends on is here (shapes, strides, scale, dtype, tile sizes),
so the kernel is a pure function of this record (:func:`kinac.ir.gpu.attention_kernel.
attention_llvm_ir`) and a per-kernel query can key on it. Strides are in elements, per
(batch, head, row); the head dim is contiguous. ``group`` query heads share one K/V head
(grouped-query attention: head ``h`` reads K/V head ``h // group``).
"""

from __future__ import annotations

from kinac.rules.codec import record

ATTN_DTYPES = ("bf16", "f16")
ATTN_HEAD_DIMS = (64, 128)
MMA_KINDS = ("sync", "sync_atoms", "wgmma_qk", "wgmma", "wgmma_pipe", "wgmma_ovl")
WGMMA_BOTH = ("wgmma", "wgmma_pipe", "wgmma_ovl")  # wgmma for both products
MASK_DTYPES = {"bf16": ("bfloat", 2), "f16": ("half", 2), "f32": ("float", 4)}


@record
class AttnTiles:
    """A tile choice: ``block_m`` query rows per block (16 per warp), ``block_n`` keys per
    step, ``min_blocks`` resident blocks asked of ptxas (0: no register cap)."""

    block_m: int = 64
    block_n: int = 64
    min_blocks: int = 0


@record
class AttnParams:
    """One fused attention: ``softmax(scale * Q K^T [+ causal mask]) V`` over (batch, head)."""

    dtype: str
    head_dim: int
    batch: int
    heads: int
    kv_heads: int
    sq: int
    sk: int
    causal: bool
    scale: float
    q_strides: tuple[int, int, int]
    k_strides: tuple[int, int, int]
    v_strides: tuple[int, int, int]
    o_strides: tuple[int, int, int]
    block_m: int = 64
    block_n: int = 64
    min_blocks: int = 0
    args: tuple[int, int, int] = (0, 1, 2)  # Q, K, V: which kernel input each one is
    n_inputs: int = 3
    offsets: tuple[int, int, int] = (0, 0, 0)  # Q, K, V: element offset into its input
    # "sync": mma.sync for both products; "wgmma_qk": wgmma for Q K^T; "wgmma": for both
    # (sm_90a); "wgmma_pipe": wgmma for both, the next tile's Q K^T in flight during this
    # tile's softmax (3 stages); "wgmma_ovl" (with mbar): FlashAttention-3's intra-warpgroup
    # overlap, tile j + 1's Q K^T and tile j's P V issued together and tile j + 1's softmax
    # run under both (kinac/ir/gpu/attention_overlap.py); "sync_atoms": mma.sync over the wgmma tile layout (a test)
    mma: str = "sync"
    # the user's additive mask: which input (-1: none), its dtype, (batch, head, row, col)
    # strides in elements (0 where it broadcasts) and element offset
    mask_arg: int = -1
    mask_dtype: str = ""
    mask_strides: tuple[int, int, int, int] = (0, 0, 0, 0)
    mask_offset: int = 0
    # K/V tiles in flight: a ring of ``stages`` shared-memory stages (tile j + stages - 1 loads
    # while j computes)
    stages: int = 2
    # Hopper scheduling switches (autotuner candidates; docs/gpu.md, "Fused attention"):
    # ``pack_p``: all of P packed to 16 bits and pinned before the first P V wgmma, so the
    # wgmmas issue back to back (else ptxas injects a warpgroup.arrive before each: C7519);
    # ``lpt``: blocks ordered longest causal row block first over the whole grid, not per head
    # (the launch's linear block index ranks the query tiles; the grid's shape is unchanged)
    # ``mbar``: per-stage mbarriers instead of the block barrier (wgmma, 3 stages): each
    # thread's cp.async of a tile arrive on the stage's "full" barrier, the consumers wait on
    # it and arrive on its "empty" barrier once their P V is done; a stage is refilled after
    # its "empty" completes. Tile j + 1 loads during step j into the stage of tile j - 2, so
    # the two warpgroups of a 128-row block may drift apart by a step and one's softmax runs
    # under the other's wgmma (no bar.sync in the loop)
    # ``pingpong`` (with mbar, two warpgroups): FA3's ordering by named barriers: warpgroup w
    # issues its Q K^T only after the other issued its own (bar.sync 1 + w / bar.arrive 2 - w,
    # 256 threads), so their softmaxes alternate and each runs under the other's products
    pack_p: bool = False
    lpt: bool = False
    mbar: bool = False
    pingpong: bool = False
    # ``ws`` (with mbar, 128 rows): warp specialisation: one more warpgroup, the producer,
    # issues every K/V cp.async (up to all stages ahead, on the "empty" barriers); the others
    # only compute. 384 threads: 168 registers each at launch, then ``setmaxnreg`` moves them
    # (producer 24, computing warpgroups 240; ptxas allocates each side under its own count)
    ws: bool = False
    # ``lazy``: the online softmax's row max and sum as trees, and the max moved only when it
    # grew by more than 8 (log2 units; FA4): O is then rescaled only when a warp's vote says
    # some row's max moved (kinac/ir/gpu/attention_lean.py)
    lazy: bool = False

    @property
    def warps(self) -> int:
        """The computing warps (16 query rows each)."""
        return self.block_m // 16

    @property
    def threads(self) -> int:
        """Threads per block: the computing warps and, with ``ws``, the producer warpgroup."""
        return 32 * self.warps + (128 if self.ws else 0)

    @property
    def group(self) -> int:
        return self.heads // self.kv_heads

    @property
    def arch(self) -> str:
        """The least architecture the kernel needs (wgmma: sm_90a)."""
        return "sm_90a" if self.mma.startswith("wgmma") else "sm_80"

    @property
    def tiles(self) -> AttnTiles:
        return AttnTiles(self.block_m, self.block_n, self.min_blocks)


def contiguous(batch: int, heads: int, seq: int, head_dim: int) -> tuple[int, int, int]:
    """Strides (batch, head, row) of a contiguous ``[batch, heads, seq, head_dim]`` tensor."""
    return (heads * seq * head_dim, seq * head_dim, head_dim)


def bhsd_params(
    dtype: str, b: int, h: int, kv: int, s: int, d: int, causal: bool = True,
    tiles: AttnTiles | None = None, sk: int | None = None,
) -> AttnParams:  # fmt: skip
    """Parameters for contiguous ``[B, H, S, D]`` Q/O and ``[B, KV, Sk, D]`` K/V."""
    t = tiles or AttnTiles()
    sk = s if sk is None else sk
    return AttnParams(
        dtype, d, b, h, kv, s, sk, causal, d**-0.5,
        contiguous(b, h, s, d), contiguous(b, kv, sk, d), contiguous(b, kv, sk, d),
        contiguous(b, h, s, d), t.block_m, t.block_n, t.min_blocks,
    )  # fmt: skip


def check_params(p: AttnParams) -> str | None:
    """Why the kernel cannot take ``p`` (None when it can)."""
    if p.dtype not in ATTN_DTYPES:
        return f"dtype {p.dtype} (the kernel takes {ATTN_DTYPES})"
    if p.head_dim not in ATTN_HEAD_DIMS:
        return f"head dim {p.head_dim} (the kernel takes {ATTN_HEAD_DIMS})"
    if p.heads % p.kv_heads:
        return f"{p.heads} heads over {p.kv_heads} K/V heads"
    if p.block_m % 16 or p.block_m // 16 not in (2, 4, 8) or p.block_n not in (16, 32, 64, 128):
        return f"tiles {p.block_m}x{p.block_n}"
    if (p.block_n * p.head_dim // 8) % (32 * p.warps) or (p.block_m * p.head_dim // 8) % (
        32 * p.warps
    ):
        return "tile chunks do not divide among the threads"
    strides = (p.q_strides, p.k_strides, p.v_strides, p.o_strides, p.offsets)
    if any(s % 8 or s < 0 for st in strides for s in st):
        return "strides not multiples of 8 elements (16-byte chunks)"
    if p.sq < 1 or p.sk < 1 or p.sq >= 2**31 // 2:
        return "sequence lengths"
    if p.mask_arg >= 0 and p.mask_dtype not in MASK_DTYPES:
        return f"mask dtype {p.mask_dtype}"
    if p.stages not in (2, 3):
        return f"{p.stages} pipeline stages (the kernel takes 2 or 3)"
    if (
        2 * p.head_dim * (p.block_m + 2 * p.stages * p.block_n) + 16 * p.stages * p.mbar
        > 227 * 1024
    ):
        return "shared memory past 227 KiB"
    if p.mma == "wgmma_pipe" and p.stages != 3:
        return "wgmma_pipe needs 3 stages (tile j + 1 is read while j + 2 loads)"
    if p.mma == "wgmma_ovl" and not p.mbar:
        return "wgmma_ovl needs mbar (its tile j + 2 loads into tile j - 1's stage)"
    if p.mbar and (p.mma not in ("wgmma", "wgmma_ovl") or p.stages != 3):
        return "mbar needs wgmma and 3 stages (tile j + 1 loads into tile j - 2's stage)"
    if p.pingpong and (not p.mbar or p.warps != 8):
        return "pingpong needs mbar and two warpgroups (block_m 128)"
    if p.ws and (not p.mbar or p.warps != 8):
        return "ws needs mbar (the producer hands tiles over on the stage barriers), 128 rows"
    if p.pack_p and p.mma not in WGMMA_BOTH:
        return "pack_p needs wgmma for P V"
    if p.mma not in MMA_KINDS or (p.mma.startswith("wgmma") and p.warps % 4):
        return f"mma {p.mma} with {p.warps} warps"
    return None
