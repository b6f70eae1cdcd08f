"""The error of data that does not match the schema: its own module, so that reading records (which
raises it) does not import numpy with the features."""

from __future__ import annotations


class SchemaError(ValueError):
    """Data or an artifact does not match this schema; the message names what and how to fix it."""
