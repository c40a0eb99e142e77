"""Hybrid sharding (``--dp-shard``: FSDP's HSDP, Megatron's several distributed-optimizer
instances): ZeRO shards over groups of data-parallel ranks, each group a replica whose
gradient shards are all-reduced across the groups once a step."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate import Recompute, TrainingConfig, estimate_training
from gpuarch.estimate.remedies import memory_remedies
from gpuarch.report.launch import megatron_launch
from gpuarch.units import Unit, from_si
from gpuarch.workloads import preset

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
DGX_H100 = CATALOG.system("dgx h100")
LLAMA_8B = preset("llama-3.1-8b").shape
MIXTRAL = preset("mixtral-8x7b").shape


def estimate(shape=LLAMA_8B, **kw):  # type: ignore[no-untyped-def]
    base = dict(gpus=64, seq_len=4096, global_batch=256, micro_batch=1, zero=3,
                recompute=Recompute.FULL)
    return estimate_training(CATALOG, shape, H100, TrainingConfig(**{**base, **kw}),
                             system=DGX_H100)


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_one_group_of_all_ranks_is_plain_sharding(zero: int) -> None:
    """A shard group of all DP x CP ranks is one replica: the same step and memory as
    leaving --dp-shard unset (the replicas' all-reduce over a group of one costs nothing)."""
    plain, whole = estimate(zero=zero), estimate(zero=zero, dp_shard=64)
    assert whole.step_time_s == plain.step_time_s
    assert whole.memory.total == plain.memory.total
    assert whole.parallelism["dp_replicas"] == 1 and plain.parallelism["dp_shard"] is None


def test_sharded_state_divides_by_the_group_not_all_ranks() -> None:
    """ZeRO-3 over groups of 8 of 64 ranks: each GPU holds an eighth of the BF16 weights,
    FP32 gradients and Adam state (2 + 4 + 12 bytes a parameter; Llama 3.1 8B has
    8,030,261,248, its config.json's shapes), not a sixty-fourth."""
    e = estimate(dp_shard=8)
    params = 8_030_261_248
    assert from_si(e.memory.weights, Unit.GIB) == pytest.approx(params * 2 / 8 / 2**30,
                                                                 rel=1e-9)
    assert from_si(e.memory.gradients, Unit.GIB) == pytest.approx(params * 4 / 8 / 2**30,
                                                                  rel=1e-9)
    assert from_si(e.memory.optimizer, Unit.GIB) == pytest.approx(params * 12 / 8 / 2**30,
                                                                  rel=1e-9)
    assert e.parallelism["dp_replicas"] == 8
    # ZeRO-1 shards the optimizer alone over the group
    one = estimate(zero=1, dp_shard=8)
    assert from_si(one.memory.weights, Unit.GIB) == pytest.approx(params * 2 / 2**30,
                                                                  rel=1e-9)
    assert from_si(one.memory.optimizer, Unit.GIB) == pytest.approx(
        params * 12 / 8 / 2**30, rel=1e-9)


@settings(max_examples=20, deadline=None)
@given(zero=st.sampled_from([1, 2, 3]), small=st.sampled_from([1, 2, 4, 8, 16, 32]),
       factor=st.sampled_from([2, 4]), moe=st.booleans())
def test_larger_groups_never_hold_more(zero: int, small: int, factor: int, moe: bool
                                       ) -> None:
    """Memory per GPU never rises as the shard group grows (fewer replicas of the state)."""
    large = small * factor
    if large > 64:
        return
    shape, extra = (MIXTRAL, {"ep": 8}) if moe else (LLAMA_8B, {})
    if moe and 64 // small > 8:  # the replicas must divide the 8 expert-data-parallel ranks
        return
    a = estimate(shape, zero=zero, dp_shard=small, **extra)
    b = estimate(shape, zero=zero, dp_shard=large, **extra)
    assert b.memory.total <= a.memory.total * (1 + 1e-12)


def _dp_seconds(gpus: int, micro_batches: int, dp_shard: int) -> float:
    e = estimate(gpus=gpus, global_batch=gpus * micro_batches, dp_shard=dp_shard)
    return e.time_breakdown.communication_parts["data_parallel"]


def test_zero3_inside_a_node_costs_per_micro_batch_what_one_node_does() -> None:
    """With a node's eight GPUs as the shard group, ZeRO-3's per-micro-batch gathers and
    reduce-scatters stay on NVLink: each further micro-batch adds what it adds to a job on
    one node, and only the replicas' once-a-step all-reduce crosses the network. Fully
    sharded over 64 GPUs, every micro-batch's collectives span eight nodes and each adds
    more."""
    one_node = _dp_seconds(8, 8, 0) - _dp_seconds(8, 4, 0)
    hybrid = _dp_seconds(64, 8, 8) - _dp_seconds(64, 4, 8)
    full = _dp_seconds(64, 8, 0) - _dp_seconds(64, 4, 0)
    assert hybrid == pytest.approx(one_node, rel=1e-9)
    assert full > hybrid
    # the replicas' all-reduce is paid once a step, whatever the micro-batches
    assert _dp_seconds(64, 4, 8) > _dp_seconds(8, 4, 0)


@pytest.mark.parametrize(("kw", "message"), [
    ({"dp_shard": 5}, "--dp-shard: 5 does not divide the 64 data-parallel ranks"),
    ({"dp_shard": -2}, "--dp-shard: expected a whole number of GPUs >= 1, got -2"),
    ({"dp_shard": 8, "zero": 0}, "--dp-shard: hybrid sharding needs a ZeRO stage"),
])
def test_bad_groups_are_refused(kw: dict[str, int], message: str) -> None:
    with pytest.raises(GpuarchError, match=message):
        estimate(**kw)


def test_replicas_must_split_the_expert_data_parallel_ranks() -> None:
    """Mixtral at EP 8 on 64 GPUs has 8 expert-data-parallel ranks: 16 replicas (groups of
    4) cannot split them; 8 replicas can."""
    with pytest.raises(GpuarchError, match=r"16 replicas .* do not divide the 8 expert"):
        estimate(MIXTRAL, ep=8, dp_shard=4)
    assert estimate(MIXTRAL, ep=8, dp_shard=8).parallelism["dp_replicas"] == 8


def test_cli_flag_layout_launch_and_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "64",
            "--system", "dgx h100", "--seq-len", "4096", "--global-batch", "256",
            "--zero", "3", "--recompute", "full", "--dp-shard", "8", "--launch", "megatron"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "ZeRO-3 over groups of 8 (8 replicas, HSDP)" in out
    assert "--num-distributed-optimizer-instances 8" in out
    assert "--outer-dp-sharding-strategy no_shard" in out
    assert main([*argv[:-4], "--dp-shard", "3"]) == 2
    err = capsys.readouterr().err
    assert "--dp-shard: 3 does not divide the 64 data-parallel ranks" in err
    assert "Traceback" not in err


def test_launch_of_the_distributed_optimizer_takes_the_instances_alone() -> None:
    cfg = TrainingConfig(gpus=64, seq_len=4096, global_batch=256, zero=1, dp_shard=16)
    argv = megatron_launch(LLAMA_8B, cfg).argv
    i = argv.index("--num-distributed-optimizer-instances")
    assert argv[i + 1] == "4"
    assert "--outer-dp-sharding-strategy" not in argv
    assert "--use-distributed-optimizer" in argv


def test_memory_remedies_widen_the_group() -> None:
    """Llama 3.1 70B under ZeRO-3 in groups of 2 needs ~600 GiB a GPU; the remedies offer
    wider groups, those that fit first."""
    shape = preset("llama-3.1-70b").shape
    cfg = TrainingConfig(gpus=64, seq_len=4096, global_batch=256, zero=3, dp_shard=2,
                         recompute=Recompute.FULL)
    assert not estimate_training(CATALOG, shape, H100, cfg, system=DGX_H100).fits_in_memory
    remedies = memory_remedies(CATALOG, shape, H100, cfg, system=DGX_H100)
    fitting = [r.change for r in remedies if r.fits]
    assert "--dp-shard 32" in fitting and "--dp-shard 0" in fitting
    assert "--dp-shard 4" not in fitting  # still a sixteenth of 70B's state a GPU


def test_hybrid_fsdp_shards_the_optimizer_over_every_rank() -> None:
    """Megatron-FSDP's Hybrid-FSDP (--outer-optimizer-sharding): weights and gradients over
    the group of 8 as HSDP holds them, the 12 bytes of optimizer state per parameter over
    all 64 ranks; its once-a-step reduce-scatter and gather across the replicas move what
    HSDP's all-reduce does, so the communication is HSDP's, and the optimizer step runs on
    an eighth of the elements."""
    hsdp, hfsdp = estimate(dp_shard=8), estimate(dp_shard=8, outer_optimizer_sharding=True)
    assert hfsdp.memory.weights == hsdp.memory.weights
    assert hfsdp.memory.gradients == hsdp.memory.gradients
    assert hfsdp.memory.optimizer == pytest.approx(estimate().memory.optimizer, rel=1e-12)
    assert hfsdp.time_breakdown.exposed_communication == \
        hsdp.time_breakdown.exposed_communication
    assert hfsdp.step_time_s < hsdp.step_time_s
    assert "optimizer over all: HFSDP" in render_layout(hfsdp)
    cfg = TrainingConfig(gpus=64, seq_len=4096, global_batch=256, zero=3, dp_shard=8,
                         outer_optimizer_sharding=True)
    argv = megatron_launch(LLAMA_8B, cfg).argv
    assert argv[argv.index("--outer-dp-sharding-strategy") + 1] == "optim"
    with pytest.raises(GpuarchError, match=r"--outer-optimizer-sharding: .* needs --dp-shard "
                                           r"and --zero 3, got --dp-shard 8 --zero 2"):
        estimate(zero=2, dp_shard=8, outer_optimizer_sharding=True)


def render_layout(e) -> str:  # type: ignore[no-untyped-def]
    from gpuarch.report.estimate_text import render_training

    return render_training(e)


def test_the_advisor_searches_zero3_inside_each_node() -> None:
    """The training advisor has hybrid ZeRO-3 (and with prefetch) as stages of its own:
    such options shard inside the data-parallel ranks of one node (8 GPUs / TP), label it
    '3/N', and carry the step time estimate train gives their configuration, whose launch
    spells the replicas as distributed-optimizer instances."""
    from gpuarch.advise import TrainingSearch, advise_training, load_prices
    from gpuarch.advise.train import option_config

    search = TrainingSearch(tokens=1e12, max_gpus=256, gpus=("h100",), top=60)
    adv = advise_training(CATALOG, LLAMA_8B, search, load_prices())
    hybrid = [o for o in (*adv.top, *adv.pareto) if o.dp_shard]
    assert hybrid
    for o in hybrid[:4]:
        assert o.zero == 3 and o.dp_shard == 8 // o.tp
        assert o.zero_label.endswith(f"/{o.dp_shard}")
        cfg = option_config(search, o, DGX_H100, LLAMA_8B)
        est = estimate_training(CATALOG, LLAMA_8B, H100, cfg, system=DGX_H100)
        assert o.step_time_s == pytest.approx(est.step_time_s, rel=1e-9)
        assert est.parallelism["dp_replicas"] == cfg.dp * cfg.cp // o.dp_shard
        argv = megatron_launch(LLAMA_8B, cfg).argv
        i = argv.index("--num-distributed-optimizer-instances")
        assert argv[i + 1] == str(cfg.dp_replicas)


def test_the_advisors_hybrid_groups_are_proper_parts_of_the_ranks() -> None:
    """A layout has a hybrid variant only where one node's DP x CP ranks split its DP x CP
    group into two or more groups (and, for a MoE model, the replicas split the
    expert-data-parallel ranks); elsewhere none is costed."""
    import numpy as np

    from gpuarch.advise.train import _hybrid_groups

    layouts = {"gpus": np.array([256, 64, 32, 16, 8]), "tp": np.array([2, 8, 1, 2, 1]),
               "pp": np.array([1, 1, 1, 1, 1]), "cp": np.array([1, 1, 1, 2, 1]),
               "ep": np.array([1, 1, 1, 1, 1])}
    # TP 2: groups of 4 of 128; TP 8 fills the node (one rank each); 32 GPUs at TP 1:
    # groups of 8; TP 2 x CP 2 on 16 GPUs: its 8 DP x CP ranks sit 4 to a node; one node
    # of 8 at TP 1 is one group of all its ranks (plain ZeRO-3)
    assert _hybrid_groups(LLAMA_8B, layouts, 8).tolist() == [4, 0, 8, 4, 0]
    # Mixtral at EP 8 on 16 GPUs at TP 1: groups of 8 leave 2 replicas over 2 expert-data-
    # parallel ranks (a configuration); at EP 16, 1 expert-data-parallel rank for 2 (not)
    moe = {"gpus": np.array([16, 16]), "tp": np.array([1, 1]), "pp": np.array([1, 1]),
           "cp": np.array([1, 1]), "ep": np.array([8, 16])}
    assert _hybrid_groups(MIXTRAL, moe, 8).tolist() == [8, 0]
