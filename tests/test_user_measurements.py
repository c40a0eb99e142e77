"""Your own measured runs against the model: ``gpuarch validate training|inference --data
FILE`` (gpuarch/validation/user_data.py, docs/your-measurements.md)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from gpuarch.validation.inference import INFERENCE_FILE
from gpuarch.validation.inference import POINT_KEYS as INFERENCE_KEYS
from gpuarch.validation.training import POINT_KEYS as TRAINING_KEYS
from gpuarch.validation.training import TRAINING_FILE
from gpuarch.validation.user_data import _check_fields, field_types
from tests.test_cli import run

TRAINING_RUNS = """
[[source]]
id = "ours"
title = "Our cluster's November runs"

[[point]]
id = "llama8b-64"
source = "ours"
preset = "llama-3.1-8b"
gpu = "h100"
gpus = 64
seq_len = 8192
global_batch = 512
micro_batch = 1
precision = "bf16"
recompute = "selective"
tokens_per_s_per_gpu = 10500

[[point]]
id = "llama70b-64"
preset = "llama-3.1-70b"
gpu = "h100"
gpus = 64
seq_len = 8192
global_batch = 128
tp = 4
pp = 4
vpp = 5
cp = 2
sequence_parallel = true
precision = "bf16"
step_time_s = 14.2
"""

SERVING_RUN = """
[[point]]
id = "vllm-8b-c32"
preset = "llama-3.1-8b"
gpu = "h100"
gpus = 1
weight_precision = "bf16"
input_len = 1024
output_len = 256
mode = "serving"
concurrency = 32
output_tokens_per_s = 3100
tpot_s = 0.0098
"""


def _file(tmp_path: Path, text: str, name: str = "runs.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_fields_file_covers_what_the_loaders_accept() -> None:
    """Every key a loader accepts has a type in data/point-fields.toml, and nothing else
    does (a key there that no loader reads would be refused as unknown)."""
    assert set(field_types("training")) == set(TRAINING_KEYS)
    assert set(field_types("inference")) == set(INFERENCE_KEYS)


@pytest.mark.parametrize("kind, path", [("training", TRAINING_FILE),
                                        ("inference", INFERENCE_FILE)])
def test_every_published_point_passes_the_user_files_checks(kind: str, path: Path) -> None:
    """The shipped points pass the checks a user's file gets (types, fixed sets): the
    types file describes the data as it is, and the checks refuse nothing the model reads."""
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    engines = {s["id"]: s.get("engine", {}) for s in raw["source"]}
    for entry in raw["point"]:
        _check_fields(entry["id"], {**engines[entry["source"]], **entry}, kind)  # type: ignore[arg-type]


def test_own_training_runs_are_compared_as_the_estimate_predicts_them(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Each run of the file is predicted by the estimate its settings make (the same tokens/s
    per GPU as `estimate train` with those flags), its published figure read as the
    shipped points' are (a step time over the batch's tokens), and a point without a source
    is cited as the file."""
    data = _file(tmp_path, TRAINING_RUNS)
    status, out, err = run(capsys, "validate", "training", "--data", data, "--json")
    assert status == 0 and err == ""
    doc = json.loads(out)
    rows = {p["id"]: p for p in doc["points"]}
    assert list(rows) == ["llama8b-64", "llama70b-64"]
    assert rows["llama8b-64"]["source"] == "ours" and rows["llama70b-64"]["source"] == "runs"
    assert rows["llama70b-64"]["published"] == pytest.approx(128 * 8192 / 14.2 / 64, rel=1e-5)
    status, est, _ = run(capsys, "estimate", "train", "--model", "llama-3.1-70b", "--gpu",
                         "h100", "--gpus", "64", "--seq-len", "8192", "--global-batch", "128",
                         "--tp", "4", "--pp", "4", "--vpp", "5", "--cp", "2",
                         "--sequence-parallel", "--json")
    assert status == 0
    assert rows["llama70b-64"]["predicted"] == pytest.approx(
        json.loads(est)["tokens_per_s_per_gpu"], rel=1e-5)
    assert doc["mean_abs_error"] == pytest.approx(
        sum(abs(p["error"]) for p in rows.values()) / 2, rel=1e-5)
    # nothing of the published points, and no in/out-of-sample split (no fit saw them
    # either way); --match selects among the file's points (given as --file here, the
    # name validate ops uses for its measurements)
    status, out, _ = run(capsys, "validate", "training", "--data", data)
    assert status == 0 and "2 points:" in out and "out of sample" not in out
    status, out, _ = run(capsys, "validate", "training", "--file", data, "--json", "--match",
                         "70b")
    assert status == 0 and [p["id"] for p in json.loads(out)["points"]] == ["llama70b-64"]


def test_own_serving_runs_are_compared_figure_by_figure(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A serving run's figures (here throughput and TPOT) are each compared with the
    estimate `estimate infer` gives for the same settings."""
    data = _file(tmp_path, SERVING_RUN)
    status, out, err = run(capsys, "validate", "inference", "--data", data, "--json")
    assert status == 0 and err == ""
    figures = {f["metric"]: f for f in json.loads(out)["figures"]}
    assert set(figures) == {"output_tokens_per_s", "tpot_s"}
    status, est, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "1024", "--output-len", "256", "--batch",
                         "32", "--batching", "continuous", "--json")
    assert status == 0
    assert figures["tpot_s"]["predicted"] == pytest.approx(json.loads(est)["tpot_s"],
                                                           rel=1e-5)
    assert figures["output_tokens_per_s"]["predicted"] == pytest.approx(
        json.loads(est)["output_tokens_per_s"], rel=1e-5)


def test_a_benchmarks_total_throughput_is_compared_as_a_rate(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A serving run that gives only its total throughput (prompt and output tokens a
    second, what vllm bench serve prints as 'Total token throughput') is compared with the
    estimate's output rate x (input + output) / output."""
    data = _file(tmp_path, SERVING_RUN.replace("output_tokens_per_s = 3100\ntpot_s = 0.0098",
                                               "total_tokens_per_s = 15500"))
    status, out, err = run(capsys, "validate", "inference", "--data", data, "--json")
    assert status == 0 and err == ""
    (figure,) = json.loads(out)["figures"]
    status, est, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "1024", "--output-len", "256", "--batch",
                         "32", "--batching", "continuous", "--json")
    assert status == 0 and figure["metric"] == "total_tokens_per_s"
    assert figure["predicted"] == pytest.approx(
        json.loads(est)["output_tokens_per_s"] * (1024 + 256) / 256, rel=1e-5)


POINT = TRAINING_RUNS.split("[[point]]")[2]  # the 70B run, without a source


def _with(old: str, new: str) -> str:
    """A file of the 70B run with one piece of its text replaced."""
    assert old in POINT
    return "[[point]]" + POINT.replace(old, new)


@pytest.mark.parametrize("text, expected", [
    ("[[point]\nid = 'x'", "is not valid TOML"),
    ("[[points]]" + POINT, "unknown table 'points'; did you mean 'point'?"),
    (POINT, "unknown key outside a [[point]] table: 'id'"),
    ("[[source]]\nid = 's'\ntitle = 't'\n", "no [[point]] tables"),
    (_with('id = "llama70b-64"', ""), "point 1 has no id"),
    (_with('id = "llama70b-64"', "id = 7"), "point 1: id = 7 is not a "
     "name"),
    ("point = [1, 2]", "point: expected [[point]] tables"),
    ("[[point]]" + POINT + "[[point]]" + POINT, "point id 'llama70b-64' is used twice"),
    (_with("gpus = 64", "gpus = 64\ngpu_count = 64"),
     "unknown key 'gpu_count'"),
    (_with("global_batch = 128", "global_batch_size = 128"),
     "unknown key 'global_batch_size'; did you mean 'global_batch'?"),
    (_with("gpus = 64", 'gpus = "sixty-four"'),
     "gpus = 'sixty-four': expected a whole number"),
    (_with("sequence_parallel = true", 'sequence_parallel = "no"'),
     "sequence_parallel = 'no': expected true or false"),
    (_with('precision = "bf16"', 'precision = "bf61"'),
     "precision: expected one of"),
    (_with("step_time_s = 14.2", 'tflops_per_gpu = 400\ntflops_convention = "megatron"'),
     "tflops_convention: expected one of"),
    (_with("step_time_s = 14.2", 'source = "mine"\nstep_time_s = 14.2'),
     "source 'mine' is not a [[source]] id of the file"),
    (_with('gpu = "h100"', 'gpu = "h1000"'),
     "point 'llama70b-64': unknown GPU 'h1000'; did you mean 'h100'"),
    (_with("tp = 4", "tp = 3"), "point 'llama70b-64': --gpus: 64 is "
     "not divisible by TP x PP x CP"),
    (_with("step_time_s = 14.2", ""), "no throughput figure"),
    (_with("seq_len = 8192", ""), "point 'llama70b-64': give seq_len"),
    (_with("cp = 2", "cp = 2\ndp = 4"), "dp = 4: GPUs / (TP x PP x CP) = 64 / 32"),
    # the readers take a 0 for 'not given' and would run TP 1
    (_with("tp = 4", "tp = 0"), "tp = 0: expected a whole number >= 1"),
    (_with("step_time_s = 14.2", "step_time_s = -14.2"),
     "step_time_s = -14.2: expected a measured figure > 0"),
    (_with("step_time_s = 14.2", "mfu = 45"),
     "mfu = 45: expected a fraction of the peak, at most 1"),
    # the comparison's reason, without the point named twice
    (_with('preset = "llama-3.1-70b"', ""),
     "point 'llama70b-64': neither a complete shape nor a preset"),
])
def test_a_bad_file_is_refused_naming_what_is_wrong(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, expected: str) -> None:
    """A file the model cannot read, or a point it cannot compare, is a usage error (status
    2) that names the file, the point and the field, with the nearest name where there is
    one; nothing is printed on stdout and no traceback."""
    status, out, err = run(capsys, "validate", "training", "--data", _file(tmp_path, text))
    assert status == 2 and out == "" and "Traceback" not in err
    assert expected in err and "runs.toml" in err


def test_a_missing_file_and_a_bad_serving_field(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    """A file that is not there is named; a serving run's format and mode are checked
    against the formats and modes the model knows, with the nearest one."""
    status, out, err = run(capsys, "validate", "inference", "--data",
                           str(tmp_path / "nowhere.toml"))
    assert status == 2 and out == "" and "--data: no such file" in err
    for old, new, expected in (
            ('weight_precision = "bf16"', 'weight_precision = "fp9"',
             "weight_precision: expected one of"),
            ('mode = "serving"', 'mode = "serve"', "mode: expected one of static-batch, "
             "serving, max-throughput, got 'serve'; did you mean 'serving'?"),
            # a static batch (the default mode) names its batch, a serving run its load
            ('mode = "serving"\nconcurrency = 32', "", "give batch, the static batch's"),
            ("concurrency = 32", "", "give concurrency, the requests in flight")):
        data = _file(tmp_path, SERVING_RUN.replace(old, new))
        status, out, err = run(capsys, "validate", "inference", "--data", data)
        assert status == 2 and out == "" and expected in err, err


def test_the_bias_is_the_median_signed_error_on_rates(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """Which way the model errs over a file's runs: the median of the signed errors, a
    duration's (TPOT here) read as the rate it implies (published / predicted - 1), so that
    positive always means the model is faster than the measurements."""
    status, out, _ = run(capsys, "validate", "inference", "--data",
                         _file(tmp_path, SERVING_RUN), "--json")
    doc = json.loads(out)
    figures = {f["metric"]: f for f in doc["figures"]}
    on_rates = sorted([figures["output_tokens_per_s"]["error"],
                       figures["tpot_s"]["published"] / figures["tpot_s"]["predicted"] - 1])
    assert status == 0
    assert doc["median_rate_error"] == pytest.approx(sum(on_rates) / 2, rel=1e-4)
    status, out, _ = run(capsys, "validate", "inference", "--data",
                         _file(tmp_path, SERVING_RUN))
    way = "faster" if doc["median_rate_error"] > 0 else "slower"
    assert status == 0 and (f"bias:      the model is {way} than these figures by a median "
                            f"{abs(doc['median_rate_error']):.1%}") in out
    status, out, _ = run(capsys, "validate", "training", "--data",
                         _file(tmp_path, TRAINING_RUNS), "--json")
    doc = json.loads(out)
    errors = sorted(p["error"] for p in doc["points"])
    assert doc["median_rate_error"] == pytest.approx(sum(errors) / 2, rel=1e-4)


def test_a_duration_far_above_the_models_still_gives_a_bias(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The bias of a duration is taken from the figures (published over predicted), not
    through the error: a TPOT 1e30 s long made 1 + error round to zero and the summary
    divide by it (found by make fuzz's --data calls)."""
    data = _file(tmp_path, SERVING_RUN.replace("tpot_s = 0.0098", "tpot_s = 1e30"))
    status, out, err = run(capsys, "validate", "inference", "--data", data, "--json")
    assert status == 0 and "Traceback" not in err
    figures = {f["metric"]: f for f in json.loads(out)["figures"]}
    assert figures["tpot_s"]["error"] == pytest.approx(-1.0)
    assert json.loads(out)["median_rate_error"] > 1e20


def test_the_documents_examples_run(capsys: pytest.CaptureFixture[str],
                                    tmp_path: Path) -> None:
    """docs/your-measurements.md's two example files (training, then serving) are read and
    compared as they stand."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "your-measurements.md").read_text()
    blocks = doc.split("```toml\n")[1:]
    training, serving = (block.split("```")[0] for block in blocks[:2])
    for kind, text in (("training", training), ("inference", serving)):
        status, out, err = run(capsys, "validate", kind, "--data",
                               _file(tmp_path, text, f"{kind}.toml"), "--json")
        rows = json.loads(out)["points" if kind == "training" else "figures"]
        assert status == 0 and err == "" and rows


AS_POINT_RUNS = [
    ("--model", "llama-3.1-70b", "--gpu", "h100", "--gpus", "64", "--tp", "4", "--pp", "4",
     "--vpp", "5", "--cp", "2", "--sequence-parallel", "--seq-len", "8192",
     "--global-batch", "128"),
    ("--model", "mixtral-8x7b", "--gpu", "h100", "--gpus", "16", "--ep", "8",
     "--precision", "fp8", "--fp8-params", "--moe-token-drop", "--recompute", "selective",
     "--seq-len", "4096", "--global-batch", "256", "--micro-batch", "2"),
    ("--model", "qwen3-30b-a3b", "--gpu", "b200", "--gpus", "8", "--ep", "8",
     "--ep-dispatcher", "deepep", "--cuda-graph-scope", "attn,moe_router",
     "--dispatcher-wait-us", "74", "--moe-imbalance", "unbalanced", "--bf16-grads",
     "--seq-len", "4096", "--global-batch", "64"),
    ("--model", "llama-3.1-8b", "--gpu", "a100", "--gpus", "8", "--lora-rank", "16",
     "--lora-modules", "linear_qkv,linear_proj", "--packed-doc-len", "512",
     "--layers", "24", "--seq-len", "4096", "--global-batch", "32"),
    # every shape flag a preset takes has a point field of the same name
    ("--model", "mixtral-8x7b", "--gpu", "h100", "--gpus", "8", "--ep", "8", "--head-dim", "64",
     "--shared-experts", "1", "--moe-ffn-hidden", "7168", "--dense-layers", "1",
     "--sliding-window", "4096", "--sliding-layers", "16", "--seq-len", "4096",
     "--global-batch", "64"),
    # a given routing load, a node size other than the system's, the optimizer on the CPU
    ("--model", "mixtral-8x7b", "--gpu", "h100", "--gpus", "16", "--ep", "8",
     "--moe-imbalance", "1.5", "--gpus-per-node", "4", "--optimizer-offload", "0.5",
     "--optimizer-offload-overlap", "--seq-len", "4096", "--global-batch", "64"),
]


@pytest.mark.parametrize("flags", AS_POINT_RUNS)
def test_a_run_written_as_a_point_is_compared_as_estimated(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: tuple[str, ...]) -> None:
    """estimate train --as-point writes the run as a [[point]] that, with a measured figure
    added, validate --data predicts exactly as estimate train did (layouts, MoE routing and
    dispatch, FP8 and LoRA settings, the shape flags over the preset)."""
    status, out, _ = run(capsys, "estimate", "train", *flags, "--json")
    assert status == 0
    estimated = json.loads(out)["tokens_per_s_per_gpu"]
    status, text, err = run(capsys, "estimate", "train", *flags, "--as-point", "mine")
    assert status == 0 and err == "" and text.startswith('[[point]]\nid = "mine"\n')
    data = _file(tmp_path, text + "tokens_per_s_per_gpu = 5000\n")
    status, out, err = run(capsys, "validate", "training", "--data", data, "--json")
    assert status == 0 and err == "", err
    (row,) = json.loads(out)["points"]
    assert row["predicted"] == pytest.approx(estimated, rel=1e-6)


def test_a_config_json_model_is_written_field_by_field(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A model read from a config.json has no preset: its point gives the shape field by
    field (named by the model) and reads back to the estimate's prediction; a config whose
    model has what no point field holds (Qwen3's norm on each head's queries and keys) is
    refused naming it."""
    folder = tmp_path / "tiny-llama"
    folder.mkdir()
    config = folder / "config.json"
    config.write_text(json.dumps({
        "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
        "intermediate_size": 8192, "max_position_embeddings": 131072,
        "tie_word_embeddings": True}))
    flags = ("--model", str(config), "--gpu", "h100", "--gpus", "8", "--seq-len", "4096",
             "--global-batch", "64")
    status, text, err = run(capsys, "estimate", "train", *flags, "--as-point", "mine")
    assert status == 0 and err == "", err
    assert 'model = "tiny-llama"' in text and "preset" not in text and "layers = 16" in text
    data = _file(tmp_path, text + "tokens_per_s_per_gpu = 20000\n")
    status, out, err = run(capsys, "validate", "training", "--data", data, "--json")
    assert status == 0 and err == "", err
    (row,) = json.loads(out)["points"]
    status, out, _ = run(capsys, "estimate", "train", *flags, "--json")
    assert row["predicted"] == pytest.approx(json.loads(out)["tokens_per_s_per_gpu"], rel=1e-6)
    config.write_text(json.dumps({
        "model_type": "qwen3", "hidden_size": 2048, "num_hidden_layers": 8,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": 151936, "intermediate_size": 6144}))
    status, out, err = run(capsys, "estimate", "train", *flags, "--as-point")
    assert status == 2 and out == "" and "the model's qk_norm" in err
    assert "has no place in a point" in err


@pytest.mark.parametrize(("extra", "message"), [
    (("--gpus", "8,16"), "not with a list of --gpus"),
    # what the estimate refuses, a point is not written for
    (("--seq-len", "0"), "--seq-len: expected an integer >= 1, got 0"),
    (("--as-point", " "), "--as-point: give the run a name"),
])
def test_a_setting_a_point_cannot_hold_is_refused(
        capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], message: str) -> None:
    """What a measured-runs file has no field for is refused by name rather than dropped
    (the point would be read back as another run)."""
    flags = ["--model", "mixtral-8x7b", "--gpu", "h100", "--gpus", "8", "--ep", "8",
             "--seq-len", "4096", "--global-batch", "64"]
    point = () if "--as-point" in extra else ("--as-point",)
    status, out, err = run(capsys, "estimate", "train", *flags, *extra, *point)
    assert status == 2 and out == "" and message in err, err


SERVING_POINT_RUNS = [
    ("--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "1024", "--output-len", "256",
     "--batch", "32", "--batching", "continuous"),
    ("--model", "llama-3.1-70b", "--gpu", "h200", "--gpus", "2", "--tp", "2",
     "--weight-precision", "fp8", "--kv-precision", "fp8", "--input-len", "2048",
     "--output-len", "128", "--batch", "8", "--fp8-context-attention"),
    ("--model", "mixtral-8x7b", "--gpu", "h100", "--gpus", "4", "--tp", "4", "--ep", "4",
     "--weight-precision", "fp8", "--input-len", "1000", "--output-len", "1000",
     "--batch", "max", "--batching", "continuous", "--engine-limits", "trtllm-bench-pytorch",
     "--num-requests", "3000"),
    ("--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "4096", "--output-len", "512",
     "--batch", "64", "--batching", "continuous", "--schedule", "mixed"),
    ("--model", "llama-3.1-70b", "--gpu", "gb200", "--gpus", "8", "--tp", "4",
     "--gpus-per-node", "4", "--input-len", "1024", "--output-len", "128", "--batch", "16"),
    ("--model", "nemotron-3-nano-30b-a3b", "--gpu", "b200", "--input-len", "1024",
     "--output-len", "1024", "--batch", "64", "--batching", "continuous",
     "--ssm-state-precision", "bf16", "--cuda-graph-batch-sizes", "1,8,32,64"),
]


@pytest.mark.parametrize("flags", SERVING_POINT_RUNS)
def test_a_serving_run_written_as_a_point_is_compared_as_estimated(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: tuple[str, ...]) -> None:
    """estimate infer --as-point: a static batch, a continuous one (on either schedule), an
    offline run at the engine's limits with expert parallelism and a hybrid with its state
    format and graph sizes each come back from validate --data with the estimate's own
    figures."""
    status, out, _ = run(capsys, "estimate", "infer", *flags, "--json")
    assert status == 0
    estimated = json.loads(out)
    status, text, err = run(capsys, "estimate", "infer", *flags, "--as-point")
    assert status == 0 and err == "" and text.startswith('[[point]]\nid = "run"\n')
    data = _file(tmp_path, text + "output_tokens_per_s = 1000\ntpot_s = 0.02\n")
    status, out, err = run(capsys, "validate", "inference", "--data", data, "--json")
    assert status == 0 and err == "", err
    figures = {f["metric"]: f["predicted"] for f in json.loads(out)["figures"]}
    assert figures["output_tokens_per_s"] == pytest.approx(
        estimated["output_tokens_per_s"], rel=1e-6)
    assert figures["tpot_s"] == pytest.approx(estimated["tpot_s"], rel=1e-6)


@pytest.mark.parametrize(("extra", "message"), [
    (("--batch", "max"), "a measured static batch had a size"),
    (("--chunk", "512"), "chunk = 512 has no place in a point"),
    (("--cached-prefix", "256"), "cached-prefix = 256 has no place in a point"),
    (("--tp", "3", "--gpus", "3"), "--tp: 3 does not divide the 32 heads"),
])
def test_a_serving_setting_a_point_cannot_hold_is_refused(
        capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], message: str) -> None:
    flags = ["--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "1024",
             "--output-len", "256"]
    if "--batch" not in extra:
        flags += ["--batch", "8"]
    status, out, err = run(capsys, "estimate", "infer", *flags, *extra, "--as-point")
    assert status == 2 and out == "" and message in err, err


def test_as_point_with_json_gives_the_same_points(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints the written points as {"points": [...]}, the same fields and values as
    the [[point]] tables (a script need not parse TOML)."""
    flags = ("estimate", "infer", *SERVING_POINT_RUNS[1], "--as-point", "mine")
    status, text, _ = run(capsys, *flags)
    assert status == 0
    status, out, err = run(capsys, *flags, "--json")
    assert status == 0 and err == ""
    assert json.loads(out) == {"points": tomllib.loads(text)["point"]}


@pytest.mark.parametrize("kind", ["training", "inference"])
def test_plot_draws_the_errors_and_a_bad_path_is_refused_first(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str) -> None:
    """validate training|inference --plot writes the errors' strip chart (the JSON names the
    file) for the shipped points and for a user's file; a path no plot can be written to is
    a usage error before any point is compared, nothing written."""
    pytest.importorskip("matplotlib")
    target = tmp_path / f"{kind}.png"
    status, out, err = run(capsys, "validate", kind, "--match", "h100", "--plot", str(target),
                           "--json")
    assert status == 0 and err == "", err
    assert json.loads(out)["plot"] == str(target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = tmp_path / "runs.toml"
    data.write_text(TRAINING_RUNS if kind == "training" else SERVING_RUN)
    svg = tmp_path / "mine.svg"
    status, out, err = run(capsys, "validate", kind, "--data", str(data), "--plot", str(svg))
    assert status == 0 and svg.read_text().startswith("<?xml"), err
    status, out, err = run(capsys, "validate", kind, "--plot", str(tmp_path / "errors.txt"))
    assert status == 2 and out == "" and "--plot" in err and "must end in .png or .svg" in err
    assert not (tmp_path / "errors.txt").exists()


def test_tflops_in_megatrons_causal_count_read_as_that_count(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A run's TFLOP/s per GPU as recent Megatron-LM logs print it (``megatron-causal``: the
    causal attention core counted at half) turns into tokens/s over the model's FLOPs per
    token with the core halved; the same figure in the model's own count (``model-flops``,
    the core whole) gives fewer tokens/s, by the ratio of the two counts."""
    from gpuarch.workloads.flops import forward_flops_per_token
    from gpuarch.workloads.presets import preset

    base = _with("step_time_s = 14.2", "tflops_per_gpu = 400")
    read = {}
    for convention in ("megatron-causal", "model-flops"):
        text = base.replace("tflops_per_gpu = 400",
                            f'tflops_per_gpu = 400\ntflops_convention = "{convention}"')
        status, out, err = run(capsys, "validate", "training", "--data",
                               _file(tmp_path, text), "--json")
        assert status == 0 and err == ""
        read[convention] = json.loads(out)["points"][0]["published"]
    shape = preset("llama-3.1-70b").shape
    halved = 3 * forward_flops_per_token(shape, 8192, causal=True).total
    whole = 3 * forward_flops_per_token(shape, 8192).total
    assert read["megatron-causal"] == pytest.approx(400e12 / halved, rel=1e-4)
    assert read["model-flops"] == pytest.approx(400e12 / whole, rel=1e-4)
