"""``gpuarch models``: the model presets ``--model`` takes, with their shapes, parameter
counts, published checkpoint formats and sources."""

from __future__ import annotations

import argparse
from typing import Any

from gpuarch.errors import GpuarchError
from gpuarch.report.serialize import to_json

__all__ = ["add_commands"]


def _record(p: Any) -> dict[str, Any]:
    from gpuarch.workloads.params import count_params

    counted = count_params(p.shape)
    return {"name": p.shape.name, "aliases": list(p.aliases),
            "hf_repos": list(getattr(p, "hf_repos", ())), "shape": p.shape,
            "params_counted": {"total": counted.total, "active": counted.active(p.shape),
                               "by_component": counted},
            "params_published": p.params, "params_published_billions": p.params_billions,
            "checkpoint": p.checkpoint, "remote_code": p.remote_code,
            "source": {"title": p.source_title, "url": p.source_url}}


def _config_preset(name: str) -> Any:
    """A local config.json read as ``--model`` reads it, shown like a preset: its shape, the
    counted parameters, the formats its checkpoint declares, and the file as the source."""
    from gpuarch.cli.estimate_cmds import model_config
    from gpuarch.workloads.hf import shape_from_hf_config
    from gpuarch.workloads.hf_quant import checkpoint_formats
    from gpuarch.workloads.presets import Preset, needs_remote_code

    path = model_config(name)
    assert path is not None  # (cmd_models asks names_file first)
    shape = shape_from_hf_config(path)
    return Preset(shape=shape, aliases=(), source_title=f"{path} (a local config.json)",
                  source_url=str(path.resolve()), params=None, params_billions=None,
                  checkpoint=checkpoint_formats(path), remote_code=needs_remote_code(str(path)))


VERBS = ("show", "list")
"""Words a user may put before the name, as in other tools' listing commands."""


def cmd_models(args: argparse.Namespace) -> int:
    from gpuarch.cli.estimate_cmds import names_file
    from gpuarch.report.models_text import render_preset, render_presets
    from gpuarch.workloads.presets import load_presets, preset

    words = list(args.name)
    if words and words[0] in VERBS:  # "models show X" and "models list", as other tools say
        words = words[1:]
    if len(words) > 1:
        raise GpuarchError(f"models: one preset at a time, got {' '.join(words)!r}")
    name = words[0] if words else None
    if name:
        one = _config_preset(name) if names_file(name) else preset(name)
        print(to_json({"models": [_record(one)]}) if args.json else render_preset(one))
        return 0
    every = list(load_presets().by_name.values())
    print(to_json({"models": [_record(p) for p in every]}) if args.json
          else render_presets(every))
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register ``models``."""
    p = sub.add_parser("models", parents=[common],
                       help="model presets: shapes, parameters, checkpoint formats, sources")
    p.add_argument("name", nargs="*", metavar="name",
                   help="one preset in full, e.g. llama-3.1-70b, or a local Hugging Face "
                   "config.json read as --model reads it (a leading 'show' or 'list' is "
                   "allowed: 'models show llama-3.1-70b', 'models list')")
    p.set_defaults(handler=cmd_models)
