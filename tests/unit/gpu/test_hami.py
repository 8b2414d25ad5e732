"""HAMi's limits as HAMi-core reads them from the container's environment."""

from __future__ import annotations

import pytest

from jupyter_gpuaas.gpu.hami import Cap, HamiEnv, hami_env, parse_limit
from jupyter_gpuaas.gpu.spec import GiB

MiB = 1024**2


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("6144m", 6144 * MiB),  # what HAMi's device plugin writes: "<MiB>m"
        ("6144M", 6144 * MiB),
        ("6g", 6 * GiB),
        ("512k", 512 * 1024),
        ("1048576", 1048576),  # no suffix: bytes
        ("0m", 0),  # HAMi-core: 0 is no limit
        ("", 0),
        (None, 0),
        ("6.5g", 0),  # not a whole number: unreadable, so no limit
        ("lots", 0),
    ],
)
def test_parse_limit(text: str | None, size: int) -> None:
    assert parse_limit(text) == size


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        # No HAMi: nothing is capped, and HAMi-core is not there to rewrite anything.
        ({}, HamiEnv()),
        ({"NVIDIA_VISIBLE_DEVICES": "GPU-1"}, HamiEnv()),
        # What HAMi's device plugin sets for one vGPU of 6 GiB and 25% of the cores.
        (
            {
                "CUDA_DEVICE_MEMORY_LIMIT_0": "6144m",
                "CUDA_DEVICE_SM_LIMIT": "25",
                "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/usr/local/vgpu/x.cache",
            },
            HamiEnv(True, {0: Cap(6 * GiB, "CUDA_DEVICE_MEMORY_LIMIT_0", 25)}),
        ),
        # Two vGPUs; cores 0 means not limited (HAMi-core's default of 100).
        (
            {
                "CUDA_DEVICE_MEMORY_LIMIT_0": "4096m",
                "CUDA_DEVICE_MEMORY_LIMIT_1": "2048m",
                "CUDA_DEVICE_SM_LIMIT": "0",
            },
            HamiEnv(
                True,
                {
                    0: Cap(4 * GiB, "CUDA_DEVICE_MEMORY_LIMIT_0", None),
                    1: Cap(2 * GiB, "CUDA_DEVICE_MEMORY_LIMIT_1", None),
                },
            ),
        ),
        # The index-less variable is every device's fallback; an indexed one wins over it.
        (
            {"CUDA_DEVICE_MEMORY_LIMIT": "1g", "CUDA_DEVICE_MEMORY_LIMIT_2": "3g"},
            HamiEnv(
                True,
                {
                    **{i: Cap(GiB, "CUDA_DEVICE_MEMORY_LIMIT", None) for i in range(16) if i != 2},
                    2: Cap(3 * GiB, "CUDA_DEVICE_MEMORY_LIMIT_2", None),
                },
            ),
        ),
        # HAMi-core present without a memory limit (e.g. cores only): active, nothing capped.
        ({"CUDA_DEVICE_SM_LIMIT": "50"}, HamiEnv(True, {})),
        # CUDA_DISABLE_CONTROL=true: HAMi's device plugin leaves HAMi-core out.
        ({"CUDA_DEVICE_MEMORY_LIMIT_0": "6144m", "CUDA_DISABLE_CONTROL": "true"}, HamiEnv()),
    ],
)
def test_hami_env(environ: dict[str, str], expected: HamiEnv) -> None:
    assert hami_env(environ) == expected


def test_cap_only_while_active() -> None:
    env = hami_env({"CUDA_DEVICE_MEMORY_LIMIT_0": "6144m"})
    assert env.cap(0) == Cap(6 * GiB, "CUDA_DEVICE_MEMORY_LIMIT_0", None)
    assert env.cap(1) is None
    assert HamiEnv(False, {0: Cap(GiB, "X")}).cap(0) is None
