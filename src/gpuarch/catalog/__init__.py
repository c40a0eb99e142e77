"""The sourced catalog of NVIDIA architectures, chips, products and reference systems.

``load_catalog()`` reads and validates the data files once; look products up by any name or
alias with ``catalog.product("h100")``.
"""

from gpuarch.catalog.consistency import Finding, Status, check_catalog, check_product
from gpuarch.catalog.derived import Derived, best_dense_peak, derive, host_link_bandwidth
from gpuarch.catalog.evolution import EvolutionRow, Metric, evolution, flagship
from gpuarch.catalog.loader import DATA_DIR, Catalog, load_catalog
from gpuarch.catalog.model import (
    Architecture,
    Chip,
    Feature,
    NvlinkGeneration,
    PcieGeneration,
    Product,
    SMResources,
    Source,
    SourceKind,
    System,
    Tier,
)
from gpuarch.catalog.peaks import PeakKey
from gpuarch.catalog.queries import (
    Comparison,
    ComparisonRow,
    FeatureMatrix,
    FeatureNote,
    ProductDescription,
    SortKey,
    compare,
    describe,
    feature_matrix,
    select_products,
)

__all__ = [
    "DATA_DIR",
    "Architecture",
    "Catalog",
    "Chip",
    "Comparison",
    "ComparisonRow",
    "Derived",
    "EvolutionRow",
    "Feature",
    "FeatureMatrix",
    "FeatureNote",
    "Finding",
    "Metric",
    "NvlinkGeneration",
    "PcieGeneration",
    "PeakKey",
    "Product",
    "ProductDescription",
    "SMResources",
    "SortKey",
    "Source",
    "SourceKind",
    "Status",
    "System",
    "Tier",
    "best_dense_peak",
    "check_catalog",
    "check_product",
    "compare",
    "derive",
    "describe",
    "evolution",
    "feature_matrix",
    "flagship",
    "host_link_bandwidth",
    "load_catalog",
    "select_products",
]
