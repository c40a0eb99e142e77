"""The closed set of peak-throughput kinds a product or a chip can publish."""

from __future__ import annotations

from enum import Enum

__all__ = ["PeakKey"]


class PeakKey(Enum):
    """One published peak: a number format on CUDA cores or on Tensor Cores.

    The value is the key used in data files (``dense_tflops``, ``sparse_tflops``,
    ``sm_ops_per_clock``). Tensor FP16/FP8 keys without ``_acc16`` mean FP32 accumulate.
    """

    FP64 = "fp64"
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"
    TENSOR_FP64 = "tensor_fp64"
    TENSOR_TF32 = "tensor_tf32"
    TENSOR_FP16 = "tensor_fp16"
    TENSOR_FP16_ACC16 = "tensor_fp16_acc16"
    TENSOR_BF16 = "tensor_bf16"
    TENSOR_FP8 = "tensor_fp8"
    TENSOR_FP8_ACC16 = "tensor_fp8_acc16"
    TENSOR_FP6 = "tensor_fp6"
    TENSOR_FP4 = "tensor_fp4"
    TENSOR_INT8 = "tensor_int8"
    TENSOR_INT4 = "tensor_int4"

    # members compare by identity, so their identity hash is consistent with equality (and
    # a C-level call, where Enum's own hashes the name in Python): peaks are dict keys in
    # every operator's cost
    __hash__ = object.__hash__

    @property
    def is_tensor(self) -> bool:
        """True for Tensor Core peaks."""
        return self.value.startswith("tensor_")

    @property
    def is_integer(self) -> bool:
        """True for integer peaks, counted in TOPS rather than TFLOPS."""
        return self.value.endswith(("int8", "int4"))

    @property
    def bits(self) -> int:
        """Width of the input format in bits (TF32 counts its 19 significant bits)."""
        fmt = self.value.removeprefix("tensor_").replace("_acc16", "")
        return _BITS[fmt]

    @property
    def unit_label(self) -> str:
        return "TOPS" if self.is_integer else "TFLOPS"

    @property
    def label(self) -> str:
        """Human label, e.g. ``'FP16 Tensor'`` or ``'FP32'``."""
        fmt = self.value.removeprefix("tensor_").replace("_acc16", "").upper()
        text = f"{fmt} Tensor" if self.is_tensor else fmt
        return text + (" (FP16 acc.)" if self.value.endswith("_acc16") else "")


NEXT_WIDER: dict[PeakKey, PeakKey] = {
    PeakKey.TENSOR_FP4: PeakKey.TENSOR_FP8, PeakKey.TENSOR_FP6: PeakKey.TENSOR_FP8,
    PeakKey.TENSOR_FP8: PeakKey.TENSOR_BF16}
"""The Tensor Core format one step wider than each narrow one: no GPU multiplies the narrow
format slower, and a lower-clocked board of the same chip runs both at the same fraction of
its sibling (the catalog loader's sibling-scaled peaks, the serving model's lower bound for
an unpublished dense rate)."""

_BITS = {"fp64": 64, "fp32": 32, "tf32": 19, "fp16": 16, "bf16": 16, "fp8": 8, "fp6": 6,
         "fp4": 4, "int8": 8, "int4": 4}
