"""Every module of ``src/xpkit`` has its tests where tests/README.md says.

A module ``<name>.py`` or ``_<name>.py`` is tested in a ``test_<name>.py``
(for a module of a subpackage, in that subpackage's folder: ``_adapters/``
in ``tests/adapters/``), or tests/README.md's "Covered elsewhere" table
names it with the files that test it, never both; each file that table
names exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src" / "xpkit"


def covered_elsewhere(readme: str) -> dict[str, list[str]]:
    """Module (``_executors/dask``) -> the test files the README's table names.

    In a row, a bare name after ``_executors/__init__`` is in ``_executors/``
    too.
    """
    table = readme.split("## Covered elsewhere", 1)[1]
    rows: dict[str, list[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith(("`", "no logic")):
            continue
        files = re.findall(r"`([\w/.-]+\.py)`", cells[1])
        folder = ""
        for written in re.findall(r"`([\w/.]+)`", cells[0]):
            path, _, name = written.rpartition("/")
            folder = f"{path}/" if path else folder
            rows.setdefault(folder + name, []).extend(files)
    return rows


#: The test folder of each subpackage's modules.
AREAS = {"_adapters": "adapters", "_executors": "executors", "testing": "testing"}


def own_test_files(path: Path) -> list[Path]:
    """The ``test_<name>.py`` files of the module at ``path``."""
    parts = path.relative_to(SRC).parts
    where = TESTS / AREAS[parts[0]] if len(parts) > 1 else TESTS
    return sorted(where.rglob(f"test_{path.stem.lstrip('_')}.py"))


MODULES = sorted(SRC.rglob("*.py"))
README = (TESTS / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_each_module_has_its_tests(path):
    stem = path.relative_to(SRC).with_suffix("").as_posix()  # "_executors/dask"
    own, named = own_test_files(path), stem in covered_elsewhere(README)
    assert not (own and named), f"{stem}: has {own[0].name} and a covered-elsewhere row"
    assert own or named, (
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
        "| `_plan`, `x/_rows`, `_outputs` | `batches/test_nowhere.py` |\n"
    )
    assert covered_elsewhere(readme) == {
        "_plan": ["batches/test_nowhere.py"],
        "x/_rows": ["batches/test_nowhere.py"],
        "x/_outputs": ["batches/test_nowhere.py"],
    }
    assert "_rows" not in covered_elsewhere(readme)
