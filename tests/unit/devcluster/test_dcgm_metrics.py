"""The node agent's GPUs in dcgm-exporter's format (devcluster/dcgm.py): labels, units, and
which pod each device's samples name."""

from __future__ import annotations

import re

from devcluster import dcgm
from jupyter_gpuaas.gpu.simulate import HoldRecord
from jupyter_gpuaas.gpu.spec import parse_devices

GPUS = parse_devices("1xA100-40GB,1xA100-40GB:mig=2x1g.5gb+1x3g.20gb,1xL4-24GB:replicas=4")
SAMPLE = re.compile(r"^(\w+)\{(.*)\} (\S+)$")


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            out.append((match.group(1), labels, float(match.group(3))))
    return out


def test_a_held_mig_slice_names_its_pod_and_reports_memory_in_mib_and_a_ratio() -> None:
    slice0 = GPUS[1].mig[0]
    holds = [HoldRecord(pid=1, device=slice0.uuid, size=3 * 1024**3, utilization=40)]
    holders = {slice0.uuid: [dcgm.Holder("jupyter-users", "jupyter-alice", "notebook")]}
    rows = samples(dcgm.render("local-0", GPUS, holds, holders))
    alice = [(name, value) for name, labels, value in rows if labels["pod"] == "jupyter-alice"]
    assert sorted(alice) == [
        ("DCGM_FI_DEV_FB_FREE", 5 * 1024 - 3 * 1024),
        ("DCGM_FI_DEV_FB_USED", 3 * 1024),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.4),
    ], "no GPU_UTIL on a MIG instance, as DCGM gives none there"
    labels = next(lab for _, lab, _ in rows if lab["pod"] == "jupyter-alice")
    assert labels["UUID"] == GPUS[1].uuid, "a MIG instance keeps its parent's UUID"
    assert (labels["gpu"], labels["GPU_I_PROFILE"], labels["GPU_I_ID"]) == ("1", "1g.5gb", "0")
    assert (labels["namespace"], labels["container"], labels["Hostname"]) == (
        "jupyter-users",
        "notebook",
        "local-0",
    )


def test_a_device_nobody_holds_has_empty_pod_labels_and_a_shared_one_a_sample_per_pod() -> None:
    shared = GPUS[2]
    holders = {shared.uuid: [dcgm.Holder("ns", "p1", "c"), dcgm.Holder("ns", "p2", "c")]}
    holds = [HoldRecord(pid=1, device=shared.uuid, size=1024**3, utilization=70)] * 2
    rows = samples(dcgm.render("local-0", GPUS, holds, holders))
    util = {
        lab["pod"]: v for n, lab, v in rows if n == "DCGM_FI_DEV_GPU_UTIL" and lab["gpu"] == "2"
    }
    assert util == {"p1": 100.0, "p2": 100.0}, "the whole GPU's figure, capped at 100 %"
    whole = [lab for n, lab, _ in rows if n == "DCGM_FI_DEV_GPU_UTIL" and lab["gpu"] == "0"]
    assert [(lab["pod"], lab["namespace"], lab["container"]) for lab in whole] == [("", "", "")]


def test_every_metric_has_help_and_type_once() -> None:
    text = dcgm.render("n", GPUS, [], {})
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
        assert text.count(f"# TYPE {name} gauge") == 1
        assert text.count(f"# HELP {name} ") == 1
