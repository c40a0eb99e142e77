"""Write README.md's accuracy tables from the validations as they stand.

Runs the training and serving validations with the shipped parameters and rewrites what
README.md holds between its ``<!-- accuracy:training -->`` and ``<!-- accuracy:serving -->``
markers (the tables of ``gpuarch.validation.accuracy_tables`` and the points beyond each
issue's bound), and the counts its command list quotes. Run it after any change to the model
or the validation data; tests/test_readme_accuracy.py fails until then.

    python scripts/readme_accuracy.py          # rewrite README.md, print what changed
    python scripts/readme_accuracy.py --check  # exit 1 if README.md is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuarch.catalog import load_catalog
from gpuarch.validation.accuracy_tables import sync_readme, task_tables

README = Path(__file__).resolve().parents[1] / "README.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if README.md's tables are stale")
    args = parser.parse_args()
    text = README.read_text(encoding="utf-8")
    new = sync_readme(text, task_tables(load_catalog()))
    if new == text:
        print("README.md's accuracy tables are up to date")
        return 0
    if args.check:
        print("README.md's accuracy tables are stale: run python scripts/readme_accuracy.py",
              file=sys.stderr)
        return 1
    README.write_text(new, encoding="utf-8")
    print("rewrote README.md's accuracy tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
