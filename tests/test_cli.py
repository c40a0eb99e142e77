"""The command line, run in-process through main() and once as a real subprocess."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.cli.main import main

CATALOG = load_catalog()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def test_show_json_has_sourced_fields(capsys: pytest.CaptureFixture[str]) -> None:
    """show --json carries the product in data-file units, its features and its sources."""
    status, out, _ = run(capsys, "show", "h100", "--json")
    assert status == 0
    doc = json.loads(out)
    product = doc["product"]
    assert product["key"] == "h100-sxm5-80gb"
    assert product["memory_gib"] == 80
    assert product["dense_tflops"]["tensor_bf16"] == pytest.approx(989.4, rel=1e-3)
    assert doc["architecture"]["name"] == "Hopper"
    ids = {s["id"] for s in doc["sources"]}
    assert product["source"] in ids
    features = {f["key"]: f for f in doc["features"]}
    assert features["tensor_cores"]["introduced_in"] == "Volta"
    assert features["fp8_transformer_engine"]["explanation"]
    assert doc["derived"]["ridge_point_flop_per_byte"]["tensor_bf16"] > 200


def test_show_text_explains_features(capsys: pytest.CaptureFixture[str]) -> None:
    """The text view names the architecture, peaks and sources."""
    status, out, _ = run(capsys, "show", "A100 SXM4 80GB")
    assert status == 0
    assert "Ampere" in out and "Sources:" in out and "TF32" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "h1000"], "did you mean"),
        (["show", "h200 141gb"], "is ambiguous"),
        (["compare", "h100", "nonsense-gpu-9"], "unknown GPU 'nonsense-gpu-9'"),
        (["list", "--arch", "hoper"], "did you mean 'Hopper'"),
        (["list", "--feature", "tf3"], "did you mean 'tf32'"),
        (["list", "--tier", "datacentre"], "did you mean 'datacenter'"),
        (["list", "--sort", "speed"], "--sort: unknown value 'speed'"),
        (["evolution", "--metric", "bandwith"], "did you mean 'bandwidth'"),
    ],
)
def test_usage_errors_exit_2_without_traceback(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Bad names and flags: exit status 2, a one-line reason, no traceback."""
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert message in err
    assert "Traceback" not in err and out == ""


def test_list_filters_and_sorts(capsys: pytest.CaptureFixture[str]) -> None:
    """--arch/--tier/--feature filter; --sort bandwidth puts the widest memory first."""
    status, out, _ = run(capsys, "list", "--tier", "datacenter", "--feature", "mig",
                         "--sort", "bandwidth", "--json")
    assert status == 0
    products = json.loads(out)["products"]
    assert products and all(p["tier"] == "datacenter" for p in products)
    archs = {p["architecture"] for p in products}
    assert "ampere" in archs and "volta" not in archs
    bws = [p["memory_bandwidth_gb_s"] for p in products]
    assert bws == sorted(bws, reverse=True)
    status, out, _ = run(capsys, "list", "--arch", "pascal,volta")
    assert status == 0 and "P100" in out and "A100" not in out


def test_compare_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    """Ratios are to the first GPU: H100 SXM / A100 SXM4 80GB FP16 Tensor = 989.4 / 312."""
    status, out, _ = run(capsys, "compare", "a100-sxm4-80gb", "h100", "--json")
    assert status == 0
    doc = json.loads(out)
    row = next(r for r in doc["rows"] if r["label"] == "FP16 Tensor dense")
    assert row["ratios"][0] == 1
    assert row["ratios"][1] == pytest.approx(989.4 / 312, rel=1e-3)
    status, out, _ = run(capsys, "compare", "v100", "a100", "h100")
    assert status == 0 and "H100 SXM5 80GB / " in out


def test_features_matrix(capsys: pytest.CaptureFixture[str]) -> None:
    """Every feature appears with the architecture that introduced it."""
    status, out, _ = run(capsys, "features", "--json")
    assert status == 0
    doc = json.loads(out)
    by_key = {f["key"]: f for f in doc["features"]}
    assert by_key["tf32"]["introduced_in"] == "Ampere"
    assert by_key["cuda"]["introduced_in"] == "Tesla"
    assert "Hopper" in by_key["tma"]["architectures"]
    status, out, _ = run(capsys, "features")
    assert status == 0 and "Tensor Cores" in out


def test_evolution_table_and_plots(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """One flagship per generation in order; PNG and SVG plots are written."""
    status, out, _ = run(capsys, "evolution", "--json")
    assert status == 0
    rows = json.loads(out)["rows"]
    assert [r["architecture"] for r in rows][:2] == ["Tesla", "Fermi"]
    assert len(rows) >= 11
    years = [r["year"] for r in rows]
    assert years == sorted(years)  # architecture years, in generation order
    for suffix in (".png", ".svg"):
        target = tmp_path / f"evo{suffix}"
        status, out, _ = run(capsys, "evolution", "--metric", "fp16,bandwidth", "--plot",
                             str(target))
        assert status == 0 and target.stat().st_size > 1000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".gpuarch-")]


def test_bad_plot_path_writes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A bad --plot is a usage error and leaves no file behind."""
    status, _, err = run(capsys, "evolution", "--plot", str(tmp_path / "x.jpg"))
    assert status == 2 and "--plot" in err
    status, _, err = run(capsys, "evolution", "--plot", str(tmp_path / "no" / "x.png"))
    assert status == 2 and "does not exist" in err
    (tmp_path / "d.svg").mkdir()
    status, _, err = run(capsys, "evolution", "--plot", str(tmp_path / "d.svg"))
    assert status == 2 and "is a folder" in err
    assert [p.name for p in tmp_path.iterdir()] == ["d.svg"]


def test_refused_write_is_an_error_not_a_traceback(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder that passes the early checks but refuses the file (a read-only mount, a
    full disk, /proc) ends in an error naming the path, and nothing is left behind."""
    import os

    def refuse(src: str, dst: str) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    target = tmp_path / "evo.svg"
    status, _, err = run(capsys, "evolution", "--plot", str(target))
    assert status == 2 and "cannot write" in err and "Read-only file system" in err
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []


def test_python_m_and_light_imports() -> None:
    """python -m gpuarch works, and show --json imports neither matplotlib nor numpy."""
    code = ("import sys; from gpuarch.cli.main import main; main(['show','h100','--json']); "
            "sys.stderr.write(','.join(m for m in ('matplotlib','numpy','torch') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert json.loads(done.stdout)["product"]["key"] == "h100-sxm5-80gb"
    assert done.stderr == ""
    done = subprocess.run([sys.executable, "-m", "gpuarch", "show", "nope-x"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "unknown GPU" in done.stderr


def test_show_architecture(capsys: pytest.CaptureFixture[str]) -> None:
    """An architecture name shows the generation: its chips, products and new features."""
    status, out, _ = run(capsys, "show", "hopper", "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["architecture"]["key"] == "hopper"
    assert [c["key"] for c in doc["chips"]] == ["GH100"]
    assert "H100 SXM5 80GB" in doc["products"]
    status, out, _ = run(capsys, "show", "sm80")
    assert status == 0 and out.startswith("Ampere") and "GA100" in out


def test_systems(capsys: pytest.CaptureFixture[str]) -> None:
    """Reference systems list their GPU, fabric and per-GPU network in data-file units."""
    status, out, _ = run(capsys, "systems", "--json")
    assert status == 0
    systems = {s["key"]: s for s in json.loads(out)["systems"]}
    assert systems["dgx-h100"]["gpu"] == "h100-sxm5-80gb"
    assert systems["dgx-h100"]["network_bandwidth_per_gpu_gbit_s"] == 400
    status, out, _ = run(capsys, "systems", "dgx a100")
    assert status == 0 and "A100" in out
    status, _, err = run(capsys, "systems", "dgx h1000")
    assert status == 2 and "unknown system" in err


def test_estimate_train_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """estimate train prints the documented keys; a config.json works like a preset."""
    argv = ["estimate", "train", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpus", "64",
            "--tp", "4", "--pp", "4", "--seq-len", "4096", "--global-batch", "128",
            "--recompute", "full", "--tokens", "1e12", "--price-per-gpu-hour", "2",
            "--json"]
    status, out, _ = run(capsys, *argv)
    assert status == 0
    doc = json.loads(out)
    assert doc["parallelism"]["dp"] == 4 and 0 < doc["mfu"] < 1
    assert doc["total"]["cost_usd"] > 0
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({
        "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
        "num_attention_heads": 64, "num_hidden_layers": 80, "num_key_value_heads": 8,
        "vocab_size": 128256}))
    argv[3] = str(cfg)
    status, out, _ = run(capsys, *argv)
    assert status == 0
    assert json.loads(out)["step_time_s"] == pytest.approx(doc["step_time_s"], rel=1e-6)
    status, out, _ = run(capsys, *argv[:-1], "--layers", "40")
    assert status == 0 and "on 64 x H100 SXM5 80GB" in out


def test_estimate_train_text_shows_the_data_parallel_traffic(
        capsys: pytest.CaptureFixture[str]) -> None:
    """With data parallelism the text says how much gradient and parameter traffic a step
    moves and how much of it the compute leaves exposed, the figures of the JSON; one GPU
    has none and no line."""
    argv = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--seq-len",
            "8192", "--global-batch", "16"]
    status, out, _ = run(capsys, *argv, "--gpus", "16")
    assert status == 0
    line = next(x for x in out.splitlines() if "data-parallel traffic" in x)
    _, doc, _ = run(capsys, *argv, "--gpus", "16", "--json")
    traffic = json.loads(doc)["assumptions"]["data_parallel_traffic_s"]
    assert traffic["gather"] > 0 and traffic["reduce"] > 0
    assert "gathers" in line and "reductions" in line and "exposed" in line
    status, out, _ = run(capsys, *argv, "--gpus", "1")
    assert status == 0 and "data-parallel traffic" not in out


def test_estimate_train_tokens_take_suffixes_and_errors_name_the_flag_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--tokens 2T is 2e12 tokens, as in advise train; a bad value is refused naming the
    flag once ("argument --tokens: expected ...", not "--tokens: --tokens: ...")."""
    argv = ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
            "--seq-len", "4096", "--global-batch", "64", "--json"]
    docs = [json.loads(run(capsys, *argv, "--tokens", t)[1]) for t in ("2T", "2e12")]
    assert docs[0]["total"] == docs[1]["total"] and docs[0]["total"]["tokens"] == 2e12
    for bad in ("nan", "-1T", "lots"):
        status, out, err = run(capsys, *argv, f"--tokens={bad}")
        assert status == 2 and out == "" and "argument --tokens: expected" in err
        assert err.splitlines()[-1].count("--tokens") == 1  # the usage lists it too


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--gpus", "12", "--tp", "8"], "--gpus: 12 is not divisible by TP x PP x CP"),
        (["--model", "llama-9"], "unknown model 'llama-9'"),
        # longer than a file name may be: a preset's name, not a file the system refuses
        (["--model", "x" * 300], "unknown model 'xxx"),
        (["--precision", "fp7"], "--precision: unknown value 'fp7'"),
        (["--recompute", "some"], "--recompute: unknown value 'some'"),
        (["--heads", "7"], "heads: 7 does not divide hidden"),
        (["--sliding-layers", "3"], "--sliding-layers: needs sliding-window > 0"),
        (["--sliding-window", "512", "--sliding-layers", "99"],
         "--sliding-layers: 99 exceeds the attention layers 32"),
        (["--ep-dispatcher", "nccl"], "--ep-dispatcher: expected one of alltoall, deepep, "
                                      "got 'nccl'"),
        (["--pp", "2", "--pp-layout", "Et*16|t*15L"],
         "--pp-layout: 31 transformer layers ('t') in 'Et*16|t*15L', the model has 32"),
        (["--pp", "2", "--pp-layout", "Et*16|t*16"], "--pp-layout: the loss ('L') must appear"),
        (["--mtp-layers", "-1"], "--mtp-layers: expected an integer >= 0, got -1"),
    ],
)
def test_estimate_train_errors(capsys: pytest.CaptureFixture[str], extra: list[str],
                               message: str) -> None:
    """Bad flags: exit 2, the flag and value named, no traceback."""
    base = {"--model": "llama-3.1-8b", "--gpu": "h100", "--gpus": "8", "--seq-len": "2048",
            "--global-batch": "64"}
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        base[flag] = value
    argv = ["estimate", "train", *[x for kv in base.items() for x in kv]]
    status, out, err = run(capsys, *argv)
    assert status == 2 and message in err and "Traceback" not in err and out == ""


def test_fsdp_prefetch_needs_zero_3_and_hides_gathers(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """--fsdp-prefetch is a ZeRO-3 option (else exit 2 naming it); on one NVSwitch node the
    per-layer gathers of Llama-3-8B hide behind compute, so the step is shorter."""
    base = ["estimate", "train", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "8",
            "--seq-len", "8192", "--global-batch", "128", "--precision", "fp8", "--json"]
    status, out, err = run(capsys, *base, "--fsdp-prefetch")
    assert status == 2 and "--fsdp-prefetch: needs --zero 3, got --zero 1" in err
    assert out == "" and "Traceback" not in err
    status, out, _ = run(capsys, *base, "--zero", "3")
    plain = json.loads(out)
    status, out, _ = run(capsys, *base, "--zero", "3", "--fsdp-prefetch")
    prefetched = json.loads(out)
    assert status == 0 and prefetched["parallelism"]["fsdp_prefetch"] is True
    assert prefetched["step_time_s"] < plain["step_time_s"]
    assert prefetched["memory_per_gpu_gib"] == plain["memory_per_gpu_gib"]


def test_node_size_defaults_to_the_gpus_reference_system(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """Without --system a GB200 job takes its NVL72 rack as the NVLink domain (72 GPUs), as
    --system gb200-nvl72 would, not an 8-GPU node whose EP all-to-alls cross InfiniBand;
    --gpus-per-node still overrides it, and an H100 keeps its DGX's 8."""
    base = ["estimate", "train", "--model", "qwen3-30b-a3b", "--gpus", "64", "--ep", "64",
            "--seq-len", "4096", "--global-batch", "256", "--json"]
    docs = {}
    for name, extra in (("gpu", ["--gpu", "gb200"]), ("system", ["--system", "gb200-nvl72"]),
                        ("eight", ["--gpu", "gb200", "--gpus-per-node", "8"]),
                        ("h100", ["--gpu", "h100"])):
        status, out, _ = run(capsys, *base, *extra)
        assert status == 0
        docs[name] = json.loads(out)
    assert docs["gpu"]["parallelism"]["gpus_per_node"] == 72
    assert docs["gpu"]["step_time_s"] == docs["system"]["step_time_s"]
    assert docs["eight"]["parallelism"]["gpus_per_node"] == 8
    assert docs["eight"]["step_time_s"] > docs["gpu"]["step_time_s"]
    assert docs["h100"]["parallelism"]["gpus_per_node"] == 8


def test_b300_spans_nodes_on_its_hgx_system(capsys: pytest.CaptureFixture[str]) -> None:
    """A B300 job beyond one node runs on the catalog's HGX B300 system (8 GPUs per node, one
    800 Gb/s ConnectX-8 per GPU) without --system, as --system hgx-b300 would; before that
    system existed it was a usage error asking for --system."""
    base = ["estimate", "train", "--model", "llama3.1-8b", "--gpus", "64", "--seq-len", "8192",
            "--global-batch", "64", "--json"]
    status, out, _ = run(capsys, *base, "--gpu", "b300")
    assert status == 0
    implied = json.loads(out)
    status, out, _ = run(capsys, *base, "--system", "hgx-b300")
    assert status == 0
    named = json.loads(out)
    assert implied["parallelism"]["gpus_per_node"] == 8
    assert implied["step_time_s"] == named["step_time_s"]
    assert implied["system"] == named["system"] == "NVIDIA HGX B300 8-GPU"


def test_cuda_graphs_flag_reaches_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    """--cuda-graphs drops a dropless MoE run's dispatcher wait: the step shortens by exactly
    the host overhead it loses (the per-expert launches that graphs do not capture stay), the
    JSON records the switch and the text layout names it."""
    base = ["estimate", "train", "--model", "qwen3-30b-a3b", "--gpu", "b200", "--gpus", "8",
            "--ep", "8", "--seq-len", "4096", "--global-batch", "64"]
    status, out, _ = run(capsys, *base, "--json")
    plain = json.loads(out)
    status, out, _ = run(capsys, *base, "--cuda-graphs", "--json")
    graphs = json.loads(out)
    assert status == 0 and graphs["parallelism"]["cuda_graphs"] is True
    before = plain["assumptions"]["other_breakdown_s"]["host_overhead"]
    after = graphs["assumptions"]["other_breakdown_s"]["host_overhead"]
    assert before > after >= 0
    # (the JSON's figures carry six significant digits)
    assert plain["step_time_s"] - graphs["step_time_s"] == pytest.approx(before - after,
                                                                         rel=1e-5)
    status, out, _ = run(capsys, *base, "--cuda-graphs")
    assert status == 0 and "CUDA-graphs" in out


def test_shape_overrides_reach_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    """--sliding-window shortens long-context prefill (fewer keys per query); --head-dim and
    --moe-ffn-hidden change the model's size and so the step."""
    def run_json(*extra: str) -> dict:  # type: ignore[type-arg]
        status, out, err = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b",
                               "--gpu", "h100", "--input-len", "16384", "--output-len", "16",
                               "--batch", "1", "--json", *extra)
        assert status == 0, err
        return json.loads(out)  # type: ignore[no-any-return]

    full, windowed = run_json(), run_json("--sliding-window", "1024")
    assert windowed["ttft_s"] < 0.8 * full["ttft_s"]
    assert windowed["memory_per_gpu_gib"]["kv_cache"] < full["memory_per_gpu_gib"]["kv_cache"]
    status, out, _ = run(capsys, "estimate", "train", "--model", "qwen3-30b-a3b", "--gpu",
                         "b200", "--gpus", "8", "--ep", "8", "--seq-len", "4096",
                         "--global-batch", "64", "--json")
    base = json.loads(out)
    status, out, _ = run(capsys, "estimate", "train", "--model", "qwen3-30b-a3b", "--gpu",
                         "b200", "--gpus", "8", "--ep", "8", "--seq-len", "4096",
                         "--global-batch", "64", "--moe-ffn-hidden", "1536", "--json")
    wider = json.loads(out)
    assert status == 0 and wider["step_time_s"] > base["step_time_s"]
    assert wider["model_flops_per_token"] > base["model_flops_per_token"]


def test_roofline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Ops are placed on the roofline: a big GEMM is compute-bound, a GEMV memory-bound."""
    target = tmp_path / "roof.svg"
    status, out, _ = run(capsys, "roofline", "--gpu", "a100", "--op", "gemm:8192,8192,8192",
                         "--op", "gemm:1,8192,8192", "--op", "attention:1,4096,32,128",
                         "--plot", str(target), "--json")
    assert status == 0 and target.stat().st_size > 1000
    doc = json.loads(out)
    assert doc["ridge_point_flop_per_byte"] == pytest.approx(312e12 / 2039e9, rel=1e-3)
    bounds = [op["bound"] for op in doc["ops"]]
    assert bounds[:2] == ["compute", "memory"]
    for op in doc["ops"]:
        assert set(op) >= {"flops", "bytes", "time_s", "achieved_tflops", "bound",
                           "efficiency"}
    status, _, err = run(capsys, "roofline", "--gpu", "a100", "--op", "gemm:1,2")
    assert status == 2 and "expected gemm:M,N,K" in err
    for op, message in (("gemm:inf,4,4", "expected finite numbers"),
                        ("gemm:-4,4,4", "sizes must be at least 1")):
        status, _, err = run(capsys, "roofline", "--gpu", "a100", "--op", op)
        assert status == 2 and message in err and "Traceback" not in err


def test_validate_training(capsys: pytest.CaptureFixture[str]) -> None:
    """validate training prints predicted vs published, per-point error and the mean."""
    status, out, _ = run(capsys, "validate", "training", "--json")
    assert status == 0
    doc = json.loads(out)
    assert len(doc["points"]) >= 50
    first = doc["points"][0]
    # the JSON rounds predicted and published; an error near zero needs an absolute bound
    assert first["predicted"] / first["published"] - 1 == pytest.approx(first["error"],
                                                                        rel=1e-4, abs=1e-5)
    status, out, _ = run(capsys, "validate", "training")
    assert status == 0 and "mean absolute error" in out
    later = [p for p in doc["points"] if p["out_of_sample"]]
    assert later and f"{len(later)} points out of sample" in out
    # the error by model, as for serving: the mean over that model's points (MPT-7B's 23)
    mpt = [abs(p["error"]) for p in doc["points"] if p["model"] == "mpt-7b"]
    assert len(mpt) == 23 and doc["mean_abs_error_by_model"]["mpt-7b"] == pytest.approx(
        sum(mpt) / len(mpt), rel=1e-5)
    assert "by model:  " in out and " mpt-7b " in out
    # how many points are beyond the 20%, in the JSON and in the summary line
    beyond = sum(abs(p["error"]) > 0.20 for p in doc["points"])
    assert doc["beyond_20_percent"] == beyond
    assert f"of points within 20%, {beyond} beyond" in out
    # each point names its framework's family (every one of them: a new row whose framework
    # text names none fails here); --match takes it; the errors are summed up by it
    assert {p["framework"] for p in doc["points"]} == {"megatron", "fsdp", "deepspeed",
                                                       "maxtext", "meta"}
    fsdp = [abs(p["error"]) for p in doc["points"] if p["framework"] == "fsdp"]
    assert doc["mean_abs_error_by_framework"]["fsdp"] == pytest.approx(
        sum(fsdp) / len(fsdp), rel=1e-5)
    assert "by framework: megatron " in out
    status, out, _ = run(capsys, "validate", "training", "--json", "--match", "deepspeed")
    assert status == 0 and {p["id"] for p in json.loads(out)["points"]} == {
        p["id"] for p in doc["points"] if p["framework"] == "deepspeed"}
    status, out, _ = run(capsys, "validate", "inference", "--json")
    figures = json.loads(out)
    assert figures["beyond_35_percent"] == sum(abs(f["error"]) > 0.35
                                               for f in figures["figures"])


def test_estimate_infer(capsys: pytest.CaptureFixture[str]) -> None:
    """estimate infer: documented keys, --batch max, FP8 defaults to W8A8."""
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-70b", "--gpu",
                         "h100", "--tp", "4", "--input-len", "2048", "--output-len", "256",
                         "--batch", "max", "--weight-precision", "fp8", "--kv-precision",
                         "fp8", "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["batch"] == doc["max_batch"] > 1 and doc["fits_in_memory"]
    assert doc["assumptions"]["formats"] == {"weights": "fp8", "activations": "fp8",
                                             "kv_cache": "fp8"}
    assert doc["ttft_s"] > 0 and doc["tpot_s"] > 0
    assert doc["assumptions"]["tp_all_reduce"] == ("TensorRT-LLM's one-shot kernel, or NCCL's "
                                                   "ring, tree or NVLink SHARP where faster")
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-70b", "--gpu",
                         "h100", "--tp", "4", "--input-len", "2048", "--output-len", "256",
                         "--batch", str(doc["batch"]), "--weight-precision", "fp8",
                         "--kv-precision", "fp8", "--no-nvls", "--json")
    assert status == 0 and json.loads(out)["assumptions"]["tp_all_reduce"] == (
        "TensorRT-LLM's one-shot kernel, or NCCL's ring or tree where faster")
    assert json.loads(out)["tpot_s"] > doc["tpot_s"]
    adp = ("estimate", "infer", "--model", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "4",
           "--ep", "4", "--input-len", "2048", "--output-len", "256", "--batch", "64",
           "--batching", "continuous", "--json")
    docs = []
    for extra in ((), ("--adp-balance",)):
        status, out, _ = run(capsys, *adp, *extra)
        assert status == 0
        docs.append(json.loads(out))
    assert [d["assumptions"]["attention_dp_prefill"] for d in docs] == [
        "waits for the busiest rank: per-rank work x1.85",
        "waits for the busiest rank: per-rank work x1.14"]
    assert docs[1]["ttft_s"] < docs[0]["ttft_s"]
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "l4", "--input-len", "512", "--output-len", "128", "--batch", "4",
                         "--weight-precision", "int4")
    assert status == 0 and "weights dequantized" in out and "TPOT" in out
    status, _, err = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "512", "--output-len", "128", "--batch",
                         "lots")
    assert status == 2 and "--batch: expected a number, 'max', 'sweep'" in err
    status, out, err = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                           "h100", "--input-len", "512", "--output-len", "128", "--batch",
                           "8", "--executor", "c++")
    assert status == 2 and out == "" and "Traceback" not in err
    assert "--executor: expected one of python, cpp, vllm, sglang, got 'c++'" in err
    status, out, err = run(capsys, "estimate", "infer", "--model", "gpt-oss-20b", "--gpu",
                           "h200", "--input-len", "512", "--output-len", "128", "--batch",
                           "8", "--window-kv-cache", "fulll")
    assert status == 2 and out == "" and "Traceback" not in err
    assert "--window-kv-cache: expected one of ring, full, got 'fulll'" in err
    assert "did you mean 'full'" in err
    status, out, err = run(capsys, "estimate", "infer", "--model", "llama-2-70b", "--gpu",
                           "h200", "--input-len", "512", "--output-len", "128", "--batch",
                           "8", "--decode-kv-reads", "per-head")
    assert status == 2 and out == "" and "Traceback" not in err
    assert "--decode-kv-reads: expected one of shared, per-query-head, " \
        "chunked-per-query-head, got 'per-head'" in err
    assert "did you mean 'per-query-head'" in err
    status, out, err = run(capsys, "estimate", "infer", "--model", "deepseek-v3", "--gpu",
                           "b200", "--gpus", "8", "--ep", "8", "--weight-precision", "fp4",
                           "--activation-precision", "fp4", "--kv-precision", "fp8",
                           "--input-len", "1024", "--output-len", "256", "--batch", "16",
                           "--no-fp8-mla-decode")
    assert status == 0 and "latent attention computed in 16 bits over the FP8 cache" in out
    status, out, err = run(capsys, "estimate", "infer", "--model", "qwen3-30b-a3b", "--gpu",
                           "h200", "--gpus", "4", "--ep", "4", "--input-len", "512",
                           "--output-len", "128", "--batch", "8", "--moe-comm", "all2all")
    assert status == 2 and out == "" and "Traceback" not in err
    assert "--moe-comm: expected one of alltoall, allgather, got 'all2all'" in err
    # the estimate and the measured layers both take TensorRT-LLM's TRTLLM backend
    for command, words in ((["estimate", "infer", "--model", "qwen3-30b-a3b", "--gpu", "b200",
                             "--input-len", "512", "--output-len", "128", "--batch", "8"],
                            "trtllm, vllm, sglang, sglang-deepep, trtllm-gen"),
                           (["validate", "moe-kernels"],
                            "trtllm, trtllm-gen, vllm, sglang, sglang-deepep")):
        status, out, err = run(capsys, *command, "--moe-kernels", "vlm")
        assert status == 2 and out == "" and "Traceback" not in err
        assert f"--moe-kernels: expected one of {words}, got 'vlm'" in err
        assert "did you mean 'vllm'" in err


@pytest.mark.parametrize(("flag", "value"), [("--num-requests", "0"), ("--max-batch-size", "0"),
                                             ("--num-requests", "many"),
                                             ("--max-num-tokens", "0")])
def test_infer_counts_refuse_an_explicit_zero(capsys: pytest.CaptureFixture[str], flag: str,
                                              value: str) -> None:
    """0 is these flags' unset default (no offline run, no cap); given explicitly it would
    be silently ignored, so it is a usage error naming the flag."""
    status, out, err = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                           "h100", "--input-len", "512", "--output-len", "128", "--batch",
                           "8", "--batching", "continuous", flag, value)
    assert status == 2 and out == "" and "Traceback" not in err
    assert f"{flag}: expected an integer >= 1, got" in err


def test_infer_engine_limits_as_trtllm_bench_chooses_them(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--engine-limits takes the batch and token limits trtllm-bench would choose (Llama-3.1
    -70B FP8 with an FP8 KV cache on one H100 at 1000/1000: 64 and 2,048, worked by hand in
    tests/test_engine_limits.py), a limit given on the command line wins, and a misspelt
    source is a usage error that suggests the right one."""
    base = ("estimate", "infer", "--model", "llama-3.1-70b", "--gpu", "h100",
            "--weight-precision", "fp8", "--kv-precision", "fp8", "--input-len", "1000",
            "--output-len", "1000", "--batch", "max", "--batching", "continuous")
    status, out, _ = run(capsys, *base, "--engine-limits", "trtllm-bench-build", "--json")
    a = json.loads(out)["assumptions"]
    assert status == 0 and a["engine_limits"] == "trtllm-bench-build"
    assert (a["max_batch_size"], a["max_prefill_tokens_per_pass"]) == (64, 2048)
    status, out, _ = run(capsys, *base, "--engine-limits", "trtllm-bench-build",
                         "--max-num-tokens", "4096")
    assert status == 0 and "64 sequences, 4,096 tokens a pass, as trtllm-bench-build" in out
    status, out, err = run(capsys, *base, "--engine-limits", "trtllm-bench-biuld")
    assert status == 2 and out == "" and "Traceback" not in err
    assert "--engine-limits: unknown 'trtllm-bench-biuld'; did you mean " \
           "'trtllm-bench-build'?" in err


def test_validate_inference(capsys: pytest.CaptureFixture[str]) -> None:
    """validate inference prints every published figure against its prediction."""
    status, out, _ = run(capsys, "validate", "inference", "--json")
    assert status == 0
    doc = json.loads(out)
    assert len(doc["figures"]) >= 80
    assert {f["metric"] for f in doc["figures"]} >= {"ttft_s", "tpot_s"}
    # the error by model is the mean over that model's figures
    maverick = [abs(f["error"]) for f in doc["figures"] if f["model"] == "llama-4-maverick"]
    # (JSON rounds every figure to six significant digits)
    assert maverick and doc["mean_abs_error_by_model"]["llama-4-maverick"] == pytest.approx(
        sum(maverick) / len(maverick), rel=1e-5)
    status, out, _ = run(capsys, "validate", "inference")
    assert status == 0 and "by model:  " in out and "by source: " in out

    # --match keeps the figures whose id, source, model, GPU or engine contain every text, and the
    # statistics are over those; --worst keeps the largest errors of them
    status, out, _ = run(capsys, "validate", "inference", "--json", "--match", "MAVERICK",
                         "--match", "h200")
    picked = json.loads(out)["figures"]
    expected = [f for f in doc["figures"] if f["model"] == "llama-4-maverick"
                and f["gpu"].startswith("h200")]
    assert status == 0 and [f["id"] for f in picked] == [f["id"] for f in expected]
    assert json.loads(out)["mean_abs_error"] == pytest.approx(
        sum(abs(f["error"]) for f in expected) / len(expected), rel=1e-5)
    status, out, _ = run(capsys, "validate", "inference", "--json", "--worst", "5")
    worst = json.loads(out)["figures"]
    top = sorted((abs(f["error"]) for f in doc["figures"]), reverse=True)[:5]
    assert [abs(f["error"]) for f in worst] == pytest.approx(top, rel=1e-5)
    # each figure names its engine; --match takes an engine too, and the errors are
    # grouped by it (in the JSON and the text)
    assert {f["engine"] for f in doc["figures"]} == {"trtllm", "vllm", "sglang", "lmdeploy",
                                                      "nim"}
    status, out, _ = run(capsys, "validate", "inference", "--json", "--match", "sglang")
    picked = json.loads(out)["figures"]
    assert status == 0 and [f["id"] for f in picked] == [
        f["id"] for f in doc["figures"] if f["engine"] == "sglang" or "sglang" in f["id"]
        or "sglang" in f["source"]]
    sglang = [abs(f["error"]) for f in doc["figures"] if f["engine"] == "sglang"]
    assert doc["mean_abs_error_by_engine"]["sglang"] == pytest.approx(
        sum(sglang) / len(sglang), rel=1e-5)
    status, out, _ = run(capsys, "validate", "inference")
    assert status == 0 and "by engine: trtllm " in out


def test_validate_inference_text_units(capsys: pytest.CaptureFixture[str]) -> None:
    """The text table gives a duration (TTFT, TPOT, request latency) a unit of time and a
    rate none: a throughput of 19,954 tokens/s is not '19,954 s' (its name ends in _per_s,
    which a test for a '_s' suffix took for seconds)."""
    status, out, _ = run(capsys, "validate", "inference", "--match",
                         "trtllm10-gb200-llama-4-scout-fp4-tp1-128-128")
    (line,) = [ln for ln in out.splitlines() if ln.startswith("trtllm10-gb200")]
    assert status == 0 and "output_tokens_per_s" in line
    assert re.search(r"output_tokens_per_s\s+19,954\s+\S+\s+[-+]", line), line
    status, out, _ = run(capsys, "validate", "inference", "--match",
                         "trtllm090-h100-llama-2-7b-tp1-ttft-128")
    (line,) = [ln for ln in out.splitlines() if ln.startswith("trtllm090-h100")]
    assert status == 0 and re.search(r"ttft_s\s+6\.3 ms\s+\S+ ms\s+[-+]", line), line


def test_validate_explain(capsys: pytest.CaptureFixture[str]) -> None:
    """--explain adds each prediction's breakdown: in --json as each row's 'explain' (the
    estimate's own parts, which add up to its step), in text as a line per point; without
    it the JSON rows carry no breakdown."""
    status, out, _ = run(capsys, "validate", "training", "--json", "--explain", "--match",
                         "mbridge2511-gb200-deepseek-v3-fp8mx")
    (row,) = json.loads(out)["points"]
    x = row["explain"]
    assert status == 0 and sum(x["time_breakdown_s"].values()) == pytest.approx(
        x["step_time_s"], rel=1e-4)
    assert sum(x["compute_breakdown_s"].values()) == pytest.approx(
        x["time_breakdown_s"]["compute"], rel=1e-4)
    status, out, _ = run(capsys, "validate", "training", "--json", "--worst", "1")
    assert "explain" not in json.loads(out)["points"][0]
    status, out, _ = run(capsys, "validate", "inference", "--explain", "--match",
                         "trtllm-r1-b200-fp4-kvfp8")
    assert status == 0 and "where each prediction's time goes" in out
    assert "trtllm-r1-b200-fp4-kvfp8-1k-2k: batch " in out and "decode (" in out
    # an offline run's length, and what its end adds, beside its parts
    status, out, _ = run(capsys, "validate", "inference", "--explain", "--match",
                         "mlperf-inf60-gb200-deepseek-r1-fp4-google")
    assert status == 0 and "a run of 210,624 requests" in out and "(drain)" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["inference", "--match", "mixtrel"], "--match: no compared point has 'mixtrel' in its "
     "id, source, model, GPU, engine or framework; did you mean 'mixtral'?"),
    (["training", "--match", "h100", "--match", "b300"],
     "--match: no compared point matches all of 'h100', 'b300'"),
    (["training", "--worst", "0"], "--worst: expected an integer >= 1, got 0"),
])
def test_validate_selection_errors(capsys: pytest.CaptureFixture[str], argv: list[str],
                                   message: str) -> None:
    """A selection that leaves nothing, or a bad count, is a usage error naming the flag."""
    status, out, err = run(capsys, "validate", *argv)
    assert status == 2 and out == "" and message in err and "Traceback" not in err


def test_numerics_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """formats / matmul / recipe-sim / sparsity: JSON, deterministic for a seed."""
    status, out, _ = run(capsys, "numerics", "formats", "--json")
    assert status == 0
    formats = {f["format"]: f for f in json.loads(out)["formats"]}
    assert formats["fp8_e4m3"]["max"] == 448
    assert "Hopper" in formats["fp8_e4m3"]["tensor_core_architectures"]
    assert "Ampere" not in formats["fp8_e4m3"]["tensor_core_architectures"]
    argv = ["numerics", "matmul", "--m", "64", "--n", "64", "--k", "128", "--format",
            "fp8_e5m2", "--seed", "3", "--gpu", "h100", "--json"]
    first = run(capsys, *argv)[1]
    assert first == run(capsys, *argv)[1]
    doc = json.loads(first)
    assert doc["results"][0]["recipe"] == "current"
    assert doc["predicted_speedup_over_bf16"] == pytest.approx(2.0, rel=1e-3)
    status, out, _ = run(capsys, "numerics", "recipe-sim", "--steps", "8", "--size", "256",
                         "--growth", "1.5", "--history", "4", "--json")
    assert status == 0 and json.loads(out)["delayed_overflow_total"] > 0
    status, out, _ = run(capsys, "numerics", "sparsity", "--m", "32", "--n", "32", "--k",
                         "64", "--gpu", "a100", "--json")
    doc = json.loads(out)
    assert doc["mask_valid"] and doc["predicted_speedup_upper_bound"] == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["numerics", "matmul", "--format", "fp7"], "--format: unknown value 'fp7'"),
        (["numerics", "matmul", "--format", "int8", "--recipe", "mx"],
         "--format int8 needs --recipe"),
        (["numerics", "matmul", "--format", "fp8_e4m3", "--recipe", "nvfp4"],
         "--recipe nvfp4 needs --format fp4_e2m1"),
        (["numerics", "matmul", "--k", "100", "--recipe", "mx"], "multiple of the block"),
        (["numerics", "recipe-sim", "--format", "bf16"], "not a scaled narrow float"),
    ],
)
def test_numerics_errors(capsys: pytest.CaptureFixture[str], argv: list[str],
                         message: str) -> None:
    """Bad numerics flags exit 2 and name the flag."""
    status, out, err = run(capsys, *argv)
    assert status == 2 and message in err and out == ""


def test_probe_and_doctor_on_the_demo_machine(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    """probe --fake demo: two H100s on NVLink; doctor reports findings; --save needs --bench."""
    status, out, _ = run(capsys, "probe", "--fake", "demo", "--json")
    assert status == 0
    report = json.loads(out)["report"]
    assert [g["product_key"] for g in report["gpus"]] == ["h100-sxm5-80gb"] * 2
    assert report["topology"][0]["nvlinks"] == 4
    status, out, _ = run(capsys, "doctor", "--fake", "demo", "--json")
    assert status == 0
    rules = {f["rule"] for f in json.loads(out)["findings"]}
    assert "amp-advice" in rules
    status, _, err = run(capsys, "probe", "--save", str(tmp_path / "c.json"))
    assert status == 2 and "add --bench" in err
    status, _, err = run(capsys, "probe", "--fake", str(tmp_path / "missing.json"))
    assert status == 2 and "--fake: cannot read" in err


def test_probe_bench_saves_a_calibration_file(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    """probe --bench --quick --save writes a calibration file that loads back."""
    pytest.importorskip("torch")
    from gpuarch.probe.calibration import load_calibration

    target = tmp_path / "cal.json"
    status, out, _ = run(capsys, "probe", "--bench", "--quick", "--save", str(target),
                         "--json")
    assert status == 0 and json.loads(out)["saved"] == str(target)
    cal = load_calibration(target)
    assert cal.gemm and cal.bandwidth


def test_advise_train_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """JSON has the ranked options and the front; the plot is written; piped output has no
    progress bar; the reasons name the hardware."""
    plot = tmp_path / "front.png"
    status, out, err = run(capsys, "advise", "train", "--model", "llama-3.1-8b", "--tokens",
                           "100B", "--max-gpus", "64", "--gpu", "h100,a100",
                           "--deadline-days", "60", "--objective", "cost", "--json",
                           "--plot", str(plot), "--price", "h100=2.0")
    assert status == 0, err
    doc = json.loads(out)
    assert doc["top"] and doc["pareto"] and doc["objective"] == "cost"
    assert all(o["time_days"] <= 60 and o["gpus"] <= 64 for o in doc["top"])
    assert doc["assumptions"]["prices"]["h100-sxm5-80gb"]["from"] == "override"
    assert "dense" in doc["top"][0]["reason"] and plot.stat().st_size > 0
    assert "[#" not in err
    status, out, err = run(capsys, "advise", "train", "--model", "llama-3.1-8b", "--tokens",
                           "1e11", "--max-gpus", "16", "--gpu", "hopper")
    assert status == 0 and "Pareto front" in out and "why:" in out


def test_advise_infer_cli(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "advise", "infer", "--model", "llama-3.1-8b",
                           "--input-len", "2048", "--output-len", "256", "--concurrency", "64",
                           "--tpot-ms", "60", "--gpu", "h100,h200,l40s")
    assert status == 0, err
    assert "ranked by cost per million output tokens" in out and "bandwidth-bound" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--tokens", "lots"], "--tokens: expected a positive number"),
        (["train", "--tokens", "1T", "--gpu", "h10"], "--gpu: unknown"),
        (["train", "--tokens", "1T", "--tier", "cloud"], "--tier: unknown tier 'cloud'"),
        (["train", "--tokens", "1T", "--price", "h100"], "--price: expected GPU=USD"),
        (["train", "--tokens", "1T", "--precision", "fp7"], "--precision: unknown precision"),
        (["train", "--tokens", "1T", "--objective", "speed"], "--objective: unknown value"),
        (["infer", "--input-len", "8", "--output-len", "8", "--rate", "1",
          "--concurrency", "2"], "not allowed with argument"),
        (["infer", "--input-len", "0", "--output-len", "8"], "--input-len: expected >= 1"),
    ],
)
def test_advise_errors(capsys: pytest.CaptureFixture[str], argv: list[str],
                       message: str) -> None:
    """Bad flags: exit 2, the flag and value named, no traceback, nothing on stdout."""
    status, out, err = run(capsys, "advise", argv[0], "--model", "llama-3.1-8b", *argv[1:])
    assert status == 2 and message in err and "Traceback" not in err and out == ""


def test_cached_prefix_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """--cached-prefix reaches the estimate and the advisor, and a prefix as long as the
    prompt is a usage error naming the flag."""
    base = ["--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "2048",
            "--output-len", "256"]
    status, out, _ = run(capsys, "estimate", "infer", *base, "--batch", "8",
                         "--cached-prefix", "1500", "--json")
    assert status == 0 and json.loads(out)["assumptions"]["cached_prefix"] == 1500
    status, out, _ = run(capsys, "estimate", "infer", *base, "--batch", "8",
                         "--cached-prefix", "1500")
    assert "prefix cache  1,500 of the prompt's tokens cached" in out
    status, out, _ = run(capsys, "advise", "infer", *base, "--cached-prefix", "1500",
                         "--top", "3", "--json")
    assert status == 0 and json.loads(out)["assumptions"]["cached_prefix"] == 1500
    for command in (["estimate", "infer", *base, "--batch", "8"], ["advise", "infer", *base]):
        status, out, err = run(capsys, *command, "--cached-prefix", "2048")
        assert status == 2 and out == "" and "--cached-prefix: expected tokens" in err


def test_output_len_cv_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """--output-len-cv reaches the estimate (JSON and text) and the advisor, whose searched
    deployments then hold fewer requests than at one length; a negative spread is a usage
    error naming the flag in both."""
    base = ["--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "1024",
            "--output-len", "512"]
    cont = [*base, "--batch", "max", "--batching", "continuous"]
    status, out, _ = run(capsys, "estimate", "infer", *cont, "--output-len-cv", "1", "--json")
    doc = json.loads(out)
    assert status == 0 and doc["assumptions"]["mean_output_in_flight"] == 1024
    status, out, _ = run(capsys, "estimate", "infer", *cont, "--json")
    assert json.loads(out)["max_batch"] > doc["max_batch"]
    status, out, _ = run(capsys, "estimate", "infer", *cont, "--output-len-cv", "1")
    assert "output lengths spread 1 (sd / mean)" in out and "offline" not in out
    # an offline run says how it is priced, and with a spread what is left out
    status, out, _ = run(capsys, "estimate", "infer", *cont, "--num-requests", "4000")
    assert status == 0 and "a run of 4,000 requests" in out and "drain" not in out
    assert "the engine admits a few whole prompts an iteration" in out
    status, out, _ = run(capsys, "estimate", "infer", *cont, "--num-requests", "4000",
                         "--output-len-cv", "1")
    assert "a run of 4,000 requests" in out and "the drain of the longest answers" in out
    status, out, _ = run(capsys, "estimate", "infer", *cont, "--num-requests", "4000",
                         "--output-len-cv", "1", "--max-output-len", "8192")
    assert status == 0 and "the drain, the answers admitted last running to up to 8,192" in out
    status, out, err = run(capsys, "estimate", "infer", *cont, "--num-requests", "4000",
                           "--max-output-len", "8192")
    assert status == 2 and out == "" and "--max-output-len: prices the end" in err
    status, out, _ = run(capsys, "advise", "infer", *base, "--output-len-cv", "1",
                         "--top", "3", "--json")
    assert status == 0 and json.loads(out)["assumptions"]["output_len_cv"] == 1
    for command in (["estimate", "infer", *cont], ["advise", "infer", *base]):
        status, out, err = run(capsys, *command, "--output-len-cv", "-1")
        assert status == 2 and out == "" and "--output-len-cv: expected a number" in err


@pytest.mark.parametrize(("argv", "flag"), [
    (["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
      "--seq-len", "2048", "--global-batch", "64", "--tokens", "nan"], "--tokens"),
    (["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
      "--seq-len", "2048", "--global-batch", "64", "--price-per-gpu-hour", "inf"],
     "--price-per-gpu-hour"),
    (["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "512",
      "--output-len", "64", "--rate", "nan"], "--rate"),
    (["advise", "infer", "--gpu", "h100", "--rate", "inf"], "--rate"),
    (["advise", "infer", "--gpu", "h100", "--tpot-ms", "-5"], "--tpot-ms"),
    (["advise", "infer", "--gpu", "h100", "--price", "h100=nan"], "--price"),
    (["advise", "train", "--gpu", "h100", "--tokens", "1e999"], "--tokens"),
    (["advise", "train", "--gpu", "h100", "--network", "nan"], "--network"),
    (["advise", "train", "--gpu", "h100", "--deadline-days", "0"], "--deadline-days"),
])
def test_non_finite_and_non_positive_quantities_are_refused(
        capsys: pytest.CaptureFixture[str], argv: list[str], flag: str) -> None:
    """A rate, price, cap or token count must be a finite number > 0: nan, inf, zero and
    negatives are usage errors naming the flag (nan once printed 'nan days', and made the
    serving advisor crash)."""
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == "" and f"{flag}:" in err and "Traceback" not in err


@pytest.mark.parametrize(("argv", "message"), [
    (["numerics", "recipe-sim", "--size", "-1"], "--size: expected an integer >= 1"),
    (["numerics", "recipe-sim", "--history", "0"], "--history: expected an integer >= 1"),
    (["numerics", "sparsity", "--seed", "-1"], "--seed: expected an integer >= 0"),
    (["numerics", "matmul", "--m", "200000", "--n", "200000", "--k", "8"],
     "--m x --n: 200000 x 200000 elements is more than"),
    (["numerics", "recipe-sim", "--size", "100000000000"], "--size: 100,000,000,000 elements"),
    # these once overflowed FP64 or NumPy's int64, or ran for ever, with a traceback
    (["advise", "train", "--model", "llama-3.1-8b", "--max-gpus", "1" + "0" * 20],
     "--max-gpus: expected an integer from 1 to 131,072, got 1000"),
    (["advise", "train", "--model", "llama-3.1-8b", "--ffn-hidden", "1" + "0" * 20],
     "--ffn-hidden: expected an integer from 0 to 16,777,216"),
    (["advise", "train", "--model", "llama-3.1-8b", "--seq-len", "1" + "0" * 20],
     "--seq-len: expected an integer from 1 to 16,777,216"),
    (["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
      "--seq-len", str(2**24 + 1), "--global-batch", "8"],
     "--seq-len: expected at most 16,777,216 tokens"),
    (["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
      "1" + "0" * 20, "--output-len", "8", "--batch", "1"],
     "--input-len: expected at most 16,777,216 tokens"),
    # every listed configuration is explained: a --top past the search's size ran for ever
    (["advise", "train", "--model", "llama-3.1-8b", "--top", "1" + "0" * 20],
     "--top: expected an integer from 1 to 1,000"),
    (["advise", "infer", "--model", "llama-3.1-8b", "--top", "1001"],
     "--top: expected an integer from 1 to 1,000, got 1001"),
    (["numerics", "matmul", "--margin", "1" + "0" * 20], "--margin: expected an integer from"),
    (["numerics", "recipe-sim", "--margin", "-101"], "--margin: expected an integer from"),
    (["numerics", "recipe-sim", "--growth", "1e20"],
     "--growth: 1e+20 per step over 50 steps scales the tensor by 2^3255"),
    (["numerics", "recipe-sim", "--pattern", "decay", "--growth", "1e10", "--steps", "40"],
     "scales the tensor by 2^-1296"),
    (["numerics", "recipe-sim", "--steps", "1" + "0" * 20], "--steps: 100,000,000,000,000,"),
])
def test_sizes_out_of_range_are_usage_errors(capsys: pytest.CaptureFixture[str],
                                             argv: list[str], message: str) -> None:
    """Negative sizes and seeds once crashed inside NumPy, sizes past the machine's memory
    ran out of it, margins, growths and step counts past FP64 overflowed it, and model sizes
    and GPU counts past int64 overflowed the advisor's arrays; all are usage errors naming
    the flag."""
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == "" and message in err and "Traceback" not in err


def test_moe_imbalance_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """--moe-imbalance reaches the model and the text layout; a value below 1 is a usage
    error naming the flag, with no traceback."""
    base = ["estimate", "train", "--model", "qwen3-30b-a3b", "--gpu", "b200", "--gpus", "8",
            "--ep", "8", "--seq-len", "4096", "--global-batch", "64"]
    status, out, _ = run(capsys, *base, "--moe-imbalance", "1.5")
    assert status == 0 and "imbalance 1.5x" in out
    status, out, _ = run(capsys, *base, "--moe-imbalance", "1.5", "--json")
    assert json.loads(out)["parallelism"]["moe_imbalance"] == 1.5
    status, _, err = run(capsys, *base, "--moe-imbalance", "0.5")
    assert status == 2 and "--moe-imbalance: expected" in err and "0.5" in err
    assert "Traceback" not in err
    # Qwen3-30B-A3B at EP 8: 16 experts per rank, 8 per token, so one rank can take at most
    # every token's eight copies, 8x the mean of one; 8 is allowed, more is a usage error.
    status, _, _ = run(capsys, *base, "--moe-imbalance", "8")
    assert status == 0
    for beyond in ("8.5", "inf"):
        status, _, err = run(capsys, *base, "--moe-imbalance", beyond)
        assert status == 2 and f"--moe-imbalance: {beyond} exceeds 8" in err
        assert "Traceback" not in err
    # 'unbalanced': the fitted load of routing that nothing balances, the same step as the
    # number itself; a misspelt word is a usage error with "did you mean"
    status, out, _ = run(capsys, *base, "--moe-imbalance", "unbalanced", "--json")
    named = json.loads(out)
    status, out, _ = run(capsys, *base, "--moe-imbalance", "1.89", "--json")
    assert named["parallelism"]["moe_imbalance"] == 1.89
    assert named["step_time_s"] == json.loads(out)["step_time_s"]
    status, out, err = run(capsys, *base, "--moe-imbalance", "unbalance")
    assert status == 2 and out == "" and "did you mean 'unbalanced'" in err
    assert "Traceback" not in err


def test_the_cli_margin_bound_is_the_labs() -> None:
    """--margin is parsed without importing NumPy, so the CLI repeats the lab's bound."""
    from gpuarch.cli.numerics_cmds import _margin
    from gpuarch.numerics.recipes import MAX_MARGIN

    assert _margin(str(MAX_MARGIN)) == MAX_MARGIN and _margin(str(-MAX_MARGIN)) == -MAX_MARGIN
    for outside in (MAX_MARGIN + 1, -MAX_MARGIN - 1):
        with pytest.raises(argparse.ArgumentTypeError, match="--margin"):
            _margin(str(outside))


def test_an_output_path_no_file_system_takes_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A file name longer than the file system allows was an OSError with a traceback; it
    is an error naming the flag and the reason, and nothing is written."""
    name = tmp_path / ("x" * 300 + ".json")
    status, out, err = run(capsys, "probe", "--ops", str(name))
    assert status == 2 and out == "" and "--ops: cannot write" in err
    assert "Traceback" not in err and list(tmp_path.iterdir()) == []


def test_a_gpu_without_bf16_computes_in_fp16_by_default(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """BF16 came with Ampere: on V100 and T4 the 16-bit format is FP16, as frameworks and
    engines run it there (BF16 checkpoints in FP16). Training had taken its default
    BF16 at V100's FP32 rate, serving labelled V100's formats BF16 and ran their attention
    at the FP32 rate, and the training advisor searched nothing on V100 (BF16 and FP8 both
    fall back) without saying why. BF16 asked for by name stays, with a note."""
    from gpuarch.catalog import load_catalog
    from gpuarch.perf.precision import Precision, lacks_bf16, sixteen_bit

    catalog = load_catalog()
    for key, lacks in (("v100-sxm2-32gb", True), ("tesla-t4", True),
                       ("tesla-p100-sxm2-16gb", True), ("a100-sxm4-80gb", False),
                       ("h100-sxm5-80gb", False), ("tesla-k80", False),
                       ("rtx-pro-6000-blackwell", False)):  # K80: no 16-bit; RTX PRO: unpublished
        assert lacks_bf16(catalog.product(key)) is lacks, key
        assert sixteen_bit(catalog.product(key)) is (Precision.FP16 if lacks else
                                                     Precision.BF16)
    infer = ["estimate", "infer", "--model", "llama-3.1-8b", "--input-len", "1000",
             "--output-len", "200", "--batch", "8"]
    for gpu, formats in (("v100", "fp16"), ("t4", "fp16"), ("a100", "bf16")):
        status, out, _ = run(capsys, *infer, "--gpu", gpu, "--json")
        assert status == 0
        assert set(json.loads(out)["assumptions"]["formats"].values()) == {formats}, gpu
    status, out, _ = run(capsys, *infer, "--gpu", "v100", "--weight-precision", "bf16")
    assert status == 0 and "weights bf16" in out and "has no BF16 (it came with Ampere)" in out
    train = ["estimate", "train", "--model", "llama-3.1-8b", "--gpus", "8", "--seq-len",
             "2048", "--global-batch", "64", "--json"]
    fp16, bf16 = (json.loads(run(capsys, *train, "--gpu", "v100", *extra)[1])
                  for extra in ((), ("--precision", "bf16")))
    assert fp16["parallelism"]["precision"] == "fp16"
    assert fp16["assumptions"]["precision_fallback"] is None
    assert "FP32 rate" in bf16["assumptions"]["precision_fallback"]
    assert bf16["step_time_s"] > 4 * fp16["step_time_s"]
    status, out, _ = run(capsys, "roofline", "--gpu", "v100", "--json")
    assert status == 0 and json.loads(out)["precision"] == "fp16"
    advise = ["advise", "train", "--model", "llama-3.1-8b", "--tokens", "1e9", "--gpu",
              "v100", "--max-gpus", "16", "--json"]
    doc = json.loads(run(capsys, *advise)[1])
    assert doc["top"] and {o["precision"] for o in doc["top"]} == {"fp16"}
    doc = json.loads(run(capsys, *advise, "--precision", "fp8")[1])
    assert doc["top"] == [] and doc["skipped"] == [
        ["v100-sxm2-32gb", "runs none of the precisions searched (fp8) on its Tensor Cores"]]
    status, out, _ = run(capsys, "advise", "infer", "--model", "llama-3.1-8b", "--gpu", "t4",
                         "--json")
    options = json.loads(out)["top"]
    assert options and all("bf16" not in json.dumps(o) for o in options)


def test_a_binary_input_file_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    """A file that is not UTF-8 text given for a model config, a price list, a calibration
    or a recorded machine was a UnicodeDecodeError with a traceback; it is an error naming
    the flag and the file."""
    blob = tmp_path / "blob.json"
    blob.write_bytes(b"\xff\xfe\x00binary")
    train = ["estimate", "train", "--gpu", "h100", "--gpus", "8", "--seq-len", "2048",
             "--global-batch", "64"]
    for argv, said in (([*train, "--model", str(blob)], f"{blob}: not UTF-8 text"),
                       ([*train, "--model", "llama-3.1-8b", "--calibration", str(blob)],
                        f"--calibration: {blob} is not UTF-8 text"),
                       (["advise", "infer", "--model", "llama-3.1-8b", "--prices", str(blob)],
                        f"--prices: {blob} is not UTF-8 text"),
                       (["probe", "--fake", str(blob)], f"--fake: {blob} is not UTF-8 text")):
        status, out, err = run(capsys, *argv)
        assert status == 2 and out == "" and said in err and "Traceback" not in err, argv


def test_the_fuzzer_reports_what_a_user_must_not_see(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """scripts/fuzz_cli.py (`make fuzz`) calls commands in-process: a clean usage error
    passes, a traceback, an odd exit status or a call past its limit is reported, and every
    config.json family it varies reads as given."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "fuzz_cli.py"
    spec = importlib.util.spec_from_file_location("fuzz_cli", path)
    assert spec and spec.loader
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    assert fuzz.run(["show", "h1000"], 10) is None  # exit 2, "did you mean"
    assert "--gpu" in fuzz.flags(["roofline"])

    def crashes(argv: list[str]) -> int:
        raise ZeroDivisionError("inside the model")

    monkeypatch.setattr(fuzz, "main", crashes)
    what, detail = fuzz.run(["anything"], 10)
    assert what == "traceback" and "ZeroDivisionError: inside the model" in detail
    monkeypatch.setattr(fuzz, "main", lambda argv: 3)
    assert fuzz.run(["anything"], 10)[0] == "exit status 3"

    def hangs(argv: list[str]) -> int:
        while True:
            pass

    monkeypatch.setattr(fuzz, "main", hangs)
    assert fuzz.run(["anything"], 1)[0] == "ran past the limit"
    from gpuarch.workloads.hf import shape_from_hf_config

    for family, config in fuzz.CONFIGS.items():
        file = tmp_path / f"{family}.json"
        file.write_text(json.dumps(config))
        assert shape_from_hf_config(file).layers > 0, family


def test_low_precision_weights_where_the_tensor_cores_lack_the_format(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--weight-precision fp8 on A100 (no FP8 Tensor Cores) or fp4 on H100 (no FP4) runs
    weight-only, as engines run it there: 16-bit activations and KV cache by default (they
    had been labelled FP8/FP4, a format the GPU cannot compute in), with a note saying why
    the weights are dequantized; where the format is native (FP8 on H100, FP4 on B200) the
    activations follow the weights, as before."""
    base = ["estimate", "infer", "--model", "llama-3.1-8b", "--input-len", "1000",
            "--output-len", "200", "--batch", "8", "--json"]
    for gpu, weights, activations in (("a100", "fp8", "bf16"), ("h100", "fp4", "bf16"),
                                      ("v100", "fp8", "fp16"), ("h100", "fp8", "fp8"),
                                      ("b200", "fp4", "fp4")):
        status, out, _ = run(capsys, *base, "--gpu", gpu, "--weight-precision", weights)
        assert status == 0
        doc = json.loads(out)["assumptions"]
        assert doc["formats"]["activations"] == activations, (gpu, weights)
        fallback = doc["precision_fallback"]
        if activations != weights:
            assert doc["formats"]["kv_cache"] == activations
            assert f"publishes no {weights.upper()} Tensor Core peak; {weights} weights are " \
                   "dequantized to 16 bits" in fallback, (gpu, weights)
        else:
            assert fallback is None, (gpu, weights)
    # a checkpoint stored in FP8 (DeepSeek-V3's) runs the same way on A100
    status, out, _ = run(capsys, *base, "--model", "deepseek-v3", "--gpu", "a100", "--gpus",
                         "8", "--tp", "8")
    formats = json.loads(out)["assumptions"]["formats"]
    assert status == 0 and formats == {"weights": "fp8", "activations": "bf16",
                                       "kv_cache": "bf16"}


def test_a_gpu_with_no_published_peak_cannot_be_estimated(
        capsys: pytest.CaptureFixture[str]) -> None:
    """GeForce GTX 1080 Ti's product page gives no TFLOPS, so the catalog leaves its peaks
    empty: estimates on it are usage errors that say so, naming the flag."""
    status, out, err = run(capsys, "estimate", "infer", "--model", "llama-3.2-1b", "--gpu",
                           "gtx 1080 ti", "--input-len", "128", "--output-len", "16",
                           "--batch", "1")
    assert status == 2 and out == "" and "--gpu: GeForce GTX 1080 Ti publishes no FP32 or " \
        "16-bit peak (the catalog leaves unpublished figures empty)" in err
    status, out, err = run(capsys, "estimate", "train", "--model", "llama-3.2-1b", "--gpu",
                           "gtx 1080 ti", "--gpus", "1", "--seq-len", "1024",
                           "--global-batch", "8")
    assert status == 2 and "publishes no peak usable for bf16 matrix math (the catalog " \
        "leaves unpublished figures empty)" in err


@pytest.mark.parametrize(("model", "flags", "message"), [
    ("llama-3.1-8b", ("--adp-balance",), "--adp-balance: applies to a mixture-of-experts"),
    ("llama-3.1-8b", ("--moe-imbalance", "1.5"), "--moe-imbalance: applies to a mixture"),
    ("llama-3.1-8b", ("--moe-comm", "allgather"), "--moe-comm: applies to a mixture"),
    ("llama-3.1-8b", ("--no-fp8-mla-decode",), "no multi-head latent attention"),
    ("llama-3.1-8b", ("--window-kv-cache", "full"), "no sliding-window layers"),
    ("llama-2-7b", ("--decode-kv-reads", "per-query-head"), "a KV head per query head"),
    ("gpt-oss-20b", ("--decode-kv-reads", "chunked-per-query-head"),
     "gpt-oss-20b has no chunked-attention layers"),
])
def test_flags_for_another_kind_of_model_are_refused(
        capsys: pytest.CaptureFixture[str], model: str, flags: tuple[str, ...],
        message: str) -> None:
    """A flag that shapes experts, latent attention, sliding windows or grouped KV heads is
    refused by name on a model without them, not silently ignored."""
    status, _, err = run(capsys, "estimate", "infer", "--model", model, "--gpu", "h100",
                         "--input-len", "1000", "--output-len", "100", "--batch", "8", *flags)
    assert status == 2 and message in err and "Traceback" not in err


def test_the_same_flags_apply_to_models_that_have_the_parts(
        capsys: pytest.CaptureFixture[str]) -> None:
    for model, flags in (("gpt-oss-20b", ("--window-kv-cache", "full")),
                         ("mixtral-8x7b", ("--moe-imbalance", "1.2", "--gpus", "2", "--ep",
                                           "2", "--tp", "2")),
                         ("llama-3.1-8b", ("--decode-kv-reads", "per-query-head")),
                         ("llama-4-scout", ("--decode-kv-reads", "chunked-per-query-head",
                                            "--gpus", "4", "--tp", "4"))):
        status, _, _ = run(capsys, "estimate", "infer", "--model", model, "--gpu", "h100",
                           "--input-len", "1000", "--output-len", "100", "--batch", "8",
                           *flags)
        assert status == 0, (model, flags)


@pytest.mark.parametrize("flags", [
    ("--etp", "1"), ("--moe-token-drop",), ("--dispatcher-wait-us", "100"),
    ("--ep-dispatcher", "deepep"), ("--expert-launches", "grouped"),
    ("--moe-imbalance", "unbalanced"), ("--ep-comm-overlap",)])
def test_train_refuses_expert_flags_on_a_dense_model(
        capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]) -> None:
    status, _, err = run(capsys, "estimate", "train", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64",
                         *flags)
    assert status == 2 and f"{flags[0]}: applies to a mixture-of-experts" in err
    assert "Traceback" not in err


def test_train_cp_comm_type_needs_context_parallelism(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = ("estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
            "--seq-len", "4096", "--global-batch", "64", "--cp-comm-type", "a2a")
    status, _, err = run(capsys, *base)
    assert status == 2 and "--cp-comm-type" in err and "--cp > 1" in err
    status, _, _ = run(capsys, *base, "--cp", "2")
    assert status == 0


def test_show_lists_the_kv_cache_formats_the_gpu_keeps(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`show` says which KV cache formats serving engines store on the GPU, and what an
    unsupported one is kept as (perf/data/kv_cache_formats.toml): an H100 keeps FP8, INT8
    and INT4 and holds an NVFP4 cache as FP8; a B200 keeps NVFP4."""
    status, out, _ = run(capsys, "show", "h100", "--json")
    assert status == 0
    doc = json.loads(out)
    assert {"product", "architecture", "sources"} <= set(doc)
    kept = {r["format"]: r["kept_as"] for r in doc["kv_cache_formats"]}
    assert kept == {"fp8": "fp8", "int8": "int8", "int4": "int4", "fp4": "fp8"}
    assert all(r["source"].startswith("https://") for r in doc["kv_cache_formats"])
    status, out, _ = run(capsys, "show", "b200", "--json")
    assert {r["format"]: r["kept_as"] for r in json.loads(out)["kv_cache_formats"]}["fp4"] \
        == "fp4"
    status, out, _ = run(capsys, "show", "h100")
    assert "KV cache formats below 16 bits" in out and "FP4   kept as FP8: an NVFP4" in out


def test_norm_flags_override_a_preset(capsys: pytest.CaptureFixture[str]) -> None:
    """--qk-norm and --sandwich-norms change a preset's shape as the other model flags do:
    Llama 3.1 8B with per-head query-key norms and four norms a layer holds 32 x (2 x 128
    + 2 x 4,096) more weights; a value the flag does not know is a usage error naming it."""
    from gpuarch.cli.estimate_cmds import resolve_model
    from gpuarch.cli.main import build_parser
    from gpuarch.workloads import count_params

    base = ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len",
            "100", "--output-len", "10", "--batch", "1"]
    plain = resolve_model(build_parser().parse_args(base))
    normed = resolve_model(build_parser().parse_args(
        [*base, "--qk-norm", "head", "--sandwich-norms"]))
    assert normed.sandwich_norms and not plain.sandwich_norms
    assert count_params(normed).total - count_params(plain).total == 32 * (2 * 128
                                                                           + 2 * 4096)
    status, _, _ = run(capsys, *base, "--qk-norm", "full", "--no-sandwich-norms")
    assert status == 0
    status, _, err = run(capsys, *base, "--qk-norm", "sideways")
    assert status == 2 and "--qk-norm: unknown value 'sideways'" in err


def test_estimate_infer_names_the_admission_policy(capsys: pytest.CaptureFixture[str]) -> None:
    """--scheduler-policy max_utilization: the text says the largest batch holds each
    sequence at its mean context, and JSON's assumptions name the policy; a typo gets the
    choices and a suggestion, exit 2."""
    base = ("estimate", "infer", "--model", "llama-2-70b", "--gpu", "h200", "--input-len",
            "222", "--output-len", "292", "--batch", "max", "--batching", "continuous",
            "--weight-precision", "fp8", "--kv-precision", "fp8")
    status, out, _ = run(capsys, *base, "--scheduler-policy", "max_utilization")
    assert status == 0 and "(each sequence at its mean context: max_utilization)" in out
    status, out, _ = run(capsys, *base)
    assert status == 0 and "mean context" not in out
    status, out, _ = run(capsys, *base, "--scheduler-policy", "max_utilization", "--json")
    assert json.loads(out)["assumptions"]["scheduler_policy"] == "max_utilization"
    status, out, err = run(capsys, *base, "--scheduler-policy", "max_util")
    assert status == 2 and out == "" and "did you mean 'max_utilization'" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["advise", "train", "--gpus", "64"],
         "gpuarch advise train: error: unrecognized arguments: --gpus 64; --gpus: did you "
         "mean --gpu or --max-gpus?"),
        (["estimate", "infer", "--model", "llama-3.1-8b", "--input-len", "8",
          "--output-len", "8", "--weight-precison", "fp8"],
         "gpuarch estimate infer: error: unrecognized arguments: --weight-precison fp8; "
         "--weight-precison: did you mean --weight-precision or --expert-weight-precision?"),
        (["show", "h100", "extra"], "gpuarch show: error: unrecognized arguments: extra"),
    ],
)
def test_an_unknown_flag_is_refused_by_its_subcommand_with_the_nearest_flags(
        capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    """A word no parser takes is a usage error (status 2) said by the subcommand it was
    given to, with that subcommand's usage, and a misspelt flag names the nearest real ones;
    nothing runs and no traceback is printed."""
    status, out, err = run(capsys, *argv)
    assert status == 2 and out == ""
    assert said in err
    assert f"usage: gpuarch {' '.join(said.split(':')[0].split()[1:])}" in err
    assert "Traceback" not in err
