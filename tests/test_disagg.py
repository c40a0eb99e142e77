"""Disaggregated serving (``estimate infer --prefill-gpus``): the pools' capacities, the
decode steps without prefills, the KV hand-off, and the errors."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuarch.catalog.loader import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.estimate.disagg import DisaggEstimate, PrefillPool, estimate_disaggregated
from gpuarch.estimate.inference import estimate_inference
from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.workloads.presets import preset
from tests.test_cli import run

CATALOG = load_catalog()
H100 = CATALOG.product("h100")
DGX = CATALOG.system("dgx h100")
SHAPE = preset("llama-3.1-70b").shape
FP8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP8)
DECODE = InferenceConfig(input_len=2048, output_len=256, gpus=4, tp=4, quant=FP8)


def _disagg(prefill_gpus: int = 4, cfg: InferenceConfig = DECODE,
            rate: float | None = None) -> DisaggEstimate:
    return estimate_disaggregated(CATALOG, SHAPE, H100, cfg,
                                  PrefillPool(gpus=prefill_gpus, tp=2), system=DGX, rate=rate)


def test_flat_out_the_smaller_pool_sets_the_rate() -> None:
    rates = []
    for gpus in (2, 4, 8, 16):
        e = _disagg(gpus)
        assert e.requests_per_s == pytest.approx(min(e.prefill_capacity_per_s,
                                                     e.decode_capacity_per_s))
        assert e.output_tokens_per_s == pytest.approx(e.requests_per_s * 256)
        assert e.bottleneck == ("prefill" if e.prefill_capacity_per_s
                                < e.decode_capacity_per_s else "decode")
        rates.append(e.output_tokens_per_s)
    assert rates == sorted(rates)  # more prefill GPUs never serve less
    assert _disagg(2).bottleneck == "prefill"


def test_decode_runs_without_prefills_between_its_steps() -> None:
    """At the same decode batch, a token takes no longer than in the aggregated engine,
    whose steps share the GPUs with the prompts' prefills."""
    e = _disagg(4, rate=3.0)
    agg = estimate_inference(CATALOG, SHAPE, H100, replace(
        DECODE, batch=e.batch, batching=Batching.CONTINUOUS), system=DGX)
    assert e.tpot_s < agg.tpot_s
    heavier = _disagg(4, rate=12.0)
    assert heavier.batch > e.batch and heavier.tpot_s >= e.tpot_s
    assert heavier.ttft_s > e.ttft_s  # the prefill pool is busier


def test_the_kv_hand_off() -> None:
    """Llama-3.1-70B's FP8 KV cache: 80 layers x 2 x 8 KV heads x 128 x 1 byte = 163,840
    bytes a token; a TP2 prefill GPU holds half of a 2,048-token prompt's: 167,772,160
    bytes, over NVLink inside one DGX node, over the network once the pools span two."""
    near = _disagg(4, rate=3.0)
    assert near.kv_transfer_bytes_per_gpu == 2048 * 163_840 / 2
    assert near.kv_link == "nvlink"
    far = _disagg(8, rate=3.0)
    assert far.kv_link == "network" and far.kv_transfer_s > near.kv_transfer_s


def test_a_hybrid_hands_over_its_mamba_state_with_the_kv_cache() -> None:
    """Nemotron 3 Nano: its 6 attention blocks' KV cache (2 KV heads x 128, BF16: 6,144
    bytes a token) and one state per Mamba-2 block (23 x (3 x 6,144 x 2 bytes of
    convolution inputs + 64 x 64 x 128 x 4 bytes of FP32 recurrent state)), each split over
    the prefill pool's TP; the decode pool's capacity is read at the batch given."""
    nano = preset("nemotron-3-nano-30b-a3b").shape
    h200 = CATALOG.product("h200")
    cfg = InferenceConfig(input_len=4000, output_len=500, gpus=2, tp=2, batch=32)
    state = 23 * (3 * 6144 * 2 + 64 * 64 * 128 * 4)
    for tp in (1, 2):
        e = estimate_disaggregated(CATALOG, nano, h200, cfg, PrefillPool(gpus=2, tp=tp),
                                   system=CATALOG.system("dgx h200"))
        assert e.kv_transfer_bytes_per_gpu == pytest.approx((4000 * 6144 + state) / tp)
        assert e.assumptions["mamba_state_sent_bytes_per_gpu"] == pytest.approx(state / tp)
        assert e.as_json()["disaggregated"]["decode_capacity_batch"] == 32
    assert _disagg(4, rate=3.0).assumptions["mamba_state_sent_bytes_per_gpu"] is None


def test_errors_name_the_flag() -> None:
    with pytest.raises(GpuarchError, match=r"--rate: .* more than the prefill pool"):
        _disagg(2, rate=100.0)
    with pytest.raises(GpuarchError, match=r"--output-len: .* at least 2"):
        _disagg(4, cfg=replace(DECODE, output_len=1))
    with pytest.raises(GpuarchError, match="--prefill-gpus: 3 is not a multiple"):
        _disagg(3)
    with pytest.raises(GpuarchError, match="--prefill-tp: 3 does not divide"):
        estimate_disaggregated(CATALOG, SHAPE, H100, DECODE, PrefillPool(gpus=3, tp=3),
                               system=DGX)
    with pytest.raises(GpuarchError, match="give --system"):
        estimate_disaggregated(CATALOG, SHAPE, H100, DECODE, PrefillPool(gpus=8, tp=2))


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["estimate", "infer", "--model", "llama-3.1-70b", "--gpu", "h100", "--system",
            "dgx h100", "--tp", "4", "--gpus", "4", "--weight-precision", "fp8",
            "--input-len", "2048", "--output-len", "256"]
    status, out, _ = run(capsys, *base, "--prefill-gpus", "4", "--prefill-tp", "2",
                         "--rate", "3", "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["validation"] is None and doc["disaggregated"]["prefill_gpus"] == 4
    assert doc["output_tokens_per_s"] == pytest.approx(3 * 256)
    status, out, _ = run(capsys, *base, "--prefill-gpus", "4", "--batch", "max")
    assert status == 0 and "disaggregated: 4 prefill GPUs" in out
    assert "Checked on two published disaggregated runs" in out and "no error band" in out
    status, out, err = run(capsys, *base, "--prefill-tp", "2", "--batch", "8")
    assert status == 2 and "--prefill-tp: it shapes the prefill pool" in err
    status, out, err = run(capsys, *base, "--prefill-max-num-tokens", "4096", "--batch", "8")
    assert status == 2 and "--prefill-max-num-tokens: it shapes the prefill pool" in err
    status, out, err = run(capsys, *base, "--prefill-gpus", "4", "--batch", "8",
                           "--batching", "continuous", "--num-requests", "100")
    assert status == 2 and "--prefill-gpus and --num-requests" in err
    # more prefill GPUs than an int64 holds: estimated (the decode pool is the limit), not
    # an overflow in NumPy
    status, out, err = run(capsys, *base, "--prefill-gpus", str(10**20), "--batch", "8")
    assert status == 0 and f"disaggregated: {10**20} prefill GPUs" in out
    assert "the decode pool is the limit" in out


def test_prefill_on_another_gpu_type() -> None:
    """Prefill on H100, decode on H200: the prefill pool's capacity is the all-H100
    deployment's, the decode pool's the all-H200 one's, and the KV cache crosses the
    network at the slower system's rate (DGX H100 and DGX H200 both have 400 Gb/s per GPU:
    the same time as an all-H100 hand-off across nodes). A GPU without a network in its
    reference system is refused, naming the flag."""
    h200 = CATALOG.product("h200")
    dgx200 = CATALOG.system_for(h200)
    mixed = estimate_disaggregated(
        CATALOG, SHAPE, h200, DECODE, PrefillPool(gpus=4, tp=2, product=H100, system=DGX),
        system=dgx200, rate=3.0)
    all_h100 = estimate_disaggregated(CATALOG, SHAPE, H100, DECODE,
                                      PrefillPool(gpus=4, tp=2), system=DGX, rate=3.0)
    all_h200 = estimate_disaggregated(CATALOG, SHAPE, h200, DECODE,
                                      PrefillPool(gpus=4, tp=2), system=dgx200, rate=3.0)
    assert mixed.prefill_capacity_per_s == pytest.approx(all_h100.prefill_capacity_per_s)
    assert mixed.decode_capacity_per_s == pytest.approx(all_h200.decode_capacity_per_s)
    assert mixed.tpot_s == pytest.approx(all_h200.tpot_s)
    assert mixed.prefill_memory == all_h100.prefill_memory
    assert mixed.assumptions["prefill"]["gpu"] == H100.name and mixed.gpu == h200.name
    across = _disagg(8, rate=3.0)  # all H100, the pools on two nodes
    assert mixed.kv_link == across.kv_link == "network"
    assert mixed.kv_transfer_s == pytest.approx(across.kv_transfer_s)
    l40s = CATALOG.product("l40s")
    with pytest.raises(GpuarchError, match=r"--prefill-gpu: .* no scale-out network"):
        estimate_disaggregated(CATALOG, SHAPE, h200, DECODE,
                               PrefillPool(gpus=8, tp=4, product=l40s,
                                           system=CATALOG.system_for(l40s)),
                               system=dgx200, rate=0.5)


def test_cli_prefill_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["estimate", "infer", "--model", "llama-3.1-70b", "--gpu", "h200", "--tp", "4",
            "--gpus", "4", "--weight-precision", "fp8", "--input-len", "2048",
            "--output-len", "256", "--rate", "3"]
    status, out, _ = run(capsys, *base, "--prefill-gpus", "4", "--prefill-tp", "2",
                         "--prefill-gpu", "h100")
    assert status == 0
    assert "4 x H100 SXM5 80GB (prefill) + 4 x H200 SXM 141GB (decode)" in out
    assert "over network" in out
    status, out, _ = run(capsys, *base, "--prefill-gpus", "4", "--prefill-gpu", "h100",
                         "--json")
    assert json.loads(out)["disaggregated"]["prefill_gpu"] == "H100 SXM5 80GB"
    status, _, err = run(capsys, *base, "--prefill-gpus", "4", "--prefill-gpu", "h10")
    assert status == 2 and "--prefill-gpu: unknown GPU 'h10'; did you mean 'h100'" in err
    status, _, err = run(capsys, *base, "--prefill-gpu", "h100")
    assert status == 2 and "--prefill-gpu: it shapes the prefill pool of --prefill-gpus" in err


def test_a_prefill_pass_of_k_prompts_is_the_aggregated_pass_of_k() -> None:
    """The prefill pool's pass of k prompts takes what the aggregated model charges a
    static batch of k prompts on the same GPUs (until 2026-12-07 it took a one-prompt pass
    whatever k, which put a 1k-prompt pool's capacity up to 8 times too high)."""
    cfg = replace(DECODE, max_num_tokens=16384)  # passes of up to 8 prompts of 2,048
    e = estimate_disaggregated(CATALOG, SHAPE, H100, cfg, PrefillPool(gpus=4, tp=2),
                               system=DGX)
    p = e.assumptions["prefill"]
    k = p["prompts_per_pass"]
    assert k > 1
    static = estimate_inference(CATALOG, SHAPE, H100, replace(
        cfg, gpus=2, tp=2, batch=k, output_len=2, batching=Batching.STATIC,
        max_num_tokens=16384), system=DGX)
    assert p["pass_s"] == pytest.approx(static.ttft_s, rel=0.02)
    # two replicas of that pass size at most carry k prompts each a pass
    assert e.prefill_capacity_per_s <= 2 * 8 / p["pass_s"] * (1 + 1e-9)
    one = estimate_inference(CATALOG, SHAPE, H100, replace(
        cfg, gpus=2, tp=2, batch=1, output_len=2, batching=Batching.STATIC), system=DGX)
    assert p["pass_s"] > 1.5 * one.ttft_s  # a pass of several prompts is not one prompt's


def test_the_prefill_pool_takes_its_own_token_budget() -> None:
    """Prefill workers with their own engine settings (Dynamo's PREFILL_MAX_NUM_TOKENS beside
    a decode pool's small DECODE_MAX_NUM_TOKENS): passes of at most their budget's whole
    prompts, and the decode side's budget only where the pool sets none."""
    cfg = replace(DECODE, max_num_tokens=128)  # a decode pool's own budget: a batch of steps
    own = estimate_disaggregated(CATALOG, SHAPE, H100, cfg,
                                 PrefillPool(gpus=4, tp=2, max_num_tokens=3 * 2048),
                                 system=DGX)
    p = own.assumptions["prefill"]
    assert p["max_num_tokens"] == 6144 and 1 <= p["prompts_per_pass"] <= 3
    wide = estimate_disaggregated(CATALOG, SHAPE, H100, cfg,
                                  PrefillPool(gpus=4, tp=2, max_num_tokens=8 * 2048),
                                  system=DGX)
    # a larger budget never carries fewer prompts per second
    assert wide.prefill_capacity_per_s >= own.prefill_capacity_per_s * (1 - 1e-9)
    inherited = estimate_disaggregated(CATALOG, SHAPE, H100, replace(cfg, max_num_tokens=6144),
                                       PrefillPool(gpus=4, tp=2), system=DGX)
    assert inherited.prefill_capacity_per_s == pytest.approx(own.prefill_capacity_per_s)
    # a prompt longer than the budget is one whole prompt a pass (chunked where configured)
    assert estimate_disaggregated(CATALOG, SHAPE, H100, cfg,
                                  PrefillPool(gpus=4, tp=2, max_num_tokens=1024),
                                  system=DGX).assumptions["prefill"]["prompts_per_pass"] == 1
    with pytest.raises(GpuarchError, match="--prefill-max-num-tokens: expected an integer"):
        _disagg_pool(PrefillPool(gpus=4, tp=2, max_num_tokens=-5))


def _disagg_pool(pool: PrefillPool) -> DisaggEstimate:
    return estimate_disaggregated(CATALOG, SHAPE, H100, DECODE, pool, system=DGX)


def test_a_prefill_bound_deployment_decodes_at_the_batch_its_rate_keeps() -> None:
    """With more sequences per decode replica asked than the prefill pool can keep fed,
    the decode replicas run at the batch the prefill rate holds in flight, and a token
    takes that batch's step, not the step of the batch asked."""
    asked = replace(DECODE, batch=96)
    e = _disagg(2, asked)
    assert e.bottleneck == "prefill"
    assert e.batch < 96
    full = _disagg(16, asked)  # prefill to spare: the batch asked
    assert full.bottleneck == "decode" and full.batch == min(96, full.max_batch)
    assert e.tpot_s < full.tpot_s
    # the settled batch carries the prefill pool's rate
    replicas = DECODE.gpus // DECODE.tp
    assert replicas * e.batch / ((256 - 1) * e.tpot_s) >= e.requests_per_s * (1 - 1e-9)


def test_a_disaggregated_validation_point(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    """A serving point that names a prefill pool is priced disaggregated: its concurrency
    spread over the decode replicas, its figures the deployment's; a bad pool names the
    data file's field."""
    point = """[[point]]
id = "dis"
preset = "llama-3.1-70b"
gpu = "h100"
gpus = 4
tp = 4
prefill_gpus = 4
prefill_tp = 2
weight_precision = "fp8"
activation_precision = "fp8"
kv_precision = "fp8"
input_len = 2048
output_len = 256
mode = "serving"
concurrency = 48
output_tokens_per_s = 1000
tpot_s = 0.02
"""
    data = tmp_path / "dis.toml"
    data.write_text(point)
    status, out, err = run(capsys, "validate", "inference", "--data", str(data), "--json")
    assert status == 0, err
    rows = {r["metric"]: r for r in json.loads(out)["figures"]}
    e = estimate_disaggregated(CATALOG, SHAPE, H100, DECODE, PrefillPool(gpus=4, tp=2),
                               concurrency=48, system=DGX)
    # (the JSON holds six significant digits)
    assert rows["output_tokens_per_s"]["predicted"] == pytest.approx(e.output_tokens_per_s,
                                                                     rel=1e-5)
    assert rows["tpot_s"]["predicted"] == pytest.approx(e.tpot_s, rel=1e-5)
    assert rows["tpot_s"]["gpus"] == 8 and rows["tpot_s"]["batching"] == "disaggregated 48"
    status, out, err = run(capsys, "validate", "inference", "--data", str(data), "--explain")
    assert status == 0 and "disaggregated: 4 GPUs decoding " in out
    assert "a replica on average of the client's 48 in flight" in out
    assert "; 4 GPUs prefilling, passes of" in out
    data.write_text(point.replace("prefill_gpus = 4", "prefill_gpus = 3"))
    status, out, err = run(capsys, "validate", "inference", "--data", str(data))
    assert "prefill_gpus: 3 is not a multiple" in out + err
    data.write_text(point.replace('mode = "serving"', 'mode = "max-throughput"'))
    status, out, err = run(capsys, "validate", "inference", "--data", str(data))
    assert "a disaggregated point gives mode" in out + err
    data.write_text(point.replace("prefill_tp = 2", "prefill_tp = 2\nprefill_max_num_tokens = 0"))
    status, out, err = run(capsys, "validate", "inference", "--data", str(data))
    assert status == 2 and "prefill_max_num_tokens: expected an integer >= 1, got 0" in out + err
    data.write_text(point.replace("prefill_gpus = 4\n", ""))
    status, out, err = run(capsys, "validate", "inference", "--data", str(data))
    assert status == 2 and "prefill_tp: it shapes the prefill pool" in out + err


def test_as_point_writes_a_disaggregated_run(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    """estimate infer --prefill-gpus ... --as-point writes the run as a disaggregated point
    (the client's --concurrency, the prefill pool's fields), which reads back as the same
    estimate; what it cannot hold is refused by name."""
    base = ["estimate", "infer", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpus", "4",
            "--tp", "2", "--prefill-gpus", "4", "--prefill-tp", "2", "--input-len", "2048",
            "--output-len", "256", "--weight-precision", "fp8", "--kv-precision", "fp8",
            "--concurrency", "32"]
    status, out, err = run(capsys, *base, "--as-point", "dis")
    assert status == 0, err
    assert "concurrency = 32" in out and "prefill_gpus = 4" in out and "prefill_tp = 2" in out
    data = tmp_path / "dis.toml"
    data.write_text(out + "output_tokens_per_s = 1000\ntpot_s = 0.02\n")
    status, got, err = run(capsys, "validate", "inference", "--data", str(data), "--json")
    assert status == 0, err
    rows = {r["metric"]: r["predicted"] for r in json.loads(got)["figures"]}
    status, est, _ = run(capsys, *base, "--json")
    doc = json.loads(est)
    assert rows["output_tokens_per_s"] == pytest.approx(doc["output_tokens_per_s"], rel=1e-5)
    assert rows["tpot_s"] == pytest.approx(doc["tpot_s"], rel=1e-5)
    status, out, err = run(capsys, *base, "--prefill-max-num-tokens", "4096",
                           "--as-point", "dis")
    assert status == 0 and "prefill_max_num_tokens = 4096" in out
    data.write_text(out + "output_tokens_per_s = 1000\n")
    status, got, err = run(capsys, "validate", "inference", "--data", str(data), "--json")
    status, est, _ = run(capsys, *base, "--prefill-max-num-tokens", "4096", "--json")
    assert json.loads(got)["figures"][0]["predicted"] == pytest.approx(
        json.loads(est)["output_tokens_per_s"], rel=1e-5)
    status, _, err = run(capsys, *base[:-2], "--rate", "2", "--as-point", "dis")
    assert status == 2 and "--prefill-gpus and --rate" in err
    status, _, err = run(capsys, *base, "--prefill-gpu", "h200", "--as-point", "dis")
    assert status == 2 and "--prefill-gpu (a point's pools share its gpu)" in err
    status, _, err = run(capsys, *base[:-2], "--batch", "16", "--as-point", "dis")
    assert status == 2 and "give --concurrency, the requests it kept in flight" in err
    status, _, err = run(capsys, *base, "--batch", "16")
    assert status == 2 and "--batch or --concurrency: give one of them" in err
    status, _, err = run(capsys, *[a for a in base if a not in ("--prefill-gpus",
                                                                "--prefill-tp")][:-1])
    assert status == 2  # (a stray count after dropping the flags above)


def test_a_closed_loop_client() -> None:
    """A client keeping C requests in flight: by Little's law they are the rate times a
    request's time in the system (its time to the first token and its decode); fewer than C
    decode at once, the rate rises with C, and past full decode replicas the rest queue."""
    est = {c: estimate_disaggregated(CATALOG, SHAPE, H100, DECODE, PrefillPool(gpus=4, tp=2),
                                     concurrency=c, system=DGX) for c in (1, 8, 64, 4000)}
    for c, e in est.items():
        loop = e.assumptions["closed_loop"]
        held = e.requests_per_s * (e.ttft_s + (256 - 1) * e.tpot_s)
        assert held == pytest.approx(c, rel=1e-3)
        replicas = DECODE.gpus // DECODE.tp
        assert loop["decoding_per_replica"] * replicas < c
        assert loop["concurrency"] == c
    rates = [est[c].requests_per_s for c in sorted(est)]
    assert rates == sorted(rates)
    # the prefill pool the narrower: the rest wait for a prefill pass (in its queue)
    assert est[4000].bottleneck == "prefill"
    assert est[4000].prefill_utilization > 0.95
    assert est[8].assumptions["closed_loop"]["queue_s"] == 0
    # prefill to spare: full decode replicas, the rest queued for a decode slot
    wide = estimate_disaggregated(CATALOG, SHAPE, H100, DECODE, PrefillPool(gpus=32, tp=2),
                                  concurrency=4000, system=DGX)
    assert wide.bottleneck == "decode" and wide.batch == wide.max_batch
    queued = wide.assumptions["closed_loop"]["queue_s"]
    assert queued > 0
    held = wide.requests_per_s * (wide.ttft_s + (256 - 1) * wide.tpot_s)
    assert held == pytest.approx(4000, rel=1e-3)
    # one request alone: its prefill pass, hand-off and decode, one after the other
    one = est[1]
    assert one.requests_per_s == pytest.approx(1 / one.request_latency_s, rel=1e-3)
    with pytest.raises(GpuarchError, match="--rate and --concurrency"):
        estimate_disaggregated(CATALOG, SHAPE, H100, DECODE, PrefillPool(gpus=4, tp=2),
                               concurrency=8, rate=1.0, system=DGX)
    with pytest.raises(GpuarchError, match="--concurrency: expected an integer >= 1"):
        estimate_disaggregated(CATALOG, SHAPE, H100, DECODE, PrefillPool(gpus=4, tp=2),
                               concurrency=0, system=DGX)
