"""The published validation rows agree with themselves: a row that prints both tokens/s and
TFLOP/s per GPU implies a FLOP count per token, which must match the other rows of the same
source, model and sequence length (same model, same count), unless the data file excludes
the row and says why. Where a serving row's recorded setup is inferred from its figures
(the KV-cache format of NVIDIA's NVFP4 checkpoints), the inference is recomputed here."""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.validation.inference import compare_point, load_inference_points
from gpuarch.validation.training import TrainingPoint, load_training_points, point_system
from gpuarch.workloads.flops import training_flops_per_token
from gpuarch.workloads.presets import preset

TOLERANCE = 0.15


def _implied_flops_per_token(point: TrainingPoint) -> float | None:
    tflops, tokens = point.get("tflops_per_gpu"), point.get("tokens_per_s_per_gpu")
    return tflops * 1e12 / tokens if tflops and tokens else None


def _groups() -> dict[tuple[str, str, int], list[tuple[TrainingPoint, float]]]:
    groups: dict[tuple[str, str, int], list[tuple[TrainingPoint, float]]] = defaultdict(list)
    for p in load_training_points():
        implied = _implied_flops_per_token(p)
        if implied is not None:
            groups[(p.source, p.get("preset") or p.id, p.get("seq_len"))].append((p, implied))
    return groups


def test_rows_printing_both_figures_agree_with_their_siblings() -> None:
    """Every row's implied FLOPs per token is within 15% of the median of its source, model
    and sequence length; the ones that are not carry ``excluded`` with the reason."""
    checked = 0
    for key, rows in _groups().items():
        if len(rows) < 3:
            continue
        median = statistics.median(v for _, v in rows)
        for p, implied in rows:
            checked += 1
            off = abs(implied / median - 1) > TOLERANCE
            assert off == bool(p.get("excluded")), (
                f"{p.id}: {implied / 1e9:.1f} GFLOP/token against {median / 1e9:.1f} for "
                f"{key}; excluded = {p.get('excluded')!r}")
    assert checked >= 50


def test_an_excluded_row_quotes_its_figures() -> None:
    """An exclusion is for figures that cannot be trusted, and its reason quotes them: a
    table row whose two printed figures disagree quotes both; a measured step time from a run
    that is not stationary quotes the step time entered."""
    excluded = [p for p in load_training_points() if p.get("excluded")]
    assert len(excluded) >= 2
    for p in excluded:
        reason = p.get("excluded")
        if p.get("step_time_s"):
            assert "not stationary" in reason
            assert f"{p.get('step_time_s')} s" in reason
        else:
            assert f"{p.get('tokens_per_s_per_gpu'):,}" in reason
            assert f"{p.get('tflops_per_gpu')} TFLOP/s" in reason


def _ideal_engine() -> Efficiency:
    """An engine no real one beats: every byte at the datasheet bandwidth, every GEMM at the
    peak without size penalties, no fixed, host or collective latency."""
    d = DEFAULT_EFFICIENCY
    return dataclasses.replace(
        d, gemm=1.0, gemm_by_generation=tuple(1.0 for _ in d.gemm_by_generation),
        gemm_fp8=1.0, gemm_fp4=1.0, gemm_half_dim=0.0, attention=1.0, context_attention=1.0,
        context_attention_fp8=1.0, mla_decode_attention=1.0, mla_decode_attention_fp8=1.0,
        moe_gemm_fine=1.0, moe_gemm_nvfp4=1.0, memory=1.0,
        kv_read=1.0, moe_gemm=1.0, layer_overhead_s=0.0, decode_step_overhead_s=0.0,
        host_time_per_request_expert_layer_s=0.0, prefill_overhead_s=0.0, dequant_overhead=0.0,
        collective_latency_s=0.0)


def test_nvfp4_checkpoints_with_an_8_bit_kv_cache_could_not_be_16_bit() -> None:
    """The NVFP4 serving rows recorded with an 8-bit KV cache say the published figures rule
    out a 16-bit one: for each such checkpoint, at least one of its rows beats what an ideal
    engine could deliver with 16-bit keys and values and all memory beside the weights and
    activations given to the cache, while the same ideal engine with the 8-bit cache clears
    every row of the checkpoint."""
    catalog = load_catalog()
    ideal = _ideal_engine()
    beaten: dict[str, int] = defaultdict(int)
    rows = [p for p in load_inference_points() if p.get("weight_precision") == "fp4"
            and p.get("kv_precision") == "fp8" and "8-bit" in str(p.get("notes"))]
    assert len(rows) >= 30
    for p in rows:
        roomy = {**p.raw, "kv_cache_fraction": 1.0}
        (bound16,) = compare_point(catalog, dataclasses.replace(
            p, raw={**roomy, "kv_precision": "fp16"}), ideal)
        (bound8,) = compare_point(catalog, dataclasses.replace(p, raw=roomy), ideal)
        assert bound8.predicted > bound8.published, p.id
        if bound16.predicted < bound16.published:
            beaten[str(p.get("preset"))] += 1
    assert set(beaten) == {"llama-3.3-70b", "qwen3-30b-a3b", "llama-4-maverick",
                           "qwen3-235b-a22b"}


def test_a_row_without_its_global_batch_says_so() -> None:
    """NeMo's long-sequence page prints layouts and throughput but no global batch: those
    rows are listed as not compared, with that reason (not a flag's range error)."""
    from gpuarch.validation.training import validate_training

    skipped = dict(validate_training(load_catalog()).skipped)
    reasons = [why for i, why in skipped.items() if i.startswith("nemo-longseq-")]
    assert len(reasons) == 3
    assert all(why == "the source does not publish the global batch, which sets the "
               "micro-batches per step" for why in reasons)


def test_published_flops_per_token_match_the_model_with_its_mtp_blocks() -> None:
    """A row printing both TFLOP/s and tokens/s per GPU gives the FLOPs per token its
    framework counted. Megatron Bridge, the Megatron Core MoE report and NeMo AutoModel count
    causal attention at half; NeMo 24.07, 25.02 and 25.04 (to 8,192 tokens) and llm-foundry
    count it whole. The model's count
    (with the row's MTP blocks) agrees within 1.5% on every such row but the few named below,
    each for a stated reason: this pins the presets and says which runs had DeepSeek-V3's MTP
    block."""
    from gpuarch.validation.training import point_shape
    from gpuarch.workloads import forward_flops_per_token
    from gpuarch.workloads.mtp import mtp_forward_flops_per_token

    causal_sources = ("mbridge-", "mcore-moe-", "automodel-")
    known = {
        # an MTP block ran (260 GFLOP per token) but no layout places it, so none is set
        "mcore-moe-gb200-deepseek-v3-bf16": 1.038,
        # the excluded row: its two figures disagree by 2x
        "mbridge2602-h100-qwen3-30b-a3b-fp8cs": 1.999,
        # NeMo 25.02 at 65,536 tokens counts causal attention at half (369 of 504 GFLOP),
        # where its rows at 8,192 tokens or fewer count it whole
        "nemo2502-b200-mixtral-8x22b-256": 0.732,
    }
    checked = 0
    for p in load_training_points():
        tflops, tokens = p.get("tflops_per_gpu"), p.get("tokens_per_s_per_gpu")
        if not (tflops and tokens) or p.get("preset", "").startswith("gpt-oss"):
            continue  # GPT-OSS: Megatron's count leaves out most of its attention (0.83-0.89)
        shape, seq = point_shape(p), int(p.get("seq_len"))
        if shape.is_hybrid:
            continue  # Megatron's Mamba-2 count: tests/test_hybrid_training.py reconciles it
        causal = p.source.startswith(causal_sources)
        mtp = int(p.get("mtp_layers", 0))
        model = 3 * (forward_flops_per_token(shape, seq, causal=causal).total
                     + (mtp * mtp_forward_flops_per_token(shape, seq, causal=causal)
                        if mtp else 0.0))
        if p.source == "llm-foundry-bench":
            # llm-foundry counts 6 FLOPs per parameter, its learned position table's too,
            # which costs no multiply (a lookup); at 65,536 tokens that table is a tenth of
            # MPT-1B's parameters
            model += 6 * shape.positions * shape.hidden
        ratio = tflops * 1e12 / tokens / model
        assert ratio == pytest.approx(known.get(p.id, 1.0), abs=0.015), p.id
        checked += 1
    assert checked >= 90


def test_mlperf_offline_rows_take_their_lengths_from_their_logs() -> None:
    """Each MLPerf Inference row quotes its log's samples and tokens per second: the figure
    it publishes is the tokens, and its output length is their ratio, the run's mean output
    (LoadGen counts generated tokens); the input length is its dataset's mean (llama2-70b's
    OpenOrca set 222.33, llama3.1-405b's 9,428.64, deepseek-r1's 803.79, gpt-oss-120b's
    performance set 5,010.64, llama3.1-8b's CNN/DailyMail 870.73, mixtral-8x7b's 15,000
    samples 427.39; inference.toml's MLPerf sections)."""
    import re

    mean_input = {"llama-2-70b": 222.33, "llama-3.1-405b": 9428.64, "deepseek-v3": 803.79,
                  "gpt-oss-120b": 5010.64, "llama-3.1-8b": 870.73, "mixtral-8x7b": 427.39}
    # GPT-OSS's from the submitter's TEST09 output lengths (254.58 / 1,308.38); Llama 3.1
    # 8B's answers nearly all run to the 128-token cap
    spread = {"llama-2-70b": 0.0, "llama-3.1-405b": 0.38, "deepseek-v3": 1.25,
              "gpt-oss-120b": 0.19, "llama-3.1-8b": 0.0, "mixtral-8x7b": 0.78}
    rows = [p for p in load_inference_points() if p.source.startswith("mlperf-inference-")]
    assert len(rows) >= 12
    for p in rows:
        # a summary log prints "Samples per second: x", a detail log "result_samples_per_second: x"
        # LoadGen prints large rates in exponent form (CoreWeave's GB300 NVL72: 1.1361e+06)
        number = r"([\d.]+(?:e[+-]?\d+)?)"
        samples = float(re.search(r"[Ss]amples.per.second: " + number, p.where).group(1))
        tokens = float(re.search(r"[Tt]okens.per.second: " + number, p.where).group(1))
        assert p.get("output_tokens_per_s") == tokens, p.id
        assert p.get("output_len") == round(tokens / samples), p.id
        assert p.get("input_len") == round(mean_input[p.get("preset")]), p.id
        # the spread of the reference outputs where they are the benchmarked model's own
        # (405B 0.3809, DeepSeek-R1 1.2526 in the same files); Llama 2 70B's are GPT-4's
        assert p.get("output_len_cv", 0.0) == spread[p.get("preset")], p.id
        assert "Result is : VALID" in p.where or "result_validity: VALID" in p.where, p.id


def _one_block_step_time(where: str) -> float | None:
    """Seconds a step from a ``where`` that quotes one pair of result-log timestamps
    (``time_ms A -> B``) and one count of optimizer steps between them; None where it
    quotes something else (several blocks averaged, or no single count)."""
    import re

    if "mean" in where:
        return None
    pairs = re.findall(r"(1[67]\d{11}) -> (1[67]\d{11})", where)
    if len(pairs) != 1:
        return None
    counts = {int(n) for rx in (r"over (\d+) (?:optimizer )?steps", r"= (\d+) optimizer steps",
                                r"\((\d+) optimizer steps", r"[,(] ?(\d+) steps(?: of|[;)])",
                                r"/ (\d+) =")
              for n in re.findall(rx, where)}
    if not counts:  # "step 238 -> 239": optimizer step numbers (token counts run far larger)
        counts = {int(b) - int(a)
                  for a, b in re.findall(r"steps? (\d{1,5}) -> (\d{1,5})\b", where)}
    if len(counts) != 1:
        return None
    start, end = map(int, pairs[0])
    return (end - start) / counts.pop() / 1000.0


def test_mlperf_training_step_times_are_their_quoted_log_lines() -> None:
    """An MLPerf Training row's step time is the gap between the two result-log lines its
    ``where`` quotes over the optimizer steps between them, to the last digit entered (a
    2026-12-05 audit against the logs found one row entering the mean of two logged
    train_step_time values, 13.135 s, where its quoted gap gives 13.133). Rows that average
    several blocks are left to their notes; most quote one pair."""
    import re

    rows = [p for p in load_training_points() if p.source.startswith("mlperf-training-")]
    checked = 0
    for p in rows:
        derived, entered = _one_block_step_time(p.where), p.get("step_time_s")
        if derived is None or entered is None:
            continue
        decimals = len(repr(float(entered)).partition(".")[2])
        # within one unit of the last digit entered (five rows round their last digit up)
        assert abs(derived - entered) <= 10.0 ** -decimals + 1e-12, (p.id, derived)
        checked += 1
    assert checked >= 105, checked  # 109 of the 149 rows quote a single pair
    # a row that quotes its log's samples at a global batch runs that batch
    quoted = [(p, int(m.group(1))) for p in rows
              if (m := re.search(r"at GBS (\d+)", p.where))]
    assert len(quoted) >= 100
    for p, batch in quoted:
        assert p.get("global_batch") == batch, p.id


def test_closed_loop_rows_take_their_lengths_from_the_printed_totals() -> None:
    """A benchmark client run whose page prints its token totals (sglang.bench_serving,
    vllm bench serve) is entered at the means those totals give: input_len and output_len
    are the printed input and generated tokens over the requests its notes quote."""
    import re

    totals = re.compile(r"\(([\d,]+) input and ([\d,]+) (?:generated|output) tokens"
                        r"(?: over ([\d,]+) requests)?")
    checked = 0
    for p in load_inference_points():
        found = totals.search(f"{p.get('notes', '')} {p.where}")
        if found is None:
            continue
        prompt, answer = (int(g.replace(",", "")) for g in found.groups()[:2])
        requests = int(found.group(3).replace(",", "")) if found.group(3) \
            else p.get("num_requests")
        assert (p.get("input_len"), p.get("output_len")) == (
            round(prompt / requests), round(answer / requests)), p.id
        checked += 1
    assert checked >= 12, checked
    # and the output rate a row's where quotes from the client's printout is its figure
    rate = re.compile(r"Output token throughput \(tok/s\): ([\d,.]+)")
    quoted = [(p, float(m.group(1).replace(",", ""))) for p in load_inference_points()
              if (m := rate.search(p.where))]
    assert len(quoted) >= 16
    for p, printed in quoted:
        assert p.get("output_tokens_per_s") == printed, p.id


def test_tensorrt_llm_overview_rows_are_the_cells_they_name() -> None:
    """A row of a TensorRT-LLM performance overview runs the lengths and layout its cell
    names: 'row I/O' (v1.0, 03e27c7, release 1.2) or 'TP t, I, O' (v0.17) are its lengths,
    a column 'TPn' or 'DEPn' its GPUs. DEPn is attention data-parallel with EP n (tp 1);
    v1.0's MoE 'TPn' columns are too, as that source's comment explains (the doc's MoE
    options turn attention data parallelism on), and a dense model's TPn is tensor
    parallelism over n GPUs. The 2026-12-05 audit matched every such row to its
    published cell; this keeps them so."""
    import re

    lengths = re.compile(r"row '(\d+)/(\d+)'")
    v017 = re.compile(r"TP (\d+), '(\d+), (\d+)'")
    column = re.compile(r"column '[^']*?\b(TP|DEP)(\d+)")
    checked = 0
    for p in load_inference_points():
        if not p.source.startswith("trtllm-perf-overview-"):
            continue
        found = v017.search(p.where)
        if found:
            tp, isl, osl = map(int, found.groups())
            assert (p.get("tp"), p.get("gpus")) == (tp, tp), p.id
        else:
            found = lengths.search(p.where)
            assert found is not None, p.id
            isl, osl = map(int, found.groups())
            kind, n = column.search(p.where).groups()  # type: ignore[union-attr]
            n = int(n)
            moe = preset(p.get("preset")).shape.is_moe
            attention_dp = kind == "DEP" or (p.source == "trtllm-perf-overview-v1.0"
                                             and moe and n > 1)
            layout = (1, n) if attention_dp else (n, p.get("ep", 1))
            assert (p.get("gpus"), (p.get("tp"), p.get("ep", 1))) == (n, layout), p.id
        assert (p.get("input_len"), p.get("output_len")) == (isl, osl), p.id
        checked += 1
    assert checked == 813, checked  # 373 + 210 + 100 + 130


def test_trtllm_0_9_and_neural_magic_rows_are_the_cells_they_name() -> None:
    """TensorRT-LLM v0.9.0's rows name 'model | batch | TP | input | output' (peak
    throughput) or 'model | batch | TP | input' (first-token latency, one token out);
    Neural Magic's single-stream rows 'GPUxN' and a use case 'input / output' at batch 1.
    The 2026-12-05 audit matched every one to its published cell; this keeps them so."""
    import re

    checked = 0
    for p in load_inference_points():
        if p.source == "trtllm-perf-v0.9.0":
            cells = re.search(r"row '[^|']+((?:\| \d+ ?)+)'", p.where).group(1)  # type: ignore[union-attr]
            numbers = [int(c) for c in cells.split("|") if c.strip()]
            batch, tp, isl = numbers[:3]
            osl = numbers[3] if len(numbers) == 4 else 1
            assert (p.get("batch"), p.get("tp"), p.get("gpus")) == (batch, tp, tp), p.id
        elif p.source.startswith("nm-card-"):
            gpus = int(re.search(r"row '[A-Za-z0-9]+x(\d+)'", p.where).group(1))  # type: ignore[union-attr]
            isl, osl = map(int, re.search(r"(\d+) / (\d+)'", p.where).groups())  # type: ignore[union-attr]
            assert (p.get("batch"), p.get("tp"), p.get("gpus")) == (1, gpus, gpus), p.id
        else:
            continue
        assert (p.get("input_len"), p.get("output_len")) == (isl, osl), p.id
        checked += 1
    assert checked == 288, checked  # 144 + 4 x 36


def test_lmdeploy_a100_rows_are_the_whole_llama2_tables() -> None:
    """LMDeploy v0.1.0a1's static-inference tables on A100 (docs/en/benchmark/a100_fp16.md)
    run every model at batch 1, 16, 32 and 64 over five prompt/output pairs. All 60 Llama 2
    cells are entered, each once, and each row runs the batch, TP and lengths its 'where'
    names, on TP GPUs (the internlm-20b table has no preset and is not entered)."""
    import re

    cells: dict[str, set[tuple[int, int, int, int]]] = defaultdict(set)
    for p in load_inference_points():
        if p.source != "lmdeploy-a100-fp16-v0.1.0a1":
            continue
        table = re.search(r"table '(llama2-\d+b)'", p.where).group(1)  # type: ignore[union-attr]
        batch, tp, isl, osl = map(int, re.search(  # type: ignore[union-attr]
            r"row 'batch (\d+), tp (\d+), prompt_tokens (\d+), output_tokens (\d+)'",
            p.where).groups())
        assert p.get("preset") == table.replace("llama2", "llama-2"), p.id
        assert (p.get("batch"), p.get("tp"), p.get("gpus")) == (batch, tp, tp), p.id
        assert (p.get("input_len"), p.get("output_len")) == (isl, osl), p.id
        assert (batch, tp, isl, osl) not in cells[table], p.id
        cells[table].add((batch, tp, isl, osl))
    lengths = {(1, 128), (128, 128), (128, 2048), (2048, 128), (2048, 2048)}
    for table, tp in (("llama2-7b", 1), ("llama2-13b", 1), ("llama2-70b", 4)):
        assert cells[table] == {(b, tp, i, o) for b in (1, 16, 32, 64) for i, o in lengths}, table


def test_mlperf_deepseek_rows_balance_their_attention_ranks() -> None:
    """Every MLPerf DeepSeek-R1 config read (NVIDIA v5.1, CoreWeave, Azure, Cisco, Dell,
    GigaComputing, Nebius, Google, QCT) sets adp_balancing_enable, TensorRT-LLM's attention-DP
    balancing: the rows say so, and the serving model takes it (the balanced prefill wait)."""
    from gpuarch.validation.inference import point_config

    rows = [p for p in load_inference_points()
            if p.source.startswith("mlperf-inference-") and p.get("preset") == "deepseek-v3"]
    assert len(rows) == 16
    for p in rows:
        assert p.get("adp_balance") is True, p.id
        assert point_config(p, 8).adp_balance, p.id


def test_trtllm_0_9_cells_decode_with_the_kernel_its_xqa_rule_leaves_them() -> None:
    """TensorRT-LLM 0.9's XQA decode kernel took a model only at 8 or 1 query heads per KV
    head and heads of 128 or 256 (DecoderXQARunner::shouldUse of the 0.8-0.10 line, quoted
    in the source's comment); every other model decoded on the masked multi-head kernel.
    Each cell of that table says which (decode_kv_reads), by that rule and nothing else."""
    from gpuarch.validation.inference import point_config
    from gpuarch.validation.training import point_shape

    rows = [p for p in load_inference_points() if p.source == "trtllm-perf-v0.9.0"]
    assert len(rows) == 144  # every cell, the five excluded too
    multi_head = set()
    for p in rows:
        shape = point_shape(p)
        xqa = shape.heads // shape.n_kv_heads in (1, 8) and shape.d_head in (128, 256)
        reads = point_config(p, 8).decode_kv_reads
        assert reads == ("shared" if xqa else "per-query-head"), p.id
        if not xqa:
            multi_head.add(shape.name)
    assert multi_head == {"mistral-7b", "mixtral-8x7b", "falcon-180b"}


def test_llama4_chunked_layers_decode_on_the_multi_head_kernel_on_hopper() -> None:
    """From TensorRT-LLM 0.21 Llama 4 keeps its chunked attention whenever the model's
    max_seq_len is at least the chunk (Llama4Attention drops the chunks only below it, PR
    #6306), and trtllm-bench's PyTorch flow sets max_seq_len to the dataset's longest input
    plus output (throughput.py). On Hopper XQA refuses a chunked layer (supportConfigCommon
    in decoderXQAImplJIT/kernelUtils.cpp), so those layers decode on the masked multi-head
    kernel, per query head (decode_kv_reads chunked-per-query-head); Blackwell's trtllm-gen
    kernels take the chunks. Every Llama 4 row of the 1.x performance overviews says which,
    by that rule and nothing else (for the v1.0 table's rows below the chunk the rule assumes
    release 1.0 carries PR #6306, which is not established: docs/performance-model.md)."""
    from gpuarch.validation.inference import point_config
    from gpuarch.validation.training import point_shape

    catalog = load_catalog()
    rows = [p for p in load_inference_points()
            if p.source in ("trtllm-perf-overview-v1.0", "trtllm-perf-overview-03e27c7")
            and str(p.get("preset")).startswith("llama-4")]
    assert len(rows) == 77
    multi_head = []
    for p in rows:
        shape = point_shape(p)
        assert shape.attention_chunked and shape.sliding_window == 8192, p.id
        hopper = catalog.product(p.get("gpu")).architecture == "hopper"
        keeps_chunks = p.get("input_len") + p.get("output_len") >= shape.sliding_window
        reads = point_config(p, 8).decode_kv_reads
        assert reads == ("chunked-per-query-head" if hopper and keeps_chunks
                         else "shared"), p.id
        if reads != "shared":
            multi_head.append(p.id)
    assert len(multi_head) == 5


@pytest.mark.parametrize(("kind", "name"), [("source", "s"), ("point", "p")])
def test_an_id_used_twice_in_a_validation_file_is_an_error(tmp_path, kind: str,
                                                            name: str) -> None:
    """Sources are looked up by id, so a second [[source]] with the same id would silently
    replace the first (and a second point hide behind the first's name): both loaders refuse
    the file, naming the id."""
    from gpuarch.errors import GpuarchError

    source = '[[source]]\nid = "s"\ntitle = "t"\nurl = "https://x"\n\n'
    point = '[[point]]\nid = "p"\nsource = "s"\n\n'
    path = tmp_path / "twice.toml"
    path.write_text(source * 2 + point if kind == "source" else source + point * 2)
    for load in (load_training_points, load_inference_points):
        with pytest.raises(GpuarchError, match=f"{kind} id '{name}' is used twice"):
            load(path)


def test_a_source_no_point_cites_is_an_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A [[source]] that no point names is a leftover (an edit once left one behind in the
    training file with a point's id and another release's title): both loaders refuse the
    file, naming it."""
    from gpuarch.errors import GpuarchError

    path = tmp_path / "leftover.toml"
    path.write_text('[[source]]\nid = "s"\ntitle = "t"\nurl = "https://x"\n\n'
                    '[[source]]\nid = "x"\ntitle = "t"\nurl = "https://x"\n\n'
                    '[[point]]\nid = "p"\nsource = "s"\n')
    for load in (load_training_points, load_inference_points):
        with pytest.raises(GpuarchError, match="source 'x' is cited by no point"):
            load(path)


def test_a_training_point_may_replace_its_presets_fields() -> None:
    """MLPerf's GPT-OSS-20B trains the published shape with a 128,256-token vocabulary: the
    rows name the preset and give only ``vocab``, which replaces the preset's and leaves the
    rest; a value the shape rejects names the point and the field."""
    from gpuarch.errors import GpuarchError
    from gpuarch.validation.training import point_shape
    from gpuarch.workloads import preset

    rows = [p for p in load_training_points() if p.id.startswith("mlperf60-")
            and "gpt-oss-20b" in p.id]
    assert len(rows) >= 12
    published = preset("gpt-oss-20b").shape
    for row in rows:
        shape = point_shape(row)
        assert shape.vocab == 128256 != published.vocab
        assert dataclasses.replace(shape, vocab=published.vocab) == published
    bad = TrainingPoint("bad-row", "s", "t", "https://x", "w",
                        {"preset": "gpt-oss-20b", "kv_heads": 7})
    with pytest.raises(GpuarchError, match="point bad-row: kv_heads: 7 must divide heads 64"):
        point_shape(bad)


def test_rows_that_give_their_own_shape_count_the_published_parameters() -> None:
    """The runs that give a shape rather than a preset carry their architecture's details
    (Megatron GPT and llm-foundry's MPT: LayerNorm, a learned position table, biases, tied
    embeddings): llm-foundry's logs print each MPT's NumParams (the rows' notes), which the
    shape gives to the parameter; Megatron-LM's SC21 Table 1 and 2019 paper round theirs,
    and the shape rounds to the same figure. (As Llama-style shapes, untied and without
    biases, they had come out up to 6.5% over.)"""
    import re

    from gpuarch.validation.training import point_shape
    from gpuarch.workloads import count_params

    printed = table = 0
    for p in load_training_points():
        if p.get("preset"):
            continue
        total = count_params(point_shape(p)).total
        shown = re.search(r"NumParams ([\d,]+)", p.get("notes") or "")
        if shown:
            assert total == int(shown.group(1).replace(",", "")), p.id
            printed += 1
        row = re.fullmatch(r"Table 1, row '([\d.]+)'.*", p.where)
        if p.source == "megatron-sc21" and row:
            digits = row.group(1)
            decimals = len(digits.split(".")[1]) if "." in digits else 0
            assert round(total / 1e9, decimals) == float(digits), p.id
            table += 1
    assert printed >= 6 and table == 10


def test_no_static_batch_figure_beats_reading_its_weights_once_a_step() -> None:
    """A static batch reads every weight a GPU holds once per step (for an MoE model, every
    expert, where its tokens leave almost none untouched), so no published figure of one can
    beat the datasheet bandwidth doing that: output tokens/s per GPU at most the batch over
    (weights per GPU / bandwidth) over the GPUs, and a first token no sooner than one such
    read. A row whose figure breaks it, in the formats it is entered in, is excluded, and the
    reason quotes the figure and the bound; every other row keeps inside it (TensorRT-LLM
    0.9's Mixtral cells, ``python scripts/trtllm09_tables.py``)."""
    from gpuarch.units import Unit, from_si
    from gpuarch.validation.inference import point_config, weight_read_s
    from gpuarch.validation.training import point_shape

    catalog = load_catalog()
    checked = excluded = 0
    for p in load_inference_points():
        if p.get("mode") != "static-batch":
            continue
        shape, product = point_shape(p), catalog.product(p.get("gpu"))
        cfg = point_config(p, 8, product)
        batch = int(cfg.batch or 0)
        if shape.is_moe:
            tokens = batch if p.get("output_tokens_per_s_per_gpu") else cfg.input_len * batch
            if (1 - shape.experts_per_token / shape.experts) ** tokens > 0.01:
                continue
        read_s = weight_read_s(catalog, p)
        rate, ttft = p.get("output_tokens_per_s_per_gpu"), p.get("ttft_s")
        if rate:
            bound = batch / read_s / cfg.gpus
            broken, quoted = rate >= bound, (f"{rate:,.0f} tokens/s", f"at most {bound:,.0f}")
        elif ttft:
            broken = ttft <= read_s
            quoted = (f"{from_si(ttft, Unit.MS):g} ms", f"({from_si(read_s, Unit.MS):.1f} ms)")
        else:
            continue
        checked += 1
        assert broken == bool(p.get("excluded")), p.id
        if broken:
            excluded += 1
            assert all(q in p.get("excluded") for q in quoted), p.id
    assert checked >= 100 and excluded == 5


def test_a_row_names_the_board_it_ran_on() -> None:
    """A row's ``system`` replaces the GPU's reference system (the 4-GPU H100 SXM servers'
    HGX board, whose pairs share 6 NVLinks, not DGX H100's NVSwitch); a system built around
    another GPU is refused by name, an unknown one with a suggestion."""
    catalog = load_catalog()
    h100 = catalog.product("h100")
    rows = [p for p in load_inference_points() if p.get("system") == "hgx-h100-4gpu"]
    assert len(rows) == 5
    assert all(p.get("gpus") == 4 and p.get("gpu") == "h100-sxm5-80gb" for p in rows)
    assert point_system(catalog, rows[0], h100) is catalog.system("hgx-h100-4gpu")
    plain = TrainingPoint("plain", "s", "t", "https://x", "w", {})
    assert point_system(catalog, plain, h100) is catalog.system_for(h100)
    other = TrainingPoint("b-row", "s", "t", "https://x", "w", {"system": "dgx-b200"})
    with pytest.raises(GpuarchError, match="point b-row: system 'dgx-b200' holds"):
        point_system(catalog, other, h100)
    typo = TrainingPoint("t-row", "s", "t", "https://x", "w", {"system": "hgx-h100-4gpux"})
    with pytest.raises(GpuarchError, match="hgx-h100-4gpu"):
        point_system(catalog, typo, h100)


def test_a_row_whose_notes_turn_tp_overlap_off_runs_without_it() -> None:
    """Notes that say a recipe runs without userbuffers overlap ("TP overlap off
    (tp_comm_overlap = false)") and the field the model reads agree; Megatron Bridge's
    Nemotron 3 Super recipes build no comm_overlap, so every Super row at TP > 1 in its
    tables (GB200's TP 2) runs without it, though the framework's default is on."""
    rows = load_training_points()
    said = [p for p in rows if "TP overlap off (tp_comm_overlap = false)" in p.get("notes", "")]
    assert len(said) >= 7
    assert all(p.get("tp_comm_overlap") is False for p in said), \
        [p.id for p in said if p.get("tp_comm_overlap") is not False]
    super_tp = [p for p in rows if p.get("preset") == "nemotron-3-super-120b-a12b"
                and "Bridge" in p.get("framework", "") and int(p.get("tp") or 1) > 1]
    assert len(super_tp) == 9  # GB200 rows of 26.04 to 26.08 and the verification card
    assert all(p in said for p in super_tp)


def _step_tokens_per_s(p: TrainingPoint) -> float:
    """The tokens a second a row's step time makes at its sequence and global batch."""
    return float(p.get("seq_len") * p.get("global_batch") / p.get("step_time_s"))


def _accumulation(p: TrainingPoint) -> int:
    """The micro-batches a step accumulates per data-parallel rank: GBS over MBS x DP."""
    return int(p.get("global_batch") // (p.get("micro_batch") * p.get("dp")))


def _step_mfu(p: TrainingPoint, flops_per_sequence: float, peak: float) -> float:
    """The MFU a row's step time gives at a source's FLOPs a sequence and peak a GPU."""
    return float(p.get("global_batch") * flops_per_sequence / p.get("step_time_s")
                 / p.get("gpus") / peak)


def test_dgx_cloud_405b_rows_give_the_tables_own_throughput() -> None:
    """NVIDIA's DGX Cloud Benchmarking llama3.1/README.md @60d6fd33 prints, beside each step
    time, the tokens per second it makes at the table's global batch: the rows' step times,
    sequence and global batch give those figures back (GB200 BF16 56,092 / 110,563 / 220,567
    and FP8 85,514 / 169,590 / 335,867 on 128 / 256 / 512 GPUs; H100 BF16 105,863 and FP8
    161,072 on 512), so the batch entered is the one that was run."""
    published = {
        "dgxc2504-gb200-llama31-405b-bf16-128": 56092,
        "dgxc2504-gb200-llama31-405b-bf16-256": 110563,
        "dgxc2504-gb200-llama31-405b-bf16-512": 220567,
        "dgxc2504-gb200-llama31-405b-fp8-128": 85514,
        "dgxc2504-gb200-llama31-405b-fp8-256": 169590,
        "dgxc2504-gb200-llama31-405b-fp8-512": 335867,
        "dgxc2504-h100-llama31-405b-bf16-512": 105863,
        "dgxc2504-h100-llama31-405b-fp8-512": 161072,
    }
    rows = {p.id: p for p in load_training_points() if p.source == "dgxc-nemo-llama31-405b-25.04"}
    assert set(rows) == set(published)
    for pid, tokens_per_s in published.items():
        p = rows[pid]
        got = _step_tokens_per_s(p)
        assert got == pytest.approx(tokens_per_s, abs=1.0), pid
        assert p.get("gpus") == p.get("tp") * p.get("pp") * p.get("cp") * p.get("dp")


def test_dgx_cloud_llama31_24_09_rows_give_the_tables_own_figures() -> None:
    """NVIDIA's DGX Cloud Benchmarking llama3.1/README_8b.md and README_70b.md @143b90dd
    (NeMo 24.09) print, beside each H100 step time, the tokens/s it makes at GBS 16 x GPUs
    (8B) or 2 x GPUs (70B) and its MFU at 4.74e14 (8B) or 3.94e15 (70B) FLOPs a sequence
    over 989 (BF16) or 1,979 (FP8) TFLOPS: the rows' step times, sequence and global batch
    give both back, and their layouts are the tables' headers (8B: TP 1, PP 1, CP 2, MBS 1,
    GA 32; 70B: TP 4, PP 4, CP 2, VP 5, MBS 1, GA 64)."""
    # size, precision: (GPUs, tokens/s, MFU) per column
    published = {
        ("8b", "bf16"): [(8, 81222, 0.5937), (16, 161319, 0.5896), (32, 321403, 0.5873),
                         (64, 641331, 0.5860), (128, 1280704, 0.5851)],
        ("8b", "fp8"): [(8, 108436, 0.3963), (16, 215535, 0.3939), (32, 430185, 0.3931),
                        (64, 855980, 0.3910), (128, 1708474, 0.3902)],
        ("70b", "bf16"): [(64, 71235, 0.5410), (128, 142373, 0.5406), (256, 283399, 0.5381),
                          (512, 563372, 0.5348), (1024, 1124478, 0.5338),
                          (2048, 2248957, 0.5338)],
        ("70b", "fp8"): [(64, 95239, 0.3617), (128, 191871, 0.3643), (256, 375834, 0.3568),
                         (512, 750323, 0.3562), (1024, 1487342, 0.3530),
                         (2048, 2945955, 0.3496)],
    }
    rows = {p.id: p for p in load_training_points()
            if p.source in ("dgxc-nemo-llama31-8b-24.09", "dgxc-nemo-llama31-70b-24.09")}
    assert len(rows) == sum(len(v) for v in published.values())
    for (size, precision), columns in published.items():
        flops, peak = {"8b": 4.74e14, "70b": 3.94e15}[size], {"bf16": 989e12,
                                                               "fp8": 1979e12}[precision]
        layout = (4, 4, 2, 5, 64) if size == "70b" else (1, 1, 2, 1, 32)
        for gpus, tokens_per_s, mfu in columns:
            p = rows[f"dgxc2501-h100-llama31-{size}-{precision}-{gpus}"]
            # the 70B BF16 2,048-GPU column prints 14.98 s beside the 1,024 column's
            # tokens/s doubled and its MFU (what 14.92 s makes); the step time is entered
            tol = 5e-3 if p.id == "dgxc2501-h100-llama31-70b-bf16-2048" else 0.0
            assert _step_tokens_per_s(p) == pytest.approx(tokens_per_s, rel=tol, abs=1.0), p.id
            assert _step_mfu(p, flops, peak) == pytest.approx(mfu, abs=5e-4 + tol * mfu), p.id
            ga = p.get("global_batch") // (p.get("micro_batch") * p.get("dp"))
            assert (p.get("tp"), p.get("pp"), p.get("cp"), p.get("vpp") or 1, ga) == layout
            assert p.get("gpus") == p.get("tp") * p.get("pp") * p.get("cp") * p.get("dp")


def test_dgx_cloud_gpt3_175b_rows_give_the_tables_own_figures() -> None:
    """NVIDIA's DGX Cloud Benchmarking nemo_megatron/README_175b.md @35a9aecc prints, beside
    each H100 step time of GPT-3 175B (TP 4, PP 8, VP 12, MBS 1, GBS 2 x GPUs), its tokens/s
    and its MFU at 2.20e15 FLOPs a sequence over 989 (BF16) or 1,979 (FP8) TFLOPS: the rows
    give both back."""
    published = {
        "bf16": [(128, 58843, 0.4993), (256, 117159, 0.4971), (512, 230710, 0.4894),
                 (1024, 465517, 0.4938), (2048, 930001, 0.4932)],
        "fp8": [(128, 88562, 0.3756), (256, 175936, 0.3730), (512, 325645, 0.3452),
                (1024, 624152, 0.3309), (2048, 1344328, 0.3563)],
    }
    rows = {p.id: p for p in load_training_points() if p.source == "dgxc-nemo-gpt3-175b-24.05"}
    assert len(rows) == 10
    for precision, columns in published.items():
        peak = {"bf16": 989e12, "fp8": 1979e12}[precision]
        for gpus, tokens_per_s, mfu in columns:
            p = rows[f"dgxc2411-h100-gpt3-175b-{precision}-{gpus}"]
            assert _step_tokens_per_s(p) == pytest.approx(tokens_per_s, abs=1.0), p.id
            assert _step_mfu(p, 2.20e15, peak) == pytest.approx(mfu, abs=5e-4), p.id
            assert (p.get("tp"), p.get("pp"), p.get("vpp"), p.get("micro_batch")) == (4, 8, 12, 1)
            assert p.get("gpus") == p.get("tp") * p.get("pp") * p.get("dp")


def test_dgx_cloud_nemotron4_rows_give_the_tables_own_figures() -> None:
    """NVIDIA's DGX Cloud Benchmarking nemotron/README.md @1f6d9f40 prints, beside the H100
    step times, tokens/s: the 340B's (BF16 4.606 s, FP8 3.107 s on 256 GPUs) 56,913 and
    84,372, the 15B's (BF16 2.746 s, FP8 1.988 s on 16 GPUs) 95,463 and 131,863; the rows'
    step times, 4,096-token sequences and global batches give them back, and their layouts
    are the README's H100 tables. For the 15B it also prints MFU, 56.7% (BF16, of 989
    TFLOPS) and 39.1% (FP8, of 1,979), at 3.85e14 FLOPs a sequence, which is the preset's
    count: 4,096 tokens at its training FLOPs per token with attention counted whole."""
    rows = {p.id: p for p in load_training_points() if p.source == "dgxc-nemo-nemotron4-25.04"}
    published = {"dgxc2504-h100-nemotron4-340b-bf16-256": 56913,
                 "dgxc2504-h100-nemotron4-340b-fp8-256": 84372,
                 "dgxc2504-h100-nemotron4-15b-bf16-16": 95463,
                 "dgxc2504-h100-nemotron4-15b-fp8-16": 131863}
    assert set(rows) == set(published)
    for pid, tokens_per_s in published.items():
        p = rows[pid]
        got = _step_tokens_per_s(p)
        assert got == pytest.approx(tokens_per_s, abs=1.0), pid
        layout = (8, 8, 12, 4, 1, 64) if "340b" in pid else (2, 1, 1, 8, 2, 64)
        assert (p.get("tp"), p.get("pp"), p.get("vpp") or 1, p.get("dp"),
                p.get("micro_batch"), p.get("global_batch")) == layout, pid
    flops = training_flops_per_token(preset("nemotron-4-15b").shape, 4096) * 4096
    assert flops == pytest.approx(3.85e14, rel=2e-3)
    for precision, (mfu, peak) in {"bf16": (0.567, 989e12), "fp8": (0.391, 1979e12)}.items():
        p = rows[f"dgxc2504-h100-nemotron4-15b-{precision}-16"]
        got = _step_mfu(p, 3.85e14, peak)
        assert got == pytest.approx(mfu, abs=5e-4), precision


def test_dgx_cloud_nemotron_h_rows_give_the_tables_own_throughput() -> None:
    """NVIDIA's DGX Cloud Benchmarking nemotronh/README.md @1f6d9f40 prints, beside each
    H100 step time of Nemotron-H 56B in FP8, the tokens per second it makes at GBS = 3 x GPUs
    (52,016 / 104,454 / 203,003 / 395,888 / 807,321 / 1,605,168 / 3,201,148 on 32 to 2,048
    GPUs): the rows' step times, sequence and global batch give those figures back, and each
    row's layout is the table's TP 8, PP 1, CP 1."""
    published = {32: 52016, 64: 104454, 128: 203003, 256: 395888, 512: 807321,
                 1024: 1605168, 2048: 3201148}
    rows = {p.get("gpus"): p for p in load_training_points()
            if p.source == "dgxc-nemo-nemotronh-56b-25.04"}
    assert set(rows) == set(published)
    for gpus, tokens_per_s in published.items():
        p = rows[gpus]
        assert p.get("global_batch") == 3 * gpus
        got = _step_tokens_per_s(p)
        assert got == pytest.approx(tokens_per_s, abs=1.0), p.id
        assert (p.get("tp"), p.get("pp"), p.get("cp"), p.get("dp")) == (8, 1, 1, gpus // 8)


def test_dgx_cloud_llama4_maverick_rows_give_the_tables_own_throughput() -> None:
    """NVIDIA's DGX Cloud Benchmarking llama4/README.md @1f6d9f40 prints, beside each Llama 4
    Maverick step time, the tokens per second it makes (GB200 BF16 1,077,749 / 2,135,388 /
    4,197,507 and FP8 1,376,867 / 2,695,569 / 5,306,935 on 128 / 256 / 512 GPUs; H100 BF16
    1,895,847 and FP8 2,176,574 on 512), computed from step times it rounds to the
    millisecond: the rows' step times, sequence and global batch give them back within
    0.1%, so the GB200 rows' global batch is eight sequences a GPU (the launch script's
    default of 1,024 is the 128-GPU row's alone) and the H100 rows' 1,024."""
    published = {
        "dgxc2504-gb200-llama4-maverick-bf16-128": 1077749,
        "dgxc2504-gb200-llama4-maverick-bf16-256": 2135388,
        "dgxc2504-gb200-llama4-maverick-bf16-512": 4197507,
        "dgxc2504-gb200-llama4-maverick-fp8-128": 1376867,
        "dgxc2504-gb200-llama4-maverick-fp8-256": 2695569,
        "dgxc2504-gb200-llama4-maverick-fp8-512": 5306935,
        "dgxc2504-h100-llama4-maverick-bf16-512": 1895847,
        "dgxc2504-h100-llama4-maverick-fp8-512": 2176574,
    }
    rows = {p.id: p for p in load_training_points()
            if p.source == "dgxc-nemo-llama4-maverick-25.04"}
    assert set(rows) == set(published)
    for pid, tokens_per_s in published.items():
        p = rows[pid]
        got = _step_tokens_per_s(p)
        assert got == pytest.approx(tokens_per_s, rel=1e-3), pid
        assert p.get("gpus") == p.get("tp") * p.get("pp") * p.get("cp") * p.get("dp")
        assert p.get("gpus") % (p.get("ep") * p.get("etp")) == 0


def test_nemo_performance_summary_rows_give_the_pages_own_figures() -> None:
    """NeMo's performance summaries for NeMo 25.04 (DGX-GB200) and 25.02 (DGX-B200, and the
    one DGX-H100 row the stored page reaches) print each FP8 pre-training run's tokens/s and
    model TFLOP/s per GPU and its gradient accumulation (GA): the rows keep those figures,
    and their layouts give the page's GA back (GBS over MBS x DP). (Their TFLOP/s over
    tokens/s, the FLOPs per token NeMo counted, is checked with every other row's in
    test_published_flops_per_token_match_the_model_with_its_mtp_blocks: Nemotron-4 15B's
    94.0 GFLOP pins its new preset.)"""
    # id: (tokens/s per GPU, model TFLOP/s per GPU or None where the stored page cuts it, GA)
    published = {
        "nemo2504-gb200-gpt3-175b-128": (1804, 1942, 16),
        "nemo2504-gb200-llama3-8b-8": (33099, 1917, 8),
        "nemo2504-gb200-llama3-70b-64": (4035, 1943, 2),
        "nemo2504-gb200-nemotron4-15b-64": (17809, 1674, 2),
        "nemo2504-gb200-nemotron4-340b-128": (737, 1551, 8),
        "nemo2504-gb200-mixtral-8x7b-64": (19275, 1598, 2),
        "nemo2504-gb200-mixtral-8x22b-256": (2731, None, 16),
        "nemo2502-b200-gpt3-175b-512": (1600, 1722, 32),
        "nemo2502-b200-llama3-8b-8": (26006, 1506, 8),
        "nemo2502-b200-llama3-70b-64": (3062, 1474, 32),
        "nemo2502-b200-llama31-405b-128": (625, 1658, 32),
        "nemo2502-b200-nemotron4-15b-64": (14760, 1387, 2),
        "nemo2502-b200-nemotron4-340b-128": (602, 1268, 8),
        "nemo2502-b200-mixtral-8x7b-64": (15457, 1282, 2),
        "nemo2502-b200-mixtral-8x22b-256": (2232, 824, 16),
        "nemo2502-h100-gpt3-175b-512": (866, 932, 64),
    }
    rows = {p.id: p for p in load_training_points()
            if p.source in ("nemo-perf-25.04", "nemo-perf-25.02")}
    assert set(rows) == set(published)
    for pid, (tokens, tflops, ga) in published.items():
        p = rows[pid]
        assert p.get("tokens_per_s_per_gpu") == tokens, pid
        assert p.get("tflops_per_gpu") == tflops, pid
        assert p.get("gpus") == p.get("tp") * p.get("pp") * p.get("cp") * p.get("dp"), pid
        assert p.get("global_batch") == ga * p.get("micro_batch") * p.get("dp"), pid


def test_dgx_cloud_grok1_rows_give_the_tables_own_figures() -> None:
    """NVIDIA's DGX Cloud Benchmarking grok1/README.md @1f6d9f40 prints, beside each Grok-1
    314B step time, its tokens per second (128 and 256 GB200: BF16 286,300.61 / 567,564.82,
    FP8 395,838.43 / 802,891.27; 512 H100: BF16 526,493, FP8 624,478) and its MFU at 4.27e15
    FLOPs a sequence over 2.45 (BF16) or 4.9 (FP8) PFLOPS on GB200: the rows give those back.
    At 512 GB200 the printed tokens/s (572,679 and 807,684) are what half the batch would
    make, while the MFU (47.6% and 33.6%) and the launch script (GBS = 2 x GPUs) give GBS
    1,024, the batch entered; the model the rows build has 8 experts, top-2."""
    rows = {p.id: p for p in load_training_points() if p.source == "dgxc-nemo-grok1-314b-25.04"}
    assert len(rows) == 8
    tokens = {"gb200-grok1-314b-bf16-128": 286300.61, "gb200-grok1-314b-bf16-256": 567564.82,
              "gb200-grok1-314b-fp8-128": 395838.43, "gb200-grok1-314b-fp8-256": 802891.27,
              "h100-grok1-314b-bf16-512": 526493, "h100-grok1-314b-fp8-512": 624478}
    for key, tokens_per_s in tokens.items():
        p = rows["dgxc2504-" + key]
        got = _step_tokens_per_s(p)
        assert got == pytest.approx(tokens_per_s, rel=2e-4), key
    mfu = {"bf16": (0.476, 2.45e15), "fp8": (0.336, 4.9e15)}
    for precision, (published, peak) in mfu.items():
        p = rows[f"dgxc2504-gb200-grok1-314b-{precision}-512"]
        assert p.get("global_batch") == 2 * p.get("gpus") == 1024
        got = _step_mfu(p, 4.27e15, peak)
        assert got == pytest.approx(published, abs=5e-4), precision
    for p in rows.values():
        assert (p.get("experts"), p.get("experts_per_token")) == (8, 2)
        assert p.get("gpus") == p.get("tp") * p.get("pp") * p.get("cp") * p.get("dp")


def test_automodel_2026_hybrid_rows_give_the_pages_own_figures() -> None:
    """NeMo AutoModel's current performance summary prints Nemotron 3 Nano (8 H100) and
    Super (64 H100) on nemo:26.02 with their step times, TFLOP/s and tokens/s per GPU: the
    rows' step times, batch and sequence give the tokens/s back (16,789 and 4,497), their
    accumulation is the page's GA (16 and 4), and the page's FLOPs a token (19.5 and 74.3
    GFLOP) are AutoModel's count; Super's sits 2% under the model's count without MTP
    depths (75.9) and far from it with two (85.7), so no MTP block ran."""
    from gpuarch.validation.training import point_shape
    from gpuarch.workloads import forward_flops_per_token
    from gpuarch.workloads.mtp import mtp_forward_flops_per_token

    rows = {p.id: p for p in load_training_points() if p.source == "automodel-perf-2026"}
    assert set(rows) == {"automodel2602-h100-nemotron-3-nano-8",
                         "automodel2602-h100-nemotron-3-super-64"}
    page = {"nano-8": (16789, 16, 19.5), "super-64": (4497, 4, 74.3)}
    for key, (tokens, ga, gflop) in page.items():
        p = rows["automodel2602-h100-nemotron-3-" + key]
        assert round(_step_tokens_per_s(p) / p.get("gpus")) == tokens == p.get(
            "tokens_per_s_per_gpu"), key
        assert _accumulation(p) == ga, key
        assert _implied_flops_per_token(p) / 1e9 == pytest.approx(gflop, abs=0.05), key
        assert p.get("out_of_sample") and p.get("recompute") == "full", key
    p = rows["automodel2602-h100-nemotron-3-super-64"]
    shape, seq = point_shape(p), int(p.get("seq_len"))
    forward = forward_flops_per_token(shape, seq, causal=True).total
    without = 3 * forward
    with_two = 3 * (forward + 2 * mtp_forward_flops_per_token(shape, seq, causal=True))
    implied = _implied_flops_per_token(p)
    assert implied == pytest.approx(without, rel=0.025)
    assert implied < 0.9 * with_two


def test_automodel_deepep_hybridep_pair_gives_the_pages_own_figures() -> None:
    """NeMo AutoModel's DeepEP-against-HybridEP study runs its Qwen3-30B-A3B recipe on one
    H100 node at GBS 128 and LBS 4 (GA 4), changing only the dispatcher: 5.366 s and 5.085 s
    a step, 12,211 and 12,885 tokens/s a GPU (97,689 and 103,081 in all), HybridEP 5.5%
    ahead. The rows give those figures back (the tokens/s entered, the step times within
    their printed digits); HybridEP needs no CPU sync, so its row has no dispatcher wait."""
    rows = {p.id: p for p in load_training_points()
            if p.source == "automodel-deepep-hybridep-2026-07"}
    deepep = rows["automodel2607-h100-qwen3-30b-a3b-8-deepep"]
    hybrid = rows["automodel2607-h100-qwen3-30b-a3b-8-hybridep"]
    for p, tokens in ((deepep, 12211), (hybrid, 12885)):
        # the step times are printed to a millisecond: 12,213 and 12,888 from them
        assert _step_tokens_per_s(p) / p.get("gpus") == pytest.approx(tokens, rel=3e-4)
        assert p.get("tokens_per_s_per_gpu") == tokens, p.id
        assert _accumulation(p) == 4, p.id
    assert hybrid.get("tokens_per_s_per_gpu") / deepep.get("tokens_per_s_per_gpu") == \
        pytest.approx(1.055, abs=0.001)
    assert deepep.get("dispatcher_wait_us") == 74 and hybrid.get("dispatcher_wait_us") == 0


def test_modelzoo_qwen3_235b_rows_are_the_cells_they_name_in_megatrons_causal_count() -> None:
    """The Megatron-MoE ModelZoo's Qwen3 page (best_practice/Qwen3/readme.md @c1ad0b5c) prints
    five 4,096-token rows on 256 H100 with a step time and a 'Per GPU TF', and a long-context
    table with TFLOP/s alone. The 4,096-token rows' TF x step time over their tokens is
    Megatron-LM's count with the causal attention core halved (148.3 GFLOP a token for
    Qwen3-235B-A22B; 167.3 not halved) within the rounding of the printed figures, so the
    long-context rows read their TFLOP/s in that count (``megatron-causal``), which turns
    each into the tokens/s it names."""
    from gpuarch.validation.training import published_tokens_per_s_per_gpu
    from gpuarch.workloads.flops import forward_flops_per_token

    shape = preset("qwen3-235b-a22b").shape
    step_rows = {  # id: (step time s, Per GPU TF)
        "mcore-zoo-h100-qwen3-235b-ep32": (19.7, 245),
        "mcore-zoo-h100-qwen3-235b-ep32-a2a-overlap": (17.6, 276),
        "mcore-zoo-h100-qwen3-235b-fsdp-ep8": (17.6, 276),
        "mcore-zoo-h100-qwen3-235b-a2a-pp32": (24.2, 200),
        "mcore-zoo-h100-qwen3-235b-tp4-ep8": (29.0, 167),
    }
    long_rows = {  # sequence: (CP, forced balance TF, dropless TF)
        16384: (1, 295, 237), 32768: (2, 335, 277), 65536: (4, 368, 320),
        131072: (8, 389, 357)}
    rows = {p.id: p for p in load_training_points()
            if p.id.startswith("mcore-zoo-h100-qwen3-235b")}
    assert len(rows) == len(step_rows) + len(long_rows)
    causal = 3 * forward_flops_per_token(shape, 4096, causal=True).total
    full = 3 * forward_flops_per_token(shape, 4096).total
    assert causal == pytest.approx(148.3e9, rel=1e-3)
    assert full == pytest.approx(167.3e9, rel=1e-3)
    for pid, (step, tf) in step_rows.items():
        p = rows[pid]
        assert p.get("step_time_s") == step and p.get("global_batch") == 2048
        implied = tf * 1e12 * step * p.get("gpus") / (2048 * 4096)
        # the step to 3 figures and the TF to 3: about 0.5% between them
        assert implied == pytest.approx(causal, rel=0.007), pid
        assert p.get("gpus") == p.get("tp") * p.get("pp") * p.get("dp")
    for seq, (cp, tf, _dropless) in long_rows.items():
        # the forced-balance figures (the dropless ones, an aux-loss regime the model does
        # not represent, are not entered)
        p = rows[f"mcore-zoo-h100-qwen3-235b-{seq // 1024}k-balanced"]
        assert (p.get("seq_len"), p.get("cp"), p.get("tflops_per_gpu")) == (seq, cp, tf)
        assert p.get("tflops_convention") == "megatron-causal"
        assert p.get("moe_routing") is None
        assert p.get("gpus") == p.get("tp") * p.get("pp") * p.get("cp") * p.get("dp")
        per_token = 3 * forward_flops_per_token(shape, seq, causal=True).total
        got, label = published_tokens_per_s_per_gpu(p, shape, 0.0)
        assert got == pytest.approx(tf * 1e12 / per_token, rel=1e-12)
        assert "megatron-causal" in label


def test_moe_configs_card_rows_are_the_cells_they_name() -> None:
    """Megatron Bridge's skills/perf-techniques/moe-hardware-configs/card.yaml
    (@ad4138a1, validated_on 2026-04-01), best_configs: each entered row's GPUs, layout,
    batch and TFLOP/s as the card prints them (TP, EP, PP, VPP, expert DP where printed,
    MBS, GBS), its DP the GPUs over TP x PP, and the card's expert DP = TP x DP / EP. The
    card's rows not entered (DeepSeek-V3 BF16 on 256 B200, whose EDP2 no layout of its
    printed TP1 EP32 PP8 on 256 GPUs gives; the 671B no-MTP GB200 run and Qwen3.5-397B,
    whose 32 and 16 virtual stages need a pipeline layout the card does not print; four
    runs the Megatron Core MoE report's rows already hold) are not here."""
    card = {  # id suffix: (GPUs, TP, EP, PP, VPP, EDP or None, MBS, GBS, TFLOP/s)
        "b200-deepseek-v3-mxfp8": (256, 1, 32, 8, 2, None, 1, 8192, 818),
        "b200-qwen3-235b-a22b-bf16": (128, 2, 16, 4, 12, 2, 2, 2048, 586),
        "gb200-qwen3-235b-a22b-bf16-128": (128, 1, 32, 4, 12, None, 1, 1024, 698),
        "h100-qwen3-30b-a3b-bf16": (32, 1, 8, 1, 1, 4, 4, 256, 208),
        "gb200-qwen3-next-80b-a3b-bf16": (64, 1, 32, 2, 4, None, 2, 1024, 327),
    }
    rows = {p.id: p for p in load_training_points() if p.source == "mcore-moe-trackers-card"}
    assert set(rows) == {f"mcore-card-{k}" for k in card}
    for key, (gpus, tp, ep, pp, vpp, edp, mbs, gbs, tf) in card.items():
        p = rows[f"mcore-card-{key}"]
        assert (p.get("gpus"), p.get("tp"), p.get("ep"), p.get("pp"), p.get("vpp", 1),
                p.get("micro_batch"), p.get("global_batch"), p.get("tflops_per_gpu")) \
            == (gpus, tp, ep, pp, vpp, mbs, gbs, tf), key
        assert p.get("dp") * tp * pp == gpus, key
        if edp is not None:
            assert tp * p.get("dp") // ep == edp, key
        assert p.get("tflops_convention") == "megatron-causal" and p.get("seq_len") == 4096
        assert p.get("out_of_sample") is True
    # the DeepSeek-V3 run's layout is the ModelZoo B200 script's: 16 virtual stages (PP 8 x
    # VPP 2) of the 61 layers, the MTP block and the loss
    assert rows["mcore-card-b200-deepseek-v3-mxfp8"].get("pp_layout") == "Et*4|(tttt|)*14tmL"


def test_megatrons_causal_count_adds_the_mtp_blocks_a_run_trains() -> None:
    """Megatron-LM's FLOP count adds each multi-token-prediction block it trains. The Megatron
    Core MoE report (arXiv:2603.07685, Table 11) prints DeepSeek-V3's runs with one MTP block
    in both TFLOP/s and tokens/s: 1,048 / 4,020 (GB200), 1,233 / 4,730 (GB300) and 368 /
    1,412 (H100), 260.7, 260.7 and 260.6 GFLOP a token, which is the model's count with the
    causal core halved and the block added (260.6; 250.5 without it). So a row that prints
    TFLOP/s alone in that count (``megatron-causal``) with ``mtp_layers`` reads its tokens/s
    over that sum."""
    from gpuarch.validation.training import published_tokens_per_s_per_gpu
    from gpuarch.workloads.flops import forward_flops_per_token
    from gpuarch.workloads.mtp import mtp_forward_flops_per_token

    shape = preset("deepseek-v3").shape
    trunk = 3 * forward_flops_per_token(shape, 4096, causal=True).total
    block = 3 * mtp_forward_flops_per_token(shape, 4096, causal=True)
    assert trunk == pytest.approx(250.45e9, rel=1e-3)
    assert trunk + block == pytest.approx(260.64e9, rel=1e-3)
    rows = {p.id: p for p in load_training_points()
            if p.id in ("mcore-moe-gb200-deepseek-v3-mxfp8", "mcore-moe-gb300-deepseek-v3-mxfp8",
                        "mcore-moe-h100-deepseek-v3-fp8")}
    assert len(rows) == 3
    for pid, p in rows.items():
        assert p.get("mtp_layers") == 1
        printed = p.get("tflops_per_gpu") * 1e12 / p.get("tokens_per_s_per_gpu")
        # both figures to 3-4 significant digits
        assert printed == pytest.approx(trunk + block, rel=0.003), pid
        tf_only = {k: v for k, v in p.raw.items() if k != "tokens_per_s_per_gpu"}
        for mtp, per_token in ((1, trunk + block), (0, trunk)):
            row = dataclasses.replace(p, raw={**tf_only, "tflops_convention": "megatron-causal",
                                              "mtp_layers": mtp})
            got, label = published_tokens_per_s_per_gpu(row, shape, 0.0)
            assert got == pytest.approx(p.get("tflops_per_gpu") * 1e12 / per_token,
                                        rel=1e-12), (pid, mtp)
            assert "megatron-causal" in label
