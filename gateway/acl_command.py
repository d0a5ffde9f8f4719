"""``hero-gateway acl``: the Redis ACL users of the four roles (see
``gateway/supervisor/acl.py``), printed, or set with ``--apply``.

    hero-gateway acl                                   print the ACL SETUSER lines
    hero-gateway acl --apply --redis-url redis://...   set them (as an admin), load the Functions

Passwords come from ``HERO_ACL_{ACTOR,GATEWAY,ADMIN,PRODUCER}_PASSWORD``; a role
without one gets a generated password, shown once on stderr. The rules
themselves carry only the passwords' SHA-256.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from gateway.config import Config, add_arguments, resolve
from gateway.supervisor import acl, library
from gateway.supervisor.wire import Wire


async def _apply(config: Config, users: list[acl.User]) -> None:
    client = Wire(config.redis, "acl", timeout=config.redis_timeout)
    try:
        await acl.apply(client, users)
        await library.load(client)  # so actors, which may not load it, can start first
    finally:
        await client.aclose()


def cmd_acl(args: argparse.Namespace) -> int:
    config = resolve(args)
    if args.apply and config.redis_url is None:  # never the default by accident
        print("hero-gateway acl --apply: give --redis-url (or HERO_REDIS_URL) of the Redis "
              "to set the users on, as a user allowed to run ACL", file=sys.stderr)  # fmt: skip
        return 2
    users = acl.users()
    for user in users:
        print(acl.render(user))
    for user in users:
        if user.generated:
            print(
                f"{user.role.user}: generated password {user.password} (shown only now; "
                f"set {user.role.password_env} to choose it)",
                file=sys.stderr,
            )
    if not args.apply:
        return 0
    asyncio.run(_apply(config, users))  # Redis's refusal (NOPERM...): said by gateway.cli
    print(f"applied: {', '.join(u.role.user for u in users)}", file=sys.stderr)
    return 0


def add_commands(sub: Any) -> None:
    """Register ``acl`` (called by ``gateway.cli``)."""
    p = sub.add_parser(
        "acl", help="print (or --apply) the Redis ACL users: actor, gateway, admin, producer"
    )
    p.add_argument(
        "--apply",
        action="store_true",
        help="set the users on the Redis of --redis-url (connect as an admin) and load the "
        "Functions",
    )
    add_arguments(p, "acl")
    p.set_defaults(func=cmd_acl)
