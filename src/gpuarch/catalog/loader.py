"""Load the catalog's TOML data files into one validated, typed :class:`Catalog`."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpuarch.catalog.evidence import Rule, parse_rule
from gpuarch.catalog.lookup import PRODUCT_NOISE, Resolver
from gpuarch.catalog.model import (
    Architecture,
    Chip,
    Feature,
    NvlinkGeneration,
    PcieGeneration,
    Product,
    Source,
    System,
)
from gpuarch.catalog.peaks import NEXT_WIDER, PeakKey
from gpuarch.catalog.records import build_record, data_keys
from gpuarch.errors import CatalogError, GpuarchError, suggestion

__all__ = ["DATA_DIR", "Catalog", "load_catalog"]

DATA_DIR = Path(__file__).with_name("data")
SHARED_FILES = ("features.toml", "interconnects.toml", "systems.toml")
_ARCH_TABLES = {"source", "architecture", "chip", "product"}
_SHARED_TABLES = {
    "features.toml": {"source", "feature"},
    "interconnects.toml": {"source", "nvlink", "pcie"},
    "systems.toml": {"source", "system"},
}


@dataclass(frozen=True)
class Catalog:
    """Every architecture, chip, product, feature, interconnect and system, cross-checked."""

    architectures: tuple[Architecture, ...]
    chips: Mapping[str, Chip]
    products: tuple[Product, ...]
    features: Mapping[str, Feature]
    sources: Mapping[str, Source]
    nvlink: tuple[NvlinkGeneration, ...]
    pcie: tuple[PcieGeneration, ...]
    systems: tuple[System, ...]
    _product_names: Resolver[Product]
    _arch_names: Resolver[Architecture]
    _system_names: Resolver[System]
    _evidence: Mapping[str, tuple[Rule, ...]]

    def product(self, name: str) -> Product:
        """The product ``name`` means (key, name or alias; case and separators ignored)."""
        return self._product_names.resolve(name)

    def architecture(self, name: str) -> Architecture:
        """The architecture ``name`` means (``"hopper"``, ``"Ada Lovelace"``, ``"sm90"``)."""
        return self._arch_names.resolve(name)

    def architecture_named(self, name: str) -> Architecture | None:
        """The architecture whose name, key or ``smNN`` is exactly ``name``; else ``None``."""
        return self._arch_names.exact(name)

    def system(self, name: str) -> System:
        """The reference system ``name`` means."""
        return self._system_names.resolve(name)

    def system_for(self, product: Product) -> System | None:
        """The reference system built from this product, else from the same chip in the
        same form factor (a PCIe H100 does not inherit a DGX H100's NVSwitch)."""
        same = [s for s in self.systems if s.gpu == product.key]
        if same:
            return same[0]
        for s in self.systems:
            other = self.product(s.gpu)
            if other.chip == product.chip and other.form_factor == product.form_factor:
                return s
        return None

    def architecture_of(self, product: Product) -> Architecture:
        return next(a for a in self.architectures if a.key == product.architecture)

    def chip_of(self, product: Product) -> Chip:
        return self.chips[product.chip]

    def products_of(self, arch: Architecture) -> tuple[Product, ...]:
        return tuple(p for p in self.products if p.architecture == arch.key)

    def has_feature(self, product: Product, feature_key: str) -> bool:
        """True if the product's architecture lists the feature and, where the feature
        varies within an architecture, the product's published figures show it."""
        if feature_key not in self.architecture_of(product).features:
            return False
        rules = self._evidence.get(feature_key, ())
        chip = self.chips[product.chip]
        return not rules or any(rule(product, chip) for rule in rules)

    def introduced_in(self, feature_key: str) -> Architecture | None:
        """The architecture whose first product launched earliest among those listing the
        feature (Hopper, not Ada, for FP8: H100 was announced half a year before Ada)."""
        having = [a for a in self.architectures if feature_key in a.features]
        return min(having, key=lambda a: (self.debut(a), a.order), default=None)

    def debut(self, arch: Architecture) -> str:
        """Launch date of the architecture's first product (its year if it has none)."""
        dates = [p.launch_date for p in self.products if p.architecture == arch.key]
        return min(dates) if dates else str(arch.year)

    def nvlink_generation(self, generation: int) -> NvlinkGeneration | None:
        return next((n for n in self.nvlink if n.generation == generation), None)

    def pcie_generation(self, generation: int) -> PcieGeneration | None:
        return next((p for p in self.pcie if p.generation == generation), None)

    def system_with_link(self, product: Product, base: System | None,
                         gpu_link: str | None) -> System | None:
        """``base`` as given, or with ``gpu_link`` ``"pcie"`` / ``"pcieN"`` the same node over
        PCIe x16 only (``pcie_system``; ``base`` defaulting to the GPU's reference system)."""
        if not gpu_link:
            return base
        known = ", ".join(f"pcie{p.generation}" for p in self.pcie)
        slot = int(gpu_link[4:]) if gpu_link.startswith("pcie") and gpu_link[4:].isdigit() \
            else None
        if gpu_link != "pcie" and (slot is None or self.pcie_generation(slot) is None):
            raise GpuarchError(f"--gpu-link (gpu_link): {gpu_link!r}: give 'pcie' (the "
                               f"card's PCIe generation) or the slot's, one of {known}")
        return self.pcie_system(product, base or self.system_for(product), slot)

    def pcie_system(self, product: Product, base: System | None,
                    slot_generation: int | None = None) -> System:
        """``product``'s GPUs joined only through their PCIe x16 links (cards without an
        NVLink bridge): ``base``'s node size, network and CPU (8 GPUs a node without one),
        GPU-to-GPU traffic at the x16 rate of the slower of the card's PCIe generation and
        the slot's (``slot_generation``, default the card's)."""
        card = product.pcie_generation
        if not card:
            raise GpuarchError(f"--gpu-link (gpu_link): {product.name}: the catalog gives "
                               "no PCIe generation for it, so its PCIe link is unknown")
        generation = min(card, slot_generation or card)
        pcie = self.pcie_generation(generation)
        if pcie is None:
            raise GpuarchError(f"--gpu-link (gpu_link): PCIe generation {generation} is not "
                               f"in the catalog (known: "
                               f"{', '.join(str(p.generation) for p in self.pcie)})")
        return System(
            key=f"{product.key}-pcie{generation}", name=f"{product.name} over PCIe Gen"
            f"{generation} x16 (no NVLink)", gpu=product.key,
            gpus_per_node=base.gpus_per_node if base else 8, intra_node_fabric="pcie",
            intra_node_bandwidth_bytes_s=2 * pcie.x16_bandwidth_bytes_s,
            nvlink_domain_gpus=1, network=base.network if base else None,
            network_bandwidth_per_gpu_bytes_s=(base.network_bandwidth_per_gpu_bytes_s
                                               if base else None),
            cpu=base.cpu if base else None,
            notes="GPU-to-GPU traffic through the host's PCIe x16 links, both directions at "
                  "the generation's x16 rate; an upper bound, not a measured peer-to-peer rate",
            source=pcie.source)


def _dense_from_sparse(product: Product, chip: Chip) -> Mapping[PeakKey, float]:
    """Dense peaks published only "with sparsity": half the sparse figure.

    2:4 structured sparsity doubles Tensor Core math on chips that support it (the consistency
    checks confirm sparse = 2 x dense wherever both are published). Nothing is derived where
    the chip lacks sparsity or the product documents a ``sparse.<key>`` exception.
    """
    if not chip.sparsity_2to4:
        return MappingProxyType({})
    return MappingProxyType({
        key: value / 2 for key, value in product.sparse_flops.items()
        if key not in product.dense_flops
        and f"sparse.{key.value}" not in product.peak_exceptions
    })


def _with_sibling_peaks(product: Product, products: list[Product]) -> Product:
    """``product`` with the dense peaks it publishes only as a sparse figure that is not twice
    the dense one (a ``sparse.<key>`` exception: HGX B300's FP4) scaled from a product of the
    same chip and tier that publishes the dense figure, by the two products' dense peaks one
    precision up (a lower-clocked board of the same silicon runs every Tensor Core precision
    at the same fraction of its sibling). For the performance model; ``peak`` ignores it."""
    scaled: dict[PeakKey, float] = {}
    sibling_key = ""
    for key, up in NEXT_WIDER.items():
        if product.peak(key) is not None or key not in product.sparse_flops \
                or f"sparse.{key.value}" not in product.peak_exceptions:
            continue
        mine = product.peak(up)
        for other in products:
            if other is product or other.chip != product.chip or other.tier != product.tier \
                    or other.dense_origin(key) != "published":
                continue
            theirs = other.peak(up)
            if mine and theirs:
                scaled[key] = other.dense_flops[key] * mine / theirs
                sibling_key = other.key
                break
    if not scaled:
        return product
    return Product(**{**product.__dict__, "dense_from_sibling": MappingProxyType(scaled),
                      "dense_sibling": sibling_key})


@cache
def load_catalog(data_dir: Path | None = None) -> Catalog:
    """Read, validate and cross-check every data file in ``data_dir`` (default: built-in)."""
    return _Builder(data_dir or DATA_DIR).build()


class _Builder:
    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir
        self.sources: dict[str, Source] = {}
        self.archs: list[Architecture] = []
        self.chips: dict[str, Chip] = {}
        self.products: list[Product] = []
        self.features: dict[str, Feature] = {}
        self.nvlink: list[NvlinkGeneration] = []
        self.pcie: list[PcieGeneration] = []
        self.systems: list[System] = []
        # (file, where, source id) for every citation, checked once all sources are known.
        self.citations: list[tuple[str, str, str]] = []

    def build(self) -> Catalog:
        if not self.dir.is_dir():
            raise CatalogError(str(self.dir), "-", "catalog data folder not found")
        for path in sorted(self.dir.glob("*.toml")):
            raw = self._read(path)
            if path.name in SHARED_FILES:
                self._shared(path.name, raw)
            else:
                self._architecture_file(path, raw)
        self._cross_check()
        self.products = [_with_sibling_peaks(p, self.products) for p in self.products]
        self.archs.sort(key=lambda a: a.order)
        order = {a.key: a.order for a in self.archs}
        self.products.sort(key=lambda p: (order[p.architecture], p.launch_date, p.key))
        return Catalog(
            architectures=tuple(self.archs),
            chips=dict(self.chips),
            products=tuple(self.products),
            features=dict(self.features),
            sources=dict(self.sources),
            nvlink=tuple(sorted(self.nvlink, key=lambda n: n.generation)),
            pcie=tuple(sorted(self.pcie, key=lambda p: p.generation)),
            systems=tuple(self.systems),
            _product_names=self._resolver("GPU", self.products, PRODUCT_NOISE),
            _arch_names=self._arch_resolver(),
            _system_names=self._resolver("system", self.systems),
            _evidence=self._evidence_rules(),
        )

    # -- reading ---------------------------------------------------------------------------

    @staticmethod
    def _read(path: Path) -> dict[str, Any]:
        try:
            with path.open("rb") as fh:
                return tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise CatalogError(path.name, "-", f"not valid TOML: {exc}") from None

    @staticmethod
    def _tables(file: str, raw: Mapping[str, Any], allowed: set[str]) -> None:
        for key in raw:
            if key not in allowed:
                extra = suggestion(key, allowed)
                raise CatalogError(file, key, f"unknown top-level table {key!r}{extra}")

    @staticmethod
    def _array(file: str, raw: Mapping[str, Any], name: str) -> list[Any]:
        value = raw.get(name, [])
        if not isinstance(value, list):
            raise CatalogError(file, name, f"expected an array of tables [[{name}]]")
        return value

    def _sources(self, file: str, raw: Mapping[str, Any]) -> None:
        for i, table in enumerate(self._array(file, raw, "source")):
            src = build_record(Source, table, file, f"source[{i}]")
            if src.id in self.sources:
                first = self.sources[src.id].file
                raise CatalogError(file, f"source[{i}].id", f"{src.id!r} is already defined "
                                   f"in {first}")
            self.sources[src.id] = Source(**{**src.__dict__, "file": file})

    def _architecture_file(self, path: Path, raw: Mapping[str, Any]) -> None:
        file = path.name
        self._tables(file, raw, _ARCH_TABLES)
        self._sources(file, raw)
        if "architecture" not in raw:
            raise CatalogError(file, "architecture", "missing the [architecture] table")
        arch = build_record(Architecture, raw["architecture"], file, "architecture")
        if arch.key != path.stem:
            raise CatalogError(file, "architecture.key",
                               f"{arch.key!r} must equal the file name {path.stem!r}")
        arch = Architecture(**{**arch.__dict__, "file": file})
        self.archs.append(arch)
        self._cite(file, "architecture", arch.source, arch.field_sources, Architecture)
        local_chips: set[str] = set()
        for i, table in enumerate(self._array(file, raw, "chip")):
            where = f"chip[{i}]"
            chip = build_record(Chip, table, file, where)
            if chip.key in self.chips:
                raise CatalogError(file, f"{where}.key", f"chip {chip.key!r} is defined twice")
            self.chips[chip.key] = Chip(**{**chip.__dict__, "architecture": arch.key})
            local_chips.add(chip.key)
            self._cite(file, where, chip.source, chip.field_sources, Chip)
        for i, table in enumerate(self._array(file, raw, "product")):
            where = f"product[{i}]"
            prod = build_record(Product, table, file, where)
            if prod.chip not in local_chips:
                extra = suggestion(prod.chip, local_chips)
                raise CatalogError(file, f"{where}.chip",
                                   f"chip {prod.chip!r} is not defined in this file{extra}")
            self._check_exceptions(file, where, prod)
            halved = _dense_from_sparse(prod, self.chips[prod.chip])
            self.products.append(Product(**{**prod.__dict__, "architecture": arch.key,
                                            "dense_from_sparse": halved}))
            self._cite(file, where, prod.source, prod.field_sources, Product)

    def _shared(self, file: str, raw: Mapping[str, Any]) -> None:
        self._tables(file, raw, _SHARED_TABLES[file])
        self._sources(file, raw)
        for i, table in enumerate(self._array(file, raw, "feature")):
            feat = build_record(Feature, table, file, f"feature[{i}]")
            if feat.key in self.features:
                raise CatalogError(file, f"feature[{i}].key", f"{feat.key!r} defined twice")
            self.features[feat.key] = feat
            self._cite(file, f"feature[{i}]", feat.source, {}, Feature)
        for i, table in enumerate(self._array(file, raw, "nvlink")):
            nvl = build_record(NvlinkGeneration, table, file, f"nvlink[{i}]")
            self.nvlink.append(nvl)
            self._cite(file, f"nvlink[{i}]", nvl.source, nvl.field_sources, NvlinkGeneration)
        for i, table in enumerate(self._array(file, raw, "pcie")):
            pcie = build_record(PcieGeneration, table, file, f"pcie[{i}]")
            self.pcie.append(pcie)
            self._cite(file, f"pcie[{i}]", pcie.source, pcie.field_sources, PcieGeneration)
        for i, table in enumerate(self._array(file, raw, "system")):
            system = build_record(System, table, file, f"system[{i}]")
            self.systems.append(system)
            self._cite(file, f"system[{i}]", system.source, system.field_sources, System)

    # -- checks ----------------------------------------------------------------------------

    def _cite(self, file: str, where: str, source: str, field_sources: Mapping[str, str],
              cls: type) -> None:
        self.citations.append((file, f"{where}.source", source))
        keys = data_keys(cls)
        for field_key, source_id in field_sources.items():
            head = field_key.split(".", 1)[0]
            if head not in keys:
                extra = suggestion(head, keys)
                raise CatalogError(file, f"{where}.field_sources",
                                   f"{field_key!r} is not a key of this record{extra}")
            self.citations.append((file, f"{where}.field_sources.{field_key}", source_id))

    @staticmethod
    def _check_exceptions(file: str, where: str, prod: Product) -> None:
        known = {k.value for k in prod.dense_flops}
        known |= {f"sparse.{k.value}" for k in prod.sparse_flops}
        for key, reason in prod.peak_exceptions.items():
            if key not in known:
                raise CatalogError(file, f"{where}.peak_exceptions.{key}",
                                   "names a peak that dense_tflops (or, as sparse.<key>, "
                                   "sparse_tflops) does not publish")
            if len(reason.split()) < 4:
                raise CatalogError(file, f"{where}.peak_exceptions.{key}",
                                   f"needs a reason in words, got {reason!r}")
        for peak in prod.sparse_flops:
            if not peak.is_tensor:
                raise CatalogError(file, f"{where}.sparse_tflops.{peak.value}",
                                   "2:4 sparsity applies to Tensor Core peaks only")

    def _cross_check(self) -> None:
        for file, where, source_id in self.citations:
            if source_id not in self.sources:
                extra = suggestion(source_id, self.sources)
                raise CatalogError(file, where, f"unknown source id {source_id!r}{extra}")
        for arch in self.archs:
            for key in arch.features:
                if self.features and key not in self.features:
                    extra = suggestion(key, self.features)
                    raise CatalogError(arch.file, f"architecture.features.{key}",
                                       f"unknown feature {key!r}{extra}")
        keys = [p.key for p in self.products]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise CatalogError("products", "key", f"defined more than once: {dupes}")
        product_keys = set(keys)
        for i, system in enumerate(self.systems):
            if system.gpu not in product_keys:
                extra = suggestion(system.gpu, product_keys)
                raise CatalogError("systems.toml", f"system[{i}].gpu",
                                   f"unknown product {system.gpu!r}{extra}")
        arch_keys = {a.key for a in self.archs}
        for i, nvl in enumerate(self.nvlink):
            if arch_keys and nvl.architecture not in arch_keys:
                raise CatalogError("interconnects.toml", f"nvlink[{i}].architecture",
                                   f"unknown architecture {nvl.architecture!r}")

    def _evidence_rules(self) -> dict[str, tuple[Rule, ...]]:
        rules: dict[str, tuple[Rule, ...]] = {}
        for i, feat in enumerate(self.features.values()):
            parsed = []
            for text in feat.product_evidence:
                try:
                    parsed.append(parse_rule(text))
                except ValueError as exc:
                    raise CatalogError("features.toml", f"feature[{i}].product_evidence",
                                       str(exc)) from None
            rules[feat.key] = tuple(parsed)
        return rules

    # -- name resolution -------------------------------------------------------------------

    def _resolver(self, kind: str, items: Iterable[Product | System],
                  noise: frozenset[str] = frozenset({"nvidia"})) -> Resolver[Any]:
        resolver: Resolver[Any] = Resolver(kind, noise)
        for item in items:
            resolver.add(item.name, item, [item.key, *item.aliases])
        return resolver

    def _arch_resolver(self) -> Resolver[Architecture]:
        resolver: Resolver[Architecture] = Resolver("architecture")
        for arch in self.archs:
            ccs = [f"sm{cc.replace('.', '')}" for cc in arch.compute_capabilities]
            resolver.add(arch.name, arch, [arch.key, *ccs])
        return resolver
