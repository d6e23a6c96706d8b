"""CEL device selectors of Dynamic Resource Allocation, as kube's `dynamic-resource-allocation/cel`.

Expressions are compiled once (`compile_selector`, cached by expression) by the
`common-expression-language` package (a maintained, Rust-backed CEL implementation) and evaluated
against one device at a time with kube's variable `device`:

- `device.driver` — the driver's name;
- `device.attributes["domain"].id` — attributes by domain; an attribute without a domain in its
  name belongs to the driver's (kube's `parseQualifiedName`), and a domain the device has no
  attribute of reads as an empty map (kube's `newStringInterfaceMapWithDefault`), so
  `device.attributes["other.example.com"].model` is the runtime error `no such key: model`;
- `device.capacity["domain"].id` — quantities, with kube's quantity library: `quantity("1Gi")`,
  `isQuantity(s)`, `q.compareTo(q)`, `q.isGreaterThan(q)`, `q.isLessThan(q)`, `q.add(q|int)`,
  `q.sub(q|int)`, `q.asInteger()`, `q.isInteger()`, `q.asApproximateFloat()`, `q.sign()`;
- version attributes are semantic versions, with kube's semver library: `semver("1.2.3")`,
  `isSemver(s)`, `v.compareTo(v)`, `v.isGreaterThan(v)`, `v.isLessThan(v)`, `v.major()`,
  `v.minor()`, `v.patch()`;
- `cel.bind(name, value, body)` (kube enables cel-go's bindings extension) and the common string
  functions of cel-go's strings extension (`lowerAscii`, `upperAscii`, `trim`, `replace`, `split`,
  `substring`, `charAt`, `indexOf`, `lastIndexOf`, `join`).

Quantities and versions travel through CEL as one-key maps (`{"__quantity__": "n/d"}`, exact and
canonical, so `==` compares values); the library's functions unwrap them. Errors read as cel-go's
(`no such key: x`, `no such overload`, ...): a runtime error is the allocator's to report, with
kube's `claim NS/NAME: selector #0: CEL runtime error: ...`.

Not as kube: expressions are not type-checked before they run (an undeclared function or field is a
runtime error, not a compile error), and there is no cost limit.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from placer.engine.quantity import QuantityError, parse_quantity

__all__ = [
    "CelError",
    "CompiledSelector",
    "Semver",
    "compile_selector",
    "device_variable",
    "evaluate",
    "parse_semver",
    "quantity_value",
    "semver_value",
]

# the library logs every exception raised by a function it calls (a runtime error we report anyway)
logging.getLogger("cel").setLevel(logging.ERROR)

QUANTITY_KEY = "__quantity__"
SEMVER_KEY = "__semver__"


class CelError(Exception):
    """A selector that cannot be compiled or evaluated; the message reads as cel-go's."""


# ------------------------------------------------------------------------------------ values


def quantity_value(value: Fraction) -> dict[str, str]:
    """A quantity as CEL sees it: a canonical one-key map (equal quantities, equal maps)."""
    return {QUANTITY_KEY: f"{value.numerator}/{value.denominator}"}


_SEMVER = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


@dataclass(frozen=True, slots=True)
class Semver:
    """A semantic version 2.0.0 (blang/semver's strict parse, as kube's `semver.Parse`)."""

    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    text: str = ""

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by semver precedence (build metadata ignored)."""
        mine, theirs = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if self.pre == other.pre:
            return 0
        if not self.pre:  # a release is greater than any of its pre-releases
            return 1
        if not other.pre:
            return -1
        for a, b in zip(self.pre, other.pre, strict=False):
            if a == b:
                continue
            a_num, b_num = a.isdigit(), b.isdigit()
            if a_num and b_num:
                return -1 if int(a) < int(b) else 1
            if a_num != b_num:  # numeric identifiers have lower precedence
                return -1 if a_num else 1
            return -1 if a < b else 1
        return -1 if len(self.pre) < len(other.pre) else (1 if len(self.pre) > len(other.pre) else 0)


def parse_semver(text: str) -> Semver:
    match = _SEMVER.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"{text!r} is not a valid semantic version")
    pre = tuple(match[4].split(".")) if match[4] else ()
    return Semver(int(match[1]), int(match[2]), int(match[3]), pre, text)


def semver_value(version: Semver) -> dict[str, str]:
    return {SEMVER_KEY: version.text}


def _quantity(value: Any) -> Fraction | None:
    if isinstance(value, Mapping) and len(value) == 1 and QUANTITY_KEY in value:
        return Fraction(value[QUANTITY_KEY])
    return None


def _semver(value: Any) -> Semver | None:
    if isinstance(value, Mapping) and len(value) == 1 and SEMVER_KEY in value:
        return parse_semver(value[SEMVER_KEY])
    return None


class _NoOverload(TypeError):
    def __init__(self) -> None:
        super().__init__("no such overload")


# ------------------------------------------------------------------------------------ functions


def _fn_quantity(text: Any) -> dict[str, str]:
    if not isinstance(text, str):
        raise _NoOverload
    try:
        return quantity_value(parse_quantity(text))
    except QuantityError as error:
        raise ValueError(f"quantities must match the regular expression: {error}") from None


def _fn_is_quantity(text: Any) -> bool:
    if not isinstance(text, str):
        raise _NoOverload
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _fn_semver(text: Any, normalize: Any = False) -> dict[str, str]:
    if not isinstance(text, str):
        raise _NoOverload
    return semver_value(parse_semver(text))


def _fn_is_semver(text: Any, normalize: Any = False) -> bool:
    if not isinstance(text, str):
        raise _NoOverload
    try:
        parse_semver(text)
    except ValueError:
        return False
    return True


def _compare(a: Any, b: Any) -> int:
    qa, qb = _quantity(a), _quantity(b)
    if qa is not None and qb is not None:
        return (qa > qb) - (qa < qb)
    va, vb = _semver(a), _semver(b)
    if va is not None and vb is not None:
        return va.compare(vb)
    raise _NoOverload


def _quantity_of(value: Any) -> Fraction:
    quantity = _quantity(value)
    if quantity is None:
        raise _NoOverload
    return quantity


def _operand(value: Any) -> Fraction:
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    return _quantity_of(value)


def _as_integer(value: Any) -> int:
    quantity = _quantity_of(value)
    if quantity.denominator != 1 or not -(2**63) <= quantity.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return quantity.numerator


def _semver_part(index: int) -> Callable[[Any], int]:
    def part(value: Any) -> int:
        version = _semver(value)
        if version is None:
            raise _NoOverload
        return (version.major, version.minor, version.patch)[index]

    return part


def _strings(name: str) -> Callable[..., Any]:
    """cel-go's strings extension, the functions selectors use."""

    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise _NoOverload
        return value

    table: dict[str, Callable[..., Any]] = {
        "lowerAscii": lambda s: "".join(c.lower() if c.isascii() else c for c in check(s)),
        "upperAscii": lambda s: "".join(c.upper() if c.isascii() else c for c in check(s)),
        "trim": lambda s: check(s).strip(),
        "replace": lambda s, a, b, n=-1: check(s).replace(check(a), check(b), n),
        "split": lambda s, sep, n=-1: check(s).split(check(sep), n - 1 if n > 0 else -1) if n != 0 else [],
        "substring": lambda s, start, end=None: check(s)[start:end],
        "charAt": lambda s, i: check(s)[i] if i < len(check(s)) else "",
        "indexOf": lambda s, sub, start=0: check(s).find(check(sub), start),
        "lastIndexOf": lambda s, sub, end=None: check(s).rfind(check(sub), 0, None if end is None else end + len(sub)),
        "join": lambda items, sep="": check(sep).join(check(item) for item in items),
    }
    return table[name]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _fn_quantity,
    "isQuantity": _fn_is_quantity,
    "semver": _fn_semver,
    "isSemver": _fn_is_semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "add": lambda a, b: quantity_value(_quantity_of(a) + _operand(b)),
    "sub": lambda a, b: quantity_value(_quantity_of(a) - _operand(b)),
    "asInteger": _as_integer,
    "isInteger": lambda a: _quantity_of(a).denominator == 1 and -(2**63) <= _quantity_of(a) < 2**63,
    "asApproximateFloat": lambda a: float(_quantity_of(a)),
    "sign": lambda a: (_quantity_of(a) > 0) - (_quantity_of(a) < 0),
    "major": _semver_part(0),
    "minor": _semver_part(1),
    "patch": _semver_part(2),
    **{name: _strings(name) for name in (
        "lowerAscii", "upperAscii", "trim", "replace", "split", "substring", "charAt", "indexOf",
        "lastIndexOf", "join",
    )},
}


# ------------------------------------------------------------------------------------ cel.bind

_TOKEN = re.compile(
    r"""(?P<string>[rRbB]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^\\'\n])*'|"(?:\\.|[^\\"\n])*"))"""
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)|(?P<space>\s+)|(?P<other>.)",
    re.DOTALL,
)


def _tokens(expression: str) -> list[tuple[str, str]]:
    return [(match.lastgroup or "other", match.group()) for match in _TOKEN.finditer(expression)]


def _split_arguments(tokens: list[tuple[str, str]], start: int) -> tuple[list[list[tuple[str, str]]], int]:
    """The arguments of a call whose `(` is at `start`, and the index after its `)`."""
    depth, args, current = 0, [], []
    for index in range(start, len(tokens)):
        kind, text = tokens[index]
        if kind == "other" and text in "([{":
            depth += 1
            if depth == 1:
                continue
        elif kind == "other" and text in ")]}":
            depth -= 1
            if depth == 0:
                args.append(current)
                return args, index + 1
        elif kind == "other" and text == "," and depth == 1:
            args.append(current)
            current = []
            continue
        current.append((kind, text))
    raise CelError("compilation failed: unbalanced parentheses in cel.bind")


def _expand_binds(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`cel.bind(v, init, body)` as `body` with each free `v` replaced by `(init)` (a macro, so the
    same value; the body is pure)."""
    out: list[tuple[str, str]] = []
    index = 0
    while index < len(tokens):
        kind, text = tokens[index]
        following = [t for t in tokens[index + 1 : index + 6] if t[0] != "space"]
        previous = next((t for t in reversed(out) if t[0] != "space"), ("", ""))
        if (
            kind == "ident" and text == "cel" and previous != ("other", ".")
            and [t[1] for t in following[:3]] == [".", "bind", "("]
        ):
            paren = index + 1
            while tokens[paren] != ("other", "("):
                paren += 1
            args, after = _split_arguments(tokens, paren)
            variable = [t for t in args[0] if t[0] != "space"] if args else []
            if len(args) != 3 or len(variable) != 1 or variable[0][0] != "ident":
                raise CelError("compilation failed: cel.bind() variable name must be a simple identifier")
            name = variable[0][1]
            init = [("other", "("), *_expand_binds(args[1]), ("other", ")")]
            body = _expand_binds(args[2])
            replaced: list[tuple[str, str]] = [("other", "(")]
            for position, token in enumerate(body):
                before = next((t for t in reversed(body[:position]) if t[0] != "space"), ("", ""))
                if token == ("ident", name) and before != ("other", "."):
                    replaced.extend(init)
                else:
                    replaced.append(token)
            replaced.append(("other", ")"))
            out.extend(replaced)
            index = after
            continue
        out.append((kind, text))
        index += 1
    return out


# ------------------------------------------------------------------------------------ compile, run


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    expression: str
    program: Any = None  # cel.Program; None when `error` is set
    error: str | None = None  # kube's `CEL compile error: ...` detail
    literals: frozenset[str] = frozenset()  # string literals: possible attribute/capacity domains


def _literal_values(tokens: list[tuple[str, str]]) -> frozenset[str]:
    values = set()
    for kind, text in tokens:
        if kind == "string" and text[0] not in "rRbB":
            quote = 3 if text[:3] in ('"""', "'''") else 1
            values.add(text[quote:-quote])
    return frozenset(values)


@lru_cache(maxsize=4096)
def compile_selector(expression: str) -> CompiledSelector:
    """Compile once per expression; a selector that does not compile carries its error."""
    try:
        tokens = _tokens(expression)
        source = "".join(text for _, text in _expand_binds(tokens)) if "bind" in expression else expression
        import cel  # here, not at the top: the library's package imports its CLI (prompt_toolkit, ~0.1 s)

        program = cel.compile(source)
    except CelError as error:
        return CompiledSelector(expression, error=str(error))
    except Exception as error:  # the library's parse errors (ValueError) and anything else it raises
        detail = str(error)
        detail = re.sub(r"^Failed to parse expression '.*?': ", "", detail, count=1, flags=re.DOTALL)
        return CompiledSelector(expression, error=f"compilation failed: {detail}")
    return CompiledSelector(expression, program, None, _literal_values(tokens))


def device_variable(
    driver: str,
    attributes: Mapping[str, Any],
    capacity: Mapping[str, Fraction],
    allow_multiple_allocations: bool = False,
) -> dict[str, Any]:
    """The CEL `device` of one device: attributes and capacity by domain, an unqualified name in the
    driver's domain (kube's `parseQualifiedName`). Attribute values are CEL values already
    (int, bool, str, or a version's map)."""
    by_domain: dict[str, dict[str, Any]] = {}
    for name, value in attributes.items():
        domain, _, ident = name.rpartition("/")
        by_domain.setdefault(domain or driver, {})[ident] = value
    capacities: dict[str, dict[str, Any]] = {}
    for name, quantity in capacity.items():
        domain, _, ident = name.rpartition("/")
        capacities.setdefault(domain or driver, {})[ident] = quantity_value(quantity)
    return {
        "driver": driver,
        "allowMultipleAllocations": allow_multiple_allocations,
        "attributes": by_domain,
        "capacity": capacities,
    }


def _runtime_message(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"no such key: {error.args[0] if error.args else ''}"
    text = str(error)
    if isinstance(error, ZeroDivisionError) or "division by zero" in text:
        return "division by zero"
    if "No such overload" in text or "no such overload" in text:
        return "no such overload"
    undefined = re.match(r"Undefined variable or function: '([^']*)'", text)
    if undefined:
        return f"undeclared reference to '{undefined[1]}'"
    function = re.match(r"Function '([^']*)' error: (.*?)(?: Check function arguments and their types\.)?$", text,
                        re.DOTALL)
    if function:
        text = function[2]
    python = re.match(r"Python function call failed: \w+: (.*?)\.?$", text, re.DOTALL)
    return python[1] if python else text


def evaluate(selector: CompiledSelector, device: Mapping[str, Any]) -> bool:
    """Whether the device (its `device_variable`) matches; CelError on a runtime error or a result
    that is not a bool (kube: `CEL result of type ... could not be converted to bool`)."""
    if selector.program is None:
        raise CelError(selector.error or "compilation failed")
    import cel  # loaded by compile_selector already: a lookup

    variable: Mapping[str, Any] = device
    for _ in range(len(selector.literals) + 1):
        try:
            result = selector.program.execute(cel.Context({"device": variable}, FUNCTIONS))
        except KeyError as error:
            # an index by a domain the device has none of reads as an empty map, as kube's
            key = error.args[0] if error.args else None
            attributes, capacity = variable["attributes"], variable["capacity"]
            if key in selector.literals and key not in attributes and key not in capacity:
                variable = {
                    **variable,
                    "attributes": {**attributes, key: {}},
                    "capacity": {**capacity, key: {}},
                }
                continue
            raise CelError(_runtime_message(error)) from None
        except Exception as error:
            raise CelError(_runtime_message(error)) from None
        if isinstance(result, bool):
            return result
        type_name = {int: "int", float: "double", str: "string", dict: "map", list: "list"}.get(type(result), "?")
        raise CelError(f"CEL result of type {type_name} could not be converted to bool")
    raise CelError("no such key")
