"""The scalar fast paths of gpuarch.perf.num agree with NumPy's functions, for single values
and for arrays (which they hand to NumPy)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gpuarch.catalog import load_catalog
from gpuarch.estimate import TrainingConfig, estimate_training
from gpuarch.estimate import inference_passes as inference_model
from gpuarch.estimate import training_layers as training_model
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import InferenceConfig
from gpuarch.perf import num
from gpuarch.workloads import preset

finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)


@given(finite, finite)
def test_single_values_match_numpy(a: float, b: float) -> None:
    assert num.maximum(a, b) == np.maximum(a, b)
    assert num.minimum(a, b) == np.minimum(a, b)
    assert num.ceil(a) == np.ceil(a) and isinstance(num.ceil(a), float)
    assert num.floor(a) == np.floor(a) and isinstance(num.floor(a), float)
    assert num.where(a > b, a, b) == np.where(a > b, a, b)
    assert num.where(np.bool_(a > b), 1.0, 2.0) == (1.0 if a > b else 2.0)
    assert num.any_of(a > b) is bool(np.any(a > b))
    assert num.to_float(int(a)) == float(int(a))


@given(st.lists(finite, min_size=1, max_size=8), finite)
def test_arrays_go_to_numpy(xs: list[float], b: float) -> None:
    a = np.asarray(xs)
    assert np.array_equal(num.maximum(a, b), np.maximum(a, b))
    assert np.array_equal(num.minimum(b, a), np.minimum(b, a))
    assert np.array_equal(num.ceil(a), np.ceil(a))
    assert np.array_equal(num.floor(a), np.floor(a))
    assert np.array_equal(num.where(a > b, a, b), np.where(a > b, a, b))
    assert num.any_of(a > b) == bool(np.any(a > b))
    assert num.to_float(a).dtype == np.float64


def test_one_configuration_stays_out_of_numpy(monkeypatch) -> None:
    """A single estimate's collectives get Python numbers: a 0-d array or NumPy scalar (what
    np.where and np.maximum return for single values) sends every formula after it down
    NumPy's array path, several times slower (the training model's communicators did)."""
    seen: list[tuple[str, object]] = []

    def watch(module):
        real = module.collective_time

        def collective_time(kind, size_bytes, group, *args, **kwargs):
            for name, value in (("size_bytes", size_bytes), ("group.size", group.size),
                                ("group.per_node", group.per_node)):
                if isinstance(value, (np.ndarray, np.generic)):
                    seen.append((name, value))
            return real(kind, size_bytes, group, *args, **kwargs)

        monkeypatch.setattr(module, "collective_time", collective_time)

    watch(training_model)
    watch(inference_model)
    catalog = load_catalog()
    h100, dgx = catalog.product("h100"), catalog.system("dgx h100")
    estimate_training(catalog, preset("mixtral-8x7b").shape, h100,
                      TrainingConfig(gpus=64, seq_len=4096, global_batch=256, tp=2, pp=2,
                                     ep=8), system=dgx)
    estimate_inference(catalog, preset("mixtral-8x7b").shape, h100,
                       InferenceConfig(input_len=1024, output_len=256, batch=128, gpus=8,
                                       tp=2, ep=2), system=dgx)
    assert seen == []
