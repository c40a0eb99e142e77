#!/usr/bin/env bash
# Run the probe with benchmarks, the doctor, the FP8 check, the per-operator check and the
# GPU-marked tests on a real GPU; results go to DIR.
#   bash scripts/gpu_check.sh DIR
# Needs: python3 with torch and nvidia-ml-py (the lent H200 machine has both), this repo.
set -uo pipefail
out=${1:?usage: scripts/gpu_check.sh OUTPUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 -m gpuarch probe --json > "$out/probe.json" 2> "$out/probe.err"
python3 -m gpuarch probe --bench --save "$out/calibration.json" > "$out/bench.txt" 2>&1
python3 -m gpuarch doctor > "$out/doctor.txt" 2>&1
python3 scripts/device_fp8_check.py --out "$out/fp8_check.json" > "$out/fp8_check.txt" 2>&1
python3 -m gpuarch probe --ops "$out/op_check.json" > "$out/op_check.txt" 2>&1
n=$(python3 -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [ "${n:-0}" -gt 1 ]; then
  torchrun --nproc-per-node "$n" -m gpuarch probe --bench --quick > "$out/collectives.txt" 2>&1
fi
python3 -m pytest -q -m gpu tests/test_gpu.py > "$out/gpu_tests.txt" 2>&1
echo "results in $out"; cat "$out/bench.txt"; tail -3 "$out/gpu_tests.txt"
