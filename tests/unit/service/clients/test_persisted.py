"""The state the service keeps in a ConfigMap: read once, written only when its text changed,
a failed read or write said in the log and tried again later."""

from __future__ import annotations

import logging

import pytest

from gpuaas_service.clients.persisted import PersistedState, StateUnreadable


class Store:
    """ConfigMaps in memory (our own collaborator's interface), failing while ``down``."""

    def __init__(self) -> None:
        self.texts: dict[tuple[str, str], str] = {}
        self.writes = 0
        self.down = False

    async def read_state(self, namespace: str, name: str) -> str | None:
        if self.down:
            raise OSError("configmaps: forbidden")
        return self.texts.get((namespace, name))

    async def write_state(self, namespace: str, name: str, text: str) -> None:
        if self.down:
            raise OSError("configmaps: forbidden")
        self.writes += 1
        self.texts[(namespace, name)] = text


def state_of(store: Store) -> PersistedState:
    return PersistedState(store, "ns", "cm", owner="culler", what="records", empty="{}")


async def test_nothing_kept_reads_none_and_the_empty_text_is_not_written() -> None:
    store = Store()
    state = state_of(store)
    assert not state.loaded
    assert await state.read() is None
    assert state.loaded
    assert await state.write("{}")  # what an empty state reads as: nothing to write
    assert store.writes == 0
    assert await state.write('{"a": 1}')
    assert store.texts[("ns", "cm")] == '{"a": 1}'
    assert await state.write('{"a": 1}')  # unchanged since written
    assert store.writes == 1


async def test_the_kept_text_is_read_and_not_written_back_unchanged() -> None:
    store = Store()
    store.texts[("ns", "cm")] = '{"kept": true}'
    state = state_of(store)
    assert await state.read() == '{"kept": true}'
    assert await state.write('{"kept": true}')
    assert store.writes == 0


async def test_an_unreadable_configmap_is_said_and_read_again_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Store()
    store.down = True
    state = state_of(store)
    with caplog.at_level(logging.WARNING, logger="gpuaas.culler"), pytest.raises(StateUnreadable):
        await state.read()
    assert not state.loaded
    assert "culler: cannot read ConfigMap ns/cm: configmaps: forbidden" in caplog.text
    store.down = False
    store.texts[("ns", "cm")] = "x"
    assert await state.read() == "x"


async def test_a_failed_write_is_said_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    store = Store()
    state = state_of(store)
    await state.read()
    store.down = True
    with caplog.at_level(logging.WARNING, logger="gpuaas.culler"):
        assert not await state.write("new")
    assert "culler: cannot write ConfigMap ns/cm" in caplog.text
    store.down = False
    assert await state.write("new")  # not taken for written while it failed
    assert store.texts[("ns", "cm")] == "new"


def test_an_unusable_text_is_said_with_what_it_should_hold(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="gpuaas.culler"):
        state_of(Store()).unusable(ValueError("not JSON"))
    assert "ConfigMap ns/cm holds no usable records (not JSON)" in caplog.text
