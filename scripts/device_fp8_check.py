"""Compare the numerics lab's FP8 matmul emulation with torch's FP8 scaled matmul.

On a lent Hopper (or newer) GPU this runs torch._scaled_mm on the Tensor Cores; elsewhere it
runs torch's CPU implementation, so the script can be tested anywhere torch==2.13.0 is
installed. For each shape and distribution, both sides quantize A and B to E4M3 with
per-tensor current scaling (the same scales), multiply with FP32 output, and are compared
with each other and with an FP64 reference. Results go to a JSON file (default:
$OUT/fp8_check.json when OUT is set, else ./fp8_check.json).

    python scripts/device_fp8_check.py [--sizes 256,1024,4096] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from gpuarch.numerics import Distribution, NumberFormat, Recipe, make_operands
from gpuarch.numerics.matmul import compare, emulate_matmul
from gpuarch.numerics.recipes import scale_from_amax


def run(sizes: list[int]) -> dict[str, object]:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    fmt = NumberFormat.FP8_E4M3
    rows = []
    for n in sizes:
        for dist in (Distribution.NORMAL, Distribution.OUTLIERS):
            a, b = make_operands(n, n, n, dist, seed=0)
            ours = emulate_matmul(a, b, fmt, Recipe.CURRENT)
            sa = float(scale_from_amax(np.max(np.abs(a)), fmt))
            sb = float(scale_from_amax(np.max(np.abs(b)), fmt))
            ta = torch.from_numpy(a * sa).to(device, torch.float32).to(torch.float8_e4m3fn)
            tb = torch.from_numpy(b * sb).to(device, torch.float32).to(torch.float8_e4m3fn)
            tb = tb.t().contiguous().t()  # column-major B, as _scaled_mm requires
            inv_a = torch.tensor(1.0 / sa, device=device)
            inv_b = torch.tensor(1.0 / sb, device=device)
            hw = torch._scaled_mm(ta, tb, scale_a=inv_a, scale_b=inv_b,
                                  out_dtype=torch.float32).cpu().double().numpy()
            reference = a @ b
            emulated = (fmt.cast(a * sa) / sa).astype(np.float32) @ \
                (fmt.cast(b * sb) / sb).astype(np.float32)
            rows.append({
                "n": n, "distribution": dist.value,
                "emulation_vs_fp64": compare(emulated.astype(np.float64),
                                             reference).relative_error,
                "torch_vs_fp64": compare(hw, reference).relative_error,
                "emulation_vs_torch": compare(emulated.astype(np.float64), hw).relative_error,
                "emulation_sqnr_db": ours.error.sqnr_db,
                "torch_sqnr_db": compare(hw, reference).sqnr_db,
            })
    return {"device": device, "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name() if device == "cuda" else None, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="256,1024,4096")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or Path(os.environ.get("OUT", ".")) / "fp8_check.json"
    result = run([int(s) for s in args.sizes.split(",")])
    out.write_text(json.dumps(result, indent=2))
    for r in result["rows"]:  # type: ignore[attr-defined]
        print(f"{result['device']} n={r['n']:5} {r['distribution']:9} emulation vs torch "
              f"{r['emulation_vs_torch']:.2e}; vs FP64: emulation {r['emulation_vs_fp64']:.4f},"
              f" torch {r['torch_vs_fp64']:.4f}")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
