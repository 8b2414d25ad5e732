"""The notice on return after a reclaim that kept kernel state: the marks the
gpuaas service left on the pod (gpuaas.jupyter.org/reclaim-kernel-state) in words."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from gpuaas_spawner.progress import reclaim_notice
from jupyter_gpuaas.core.activity import KernelStateReport, kernel_state_json
from jupyter_gpuaas.core.kernel_state import KernelStateOutcome, LostVariable

T0 = datetime(2026, 11, 30, 14, 0, tzinfo=timezone.utc)
STOPPED = {
    "gpuaas.jupyter.org/reclaim-stopped-at": "2026-11-30T14:02:00Z",
    "gpuaas.jupyter.org/reclaim-for": "team-b/train",
    "gpuaas.jupyter.org/reclaim-for-team": "team-b",
}
TRAIN = KernelStateOutcome(
    "k1", "train.ipynb", "kept_with_losses", lost=(LostVariable("batches", "a generator"),)
)
EVAL = KernelStateOutcome("k2", "eval.ipynb", "skipped_busy")


def mark(*outcomes: KernelStateOutcome, error: str = "") -> str:
    return json.dumps(kernel_state_json(KernelStateReport(T0, outcomes, error)))


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (
            mark(TRAIN),
            "Your server was stopped at [[time:2026-11-30T14:02:00.000Z]] to give its GPU to"
            " queued work of Team B. Your notebook train.ipynb: its variables were saved, except"
            " “batches” (a generator); they come back when you open the notebook again. Your"
            " files are kept.",
        ),
        (
            mark(TRAIN, EVAL),
            "Your server was stopped at [[time:2026-11-30T14:02:00.000Z]] to give its GPU to"
            " queued work of Team B. train.ipynb: its variables were saved, except “batches” (a"
            " generator); eval.ipynb: its variables were not saved: a cell was running; what was"
            " saved comes back when you open each notebook again. Your files are kept.",
        ),
        (
            mark(error="no answer within snapshot_timeout (1m)"),
            "Your server was stopped at [[time:2026-11-30T14:02:00.000Z]] to give its GPU to"
            " queued work of Team B. Its notebooks' variables could not be saved (no answer within"
            " snapshot_timeout (1m)): run them again. Your files are kept.",
        ),
        (
            "{not json",  # an unreadable mark: the notice as before servers kept state
            "Your server was stopped at [[time:2026-11-30T14:02:00.000Z]] to give its GPU to"
            " queued work of Team B. Your files are kept.",
        ),
        (
            mark(),  # no kernels were running: nothing to say about them
            "Your server was stopped at [[time:2026-11-30T14:02:00.000Z]] to give its GPU to"
            " queued work of Team B. Your files are kept.",
        ),
    ],
)
def test_the_return_notice_says_what_came_of_the_kernels(state: str, expected: str) -> None:
    annotations = {**STOPPED, "gpuaas.jupyter.org/reclaim-kernel-state": state}
    notice = reclaim_notice(annotations, team="team-a", team_names={"team-b": "Team B"})
    assert notice.startswith(expected), notice


@pytest.mark.parametrize("state", [mark(TRAIN), mark(TRAIN, EVAL), mark(EVAL)])
def test_the_notice_says_saved_not_back_before_anything_was_restored(state: str) -> None:
    """The spawn page shows this before the server starts again: nothing has been restored yet
    (the variables come back when the notebook opens in the new server), so nothing "was
    moved" and no variable "is back"; and its names carry no Markdown, which the
    page does not render."""
    annotations = {**STOPPED, "gpuaas.jupyter.org/reclaim-kernel-state": state}
    notice = reclaim_notice(annotations, team="team-a", team_names={"team-b": "Team B"})
    assert "moved" not in notice
    assert " back," not in notice
    assert "are back" not in notice
    assert "`" not in notice
