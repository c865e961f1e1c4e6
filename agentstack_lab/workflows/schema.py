"""The workflow report's JSON Schema and a validator for it."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from agentstack_lab.errors import AgentstackError

__all__ = ["ReportValidationError", "report_schema", "validate_report"]


class ReportValidationError(AgentstackError, ValueError):
    """A report does not match ``report.schema.json`` (the message names the path)."""


@cache
def _schema_text() -> str:
    return resources.files("agentstack_lab.workflows").joinpath("report.schema.json").read_text("utf-8")


def report_schema() -> dict[str, Any]:
    """Return a fresh copy of the report schema (JSON Schema draft 2020-12)."""
    return json.loads(_schema_text())


def validate_report(report: dict[str, Any]) -> dict[str, Any]:
    """Raise :class:`ReportValidationError` unless ``report`` matches the schema; return it."""
    import jsonschema  # installed with nbformat

    validator = jsonschema.Draft202012Validator(report_schema(),
                                                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "<root>"
        raise ReportValidationError(f"workflow report invalid at {where}: {first.message}"
                                    + (f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""))
    return report
