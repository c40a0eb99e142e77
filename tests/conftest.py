"""Shared fixtures: a tiny valid catalog that tests can break one key at a time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

MINI_ARCH = """
[[source]]
id = "mini-wp"
title = "Mini whitepaper"
publisher = "NVIDIA"
kind = "whitepaper"
year = 2020
url = "https://example.invalid/mini.pdf"

[architecture]
key = "mini"
name = "Mini"
order = 1
year = 2020
compute_capabilities = ["8.0"]
summary = "A made-up architecture for tests."
source = "mini-wp"

[architecture.features]
tensor_cores = "1st generation"

[[chip]]
key = "MX100"
compute_capability = "8.0"
process = "TSMC 7 nm"
sparsity_2to4 = true
source = "mini-wp"

[chip.sm]
fp32_lanes = 64
tensor_cores = 4

[chip.sm_ops_per_clock]
fp32 = 128
tensor_fp16 = 2048

[[product]]
key = "mini-sxm"
name = "Mini SXM 80GB"
aliases = ["mini", "mini 80gb"]
chip = "MX100"
tier = "datacenter"
form_factor = "SXM4"
launch_date = "2020-05"
sms = 100
boost_clock_mhz = 1000
memory_type = "HBM2e"
memory_gib = 80
memory_bus_bits = 5120
memory_data_rate_gbps = 3.2
memory_bandwidth_gb_s = 2048
tdp_w = 400
source = "mini-wp"
field_sources = { tdp_w = "mini-wp" }

[product.dense_tflops]
fp32 = 12.8
tensor_fp16 = 204.8

[product.sparse_tflops]
tensor_fp16 = 409.6

[[product]]
key = "mini-pcie"
name = "Mini PCIe 40GB"
aliases = ["mini pcie"]
chip = "MX100"
tier = "datacenter"
form_factor = "PCIe"
launch_date = "2020-06"
sms = 100
boost_clock_mhz = 900
memory_type = "HBM2"
memory_gib = 40
memory_bandwidth_gb_s = 1555
pcie_generation = 4
tdp_w = 250
source = "mini-wp"

[product.dense_tflops]
fp32 = 11.52
"""

MINI_FEATURES = """
[[feature]]
key = "tensor_cores"
name = "Tensor Cores"
explanation = "Matrix units."
source = "mini-wp"
"""

MINI_INTERCONNECTS = """
[[source]]
id = "mini-pcisig"
title = "PCIe spec"
publisher = "PCI-SIG"
kind = "spec"
year = 2017
url = "https://example.invalid/pcie"

[[pcie]]
generation = 4
transfer_rate_gt_s = 16
encoding = "128b/130b"
x16_bandwidth_gb_s = 31.5
source = "mini-pcisig"
"""

MiniCatalog = Callable[..., Path]


@pytest.fixture
def mini_catalog(tmp_path: Path) -> MiniCatalog:
    """Write the tiny catalog into a fresh folder, after optional text replacements."""

    def make(replace: dict[str, str] | None = None, extra: str = "") -> Path:
        text = MINI_ARCH
        for old, new in (replace or {}).items():
            assert old in text, f"fixture text has no {old!r}"
            text = text.replace(old, new, 1)
        folder = tmp_path / f"cat{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "mini.toml").write_text(text + extra)
        (folder / "features.toml").write_text(MINI_FEATURES)
        (folder / "interconnects.toml").write_text(MINI_INTERCONNECTS)
        return folder

    return make
