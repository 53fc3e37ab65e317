"""A real-text RAG workload: installed documentation cut into overlapping chunks, and seeded
multi-turn conversations that retrieve the same and neighbouring chunks again.

Corpora: `numpy` (the docstrings of numpy's public API; the `corpora` extra installs numpy) and
`stdlib` (the docstrings of the Python standard library, kept as the unseen check). Chunks are
about 800 characters long and overlap by about 20%, cut at whitespace.
"""

from __future__ import annotations

import importlib
import inspect
import random
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

from stream_ctx.core.wire.events import End, Event, Finalize, Retrieval, RetrievedItem

__all__ = (
    "CHUNK_CHARS",
    "MIN_DOCUMENT_CHARS",
    "STRIDE_CHARS",
    "Document",
    "chunks",
    "conversation",
    "documents",
    "workload",
)

CHUNK_CHARS = 800
STRIDE_CHARS = 640
# Documents shorter than two chunks have no neighbours to re-retrieve.
MIN_DOCUMENT_CHARS = 2 * CHUNK_CHARS
_T0 = 1_764_480_000_000
_TURN_MS = 30_000

_NUMPY_MODULES = (
    "numpy",
    "numpy.linalg",
    "numpy.fft",
    "numpy.random",
    "numpy.ma",
    "numpy.polynomial.polynomial",
    "numpy.lib.stride_tricks",
    "numpy.strings",
    "numpy.char",
    "numpy.testing",
)
_STDLIB_MODULES = (
    "asyncio",
    "collections",
    "itertools",
    "functools",
    "os",
    "pathlib",
    "re",
    "json",
    "subprocess",
    "threading",
    "typing",
    "argparse",
    "logging",
    "datetime",
    "email.message",
    "http.client",
    "urllib.request",
    "unittest",
    "zipfile",
    "tarfile",
    "socket",
    "ssl",
    "sqlite3",
    "decimal",
    "enum",
    "dataclasses",
    "inspect",
    "shutil",
    "tempfile",
    "textwrap",
    "csv",
    "configparser",
    "concurrent.futures",
    "multiprocessing",
    "contextlib",
    "pickle",
    "struct",
    "statistics",
    "random",
    "string",
)


@dataclass(frozen=True, slots=True)
class Document:
    """A docstring: its qualified name, package and text."""

    name: str
    package: str
    text: str


def documents(corpus: str) -> list[Document]:
    """The corpus's documents long enough to chunk, in a fixed order."""
    modules = {"numpy": _NUMPY_MODULES, "stdlib": _STDLIB_MODULES}.get(corpus)
    if modules is None:
        raise ValueError(f"corpus must be 'numpy' or 'stdlib', got {corpus!r}")
    found: dict[str, Document] = {}
    seen: set[str] = set()
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                f"the {corpus} corpus needs {exc.name}: pip install 'stream-ctx[corpora]'",
                name=exc.name,
            ) from exc
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # typing.io and such, on access
            found_docs = list(_docstrings(module_name, module))
        for name, doc in found_docs:
            if doc and len(doc) >= MIN_DOCUMENT_CHARS and doc not in seen:
                seen.add(doc)
                found[name] = Document(name, module_name.split(".")[0], doc)
    return list(found.values())


def _docstrings(name: str, obj: object, *, depth: int = 0) -> Iterator[tuple[str, str | None]]:
    """The docstrings of a module, its public callables, and (one level down) their methods."""
    yield name, inspect.getdoc(obj)
    if depth > 1:
        return
    for attr in sorted(dir(obj)):
        if attr.startswith("_"):
            continue
        member = getattr(obj, attr, None)
        if inspect.isclass(member) or inspect.isroutine(member):
            yield from _docstrings(f"{name}.{attr}", member, depth=depth + 1)


def chunks(text: str) -> list[str]:
    """Chunks of about CHUNK_CHARS, starting every STRIDE_CHARS, both ends moved to whitespace."""
    out = []
    start = 0
    while start < len(text):
        end = _at_space(text, start + CHUNK_CHARS)
        out.append(text[start:end])
        if end >= len(text):
            break
        start = _at_space(text, start + STRIDE_CHARS)
    return out


def _at_space(text: str, pos: int) -> int:
    if pos >= len(text):
        return len(text)
    space = text.find(" ", pos)
    return len(text) if space < 0 else space + 1


def conversation(rng: random.Random, docs: list[Document], cid: str, *, ts: int) -> Iterator[Event]:
    """4-10 turns over 1-3 documents: each turn retrieves 2-5 chunks near what it saw before
    (the same chunk, a neighbour, or a fresh spot), then finalizes."""
    picked = rng.sample(docs, k=min(len(docs), rng.randint(1, 3)))
    cut = {doc.name: chunks(doc.text) for doc in picked}
    seen: list[tuple[str, int]] = []
    for turn in range(rng.randint(4, 10)):
        offered: dict[str, RetrievedItem] = {}
        for _ in range(rng.randint(2, 5)):
            doc = rng.choice(picked)
            parts = cut[doc.name]
            if seen and rng.random() < 0.7:
                name, index = rng.choice(seen)
                doc = next(d for d in picked if d.name == name)
                parts = cut[name]
                index = min(max(index + rng.choice((-1, 0, 0, 1)), 0), len(parts) - 1)
            else:
                index = rng.randrange(len(parts))
            seen.append((doc.name, index))
            item_id = f"{doc.name}:{index}"
            offered[item_id] = RetrievedItem(
                id=item_id,
                kind="chunk",
                salience=round(rng.uniform(0.3, 0.95), 2),
                content=parts[index],
                created_at=_T0,
                attributes={"source": doc.name, "package": doc.package},
                tags=["docs"],
            )
        query = f"turn {turn}"
        yield Retrieval(
            conversation_id=cid,
            event_id=f"{cid}:r{turn}",
            ts=ts,
            query=query,
            items=[*offered.values()],
        )
        yield Finalize(conversation_id=cid, event_id=f"{cid}:f{turn}", ts=ts + 1, request_id=query)
        ts += _TURN_MS
    yield End(conversation_id=cid, event_id=f"{cid}:end", ts=ts)


def workload(corpus: str, *, conversations: int, seed: int = 9) -> list[Event]:
    """Events of `conversations` conversations, one after another, in event-time order."""
    rng = random.Random(seed)
    docs = documents(corpus)
    events: list[Event] = []
    for n in range(conversations):
        events += conversation(rng, docs, f"{corpus}-{n}", ts=_T0 + n * 3_600_000)
    return events
