"""Entry point of the ``gpuarch`` command (console script and ``python -m gpuarch``)."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from typing import NoReturn, cast

from gpuarch import __version__
from gpuarch.cli import (
    advise_cmds,
    catalog_cmds,
    estimate_cmds,
    models_cmds,
    numerics_cmds,
    probe_cmds,
    report_cmds,
    roofline_cmds,
    validate_cmds,
    web_cmds,
)
from gpuarch.errors import GpuarchError

__all__ = ["build_parser", "main"]

USAGE_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one change: our value parsers name their flag themselves, so
    "argument --rate: --rate: expected ..." is said once (subcommands inherit it)."""

    def error(self, message: str) -> NoReturn:
        super().error(re.sub(r"^argument (\S+): \1: ", r"argument \1: ", message))


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true",
                        help="print one JSON document on stdout instead of text")
    parser = _Parser(
        prog="gpuarch",
        description="NVIDIA GPU architectures from G80 to Blackwell: a sourced catalog, "
                    "training and serving estimates validated against published "
                    "measurements, a numerics lab, a probe, and advice on what to run where.",
    )
    parser.add_argument("--version", action="version", version=f"gpuarch {__version__}")
    # the subcommands' parsers are _Parser too (argparse makes them of the parent's class)
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    catalog_cmds.add_commands(sub, common)
    estimate_cmds.add_commands(sub, common)
    roofline_cmds.add_commands(sub, common)
    validate_cmds.add_commands(sub, common)
    models_cmds.add_commands(sub, common)
    numerics_cmds.add_commands(sub, common)
    probe_cmds.add_commands(sub, common)
    advise_cmds.add_commands(sub, common)
    report_cmds.add_commands(sub, common)
    web_cmds.add_commands(sub, common)
    return parser


def _invoked(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub)command parser ``argv`` selects: each word naming a subcommand of the parser
    reached so far descends into it."""
    for word in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and word in subs[0].choices:
            parser = subs[0].choices[word]
    return parser


def _refuse_unknown(parser: argparse.ArgumentParser, argv: list[str],
                    extras: list[str]) -> NoReturn:
    """Fail on words no parser took, from the subcommand they were given to (its usage, not
    the top level's), naming each unknown flag with the subcommand's nearest ones."""
    command = _invoked(parser, argv)
    flags = [opt for action in command._actions for opt in action.option_strings
             if opt.startswith("--")]
    hints = []
    for word in extras:
        flag = word.split("=", 1)[0]
        if flag.startswith("-"):
            near = difflib.get_close_matches(flag, flags, n=2, cutoff=0.6)
            if near:
                hints.append(f"{flag}: did you mean {' or '.join(near)}?")
    message = "unrecognized arguments: " + " ".join(extras)
    command.error(message + ("; " + "; ".join(hints) if hints else ""))


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for usage errors)."""
    parser = build_parser()
    words = sys.argv[1:] if argv is None else argv
    args, extras = parser.parse_known_args(words)
    if extras:
        _refuse_unknown(parser, words, extras)
    try:
        status: int = args.handler(args)
    except GpuarchError as exc:
        print(f"gpuarch: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:
        return 0
    return status
