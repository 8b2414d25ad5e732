"""CONTRIBUTING.md's recipes work as written (the page's "How this page is tested" says the same).

Each line of a ` ```bash ` block is a command run from the repository's root: it must exit 0
(``pytest`` lines with ``--collect-only`` added, so that the selection is checked without
running it: it must select at least one test). A ` ```bash not-run ` block's commands are
checked without running them: ``make`` targets and ``npm run`` scripts must exist; any other
command must answer ``--help`` and name each of the line's options there. Every path the page
names in backquotes must exist.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "CONTRIBUTING.md"
BIN = Path(sys.executable).parent
"""Where this test's own venv keeps its commands: ``.venv/bin/`` on the page is this venv
(``make unit-py310`` runs the page's commands with its own)."""
NOT_RUN = "not-run"
FENCE = re.compile(r"^( *)```bash([^\n]*)\n(.*?)^\1```[ \t]*$", re.MULTILINE | re.DOTALL)
PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]*)`")
"""A backquoted path of the repository: at least one ``folder/``."""


@dataclass(frozen=True)
class Command:
    line: int
    text: str
    runs: bool

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}"


def commands(text: str) -> list[Command]:
    """Every command of the page's ``bash`` blocks, comments and blank lines left out."""
    found = []
    for m in FENCE.finditer(text):
        marks = m.group(2).split()
        assert marks in ([], [NOT_RUN]), f"unknown mark {marks}"
        first = text[: m.start(3)].count("\n") + 1
        for i, raw in enumerate(m.group(3).splitlines()):
            line = re.sub(r"(^|\s)#.*$", "", raw).strip()
            if line:
                found.append(Command(first + i, line, not marks))
    return found


def argv(command: Command) -> list[str]:
    """The command as this test runs it: ``.venv/bin/X`` is this venv's ``X``."""
    words = shlex.split(command.text)
    if words[0].startswith(".venv/bin/"):
        exe = BIN / words[0].removeprefix(".venv/bin/")
        if not exe.exists():
            pytest.skip(f"{exe.name} is not installed in this venv (it is in the dev extra)")
        words[0] = str(exe)
    return words


PAGE_COMMANDS = commands(PAGE.read_text(encoding="utf-8"))


def test_the_page_is_read_as_the_test_says() -> None:
    text = "a\n```bash\nx --y  # why\n\n```\n\n   ```bash not-run\n   make z\n   ```\n"
    assert [(c.line, c.text, c.runs) for c in commands(text)] == [
        (3, "x --y", True),
        (8, "make z", False),
    ]
    assert sum(c.runs for c in PAGE_COMMANDS) >= 8
    assert sum(not c.runs for c in PAGE_COMMANDS) >= 5


def test_every_path_the_page_names_exists() -> None:
    """Paths from the repository's root (``reclaim/`` inside the service's package is words)."""
    top = {p.name for p in ROOT.iterdir()}
    paths = [p for p in PATH.findall(PAGE.read_text(encoding="utf-8")) if p.split("/")[0] in top]
    assert len(paths) >= 20
    assert [p for p in paths if not (ROOT / p).exists()] == []


def first_of_each(found: list[Command]) -> list[Command]:
    """A command the page gives twice is run once."""
    return list({c.text: c for c in reversed(found)}.values())[::-1]


@pytest.mark.parametrize("command", first_of_each([c for c in PAGE_COMMANDS if c.runs]), ids=str)
def test_a_command_runs(command: Command) -> None:
    words = argv(command)
    if Path(words[0]).name == "pytest":
        words += ["--collect-only", "-q"]
    done = subprocess.run(words, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.parametrize(
    "command", first_of_each([c for c in PAGE_COMMANDS if not c.runs]), ids=str
)
def test_a_command_not_run_is_what_the_repository_has(command: Command) -> None:
    words = shlex.split(command.text)
    if words[0] == "make":
        targets = re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE)
        assert set(words[1:]) <= set(targets), f"no such make target: {words[1:]}"
        return
    if words[:2] == ["npm", "run"]:
        scripts = json.loads((ROOT / "package.json").read_text())["scripts"]
        assert words[2] in scripts, f"no such npm script: {words[2]}"
        return
    words = argv(command)
    options = [w.split("=")[0] for w in words if w.startswith("--")]
    before = words[: next((i for i, w in enumerate(words) if w.startswith("--")), len(words))]
    done = subprocess.run(
        [*before, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    unknown = [o for o in options if not re.search(rf"{re.escape(o)}\b", done.stdout)]
    assert unknown == [], f"{command}: --help names no {unknown}"
