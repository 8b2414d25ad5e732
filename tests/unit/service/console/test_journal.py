"""The console's journal: regret, and its text as kept in its ConfigMap (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from fractions import Fraction

import pytest

from gpuaas_service.console.journal import (
    Entry,
    Journal,
    journal_from_text,
    journal_to_text,
)
from gpuaas_service.reclaim.idleness import State
from tests.support.console_samples import T0, wb


def test_the_journal_text_is_bounded_and_keeps_the_newest() -> None:
    entries = [
        Entry(event="warn", at=T0 + timedelta(seconds=i), user=f"u{i}", reason="x" * 200)
        for i in range(100)
    ]
    text = journal_to_text(entries, max_bytes=4096)
    assert len(text.encode()) <= 4096
    back = journal_from_text(text)
    assert 5 < len(back) < 100
    assert back == entries[-len(back) :]
    full = journal_from_text(journal_to_text(entries))
    assert full == entries
    with pytest.raises(ValueError, match="version 1"):
        journal_from_text('{"entries": []}')
    with pytest.raises(ValueError, match="without its time"):
        journal_from_text('{"version": 1, "entries": [{"event": "warn"}]}')


def test_journal_regret_within_the_window() -> None:
    j = Journal()
    j.record(Entry(event="reclaim", at=T0, user="alice"))
    j.record(Entry(event="reclaim", at=T0, user="bob"))
    j.record(Entry(event="warn", at=T0, user="carol"))
    later = wb("alice", "team-a", State.BUSY, Fraction(1, 7))
    later = replace(later, started_at=T0 + timedelta(minutes=20))
    bob = wb("bob", "team-a", State.BUSY, Fraction(1, 7))
    bob = replace(bob, started_at=T0 + timedelta(hours=3))
    j.observe([later])
    j.observe([bob])
    hour = timedelta(hours=1)
    assert j.regret(hour) == {"reclaims": 2, "returned_within_window": 1, "window_seconds": 3600.0}
    rows = {(e["event"], e["user"]): e for e in j.recent(hour)}
    assert rows[("reclaim", "alice")]["returned_after_seconds"] == 1200
    assert rows[("reclaim", "alice")]["regret"] is True
    assert rows[("reclaim", "bob")]["regret"] is False
    with pytest.raises(ValueError, match="unknown journal event"):
        j.record(Entry(event="nap", at=T0))


def test_reclaims_by_team_counts_a_days_reclaims_without_dry_runs() -> None:
    journal = Journal()
    for entry in [
        Entry(event="reclaim", at=T0, user="a", team="team-a"),
        Entry(event="reclaim", at=T0, user="b", team="team-a"),
        Entry(event="reclaim", at=T0, user="c", team=""),
        Entry(event="reclaim", at=T0, user="d", team="team-b", dry_run=True),
        Entry(event="reclaim", at=T0 - timedelta(days=1), user="e", team="team-b"),
        Entry(event="warn", at=T0, user="f", team="team-b"),
    ]:
        journal.record(entry)
    assert journal.reclaims_by_team(T0.date()) == {"team-a": 2, "-": 1}
