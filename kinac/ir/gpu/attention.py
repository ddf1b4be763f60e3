"""Fused attention on the GPU: the tile choice per kernel (and, below, the graph pattern).

``TILE_CANDIDATES`` are the tile shapes the kernel is generated and timed with on the device
(``benches/attention.py``); :func:`fixed_tiles` is the choice used when no measurement for a
shape is cached: the fastest candidate measured on the H200 per head dim.
"""

from __future__ import annotations

from kinac.ir.gpu.attention_params import AttnTiles

TILE_CANDIDATES: dict[int, tuple[AttnTiles, ...]] = {
    64: (AttnTiles(64, 64), AttnTiles(128, 64), AttnTiles(128, 32), AttnTiles(64, 128)),
    128: (AttnTiles(64, 64), AttnTiles(128, 64), AttnTiles(128, 32), AttnTiles(64, 32)),
}

FIXED_TILES: dict[int, AttnTiles] = {64: AttnTiles(128, 64), 128: AttnTiles(64, 64)}


def fixed_tiles(head_dim: int) -> AttnTiles:
    """The measured default tile choice for ``head_dim``."""
    return FIXED_TILES[head_dim]
