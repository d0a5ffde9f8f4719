"""Settings: precedence, parsing errors, and the README documenting each one."""

from __future__ import annotations

import argparse

import pytest

from gateway.config import SETTINGS, add_arguments, resolve
from tests.conftest import ROOT


def test_flag_beats_environment_beats_default() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, "serve")
    env = {"HERO_PORT": "9000", "HERO_COMPAT_LEGACY": "yes", "HERO_SCRIPT_TYPES": "a, b"}
    assert resolve(parser.parse_args([]), env).port == 9000
    assert resolve(parser.parse_args(["--port", "9100"]), env).port == 9100
    assert resolve(parser.parse_args([]), {}).port == 8080
    assert resolve(parser.parse_args([]), env).compat_legacy is True
    assert resolve(parser.parse_args([]), env).script_types == ("a", "b")


def test_bad_environment_value_is_a_clear_exit() -> None:
    with pytest.raises(SystemExit, match="HERO_PORT"):
        resolve(None, {"HERO_PORT": "eighty"})


def test_a_stream_type_must_be_a_script_type() -> None:
    env = {"HERO_SCRIPT_TYPES": "osis,python", "HERO_STREAM_TYPES": "osis,nope"}
    with pytest.raises(SystemExit, match="HERO_STREAM_TYPES: nope"):
        resolve(environ=env)
    assert resolve(environ=dict(env, HERO_STREAM_TYPES="osis")).stream_types == ("osis",)


def test_readme_documents_every_setting() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [s.env for s in SETTINGS if f"`{s.env}`" not in readme or f"`{s.flag}`" not in readme]
    assert missing == []
