"""How far the model's throughput predictions have landed from published measurements, by
kind of workload: the error band an estimate carries.

Every throughput figure of the validation data (training tokens/s per GPU; serving output
tokens/s, in all or per GPU, and a static batch's request latency as the output rate it
implies, ``nearest.LATENCY_AS_THROUGHPUT``) falls in a *regime*: the task (training or
serving), the kind of model (dense; coarse MoE, at most ``FINE_GRAINED_EXPERTS`` routed
experts, like Mixtral; fine-grained MoE, more, like DeepSeek-V3, Qwen3 MoE or GPT-OSS) and
the GPU's architecture, narrowed to one GPU (its catalog key) where that GPU has enough
figures of its own (products of one architecture can sit on different sides of the model:
GB300 runs faster than GB200 at the same datasheet peaks), and to one format on that GPU
(training's compute format, serving's weight format: INT4 weight-only decode on H100 reads
far from the 16-bit runs there). A serving figure also counts in the same regimes of its
engine (``ENGINES``: TensorRT-LLM, vLLM, SGLang, ...; "regime@engine" keys), a training point
in those of its framework's family (``FRAMEWORKS``: Megatron, PyTorch FSDP, ...): an estimate
that names its engine or framework takes that one's band, narrowest first down to the
architecture, before the pooled ones, so that a vLLM deployment is not read against
TensorRT-LLM's runs, nor an FSDP job against Megatron's. The signed errors of a regime (predicted /
published - 1) give its median (the model's bias there) and its 10th-90th percentile range;
an estimate in that regime can then say which published figures would have been consistent
with it. A regime with fewer than ``MIN_FIGURES`` figures falls back to the GPU, then to
the architecture, then to the task and model kind, then to the task.

The bands live in ``data/error_bands.json``, written by ``scripts/error_bands.py`` from the
model as it stands; a test recomputes them, so a change to the model or the data that moves
them fails until the file is regenerated.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product
from gpuarch.errors import GpuarchError
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.workloads.shape import FINE_GRAINED_EXPERTS, TransformerShape

if TYPE_CHECKING:
    from gpuarch.validation.nearest import PublishedFigure

__all__ = [
    "BANDS_FILE",
    "ENGINES",
    "FINE_GRAINED_EXPERTS",
    "FRAMEWORKS",
    "KIND_LABELS",
    "MIN_FIGURES",
    "TASKS",
    "Band",
    "band_for",
    "band_sentence",
    "bands_by_architecture",
    "bands_from_figures",
    "compute_bands",
    "engine_family",
    "engine_keys",
    "framework_family",
    "load_bands",
    "model_kind",
    "regime_keys",
    "render_bands",
    "write_bands",
]

BANDS_FILE = Path(__file__).with_name("data") / "error_bands.json"

TASKS = ("training", "serving")

MIN_FIGURES = 10
"""Fewest figures a regime needs for its own band; with fewer, the broader one is used."""

PERCENTILES = (10.0, 50.0, 90.0)

CLEAR_BIAS = 0.05
"""A median error this large or larger is called a bias (optimistic or pessimistic)."""

ENGINES = {"trtllm": "TensorRT-LLM", "vllm": "vLLM", "sglang": "SGLang",
           "lmdeploy": "LMDeploy", "nim": "NVIDIA NIM"}
"""The serving engines the validation's figures were measured on, by the name reports print
(``engine_family`` reads a row's ``framework`` text into one): a serving regime's band can be
narrowed to one engine's runs."""

# words of a framework text that name its engine family, the most specific first (NVIDIA's
# MLPerf harness and TensorRT engines run TensorRT-LLM's; a GuideLLM client drove vLLM)
_ENGINE_WORDS = (("sglang", "sglang"), ("lmdeploy", "lmdeploy"), ("turbomind", "lmdeploy"),
                 ("nim ", "nim"), ("vllm", "vllm"), ("tensorrt", "trtllm"))


def _named_in(framework: str, words: tuple[tuple[str, str], ...]) -> str:
    """The key of the first of ``words`` (word, key) the ``framework`` text holds (case
    ignored; a word may end in a space: "nim " at the text's end too), or ""."""
    text = f"{framework.lower()} "
    return next((key for word, key in words if word in text), "")


def engine_family(framework: str) -> str:
    """The engine (a key of ``ENGINES``) a validation row's ``framework`` text names, or ""
    where it names none of them."""
    return _named_in(framework, _ENGINE_WORDS)


FRAMEWORKS = {"megatron": "Megatron", "fsdp": "PyTorch FSDP", "deepspeed": "Megatron-DeepSpeed",
              "maxtext": "MaxText", "meta": "Meta's own trainer"}
"""The training frameworks' families the validation's points ran on, by the name reports
print (``framework_family``): Megatron takes in Megatron-LM, Megatron-Core, NeMo and
Megatron Bridge; PyTorch FSDP llm-foundry, TorchTitan and NeMo AutoModel. A training
regime's band can be narrowed to one family's runs, as a serving one to an engine's."""

# words of a framework text naming its family, the most specific first (Megatron-DeepSpeed
# before Megatron; NeMo AutoModel, PyTorch FSDP2, before NeMo)
_FRAMEWORK_WORDS = (("megatron-deepspeed", "deepspeed"), ("automodel", "fsdp"),
                    ("llm-foundry", "fsdp"), ("torchtitan", "fsdp"), ("maxtext", "maxtext"),
                    ("meta internal", "meta"), ("megatron", "megatron"), ("nemo", "megatron"))


def framework_family(framework: str) -> str:
    """The family (a key of ``FRAMEWORKS``) a training point's ``framework`` text names, or
    "" where it names none."""
    return _named_in(framework, _FRAMEWORK_WORDS)


KIND_LABELS = {"dense": "dense", "coarse-moe": "coarse MoE",
               "fine-moe": "fine-grained MoE",
               "hybrid": "hybrid (Mamba-2, Gated DeltaNet)"}


def model_kind(shape: TransformerShape) -> str:
    """"hybrid" (recurrent blocks, Mamba-2 or Gated DeltaNet, among the attention ones),
    "dense", "coarse-moe" or "fine-moe" (more than ``FINE_GRAINED_EXPERTS`` experts). A
    pattern of attention and MLP blocks alone (Llama-Nemotron's NAS layers) is dense."""
    if shape.mamba is not None:
        return "hybrid"
    if not shape.is_moe:
        return "dense"
    return "fine-moe" if shape.is_fine_grained_moe else "coarse-moe"


def regime_keys(task: str, shape: TransformerShape, architecture: str,
                gpu: str | None = None, precision: str | None = None) -> tuple[str, ...]:
    """The regime of a workload, narrowest first: task/kind/architecture/GPU/format (with
    ``gpu``, a catalog product key, and ``precision``: training's compute format, serving's
    (expert) weight format), task/kind/architecture/GPU, task/kind/architecture, task/kind,
    task."""
    return _keys(task, model_kind(shape), architecture, gpu, precision)


def engine_keys(keys: Sequence[str], engine: str) -> tuple[str, ...]:
    """The engine's own regimes of a pooled chain ``keys`` (narrowest first), down to the
    task, kind and architecture: what an estimate naming its engine tries first."""
    return tuple(f"{key}@{engine}" for key in keys if key.count("/") >= 2) if engine else ()


def _keys(task: str, kind: str, architecture: str, gpu: str | None,
          precision: str | None = None) -> tuple[str, ...]:
    if task not in TASKS:
        raise GpuarchError(f"task: expected one of {', '.join(TASKS)}, got {task!r}")
    keys: tuple[str, ...] = (f"{task}/{kind}/{architecture}", f"{task}/{kind}", task)
    if gpu is None:
        return keys
    keys = (f"{keys[0]}/{gpu}", *keys)
    return keys if precision is None else (f"{keys[0]}/{precision}", *keys)


@dataclass(frozen=True)
class Band:
    """The model's signed throughput errors (predicted / published - 1) in one regime."""

    key: str
    figures: int
    out_of_sample: int
    median_error: float
    p10_error: float
    p90_error: float

    @property
    def engine(self) -> str:
        """The serving engine (``ENGINES``) or training framework (``FRAMEWORKS``) whose runs
        alone the band counts, or "" for all."""
        return self.key.partition("@")[2]

    @property
    def label(self) -> str:
        """The regime in words, e.g. "fine-grained MoE serving on Hopper" or, for one GPU,
        "dense training on gb300 (Blackwell)"; an engine's, "... with vLLM"."""
        regime, _, engine = self.key.partition("@")
        parts = regime.split("/")
        task = parts[0]
        if len(parts) == 1:
            return f"all {task}"
        text = f"{KIND_LABELS.get(parts[1], parts[1])} {task}"
        if len(parts) > 4:
            text = f"{text} on {parts[3]} ({parts[2].capitalize()}) in {parts[4]}"
        elif len(parts) > 3:
            text = f"{text} on {parts[3]} ({parts[2].capitalize()})"
        elif len(parts) > 2:
            text = f"{text} on {parts[2].capitalize()}"
        name = ENGINES.get(engine) if task == "serving" else FRAMEWORKS.get(engine)
        return f"{text} with {name or engine}" if engine else text

    @property
    def bias(self) -> str:
        """"optimistic" (the model above the published figures at the median),
        "pessimistic", or "no clear bias" (median within ``CLEAR_BIAS``)."""
        if abs(self.median_error) < CLEAR_BIAS:
            return "no clear bias"
        return "optimistic" if self.median_error > 0 else "pessimistic"

    def likely_range(self, predicted: float) -> tuple[float, float]:
        """The published values this prediction would have matched to within the regime's
        10th-90th percentile error: predicted / (1 + p90) to predicted / (1 + p10)."""
        return predicted / (1.0 + self.p90_error), predicted / (1.0 + self.p10_error)

    def as_json(self, predicted: float | None = None, metric: str | None = None
                ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "regime": self.key, "label": self.label, "figures": self.figures,
            "out_of_sample": self.out_of_sample, "median_error": self.median_error,
            "p10_error": self.p10_error, "p90_error": self.p90_error, "bias": self.bias,
            "engine": self.engine or None}
        if predicted is not None:
            low, high = self.likely_range(predicted)
            out["metric"] = metric
            out["likely_range"] = [low, high]
        return out

    def describe(self, predicted: float, unit: str) -> str:
        """What the text output prints: the range, and the errors it comes from."""
        low, high = self.likely_range(predicted)
        return (f"{_num(low)}-{_num(high)} {unit}, by the model's error on "
                f"{self.figures} published figures of {self.label} (10th-90th "
                f"percentile {_pct(self.p10_error)} to {_pct(self.p90_error)}, median "
                f"{_pct(self.median_error)}: {self.bias})")


def _pct(x: float) -> str:
    """A signed whole percentage; no sign on a value that rounds to zero ("0%", not "-0%")."""
    text = f"{x:+.0%}"
    return "0%" if text in ("+0%", "-0%") else text


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.3g}"


def _bands_from(samples: Mapping[str, Sequence[tuple[float, bool]]]) -> dict[str, Band]:
    out = {}
    for key, rows in sorted(samples.items()):
        errors = np.array([e for e, _ in rows], dtype=float)
        p10, p50, p90 = (round(float(v), 4) for v in np.percentile(errors, PERCENTILES))
        out[key] = Band(key, len(rows), sum(1 for _, oos in rows if oos), p50, p10, p90)
    return out


def compute_bands(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY
                  ) -> dict[str, Band]:
    """Every regime's band from the validation data and the model as it stands: the whole
    training and serving validation (1.6 s for `gpuarch validate bands --fresh` here)."""
    from gpuarch.validation.nearest import compute_figures

    return bands_from_figures(compute_figures(catalog, efficiency))


def bands_from_figures(figures: Iterable[PublishedFigure]) -> dict[str, Band]:
    """Every regime's band from the validation figures (``nearest.compute_figures``)."""
    samples: dict[str, list[tuple[float, bool]]] = {}
    for f in figures:
        s = f.setup
        keys = _keys(s.task, s.kind, s.architecture, s.gpu, s.precision)
        for key in (*engine_keys(keys, s.engine), *keys):
            samples.setdefault(key, []).append((f.error, f.out_of_sample))
    return _bands_from(samples)


def write_bands(bands: Mapping[str, Band], path: Path = BANDS_FILE,
                figures: Sequence[Mapping[str, Any]] = ()) -> None:
    """Write the bands, and the figures they come from with their setups
    (``nearest.figures_as_json``), as the data file (whole file at once)."""
    doc: dict[str, Any] = {
        "about": "Signed throughput errors of the model (predicted / published - 1) over "
                 "the validation data, by regime (task/model kind/architecture, and per "
                 "GPU: task/model kind/architecture/product key); written "
                 "by scripts/error_bands.py, checked by tests/test_error_bands.py.",
        "percentiles": list(PERCENTILES),
        "bands": {k: {"figures": b.figures, "out_of_sample": b.out_of_sample,
                      "median_error": b.median_error, "p10_error": b.p10_error,
                      "p90_error": b.p90_error} for k, b in sorted(bands.items())},
    }
    # one line per figure: the bands stay readable and a changed figure is a one-line diff
    rows = ",\n  ".join(json.dumps(f, separators=(",", ":")) for f in figures)
    listed = f"[\n  {rows}\n ]" if figures else "[]"
    text = json.dumps(doc, indent=1)[:-2] + f',\n "figures": {listed}\n}}\n'
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


@cache
def load_bands(path: Path = BANDS_FILE) -> dict[str, Band]:
    """The bands of the data file."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {k: Band(k, int(v["figures"]), int(v["out_of_sample"]), float(v["median_error"]),
                    float(v["p10_error"]), float(v["p90_error"]))
            for k, v in doc["bands"].items()}


def band_for(task: str, shape: TransformerShape, product: Product,
             bands: Mapping[str, Band] | None = None, per_gpu: bool = True,
             precision: str | None = None, engine: str = "") -> Band | None:
    """The narrowest regime of the workload with at least ``MIN_FIGURES`` figures, the GPU's
    own in the format first (``precision``: training's compute format, serving's (expert)
    weight format) unless ``per_gpu`` is off (None if not even the task has that many); with
    ``engine`` (a key of ``ENGINES``), that engine's own regimes first, down to the
    architecture's."""
    table = load_bands() if bands is None else bands
    gpu = product.key if per_gpu else None
    keys = regime_keys(task, shape, product.architecture, gpu, precision)
    for key in (*engine_keys(keys, engine), *keys):
        band = table.get(key)
        if band is not None and band.figures >= MIN_FIGURES:
            return band
    return None


def bands_by_architecture(task: str, shape: TransformerShape, products: Iterable[Product],
                          bands: Mapping[str, Band] | None = None, engine: str = ""
                          ) -> dict[str, dict[str, Any]]:
    """The band (``Band.as_json``) of each architecture among ``products`` that has one,
    keyed by the architecture: what an advisor comparing GPUs of several generations
    reports under ``assumptions.error_bands`` (``engine``'s own first, as ``band_for``)."""
    out: dict[str, dict[str, Any]] = {}
    for product in products:
        if product.architecture not in out:
            band = band_for(task, shape, product, bands, per_gpu=False, engine=engine)
            if band is not None:
                out[product.architecture] = band.as_json()
    return out


def render_bands(bands: Mapping[str, Band]) -> str:
    """The bands as a table, broad regimes first within each task; the thin ones marked; an
    engine's regime only where the regime holds other engines' runs too (else it is the
    pooled row again)."""
    def shown(key: str) -> bool:  # an engine's regime where it is not all of the regime
        pooled = bands.get(key.partition("@")[0])
        return pooled is None or pooled.figures != bands[key].figures or "@" not in key

    keys = [key for key in bands if shown(key)]
    width = max([len("regime"), *map(len, keys)])
    head = f"{'regime':{width}} {'figures':>7} {'oos':>5} {'p10':>7} {'median':>7} {'p90':>7}"
    lines = [head]
    for key in sorted(keys, key=lambda k: (k.split("/")[0], k)):
        b = bands[key]
        mark = "" if b.figures >= MIN_FIGURES else "  (too few: the broader band is used)"
        lines.append(f"{key:{width}} {b.figures:7d} {b.out_of_sample:5d} {b.p10_error:+7.1%} "
                     f"{b.median_error:+7.1%} {b.p90_error:+7.1%}{mark}")
    lines += ["", "signed error = predicted / published - 1 on throughput (training tokens/s "
              "per GPU, serving output tokens/s, a static batch's latency as the rate it "
              "implies); oos = figures added after the fit; an "
              "estimate uses the narrowest regime with at least "
              f"{MIN_FIGURES} figures; regime@engine: that engine's runs alone (listed where "
              "the regime holds another engine's too), which an estimate naming its engine "
              "(--engine) tries first"]
    return "\n".join(lines)


def band_sentence(architecture: str, band: Mapping[str, Any]) -> str:
    """One architecture's band (``Band.as_json``) in words, as advice answers print it. A
    band of a broader regime, standing in where the architecture has too few figures of its
    own (``MIN_FIGURES``), says so rather than reading as that architecture's."""
    name = architecture.capitalize()
    errors = (f"{_pct(band['p10_error'])} to {_pct(band['p90_error'])} (10th-90th "
              f"percentile), median {_pct(band['median_error'])}: {band['bias']}")
    parts = str(band["regime"]).partition("@")[0].split("/")
    if len(parts) > 2 and parts[2] == architecture:
        return (f"{name}: the model's error on {band['figures']} published figures of "
                f"{band['label']} was {errors}")
    pooled = str(band["label"]).removeprefix("all ")
    return (f"{name}: too few published figures on {name} for a band of its own; the "
            f"model's error on all {band['figures']} figures of {pooled}, every GPU "
            f"pooled, was {errors}")
