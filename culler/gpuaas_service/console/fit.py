"""Does each user's GPU fit their need? The console's sizing view (pure).

Per team, for each GPU server running now: its offering, its user's recent session peaks (the
service's usage history, :mod:`gpuaas_service.reclaim.usage`), the offering the spawn form
advises for those peaks (:func:`jupyter_gpuaas.core.sizing.advise`, the spawner's own code, over
the team's offerings in the catalog) and the GPU-equivalents that following the advice would
free (what the server holds beyond the advised offering's size; never negative: an advice to go
bigger frees nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from gpuaas_service.reclaim.decide import Workbench
from jupyter_gpuaas.core.catalog import Catalog
from jupyter_gpuaas.core.gpu_equivalents import format_gpu_equivalents
from jupyter_gpuaas.core.sizing import DEFAULT_HEADROOM, PeakHistory, advise, format_gib

__all__ = ["fit_rows"]

_MIB = 1 << 20


def _user_row(
    wb: Workbench, catalog: Catalog, history: PeakHistory, headroom: float
) -> tuple[dict[str, Any], Fraction]:
    tenant = catalog.tenants.get(wb.team)
    peaks = history.of(wb.user)
    advice = None
    if tenant is not None:
        offerings = [catalog.offerings[s] for s in tenant.offerings if s in catalog.offerings]
        advice = advise(offerings, peaks, default=tenant.default_offering, headroom=headroom)
    current = catalog.offerings.get(wb.offering)
    advised = catalog.offerings.get(advice.offering) if advice else None
    frees = Fraction(0)
    if advice is not None and advice.measured and advised is not None:
        frees = max(Fraction(0), wb.gpu_equivalents - Fraction(advised.gpu_equivalents))
    peak = max(peaks) * _MIB if peaks else None
    row = {
        "key": wb.key,
        "user": wb.user,
        "offering": wb.offering,
        "offering_name": current.display_name if current else wb.offering,
        "gpu_equivalents": format_gpu_equivalents(wb.gpu_equivalents),
        "sessions": len(peaks),
        "peak_bytes": peak,
        "peak": format_gib(peak) if peak is not None else None,
        "advised": advice.offering if advice else None,
        "advised_name": advised.display_name if advised else None,
        "reason": advice.reason if advice else "the catalog has no offering to advise here",
        "measured": bool(advice and advice.measured),
        "frees": format_gpu_equivalents(frees),
    }
    return row, frees


def fit_rows(
    workbenches: Sequence[Workbench],
    history: PeakHistory,
    catalog: Catalog | None,
    *,
    headroom: float = DEFAULT_HEADROOM,
    only: Iterable[str] | None = None,
) -> dict[str, Any]:
    """The sizing view (module docstring): per team, its GPU servers' fit and the total that
    following every advice would free. Without a catalog there is nothing to advise from."""
    allowed = set(only) if only is not None else None
    teams: dict[str, tuple[list[dict[str, Any]], Fraction]] = {}
    if catalog is not None:
        for wb in sorted(workbenches, key=lambda w: (w.team, w.key)):
            if wb.gpu_equivalents <= 0 or (allowed is not None and wb.team not in allowed):
                continue
            row, frees = _user_row(wb, catalog, history, headroom)
            rows, total = teams.get(wb.team, ([], Fraction(0)))
            teams[wb.team] = ([*rows, row], total + frees)
    return {
        "catalog": catalog is not None,
        "headroom": headroom,
        "visible_teams": sorted(allowed) if allowed is not None else None,
        "teams": [
            {"team": team, "frees": format_gpu_equivalents(total), "users": rows}
            for team, (rows, total) in sorted(teams.items())
        ],
    }
