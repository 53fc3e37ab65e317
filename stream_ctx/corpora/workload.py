"""A seeded, realistic retrieval workload for the demo, the tests and the benchmarks.

Each conversation draws from a few documents cut into neighbouring chunks that overlap by about
20%; about half its documents quote one shared runbook passage; it re-retrieves some chunks,
re-runs tools whose output mostly repeats under a new id, and asks for a bundle after every
fourth retrieval.

The text is synthetic by default: sentences from a tiny vocabulary, which makes a repeat finder
see far more repetition than real retrieval text. `WorkloadShape(text="numpy")` (or "stdlib")
draws every document and the runbook passage from `realtext`'s corpus instead and keeps
everything else of the shape.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import msgspec

from stream_ctx.core.wire.events import End, Event, Finalize, Retrieval, RetrievedItem

__all__ = ("TEXTS", "WorkloadShape", "conversation_events", "generate", "passage")

_SUBJECTS = (
    "the auth middleware",
    "the token cache",
    "the retry loop",
    "the request router",
    "the connection pool",
    "the schema migration",
    "the rate limiter",
    "the job queue",
)
_VERBS = (
    "rejects",
    "refreshes",
    "serialises",
    "retries",
    "drops",
    "validates",
    "batches",
    "logs",
    "times out on",
    "deadlocks with",
)
_OBJECTS = (
    "expired JWTs",
    "concurrent writes",
    "empty payloads",
    "stale replicas",
    "UTF-8 headers",
    "large uploads",
    "idle sockets",
    "duplicate events",
)
_CLAUSES = (
    "after the last deploy",
    "under load",
    "when the clock skews",
    "only in staging",
    "unless the flag is set",
    "since version 2.3",
    "for tenants on the old plan",
)
_LANGUAGES = ("rust", "python", "typescript", "go")
_DOMAINS = ("web-api", "data-pipeline", "cli", "infra")
_TASKS = ("debugging", "refactoring", "code-review", "incident")
_TAGS = ("async", "auth", "db", "network", "perf", "security", "tests")
_KINDS = ("chunk", "episode", "pattern", "tool_result")
_DAY_MS = 86_400_000
TEXTS = ("synthetic", "numpy", "stdlib")
Cut = Literal["space", "sentence"]
# Where a chunker may cut: after any whitespace, or only after a sentence's end.
_CUTS: dict[Cut, re.Pattern[str]] = {
    "space": re.compile(r"\s"),
    "sentence": re.compile(r"[.!?]\s+"),
}


@dataclass(frozen=True, slots=True)
class WorkloadShape:
    """Sizes of a generated workload."""

    conversations: int = 20
    retrievals_per_conversation: int = 8
    finalize_every: int = 4
    items_per_retrieval: tuple[int, int] = (3, 8)
    chunk_chars: tuple[int, int] = (200, 1500)
    overlap: float = 0.2
    re_retrieve: float = 0.25
    tool_rerun: float = 0.1
    start_ms: int = 1_764_480_000_000
    is_ending: bool = True
    text: str = "synthetic"
    # `sentence` cuts chunks, and places the runbook quote, only between sentences: what a person
    # reading the demo's contexts expects of a chunker. `space` is the benchmarks' fixed shape.
    cut: Cut = "space"

    def __post_init__(self) -> None:
        if self.text not in TEXTS:
            raise ValueError(f"WorkloadShape.text must be one of {TEXTS}, got {self.text!r}")
        if self.cut not in _CUTS:
            raise ValueError(f"WorkloadShape.cut must be one of {tuple(_CUTS)}, got {self.cut!r}")


def _sentence(rng: random.Random) -> str:
    return (
        f"{rng.choice(_SUBJECTS).capitalize()} {rng.choice(_VERBS)} "
        f"{rng.choice(_OBJECTS)} {rng.choice(_CLAUSES)}."
    )


def _document(rng: random.Random, chars: int) -> str:
    parts: list[str] = []
    size = 0
    while size < chars:
        sentence = _sentence(rng)
        if rng.random() < 0.15:
            sentence += "\n\n"
        parts.append(sentence)
        size += len(sentence) + 1
    return " ".join(parts)


@functools.cache
def _corpus(text: str) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A real corpus's documents joined by blank lines, and each one's (start, end) in it."""
    from stream_ctx.corpora.realtext import (
        documents,  # imports the corpus's modules: only when asked
    )

    texts = [doc.text for doc in documents(text)]
    spans, start = [], 0
    for doc in texts:
        spans.append((start, start + len(doc)))
        start += len(doc) + 2
    return "\n\n".join(texts), tuple(spans)


def passage(rng: random.Random, chars: int, *, text: str = "synthetic") -> str:
    """About `chars` characters of `text`: synthetic sentences, or a random stretch of a random
    document of a real corpus, cut at whitespace (running on into the documents after it in the
    corpus's order when the document is shorter)."""
    if text == "synthetic":
        return _document(rng, chars)
    joined, spans = _corpus(text)
    first, last = rng.choice(spans)
    start = min(rng.randint(first, max(first, last - chars)), max(0, len(joined) - chars))
    if start != first:
        start = _after_cut(joined, start)
    return joined[start : _after_cut(joined, start + chars)]


def _after_cut(text: str, pos: int, cut: Cut = "space") -> int:
    """The position after the first place to cut at or past `pos` (the end if there is none)."""
    found = _CUTS[cut].search(text, pos)
    return len(text) if found is None else found.end()


def _chunks(
    rng: random.Random, shape: WorkloadShape, doc_id: str, runbook: str
) -> list[tuple[str, str]]:
    """Neighbouring chunks of one document, each overlapping the previous by about `overlap`,
    cut after whitespace (never inside a word) or between sentences, as the shape says."""
    low, high = shape.chunk_chars
    sizes = [rng.randint(low, high) for _ in range(rng.randint(3, 6))]
    text = passage(rng, sum(sizes), text=shape.text)
    if rng.random() < 0.5:
        at = rng.randint(0, len(text))
        if shape.cut == "sentence":
            at = _after_cut(text, at, "sentence")
            quote = f"As the runbook says: {runbook.rstrip()}"
            text = " ".join(part for part in (text[:at].rstrip(), quote, text[at:]) if part)
        else:
            text = f"{text[:at]} As the runbook says: {runbook} {text[at:]}"
    if shape.cut == "sentence":  # paragraphs start at their first word, chunks end at a sentence's
        text = text.replace("\n\n ", "\n\n")
    chunks, start = [], 0
    for n, size in enumerate(sizes):
        end = _after_cut(text, start + size, shape.cut)
        chunk = text[start:end]
        chunks.append((f"{doc_id}:{n}", chunk.rstrip() if shape.cut == "sentence" else chunk))
        start = _after_cut(text, start + max(1, int(size * (1 - shape.overlap))), shape.cut)
    return chunks


def conversation_events(rng: random.Random, shape: WorkloadShape, cid: str) -> Iterator[Event]:
    """One conversation's events, in order."""
    runbook = passage(rng, 400, text=shape.text)
    documents = [_chunks(rng, shape, f"{cid}/doc{d}", runbook) for d in range(rng.randint(2, 4))]
    language, domain = rng.choice(_LANGUAGES), rng.choice(_DOMAINS)
    ts = shape.start_ms + rng.randint(0, 3_600_000)
    seen: list[RetrievedItem] = []
    for turn in range(1, shape.retrievals_per_conversation + 1):
        ts += rng.randint(5_000, 60_000)
        items: list[RetrievedItem] = []
        for _ in range(rng.randint(*shape.items_per_retrieval)):
            if seen and rng.random() < shape.re_retrieve:
                items.append(rng.choice(seen))
                continue
            tools = [it for it in seen if it.kind == "tool_result"]
            if tools and rng.random() < shape.tool_rerun:
                items.append(_rerun(rng.choice(tools), turn, ts))
                continue
            chunk_id, content = rng.choice(rng.choice(documents))
            kind = rng.choice(_KINDS)
            if kind == "tool_result":
                chunk_id, content = f"tool:{chunk_id}", f"$ exit 0 at {ts}\n{content}"
            item = RetrievedItem(
                id=chunk_id,
                kind=kind,
                salience=round(rng.uniform(0.1, 1.0), 2),
                content=content,
                created_at=ts - rng.randint(0, 90 * _DAY_MS),
                attributes={
                    "language": language,
                    "domain": domain,
                    "task_type": rng.choice(_TASKS),
                },
                tags=sorted(rng.sample(_TAGS, rng.randint(0, 3))),
            )
            items.append(item)
            seen.append(item)
        yield Retrieval(
            conversation_id=cid,
            event_id=f"{cid}/e{turn}r",
            ts=ts,
            query=f"turn {turn}",
            items=items,
        )
        if turn % shape.finalize_every == 0:
            ts += rng.randint(100, 2_000)
            yield Finalize(
                conversation_id=cid, event_id=f"{cid}/e{turn}f", ts=ts, request_id=f"turn-{turn}"
            )
    if shape.is_ending:
        yield End(conversation_id=cid, event_id=f"{cid}/end", ts=ts + 1_000)


def _rerun(tool: RetrievedItem, turn: int, ts: int) -> RetrievedItem:
    """The same tool run again: a new id and status line over mostly the same output."""
    _, _, body = tool.content.partition("\n")
    return msgspec.structs.replace(
        tool,
        id=f"{tool.id.split('@')[0]}@turn{turn}",
        content=f"$ exit 1 at {ts}\n{body or tool.content}",
        created_at=ts,
    )


def generate(seed: int, shape: WorkloadShape | None = None) -> list[Event]:
    """All conversations' events interleaved round-robin, as they would arrive on a topic."""
    shape = shape or WorkloadShape()
    rng = random.Random(seed)
    streams = [conversation_events(rng, shape, f"c-{n:05d}") for n in range(shape.conversations)]
    events: list[Event] = []
    while streams:
        for stream in list(streams):
            event = next(stream, None)
            if event is None:
                streams.remove(stream)
            else:
                events.append(event)
    return events
