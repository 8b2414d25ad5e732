"""Every sentence the spawner shows a user — the progress page's and the form's
(gpuaas_spawner/messages.py), a refused choice's (jupyter_gpuaas.core.choice.CHOICE_WORDS,
the same for a notebook Job) and the quota headroom's on the form and in the GPU job dialog
(jupyter_gpuaas.core.headroom.HEADROOM_WORDS): each as a user reads it, pinned in
messages.json beside this test (a change to one fails here until that file is changed too: run
with UPDATE_MESSAGES=1 and review the difference), in a person's words; and the "what holds
the GPU" sentences built from the gpuaas service's outlook."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from gpuaas_spawner.messages import MESSAGES, PAGE_WORDS, about, page_words, say, waiting_words
from jupyter_gpuaas.core.choice import CHOICE_WORDS, refusal
from jupyter_gpuaas.core.headroom import HEADROOM_WORDS, headroom_words

SNAPSHOT = Path(__file__).with_name("messages.json")

SAMPLE: dict[str, Any] = {
    "team": "Team B",
    "position": 2,
    "ahead": 5,
    "offering": "NVIDIA H100",
    "for_what": " for NVIDIA H100",
    "holders": "a teammate's server, idle 4 min",
    "holder": "a teammate's server, idle 4 min",
    "idle": "4 min",
    "count": 3,
    "duration": "12 min",
    "minutes": 5,
    "hours": 2,
    "refused": "the GPU it was given was not free on the node",
    "hint": "Fix or move it aside and start again.",
    "exited": "exit code 1",
    "waited": "1 h",
    "where": " (position 3)",
    "limit": "5 min",
    "status": "Pulling the image",
    "type": "list",
    "options": "'gpus', 'node'",
    "more": " and 2 more",
    "allowed": "team, offering, count, image, size",
    "field": "'offering'",
    "why": "no room for 50Gi on the storage",
    "claim": "claim-bob",
    "queue": "Team B's queue",
}

CHOICE_SAMPLE: dict[str, Any] = {
    "key": "image",
    "type": "list",
    "value": "'pytorch-nightly'",
    "purpose": "may start GPU servers",
    "teams": "Team A, Team B",
    "low": 1,
    "high": 4,
    "offering": "NVIDIA H100",
    "allowed": "1 to 4",
    "where": "Team B",
    "did_you_mean": " (did you mean 'pytorch'?)",
    "team": "Team B",
    "why": "limit: 1 GPU server per user",
    "detail": " You already have 1; stop one to start this.",
}
CHOICE_VALUES: dict[str, dict[str, Any]] = {
    "team.not_yours": {"value": "'research'"},
    "count.not_whole_value": {"value": "'two'"},
    "count.out_of_range": {"value": 9},
    "pick.not_offered": {"where": "with NVIDIA H100"},
    "offering.unknown": {"value": "'h1OO'", "did_you_mean": " (did you mean 'h100'?)"},
    "offering.not_available": {"did_you_mean": ""},
}
"""Where a sentence reads best with values of its own (what its caller really fills in)."""

HEADROOM_SAMPLE: dict[str, Any] = {
    "team": "Team B",
    "offering": "Shared L4",
    "cap": 2,
    "noun": "GPUs",
    "have": "1.5",
    "need": "1",
    "workload": "server",
    "queued": 5,
    "n": 2,
    "units": "MIG slices",
    "what": "memory",
    "most": "64Gi",
    "count": 3,
    "free": 3,
    "total": 8,
    "article": "a",
    "unit": "quarter-L4",
    "ahead": 2,
}
HEADROOM_VALUES: dict[str, dict[str, Any]] = {
    "cap.servers": {"cap": 1, "noun": "GPU server"},
    "cap.servers.detail": {"have": 1},
    "now.free": {"units": " quarter-L4s"},
}

FORBIDDEN: list[tuple[str, re.Pattern[str]]] = [
    ("an unfilled slot", re.compile(r"\{[A-Za-z_]+\}")),
    ("an ISO timestamp", re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")),
    ("an HTTP code", re.compile(r"\bHTTP\b|\b[1-5]\d\d\b")),
    ("a setting name", re.compile(r"\bc\.[A-Z]\w+\.|GPUaaS\w*\.\w+|\b[a-z]+_[a-z_]+\b")),
    (
        "a Kubernetes word",
        re.compile(
            r"\b(Pod|pod|Workload|Kueue|namespace|nvidia\.com|ClusterQueue|LocalQueue|cohort|"
            r"scheduling gate|ImagePull\w*|Unschedulable|CreateContainer\w*)\b"
        ),
    ),
    ("GPU-equivalents", re.compile(r"GPU-eq", re.IGNORECASE)),
    ("a slug", re.compile(r"\bteam-[a-z]\b|\blocal-mig\b")),
]


def rendered() -> dict[str, str]:
    words = {key: say(key, **SAMPLE) for key in MESSAGES}
    words.update({f"page.{key}": text for key, text in PAGE_WORDS.items()})
    words.update(
        {
            f"choice.{key}": refusal(key, **{**CHOICE_SAMPLE, **CHOICE_VALUES.get(key, {})})
            for key in CHOICE_WORDS
        }
    )
    words.update(
        {
            f"headroom.{key}": headroom_words(
                key, **{**HEADROOM_SAMPLE, **HEADROOM_VALUES.get(key, {})}
            )
            for key in HEADROOM_WORDS
        }
    )
    return words


def test_the_words_match_the_reviewed_list() -> None:
    now = rendered()
    if os.environ.get("UPDATE_MESSAGES") == "1":
        SNAPSHOT.write_text(json.dumps(now, indent=2, ensure_ascii=False) + "\n")
    assert now == json.loads(SNAPSHOT.read_text())


@pytest.mark.parametrize("key", sorted(rendered()))
def test_a_persons_words(key: str) -> None:
    text = rendered()[key]
    for what, pattern in FORBIDDEN:
        assert not pattern.search(text), f"{key} shows {what}: {text!r}"


def test_the_template_gets_every_page_word() -> None:
    assert page_words() == {k.replace(".", "_"): v for k, v in PAGE_WORDS.items()}
    assert all("." not in k for k in page_words())


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "under a minute"),
        (59, "under a minute"),
        (60, "1 min"),
        (4 * 60 + 59, "4 min"),
        (3600, "1 h"),
        (3600 + 5 * 60, "1 h 5 min"),
        (26 * 3600, "26 h"),
    ],
)
def test_about(seconds: int, said: str) -> None:
    assert about(timedelta(seconds=seconds)) == said


NOW = datetime(2026, 12, 3, 17, 0, tzinfo=timezone.utc)
TEAMS = {"team-a": "Team A", "team-b": "Team B"}


def iso(delta: timedelta) -> str:
    return (NOW + delta).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def server(team: str = "team-a", **kw: Any) -> dict[str, Any]:
    entry = {
        "kind": "server",
        "team": team,
        "yours": False,
        "state": "idle",
        "idle_since": iso(-timedelta(minutes=4)),
        "freed_at": None,
    }
    entry.update(kw)
    return entry


# id, outlook, what the page says
WAITING: list[tuple[str, dict[str, Any], str]] = [
    ("nothing known", {}, ""),
    (
        "a teammate's idle server, being freed for you",
        {
            "holders": [server(freed_at=iso(timedelta(minutes=12)))],
            "freed_at": iso(timedelta(minutes=12, seconds=20)),
        },
        "The GPU is in use by a teammate's server, idle 4 min (being freed). "
        "An idle server is being freed for you: about 12 min.",
    ),
    (
        "a busy server of another team and a training Job",
        {
            "holders": [
                server("team-b", state="busy", idle_since=None),
                {"kind": "job", "team": "team-b"},
            ],
            "more": 0,
            "freed_at": None,
        },
        "The GPU is in use by a server of Team B, in use and a training job of Team B.",
    ),
    (
        "your own other server, your team's Job, and more",
        {
            "holders": [
                server(yours=True, idle_since=iso(-timedelta(hours=1, minutes=3))),
                {"kind": "job", "team": "team-a"},
            ],
            "more": 2,
        },
        "The GPU is in use by your other server, idle 1 h 3 min, a training job of your team "
        "and 2 more.",
    ),
    (
        "due any moment; an unknown team is 'another team'",
        {
            "holders": [server("team-z", state="unknown", idle_since=None)],
            "freed_at": iso(timedelta(seconds=20)),
        },
        "The GPU is in use by a server of another team. "
        "An idle server is being freed for you: any moment now.",
    ),
    (
        "damaged entries are left out",
        {
            "holders": ["x", {"kind": "server", "idle_since": "yesterday"}],
            "more": "lots",
            "freed_at": 5,
        },
        "The GPU is in use by a server of another team.",
    ),
]


@pytest.mark.parametrize(
    ("outlook", "said"), [row[1:] for row in WAITING], ids=[row[0] for row in WAITING]
)
def test_waiting_words(outlook: dict[str, Any], said: str) -> None:
    assert waiting_words(outlook, own_team="team-a", teams=TEAMS, now=NOW) == said
