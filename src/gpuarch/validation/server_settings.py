"""A measured server's own settings held to the estimate's flags: SGLang's saved server
arguments and the engine a trtllm-bench report describes.

SGLang's ``bench_serving`` saves, with every run, the server's arguments as its
``/get_server_info`` returned them (``server_info``: ``tp_size``, ``dp_size``,
``enable_dp_attention``, ``ep_size``, ``max_running_requests``, ...). A point written from the
run (``estimate infer ... --as-point --measured FILE``) is priced by the estimate's flags, so a
flag that contradicts the server would price another engine than the one measured: each such
contradiction is refused naming the flags that match the server. The mapping is the one
``--launch sglang`` writes (report/launch.py, ``serving_launch``): SGLang's ``--tp-size`` is a
server's GPUs a pipeline stage, max(TP, EP); data-parallel attention (EP above TP) runs
``--dp-size`` = EP / TP attention ranks with ``--enable-dp-attention``; ``--ep-size`` is EP;
``--max-running-requests`` counts every attention rank's sequences together; ``--dp-size``
without DP attention runs that many replicas in one server. An older server with DP
attention beside experts split by tensor parallelism (``ep_size`` 1) is priced as expert
parallelism over its GPUs. Only what the server saved is checked (a key it left out or a
null is not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.estimate.inference_config import server_layout
from gpuarch.perf.quant import QuantFormat
from gpuarch.validation.saved_fields import saved_count

__all__ = ["ServerFlags", "TrtllmEngine", "check_sglang_server", "check_trtllm_engine"]

_WEIGHTS = {"fp8": QuantFormat.FP8, "w8a8_fp8": QuantFormat.FP8,
            "modelopt_fp8": QuantFormat.FP8, "modelopt_fp4": QuantFormat.FP4,
            "nvfp4_online": QuantFormat.FP4, "w8a8_int8": QuantFormat.INT8,
            "awq": QuantFormat.INT4, "awq_marlin": QuantFormat.INT4,
            "gptq": QuantFormat.INT4, "gptq_marlin": QuantFormat.INT4}
"""SGLang's ``--quantization`` methods whose weight format is one of the estimate's; the
others (a MoE-only method such as ``mxfp4``, a mixed one, bitsandbytes, GGUF) are not held
to --weight-precision."""


@dataclass(frozen=True)
class ServerFlags:
    """The estimate's flags a measured server's settings are held to."""

    schedule: str  # --schedule
    kv: QuantFormat  # the KV cache's format
    weights: QuantFormat  # --weight-precision (or the checkpoint's)
    moe: bool  # the model routes tokens to experts (EP applies)
    gpus: int
    tp: int
    pp: int
    ep: int
    max_batch_size: int  # --max-batch-size, 0 = none
    two_batch_overlap: bool
    redundant_experts: int
    deepep: bool  # --moe-kernels sglang-deepep
    speculative_tokens: int
    max_num_tokens: int | None = None  # --max-num-tokens, None = not given
    executor: str = "python"  # --executor

    def sglang_parallelism(self) -> tuple[int, int, int]:
        """(``--tp-size``, ``--dp-size``, ``--ep-size``) of the server these flags price."""
        group, ranks = server_layout(self.tp, self.ep, self.moe)
        return group, ranks, self.ep if self.moe else 1


def _int(server: dict[str, Any], where: str, key: str, low: int = 1) -> int | None:
    """A saved count, or None where the server saved none (left out or null)."""
    value = server.get(key)
    return None if value is None else saved_count(where, f"server_info.{key}", value, low)


def _flags_for(tp_size: int, dp_size: int, dp_attention: bool, ep_size: int,
               moe: bool) -> str:
    """The --tp/--ep flags that price a server of these SGLang sizes."""
    if not moe:
        return f"--tp {tp_size}"
    if dp_attention and dp_size > 1:
        # attention data-parallel over dp_size ranks of tp_size / dp_size GPUs each; the
        # estimate prices it with expert parallelism over the server's GPUs
        return f"--tp {max(1, tp_size // dp_size)} --ep {max(ep_size, tp_size)}"
    return f"--tp {tp_size} --ep {ep_size}"


def check_sglang_server(server: dict[str, Any], where: str, flags: ServerFlags) -> None:
    """Raise GpuarchError at the first setting of the ``server`` (SGLang's saved
    ``server_info``) that ``flags`` contradict, naming what to give instead."""
    mixed = server.get("enable_mixed_chunk")
    if isinstance(mixed, bool) and mixed != (flags.schedule == "mixed"):
        raise GpuarchError(f"--schedule {flags.schedule}: the server of {where} ran with "
                           f"enable_mixed_chunk {str(mixed).lower()}; give --schedule "
                           f"{'mixed' if mixed else 'separate'}")
    kv = server.get("kv_cache_dtype")
    if isinstance(kv, str) and kv.startswith("fp8") and flags.kv is not QuantFormat.FP8:
        raise GpuarchError(f"--kv-precision: the server of {where} kept its KV cache in {kv}; "
                           "give --kv-precision fp8")
    method = server.get("quantization")
    if isinstance(method, str) and method in _WEIGHTS and _WEIGHTS[method] is not flags.weights:
        raise GpuarchError(f"--weight-precision {flags.weights.value}: the server of {where} "
                           f"ran with quantization {method}; give --weight-precision "
                           f"{_WEIGHTS[method].value}")
    tp_size, dp_size, ep_size = (_int(server, where, key)
                                for key in ("tp_size", "dp_size", "ep_size"))
    dp_attention = server.get("enable_dp_attention") is True
    if tp_size is not None:
        expected_tp, expected_dp, expected_ep = flags.sglang_parallelism()
        dp = dp_size if dp_attention and dp_size is not None else 1
        ep = ep_size if flags.moe and ep_size is not None else expected_ep
        if flags.moe and dp > 1 and ep == 1:
            ep = tp_size  # DP attention beside experts split by TP: priced as EP over them
        if (tp_size, dp, ep) != (expected_tp, expected_dp, expected_ep):
            sizes = f"tp_size {tp_size}" + (f", dp_size {dp} with DP attention"
                                            if dp > 1 else "") \
                + (f", ep_size {ep_size}" if flags.moe and ep_size is not None else "")
            given = f"--tp {flags.tp}" + (f" --ep {flags.ep}" if flags.moe else "")
            raise GpuarchError(f"{given}: the server of {where} ran with {sizes}; give "
                               f"{_flags_for(tp_size, dp, dp_attention, ep, flags.moe)}")
    pp_size = _int(server, where, "pp_size")
    if pp_size is not None and pp_size != flags.pp:
        raise GpuarchError(f"--pp {flags.pp}: the server of {where} ran with pp_size "
                           f"{pp_size}; give --pp {pp_size}")
    if tp_size is not None:
        # a server's GPUs: its TP x PP, times its data-parallel replicas where DP is not
        # attention's (SGLang's --dp-size without --enable-dp-attention)
        replicas = dp_size if dp_size is not None and not dp_attention else 1
        server_gpus = tp_size * (pp_size or 1) * replicas
        if flags.gpus % server_gpus:
            raise GpuarchError(f"--gpus {flags.gpus}: the server of {where} ran on "
                               f"{server_gpus} GPUs (tp_size {tp_size}"
                               + (f" x pp_size {pp_size}" if pp_size else "")
                               + (f" x dp_size {replicas}" if replicas > 1 else "")
                               + f"); give --gpus {server_gpus} (or a multiple, for several "
                               "such servers behind one endpoint)")
    running = _int(server, where, "max_running_requests")
    if running is not None:
        ranks = flags.sglang_parallelism()[1]
        if flags.max_batch_size != max(1, running // ranks):
            per_rank = f"{running} / {ranks} DP attention ranks = " if ranks > 1 else ""
            raise GpuarchError(f"--max-batch-size: the server of {where} ran with "
                               f"max_running_requests {running}; give --max-batch-size "
                               f"{per_rank}{max(1, running // ranks)}")
    if flags.moe:
        overlap = server.get("enable_two_batch_overlap")
        if isinstance(overlap, bool) and overlap != flags.two_batch_overlap:
            raise GpuarchError(f"--two-batch-overlap: the server of {where} ran with "
                               f"enable_two_batch_overlap {str(overlap).lower()}; "
                               + ("give --two-batch-overlap" if overlap else "leave it out"))
        redundant = _int(server, where, "ep_num_redundant_experts", 0)
        if redundant is not None and redundant != flags.redundant_experts:
            raise GpuarchError(f"--redundant-experts {flags.redundant_experts}: the server of "
                               f"{where} ran with ep_num_redundant_experts {redundant}; give "
                               f"--redundant-experts {redundant}")
        backend = server.get("moe_a2a_backend")
        if isinstance(backend, str) and (backend == "deepep") != flags.deepep:
            raise GpuarchError(f"--moe-kernels: the server of {where} ran with moe_a2a_backend "
                               f"{backend}; " + ("give --moe-kernels sglang-deepep"
                                                 if backend == "deepep" else
                                                 "--moe-kernels sglang-deepep prices DeepEP's "
                                                 "all-to-all: give --moe-kernels sglang"))
    algorithm = server.get("speculative_algorithm")
    drafts = _int(server, where, "speculative_num_draft_tokens")
    if isinstance(algorithm, str) and algorithm and not flags.speculative_tokens:
        raise GpuarchError(f"--speculative-tokens: the server of {where} decoded "
                           f"speculatively ({algorithm}"
                           + (f", {drafts} draft tokens" if drafts else "") + "); give "
                           "--speculative-tokens K and --acceptance-length A")
    if algorithm is None and "speculative_algorithm" in server and flags.speculative_tokens:
        raise GpuarchError(f"--speculative-tokens {flags.speculative_tokens}: the server of "
                           f"{where} decoded without speculation; leave it out")


@dataclass(frozen=True)
class TrtllmEngine:
    """What a trtllm-bench report says of its engine (validation/trtllm_bench_results.py)."""

    backend: str  # "Pytorch" or "TRT"
    weights: QuantFormat | None  # from quant_algo (bf16: none), None: not the estimate's
    kv: QuantFormat | None  # from kv_cache_quant_algo, None: 16-bit
    tp_size: int
    pp_size: int
    ep_size: int
    max_batch_size: int | None
    max_num_tokens: int | None
    speculative: tuple[float, float] | None  # (draft tokens, acceptance length) means


def check_trtllm_engine(engine: TrtllmEngine, where: str, flags: ServerFlags) -> None:
    """Raise GpuarchError at the first of a trtllm-bench engine's settings that ``flags``
    contradict, naming what to give: the backend against --executor (the TensorRT engines'
    C++ executor, cpp; the PyTorch backend, python), the weights' and KV cache's formats,
    ``tp_size`` against the GPUs of a stage (max(TP, EP): the report does not say whether
    attention ran data-parallel), ``ep_size`` against --ep, ``pp_size``, the engine's
    max_batch_size and max_num_tokens, and speculative decoding (with the report's mean
    draft tokens and acceptance length)."""
    executor = {"TRT": "cpp", "Pytorch": "python"}.get(engine.backend)
    if executor is not None and executor != flags.executor:
        raise GpuarchError(f"--executor {flags.executor}: {where} ran the {engine.backend} "
                           f"backend; give --executor {executor}")
    if engine.weights is not None and engine.weights is not flags.weights \
            and not (engine.weights.is_16bit and flags.weights.is_16bit):
        ran = "16-bit" if engine.weights.is_16bit else engine.weights.value
        raise GpuarchError(f"--weight-precision {flags.weights.value}: {where} ran {ran} "
                           f"weights; give --weight-precision {engine.weights.value}")
    kv = engine.kv or (flags.kv if flags.kv.is_16bit else QuantFormat.BF16)
    if kv is not flags.kv and not (kv.is_16bit and flags.kv.is_16bit):
        raise GpuarchError(f"--kv-precision {flags.kv.value}: {where} kept its KV cache in "
                           f"{kv.value if engine.kv else '16 bits'}; give --kv-precision "
                           f"{kv.value if engine.kv else 'bf16'}")
    group, _, ep = flags.sglang_parallelism()
    if (engine.tp_size, engine.pp_size) != (group, flags.pp) \
            or (flags.moe and engine.ep_size != ep):
        attention_dp = (f" (or --tp 1 --ep {engine.tp_size} where attention ran "
                        "data-parallel)" if flags.moe and engine.ep_size == engine.tp_size
                        and engine.tp_size > 1 else "")
        raise GpuarchError(f"--tp {flags.tp} --pp {flags.pp}"
                           + (f" --ep {flags.ep}" if flags.moe else "")
                           + f": {where} ran tp_size {engine.tp_size}, pp_size "
                           f"{engine.pp_size}, ep_size {engine.ep_size}; give --tp "
                           f"{engine.tp_size} --pp {engine.pp_size}"
                           + (f" --ep {engine.ep_size}" if flags.moe else "") + attention_dp)
    if engine.tp_size * engine.pp_size and flags.gpus % (engine.tp_size * engine.pp_size):
        raise GpuarchError(f"--gpus {flags.gpus}: {where} ran on "
                           f"{engine.tp_size * engine.pp_size} GPUs; give --gpus "
                           f"{engine.tp_size * engine.pp_size}")
    if engine.max_batch_size is not None and engine.max_batch_size != flags.max_batch_size:
        raise GpuarchError(f"--max-batch-size: {where}'s engine ran with max_batch_size "
                           f"{engine.max_batch_size}; give --max-batch-size "
                           f"{engine.max_batch_size}")
    if engine.max_num_tokens is not None and engine.max_num_tokens != flags.max_num_tokens:
        raise GpuarchError(f"--max-num-tokens: {where}'s engine ran with max_num_tokens "
                           f"{engine.max_num_tokens}; give --max-num-tokens "
                           f"{engine.max_num_tokens}")
    if engine.speculative is not None and not flags.speculative_tokens:
        drafts, accepted = engine.speculative
        raise GpuarchError(f"--speculative-tokens: {where} decoded speculatively ({drafts:g} "
                           f"draft tokens and an acceptance length of {accepted:g} on "
                           f"average); give --speculative-tokens {max(1, round(drafts))} "
                           f"--acceptance-length {accepted:.3g}")
    if engine.speculative is None and flags.speculative_tokens:
        raise GpuarchError(f"--speculative-tokens {flags.speculative_tokens}: {where} decoded "
                           "without speculation; leave it out")
