"""The per-kernel outcome of a snapshot: its JSON both ways, refusals of bad payloads, and the
words of a notice."""

from __future__ import annotations

import json
import os
import re
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuaas.core.kernel_state import (
    FORMAT,
    KernelStateOutcome,
    LostVariable,
    Refused,
    check_in_home,
    check_opened,
    comes_back,
    describe,
    entries_digest,
    lost_words,
    parse_manifest,
    save_seconds,
    state_directory_in,
    state_key,
    summarise,
)

SAVED = datetime(2026, 12, 6, 14, 2, 3, 456000, tzinfo=timezone.utc)
WITH_LOSSES = KernelStateOutcome(
    kernel_id="k-1",
    notebook="work/train.ipynb",
    outcome="kept_with_losses",
    lost=(LostVariable("batches", "a generator"), LostVariable("log", "an open file")),
    bytes=1234,
    seconds=1.5,
    saved_at=SAVED,
)


def test_an_outcome_reads_back_as_it_was_written() -> None:
    payload = WITH_LOSSES.to_json()
    assert payload == {
        "kernel_id": "k-1",
        "notebook": "work/train.ipynb",
        "outcome": "kept_with_losses",
        "lost": [
            {"name": "batches", "reason": "a generator"},
            {"name": "log", "reason": "an open file"},
        ],
        "error": "",
        "bytes": 1234,
        "seconds": 1.5,
        "saved_at": "2026-12-06T14:02:03.456Z",
    }
    assert KernelStateOutcome.from_json(payload) == WITH_LOSSES
    failed = KernelStateOutcome("k-2", "", "failed", error="no free space")
    assert KernelStateOutcome.from_json(failed.to_json()) == failed


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"outcome": "saved"}, "outcome: 'saved' is not one of kept, kept_with_losses"),
        ({"kernel_id": ""}, "kernel_id: must not be empty"),
        ({"kernel_id": 7}, "kernel_id: a string, not 7"),
        ({"bytes": -1}, "bytes: a whole number of bytes"),
        ({"bytes": True}, "bytes: a whole number of bytes"),
        ({"seconds": float("nan")}, "seconds: a finite number"),
        ({"seconds": "1"}, "seconds: a number"),
        ({"saved_at": "yesterday"}, "saved_at: not an ISO 8601 time"),
        ({"saved_at": "2026-12-06T14:02:03"}, "saved_at: needs a time zone"),
        ({"lost": {"batches": "a generator"}}, "lost: a list"),
        ({"lost": ["batches"]}, "lost[0]: an object with name and reason"),
        ({"lost": [{"name": "", "reason": "x"}]}, "lost[0].name: must not be empty"),
    ],
)
def test_a_malformed_outcome_is_refused_with_the_field_and_what_it_should_be(
    change: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        KernelStateOutcome.from_json({**WITH_LOSSES.to_json(), **change})


def test_not_an_object_is_refused() -> None:
    with pytest.raises(ValueError, match="a kernel state outcome is an object, not list"):
        KernelStateOutcome.from_json([])


def test_the_notice_names_what_was_lost_and_why() -> None:
    assert describe(WITH_LOSSES) == (
        "its variables were saved, except “batches” (a generator) and “log” (an open file)"
    )
    kept = KernelStateOutcome("k", "a.ipynb", "kept")
    busy = KernelStateOutcome("k", "b.ipynb", "skipped_busy")
    failed = KernelStateOutcome("k", "", "failed", error="the kernel did not answer within 30 s")
    assert summarise([kept]) == "its variables were saved"
    assert summarise([kept, busy, failed]) == (
        "a.ipynb: its variables were saved; b.ipynb: its variables were not saved: a cell was "
        "running; kernel k: its variables could not be saved (the kernel did not answer within "
        "30 s)"
    )
    assert summarise([]) == ""


@pytest.mark.parametrize(
    "outcome",
    [
        KernelStateOutcome("k", "a.ipynb", "kept"),
        WITH_LOSSES,
        KernelStateOutcome("k", "a.ipynb", "skipped_busy"),
        KernelStateOutcome("k", "a.ipynb", "failed", error="disk full"),
    ],
)
def test_a_snapshot_is_said_in_the_past_not_as_if_restored(outcome: KernelStateOutcome) -> None:
    """The words are said when the snapshot is known, before any restore: saved,
    never "back" nor "moved"; and no Markdown, which no place that shows them renders."""
    words = summarise([outcome]) + " " + comes_back([outcome])
    assert "back," not in words
    assert "are back" not in words
    assert "moved" not in words
    assert "`" not in words


def test_when_the_variables_come_back_is_said_where_any_were_saved() -> None:
    kept = KernelStateOutcome("k", "a.ipynb", "kept")
    busy = KernelStateOutcome("k", "b.ipynb", "skipped_busy")
    assert comes_back([kept]) == "they come back when you open the notebook again"
    assert comes_back([WITH_LOSSES, busy]) == (
        "what was saved comes back when you open each notebook again"
    )
    assert comes_back([busy]) == ""
    assert comes_back([]) == ""


WORDS = json.loads((Path(__file__).with_name("kernel_state_words.json")).read_text())


@pytest.mark.parametrize("case", WORDS["lost"], ids=lambda c: f"{len(c['lost'])}-{c['named']}")
def test_lost_words_as_the_labextension_writes_them(case: dict[str, Any]) -> None:
    """One rule for names in plain text, two implementations (Python for the hub side's
    notices, TypeScript for JupyterLab's): both read this file's cases
    (labextension/test/kernelState.test.ts reads it too)."""
    lost = [LostVariable(v["name"], v["reason"]) for v in case["lost"]]
    assert lost_words(lost, named=case["named"]) == case["words"]


def test_many_losses_are_counted_after_the_first_five() -> None:
    lost = tuple(LostVariable(f"g{i}", "a generator") for i in range(7))
    words = describe(KernelStateOutcome("k", "a.ipynb", "kept_with_losses", lost=lost))
    assert words.endswith("“g4” (a generator) and 2 more")


def test_one_snapshot_per_notebook_path_with_a_readable_name() -> None:
    a, b = state_key("work/train.ipynb", "k1"), state_key("other/train.ipynb", "k1")
    assert a.startswith("train.ipynb-")
    assert b.startswith("train.ipynb-")
    assert a != b
    assert state_key("work/train.ipynb", "k2") == a  # the notebook's, not the kernel's
    assert state_key("../../x y.ipynb", "k").startswith("x_y.ipynb-")
    assert "/" not in state_key("a/b/../../c.ipynb", "k")
    assert state_key("", "3f1c-ab/..") == "kernel-3f1c-ab"


def test_the_state_folder_is_named_in_the_home_and_must_resolve_into_it() -> None:
    """The pure halves of the folder's check (the edge resolves the links between them:
    tests/unit/statefiles)."""
    home = Path("/home/jovyan")
    assert state_directory_in("~/.jupyter-gpuaas/s", home) == home / ".jupyter-gpuaas" / "s"
    assert state_directory_in("rel/s", home) == home / "rel" / "s"
    assert state_directory_in("/tmp/elsewhere", home) == Path("/tmp/elsewhere")
    assert check_in_home(home / "s", home, "~/s") == home / "s"
    with pytest.raises(ValueError, match="outside your home"):
        check_in_home(Path("/tmp/elsewhere"), home, "/tmp/elsewhere")


def test_a_long_error_is_capped_where_it_is_sent() -> None:
    """A kernel's exception message of any length: the payload carries at most what reading it
    back (and the service's document) accepts, so the server's activity reports are not refused
    for it, report after report."""
    failed = KernelStateOutcome("k1", "a.ipynb", "failed", error="MemoryError: " + "x" * 5000)
    sent = failed.to_json()
    assert len(sent["error"]) == 2000
    assert sent["error"].startswith("MemoryError: xxx")
    assert sent["error"].endswith("…")
    assert KernelStateOutcome.from_json(sent).error == sent["error"]


def test_the_save_time_said_before_a_reclaim_grows_with_the_size() -> None:
    """What the sidebar shows beside the reclaim's wait: a fixed cost, then the size at the
    assumed rate (400 MB/s); nothing to save is the fixed cost alone."""
    assert save_seconds(0) == 0.5
    assert save_seconds(-1) == 0.5
    assert save_seconds(4_000_000_000) == pytest.approx(10.5)
    assert save_seconds(20 << 30) == pytest.approx(0.5 + (20 << 30) / 400e6)  # about 54 s


def _status(mode: int, uid: int) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, 0, 10, 0, 0, 0))


def test_a_file_as_opened_must_be_a_plain_file_of_this_user_written_by_no_one_else() -> None:
    """The pure check of what the reader's ``fstat`` said (jupyter_gpuaas.statefiles reads)."""
    check_opened(_status(stat.S_IFREG | 0o600, 1000), 1000, "manifest", "a.json")
    for mode, uid, said in [
        (stat.S_IFIFO | 0o600, 1000, "is not a plain file"),
        (stat.S_IFREG | 0o600, 0, "belongs to user id 0, not to you (1000)"),
        (stat.S_IFREG | 0o620, 1000, "can be written by others"),
        (stat.S_IFREG | 0o602, 1000, "can be written by others"),
    ]:
        with pytest.raises(Refused, match=re.escape(said)):
            check_opened(_status(mode, uid), 1000, "manifest", "a.json")


def test_a_manifest_is_read_as_this_users_own_and_names_its_data_beside_it() -> None:
    entries = [{"name": "a", "offset": 0, "length": 3}]
    fields = {
        "format": FORMAT,
        "format_version": 2,
        "owner_uid": 1000,
        "data": "a-1.x.data",
        "variables": entries,
        "sha256": entries_digest(entries),
    }
    assert parse_manifest(json.dumps(fields).encode(), 1000) == (fields, "a-1.x.data")
    with pytest.raises(Refused, match="written by user id 1000, not by you"):
        parse_manifest(json.dumps(fields).encode(), 1001)
    with pytest.raises(Refused, match="names no data file beside it"):
        parse_manifest(json.dumps({**fields, "data": "../x"}).encode(), 1000)
    with pytest.raises(Refused, match="not JSON"):
        parse_manifest(b"{", 1000)
