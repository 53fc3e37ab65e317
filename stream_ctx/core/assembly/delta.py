"""Delta contexts: only what changed since the conversation's previous bundle.

A platform that appends each turn's context to its chat history already holds the entries sent
since the last full bundle. A full context numbers its entries 1..n; a delta gives its new entries
the next numbers, so their `^k` and `[§k …]` may point at entries the history holds. A delta
opens with a line naming the earlier entries that still apply (grouped by the bundle that sent
them) and, if any, a line naming those that no longer do (evicted, ended, skipped for budget, or
replaced by a changed version); its new and changed items follow in context order. An entry
still applies when its item's id, kind, attributes, tags and content are unchanged.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

import msgspec

from stream_ctx.core.assembly.assembler import Assembly, DagContextAssembler
from stream_ctx.core.counting.segment import Counted
from stream_ctx.core.entries.reader import ContextSyntaxError, ReadItem, read_context
from stream_ctx.core.text.plan import TextPlan, renamed
from stream_ctx.core.window.accumulator import ContextItem

__all__ = (
    "DROPPED_LEAD",
    "KEPT_LEAD",
    "Delta",
    "SentEntry",
    "SentState",
    "digest",
    "pack_sent",
    "plan_delta",
    "read_delta",
    "sent_after",
    "unpack_sent",
)

KEPT_LEAD = "Still applies: "
DROPPED_LEAD = "No longer applies: "
_LINES = re.compile(f"{KEPT_LEAD}(?P<kept>.*)\n(?:{DROPPED_LEAD}(?P<dropped>.*)\n)?")
_NUMBERS = re.compile(r"§(\d+)(?:-(\d+))?")
# 128 bits: no two different entries of one conversation ever share a digest.
_DIGEST_BYTES = 16


class SentEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """An entry the model's history holds: item id and revision, digest of what it states,
    number, and the seq of the bundle that sent it (scalars only: untracked by the collector)."""

    id: str
    revision: int
    digest: bytes
    number: int
    seq: int


class SentState(msgspec.Struct, frozen=True, kw_only=True):
    """What a conversation's last bundle (`seq`) holds as its history numbers it, and what the
    conversation's bundles have cost so far (as sent, and had each been full)."""

    seq: int
    entries: list[SentEntry]
    next_number: int
    tokens_sent: int
    tokens_full: int


_sent_encoder = msgspec.msgpack.Encoder()
_sent_decoder = msgspec.msgpack.Decoder(SentState)


def pack_sent(state: SentState) -> bytes:
    """The form a SentState is held in between finalizes: its msgpack encoding, ~0.4x the
    memory of its entries as objects (and the bytes it is written to the changelog as)."""
    return _sent_encoder.encode(state)


def unpack_sent(packed: bytes) -> SentState:
    return _sent_decoder.decode(packed)


@dataclass(frozen=True, slots=True)
class Delta:
    """A delta context against bundle `base_seq`, its exact token count, the ids of the items it
    writes, and the entries the history holds after it."""

    base_seq: int
    context: str
    tokens: int
    new_ids: frozenset[str]
    entries: list[SentEntry]
    next_number: int


def digest(item: ContextItem) -> bytes:
    """What an entry states (id, kind, attributes, tags, content), hashed."""
    attributes = [part for pair in item.attributes.items() for part in pair]
    parts = (item.id, item.kind, str(len(attributes)), *attributes, *item.tags, item.content)
    # Each part after its length: no two different items frame to the same text.
    framed = "".join(f"{len(part)}:{part}" for part in parts).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(framed, digest_size=_DIGEST_BYTES).digest()


def plan_delta(
    assembly: Assembly, previous: SentState, *, seq: int, assembler: DagContextAssembler
) -> Delta | None:
    """The delta of `assembly` (made by `assembler`) against the last bundle, or None when
    nothing of that bundle still applies or the delta would cost no fewer tokens than the full
    context."""
    placed = [r.item for r in assembly.placed]
    held = {entry.id: entry for entry in previous.entries}
    digests = _digests(placed, held)
    kept = [
        n
        for n, item in enumerate(placed)
        if (entry := held.get(item.id)) is not None and entry.digest == digests[n]
    ]
    if not kept:
        return None
    kept.sort(key=lambda n: held[placed[n].id].number)
    kept_entries = [held[placed[n].id] for n in kept]
    is_kept = set(kept)
    new = [n for n in range(len(placed)) if n not in is_kept]
    order = kept + new
    numbers = [entry.number for entry in kept_entries]
    numbers += range(previous.next_number, previous.next_number + len(new))
    # The full context's repeats: a new item placed there before a kept one it shares text with
    # writes that text out (planning again in the delta's order could change a sent entry).
    serials = assembler.serials(placed)
    plans: list[TextPlan] = [TextPlan([]) for _ in kept]
    plans += [renamed(assembly.plans[n], serials) for n in new]
    kept_ids = {entry.id for entry in kept_entries}
    dropped = [entry.number for entry in previous.entries if entry.id not in kept_ids]
    count = assembler.tokenizer.count_segment
    segments: list[Counted] = [(line, count(line, line)) for line in _lines(kept_entries, dropped)]
    segments += assembler.counted([placed[n] for n in order], plans, numbers, sent=len(kept))
    tokens = sum(tokens for _, tokens in segments)
    if tokens >= assembly.tokens_bundle:
        return None
    fresh = [
        SentEntry(placed[n].id, placed[n].revision, digests[n], number, seq)
        for n, number in zip(new, numbers[len(kept) :], strict=True)
    ]
    return Delta(
        previous.seq,
        "".join(text for text, _ in segments),
        tokens,
        frozenset(placed[n].id for n in new),
        kept_entries + fresh,
        previous.next_number + len(new),
    )


def sent_after(
    assembly: Assembly, previous: SentState | None, *, seq: int, delta: Delta | None
) -> SentState:
    """The state after bundle `seq` went out: `delta`, or the full context when None."""
    tokens_sent = delta.tokens if delta is not None else assembly.tokens_bundle
    if delta is not None:
        entries, next_number = delta.entries, delta.next_number
    else:
        placed = [r.item for r in assembly.placed]
        held = {entry.id: entry for entry in previous.entries} if previous is not None else {}
        hashes = _digests(placed, held)
        entries = [
            SentEntry(item.id, item.revision, hashes[n - 1], n, seq)
            for n, item in enumerate(placed, start=1)
        ]
        next_number = len(entries) + 1
    return SentState(
        seq=seq,
        entries=entries,
        next_number=next_number,
        tokens_sent=tokens_sent + (previous.tokens_sent if previous is not None else 0),
        tokens_full=assembly.tokens_bundle + (previous.tokens_full if previous is not None else 0),
    )


def read_delta(context: str, held: Sequence[ReadItem]) -> tuple[list[ReadItem], list[ReadItem]]:
    """Read a delta context against the entries its history holds (numbered from 1 since the
    last full context): the items that apply now (kept ones in number order, then the new ones),
    and the new entries."""
    lines = _LINES.match(context)
    if lines is None:
        raise ContextSyntaxError(f"a delta context starts with {KEPT_LEAD!r}")
    kept = _numbers(lines.group("kept"))
    if not kept or max(kept) > len(held):
        raise ContextSyntaxError(f"the kept entries {lines.group('kept')!r} are not all held")
    new = read_context(context, held=held, start=lines.end())
    return [held[number - 1] for number in sorted(kept)] + new, new


def _digests(items: Sequence[ContextItem], held: dict[str, SentEntry]) -> list[bytes]:
    """Each item's digest; a version already sent (same id and revision) is not hashed again."""
    found = []
    for item in items:
        entry = held.get(item.id)
        is_sent = entry is not None and entry.revision == item.revision
        found.append(entry.digest if entry is not None and is_sent else digest(item))
    return found


def _lines(kept: list[SentEntry], dropped: list[int]) -> list[str]:
    groups = [
        f"{_ranges(entry.number for entry in group)} (bundle {seq})"
        for seq, group in groupby(kept, key=lambda entry: entry.seq)
    ]
    lines = [KEPT_LEAD + ", ".join(groups) + "\n"]
    if dropped:
        lines.append(DROPPED_LEAD + _ranges(dropped) + "\n")
    return lines


def _ranges(numbers: Iterable[int]) -> str:
    """Ascending numbers as `§1-3 §5`: a run of two or more as its ends."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return " ".join(f"§{run[0]}-{run[-1]}" if len(run) > 1 else f"§{run[0]}" for run in runs)


def _numbers(text: str) -> list[int]:
    found: list[int] = []
    for first, last in _NUMBERS.findall(text):
        found += range(int(first), int(last or first) + 1)
    return found
