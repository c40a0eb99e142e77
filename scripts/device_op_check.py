"""Run the per-operator check (gpuarch.probe.opcheck) and write its file; tiny shapes on a
machine without CUDA, so it can be tested anywhere torch is installed.

    python scripts/device_op_check.py [--gpu h200-sxm-141gb] [--quick] [--out FILE]

On a GPU machine with gpuarch installed, `gpuarch probe --ops FILE` does the same for the
GPU the probe matched. `gpuarch validate ops --file FILE` reads the file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpuarch.probe.opcheck import run_op_check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", default="h200-sxm-141gb", help="catalog product to model")
    parser.add_argument("--quick", action="store_true", help="tiny shapes (a smoke run)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or Path(os.environ.get("OUT", ".")) / "op_check.json"
    result = run_op_check(args.gpu, args.quick)
    out.write_text(json.dumps(result, indent=2))
    for r in result["rows"]:
        if "error" in r:
            print(f"{r['kind']:18} {r.get('label', ''):40} ERROR {r['error']}")
            continue
        extra = f"{r['measured_tflops']:8.1f} TFLOP/s" if "measured_tflops" in r else ""
        if "measured_tb_s" in r:
            extra += f" {r['measured_tb_s']:6.2f} TB/s"
        model = (f"model {r['model_us']:10.1f} us  model/measured "
                 f"{r['model_over_measured']:5.2f}" if "model_us" in r else " " * 45)
        print(f"{r['kind']:18} {r['label']:40} measured {r['measured_us']:10.1f} us  {model}"
              f"  {extra}")
    for kind, s in result["summary"].items():
        print(f"{kind:18} n={s['n']:2} mean |model/measured - 1| = {s['mean_abs_error']:.1%}, "
              f"median ratio {s['median_ratio']:.2f}")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
