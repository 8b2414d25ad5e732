"""``gpuaas-admin`` run as a process: --check-policy and --explain on good and bad files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "culler" / "examples"


def culler(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuaas_service.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )


def test_check_policy_ok() -> None:
    result = culler("--check-policy", str(EXAMPLES / "policy.yaml"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "policy OK: 3 policies"
    assert lines[1].startswith("  policies[0] whole-gpus: match kinds=gpu, idle after 30m,")
    assert result.stderr == ""


def test_check_policy_names_the_notification_webhook(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "notify: {webhook: 'http://127.0.0.1:9/hook', timeout: 3s}\n"
        "policies: [{name: all, idle_after: 1h}]\n",
        encoding="utf-8",
    )
    result = culler("--check-policy", str(policy))
    assert result.returncode == 0, result.stderr
    assert "warnings and reclaims posted to http://127.0.0.1:9/hook (timeout 3s)" in result.stdout


def test_check_policy_lists_every_error_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text(
        "policies:\n"
        "  - name: ok\n"
        "    match: {kinds: [gpu]}\n"
        "    idle_after: 30m\n"
        "  - name: bad\n"
        '    idle_after: "5 parsecs"\n'
        "    reclaim: sometimes\n"
        "    match: {kinds: [tpu]}\n",
        encoding="utf-8",
    )
    result = culler("--check-policy", str(bad))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{bad}: 3 problem(s) in the policy:",
        "  policies[1].match.kinds[0]: 'tpu' is not a kind: one of gpu, mig, shared, fraction, cpu"
        " (did you mean 'gpu'?)",
        '  policies[1].idle_after: "5 parsecs" is not a duration (use e.g. 30m, 2h)',
        "  policies[1].reclaim: 'sometimes' is not one of when-queued, always",
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("policies: [\n", "(file): not valid YAML"),
        ("", "policies: is required: the file is empty"),
        (None, "(file): cannot read the policy file"),
    ],
)
def test_check_policy_malformed_files(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "policy.yaml"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = culler("--check-policy", str(path))
    assert result.returncode == 2
    assert message in result.stderr


def test_check_policy_against_the_catalog(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        "offerings:\n"
        "  - {slug: cpu, display_name: CPU only, kind: cpu}\n"
        "tenants:\n"
        "  - {name: team-a, display_name: Team A, groups: [team-a], local_queue: team-a,\n"
        "     offerings: [cpu], default_offering: cpu}\n",
        encoding="utf-8",
    )
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "policies:\n  - {name: p, match: {teams: [team-b]}, idle_after: 1h}\n", encoding="utf-8"
    )
    result = culler("--check-policy", str(policy), "--catalog", str(catalog))
    assert result.returncode == 2
    assert "policies[0].match.teams[0]: 'team-b' is not a team in the catalog" in result.stderr
    policy.write_text(
        "policies:\n  - {name: p, match: {teams: [team-a]}, idle_after: 1h}\n", encoding="utf-8"
    )
    ok = culler("--check-policy", str(policy), "--catalog", str(catalog))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("policy OK: 1 policy\n")


def test_explain_the_example_snapshot() -> None:
    result = culler(
        "--explain",
        "--policy",
        str(EXAMPLES / "policy.yaml"),
        "--snapshot",
        str(EXAMPLES / "snapshot.json"),
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("gpuaas-admin --explain at 2026-11-30T16:40:00.000Z")
    assert "team-a/train-resnet  (ClusterQueue team-a-training, position 1, priority 100)" in out
    assert "warn: lacks 2 nvidia.com/mig-1g.5gb in a100-mig: warning alice, bob" in out
    rows = {
        line.split()[1]: line.split()[0]
        for line in out.splitlines()
        if line.startswith("  ")
        and len(line.split()) > 1
        and line.split()[1] in ("alice", "bob", "carol", "dave")
    }
    assert rows == {"alice": "WARN", "bob": "WARN", "carol": "skip", "dave": "WARN"}
    assert "busy [in_use_or_unsure]: in use: kernel k-carol is busy" in out
    assert "max-idle [reasons_of_its_own]: presumed idle 5h40m, max_idle is 4h" in out
    assert "its kernels hold 2.0 GiB of GPU memory" in out
    assert out.rstrip().endswith("warn 3, waiting 0, warnings withdrawn 0, left alone 1.")


def test_explain_json_and_clock(tmp_path: Path) -> None:
    result = culler(
        "--explain",
        "--policy",
        str(EXAMPLES / "policy.yaml"),
        "--snapshot",
        str(EXAMPLES / "snapshot.json"),
        "--now",
        "2026-11-30T13:40:00Z",
        "--dry-run",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["user"] for r in records] == ["alice", "bob", "carol", "dave"]
    assert all(r["dry_run"] for r in records)
    assert all(r["at"] == "2026-11-30T13:40:00.000Z" for r in records)


def test_explain_bad_snapshot(tmp_path: Path) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(
        json.dumps(
            {
                "workbenches": [
                    {"user": "a", "kind": "tpu", "started_at": "yesterday"},
                    {
                        "kind": "gpu",
                        "started_at": "2026-11-30T10:00:00Z",
                        "activity": {"kernels": "x"},
                        "activity_received_at": "2026-11-30T10:00:00Z",
                    },
                ],
                "pending": [{"name": "w", "namespace": "ns", "needs": [{"amount": "lots"}]}],
            }
        ),
        encoding="utf-8",
    )
    result = culler("--explain", "--policy", str(EXAMPLES / "policy.yaml"), "--snapshot", str(snap))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{snap}: 7 problem(s) in the snapshot:",
        "  workbenches[0].kind: 'tpu' is not one of gpu, mig, shared, fraction, cpu",
        "  workbenches[0].started_at: 'yesterday' is not an ISO 8601 time",
        "  workbenches[1].user: is required",
        "  workbenches[1].activity.kernels: must be a list",
        "  pending[0].needs[0].resource: is required",
        "  pending[0].needs[0].amount: 'lots' is not an amount",
        "  pending[0].cluster_queue: is required",
    ]


def test_explain_weighs_the_pods_gpu_utilisation_from_prometheus(tmp_path: Path) -> None:
    data = json.loads((EXAMPLES / "snapshot.json").read_text(encoding="utf-8"))
    by_user = {w["user"]: w for w in data["workbenches"]}
    by_user["bob"]["pod_utilization"] = 85  # a MIG slice busy by DCGM, idle by its kernels
    by_user["alice"]["pod_utilization"] = 2
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(data), encoding="utf-8")
    args = ("--explain", "--policy", str(EXAMPLES / "policy.yaml"), "--snapshot", str(snap))
    result = culler(*args)
    assert result.returncode == 0, result.stderr
    assert "pod GPU utilisation 85% (busy above" in result.stdout
    rows = {
        line.split()[1]: line.split()[0]
        for line in result.stdout.splitlines()
        if line.startswith("  ")
        and len(line.split()) > 1
        and line.split()[1] in ("alice", "bob", "carol", "dave")
    }
    assert rows == {"alice": "skip", "bob": "skip", "carol": "skip", "dave": "WARN"}
    # without bob, alice's slice alone cannot admit the Job: nobody is warned for it
    assert "the idle workbenches it could use hold only 1" in result.stdout
    by_user["bob"]["pod_utilization"] = 150
    snap.write_text(json.dumps(data), encoding="utf-8")
    result = culler(*args)
    assert result.returncode == 2
    assert "workbenches[1].pod_utilization: 150 is not a percentage (0-100)" in result.stderr


def test_explain_needs_a_snapshot_for_now() -> None:
    result = culler("--explain", "--policy", str(EXAMPLES / "policy.yaml"))
    assert result.returncode == 2
    assert "--explain needs --snapshot FILE" in result.stderr
    assert "not implemented yet" in result.stderr


def test_help_is_honest_and_a_mode_is_required() -> None:
    helped = culler("--help")
    assert helped.returncode == 0
    assert "runs inside the gpuaas hub service: gpuaas-service --policy FILE" in " ".join(
        helped.stdout.split()
    )
    bare = culler()
    assert bare.returncode == 2
    assert (
        "one of the arguments --check-policy --explain --mig-advice --doctor is required"
        in bare.stderr
    )
