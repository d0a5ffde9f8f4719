"""Structured logs: fields passed with extra= survive in both formats."""

from __future__ import annotations

import json
import logging

from gateway.logs import JsonFormatter, TextFormatter


def record() -> logging.LogRecord:
    rec = logging.LogRecord("gateway.test", logging.INFO, __file__, 1, "job done", None, None)
    rec.job_id = "j-1"
    return rec


def test_json_lines_carry_fields_as_keys() -> None:
    entry = json.loads(JsonFormatter().format(record()))
    assert entry["msg"] == "job done" and entry["job_id"] == "j-1" and entry["level"] == "info"


def test_text_lines_carry_fields_too() -> None:
    assert TextFormatter("%(message)s").format(record()) == "job done job_id=j-1"
