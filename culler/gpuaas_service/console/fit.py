"""Does each user's GPU fit their need? The console's sizing view (pure).

Per team, for each GPU server running now: its offering, its user's recent session peaks (the
service's usage history, :mod:`gpuaas_service.reclaim.usage`), the offering the spawn form
advises for those peaks (:func:`jupyter_gpuaas.core.sizing.advise`, the spawner's own code, over
the team's offerings in the catalog) and the GPU-equivalents that following the advice would
free (what the server holds beyond the advised offering's size; never negative: an advice to go
bigger frees nothing).

Per MIG node, when the caller has the Node objects: the node's MIG config now (its
``nvidia.com/mig.config`` label), the slices its pods hold or wait for, and the named config that
would serve most of them (:func:`jupyter_gpuaas.core.mig_geometry.node_advice`), with the
``kubectl label`` line that applies it. A pod asking for a MIG profile no known model has
(``nvidia.com/mig-foo``) is left out of the demand, and logged once per profile.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from gpuaas_service import api_types as service_api
from gpuaas_service.reclaim.decide import Workbench
from jupyter_gpuaas.core.catalog import Catalog
from jupyter_gpuaas.core.gpu_equivalents import format_gpu_equivalents
from jupyter_gpuaas.core.mig_geometry import node_advice
from jupyter_gpuaas.core.sizing import DEFAULT_HEADROOM, PeakHistory, advise, format_gib

__all__ = ["fit_rows", "mig_rows"]

log = logging.getLogger("gpuaas.console")

_UNKNOWN_PROFILES_LOGGED: set[str] = set()
"""Unknown MIG profiles already logged (each once per process)."""
_UNKNOWN_PROFILES_KEPT = 1000
"""At most this many are logged and remembered: a flood of made-up names costs bounded memory
and log lines."""


def _log_unknown(node: str, profiles: Iterable[str]) -> None:
    for profile in profiles:
        if (
            profile in _UNKNOWN_PROFILES_LOGGED
            or len(_UNKNOWN_PROFILES_LOGGED) >= _UNKNOWN_PROFILES_KEPT
        ):
            continue
        _UNKNOWN_PROFILES_LOGGED.add(profile)
        log.warning(
            "MIG advice: a pod asks for nvidia.com/mig-%s, a profile no known model has;"
            " left out of node %s's demand (logged once per profile)",
            profile[:80],
            node,
        )


_MIB = 1 << 20


def _user_row(
    wb: Workbench, catalog: Catalog, history: PeakHistory, headroom: float
) -> tuple[service_api.ServiceFitRow, Fraction]:
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
    row: service_api.ServiceFitRow = {
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
    mig_nodes: Iterable[Mapping[str, Any]] | None = None,
    pods: Iterable[Mapping[str, Any]] = (),
) -> service_api.ServiceConsoleFit:
    """The sizing view (module docstring): per team, its GPU servers' fit and the total that
    following every advice would free. Without a catalog there is nothing to advise from.
    With ``mig_nodes`` (Node objects) and the ``pods`` that may use them, also ``mig``:
    :func:`mig_rows`."""
    allowed = set(only) if only is not None else None
    teams: dict[str, tuple[list[service_api.ServiceFitRow], Fraction]] = {}
    if catalog is not None:
        for wb in sorted(workbenches, key=lambda w: (w.team, w.key)):
            if wb.gpu_equivalents <= 0 or (allowed is not None and wb.team not in allowed):
                continue
            row, frees = _user_row(wb, catalog, history, headroom)
            rows, total = teams.get(wb.team, ([], Fraction(0)))
            teams[wb.team] = ([*rows, row], total + frees)
    answer: service_api.ServiceConsoleFit = {
        "catalog": catalog is not None,
        "headroom": headroom,
        "visible_teams": sorted(allowed) if allowed is not None else None,
        "teams": [
            {"team": team, "frees": format_gpu_equivalents(total), "users": rows}
            for team, (rows, total) in sorted(teams.items())
        ],
    }
    if mig_nodes is not None:
        answer["mig"] = mig_rows(mig_nodes, pods)
    return answer


def mig_rows(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> list[service_api.ServiceConsoleMigNode]:
    """Per MIG node (mixed strategy, a model with known profiles), by name: its config now,
    the demand its pods put on it, the advised config and the line an operator acts on."""
    pods = list(pods)
    rows: list[service_api.ServiceConsoleMigNode] = []
    for node in nodes:
        advice = node_advice(node, pods)
        if advice is None:
            continue
        _log_unknown(advice.node, advice.ignored)
        rows.append(
            {
                "node": advice.node,
                "model": advice.model,
                "gpus": advice.gpus,
                "now": advice.current,
                "demand": dict(sorted(advice.demand.items())),
                "advised": advice.plan.config,
                "reason": advice.plan.reason,
                "line": advice.line,
            }
        )
    return sorted(rows, key=lambda r: r["node"])
