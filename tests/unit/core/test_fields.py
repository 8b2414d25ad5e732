"""The typed field readers: each returns the value or its default, and records a wrong value at
its field path instead of raising."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jupyter_gpuaas.core.fields import (
    SLUG_RE,
    FieldErrors,
    read_bool,
    read_duration,
    read_entries,
    read_int,
    read_list,
    read_mapping,
    read_number,
    read_objects,
    read_one_of,
    read_str,
    read_str_list,
)


def errors(errs: FieldErrors) -> list[str]:
    return [str(e) for e in errs.items]


def test_absent_and_none_give_the_default_without_an_error() -> None:
    errs = FieldErrors()
    for data in ({}, {"k": None}):
        assert read_str(errs, "a", data, "k", default="d") == "d"
        assert read_int(errs, "a", data, "k", default=3) == 3
        assert read_number(errs, "a", data, "k", default=0.5) == 0.5
        assert read_bool(errs, "a", data, "k", default=True) is True
        assert read_duration(errs, "a", data, "k", positive=True) is None
        assert read_str_list(errs, "a", data, "k") == ()
        assert read_mapping(errs, "a", data, "k") is None
        assert read_entries(errs, "a", data, "k") == []
        assert read_one_of(errs, "a", data, "k", ("x", "y")) is None
        assert read_list(errs, "a", data, "k") == []
        assert read_objects(errs, "a", data, "k") == []
    assert errors(errs) == []


def test_required_fields_say_so() -> None:
    errs = FieldErrors()
    assert read_str(errs, "t[0]", {}, "name", required=True) is None
    assert read_str(errs, "t[0]", {"slug": "  "}, "slug", required=True) is None
    assert read_str_list(errs, "t[0]", {}, "groups", required=True) == ()
    assert read_str_list(errs, "t[0]", {"offerings": []}, "offerings", required=True) == ()
    assert read_str(errs, "n", {}, "webhook", required=True, required_hint="the URL") is None
    assert read_mapping(errs, "", {}, "nb", required=True, what="the notebook") is None
    assert read_list(errs, "", {}, "policies", required=True, what="a list of policies") == []
    assert read_objects(errs, "", {"policies": []}, "policies", required=True) == []
    assert errors(errs) == [
        "t[0].name: is required",
        "t[0].slug: must not be empty",
        "t[0].groups: is required (a list)",
        "t[0].offerings: must not be empty",
        "n.webhook: is required (the URL)",
        "nb: is required (the notebook)",
        "policies: is required (a list of policies)",
        "policies: must not be empty",
    ]


def test_one_of_names_the_choices_and_the_nearest() -> None:
    errs = FieldErrors()
    data = {"mode": "always", "typo": "alwys", "number": 3}
    modes = ("when-queued", "always")
    assert read_one_of(errs, "p", data, "mode", modes) == "always"
    assert read_one_of(errs, "p", data, "typo", modes) is None
    assert read_one_of(errs, "p", data, "number", modes) is None
    assert errors(errs) == [
        "p.typo: 'alwys' is not one of when-queued, always (did you mean 'always'?)",
        "p.number: 3 is not one of when-queued, always",
    ]


def test_lists_and_their_objects_carry_paths() -> None:
    errs = FieldErrors()
    data = {"items": [{"a": 1}, "x", {"b": 2}], "one": {"a": 1}}
    assert read_list(errs, "m", data, "items") == [
        ("m.items[0]", {"a": 1}),
        ("m.items[1]", "x"),
        ("m.items[2]", {"b": 2}),
    ]
    assert read_objects(errs, "m", data, "items", item_what="a policy") == [
        ("m.items[0]", {"a": 1}),
        ("m.items[2]", {"b": 2}),
    ]
    assert read_objects(errs, "m", data, "one", what="a list of policies") == []
    assert errors(errs) == [
        "m.items[1]: must be a policy, not a string",
        "m.one: must be a list of policies, not a mapping",
    ]


def test_strings_are_checked_for_type_and_pattern() -> None:
    errs = FieldErrors()
    data = {"slug": "Not A Slug", "name": 7, "ok": "a-1"}
    assert read_str(errs, "", data, "slug", pattern=SLUG_RE, what="a slug") is None
    assert read_str(errs, "", data, "name", default="x") == "x"
    assert read_str(errs, "", data, "ok", pattern=SLUG_RE, what="a slug") == "a-1"
    assert errors(errs) == [
        "slug: 'Not A Slug' is not a slug",
        "name: must be a string, not a number",
    ]


def test_strings_are_checked_for_length() -> None:
    errs = FieldErrors()
    data = {"empty": "", "long": "x" * 11, "blank": " ", "ok": "x" * 10}
    assert read_str(errs, "", data, "empty", max_length=10) is None
    assert read_str(errs, "", data, "long", max_length=10) is None
    assert read_str(errs, "", data, "blank", max_length=10) == " "  # blank: only if required
    assert read_str(errs, "", data, "ok", max_length=10) == "x" * 10
    assert errors(errs) == [
        "empty: must be 1 to 10 characters long, not 0",
        "long: must be 1 to 10 characters long, not 11",
    ]


def test_a_caller_words_the_problems_itself() -> None:
    """``say`` gets the problem's name and every value; the reader keeps the path."""
    heard: list[tuple[str, dict[str, Any]]] = []

    def say(problem: str, /, **values: Any) -> str:
        heard.append((problem, values))
        return f"{values['key']} {problem}"

    errs = FieldErrors()
    data = {"s": 7, "t": "", "n": True, "m": "12"}
    assert read_str(errs, "b", {}, "r", required=True, say=say) is None
    assert read_str(errs, "b", data, "s", say=say) is None
    assert read_str(errs, "b", data, "t", max_length=5, say=say) is None
    assert read_int(errs, "b", data, "n", say=say) is None
    assert read_int(errs, "b", data, "m", maximum=9, text_digits=2, bounds="small", say=say) is None
    assert errors(errs) == [
        "b.r: r required",
        "b.s: s not_string",
        "b.t: t length",
        "b.n: n not_amount",
        "b.m: m out_of_range",
    ]
    assert heard[1][1] == {"key": "s", "raw": 7, "value": "7", "type": "a number"}
    assert heard[2][1]["limit"] == 5
    assert heard[3][1]["raw"] is True
    assert (heard[4][1]["raw"], heard[4][1]["bounds"]) == (12, "small")


@pytest.mark.parametrize(
    ("value", "kwargs", "expected", "message"),
    [
        (2, {"minimum": 1}, 2, None),
        (0, {"minimum": 1}, None, "must be at least 1, not 0"),
        (101, {"maximum": 100}, None, "must be at most 100, not 101"),
        (5, {"minimum": 0, "maximum": 3}, None, "must be from 0 to 3, not 5"),
        (True, {}, None, "must be a whole number, not True"),
        (1.5, {}, None, "must be a whole number, not 1.5"),
        ("2", {}, None, "must be a whole number, not '2'"),
        ("2", {"text_digits": 4}, 2, None),
        ("0042", {"text_digits": 4}, 42, None),
        ("12345", {"text_digits": 4}, None, "must be a whole number, not '12345'"),
        ("-1", {"text_digits": 4}, None, "must be a whole number, not '-1'"),
        (" 2", {"text_digits": 4}, None, "must be a whole number, not ' 2'"),
        ("2\n", {"text_digits": 4}, None, "must be a whole number, not '2\\n'"),
        ("", {"text_digits": 4}, None, "must be a whole number, not ''"),
        ("9", {"text_digits": 4, "maximum": 3}, None, "must be at most 3, not 9"),
        (
            -1,
            {
                "minimum": 0,
                "what": "a whole number, 0 or more",
                "bounds": "a whole number, 0 or more",
            },
            None,
            "must be a whole number, 0 or more, not -1",
        ),
    ],
)
def test_whole_numbers(
    value: Any, kwargs: dict[str, Any], expected: int | None, message: str | None
) -> None:
    errs = FieldErrors()
    assert read_int(errs, "p", {"n": value}, "n", **kwargs) == expected
    assert errors(errs) == ([f"p.n: {message}"] if message else [])


@pytest.mark.parametrize(
    ("value", "kwargs", "expected", "message"),
    [
        (0.5, {"above": 0}, 0.5, None),
        (2, {"above": 0}, 2.0, None),
        (0, {"above": 0, "what": "a number of CPU cores"}, None, "must be more than 0, not 0"),
        ("1", {"what": "a number of CPU cores"}, None, "must be a number of CPU cores, not '1'"),
        (False, {}, None, "must be a number, not False"),
        (
            150,
            {"minimum": 0, "maximum": 100, "bounds": "a percentage from 0 to 100"},
            None,
            "must be a percentage from 0 to 100, not 150",
        ),
        (-1, {"minimum": 0, "maximum": 100}, None, "must be from 0 to 100, not -1"),
    ],
)
def test_numbers(
    value: Any, kwargs: dict[str, Any], expected: float | None, message: str | None
) -> None:
    errs = FieldErrors()
    assert read_number(errs, "p", {"n": value}, "n", **kwargs) == expected
    assert errors(errs) == ([f"p.n: {message}"] if message else [])


def test_booleans_are_true_or_false_only() -> None:
    errs = FieldErrors()
    assert read_bool(errs, "", {"dry_run": False}, "dry_run", default=True) is False
    assert read_bool(errs, "", {"dry_run": "yes"}, "dry_run", default=False) is False
    assert read_bool(errs, "p", {"dry_run": 1}, "dry_run", default=True) is True
    assert errors(errs) == [
        "dry_run: must be true or false, not 'yes'",
        "p.dry_run: must be true or false, not 1",
    ]


def test_durations_are_parsed_and_bounded() -> None:
    errs = FieldErrors()
    data = {"a": "1h30m", "b": "0", "c": 30, "d": "0", "e": "30s", "f": "1m"}
    assert read_duration(errs, "", data, "a", positive=True) == timedelta(minutes=90)
    assert read_duration(errs, "", data, "b") == timedelta(0)
    assert read_duration(errs, "", data, "c") is None
    assert read_duration(errs, "", data, "d", positive=True) is None
    assert read_duration(errs, "", data, "e", minimum=timedelta(minutes=1)) is None
    assert read_duration(errs, "", data, "f", minimum=timedelta(minutes=1)) == timedelta(minutes=1)
    assert errors(errs) == [
        "c: 30 is not a duration (a number needs a unit) (use e.g. 30m, 2h)",
        "d: must be longer than 0 (use e.g. 30m, 2h)",
        "e: must be at least 1m (use e.g. 30m, 2h)",
    ]


def test_string_lists_report_each_bad_item_and_keep_the_good_ones() -> None:
    errs = FieldErrors()
    data = {"names": ["a", "", "a", 3, "b"], "one": "a", "none": []}
    assert read_str_list(errs, "m", data, "names") == ("a", "b")
    assert read_str_list(errs, "m", data, "one", what="a list of names") == ()
    assert (
        read_str_list(errs, "m", data, "none", empty_error="must not be empty (leave it out)") == ()
    )
    assert read_str_list(FieldErrors(), "m", data, "none") == ()  # empty is fine unless asked
    assert errors(errs) == [
        "m.names[1]: must be a non-empty string, not ''",
        "m.names[2]: 'a' is listed twice",
        "m.names[3]: must be a non-empty string, not 3",
        "m.one: must be a list of names, not a string",
        "m.none: must not be empty (leave it out)",
    ]


def test_mappings_and_their_entries_carry_paths() -> None:
    errs = FieldErrors()
    data = {"resources": {"nvidia.com/gpu": 1, "x": 2}, "exempt": ["alice"]}
    assert read_entries(errs, "offerings[0]", data, "resources") == [
        ('offerings[0].resources["nvidia.com/gpu"]', "nvidia.com/gpu", 1),
        ('offerings[0].resources["x"]', "x", 2),
    ]
    assert read_mapping(errs, "", data, "exempt", what="a mapping with 'users'") is None
    assert read_entries(errs, "", data, "exempt") == []
    assert errors(errs) == [
        "exempt: must be a mapping with 'users', not a list",
        "exempt: must be a mapping, not a list",
    ]


def test_what_a_reader_echoes_of_a_wrong_value_is_bounded() -> None:
    errs = FieldErrors()
    huge = list(range(1000))
    read_bool(errs, "", {"b": huge}, "b", default=False)
    read_int(errs, "", {"n": 10**500}, "n", minimum=0, maximum=1)
    read_str(errs, "", {"s": "x" * 500}, "s", pattern=SLUG_RE, what="a slug")
    assert all(len(e.message) < 100 for e in errs.items), errors(errs)
    assert errs.items[0].message == f"must be true or false, not {repr(huge)[:40]}…"
