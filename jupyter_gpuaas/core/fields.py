"""Field-path validation: the one way configuration and payloads report what is wrong (pure).

The catalog, the reclaim policy, the activity payload and the ``--explain`` snapshot are
checked with these helpers, so that every error names its field the same way
(``offerings[2].resources["nvidia.com/gpu"]``), every problem is listed at once, and a
misspelt key or name gets a "did you mean".
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DNS_SUBDOMAIN_RE",
    "LABEL_VALUE_RE",
    "NAME_RE",
    "SLUG_RE",
    "FieldError",
    "FieldErrors",
    "did_you_mean",
    "is_qualified_name",
    "key_path",
    "object_items",
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
    if _IDENTIFIER_RE.match(key):
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
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN_RE.match(prefix)):
        return False
    return bool(NAME_RE.match(part))


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
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Mapping):
            out.append((f"{path}[{i}]", item))
        else:
            fail(f"{path}[{i}]", "must be an object")
    return out


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
