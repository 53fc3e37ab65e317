r"""msgspec's errors read once: msgspec says where a document is wrong only in its message text
(`Expected \`int\` >= 1, got \`str\` - at \`$.items[2].salience\``, `... (byte 12)`), so this is
the one place that parses it, and everyone else gets the field's path, the problem and the value.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

import msgspec

__all__ = ("Invalid", "byte_offset", "invalid", "is_truncated", "path_steps", "without_type")

_AT = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_CHOICE = "Invalid enum value"
# msgspec's ", got `str`" names the value's type; the messages show the value itself instead.
_GOT_TYPE = re.compile(r", got `[^`]+`$")
_BYTE = re.compile(r"\(byte (\d+)\)")
_STEP = re.compile(r'\.?([^.\[\]]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]|\[(\.\.\.)\]')
# Long values are cut in messages, so an error never echoes a whole oversized document.
_VALUE_REPR_LIMIT = 120

Kind = Literal["value", "choice", "missing", "unknown"]
_FIELD_PROBLEMS: tuple[tuple[re.Pattern[str], Kind], ...] = (
    (re.compile(r"Object missing required field `(?P<field>[^`]+)`"), "missing"),
    (re.compile(r"Object contains unknown field `(?P<field>[^`]+)`"), "unknown"),
)


@dataclass(frozen=True, slots=True)
class Invalid:
    """One thing msgspec refused: the field's path as people read it (`items[2].salience`, ""
    for the document itself), the problem in msgspec's words, and the value found there."""

    path: str
    problem: str
    value: object = None
    # "choice": a value outside an enum or a Literal; "missing" and "unknown": a field.
    kind: Kind = "value"

    def describe(self, subject: str) -> str:
        """One line naming the field and the value, "`max_tokens`: Expected `int` >= 1, got 0";
        `subject` names the whole document ("the request body") where no field is at fault."""
        if self.kind == "missing":
            return f"`{self.path}` is required"
        if self.kind == "unknown":
            return f"`{self.path}` is not a field of {subject}"
        shown = repr(self.value)
        if len(shown) > _VALUE_REPR_LIMIT:
            shown = shown[:_VALUE_REPR_LIMIT] + "..."
        if not self.path:
            return f"{subject} {self.problem[0].lower()}{self.problem[1:]}, got {shown}"
        return f"`{self.path}`: {self.problem}, got {shown}"


def invalid(exc: msgspec.ValidationError, document: object) -> Invalid:
    """What `exc` says is wrong with `document` (the value msgspec was given, decoded)."""
    message = str(exc)
    at = _AT.search(message)
    path = at.group("path") if at else ""
    problem = without_type(message[: at.start()] if at else message)
    for pattern, kind in _FIELD_PROBLEMS:
        found = pattern.match(problem)
        if found:
            field = f"{path}.{found.group('field')}"
            return Invalid(_shown(path_steps(field)), problem, kind=kind)
    steps = path_steps(path)
    kind = "choice" if problem.startswith(_CHOICE) else "value"
    return Invalid(_shown(steps), problem, _value_at(document, steps), kind)


def without_type(problem: str) -> str:
    """msgspec's problem without its trailing ", got `str`": a message shows the value instead."""
    return _GOT_TYPE.sub("", problem)


def path_steps(path: str) -> list[str | int]:
    """A msgspec path (`$.items[2].attributes["size"]`, with or without the `$`) as its steps:
    field names and mapping keys as strings, list indexes as integers. msgspec writes `[...]`
    for "a value of this mapping" without saying which; that step is kept as "...".
    """
    steps: list[str | int] = []
    for name, index, key, some in _STEP.findall(path.removeprefix("$")):
        if index:
            steps.append(int(index))
        elif key:
            steps.append(json.loads(key))
        else:
            steps.append(name or some)
    return steps


def byte_offset(message: str) -> int | None:
    """The 0-based byte where msgspec's decoder found malformed input, if the message says."""
    found = _BYTE.search(message)
    return int(found.group(1)) if found else None


def is_truncated(message: str) -> bool:
    """Whether msgspec's decoder ran out of input (the document ends too early)."""
    return "truncated" in message


def _shown(steps: list[str | int]) -> str:
    """Steps as people read a path: `items[2].attributes["size"]`."""
    shown = ""
    for step in steps:
        if isinstance(step, int):
            shown += f"[{step}]"
        elif step == "..." or not step.isidentifier():
            shown += f"[{json.dumps(step) if step != '...' else step}]"
        else:
            shown += f".{step}" if shown else step
    return shown


def _value_at(document: object, steps: list[str | int]) -> object:
    """The value at `steps` in `document`, or None where the path leaves it."""
    value = document
    for step in steps:
        if isinstance(step, int) and isinstance(value, list) and step < len(value):
            value = value[step]
        elif isinstance(step, str) and isinstance(value, dict) and step in value:
            value = value[step]
        else:
            return None
    return value
