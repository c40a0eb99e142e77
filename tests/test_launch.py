"""Launch commands (``--launch``): the estimate's settings spelled as Megatron-LM's, vLLM's,
SGLang's and TensorRT-LLM's command lines, every flag one the data file records as read
from that engine's argument parser."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpuarch.estimate.inference_config import Batching, InferenceConfig
from gpuarch.estimate.memory import Recompute
from gpuarch.estimate.training_config import TrainingConfig
from gpuarch.perf.precision import Precision
from gpuarch.perf.quant import QuantFormat, QuantScheme
from gpuarch.report.launch import (
    SERVING_ENGINES,
    engine_info,
    megatron_launch,
    model_reference,
    serving_launch,
)
from gpuarch.workloads.presets import preset
from tests.test_cli import run

LLAMA70 = preset("llama-3.1-70b").shape
QWEN235 = preset("qwen3-235b-a22b").shape
DEEPSEEK = preset("deepseek-v3")
TORCHRUN = {"--nnodes", "--nproc-per-node"}


def pairs(argv: tuple[str, ...]) -> dict[str, list[str]]:
    """Each flag and the values after it."""
    out: dict[str, list[str]] = {}
    flag = ""
    for word in argv:
        if word.startswith("--"):
            flag = word
            out[flag] = []
        elif flag:
            out[flag].append(word)
    return out


def known_flags(engine: str) -> set[str]:
    return set(engine_info(engine)["flags"].values())


def test_megatron_dense_layout() -> None:
    """Llama 3.1 70B at TP 4, PP 4 x 5 virtual stages, SP, selective recomputation, FP8 on
    64 GPUs of 8-GPU hosts: the shape (GQA with 8 groups, SwiGLU, no biases, untied, RoPE,
    RMSNorm), the layout, the batch and FP8 as Megatron spells them."""
    cfg = TrainingConfig(gpus=64, seq_len=8192, global_batch=128, tp=4, pp=4, vpp=5,
                         sequence_parallel=True, recompute=Recompute.SELECTIVE,
                         precision=Precision.FP8)
    launch = megatron_launch(LLAMA70, cfg)
    got = pairs(launch.argv)
    assert launch.argv[:6] == ("torchrun", "--nnodes", "8", "--nproc-per-node", "8",
                               "pretrain_gpt.py")
    assert got["--num-layers"] == ["80"] and got["--hidden-size"] == ["8192"]
    assert got["--num-query-groups"] == ["8"] and "--group-query-attention" in got
    assert got["--ffn-hidden-size"] == ["28672"]
    assert {"--swiglu", "--disable-bias-linear", "--untie-embeddings-and-output-weights",
            "--sequence-parallel", "--use-distributed-optimizer", "--bf16"} <= set(got)
    assert got["--tensor-model-parallel-size"] == ["4"]
    assert got["--num-virtual-stages-per-pipeline-rank"] == ["5"]
    assert got["--global-batch-size"] == ["128"] and got["--seq-length"] == ["8192"]
    assert got["--recompute-granularity"] == ["selective"]
    assert got["--fp8-format"] == ["hybrid"]
    assert "--num-experts" not in got and "--context-parallel-size" not in got
    assert set(got) - TORCHRUN <= known_flags("megatron")


def test_megatron_moe_zero3_and_full_recompute() -> None:
    """DeepSeek-V3 on GB200 racks: experts, shared expert, leading dense layers as a layer
    frequency, the flex dispatcher for DeepEP, MTP, EP; ZeRO 3 as Megatron-FSDP; block
    recomputation of N layers; a rack-scale NVLink domain leaves hosts as placeholders;
    MLA's shape and the FSDP checkpoint format are notes, not flags."""
    cfg = TrainingConfig(gpus=256, seq_len=4096, global_batch=1024, pp=8, ep=32, zero=3,
                         ep_dispatcher="deepep", mtp_layers=1, recompute=Recompute.FULL,
                         recompute_layers=2, precision=Precision.BF16, gpus_per_node=72,
                         cp=2, cp_comm_type="a2a")
    launch = megatron_launch(DEEPSEEK.shape, cfg)
    got = pairs(launch.argv)
    assert launch.argv[1:5] == ("--nnodes", "HOSTS", "--nproc-per-node", "GPUS_PER_HOST")
    assert got["--num-experts"] == ["256"] and got["--moe-router-topk"] == ["8"]
    assert got["--moe-layer-freq"] == ["([0]*3+[1]*58)"]
    assert got["--moe-shared-expert-intermediate-size"] == ["2048"]
    assert got["--moe-token-dispatcher-type"] == ["flex"] and "--moe-enable-deepep" in got
    assert got["--mtp-num-layers"] == ["1"] and got["--expert-model-parallel-size"] == ["32"]
    assert got["--context-parallel-size"] == ["2"] and got["--cp-comm-type"] == ["a2a"]
    assert "--use-megatron-fsdp" in got and "--use-distributed-optimizer" not in got
    assert got["--data-parallel-sharding-strategy"] == ["optim_grads_params"]
    assert got["--recompute-method"] == ["block"] and got["--recompute-num-layers"] == ["2"]
    assert any("latent attention" in n for n in launch.notes)
    assert any("fsdp_dtensor" in n for n in launch.notes)
    assert any("256 in all" in n for n in launch.notes)
    assert set(got) - TORCHRUN <= known_flags("megatron")


def test_megatron_fp4_and_formats() -> None:
    """NVFP4 as --fp4-format e2m1 with the nvfp4 recipe; FP8 weights and BF16 gradient
    reduction as their flags; an optimizer Megatron cannot express is a note."""
    cfg = TrainingConfig(gpus=8, seq_len=8192, global_batch=32, precision=Precision.NVFP4,
                         fp8_params=True, bf16_grads=True, bf16_optimizer=True, zero=0)
    got = pairs(megatron_launch(LLAMA70, cfg).argv)
    assert got["--fp4-format"] == ["e2m1"] and got["--fp4-recipe"] == ["nvfp4"]
    assert "--fp8-format" not in got
    assert {"--fp8-param-gather", "--grad-reduce-in-bf16", "--overlap-grad-reduce"} <= set(got)
    assert "--use-distributed-optimizer" not in got and "--overlap-param-gather" not in got


@pytest.mark.parametrize("engine", SERVING_ENGINES)
def test_serving_attention_data_parallel(engine: str) -> None:
    """Qwen3-235B at EP 4 over TP 1 (data-parallel attention, 'DEP4') on 8 GPUs: two
    servers of 4 GPUs, each engine's way of saying it, FP8 KV cache in each engine's
    spelling, NVFP4 weights left to the checkpoint."""
    fp4 = QuantScheme(QuantFormat.FP4, QuantFormat.FP4, QuantFormat.FP8)
    cfg = InferenceConfig(input_len=1000, output_len=1000, batch=256, gpus=8, tp=1, ep=4,
                          quant=fp4, batching=Batching.CONTINUOUS)
    launch = serving_launch(engine, QWEN235, cfg, model_reference("qwen3-235b-a22b"), 256)
    got = pairs(launch.argv)
    assert "Qwen/Qwen3-235B-A22B" in launch.argv
    assert any("2 such servers" in n for n in launch.notes)
    assert any("NVFP4" in n for n in launch.notes)
    if engine == "vllm":
        assert got["--tensor-parallel-size"] == ["1"] and got["--data-parallel-size"] == ["4"]
        assert "--enable-expert-parallel" in got and got["--kv-cache-dtype"] == ["fp8"]
        assert got["--max-num-seqs"] == ["256"]
    elif engine == "sglang":
        assert got["--tp-size"] == ["4"] and got["--dp-size"] == ["4"]
        assert "--enable-dp-attention" in got and got["--ep-size"] == ["4"]
        assert got["--kv-cache-dtype"] == ["fp8_e4m3"]
        assert "--max-running-requests" not in got  # counts all ranks: left to a note
    else:
        assert got["--tp_size"] == ["4"] and got["--ep_size"] == ["4"]
        assert got["--max_batch_size"] == ["256"]
        options = dict(launch.files)[got["--extra_llm_api_options"][0]]
        assert "enable_attention_dp: true" in options and "dtype: fp8" in options
    assert set(pairs(launch.argv[launch.head:])) <= known_flags(engine)


def test_serving_checkpoint_formats() -> None:
    """FP8 weights from a 16-bit checkpoint: vLLM quantizes on load (--quantization fp8);
    DeepSeek-V3's checkpoint already stores FP8, so no flag; static batching is noted."""
    fp8 = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.BF16)
    cfg = InferenceConfig(input_len=512, output_len=128, batch=8, gpus=8, tp=8, quant=fp8)
    dense = serving_launch("vllm", LLAMA70, cfg, "meta-llama/Llama-3.1-70B", 8)
    assert pairs(dense.argv)["--quantization"] == ["fp8"]
    assert any("statically" in n for n in dense.notes)
    moe = serving_launch("vllm", DEEPSEEK.shape, cfg, "deepseek-ai/DeepSeek-V3", 8,
                         DEEPSEEK.checkpoint)
    assert "--quantization" not in pairs(moe.argv)


def test_launch_lines_break_before_flags() -> None:
    """The text form: the program and what it runs on the first line, then a flag and its
    values a line, each but the last ending in a backslash."""
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=16, tp=8,
                         recompute=Recompute.SELECTIVE, recompute_modules=("core_attn",
                                                                          "layernorm"))
    lines = megatron_launch(LLAMA70, cfg).lines()
    assert lines[0] == "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \\"
    assert "  --recompute-modules core_attn layernorm \\" in lines
    assert all(line.endswith(" \\") for line in lines[:-1]) and not lines[-1].endswith("\\")
    assert all(line.startswith("  --") for line in lines[1:])



def test_cli_launch(capsys: pytest.CaptureFixture[str]) -> None:
    """--launch prints the command under the estimate (text) or as 'launch' (JSON); a bad
    engine or one with a sweep is a usage error naming --launch."""
    status, out, _ = run(capsys, "estimate", "train", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--gpus", "8", "--seq-len", "4096", "--global-batch", "32",
                         "--launch", "megatron")
    assert status == 0 and "launch        Megatron-LM" in out and "pretrain_gpt.py" in out
    status, out, _ = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "512", "--output-len", "128", "--batch", "16",
                         "--batching", "continuous", "--launch", "trtllm", "--json")
    doc = json.loads(out)
    assert status == 0 and doc["launch"]["argv"][:2] == ["trtllm-serve", "meta-llama/Llama-3.1-8B"]
    assert doc["launch"]["checked_against"].startswith("NVIDIA/TensorRT-LLM")
    status, _, err = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "512", "--output-len", "128", "--batch", "16",
                         "--launch", "vlm")
    assert status == 2 and "--launch: expected one of vllm, sglang, trtllm" in err
    assert "did you mean 'vllm'" in err
    status, _, err = run(capsys, "estimate", "infer", "--model", "llama-3.1-8b", "--gpu",
                         "h100", "--input-len", "512", "--output-len", "128", "--batch",
                         "1,8", "--launch", "vllm")
    assert status == 2 and "--launch: gives one server's command" in err


def test_cli_engine_lists_match_the_launch_module() -> None:
    """The CLI states --launch's engines without importing the report modules; they must be
    the ones report.launch builds and the data file describes."""
    from gpuarch.cli.estimate_flags import SERVING_LAUNCH, TRAINING_LAUNCH
    from gpuarch.report.launch import TRAINING_ENGINES

    assert SERVING_LAUNCH == SERVING_ENGINES and TRAINING_LAUNCH == TRAINING_ENGINES
    for engine in SERVING_ENGINES + TRAINING_ENGINES:
        assert engine_info(engine)["checked"]


def test_advise_launch_is_the_best_options(capsys: pytest.CaptureFixture[str]) -> None:
    """advise infer --launch gives the top option's server command: its TP and batch; advise
    train --launch Megatron's command for the top option's layout."""
    status, out, _ = run(capsys, "advise", "infer", "--gpu", "h100", "--rate", "2",
                         "--launch", "vllm", "--json")
    doc = json.loads(out)
    best = doc["top"][0]
    got = pairs(tuple(doc["launch"]["argv"]))
    assert status == 0 and got["--tensor-parallel-size"] == [str(best["tp"])]
    assert got["--max-num-seqs"] == [str(best["batch"])]
    status, out, _ = run(capsys, "advise", "train", "--gpu", "h100", "--max-gpus", "16",
                         "--tokens", "1e10", "--launch", "megatron")
    assert status == 0 and "option 1's command:" in out and "pretrain_gpt.py" in out


def test_model_reference() -> None:
    """What a server loads: a config.json's directory, a preset's Hugging Face repository
    (from its source address), else the preset's own name (GPT-3's source is a paper)."""
    assert model_reference("/models/my-llama/config.json") == "/models/my-llama"
    assert model_reference("llama-3.1-8b") == "meta-llama/Llama-3.1-8B"
    assert model_reference("gpt3-175b") == "gpt3-175b"
    # a family's presets share one source page (Qwen3 8B's config, GPT-OSS 120B's): each
    # loads its own repository, never its sibling's
    assert model_reference("qwen3-14b") == "Qwen/Qwen3-14B"
    assert model_reference("gpt-oss-20b") == "openai/gpt-oss-20b"
    assert model_reference("olmo-2-7b") == "allenai/OLMo-2-1124-7B"
    # a repository id as typed is the checkpoint the user named (an Instruct one whose
    # shape is its base's), not the base
    assert model_reference("meta-llama/Llama-3.1-8B-Instruct") == \
        "meta-llama/Llama-3.1-8B-Instruct"
    # the repository the shape's own framework maps to it (Megatron Bridge's provider test)
    assert model_reference("nemotron-h-8b") == "nvidia/Nemotron-H-8B-Base-8K"
    assert model_reference("nemotron-4-15b") == "nemotron-4-15b"  # no repository recorded


def test_serving_chunked_prefill() -> None:
    """Prefill chunks of 2,048 tokens: each engine's tokens-per-pass budget is the chunk,
    and TensorRT-LLM's options turn chunked prefill on (off by default there)."""
    cfg = InferenceConfig(input_len=8192, output_len=256, batch=32, chunk=2048,
                          batching=Batching.CONTINUOUS)
    trt = serving_launch("trtllm", LLAMA70, cfg, "m", 32)
    assert pairs(trt.argv)["--max_num_tokens"] == ["2048"]
    assert "enable_chunked_prefill: true" in dict(trt.files)["extra_llm_api_options.yaml"]
    assert pairs(serving_launch("vllm", LLAMA70, cfg, "m", 32).argv)[
        "--max-num-batched-tokens"] == ["2048"]
    assert pairs(serving_launch("sglang", LLAMA70, cfg, "m", 32).argv)[
        "--chunked-prefill-size"] == ["2048"]


def test_megatron_notes_parallel_attention() -> None:
    """A model whose attention and MLP run side by side (Falcon, GPT-J) gets a note: the
    launch's GPT layers run them one after the other, so no flag stands for it."""
    cfg = TrainingConfig(gpus=64, seq_len=8192, global_batch=128, tp=4, pp=4)
    side = dataclasses.replace(LLAMA70, parallel_attention=True)
    assert any("parallel attention" in n for n in megatron_launch(side, cfg).notes)
    assert not any("parallel attention" in n for n in megatron_launch(LLAMA70, cfg).notes)


@pytest.mark.parametrize("engine", SERVING_ENGINES)
def test_serving_nvfp4_kv_cache(engine: str) -> None:
    """An NVFP4 KV cache (datacenter Blackwell) in the engines that spell it: vLLM's
    --kv-cache-dtype nvfp4, TensorRT-LLM's kv_cache_config dtype nvfp4; SGLang's 4-bit
    cache is another format (its own block scales), so it is left to a note."""
    scheme = QuantScheme(QuantFormat.FP8, QuantFormat.FP8, QuantFormat.FP4)
    cfg = InferenceConfig(input_len=1000, output_len=1000, batch=64, quant=scheme,
                          batching=Batching.CONTINUOUS)
    launch = serving_launch(engine, preset("llama-3.1-8b").shape, cfg,
                            model_reference("llama-3.1-8b"), 64)
    got = pairs(launch.argv)
    if engine == "vllm":
        assert got["--kv-cache-dtype"] == ["nvfp4"]
    elif engine == "trtllm":
        options = dict(launch.files)[got["--extra_llm_api_options"][0]]
        assert "dtype: nvfp4" in options
    else:
        assert "--kv-cache-dtype" not in got
        assert any("KV cache in fp4: no SGLang setting" in n for n in launch.notes)
    if engine != "sglang":
        assert any("kv_cache_quant nvfp4" in n for n in launch.notes)


def test_query_key_norms_and_sandwich_norms() -> None:
    """Qwen3's per-head query-key norms are Megatron's --qk-layernorm; OLMo 2's norms over
    the whole projection and Gemma's norms after attention and MLP have no flag, and the
    launch says so rather than emitting a different model."""
    cfg = TrainingConfig(gpus=8, seq_len=4096, global_batch=64, tp=8, pp=1)
    qwen = megatron_launch(preset("qwen3-8b").shape, cfg)
    assert "--qk-layernorm" in qwen.argv
    olmo = megatron_launch(preset("olmo-2-7b").shape, cfg)
    assert "--qk-layernorm" not in olmo.argv
    assert any("whole projection" in note for note in olmo.notes)
    gemma = megatron_launch(preset("gemma-3-27b").shape, cfg)
    assert "--qk-layernorm" in gemma.argv and "--swiglu" not in gemma.argv
    assert any("after attention and MLP" in note for note in gemma.notes)
    assert any("GeGLU" in note for note in gemma.notes)


def test_megatron_cuda_graph_scope() -> None:
    """A scope is spelled as Megatron's: TE graphs over modules, or the whole iteration with
    the local implementation (as MLPerf's logs print it)."""
    nano = preset("nemotron-3-nano-30b-a3b").shape
    cfg = TrainingConfig(gpus=16, seq_len=8192, global_batch=1024, ep=8,
                         cuda_graph_scope=("mamba",))
    got = pairs(megatron_launch(nano, cfg).argv)
    assert got["--cuda-graph-impl"] == ["transformer_engine"]
    assert got["--cuda-graph-scope"] == ["mamba"]
    full = TrainingConfig(gpus=16, seq_len=8192, global_batch=1024, ep=8,
                          cuda_graph_scope=("full_iteration",))
    got = pairs(megatron_launch(nano, full).argv)
    assert got["--cuda-graph-impl"] == ["local"]
    assert got["--cuda-graph-scope"] == ["full_iteration"]
    assert set(got) - TORCHRUN <= known_flags("megatron")


def test_sglang_speculative_cap_is_noted() -> None:
    """SGLang sets --max-running-requests to 48 under speculative decoding when it is not
    given (ServerArgs._handle_speculative_decoding; the SGLang cookbook's Qwen3.5-397B run
    at 100 clients decoded about 46 at once for that reason): the launch says so, and says
    whether the flag it writes lifts the cap (not with data-parallel attention, where the
    flag counts every rank and is left to a note)."""
    plain = InferenceConfig(input_len=1000, output_len=1000, batch=100, gpus=8, tp=8,
                            batching=Batching.CONTINUOUS)
    spec = dataclasses.replace(plain, speculative_tokens=3, acceptance_length=3.0)
    launch = serving_launch("sglang", LLAMA70, spec, "m", 100)
    assert pairs(launch.argv)["--max-running-requests"] == ["100"]
    cap = [n for n in launch.notes if "48" in n]
    assert len(cap) == 1 and "written above" in cap[0]
    assert not any("48" in n for n in serving_launch("sglang", LLAMA70, plain, "m", 100).notes)
    assert not any("caps running requests" in n
                   for n in serving_launch("vllm", LLAMA70, spec, "m", 100).notes)
    dep = dataclasses.replace(spec, tp=1, ep=4, gpus=8)
    dep_launch = serving_launch("sglang", QWEN235, dep, "m", 256)
    assert "--max-running-requests" not in pairs(dep_launch.argv)
    assert any("caps running requests" in n and "give it" in n for n in dep_launch.notes)


def test_megatron_token_drop_is_padded_to_capacity() -> None:
    """--moe-token-drop is priced as Megatron-Core's drop-and-pad (no host sync), so the
    launch pads the experts' inputs to the capacity as well as setting the factor: without
    --moe-pad-expert-input-to-capacity the dispatcher syncs before its first permutation
    (token_dispatcher.py, preprocess) and the run would pay the wait the estimate left out."""
    cfg = TrainingConfig(gpus=64, seq_len=4096, global_batch=256, ep=8, moe_token_drop=True,
                         precision=Precision.BF16)
    launch = megatron_launch(QWEN235, cfg)
    got = pairs(launch.argv)
    assert got["--moe-expert-capacity-factor"] == ["1.0"]
    assert "--moe-pad-expert-input-to-capacity" in got
    assert any("padded" in n for n in launch.notes)
    dropless = pairs(megatron_launch(QWEN235, dataclasses.replace(cfg, moe_token_drop=False))
                     .argv)
    assert "--moe-pad-expert-input-to-capacity" not in dropless
    assert "--moe-expert-capacity-factor" not in dropless
    assert set(got) - TORCHRUN <= known_flags("megatron")


def test_moe_at_tp_above_one_without_sequence_parallelism_is_flagged() -> None:
    """Megatron-Core's MoELayer.forward raises in training at TP > 1 without sequence
    parallelism: the launch says so, as the estimate's notes do, and the advisor does not
    propose such a layout (tests/test_advisor.py)."""
    cfg = TrainingConfig(gpus=16, seq_len=4096, global_batch=64, tp=2, ep=8,
                         precision=Precision.BF16)
    assert any("refuses" in n for n in megatron_launch(QWEN235, cfg).notes)
    with_sp = dataclasses.replace(cfg, sequence_parallel=True)
    assert not any("refuses" in n for n in megatron_launch(QWEN235, with_sp).notes)
    assert not any("refuses" in n for n in megatron_launch(
        LLAMA70, dataclasses.replace(cfg, ep=1)).notes)


@pytest.mark.parametrize("engine", SERVING_ENGINES)
def test_remote_code_flag(engine: str, tmp_path: Path) -> None:
    """A checkpoint whose config.json names classes of its own (auto_map) is served with the
    engine's trust-remote-code flag; one without, or a preset whose checkpoint has none,
    without it."""
    flag = engine_info(engine)["flags"]["trust_remote_code"]
    cfg = InferenceConfig(input_len=1000, output_len=100, batch=8)
    ours = tmp_path / "ours"
    ours.mkdir()
    config = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
              "num_attention_heads": 32, "vocab_size": 128256, "intermediate_size": 14336}
    (ours / "config.json").write_text(json.dumps({**config, "auto_map": {
        "AutoConfig": "configuration_mine.MyConfig"}}))
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps(config))
    shape = preset("llama-3.1-8b").shape
    for model, expected in ((str(ours / "config.json"), True),
                            (str(plain / "config.json"), False),
                            ("kimi-linear-48b-a3b", True), ("deepseek-v3", True),
                            ("llama-3.1-8b", False), ("not-a-model", False)):
        launch = serving_launch(engine, shape, cfg, model_reference(model), 8)
        assert (flag in launch.argv) is expected, model
        assert any("auto_map" in note for note in launch.notes) is expected, model
    # in the multimodal wrapper's text_config too
    (ours / "config.json").write_text(json.dumps({
        "model_type": "kimi_k3", "text_config": {**config, "auto_map": {}}}))
    assert flag in serving_launch(engine, shape, cfg, str(ours), 8).argv


def test_models_says_which_checkpoints_ship_code(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "models", "kimi-k2", "--json")
    assert status == 0 and json.loads(out)["models"][0]["remote_code"] is True
    status, out, _ = run(capsys, "models", "llama-3.1-8b", "--json")
    assert status == 0 and json.loads(out)["models"][0]["remote_code"] is False
    status, out, _ = run(capsys, "models", "kimi-linear")
    assert status == 0 and "ships model code of its own" in out


@pytest.mark.parametrize(("architecture", "vllm", "trtllm"), [
    ("LlamaForCausalLM", None, None),
    # in TensorRT-LLM's table (and its multimodal one), not in vLLM's registry at 0002bff0
    ("InklingForConditionalGeneration", "is not among the model classes vLLM lists", None),
    # in vLLM's registry; the TensorRT-LLM table's AutoDeploy rows
    ("HunYuanMoEV1ForCausalLM", None, "is not among the model classes TensorRT-LLM lists"),
    ("Olmo3ForCausalLM", None, "through its AutoDeploy backend"),
    ("Zamba2ForCausalLM", None, "is not among the model classes TensorRT-LLM lists"),
])
def test_serving_notes_an_architecture_the_engine_does_not_list(
        tmp_path: Path, architecture: str, vllm: str | None, trtllm: str | None) -> None:
    """A local checkpoint's config.json names its model class; a launch notes where the
    engine's list (report/data/engine_models.toml) lacks it. SGLang's list was not read:
    never a note for it."""
    (tmp_path / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    cfg = InferenceConfig(input_len=1024, output_len=128, batch=8)
    for engine, wanted in (("vllm", vllm), ("trtllm", trtllm), ("sglang", None)):
        notes = serving_launch(engine, LLAMA70, cfg, str(tmp_path), 8).notes
        said = [n for n in notes if architecture in n]
        if wanted is None:
            assert not said, (engine, said)
        else:
            assert len(said) == 1 and wanted in said[0], (engine, said)


def test_serving_notes_a_paper_shape_without_a_checkpoint() -> None:
    cfg = InferenceConfig(input_len=1024, output_len=128, batch=8)
    paper = serving_launch("vllm", preset("gpt3-175b").shape, cfg, model_reference("gpt3-175b"),
                           8)
    assert any("gpt3-175b is a shape from its paper or recipe with no published checkpoint"
               in n for n in paper.notes)
    published = serving_launch("vllm", LLAMA70, cfg, model_reference("llama-3.1-70b"), 8)
    assert not any("no published checkpoint" in n for n in published.notes)


def test_engine_model_lists_are_well_formed() -> None:
    """Each engine's list of model classes (report/data/engine_models.toml) names a serving
    engine the launches know, the version it was read from and what a missing class comes
    to; its classes appear once, and TensorRT-LLM's AutoDeploy-only rows are not also
    counted as its PyTorch backend's."""
    import tomllib
    from importlib import resources

    with resources.files("gpuarch.report").joinpath("data/engine_models.toml").open("rb") as fh:
        lists = tomllib.load(fh)
    assert set(lists) <= set(SERVING_ENGINES) and lists
    for engine, entry in lists.items():
        assert " at " in entry["checked"] and entry["fallback"], engine
        classes = entry["architectures"]
        assert len(classes) == len(set(classes)) > 10, engine
        assert not set(entry.get("autodeploy", ())) & set(classes), engine


@pytest.mark.parametrize(("architecture", "speculative", "attention_dp", "said"), [
    ("Qwen3MoeForCausalLM", True, False, "marks EAGLE-3 drafting for Qwen3MoeForCausalLM"),
    ("InklingForConditionalGeneration", True, False,
     "marks no MTP, EAGLE-3 or DFlash drafting for InklingForConditionalGeneration"),
    ("Gemma4ForConditionalGeneration", False, True,
     "marks attention data parallelism Untested for Gemma4ForConditionalGeneration"),
    ("Qwen3MoeForCausalLM", False, True, None),  # attention DP marked Yes
    ("LlamaForCausalLM", True, True, None),  # not among the matrix's key models
])
def test_trtllm_feature_matrix_notes(tmp_path: Path, architecture: str, speculative: bool,
                                     attention_dp: bool, said: str | None) -> None:
    """TensorRT-LLM's model-feature matrix (its key models) is quoted where the launch asks
    for speculative decoding or attention data parallelism; the other engines have none."""
    (tmp_path / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    cfg = InferenceConfig(input_len=1024, output_len=128, batch=8, gpus=8,
                          tp=1 if attention_dp else 8, ep=8,
                          speculative_tokens=3 if speculative else 0,
                          acceptance_length=2.0 if speculative else 0.0)
    notes = serving_launch("trtllm", QWEN235, cfg, str(tmp_path), 8).notes
    matrix = [n for n in notes if "feature matrix" in n]
    if said is None:
        assert matrix == []
    else:
        assert len(matrix) == 1 and said in matrix[0], matrix
    assert not [n for n in serving_launch("vllm", QWEN235, cfg, str(tmp_path), 8).notes
                if "feature matrix" in n]
