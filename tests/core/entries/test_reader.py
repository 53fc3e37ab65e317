"""read_context: id stems read back exactly, and each refusal of a context the renderer does not
write names the item and the place.

That every rendered context reads back exactly is test_render.py's (property tests), whose ids
are too short to have a stem."""

from __future__ import annotations

import re

import pytest

from stream_ctx.core.entries.entry import render_lean
from stream_ctx.core.entries.reader import (
    ContextSyntaxError,
    Reference,
    read_context,
    read_references,
)
from stream_ctx.core.text.repeats import plan_texts
from tests.factories import make_context_item


def _refused(context: str, message: str) -> None:
    with pytest.raises(ContextSyntaxError, match=f"^{re.escape(message)}$"):
        read_context(context)


def test_a_header_term_without_its_value_names_item_and_character() -> None:
    _refused("§1 a (chunk) name\ntext\n", "item §1: expected '=' at character 17")


def test_an_entry_not_numbered_next_names_the_number_expected_and_where() -> None:
    _refused("§2 a (chunk)\nx\n", "expected item §1 at character 0")
    _refused("hello\n", "expected item §1 at character 0")
    (held,) = read_context("§1 a (chunk)\nx\n")
    with pytest.raises(ContextSyntaxError, match=r"^expected item §2 at character 6$"):
        read_context("kept\n\n§3 b (chunk)\ny\n", held=[held], start=6)


def test_references_that_cannot_be_resolved_say_why() -> None:
    first = "§1 a (chunk)\nsome text here\n"
    _refused(f"{first}§2 b (chunk)\n[§2]\n", "item §2: [§2] names the item being read")
    _refused("§1 a (chunk)\n[§2]\n", "item §1: [§2] names no earlier item")
    _refused(
        "§1 a (chunk)\n[§2 with changes:]\n@@\n+x\n",
        "item §1: [§2 with changes:]\n names no earlier item",
    )
    _refused(
        f'{first}§2 b (chunk)\n[§1 "some text"…"there"]\n',
        'item §2: [§1 "some text"…"there"] is not in item §1',
    )
    _refused(
        f'{first}§2 b (chunk)\nbefore [§2 "b"…"c"]\n',
        'item §2: [§2 "b"…"c"] is not in item §2',
    )
    _refused(f"{first}§2 b (chunk)\nsee [§x]\n", "item §2: an unreadable reference in 'see [§x]'")
    _refused(f"{first}§2 b (chunk)\n[§x] [§1]\n", "item §2: an unreadable reference in '[§x] '")
    _refused(  # a diff's lead anywhere but at the start of the text
        f"{first}§2 b (chunk)\nx\n[§1 with changes:]\n",
        "item §2: an unreadable reference in 'x\\n[§1 with changes:]'",
    )


def test_a_diff_whose_hunks_do_not_apply_says_why() -> None:
    _refused(
        "§1 a (chunk)\nsome text\n§2 b (chunk)\n[§1 with changes:]\n@@\n-other text\n+new\n",
        "item §2: hunk lines ['other text']... not found after line 1",
    )
    _refused(
        "§1 a (chunk)\nsome text\n§2 b (chunk)\n[§1 with changes:]\n-some text\n",
        "item §2: hunks start with '@@', got '-some text'",
    )


def test_an_entry_without_its_closing_newline_is_named() -> None:
    _refused("§1 a (chunk)\ntext", "item §1 does not end with a newline")


def test_ids_and_sources_abbreviated_by_their_stem_read_back_exactly() -> None:
    items = [
        make_context_item(id=item_id, content=text, attributes={"source": source}, entered=n)
        for n, (item_id, source, text) in enumerate(
            [
                ("docs/guide.md#1", "docs/guide.md", "first passage of the guide"),
                ("docs/guide.md#2", "docs/guide.md", "second passage of the guide"),
                ("notes/release.txt:7", "notes/release.txt", "a note on the release"),
            ]
        )
    ]
    plans = plan_texts([item.content for item in items])
    context = "".join(text for _, text in render_lean(items, plans))
    assert context.startswith("§1 docs/guide.md#1 (chunk) source=~\n")
    assert "\n§2 ~2 ^1\n" in context
    read = read_context(context)
    assert [(r.id, r.attributes) for r in read] == [(i.id, i.attributes) for i in items]


def test_header_refusals_name_the_item_and_what_is_missing() -> None:
    _refused("§1 a name=v\ntext\n", "item §1: neither `(kind)` nor `^k` in its header")
    _refused("§1 a (chunk)x\ntext\n", "item §1: expected a newline at character 12")
    _refused("§1 a (chunk\ntext\n", "item §1: expected ')' at character 11")
    _refused("§1 ~x (chunk)\ntext\n", "item §1: `~` id without a base that has a stem")
    _refused("§1 a (chunk) source=~\ntext\n", "item §1: a `~` value but the id has no stem")


def test_a_base_that_is_not_an_earlier_item_and_a_missing_atom_are_named() -> None:
    for base in ("^2", "^0"):
        _refused(f"§1 a (chunk)\nx\n§2 b {base}\ny\n", "item §2: bad base at character 20")
    _refused('§1 "a (x)\nx\n', "expected a JSON string at character 3")


def test_after_a_base_a_tag_ends_where_a_removed_tag_starts() -> None:
    read = read_context("§1 a (chunk) #x #y\nt\n§2 b ^1 #z -#x\nu\n")
    assert [r.tags for r in read] == [["x", "y"], ["y", "z"]]


def test_an_attribute_after_a_tag_is_refused() -> None:
    _refused('§1 a (chunk) #"t" k=v\ntext\n', "item §1: an attribute after a tag at 18")
    removed_then_attribute = '§1 a (chunk) #x\nt\n§2 b ^1 -#"x" k=v\nu\n'
    _refused(removed_then_attribute, "item §2: an attribute after a tag at 32")


def test_an_items_text_may_hold_lines_that_look_like_other_items_leads() -> None:
    # Only a line starting `§` and the next item's number ends a text, the first such line.
    read = read_context("§1 a (chunk)\nx\n§3 w\n§2 b (chunk)\ny\n§2 z\n")
    assert [r.content for r in read] == ["x\n§3 w", "y\n§2 z"]


def test_each_header_term_overrides_what_the_terms_before_it_said() -> None:
    # `-gone` drops a name the base lacks; `a=v` replaces `a=~`; `-b` drops `b=~`.
    context = "§1 document:1 (chunk)\nx\n§2 document:2 ^1 -gone a=~ a=v b=~ -b\ny\n"
    assert [r.attributes for r in read_context(context)] == [{}, {"a": "v"}]


def test_after_a_base_a_bare_name_cannot_start_with_a_parenthesis() -> None:
    _refused("§1 a (chunk)\nx\n§2 b ^1 k=v (x)=1\ny\n", "item §2: expected '=' at character 27")


def test_read_references_gives_each_reference_its_place_item_and_text() -> None:
    context = (
        "§1 a (chunk)\nalpha beta gamma\n"
        '§2 b (chunk)\nsee [§1 "beta"…"gamma"]\n'
        "§3 c (chunk)\n[§1 with changes:]\n@@\n-alpha beta gamma\n+alpha beta delta\n"
    )
    assert read_references(context) == [
        Reference(47, 66, 1, "beta gamma"),
        Reference(80, 137, 1, "alpha beta delta"),
    ]
    assert context[47:66] == '[§1 "beta"…"gamma"]'
    assert context[80:] == context[80:137] + "\n"  # a diff stands for its whole text
