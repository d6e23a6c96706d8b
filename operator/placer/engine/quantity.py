"""Kubernetes resource quantities, parsed exactly as apimachinery's `resource.Quantity` does.

A quantity is `<sign><digits>[.<digits>]<suffix>` where the suffix is a binary SI suffix
(Ki..Ei), a decimal SI suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2).
Values are kept as exact fractions; the scheduler then reads cpu in millicores and everything
else in whole units, rounding up as `Quantity.MilliValue()` / `Quantity.Value()` do.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

__all__ = ["QuantityError", "parse_quantity", "to_milli", "to_units"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_MAX_EXPONENT = 40  # beyond this a quantity overflows int64 in apimachinery too


class QuantityError(ValueError):
    """A string that Kubernetes would not accept as a quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Return the exact value of a Kubernetes quantity (`"100m"` -> 1/10, `"1.5Gi"` -> 1610612736)."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must be strings or numbers, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a valid quantity")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError(f"quantities must be strings or numbers, not {type(value).__name__}")
    match = _QUANTITY.match(value)
    if match is None:
        raise QuantityError(
            f"{value!r} is not a valid quantity: it must match "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        )
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    exponent = int(suffix[1:])
    if abs(exponent) > _MAX_EXPONENT:
        raise QuantityError(f"{value!r} is not a valid quantity: the exponent is out of range")
    return number * Fraction(10) ** exponent


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


# A cluster repeats a handful of quantity strings ("100m", "128Mi", "110") over thousands of pods
# and nodes: the conversions of short strings are memoised (a bounded LRU; an invalid string is
# not cached, its QuantityError is raised afresh each time). Only exact `str`s are cached, so that
# `True`, `1` and `1.0` (equal keys to a cache) keep their own handling.
_CACHED_LENGTH = 64
_CACHE_SIZE = 4096


@lru_cache(maxsize=_CACHE_SIZE)
def _milli_of(value: str) -> int:
    return _ceil(parse_quantity(value) * 1000)


@lru_cache(maxsize=_CACHE_SIZE)
def _units_of(value: str) -> int:
    return _ceil(parse_quantity(value))


def to_milli(value: str | int | float) -> int:
    """Millicores (or milli-units), rounded up as `Quantity.MilliValue()`."""
    if type(value) is str and len(value) <= _CACHED_LENGTH:
        return _milli_of(value)
    return _ceil(parse_quantity(value) * 1000)


def to_units(value: str | int | float) -> int:
    """Whole units (bytes, counts), rounded up as `Quantity.Value()`."""
    if type(value) is str and len(value) <= _CACHED_LENGTH:
        return _units_of(value)
    return _ceil(parse_quantity(value))
