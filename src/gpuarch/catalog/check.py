"""``python -m gpuarch.catalog.check``: load the catalog and print its consistency checks.

Exit status 0 when every check passes or is a documented exception, 1 on a mismatch,
2 when a data file breaks the schema.
"""

from __future__ import annotations

import sys

from gpuarch.catalog.consistency import Status, check_catalog
from gpuarch.catalog.loader import load_catalog
from gpuarch.errors import GpuarchError


def main(argv: list[str] | None = None) -> int:
    verbose = "-v" in (argv if argv is not None else sys.argv[1:])
    try:
        catalog = load_catalog()
    except GpuarchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    findings = check_catalog(catalog)
    counts = {s: sum(f.status is s for f in findings) for s in Status}
    for f in findings:
        if verbose or f.status is Status.MISMATCH:
            print(f"{f.status.value:>20}  {f.product:<24} {f.check:<22} {f.detail}")
    print(f"{len(catalog.architectures)} architectures, {len(catalog.chips)} chips, "
          f"{len(catalog.products)} products, {len(catalog.sources)} sources; checks: "
          + ", ".join(f"{n} {s.value}" for s, n in counts.items()))
    return 1 if counts[Status.MISMATCH] else 0


if __name__ == "__main__":
    raise SystemExit(main())
