"""The Job's runner: papermill-style parameters (jupyter_gpuaas/job_pod/runner.py)."""

from __future__ import annotations

import ast
from typing import Any

from jupyter_gpuaas.job_pod.runner import format_parameters, inject_parameters


def _cell(source: str, tags: list[str] | None = None) -> dict[str, Any]:
    return {"cell_type": "code", "metadata": {"tags": tags or []}, "outputs": [], "source": source}


def test_injected_after_the_parameters_cell_replacing_an_earlier_one() -> None:
    nb: dict[str, Any] = {
        "nbformat": 4,
        "cells": [
            _cell("import x"),
            _cell("lr = 1", ["parameters"]),
            _cell("old = 1", ["injected-parameters"]),
            _cell("train(lr)"),
        ],
    }
    out = inject_parameters(nb, {"lr": 0.5, "name": "a 'b'", "on": True, "xs": [1, None]})
    sources = [c["source"] for c in out["cells"]]
    assert sources[0] == "import x"
    assert sources[1] == "lr = 1"
    assert out["cells"][2]["metadata"]["tags"] == ["injected-parameters"]
    assert sources[3] == "train(lr)"
    assert len(out["cells"]) == 4  # the earlier injected cell is gone
    values: dict[str, object] = {}
    exec(compile(ast.parse(sources[2]), "<cell>", "exec"), {}, values)
    assert values == {"lr": 0.5, "name": "a 'b'", "on": True, "xs": [1, None]}
    assert nb["cells"][2]["source"] == "old = 1"  # the input is not changed


def test_without_a_parameters_cell_first_and_without_parameters_unchanged() -> None:
    nb = {"nbformat": 4, "cells": [_cell("a = 1")]}
    assert inject_parameters(nb, {})["cells"] == nb["cells"]
    out = inject_parameters(nb, {"a": 2})
    assert out["cells"][0]["source"] == format_parameters({"a": 2})
    assert out["cells"][1]["source"] == "a = 1"
