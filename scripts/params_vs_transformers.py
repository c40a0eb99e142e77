"""Count each config.json's language-model parameters as gpuarch does and as Hugging Face
Transformers builds the model, and print both side by side.

    python scripts/params_vs_transformers.py DIR [DIR ...]

Each DIR is a checkpoint directory holding a config.json, a directory of them (each in a
sub-directory), a directory of ``NAME_config.json`` files, or one config file.
Transformers builds the model on PyTorch's meta device (no memory, no weights), from the
config's text model where it has one (a multimodal checkpoint's vision
and audio towers are not counted, as gpuarch does not count them); parameters whose names
hold ``mtp`` (multi-token prediction blocks, a training setting in gpuarch) are left out.
It needs ``torch`` and ``transformers``, which gpuarch itself does not: run it from an
environment that has them with gpuarch importable (``PYTHONPATH=src``), e.g.

    python -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install torch==2.13.0 transformers
    PYTHONPATH=src /tmp/tfenv/bin/python scripts/params_vs_transformers.py DIR

A row reads ``equal``, the difference (gpuarch less Transformers) with its share, or why one
side could not count it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _transformers_count(config_path: Path) -> int:
    import torch
    from transformers import (
        AutoConfig,
        AutoModel,
        AutoModelForCausalLM,
        AutoModelForImageTextToText,
    )

    raw = json.loads(config_path.read_text())
    raw.pop("quantization_config", None)
    text = raw.get("text_config")
    if isinstance(text, dict):
        text.pop("quantization_config", None)
    cfg = AutoConfig.for_model(**raw)
    text_cfg = cfg.get_text_config()
    head = 0  # an LM head the built model lacks (a bare text model's)
    with torch.device("meta"):
        # the text model with its head where Transformers has one; else the whole
        # multimodal model (its towers left out by name below); else the bare text model
        builders = ((AutoModelForCausalLM, text_cfg), (AutoModelForCausalLM, cfg),
                    (AutoModelForImageTextToText, cfg), (AutoModel, text_cfg))
        for builder, config in builders:
            try:
                model = builder.from_config(config)
            except ValueError:
                continue
            if builder is AutoModel:
                tied = getattr(cfg, "tie_word_embeddings", False) \
                    or getattr(text_cfg, "tie_word_embeddings", False)
                head = 0 if tied else text_cfg.vocab_size * text_cfg.hidden_size
            break
        else:
            raise ValueError("no Transformers model class takes this config")
    seen: set[int] = set()
    total = head
    for name, param in model.named_parameters(remove_duplicate=True):
        if "mtp" in name or any(k in name for k in ("vision", "visual", "audio",
                                                    "multi_modal_projector")):
            continue
        if id(param) in seen:
            continue
        seen.add(id(param))
        total += param.numel()
    return total


def _configs(paths: list[Path]) -> list[Path]:
    """The config.json files of ``paths``: a checkpoint directory's, each sub-directory's,
    or files named ``NAME_config.json`` (as aiconfigurator-core's model_configs/ holds
    them; its ``NAME_hf_quant_config.json`` files are not configs)."""
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
        elif (path / "config.json").is_file():
            found.append(path / "config.json")
        else:
            found.extend(sorted(path.glob("*/config.json")))
            found.extend(sorted(c for c in path.glob("*_config.json")
                                if not c.name.endswith("_hf_quant_config.json")))
    return found


def main(argv: list[str] | None = None) -> int:
    from gpuarch.errors import GpuarchError
    from gpuarch.workloads import count_params
    from gpuarch.workloads.hf import shape_from_hf_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    args = parser.parse_args(argv)
    rows: list[tuple[str, str, str, str]] = []
    equal = differ = 0
    for config in _configs(args.dirs):
        name = config.parent.name if config.name == "config.json" \
            else config.name.removesuffix("_config.json")
        try:
            ours: Any = count_params(shape_from_hf_config(config)).total
        except GpuarchError as exc:
            ours = f"refused: {str(exc).split(': ', 2)[-1][:60]}"
        try:
            theirs: Any = _transformers_count(config)
        except Exception as exc:  # any failure to build is reported, not raised
            theirs = f"not built: {type(exc).__name__}: {str(exc)[:60]}"
        if isinstance(ours, int) and isinstance(theirs, int):
            if ours == theirs:
                verdict = "equal"
                equal += 1
            else:
                verdict = f"{ours - theirs:+,} ({(ours - theirs) / theirs:+.3%})"
                differ += 1
        else:
            verdict = "-"
        rows.append((name, f"{ours:,}" if isinstance(ours, int) else ours,
                     f"{theirs:,}" if isinstance(theirs, int) else theirs, verdict))
    width = max((len(r[0]) for r in rows), default=10)
    print(f"{'config':<{width}}  {'gpuarch':>19}  {'transformers':>19}  difference")
    for name, ours, theirs, verdict in rows:
        print(f"{name:<{width}}  {ours:>19}  {theirs:>19}  {verdict}")
    print(f"\n{equal} equal, {differ} different, {len(rows) - equal - differ} not compared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
