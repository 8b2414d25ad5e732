"""The table, the effective-capacity multiplier and the plots of docs/replay.md."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .metrics import BIN_S, mean_ci, paired_difference, percentile

Run = Mapping[str, Any]

ROWS: tuple[tuple[str, str, str], ...] = (
    ("allocation_share", "allocation share", "pct"),
    ("busy_share", "busy share (GPU-eq computing ÷ capacity)", "pct"),
    ("wait_p50_min", "training wait p50 (min)", "num"),
    ("wait_p90_min", "training wait p90 (min)", "num"),
    ("wait_p99_min", "training wait p99 (min)", "num"),
    ("wait_p90_min_1gpu", "… p90, 1-GPU jobs (min)", "num"),
    ("wait_p90_min_2gpu", "… p90, 2-GPU jobs (min)", "num"),
    ("wait_p90_min_4gpu", "… p90, 4-GPU jobs (min)", "num"),
    ("wait_p90_min_8gpu", "… p90, 8-GPU jobs (min)", "num"),
    ("jobs_never_admitted", "jobs still queued at the end", "num"),
    ("jct_mean_h", "job completion time, mean (h)", "num"),
    ("training_gpu_hours_completed", "training GPU-hours completed", "num"),
    ("spawn_wait_mean_min", "notebook spawn wait, mean (min)", "num"),
    ("spawn_wait_p90_min", "notebook spawn wait, p90 (min)", "num"),
    ("reclaims_per_100h", "reclaims per 100 session-hours", "num"),
    ("interrupted_per_100h", "active sessions interrupted per 100 session-hours", "num"),
    ("lost_user_h_per_100h", "user time lost (re-spawn wait + restore) h per 100 session-h", "num"),
    ("handoff_p50_s", "hand-off latency p50 (s)", "num"),
    ("handoff_p90_s", "hand-off latency p90 (s)", "num"),
)


def _fmt(value: float, half: float, kind: str) -> str:
    if math.isnan(value):
        return "–"
    if kind == "pct":
        text = f"{100 * value:.1f}%"
        return text if math.isnan(half) else f"{text} ± {100 * half:.1f}"
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    text = f"{value:.{digits}f}"
    return text if math.isnan(half) else f"{text} ± {half:.{digits}f}"


def table(runs: Sequence[Run], policies: Sequence[str]) -> str:
    """Markdown: one column per policy, mean ± 95% half-width over the seeds."""
    present = [p for p in policies if any(r["policy"] == p for r in runs)]
    lines = ["| figure | " + " | ".join(present) + " |", "|---" * (len(present) + 1) + "|"]
    for key, label, kind in ROWS:
        cells = []
        for p in present:
            mean, half = mean_ci(r[key] for r in runs if r["policy"] == p)
            cells.append(_fmt(mean, half, kind))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


PAIRED_FIGURES = [
    ("allocation_share", "allocation share", "pct"),
    ("busy_share", "busy share", "pct"),
    ("wait_p90_min", "training wait p90 (min)", "num"),
    ("training_gpu_hours_completed", "training GPU-hours", "num"),
    ("spawn_wait_mean_min", "spawn wait mean (min)", "num"),
]
"""The figures compared in pairs on the same seeds: (run key, row label, format)."""

FRACTIONS_SUFFIX = " +fractions"
"""The name of a policy's column in the fractional scenario (``static +fractions``)."""


def fraction_gains(runs: Sequence[Run], policies: Sequence[str]) -> str:
    """What fractions add to each policy: the fractional scenario's run minus the same policy
    without fractions, paired on the same seeds (``runs`` holds both)."""
    keys = [
        *PAIRED_FIGURES,
        ("spawn_wait_p90_min", "spawn wait p90 (min)", "num"),
        ("reclaims_per_100h", "reclaims per 100 session-h", "num"),
    ]
    present = [p for p in policies if any(r["policy"] == p + FRACTIONS_SUFFIX for r in runs)]
    lines = [
        "| Δ with fractions − without (paired) | " + " | ".join(present) + " |",
        "|---" * (len(present) + 1) + "|",
    ]
    for key, label, kind in keys:
        cells = [
            _fmt(*paired_difference(runs, p + FRACTIONS_SUFFIX, p, key), kind) for p in present
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def differences(runs: Sequence[Run], policies: Sequence[str], baseline: str = "static") -> str:
    """Paired differences against the baseline on the same seeds."""
    keys = PAIRED_FIGURES
    others = [p for p in policies if p != baseline and any(r["policy"] == p for r in runs)]
    lines = [
        f"| Δ against {baseline} (paired) | " + " | ".join(others) + " |",
        "|---" * (len(others) + 1) + "|",
    ]
    for key, label, kind in keys:
        cells = [_fmt(*paired_difference(runs, p, baseline, key), kind) for p in others]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def smallest_meeting(
    sweep: Sequence[Run], policy: str, target_min: float
) -> tuple[float | None, list[tuple[float, float]]]:
    """The fewest physical GPUs whose mean p90 training wait meets ``target_min``, linearly
    interpolated between the sizes swept; and the (GPUs, mean p90) curve."""
    sizes = sorted({r["gpus"] for r in sweep if r["policy"] == policy})
    curve = []
    for g in sizes:
        mean, _ = mean_ci(
            r["wait_p90_min"] for r in sweep if r["policy"] == policy and r["gpus"] == g
        )
        curve.append((g, mean))
    for i, (g, w) in enumerate(curve):
        if w <= target_min:
            if i == 0:
                return g, curve
            g0, w0 = curve[i - 1]
            return g0 + (g - g0) * (w0 - target_min) / (w0 - w), curve
    return None, curve


def plot_shares(runs: Sequence[Run], policies: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    present = [p for p in policies if any(r["policy"] == p for r in runs)]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharey=True)
    hours = [i * BIN_S / 3600 for i in range(int(24 * 3600 / BIN_S))]
    for p in present:
        mine = [r for r in runs if r["policy"] == p]
        for ax, key in zip(axes, ("allocated_by_bin", "busy_by_bin"), strict=True):
            series = [sum(r[key][i] for r in mine) / len(mine) for i in range(len(hours))]
            ax.plot(hours, [100 * x for x in series], label=p)
    for ax, title in zip(
        axes, ("allocated share of capacity", "busy share of capacity"), strict=True
    ):
        ax.set_title(title + " (mean over seeds)")
        ax.set_xlabel("hour of the day")
        ax.set_xticks(range(0, 25, 3))
        ax.set_xlim(0, 24)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("% of GPU-equivalents")
    axes[0].set_ylim(0, 100)
    axes[1].legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_wait_cdf(runs: Sequence[Run], policies: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for p in policies:
        waits = sorted(w for r in runs if r["policy"] == p for w in r["wait_samples_min"])
        if not waits:
            continue
        xs = [max(w, 0.1) for w in waits]
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, where="post", label=f"{p} (p90 {percentile(waits, 90):.0f} min)")
    ax.set_xscale("log")
    ax.set_xlabel("training wait, minutes (log; waits under 0.1 min drawn at 0.1)")
    ax.set_ylabel("share of jobs")
    ax.set_title("Training wait CDF, all seeds pooled")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(
    sweep: Sequence[Run], policies: Sequence[str], target_min: float, path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for p in policies:
        _g, curve = smallest_meeting(sweep, p, target_min)
        if curve:
            ax.plot([g for g, _ in curve], [w for _, w in curve], marker="o", label=p)
    ax.axhline(target_min, color="grey", linestyle="--", label=f"target p90 {target_min:g} min")
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("cluster size, physical GPUs (sample organisation scaled)")
    ax.set_ylabel("training wait p90, min (mean over seeds)")
    ax.set_title("Capacity sweep: the same demand on smaller and larger clusters")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
