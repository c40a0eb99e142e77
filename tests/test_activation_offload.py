"""Fine-grained activation offloading (``--offload-modules``, Megatron-Core's
``offload_modules``): what each module's offloading takes off the GPU, by hand; the size
threshold; Megatron-Core's rules as usage errors; the copies over the host link; and that
offloading never raises memory nor shortens a step."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main
from gpuarch.errors import GpuarchError
from gpuarch.estimate import Recompute, TrainingConfig, estimate_training
from gpuarch.estimate.memory import activation_bytes_per_layer
from gpuarch.perf import Precision
from gpuarch.workloads import preset

CATALOG = load_catalog()
QWEN3_30B = preset("qwen3-30b-a3b").shape
ULTRA = preset("nemotron-3-ultra").shape
LLAMA3_8B = preset("llama-3-8b").shape
TOKENS = 4096


def _bytes(offload: tuple[str, ...], shape=QWEN3_30B, min_elements: float = 0.0,
           recompute: Recompute = Recompute.NONE, modules: tuple[str, ...] = ()
           ) -> float:  # type: ignore[no-untyped-def]
    return activation_bytes_per_layer(shape, 1, TOKENS, 1, False, recompute, 2,
                                      modules=modules, offload=offload,
                                      offload_min_elements=min_elements)


@pytest.mark.parametrize("modules, per_token", [
    # Qwen3-30B-A3B (h 2,048; 32 query and 4 KV heads of 128; 8 of 128 experts of 768,
    # SwiGLU), one 4,096-token sequence, 16-bit, in bytes a token: the norms' inputs (the
    # residual streams) 2 x 2,048 each, the attention norm's output (the QKV projection's
    # input) 4,096, the queries 8,192 with keys and values 2,048, the attention output
    # 8,192, the experts' first input (8 dispatched copies) 8 x 2,048 x 2 = 32,768, their
    # first output 8 x 768 x 2 x 2 = 24,576 and the second's input 8 x 768 x 2 = 12,288
    (("attn_norm",), 4_096),
    (("mlp_norm",), 4_096),
    (("qkv_linear",), 4_096),
    (("core_attn",), 10_240),
    (("core_attn", "attn_proj"), 18_432),
    (("expert_fc1",), 32_768),
    (("moe_act",), 24_576),
    (("expert_fc1", "moe_act"), 57_344),
])
def test_what_each_module_takes_off_the_gpu_by_hand(modules: tuple[str, ...],
                                                    per_token: int) -> None:
    assert _bytes(()) - _bytes(modules) == per_token * TOKENS


def test_the_fused_grouped_mlp_takes_everything_the_experts_keep() -> None:
    """fused_group_mlp: both inputs and the first output, 69,632 bytes a token; with the
    activation recomputed (moe_act) the second input is not kept and so not offloaded."""
    assert _bytes(()) - _bytes(("fused_group_mlp",)) == 69_632 * TOKENS
    selective = dict(recompute=Recompute.SELECTIVE, modules=("moe_act",))
    assert _bytes((), **selective) - _bytes(("fused_group_mlp",), **selective) \
        == 57_344 * TOKENS  # type: ignore[arg-type]


def test_a_tensor_below_the_size_threshold_stays() -> None:
    """The experts' first input is 4,096 x 8 x 2,048 = 67,108,864 elements on this GPU: it
    goes at that threshold and stays one element above it; the first output (4,096 x 8 x
    1,536 = 50,331,648 elements) stays at both."""
    fc1_in = 4096 * 8 * 2048
    assert _bytes(()) - _bytes(("fused_group_mlp",), min_elements=fc1_in) == 32_768 * TOKENS
    assert _bytes(()) - _bytes(("fused_group_mlp",), min_elements=fc1_in + 1) == 0


def test_nemotron_3_ultra_recipes_offload_only_the_expert_outputs() -> None:
    """Megatron Bridge's Ultra recipes offload the fused grouped MLP's tensors of at least
    500M elements (GB300, 8,192 tokens a GPU) or 350M (GB200, TP 2 with sequence
    parallelism: 4,096): only the expert FC1 outputs, 22 x 5,120 a token (923M and 461M
    elements), not the inputs (22 x 2,048: 369M and 185M); a hybrid's mean block over its
    108, of which 48 are expert blocks."""
    def act(tp: int, min_elements: float, offload: tuple[str, ...]) -> float:
        return activation_bytes_per_layer(ULTRA, 1, 8192, tp, tp > 1, Recompute.SELECTIVE,
                                          2, quantized_inputs=True, modules=("moe_act",),
                                          offload=offload, offload_min_elements=min_elements)
    for tp, threshold in ((1, 500e6), (2, 350e6)):
        saved = act(tp, threshold, ()) - act(tp, threshold, ("fused_group_mlp",))
        # FC1 outputs in 16 bits (an FP8 run's activations are; its GEMM inputs 8-bit)
        assert saved == pytest.approx(8192 / tp * 22 * 5120 * 2 * 48 / 108)


def test_mamba_blocks_have_nothing_to_offload() -> None:
    """A hybrid's norm offloading reaches its attention and expert blocks, not its Mamba-2
    blocks: attn_norm takes 12 of Ultra's 108 block inputs, mlp_norm 48."""
    sbh = TOKENS * 8192 * 2
    assert _bytes((), ULTRA) - _bytes(("attn_norm",), ULTRA) == pytest.approx(sbh * 12 / 108)
    assert _bytes((), ULTRA) - _bytes(("mlp_norm",), ULTRA) == pytest.approx(sbh * 48 / 108)


TRAIN = ["estimate", "train", "--model", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "8",
         "--ep", "8", "--seq-len", "4096", "--global-batch", "64", "--micro-batch", "1"]


@pytest.mark.parametrize("extra, message", [
    (["--offload-modules", "expert_fc"], "unknown module 'expert_fc'; expected some of "),
    (["--offload-modules", "expert_fc"], "did you mean 'expert_fc1'"),
    (["--offload-modules", "attn_proj"], "'attn_proj' needs 'core_attn' too"),
    (["--offload-modules", "moe_act", "--offload-layers", "4"], "cannot be combined with "
                                                               "--offload-layers 4"),
    (["--offload-modules", "fused_group_mlp"], "'fused_group_mlp' needs the fused grouped"),
    (["--offload-modules", "expert_fc1", "--expert-launches", "fused-mlp"],
     "offloaded as 'fused_group_mlp'"),
    (["--offload-modules", "fused_group_mlp,moe_act", "--expert-launches", "fused-mlp"],
     "already holds the experts' tensors"),
    (["--offload-modules", "expert_fc1", "--recompute", "selective", "--recompute-modules",
      "moe"], "while the whole expert layer is recomputed"),
    (["--offload-modules", "core_attn", "--offload-min-elements", "-1"],
     "--offload-min-elements: expected an integer >= 0, got -1"),
])
def test_megatron_cores_rules_are_usage_errors(extra: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TRAIN, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_dense_model_has_no_expert_tensors_to_offload() -> None:
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, offload_modules=("moe_act",))
    with pytest.raises(GpuarchError, match="has no expert layers for 'moe_act'"):
        estimate_training(CATALOG, LLAMA3_8B, CATALOG.product("h100"), cfg)


H100_RUN = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, ep=8)


def test_copies_longer_than_a_layer_pass_show_in_the_step() -> None:
    """On an H100 (PCIe Gen5 x16 to its host) a short pass cannot hide the copies of what
    the experts and the attention core keep: the step grows by the exposed copies, which
    the breakdown names (activation_offload), and the layout and JSON say what went."""
    base = estimate_training(CATALOG, QWEN3_30B, CATALOG.product("h100"), H100_RUN)
    modules = ("expert_fc1", "moe_act", "core_attn", "attn_proj")
    off = estimate_training(CATALOG, QWEN3_30B, CATALOG.product("h100"),
                            dataclasses.replace(H100_RUN, offload_modules=modules))
    exposed = off.time_breakdown.communication_parts["activation_offload"]
    assert exposed > 0
    assert off.step_time_s - base.step_time_s == pytest.approx(exposed, rel=1e-6)
    # each held layer-pass keeps what is not offloaded, and one layer-pass's offloaded
    # tensors are in flight
    held = off.assumptions["activations_held"]["layer_passes"]
    per, kept = (activation_bytes_per_layer(QWEN3_30B, 1, 4096, 1, False, Recompute.NONE, 2,
                                            offload=o, offload_min_elements=1024 * 1024)
                 for o in ((), modules))
    assert base.memory.activations == pytest.approx(held * per)
    assert off.memory.activations == pytest.approx(held * kept + (per - kept))
    assert off.parallelism["offload_modules"] == list(modules)
    assert "GB/s per direction" in off.assumptions["activation_offload"]


def test_an_uncatalogued_host_link_hides_the_copies() -> None:
    gb300 = CATALOG.product("gb300")  # its NVLink-C2C rate is not catalogued
    cfg = dataclasses.replace(H100_RUN, offload_modules=("expert_fc1",), gpus_per_node=72)
    est = estimate_training(CATALOG, QWEN3_30B, gb300, cfg)
    assert est.time_breakdown.communication_parts["activation_offload"] == 0
    assert "taken as hidden" in est.assumptions["activation_offload"]


def test_the_layout_line_names_the_offloaded_modules(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main([*TRAIN, "--offload-modules", "expert_fc1,moe_act"]) == 0
    assert "offloaded: expert_fc1,moe_act" in capsys.readouterr().out
    assert main([*TRAIN, "--offload-modules", "core_attn", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["parallelism"]["offload_modules"] == ["core_attn"]
    assert doc["parallelism"]["offload_min_elements"] == 1024 * 1024
    # Megatron-LM's flags for it in the launch command
    assert main([*TRAIN, "--offload-modules", "expert_fc1,moe_act", "--offload-min-elements",
                 "500000000", "--launch", "megatron"]) == 0
    out = capsys.readouterr().out
    assert "--fine-grained-activation-offloading" in out
    assert "--offload-modules expert_fc1 moe_act" in out
    assert "--min-offloaded-tensor-size 500000000" in out


_MODULE_SETS = st.sets(st.sampled_from(["attn_norm", "qkv_linear", "core_attn", "mlp_norm",
                                        "expert_fc1", "moe_act"]), min_size=1)


@settings(max_examples=25, deadline=None)
@given(modules=_MODULE_SETS, min_elements=st.sampled_from([0, 1024 * 1024, 10**8]),
       gpu=st.sampled_from(["h100", "gb200"]))
def test_offloading_never_raises_memory_nor_shortens_the_step(
        modules: set[str], min_elements: int, gpu: str) -> None:
    product = CATALOG.product(gpu)
    base = estimate_training(CATALOG, QWEN3_30B, product, H100_RUN)
    off = estimate_training(CATALOG, QWEN3_30B, product, dataclasses.replace(
        H100_RUN, offload_modules=tuple(sorted(modules)), offload_min_elements=min_elements))
    assert off.memory.activations <= base.memory.activations
    assert off.step_time_s >= base.step_time_s


def test_the_remedies_offer_offloading_the_experts_tensors() -> None:
    """A run that does not fit is offered the experts' offloading, and under the fused
    grouped MLP the fused module's (Qwen3-30B-A3B on one GB200 at four 8K sequences)."""
    from gpuarch.estimate.remedies import memory_remedies
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=64, micro_batch=8, ep=8,
                         precision=Precision.FP8, gpus_per_node=72)
    gb200 = CATALOG.product("gb200")
    assert not estimate_training(CATALOG, QWEN3_30B, gb200, cfg).fits_in_memory
    changes = [r.change for r in memory_remedies(CATALOG, QWEN3_30B, gb200, cfg, most=20)]
    assert "--offload-modules expert_fc1,moe_act" in changes
    fused = dataclasses.replace(cfg, expert_launches="fused-mlp")
    changes = [r.change for r in memory_remedies(CATALOG, QWEN3_30B, gb200, fused, most=20)]
    assert "--offload-modules fused_group_mlp" in changes


def test_the_advisor_searches_with_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Qwen3-235B-A22B on at most 256 GB200 (NVLink-C2C to the host, catalogued): the search
    tries each variant that recomputes nothing with and without the experts' tensors
    offloaded, and its best plan
    offloads them, at a micro-batch that does not fit without (4 sequences: 0.67 days on
    1e11 tokens, where the best plan without offloading, at 2, takes 0.75); naming the
    modules gives every option them. Each row is
    what the scalar estimate of its configuration gives (the copies included). On GB300,
    whose host link is not catalogued (the copies would go unpriced), nothing is offloaded
    unless asked for."""
    from gpuarch.advise import TrainingSearch, advise_training, load_prices
    from gpuarch.advise.train import option_config

    path = tmp_path / "prices.toml"
    path.write_text('[[price]]\ngpu = "gb200"\nusd_per_gpu_hour = 6.0\n')
    prices = load_prices(path)
    gb200 = CATALOG.product("gb200")
    system = CATALOG.system_for(gb200)
    qwen = preset("qwen3-235b-a22b").shape
    base = TrainingSearch(tokens=1e11, max_gpus=256, gpus=("gb200",), top=40)
    advice = advise_training(CATALOG, qwen, base, prices)
    best = advice.top[0]
    assert best.offload_modules == ("expert_fc1", "moe_act")
    assert best.recompute_label == best.recompute + "+off:moe"
    # the best plan's micro-batch does not fit without the offloading
    plain = dataclasses.replace(option_config(base, best, system), offload_modules=())
    assert not estimate_training(CATALOG, qwen, gb200, plain, system=system).fits_in_memory
    for o in advice.top:
        cfg = option_config(base, o, system)
        assert cfg.offload_modules == o.offload_modules
        est = estimate_training(CATALOG, qwen, gb200, cfg, system=system)
        assert est.fits_in_memory
        assert est.step_time_s == pytest.approx(o.step_time_s, rel=1e-9)
    named = dataclasses.replace(base, offload_modules=("core_attn",), top=5)
    named_advice = advise_training(CATALOG, qwen, named, prices)
    assert named_advice.assumptions["offload_modules"] == ["core_attn"]
    assert all(o.offload_modules == ("core_attn",) for o in named_advice.top)
    gb300 = dataclasses.replace(base, gpus=("gb300",), top=10)
    assert not any(o.offload_modules for o in advise_training(CATALOG, qwen, gb300,
                                                             prices).top)
    with pytest.raises(GpuarchError, match="has no expert layers for 'moe_act'"):
        advise_training(CATALOG, LLAMA3_8B, dataclasses.replace(
            base, offload_modules=("moe_act",)), prices)


def test_the_reports_training_table_says_what_is_offloaded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The HTML report's training tables show an option's recomputation with '+off:moe'
    where the experts' tensors go to host memory, as the text table does."""
    from gpuarch.advise import TrainingSearch, advise_training, load_prices
    from gpuarch.report.html import _training

    path = tmp_path / "prices.toml"
    path.write_text('[[price]]\ngpu = "gb200"\nusd_per_gpu_hour = 6.0\n')
    search = TrainingSearch(tokens=1e11, max_gpus=256, gpus=("gb200",), top=3)
    advice = advise_training(CATALOG, preset("qwen3-235b-a22b").shape, search,
                             load_prices(path))
    assert advice.per_gpu[0].offload_modules
    html = _training(advice)
    assert "none+off:moe" in html and "moe = the routed experts&#x27; (expert_fc1,moe_act)" in html
    # a table without offloading carries no key for it
    from gpuarch.workloads import preset as _preset
    plain = advise_training(CATALOG, _preset("llama-3.1-8b").shape, dataclasses.replace(
        search, max_gpus=64), load_prices(path))
    assert not any(o.offload_modules for o in plain.per_gpu)
    assert "+off:" not in _training(plain)


def test_the_qwen3_235b_gb200_mxfp8_run_needs_its_offloading() -> None:
    """The Megatron-MoE ModelZoo (the Megatron-Core MoE report's authors' recipes) prints
    Qwen3-235B-A22B on 256 GB200 in MXFP8 at TP 1, PP 4 x 6 virtual stages, EP 64, MBS 3
    with "activation offloading required" and runs it with --offload-modules expert_fc1
    moe_act (best_practice/qwen3/readme.md at yanring/Megatron-MoE-ModelZoo 020b8136). The
    model agrees on both sides: the published layout does not fit without the offloading
    and fits with it, the copies hidden behind the layers on NVLink-C2C."""
    from gpuarch.estimate.training import DEFAULT_EFFICIENCY
    from gpuarch.validation.training import estimate_point, load_training_points

    point = next(p for p in load_training_points()
                 if p.id == "mcore-moe-gb200-qwen3-235b-a22b-mxfp8")
    run = estimate_point(CATALOG, point, DEFAULT_EFFICIENCY)
    assert run.config.offload_modules == ("expert_fc1", "moe_act")
    assert run.estimate.fits_in_memory
    assert run.estimate.time_breakdown.communication_parts["activation_offload"] == 0.0
    raw = {k: v for k, v in point.raw.items() if k != "offload_modules"}
    without = estimate_point(CATALOG, dataclasses.replace(point, raw=raw),
                             DEFAULT_EFFICIENCY).estimate
    assert not without.fits_in_memory
    # what goes: 0.94 GiB a layer-pass (8 dispatched MXFP8 copies of 3 x 4,096 tokens at
    # 4,096 wide, and their BF16 FC1 outputs, 2 x 1,536 wide), 108 layer-passes held on the
    # first rank (27 chunks of 4 layers in the interleaved warm-up) less one layer-pass's
    # tensors in flight
    freed = without.memory.activations - run.estimate.memory.activations
    per_pass = 8 * 3 * 4096 * (4096 * 1 + 2 * 1536 * 2)
    assert freed == pytest.approx(107 * per_pass, rel=1e-9)


@pytest.mark.parametrize("modules, tag", [
    (("expert_fc1", "moe_act"), "moe"), (("moe_act", "expert_fc1"), "moe"),
    (("fused_group_mlp",), "moe"), (("core_attn", "attn_proj"), "attn"),
    (("expert_fc1", "moe_act", "core_attn", "attn_proj"), "moe,attn"),
    # anything else by name, in the modules' own order
    (("core_attn",), "core_attn"), (("moe_act", "attn_norm"), "attn_norm,moe_act"),
    (("expert_fc1", "moe_act", "core_attn"), "core_attn,expert_fc1,moe_act"),
])
def test_the_advisors_short_names_for_what_is_offloaded(modules: tuple[str, ...],
                                                        tag: str) -> None:
    from gpuarch.estimate.activation_offload import offload_tag
    assert offload_tag(modules) == tag


def test_the_advisor_offloads_a_dense_models_attention_where_it_pays(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Llama 3.1 70B at 32K tokens on up to 256 H100: the variants that recompute nothing
    are also searched with the attention core's tensors offloaded (core_attn, attn_proj),
    and the best plan takes them, at TP 4 where without them it needs TP 8 (13.25 s a step
    against 13.85: the copies over PCIe priced). Where offloading changes none of time,
    cost and energy (copies hidden, the same layout) the plan that offloads nothing is kept:
    Llama 3.1 8B at 4K on up to 64 GB200 offloads nothing. A hybrid's few attention blocks
    are not offloaded."""
    from gpuarch.advise import TrainingSearch, advise_training, load_prices
    from gpuarch.advise.train import option_config
    from gpuarch.estimate.activation_offload import ATTENTION_MODULES

    path = tmp_path / "prices.toml"
    path.write_text('[[price]]\ngpu = "h100"\nusd_per_gpu_hour = 3.0\n'
                    '[[price]]\ngpu = "gb200"\nusd_per_gpu_hour = 6.0\n')
    prices = load_prices(path)
    h100 = CATALOG.product("h100")
    system = CATALOG.system_for(h100)
    llama70 = preset("llama-3.1-70b").shape
    search = TrainingSearch(tokens=1e11, max_gpus=256, gpus=("h100",), top=20,
                            seq_len=32768)
    advice = advise_training(CATALOG, llama70, search, prices)
    best = advice.top[0]
    assert best.offload_modules == ATTENTION_MODULES and best.tp == 4
    assert best.recompute_label == "none+off:attn"
    assert best.step_time_s == pytest.approx(13.25, rel=0.01)
    # the fastest plan that offloads nothing is slower
    plain_best = min(o.step_time_s for o in advice.top if not o.offload_modules)
    assert plain_best == pytest.approx(13.85, rel=0.01)
    plain = dataclasses.replace(option_config(search, best, system), offload_modules=())
    assert not estimate_training(CATALOG, llama70, h100, plain, system=system).fits_in_memory
    for o in advice.top:
        cfg = option_config(search, o, system)
        est = estimate_training(CATALOG, llama70, h100, cfg, system=system)
        assert est.fits_in_memory
        assert est.step_time_s == pytest.approx(o.step_time_s, rel=1e-9)
    small = TrainingSearch(tokens=1e10, max_gpus=64, gpus=("gb200",), top=5)
    assert not any(o.offload_modules
                   for o in advise_training(CATALOG, LLAMA3_8B, small, prices).top)
    nano = preset("nemotron-3-nano-30b-a3b").shape
    hybrid = TrainingSearch(tokens=1e10, max_gpus=16, gpus=("gb200",), top=40)
    assert all(not set(ATTENTION_MODULES) & set(o.offload_modules)
               for o in advise_training(CATALOG, nano, hybrid, prices).top)


def test_a_long_context_moe_plan_offloads_both_the_experts_and_attention(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Qwen3-30B-A3B at 32K tokens on up to 64 GB200: the best plan offloads the experts'
    and the attention core's tensors together (the search's third variant for a
    mixture-of-experts model), and is what the scalar estimate of its configuration gives."""
    from gpuarch.advise import TrainingSearch, advise_training, load_prices
    from gpuarch.advise.train import option_config

    path = tmp_path / "prices.toml"
    path.write_text('[[price]]\ngpu = "gb200"\nusd_per_gpu_hour = 6.0\n')
    gb200 = CATALOG.product("gb200")
    system = CATALOG.system_for(gb200)
    search = TrainingSearch(tokens=1e10, max_gpus=64, gpus=("gb200",), top=3, seq_len=32768)
    best = advise_training(CATALOG, QWEN3_30B, search, load_prices(path)).top[0]
    assert best.offload_modules == ("expert_fc1", "moe_act", "core_attn", "attn_proj")
    assert best.recompute_label == "none+off:moe,attn"
    est = estimate_training(CATALOG, QWEN3_30B, gb200, option_config(search, best, system),
                            system=system)
    assert est.step_time_s == pytest.approx(best.step_time_s, rel=1e-9)
