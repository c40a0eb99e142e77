"""Plain-text tables and number formatting for the terminal."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["fmt", "table"]


def fmt(value: float | str | None, ratio: bool = False) -> str:
    """A number shown with about three significant digits; ``-`` for missing."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if ratio:
        return f"{value:.2f}x"
    a = abs(value)
    if a == 0:
        return "0"
    if a >= 1000 or (float(value).is_integer() and a >= 1):
        return f"{value:,.0f}"
    if a >= 100:
        return f"{value:.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 0.01:
        return f"{value:.3g}"
    return f"{value:.2e}"


def fmt_seconds(value: float) -> str:
    """A duration with the unit that keeps it readable: seconds from 1 s, milliseconds from
    1 ms, microseconds from 1 us, nanoseconds below (``fmt``'s digits; no exponent down to
    0.01 ns)."""
    a = abs(value)
    if a == 0 or a >= 1:
        return f"{fmt(value)} s"
    for scale, unit in ((1e-3, "ms"), (1e-6, "us")):
        if a >= scale:
            return f"{fmt(value / scale)} {unit}"
    return f"{fmt(value * 1e9)} ns"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] = ()
          ) -> str:
    """Columns padded to their widest cell; ``right[i]`` right-aligns column ``i``."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    align = list(right) + [False] * (len(headers) - len(right))

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, align,
                                                                    strict=True)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])
