"""Request limits and a policy file that turns invalid, on a real ``gpuaas-service`` process
under the real hub (no servers are spawned: the servers' tokens are issued by the hub with a
server token's scopes).

4 — an oversized body is refused from its Content-Length before it is sent; a flood of reports
    from one server's token is answered 429 with Retry-After while another server's reports are
    taken.
9 — the policy file turned invalid while running: the last good policy stays in force (health
    and metrics say so, with the operator token); a valid change takes effect; a service started
    with a bad file runs with reclaim off and still answers queue questions.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from devcluster.hub import free_port
from devcluster.queue_hub import OPERATOR_TOKEN
from devcluster.testing import Cluster
from jupyter_gpuaas.core.activity import Activity, KernelActivity, activity_json
from tests.support.hub import CullerHub, run_culler_hub

pytestmark = pytest.mark.integration

ONE_POLICY = """\
report_stale_after: 30s
policies:
  - name: only-one
    match: {kinds: [mig]}
    idle_after: 1h
    warn_before: 10m
"""
BAD_POLICY = """\
policies:
  - name: broken
    idle_after: banana
"""


@pytest.fixture(scope="module")
def served(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[CullerHub, Path]]:
    state = tmp_path_factory.mktemp("service-hardening")
    # the policy file is looked at every second (default 10 s), so a change shows quickly
    extra = ["--GPUaaSService.policy_check_interval=1"]
    with run_culler_hub(cluster, state, extra_args=extra) as hub:
        wait_health(hub.port)
        yield hub, state / "policy.yaml"


def call(
    port: int, path: str, token: str, method: str = "GET", body: bytes | None = None
) -> tuple[int, dict[str, str], Any]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/services/gpuaas/{path}",
        data=body,
        method=method,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            answer = json.loads(text)
        except ValueError:
            answer = text.decode(errors="replace")
        return e.code, dict(e.headers), answer


def health(port: int) -> dict[str, Any]:
    code, _, answer = call(port, "api/health", OPERATOR_TOKEN)
    assert code == 200, answer
    out: dict[str, Any] = answer
    return out


def wait_health(port: int, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            return health(port)
        except (OSError, AssertionError) as e:
            last = e
        time.sleep(0.5)
    raise AssertionError(f"the service never answered api/health: {last}")


def metrics(port: int) -> str:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/services/gpuaas/metrics",
        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return str(r.read().decode())


def report() -> bytes:
    at = datetime.now(timezone.utc)
    kernel = KernelActivity("k1", "idle", at)
    idle = Activity(sampled_at=at, source="simulated", kernels=(kernel,), idle_since=at)
    return json.dumps(activity_json(idle)).encode()


# --------------------------------------------------------------------------- 4


def test_a_notebook_over_the_limit_gets_413_in_words_through_the_hubs_proxy(
    served: tuple[CullerHub, Path],
) -> None:
    """What JupyterLab's "Run as GPU job" meets: the service's 413 with what to do, relayed by
    the hub's proxy (not its error page for a cut connection)."""
    hub, _ = served
    notebook = {"cells": [{"cell_type": "code", "source": "x" * 1_500_000}], "metadata": {}}
    body = json.dumps({"notebook": notebook, "name": "big.ipynb"}).encode()  # over 1.1 MB
    req = urllib.request.Request(
        f"{hub.url}/services/gpuaas/api/jobs",
        data=body,
        method="POST",
        headers={
            "Authorization": f"token {hub.server_token('alice')}",
            "Content-Type": "application/json",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=60)
    assert info.value.code == 413
    answer = json.loads(info.value.read())
    assert "clear the notebook's outputs" in answer["message"], answer


def test_an_oversized_body_is_refused_before_it_is_sent(served: tuple[CullerHub, Path]) -> None:
    hub, _ = served
    token = hub.server_token("alice")
    head = (
        "POST /services/gpuaas/api/activity HTTP/1.1\r\n"
        "Host: 127.0.0.1\r\n"
        f"Authorization: token {token}\r\n"
        "Content-Type: application/json\r\n"
        "Content-Length: 50000000\r\n\r\n"
    ).encode()
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as s:
        s.sendall(head)  # and not one byte of the 50 MB it announces
        answer = b""
        while chunk := s.recv(4096):  # the service answers, then closes
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 4"), answer[:200]
    assert time.monotonic() - t0 < 5


def test_one_servers_flood_is_rate_limited_while_anothers_reports_are_taken(
    served: tuple[CullerHub, Path],
) -> None:
    hub, _ = served
    flooder, other = hub.server_token("alice"), hub.server_token("bob")
    codes: list[int] = []
    retry_after: list[str] = []
    bob_codes: list[int] = []
    for i in range(40):
        code, headers, _ = call(hub.port, "api/activity", flooder, "POST", report())
        codes.append(code)
        if code == 429:
            retry_after.append(headers.get("Retry-After", ""))
        if i % 10 == 0:
            code, _, answer = call(hub.port, "api/activity", other, "POST", report())
            bob_codes.append(code)
            assert code == 200, answer
            assert answer["accepted"] is True
    # a burst of 10 (activity_report_burst), then 6 a minute (activity_reports_per_minute), so
    # at most 12 over the flood. No lower bound: alice's real server shares the bucket and
    # reports every second here (report_interval=1), so once it has run ~12 s (a loaded
    # machine, the module's earlier tests) its own reports have taken every token.
    assert codes.count(200) <= 12, codes
    assert codes.count(429) >= 28, codes
    assert all(r.isdigit() and int(r) >= 1 for r in retry_after), retry_after
    assert bob_codes == [200] * 4
    (counted,) = re.findall(
        r'gpuaas_service_requests_refused_total\{endpoint="activity"\} (\d+)\.0', metrics(hub.port)
    )
    assert int(counted) >= codes.count(429)  # and any of the real server's own
    # queue questions of a third user are answered meanwhile
    code, _, answer = call(hub.port, "api/queue", hub.user_token("carol"))
    assert code == 200, answer


# --------------------------------------------------------------------------- 9


def wait_policy(port: int, want: dict[str, Any], timeout: float = 20) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = health(port)["policy"]
        if all(last.get(k) == v for k, v in want.items()):
            return last
        time.sleep(0.5)
    raise AssertionError(f"policy health never became {want}: {last}")


def test_an_invalid_policy_file_keeps_the_last_good_one_and_a_valid_change_applies(
    served: tuple[CullerHub, Path],
) -> None:
    hub, policy = served
    first = wait_policy(hub.port, {"valid": True, "reclaim": "on"})
    in_force = first["policies_in_force"]
    assert in_force >= 2
    pid = hub.proc.service_pid()

    policy.write_text(BAD_POLICY)
    bad = wait_policy(hub.port, {"valid": False})
    assert bad["policies_in_force"] == in_force  # the last good policy still in force
    assert bad["reclaim"] == "on"
    assert "idle_after" in bad["error"]
    text = metrics(hub.port)
    assert "gpuaas_policy_valid 0.0" in text
    assert 'gpuaas_policy_reloads_total{result="invalid"}' in text

    policy.write_text(ONE_POLICY)
    good = wait_policy(hub.port, {"valid": True, "policies_in_force": 1})
    assert good["error"] == ""
    assert "gpuaas_policy_valid 1.0" in metrics(hub.port)
    assert hub.proc.service_pid() == pid  # the same process all along


def test_a_service_started_with_a_bad_policy_serves_with_reclaim_off(
    served: tuple[CullerHub, Path], tmp_path: Path
) -> None:
    hub, _ = served
    # A second service process beside the hub's, with the hub's service credentials (read
    # from the managed service's environment, as the hub gave them to it).
    pid = hub.proc.service_pid()
    assert pid is not None
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    env = dict(e.decode().split("=", 1) for e in raw if b"=" in e)
    bad = tmp_path / "policy.yaml"
    bad.write_text(BAD_POLICY)
    port = free_port()
    env["JUPYTERHUB_SERVICE_URL"] = f"http://127.0.0.1:{port}"
    log = (tmp_path / "service.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuaas_service.app",
            f"--GPUaaSService.policy={bad}",
            "--GPUaaSService.culler_interval=1",
        ],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_health(port)
        state = health(port)["policy"]
        assert state["valid"] is False
        assert state["reclaim"] == "off"
        assert state["policies_in_force"] == 0
        assert "gpuaas_policy_valid 0.0" in metrics(port)
        code, _, answer = call(port, "api/queue", hub.user_token("carol"))
        assert code == 200, answer
        assert "items" in answer
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
    assert "policy not loaded, reclaim is off" in (tmp_path / "service.log").read_text()
