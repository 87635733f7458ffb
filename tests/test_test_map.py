"""Every module of ``src/xpkit`` has its tests where tests/README.md says.

A module ``<name>.py`` or ``_<name>.py`` is tested in a ``test_<name>.py``
under ``tests/``, or tests/README.md's "Covered elsewhere" table names it
with the files that test it; each file that table names exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src" / "xpkit"


def covered_elsewhere(readme: str) -> dict[str, list[str]]:
    """Module stem -> the test files the README's table names for it."""
    table = readme.split("## Covered elsewhere", 1)[1]
    rows: dict[str, list[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith(("`", "no logic")):
            continue
        files = re.findall(r"`([\w/.-]+\.py)`", cells[1])
        for name in re.findall(r"`([\w/.]+)`", cells[0]):
            rows.setdefault(name.rsplit("/", 1)[-1], []).extend(files)
    return rows


def own_test_files(stem: str) -> list[Path]:
    return sorted(TESTS.rglob(f"test_{stem.lstrip('_')}.py"))


MODULES = sorted(SRC.rglob("*.py"))
README = (TESTS / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_each_module_has_its_tests(path):
    stem = path.stem
    assert own_test_files(stem) or stem in covered_elsewhere(README), (
        f"{path.relative_to(SRC)}: no tests/**/test_{stem.lstrip('_')}.py, and "
        "tests/README.md's 'Covered elsewhere' does not name it"
    )


def test_the_files_the_table_names_exist():
    named = {f for files in covered_elsewhere(README).values() for f in files}
    assert named  # the table was read
    root = TESTS.parent
    missing = sorted(
        f for f in named if not (TESTS / f).exists() and not (root / f).exists()
    )
    assert missing == []


def test_the_table_reader_can_fail():
    readme = (
        "## Covered elsewhere\n\n| module | tested in |\n|---|---|\n"
        "| `_plan`, `x/_rows` | `batches/test_nowhere.py` |\n"
    )
    assert covered_elsewhere(readme) == {
        "_plan": ["batches/test_nowhere.py"],
        "_rows": ["batches/test_nowhere.py"],
    }
    assert "_outputs" not in covered_elsewhere(readme)
