"""Bounded parsing of outside input: YAML and JSON text → plain data, or one :class:`ParseError`
with a field path (pure).

What someone else wrote (a pasted or mounted policy, a catalog file, a request body) is held to
bounds that are checked *before* anything is built from it, so no input costs more than its
bounds allow:

- its size in bytes (``max_bytes``), and UTF-8 (what JSON and YAML files are);
- its nesting depth (``max_depth``): deeper documents overflow the recursion of the parsers and
  of every later walk over the data, a 500 where a 400 is owed;
- for YAML, the number of values and the characters of text once aliases are expanded
  (``max_nodes``; :data:`EXPANSION` times ``max_bytes``): ~400 bytes of nested aliases
  (``&a [*b, *b, ...]``) stand for billions of values, and 9,000 aliases of one long string for
  50 MB of text, which any later walk — a check, an error that quotes it, an answer's JSON —
  would expand. Aliases within the bounds still work; an alias to the node it is part of (a
  recursive document) is refused.

Errors quote at most :data:`EXCERPT_CHARS` characters of any part of the input (PyYAML's own
messages quote whole lines, which may be the whole document).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import Node, ScalarNode

from jupyter_gpuaas.core.fields import key_path

__all__ = [
    "EXCERPT_CHARS",
    "EXPANSION",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_NODES",
    "ParseError",
    "excerpt",
    "load_json",
    "load_yaml",
    "read_yaml_file",
]

MAX_BYTES = 1024 * 1024
"""Default size bound of a document (1 MiB)."""
MAX_DEPTH = 64
"""Default bound on nesting (mappings and lists inside each other)."""
MAX_NODES = 100_000
"""Default bound on a YAML document's nodes once its aliases are expanded."""
EXPANSION = 4
"""A YAML document's text once its aliases are expanded: at most this many times ``max_bytes``."""
EXCERPT_CHARS = 40
"""The most characters of the input an error quotes at once."""
_MESSAGE_CHARS = 120
"""The most characters of a parser's own message an error passes on (it may quote the input)."""
_PATH_SEGMENTS = 8
"""The most segments of a path an error names (the first and last few of a deeper one)."""


class ParseError(ValueError):
    """The text is not a document within its bounds: ``path`` says where (``(text)``, the whole
    document, or the field path of the part too deep), ``message`` what is wrong."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def excerpt(value: object, limit: int = EXCERPT_CHARS, *, end: bool = False) -> str:
    """``value`` as an error or a log line quotes it: a string's first ``limit`` characters
    (``repr``; with ``end``, its last ones, as a log's tail is quoted), any other value's
    ``repr`` cut to ``limit`` characters; ``…`` where something was cut. ``repr`` escapes every
    character that is not printable (line breaks, terminal escapes, other controls), so an
    excerpt is one line of at most ``10 * limit + 3`` characters whatever it quotes."""
    if isinstance(value, str):
        limit = max(limit, 0)
        cut = "…" if len(value) > limit else ""
        if end:
            return cut + repr(value[len(value) - limit :])
        return repr(value[:limit]) + cut
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _segment_path(segments: list[str | int], root: str) -> str:
    """``root`` followed by the segments (keys, list indices), at most :data:`_PATH_SEGMENTS` of
    them named and every key cut to an excerpt."""
    shown: list[str | int | None] = list(segments)
    if len(shown) > _PATH_SEGMENTS:
        head = _PATH_SEGMENTS // 2
        shown = [*shown[:head], None, *shown[-(_PATH_SEGMENTS - head) :]]
    out = root
    for seg in shown:
        if seg is None:
            out += "…"
        elif isinstance(seg, int):
            out += f"[{seg}]"
        else:
            key = seg if len(seg) <= EXCERPT_CHARS else seg[:EXCERPT_CHARS] + "…"
            out = key_path(out, key)
    return out


def _text(data: str | bytes, path: str, max_bytes: int) -> str:
    """The document as text: within ``max_bytes``, UTF-8."""
    if isinstance(data, str):
        if len(data) > max_bytes:  # at least that many bytes: not worth encoding
            raise ParseError(path, f"more than the {max_bytes} bytes allowed")
        try:
            size = len(data.encode("utf-8"))
        except UnicodeEncodeError as e:
            raise ParseError(path, f"not UTF-8 text (character {e.start})") from None
        if size > max_bytes:
            raise ParseError(path, f"{size} bytes, more than the {max_bytes} allowed")
        return data
    if len(data) > max_bytes:
        raise ParseError(path, f"{len(data)} bytes, more than the {max_bytes} allowed")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParseError(path, f"not UTF-8 text (byte {e.start}: {data[e.start]:#04x})") from None


# --------------------------------------------------------------------------- JSON

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]', re.DOTALL)
_BRACKETS = re.compile(r"[^\[\]{}]+")


def _json_depth(text: str) -> int:
    """How deep the brackets nest, strings left out (a fast first look; the text may be
    invalid JSON, which :func:`json.loads` then says)."""
    brackets = _BRACKETS.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


def _json_too_deep_at(text: str, max_depth: int) -> list[str | int]:
    """The keys and indices down to the first container nested deeper than ``max_depth``."""
    stack: list[list[Any]] = []  # [kind, key or index, expecting a key]
    for match in _JSON_TOKEN.finditer(text):
        tok = match.group()
        if tok in "[{":
            if len(stack) >= max_depth:
                break
            stack.append(["[", 0, False] if tok == "[" else ["{", "", True])
        elif stack:
            _json_step(stack[-1], tok, stack)
    return [seg for _, seg, _ in stack]


def _json_step(top: list[Any], tok: str, stack: list[list[Any]]) -> None:
    """Follow one token other than an opening bracket in the innermost container ``top``."""
    if tok in "]}":
        stack.pop()
    elif tok == ",":
        if top[0] == "[":
            top[1] += 1
        else:
            top[2] = True
    elif tok == ":":
        top[2] = False
    elif top[0] == "{" and top[2]:
        try:
            top[1] = str(json.loads(tok))
        except ValueError:
            top[1] = tok[1:-1]


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {excerpt(text)} is out of range")
    return value


def load_json(
    data: str | bytes,
    *,
    path: str = "(body)",
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    empty: Any = None,
) -> Any:
    """JSON text → plain data, or :class:`ParseError`. ``NaN``, ``Infinity`` and numbers out of
    a float's range are refused (JSON has none); an empty body is ``empty``."""
    text = _text(data, path, max_bytes)
    if not text.strip():
        return empty
    if _json_depth(text) > max_depth:
        where = _segment_path(_json_too_deep_at(text, max_depth), path)
        raise ParseError(where, f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as e:
        raise ParseError(
            path, f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        ) from None
    except (ValueError, RecursionError) as e:  # a number's digits over the int limit, ...
        raise ParseError(path, f"not valid JSON: {str(e)[:_MESSAGE_CHARS]}") from None


# --------------------------------------------------------------------------- YAML


@dataclass(frozen=True)
class _Bounds:
    path: str
    max_depth: int
    max_nodes: int
    max_chars: int


class _BoundedLoader(yaml.SafeLoader):
    """A SafeLoader that counts and bounds while it composes, before anything is constructed.

    Anchor names are unique in a document (PyYAML refuses a second ``&name``), so they identify
    the nodes aliases stand for."""

    def __init__(self, stream: str, bounds: _Bounds) -> None:
        super().__init__(stream)
        self.bounds = bounds
        self.bound_nodes = 0
        self.bound_chars = 0
        self.bound_path: list[str | int] = []
        # anchor -> its node's expanded size: (values, characters of scalar text)
        self.bound_sizes: dict[str, tuple[int, int]] = {}
        self.bound_open: set[str] = set()  # anchors of the nodes being composed

    def _refuse(self, message: str) -> ParseError:
        return ParseError(_segment_path(self.bound_path, self.bounds.path), message)

    def _count(self, nodes: int, chars: int) -> None:
        self.bound_nodes += nodes
        self.bound_chars += chars
        if self.bound_nodes > self.bounds.max_nodes:
            raise self._refuse(
                f"more than {self.bounds.max_nodes} values once its aliases (*name) are expanded"
            )
        if self.bound_chars > self.bounds.max_chars:
            raise self._refuse(
                f"more than {self.bounds.max_chars} characters once its aliases (*name) are"
                " expanded"
            )

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        # a mapping's key (index None) is named by the mapping's path
        segment: str | int | None = None
        if isinstance(index, int):
            segment = index
        elif isinstance(index, Node):
            segment = str(index.value) if isinstance(index, ScalarNode) else "(key)"
        if segment is not None:
            self.bound_path.append(segment)
        try:
            return self._compose_bounded(parent, index)
        finally:
            if segment is not None:
                self.bound_path.pop()

    def _compose_bounded(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        anchor: str | None = event.anchor
        if self.check_event(AliasEvent) and anchor is not None:
            if anchor in self.bound_open:
                raise self._refuse(
                    f"the alias *{anchor[:EXCERPT_CHARS]} stands for a value it is part of"
                )
            self._count(*self.bound_sizes.get(anchor, (1, 0)))
            return super().compose_node(parent, index)
        if len(self.bound_path) > self.bounds.max_depth:
            raise self._refuse(f"nested deeper than {self.bounds.max_depth} levels")
        before = (self.bound_nodes, self.bound_chars)
        self._count(1, len(getattr(event, "value", "") or ""))
        if anchor is not None:
            self.bound_open.add(anchor)
        node = super().compose_node(parent, index)
        if anchor is not None:
            self.bound_open.discard(anchor)
            self.bound_sizes[anchor] = (
                self.bound_nodes - before[0],
                self.bound_chars - before[1],
            )
        return node


def _yaml_error(path: str, e: Exception) -> ParseError:
    """A PyYAML error in our words: its problem and where, never its quoted lines."""
    if isinstance(e, yaml.reader.ReaderError):
        return ParseError(
            path,
            f"not valid YAML: the character {e.character:#x} (position {e.position}) is not"
            " allowed in YAML",
        )
    problem = getattr(e, "problem", None) or getattr(e, "context", None) or type(e).__name__
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return ParseError(path, f"not valid YAML: {str(problem)[:_MESSAGE_CHARS]}{where}")


def load_yaml(
    data: str | bytes,
    *,
    path: str = "(text)",
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
) -> Any:
    """One YAML document → plain data (``yaml.safe_load``'s types), or :class:`ParseError`."""
    text = _text(data, path, max_bytes)
    try:
        bounds = _Bounds(path, max_depth, max_nodes, EXPANSION * max_bytes)
        loader = _BoundedLoader(text, bounds)  # checks the characters
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    try:
        return loader.get_single_data()
    except ParseError:
        raise
    except yaml.YAMLError as e:
        raise _yaml_error(path, e) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as e:
        # a constructor's own failure: an int over the digit limit, a date out of range,
        # an unhashable key
        raise ParseError(path, f"not usable YAML: {str(e)[:_MESSAGE_CHARS]}") from None
    finally:
        loader.dispose()


def read_yaml_file(
    file: str,
    *,
    path: str | None = None,
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    max_nodes: int = MAX_NODES,
) -> Any:
    """A YAML file → plain data; :class:`ParseError` (at ``path``, the file's name by default)
    for anything about its content, :class:`OSError` when it cannot be read. Reads at most
    ``max_bytes`` + 1 bytes."""
    with open(file, "rb") as f:
        raw = f.read(max_bytes + 1)
    return load_yaml(
        raw, path=path or file, max_bytes=max_bytes, max_depth=max_depth, max_nodes=max_nodes
    )
