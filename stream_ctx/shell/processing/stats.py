"""The counters a run reports; its parts add to them, tests and metrics read them."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ("RunnerStats",)


@dataclass(slots=True)
class RunnerStats:
    """Counters a run reports (and tests and metrics read)."""

    events: int = 0
    bundles: int = 0
    dead_letters: int = 0
    batches: int = 0
    restored_conversations: int = 0
    restored_records: int = 0
    restore_seconds: float = 0.0
    dead_letters_by_error: dict[str, int] = field(default_factory=dict)
