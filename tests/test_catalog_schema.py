"""The loader accepts a valid catalog and rejects each kind of bad data, naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuarch.catalog import PeakKey, Tier, load_catalog
from gpuarch.errors import CatalogError
from tests.conftest import MiniCatalog


def _load(folder: Path):  # type: ignore[no-untyped-def]
    load_catalog.cache_clear()
    return load_catalog(folder)


def test_valid_mini_catalog_loads_in_si(mini_catalog: MiniCatalog) -> None:
    """Units are converted once, at load: MHz to Hz, GiB to bytes, TFLOPS to FLOP/s."""
    cat = _load(mini_catalog())
    p = cat.product("mini")
    assert p.boost_clock_hz == 1e9
    assert p.memory_bytes == 80 * 2**30
    assert p.memory_bandwidth_bytes_s == 2048e9
    assert p.dense_flops[PeakKey.TENSOR_FP16] == pytest.approx(204.8e12)
    assert p.tier is Tier.DATACENTER
    assert p.architecture == "mini"
    assert p.source_of("tdp_w") == "mini-wp"


@pytest.mark.parametrize(
    ("replace", "extra", "expected"),
    [
        ({"boost_clock_mhz = 1000": "boost_clok_mhz = 1000"}, "",
         r"mini.toml: product\[0\]: unknown key 'boost_clok_mhz'; did you mean 'boost_clock_mhz'"),
        ({'tier = "datacenter"': 'tier = "datacentre"'}, "",
         r"product\[0\].tier: 'datacentre' is not one of .*did you mean 'datacenter'"),
        ({"sms = 100": 'sms = "many"'}, "",
         r"product\[0\].sms: expected a non-negative integer, got 'many'"),
        ({'chip = "MX100"': 'chip = "MX10"'}, "",
         r"product\[0\].chip: chip 'MX10' is not defined in this file; did you mean 'MX100'"),
        ({'source = "mini-wp"\n\n[architecture.features]': 'source = "mini-wq"\n\n'
          '[architecture.features]'}, "",
         r"architecture.source: unknown source id 'mini-wq'; did you mean 'mini-wp'"),
        ({'key = "mini"': 'key = "other"'}, "",
         r"architecture.key: 'other' must equal the file name 'mini'"),
        ({"tensor_fp16 = 204.8": "tensor_fp61 = 204.8"}, "",
         r"dense_tflops: unknown peak key 'tensor_fp61'; did you mean"),
        ({'launch_date = "2020-05"': 'launch_date = "May 2020"'}, "",
         r"launch_date: expected a date YYYY-MM or YYYY-MM-DD"),
        ({'memory_type = "HBM2e"': 'memory_type = "HBM2E"'}, "",
         r"memory_type: 'HBM2E' is not one of .*did you mean 'HBM2e'"),
        ({"tensor_cores = \"1st generation\"": "tensor_corez = \"\""}, "",
         r"architecture.features.tensor_corez: unknown feature 'tensor_corez'"),
        ({}, '\n[product.peak_exceptions]\nfp32 = "odd"\n',
         r"peak_exceptions.fp32: needs a reason in words"),
        ({}, '\n[product.peak_exceptions]\ntensor_fp8 = "a reason in many words"\n',
         r"peak_exceptions.tensor_fp8: names a peak that dense_tflops"),
        ({"field_sources = { tdp_w =": "field_sources = { tdp ="}, "",
         r"field_sources: 'tdp' is not a key of this record; did you mean 'tdp_w'"),
        ({"[[product]]\nkey = \"mini-pcie\"": "[[product]]\nkey = \"mini-sxm\""}, "",
         r"defined more than once: \['mini-sxm'\]"),
        ({"memory_gib = 80": "memory_gib = -80"}, "",
         r"memory_gib: expected a non-negative number, got -80"),
    ],
)
def test_bad_data_is_rejected_with_file_and_key(
    mini_catalog: MiniCatalog, replace: dict[str, str], extra: str, expected: str
) -> None:
    """Each schema violation names the file, the table and the key (and a close match)."""
    with pytest.raises(CatalogError, match=expected):
        _load(mini_catalog(replace, extra))


def test_sparse_cuda_core_peak_is_rejected(mini_catalog: MiniCatalog) -> None:
    """2:4 sparsity doubles Tensor Core peaks only; a sparse FP32 figure is a data error."""
    folder = mini_catalog({"[product.sparse_tflops]\ntensor_fp16 = 409.6":
                           "[product.sparse_tflops]\nfp32 = 25.6"})
    with pytest.raises(CatalogError, match=r"sparse_tflops.fp32: 2:4 sparsity applies"):
        _load(folder)


def test_duplicate_source_id_names_both_files(mini_catalog: MiniCatalog) -> None:
    """A document defined twice is an error that points at the first definition."""
    folder = mini_catalog()
    text = (folder / "features.toml").read_text()
    dup = '[[source]]\nid = "mini-wp"\ntitle = "x"\npublisher = "x"\nkind = "paper"\n' \
          'year = 2020\nurl = "https://example.invalid"\n'
    (folder / "features.toml").write_text(dup + text)
    with pytest.raises(CatalogError, match=r"'mini-wp' is already defined in"):
        _load(folder)


def test_invalid_toml_is_reported(mini_catalog: MiniCatalog) -> None:
    """A syntax error names the file."""
    folder = mini_catalog()
    (folder / "mini.toml").write_text("[architecture\n")
    with pytest.raises(CatalogError, match=r"mini\.toml: -: not valid TOML"):
        _load(folder)


def test_unknown_top_level_table(mini_catalog: MiniCatalog) -> None:
    """Misspelt top-level tables are caught."""
    with pytest.raises(CatalogError, match=r"unknown top-level table 'products'; did you mean"):
        _load(mini_catalog(extra='\n[[products]]\nkey = "x"\n'))


def test_derived_keys_are_rejected_in_data(mini_catalog: MiniCatalog) -> None:
    """dense_tflops_from_sparse is computed by the loader; a data file may not set it."""
    folder = mini_catalog(extra="\n[product.dense_tflops_from_sparse]\nfp32 = 1.0\n")
    with pytest.raises(CatalogError, match="unknown key 'dense_tflops_from_sparse'"):
        _load(folder)


def test_bad_evidence_rule_is_rejected(mini_catalog: MiniCatalog) -> None:
    """A product_evidence rule that names no product key is an error naming the feature."""
    folder = mini_catalog()
    text = (folder / "features.toml").read_text()
    (folder / "features.toml").write_text(text + 'product_evidence = ["field:migs"]\n')
    with pytest.raises(CatalogError, match=r"feature\[0\].product_evidence: 'migs' is not"):
        _load(folder)


def test_dense_is_derived_from_sparse_only_on_sparse_chips(mini_catalog: MiniCatalog) -> None:
    """A sparse-only Tensor peak gives a dense one at half, flagged as such."""
    folder = mini_catalog({"[product.sparse_tflops]\ntensor_fp16 = 409.6":
                           "[product.sparse_tflops]\ntensor_fp16 = 409.6\ntensor_int8 = 800"})
    p = _load(folder).product("mini")
    assert p.peak(PeakKey.TENSOR_INT8) == pytest.approx(400e12)
    assert p.dense_origin(PeakKey.TENSOR_INT8) == "half of sparse"
    folder = mini_catalog({"sparsity_2to4 = true": "sparsity_2to4 = false",
                           "[product.sparse_tflops]\ntensor_fp16 = 409.6": ""})
    assert _load(folder).product("mini").dense_from_sparse == {}
