"""Which devices a reference names, and what a device is (``jupyter_gpuaas.gpu.model``)."""

from __future__ import annotations

import pytest

from jupyter_gpuaas.gpu.model import Device, device_matches

GiB = 1 << 30
WHOLE = Device("GPU-whole", 0, "H100", 80 * GiB, 0)
MIG_PARENT = Device("GPU-parent", 1, "A100", 40 * GiB, 0, mig_enabled=True)
MIG_DEVICE = Device(
    "MIG-slice", 3, "A100 MIG 1g.5gb", 5 * GiB, 0, parent_uuid="GPU-parent", mig_profile="1g.5gb"
)


@pytest.mark.parametrize(
    ("refs", "device", "parent_index", "named"),
    [
        (frozenset(), WHOLE, None, False),  # nothing visible
        (frozenset({"all"}), MIG_DEVICE, 1, True),
        (frozenset({"GPU-whole"}), WHOLE, None, True),
        (frozenset({"0"}), WHOLE, None, True),
        (frozenset({"1"}), WHOLE, None, False),
        # a MIG device: by its UUID, its parent's UUID or index, or "GPU:MIG"
        (frozenset({"MIG-slice"}), MIG_DEVICE, 1, True),
        (frozenset({"GPU-parent"}), MIG_DEVICE, 1, True),
        (frozenset({"1"}), MIG_DEVICE, 1, True),
        (frozenset({"1:3"}), MIG_DEVICE, 1, True),
        (frozenset({"1:2"}), MIG_DEVICE, 1, False),
        # its own index alone is an index inside the parent, not a GPU's
        (frozenset({"3"}), MIG_DEVICE, 1, False),
        (frozenset({"GPU-whole", "0"}), MIG_DEVICE, 1, False),
    ],
)
def test_device_matches(
    refs: frozenset[str], device: Device, parent_index: int | None, named: bool
) -> None:
    assert device_matches(refs, device, parent_index) is named


def test_a_mig_enabled_gpu_holds_no_processes_and_only_a_plain_gpu_is_whole() -> None:
    assert (WHOLE.whole_gpu, WHOLE.holds_processes) == (True, True)
    assert (MIG_PARENT.whole_gpu, MIG_PARENT.holds_processes) == (False, False)
    assert (MIG_DEVICE.whole_gpu, MIG_DEVICE.holds_processes) == (False, True)
