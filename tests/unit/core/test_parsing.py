"""Bounded YAML and JSON parsing (jupyter_gpuaas/core/parsing.py): every bound holds before
anything is built, and every refusal is a ParseError with a path and a short message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jupyter_gpuaas.core.parsing import (
    EXCERPT_CHARS,
    ParseError,
    excerpt,
    load_json,
    load_yaml,
    read_yaml_file,
)


def alias_bomb(levels: int, width: int = 9) -> str:
    """``levels`` lists of ``width`` aliases to the one before: ``width ** levels`` values."""
    refs = ",".join(["x"] * width)
    lines = [f"l0: &l0 [{refs}]"]
    for n in range(1, levels):
        refs = ",".join([f"*l{n - 1}"] * width)
        lines.append(f"l{n}: &l{n} [{refs}]")
    return "\n".join(lines) + "\n"


def refused(call: object, *args: object, **kwargs: object) -> ParseError:
    assert callable(call)
    with pytest.raises(ParseError) as err:
        call(*args, **kwargs)
    return err.value


def test_an_alias_bomb_is_refused_before_it_is_expanded() -> None:
    bomb = alias_bomb(7)  # 9**7 = 4.8 million values in about 400 bytes
    assert len(bomb) < 450
    err = refused(load_yaml, bomb)
    assert err.message == "more than 100000 values once its aliases (*name) are expanded"
    assert err.path.startswith("(text).l")  # where the count ran over
    assert len(str(err)) < 200
    # the same text through PyYAML alone is accepted: the bound is ours
    assert isinstance(yaml.safe_load(alias_bomb(4)), dict)


def test_aliases_within_the_bound_and_merge_keys_still_work() -> None:
    text = "base: &base {cpu: 1, memory: 2Gi}\nsmall: *base\nlarge: {<<: *base, cpu: 4}\n"
    assert load_yaml(text) == yaml.safe_load(text)
    assert load_yaml(alias_bomb(3)) == yaml.safe_load(alias_bomb(3))  # 729 values
    err = refused(load_yaml, alias_bomb(3), max_nodes=500)
    assert "more than 500 values" in err.message


def test_an_alias_to_its_own_ancestor_is_refused() -> None:
    err = refused(load_yaml, "a: &loop [1, *loop]")
    assert err.path == "(text).a[1]"
    assert "*loop" in err.message


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("[" * 100 + "]" * 100, "(text)[0][0][0][0]…[0][0][0][0]"),
        ("teams: {a: " + "{b: " * 70 + "1" + "}" * 70 + "}", "(text).teams.a.b.b….b.b.b.b"),
        ("- " * 80 + "x", "(text)[0][0][0][0]…[0][0][0][0]"),
    ],
)
def test_deep_yaml_is_a_field_error_not_a_recursion_error(text: str, path: str) -> None:
    err = refused(load_yaml, text)
    assert err.path == path
    assert err.message == "nested deeper than 64 levels"


def test_yaml_deeper_than_the_recursion_limit_is_a_parse_error() -> None:
    deep = "[" * 2000 + "]" * 2000
    with pytest.raises(RecursionError):  # what PyYAML alone does
        yaml.safe_load(deep)
    assert refused(load_yaml, deep).message == "nested deeper than 64 levels"


def test_deep_json_names_the_keys_down_to_where_it_is_too_deep() -> None:
    body = '{"cells": [{"outputs": [' + "[" * 70 + "]" * 70 + "]}]}"
    err = refused(load_json, body)
    assert err.path == "(body).cells[0].outputs[0]…[0][0][0][0]"
    assert err.message == "nested deeper than 64 levels"
    # brackets inside strings are text, not nesting
    inside = json.dumps({"text": "[" * 1000})
    assert load_json(inside) == {"text": "[" * 1000}
    # a key with odd characters is quoted as the field helpers quote it, cut to an excerpt
    odd = json.dumps({"a b" * 30: [[[[]]]]})
    err = refused(load_json, odd, max_depth=3)
    assert err.path.startswith('(body)["a ba b')
    assert len(err.path) < 2 * EXCERPT_CHARS + 20
    with pytest.raises(RecursionError):
        json.loads("[" * 100_000 + "]" * 100_000)
    assert refused(load_json, "[" * 100_000 + "]" * 100_000).path.startswith("(body)[0]")


def test_sizes_are_checked_on_the_encoded_text() -> None:
    assert load_yaml("a: 1", max_bytes=4) == {"a": 1}
    err = refused(load_yaml, "a: é", max_bytes=4)  # 5 bytes in UTF-8
    assert err.message == "5 bytes, more than the 4 allowed"
    assert refused(load_json, b"[1, 2]", max_bytes=5).message == (
        "6 bytes, more than the 5 allowed"
    )
    assert refused(load_json, "x" * 100, max_bytes=10).message.startswith("more than the 10")


def test_text_that_is_not_utf8_is_a_parse_error() -> None:
    err = refused(load_yaml, b"# caf\xe9\npolicies: []\n")
    assert err.message == "not UTF-8 text (byte 5: 0xe9)"
    assert refused(load_json, b'{"a": "\xff"}').message.startswith("not UTF-8")
    assert refused(load_json, '"\ud800"'.encode("utf-8", "surrogatepass")).path == "(body)"
    assert refused(load_yaml, "a: \ud800").message.startswith("not UTF-8")


def test_errors_quote_a_bounded_excerpt_of_a_long_line() -> None:
    long_line = "policies: [" + "x, " * 3000 + "}"
    err = refused(load_yaml, long_line)
    assert len(str(err)) < 250
    assert "line 1" in err.message
    unknown = "a: *" + "n" * 5000
    assert len(str(refused(load_yaml, unknown))) < 250
    assert excerpt("abc") == "'abc'"
    assert excerpt("x" * 100) == repr("x" * EXCERPT_CHARS) + "…"
    assert excerpt([1, 2]) == "[1, 2]"
    assert excerpt(list(range(100))) == repr(list(range(100)))[:EXCERPT_CHARS] + "…"


def test_a_logs_tail_is_quoted_from_its_end_on_one_line() -> None:
    assert excerpt("abc", 10, end=True) == "'abc'"
    assert excerpt("a\nb\x1b[31mc" * 10, 5, end=True) == "…'[31mc'"
    assert excerpt("head" + "x" * 100 + "\nlast\r\n", 8, end=True) == "…'x\\nlast\\r\\n'"
    assert excerpt("abc", 0, end=True) == "…''"
    every = "".join(map(chr, range(0x2100))) + "\u2028\u202e\U000e0001"
    for quoted in (excerpt(every, len(every)), excerpt(every, 50, end=True)):
        assert quoted.isprintable()  # no control, line or paragraph separator, bidi override


def test_json_has_no_nan_infinity_or_numbers_out_of_range() -> None:
    for text in ("NaN", "[Infinity]", '{"a": -Infinity}', "1e999", "[-1e400]"):
        err = refused(load_json, text)
        assert err.path == "(body)", text
    assert "digits" in refused(load_json, "1" * 5000).message
    assert "digits" in refused(load_yaml, "a: " + "1" * 5000).message
    assert load_json("1e308") == 1e308
    assert load_json("") is None
    assert load_json(b"  ", empty={}) == {}


def test_what_pyyaml_refuses_is_said_with_its_line() -> None:
    err = refused(load_yaml, "a: 1\n b: : 2\n")
    assert err.message.startswith("not valid YAML: ")
    assert "(line 2, column" in err.message
    assert "unhashable" in refused(load_yaml, "{[1]: 2}").message
    assert refused(load_yaml, "a: 2001-13-45").message.startswith("not usable YAML: month")
    assert refused(load_yaml, "---\na: 1\n---\nb: 2\n").message.startswith("not valid YAML")
    # python-specific tags are as refused as with safe_load
    assert refused(load_yaml, "!!python/object:os.system {}").message.startswith("not valid")


def test_a_file_is_read_only_up_to_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("policies: []\n")
    assert read_yaml_file(str(path)) == {"policies": []}
    path.write_bytes(b"a: 1\n" * 1000)
    err = refused(read_yaml_file, str(path), max_bytes=100)
    assert err.path == str(path)
    assert err.message == "101 bytes, more than the 100 allowed"  # read no further
    path.write_bytes(b"# \xe9\n")
    assert refused(read_yaml_file, str(path), path="policy").path == "policy"
    with pytest.raises(FileNotFoundError):
        read_yaml_file(str(tmp_path / "missing.yaml"))


def test_characters_yaml_does_not_allow_are_a_parse_error() -> None:
    err = refused(load_yaml, "a: \x1f")
    assert err.message == ("not valid YAML: the character 0x1f (position 3) is not allowed in YAML")


def test_a_catalog_file_is_read_within_bounds(tmp_path: Path) -> None:
    """The catalog's file goes through the same loader: its problems are CatalogErrors with a
    path, never a RecursionError or a UnicodeDecodeError."""
    from jupyter_gpuaas.core.catalog import CatalogError, load_catalog_file

    path = tmp_path / "catalog.yaml"
    for content, message in (
        (b"# caf\xe9\nofferings: []\n", "not UTF-8 text (byte 5: 0xe9)"),
        (b"offerings: " + b"[" * 3000 + b"]" * 3000, "nested deeper than 64 levels"),
        (alias_bomb(7).encode(), "once its aliases (*name) are expanded"),
    ):
        path.write_bytes(content)
        with pytest.raises(CatalogError) as err:
            load_catalog_file(str(path))
        (error,) = err.value.errors
        assert error.path.startswith(str(path))
        assert message in error.message


def test_aliases_of_long_text_are_bounded_by_the_text_they_stand_for() -> None:
    """Few values, much text: 100 aliases of a 1,000-character string in 1.3 KB."""
    refs = ", ".join(["*a"] * 100)
    text = f"a: &a {'x' * 1000}\nb: [{refs}]\n"
    assert len(load_yaml(text, max_bytes=30_000)["b"]) == 100  # 101,000 characters in all
    err = refused(load_yaml, text, max_bytes=20_000)
    assert err.message == "more than 80000 characters once its aliases (*name) are expanded"
    assert err.path == "(text).b[78]"  # 1,000 + 79 × 1,000 + the keys: past 80,000
