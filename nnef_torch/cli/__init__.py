"""The `nnef-torch` command line: validate, inspect, run, export, convert NNEF models, and a demo.

Exit status as a compiler's: 0 success, 1 an error in the user's input or model (printed as `nnef-torch: error: ...`
or an NNEFError's compiler-style text), 2 a usage error, 130 interrupted. Importing this package does not import
torch: the verbs that need it import it when they run.
"""
from __future__ import annotations

import argparse
import sys

from nnef_torch.cli import convert, demo, export, report, run, viz
from nnef_torch.cli.common import PROG, CLIError
from nnef_torch.cli.demo import demo_model_path
from nnef_torch.cli.report import describe
from nnef_torch.errors import NNEFError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Validate, inspect, run, export, convert and draw Khronos NNEF models (folders, graph.nnef, .tgz).",
        epilog="examples:\n  nnef-torch validate model.tgz\n  nnef-torch info model/ --input-shape input=8,3,224,224\n"
               "  nnef-torch run model.tgz -o outputs.npz\n"
               "  nnef-torch export mypackage.models:resnet18 -o resnet18.tgz --input-shape 1,3,224,224\n"
               "  nnef-torch convert model/ model.tgz --tensor-layout current\n"
               "  nnef-torch viz model.tgz -o model.html\n  nnef-torch demo\n\n"
               "run 'nnef-torch VERB --help' for the options and examples of each verb")
    commands = parser.add_subparsers(dest="command", required=True, metavar="VERB")
    for verb in (report, run, export, convert, viz, demo):
        verb.add_parsers(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse usage errors exit with 2 themselves)."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except NNEFError as error:
        print(error, file=sys.stderr)
        return 1
    except CLIError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # a user's path: missing, unreadable, not writable
        where = f"{error.filename}: " if error.filename else ""
        print(f"{PROG}: error: {where}{error.strerror or error}", file=sys.stderr)
        return 1


__all__ = ["CLIError", "build_parser", "demo_model_path", "describe", "main"]
