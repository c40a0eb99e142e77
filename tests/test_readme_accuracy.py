"""README.md's accuracy tables are the validations as they stand (scripts/readme_accuracy.py
writes them), and the tables count what they say they count."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuarch.catalog import load_catalog
from gpuarch.errors import GpuarchError
from gpuarch.validation.accuracy_tables import (
    SERVING_FAMILIES,
    TRAINING_FAMILIES,
    TaskAccuracy,
    accuracy_rows,
    render_markdown,
    sync_readme,
    task_tables,
)
from gpuarch.validation.inference import load_inference_points
from gpuarch.validation.training import load_training_points

CATALOG = load_catalog()
README = Path(__file__).parents[1] / "README.md"


def test_readme_accuracy_tables_are_current() -> None:
    """Every figure between README.md's accuracy markers, and the counts its command list
    quotes, is what the validations give today; run scripts/readme_accuracy.py after a
    change to the model or the data."""
    text = README.read_text(encoding="utf-8")
    assert sync_readme(text, task_tables(CATALOG)) == text, \
        "README.md's accuracy tables are stale: run python scripts/readme_accuracy.py"


@pytest.mark.parametrize(("points", "families"), [
    (load_training_points, TRAINING_FAMILIES), (load_inference_points, SERVING_FAMILIES)])
def test_every_source_has_a_family(points, families) -> None:  # type: ignore[no-untyped-def]
    """A new source must be placed in a family of the tables, not silently dropped."""
    for point in points():
        matches = [label for label, prefixes in families if point.source.startswith(prefixes)]
        assert len(matches) == 1, (point.id, point.source, matches)


@dataclass(frozen=True)
class _Row:
    id: str
    source: str
    error: float
    out_of_sample: bool
    metric: str = "output_tokens_per_s"


def test_rows_count_the_bound_as_within() -> None:
    """Groups hold what their labels say; a point exactly at the bound is within it, one
    past it beyond; the beyond list is worst first with each point's signed error."""
    points = {p.id: p for p in load_training_points()}
    dense = [p for p in points.values() if p.source == "megatron-sc21"][:2]
    moe = next(p for p in points.values() if p.id.startswith("mbridge2604-gb200-gpt-oss"))
    rows = [_Row(dense[0].id, dense[0].source, 0.20, False),
            _Row(dense[1].id, dense[1].source, -0.30, True),
            _Row(moe.id, moe.source, 0.10, True)]
    table = {r.label: r for r in accuracy_rows("training", rows, points.values(), CATALOG)}
    assert table["all runs"].count == 3
    assert table["all runs"].beyond == 1
    assert table["all runs"].share_within == pytest.approx(2 / 3)
    assert table["all runs"].mean_abs_error == pytest.approx(0.20)
    assert table["all runs"].median_abs_error == pytest.approx(0.20)
    assert table["fitted on (in sample)"].count == 1
    assert table["added after the fit (out of sample)"].count == 2
    assert table["dense models"].count == 2
    assert table["fine-grained MoE models"].count == 1
    assert table["on Ampere"].count == 2 and table["on Blackwell"].count == 1
    assert "on Hopper" not in table  # empty groups are left out
    text = render_markdown("training", list(table.values()), rows)
    assert f"Beyond 20% (1, worst first): `{dense[1].id}` -30.0%." in text


def test_sync_readme_needs_its_markers() -> None:
    """A README without the markers or the quoted counts is an error, not a silent no-op."""
    tables = {"training": TaskAccuracy("| t |", 3)}
    good = ("x\n<!-- accuracy:training -->\nold\n<!-- /accuracy:training -->\n"
            "gpuarch validate training # predicted vs 2 published measurements\n")
    out = sync_readme(good, tables)
    assert "<!-- accuracy:training -->\n| t |\n<!-- /accuracy:training -->" in out
    assert "predicted vs 3 published measurements" in out
    with pytest.raises(ValueError, match="accuracy:training"):
        sync_readme("no markers here", tables)
    with pytest.raises(ValueError, match="training count"):
        sync_readme(good.replace("predicted vs 2", "vs 2"), tables)


def test_an_unplaced_source_is_an_error() -> None:
    """accuracy_rows refuses a row whose source no family claims."""
    point = load_training_points()[0]
    with pytest.raises((ValueError, GpuarchError), match="no family"):
        accuracy_rows("training", [_Row(point.id, "someone-else", 0.1, True)],
                      [point], CATALOG)
