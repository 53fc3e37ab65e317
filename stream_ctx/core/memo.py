"""Memo tables owned by whoever renders: a processor is given a Memos (a group member shares one
among its partitions' processors) or makes its own, never a process-wide one, so a test starts
from empty tables.

A module declares what it memoizes as a Memo (a name for the metrics, the pure function, a bound);
`memos[MEMO]` is that function memoized in this object's table, made on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import _lru_cache_wrapper, lru_cache
from typing import Generic, ParamSpec, TypeVar, cast

__all__ = ("Memo", "Memos")

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, slots=True)
class Memo(Generic[P, R_co]):
    """A pure function to memoize, the name its table's metrics carry, and the table's bound."""

    name: str
    function: Callable[P, R_co]
    limit: int


class Memos:
    """One owner's memo tables (functools.lru_cache), by Memo name."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[str, _lru_cache_wrapper[object]] = {}

    def __getitem__(self, memo: Memo[P, R]) -> Callable[P, R]:
        table = self._tables.get(memo.name)
        if table is None:
            table = self._tables[memo.name] = lru_cache(maxsize=memo.limit)(memo.function)
        return cast("Callable[P, R]", table)

    def clear(self) -> None:
        """Empty every table (their lookup figures start again)."""
        for table in self._tables.values():
            table.cache_clear()

    def lookups(self, memo: Memo[P, R]) -> tuple[int, int, int]:
        """Hits, misses and entries of `memo`'s table so far (zeros before its first use)."""
        table = self._tables.get(memo.name)
        if table is None:
            return 0, 0, 0
        info = table.cache_info()
        return info.hits, info.misses, info.currsize
