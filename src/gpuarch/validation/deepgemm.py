"""The serving model's expert GEMMs on SGLang's wide-EP path against DeepGEMM's published
grouped FP8 GEMM rates.

SGLang's DeepEP path (``--moe-kernels sglang-deepep``) runs a Hopper GPU's block-scaled FP8
experts as DeepGEMM's grouped GEMMs: contiguous layout in prefill, masked layout in decode
under CUDA graphs. ``data/grouped-gemm-deepgemm.csv`` holds the rates DeepGEMM's README
published for DeepSeek-V3's expert shapes on H800 (its header names the source). Each row is
set beside the roofline's time for the same grouped GEMM as the serving model costs a routed
expert's GEMM there (``estimate.inference.ReplicaRunner``'s expert device and efficiency;
``Efficiency.moe_gemm_deepgemm``, set from these rows by ``scripts/fit_deepgemm.py``;
tests/test_wide_ep.py pins where the model stands).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpuarch.catalog.loader import Catalog
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.perf.roofline import Gemm, op_time
from gpuarch.units import Unit, to_si
from gpuarch.validation.measured import ModelOverMeasured, read_commented_csv

__all__ = ["DEEPGEMM_FILE", "GPU", "SOURCE", "GroupedGemmRow", "compare", "load_rows"]

DEEPGEMM_FILE = Path(__file__).with_name("data") / "grouped-gemm-deepgemm.csv"

SOURCE = ("DeepGEMM's README as first released (github.com/deepseek-ai/DeepGEMM, early 2025): "
          "grouped FP8 GEMMs for DeepSeek-V3's experts, contiguous and masked layouts, "
          "measured on H800 with NVCC 12.8")
"""Where the rows come from (the file's header says more)."""

GPU = "h100-sxm5-80gb"
"""The catalog's GPU the rows are compared as. H800 has H100 SXM's 132 SMs (DeepSeek-V3
technical report, arXiv 2412.19437, section 3.5.1); its clocks, and so its FP8 peak, are
assumed to be H100 SXM's: no NVIDIA document read here publishes them (the catalog has no
H800 for that reason)."""


@dataclass(frozen=True)
class GroupedGemmRow(ModelOverMeasured):
    """One published grouped GEMM and the model's time for it (seconds)."""

    layout: str
    groups: int
    m_per_group: int
    n: int
    k: int
    measured_s: float
    model_s: float


@cache
def load_rows(path: Path = DEEPGEMM_FILE) -> tuple[dict[str, str], ...]:
    """The file's rows as read (comment lines skipped)."""
    return read_commented_csv(path)


def compare(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY
            ) -> list[GroupedGemmRow]:
    """Each published grouped GEMM beside the model's time for it: ``groups`` experts' GEMMs
    of ``m_per_group`` x ``n`` x ``k`` as one launch, FP8 weights of one byte, on the expert
    path of a DeepSeek-V3 estimate under ``--moe-kernels sglang-deepep``."""
    from gpuarch.estimate.inference_config import Batching, InferenceConfig
    from gpuarch.estimate.inference_passes import ReplicaRunner
    from gpuarch.perf.quant import QuantFormat, QuantScheme
    from gpuarch.workloads.presets import preset

    product = catalog.product(GPU)
    cfg = InferenceConfig(input_len=2, output_len=2, batch=1, gpus=8, tp=1, ep=8,
                          quant=QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8),
                          batching=Batching.STATIC, fp8_scaling="block",
                          moe_kernels="sglang-deepep")
    runner = ReplicaRunner(catalog, preset("deepseek-v3").shape, product, cfg,
                     catalog.system_for(product), efficiency)
    out = []
    for r in load_rows():
        groups, m, n, k = (int(r[c]) for c in ("groups", "m_per_group", "n", "k"))
        flops = 2.0 * groups * m * n * k
        gemm = Gemm(m, n, k, batch=groups, name="expert_up", weight_element=1.0)
        model = float(op_time(gemm, runner.expert_device, runner.expert_eff)[0])
        out.append(GroupedGemmRow(r["layout"], groups, m, n, k,
                                  flops / to_si(float(r["tflops"]), Unit.TFLOPS), model))
    return out
