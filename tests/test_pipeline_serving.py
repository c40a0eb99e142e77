"""Serving with pipeline stages: in-flight batching keeps one micro-batch per stage, so the
stages work at once (TensorRT-LLM's in-flight batching model: micro-batches = pipeline size,
max_batch_size requests each), and a static batch is split the same way. And the
peak an FP4 GEMM runs at on a GPU that publishes its FP4 rate with sparsity only."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.catalog.peaks import PeakKey
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.perf.quant import QuantFormat, QuantScheme, gemm_peak
from gpuarch.workloads import preset

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
LLAMA_8B = preset("llama-3.1-8b").shape
FP8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
FP4 = QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.FP8)


def _est(**kw):  # type: ignore[no-untyped-def]
    base = {"input_len": 1024, "output_len": 256, "quant": FP8, "executor": "cpp",
            "batching": Batching.CONTINUOUS}
    return estimate_inference(CATALOG, LLAMA_8B, H100, InferenceConfig(**{**base, **kw}))


def test_two_stages_serve_about_twice_one_gpu_at_twice_the_sequences() -> None:
    """Two pipeline stages holding 512 sequences run two micro-batches of 256, each taking
    what one GPU takes for 256 sequences plus the stage-to-stage sends: close to twice one
    GPU's throughput, never more. Before micro-batches were modelled the stages ran one
    after the other and two GPUs served no more than one."""
    one = _est(batch=256, gpus=1)
    two = _est(batch=512, gpus=2, pp=2)
    ratio = two.output_tokens_per_s / one.output_tokens_per_s
    assert 1.8 < ratio <= 2.0
    assert two.as_json()["assumptions"]["pipeline_micro_batches"] == 2
    assert two.tpot_s == pytest.approx(one.tpot_s, rel=0.1)


def test_a_static_batch_is_split_the_same_way() -> None:
    """A static batch is split into one micro-batch per stage too (TensorRT-LLM's GptSession
    does so): two stages take a token round of one half-batch through every stage, so they
    serve more than one GPU with the whole batch and at most twice as much; the first token
    waits for the second micro-batch's pass, 1.5 half-batch passes."""
    kw = {"batch": 256, "batching": Batching.STATIC}
    one = _est(**kw, gpus=1)
    two = _est(**kw, gpus=2, pp=2)
    half = _est(batch=128, batching=Batching.STATIC, gpus=1)
    assert two.as_json()["assumptions"]["pipeline_micro_batches"] == 2
    assert one.output_tokens_per_s < two.output_tokens_per_s <= 2 * one.output_tokens_per_s
    assert two.ttft_s == pytest.approx(1.5 * half.ttft_s, rel=0.05)


def test_max_batch_size_bounds_each_micro_batch() -> None:
    """The engine's cap applies per micro-batch: two stages at max_batch_size 100 hold 200
    sequences (memory allowing, as here), one GPU 100."""
    assert _est(batch=1000, gpus=2, pp=2, max_batch_size=100).batch == 200
    assert _est(batch=1000, gpus=1, max_batch_size=100).batch == 100


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 256), pp=st.sampled_from([2, 4]))
def test_more_stages_never_serve_less_per_sequence_slot(batch: int, pp: int) -> None:
    """At the same sequences in flight, splitting a replica into more pipeline stages never
    lowers its output rate, and fewer sequences than stages leave stages idle rather than
    running fractions of a sequence: a lone sequence is no faster for the extra stages."""
    one = _est(batch=batch, gpus=1)
    staged = _est(batch=batch, gpus=pp, pp=pp)
    assert staged.output_tokens_per_s >= one.output_tokens_per_s * 0.95
    if batch == 1:
        assert staged.tpot_s >= one.tpot_s


def test_fp4_on_a_gpu_publishing_fp4_with_sparsity_only_runs_at_its_siblings_scaled_rate(
        ) -> None:
    """HGX B300 publishes FP4 with sparsity only (not twice a dense figure): its Tensor Cores
    run FP4 natively, at the dense FP4 rate of GB300, the same chip, scaled by the two
    products' dense FP8 peaks: 15,000 TFLOPS (GB300 NVL72's 1,080 PFLOPS over 72) x 4,500 /
    5,000 (HGX B300's 72 and GB300 NVL72's 720 PFLOPS of sparse FP8, per GPU, halved) =
    13,500, said so. Without such a sibling the GEMMs would run at the dense FP8 rate, a lower
    bound; a GPU without FP4 Tensor Cores (H100) still dequantizes to 16 bits, and one with
    a dense FP4 peak (GB300) runs at it."""
    b300 = CATALOG.product("b300")
    peak = gemm_peak(b300, FP4)
    assert peak.peak.key is PeakKey.TENSOR_FP4 and not peak.dequantize
    assert peak.peak.flops == pytest.approx(13_500e12)
    assert peak.peak.origin == "scaled from sibling"
    assert "gb300" in (peak.peak.fallback_reason or "")
    alone = gemm_peak(dataclasses.replace(b300, dense_from_sibling={}), FP4)
    assert alone.peak.key is PeakKey.TENSOR_FP8 and not alone.dequantize
    assert alone.peak.flops == b300.peak(PeakKey.TENSOR_FP8)
    assert "with sparsity only" in (alone.peak.fallback_reason or "")
    h100 = gemm_peak(H100, FP4)
    assert h100.dequantize and h100.peak.key is PeakKey.TENSOR_BF16
    gb300 = gemm_peak(CATALOG.product("gb300"), FP4)
    assert gb300.peak.key is PeakKey.TENSOR_FP4 and gb300.peak.fallback_reason is None


def test_the_text_names_the_micro_batches() -> None:
    """The estimate's first line says how many micro-batches a pipelined replica keeps in
    flight, and says nothing of them without stages."""
    from gpuarch.report.estimate_text import render_inference

    assert "2 pipeline micro-batches in flight" in render_inference(
        _est(batch=512, gpus=2, pp=2)).splitlines()[0]
    assert "micro-batches" not in render_inference(_est(batch=512, gpus=1))


def test_no_spread_changes_nothing_and_a_spread_holds_more_context() -> None:
    """Output lengths that vary (cv > 0) keep long requests in flight longer: the mean output
    in flight is output_len x (1 + cv^2), a decode step reads that much more context and the
    KV cache holds it, so throughput at the same batch never rises; cv 0 is the fixed-length
    model exactly."""
    fixed = _est(batch=64)
    assert _est(batch=64, output_len_cv=0.0).output_tokens_per_s == fixed.output_tokens_per_s
    spread = _est(batch=64, output_len_cv=1.0)
    a = spread.as_json()["assumptions"]
    assert a["mean_output_in_flight"] == 2 * 256
    assert a["mean_decode_context"] == 1024 + (512 + 1) / 2
    assert spread.memory["kv_cache"] > fixed.memory["kv_cache"]
    assert spread.output_tokens_per_s < fixed.output_tokens_per_s
    assert spread.max_batch < fixed.max_batch


@pytest.mark.parametrize(("kw", "message"), [
    ({"output_len_cv": -0.5}, r"--output-len-cv: expected a number from 0 to 10"),
    ({"output_len_cv": 1.0, "batching": Batching.STATIC},
     r"--output-len-cv: .*give --batching continuous"),
])
def test_a_bad_spread_is_refused_by_name(kw: dict, message: str) -> None:  # type: ignore[type-arg]
    from gpuarch.errors import GpuarchError

    with pytest.raises(GpuarchError, match=message):
        _est(batch=8, **kw)


def test_each_stage_boundary_is_priced_over_its_own_link() -> None:
    """A token crosses the stage boundaries one after another: those inside a DGX H100 over
    NVLink, those between nodes over the network. At TP 4 two stages share a node, so PP 4
    has two boundaries inside nodes and one between them (four sequences a micro-batch in
    each case)."""
    dgx = CATALOG.system("dgx h100")

    def sends(tp: int, pp: int) -> float:
        cfg = InferenceConfig(input_len=1024, output_len=64, quant=FP8, batch=4 * pp,
                              gpus=tp * pp, tp=tp, pp=pp)
        doc = estimate_inference(CATALOG, preset("llama-3.1-70b").shape, H100, cfg,
                                 system=dgx).as_json()
        return float(doc["prefill_parts_s"]["pipeline_p2p"])

    inside, between = sends(4, 2), sends(8, 2)
    assert between > 3 * inside > 0
    assert sends(4, 4) == pytest.approx(2 * inside + between, rel=1e-6)
