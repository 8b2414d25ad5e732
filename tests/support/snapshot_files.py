"""Kernel-state snapshots written by hand, as :mod:`jupyter_gpuaas.kernel.snapshot` lays them
out (a manifest and a data file, mode 0600), so that a test can change any field of one."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import xxhash

from jupyter_gpuaas.kernel import store

__all__ = ["checksum", "sha", "write_snapshot"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def checksum(data: bytes, version: int = store.FORMAT_VERSION) -> dict[str, str]:
    """An entry's checksum field for ``data`` in format ``version`` (1: sha256, 2: xxh3_128)."""
    return {"sha256": sha(data)} if version == 1 else {"xxh3_128": xxhash.xxh3_128_hexdigest(data)}


def write_snapshot(
    folder: Path,
    values: dict[str, bytes],
    *,
    key: str = "train",
    kinds: dict[str, dict[str, Any]] | None = None,
    **overrides: Any,
) -> tuple[Path, Path]:
    """The manifest ``<key>.json`` and its data file in ``folder``: each of ``values`` is one
    variable's bytes (its entry's fields beside its place and checksum from ``kinds``,
    default ``{"kind": "pickle"}``), with ``overrides`` of the manifest's fields (``sha256``
    is recomputed from the entries unless overridden; the checksums follow
    ``format_version``)."""
    folder.mkdir(parents=True, exist_ok=True)
    data_path = folder / f"{key}.abc.data"
    version = overrides.get("format_version", store.FORMAT_VERSION)
    entries: list[dict[str, Any]] = []
    offset = 0
    for name, value in values.items():
        fields = (kinds or {}).get(name, {"kind": "pickle"})
        place = {"offset": offset, "length": len(value), **checksum(value, version)}
        entries.append({"name": name, **fields, **place})
        offset += len(value)
    data_path.write_bytes(b"".join(values.values()))
    manifest: dict[str, Any] = {
        "format": store.FORMAT,
        "format_version": store.FORMAT_VERSION,
        "owner_uid": os.getuid(),
        "package_version": "0.0-test",
        "saved_at": "2026-12-01T12:00:00Z",
        "bytes": offset,
        "data": data_path.name,
        "variables": entries,
        "lost": [],
    }
    manifest.update(overrides)
    if "sha256" not in overrides:
        manifest["sha256"] = store.entries_digest(manifest["variables"])
    path = folder / f"{key}.json"
    path.write_text(json.dumps(manifest))
    path.chmod(0o600)
    data_path.chmod(0o600)
    return path, data_path
