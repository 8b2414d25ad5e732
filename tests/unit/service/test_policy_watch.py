"""The policy file's watcher (GPUaaSService._watch_policy over reclaim/policy.py's PolicyFile)
never dies: whatever is written to the file, a failure to read or check it is a policy error
(api/health's ``policy`` says invalid with the reason, a log line, the metric), the last good
policy stays in force, and a later good file is loaded."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gpuaas_service.app import GPUaaSService, _policy_health
from gpuaas_service.metrics import Metrics
from gpuaas_service.reclaim.loop import LoopState
from gpuaas_service.reclaim.policy import PolicyFile, PolicySet, load_policy_file
from tests.support.clock import until

GOOD = """\
policies:
  - name: gpu-notebooks
    match: {kinds: [gpu]}
    idle_after: 30m
    reclaim: when-queued
"""
OTHER = GOOD.replace("30m", "45m")


def alias_bomb(levels: int) -> bytes:
    """Lists of 9 aliases to the list before: 9 ** levels values in a few hundred bytes."""
    lines = [b"l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    for n in range(1, levels):
        lines.append(b"l%d: &l%d [%s]" % (n, n, b", ".join([b"*l%d" % (n - 1)] * 9)))
    return b"\n".join(lines) + b"\n"


class LoopStandIn:
    """What the watcher uses of the reclaim loop: its state's policies and its metrics."""

    def __init__(self, policies: PolicySet) -> None:
        self.state = LoopState(policies)
        self.metrics = Metrics(CollectorRegistry())

    def set_policies(self, policies: PolicySet) -> None:
        self.state = replace(self.state, policies=policies)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"# caf\xe9: a Latin-1 byte in a comment\n" + GOOD.encode(), "not UTF-8 text (byte 5"),
        (b"policies: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested deeper than 64 levels"),
        (alias_bomb(7), "aliases"),
    ],
    ids=["non-utf8", "too-deep", "alias-bomb"],
)
async def test_a_bad_file_under_the_running_watcher_is_reported_and_it_lives_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, reason: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(GOOD)
    source = PolicyFile(str(path))
    source.check()
    loop = LoopStandIn(source.policies)
    service = GPUaaSService(policy=str(path))

    async def every_10_ms(_interval: float) -> None:  # the watcher's pause between checks
        await asyncio.sleep(0.01)

    watcher = asyncio.ensure_future(
        service._watch_policy(source, loop, every_10_ms)  # type: ignore[arg-type]
    )
    try:
        path.write_bytes(content)
        await until("the error", lambda: bool(source.error) or watcher.done())
        assert not watcher.done(), watcher.exception()
        assert reason in source.error
        health = _policy_health(source, loop)  # type: ignore[arg-type]
        assert health["valid"] is False
        assert reason in str(health["error"])
        assert health["reclaim"] == "on"  # the last good policy stays
        assert any(
            r.levelno == logging.ERROR and reason in r.getMessage() for r in caplog.records
        ), [r.getMessage() for r in caplog.records]
        assert loop.metrics.policy_valid._value.get() == 0

        path.write_text(OTHER)  # and it still reads the next edit
        await until("the next good file", lambda: not source.error or watcher.done())
        assert not watcher.done(), watcher.exception()
        assert loop.state.policies == load_policy_file(str(path))
        assert loop.metrics.policy_valid._value.get() == 1
    finally:
        watcher.cancel()


def test_a_file_that_cannot_be_read_at_all_is_a_policy_error(tmp_path: Path) -> None:
    """At start (the service then runs with reclaim off), a directory where the file should
    be, and a file too big to be a policy."""
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"# caf\xe9\n" + GOOD.encode())
    at_start = PolicyFile(str(latin1))
    assert at_start.check() is False
    assert "(file): not UTF-8 text" in at_start.error
    assert at_start.policies.policies == ()
    source = PolicyFile(str(tmp_path))
    assert source.check() is False
    assert "cannot read the policy file" in source.error
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * (2 * 1024 * 1024) + b"\n" + GOOD.encode())
    source = PolicyFile(str(big))
    source.check()
    assert "more than the" in source.error


def test_a_failure_in_the_checks_themselves_is_the_files_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a check raises (a bug, a recursion in a reader), the file is reported invalid
    and the last good policy stays: check() never raises into the watcher."""
    from gpuaas_service.reclaim import policy

    path = tmp_path / "policy.yaml"
    path.write_text(GOOD)
    source = PolicyFile(str(path))
    source.check()
    good = source.policies

    def broken(*args: object, **kwargs: object) -> PolicySet:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(policy, "load_policy", broken)
    path.write_text(OTHER)
    assert source.check() is False
    assert "cannot be checked: RecursionError('maximum recursion depth exceeded')" in source.error
    assert source.policies == good
    assert source.invalid == 1
