"""How many vector groups a map thread handles (``kinac.ir.gpu.plan.map_unroll``, issue 14).

Measured on the H200: the 45M block's ``silu(gate) * up`` (4096 x 5632 bf16) ran at 85% of copy
bandwidth with 4 groups a thread (21 blocks a SM) and at 98% with 1 (85 blocks a SM); at
8192 x 8192 4 and 2 groups both reach 98-99%. The plan: more groups a thread only while the
grid keeps 64 blocks a SM."""

from __future__ import annotations

from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.gpu.plan import BLOCK, MAP_BLOCKS_PER_SM, SMS, map_unroll
from kinac.ir.testing import GraphBuilder


def _map_note(shape: tuple[int, int], dt: str) -> tuple[int, str]:
    g = GraphBuilder(f"silu_mul_{dt}_{shape[0]}")
    a, b = g.param("a", dt, shape), g.param("b", dt, shape)
    (step,) = lower_graph_gpu(g.build(g.binary("mul", g.unary("silu", a), b))).steps
    (ln,) = step.launches
    return ln.grid, ln.note


def test_block_map_takes_one_group_a_thread() -> None:
    assert _map_note((4096, 5632), "bf16") == (4096 * 5632 // 8 // BLOCK, "unroll 1")
    assert _map_note((8192, 8192), "bf16") == (8192 * 8192 // 8 // BLOCK // 2, "unroll 2")
    assert _map_note((8192, 8192), "f32") == (8192 * 8192 // 4 // BLOCK // 4, "unroll 4")


def test_unroll_keeps_64_blocks_a_sm() -> None:
    blocks = MAP_BLOCKS_PER_SM * SMS
    t2, t4 = (u * BLOCK * (blocks - 1) + 1 for u in (2, 4))  # the fewest groups for 2 and 4
    assert [map_unroll(g) for g in (1, t2 - 1, t2, t4 - 1, t4)] == [1, 1, 2, 2, 4]
    assert -(-t2 // (2 * BLOCK)) == blocks and -(-t4 // (4 * BLOCK)) == blocks
