"""The host, the torch build and the environment, read without a GPU."""

from __future__ import annotations

import importlib.util
import os
import platform
import sys

from gpuarch.probe.readings import HostReading, TorchReading, Unavailable

__all__ = ["ENV_PREFIXES", "read_environment", "read_host", "read_torch"]

ENV_PREFIXES = ("NCCL_", "CUDA_", "TORCH_", "NVIDIA_")


def read_host() -> HostReading:
    cpu = platform.processor() or None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        memory: float | None = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        memory = None
    return HostReading(cpu=cpu, cores=os.cpu_count(), memory_bytes=memory,
                       os=f"{platform.system()} {platform.release()}",
                       python=sys.version.split()[0])


def read_torch() -> tuple[TorchReading | None, Unavailable | None]:
    """The torch build, or why it cannot be read (not installed)."""
    if importlib.util.find_spec("torch") is None:
        return None, Unavailable("torch", "torch is not installed (pip install "
                                 "'gpuarch[probe]', which pins torch==2.13.0): no "
                                 "microbenchmarks and no torch settings to check")
    import torch

    cuda = bool(torch.cuda.is_available())
    try:
        arch = tuple(torch.cuda.get_arch_list())
    except Exception:  # CPU builds may not implement it
        arch = ()
    nccl = None
    if cuda and hasattr(torch.cuda, "nccl"):
        try:
            v = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
            nccl = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
        except Exception:
            nccl = None
    return TorchReading(
        version=str(torch.__version__),
        cuda_build=torch.version.cuda,
        arch_list=arch,
        cuda_available=cuda,
        tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32),
        tf32_cudnn=bool(torch.backends.cudnn.allow_tf32),
        float32_matmul_precision=str(torch.get_float32_matmul_precision()),
        nccl_version=nccl,
        transformer_engine=importlib.util.find_spec("transformer_engine") is not None,
        torchao=importlib.util.find_spec("torchao") is not None,
    ), None


def read_environment() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}
