"""The snapshot files and their checks (jupyter_gpuaas.kernel.store), on hand-written manifests:
the bounded, hashing sink, the manifest's checksum, and each refusal of :func:`read_manifest`
and :func:`read_verified` before any byte is unpickled."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuaas import statefiles
from jupyter_gpuaas.kernel import store
from tests.support.snapshot_files import checksum, write_snapshot


def refusal(manifest: Path) -> str:
    with pytest.raises(store.Refused) as refused:
        store.read_manifest(manifest)
    return str(refused.value)


# --------------------------------------------------------------------------- the sink


def test_each_entry_gets_its_offset_length_and_own_checksum(tmp_path: Path) -> None:
    with (tmp_path / "data").open("w+b") as f:
        sink = store.Sink(f, limit=100, deadline=time.monotonic() + 60)
        sink.begin()
        sink.write(b"ab")
        sink.write(bytearray(b"cd"))
        first = sink.end()
        sink.begin()
        sink.write(memoryview(b"xyz"))
        second = sink.end()
        f.seek(0)
        assert f.read() == b"abcdxyz"
    assert first == (0, 4, checksum(b"abcd"))
    assert second == (4, 3, checksum(b"xyz"))


def test_an_undone_entry_leaves_the_file_as_it_was_before_it(tmp_path: Path) -> None:
    with (tmp_path / "data").open("w+b") as f:
        sink = store.Sink(f, limit=100, deadline=time.monotonic() + 60)
        sink.begin()
        sink.write(b"keep")
        sink.end()
        sink.begin()
        sink.write(b"drop me")
        sink.undo()
        sink.begin()
        sink.write(b"next")
        assert sink.end() == (4, 4, checksum(b"next"))
        f.seek(0)
        assert f.read() == b"keepnext"


def test_the_budget_counts_every_entry_and_a_write_up_to_it_passes(tmp_path: Path) -> None:
    with (tmp_path / "data").open("w+b") as f:
        sink = store.Sink(f, limit=6, deadline=time.monotonic() + 60)
        sink.begin()
        sink.write(b"abc")
        sink.end()
        sink.begin()
        sink.write(b"def")  # exactly the limit
        with pytest.raises(store.OutOfBudget):
            sink.write(b"g")
        assert sink.written == 6


def test_large_writes_are_chunked_and_hashed_in_pieces_to_the_same_checksum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "CHUNK", 7)
    monkeypatch.setattr(store, "PIECE", 3)  # each chunk hashed and written in pieces
    payload = bytes(range(256)) * 3
    with (tmp_path / "data").open("w+b") as f:
        sink = store.Sink(f, limit=len(payload), deadline=time.monotonic() + 60)
        sink.begin()
        assert sink.write(payload) == len(payload)
        assert sink.end() == (0, len(payload), checksum(payload))
        f.seek(0)
        assert f.read() == payload


def test_the_budget_is_checked_chunk_by_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "CHUNK", 4)
    with (tmp_path / "data").open("w+b") as f:
        sink = store.Sink(f, limit=10, deadline=time.monotonic() + 60)
        sink.begin()
        with pytest.raises(store.OutOfBudget):
            sink.write(b"x" * 12)
        assert sink.written == 8  # the two chunks that fitted, which undo() then drops
        sink.undo()
        assert sink.written == 0


# --------------------------------------------------------------------------- the checksum


def test_the_manifest_checksum_ignores_key_order_and_follows_every_value() -> None:
    entries: list[dict[str, Any]] = [{"name": "a", "offset": 0, "length": 1, "xxh3_128": "x"}]
    reordered: list[dict[str, Any]] = [{"xxh3_128": "x", "length": 1, "offset": 0, "name": "a"}]
    assert store.entries_digest(entries) == store.entries_digest(reordered)
    changed = [{**entries[0], "length": 2}]
    assert store.entries_digest(changed) != store.entries_digest(entries)
    assert store.entries_digest([]) != store.entries_digest(entries)


# --------------------------------------------------------------------------- read_manifest


def test_a_good_snapshot_reads_back_with_its_entries_and_data(tmp_path: Path) -> None:
    manifest, data_path = write_snapshot(tmp_path, {"a": b"one", "b": b"two!"})
    read = store.read_manifest(manifest)
    assert read.data_path == data_path
    assert [e["name"] for e in read.entries] == ["a", "b"]
    with data_path.open("rb") as data:
        assert store.read_verified(read, data) == [[bytearray(b"one")], [bytearray(b"two!")]]


def test_no_manifest_is_not_found_not_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        store.read_manifest(tmp_path / "none.json")


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"format": "something else"}, "not a jupyter-gpuaas kernel state manifest"),
        (
            {"format_version": 99, "package_version": "9.9"},
            "format version 99 (written by jupyter-gpuaas 9.9); this version reads formats 1 and 2",
        ),
        ({"owner_uid": os.getuid() + 1}, f"written by user id {os.getuid() + 1}, not by you"),
        ({"variables": "all"}, "damaged (no list of variables)"),
        ({"variables": [1, 2]}, "damaged (no list of variables)"),
        ({"sha256": "0" * 64}, "damaged (its checksum does not match)"),
        ({"data": "../elsewhere.data"}, "names no data file beside it"),
        ({"data": ".."}, "names no data file beside it"),
        ({"data": 7}, "names no data file beside it"),
        ({"data": "other.data"}, "the snapshot's data file other.data is missing"),
    ],
)
def test_a_manifest_that_is_not_this_users_own_snapshot_is_refused(
    tmp_path: Path, overrides: dict[str, Any], said: str
) -> None:
    manifest, _ = write_snapshot(tmp_path, {"a": b"one"}, **overrides)
    assert said in refusal(manifest)


def test_a_manifest_that_is_not_json_is_refused(tmp_path: Path) -> None:
    manifest, _ = write_snapshot(tmp_path, {"a": b"one"})
    manifest.write_text("{not json")
    assert refusal(manifest).startswith("the snapshot's manifest is damaged (not JSON:")


def test_a_manifest_too_large_to_be_one_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest, _ = write_snapshot(tmp_path, {"a": b"one"})
    monkeypatch.setattr(statefiles, "MAX_MANIFEST_BYTES", 10)
    assert "too large to be one" in refusal(manifest)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"offset": -1}, "a variable has no place"),
        ({"length": "3"}, "a variable has no place"),
        ({"offset": None}, "a variable has no place"),
        ({"length": 4}, "data file is shorter than its manifest says"),
        ({"offset": 1}, "data file is shorter than its manifest says"),
    ],
)
def test_an_entry_outside_the_data_file_is_refused(
    tmp_path: Path, entry: dict[str, Any], said: str
) -> None:
    variables = [{"name": "a", "offset": 0, "length": 3, **checksum(b"one"), **entry}]
    manifest, _ = write_snapshot(tmp_path, {"a": b"one"}, variables=variables)
    assert said in refusal(manifest)


@pytest.mark.parametrize("which", ["manifest", "data file"])
def test_a_file_others_can_write_is_refused(tmp_path: Path, which: str) -> None:
    manifest, data_path = write_snapshot(tmp_path, {"a": b"one"})
    (manifest if which == "manifest" else data_path).chmod(0o620)
    assert f"the snapshot's {which} " in (said := refusal(manifest))
    assert said.endswith("can be written by others")


def test_a_link_in_place_of_the_data_file_is_refused(tmp_path: Path) -> None:
    manifest, data_path = write_snapshot(tmp_path, {"a": b"one"})
    real = tmp_path / "real.data"
    data_path.rename(real)
    data_path.symlink_to(real)
    assert refusal(manifest) == "the snapshot's data file train.abc.data is not a plain file"


# --------------------------------------------------------------------------- read_verified


def test_damaged_data_names_the_first_variable_that_differs(tmp_path: Path) -> None:
    manifest, _ = write_snapshot(tmp_path, {"a": b"one", "b": b"two"})
    read = store.read_manifest(manifest)
    damaged = io.BytesIO(b"oneTWO")
    with pytest.raises(store.Refused) as refused:
        store.read_verified(read, damaged)
    assert str(refused.value) == (
        "the snapshot's data is damaged (the checksum of `b` does not match); nothing was loaded"
    )


def test_data_shorter_than_the_manifest_is_refused_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "CHUNK", 2)
    manifest, _ = write_snapshot(tmp_path, {"a": b"one", "b": b"two"})
    read = store.read_manifest(manifest)
    with pytest.raises(store.Refused, match="shorter than its manifest says"):
        store.read_verified(read, io.BytesIO(b"onet"))


def test_data_read_in_chunks_checks_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "CHUNK", 3)
    value = bytes(range(100))
    manifest, data_path = write_snapshot(tmp_path, {"big": value, "empty": b""})
    read = store.read_manifest(manifest)
    with data_path.open("rb") as data:
        assert store.read_verified(read, data) == [[bytearray(value)], [bytearray()]]


# --------------------------------------------------------------------------- the folder


def test_the_state_folder_outside_the_home_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    assert store.state_directory("~/.state") == tmp_path / "home" / ".state"
    with pytest.raises(store.Refused):
        store.state_directory(str(tmp_path / "elsewhere"))


def test_a_format_1_snapshot_is_still_read_with_its_sha256(tmp_path: Path) -> None:
    manifest, data_path = write_snapshot(tmp_path, {"a": b"one", "b": b"two"}, format_version=1)
    read = store.read_manifest(manifest)
    assert "sha256" in read.entries[0]
    with data_path.open("rb") as data:
        assert store.read_verified(read, data) == [[bytearray(b"one")], [bytearray(b"two")]]
    with pytest.raises(store.Refused, match="the checksum of `b` does not match"):
        store.read_verified(read, io.BytesIO(b"oneTWO"))


def test_a_pickle_and_its_buffers_are_read_into_memory_of_their_own_and_checked_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "CHUNK", 3)
    kinds = {"frame": {"kind": "pickle", "parts": [4, 0, 6]}}
    manifest, data_path = write_snapshot(tmp_path, {"frame": b"PKL!abcdef"}, kinds=kinds)
    read = store.read_manifest(manifest)
    with data_path.open("rb") as data:
        assert store.read_verified(read, data) == [
            [bytearray(b"PKL!"), bytearray(), bytearray(b"abcdef")]
        ]
    with pytest.raises(store.Refused, match="the checksum of `frame` does not match"):
        store.read_verified(read, io.BytesIO(b"PKL!abcdeF"))


@pytest.mark.parametrize("parts", [[4, 5], [11], "all", [4, -1, 7], [4.0, 6]])
def test_parts_that_do_not_fill_the_place_are_refused(tmp_path: Path, parts: Any) -> None:
    kinds = {"frame": {"kind": "pickle", "parts": parts}}
    manifest, data_path = write_snapshot(tmp_path, {"frame": b"PKL!abcdef"}, kinds=kinds)
    read = store.read_manifest(manifest)
    with data_path.open("rb") as data, pytest.raises(store.Refused, match="parts do not fill"):
        store.read_verified(read, data)


def test_a_large_part_is_read_into_memory_of_its_own_with_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "LARGE", 8)
    monkeypatch.setattr(store, "CHUNK", 5)
    monkeypatch.setattr(store, "PIECE", 2)
    kinds = {"frame": {"kind": "pickle", "parts": [4, 16]}}
    manifest, data_path = write_snapshot(
        tmp_path, {"frame": b"PKL!" + bytes(range(16))}, kinds=kinds
    )
    read = store.read_manifest(manifest)
    with data_path.open("rb") as data:
        [[stream, large]] = store.read_verified(read, data)
    assert stream == bytearray(b"PKL!")
    assert bytes(large) == bytes(range(16))
    assert memoryview(large).readonly is False  # an array made on it can be written


def test_a_polars_frames_bytes_are_read_as_bytes_in_reads_of_a_bound_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store, "MAX_READ", 3)
    monkeypatch.setattr(store, "PIECE", 2)
    kinds = {"plframe": {"kind": "polars"}}
    value = bytes(range(10))
    manifest, data_path = write_snapshot(tmp_path, {"plframe": value, "a": b"one"}, kinds=kinds)
    read = store.read_manifest(manifest)
    with data_path.open("rb", buffering=0) as data:
        [[frame], [a]] = store.read_verified(read, data)
    assert type(frame) is bytes
    assert frame == value
    assert a == bytearray(b"one")
    with pytest.raises(store.Refused, match="the checksum of `plframe` does not match"):
        store.read_verified(read, io.BytesIO(b"\x00" * 10 + b"one"))
    with pytest.raises(store.Refused, match="shorter than its manifest says"):
        store.read_verified(read, io.BytesIO(value[:7]))
