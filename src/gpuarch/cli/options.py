"""Turning flag strings into enums, once, at the edge (with "did you mean")."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

from gpuarch.errors import suggestion

__all__ = ["at_least_one", "enum_list", "enum_value", "lazy_enum_value", "name_list",
           "non_negative", "number_or_word", "positive_number"]

E = TypeVar("E", bound=Enum)


def _key(member: Enum) -> str:
    return str(getattr(member, "key", member.value))


def enum_value(cls: type[E], flag: str) -> Callable[[str], E]:
    """An argparse ``type=`` that parses one member of ``cls`` by its key."""
    members = {_key(m): m for m in cls}

    def parse(text: str) -> E:
        if text in members:
            return members[text]
        extra = suggestion(text, members)
        raise argparse.ArgumentTypeError(
            f"{flag}: unknown value {text!r}{extra} (choose from {', '.join(members)})")

    parse.__name__ = flag
    return parse


def enum_list(cls: type[E], flag: str) -> Callable[[str], list[E]]:
    """An argparse ``type=`` for a comma-separated list of members of ``cls``."""
    one = enum_value(cls, flag)

    def parse(text: str) -> list[E]:
        return [one(part.strip()) for part in text.split(",") if part.strip()]

    parse.__name__ = flag
    return parse


def name_list(text: str) -> tuple[str, ...]:
    """An argparse ``type=`` for a comma-separated list of names (blanks dropped); the library
    checks the names, with "did you mean"."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def lazy_enum_value(path: str, flag: str) -> Callable[[str], Enum]:
    """Like :func:`enum_value` for ``"package.module:EnumName"``, imported only when the flag
    is given (keeps start-up of unrelated commands fast)."""

    def parse(text: str) -> Enum:
        import importlib

        module, _, name = path.partition(":")
        cls: type[Enum] = getattr(importlib.import_module(module), name)
        member: Enum = enum_value(cls, flag)(text)
        return member

    parse.__name__ = flag
    return parse


N = TypeVar("N", int, float)


def _checked(flag: str, convert: Callable[[str], N], ok: Callable[[N], bool],
             expected: str) -> Callable[[str], N]:
    """An argparse ``type=`` converting with ``convert`` and refusing what ``ok`` rejects,
    errors naming ``flag`` and what it expects (values shown as converted)."""

    def parse(text: str) -> N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag}: expected {expected}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{flag}: expected {expected}, got {value}")
        return value

    parse.__name__ = flag
    return parse


def number_or_word(flag: str, word: str) -> Callable[[str], float | str]:
    """An argparse ``type=`` for a number or one named value (``word``), the word
    returned as it is for the command to resolve; anything else is refused naming the flag
    (with "did you mean" for a misspelt word)."""

    def parse(text: str) -> float | str:
        if text == word:
            return word
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag}: expected a number or {word!r}, got {text!r}"
                f"{suggestion(text, (word,))}") from None
        return value  # its range is the command's to check

    parse.__name__ = flag
    return parse


def _integer_from(flag: str, low: int) -> Callable[[str], int]:
    return _checked(flag, int, lambda v: v >= low, f"an integer >= {low}")


def integer_between(flag: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type=`` for an integer from ``low`` to ``high``."""
    return _checked(flag, int, lambda v: low <= v <= high,
                    f"an integer from {low} to {high}")


def at_least_one(flag: str) -> Callable[[str], int]:
    """An argparse ``type=`` for a count that must be given as >= 1 when the flag is used (its
    unset default, 0, means "none" to the library, so an explicit 0 is refused, not ignored)."""
    return _integer_from(flag, 1)


def non_negative(flag: str) -> Callable[[str], int]:
    """An argparse ``type=`` for an integer >= 0 (a random seed, a count of blocks)."""
    return _integer_from(flag, 0)


def positive_number(flag: str) -> Callable[[str], float]:
    """An argparse ``type=`` for a quantity that must be a finite number > 0 (a rate, a
    price, a cap): ``nan``, ``inf``, zero and negatives are refused by name."""
    return _checked(flag, float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0")


def non_negative_number(flag: str) -> Callable[[str], float]:
    """An argparse ``type=`` for a finite number >= 0 (a time that may be nothing)."""
    return _checked(flag, float, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0")


def number_from(flag: str, low: float, below: float) -> Callable[[str], float]:
    """An argparse ``type=`` for a finite number from ``low`` and below ``below``."""
    return _checked(flag, float, lambda v: math.isfinite(v) and low <= v < below,
                    f"a number from {low:g} and below {below:g}")


def add_facility_flags(p: argparse.ArgumentParser) -> None:
    """--node-overhead and --pue: the node and data centre around the GPUs, for energy (and
    an advisor's power cap); ``facility_of`` reads them."""
    p.add_argument("--node-overhead", type=number_from("--node-overhead", 0, 10),
                   metavar="FRACTION",
                   help="the node's power beyond its GPUs, as a fraction of theirs (default "
                        "0.35; the metered runs of 'gpuarch validate power' imply about 0.2 "
                        "for a water-cooled 8 x B200 node, 0.55 for air-cooled 8 x H100s)")
    p.add_argument("--pue", type=number_from("--pue", 1, 10), metavar="X",
                   help="the data centre's power usage effectiveness: facility power over IT "
                        "power (default 1.25)")


def facility_of(args: argparse.Namespace) -> Any:
    """The ``estimate.energy.Facility`` of --node-overhead and --pue (defaults where not
    given)."""
    from gpuarch.estimate.energy import DEFAULT_FACILITY, Facility

    overhead = getattr(args, "node_overhead", None)
    pue = getattr(args, "pue", None)
    return Facility(DEFAULT_FACILITY.node_overhead if overhead is None else overhead,
                    DEFAULT_FACILITY.pue if pue is None else pue)


_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


def parse_quantity(flag: str) -> Callable[[str], float]:
    """A positive number with an optional K/M/B/T suffix (``1T``, ``300B``, ``2e12``)."""

    def parse(text: str) -> float:
        match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kKmMbBgGtT]?)\s*", text)
        try:
            value = float(match.group(1)) * _SUFFIX[match.group(2).lower()] if match else None
        except ValueError:
            value = None
        if value is None or not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(
                f"{flag}: expected a positive number such as 1e12 or 1T, got {text!r}")
        return value

    return parse


def size_list(flag: str) -> Callable[[str], tuple[int, ...]]:
    """An argparse ``type=`` for comma-separated sizes >= 1 (``1,2,4,8,16``), sorted, each
    once."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            sizes = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            sizes = []
        if not sizes or min(sizes) < 1:
            raise argparse.ArgumentTypeError(
                f"{flag}: expected comma-separated integers >= 1 such as 1,2,4,8, got "
                f"{text!r}")
        return tuple(sorted(set(sizes)))

    parse.__name__ = flag
    return parse


def check_plot_flag(args: argparse.Namespace) -> None:
    """--plot given a path no plot can be written to: a usage error naming --plot, raised
    before any long work (report.plot, imported only when --plot is given)."""
    if args.plot is not None:
        from gpuarch.report.plot import check_plot_path

        check_plot_path(args.plot)
