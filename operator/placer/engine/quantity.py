"""Kubernetes resource quantities, parsed exactly as apimachinery's `resource.Quantity` does.

A quantity is `<sign><digits>[.<digits>]<suffix>` where the suffix is a binary SI suffix
(Ki..Ei), a decimal SI suffix (n, u, m, "", k, M, G, T, P, E) or a decimal exponent (e3, E-2).
Values are kept as exact fractions; the scheduler then reads cpu in millicores and everything
else in whole units, rounding up as `Quantity.MilliValue()` / `Quantity.Value()` do.

Where Placer writes a quantity it computed (a DRA share's `consumedCapacity`), it keeps the value
with its format (`Quantity`: the suffix family it was written in, as apimachinery remembers it) and
prints it as apimachinery's canonical form does (`"1.5Gi"` -> `1536Mi`, `NewQuantity(4, BinarySI)`
-> `4`), so the API server stores what kube-scheduler would have written.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "Quantity",
    "QuantityError",
    "canonical",
    "parse_quantity",
    "parse_quantity_with_format",
    "to_milli",
    "to_units",
]

BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT = "BinarySI", "DecimalSI", "DecimalExponent"

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


_NANO = Fraction(1, 10**9)
_DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


@dataclass(frozen=True, slots=True)
class Quantity:
    """A quantity's exact value and the format apimachinery keeps with it (`BinarySI` for a binary
    suffix, `DecimalExponent` for an exponent, else `DecimalSI`); `str()` is its canonical text."""

    value: Fraction
    format: str = DECIMAL_SI

    def __str__(self) -> str:
        return canonical(self.value, self.format)

    def __add__(self, other: Quantity) -> Quantity:
        """apimachinery's `Add`: the sum keeps the receiver's format."""
        return Quantity(self.value + other.value, self.format)


def parse_quantity_with_format(value: str | int | float) -> Quantity:
    """`resource.ParseQuantity`: the value, rounded up to a nano as apimachinery rounds it, and its
    format (a binary quantity below 1 is kept as DecimalSI, as there)."""
    exact = parse_quantity(value)
    text = value if isinstance(value, str) else str(value)
    match = _QUANTITY.match(text)
    suffix = (match["suffix"] or "") if match is not None else ""
    if suffix in _BINARY:
        fmt = BINARY_SI
    elif suffix[:1] in ("e", "E"):
        fmt = DECIMAL_EXPONENT
    else:
        fmt = DECIMAL_SI
    if exact.denominator != 1 and (exact / _NANO).denominator != 1:
        nanos = exact / _NANO
        whole = -((-abs(nanos.numerator)) // nanos.denominator)  # away from zero (inf.RoundUp)
        exact = Fraction(whole if exact > 0 else -whole, 10**9)
    if fmt == BINARY_SI and 0 < exact < 1:
        fmt = DECIMAL_SI
    return Quantity(exact, fmt)


def canonical(value: Fraction, fmt: str = DECIMAL_SI) -> str:
    """apimachinery's `Quantity.String()` for this value and format: a binary quantity as the
    largest power of 1024 that divides it (`1536Mi`), when it is a whole number of at least 1024;
    otherwise the mantissa with the largest exponent of 1000 that keeps it whole (`1500m`, `12k`),
    written as a decimal SI suffix or, for DecimalExponent, as `e<n>`."""
    if value == 0:
        return "0"
    if fmt == BINARY_SI and value.denominator == 1 and abs(value) >= 1024:
        amount, power = value.numerator, 0
        while amount % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
            amount //= 1024
            power += 1
        return f"{amount}{_BINARY_SUFFIXES[power]}"
    sign = "-" if value < 0 else ""
    value = abs(value)
    exponent = 0
    while value.denominator != 1:  # a decimal value (parsing rounds to a nano): scale to a whole one
        value *= 10
        exponent -= 1
    mantissa = value.numerator
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    shift = exponent % 3  # down to a multiple of three
    mantissa *= 10**shift
    exponent -= shift
    if fmt == DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    suffix = _DECIMAL_SUFFIXES.get(exponent)
    return f"{sign}{mantissa}{suffix if suffix is not None else f'e{exponent}'}"


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
