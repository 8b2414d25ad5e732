"""No product file or doc points a reader at what they cannot open: an issue or pull-request
number of the tracker this project was built with, or a notes file or folder outside the
repository. Each such place says what it means in words, or links a page of docs/
(CONTRIBUTING.md, "how to cite the source"). CHANGELOG.md is history and is left as written;
the tests (``tests/``, and the TypeScript tests' ``test/`` folders) are not read.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HISTORY = {"CHANGELOG.md"}
TESTS = {"tests", "test"}
"""Folders of tests, at any depth."""
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".ico", ".svg", ".gz", ".whl", ".woff", ".woff2"}
GENERATED = {"package-lock.json"}
OUTSIDE = re.compile(
    r"\b(?:issues?|PRs?|pull requests?)\s*#?\d+"  # a tracker's number
    r"|(?<![\w./-])notes/[\w.-]+"  # the notes beside the repository
    r"|(?:\.\./)+shared\b|\bshared/notes\b|(?<![\w.])/work/",  # folders outside it
    re.IGNORECASE,
)


def repository_files() -> list[Path]:
    """The files git has or would add (tracked, or new and not ignored): no build output,
    no node_modules, no venv."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the files of the repository are git's list")
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [
        ROOT / name
        for name in listed.split("\0")
        if name
        and name not in HISTORY | GENERATED
        and not TESTS & set(Path(name).parts[:-1])
        and Path(name).suffix not in BINARY
        and (ROOT / name).is_file()
    ]


def outside_references(text: str) -> list[str]:
    return [m.group(0) for m in OUTSIDE.finditer(text)]


def test_what_counts_as_a_reference_outside() -> None:
    number = "3" + "6"
    assert outside_references(f"the way down (issue {number}.4) and Issue #{number}") == [
        f"issue {number}",
        f"Issue #{number}",
    ]
    assert outside_references("as notes/gpu-memory.md says, or ../shared/x") == [
        "notes/gpu-memory.md",
        "../shared",
    ]
    assert outside_references("queued · #1 in the queue; docs/notes.md; 3 issues found") == []


def test_no_file_names_an_issue_number_or_a_path_outside_the_repository() -> None:
    files = repository_files()
    assert len(files) > 300
    found = [
        f"{path.relative_to(ROOT)}:{n}: {ref}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        for ref in outside_references(line)
    ]
    assert found == [], "\n".join(found)
