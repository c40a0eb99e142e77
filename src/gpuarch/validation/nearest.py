"""The published runs nearest an estimate, and how far the model landed from each.

An error band (bands.py) sums up a whole regime: dense training on Blackwell, say. Inside a
regime the model can still miss one corner of it badly (Llama 3.1 8B on 1,024 GB200 at
2,048 tokens per GPU, +98%, sits in a band whose median is +1%). So an estimate also lists
the validation figures whose setups are closest to its own, each with the model's signed
error there: a user asking about a setup that was measured sees the measurement and the
miss, not only the regime's average.

Each throughput figure of the validation data (training tokens/s per GPU; serving output
tokens/s, in all or per GPU, and a static batch's request latency as the output rate it
implies: the figures the bands count) is stored with its setup in
``data/error_bands.json`` under ``figures``, written by ``scripts/error_bands.py`` with the
bands and checked by the same test.

Closeness is a ranking, not a fitted quantity: a sum of penalties for each way a figure's
setup differs from the estimate's, weighted so that the model matters most, then the GPU,
then the precision, then the layout and the scale (``DISTANCE_WEIGHTS``). Figures farther
than ``MAX_DISTANCE`` (a different model of another size on another architecture, say)
are not listed: nothing measured is close.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuarch.catalog.loader import Catalog
from gpuarch.catalog.model import Product
from gpuarch.perf.efficiency import DEFAULT_EFFICIENCY, Efficiency
from gpuarch.units import Unit, from_si
from gpuarch.validation.bands import ENGINES, engine_family, model_kind
from gpuarch.workloads.params import count_params
from gpuarch.workloads.shape import TransformerShape

if TYPE_CHECKING:
    from gpuarch.estimate.inference_config import InferenceConfig
    from gpuarch.estimate.training_config import TrainingConfig

__all__ = [
    "DISTANCE_WEIGHTS",
    "LATENCY_AS_THROUGHPUT",
    "MAX_DISTANCE",
    "PublishedFigure",
    "Setup",
    "compute_figures",
    "distance",
    "figures_as_json",
    "figures_from_json",
    "load_figures",
    "nearest",
    "serving_setup",
    "setup_for",
    "training_setup",
]

DISTANCE_WEIGHTS: Mapping[str, float] = {
    "model": 1.0,  # another model of the same kind (plus the log10 of the size ratio)
    "kind": 1.0,  # dense against MoE, coarse against fine-grained MoE
    "size": 1.0,  # per decade of total parameters between two models
    "architecture": 1.5,  # another GPU architecture
    "gpu": 0.75,  # another GPU of the same architecture
    "precision": 0.5,  # another compute or weight format
    "engine": 0.5,  # another serving engine (where the estimate names its own)
    "parallel": 0.3,  # each of TP, PP, CP, EP that differs
    "scale": 0.3,  # per doubling of the GPU count
    "length": 0.2,  # per doubling of the sequence (serving: prompt, then output) length
}
"""Penalty per way a published setup differs from the estimate's (``distance``)."""

MAX_DISTANCE = 3.0
"""Farthest a figure may be and still be listed."""

# serving figures that are throughputs (time figures err the other way and are left out,
# but for a static batch's request latency, which is one exactly: ``LATENCY_AS_THROUGHPUT``)
_THROUGHPUT_METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "total_tokens_per_s")

LATENCY_AS_THROUGHPUT = "output_tokens_per_s_from_request_latency"
"""The metric of a static batch's published request latency L taken as the output tokens
per second it implies, batch x output length x replicas / L (the published and the
predicted latency alike), so that its error counts with the throughputs': predicted /
published - 1 on the throughput is published / predicted - 1 on the latency."""


@dataclass(frozen=True)
class Setup:
    """What an estimate (or a published run) ran: the fields closeness compares."""

    task: str  # "training" or "serving"
    model: str  # the shape's name (a preset's key)
    params: int  # total parameters
    kind: str  # bands.model_kind: "dense", "coarse-moe" or "fine-moe"
    gpu: str  # catalog product key
    architecture: str
    gpus: int
    precision: str  # training: compute precision; serving: the (expert) weights' format
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    seq_len: int = 0  # training
    input_len: int = 0  # serving
    output_len: int = 0  # serving
    # the engine that ran it (serving, bands.ENGINES' key) or its framework's family
    # (training, bands.FRAMEWORKS' key); "" where not known or not named
    engine: str = ""


@dataclass(frozen=True)
class PublishedFigure:
    """One validation figure: the run's setup, the published value and the model's."""

    id: str
    source: str
    setup: Setup
    layout: str  # the validation table's layout (training) or formats (serving) text
    metric: str
    published: float
    predicted: float
    out_of_sample: bool

    @property
    def error(self) -> float:
        """Signed relative error of the model (predicted / published - 1)."""
        return self.predicted / self.published - 1.0

    @property
    def summary(self) -> str:
        """The run in one line: id, model, GPUs, layout (training: and precision; serving:
        the formats, the experts' weights where they differ, and the lengths)."""
        s = self.setup
        if s.task == "training":
            what = f"{self.layout}, {s.precision}"
        else:
            experts = "" if self.layout.startswith(f"W{s.precision}/") else \
                f" (experts {s.precision})"
            what = f"{self.layout}{experts}, {s.input_len:,}/{s.output_len:,} tokens"
            if s.engine:
                what += f", {ENGINES.get(s.engine, s.engine)}"
        # a point with its own shape is named after itself: say its size instead
        model = s.model if s.model != self.id \
            else f"a {from_si(s.params, Unit.BILLION):,.3g}B-parameter model"
        return f"{self.id}: {model}, {s.gpus:,} x {s.gpu}, {what}"

    def as_json(self, distance_: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id, "source": self.source, "model": self.setup.model,
            "gpu": self.setup.gpu, "gpus": self.setup.gpus, "layout": self.layout,
            "precision": self.setup.precision, "metric": self.metric,
            "published": self.published, "predicted": self.predicted, "error": self.error,
            "out_of_sample": self.out_of_sample, "summary": self.summary}
        if distance_ is not None:
            out["distance"] = round(distance_, 3)
        return out


def _log2_ratio(a: int, b: int) -> float:
    """|log2(a / b)|, written so that swapping a and b gives the same float; 0 where
    either is unset (0)."""
    return abs(math.log2(a) - math.log2(b)) if a > 0 and b > 0 else 0.0


def distance(query: Setup, figure: Setup) -> float:
    """How far ``figure``'s setup is from ``query``'s (0: the same setup), by
    ``DISTANCE_WEIGHTS``; infinite across tasks."""
    if query.task != figure.task:
        return math.inf
    w = DISTANCE_WEIGHTS
    d = 0.0
    if query.model != figure.model:
        d += w["model"] + w["size"] * abs(math.log10(max(query.params, 1))
                                          - math.log10(max(figure.params, 1)))
        d += w["kind"] * (query.kind != figure.kind)
    if query.gpu != figure.gpu:
        d += w["gpu"] if query.architecture == figure.architecture else w["architecture"]
    d += w["precision"] * (query.precision != figure.precision)
    d += w["engine"] * bool(query.engine and figure.engine and query.engine != figure.engine)
    d += w["parallel"] * sum((query.tp != figure.tp, query.pp != figure.pp,
                              query.cp != figure.cp, query.ep != figure.ep))
    d += w["scale"] * _log2_ratio(query.gpus, figure.gpus)
    d += w["length"] * (_log2_ratio(query.seq_len, figure.seq_len)
                        + _log2_ratio(query.input_len, figure.input_len)
                        + _log2_ratio(query.output_len, figure.output_len))
    return d


def nearest(query: Setup, figures: Sequence[PublishedFigure] | None = None, k: int = 3,
            max_distance: float = MAX_DISTANCE) -> list[tuple[float, PublishedFigure]]:
    """The ``k`` figures closest to ``query`` (nearest first, ties by id), none farther
    than ``max_distance``; one figure per published run (its first metric) and per setup
    (a layout republished by several releases of a table is listed once)."""
    table = load_figures() if figures is None else figures
    ranked = sorted(((distance(query, f.setup), f.id, f) for f in table),
                    key=lambda t: (t[0], t[1]))
    out: list[tuple[float, PublishedFigure]] = []
    seen: set[str | Setup] = set()
    for d, fid, figure in ranked:
        if d > max_distance or len(out) == k:
            break
        if fid not in seen and figure.setup not in seen:
            seen.update((fid, figure.setup))
            out.append((d, figure))
    return out


def compute_figures(catalog: Catalog, efficiency: Efficiency = DEFAULT_EFFICIENCY
                    ) -> list[PublishedFigure]:
    """Every throughput figure of the validation data with its setup and the model's value
    as it stands (the whole validation: about as long as ``compute_bands``)."""
    from gpuarch.validation.inference import load_inference_points, point_config, validate_inference
    from gpuarch.validation.training import load_training_points, validate_training

    return [*_training_figures(catalog, load_training_points(),
                               validate_training(catalog, efficiency).rows),
            *_serving_figures(catalog, load_inference_points(),
                              validate_inference(catalog, efficiency).rows, point_config)]


def setup_for(task: str, shape: TransformerShape, product: Product, gpus: int,
              precision: str, **layout: Any) -> Setup:
    """The setup of a workload of ``shape`` on ``gpus`` of ``product``; ``layout`` gives
    any of tp, pp, cp, ep, seq_len, input_len, output_len and engine."""
    return Setup(task=task, model=shape.name, params=count_params(shape).total,
                 kind=model_kind(shape), gpu=product.key, architecture=product.architecture,
                 gpus=gpus, precision=precision, **layout)


def training_setup(shape: TransformerShape, product: Product, cfg: TrainingConfig,
                   framework: str = "") -> Setup:
    """The setup of a training estimate, for ``nearest`` (``framework``: the family it
    names, ``bands.FRAMEWORKS``, if any)."""
    return setup_for("training", shape, product, cfg.gpus, cfg.precision.value, tp=cfg.tp,
                     pp=cfg.pp, cp=cfg.cp, ep=cfg.ep, seq_len=cfg.seq_len, engine=framework)


def serving_setup(shape: TransformerShape, product: Product, cfg: InferenceConfig,
                  engine: str = "") -> Setup:
    """The setup of a serving estimate, for ``nearest``: its precision is the routed
    experts' weight format where it has one, else the weights'; ``engine`` the one it
    names (``bands.ENGINES``), if any."""
    return setup_for("serving", shape, product, cfg.gpus,
                     (cfg.expert_weights or cfg.quant.weights).value, tp=cfg.tp, pp=cfg.pp,
                     ep=cfg.ep, input_len=cfg.input_len, output_len=cfg.output_len,
                     engine=engine)


def _setup(catalog: Catalog, task: str, point: Any, shape: Any, **rest: Any) -> Setup:
    product = catalog.product(str(point.get("gpu")))
    return Setup(task=task, model=shape.name, params=count_params(shape).total,
                 kind=model_kind(shape), gpu=product.key, architecture=product.architecture,
                 gpus=int(point.get("gpus")), tp=int(point.get("tp") or 1),
                 pp=int(point.get("pp") or 1), ep=int(point.get("ep") or 1), **rest)


def _training_figures(catalog: Catalog, points: Iterable[Any], rows: Iterable[Any]
                      ) -> list[PublishedFigure]:
    from gpuarch.validation.training import point_shape

    by_id = {p.id: p for p in points}
    out = []
    for r in rows:
        p = by_id[r.id]
        setup = _setup(catalog, "training", p, point_shape(p), cp=int(p.get("cp") or 1),
                       precision=r.precision, seq_len=int(p.get("seq_len")),
                       engine=r.framework)
        out.append(PublishedFigure(r.id, r.source, setup, r.layout, "tokens_per_s_per_gpu",
                                   float(r.published), float(r.predicted),
                                   bool(r.out_of_sample)))
    return out


def _serving_figures(catalog: Catalog, points: Iterable[Any], rows: Iterable[Any],
                     point_config: Any) -> list[PublishedFigure]:
    from gpuarch.estimate.inference_config import Batching
    from gpuarch.validation.training import point_shape

    by_id = {p.id: p for p in points}
    out = []
    for r in rows:
        p = by_id[r.id]
        if p.get("prefill_gpus") is not None:
            # a disaggregated run (prefill and decode pools apart) is no aggregated
            # estimate's neighbour, nor in its band: the bands measure aggregated serving
            continue
        cfg = point_config(p, 8)
        metric, published, predicted = r.metric, float(r.published), float(r.predicted)
        if metric == "request_latency_s" and cfg.batching is Batching.STATIC \
                and cfg.batch is not None:
            tokens = cfg.batch * cfg.output_len * cfg.replicas
            metric, published, predicted = \
                LATENCY_AS_THROUGHPUT, tokens / published, tokens / predicted
        elif metric not in _THROUGHPUT_METRICS:
            continue
        weights = cfg.expert_weights or cfg.quant.weights
        setup = _setup(catalog, "serving", p, point_shape(p), precision=weights.value,
                       input_len=cfg.input_len, output_len=cfg.output_len,
                       engine=engine_family(str(p.get("framework") or "")))
        out.append(PublishedFigure(r.id, r.source, setup, r.formats, metric, published,
                                   predicted, bool(r.out_of_sample)))
    return out


def figures_as_json(figures: Iterable[PublishedFigure]) -> list[dict[str, Any]]:
    """The figures as the data file stores them."""
    return [{"id": f.id, "source": f.source, "layout": f.layout, "metric": f.metric,
             "published": f.published, "predicted": float(f"{f.predicted:.6g}"),
             "out_of_sample": f.out_of_sample, "setup": asdict(f.setup)} for f in figures]


def figures_from_json(rows: Iterable[Mapping[str, Any]]) -> list[PublishedFigure]:
    names = {f.name for f in fields(Setup)}
    return [PublishedFigure(r["id"], r["source"],
                            Setup(**{k: v for k, v in r["setup"].items() if k in names}),
                            r["layout"], r["metric"], float(r["published"]),
                            float(r["predicted"]), bool(r["out_of_sample"])) for r in rows]


@cache
def load_figures(path: Path | None = None) -> tuple[PublishedFigure, ...]:
    """The figures of the data file (``bands.BANDS_FILE`` unless ``path``)."""
    from gpuarch.validation.bands import BANDS_FILE

    doc = json.loads((path or BANDS_FILE).read_text(encoding="utf-8"))
    return tuple(figures_from_json(doc.get("figures", [])))
