"""The schemas of culler/gpuaas_service/openapi.json as Python types, for the code that builds its
answers: a field that drifts from the document is a mypy error there. Written by
tests/support/api_types.py (make api-types); never edited by hand."""

# ruff: noqa
from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypedDict

from jupyter_gpuaas.core.api_types import (
    Activity,
    ServiceActivityState,
    ServiceFieldError,
    ServiceReclaimAction,
    ServiceReclaimCode,
)

__all__ = [
    "ServiceActionCounts",
    "ServiceConsole",
    "ServiceConsoleAmounts",
    "ServiceConsoleChecks",
    "ServiceConsoleEvent",
    "ServiceConsoleExport",
    "ServiceConsoleFit",
    "ServiceConsoleFlavor",
    "ServiceConsoleGpus",
    "ServiceConsoleHandoff",
    "ServiceConsoleHistory",
    "ServiceConsoleMigNode",
    "ServiceConsolePolicy",
    "ServiceConsoleRegret",
    "ServiceConsoleSnapshot",
    "ServiceConsoleTeam",
    "ServiceConsoleTeamNow",
    "ServiceConsoleTeamQueued",
    "ServiceDoctorCheck",
    "ServiceExportRow",
    "ServiceFitRow",
    "ServiceFitTeam",
    "ServiceGpuEquivalents",
    "ServiceGpuNode",
    "ServiceGpuRow",
    "ServiceHealth",
    "ServiceHealthPolicy",
    "ServiceHistoryAvailable",
    "ServiceHistoryChart",
    "ServiceHistorySeries",
    "ServiceHistoryUnavailable",
    "ServiceHours",
    "ServiceJobResult",
    "ServiceJobResultError",
    "ServiceJobRunnerInput",
    "ServiceJobRunnerTaken",
    "ServicePolicyPreview",
    "ServicePreviewChange",
    "ServicePreviewRefused",
    "ServiceSnapshotHandoff",
    "ServiceSnapshotPending",
    "ServiceSnapshotPendingNeedsItem",
    "ServiceSnapshotWait",
    "ServiceSnapshotWorkbench",
    "ServiceSnapshotWorkbenchHoldsItem",
    "ServiceWorkbench",
]


class ServiceWorkbench(TypedDict):
    """One GPU workbench as GET api/console lists it (workbenches), with the ..."""

    key: str
    user: str
    server: str
    team: str
    offering: str
    kind: str
    gpu_equivalents: str
    started_at: str
    age_seconds: int
    phase: str
    activity: ServiceActivityState
    signal: str
    idle_seconds: int | None
    unknown_seconds: int | None
    policy: str | None
    action: ServiceReclaimAction
    code: ServiceReclaimCode
    reason: str
    reclaim_at: str | None
    warned_at: str | None
    handoff: str | None
    snoozes_left: int | None
    dry_run: bool


class ServiceJobResult(TypedDict):
    """GET api/jobs/{team}/{name}/result: the executed notebook and how it ended."""

    team: str
    name: str
    path: str | None
    status: str | None
    error: ServiceJobResultError | None
    notebook: dict[str, Any] | None


class ServiceJobResultError(TypedDict):
    """How the run failed, as the Job's runner sent it (its own fields may follow)."""

    cell_index: int | None
    ename: str
    evalue: str


class ServiceJobRunnerInput(TypedDict):
    """GET api/job-runner/input: what a notebook Job's runner executes: the ..."""

    notebook: dict[str, Any]
    parameters: dict[str, Any]
    kernel_name: str | None


class ServiceJobRunnerTaken(TypedDict):
    """POST api/job-runner/log and POST api/job-runner/result: the runner's log or ..."""

    accepted: Literal[True]


ServiceGpuEquivalents: TypeAlias = "str"


ServiceActionCounts = TypedDict(
    "ServiceActionCounts",
    {"warn": "int", "wait": "int", "reclaim": "int", "clear-warning": "int", "skip": "int"},
    total=False,
)


class ServiceConsoleAmounts(TypedDict):
    """One flavor row's five amounts, each written in one way (the row says which)."""

    nominal: str
    notebooks: str
    training: str
    borrowed: str
    lent: str


class ServiceConsoleFlavor(TypedDict):
    """One (flavor, GPU resource) of a team: quota against use. shown: Kubernetes ..."""

    flavor: str
    resource: str
    nominal: int
    notebooks: int
    training: int
    borrowed: int
    lent: int
    shown: ServiceConsoleAmounts
    readable: ServiceConsoleAmounts
    gpu_eq: ServiceConsoleAmounts
    in_use: bool


class ServiceHours(TypedDict):
    """A team's GPU-equivalent hours of today (UTC), from the ledger, and its ..."""

    allocated_hours: float
    busy_hours: float
    idle_hours: float
    reclaims: int
    failed_starts: int


class ServiceConsoleTeam(TypedDict):
    """One team of GET api/console: quota against use per flavor, queued work, what ..."""

    team: str
    cluster_queues: list[str]
    flavors: list[ServiceConsoleFlavor]
    queued: ServiceConsoleTeamQueued
    now: ServiceConsoleTeamNow
    today: ServiceHours


class ServiceConsoleTeamQueued(TypedDict):
    """The team's queued GPU work."""

    workloads: int
    gpu_equivalents: ServiceGpuEquivalents
    oldest_wait_seconds: int | None
    waiting_for_a_whole_node: int


class ServiceConsoleTeamNow(TypedDict):
    """GPU-equivalents its servers hold now, by activity (allocated = busy + idle + ..."""

    servers: int
    allocated: ServiceGpuEquivalents
    busy: ServiceGpuEquivalents
    idle: ServiceGpuEquivalents
    unknown: ServiceGpuEquivalents


class ServiceConsoleEvent(TypedDict):
    """One entry of the console journal: a warning, a warning withdrawn, snooze, ..."""

    event: Literal["warn", "withdraw", "snooze", "reclaim", "lent", "handoff"]
    at: str
    user: str
    server: str
    team: str
    offering: str
    gpu_equivalents: str
    reason: str
    workload: str
    result: Literal[
        "", "succeeded", "failed", "gone", "state kept", "state kept with losses", "state lost"
    ]
    latency_seconds: float | None
    returned_after_seconds: float | None
    regret: bool
    dry_run: bool


class ServiceConsoleHandoff(TypedDict):
    """A reclaim carried out for queued work, and whether the work was admitted in ..."""

    workload: str
    cluster_queue: str
    team: str
    reclaimed_at: str
    admitted_at: str | None
    latency_seconds: float | None
    status: Literal["waiting", "succeeded", "failed"]
    reason: str


class ServiceConsoleRegret(TypedDict):
    """How often a reclaimed user came back soon."""

    reclaims: int
    returned_within_window: int
    window_seconds: float


class _ServiceConsolePolicyRequired(TypedDict):
    in_force: str


class ServiceConsolePolicy(_ServiceConsolePolicyRequired, total=False):
    """The policy in force and its file (file and error are absent where the ..."""

    file: str | None
    error: str


class ServiceConsole(TypedDict):
    """GET api/console[?team=T]: teams, workbenches with the live plan, reclaims ..."""

    now: str
    decided_at: str | None
    last_completed: str | None
    last_error: str
    synced: bool
    reclaim: Literal["on", "off"]
    policy: ServiceConsolePolicy
    teams: list[ServiceConsoleTeam]
    events: list[ServiceConsoleEvent]
    handoffs: list[ServiceConsoleHandoff]
    regret: ServiceConsoleRegret | None
    visible_teams: list[str] | None
    summary: ServiceActionCounts
    workbenches: list[ServiceWorkbench]


class ServiceGpuRow(TypedDict):
    """One row of GET api/console/gpus: a GPU holding, or what is free of one GPU ..."""

    key: str
    node: str
    pool: list[str]
    kind: Literal["gpu", "mig", "shared", "fraction", "training"]
    device: str
    uuids: list[str]
    holder: str
    holder_kind: Literal["workbench", "training", "free"]
    team: str
    offering: str
    gpu_equivalents: ServiceGpuEquivalents
    since: str | None
    state: ServiceActivityState | Literal["training"] | Literal["free"]
    idle_since: str | None
    memory_bytes: int | None
    memory_cap_bytes: int | None
    utilization_percent: float | None
    next_step: ServiceReclaimAction | Literal[""]


class ServiceGpuNode(TypedDict):
    """A node with what is held and what is free on it."""

    node: str
    holdings: int
    idle: int
    pools: list[str]
    gpu_equivalents: ServiceGpuEquivalents
    free_gpu_equivalents: ServiceGpuEquivalents


class ServiceConsoleGpus(TypedDict):
    """GET api/console/gpus[?team=T]: every GPU, held (whole GPUs, MIG slices, ..."""

    now: str
    as_of: str | None
    visible_teams: list[str] | None
    nodes: list[ServiceGpuNode]
    devices: list[ServiceGpuRow]


class ServiceFitRow(TypedDict):
    """A GPU server against its user's recent peaks."""

    key: str
    user: str
    offering: str
    offering_name: str
    gpu_equivalents: ServiceGpuEquivalents
    sessions: int
    peak_bytes: int | None
    peak: str | None
    advised: str | None
    advised_name: str | None
    reason: str
    measured: bool
    frees: ServiceGpuEquivalents


class ServiceFitTeam(TypedDict):
    """A team of the sizing view and what following every advice would free."""

    team: str
    frees: ServiceGpuEquivalents
    users: list[ServiceFitRow]


class _ServiceConsoleFitRequired(TypedDict):
    catalog: bool
    headroom: float
    visible_teams: list[str] | None
    teams: list[ServiceFitTeam]


class ServiceConsoleFit(_ServiceConsoleFitRequired, total=False):
    """GET api/console/fit[?team=T]: per team, each GPU server against the offering ..."""

    mig: list[ServiceConsoleMigNode]


class ServiceConsoleMigNode(TypedDict):
    """A MIG node (mixed strategy, a GPU model with known profiles): its ..."""

    node: str
    model: str
    gpus: int
    now: str | None
    demand: dict[str, int]
    advised: str | None
    reason: str
    line: str


class ServiceExportRow(TypedDict):
    """One team, user and offering of a day."""

    day: str
    team: str
    user: str
    offering: str
    kind: str
    allocated_hours: float
    busy_hours: float
    idle_hours: float
    unknown_hours: float
    reclaims: int
    failed_starts: int
    waiting_hours: float


class ServiceConsoleExport(TypedDict):
    """GET api/console/export?day=YYYY-MM-DD&format=json: a day's GPU-equivalent ..."""

    day: str
    unit: Literal["GPU-equivalent hours"]
    rows: list[ServiceExportRow]


class _ServiceSnapshotWorkbenchRequired(TypedDict):
    user: str
    server: str
    groups: list[str]
    team: str
    kind: str
    offering: str
    gpu_equivalents: str
    holds: list[ServiceSnapshotWorkbenchHoldsItem]
    cluster_queue: str
    cohorts: list[str]
    started_at: str
    phase: str
    snoozes_used: int
    snoozed_until: str | None
    warned_at: str | None
    warned_deadline: str | None
    warned_reason: str
    activity: Activity | None
    activity_received_at: str | None
    last_active: str
    unknown_since: str | None


class ServiceSnapshotWorkbench(_ServiceSnapshotWorkbenchRequired, total=False):
    """A workbench as the cycle saw it: who, what it holds (amounts as exact ..."""

    cards: list[str]
    pod_utilization: float


class ServiceSnapshotWorkbenchHoldsItem(TypedDict):
    flavor: str
    resource: str
    amount: str


class ServiceSnapshotPending(TypedDict):
    """A queued workload the cycle could reclaim for: its queue, priority, position ..."""

    name: str
    namespace: str
    cluster_queue: str
    cohorts: list[str]
    priority: int
    position: int
    local_queue: str
    team: str
    needs: list[ServiceSnapshotPendingNeedsItem]


class ServiceSnapshotPendingNeedsItem(TypedDict):
    resource: str
    amount: str
    flavors: list[str]
    free: dict[str, str]


class ServiceSnapshotHandoff(TypedDict):
    """A reclaim's hand-off under watch: the workload it was for and when it was ..."""

    workload: str
    cluster_queue: str
    reclaimed_at: str
    admitted_at: str | None
    team: str


class ServiceSnapshotWait(TypedDict):
    """An admitted workload whose pod waits for whole cards: its flavor and node, ..."""

    name: str
    namespace: str
    workload: str
    team: str
    cluster_queue: str
    priority: int
    flavor: str
    node: str
    gpu_type: str
    what: str
    cards: int
    free_cards: int
    blocked: dict[str, str]
    since: str | None


class ServiceConsoleSnapshot(TypedDict):
    """GET api/console/snapshot: the last complete cycle's inputs, as gpuaas-admin ..."""

    now: str
    workbenches: list[ServiceSnapshotWorkbench]
    pending: list[ServiceSnapshotPending]
    handoffs: list[ServiceSnapshotHandoff]
    waits: list[ServiceSnapshotWait]


class ServicePreviewChange(TypedDict):
    """A workbench whose action differs under the pasted policy."""

    key: str
    now: ServiceReclaimAction
    preview: ServiceReclaimAction


class ServicePolicyPreview(TypedDict):
    """POST api/console/preview (a policy file as the body): what it would do now ..."""

    valid: Literal[True]
    policy: str
    at: str
    summary: ServiceActionCounts
    summary_in_force: ServiceActionCounts | None
    changed: list[ServicePreviewChange]
    workbenches: list[ServiceWorkbench]


class ServicePreviewRefused(TypedDict):
    """POST api/console/preview, answered 400: the pasted policy's problems with ..."""

    status: Literal[400]
    valid: Literal[False]
    message: str
    errors: list[ServiceFieldError]


class ServiceHistorySeries(TypedDict):
    """One series of a chart (one team, or one hand-off result)."""

    name: str
    values: list[float | None]


class _ServiceHistoryChartRequired(TypedDict):
    name: Literal["allocated", "busy", "idle", "queued", "wait", "reclaims", "handoffs"]
    title: str
    unit: str
    by: str
    series: list[ServiceHistorySeries]
    total_series: int
    truncated: bool


class ServiceHistoryChart(_ServiceHistoryChartRequired, total=False):
    """One chart of the history: its series on the shared time grid, in its unit."""

    note: str


class ServiceHistoryAvailable(TypedDict):
    """The history over the asked range, one time grid for every chart."""

    available: Literal[True]
    start: int
    end: int
    step: int
    range_seconds: int
    max_points: int
    max_series: int
    teams: list[str] | None
    times: list[float]
    charts: list[ServiceHistoryChart]


class ServiceHistoryUnavailable(TypedDict):
    """No history (no Prometheus configured, or it failed or was slow); the live ..."""

    available: Literal[False]
    reason: str
    message: str


ServiceConsoleHistory: TypeAlias = "ServiceHistoryAvailable | ServiceHistoryUnavailable"


class _ServiceHealthRequired(TypedDict):
    synced: bool
    polled_queues: list[str]
    requests_served: int
    index_rebuilds: int


class ServiceHealth(_ServiceHealthRequired, total=False):
    """GET api/health (the operator token only): caches, polling, requests, the policy."""

    policy: ServiceHealthPolicy


class ServiceHealthPolicy(TypedDict):
    """The policy file, whether it is in force, and why not."""

    file: str | None
    valid: bool
    error: str
    policies_in_force: int
    reclaim: Literal["on", "off"]


class ServiceDoctorCheck(TypedDict):
    """One check of gpuaas-admin --doctor (docs/deploy.md): ok, missing, wrong, or ..."""

    name: str
    status: Literal["ok", "missing", "wrong", "unknown"]
    detail: str
    fix: str


class ServiceConsoleChecks(TypedDict):
    """GET api/console/checks[?fresh=1]: the doctor's checks, run by the service as ..."""

    checked_at: str
    ok: bool
    checks: list[ServiceDoctorCheck]
