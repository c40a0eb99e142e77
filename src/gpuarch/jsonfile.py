"""Reading a user's JSON file with errors that name the file (and the flag that gave it).

One reader for every JSON input: a Hugging Face ``config.json`` and the files beside it, a
calibration file (``--calibration``), a recorded machine (``--fake``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError

__all__ = ["read_json", "read_json_object"]


def read_json(path: Path, flag: str | None = None) -> Any:
    """The parsed contents of ``path``; raises :class:`GpuarchError` naming the file, after
    ``flag`` (e.g. ``--calibration``) when a flag named it."""
    where = f"{flag}: " if flag else ""
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise GpuarchError(f"{where}cannot read {path} ({exc.strerror})" if flag
                           else f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise GpuarchError(f"{where}{path} is not valid JSON ({exc.msg}, line "
                           f"{exc.lineno})" if flag
                           else f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})"
                           ) from None


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding one object (config.json and the files beside it); raises
    :class:`GpuarchError` naming the file when it cannot be read or is not one."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise GpuarchError(f"{path}: expected a JSON object")
    return doc
