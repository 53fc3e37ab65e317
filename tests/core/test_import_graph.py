"""No import circles anywhere in stream_ctx: the modules form layers (core, settings, shell
parts, commands), each importing only from below.

Every import counts, wherever it stands: at module level, under `if TYPE_CHECKING:`, or inside a
function. A TYPE_CHECKING import only hides a dependency from the interpreter and a function's
import only defers it; a circle through either is the same tangle for a reader, and renaming or
moving one of its modules breaks the other. Parent packages a dotted import runs first are not
edges: `stream_ctx/__init__.py` re-exports the core, which imports `stream_ctx.errors`.
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Mapping
from pathlib import Path

import pytest

import stream_ctx

PACKAGE = Path(stream_ctx.__file__).resolve().parent


def module_paths(package: Path) -> dict[str, Path]:
    """Every module of `package` by its dotted name; a package's name is its `__init__.py`."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports_of(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The modules of `modules` that module `name` imports, anywhere in its body."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                anchor = here[: len(here) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from package import module` names a module; `from module import name` does not.
            found.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            )
    return {target for target in found if target in modules and target != name}


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = module_paths(package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


# The core's rooms, in the order they may import: each only from those before it.
CORE_ROOMS = (
    "wire",
    "counting",
    "memo",
    "window",
    "text",
    "entries",
    "assembly",
    "conversation",
    "caches",
)


def room_of(module: str) -> str:
    """A module's room: a folder or top-level module of the shell or the core, else a top-level
    module or package."""
    parts = module.split(".")
    return ".".join(
        parts[:3] if parts[1:2] in (["shell"], ["core"]) and len(parts) > 2 else parts[:2]
    )


def circle_in(graph: Mapping[str, set[str]]) -> list[str]:
    """One import circle of `graph` (its first module repeated at the end), or [] if none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        circle: list[str] = error.args[1]
        return list(reversed(circle))
    return []


def test_the_graph_holds_every_module_and_known_edges() -> None:
    graph = import_graph(PACKAGE)
    assert "stream_ctx.shell.processing.runner" in graph
    assert "stream_ctx.shell.state.checkpoint" in graph["stream_ctx.shell.processing.runner"]
    assert "stream_ctx.errors" in graph["stream_ctx.core.wire.codec"]


def test_stream_ctx_has_no_import_circle() -> None:
    circle = circle_in(import_graph(PACKAGE))
    assert circle == [], " -> ".join(circle)


def test_the_rooms_import_one_way() -> None:
    """Folders too: core, settings and each folder of the shell form no circle among them."""
    rooms: dict[str, set[str]] = {}
    for module, imported in import_graph(PACKAGE).items():
        room = room_of(module)
        rooms.setdefault(room, set()).update(room_of(m) for m in imported if room_of(m) != room)
    circle = circle_in(rooms)
    assert circle == [], " -> ".join(circle)


def test_the_core_rooms_import_only_from_the_rooms_before_them() -> None:
    rank = {f"stream_ctx.core.{room}": place for place, room in enumerate(CORE_ROOMS)}
    upward = sorted(
        f"{module} -> {target}"
        for module, imported in import_graph(PACKAGE).items()
        if room_of(module) in rank
        for target in imported
        if rank.get(room_of(target), -1) > rank[room_of(module)]
    )
    assert upward == []


def test_the_core_rooms_are_every_room_of_the_core_and_its_map_lists_them_in_order() -> None:
    core = PACKAGE / "core"
    found = {p.stem for p in core.glob("*.py") if p.stem != "__init__"}
    found |= {p.name for p in core.iterdir() if (p / "__init__.py").is_file()}
    assert found == set(CORE_ROOMS)
    text = (core / "__init__.py").read_text(encoding="utf-8")
    places = [
        text.index(f"`{room}/`" if (core / room).is_dir() else f"`{room}.py`")
        for room in CORE_ROOMS
    ]
    assert places == sorted(places)


def test_the_public_client_imports_no_shell_module() -> None:
    graph = import_graph(PACKAGE)
    assert not [m for m in graph["stream_ctx.client"] if m.startswith("stream_ctx.shell")]


@pytest.mark.parametrize(
    ("importer", "why"),
    [
        ("from pkg import b\n", "at module level"),
        ("import typing\nif typing.TYPE_CHECKING:\n    from pkg.b import B\n", "TYPE_CHECKING"),
        ("def later():\n    from . import b\n", "inside a function, relative"),
    ],
)
def test_circle_check_catches_every_kind_of_import(tmp_path: Path, importer: str, why: str) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(importer)
    (package / "b.py").write_text("import pkg.a\n")
    assert sorted(set(circle_in(import_graph(package)))) == ["pkg.a", "pkg.b"], why
