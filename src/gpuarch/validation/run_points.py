"""A run written as a point of a measured-runs file (``estimate train|infer --as-point``), for
``validate training|inference --data`` (docs/your-measurements.md).

A point is written from the estimate's own configuration: the preset, the shape fields a
point takes over it, the GPU and every setting off its default. It is then read back as a
file's point is (``point_shape`` and the validations' ``point_config``), and must give the
same shape and configuration; a setting without a field in a point is refused by name rather
than dropped, so that a written point never stands for another run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.validation.training import SHAPE_KEYS, TrainingPoint, point_shape, point_system

__all__ = ["inference_point", "point_toml", "toml_value", "training_point"]

_TRAINING_FIELDS = (
    "gpus", "seq_len", "global_batch", "micro_batch", "tp", "pp", "cp", "ep", "etp", "vpp",
    "sequence_parallel", "zero", "dp_shard", "outer_optimizer_sharding", "tp_comm_overlap",
    "fsdp_prefetch", "reshard_after_forward", "moe_token_drop", "cuda_graphs",
    "cuda_graph_scope", "ep_dispatcher",
    "cp_comm_type", "expert_launches", "ep_comm_overlap", "pp_comm_overlap", "pp_edge_layers",
    "pp_layout", "pp_schedule", "mtp_layers", "mtp_shared_weights", "fused_attention",
    "attention_kernel", "recompute", "recompute_modules", "recompute_layers", "precision",
    "offload_layers", "offload_modules", "offload_min_elements", "fp8_params", "bf16_grads",
    "bf16_optimizer", "lora_rank", "lora_modules", "packed_doc_len", "fp8_attention",
    "fp8_attention_scaling", "fp8_recipe", "bf16_layers_start", "bf16_layers_end", "mtp_bf16",
    "optimizer_offload", "optimizer_offload_overlap")
"""The training settings a point carries under the name of TrainingConfig's field."""

_ALWAYS = ("gpus", "seq_len", "global_batch", "micro_batch", "tp", "pp", "cp", "precision")
"""Training settings a written point states even at their defaults, so that it reads whole."""

_SERVING_FIELDS = (
    "gpus", "tp", "pp", "ep", "max_num_tokens", "kv_cache_fraction", "max_batch_size",
    "speculative_tokens", "acceptance_length", "executor", "window_kv_cache", "mla_cache",
    "scheduler_policy", "decode_kv_reads", "moe_comm", "moe_kernels", "moe_gemm_kernel",
    "all_reduce",
    "moe_imbalance", "redundant_experts", "two_batch_overlap", "fp8_context_attention",
    "fp8_scaling", "ssm_state_precision", "fp8_mla_decode", "adp_balance", "num_requests",
    "output_len_cv", "max_output_len", "cuda_graph_batch_sizes", "cuda_graph_max_context",
    "schedule")
"""The serving settings a point carries under the name of InferenceConfig's field."""


def _plain(value: Any) -> Any:
    """A config value as a data file holds it: an enum's value, a tuple as a list."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _head(run_id: str, model: str | None, shape: Any, gpu: str, system: str | None,
          gpu_link: str | None) -> dict[str, Any]:
    """A point's name, model and hardware: the preset ``model`` and the shape fields that
    differ from it, or with no preset (a config.json's model) the shape field by field,
    named by ``model`` as a point with its own shape is (the fields at their defaults left
    out)."""
    from gpuarch.workloads.presets import preset
    from gpuarch.workloads.shape import TransformerShape

    point: dict[str, Any] = {"id": run_id}
    if model is None:
        point["model"] = shape.name
        defaults = {f.name: f.default for f in dataclasses.fields(TransformerShape)}
        differs = [key for key in SHAPE_KEYS
                   if key in ("layers", "hidden", "heads", "vocab")
                   or getattr(shape, key) != defaults[key]]
    else:
        base = preset(model).shape
        point["preset"] = model
        differs = [key for key in SHAPE_KEYS
                   if getattr(shape, key, None) != getattr(base, key, None)]
    point["gpu"] = gpu
    point |= {key: _plain(getattr(shape, key)) for key in differs}
    if system:
        point["system"] = system
    if gpu_link:
        point["gpu_link"] = gpu_link
    return point


def _read_config(point: dict[str, Any], gpu_link: str | None,
                 config: Callable[[TrainingPoint, Any, Any], Any]) -> Any:
    """The configuration a file's point reads as (``config(record, system, product)``)."""
    from gpuarch.catalog.loader import load_catalog

    record = TrainingPoint(point["id"], "run", "run", "", "", point)
    catalog = load_catalog()
    product = catalog.product(point["gpu"])
    system = catalog.system_with_link(product, point_system(catalog, record, product),
                                      gpu_link)
    return config(record, system, product)


def _node_size(point: dict[str, Any], cfg: Any, gpu_link: str | None,
               config: Callable[[TrainingPoint, Any, Any], Any]) -> None:
    """Add ``gpus_per_node`` to ``point`` where the run's differs from its system's, which a
    point without it takes."""
    if _read_config(point, gpu_link, config).gpus_per_node != cfg.gpus_per_node:
        point["gpus_per_node"] = cfg.gpus_per_node


def _read_back(point: dict[str, Any], shape: Any, cfg: Any, gpu_link: str | None,
               config: Callable[[TrainingPoint, Any, Any], Any],
               skip: tuple[str, ...] = ()) -> None:
    """Read ``point`` back as a file's point (``config(record, system, product)`` its
    configuration) and raise GpuarchError naming the first field of the shape or of ``cfg``
    (``skip`` apart) that does not come back the same."""
    again_shape = point_shape(TrainingPoint(point["id"], "run", "run", "", "", point))
    for field_ in dataclasses.fields(shape):
        # (the context window a config.json declares is informational: no estimate reads
        # it but to say a run goes past it)
        if field_.name != "context_window" \
                and getattr(again_shape, field_.name) != getattr(shape, field_.name):
            raise GpuarchError(f"--as-point: the model's {field_.name} "
                               f"({getattr(shape, field_.name)!r}) has no place in a point, "
                               f"which takes a preset (or a model's name) and "
                               f"{', '.join(SHAPE_KEYS)}")
    again = _read_config(point, gpu_link, config)
    for field_ in dataclasses.fields(cfg):
        if field_.name not in skip and getattr(again, field_.name) != getattr(cfg, field_.name):
            raise GpuarchError(f"--as-point: {field_.name.replace('_', '-')} = "
                               f"{_plain(getattr(cfg, field_.name))!r} has no place in a "
                               "point of a measured-runs file (docs/your-measurements.md)")


def training_point(run_id: str, model: str | None, shape: Any, gpu: str, cfg: Any,
                   system: str | None = None, gpu_link: str | None = None,
                   unbalanced: bool = False) -> dict[str, Any]:
    """The training run ``cfg`` of ``shape`` (``model`` a preset) on ``gpu`` as a point,
    without a figure (the run's own measurement goes there); ``unbalanced``: the routing
    load ``--moe-imbalance unbalanced`` asked for, written as ``moe_routing``."""
    from gpuarch.estimate.training_config import TrainingConfig
    from gpuarch.units import Unit, from_si
    from gpuarch.validation.training import point_config

    defaults = TrainingConfig(gpus=1, seq_len=1, global_batch=1)
    point = _head(run_id, model, shape, gpu, system, gpu_link)
    for name in _TRAINING_FIELDS:
        value = getattr(cfg, name)
        if name in _ALWAYS or value != getattr(defaults, name):
            point[name] = _plain(value)
    if cfg.dispatcher_wait_s is not None:
        point["dispatcher_wait_us"] = from_si(cfg.dispatcher_wait_s, Unit.US)
    if unbalanced:
        point["moe_routing"] = "unbalanced"
    elif cfg.moe_imbalance != defaults.moe_imbalance:
        point["moe_imbalance"] = cfg.moe_imbalance

    def config(record: TrainingPoint, system_: Any, _: Any) -> Any:
        return point_config(record, system_)

    _node_size(point, cfg, gpu_link, config)
    # moe_routing comes back as the same load when the comparison computes it
    _read_back(point, shape, cfg, gpu_link, config,
               skip=("moe_imbalance",) if unbalanced else ())
    return point


def inference_point(run_id: str, model: str | None, shape: Any, gpu: str, cfg: Any,
                    system: str | None = None, gpu_link: str | None = None,
                    prefill: Any = None, concurrency: int | None = None
                    ) -> dict[str, Any]:
    """The serving run ``cfg`` of ``shape`` on ``gpu`` as a point: the formats, lengths, how
    it batched (a static batch's ``batch``, a continuous batch's ``concurrency``, or an
    offline ``max-throughput`` run), the engine-limits source and every engine setting off
    its default. ``prefill`` (an ``estimate.disagg.PrefillPool``): a disaggregated run's
    prefill pool, ``cfg`` then its decode pool and ``concurrency`` the requests its client
    kept in flight."""
    from gpuarch.estimate.inference_config import Batching, InferenceConfig
    from gpuarch.validation.inference import point_config

    defaults = InferenceConfig(input_len=1, output_len=1)
    point = _head(run_id, model, shape, gpu, system, gpu_link)
    q = cfg.quant
    point |= {"weight_precision": q.weights.value, "activation_precision": q.activations.value,
              "kv_precision": q.kv_cache.value}
    if cfg.expert_weights is not None:
        point["expert_weight_precision"] = cfg.expert_weights.value
    if cfg.expert_activations is not None:
        point["expert_activation_precision"] = cfg.expert_activations.value
    point |= {"input_len": cfg.input_len, "output_len": cfg.output_len}
    if cfg.batching is Batching.STATIC:
        if cfg.batch is None:
            raise GpuarchError("--as-point: a measured static batch had a size; give --batch "
                               "the one your run used (not max)")
        point |= {"mode": "static-batch", "batch": cfg.batch}
    elif prefill is not None:
        point |= {"mode": "serving", "concurrency": concurrency,
                  "prefill_gpus": prefill.gpus, "prefill_tp": prefill.tp,
                  "prefill_ep": prefill.ep}
        if prefill.max_num_tokens:
            point["prefill_max_num_tokens"] = prefill.max_num_tokens
    elif cfg.batch is None:
        point["mode"] = "max-throughput"
    else:
        point |= {"mode": "serving", "concurrency": cfg.batch}
    for name in _SERVING_FIELDS:
        value = getattr(cfg, name)
        if name == "gpus" or value != getattr(defaults, name):
            point[name] = _plain(value)
    if cfg.limits_source:
        point["limits"] = cfg.limits_source

    def config(record: TrainingPoint, system_: Any, product: Any) -> Any:
        return point_config(record, system_.gpus_per_node if system_ else 8, product)

    _node_size(point, cfg, gpu_link, config)
    # why the KV cache's format changed is not a setting: the formats themselves compare
    # (a disaggregated point's concurrency reads back as its batch; it is priced as the
    # requests its client keeps in flight)
    _read_back(point, shape,
               dataclasses.replace(cfg, batch=point["concurrency"]) if prefill else cfg,
               gpu_link, config, skip=("kv_cache_fallback",))
    return point


def toml_value(value: Any) -> str:
    """A data value as TOML writes it (booleans, strings, numbers, lists of them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


def point_toml(point: Mapping[str, Any], figure_hint: str) -> str:
    """A point as a ``[[point]]`` table, with ``figure_hint`` (the figures the run's
    measurement may be given as) commented where the figure goes."""
    lines = ["[[point]]", *(f"{key} = {toml_value(v)}" for key, v in point.items()),
             f"# {figure_hint}"]
    return "\n".join(lines) + "\n"
