"""Where a server stands: its policy and next step, for the sidebar."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from fractions import Fraction

from gpuaas_service.console.standing import standing
from gpuaas_service.reclaim.decide import decide
from gpuaas_service.reclaim.idleness import Idleness, State
from gpuaas_service.reclaim.policy import load_policy
from tests.support.console_samples import T0, known, policy_of, wb


def test_standing_of_an_idle_server_with_no_queued_work() -> None:
    policies = load_policy({"policies": [{"name": "mig", "idle_after": "30m"}]})
    alice = wb("alice", "team-a", State.IDLE, Fraction(1, 7))
    alice = replace(alice, idleness=Idleness(State.IDLE, T0 - timedelta(minutes=12), "no kernel"))
    plan = decide([alice], [], policies, now=T0)
    got = known(standing(plan, policies, "alice", now=T0))
    assert got["activity"] == "idle"
    assert got["idle_seconds"] == 720
    assert policy_of(got)["name"] == "mig"
    assert policy_of(got)["idle_after_seconds"] == 1800
    assert policy_of(got)["reclaim"] == "when-queued"
    assert (got["action"], got["code"]) == ("skip", "not-idle-yet")
    assert standing(plan, policies, "bob", now=T0)["known"] is False
    assert standing(None, policies, "alice", now=T0)["known"] is False


def test_a_server_that_keeps_its_state_is_told_how_long_a_reclaim_would_wait_for_it() -> None:
    """``snapshot_wait_seconds``: the policy's wait for the size its last report said (60 s
    and 5 s per GiB by default), for the sidebar to say whether the kernels' save fits."""
    policies = load_policy({"policies": [{"name": "mig", "idle_after": "30m"}]})
    alice = replace(wb("alice", "team-a", State.IDLE, Fraction(1, 7)), keeps_state=True)
    bob = wb("bob", "team-a", State.IDLE, Fraction(1, 7))
    plan = decide([alice, bob], [], policies, now=T0)

    assert (
        known(standing(plan, policies, "alice", now=T0, state_bytes=4 << 30))[
            "snapshot_wait_seconds"
        ]
        == 80
    )
    assert known(standing(plan, policies, "alice", now=T0))["snapshot_wait_seconds"] == 60
    assert (
        known(standing(plan, policies, "bob", now=T0, state_bytes=4 << 30))["snapshot_wait_seconds"]
        is None
    )
