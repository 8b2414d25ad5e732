"""Where a spawn stands, in words a person waiting for a GPU understands. Pure.

:func:`spawn_status` reads the pod, its Kueue Workload and its visibility-API entry and names
the phase: queued (with the position), quota reserved, waiting for a node, pulling the image,
starting, ready — or preempted / stopped. Quota being free does not mean a node is, so each
step is its own phase. :func:`check_deadline` decides the spawner's own timeouts: waiting in the
queue is bounded by the queue timeout, and the ordinary start timeout only begins once Kueue
has admitted the pod.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from gpuaas_spawner.messages import MESSAGES, about, say, waiting_words
from jupyter_gpuaas.core.activity import KernelStateReport, read_kernel_state_mark
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.kernel_state import comes_back, describe, summarise
from jupyter_gpuaas.core.kueue import (
    ADMISSION_GATE,
    TERMINATION_TARGET,
    PendingWorkloadInfo,
    WorkloadInfo,
    as_list,
    as_mapping,
    parse_time,
    topology_wait,
)
from jupyter_gpuaas.core.labels import (
    RECLAIM_OUTLOOK,
    RECLAIMED_AT,
    RECLAIMED_FOR,
    RECLAIMED_FOR_TEAM,
    RECLAIMED_KERNEL_STATE,
    WARNED_AT,
)
from jupyter_gpuaas.core.parsing import ParseError, excerpt, load_json

__all__ = [
    "EXITED_HINT",
    "Deadline",
    "NoticePart",
    "Phase",
    "SpawnStatus",
    "check_deadline",
    "home_volume_failure",
    "is_gated",
    "notice_parts",
    "reclaim_notice",
    "spawn_status",
    "time_mark",
]


class Phase(str, enum.Enum):
    SUBMITTING = "submitting"
    QUEUED = "queued"
    QUOTA_RESERVED = "quota-reserved"
    WAITING_FOR_NODE = "waiting-for-node"
    PULLING = "pulling"
    STARTING = "starting"
    READY = "ready"
    PREEMPTED = "preempted"
    STOPPED = "stopped"
    FAILED = "failed"


_PROGRESS = {
    Phase.SUBMITTING: 5,
    Phase.QUEUED: 10,
    Phase.QUOTA_RESERVED: 30,
    Phase.WAITING_FOR_NODE: 45,
    Phase.PULLING: 60,
    Phase.STARTING: 80,
    Phase.READY: 95,
    Phase.PREEMPTED: 100,
    Phase.STOPPED: 100,
    Phase.FAILED: 100,
}
_IN_QUEUE = {Phase.SUBMITTING, Phase.QUEUED, Phase.QUOTA_RESERVED}
_TERMINAL = {Phase.PREEMPTED, Phase.STOPPED, Phase.FAILED}
_IMAGE_ERRORS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}


@dataclass(frozen=True)
class SpawnStatus:
    phase: Phase
    message: str
    position: int | None = None
    """1-based position in the team's queue, when Kueue's visibility API tells it."""
    ahead_in_cluster_queue: int | None = None
    failure_reason: str = ""
    """For a failed spawn, the reason for the hub's metrics when it is not the server's own."""

    @property
    def progress(self) -> int:
        return _PROGRESS[self.phase]

    @property
    def in_queue(self) -> bool:
        """Still waiting for Kueue (counts against the queue timeout, not the start timeout)."""
        return self.phase in _IN_QUEUE

    @property
    def admitted(self) -> bool:
        return not self.in_queue and self.phase not in _TERMINAL

    @property
    def terminal(self) -> bool:
        return self.phase in _TERMINAL

    def event(self) -> dict[str, Any]:
        """The dict ``Spawner.progress()`` yields."""
        return {"progress": self.progress, "message": self.message, "phase": self.phase.value}


def _pod_condition(pod: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    for cond in as_list(as_mapping(pod.get("status")).get("conditions")):
        if as_mapping(cond).get("type") == ctype:
            return as_mapping(cond)
    return None


def is_gated(pod: Mapping[str, Any]) -> bool:
    """Whether Kueue still holds the pod (admission scheduling gate present)."""
    gates = as_list(as_mapping(pod.get("spec")).get("schedulingGates"))
    return any(as_mapping(g).get("name") == ADMISSION_GATE for g in gates)


EXITED_HINT = MESSAGES["hint.exited"]


def _exited_before_ready(status: Mapping[str, Any]) -> str:
    """How a container that is not ready exited at least once (restartPolicy OnFailure starts
    it again, and it will exit again: a server does not come up by retrying); "" if none did."""
    for cs in as_list(status.get("containerStatuses")):
        cs = as_mapping(cs)
        if cs.get("ready"):
            continue
        last = as_mapping(as_mapping(cs.get("lastState")).get("terminated"))
        now = as_mapping(as_mapping(cs.get("state")).get("terminated"))
        exit_info = now or last
        if not exit_info and not cs.get("restartCount"):
            continue
        code = exit_info.get("exitCode")
        why = exit_info.get("reason")
        parts = [f"exit code {code}" if code is not None else "it exited"]
        if why and why not in ("Error", "Completed"):
            parts.append(str(why))
        return ", ".join(parts)
    return ""


LOG_TAIL_CHARS = 1000
"""The most characters of a server's last output that the hub's log quotes (its end)."""
LOG_MESSAGE_CHARS = 300
"""The most characters of a pod's status message that the hub's log quotes."""
SECRET_SHOWN = "[hub token removed]"


def exit_details(pod: Mapping[str, Any] | None, *, secrets: Iterable[str] = ()) -> str:
    """For the admin's log, one line: how a pod that ended before it was ready ended (its uid,
    phase, reason, and each terminated container's exit code, reason and termination message,
    which with ``terminationMessagePolicy: FallbackToLogsOnError`` is the tail of its log).

    The message is the server's own output, anything its user's code printed: it is quoted
    (:func:`~jupyter_gpuaas.core.parsing.excerpt`), so a line break or a terminal escape in it
    is escaped and cannot start a log record of its own; at most its last
    :data:`LOG_TAIL_CHARS` characters, with each of ``secrets`` (the server's hub token,
    which a server printing its environment shows) replaced by :data:`SECRET_SHOWN`."""
    if pod is None:
        return "pod gone"
    meta, status = as_mapping(pod.get("metadata")), as_mapping(pod.get("status"))
    parts = [f"pod uid={meta.get('uid') or '?'} phase={status.get('phase') or '?'}"]
    if status.get("reason") or status.get("message"):
        reason = excerpt(str(status.get("reason") or ""))
        message = excerpt(str(status.get("message") or ""), LOG_MESSAGE_CHARS)
        parts.append(f"reason={reason} message={message}")
    for cs in as_list(status.get("containerStatuses")):
        cs = as_mapping(cs)
        state = as_mapping(cs.get("state")).get("terminated") or as_mapping(
            cs.get("lastState")
        ).get("terminated")
        ended = as_mapping(state)
        if not ended:
            continue
        name, reason = excerpt(str(cs.get("name"))), excerpt(str(ended.get("reason")))
        line = f"container {name}: exit code {excerpt(ended.get('exitCode'))} ({reason})"
        if ended.get("message"):
            output = str(ended["message"]).rstrip()
            for secret in secrets:
                if secret:
                    output = output.replace(secret, SECRET_SHOWN)
            line += f", last output: {excerpt(output, LOG_TAIL_CHARS, end=True)}"
        parts.append(line)
    return "; ".join(parts)


# Why a kubelet fails a pod before any of its containers ran (the node's doing, not the server's):
# device or resource admission, node affinity, eviction, node shutdown; in a person's words.
_NODE_REFUSALS = {
    "UnexpectedAdmissionError": "the GPU it was given was not free on the node",
    "NodeAffinity": "the pod does not match the node it was placed on",
    "Evicted": "the node ran short of memory or disk",
    "Shutdown": "the node was shutting down",
    "Terminated": "the node was shutting down",
}


def _refused_by_node(status: Mapping[str, Any]) -> str:
    """In words, why the node failed a pod before any of its containers ran; "" if it did not
    (a container that ran and exited is the server's own failure, told by the caller)."""
    reason = str(status.get("reason") or "")
    if _exited_before_ready(status):
        return ""
    if reason.startswith("OutOf"):  # OutOfcpu, OutOfnvidia.com/gpu: admission ran out of it
        return f"it had no {_resource_words(reason.removeprefix('OutOf'))} left"
    return _NODE_REFUSALS.get(reason, "")


def _resource_words(resource: str) -> str:
    """A pod resource's name as a person says it."""
    if resource.startswith("nvidia.com/mig-"):
        return "free GPU slice"
    if "gpu" in resource.lower():
        return "free GPU"
    return {"cpu": "free CPU", "memory": "free memory", "pods": "room for another server"}.get(
        resource, "free capacity of the kind your server asked for"
    )


def _removed_message(
    team: str, workload: WorkloadInfo | None, pod: Mapping[str, Any] | None
) -> SpawnStatus:
    """A pod that is gone or going: say who removed it and why."""
    target = _pod_condition(pod, TERMINATION_TARGET) if pod is not None else None
    preempted = workload.preempted if workload is not None else None
    evicted = workload.evicted if workload is not None else None
    if preempted is not None or (
        target is not None and "preempt" in str(target.get("message", "")).lower()
    ):
        # Kueue's own words ("Preempted to accommodate a workload (UID: ...)") are for the log.
        return SpawnStatus(Phase.PREEMPTED, say("preempted", team=team))
    if evicted is not None or target is not None:
        return SpawnStatus(Phase.STOPPED, say("stopped.by_queue"))
    return SpawnStatus(Phase.STOPPED, say("stopped.outside"))


def _latest_event_reason(events: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """Reason and message of the newest event (by timestamp, then by order given)."""
    best: tuple[datetime | None, int] | None = None
    found = ("", "")
    for i, ev in enumerate(events):
        when = parse_time(ev.get("lastTimestamp")) or parse_time(ev.get("eventTime"))
        newer = best is None or (
            when > best[0] if when is not None and best[0] is not None and when != best[0] else True
        )
        if newer:
            best = (when, i)
            found = (str(ev.get("reason", "")), str(ev.get("message", "")))
    return found


def spawn_status(
    *,
    team: str,
    pod: Mapping[str, Any] | None,
    workload: WorkloadInfo | None = None,
    pending: PendingWorkloadInfo | None = None,
    events: Sequence[Mapping[str, Any]] = (),
    pod_seen: bool = False,
    offering: str = "",
    now: datetime | None = None,
    own_team: str = "",
    teams: Mapping[str, str] | None = None,
) -> SpawnStatus:
    """The phase of a spawn.

    ``pod`` is the pod as the watch has it (``None``: not seen yet, or gone if ``pod_seen``);
    ``workload`` its Kueue Workload; ``pending`` its visibility-API entry while it waits;
    ``events`` the pod's events (oldest first); ``team`` and ``offering`` are display names.
    While it waits, what holds the GPU (the gpuaas service's outlook on the pod) is told as of
    ``now`` (``None``: not told), ``own_team`` being the user's team's name and ``teams`` the
    display names of the teams by name.
    """
    if pod is None:
        if pod_seen:
            return _removed_message(team, workload, None)
        return SpawnStatus(Phase.SUBMITTING, say("submitting"))

    meta, status = as_mapping(pod.get("metadata")), as_mapping(pod.get("status"))
    if meta.get("deletionTimestamp") or _pod_condition(pod, TERMINATION_TARGET) is not None:
        return _removed_message(team, workload, pod)

    failed = _failed(status)
    if failed is not None:
        return failed
    if is_gated(pod):
        queued = _queued(team, workload, pending)
        told = _outlook_words(pod, now=now, own_team=own_team, teams=teams or {})
        if told and queued.phase is Phase.QUEUED:
            return replace(queued, message=f"{queued.message}. {told}")
        return queued

    # The scheduler's own reason ("0/4 nodes are available: ...") is for the admin's log.
    for_what = say("waiting_for_node.for", offering=offering) if offering else ""
    scheduled = _pod_condition(pod, "PodScheduled")
    if not status.get("nodeName") and not (scheduled and scheduled.get("status") == "True"):
        return SpawnStatus(
            Phase.WAITING_FOR_NODE, say("waiting_for_node", team=team, for_what=for_what)
        )
    return _on_the_node(status, events)


def _outlook_words(
    pod: Mapping[str, Any], *, now: datetime | None, own_team: str, teams: Mapping[str, str]
) -> str:
    """What holds the GPU, from the outlook the gpuaas service keeps on a waiting pod."""
    text = as_mapping(as_mapping(pod.get("metadata")).get("annotations")).get(RECLAIM_OUTLOOK)
    if now is None or not isinstance(text, str) or not text:
        return ""
    try:
        outlook = load_json(text, path=RECLAIM_OUTLOOK)
    except ParseError:
        return ""
    if not isinstance(outlook, Mapping):
        return ""
    return waiting_words(outlook, own_team=own_team, teams=teams, now=now)


def _failed(status: Mapping[str, Any]) -> SpawnStatus | None:
    """A pod that ended, or whose server exited, before it was ready; ``None`` if not."""
    phase = status.get("phase")
    refused = _refused_by_node(status) if phase == "Failed" else ""
    if refused:
        return SpawnStatus(
            Phase.FAILED, say("failed.node", refused=refused), failure_reason="node_refused"
        )
    if phase in ("Failed", "Succeeded"):
        # The pod's own reason (OOMKilled, Error) is for the admin's log.
        return SpawnStatus(Phase.FAILED, say("failed.stopped", hint=EXITED_HINT))
    exited = _exited_before_ready(status)
    if exited:
        return SpawnStatus(Phase.FAILED, say("failed.exited", exited=exited, hint=EXITED_HINT))
    return None


def _queued(
    team: str, workload: WorkloadInfo | None, pending: PendingWorkloadInfo | None
) -> SpawnStatus:
    """A pod that Kueue still holds: where it stands in the queue."""
    if workload is not None and workload.quota_reserved:
        return SpawnStatus(Phase.QUOTA_RESERVED, say("reserved", team=team))
    wait = topology_wait(workload) if workload is not None else None
    if wait is not None and wait.one_node:
        # Kueue's Topology Aware Scheduling holds it: quota is there, no node has room yet
        position = pending.position_in_local_queue + 1 if pending is not None else None
        return SpawnStatus(Phase.QUEUED, say("queued.whole_node", team=team), position=position)
    if pending is not None:
        pos = pending.position_in_local_queue + 1
        ahead = pending.position_in_cluster_queue
        return SpawnStatus(
            Phase.QUEUED,
            say("queued.position", team=team, position=pos)
            if ahead + 1 == pos
            else say("queued.ahead", team=team, position=pos, ahead=ahead),
            position=pos,
            ahead_in_cluster_queue=ahead,
        )
    if workload is None:
        return SpawnStatus(Phase.QUEUED, say("queued.registering", team=team))
    # Kueue's own reason ("couldn't assign flavors ...") is for the admin's log.
    if workload.inadmissible:
        return SpawnStatus(Phase.QUEUED, say("queued.inadmissible", team=team))
    return SpawnStatus(Phase.QUEUED, say("queued", team=team))


def _on_the_node(status: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> SpawnStatus:
    """A pod placed on a node: pulling, starting, or ready."""
    statuses = [as_mapping(s) for s in as_list(status.get("containerStatuses"))]
    states = [as_mapping(s.get("state")) for s in statuses]
    waiting = [as_mapping(state.get("waiting")) for state in states if "waiting" in state]
    # The kubelet's reasons (ImagePullBackOff, a missing Secret) are for the admin's log.
    for w in waiting:
        if w.get("reason") in _IMAGE_ERRORS:
            return SpawnStatus(Phase.PULLING, say("pulling.failing"))
        if w.get("reason") == "CreateContainerConfigError":
            return SpawnStatus(Phase.STARTING, say("creating.failing"))
    running = bool(statuses) and all("running" in as_mapping(s.get("state")) for s in statuses)
    if running:
        if all(s.get("ready") for s in statuses):
            return SpawnStatus(Phase.READY, say("ready"))
        return SpawnStatus(Phase.STARTING, say("starting.jupyter"))

    reason, _message = _latest_event_reason(events)
    if reason == "Pulling":
        return SpawnStatus(Phase.PULLING, say("pulling.event"))
    if reason in ("Pulled", "Created", "Started"):
        return SpawnStatus(Phase.STARTING, say("starting.container"))
    return SpawnStatus(Phase.PULLING, say("pulling"))


# --------------------------------------------------------------------------- deadlines


@dataclass(frozen=True)
class Deadline:
    """A spawn that ran out of time. ``kind``: ``queue`` (user-facing) or ``start``."""

    kind: str
    message: str


def check_deadline(
    status: SpawnStatus,
    *,
    team: str,
    submitted_at: datetime,
    admitted_at: datetime | None,
    now: datetime,
    queue_timeout: float,
    start_timeout: float,
) -> Deadline | None:
    """Whether the spawn has run out of time (``queue_timeout`` 0: wait in the queue forever).

    Time in the queue runs from submission until Kueue admits the pod; the start timeout runs
    from admission (``admitted_at``) until the server is ready.
    """
    if status.terminal or status.phase is Phase.READY:
        return None
    if status.in_queue or admitted_at is None:
        waited = now - submitted_at
        if queue_timeout > 0 and waited.total_seconds() >= queue_timeout:
            where = say("timeout.queue.where", position=status.position) if status.position else ""
            return Deadline(
                "queue", say("timeout.queue", waited=about(waited), team=team, where=where)
            )
        return None
    if (now - admitted_at).total_seconds() >= start_timeout:
        limit = about(timedelta(seconds=start_timeout))
        return Deadline("start", say("timeout.start", limit=limit, status=status.message))
    return None


# --------------------------------------------------------------------------- notices

_TIME_MARK = re.compile(r"\[\[time:([^\]]{1,40})\]\]")


def time_mark(at: datetime) -> str:
    """A moment in a notice's text, shown to the reader in their own time zone (with how long
    ago) by the form; :func:`notice_parts` reads it back."""
    return f"[[time:{isoformat_z(at)}]]"


@dataclass(frozen=True)
class NoticePart:
    text: str
    time: str = ""
    """An ISO time to show as the reader's local time; ``text`` is its fallback (UTC)."""


def notice_parts(notice: str) -> tuple[NoticePart, ...]:
    """A notice's text in parts, its :func:`time_mark` moments as times (a mark that is not a
    time stays as written)."""
    parts: list[NoticePart] = []
    pos = 0
    for m in _TIME_MARK.finditer(notice):
        parts.append(NoticePart(notice[pos : m.start()]))
        at = parse_time(m.group(1))
        if at is None:
            parts.append(NoticePart(m.group(0)))
        else:
            parts.append(NoticePart(at.strftime("%H:%M UTC"), time=isoformat_z(at)))
        pos = m.end()
    parts.append(NoticePart(notice[pos:]))
    return tuple(p for p in parts if p.text)


def reclaim_notice(
    annotations: Mapping[str, Any], *, team: str, team_names: Mapping[str, str]
) -> str:
    """What a user is told on their next visit about a server that the gpuaas service stopped
    to free its GPU (the marks it left on the pod); "" for a pod it did not stop.

    ``team`` is the server's team; ``team_names`` the display names of the teams, by name (a
    training Job's namespace is its team's name)."""
    stopped = parse_time(annotations.get(RECLAIMED_AT))
    if stopped is None:
        return ""
    warned = parse_time(annotations.get(WARNED_AT))
    # the team the service marked; before it marked one, the work's namespace (a Job's is its
    # team's name)
    target_team = str(
        annotations.get(RECLAIMED_FOR_TEAM)
        or str(annotations.get(RECLAIMED_FOR) or "").partition("/")[0]
    )
    if not target_team:
        whose = "queued work"
    elif target_team == team:
        whose = "your team's queued work"
    else:
        whose = f"queued work of {team_names.get(target_team, 'another team')}"
    after = f", after the warning at {time_mark(warned)}" if warned is not None else ""
    rest = (
        "Your files are kept. Start it again below; if the GPU is still in use, the next page "
        "shows your place in the queue."
    )
    kept = read_kernel_state_mark(annotations.get(RECLAIMED_KERNEL_STATE))
    stopped_words = (
        f"Your server was stopped at {time_mark(stopped)} to give its GPU to {whose}{after}."
    )
    if kept is not None and kept.outcomes and not kept.error:
        # the kernels were saved before the stop (docs/kernel-state.md); nothing is restored
        # until the notebook opens in the new server, so the words say "saved", never "back"
        return f"{stopped_words} {_saved(kept)}. {rest}"
    lost = (
        f" Its notebooks' variables could not be saved ({kept.error}): run them again."
        if kept is not None and kept.error
        else ""
    )
    return f"{stopped_words}{lost} {rest}"


def _saved(kept: KernelStateReport) -> str:
    """What was saved of each kernel and when it comes back, in the words of
    :mod:`jupyter_gpuaas.core.kernel_state` ("Your notebook train.ipynb: its variables were
    saved; they come back when you open the notebook again")."""
    if len(kept.outcomes) == 1:
        (one,) = kept.outcomes
        who = f"Your notebook {one.notebook}" if one.notebook else "Your server's kernel"
        words = f"{who}: {describe(one)}"
    else:
        words = summarise(kept.outcomes)
    back = comes_back(kept.outcomes)
    return f"{words}; {back}" if back else words


def home_volume_failure(claim: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> str:
    """Why the home volume ``claim`` cannot be provisioned (its provisioner's latest
    ``ProvisioningFailed`` Warning about this very claim), or "" while it is bound or may
    still be (no such event). A claim of the same name deleted earlier has another UID: its
    events say nothing of this one."""
    if as_mapping(claim.get("status")).get("phase") == "Bound":
        return ""
    uid = as_mapping(claim.get("metadata")).get("uid")
    failures = [
        e
        for e in events
        if e.get("reason") == "ProvisioningFailed"
        and e.get("type") == "Warning"
        and as_mapping(e.get("involvedObject")).get("uid") == uid
    ]
    if not failures:
        return ""
    _, message = _latest_event_reason(failures)
    return message.strip().rstrip(".")[:300] or "its provisioner refused it"
