"""The server's side of GPU jobs without HTTP: what a submission forwards, where a result goes."""

from __future__ import annotations

from jupyter_gpuaas.server.jobs import job_submission, output_path

NOTEBOOK = {"metadata": {"kernelspec": {"name": "python3"}}, "cells": [], "nbformat": 4}


def test_a_submission_forwards_the_choices_the_notebook_and_its_kernel() -> None:
    body = {"path": "/work/a.ipynb", "offering": "h100", "count": 2, "team": "a", "extra": 1}
    sent = job_submission(body, "work/a.ipynb", NOTEBOOK)
    assert sent == {
        "offering": "h100",
        "count": 2,
        "team": "a",
        "path": "work/a.ipynb",
        "notebook": NOTEBOOK,
        "kernel_name": "python3",
    }


def test_a_notebook_without_a_kernelspec_is_sent_without_a_kernel_name() -> None:
    sent = job_submission({"path": "a.ipynb"}, "a.ipynb", {"cells": []})
    assert "kernel_name" not in sent
    assert sent == {"path": "a.ipynb", "notebook": {"cells": []}}


def test_a_result_goes_beside_its_source_and_never_over_a_file() -> None:
    taken = {"work/a-job1.ipynb", "work/a-job1-1.ipynb"}
    assert output_path("work/a.ipynb", "job1", taken.__contains__) == "work/a-job1-2.ipynb"
    assert output_path("a.ipynb", "job2", taken.__contains__) == "a-job2.ipynb"
