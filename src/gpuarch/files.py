"""Writing output files whole or not at all: into a temporary file beside the target, then
renamed over it, so an interrupted or failed write never leaves half a file; and reading an
input file's text with an error that names the flag that gave it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError

__all__ = ["check_output_path", "read_input_text", "write_whole", "write_whole_text"]


def check_output_path(path: Path, flag: str, suffixes: tuple[str, ...] = ()) -> Path:
    """The folder ``path`` will be written into, or a usage error naming ``flag``: a suffix
    not in ``suffixes`` (when given), a folder that does not exist or cannot be written, or
    a path that is a folder. Checked before any long work, so nothing runs in vain."""
    if suffixes and path.suffix.lower() not in suffixes:
        raise GpuarchError(f"{flag}: {str(path)!r} must end in {' or '.join(suffixes)}")
    try:
        target = path.resolve()
        folder = target.parent
        if not folder.is_dir():
            raise GpuarchError(f"{flag}: folder {str(path.parent)!r} does not exist")
        if target.is_dir():
            raise GpuarchError(f"{flag}: {str(path)!r} is a folder, not a file")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise GpuarchError(f"{flag}: folder {str(path.parent)!r} cannot be written")
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte, a loop of links
        reason = getattr(exc, "strerror", None) or str(exc)
        raise GpuarchError(f"{flag}: cannot write {str(path)!r}: {reason}") from None
    return folder


def read_input_text(path: Path, flag: str, errors: str = "strict") -> str:
    """The UTF-8 text of the file ``flag`` named, or a usage error naming the flag and the
    path: not there, a folder, not text (with ``errors`` "strict"), or unreadable (a name
    too long, no permission)."""
    try:
        return path.read_text(encoding="utf-8", errors=errors)
    except FileNotFoundError:
        raise GpuarchError(f"{flag}: no such file: {path}") from None
    except IsADirectoryError:
        raise GpuarchError(f"{flag}: {path} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise GpuarchError(f"{flag}: {path.name} is not text") from None
    except OSError as exc:
        raise GpuarchError(f"{flag}: cannot read {path}: {exc.strerror}") from None


def write_whole(path: Path, write: Callable[[str], Any]) -> None:
    """Call ``write(temporary_path)``, then move the result to ``path`` (mode 0644). A
    file system refusal (permissions, a full disk) is an error naming the path, with
    nothing left behind."""
    target = path.resolve()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gpuarch-", suffix=target.suffix,
                                   dir=target.parent)
    except OSError as exc:
        raise GpuarchError(f"cannot write {str(path)!r}: {exc.strerror}") from None
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        raise GpuarchError(f"cannot write {str(path)!r}: {exc.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_whole_text(path: Path, text: str) -> None:
    """``text`` as UTF-8 into ``path``, whole or not at all."""
    write_whole(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
