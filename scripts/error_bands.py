"""Write the model's error bands (src/gpuarch/validation/data/error_bands.json).

Runs the whole training and serving validation with the shipped parameters, groups the
signed throughput errors by regime (task / model kind / GPU architecture, then broader) and
writes each regime's figure count, median and 10th-90th percentile error (and every figure
with its setup, for the published runs an estimate lists as nearest), then rewrites the
rows of the band tables that docs/performance-model.md and README.md quote. Run it after any
change to the model or the validation data; tests/test_error_bands.py fails until then.

    python scripts/error_bands.py          # write the file and the tables, print the table
    python scripts/error_bands.py --check  # print only; exit 1 if the file is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuarch.catalog import load_catalog
from gpuarch.validation.bands import (
    BANDS_FILE,
    KIND_LABELS,
    bands_from_figures,
    load_bands,
    render_bands,
    write_bands,
)
from gpuarch.validation.nearest import compute_figures, figures_as_json, load_figures

ROOT = Path(__file__).resolve().parents[1]
KINDS = {label: kind for kind, label in KIND_LABELS.items()}  # "coarse MoE" -> "coarse-moe"


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def sync_tables(path: Path, bands: dict) -> int:
    """Rewrite the band rows of a Markdown file (docs: '| training, dense, Hopper | figures |
    out of sample | p10 | median | p90 |'; README: '| dense training, Hopper | figures | p10 |
    median | p90 |') from ``bands``; returns how many rows changed."""
    lines, changed = [], 0
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        label, new = cells[0], None
        if len(cells) == 6 and label.startswith(("training, ", "serving, ")):
            task, kind, arch = (c.strip() for c in label.split(","))
            b = bands[f"{task}/{KINDS[kind]}/{arch.lower()}"]
            new = f"| {label} | {b.figures} | {b.out_of_sample} | "
        elif len(cells) == 5 and (" training, " in label or " serving, " in label):
            what, arch = (c.strip() for c in label.split(","))
            kind, task = what.rsplit(" ", 1)
            b = bands[f"{task}/{KINDS[kind]}/{arch.lower()}"]
            new = f"| {label} | {b.figures} | "
        if new is not None:
            new += f"{_pct(b.p10_error)} | {_pct(b.median_error)} | {_pct(b.p90_error)} |\n"
            changed += new.strip() != line.strip()
            line = new
        lines.append(line)
    path.write_text("".join(lines), encoding="utf-8")
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare with the file instead of writing it")
    args = parser.parse_args()
    computed = compute_figures(load_catalog())
    bands = bands_from_figures(computed)
    figures = figures_as_json(computed)
    print(render_bands(bands))
    if args.check:
        stale = (load_bands(BANDS_FILE) != bands
                 or figures_as_json(load_figures()) != figures)
        print(f"{BANDS_FILE}: {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    write_bands(bands, figures=figures)
    print(f"wrote {BANDS_FILE}")
    for doc in (ROOT / "docs" / "performance-model.md", ROOT / "README.md"):
        print(f"{doc.relative_to(ROOT)}: {sync_tables(doc, bands)} band rows updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
