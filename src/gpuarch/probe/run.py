"""One probe run: host, torch, NVML inventory, catalog matching, topology."""

from __future__ import annotations

import dataclasses
from typing import Any

from gpuarch.catalog.loader import Catalog
from gpuarch.probe.host import read_environment, read_host, read_torch
from gpuarch.probe.matching import match_product
from gpuarch.probe.nvml import NvmlSession, load_pynvml
from gpuarch.probe.readings import ProbeReport, Unavailable

__all__ = ["run_probe"]


def run_probe(catalog: Catalog, nv: Any = None) -> ProbeReport:
    """Read the machine. ``nv`` is a pynvml-like module (default: the real pynvml, if
    installed); whatever cannot be read is listed in ``unavailable``, never raised."""
    unavailable: list[Unavailable] = []
    torch_reading, why = read_torch()
    if why:
        unavailable.append(why)
    if nv is None:
        nv, reason = load_pynvml()
        if reason:
            unavailable.append(Unavailable("NVML", reason))
    gpus: list[Any] = []
    driver = cuda = None
    topology: list[Any] = []
    if nv is not None:
        session = NvmlSession(nv)
        if session.start():
            driver = session.driver_version()
            cuda = session.cuda_driver_version()
            raw = [session.gpu(i) for i in range(session.device_count())]
            matched = []
            for reading, handle in raw:
                product, note = match_product(catalog, reading)
                matched.append((dataclasses.replace(
                    reading, product_key=product.key if product else None, match_note=note),
                    handle))
            gpus = matched
            topology = session.topology(matched)
            session.stop()
        unavailable += session.unavailable
    return ProbeReport(
        host=read_host(), driver_version=driver, cuda_driver_version=cuda,
        gpus=tuple(g for g, _ in gpus), topology=tuple(topology), torch=torch_reading,
        environment=read_environment(), unavailable=tuple(unavailable))
