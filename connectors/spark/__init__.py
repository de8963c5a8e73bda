"""Spark's `format("martlet")`: a topic read straight from Martlet's store (source.py)."""

from .source import MartletDataSource, register

__all__ = ["MartletDataSource", "register"]
