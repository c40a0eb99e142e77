"""Helpers for tests that read a config.json written from a dict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuarch.workloads.hf import shape_from_hf_config
from gpuarch.workloads.shape import TransformerShape


def read_config(tmp_path: Path, cfg: dict[str, Any]) -> TransformerShape:
    """The shape of ``cfg`` written as ``tmp_path``/config.json and read back."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return shape_from_hf_config(path)
