"""Reference GPU-hour prices (``data/prices.toml``): each with its provider, offer, source
and date; overridable per GPU on the command line or by a user file of the same format."""

from __future__ import annotations

import statistics
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuarch.errors import GpuarchError, check_choice, is_positive_number

__all__ = ["PRICES_FILE", "PRICE_KINDS", "PriceBook", "load_prices"]

PRICES_FILE = Path(__file__).with_name("data") / "prices.toml"


@dataclass(frozen=True)
class PriceBook:
    """Prices per GPU product key, USD per GPU-hour."""

    listed: dict[str, list[dict[str, Any]]]  # product key -> price records
    overrides: dict[str, float] = field(default_factory=dict)
    kind: str = "on-demand"

    def price(self, gpu: str) -> float | None:
        """The override if given, else the median listed price of ``kind`` for ``gpu``."""
        if gpu in self.overrides:
            return self.overrides[gpu]
        values = [float(r["usd_per_gpu_hour"]) for r in self.listed.get(gpu, [])
                  if r.get("kind", "on-demand") == self.kind]
        return statistics.median(values) if values else None

    def describe(self) -> dict[str, Any]:
        """For the result's assumptions: which price each GPU got, and from where."""
        out: dict[str, Any] = {}
        for gpu in sorted(set(self.listed) | set(self.overrides)):
            if gpu in self.overrides:
                out[gpu] = {"usd_per_gpu_hour": self.overrides[gpu], "from": "override"}
                continue
            rows = [r for r in self.listed[gpu] if r.get("kind", "on-demand") == self.kind]
            if rows:
                out[gpu] = {"usd_per_gpu_hour": self.price(gpu),
                            "from": f"median of {len(rows)} {self.kind} price(s): "
                                    + "; ".join(f"{r.get('provider')} {r.get('date', '')}"
                                                for r in rows)}
        return out


def load_prices(path: Path = PRICES_FILE, overrides: dict[str, float] | None = None,
                extra: Path | None = None) -> PriceBook:
    """The built-in price list, a user's file on top (``extra``), then overrides."""
    listed: dict[str, list[dict[str, Any]]] = {}
    for p in [path, *([extra] if extra else [])]:
        try:
            raw = tomllib.loads(p.read_text())
        except OSError as exc:
            raise GpuarchError(f"--prices: cannot read {p} ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            raise GpuarchError(f"--prices: {p} is not valid TOML ({exc})") from None
        except UnicodeDecodeError as exc:  # a binary file, or text in another encoding
            raise GpuarchError(f"--prices: {p} is not UTF-8 text (byte {exc.start})") from None
        sources = {s["id"]: s for s in _tables(raw, "source", p) if "id" in s}
        for i, row in enumerate(_tables(raw, "price", p)):
            for key in ("gpu", "usd_per_gpu_hour"):
                if key not in row:
                    raise GpuarchError(f"{p.name}: price[{i}] lacks {key!r}")
            gpu = _product_key(row["gpu"], f"{p.name}: price[{i}]: gpu")
            usd = row["usd_per_gpu_hour"]
            if not is_positive_number(usd):
                raise GpuarchError(f"{p.name}: price[{i}]: usd_per_gpu_hour = {usd!r}: "
                                   "expected a price above zero")
            check_choice(f"{p.name}: price[{i}]: kind", row.get("kind", "on-demand"),
                         PRICE_KINDS)
            src = sources.get(row.get("source", ""), {})
            listed.setdefault(gpu, []).append(
                {**row, "gpu": gpu, "date": row.get("date", src.get("date", ""))})
    return PriceBook(listed, dict(overrides or {}))


PRICE_KINDS = ("on-demand", "community", "spot", "reserved-1y", "reserved-3y")
"""How a price is sold (data/prices.toml's header): list price, RunPod's community cloud,
interruptible, or a one- or three-year commitment. The searches take on-demand prices."""


def _tables(raw: dict[str, Any], name: str, path: Path) -> list[dict[str, Any]]:
    """A price file's ``[[name]]`` tables; anything else under that name is an error."""
    rows = raw.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise GpuarchError(f"{path.name}: {name}: expected [[{name}]] tables")
    return rows


def _product_key(name: Any, where: str) -> str:
    """The catalog key of a price's GPU (a name or alias, as the other flags take), so that
    a user's 'h100' prices the H100 SXM and a misspelt name is refused, not ignored."""
    from gpuarch.catalog.loader import load_catalog

    if not isinstance(name, str):
        raise GpuarchError(f"{where} = {name!r}: expected a GPU name")
    try:
        return load_catalog().product(name).key
    except GpuarchError as exc:
        raise GpuarchError(f"{where}: {exc}") from None
