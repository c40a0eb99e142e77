"""Inference number formats for weights, activations and the KV cache, and the Tensor Core
peak a combination runs at on a GPU (with the reason when it falls back)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gpuarch.catalog.model import Product
from gpuarch.catalog.peaks import NEXT_WIDER, PeakKey
from gpuarch.errors import GpuarchError
from gpuarch.perf.precision import MatmulPeak, lacks_bf16, sibling_scaled_peak

__all__ = ["GemmPeak", "QuantFormat", "QuantScheme", "activations_run", "gemm_peak",
           "in_sixteen_bit", "sixteen_bit_format"]


class QuantFormat(Enum):
    """A storage/compute format. ``bytes`` includes block-scale overhead where the format
    carries one: INT4 weight-only with a 16-bit scale and zero point per group of 128
    (AWQ/GPTQ style); NVFP4 (``fp4``) with an 8-bit scale per block of 16 (plus a negligible
    per-tensor scale); MXFP4 (OCP microscaling, GPT-OSS's experts) with an 8-bit power-of-two
    scale per block of 32. Both 4-bit float formats run at the FP4 Tensor Core rate where
    there is one (Blackwell's block-scaled MMA takes either)."""

    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"
    FP4 = "fp4"
    MXFP4 = "mxfp4"

    # identity hash, consistent with identity equality and cheaper than Enum's (see PeakKey)
    __hash__ = object.__hash__

    @property
    def bytes(self) -> float:
        return _FORMAT_BYTES[self._value_]

    @property
    def bits(self) -> int:
        return _FORMAT_BITS[self._value_]

    @property
    def is_float4(self) -> bool:
        """A 4-bit float format with block scales (NVFP4 or MXFP4)."""
        return self in (QuantFormat.FP4, QuantFormat.MXFP4)

    @property
    def is_16bit(self) -> bool:
        return self.bits == 16


_FORMAT_BYTES: dict[str, float] = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0,
                                   "int4": (4 + 32 / 128) / 8, "fp4": (4 + 8 / 16) / 8,
                                   "mxfp4": (4 + 8 / 32) / 8}
_FORMAT_BITS: dict[str, int] = {"fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4,
                                "fp4": 4, "mxfp4": 4}


_NATIVE: dict[QuantFormat, PeakKey] = {
    QuantFormat.FP16: PeakKey.TENSOR_FP16,
    QuantFormat.BF16: PeakKey.TENSOR_BF16,
    QuantFormat.FP8: PeakKey.TENSOR_FP8,
    QuantFormat.INT8: PeakKey.TENSOR_INT8,
    QuantFormat.FP4: PeakKey.TENSOR_FP4,
    QuantFormat.MXFP4: PeakKey.TENSOR_FP4,
}


@dataclass(frozen=True)
class QuantScheme:
    """Weights, activations (the GEMM's other operand) and KV cache formats."""

    weights: QuantFormat = QuantFormat.BF16
    activations: QuantFormat = QuantFormat.BF16
    kv_cache: QuantFormat = QuantFormat.BF16

    def validate(self, flag_prefix: str = "") -> None:
        """Refuse combinations no engine runs; the messages name the flags, with
        ``flag_prefix`` (e.g. "expert-") inserted after their dashes."""
        w, a = f"--{flag_prefix}weight-precision", f"--{flag_prefix}activation-precision"
        if self.activations.bits < self.weights.bits:
            raise GpuarchError(
                f"{a}: {self.activations.value} is narrower than {w} {self.weights.value}; "
                "weight-only or matching weight/activation formats are supported")
        if not self.activations.is_16bit and self.activations is not self.weights \
                and not self.w4a8:
            raise GpuarchError(
                f"{a} {self.activations.value} needs {w} "
                f"{self.activations.value} (W{self.activations.bits}A"
                f"{self.activations.bits}), int4 or fp4 weights with fp8 activations (W4A8), "
                "or 16-bit activations for weight-only")
        if self.activations is QuantFormat.INT4:
            raise GpuarchError(f"{a}: int4 activations are not supported; "
                               "use int4 weight-only with 16-bit activations")

    @property
    def w4a8(self) -> bool:
        """4-bit weights (INT4 with group scales, or FP4) with FP8 activations: GEMMs at the
        FP8 rate, weights streamed at 4 bits (TensorRT-LLM's W4A8 AWQ on Hopper and Ada,
        and its W4A8 MXFP4 x MXFP8 MoE on Blackwell)."""
        return self.activations is QuantFormat.FP8 and self.weights.bits == 4

    @property
    def weight_only(self) -> bool:
        """Quantized weights, 16-bit activations: weights are dequantized in the GEMM."""
        return self.activations.is_16bit and not self.weights.is_16bit


@dataclass(frozen=True)
class GemmPeak:
    """The peak a scheme's GEMMs run at, whether weights are dequantized first, and why."""

    peak: MatmulPeak
    dequantize: bool


def _sixteen(product: Product, fmt: QuantFormat) -> MatmulPeak | None:
    own, other = ((PeakKey.TENSOR_BF16, PeakKey.TENSOR_FP16) if fmt is QuantFormat.BF16
                  else (PeakKey.TENSOR_FP16, PeakKey.TENSOR_BF16))
    for key in (own, other):
        value = product.peak(key)
        if value is not None:
            reason = None
            if key is other and fmt is QuantFormat.BF16 and lacks_bf16(product):
                reason = (f"{product.name} has no BF16 (it came with Ampere); engines run "
                          "BF16 checkpoints there in FP16 (vLLM asks for --dtype float16), "
                          "and GEMMs run at its FP16 Tensor rate")
            return MatmulPeak(value, key, product.dense_origin(key) or "published", reason)
    for key in (PeakKey.FP16, PeakKey.FP32):
        value = product.peak(key)
        if value is not None:
            return MatmulPeak(value, key, "published",
                              f"{product.name} has no 16-bit Tensor Core peak; "
                              f"GEMMs run at its {key.label} rate")
    return None


def _sparse_only_fallback(product: Product, key: PeakKey, fmt: QuantFormat
                          ) -> MatmulPeak | None:
    """Where the Tensor Cores run ``key``'s format (a figure with sparsity is published) but
    its dense rate is not, and cannot be halved from the sparse one: the rate the catalog
    scales from a product of the same chip that publishes it (``sibling_scaled_peak``), else
    the next wider format's dense rate (``NEXT_WIDER``), a lower bound (no GPU multiplies
    FP4 slower than FP8); else None."""
    scaled = sibling_scaled_peak(product, key, f"{fmt.value} GEMM")
    if scaled is not None:
        return scaled
    wider = NEXT_WIDER.get(key)
    value = product.peak(wider) if wider is not None else None
    if wider is None or value is None or product.peak(key, sparse=True) is None:
        return None
    why = product.peak_exceptions.get(f"sparse.{key.value}", "no dense figure")
    return MatmulPeak(value, wider, product.dense_origin(wider) or "published",
                      f"{product.name} publishes its {key.label} peak with sparsity only "
                      f"({why}); {fmt.value} GEMMs are taken at its dense {wider.label} "
                      "rate")


def gemm_peak(product: Product, scheme: QuantScheme) -> GemmPeak:
    """Peak for the scheme's GEMMs on ``product``: native where the Tensor Cores run the
    format, else the 16-bit rate with weights dequantized and the reason stated."""
    scheme.validate()
    compute_fmt = scheme.activations
    base_fmt = compute_fmt if compute_fmt.is_16bit else QuantFormat.BF16
    sixteen = _sixteen(product, base_fmt)
    if sixteen is None:
        raise GpuarchError(f"--gpu: {product.name} publishes no FP32 or 16-bit peak (the "
                           "catalog leaves unpublished figures empty), so it cannot be "
                           "estimated")
    if scheme.weight_only:
        key = _NATIVE.get(scheme.weights)
        float_weights = scheme.weights.is_float4 or scheme.weights is QuantFormat.FP8
        if float_weights and key is not None and product.peak(key) is None \
                and product.peak(key, sparse=True) is None \
                and key not in product.dense_from_sibling:
            # a float format these Tensor Cores do not take: say so, as for W8A8 below
            return GemmPeak(MatmulPeak(sixteen.flops, sixteen.key, sixteen.origin, (
                f"{product.name} publishes no {scheme.weights.value.upper()} Tensor Core "
                f"peak; {scheme.weights.value} weights are dequantized to 16 bits and GEMMs "
                f"run at its {sixteen.key.label} rate")), dequantize=True)
        return GemmPeak(sixteen, dequantize=True)
    if compute_fmt.is_16bit:
        return GemmPeak(sixteen, dequantize=False)
    key = _NATIVE.get(compute_fmt)
    value = product.peak(key) if key else None
    if key is not None and value is not None:
        # W4A8: FP4 weights meet FP8 activations natively where the Tensor Cores take FP4
        # operands (Blackwell's mixed-input MMA, at the FP8 rate); INT4 weights, or FP4 on
        # an older GPU, are converted to FP8 inside the GEMM
        mixed = scheme.w4a8 and not (scheme.weights.is_float4
                                     and product.peak(PeakKey.TENSOR_FP4) is not None)
        return GemmPeak(MatmulPeak(value, key, product.dense_origin(key) or "published",
                                   None), dequantize=mixed)
    fallback = _sparse_only_fallback(product, key, compute_fmt) if key is not None else None
    if fallback is not None:
        return GemmPeak(fallback, dequantize=False)
    reason = (f"{product.name} publishes no {compute_fmt.value.upper()} Tensor Core peak; "
              f"{compute_fmt.value} weights are dequantized and GEMMs run at the "
              f"{sixteen.key.label} rate")
    return GemmPeak(MatmulPeak(sixteen.flops, sixteen.key, sixteen.origin, reason),
                    dequantize=True)


def sixteen_bit_format(product: Product) -> QuantFormat:
    """The 16-bit format ``product`` stores and computes in: BF16, or FP16 where it lacks
    BF16 (``perf.precision.lacks_bf16``: before Ampere)."""
    return QuantFormat.FP16 if lacks_bf16(product) else QuantFormat.BF16


def in_sixteen_bit(fmt: QuantFormat, sixteen: QuantFormat) -> QuantFormat:
    """``fmt`` as a GPU whose 16-bit format is ``sixteen`` (``sixteen_bit_format``) holds it:
    BF16 becomes that format (FP16 before Ampere, as engines run BF16 checkpoints there),
    every other format stays."""
    return sixteen if fmt is QuantFormat.BF16 else fmt


def activations_run(product: Product, fmt: QuantFormat) -> QuantFormat:
    """The format activations meant to be ``fmt`` compute in on ``product``: FP8 or FP4
    where its Tensor Cores take them (W8A8, W4A4); before Ada (FP8) or Blackwell (FP4) the
    weights are dequantized and the activations stay in the GPU's 16-bit format
    (``sixteen_bit_format``), as engines run them there (weight-only). Any other format is
    as given."""
    if fmt is QuantFormat.FP8 or fmt.is_float4:
        try:
            if gemm_peak(product, QuantScheme(fmt, fmt, fmt)).peak.fallback_reason:
                return sixteen_bit_format(product)
        except GpuarchError:  # no matrix peak at all: nothing to run natively
            return sixteen_bit_format(product)
    return fmt
