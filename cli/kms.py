"""`logway kms rotate|list --keyring PATH [--kek ALIAS]`: the file KMS's keyring (the record-encryption filter's
``proxy.filter.<name>.kms.file.path``). A rotation gives each alias (or one) a new KEK, kept beside the old ones:
a running proxy uses it for the DEKs it makes from then on (it re-reads the keyring when it changes), and the
records the old KEKs' DEKs encrypted still decrypt."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from logway.proxy.kms import FileKms, KmsError


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register `logway kms` on the CLI's subcommands."""
    kms = sub.add_parser("kms", help="the record-encryption filter's file KMS: rotate or list its KEKs")
    kms.add_argument("action", choices=("rotate", "list"))
    kms.add_argument("--keyring", required=True, metavar="PATH", help="the keyring file (kms.file.path)")
    kms.add_argument("--kek", metavar="ALIAS", help="rotate only this KEK alias (default: every alias)")


def kms_command(args: argparse.Namespace) -> int:
    path = Path(args.keyring)
    if not path.exists():
        print(f"logway: kms: {path}: no keyring (it is made by the proxy on first use)", file=sys.stderr)
        return 1
    try:
        kms = FileKms(path)
        if args.action == "rotate":
            if args.kek is not None and args.kek not in kms.aliases():
                print(f"logway: kms: {path}: no KEK alias {args.kek!r}", file=sys.stderr)
                return 1
            for alias, kek_id in zip(sorted(kms.aliases()) if args.kek is None else [args.kek],
                                     kms.rotate(args.kek), strict=True):
                print(f"{alias}\t{kek_id}")
        else:
            for alias, ids in sorted(kms.aliases().items()):
                print(f"{alias}\t{' '.join(ids)}")
    except KmsError as exc:
        print(f"logway: kms: {exc}", file=sys.stderr)
        return 1
    return 0
