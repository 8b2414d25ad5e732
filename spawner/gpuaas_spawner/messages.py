"""Every sentence the spawn progress page shows a data scientist, in one reviewed table.

``{name}`` fields are filled by :func:`say`. tests/unit/spawner/test_messages.py renders each
one and checks the words (no Kubernetes reasons, ISO timestamps, HTTP codes, setting names or
GPU-equivalents): changing one is a change to this table and to that test. The page template's
own words (the "Leave the queue" button and what it says after) are here too, handed to the
template by :func:`page_words`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

__all__ = ["MESSAGES", "PAGE_WORDS", "about", "page_words", "say", "waiting_words"]

MESSAGES: Mapping[str, str] = {
    # Where the spawn stands.
    "submitting": "Submitting your server to the queue",
    "queued.position": "Queued in {team}: position {position}",
    "queued.ahead": "Queued in {team}: position {position} ({ahead} ahead in the cluster queue)",
    "queued.registering": "Queued in {team}: waiting for the queue to take it in",
    "queued": "Queued in {team}: waiting for a GPU to free up",
    "queued.yields": (
        "Your last server's GPU was given to queued work when it was reclaimed; this start waits "
        "for that work to end (or for another GPU) rather than stopping it"
    ),
    "queued.whole_node": (
        "Queued in {team}: the quota is there; waiting for a whole node with room for it"
    ),
    "queued.inadmissible": (
        "Queued in {team}: the queue cannot take it in right now; an admin can see why"
    ),
    "reserved": "Admitted in {team}: quota reserved, waiting for the last checks",
    "waiting_for_node": "Admitted in {team} (quota reserved); waiting for a free node{for_what}",
    "waiting_for_node.for": " for {offering}",
    "pulling": "Node found; pulling the image and creating the container",
    "pulling.event": "Pulling the image",
    "pulling.failing": (
        "The server's image cannot be downloaded yet; retrying. If this lasts, tell an admin."
    ),
    "creating.failing": "The container cannot be created yet; retrying.",
    "starting.container": "Starting the container",
    "starting.jupyter": "Starting Jupyter",
    "ready": "Your server is ready",
    # What holds the GPU, and when it may free (from the reclaim plan).
    "hold.intro": "The GPU is in use by {holders}.",
    "hold.yours.idle": "your other server, idle {idle}",
    "hold.yours.busy": "your other server, in use",
    "hold.yours": "your other server",
    "hold.teammate.idle": "a teammate's server, idle {idle}",
    "hold.teammate.busy": "a teammate's server, in use",
    "hold.teammate": "a teammate's server",
    "hold.other.idle": "a server of {team}, idle {idle}",
    "hold.other.busy": "a server of {team}, in use",
    "hold.other": "a server of {team}",
    "hold.job.own": "a training job of your team",
    "hold.job.other": "a training job of {team}",
    "hold.being_freed": "{holder} (being freed)",
    "hold.more": "{count} more",
    "hold.and": " and ",
    "hold.comma": ", ",
    "freeing": "An idle server is being freed for you: about {duration}.",
    "freeing.now": "An idle server is being freed for you: any moment now.",
    "duration.minute": "1 min",
    "duration.minutes": "{minutes} min",
    "duration.hours": "{hours} h",
    "duration.hours_minutes": "{hours} h {minutes} min",
    "duration.under_a_minute": "under a minute",
    # How a spawn ended (also shown above the form on the next visit).
    "preempted": (
        "Your server was stopped in {team} to make room for other queued work. Your files are "
        "kept; start it again when quota is free."
    ),
    "stopped.by_queue": "The queue stopped your server; an admin can see why. Your files are kept.",
    "stopped.outside": "Your server was stopped outside JupyterHub. Your files are kept.",
    "failed.node": (
        "The node could not run your server: {refused}. This is the cluster's doing, not a "
        "setting of yours, and nothing of yours was lost. Start it again; if it happens again, "
        "tell an admin."
    ),
    "failed.stopped": "Your server stopped before it was ready. {hint}",
    "failed.exited": "Your server exited before it was ready ({exited}). {hint}",
    "hint.exited": (
        "The queue and the GPU were fine: the server itself did not start, often because of a "
        "setting or start-up file of your own (e.g. in ~/.jupyter or ~/.ipython). Fix or move it "
        "aside and start again; an admin can show you the server's log."
    ),
    "timeout.queue": (
        "Your server waited {waited} in {team}'s queue{where} without getting a GPU, the limit "
        "for a queued server. Nothing was started; try again later or choose an offering with "
        "free quota."
    ),
    "timeout.queue.where": " (position {position})",
    "timeout.start": (
        "Your server was admitted but did not become ready within {limit}: {status}. Its quota "
        "is released; start it again, and tell an admin if it happens again (the server's "
        "events say why)."
    ),
    "ended.hub_restart": (
        "Your server was waiting in {queue} when JupyterHub restarted, which ends waiting "
        "servers. Nothing of yours was lost; start it again."
    ),
    "queue.of": "{team}'s queue",
    "queue.own": "your team's queue",
    # Leaving the queue (the spawner's own stop of a server still waiting).
    "left_queue": "You left the queue; nothing was started.",
    # A spawn refused before anything is created: the form or the request (the choice itself
    # is checked in the words of jupyter_gpuaas.core.choice.CHOICE_WORDS, pinned beside these).
    "form.no_team": (
        "You are not in any team that may start GPU servers. Ask an admin to add you to a "
        "team's group."
    ),
    "form.misconfigured": "GPU servers are misconfigured; an admin has been told.",
    "form.misconfigured.page": (
        "GPU servers are misconfigured; an admin has been told (see the hub log)."
    ),
    "form.not_object": "The server's options must be an object, not {type}",
    "form.unknown_options": "Unknown option(s) {options}{more}; allowed: {allowed}",
    "form.unknown_options.more": " and {count} more",
    "form.unknown_field": "Unknown form field {field}",
    "form.field_once": "Form field {field} must be given once",
    # A start that cannot go on, for a reason of the cluster (the admin's log says which).
    "start.earlier": (
        "Your previous server is still being cleaned up by the queue; start again in a minute."
    ),
    "start.token_in_spec": (
        "Your server was not created: its settings would have carried its access token in "
        "plain text. Nothing was started; an admin can see why in the hub's log."
    ),
    "start.home_volume": (
        "The storage for your home folder could not be created, so your server cannot start: "
        "{why}. Nothing of yours was changed. Tell an admin (the volume claim {claim} says why)."
    ),
    "start.home_recreated": (
        "Your home folder's storage (volume claim {claim}) was no longer in the cluster, so a "
        "new, empty one is being made; the files of the old one are not in it. If you expected "
        "them, tell an admin."
    ),
    "start.home_gone": (
        "The storage for your home folder (volume claim {claim}) was deleted while your server "
        "was starting, so it cannot start. Start it again: a new, empty home is made. If you "
        "expected your files, tell an admin."
    ),
    "start.queue_down": (
        "The queue for GPU servers is not answering, so no server can be started or queued "
        "right now. Nothing was created. Try again in a few minutes; if it persists, tell an "
        "admin (the hub's log says why)."
    ),
    "start.cluster_down": (
        "The cluster is not answering, so no server can be started right now. Nothing of yours "
        "was lost. Try again in a few minutes; if it persists, tell an admin (the hub's log "
        "says why)."
    ),
}

PAGE_WORDS: Mapping[str, str] = {
    "leave.button": "Leave the queue",
    "leave.leaving": "Leaving the queue…",
    "leave.done": "You left the queue; nothing was started.",
    "leave.again": "Choose a GPU and start again",
    "leave.failed": "Leaving the queue did not work; try again, or reload the page.",
    "leave.hint": "Your place in the queue is kept while this page is closed.",
    "starting": "Your server is starting; it is not waiting in the queue.",
}
"""The pending page's own words (its template shows them): "Leave the queue" and its hint only
while the server waits in the queue (the progress event's phase ``queued``), "starting" once
it has left it or never queued (a move that starts at once)."""


def say(key: str, **values: Any) -> str:
    """The sentence ``key`` of :data:`MESSAGES` with its fields filled."""
    return MESSAGES[key].format(**values)


def page_words() -> dict[str, str]:
    """:data:`PAGE_WORDS` for the template (keys with ``_`` for Jinja attribute access)."""
    return {key.replace(".", "_"): text for key, text in PAGE_WORDS.items()}


def about(span: timedelta) -> str:
    """A duration as a person says it, in whole minutes ("4 min", "1 h 5 min"): the one form
    of every duration in the spawner's sentences (waits, idle times, limits)."""
    minutes = int(span.total_seconds() // 60)
    if minutes < 1:
        return say("duration.under_a_minute")
    if minutes < 60:
        return say("duration.minute") if minutes == 1 else say("duration.minutes", minutes=minutes)
    hours, rest = divmod(minutes, 60)
    if not rest:
        return say("duration.hours", hours=hours)
    return say("duration.hours_minutes", hours=hours, minutes=rest)


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _holder(
    entry: Mapping[str, Any], *, own_team: str, teams: Mapping[str, str], now: datetime
) -> str:
    team = str(entry.get("team") or "")
    name = teams.get(team, "another team")
    if entry.get("kind") == "job":
        return say("hold.job.own") if team == own_team else say("hold.job.other", team=name)
    whose = "yours" if entry.get("yours") else ("teammate" if team == own_team else "other")
    state = entry.get("state")
    since = _time(entry.get("idle_since"))
    if state == "idle" and since is not None:
        text = say(f"hold.{whose}.idle", team=name, idle=about(now - since))
    elif state == "busy":
        text = say(f"hold.{whose}.busy", team=name)
    else:
        text = say(f"hold.{whose}", team=name)
    if _time(entry.get("freed_at")) is not None:
        text = say("hold.being_freed", holder=text)
    return text


def _listed(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return say("hold.comma").join(parts[:-1]) + say("hold.and") + parts[-1]


def waiting_words(
    outlook: Mapping[str, Any], *, own_team: str, teams: Mapping[str, str], now: datetime
) -> str:
    """What holds the GPU a queued server waits for and, when the reclaim plan frees some for
    it, about when — from the outlook the gpuaas service keeps on the pod (``""``: nothing to
    say). ``own_team``: the waiting user's team (its name); ``teams``: display names by name."""
    raw = outlook.get("holders")
    holders = [h for h in raw if isinstance(h, Mapping)] if isinstance(raw, list) else []
    parts = [_holder(h, own_team=own_team, teams=teams, now=now) for h in holders]
    more = outlook.get("more")
    if isinstance(more, int) and more > 0 and parts:
        parts.append(say("hold.more", count=more))
    sentences = [say("hold.intro", holders=_listed(parts))] if parts else []
    due = _time(outlook.get("freed_at"))
    if due is not None:
        left = due - now
        sentences.append(
            say("freeing.now")
            if left < timedelta(minutes=1)
            else say("freeing", duration=about(left))
        )
    return " ".join(sentences)
