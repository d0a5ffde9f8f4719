"""Column expressions the Spark steps share."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F


def non_negative(ms: Any) -> Any:
    """``max(0, ms)`` that stays null for null (``greatest`` skips nulls: 0 is not "unknown")."""
    return F.when(ms.isNotNull(), F.greatest(F.lit(0), ms))
