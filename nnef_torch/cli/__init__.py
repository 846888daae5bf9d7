"""The `nnef-torch` command line: validate, inspect, run, export, convert NNEF models, and a demo.

Exit status as a compiler's: 0 success, 1 an error in the user's input or model (printed as `nnef-torch: error: ...`
or an NNEFError's compiler-style text), 2 a usage error, 130 interrupted, 141 standard output closed early (as
`nnef-torch info model/ | head` does: quietly, as other Unix tools). Importing this package does not import
torch: the verbs that need it import it when they run.
"""
from __future__ import annotations

import argparse
import os
import sys

from nnef_torch.cli import convert, demo, export, export_llm, report, run, viz
from nnef_torch.cli.common import PROG, CLIError, warnings_reported
from nnef_torch.cli.demo import demo_model_path
from nnef_torch.cli.report import describe
from nnef_torch.errors import NNEFError
from nnef_torch.ir.deviations import RULES


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Validate, inspect, run, export, convert and draw Khronos NNEF models (folders, graph.nnef, .tgz).",
        epilog="examples:\n  nnef-torch validate model.tgz\n  nnef-torch info model/ --input-shape input=8,3,224,224\n"
               "  nnef-torch run model.tgz -o outputs.npz\n"
               "  nnef-torch export mypackage.models:resnet18 -o resnet18.tgz --input-shape 1,3,224,224\n"
               "  nnef-torch export-llm ./my-llama -o llama.tgz --weights q4_0\n"
               "  nnef-torch convert model/ model.tgz --tensor-layout current\n"
               "  nnef-torch viz model.tgz -o model.html\n  nnef-torch demo\n  nnef-torch --version\n\n"
               "every verb reads a deviation from the spec that real producers write with one warning each; "
               "validate, info and run --strict refuse them\n"
               "run 'nnef-torch VERB --help' for the options and examples of each verb")
    parser.add_argument("--version", action="version", version=version_text())
    commands = parser.add_subparsers(dest="command", required=True, metavar="VERB")
    for verb in (report, run, export, export_llm, convert, viz, demo):
        verb.add_parsers(commands)
    return parser


def version_text() -> str:
    """`nnef-torch --version`: this package's version and torch's (read from the installed metadata: no import)."""
    from importlib import metadata

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"
    return f"{PROG} {installed('nnef-torch')} (torch {installed('torch')})"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse usage errors exit with 2 themselves)."""
    args = build_parser().parse_args(argv)
    try:
        with warnings_reported():  # each deviation read leniently shown once, as a compiler's warning
            status = args.handler(args)
        sys.stdout.flush()  # a closed pipe is found here, not at exit
        return status
    except BrokenPipeError:  # the reader of standard output went away (`| head`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the flush at exit writes nowhere instead of failing again
        os.close(devnull)
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the signal
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except NNEFError as error:
        print(error, file=sys.stderr)
        rule = getattr(error, "rule", None)  # a deviation from the spec real producers write, refused by --strict
        if rule in RULES:
            print(f"{PROG}: note: without --strict this is read with a warning: {RULES[rule]} [{rule}]",
                  file=sys.stderr)
        if "input_shapes=" in str(error):  # the Python API's option, which the command line spells otherwise
            print(f"{PROG}: note: on the command line, give the shapes with --input-shape NAME=D0,D1,...",
                  file=sys.stderr)
        return 1
    except CLIError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # a user's path: missing, unreadable, not writable
        where = f"{error.filename}: " if error.filename else ""
        print(f"{PROG}: error: {where}{error.strerror or error}", file=sys.stderr)
        return 1


__all__ = ["CLIError", "build_parser", "demo_model_path", "describe", "main"]
