"""2:4 structured sparsity: magnitude pruning, the mask check, the error it costs."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from gpuarch.errors import GpuarchError

__all__ = ["is_2to4", "prune_2to4"]

F64 = NDArray[np.float64]


def prune_2to4(w: NDArray[np.floating]) -> tuple[F64, NDArray[np.bool_]]:
    """Keep the two largest-magnitude values in every group of four along the last axis
    (the reduction axis, as sparse Tensor Cores require); return the pruned tensor and mask.
    Ties keep the earlier element."""
    w = np.asarray(w, dtype=np.float64)
    if w.shape[-1] % 4:
        raise GpuarchError(f"--k: {w.shape[-1]} is not a multiple of 4 (2:4 groups)")
    groups = w.reshape(*w.shape[:-1], w.shape[-1] // 4, 4)
    order = np.argsort(-np.abs(groups), axis=-1, kind="stable")
    keep = np.zeros(groups.shape, dtype=bool)
    np.put_along_axis(keep, order[..., :2], True, axis=-1)
    mask = keep.reshape(w.shape)
    return np.where(mask, w, 0.0), mask


def is_2to4(w: NDArray[np.floating]) -> bool:
    """True if every group of four along the last axis has at most two non-zeros."""
    w = np.asarray(w)
    if w.shape[-1] % 4:
        return False
    groups = w.reshape(*w.shape[:-1], w.shape[-1] // 4, 4)
    return bool(np.all(np.count_nonzero(groups, axis=-1) <= 2))
