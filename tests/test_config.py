"""Settings: one table behind the flags, the variables, the defaults and the README."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from gateway.cli import build_parser
from gateway.config import (
    SETTINGS,
    Config,
    Setting,
    add_arguments,
    markdown_table,
    mask_password,
    resolve,
)
from tests.conftest import ROOT
from tests.test_cli_errors import hero

#: How to reach each command's own flags on the real CLI.
PREFIX = {
    "serve": ["serve"],
    "actor": ["actor", "--script-type", "python"],
    "dev": ["dev"],
    "archive": ["archive"],
    "keys": ["keys", "list"],
    "acl": ["acl"],
    "pipeline run": ["pipeline", "run"],
    "pipeline synth": ["pipeline", "synth"],
}

#: A valid value unlike the default, for settings whose parser takes only some words.
WORDS = {
    "redis_url": "redis://127.0.0.1:1/0",
    "script_types": "a,b,python",
    "allowed_origins": "http://localhost:3000,https://ops.example",
    "stream_types": "osis",
    "legacy_queues": "python=actor_queue,osis=work_queue+actor_queue",
    "sandbox": "off",
    "event_loop": "asyncio",
    "log_format": "text",
    "log_level": "debug",
    "synth_distribution": "const",
    "synth_script_types": "a,b",
}


def sample(s: Setting) -> str:
    """Text for ``s`` that parses to something other than its default."""
    if s.name in WORDS:
        return WORDS[s.name]
    default = s.default
    if isinstance(default, bool):
        return "yes"
    if isinstance(default, int):
        return str(default + 1)
    if isinstance(default, float):
        return str(default / 2 if default else 0.5)
    if default is None and s.parse is not str:
        return "3"  # positive ints and numbers
    return "some-text"


def test_defaults_come_from_the_table() -> None:
    """Config's fields are the settings, and nothing but the table gives them defaults."""
    assert [f.name for f in fields(Config)] == [s.name for s in SETTINGS]
    assert Config() == Config(**{s.name: s.default for s in SETTINGS})
    assert resolve(argparse.Namespace(), {}) == Config()
    assert len({s.env for s in SETTINGS}) == len(SETTINGS)


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_every_setting_reaches_config_by_variable_and_by_flag(setting: Setting) -> None:
    text = sample(setting)
    value: Any = setting.parse(text)
    assert value != setting.default
    assert getattr(resolve(None, {setting.env: text}), setting.name) == value
    for command in setting.commands:
        argv = [*PREFIX[command], setting.flag] + ([] if setting.is_switch else [text])
        args = build_parser().parse_args(argv)
        assert getattr(resolve(args, {}), setting.name) == value, command
        other = "no" if setting.is_switch else setting.show(setting.default)
        flag_wins = resolve(args, {setting.env: other})
        assert getattr(flag_wins, setting.name) == value, command


def test_every_option_of_the_pipeline_commands_is_a_setting() -> None:
    """archive and pipeline run/synth have no flag outside the table (so none lacks a variable)."""
    names = {s.name for s in SETTINGS}
    for command in ("archive", "pipeline run", "pipeline synth"):
        parser = build_parser()
        for word in PREFIX[command]:
            parser = next(
                a.choices[word]
                for a in parser._actions
                if isinstance(a, argparse._SubParsersAction) and word in a.choices
            )
        options = {a.dest for a in parser._actions if a.option_strings and a.dest != "help"}
        assert options and options <= names, options - names


def test_readme_has_the_generated_table() -> None:
    """`hero-gateway config --markdown` output, verbatim: regenerate it when a setting changes."""
    assert markdown_table() in (ROOT / "README.md").read_text()


def test_flag_beats_environment_beats_default() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, "serve")
    env = {"HERO_PORT": "9000", "HERO_COMPAT_LEGACY": "yes", "HERO_SCRIPT_TYPES": "a, b"}
    assert resolve(parser.parse_args([]), env).port == 9000
    assert resolve(parser.parse_args(["--port", "9100"]), env).port == 9100
    assert resolve(parser.parse_args([]), {}).port == 8080
    assert resolve(parser.parse_args([]), env).compat_legacy is True
    assert resolve(parser.parse_args([]), env).script_types == ("a", "b")


def test_bad_values_are_a_clear_exit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="HERO_PORT: not an integer"):
        resolve(None, {"HERO_PORT": "eighty"})
    with pytest.raises(SystemExit, match="HERO_SYNTH_RATE: must be > 0"):
        resolve(None, {"HERO_SYNTH_RATE": "0"})
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["pipeline", "run", "--slo-quantile", "1.5"])
    assert exit_info.value.code == 2
    assert "--slo-quantile: must be between 0 and 1" in capsys.readouterr().err


def test_a_stream_type_must_be_a_script_type() -> None:
    env = {"HERO_SCRIPT_TYPES": "osis,python", "HERO_STREAM_TYPES": "osis,nope"}
    with pytest.raises(SystemExit, match="HERO_STREAM_TYPES: nope"):
        resolve(environ=env)
    assert resolve(environ=dict(env, HERO_STREAM_TYPES="osis")).stream_types == ("osis",)


def test_a_redis_password_is_masked_wherever_the_url_writes_it() -> None:
    """redis-py reads a password from the query string too (``?password=``)."""
    assert mask_password("redis://u:p@ss@h:1/0") == "redis://u:***@h:1/0"
    assert mask_password("redis://:pw@h:6379/0") == "redis://:***@h:6379/0"  # no user: AUTH pw
    assert mask_password("rediss://:s3cr3t@h") == "rediss://:***@h"
    url = "redis://127.0.0.1:7451/0?username=tester&password=PW1&db=2"
    assert mask_password(url) == "redis://127.0.0.1:7451/0?username=tester&password=***&db=2"
    assert mask_password("unix:///run/r.sock?password=PW1") == "unix:///run/r.sock?password=***"
    assert mask_password("redis://h:6379/0?db=1") == "redis://h:6379/0?db=1"


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:1/0?username=tester&password=PWSECRETacl1",
        "redis://tester:PWSECRETacl1@127.0.0.1:1/0",
    ],
)
def test_config_hides_the_redis_password(tmp_path: Path, url: str) -> None:
    """`hero-gateway config` says passwords are hidden: in the query too."""
    done = hero(tmp_path, "config", "--redis-url", url)  # reads settings, connects nowhere
    assert done.returncode == 0, done.stderr
    assert "PWSECRETacl1" not in done.stdout + done.stderr
    assert "redis_url" in done.stdout and "127.0.0.1:1/0" in done.stdout and "***" in done.stdout
