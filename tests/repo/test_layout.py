"""The tests follow the package: a folder of tests/shell per folder of stream_ctx/shell, and no
test file loose beside them; a folder of tests/core per room of stream_ctx/core."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _folders(path: Path) -> set[str]:
    return {p.name for p in path.iterdir() if p.is_dir() and p.name != "__pycache__"}


def test_tests_shell_mirrors_the_shell_folders() -> None:
    tests = ROOT / "tests" / "shell"
    assert _folders(tests) <= _folders(ROOT / "stream_ctx" / "shell")
    assert sorted(p.name for p in tests.glob("*.py")) == []
    assert all(list(folder.glob("test_*.py")) for folder in tests.iterdir() if folder.is_dir())


def test_tests_core_mirrors_the_core_rooms() -> None:
    tests = ROOT / "tests" / "core"
    assert _folders(tests) == _folders(ROOT / "stream_ctx" / "core")
    assert all(list(folder.glob("test_*.py")) for folder in tests.iterdir() if folder.is_dir())
