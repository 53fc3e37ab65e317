"""A code-reading workload: an agent that reads windows of real source files, edits them, greps
for identifiers and runs the tests, over seeded multi-turn conversations.

Corpora: `code` (the Python files of anyio and starlette, which our own dependencies install) and
`stdlib-code` (the standard library's source, kept as the unseen check). Every tool result is one
item: `read_file` windows that scroll with overlap or come back after an edit, `grep` output that
comes back with a slightly different pattern, and pytest logs run again after a fix. The events
depend on the seed only: files are read in sorted order and nothing iterates a set.
"""

from __future__ import annotations

import keyword
import random
import re
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from stream_ctx.core.wire.events import End, Event, Finalize, Retrieval, RetrievedItem
from stream_ctx.corpora.testlog import TestSuite

__all__ = (
    "CORPORA",
    "GREP_BYTES",
    "MIN_FILE_LINES",
    "READ_BYTES",
    "SourceFile",
    "conversation",
    "sources",
    "workload",
)

CORPORA = ("code", "stdlib-code")
_CODE_PACKAGES = ("anyio", "starlette")
_STDLIB_NAMES = (
    "argparse", "ast", "asyncio", "collections", "concurrent", "configparser", "contextlib",
    "csv", "dataclasses", "email", "enum", "functools", "heapq", "http", "importlib", "inspect",
    "json", "logging", "pathlib", "pickle", "selectors", "shutil", "socket", "sqlite3", "ssl",
    "statistics", "subprocess", "tarfile", "tempfile", "textwrap", "threading", "typing",
    "unittest", "urllib", "zipfile",
)  # fmt: skip
# Shorter files have no room to scroll a window twice.
MIN_FILE_LINES = 150
READ_BYTES = (1500, 4000)
GREP_BYTES = (500, 2000)
# A window cut to READ_BYTES keeps enough lines for the next one to overlap it.
_MIN_WINDOW_LINES = 28
# A focus file has functions enough for a test run to be named after them.
_MIN_FUNCTIONS = 6
_T0 = 1_764_480_000_000
_TURN_MS = 30_000
_IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]{5,}\b")
_DEFINED = re.compile(r"\b(?:def|class)\s+([A-Za-z_]\w*)")
_COMMON = frozenset({*keyword.kwlist, "self", "return", "import", "typing", "object", "kwargs"})


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A source file: its path under the corpus root and its lines (without line ends)."""

    path: str
    lines: tuple[str, ...]
    text: str

    @property
    def has_tests(self) -> bool:
        """Enough functions to name a test run after."""
        return self.text.count("def ") >= _MIN_FUNCTIONS


def sources(corpus: str) -> list[SourceFile]:
    """The corpus's files long enough to scroll, sorted by path."""
    if corpus == "code":
        roots = [_package_dir(name) for name in _CODE_PACKAGES]
        base = roots[0].parent
    elif corpus == "stdlib-code":
        base = Path(sysconfig.get_path("stdlib"))
        roots = [base / f"{name}.py" for name in _STDLIB_NAMES if (base / f"{name}.py").is_file()]
        roots += [base / name for name in _STDLIB_NAMES if (base / name).is_dir()]
    else:
        raise ValueError(f"corpus must be one of {CORPORA!r}, got {corpus!r}")
    paths = [p for root in roots for p in ([root] if root.is_file() else root.rglob("*.py"))]
    found = []
    for path in sorted(paths, key=lambda p: p.relative_to(base).as_posix()):
        relative = path.relative_to(base).as_posix()
        if {"test", "tests"} & set(path.relative_to(base).parts):
            continue
        lines = path.read_text(encoding="utf-8").split("\n")
        if len(lines) >= MIN_FILE_LINES:
            stripped = tuple(line.rstrip() for line in lines)
            found.append(SourceFile(relative, stripped, "\n".join(stripped)))
    return found


def _package_dir(name: str) -> Path:
    spec = find_spec(name)
    if spec is None or spec.origin is None:
        raise ValueError(f"package {name!r} is not installed")
    return Path(spec.origin).parent


class _Agent:
    """One conversation's tool calls over its own copy of the files, which its edits change."""

    def __init__(self, rng: random.Random, files: list[SourceFile]) -> None:
        self.rng = rng
        self.files = files
        self.by_path = {f.path: f for f in files}
        testable = [f for f in files if f.has_tests]
        self.view = {f.path: list(f.lines) for f in rng.sample(testable, k=rng.randint(1, 3))}
        self.focus = list(self.view)
        self.reads: list[tuple[str, int, int]] = []
        self.greps: list[tuple[str, str, list[str]]] = []
        self.edits: dict[str, int] = {}
        self.suite: TestSuite | None = None
        self.runs = 0
        self.now_ms = 0

    def lines_of(self, path: str) -> list[str]:
        if path not in self.view:
            self.view[path] = list(self.by_path[path].lines)
        return self.view[path]

    def read(self, path: str, start: int, end: int = 0, *, suffix: str = "") -> RetrievedItem:
        """Lines `start` to `end`, or a window of 40-80 lines cut to READ_BYTES."""
        lines = self.lines_of(path)
        end = min(end, len(lines))
        if not end:
            end = min(len(lines), start + self.rng.randint(40, 80))
            while _size(lines[start:end]) > READ_BYTES[1] and end - start > _MIN_WINDOW_LINES:
                end -= 1
            while _size(lines[start:end]) < READ_BYTES[0] and end < len(lines):
                end += 1
        self.reads.append((path, start, end))
        item_id = f"read:{path}:{start + 1}-{end}{suffix}"
        return self._item(item_id, "file", "read_file", path, "\n".join(lines[start:end]) + "\n")

    def scroll_or_open(self) -> RetrievedItem:
        """The next window of a file read before (20-40 lines on), or a fresh spot."""
        if self.reads and self.rng.random() < 0.6:
            path, start, end = self.rng.choice(self.reads)
            step = min(self.rng.randint(20, 40), end - start - 5)
            if start + step <= _last_start(self.lines_of(path)):
                return self.read(path, start + step)
        if self.greps and self.rng.random() < 0.3:
            hit = self.rng.choice(self.greps[-1][2])
            path, lineno = hit.split(":", 2)[:2]
            start = max(0, int(lineno) - self.rng.randint(5, 20))
            return self.read(path, min(start, _last_start(self.lines_of(path))))
        path = self.rng.choice(self.focus)
        top = self.rng.random() < 0.4
        return self.read(
            path, 0 if top else self.rng.randrange(max(1, _last_start(self.lines_of(path))))
        )

    def edit_and_reread(self) -> RetrievedItem:
        """A couple of lines of a window read before changed, inserted or deleted; read again."""
        path, start, end = self.rng.choice(self.reads)
        lines = self.lines_of(path)
        before = lines[:]
        edits = self.rng.randint(1, 3)
        # A line inserted and then deleted leaves the window as it was: edit again, a bounded
        # number of times.
        for n in range(edits + 3):
            if n >= edits and lines != before:
                break
            _edit_line(self.rng, lines, self.rng.randrange(start, min(end, len(lines))))
        self.edits[path] = self.edits.get(path, 0) + 1
        end += len(lines) - len(before)
        return self.read(path, start, end, suffix=f"@edit{self.edits[path]}")

    def grep(self) -> RetrievedItem:
        """`path:lineno:text` lines matching an identifier seen in a window read before, in its
        package or, when that finds too little, in the whole corpus."""
        if self.greps and self.rng.random() < 0.4:
            rerun = self._regrep()
            if rerun is not None:
                return rerun
        path, start, end = self.rng.choice(self.reads)
        window = "\n".join(self.lines_of(path)[start:end])
        names = [n for n in _IDENTIFIER.findall(window) if n not in _COMMON]
        candidates = [*dict.fromkeys(_DEFINED.findall(window) + names)]
        picked = self.rng.sample(candidates, k=min(8, len(candidates)))
        patterns = [name if self.rng.random() < 0.5 else rf"\b{name}\b" for name in picked]
        best: tuple[str, str, list[str]] = ("", "", [])
        for scope in (path.split("/")[0] if "/" in path else path, ""):
            for pattern in patterns:
                hits = self._search(pattern, scope)
                if _size(hits) > _size(best[2]):
                    best = (pattern, scope, hits)
                if _size(hits) >= GREP_BYTES[0]:
                    break
            if _size(best[2]) >= GREP_BYTES[0]:
                break
        if not best[2]:
            return self.read(path, start, end)
        self.greps.append(best)
        return self._grep_item(*best)

    def _regrep(self) -> RetrievedItem | None:
        """The last grep again with its pattern widened or narrowed, if most lines stay."""
        pattern, scope, hits = self.greps[-1]
        name = pattern.removeprefix(r"\b").removesuffix(r"\b").split("|")[0].split("\\(")[0]
        others = [n for n in _IDENTIFIER.findall("\n".join(hits)) if n not in _COMMON]
        variants = [name, rf"\b{name}\b", rf"{name}\(", rf"\.{name}"]
        variants += [rf"{pattern}|{self.rng.choice(others)}"] if others else []
        for variant in self.rng.sample(variants, k=len(variants)):
            found = self._search(variant, scope)
            shared = len(set(found) & set(hits))
            if (
                variant != pattern
                and found != hits
                and _size(found) >= GREP_BYTES[0]
                and shared >= 0.6 * max(len(found), len(hits))
            ):
                self.greps.append((variant, scope, found))
                return self._grep_item(variant, scope, found)
        return None

    def _search(self, pattern: str, scope: str) -> list[str]:
        """Lines matching in the files under `scope` (all if empty), in sorted path order, cut
        where the output would pass GREP_BYTES."""
        regex = re.compile(pattern)
        # re finds a pattern that starts with \b slowly: str.find looks for its name first.
        literal = (
            "" if "|" in pattern else max(re.findall(r"\w+", pattern.replace(r"\b", " ")), key=len)
        )
        out: list[str] = []
        size = 0
        for source in self.files:
            if scope and source.path != scope and not source.path.startswith(f"{scope}/"):
                continue
            text = "\n".join(self.view[source.path]) if source.path in self.edits else source.text
            lineno, counted, pos = 1, 0, 0
            while (at := _next_match(regex, literal, text, pos)) >= 0:
                start = text.rfind("\n", 0, at) + 1
                end = text.find("\n", at)
                end = len(text) if end < 0 else end
                pos = end + 1
                if literal and not regex.search(text, start, end):
                    continue
                lineno += text.count("\n", counted, start)
                counted = start
                hit = f"{source.path}:{lineno}:{text[start:end]}"
                size += len(hit.encode()) + 1
                if size > GREP_BYTES[1]:
                    return out
                out.append(hit)
        return out

    def _grep_item(self, pattern: str, scope: str, hits: list[str]) -> RetrievedItem:
        text = "\n".join(hits) + "\n"
        return self._item(f"grep:{pattern}", "grep", "grep", scope or ".", text)

    def pytest(self) -> RetrievedItem:
        """A pytest log of tests named after the focus files' functions, or the same run again."""
        views = {path: self.lines_of(path) for path in self.focus}
        if self.suite is None or self.rng.random() < 0.1:
            self.suite = TestSuite.collect(self.rng, views)
        else:
            self.suite = self.suite.rerun(self.rng, views)
        self.runs += 1
        log = self.suite.render()
        return self._item(f"pytest:run{self.runs}", "test_log", "pytest", self.suite.path, log)

    def _item(self, item_id: str, kind: str, tool: str, path: str, text: str) -> RetrievedItem:
        return RetrievedItem(
            id=item_id,
            kind=kind,
            salience=round(self.rng.uniform(0.3, 0.95), 2),
            content=text,
            created_at=self.now_ms,
            attributes={"path": path, "tool": tool},
            tags=["code", tool],
        )


def _next_match(regex: re.Pattern[str], literal: str, text: str, pos: int) -> int:
    """Where the next line that may match starts to match: a find of the literal if given."""
    if literal:
        return text.find(literal, pos)
    found = regex.search(text, pos)
    return -1 if found is None else found.start()


def _last_start(lines: list[str]) -> int:
    """The last line a window can start at and still fill READ_BYTES[0]."""
    size = 0
    for at in range(len(lines) - 1, 0, -1):
        size += len(lines[at].encode()) + 1
        if size >= READ_BYTES[0]:
            return at
    return 0


def _size(lines: list[str]) -> int:
    """Bytes of the lines joined, each with its line end."""
    return sum(len(line.encode()) + 1 for line in lines)


def _edit_line(rng: random.Random, lines: list[str], at: int) -> None:
    """Change, insert after or delete one line, the way a small fix does."""
    line = lines[at]
    indent = line[: len(line) - len(line.lstrip())]
    names = [n for n in _IDENTIFIER.findall(line) if n not in _COMMON]
    action = rng.choice(("change", "insert", "delete")) if line.strip() and names else "insert"
    if _DEFINED.search(line):
        # Names stay real: the test logs are named after the functions.
        action, indent = "insert", f"{indent}    "
    name = rng.choice(names) if names else "result"
    if action == "change":
        lines[at] = line.replace(name, f"{name}{rng.choice(('_value', '_s', '2', '_new'))}", 1)
    elif action == "delete":
        del lines[at]
    else:
        added = rng.choice((f"assert {name} is not None", f"print({name!r}, {name})"))
        lines.insert(at + 1, f"{indent}{added}" if line.strip() else f"    # {name} may be None")


def conversation(
    rng: random.Random, files: list[SourceFile], cid: str, *, ts: int
) -> Iterator[Event]:
    """4-10 turns over 1-3 focus files: each turn makes 2-5 tool calls (read, edit and read
    again, grep, pytest), then finalizes."""
    agent = _Agent(rng, files)
    for turn in range(rng.randint(4, 10)):
        agent.now_ms = ts
        offered: dict[str, RetrievedItem] = {}
        calls = rng.randint(2, 5)
        # A call whose id this turn already holds replaces it: call again, a bounded number.
        for _ in range(3 * calls):
            if len(offered) == calls:
                break
            roll = rng.random()
            if not agent.reads or roll < 0.45:
                item = agent.scroll_or_open()
            elif roll < 0.58:
                item = agent.edit_and_reread()
            elif roll < 0.8:
                item = agent.grep()
            else:
                item = agent.pytest()
            offered[item.id] = item
        query = f"turn {turn}"
        items = [*offered.values()]
        yield Retrieval(
            conversation_id=cid, event_id=f"{cid}:r{turn}", ts=ts, query=query, items=items
        )
        yield Finalize(conversation_id=cid, event_id=f"{cid}:f{turn}", ts=ts + 1, request_id=query)
        ts += _TURN_MS
    yield End(conversation_id=cid, event_id=f"{cid}:end", ts=ts)


def workload(corpus: str, *, conversations: int, seed: int = 9) -> list[Event]:
    """Events of `conversations` conversations, one after another, in event-time order."""
    rng = random.Random(seed)
    files = sources(corpus)
    events: list[Event] = []
    for n in range(conversations):
        events += conversation(rng, files, f"{corpus}-{n}", ts=_T0 + n * 3_600_000)
    return events
