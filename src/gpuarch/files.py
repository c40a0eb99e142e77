"""Writing output files whole or not at all: into a temporary file beside the target, then
renamed over it, so an interrupted or failed write never leaves half a file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["write_whole", "write_whole_text"]


def write_whole(path: Path, write: Callable[[str], Any]) -> None:
    """Call ``write(temporary_path)``, then move the result to ``path`` (mode 0644)."""
    target = path.resolve()
    fd, tmp = tempfile.mkstemp(prefix=".gpuarch-", suffix=target.suffix, dir=target.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_whole_text(path: Path, text: str) -> None:
    """``text`` as UTF-8 into ``path``, whole or not at all."""
    write_whole(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
