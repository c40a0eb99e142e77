"""Errors that name the field and the bad value.

Every error a user can cause derives from :class:`GpuarchError`; the CLI turns them into a
one-line message and exit status 2, with no traceback.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Iterable

__all__ = [
    "AmbiguousNameError",
    "CatalogError",
    "GpuarchError",
    "UnknownNameError",
    "check_choice",
    "check_count",
    "check_number",
    "did_you_mean",
    "is_positive_number",
    "suggestion",
]


class GpuarchError(ValueError):
    """Base class of errors caused by input (data files, names, flags)."""


class CatalogError(GpuarchError):
    """A catalog data file breaks the schema; the message names file, table and key."""

    def __init__(self, file: str, where: str, message: str) -> None:
        self.file = file
        self.where = where
        super().__init__(f"{file}: {where}: {message}")


class UnknownNameError(GpuarchError):
    """A name that resolves to nothing; carries close matches."""

    def __init__(self, kind: str, name: str, suggestions: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.suggestions = suggestions
        hint = f"; did you mean {_quote_list(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown {kind} {name!r}{hint}")


class AmbiguousNameError(GpuarchError):
    """A name that matches several entries; carries the candidates."""

    def __init__(self, kind: str, name: str, candidates: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.candidates = candidates
        super().__init__(
            f"{kind} name {name!r} is ambiguous; it matches {_quote_list(candidates)}"
        )


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Close matches of ``word`` among ``choices`` (case-insensitive), best first."""
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(choice.lower(), choice)
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=n, cutoff=0.6)
    return [by_lower[c] for c in close]


def suggestion(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices``, or ``""`` if none is close."""
    close = did_you_mean(word, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_choice(flag: str, value: object, choices: Iterable[str]) -> None:
    """Raise ``--flag: expected one of a, b, got 'x'; did you mean 'y'?`` unless ``value`` is
    one of ``choices``."""
    options = tuple(choices)
    if value not in options:
        raise GpuarchError(f"{flag}: expected one of {', '.join(options)}, got {value!r}"
                           f"{suggestion(str(value), options)}")


def check_names(flag: str, names: Iterable[str], choices: Collection[str]) -> tuple[str, ...]:
    """``names`` as a tuple without repeats, in order; raise ``--flag: unknown module 'x';
    expected some of a, b; did you mean 'y'?`` at the first that is not one of ``choices``."""
    out: list[str] = []
    for name in names:
        if name not in choices:
            raise GpuarchError(f"{flag}: unknown module {name!r}; expected some of "
                               f"{', '.join(choices)}{suggestion(name, choices)}")
        if name not in out:
            out.append(name)
    return tuple(out)


def check_count(flag: str, value: object, *, zero_unset: bool = False) -> None:
    """Raise ``--flag: expected an integer >= N, got x`` unless ``value`` is a non-negative
    int (bools refused). With ``zero_unset`` 0 stands for "not given", so the message asks
    for >= 1 (what a user may give); otherwise 0 is a count like any other."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise GpuarchError(f"{flag}: expected an integer >= {1 if zero_unset else 0}, "
                           f"got {value!r}")


def check_number(flag: str, value: object, minimum: float, what: str = "a number",
                 maximum: float | None = None, note: str = "") -> None:
    """Raise ``flag: expected <what> >= minimum, got x`` (``from minimum to maximum`` with a
    maximum, then `` (note)``) unless ``value`` is a real number (bools refused) in range."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= minimum \
            or (maximum is not None and not value <= maximum):
        bound = f">= {minimum:g}" if maximum is None else f"from {minimum:g} to {maximum:g}"
        raise GpuarchError(f"{flag}: expected {what} {bound}"
                           + (f" ({note})" if note else "") + f", got {value!r}")


def is_positive_number(value: object) -> bool:
    """Whether ``value`` is a real number (bools refused) above zero and finite: what a
    measured figure, a rate or a price must be. The callers word their own messages."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and 0 < value < math.inf)


def _quote_list(items: list[str]) -> str:
    quoted = [repr(i) for i in items]
    if len(quoted) <= 1:
        return "".join(quoted)
    return ", ".join(quoted[:-1]) + " or " + quoted[-1]
