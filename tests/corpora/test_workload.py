"""The seeded workload generator: synthetic output pinned, real-text option seeded and sourced."""

from __future__ import annotations

import hashlib
import random
import sys
from collections import Counter

import msgspec
import pytest

from stream_ctx.core.wire.events import End, Event, Finalize, Retrieval
from stream_ctx.corpora.realtext import documents
from stream_ctx.corpora.workload import WorkloadShape, generate, passage

# sha256 of msgspec.json.encode(generate(1, WorkloadShape(conversations=3))), taken before the
# real-text option existed: tests and benchmarks compare against the synthetic output as it is.
_SYNTHETIC_DIGEST = "a2dfef4fc40934ecce5d3bf3216b4001566e0f965707cf506c9517f75f389308"
_SMALL = WorkloadShape(conversations=3)


def _digest(shape: WorkloadShape, seed: int = 1) -> str:
    return hashlib.sha256(msgspec.json.encode(generate(seed, shape))).hexdigest()


def test_synthetic_output_is_unchanged() -> None:
    assert _digest(_SMALL) == _SYNTHETIC_DIGEST
    assert _digest(WorkloadShape(conversations=3, text="synthetic")) == _SYNTHETIC_DIGEST


@pytest.mark.parametrize("text", ["numpy", "stdlib"])
def test_real_text_is_deterministic_per_seed(text: str) -> None:
    shape = WorkloadShape(conversations=3, text=text)
    assert _digest(shape) == _digest(shape)
    assert _digest(shape, seed=2) != _digest(shape)
    assert _digest(shape) != _SYNTHETIC_DIGEST


def _shape_of(events: list[Event]) -> Counter[tuple[str, str]]:
    return Counter((type(e).__name__, e.conversation_id) for e in events)


def test_real_text_keeps_the_synthetic_conversation_shape() -> None:
    synthetic = generate(4, _SMALL)
    real = generate(4, WorkloadShape(conversations=3, text="numpy"))
    # 8 retrievals, a finalize after every fourth, an end: per conversation, as the synthetic.
    assert _shape_of(real) == _shape_of(synthetic)
    assert [type(e) for e in real] == [type(e) for e in synthetic]
    assert {type(e) for e in real} == {Retrieval, Finalize, End}
    items = [item for e in real if isinstance(e, Retrieval) for item in e.items]
    assert {item.kind for item in items} == {"chunk", "episode", "pattern", "tool_result"}
    assert all(set(item.attributes) == {"language", "domain", "task_type"} for item in items)
    assert all(200 <= len(item.content) for item in items if item.kind != "tool_result")


def test_real_text_passage_is_a_whitespace_cut_stretch_of_the_corpus() -> None:
    joined = "\n\n".join(doc.text for doc in documents("numpy"))
    longest_word = max(len(word) for word in joined.split())
    rng = random.Random(3)
    for _ in range(50):
        chars = rng.randint(200, 9_000)
        found = passage(rng, chars, text="numpy")
        at = joined.index(found)
        assert at == 0 or joined[at - 1].isspace(), found[:40]
        if at + len(found) < len(joined):  # a stretch may end at the corpus's end, shorter
            assert found[-1].isspace(), found[-40:]
            assert chars <= len(found) <= chars + longest_word + 1


def test_workload_text_names_the_field_and_value() -> None:
    with pytest.raises(ValueError, match=r"WorkloadShape.text must be one of .*, got 'wiki'"):
        WorkloadShape(text="wiki")
    with pytest.raises(ValueError, match=r"WorkloadShape.cut must be one of .*, got 'word'"):
        WorkloadShape(cut="word")  # type: ignore[arg-type]


def test_chunks_start_and_end_between_words() -> None:
    chunks = [
        item.content
        for e in generate(5, WorkloadShape(conversations=4))
        if isinstance(e, Retrieval)
        for item in e.items
        if item.kind != "tool_result"
    ]
    assert chunks
    for text in chunks:
        assert not text[:1].isspace()
        assert text[-1:].isspace() or text[-1:] in ".!?"


def test_the_numpy_corpus_without_numpy_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(
        ModuleNotFoundError,
        match=r"^the numpy corpus needs numpy: pip install 'stream-ctx\[corpora\]'$",
    ):
        documents("numpy")


def test_a_sentence_cut_shape_cuts_chunks_and_places_the_runbook_between_sentences() -> None:
    events = generate(5, WorkloadShape(conversations=6, cut="sentence"))
    contents = [
        item.content.removeprefix(item.content.split("\n", 1)[0] + "\n")
        if item.kind == "tool_result"
        else item.content
        for event in events
        if isinstance(event, Retrieval)
        for item in event.items
    ]
    assert contents
    assert all(text[0].isupper() and text[-1] in ".!?" and "\n " not in text for text in contents)
    assert any("As the runbook says: " in text for text in contents)
    before = [text.split("As the runbook says: ")[0].rstrip() for text in contents]
    assert all(not head or head[-1] in ".!?" for head in before)
    assert _digest(WorkloadShape(conversations=3, cut="space")) == _SYNTHETIC_DIGEST
