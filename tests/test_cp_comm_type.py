"""Context parallelism's three exchanges (Megatron-Core's --cp-comm-type): the ring of
key/value chunks (p2p, largely hidden), the key/value all-gather before the attention core
(all_gather) and the all-to-all of queries, keys, values and output (a2a)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate import training_layers as training_model
from gpuarch.perf.collectives import Collective
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY
from gpuarch.workloads import preset

CATALOG = load_catalog()
H100 = CATALOG.product("h100-sxm5-80gb")
LLAMA_8B = preset("llama-3.1-8b").shape  # 32 query heads, 8 KV heads, head dim 128


def _est(**kw: Any) -> Any:
    base: dict[str, Any] = {"gpus": 8, "seq_len": 8192, "global_batch": 8, "micro_batch": 1,
                            "cp": 2}
    return estimate_training(CATALOG, LLAMA_8B, H100, TrainingConfig(**{**base, **kw}))


def test_a2a_moves_each_gpus_queries_keys_values_and_output(monkeypatch: Any) -> None:
    """Per layer and pass, the all-to-all carries a GPU's own tokens (8,192 / CP 2 = 4,096)
    times its queries and output (2 x 32 heads x 128) and keys and values (2 x 8 x 128) in
    16 bits: 4,096 x (8,192 + 2,048) x 2 bytes, over the CP group's two ranks, none of it
    hidden, in the forward and the backward pass of every layer of every micro-batch."""
    calls: list[tuple[Collective, float, Any]] = []
    real = training_model.nccl_time

    def spy(kind: Collective, size: Any, group: Any, *rest: Any) -> Any:
        calls.append((kind, float(size), group))
        return real(kind, size, group, *rest)

    monkeypatch.setattr(training_model, "nccl_time", spy)
    e = _est(cp_comm_type="a2a")
    swapped = 4096 * (2 * 32 * 128 + 2 * 8 * 128) * 2
    found = [g for kind, size, g in calls
             if kind is Collective.ALL_TO_ALL and size == pytest.approx(swapped)]
    assert found and all(int(g.size) == 2 for g in found)
    one = real(Collective.ALL_TO_ALL, swapped, found[0], DEFAULT_EFFICIENCY)
    micro_batches = e.parallelism["micro_batches"]  # 8 sequences over DP 4: two a step
    assert micro_batches == 2
    assert e.time_breakdown.communication_parts["context_parallel"] == pytest.approx(
        micro_batches * 2 * LLAMA_8B.layers * one, rel=1e-9)
    assert e.parallelism["cp_comm_type"] == "a2a"


def test_all_gather_exposes_what_the_ring_hides() -> None:
    """The same key/value all-gather, all of it waited for instead of the ring's exposed
    share (Efficiency.cp_comm_exposed)."""
    def exchange(**kw: Any) -> float:
        return float(_est(**kw).time_breakdown.communication_parts["context_parallel"])

    ring, gathered = exchange(), exchange(cp_comm_type="all_gather")
    assert ring > 0
    assert gathered == pytest.approx(ring / DEFAULT_EFFICIENCY.cp_comm_exposed)
    assert _est(cp_comm_type="all_gather").parallelism["cp_comm_type"] == "all_gather"


@pytest.mark.parametrize("kind", ["p2p", "all_gather", "a2a"])
def test_without_context_parallelism_the_exchange_costs_nothing(kind: str) -> None:
    e = _est(cp=1, cp_comm_type=kind)
    assert e.time_breakdown.communication_parts["context_parallel"] == 0
    assert e.parallelism["cp_comm_type"] is None
    assert e.step_time_s == _est(cp=1).step_time_s


def test_a2a_and_all_gather_change_communication_and_the_attention_calls() -> None:
    """Besides the exchange, only the attention's rate changes: their calls span the whole
    sequence where the ring's span one GPU's chunk (attention_half_span), so the attention
    runs faster; every other part of the compute is the ring's."""
    ring = _est()
    for kind in ("all_gather", "a2a"):
        other = _est(cp_comm_type=kind)
        parts, ring_parts = other.time_breakdown.compute_parts, ring.time_breakdown.compute_parts
        assert parts["attention"] < ring_parts["attention"]
        for key in ring_parts:
            if key != "attention":
                assert parts[key] == pytest.approx(ring_parts[key]), key
        assert other.memory.total == pytest.approx(ring.memory.total)


def test_a2a_needs_heads_that_divide_over_cp() -> None:
    """Llama-3.1-8B's 8 KV heads do not split over 16 CP ranks; at TP 2 its 4 KV heads a
    rank do not split over CP 8."""
    with pytest.raises(GpuarchError, match=r"--cp-comm-type a2a: the KV heads .* CP 16"):
        _est(gpus=16, global_batch=1, cp=16, cp_comm_type="a2a", gpus_per_node=16)
    with pytest.raises(GpuarchError, match=r"8 / TP 2: 4\) do not divide over CP 8"):
        _est(gpus=16, global_batch=1, tp=2, cp=8, cp_comm_type="a2a", gpus_per_node=16)
    # KV heads replicated where TP exceeds them: one a rank, which CP 2 cannot split
    with pytest.raises(GpuarchError, match=r"KV heads .*8 / TP 16: 1\) do not divide over CP 2"):
        _est(gpus=32, global_batch=1, tp=16, cp=2, cp_comm_type="a2a", gpus_per_node=32)
    # the ring and the all-gather take any split
    assert _est(gpus=16, global_batch=1, cp=16, gpus_per_node=16).step_time_s > 0
    with pytest.raises(GpuarchError, match=r"--cp-comm-type: expected one of p2p, "
                                           r"all_gather, a2a, got 'ulysses'"):
        _est(cp_comm_type="ulysses")


def test_cli_flag(capsys: Any) -> None:
    args = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
            "--cp", "2", "--global-batch", "8", "--micro-batch", "1", "--seq-len", "8192"]
    assert main([*args, "--cp-comm-type", "a2a"]) == 0
    assert "CP2(a2a)" in capsys.readouterr().out
    assert main([*args, "--cp-comm-type", "ring"]) == 2
    err = capsys.readouterr().err
    assert "--cp-comm-type" in err and "'ring'" in err and "Traceback" not in err
