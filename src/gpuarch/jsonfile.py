"""Reading a user's JSON file with errors that name the file (and the flag that gave it).

One reader for every JSON input: a Hugging Face ``config.json`` and the files beside it, a
calibration file (``--calibration``), an op check (``validate ops --file``), a recorded
machine (``--fake``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError

__all__ = ["read_json", "read_json_object", "read_schema_file"]


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
    except UnicodeDecodeError as exc:  # a binary file, or text in another encoding
        raise GpuarchError(f"{where}{path} is not UTF-8 text (byte {exc.start})" if flag
                           else f"{path}: not UTF-8 text (byte {exc.start})") from None


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file holding one object (config.json and the files beside it); raises
    :class:`GpuarchError` naming the file when it cannot be read or is not one."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise GpuarchError(f"{path}: expected a JSON object")
    return doc


def read_schema_file(path: Path, flag: str, schema: str, version: int,
                     what: str) -> dict[str, Any]:
    """A gpuarch JSON file of ``schema`` at ``version`` (a calibration, an op check); raises
    :class:`GpuarchError` naming the flag, the file and what is wrong."""
    doc = read_json(path, flag)
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        raise GpuarchError(f"{flag}: {path} is not a gpuarch {what} file (schema {schema!r})")
    if doc.get("version") != version:
        raise GpuarchError(f"{flag}: {path}: version {doc.get('version')!r} is not "
                           f"supported (expected {version})")
    return doc
