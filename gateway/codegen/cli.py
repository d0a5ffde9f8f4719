"""The ``codegen`` command: write the clients, or (``--check``) tell which are stale."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gateway import codegen


def cmd_codegen(args: argparse.Namespace) -> int:
    root = Path(args.root) if args.root else codegen.ROOT
    if args.check:
        stale = codegen.check(root)
        if stale:
            print(
                "generated clients differ from openrpc/openrpc.json; run `hero-gateway codegen`:",
                file=sys.stderr,
            )
            for path in stale:
                print(f"  {path}", file=sys.stderr)
            return 1
        print("generated clients are up to date")
        return 0
    changed = codegen.write(root)
    for path in changed:
        print(f"wrote {path}")
    if not changed:
        print("generated clients are up to date")
    return 0


def add_commands(sub: Any) -> None:
    """Register ``codegen`` (called by ``gateway.cli``)."""
    p = sub.add_parser("codegen", help="generate the Python and JS clients from the contract")
    p.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and list the files that differ from the contract",
    )
    p.add_argument("--root", help="repository root to write into (default: this checkout)")
    p.set_defaults(func=cmd_codegen)
