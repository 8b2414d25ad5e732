"""The schemas of jupyter_gpuaas/server/openapi.json as Python types, for the code that builds its
answers: a field that drifts from the document is a mypy error there. Written by
tests/support/api_types.py (make api-types); never edited by hand."""

# ruff: noqa
from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypedDict

__all__ = [
    "Activity",
    "ActivityGpuUtilizationItem",
    "Attribution",
    "Cap",
    "Device",
    "GpuErrorKind",
    "GpuSource",
    "KernelActivity",
    "KernelStateEstimate",
    "KernelStateEstimateKernelsItem",
    "KernelStateInfo",
    "KernelStateLost",
    "KernelStateOutcome",
    "KernelStateReport",
    "KernelStateRestore",
    "KernelStateSnapshot",
    "KernelUsage",
    "OpenapiDocument",
    "Queue",
    "QueueItem",
    "QueueTeam",
    "QueueTeamClusterQueuesItem",
    "ServerError",
    "ServiceActivityState",
    "ServiceError",
    "ServiceFieldError",
    "ServiceJob",
    "ServiceJobCancelled",
    "ServiceJobLog",
    "ServiceJobMarked",
    "ServiceJobOffering",
    "ServiceJobOfferingHeadroom",
    "ServiceJobOfferingImagesItem",
    "ServiceJobOfferingSizesItem",
    "ServiceJobOptions",
    "ServiceJobState",
    "ServiceJobTeam",
    "ServiceJobTeamCaps",
    "ServiceJobTeamCapsPerTeam",
    "ServiceJobTeamCapsPerUser",
    "ServiceJobs",
    "ServicePolicyFields",
    "ServiceReclaim",
    "ServiceReclaimAction",
    "ServiceReclaimCause",
    "ServiceReclaimCauseForOther",
    "ServiceReclaimCauseForOwn",
    "ServiceReclaimCode",
    "ServiceReportAnswer",
    "ServiceReportAnswerSnapshot",
    "ServiceResizeDown",
    "ServiceResizeMove",
    "ServiceResizeOffer",
    "ServiceResizeOffering",
    "ServiceResizeOfferingHeadroom",
    "ServiceSnooze",
    "ServiceStanding",
    "ServiceStandingKnown",
    "ServiceStandingUnknown",
    "ServiceUnreachable",
    "ServiceWarning",
    "ServiceWithdrawal",
    "TerminalActivity",
    "Usage",
]


GpuSource: TypeAlias = "Literal['nvml', 'simulated', 'unavailable']"


GpuErrorKind: TypeAlias = (
    "Literal['no_driver', 'gpu_lost', 'not_supported', 'no_permission', 'unknown']"
)


Attribution: TypeAlias = "Literal['exact', 'size_unknown', 'sole_candidate', 'none']"


class Cap(TypedDict):
    """The memory cap of a fraction (HAMi), as the container sees it."""

    memory: int
    source: str | None
    enforced_by: str
    cores_percent: int | None


class Device(TypedDict):
    """A whole GPU or a MIG device."""

    uuid: str
    index: int | None
    name: str
    parent_uuid: str | None
    mig_profile: str | None
    memory_total: int
    memory_used: int
    utilization: float | None
    shared: bool
    cap: Cap | None


class KernelUsage(TypedDict):
    """A running kernel of this server and the GPU memory of its process tree."""

    kernel_id: str
    name: str | None
    path: str | None
    session_type: str | None
    execution_state: str | None
    pids: list[int]
    gpu_memory: int | None
    by_device: dict[str, int | None]
    attribution: Attribution


class Usage(TypedDict):
    """GET gpuaas/api/usage"""

    source: GpuSource
    error: str | None
    error_kind: GpuErrorKind | None
    sampled_at: str
    devices: list[Device]
    kernels: list[KernelUsage]
    other_memory: dict[str, int | None]


class KernelActivity(TypedDict):
    kernel_id: str
    execution_state: str | None
    last_activity: str | None
    connections: int
    gpu_memory: int | None


class TerminalActivity(TypedDict):
    name: str
    last_activity: str | None


class _ActivityRequired(TypedDict):
    sampled_at: str | None
    source: str
    error: str | None
    kernels: list[KernelActivity]
    terminals: list[TerminalActivity]
    gpu_memory: int | None
    gpu_utilization: list[ActivityGpuUtilizationItem]
    idle_since: str | None


class Activity(_ActivityRequired, total=False):
    """GET gpuaas/api/activity, and the reports the server posts to the gpuaas service"""

    keeps_kernel_state: bool
    kernel_state_bytes: int
    kernel_state: KernelStateReport


class ActivityGpuUtilizationItem(TypedDict):
    uuid: str
    utilization: float


class KernelStateLost(TypedDict):
    """A variable that was not kept or not restored, and why in a few words ("a ..."""

    name: str
    reason: str


class KernelStateOutcome(TypedDict):
    """One kernel's snapshot (jupyter_gpuaas.core.kernel_state.KernelStateOutcome): ..."""

    kernel_id: str
    notebook: str
    outcome: Literal["kept", "kept_with_losses", "failed", "skipped_busy"]
    lost: list[KernelStateLost]
    error: str
    bytes: int
    seconds: float
    saved_at: str | None


class KernelStateReport(TypedDict):
    """A server's answer to the gpuaas service's snapshot request, sent with its ..."""

    requested_at: str
    outcomes: list[KernelStateOutcome]
    error: str


class QueueItem(TypedDict):
    """One pending workload of the user."""

    kind: Literal["notebook", "job", "workload"]
    name: str
    workload: str
    namespace: str
    local_queue: str
    cluster_queue: str | None
    position_in_local_queue: int | None
    position_in_cluster_queue: int | None
    positions_known: bool
    offering: str | None
    offering_display_name: str | None
    resources: dict[str, str]
    pods: int
    gpu_equivalents: str
    team: str
    team_display_name: str | None
    priority_class: str | None
    waiting_since: str | None
    waited_seconds: int | None
    reason: str | None
    waiting_for: str | None


class QueueTeam(TypedDict):
    """Admitted and pending workloads of one team."""

    team: str
    display_name: str | None
    admitted: int
    pending: int
    cluster_queues: list[QueueTeamClusterQueuesItem]


class QueueTeamClusterQueuesItem(TypedDict):
    name: str
    admitted: int
    pending: int


class Queue(TypedDict):
    """GET gpuaas/api/queue (the gpuaas service's answer, or why there is none)"""

    user: str | None
    generated_at: str
    synced: bool
    items: list[QueueItem]
    teams: list[QueueTeam]
    error: str | None
    error_kind: str | None


class ServiceFieldError(TypedDict):
    """One problem with a request, at its field path (policies[0].idle_after)."""

    path: str
    message: str


class _ServiceErrorRequired(TypedDict):
    status: int
    message: str


class ServiceError(_ServiceErrorRequired, total=False):
    """Any refused service request: status and why; a refused request body adds ..."""

    errors: list[ServiceFieldError]
    more_errors: int
    cap: Literal["per_user", "per_team"]
    limit: int
    active: int


ServiceReclaimCode: TypeAlias = "Literal['demand', 'always', 'max-idle', 'max-age', 'no-policy', 'starting', 'stopping', 'exempt', 'snoozed', 'busy', 'unknown', 'not-idle-yet', 'no-demand', 'placement']"


ServiceReclaimAction: TypeAlias = "Literal['warn', 'wait', 'reclaim', 'clear-warning', 'skip']"


ServiceActivityState: TypeAlias = "Literal['busy', 'idle', 'unknown']"


ServiceReclaimCause = TypedDict(
    "ServiceReclaimCause",
    {
        "code": "Literal['demand', 'always', 'max-idle', 'max-age', 'placement']",
        "kind": "str",
        "offering": "str",
        "idle_seconds": "int | None",
        "limit_seconds": "int | None",
        "for": "ServiceReclaimCauseForOwn | ServiceReclaimCauseForOther | None",
    },
)


class ServiceReclaimCauseForOwn(TypedDict):
    team: Literal["own"]
    name: str
    object: str


class ServiceReclaimCauseForOther(TypedDict):
    team: Literal["other"]
    name: str


class _ServiceWarningRequired(TypedDict):
    warned_at: str
    reclaim_at: str
    seconds_left: int
    reason: str
    snoozes_left: int
    dry_run: bool
    saving: bool
    cause: ServiceReclaimCause | None


class ServiceWarning(_ServiceWarningRequired, total=False):
    """A reclaim warning with its countdown. keeps_kernel_state: whether the stop ..."""

    keeps_kernel_state: bool


class _ServiceReclaimRequired(TypedDict):
    server: str
    now: str
    warning: ServiceWarning | None


class ServiceReclaim(_ServiceReclaimRequired, total=False):
    """GET api/reclaim of the gpuaas service (forwarded as GET gpuaas/api/reclaim): ..."""

    withdrawn: ServiceWithdrawal | None


class ServiceWithdrawal(TypedDict):
    """A reclaim warning the service withdrew: which one (its warned_at) and when. ..."""

    warned_at: str
    withdrawn_at: str


class _ServiceReportAnswerRequired(TypedDict):
    accepted: bool


class ServiceReportAnswer(_ServiceReportAnswerRequired, total=False):
    """POST api/activity: the report was taken (with this server's warning, and ..."""

    reason: str
    received_at: str
    server: str
    now: str
    warning: ServiceWarning | None
    snapshot: ServiceReportAnswerSnapshot
    report_again_in: float


class ServiceReportAnswerSnapshot(TypedDict):
    """Save every kernel's variables now, within deadline_seconds, and report at ..."""

    requested_at: str
    deadline_seconds: float
    reason: str


class ServiceSnooze(TypedDict):
    """POST api/reclaim/snooze ("Keep my GPU"): allowed (kept until), or refused ..."""

    allowed: bool
    reason: str
    until: str | None
    snoozes_left: int


class ServicePolicyFields(TypedDict):
    """The rule of the policy that applies to a server."""

    name: str
    idle_after_seconds: int
    reclaim: Literal["when-queued", "always"]
    max_idle_seconds: int | None
    max_age_seconds: int | None
    warn_before_seconds: int
    max_snoozes: int
    dry_run: bool


ServiceStanding: TypeAlias = "ServiceStandingUnknown | ServiceStandingKnown"


class ServiceStandingUnknown(TypedDict):
    """A server no reclaim cycle has seen yet."""

    known: Literal[False]
    now: str
    reclaim_on: bool


class _ServiceStandingKnownRequired(TypedDict):
    known: Literal[True]
    now: str
    decided_at: str
    reclaim_on: bool
    policy: ServicePolicyFields | None
    kind: str
    activity: ServiceActivityState
    signal: str
    idle_seconds: int | None
    unknown_seconds: int | None
    action: ServiceReclaimAction
    code: ServiceReclaimCode
    reason: str
    reclaim_at: str | None
    dry_run: bool


class ServiceStandingKnown(_ServiceStandingKnownRequired, total=False):
    """A server the last reclaim cycle judged: the policy that applies, its ..."""

    snapshot_wait_seconds: int | None


ServiceJobState: TypeAlias = (
    "Literal['queued', 'starting', 'running', 'succeeded', 'failed', 'stopped']"
)


class ServiceJobOffering(TypedDict):
    """An offering a team's jobs may use, with its headroom."""

    slug: str
    display_name: str
    kind: str
    min_count: int
    max_count: int
    default_count: int
    unit: str
    units: str
    isolation: str
    images: list[ServiceJobOfferingImagesItem]
    sizes: list[ServiceJobOfferingSizesItem]
    headroom: ServiceJobOfferingHeadroom | None


class ServiceJobOfferingImagesItem(TypedDict):
    slug: str
    display_name: str


class ServiceJobOfferingSizesItem(TypedDict):
    slug: str
    display_name: str


class ServiceJobOfferingHeadroom(TypedDict):
    fit: str
    message: str
    detail: str
    ahead: int | None
    selectable: bool


class ServiceJobTeam(TypedDict):
    """A team that runs notebooks as Jobs, as the dialog offers it: its offerings, ..."""

    team: str
    display_name: str
    default_offering: str | None
    offerings: list[ServiceJobOffering]
    default_time_limit: int | None
    max_time_limit: int | None
    caps: ServiceJobTeamCaps
    cap_message: str


class ServiceJobTeamCaps(TypedDict):
    per_user: ServiceJobTeamCapsPerUser
    per_team: ServiceJobTeamCapsPerTeam


class ServiceJobTeamCapsPerUser(TypedDict):
    limit: int | None
    active: int


class ServiceJobTeamCapsPerTeam(TypedDict):
    limit: int | None
    active: int


class ServiceJobOptions(TypedDict):
    """GET api/jobs/options (forwarded as GET gpuaas/api/jobs/options): per team ..."""

    user: str
    teams: list[ServiceJobTeam]


class ServiceJob(TypedDict):
    """One notebook Job (GET api/jobs entries; the answer of POST api/jobs)."""

    team: str
    namespace: str
    name: str
    notebook: str
    state: ServiceJobState
    finished: bool
    message: str
    offering: str
    offering_name: str
    gpu_equivalents: str
    flavors: list[str]
    time_limit: int | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    position_in_local_queue: int | None
    position_in_cluster_queue: int | None
    result: str | None
    collected: str | None
    notified: str | None


class _ServiceJobsRequired(TypedDict):
    user: str
    generated_at: str
    jobs: list[ServiceJob]


class ServiceJobs(_ServiceJobsRequired, total=False):
    """GET api/jobs (forwarded as GET gpuaas/api/jobs): the caller's Jobs, newest ..."""

    enabled: bool


class ServiceJobCancelled(TypedDict):
    """DELETE api/jobs/{team}/{name}."""

    cancelled: Literal[True]
    team: str
    name: str


class ServiceJobLog(TypedDict):
    """GET api/jobs/{team}/{name}/log: the last part of the Job's log."""

    team: str
    name: str
    log: str


class _ServiceJobMarkedRequired(TypedDict):
    team: str
    name: str


class ServiceJobMarked(_ServiceJobMarkedRequired, total=False):
    """POST api/jobs/{team}/{name}/collected and .../notified of the gpuaas service ..."""

    collected: str
    notified: str


class _ServiceResizeOfferingRequired(TypedDict):
    slug: str
    title: str
    count: int
    memory: int | None
    memory_text: str | None


class ServiceResizeOffering(_ServiceResizeOfferingRequired, total=False):
    """An offering as api/resize describes it: its slug and title, the count, the ..."""

    headroom: ServiceResizeOfferingHeadroom


class ServiceResizeOfferingHeadroom(TypedDict):
    fit: str
    message: str


class _ServiceResizeOfferRequired(TypedDict):
    current: ServiceResizeOffering
    next: ServiceResizeOffering | None
    reason: str


class ServiceResizeOffer(_ServiceResizeOfferRequired, total=False):
    """GET api/resize (forwarded as GET gpuaas/api/resize): the offering that runs, ..."""

    down: ServiceResizeDown | None


class ServiceResizeDown(TypedDict):
    """The way down in api/resize: a smaller offering (as service_resize_offering, ..."""

    slug: str
    title: str
    count: int
    memory: int
    memory_text: str
    peak: int
    peak_text: str


ServiceResizeMove = TypedDict(
    "ServiceResizeMove",
    {
        "moving": "Literal[True]",
        "from": "ServiceResizeOffering",
        "to": "ServiceResizeOffering",
        "options": "dict[str, Any]",
    },
)


class KernelStateSnapshot(TypedDict):
    """POST gpuaas/api/kernel-state/snapshot: each kernel's outcome, and all of ..."""

    outcomes: list[KernelStateOutcome]
    summary: str


class KernelStateInfo(TypedDict):
    """GET gpuaas/api/kernel-state?path=NOTEBOOK: the notebook's snapshot as its ..."""

    path: str
    exists: bool
    saved_at: str | None
    bytes: int
    variables: list[str]
    lost: list[KernelStateLost]
    problem: str | None


class KernelStateEstimate(TypedDict):
    """GET gpuaas/api/kernel-state/estimate: what a snapshot of this server's ..."""

    keeps: bool
    bytes: int
    seconds: float
    kernels: list[KernelStateEstimateKernelsItem]


class KernelStateEstimateKernelsItem(TypedDict):
    kernel_id: str
    path: str
    bytes: int | None
    variables: int | None
    not_kept: list[KernelStateLost]


class _KernelStateRestoreRequired(TypedDict):
    path: str
    kernel_id: str
    status: Literal["restored", "none", "skipped", "refused", "unavailable"]
    message: str


class KernelStateRestore(_KernelStateRestoreRequired, total=False):
    """POST gpuaas/api/kernel-state/restore (200; 409 with status unavailable: the ..."""

    restored: list[str]
    not_restored: list[KernelStateLost]
    notes: list[str]
    bytes: int
    seconds: float
    saved_at: str | None


class _ServiceUnreachableRequired(TypedDict):
    error: str
    error_kind: str


class ServiceUnreachable(_ServiceUnreachableRequired, total=False):
    """The extension's answer where the gpuaas service gave none (not configured, ..."""

    status: int
    warning: None
    known: Literal[False]


class _ServerErrorRequired(TypedDict):
    message: str


class ServerError(_ServerErrorRequired, total=False):
    """A refusal of the server extension itself (jupyter-server's JSON error: a bad ..."""

    reason: str | None
    errors: list[ServiceFieldError]
    more_errors: int


class OpenapiDocument(TypedDict):
    """An OpenAPI 3.1 document (https://spec.openapis.org/oas/v3.1.0)."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
