"""``gpuarch models``: the model presets ``--model`` takes, with their shapes, parameter
counts, published checkpoint formats and sources."""

from __future__ import annotations

import argparse
from typing import Any

from gpuarch.report.serialize import to_json

__all__ = ["add_commands"]


def _record(p: Any) -> dict[str, Any]:
    from gpuarch.workloads.params import count_params

    counted = count_params(p.shape)
    return {"name": p.shape.name, "aliases": list(p.aliases), "shape": p.shape,
            "params_counted": {"total": counted.total, "active": counted.active(p.shape),
                               "by_component": counted},
            "params_published": p.params, "params_published_billions": p.params_billions,
            "checkpoint": p.checkpoint,
            "source": {"title": p.source_title, "url": p.source_url}}


def cmd_models(args: argparse.Namespace) -> int:
    from gpuarch.report.models_text import render_preset, render_presets
    from gpuarch.workloads.presets import load_presets, preset

    if args.name:
        one = preset(args.name)
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
    p.add_argument("name", nargs="?", help="one preset in full, e.g. llama-3.1-70b")
    p.set_defaults(handler=cmd_models)
