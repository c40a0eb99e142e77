"""Name resolution: case-insensitive, separator-insensitive, with aliases.

``"h100"``, ``"H100 SXM"`` and ``"h100-sxm5-80gb"`` all find the same product. A name that
matches several entries raises :class:`AmbiguousNameError` listing them; one that matches
none raises :class:`UnknownNameError` with "did you mean" suggestions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from gpuarch.errors import AmbiguousNameError, GpuarchError, UnknownNameError, did_you_mean

__all__ = ["PRODUCT_NOISE", "Resolver", "compact", "tokens"]

T = TypeVar("T")

# Brand words that carry no identity in product names ("NVIDIA GeForce RTX 4090" == "rtx 4090").
PRODUCT_NOISE = frozenset({"nvidia", "geforce", "tesla"})
_SPLIT = re.compile(r"[^0-9a-z.]+")


def tokens(name: str, noise: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """Lowercase tokens of a name, without separators and without ``noise`` words."""
    return tuple(t for t in _SPLIT.split(name.lower()) if t and t not in noise)


def compact(name: str, noise: frozenset[str] = frozenset()) -> str:
    """The name reduced to lowercase letters and digits, ``noise`` words removed."""
    return "".join(tokens(name, noise)).replace(".", "")


@dataclass(frozen=True)
class _Entry(Generic[T]):
    label: str
    item: T
    compacts: frozenset[str]
    tokens: frozenset[str]
    prefixes: frozenset[str]  # leading tokens of each name, run together ("h100sxm5")


class Resolver(Generic[T]):
    """Resolve user-typed names to items of one kind (products, systems, architectures)."""

    def __init__(self, kind: str, noise: frozenset[str] = frozenset({"nvidia"})) -> None:
        self.kind = kind
        self.noise = noise
        self._entries: list[_Entry[T]] = []
        self._exact: dict[str, _Entry[T]] = {}
        self._names: list[str] = []

    def add(self, label: str, item: T, names: Iterable[str]) -> None:
        """Register ``item`` (shown as ``label``) under all ``names``; names must be unique."""
        names = [label, *names]
        entry = _Entry(
            label=label,
            item=item,
            compacts=frozenset(c for n in names if (c := compact(n, self.noise))),
            tokens=frozenset(t for n in names for t in tokens(n, self.noise)),
            prefixes=frozenset(
                "".join(toks[:i]).replace(".", "")
                for n in names
                for toks in [tokens(n, self.noise)]
                for i in range(1, len(toks) + 1)
            ),
        )
        for c in entry.compacts:
            other = self._exact.get(c)
            if other is not None and other.label != label:
                raise GpuarchError(
                    f"{self.kind} name {c!r} is claimed by both {other.label!r} and {label!r}"
                )
            self._exact[c] = entry
        self._entries.append(entry)
        self._names.extend(names)

    def exact(self, name: str) -> T | None:
        """The item registered under exactly ``name`` (case and separators ignored), if any."""
        entry = self._exact.get(compact(name, self.noise))
        return entry.item if entry is not None else None

    def resolve(self, name: str) -> T:
        """The one item ``name`` means; raises if none or several."""
        query = compact(name, self.noise)
        if not query:
            raise UnknownNameError(self.kind, name, [])
        exact = self._exact.get(query)
        if exact is not None:
            return exact.item
        wanted = set(tokens(name, self.noise))
        found = [
            e for e in self._entries
            if wanted <= e.tokens or query in e.prefixes
        ]
        if len(found) == 1:
            return found[0].item
        if found:
            raise AmbiguousNameError(self.kind, name, [e.label for e in found])
        raise UnknownNameError(self.kind, name, did_you_mean(name, self._names))

    def labels(self) -> list[str]:
        """Every registered label, in registration order."""
        return [e.label for e in self._entries]
