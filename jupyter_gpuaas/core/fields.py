"""Field-path validation: the one way configuration and payloads report what is wrong (pure).

The catalog, the reclaim policy, the activity payload and the ``--explain`` snapshot are
checked with these helpers, so that every error names its field the same way
(``offerings[2].resources["nvidia.com/gpu"]``), every problem is listed at once, and a
misspelt key or name gets a "did you mean".

The typed readers (:func:`read_str`, :func:`read_one_of`, :func:`read_int`, :func:`read_number`,
:func:`read_bool`, :func:`read_duration`, :func:`read_str_list`, :func:`read_list`,
:func:`read_objects`, :func:`read_mapping`, :func:`read_entries`) all take
``(errs, base, data, key)``: they read ``data[key]``, treat a missing key and ``None`` alike
(the default), and record a wrong value at ``key_path(base, key)`` in ``errs`` instead of
raising, returning the default, so that a reader can go on and report the next field too.

A reader words what it reports in :data:`FIELD_WORDS` (a message that follows the path:
``count: must be at least 1``). A caller whose messages are sentences of their own (the spawn
form's and a notebook Job's choice, :mod:`jupyter_gpuaas.core.choice`) passes ``say``: it is
called with the problem's name and its values and returns the message.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from jupyter_gpuaas.core.durations import DURATION_HINT, format_duration, parse_duration

__all__ = [
    "DNS_SUBDOMAIN_RE",
    "FIELD_WORDS",
    "LABEL_VALUE_RE",
    "NAME_RE",
    "SLUG_RE",
    "FieldError",
    "FieldErrors",
    "Say",
    "did_you_mean",
    "field_words",
    "is_qualified_name",
    "key_path",
    "object_items",
    "quote",
    "read_bool",
    "read_duration",
    "read_entries",
    "read_int",
    "read_list",
    "read_mapping",
    "read_number",
    "read_objects",
    "read_one_of",
    "read_str",
    "read_str_list",
    "string_items",
    "type_name",
    "unknown_keys",
]

# Kubernetes name shapes: a DNS label (slugs, namespaces), a DNS subdomain (queue, flavor and
# priority class names), a qualified name's name part (label keys, policy names), a label value.
SLUG_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIGITS_RE = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class FieldErrors:
    """Collects every problem with its path, so that one round of fixes is enough."""

    def __init__(self) -> None:
        self.items: list[FieldError] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(FieldError(path, message))

    def __len__(self) -> int:
        return len(self.items)


def key_path(base: str, key: str) -> str:
    """``base.key``, or ``base["odd key"]`` where the key is not an identifier."""
    if _IDENTIFIER_RE.fullmatch(key):
        return f"{base}.{key}" if base else key
    return f"{base}[{json.dumps(key)}]"


_TYPE_NAMES = {
    "NoneType": "nothing",
    "str": "a string",
    "int": "a number",
    "float": "a number",
    "bool": "true/false",
    "list": "a list",
    "dict": "a mapping",
}


def type_name(value: object) -> str:
    """What a value is, in the words of its YAML or JSON form: "a string", "a mapping"."""
    return _TYPE_NAMES.get(type(value).__name__, type(value).__name__)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or ``""``."""
    hint = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


def unknown_keys(
    errs: FieldErrors, base: str, data: Mapping[Any, Any], allowed: Iterable[str]
) -> None:
    """Report each key of ``data`` that is not ``allowed``, with a "did you mean"."""
    allowed = list(allowed)
    for key in data:
        if key not in allowed:
            errs.add(key_path(base, str(key)), f"unknown field{did_you_mean(str(key), allowed)}")


def is_qualified_name(name: str) -> bool:
    """A Kubernetes qualified name: ``[prefix/]name`` (label keys, resource names)."""
    if name.count("/") > 1:
        return False
    prefix, _, part = name.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return False
    return bool(NAME_RE.fullmatch(part))


def object_items(
    value: Any, path: str, fail: Callable[[str, str], None], what: str = "must be a list"
) -> list[tuple[str, Mapping[str, Any]]]:
    """The objects of the list ``value`` found at ``path``, each with its own field path
    (``path[i]``); anything that is not a list or not an object is reported through ``fail``
    and left out. ``None`` is an empty list."""
    if value is None:
        return []
    if not isinstance(value, list):
        fail(path, what)
        return []
    return _mappings(
        ((f"{path}[{i}]", item) for i, item in enumerate(value)),
        lambda item_path, _: fail(item_path, "must be an object"),
    )


def string_items(errs: FieldErrors, path: str, items: list[Any]) -> list[str]:
    """The distinct non-empty strings of a list, in order; each other item is reported."""
    out: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            errs.add(f"{path}[{i}]", f"must be a non-empty string, not {item!r}")
        elif item in out:
            errs.add(f"{path}[{i}]", f"{item!r} is listed twice")
        else:
            out.append(item)
    return out


# --------------------------------------------------------------------------- typed readers


_QUOTE_CHARS = 40


def quote(value: object) -> str:
    """``repr(value)`` as a message quotes it, cut to a bounded length (``…`` where cut): what
    a reader echoes of its input stays short whatever the input."""
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "…"


def _given(data: Mapping[str, Any], key: str) -> bool:
    """Whether ``data`` sets ``key``: absent and ``None`` (YAML's empty value) are alike."""
    return data.get(key) is not None


FIELD_WORDS: Mapping[str, str] = {
    "required": "is required",
    "required_hint": "is required ({hint})",
    "not_string": "must be a string, not {type}",
    "blank": "must not be empty",
    "length": "must be 1 to {limit} characters long, not {length}",
    "not_matching": "{value} is not {what}",
    "not_amount": "must be {what}, not {value}",
    "out_of_range": "must be {bounds}, not {value}",
    "not_finite": "must be a finite number, not {value}",
}
"""How the readers word each problem, after the field's path. The values a reader fills in:
``key``, ``raw`` (the value as given), ``value`` (it quoted, cut short), ``type`` (its kind in
YAML's or JSON's words), ``what``, ``hint``, ``bounds``, ``limit``, ``length``."""


class Say(Protocol):
    """A reader's wording: the message for ``problem`` (a key of :data:`FIELD_WORDS`) with
    its values."""

    def __call__(self, problem: str, /, **values: Any) -> str: ...


def field_words(problem: str, /, **values: Any) -> str:
    """The readers' own wording (:data:`FIELD_WORDS`); values a message does not use are left
    out."""
    return FIELD_WORDS[problem].format(**values)


def read_str(
    errs: FieldErrors,
    base: str,
    data: Mapping[str, Any],
    key: str,
    *,
    required: bool = False,
    required_hint: str = "",
    default: str | None = None,
    pattern: re.Pattern[str] | None = None,
    what: str = "",
    max_length: int | None = None,
    say: Say = field_words,
) -> str | None:
    """A string; ``required``: present and not blank (a missing one "is required", followed by
    ``required_hint`` in brackets where given); ``max_length``: 1 to that many characters
    (``""`` is then as wrong as too long a string); ``pattern``: it must match, else it is
    reported as not ``what`` (``'X' is not a slug (a-z, 0-9, -)``)."""
    path = key_path(base, key)
    if not _given(data, key):
        if required:
            errs.add(
                path,
                say("required_hint", key=key, hint=required_hint)
                if required_hint
                else say("required", key=key),
            )
        return default
    value = data[key]
    words = {"key": key, "raw": value, "value": quote(value), "type": type_name(value)}
    if not isinstance(value, str):
        errs.add(path, say("not_string", **words))
        return default
    if required and not value.strip():
        errs.add(path, say("blank", **words))
        return default
    if max_length is not None and not 0 < len(value) <= max_length:
        errs.add(path, say("length", **words, limit=max_length, length=len(value)))
        return default
    if pattern is not None and not pattern.fullmatch(value):
        errs.add(path, say("not_matching", **words, what=what))
        return default
    return value


def read_one_of(
    errs: FieldErrors, base: str, data: Mapping[str, Any], key: str, choices: Sequence[str]
) -> str | None:
    """One of ``choices`` (``None`` if absent); anything else is reported with the choices and
    a "did you mean" (``'sometimes' is not one of when-queued, always``)."""
    if not _given(data, key):
        return None
    value = data[key]
    if not isinstance(value, str) or value not in choices:
        more = did_you_mean(str(value), choices)
        errs.add(key_path(base, key), f"{quote(value)} is not one of {', '.join(choices)}{more}")
        return None
    return value


@dataclass(frozen=True)
class _Bounds:
    """Where a number must lie (each bound ``None``: none), and how a message says so."""

    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    words: str | None = None

    def hold(self, value: float) -> bool:
        return not (
            (self.above is not None and not value > self.above)
            or (self.minimum is not None and value < self.minimum)
            or (self.maximum is not None and value > self.maximum)
        )

    def __str__(self) -> str:
        if self.words:
            return self.words
        if self.above is not None:
            return f"more than {self.above}"
        if self.minimum is not None and self.maximum is not None:
            return f"from {self.minimum} to {self.maximum}"
        if self.minimum is not None:
            return f"at least {self.minimum}"
        return f"at most {self.maximum}"


def _read_amount(
    errs: FieldErrors,
    data: Mapping[str, Any],
    key: str,
    path: str,
    bounds: _Bounds,
    what: str,
    say: Say = field_words,
    *,
    whole: bool,
    text_digits: int = 0,
) -> float | None:
    """The number at ``data[key]`` (``whole``: an int; never a bool; ``text_digits``: or a
    string of that many decimal digits at most) if it is within ``bounds``; ``None`` if
    absent or reported at ``path``."""
    if not _given(data, key):
        return None
    value = data[key]
    if isinstance(value, str) and len(value) <= text_digits and _DIGITS_RE.fullmatch(value):
        value = int(value)
    words = {"key": key, "raw": value, "value": quote(value)}
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (whole and not isinstance(value, int))
    ):
        errs.add(path, say("not_amount", **words, what=what))
        return None
    if isinstance(value, float) and not math.isfinite(value):
        # YAML's .nan/.inf, JSON's NaN: a NaN passes every bound (each comparison is false)
        errs.add(path, say("not_finite", **words))
        return None
    if not bounds.hold(value):
        errs.add(path, say("out_of_range", **words, bounds=str(bounds)))
        return None
    return value


def read_int(
    errs: FieldErrors,
    base: str,
    data: Mapping[str, Any],
    key: str,
    *,
    default: int | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    what: str = "a whole number",
    bounds: str | None = None,
    text_digits: int = 0,
    say: Say = field_words,
) -> int | None:
    """A whole number (``true`` is not one) within ``[minimum, maximum]``. A wrong type says
    "must be ``what``"; a value out of range "must be ``bounds``" (by default the bounds
    themselves: "at least 1"). ``text_digits``: a string of at most that many decimal digits
    is read as its number too (a form's fields arrive as text)."""
    within = _Bounds(minimum, maximum, words=bounds)
    path = key_path(base, key)
    value = _read_amount(
        errs, data, key, path, within, what, say, whole=True, text_digits=text_digits
    )
    return default if value is None else int(value)


def read_number(
    errs: FieldErrors,
    base: str,
    data: Mapping[str, Any],
    key: str,
    *,
    default: float | None = None,
    above: float | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    what: str = "a number",
    bounds: str | None = None,
) -> float | None:
    """A number (whole or not; ``true`` is not one) as a float, more than ``above`` and within
    ``[minimum, maximum]``; messages as :func:`read_int`'s."""
    within = _Bounds(minimum, maximum, above, bounds)
    value = _read_amount(errs, data, key, key_path(base, key), within, what, whole=False)
    return default if value is None else float(value)


def read_bool(
    errs: FieldErrors, base: str, data: Mapping[str, Any], key: str, *, default: bool
) -> bool:
    """``true`` or ``false`` (not ``1``, not ``"yes"``)."""
    if not _given(data, key):
        return default
    value = data[key]
    if not isinstance(value, bool):
        errs.add(key_path(base, key), f"must be true or false, not {quote(value)}")
        return default
    return value


def read_duration(
    errs: FieldErrors,
    base: str,
    data: Mapping[str, Any],
    key: str,
    *,
    positive: bool = False,
    minimum: timedelta | None = None,
) -> timedelta | None:
    """A duration as :func:`~jupyter_gpuaas.core.durations.parse_duration` reads it (``30m``,
    ``1h30m``); ``positive``: longer than 0; ``minimum``: at least that long."""
    if not _given(data, key):
        return None
    path = key_path(base, key)
    try:
        value = parse_duration(data[key])
    except ValueError as e:
        errs.add(path, str(e))
        return None
    if positive and value <= timedelta(0):
        errs.add(path, f"must be longer than 0 ({DURATION_HINT})")
        return None
    if minimum is not None and value < minimum:
        errs.add(path, f"must be at least {format_duration(minimum)} ({DURATION_HINT})")
        return None
    return value


def _typed_at(
    errs: FieldErrors,
    base: str,
    data: Mapping[str, Any],
    key: str,
    kind: type,
    *,
    required: bool,
    what: str,
    missing: str,
) -> tuple[str, Any]:
    """The prologue of the list and mapping readers: the path of ``data[key]`` and the value
    there if it is a ``kind``; ``None`` if absent ("is required (``missing``)" where
    ``required``) or not a ``kind`` (reported as not ``what``)."""
    path = key_path(base, key)
    if not _given(data, key):
        if required:
            errs.add(path, f"is required ({missing})")
        return path, None
    value = data[key]
    if not isinstance(value, kind):
        errs.add(path, f"must be {what}, not {type_name(value)}")
        return path, None
    return path, value


def _mappings(
    items: Iterable[tuple[str, Any]], fail: Callable[[str, Any], None]
) -> list[tuple[str, Mapping[str, Any]]]:
    """The items (with their paths) that are mappings; each other one goes to ``fail``."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for path, item in items:
        if isinstance(item, Mapping):
            out.append((path, item))
        else:
            fail(path, item)
    return out


def read_str_list(
    errs: FieldErrors,
    base: str,
    data: Mapping[str, Any],
    key: str,
    *,
    required: bool = False,
    what: str = "a list of strings",
    empty_error: str | None = None,
) -> tuple[str, ...]:
    """The distinct non-empty strings of a list (each other item is reported). ``required``:
    present and not empty; ``empty_error``: an empty list is reported with this message."""
    path, value = _typed_at(
        errs, base, data, key, list, required=required, what=what, missing="a list"
    )
    if value is None:
        return ()
    out = string_items(errs, path, value)
    if not value and (required or empty_error):
        errs.add(path, empty_error or "must not be empty")
    return tuple(out)


def read_list(
    errs: FieldErrors,
    base: str,
    data: Mapping[str, Any],
    key: str,
    *,
    required: bool = False,
    what: str = "a list",
    may_be_empty: bool = False,
) -> list[tuple[str, Any]]:
    """``(path, item)`` of each item of the list ``data[key]`` (none if absent or not a list,
    then reported as not ``what``), the path naming the item (``policies[2]``); the caller
    checks the items. ``required``: present ("is required (``what``)") and, unless
    ``may_be_empty``, not empty."""
    path, value = _typed_at(errs, base, data, key, list, required=required, what=what, missing=what)
    if value is None:
        return []
    if required and not value and not may_be_empty:
        errs.add(path, "must not be empty")
    return [(f"{path}[{i}]", item) for i, item in enumerate(value)]


def read_objects(
    errs: FieldErrors,
    base: str,
    data: Mapping[str, Any],
    key: str,
    *,
    required: bool = False,
    what: str = "a list",
    item_what: str = "a mapping",
) -> list[tuple[str, Mapping[str, Any]]]:
    """The mappings of the list ``data[key]`` with their paths, as :func:`read_list` reads it;
    each item that is not a mapping is reported as not ``item_what`` and left out."""
    return _mappings(
        read_list(errs, base, data, key, required=required, what=what),
        lambda path, item: errs.add(path, f"must be {item_what}, not {type_name(item)}"),
    )


def read_mapping(
    errs: FieldErrors,
    base: str,
    data: Mapping[str, Any],
    key: str,
    *,
    required: bool = False,
    what: str = "a mapping",
) -> Mapping[str, Any] | None:
    """A mapping (an object), or ``None`` if absent or not one (then reported as not ``what``);
    ``required``: a missing one "is required (``what``)"."""
    value: Mapping[str, Any] | None
    _, value = _typed_at(errs, base, data, key, Mapping, required=required, what=what, missing=what)
    return value


def read_entries(
    errs: FieldErrors, base: str, data: Mapping[str, Any], key: str
) -> list[tuple[str, Any, Any]]:
    """``(path, key, value)`` of each entry of the mapping ``data[key]`` (none if absent), the
    path naming the entry (``resources["nvidia.com/gpu"]``); the caller checks the entries."""
    path = key_path(base, key)
    raw = read_mapping(errs, base, data, key) or {}
    return [(f"{path}[{json.dumps(str(k))}]", k, v) for k, v in raw.items()]
