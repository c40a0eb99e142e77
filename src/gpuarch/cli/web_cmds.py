"""``gpuarch serve``: the local web app."""

from __future__ import annotations

import argparse

from gpuarch.errors import GpuarchError

__all__ = ["add_commands"]


def cmd_serve(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise GpuarchError(f"--port: expected 1-65535, got {args.port}")
    try:
        from gpuarch.web.app import create_app
    except ImportError:
        raise GpuarchError("serve needs Flask: pip install 'gpuarch[web]'") from None
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"gpuarch: warning: serving on {args.host}, reachable from other machines")
    create_app().run(host=args.host, port=args.port, threaded=True)
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    """Register serve."""
    p = sub.add_parser("serve", help="a local web app: GPU pages, estimate and advice forms, "
                       "and a JSON API (/api)")
    p.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine only)")
    p.add_argument("--port", type=int, default=8000, help="default 8000")
    p.set_defaults(handler=cmd_serve)
