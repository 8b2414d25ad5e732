"""The demo's way down is seen within its walk: its policy shortens
``way_down_after`` for the GPU workbenches, and the banner says the same time."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from demo.__main__ import DEMO_POLICY, banner
from devcluster.config import demo_settings
from gpuaas_service.reclaim.policy import load_policy_file
from jupyter_gpuaas.core.durations import format_duration


def test_the_demo_policy_offers_the_way_down_within_the_walk_and_the_banner_says_when(
    tmp_path: Path,
) -> None:
    policies = load_policy_file(str(DEMO_POLICY))
    half = policies.policy_for(
        team="team-a", kind="fraction", offering="local-half", user="alice", groups=["team-a"]
    )
    assert half is not None
    assert half.way_down_after is not None
    assert half.way_down_after <= timedelta(minutes=5)  # within the walk, not the 30 min default
    hub = cast(Any, SimpleNamespace(url="http://127.0.0.1:8000", log_path=tmp_path / "hub.log"))
    text = banner(hub, "pw", Path("/bin/kubectl"), demo_settings({"HOME": str(tmp_path)}))
    minutes = int(half.way_down_after.total_seconds() // 60)
    assert f"for {minutes} min is offered a smaller share" in text, format_duration(
        half.way_down_after
    )
