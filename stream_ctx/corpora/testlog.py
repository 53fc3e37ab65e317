"""Pytest-like logs for the code-reading workload (codetext): tests named after real functions,
failures whose tracebacks quote the real lines, and reruns that change a little."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

__all__ = ("MAX_LOG_BYTES", "Failure", "TestSuite", "Views")

# Logs stay under this size: a test run pasted into a context is rarely longer.
MAX_LOG_BYTES = 4000
_MIN_TESTS = 12
_WIDTH = 80
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)")
_RAISE = re.compile(r"^\s*raise\s+([\w.]+)")
_ATTRIBUTE = re.compile(r"\.([A-Za-z_]\w*)")
_ERRORS = (
    "TypeError: 'NoneType' object is not subscriptable",
    "KeyError: 'name'",
    "RuntimeError: this operation is not allowed here",
)
_HEADER = (
    " test session starts ".center(_WIDTH, "="),
    "platform linux -- Python 3.11.7, pytest-8.3.4, pluggy-1.5.0",
    "rootdir: /src/project",
    "configfile: pyproject.toml",
    "plugins: anyio-4.6.2, hypothesis-6.112.0",
)

Views = dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class Failure:
    """A failing test: the function it calls, the line that raised (as text and where it is)."""

    test: str
    test_line: int
    path: str
    function: str
    def_text: str
    def_at: int
    fail_text: str
    fail_at: int
    context: tuple[str, ...]
    error: str


@dataclass(frozen=True, slots=True)
class TestSuite:
    """One pytest run: the tests collected, the ones failing, and how long it took."""

    path: str
    tests: tuple[str, ...]
    failures: tuple[Failure, ...]
    seconds: float

    @classmethod
    def collect(cls, rng: random.Random, views: Views) -> TestSuite:
        """12-24 tests named after the files' functions, 0-2 of them failing."""
        found = _tests(views)
        picked = sorted(rng.sample(range(len(found)), k=min(len(found), rng.randint(12, 24))))
        tests = [found[i] for i in picked]
        callable_ = [t for t in tests if t[3] - t[2] >= 3]
        failing = rng.sample(callable_, k=min(len(callable_), rng.choice((0, 1, 1, 2, 2))))
        failing.sort(key=tests.index)
        failures = tuple(_failure(rng, views, t) for t in failing)
        suite = cls(_test_file(tests[0][1]), tuple(t[0] for t in tests), failures, 0.0)
        return suite.timed(rng)

    def rerun(self, rng: random.Random, views: Views) -> TestSuite:
        """The same run after a fix: one failure passes, a test may come or go, lines move."""
        failures = list(self.failures)
        if failures and rng.random() < 0.75:
            del failures[rng.randrange(len(failures))]
        failures = [_moved(rng, views, f) for f in failures]
        tests = list(self.tests)
        new = [t[0] for t in _tests(views) if t[0] not in tests]
        if new and rng.random() < 0.15:
            tests.append(rng.choice(new))
        passing = [t for t in tests if t not in {f.test for f in failures}]
        if len(passing) > _MIN_TESTS and rng.random() < 0.1:
            tests.remove(rng.choice(passing))
        return replace(self, tests=tuple(tests), failures=tuple(failures)).timed(rng)

    def timed(self, rng: random.Random) -> TestSuite:
        """This run with a fresh duration, passing tests dropped until the log fits."""
        suite = replace(self, seconds=round(rng.uniform(0.3, 6.0), 2))
        failing = {f.test for f in self.failures}
        while len(suite.render().encode()) > MAX_LOG_BYTES and len(suite.tests) > _MIN_TESTS:
            last = max(i for i, t in enumerate(suite.tests) if t not in failing)
            suite = replace(suite, tests=suite.tests[:last] + suite.tests[last + 1 :])
        return suite

    def render(self) -> str:
        """The log as pytest prints it on an 80-column terminal."""
        failing = {f.test for f in self.failures}
        out = [*_HEADER, f"collected {len(self.tests)} items", ""]
        for n, test in enumerate(self.tests, start=1):
            left = f"{test} {'FAILED' if test in failing else 'PASSED'}"
            out.append(
                f"{left}{' ' * max(1, _WIDTH - len(left) - 6)}[{n * 100 // len(self.tests):3d}%]"
            )
        if self.failures:
            out += ["", " FAILURES ".center(_WIDTH, "=")]
            for failure in self.failures:
                out += _traceback(failure)
            out.append(" short test summary info ".center(_WIDTH, "="))
            out += [f"FAILED {f.test} - {f.error}" for f in self.failures]
        counts = [f"{len(self.failures)} failed"] if self.failures else []
        counts.append(f"{len(self.tests) - len(self.failures)} passed")
        out.append(f" {', '.join(counts)} in {self.seconds:.2f}s ".center(_WIDTH, "="))
        return "\n".join(out) + "\n"


def _traceback(failure: Failure) -> list[str]:
    """A short frame for the test, then the function's head and the raising line quoted."""
    name = failure.test.split("::")[1]
    out = [
        f" {name} ".center(_WIDTH, "_"),
        f"{failure.test.split('::')[0]}:{failure.test_line}: in {name}",
    ]
    out.append(f"    {failure.function}()")
    out.append(f"{failure.path}:{failure.fail_at + 1}: in {failure.function}")
    indent = len(failure.def_text) - len(failure.def_text.lstrip())
    body = [failure.def_text, *failure.context]
    out += [f"    {line[indent:]}" for line in body]
    fail = failure.fail_text[indent:]
    out.append(f">   {fail}")
    pad = " " * (len(fail) - len(fail.lstrip()))
    out += [f"E   {pad}{failure.error}", ""]
    return out


def _failure(rng: random.Random, views: Views, test: tuple[str, str, int, int]) -> Failure:
    """A failure raised in the test's function: at a `raise` of its own if it has one."""
    node, path, first, last = test
    lines = views[path]
    body, in_docstring = [], False
    for i in range(first + 1, last + 1):
        text = lines[i].strip()
        if text.count('"""') % 2 or text.count("'''") % 2:
            in_docstring = not in_docstring
        elif not in_docstring and text[:1] not in ("", "#", '"', "'"):
            body.append(i)
    raises = [i for i in body if _RAISE.match(lines[i])]
    fail_at = rng.choice(raises or body or [last])
    raised = _RAISE.match(lines[fail_at])
    error = raised[1] if raised else _error(rng, lines[fail_at])
    name = _DEF.match(lines[first])
    function = name[2] if name else "<module>"
    blank = Failure(node, rng.randint(12, 400), path, function, "", first, "", fail_at, (), error)
    return _quoted(lines, blank, first, fail_at)


def _error(rng: random.Random, line: str) -> str:
    """What a line that does not raise by itself might fail with."""
    if line.strip().startswith("assert "):
        return "AssertionError"
    attributes = _ATTRIBUTE.findall(line)
    if attributes:
        return f"AttributeError: 'NoneType' object has no attribute {rng.choice(attributes)!r}"
    return rng.choice(_ERRORS)


def _moved(rng: random.Random, views: Views, failure: Failure) -> Failure:
    """The failure found again after edits, and half the time a line further on."""
    lines = views[failure.path]
    def_at = _find(lines, failure.def_text, failure.def_at)
    fail_at = _find(lines, failure.fail_text, failure.fail_at + def_at - failure.def_at)
    indent = len(failure.def_text) - len(failure.def_text.lstrip())
    if rng.random() < 0.5:
        after = [
            n
            for n in range(fail_at + 1, min(len(lines), fail_at + 6))
            if lines[n].strip() and len(lines[n]) - len(lines[n].lstrip()) > indent
        ]
        fail_at = after[0] if after else fail_at
    return _quoted(lines, failure, def_at, fail_at)


def _quoted(lines: list[str], failure: Failure, def_at: int, fail_at: int) -> Failure:
    """The failure with the function's head and up to three lines before the raising one."""
    return replace(
        failure,
        def_text=lines[def_at],
        def_at=def_at,
        fail_text=lines[fail_at],
        fail_at=fail_at,
        context=tuple(lines[max(def_at + 1, fail_at - 3) : fail_at]),
    )


def _find(lines: list[str], text: str, near: int) -> int:
    """The index of the line equal to `text` nearest to `near`, or `near` if it is gone."""
    near = min(max(near, 0), len(lines) - 1)
    for distance in range(len(lines)):
        for at in (near - distance, near + distance):
            if 0 <= at < len(lines) and lines[at] == text:
                return at
    return near


def _test_file(path: str) -> str:
    source = PurePosixPath(path)
    stem = source.parent.name if source.stem == "__init__" else source.stem
    return f"tests/test_{stem.lstrip('_')}.py"


def _tests(views: Views) -> list[tuple[str, str, int, int]]:
    """Every test the files suggest: (node id, source path, def index, last body index)."""
    found: dict[str, tuple[str, str, int, int]] = {}
    for path, lines in views.items():
        for name, first, last in _functions(lines):
            if name.strip("_"):
                node = f"{_test_file(path)}::test_{name.strip('_')}"
                found.setdefault(node, (node, path, first, last))
    if len(found) >= _MIN_TESTS:
        return [*found.values()]
    # Too few functions for a run: each test runs on both backends, as anyio's own tests do.
    return [(f"{t[0]}[{b}]", *t[1:]) for t in found.values() for b in ("asyncio", "trio")]


def _functions(lines: list[str]) -> list[tuple[str, int, int]]:
    """(name, def index, last body index) of every def, its body found by indentation."""
    out = []
    for at, line in enumerate(lines):
        head = _DEF.match(line) if "def " in line else None
        if head is None:
            continue
        body = at
        while body < len(lines) - 1 and not lines[body].split("#")[0].rstrip().endswith(":"):
            body += 1
        last = body
        for n in range(body + 1, len(lines)):
            if lines[n].strip() and len(lines[n]) - len(lines[n].lstrip()) <= len(head[1]):
                break
            if lines[n].strip():
                last = n
        out.append((head[2], at, last))
    return out
