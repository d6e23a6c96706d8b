"""Quantities as apimachinery parses them, and MilliValue / Value rounding up."""

from __future__ import annotations

from fractions import Fraction

import pytest
from placer.engine.objects import ObjectError
from placer.engine.parsing import parse_node, parse_pod
from placer.engine.quantity import (
    Quantity,
    QuantityError,
    canonical,
    parse_quantity,
    parse_quantity_with_format,
    to_milli,
    to_units,
)
from placer.testing import node, pod


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("1.5Gi", Fraction(1610612736)),
        ("2e3", Fraction(2000)),
        ("1E-3", Fraction(1, 1000)),
        ("0.1", Fraction(1, 10)),
        (".5", Fraction(1, 2)),
        ("+1k", Fraction(1000)),
        ("1Ki", Fraction(1024)),
        ("128974848", Fraction(128974848)),
        ("129e6", Fraction(129000000)),
        ("123Mi", Fraction(123 * 2**20)),
        ("1E", Fraction(10**18)),  # E alone is exa
        ("5n", Fraction(5, 10**9)),
        ("3u", Fraction(3, 10**6)),
        ("0", Fraction(0)),
        ("-1", Fraction(-1)),
        (2, Fraction(2)),
        (0.25, Fraction(1, 4)),
    ],
)
def test_parse(text: str | int | float, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["1.2.3", "abc", "1Q", "1K", "1e", "", "Gi", "1 Gi", "1Gib", "--1", "1e1.5", " 1", "1 ", True, None,
     float("inf"), float("nan")],
)
def test_invalid(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)  # type: ignore[arg-type]


def test_exponent_out_of_range() -> None:
    with pytest.raises(QuantityError, match="exponent"):
        parse_quantity("1e100")


@pytest.mark.parametrize(
    ("text", "milli", "units"),
    [
        ("100m", 100, 1),  # Value() rounds 0.1 up to 1
        ("1", 1000, 1),
        ("1.5", 1500, 2),
        ("0.1m", 1, 1),  # MilliValue() rounds 0.1m up to 1m
        ("1n", 1, 1),
        ("1500u", 2, 1),
        ("2.5Ki", 2560000, 2560),
        ("0", 0, 0),
        ("1.0000001", 1001, 2),
    ],
)
def test_rounding_up(text: str, milli: int, units: int) -> None:
    assert to_milli(text) == milli
    assert to_units(text) == units


def test_cpu_is_read_in_millicores_and_the_rest_in_units() -> None:
    info = parse_pod(pod("p", cpu="250m", memory="1.5Gi", requests={"ephemeral-storage": "1e3", "example.com/x": "2"}))
    assert info.error is None
    assert info.requests == {"cpu": 250, "memory": 1610612736, "ephemeral-storage": 1000, "example.com/x": 2}


def test_negative_request_is_a_pod_error() -> None:
    info = parse_pod(pod("p", cpu="-1"))
    assert info.error == (
        "invalid pod default/p: spec.containers[0].resources.requests.cpu: must be greater than or equal to 0"
    )


@pytest.mark.parametrize("bad", ["1.2.3", "abc", "1Q"])
def test_malformed_request_is_a_pod_error_naming_the_field(bad: str) -> None:
    info = parse_pod(pod("p", memory=bad))
    assert info.error is not None
    assert info.error.startswith(f"invalid pod default/p: spec.containers[0].resources.requests.memory: {bad!r}")


def test_malformed_allocatable_is_an_object_error_naming_the_field() -> None:
    with pytest.raises(ObjectError) as caught:
        parse_node(node("n", cpu="1.2.3"))
    assert caught.value.path == "status.allocatable.cpu"
    with pytest.raises(ObjectError) as caught:
        parse_node(node("n", memory="-1Gi"))
    assert caught.value.path == "status.allocatable.memory"


def test_amounts_beyond_int64_are_rejected_not_crashed_on() -> None:
    info = parse_pod(pod("p", memory="1e30"))
    assert info.error is not None
    assert "spec.containers[0].resources.requests.memory" in info.error
    # each container fits in int64, their sum does not
    big = {"name": "c", "resources": {"requests": {"memory": "5E"}}}
    info = parse_pod(pod("p", containers=[big, {**big, "name": "d"}]))
    assert info.error is not None
    assert "memory request is too large" in info.error
    with pytest.raises(ObjectError) as caught:
        parse_node(node("n", cpu="1e16"))  # 1e19 millicores
    assert caught.value.path == "status.allocatable.cpu"
    assert parse_node(node("n", cpu="9e15")).allocatable["cpu"] == 9 * 10**18
    # YAML's .inf is a float: refused like any other invalid quantity
    info = parse_pod(pod("p", memory=float("inf")))  # type: ignore[arg-type]
    assert info.error == (
        "invalid pod default/p: spec.containers[0].resources.requests.memory: inf is not a valid quantity"
    )


@pytest.mark.parametrize(("text", "fmt", "printed"), [
    ("12Gi", "BinarySI", "12Gi"),
    ("1.5Gi", "BinarySI", "1536Mi"),
    ("0.5Ki", "BinarySI", "512"),  # a binary quantity below 1Ki prints as a decimal one
    ("0.0005Ki", "DecimalSI", "512m"),  # and one below 1 is parsed as one
    ("1536", "DecimalSI", "1536"),
    ("3000", "DecimalSI", "3k"),
    ("1.5", "DecimalSI", "1500m"),
    ("100M", "DecimalSI", "100M"),
    ("12e6", "DecimalExponent", "12e6"),
    ("1e3", "DecimalExponent", "1e3"),
    ("0", "DecimalSI", "0"),
    ("-1Ki", "BinarySI", "-1Ki"),
    ("0.1n", "DecimalSI", "1n"),  # rounded up to a nano, as apimachinery parses it
    (40, "DecimalSI", "40"),
])
def test_quantity_format_and_canonical_text(text: str | int, fmt: str, printed: str) -> None:
    """apimachinery's format detection and `Quantity.String()`: what Placer writes back as a share's
    consumed capacity reads as kube-scheduler's would."""
    quantity = parse_quantity_with_format(text)
    assert (quantity.format, str(quantity)) == (fmt, printed)


def test_canonical_binary_values() -> None:
    """kube's `NewQuantity(v, BinarySI)` (a value a request policy's step rounded to)."""
    assert [canonical(Fraction(v), "BinarySI") for v in (2, 1023, 1024, 1536, 3 * 2**30, 41 * 2**30)] == [
        "2", "1023", "1Ki", "1536", "3Gi", "41Gi"]
    assert str(Quantity(Fraction(2**30), "BinarySI") + Quantity(Fraction(2**30), "DecimalSI")) == "2Gi"
