"""The serving advisor's disaggregated deployments (``advise infer --disaggregated``): each
listed one is ``estimate_disaggregated``'s for the same pools and load, its prefill pool is
the smallest that meets the TTFT cap, and the choice of pass size is the estimate's."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gpuarch.advise import load_prices
from gpuarch.advise.infer import _SCHEMES, InferenceSearch, advise_inference
from gpuarch.advise.prefill_pools import prefill_curves, size_prefill
from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.disagg import PrefillPool, best_pass, estimate_disaggregated
from gpuarch.estimate.inference_config import MAX_PREFILL_LOAD, Batching, InferenceConfig
from gpuarch.perf import DEFAULT_EFFICIENCY
from gpuarch.workloads import preset
from tests.test_cli import run

CATALOG = load_catalog()
SHAPE = preset("llama-3.1-8b").shape
H100 = CATALOG.product("h100")
DGX = CATALOG.system_for(H100)


def test_best_pass_takes_the_quickest_first_token_among_the_sizes_that_keep_up() -> None:
    """Passes of 1 prompt in 1.0 s or 2 in 1.5 s. At 0.5 prompts/s both keep up: one prompt
    a pass is 50% busy, 1.0 + 0.5 / (2 x 0.5) x 1.0 = 1.5 s to the first token; two are
    37.5% busy, 1.5 + 0.375 / 1.25 x 1.5 = 1.95 s: one is taken. At 1.2/s only two keep up
    (90% busy, wait 0.9 / 0.2 x 1.5 = 6.75 s); at 1.5/s neither does."""
    sizes, pass_s = np.array([1, 2]), np.array([1.0, 1.5])
    assert best_pass(0.5, sizes, pass_s) == (0, pytest.approx(0.5), pytest.approx(0.5))
    assert best_pass(1.2, sizes, pass_s) == (1, pytest.approx(0.9), pytest.approx(6.75))
    assert best_pass(1.5, sizes, pass_s) is None
    # flat out at the cap: the largest size, 95% busy
    index, busy, _ = best_pass(4 / 3, sizes, pass_s, busy_cap=MAX_PREFILL_LOAD)
    assert (index, busy) == (1, MAX_PREFILL_LOAD)


def _search(**kw: object) -> InferenceSearch:
    fields: dict[str, object] = {"input_len": 2048, "output_len": 256, "gpus": ("h100",),
                                 "max_gpus": 16, "top": 40, "disaggregated": True}
    fields.update(kw)
    return InferenceSearch(**fields)  # type: ignore[arg-type]


def _decode_cfg(o: object, search: InferenceSearch, batch: int | None) -> InferenceConfig:
    schemes = dict(_SCHEMES)
    return InferenceConfig(
        input_len=search.input_len, output_len=search.output_len, batch=batch,
        gpus=o.replicas * max(o.tp * o.pp, o.ep), tp=o.tp, pp=o.pp, ep=o.ep,  # type: ignore
        quant=schemes[o.scheme], batching=Batching.CONTINUOUS,  # type: ignore
        gpus_per_node=DGX.gpus_per_node if DGX else 8)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "nemotron-3-nano-30b-a3b"])
def test_disaggregated_options_are_the_estimates_own_numbers(name: str) -> None:
    """At 10 requests/s under a 500 ms TTFT cap: each disaggregated option's TTFT is what
    ``estimate_disaggregated`` gives for its two pools at that load, its TPOT the decode
    step at its batch; it delivers the load on prefill GPUs at most 95% busy, and one
    prefill replica fewer would be too busy or too slow. A hybrid model's hand-off carries
    its Mamba-2 state too (the estimate's ``kv_transfer``)."""
    shape = preset(name).shape
    search = _search(rate=10.0, ttft_ms=500.0)
    adv = advise_inference(CATALOG, shape, search, load_prices())
    seen = [o for o in (*adv.top, *adv.pareto) if o.mode == "disaggregated"]
    assert seen, "no disaggregated deployment listed"
    assert any(o.mode == "aggregated" for o in adv.top)  # both kinds are ranked together
    for o in seen:
        p = o.prefill
        assert p is not None and o.gpus == o.replicas * max(o.tp * o.pp, o.ep) + p.gpus
        assert o.ttft_ms <= 500 and p.busy <= MAX_PREFILL_LOAD + 1e-12
        assert o.output_tokens_per_s == pytest.approx(10.0 * 256)
        pool = PrefillPool(p.gpus, p.tp, p.ep)
        at_load = estimate_disaggregated(CATALOG, shape, H100, _decode_cfg(o, search, None),
                                         pool, rate=10.0, system=DGX)
        assert o.ttft_ms == pytest.approx(at_load.ttft_s * 1e3, rel=1e-9)
        assert p.kv_link == at_load.kv_link
        at_batch = estimate_disaggregated(CATALOG, shape, H100,
                                          _decode_cfg(o, search, o.batch), pool, system=DGX)
        assert o.tpot_ms == pytest.approx(at_batch.tpot_s * 1e3, rel=1e-9)
        assert o.request_latency_s == pytest.approx(o.ttft_ms / 1e3 + 255 * o.tpot_ms / 1e3)
        if p.replicas > 1:
            fewer = PrefillPool(p.gpus - max(p.tp, p.ep), p.tp, p.ep)
            try:
                e = estimate_disaggregated(CATALOG, shape, H100,
                                           _decode_cfg(o, search, None), fewer, rate=10.0,
                                           system=DGX)
                assert e.ttft_s * 1e3 > 500 or e.prefill_utilization > MAX_PREFILL_LOAD
            except Exception as exc:  # the smaller pool cannot carry the rate at all
                assert "more than the prefill pool carries" in str(exc)
        assert o.reason and o.reason.startswith("disaggregated:")


def test_a_tighter_ttft_cap_never_needs_fewer_prefill_gpus() -> None:
    decode = InferenceConfig(input_len=4096, output_len=256, gpus=1, tp=1,
                             quant=dict(_SCHEMES)["fp8"], batching=Batching.CONTINUOUS)
    (curve,) = prefill_curves(CATALOG, SHAPE, H100, decode, [(1, 1)], DGX,
                              DEFAULT_EFFICIENCY)
    assert list(curve.sizes) == [1, 2]  # 8,192 tokens a pass, 4,096 a prompt
    fixed = (1e-3, "nvlink")
    last = 0
    one = float(curve.pass_s[0])  # one prompt alone: 73 ms
    for cap in (None, *(one * f for f in (10, 3, 1.5, 1.1, 1.05, 1.02, 0.9))):
        sized = size_prefill(curve, 20.0, max_replicas=64, ttft_cap_s=cap,
                             transfer=lambda _: fixed)
        if sized is None:  # not even 64 replicas bring the first token within the cap
            chosen = best_pass(20.0 / 64, curve.sizes, curve.pass_s)
            assert chosen is not None and cap is not None
            assert curve.pass_s[chosen[0]] + chosen[2] + fixed[0] > cap
            continue
        assert sized.replicas >= last and (cap is None or sized.ttft_s <= cap)
        assert 20.0 / sized.replicas <= MAX_PREFILL_LOAD * curve.capacity
        last = sized.replicas
    assert last > math.ceil(20.0 / (MAX_PREFILL_LOAD * curve.capacity))


def test_concurrency_and_flat_out_sizing() -> None:
    """With a concurrency the decode units hold every request in flight and the delivered
    rate is Little's; with no load one decode unit runs flat out at its batch."""
    adv = advise_inference(CATALOG, SHAPE, _search(concurrency=256), load_prices())
    for o in (o for o in adv.top if o.mode == "disaggregated"):
        assert o.replicas * o.batch * max(1, o.ep // o.tp) >= 256
        assert o.output_tokens_per_s <= 256 * 256 / o.request_latency_s * (1 + 1e-9)
    flat = advise_inference(CATALOG, SHAPE, _search(), load_prices())
    for o in (o for o in flat.top if o.mode == "disaggregated"):
        assert o.replicas == 1
        per_unit = max(1, o.ep // o.tp) * o.batch / (255 * o.tpot_ms / 1e3)
        assert o.output_tokens_per_s == pytest.approx(per_unit * 256)


def test_not_searched_unless_asked() -> None:
    adv = advise_inference(CATALOG, SHAPE, _search(disaggregated=False, rate=10.0),
                           load_prices())
    assert adv.top and all(o.mode == "aggregated" and o.prefill is None for o in adv.top)
    assert adv.assumptions["disaggregated"] is None


def test_cli_lists_the_prefill_pool(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("advise", "infer", "--gpu", "h100", "--rate", "10", "--ttft-ms", "500",
            "--max-gpus", "16", "--disaggregated")
    status, out, _ = run(capsys, *argv)
    assert status == 0 and " prefill " in out.splitlines()[1]
    assert "disaggregated:" in out and "checked on two published disaggregated runs" in out
    status, out, _ = run(capsys, *argv, "--json")
    doc = json.loads(out)
    modes = {o["mode"] for o in doc["pareto"]}
    assert "disaggregated" in modes
    pools = [o["prefill"] for o in doc["pareto"] if o["mode"] == "disaggregated"]
    assert all(set(p) >= {"gpus", "replicas", "tp", "ep", "busy", "kv_link"} for p in pools)
    status, out, _ = run(capsys, "advise", "infer", "--gpu", "h100", "--json")
    assert all(o["prefill"] is None for o in json.loads(out)["top"])
    status, out, _ = run(capsys, "advise", "infer", "--gpu", "h200", "--rate", "10",
                         "--max-gpus", "16", "--disaggregated", "--prefill-gpu", "h100",
                         "--json")
    pools = [o["prefill"] for o in json.loads(out)["top"] if o["prefill"]]
    assert status == 0 and pools and all(p["gpu"] == "h100-sxm5-80gb" for p in pools)
    status, out, err = run(capsys, "advise", "infer", "--prefill-gpu", "h100")
    assert status == 2 and "add --disaggregated" in err and out == ""


def test_prefill_pools_on_another_gpu_type() -> None:
    """``--prefill-gpu h100`` with B200 decode: each listed option's TTFT and hand-off are
    ``estimate_disaggregated``'s with the prefill pool on H100 (over the network), its
    hourly price is each pool's GPUs at their own price, and no format the H100 lacks
    natively (NVFP4) is prefilled there."""
    from gpuarch.advise.infer import _SCHEMES as schemes

    b200 = CATALOG.product("b200")
    prices = load_prices()
    search = _search(gpus=("b200",), prefill_gpus=("h100-sxm5-80gb",), rate=10.0,
                     ttft_ms=2000.0, max_gpus=16)
    adv = advise_inference(CATALOG, SHAPE, search, prices)
    seen = [o for o in (*adv.top, *adv.pareto) if o.prefill is not None]
    assert seen and all(o.prefill.gpu == "h100-sxm5-80gb" for o in seen)
    assert all(o.scheme != "fp4" for o in seen)
    for o in seen:
        p = o.prefill
        cfg = InferenceConfig(input_len=2048, output_len=256, batch=None,
                              gpus=o.replicas * max(o.tp * o.pp, o.ep), tp=o.tp, pp=o.pp,
                              ep=o.ep, quant=dict(schemes)[o.scheme],
                              batching=Batching.CONTINUOUS,
                              gpus_per_node=CATALOG.system_for(b200).gpus_per_node)
        est = estimate_disaggregated(
            CATALOG, SHAPE, b200, cfg,
            PrefillPool(p.gpus, p.tp, p.ep, product=H100, system=DGX), rate=10.0,
            system=CATALOG.system_for(b200))
        assert o.ttft_ms == pytest.approx(est.ttft_s * 1e3, rel=1e-9)
        assert p.kv_link == est.kv_link == "network"
        decode_gpus = o.gpus - p.gpus
        assert o.usd_per_hour == pytest.approx(
            decode_gpus * prices.price("b200") + p.gpus * prices.price("h100-sxm5-80gb"))
        assert o.reason and "H100 SXM5 80GB prefill GPUs" in o.reason
    with pytest.raises(GpuarchError, match=r"--prefill-gpu: .* add --disaggregated"):
        advise_inference(CATALOG, SHAPE, _search(disaggregated=False,
                                                 prefill_gpus=("h100-sxm5-80gb",)), prices)


def test_advise_infer_uses_or_refuses_every_engine_option(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The serving options advise infer shares with estimate infer reach its search or are
    refused by name, never dropped: FP8 weights scaled per block run a fine-grained MoE's
    experts slower; a 16-bit recurrent state holds more sequences of a hybrid model; weights
    in host memory are estimate infer's alone."""
    def fp8_option(*extra: str) -> dict:  # type: ignore[type-arg]
        status, out, _ = run(capsys, "advise", "infer", "--model", "qwen3-30b-a3b", "--gpu",
                             "h100", "--max-gpus", "2", "--json", *extra)
        assert status == 0
        return next(o for o in json.loads(out)["pareto"] if o["weights"] == "fp8")

    tensor, block = fp8_option(), fp8_option("--fp8-scaling", "block")
    assert block["output_tokens_per_s"] < tensor["output_tokens_per_s"]

    def hybrid(*extra: str) -> dict:  # type: ignore[type-arg]
        status, out, _ = run(capsys, "advise", "infer", "--model", "nemotron-h-8b", "--gpu",
                             "h100", "--max-gpus", "1", "--json", *extra)
        assert status == 0
        return json.loads(out)["top"][0]

    assert hybrid("--ssm-state-precision", "bf16")["batch"] > hybrid()["batch"]
    status, _, err = run(capsys, "advise", "infer", "--gpu", "h100", "--cpu-offload-gb", "10")
    assert status == 2 and "--cpu-offload-gb: 10 given" in err and "Traceback" not in err
    status, _, err = run(capsys, "advise", "infer", "--gpu", "h100", "--fp8-scaling", "blok")
    assert status == 2 and "did you mean 'block'?" in err


def test_every_shared_engine_flag_has_a_home_in_the_advisor() -> None:
    """engine_flags() adds the serving engine's options to estimate infer and advise infer
    alike: each must be a field of the advisor's search (under its own name, or the
    positive of a --no- flag) or be refused by it, so that a new option cannot be accepted
    and silently dropped again (--cuda-graph-max-context, --fp8-scaling and
    --ssm-state-precision were)."""
    import argparse
    import dataclasses

    from gpuarch.advise.infer import InferenceSearch
    from gpuarch.cli.estimate_flags import engine_flags

    parser = argparse.ArgumentParser()
    engine_flags(parser)
    dests = {a.dest for a in parser._actions if a.dest != "help"}
    fields = {f.name for f in dataclasses.fields(InferenceSearch)}
    refused = {"cpu_offload_gb"}  # weights in host memory: estimate infer's alone
    homeless = {d for d in dests if d not in fields and d.removeprefix("no_") not in fields
                and d not in refused}
    assert not homeless, homeless
