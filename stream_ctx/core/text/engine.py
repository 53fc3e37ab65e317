"""Which core indexes and plans texts: the Python reference (textindex.py, repeats.py) or its
compiled twin (compiled.pyx), which gives the same bytes faster. Chosen when a processor is made,
never at import; where the compiled core was not built, `auto` runs the Python one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from stream_ctx.core.memo import Memos
from stream_ctx.core.text.repeats import Planner
from stream_ctx.core.text.textindex import TextIndex
from stream_ctx.core.window.config import CoreChoice
from stream_ctx.errors import StreamCtxError

__all__ = ("PYTHON_CORE", "Core", "CoreUnavailableError", "load_core")

_COMPILED_MODULE = "stream_ctx.core.text.compiled"  # named in the error where it is missing


class CoreUnavailableError(StreamCtxError):
    """The compiled core was asked for and is not built in this install."""


@dataclass(frozen=True, slots=True)
class Core:
    """A core's name and its text index and planner (the compiled ones share the reference's
    interface)."""

    name: Literal["python", "compiled"]
    text_index: Callable[[Memos], TextIndex]
    planner: Callable[[TextIndex, Sequence[int], Memos], Planner]


PYTHON_CORE = Core("python", TextIndex, Planner)


def load_core(choice: CoreChoice = "auto") -> Core:
    """The core `choice` names; `auto` is the compiled one where it was built."""
    if choice == "python":
        return PYTHON_CORE
    try:
        from stream_ctx.core.text import compiled  # loaded when chosen, not at import
    except ImportError as error:
        if choice == "compiled":
            raise CoreUnavailableError(
                f"the compiled core ({_COMPILED_MODULE}) is not built in this install: {error};"
                " reinstall with a C++ compiler at hand, or choose the Python core"
            ) from error
        return PYTHON_CORE
    return Core(
        "compiled",
        cast("Callable[[Memos], TextIndex]", compiled.TextIndex),
        cast("Callable[[TextIndex, Sequence[int], Memos], Planner]", compiled.Planner),
    )
