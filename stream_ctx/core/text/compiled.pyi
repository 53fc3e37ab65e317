# The compiled core's interface (compiled.pyx): the reference's, from textindex.py and repeats.py.
from collections.abc import Sequence

from stream_ctx.core.memo import Memos
from stream_ctx.core.text.plan import TextPlan
from stream_ctx.core.text.textindex import Units

SOURCE_DIGEST: str

def split_units(text: str) -> Units: ...

class IndexedText:
    serial: int
    text: str
    units: list[str]
    starts: list[int]
    marks: list[bool]
    lead: str | None
    shared: set[int]
    continued_in: set[int]
    leads: set[int]

class TextIndex:
    texts: dict[int, IndexedText]
    equal: dict[str, list[int]]
    def __init__(self, memos: Memos) -> None: ...
    def add(self, texts: Sequence[str]) -> list[IndexedText]: ...
    def remove(self, serial: int) -> None: ...

class Planner:
    at: dict[int, int]
    texts: list[IndexedText]
    widths: list[tuple[int, int]]
    def __init__(self, index: TextIndex, order: Sequence[int], memos: Memos) -> None: ...
    def plan(self, n: int) -> tuple[TextPlan, set[int]]: ...
    def may_read(self, n: int, places: set[int], units: set[int]) -> bool: ...

def rough_tokens(text: str) -> int: ...
def choose_quotes(source: str, passage: str) -> tuple[str, str, int] | None: ...

class LineMatcher:
    def __init__(self, before: list[str], after: list[str]) -> None: ...
    def get_matching_blocks(self) -> list[tuple[int, int, int]]: ...
    def get_grouped_opcodes(self, n: int) -> list[list[tuple[str, int, int, int, int]]]: ...
