"""The sizing view (console/fit.py, pure): each GPU server's offering, its user's recent peak,
the spawn form's advice for it and the GPU-equivalents following the advice would free."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from gpuaas_service.console.fit import fit_rows
from gpuaas_service.reclaim.decide import Workbench
from gpuaas_service.reclaim.idleness import State
from jupyter_gpuaas.core.catalog import Catalog, Offering, Tenant
from jupyter_gpuaas.core.sizing import PeakHistory
from tests.support.console_samples import wb

CATALOG = Catalog(
    offerings={
        "mig-1g": Offering(
            "mig-1g", "MIG 1g.5gb", "mig", gpu_memory="5Gi", gpu_equivalents=Fraction(1, 7)
        ),
        "mig-3g": Offering(
            "mig-3g", "MIG 3g.20gb", "mig", gpu_memory="20Gi", gpu_equivalents=Fraction(3, 7)
        ),
        "gpu": Offering("gpu", "Whole A100", "gpu", gpu_memory="40Gi", gpu_equivalents=Fraction(1)),
    },
    tenants={
        "team-a": Tenant("team-a", "Team A", ("a",), "team-a", ("mig-1g", "mig-3g", "gpu"), "gpu"),
    },
)


def server(user: str, offering: str, ge: Fraction, team: str = "team-a") -> Workbench:
    return replace(wb(user, team, State.BUSY, ge, kind="gpu"), offering=offering)


def test_advice_per_user_and_what_following_it_frees() -> None:
    history = PeakHistory({"alice": (3000, 1200), "bob": (30000,), "carol": (15000,)})
    answer = fit_rows(
        [
            server("alice", "gpu", Fraction(1)),  # peaked at 2.9 GiB: a 1g.5gb slice fits
            server("bob", "mig-3g", Fraction(3, 7)),  # 29 GiB: needs the whole GPU, frees nothing
            server("carol", "gpu", Fraction(1)),  # 14.6 GiB x 1.25 → 3g.20gb
            server("dave", "gpu", Fraction(1)),  # no history: the team's default, frees nothing
            server("erin", "cpu", Fraction(0)),  # holds no GPU: not listed
        ],
        history,
        CATALOG,
    )
    (team,) = answer["teams"]
    rows = {u["user"]: u for u in team["users"]}
    assert sorted(rows) == ["alice", "bob", "carol", "dave"]
    alice = rows["alice"]
    assert (alice["advised"], alice["frees"], alice["peak"]) == ("mig-1g", "0.86", "2.9 GiB")
    assert (alice["sessions"], alice["peak_bytes"], alice["measured"]) == (2, 3000 << 20, True)
    assert "peaked at 2.9 GiB" in alice["reason"]
    assert (rows["bob"]["advised"], rows["bob"]["frees"]) == ("gpu", "0")
    assert (rows["carol"]["advised"], rows["carol"]["frees"]) == ("mig-3g", "0.57")
    dave = rows["dave"]
    assert (dave["advised"], dave["frees"], dave["peak"], dave["measured"]) == (
        "gpu",
        "0",
        None,
        False,
    )
    assert team["frees"] == "1.43"  # 6/7 + 4/7
    assert answer["catalog"] is True


def test_a_team_leads_teams_only_and_no_catalog_no_advice() -> None:
    servers = [server("alice", "gpu", Fraction(1)), server("zed", "gpu", Fraction(1), "team-z")]
    lead = fit_rows(servers, PeakHistory({}), CATALOG, only=["team-z"])
    assert [t["team"] for t in lead["teams"]] == ["team-z"]
    (zed,) = lead["teams"][0]["users"]
    assert zed["advised"] is None  # team-z is not in the catalog: nothing to advise from
    assert zed["frees"] == "0"
    none = fit_rows(servers, PeakHistory({"alice": (100,)}), None)
    assert (none["catalog"], none["teams"]) == (False, [])
