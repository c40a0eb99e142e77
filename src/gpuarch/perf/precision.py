"""Training/inference number formats and the catalog peak each one runs at on a GPU."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gpuarch.catalog.model import Product
from gpuarch.catalog.peaks import PeakKey
from gpuarch.units import Unit, from_si

__all__ = ["MatmulPeak", "Precision", "lacks_bf16", "matmul_peak", "sibling_scaled_peak",
           "sixteen_bit"]


class Precision(Enum):
    """The format matrix multiplies run in (activations and weights in memory follow it,
    except TF32, which keeps FP32 storage)."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    NVFP4 = "nvfp4"  # 4-bit E2M1 with an FP8 scale per 16 elements (Blackwell)

    @property
    def bytes(self) -> float:
        """Bytes per element of GEMM operands (activations and compute-copy weights); NVFP4
        counts its per-16-element scale."""
        return _PRECISION_BYTES[self._value_]

    @property
    def low_precision(self) -> bool:
        """An 8-bit-or-narrower format whose GEMM operands are cast from 16-bit values."""
        return self in (Precision.FP8, Precision.NVFP4)

    @property
    def activation_bytes(self) -> int:
        """Bytes per stored activation element: FP8 and NVFP4 training keep activations in
        16 bits."""
        return _ACTIVATION_BYTES[self._value_]


_PRECISION_BYTES: dict[str, float] = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1,
                                      "nvfp4": 0.5 + 1 / 16}
_ACTIVATION_BYTES: dict[str, int] = {
    p.value: 2 if p.low_precision else int(_PRECISION_BYTES[p.value]) for p in Precision}


# Preferred peaks, best first: the first one the product publishes is used.
_CHAIN: dict[Precision, tuple[PeakKey, ...]] = {
    Precision.FP32: (PeakKey.FP32,),
    Precision.TF32: (PeakKey.TENSOR_TF32, PeakKey.FP32),
    Precision.FP16: (PeakKey.TENSOR_FP16, PeakKey.FP16, PeakKey.FP32),
    Precision.BF16: (PeakKey.TENSOR_BF16, PeakKey.BF16, PeakKey.FP32),
    Precision.FP8: (PeakKey.TENSOR_FP8, PeakKey.TENSOR_BF16, PeakKey.TENSOR_FP16),
    Precision.NVFP4: (PeakKey.TENSOR_FP4, PeakKey.TENSOR_FP8, PeakKey.TENSOR_BF16,
                      PeakKey.TENSOR_FP16),
}


def lacks_bf16(product: Product) -> bool:
    """Whether ``product`` runs FP16 but not BF16: it publishes an FP16 peak (Tensor Core or
    not) and no BF16 one, as Pascal's P100, Volta and Turing do (BF16 came with Ampere).
    A product that publishes neither (a figure NVIDIA leaves out) is not taken to lack it."""
    has = product.peak
    return has(PeakKey.TENSOR_BF16) is None and has(PeakKey.BF16) is None \
        and (has(PeakKey.TENSOR_FP16) is not None or has(PeakKey.FP16) is not None)


def sixteen_bit(product: Product) -> Precision:
    """The 16-bit format ``product`` computes in: BF16, or FP16 where it lacks BF16 (the
    default for estimates and searches that are not told a precision)."""
    return Precision.FP16 if lacks_bf16(product) else Precision.BF16


@dataclass(frozen=True)
class MatmulPeak:
    """The peak a precision's matrix multiplies get on a product, and why."""

    flops: float  # FLOP/s, dense
    key: PeakKey
    origin: str  # "published", "half of sparse" (Product.dense_origin) or "scaled from sibling"
    fallback_reason: str | None  # set when the precision's own peak is not available


def matmul_peak(product: Product, precision: Precision) -> MatmulPeak | None:
    """The dense peak ``precision`` matrix multiplies run at on ``product``; ``None`` if the
    catalog publishes none of the candidates."""
    chain = _CHAIN[precision]
    scaled = sibling_scaled_peak(product, chain[0], precision.value)
    if scaled is not None:
        return scaled
    for i, key in enumerate(chain):
        value = product.peak(key)
        if value is None:
            continue
        reason = None
        if i > 0:
            reason = (f"{product.name} publishes no {chain[0].label} peak; "
                      f"{precision.value} matrix math is taken at its {key.label} rate")
        return MatmulPeak(value, key, product.dense_origin(key) or "published", reason)
    return None


def sibling_scaled_peak(product: Product, key: PeakKey, what: str) -> MatmulPeak | None:
    """The dense ``key`` peak the catalog scales from a same-chip product where ``product``
    publishes that precision only with sparsity, in a figure that is not twice the dense one
    (``Product.dense_from_sibling``: HGX B300's FP4 from GB300's); ``None`` elsewhere.
    ``what`` names the math that runs at it in the stated reason."""
    value = product.dense_from_sibling.get(key)
    if value is None or product.peak(key) is not None:
        return None
    return MatmulPeak(value, key, "scaled from sibling", (
        f"{product.name} publishes its {key.label} peak only with sparsity, in a figure that "
        f"is not twice the dense one; {what} matrix math is taken at "
        f"{from_si(value, Unit.TFLOPS):,.0f} "
        f"TFLOPS, the same chip's published dense {key.label} peak on "
        f"{product.dense_sibling} scaled by the two products' dense peaks one precision up"))
