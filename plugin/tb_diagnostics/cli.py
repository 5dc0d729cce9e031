"""``tb-diagnostics``: the command line. Each command is a module of
:mod:`tb_diagnostics.commands`; ``tb-diagnostics --help`` lists them.

    tb-diagnostics report LOGDIR [--run RUN] [--format text|json|markdown]
    tb-diagnostics rules [--format text|markdown]

Exit codes: 0 on success (bad files are reported inside the report), 1 when
trace files were found but none could be read (or a check failed), 2 on a
usage error or an unreadable LOGDIR.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from tb_diagnostics import __version__
from tb_diagnostics.commands import all_commands
from tb_diagnostics.commands._common import CommandError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tb-diagnostics",
        description="Explain PyTorch profiler traces step by step: what bounds each step, "
                    "with the evidence and the fix.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--debug", action="store_true",
                   help="print the tracebacks behind files that could not be analysed and "
                        "rules that were not evaluated (to stderr)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in all_commands():
        cmd.add_arguments(sub.add_parser(cmd.name, help=cmd.help, description=cmd.help))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    log = logging.getLogger("tb_diagnostics")
    handler, level = None, log.level
    if args.debug:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)
    cmd = next(c for c in all_commands() if c.name == args.command)
    try:
        return cmd.run(args)
    except CommandError as exc:
        print(f"tb-diagnostics: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if handler is not None:
            log.removeHandler(handler)
            log.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())
