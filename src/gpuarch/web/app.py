"""``gpuarch serve``: a local Flask app whose JSON API is the command line.

Every endpoint turns its parameters into the matching ``gpuarch`` command (``/api/estimate/
train?model=llama-3.1-8b&gpus=8`` is ``gpuarch estimate train --model=llama-3.1-8b --gpus=8
--json``) and runs it in-process, so names, keys, defaults and error messages are the CLI's.
A usage error is a 400 naming the field; parameters that would touch the file system
(``out``, ``plot``, ``prices``, a ``model`` path ...) are refused; request and search sizes are
capped. Pages are forms over the same endpoints, rendered on the server (no scripts).
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from flask import Flask, Response, request

from gpuarch.cli.main import main as cli_main

__all__ = ["API_COMMANDS", "MAX_REQUEST_BYTES", "create_app", "run_command"]

MAX_REQUEST_BYTES = 16 * 1024
"""Largest request body or query string accepted."""

API_COMMANDS: dict[str, list[str]] = {
    "gpus": ["list"],
    "compare": ["compare"],
    "systems": ["systems"],
    "models": ["models"],
    "features": ["features"],
    "evolution": ["evolution"],
    "roofline": ["roofline"],
    "estimate/train": ["estimate", "train"],
    "estimate/infer": ["estimate", "infer"],
    "advise/train": ["advise", "train"],
    "advise/infer": ["advise", "infer"],
    "validate/training": ["validate", "training"],
    "validate/inference": ["validate", "inference"],
    "validate/bands": ["validate", "bands"],
    "validate/ops": ["validate", "ops"],
    "validate/moe-kernels": ["validate", "moe-kernels"],
    "validate/gemm-kernels": ["validate", "gemm-kernels"],
    "validate/gemm-ridge": ["validate", "gemm-ridge"],
    "validate/load": ["validate", "load"],
    "validate/attention-kernels": ["validate", "attention-kernels"],
    "validate/gdn-kernels": ["validate", "gdn-kernels"],
    "validate/collectives": ["validate", "collectives"],
    "validate/engine-all-reduce": ["validate", "engine-all-reduce"],
    "validate/power": ["validate", "power"],
}
"""API path -> the gpuarch command it runs."""

# the commands' positional arguments
_POSITIONAL = {"compare": "gpus", "systems": "name", "gpu": "name", "models": "name"}
_PAGE_COMMANDS = {**API_COMMANDS, "gpu": ["show"]}
_FORBIDDEN = {"out", "plot", "prices", "calibration", "save", "fake", "json", "help",
              "version", "fresh", "file", "data", "ops", "as_point", "measured"}
"""Parameters refused over the web: every option that reads or writes a file
(tests/test_web.py checks each file-path option of the command line is here), and the
output switches the app sets itself."""
_LIMITS = {"max_gpus": 1024, "top": 100, "gpus": 100_000}
_LOCK = threading.Lock()  # the CLI writes to sys.stdout: one command at a time


class ApiError(Exception):
    """A 4xx answer: the status and a message naming the field."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _argv(command: list[str], params: Mapping[str, Any], positional: str | None,
          as_json: bool = True) -> list[str]:
    argv = list(command)
    tail: list[str] = []
    for key, value in params.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", key):
            raise ApiError(400, f"{key[:40]!r}: not a parameter name")
        if key in _FORBIDDEN:
            raise ApiError(400, f"{key}: not available over the web")
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, dict | list):
                raise ApiError(400, f"{key}: expected a string, number or boolean")
            if key == "model" and isinstance(v, str) and (v.endswith(".json") or "/" in v
                                                          or "\\" in v):
                raise ApiError(400, "model: only built-in presets over the web "
                                    "(no config files)")
            if key in _LIMITS and isinstance(v, int | float | str):
                try:
                    number = float(v)
                except ValueError:
                    number = 0.0
                if number > _LIMITS[key]:
                    raise ApiError(400, f"{key}: at most {_LIMITS[key]} over the web, got {v}")
        if key == positional:
            tail += [part.strip() for v in values if v not in (None, "")
                     for part in str(v).split(",") if part.strip()]
            continue
        flag = "--" + key.replace("_", "-")
        for v in values:
            if v is True or v in ("true", "on"):
                argv.append(flag)
            elif v is False or v is None or v in ("", "false", "off"):
                continue
            else:
                argv.append(f"{flag}={v}")
    if as_json:
        argv.append("--json")
    if tail:
        argv += ["--", *tail]
    return argv


def run_command(command: list[str], params: Mapping[str, Any], positional: str | None = None,
                as_json: bool = True) -> Any:
    """Run one gpuarch command in-process; its JSON (or its text when not ``as_json``), or
    an ApiError with its message."""
    argv = _argv(command, params, positional, as_json)
    out, err = io.StringIO(), io.StringIO()
    with _LOCK, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli_main(argv)
        except SystemExit as exc:  # argparse usage errors
            status = int(exc.code or 0) if isinstance(exc.code, int) else 2
    if status != 0:
        message = err.getvalue().strip().splitlines()
        text = message[-1] if message else "bad request"
        text = re.sub(r"^(gpuarch( [a-z]+)*: error: )", "", text)
        raise ApiError(400, text)
    if not as_json:
        return out.getvalue()
    try:
        return json.loads(out.getvalue())
    except json.JSONDecodeError:
        raise ApiError(400, "the command printed no JSON") from None


def _params() -> dict[str, Any]:
    if len(request.query_string) > MAX_REQUEST_BYTES:
        raise ApiError(414, "query string too long")
    params: dict[str, Any] = {}
    for key in request.args:
        values = request.args.getlist(key)
        params[key] = values if len(values) > 1 else values[0]
    if request.method == "POST" and request.content_length:
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            raise ApiError(400, "body: expected a JSON object")
        params.update(body)
    return params


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, allow_nan=False), status=status,
                    mimetype="application/json")


_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title} - gpuarch
</title><style>body{{font-family:system-ui,sans-serif;margin:1.5rem auto;max-width:1100px;
padding:0 1rem}} pre{{background:#f6f6f8;padding:.8rem;overflow:auto;font-size:.8rem}}
label{{display:inline-block;margin:.2rem .8rem .2rem 0}} input{{width:9rem}}
nav a{{margin-right:1rem}} .err{{color:#a00}}</style></head><body><nav><a href="/">gpuarch</a>
<a href="/gpus">GPUs</a><a href="/gpu">one GPU</a><a href="/compare">compare</a>
<a href="/evolution">evolution</a><a href="/models">models</a>
<a href="/estimate/train">train</a><a href="/estimate/infer">infer</a>
<a href="/advise/train">advise train</a><a href="/advise/infer">advise infer</a>
<a href="/validate/training">training accuracy</a>
<a href="/validate/inference">serving accuracy</a>
<a href="/validate/bands">error bands</a> <a href="/validate/ops">operators</a>
<a href="/validate/moe-kernels">MoE kernels</a> <a href="/validate/gemm-kernels">GEMM short K</a>
<a href="/validate/gemm-ridge">GEMM ridge</a>
<a href="/validate/load">serving under load</a>
<a href="/validate/attention-kernels">attention kernels</a>
<a href="/validate/gdn-kernels">Gated DeltaNet kernels</a>
<a href="/validate/collectives">collectives</a>
<a href="/validate/engine-all-reduce">engine all-reduce</a>
<a href="/validate/power">power</a></nav>
<h1>{title}</h1>{body}</body></html>"""

_FORMS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "estimate/train": ("Training step estimate", [
        ("model", "llama-3.1-8b"), ("gpu", "h100"), ("gpus", "8"), ("tp", "1"), ("pp", "1"),
        ("cp", ""), ("cp_comm_type", ""), ("ep", ""), ("vpp", ""), ("pp_schedule", ""),
        ("seq_len", "4096"),
        ("global_batch", "64"), ("micro_batch", "1"), ("precision", ""), ("zero", ""),
        ("dp_shard", ""), ("sequence_parallel", ""), ("recompute", ""), ("recompute_modules", ""),
        ("recompute_layers", ""), ("offload_modules", ""), ("fp8_attention", ""),
        ("fp8_attention_scaling", ""), ("fp8_recipe", ""), ("bf16_layers_at_start", ""),
        ("bf16_layers_at_end", ""), ("lora_rank", ""),
        ("lora_modules", ""), ("packed_doc_len", ""), ("tokens", ""),
        ("price_per_gpu_hour", ""), ("node_overhead", ""), ("pue", ""),
        ("checkpoint_write_gb_s", ""), ("restart_min", ""), ("framework", ""), ("launch", "")]),
    "estimate/infer": ("Serving estimate", [
        ("model", "llama-3.1-8b"), ("gpu", "h100"), ("tp", "1"), ("input_len", "2048"),
        ("output_len", "256"), ("batch", "32"), ("rate", ""), ("simulate", ""),
        ("input_len_cv", ""), ("output_len_cv", ""), ("slo_ttft_ms", ""), ("slo_tpot_ms", ""),
        ("schedule", ""), ("scheduler_policy", ""),
        ("batching", ""),
        ("weight_precision", ""), ("activation_precision", ""), ("kv_precision", ""),
        ("expert_weight_precision", ""), ("expert_activation_precision", ""),
        ("max_batch_size", ""), ("max_num_tokens", ""), ("engine_limits", ""),
        ("executor", ""), ("window_kv_cache", "ring"), ("mla_cache", ""),
        ("decode_kv_reads", "shared"),
        ("moe_comm", "alltoall"), ("moe_kernels", ""), ("moe_gemm_kernel", "native"),
        ("all_reduce", ""),
        ("num_requests", ""),
        ("cached_prefix", ""),
        ("prefill_gpus", ""), ("prefill_tp", ""), ("prefill_ep", ""),
        ("prefill_max_num_tokens", ""), ("concurrency", ""),
        ("fp8_context_attention", ""), ("no_fp8_mla_decode", ""), ("fp8_scaling", ""),
        ("cuda_graph_batch_sizes", ""),
        ("price_per_gpu_hour", ""), ("node_overhead", ""), ("pue", ""), ("engine", ""),
        ("launch", "")]),
    "advise/train": ("Training advice", [
        ("model", "llama-3.1-8b"), ("tokens", "1T"), ("gpu", "h100,h200,b200"),
        ("max_gpus", "256"), ("objective", "time"), ("deadline_days", ""), ("lora_rank", ""),
        ("lora_modules", ""), ("pp_schedule", ""), ("offload_modules", ""),
        ("checkpoint_write_gb_s", ""),
        ("restart_min", ""), ("max_power_kw", ""), ("node_overhead", ""), ("pue", ""),
        ("framework", ""), ("launch", "")]),
    "advise/infer": ("Serving advice", [
        ("model", "llama-3.1-8b"), ("input_len", "2048"), ("output_len", "256"),
        ("rate", "10"), ("tpot_ms", "50"), ("ttft_ms", ""), ("ttft_p99_ms", ""),
        ("tpot_p99_ms", ""), ("gpu", ""), ("disaggregated", ""), ("simulate", ""),
        ("max_power_kw", ""), ("node_overhead", ""), ("pue", ""), ("engine", ""),
        ("launch", "")]),
    "gpus": ("GPUs", [("arch", ""), ("tier", ""), ("sort", "year")]),
    "gpu": ("One GPU: peaks, features explained, sources", [("name", "h100")]),
    "compare": ("Compare GPUs", [("gpus", "a100 h100 b200")]),
    "evolution": ("Architecture evolution", [("tier", "")]),
    "models": ("Model presets: shapes, parameters, checkpoint formats, sources",
               [("name", "")]),
    "validate/training": ("Training model against published training runs",
                          [("match", ""), ("worst", "")]),
    "validate/inference": ("Serving model against published serving figures",
                           [("match", ""), ("worst", "")]),
    "validate/bands": ("Error bands: how far the model has been from published figures", []),
    "validate/ops": ("Operators timed on an H200 beside the model's per-operator times",
                     [("kind", "")]),
    "validate/moe-kernels": ("An engine's measured MoE layers (TensorRT-LLM, vLLM or SGLang) "
                             "beside the model's MoE module", [("moe_kernels", "trtllm")]),
    "validate/gemm-kernels": ("TensorRT-LLM's measured GEMMs at short K beside the roofline, "
                              "by format", []),
    "validate/gemm-ridge": ("TensorRT-LLM's measured GEMMs across M beside the roofline, "
                            "near its ridge point", []),
    "validate/load": ("MLPerf Inference's Llama 2 70B Server runs (TTFT and TPOT at a "
                      "scheduled Poisson rate) beside the serving simulation",
                      [("prompts", "dataset")]),
    "validate/attention-kernels": ("TensorRT-LLM's measured attention kernels beside the "
                                   "model's attention cores", []),
    "validate/gdn-kernels": ("flash-linear-attention's measured Gated DeltaNet prefill "
                             "beside the model's forward scan", []),
    "validate/collectives": ("NCCL's measured collectives beside the collectives model", []),
    "validate/engine-all-reduce": ("The serving engines' measured all-reduce kernels beside "
                                   "the serving model's", []),
    "validate/power": ("Node power metered during MLPerf Training runs beside the power model",
                       [("match", "")]),
}


def _form(path: str, fields: list[tuple[str, str]], values: Mapping[str, str]) -> str:
    inputs = "".join(
        f'<label>{html.escape(k)} <input name="{html.escape(k)}" '
        f'value="{html.escape(values.get(k, default))}"></label>' for k, default in fields)
    return f'<form method="get" action="/{path}">{inputs}<button>run</button></form>'


def _compare_chart(data: Mapping[str, Any]) -> str:
    """Bars of each GPU's numeric rows, relative to the first GPU (inline SVG)."""
    rows = [r for r in data.get("rows", [])
            if r.get("ratios") and r["unit"] and any(x is not None for x in r["ratios"][1:])]
    # Tensor Core peaks and memory first: what most comparisons are about
    rows.sort(key=lambda r: (0 if "Tensor" in r["label"] else
                             1 if "Memory" in r["label"] else 2))
    rows = rows[:8]
    names = data.get("products", [])
    if not rows or not names:
        return ""
    width, bar, gap = 900, 14, 8
    height = len(rows) * (len(names) * bar + gap) + 40
    top = max(max((x or 0) for x in r["ratios"]) for r in rows) or 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'role="img" aria-label="comparison chart">']
    y = 10
    colours = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2"]
    for r in rows:
        parts.append(f'<text x="0" y="{y + 11}" font-size="11">'
                     f'{html.escape(r["label"][:34])}</text>')
        for i, ratio in enumerate(r["ratios"]):
            if ratio is None:
                parts.append(f'<text x="245" y="{y + 10}" font-size="10">'
                             f'{html.escape(names[i][:24])}: not published</text>')
                y += bar
                continue
            length = 520 * ratio / top
            parts.append(f'<rect x="240" y="{y}" width="{length:.1f}" height="{bar - 2}" '
                         f'fill="{colours[i % len(colours)]}"></rect>'
                         f'<text x="{245 + length:.1f}" y="{y + 10}" font-size="10">'
                         f'{html.escape(names[i][:24])} {ratio:.2f}x</text>')
            y += bar
        y += gap
    parts.append("</svg>")
    return "".join(parts)


def _query(params: Mapping[str, Any]) -> str:
    from urllib.parse import urlencode

    return urlencode([(k, x) for k, v in params.items()
                      for x in (v if isinstance(v, list) else [v])])


def _evolution_chart(params: Mapping[str, Any]) -> str:
    """The evolution plot as inline SVG (needs matplotlib; without it, none)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return '<p class="err">Install matplotlib for the chart.</p>'
    from gpuarch.catalog.evolution import DEFAULT_METRICS, evolution
    from gpuarch.catalog.loader import load_catalog
    from gpuarch.catalog.model import Tier
    from gpuarch.report.html import inline_svg
    from gpuarch.report.plot import plot_evolution

    tiers = None
    if params.get("tier"):
        try:
            tiers = [Tier(t.strip()) for t in str(params["tier"]).split(",") if t.strip()]
        except ValueError:
            return ""  # the command below reports the bad tier
    rows = evolution(load_catalog(), DEFAULT_METRICS, tiers)
    return inline_svg(lambda p: plot_evolution(rows, DEFAULT_METRICS, p))


def _accuracy_chart(path: str, params: Mapping[str, Any]) -> str:
    """A validation page's errors as a strip per GPU (inline SVG; needs matplotlib), over the
    points --match and --worst keep; nothing where they are not valid (the command below
    says why)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return '<p class="err">Install matplotlib for the chart.</p>'
    from gpuarch.catalog.loader import load_catalog
    from gpuarch.errors import GpuarchError
    from gpuarch.report.html import inline_svg
    from gpuarch.report.plot import plot_errors
    from gpuarch.validation.inference import validate_inference
    from gpuarch.validation.training import validate_training

    training = path == "validate/training"
    validate = validate_training if training else validate_inference
    match = params.get("match", [])
    try:
        worst = int(params["worst"]) if params.get("worst") else None
        summary = validate(load_catalog()).select(
            match if isinstance(match, list) else [match], worst if worst and worst > 0
            else None)
    except (GpuarchError, ValueError):
        return ""
    if not summary.rows:
        return ""
    what = "training points" if training else "serving figures"
    return inline_svg(lambda p: plot_errors(summary, p, what))


def create_app() -> Flask:
    """The app; ``gpuarch serve`` runs it on 127.0.0.1."""
    app = Flask("gpuarch")
    app.config["MAX_CONTENT_LENGTH"] = MAX_REQUEST_BYTES

    @app.errorhandler(ApiError)
    def api_error(exc: ApiError) -> Response:
        if request.path.startswith("/api/"):
            return _json({"error": exc.message}, exc.status)
        body = f'<p class="err">{html.escape(exc.message)}</p>'
        return Response(_PAGE.format(title="error", body=body), status=exc.status,
                        mimetype="text/html")

    @app.errorhandler(404)
    def not_found(_: Exception) -> Response:
        if request.path.startswith("/api/"):
            return _json({"error": f"no endpoint {request.path}; see /api"}, 404)
        return Response(_PAGE.format(title="not found", body="<p>No such page.</p>"),
                        status=404, mimetype="text/html")

    @app.errorhandler(413)
    def too_large(_: Exception) -> Response:
        return _json({"error": f"request larger than {MAX_REQUEST_BYTES} bytes"}, 413)

    @app.errorhandler(405)
    def bad_method(_: Exception) -> Response:
        return _json({"error": f"{request.method} is not allowed here"}, 405)

    @app.get("/favicon.ico")
    def favicon() -> Response:
        return Response(status=204)

    @app.get("/api")
    def api_index() -> Response:
        return _json({"endpoints": {f"/api/{k}": "gpuarch " + " ".join(v)
                                    for k, v in API_COMMANDS.items()}
                      | {"/api/gpus/<name>": "gpuarch show <name>"}})

    @app.route("/api/gpus/<name>", methods=["GET"])
    def api_show(name: str) -> Response:
        return _json(run_command(["show"], {"name": name}, positional="name"))

    def api_endpoint(path: str) -> Response:
        return _json(run_command(API_COMMANDS[path], _params(), _POSITIONAL.get(path)))

    for path in API_COMMANDS:
        app.add_url_rule(f"/api/{path}", f"api_{path}", lambda path=path: api_endpoint(path),
                         methods=["GET", "POST"])

    @app.get("/")
    def index() -> Response:
        links = "".join(f'<li><a href="/{p}">{html.escape(t)}</a></li>'
                        for p, (t, _) in _FORMS.items())
        body = (f"<p>NVIDIA GPUs from G80 to Blackwell, sourced; estimates and advice.</p>"
                f"<ul>{links}</ul><p>JSON API: <a href=\"/api\">/api</a></p>")
        return Response(_PAGE.format(title="gpuarch", body=body), mimetype="text/html")

    def page(path: str) -> Response:
        title, fields = _FORMS[path]
        params: dict[str, Any] = {k: v for k, v in request.args.items() if v != ""}
        body = _form(path, fields, request.args)
        if params or path in ("gpus", "evolution") or path.startswith("validate/"):
            # no input needed (every validation page runs on its shipped data)
            positional = _POSITIONAL.get(path)
            if path == "compare":
                params = {"gpus": str(params.get("gpus", "")).replace(",", " ").split()}
                body += _compare_chart(run_command(["compare"], params, positional))
            if path == "evolution":
                body += _evolution_chart(params)
            if path in ("validate/training", "validate/inference"):
                body += _accuracy_chart(path, params)
            text = run_command(_PAGE_COMMANDS[path], params, positional, as_json=False)
            body += f'<pre id="result">{html.escape(text)}</pre>'
            api = (f"/api/gpus/{quote(str(params.get('name', '')))}" if path == "gpu"
                   else f"/api/{path}?{_query(params)}")
            body += f'<p>The same as JSON: <a href="{html.escape(api)}">{html.escape(api)}</a></p>'

        return Response(_PAGE.format(title=html.escape(title), body=body),
                        mimetype="text/html")

    for path in _FORMS:
        app.add_url_rule(f"/{path}", f"page_{path}", lambda path=path: page(path),
                         methods=["GET"])
    return app
