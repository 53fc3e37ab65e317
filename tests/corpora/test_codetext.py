"""The code-reading workload: deterministic, and its reruns change a little of what came before."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import os
import re
import subprocess
import sys
from collections import defaultdict

import msgspec
import pytest

from stream_ctx.core.wire.codec import decode_event
from stream_ctx.core.wire.events import End, Event, Finalize, Retrieval, RetrievedItem
from stream_ctx.corpora.codetext import CORPORA, sources, workload

_READ_ID = re.compile(r"read:(?P<path>[^:]+):(?P<first>\d+)-(?P<last>\d+)(?P<edit>@edit\d+)?$")
_GREP_LINE = re.compile(r"(?P<path>[\w/.]+\.py):(?P<lineno>\d+):(?P<text>.*)")
_CONVERSATIONS = {"code": 150, "stdlib-code": 30}


@pytest.fixture(scope="module", params=CORPORA)
def corpus_events(request: pytest.FixtureRequest) -> tuple[str, list[Event]]:
    corpus: str = request.param
    return corpus, workload(corpus, conversations=_CONVERSATIONS[corpus])


def _items(events: list[Event]) -> dict[str, list[RetrievedItem]]:
    """Each conversation's items in the order they were retrieved."""
    out: dict[str, list[RetrievedItem]] = defaultdict(list)
    for event in events:
        if isinstance(event, Retrieval):
            out[event.conversation_id] += event.items
    return out


def _digest(corpus: str, seed: int = 9) -> str:
    events = workload(corpus, conversations=3, seed=seed)
    return hashlib.sha256(msgspec.json.encode(events)).hexdigest()


def _differing(a: str, b: str) -> int:
    """Lines taken out of one text or put into it to make the other."""
    diff = difflib.ndiff(a.splitlines(), b.splitlines())
    return sum(line[:1] in "+-" for line in diff)


def _shared(a: str, b: str, *, of_shorter: bool = False) -> float:
    """The share of the longer (or shorter) text's lines that the other text also holds."""
    left, right = a.splitlines(), b.splitlines()
    common = sum(min(left.count(line), right.count(line)) for line in dict.fromkeys(left))
    return common / (min if of_shorter else max)(len(left), len(right))


@pytest.mark.parametrize("corpus", CORPORA)
def test_workload_is_the_same_for_a_seed_and_differs_across_seeds(corpus: str) -> None:
    assert _digest(corpus) == _digest(corpus)
    assert _digest(corpus, seed=10) != _digest(corpus)


def test_workload_is_the_same_in_processes_with_other_string_hashes() -> None:
    script = (
        "import hashlib, msgspec; from stream_ctx.corpora.codetext import workload; "
        "print(hashlib.sha256(msgspec.json.encode(workload('code', conversations=3))).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert digests == {_digest("code")}


def test_unknown_corpus_is_refused() -> None:
    with pytest.raises(ValueError, match=r"corpus must be one of .* got 'numpy'"):
        sources("numpy")


def test_every_event_survives_the_codec_round_trip(corpus_events: tuple[str, list[Event]]) -> None:
    _, events = corpus_events
    assert all(decode_event(msgspec.json.encode(event)) == event for event in events)


def test_conversations_have_the_realtext_shape(corpus_events: tuple[str, list[Event]]) -> None:
    corpus, events = corpus_events
    assert [e.ts for e in events] == sorted(e.ts for e in events)
    by_conversation: dict[str, list[Event]] = defaultdict(list)
    for event in events:
        by_conversation[event.conversation_id].append(event)
    assert len(by_conversation) == _CONVERSATIONS[corpus]
    for conversation in by_conversation.values():
        turns = len(conversation) // 2
        assert 4 <= turns <= 10
        assert [type(e) for e in conversation] == [Retrieval, Finalize] * turns + [End]
        for retrieval in conversation[:-1:2]:
            assert isinstance(retrieval, Retrieval)
            assert 2 <= len(retrieval.items) <= 5
            for item in retrieval.items:
                assert item.created_at == retrieval.ts
                assert 0.3 <= item.salience <= 0.95
                assert item.kind in {"file", "grep", "test_log"}
                assert set(item.attributes) == {"path", "tool"}
                assert item.id.split(":")[0] in {"read", "grep", "pytest"}


def test_item_sizes_are_those_of_real_tool_output(corpus_events: tuple[str, list[Event]]) -> None:
    _, events = corpus_events
    sizes: dict[str, list[int]] = defaultdict(list)
    for items in _items(events).values():
        for item in items:
            sizes[item.kind].append(len(item.content.encode()))
    bounds = {"file": (1500, 4000), "grep": (500, 2000), "test_log": (1000, 4000)}
    for kind, (low, high) in bounds.items():
        inside = [low <= size <= high for size in sizes[kind]]
        assert sum(inside) >= 0.95 * len(inside), kind
        assert max(sizes[kind]) <= high * 1.05


def test_150_conversations_stay_under_15_mb(corpus_events: tuple[str, list[Event]]) -> None:
    corpus, events = corpus_events
    if corpus != "code":
        pytest.skip("the size is checked on the corpus run with 150 conversations")
    total = sum(len(i.content.encode()) for items in _items(events).values() for i in items)
    assert 3_000_000 < total < 15_000_000


def test_scrolled_windows_share_whole_lines(corpus_events: tuple[str, list[Event]]) -> None:
    corpus, events = corpus_events
    originals = {source.path: source.lines for source in sources(corpus)}
    scrolls = 0
    for items in _items(events).values():
        edited: set[str] = set()
        windows: dict[str, list[tuple[int, list[str]]]] = defaultdict(list)
        for item in items:
            read = _READ_ID.match(item.id)
            if read is None:
                continue
            path, first = read["path"], int(read["first"])
            assert item.content.endswith("\n")
            lines = item.content[:-1].split("\n")
            assert len(lines) == int(read["last"]) - first + 1
            if read["edit"]:
                edited.add(path)
            if path in edited:
                continue
            assert lines == list(originals[path][first - 1 : first - 1 + len(lines)])
            for earlier_first, earlier in windows[path]:
                step = first - earlier_first
                if 20 <= step <= 40 and step < len(earlier):
                    assert lines[: len(earlier) - step] == earlier[step:][: len(lines)]
                    scrolls += 1
            windows[path].append((first, lines))
    assert scrolls >= 50


def test_a_window_read_again_after_an_edit_differs_by_a_few_lines(
    corpus_events: tuple[str, list[Event]],
) -> None:
    _, events = corpus_events
    changed = []
    for items in _items(events).values():
        earlier: dict[tuple[str, str], list[str]] = defaultdict(list)
        for item in items:
            read = _READ_ID.match(item.id)
            if read is None:
                continue
            key = (read["path"], read["first"])
            if read["edit"] and earlier[key]:
                changed.append(min(_differing(text, item.content) for text in earlier[key]))
            earlier[key].append(item.content)
    assert len(changed) >= 30
    assert all(0 < n <= 20 for n in changed)
    assert sorted(changed)[len(changed) // 2] <= 4


def test_grep_lines_quote_the_source_and_reruns_share_most(
    corpus_events: tuple[str, list[Event]],
) -> None:
    corpus, events = corpus_events
    originals = {source.path: source.lines for source in sources(corpus)}
    quoted = total = reruns = 0
    for items in _items(events).values():
        greps = [item for item in items if item.kind == "grep"]
        edited: set[str] = set()
        for item in items:
            read = _READ_ID.match(item.id)
            if read is not None and read["edit"]:
                edited.add(read["path"])
            for line in item.content.splitlines() if item.kind == "grep" else []:
                hit = _GREP_LINE.fullmatch(line)
                assert hit is not None, line
                if hit["path"] not in edited:
                    total += 1
                    quoted += originals[hit["path"]][int(hit["lineno"]) - 1] == hit["text"]
        for before, after in itertools.pairwise(greps):
            name = max(re.findall(r"\w+", before.id[5:].replace(r"\b", " ")), key=len)
            if name in after.id and before.content != after.content:
                reruns += _shared(before.content, after.content) >= 0.6
    assert quoted == total
    assert reruns >= 10


def test_test_logs_name_real_functions_and_reruns_change_a_little(
    corpus_events: tuple[str, list[Event]],
) -> None:
    corpus, events = corpus_events
    code = "\n".join(source.text for source in sources(corpus))
    defined = set(re.findall(r"def _*(\w+?)_*\(", code))
    source_lines = {line.strip() for line in code.splitlines()}
    close = pairs = quoted = failing = 0
    for items in _items(events).values():
        logs = [item for item in items if item.kind == "test_log"]
        for log in logs:
            text = log.content
            assert re.search(r"^collected \d+ items$", text, re.MULTILINE)
            assert re.search(r"^=+ (\d+ failed, )?\d+ passed in \d+\.\d\ds =+$", text, re.MULTILINE)
            for name in re.findall(r"::test_(\w+)(?:\[\w+\])? (?:PASSED|FAILED)", text):
                assert name in defined
            for line in re.findall(r"^>   (.*)$", text, re.MULTILINE):
                failing += 1
                quoted += line.strip() in source_lines
        for before, after in itertools.pairwise(logs):
            pairs += 1
            # A fixed test drops its failure section: the shorter log is mostly in the longer.
            shared = _shared(before.content, after.content, of_shorter=True)
            close += before.content != after.content and shared >= 0.7
    assert failing >= 20
    assert quoted >= 0.9 * failing
    assert close >= 0.6 * pairs
