"""What a setting is, how one is declared, and the parsers its text goes through.

A setting is a field of ``Config`` declared with ``setting(...)``: the field's
annotation is its type (so mypy checks every ``config.foo``), its default is
the default, and the field's metadata carries the rest (flag, help, commands).
``Setting`` is that metadata read back, one per field, in declaration order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, dataclass, field, fields
from typing import Any, TypeVar

T = TypeVar("T")

_KEY = "hero.setting"

#: The commands that talk to Redis and log: settings every one of them takes.
EVERY_COMMAND = ("serve", "actor", "dev", "archive", "keys", "acl")


@dataclass(frozen=True)
class Setting:
    """One setting: the field ``name`` of ``Config``, ``HERO_{NAME}`` and ``flag``."""

    name: str
    flag: str
    parse: Callable[[str], Any]
    default: Any
    help: str
    commands: tuple[str, ...]
    metavar: str | None = None

    @property
    def env(self) -> str:
        return "HERO_" + self.name.upper()

    @property
    def is_switch(self) -> bool:
        """A flag without a value (``--once``): it sets True; the variable takes 1/0, yes/no."""
        return self.parse is parse_bool

    def show(self, value: Any) -> str:
        """``value`` as the variable's text (the README's default column, dev's children)."""
        if self.is_switch:
            return "on" if value else "off"
        if isinstance(value, tuple):
            return ",".join(v if isinstance(v, str) else f"{v[0]}={'+'.join(v[1])}" for v in value)
        return "unset" if value is None else str(value)


@dataclass(frozen=True)
class _Meta:
    parse: Callable[[str], Any]
    help: str
    commands: tuple[str, ...]
    flag: str | None
    metavar: str | None


def setting(
    default: T,
    parse: Callable[[str], T],
    help: str,
    commands: tuple[str, ...],
    *,
    flag: str | None = None,
    metavar: str | None = None,
) -> T:
    """A ``Config`` field: ``name: T = setting(default, parse, help, commands)``.

    Typed as returning ``T`` (as ``dataclasses.field`` is) so that mypy checks
    the default and the parser against the field's annotation. The flag is
    ``--{name}`` with dashes unless given.
    """
    meta = _Meta(parse, help, commands, flag, metavar)
    return field(default=default, metadata={_KEY: meta})


def settings_of(cls: type[Any]) -> tuple[Setting, ...]:
    """The ``Setting`` of every field of the dataclass ``cls``, in field order."""
    return tuple(_read(f) for f in fields(cls))


def _read(f: Field[Any]) -> Setting:
    meta: _Meta = f.metadata[_KEY]
    flag = meta.flag or "--" + f.name.replace("_", "-")
    return Setting(f.name, flag, meta.parse, f.default, meta.help, meta.commands, meta.metavar)


# -- parsers: text (a flag's or a variable's) to value; ValueError says what is wrong ----------


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {text!r}")


def one_of(what: str, *choices: str) -> Callable[[str], str]:
    """A parser accepting only ``choices`` (case-insensitive); ``what`` names them."""

    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError(f"not {what}: {text!r} ({', '.join(choices)})")
        return value

    return parse


def parse_text(text: str) -> str:
    """Text that goes to Redis as a name: a byte that is not UTF-8 (argv decodes it
    to a lone surrogate) is refused here, not by the encoder mid-command."""
    try:
        text.encode()
    except UnicodeEncodeError:
        raise ValueError(f"not UTF-8 text: {text!r}") from None
    return text


def parse_csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def parse_names(text: str) -> tuple[str, ...]:
    """A comma-separated list that names at least one thing."""
    names = parse_csv(text)
    if not names:
        raise ValueError("give at least one name")
    return names


def parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"not an integer: {text!r}") from None


def parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None


def positive_int(text: str) -> int:
    value = parse_int(text)
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = parse_int(text)
    if value < 0:
        raise ValueError(f"must be >= 0, got {value}")
    return value


def int_between(low: int, high: int) -> Callable[[str], int]:
    """A parser of integers from ``low`` to ``high``: a TCP port, say, which the
    socket layer would otherwise take modulo 65536 or refuse with a traceback."""

    def parse(text: str) -> int:
        value = parse_int(text)
        if not low <= value <= high:
            raise ValueError(f"must be from {low} to {high}, got {value}")
        return value

    return parse


#: A TCP port (0, "any free port", would hide where the service is).
parse_port = int_between(1, 65_535)


def non_negative(text: str) -> float:
    value = parse_float(text)
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"must be a finite number >= 0, got {text}")
    return value


def positive(text: str) -> float:
    value = non_negative(text)
    if value == 0:
        raise ValueError("must be > 0")
    return value


def fraction(text: str) -> float:
    value = non_negative(text)
    if not 0 < value < 1:
        raise ValueError(f"must be between 0 and 1, got {text}")
    return value
