# cython: language_level=3
# distutils: language = c++
"""The compiled hot path: the window's text index and the planner over interned unit ids.

A twin of textindex.py and repeats.py (the reference, which it matches byte for byte): each unit
is interned to an integer id when its text is indexed, so runs, places and shared characters are
compared as integers in C++ containers. Quotes, overlaps and diffs read the strings through the
same functions as the reference. Loaded only through stream_ctx.core.text.engine.
"""

from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector
from libcpp.map cimport map as ordered_map
from libcpp.pair cimport pair
from libcpp cimport bool as cbool
from libcpp.algorithm cimport sort
from cython.operator cimport dereference as deref

from bisect import bisect_right
from itertools import accumulate

from stream_ctx.core.text.plan import DIFF_LEAD, Ref, TextPlan
from stream_ctx.core.text.repeats import (
    DIFF_PREFERENCE,
    MAX_CANDIDATES,
    MIN_DIFF_SHARE,
    MIN_PASSAGE_CHARS,
    MIN_SAVED_TOKENS,
    SURELY_WORTH,
    diff_plan,
    is_word_end,
    is_word_start,
    joined_literals,
    narrowed,
)
from stream_ctx.core.text.quotes import (
    HEAD_STOP,
    MAX_QUOTED_WORDS,
    MIN_QUOTE_CHARS,
    QUOTES,
    TAIL_STOP,
)
from functools import partial

from stream_ctx.core.text.rerun import RERUNS, rerun
from stream_ctx.core.memo import Memo
from stream_ctx.core.text.textindex import UNITS, lead_of

__all__ = (
    "SOURCE_DIGEST",
    "IndexedText",
    "LineMatcher",
    "Planner",
    "TextIndex",
    "choose_quotes",
    "rough_tokens",
    "split_units",
)

cdef extern from "Python.h":
    bint Py_UNICODE_ISSPACE(Py_UCS4 ch)
    bint Py_UNICODE_ISALNUM(Py_UCS4 ch)
    bint Py_UNICODE_ISDECIMAL(Py_UCS4 ch)

cdef extern from *:
    const char* STREAM_CTX_SOURCE_DIGEST

SOURCE_DIGEST = STREAM_CTX_SOURCE_DIGEST.decode()
"""The blake2b digest (16 bytes) of the compiled.pyx this module was built from."""

cdef Py_ssize_t _SURELY_WORTH = SURELY_WORTH
cdef Py_ssize_t _MIN_SAVED_TOKENS = MIN_SAVED_TOKENS
cdef Py_ssize_t _MIN_QUOTE_CHARS = MIN_QUOTE_CHARS
cdef Py_ssize_t _MAX_QUOTED_WORDS = MAX_QUOTED_WORDS


# Character classes of quotes.py's rough token pattern, as its regular expressions read them.
cdef inline bint _is_word(Py_UCS4 c):
    return Py_UNICODE_ISALNUM(c) or c == u"_"


cdef inline bint _is_letter(Py_UCS4 c):
    """[^\\W\\d_]: a word character that is no decimal digit and no underscore."""
    return Py_UNICODE_ISALNUM(c) and not Py_UNICODE_ISDECIMAL(c)


cpdef Py_ssize_t rough_tokens(str text):
    """About how many tokens `text` costs: quotes.rough_tokens, the matches of
    ` ?[^\\W\\d_]+| ?\\d{1,3}| ?[^\\w\\s]+| ?_+|\\s+` counted in one pass."""
    cdef Py_ssize_t size = len(text), at = 0, count = 0, start, run
    cdef Py_UCS4 c
    while at < size:
        start = at
        if text[at] == u" " and at + 1 < size and not Py_UNICODE_ISSPACE(text[at + 1]):
            at += 1  # a space joins the run after it (every non-blank char starts one)
        c = text[at]
        if _is_letter(c):
            while at < size and _is_letter(text[at]):
                at += 1
        elif Py_UNICODE_ISDECIMAL(c):
            run = 0
            while at < size and run < 3 and Py_UNICODE_ISDECIMAL(text[at]):
                at += 1
                run += 1
        elif c == u"_":
            while at < size and text[at] == u"_":
                at += 1
        elif not Py_UNICODE_ISSPACE(c):
            while at < size and not _is_word(text[at]) and not Py_UNICODE_ISSPACE(text[at]):
                at += 1
        else:
            while at < size and Py_UNICODE_ISSPACE(text[at]):
                at += 1
        count += 1
    return count


cdef bint _is_worth(long k, str passage, str head, str tail):
    """Whether a reference saves enough tokens over writing `passage` out (repeats.is_worth)."""
    written = f'[§{k + 1} "{head}"…"{tail}"]' if head else f"[§{k + 1}]"
    if len(passage) >= _SURELY_WORTH * len(written):
        return True
    return rough_tokens(passage) - rough_tokens(written) >= _MIN_SAVED_TOKENS


cdef Py_ssize_t _pieces_cost(list pieces):
    """repeats.pieces_cost: literal runs and references, roughly counted."""
    cdef Py_ssize_t cost = 0
    for piece in pieces:
        if isinstance(piece, str):
            cost += rough_tokens(piece)
        else:
            cost += rough_tokens(f'[§{piece.source + 1} "{piece.head}"…"{piece.tail}"]')
    return cost


cdef bint _is_spottable(str quote):
    """A quote a person can spot: six characters, three letters or digits in a row."""
    cdef Py_ssize_t run = 0
    if len(quote) < _MIN_QUOTE_CHARS:
        return False
    for c in quote:
        run = run + 1 if Py_UNICODE_ISALNUM(c) else 0
        if run == 3:
            return True
    return False


cdef list _word_bounds(str line, bint is_end):
    """The ends (or starts) of `line`'s blank-separated words, in order."""
    cdef Py_ssize_t at, size = len(line)
    cdef bint is_blank = True
    bounds = []
    for at in range(size):
        if Py_UNICODE_ISSPACE(line[at]):
            if not is_blank and is_end:
                bounds.append(at)
            is_blank = True
        else:
            if is_blank and not is_end:
                bounds.append(at)
            is_blank = False
    if not is_blank and is_end:
        bounds.append(size)
    return bounds


def choose_quotes(str source, str passage):
    """quotes.choose_quotes: the fewest first and last words of `passage` whose search in
    `source` finds it, and where; None when none within its first and last line do."""
    cdef Py_ssize_t start, end
    if not passage or Py_UNICODE_ISSPACE(passage[0]):
        return None
    if Py_UNICODE_ISSPACE(passage[len(passage) - 1]):
        return None
    first_line_end = passage.find("\n")
    first_line = passage if first_line_end < 0 else passage[:first_line_end]
    last_line = passage[passage.rfind("\n") + 1 :]
    for word_end in _word_bounds(first_line, True)[:_MAX_QUOTED_WORDS]:
        head = first_line[:word_end]
        if HEAD_STOP in f'"{head}"…' or not _is_spottable(head):
            continue
        start = source.find(head)
        if not source.startswith(passage, start):
            continue
        end = start + len(passage)
        around = source[max(start - 1, 0) : start] + source[end : end + 1]
        for char in around:
            if _is_word(char):
                return None
        return _tail_for(source, passage, start, head, last_line)
    return None


cdef object _tail_for(str source, str passage, Py_ssize_t start, str head, str last_line):
    """The shortest tail that ends the search at the passage's end, the head found at `start`."""
    cdef Py_ssize_t end = start + len(passage), found
    starts = _word_bounds(last_line, False)
    for word_start in reversed(starts[max(len(starts) - _MAX_QUOTED_WORDS, 0):]):
        tail = last_line[word_start:]
        if TAIL_STOP in tail:
            return None
        if not _is_spottable(tail):
            continue
        if len(head) + len(tail) > len(passage):
            return None
        found = source.find(tail, start + len(head))
        if found + len(tail) == end:
            return head, tail, start
    return None


_QUOTES = Memo(QUOTES.name, choose_quotes, QUOTES.limit)
"""choose_quotes memoized, in the reference's table: both choose the same quotes."""

cdef long _MAX_CANDIDATES = MAX_CANDIDATES

ctypedef pair[long, int] Place  # (serial or context place, unit index)


def split_units(str text):
    """A text's units, where they start, and which may start a run (textindex.split_units): a
    unit ends after a newline, or after a sentence's last mark, any closing quotes or brackets
    and the blanks after them, where more text follows on the same line."""
    cdef Py_ssize_t size = len(text), at = 0, end, start = 0
    cdef Py_UCS4 char
    units, starts, marks = [], [0], []
    while at < size:
        char = text[at]
        end = -1
        if char == u"\n":
            end = at + 1
        elif at > 0 and text[at - 1] in u".!?":
            end = at
            while end < size and text[end] in u"\"')]":
                end += 1
            if end < size and (text[end] == u" " or text[end] == u"\t"):
                while end < size and (text[end] == u" " or text[end] == u"\t"):
                    end += 1
                if end == size or Py_UNICODE_ISSPACE(text[end]):
                    end = -1
            else:
                end = -1
        if end < 0:
            at += 1
            continue
        _add_unit(text, start, end, units, starts, marks)
        start = at = end
    if start < size or not units:
        _add_unit(text, start, size, units, starts, marks)
    return units, starts, marks


cdef void _add_unit(
    str text, Py_ssize_t start, Py_ssize_t end, list units, list starts, list marks
):
    """Append text[start:end] as a unit: it may start a run when it holds 8 characters and two
    words at the least."""
    cdef Py_ssize_t at, words = 0
    cdef bint is_blank = True
    units.append(text[start:end])
    starts.append(end)
    if end - start >= 8:
        for at in range(start, end):
            if Py_UNICODE_ISSPACE(text[at]):
                is_blank = True
            elif is_blank:
                is_blank = False
                words += 1
                if words == 2:
                    break
    marks.append(words >= 2)


_UNITS = Memo(UNITS.name, split_units, UNITS.limit)
"""split_units memoized, in the reference's table: both give the same units."""


cdef class LineMatcher:
    """difflib.SequenceMatcher(None, before, after, autojunk=False) over interned line ids: the
    same matching blocks and grouped opcodes (rerun.LineMatcher)."""

    cdef vector[long] a
    cdef vector[long] b
    cdef unordered_map[long, vector[Py_ssize_t]] b2j
    cdef list _blocks
    cdef list _opcodes

    def __init__(self, list before, list after):
        ids = {}
        for line in before:
            self.a.push_back(ids.setdefault(line, len(ids)))
        for line in after:
            self.b.push_back(ids.setdefault(line, len(ids)))
        for j in range(<Py_ssize_t>self.b.size()):
            self.b2j[self.b[j]].push_back(j)
        self._blocks = None
        self._opcodes = None

    cdef tuple _longest(self, Py_ssize_t alo, Py_ssize_t ahi, Py_ssize_t blo, Py_ssize_t bhi):
        """difflib's find_longest_match with no junk: the longest equal run, earliest in a,
        then earliest in b."""
        cdef Py_ssize_t besti = alo, bestj = blo, bestsize = 0, i, j, k
        cdef unordered_map[Py_ssize_t, Py_ssize_t] j2len, fresh
        cdef vector[Py_ssize_t]* places
        for i in range(alo, ahi):
            fresh.clear()
            if self.b2j.count(self.a[i]):
                places = &self.b2j[self.a[i]]
                for j in places[0]:
                    if j < blo:
                        continue
                    if j >= bhi:
                        break
                    it = j2len.find(j - 1)
                    k = (deref(it).second if it != j2len.end() else 0) + 1
                    fresh[j] = k
                    if k > bestsize:
                        besti, bestj, bestsize = i - k + 1, j - k + 1, k
            j2len.swap(fresh)
        while besti > alo and bestj > blo and self.a[besti - 1] == self.b[bestj - 1]:
            besti, bestj, bestsize = besti - 1, bestj - 1, bestsize + 1
        while (
            besti + bestsize < ahi and bestj + bestsize < bhi
            and self.a[besti + bestsize] == self.b[bestj + bestsize]
        ):
            bestsize += 1
        return besti, bestj, bestsize

    def get_matching_blocks(self):
        """The equal runs (i, j, size), adjacent ones joined, then (len(a), len(b), 0)."""
        cdef Py_ssize_t alo, ahi, blo, bhi, i, j, k, i1 = 0, j1 = 0, k1 = 0
        if self._blocks is not None:
            return self._blocks
        queue = [(0, <Py_ssize_t>self.a.size(), 0, <Py_ssize_t>self.b.size())]
        found = []
        while queue:
            alo, ahi, blo, bhi = queue.pop()
            i, j, k = self._longest(alo, ahi, blo, bhi)
            if k:
                found.append((i, j, k))
                if alo < i and blo < j:
                    queue.append((alo, i, blo, j))
                if i + k < ahi and j + k < bhi:
                    queue.append((i + k, ahi, j + k, bhi))
        found.sort()
        blocks = []
        for i, j, k in found:
            if i1 + k1 == i and j1 + k1 == j:
                k1 += k
            else:
                if k1:
                    blocks.append((i1, j1, k1))
                i1, j1, k1 = i, j, k
        if k1:
            blocks.append((i1, j1, k1))
        blocks.append((<Py_ssize_t>self.a.size(), <Py_ssize_t>self.b.size(), 0))
        self._blocks = blocks
        return blocks

    cdef list _opcodes_once(self):
        """difflib's get_opcodes, kept: grouping trims its first and last run in place, and a
        later grouping sees them trimmed, as difflib's does."""
        cdef Py_ssize_t i = 0, j = 0, ai, bj, size
        if self._opcodes is not None:
            return self._opcodes
        codes = []
        for ai, bj, size in self.get_matching_blocks():
            tag = ""
            if i < ai and j < bj:
                tag = "replace"
            elif i < ai:
                tag = "delete"
            elif j < bj:
                tag = "insert"
            if tag:
                codes.append((tag, i, ai, j, bj))
            i, j = ai + size, bj + size
            if size:
                codes.append(("equal", ai, i, bj, j))
        self._opcodes = codes
        return codes

    def get_grouped_opcodes(self, Py_ssize_t n):
        """The changes with up to `n` equal lines around each, in groups (difflib's)."""
        cdef Py_ssize_t i1, i2, j1, j2
        codes = self._opcodes_once()
        if not codes:
            codes = [("equal", 0, 1, 0, 1)]
        if codes[0][0] == "equal":
            tag, i1, i2, j1, j2 = codes[0]
            codes[0] = tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2
        if codes[len(codes) - 1][0] == "equal":
            tag, i1, i2, j1, j2 = codes[len(codes) - 1]
            codes[len(codes) - 1] = tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)
        groups = []
        group = []
        for tag, i1, i2, j1, j2 in codes:
            if tag == "equal" and i2 - i1 > n + n:
                group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
                groups.append(group)
                group = []
                i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
            group.append((tag, i1, i2, j1, j2))
        if group and not (len(group) == 1 and group[0][0] == "equal"):
            groups.append(group)
        return groups


_RERUNS = Memo(RERUNS.name, partial(rerun, matcher=LineMatcher), RERUNS.limit)
"""rerun over the compiled line matcher, memoized in the reference's table: the same hunks."""


cdef class IndexedText:
    """One held text (the reference's IndexedText), its units also as interned ids."""

    cdef public long serial
    cdef public str text
    cdef public list units
    cdef public list starts
    cdef public list marks
    cdef public object lead
    cdef public set shared
    cdef public set continued_in
    cdef public set leads
    cdef vector[long] ids
    cdef vector[long] start_at
    cdef vector[cbool] marked
    # Each unit that may start a run (by id), with how often it occurs, in first-seen order.
    cdef vector[long] occurring
    cdef unordered_map[long, long] occurrences


cdef class TextIndex:
    """Held texts by serial, where each unit that may start a run stands, and equal texts."""

    cdef public dict texts
    cdef public dict equal
    cdef dict _ids
    cdef unordered_map[long, long] _holders  # id -> how many held texts hold the unit
    cdef unordered_map[long, long] _length  # id -> the unit's length in characters
    cdef unordered_map[long, vector[Place]] _places
    cdef long _next_id
    cdef long _next_serial
    cdef object _split

    def __init__(self, memos):
        self.texts = {}
        self.equal = {}
        self._ids = {}
        self._next_id = 0
        self._next_serial = 0
        self._split = memos[_UNITS]

    def add(self, texts):
        """Index `texts`, each under a new serial."""
        added = [self._indexed(text) for text in texts]
        self._link_leads(added)
        return added

    cdef IndexedText _indexed(self, str text):
        cdef IndexedText new = IndexedText()
        cdef long j, uid, n
        cdef object found
        units, starts, marks = self._split(text)
        new.serial = self._next_serial
        self._next_serial += 1
        new.text, new.units, new.starts, new.marks = text, units, starts, marks
        new.lead = lead_of(units)
        new.shared, new.continued_in, new.leads = set(), set(), set()
        n = len(units)
        new.ids.reserve(n)
        for j in range(n):
            unit = <str>units[j]
            found = self._ids.get(unit)
            if found is None:
                uid = self._next_id
                self._next_id += 1
                self._ids[unit] = uid
                self._length[uid] = len(unit)
            else:
                uid = found
            new.ids.push_back(uid)
            new.start_at.push_back(starts[j])
            new.marked.push_back(marks[j] is True)
            if marks[j]:
                if new.occurrences.count(uid) == 0:
                    new.occurring.push_back(uid)
                new.occurrences[uid] += 1
        new.start_at.push_back(len(text))
        seen = set()
        for j in range(n):
            uid = new.ids[j]
            if uid not in seen:
                seen.add(uid)
                self._holders[uid] += 1
        self._share(new)
        for j in range(n):
            if new.marked[j]:
                self._places[new.ids[j]].push_back(Place(new.serial, j))
        self.equal.setdefault(text, []).append(new.serial)
        self.texts[new.serial] = new
        return new

    cdef void _share(self, IndexedText new):
        """Record, both ways, which units the new text shares with held ones."""
        cdef long uid
        cdef Place place
        texts = self.texts
        for uid in new.occurring:
            if self._places.count(uid) and not self._places[uid].empty():
                new.shared.add(uid)
                for place in self._places[uid]:
                    (<IndexedText>texts[place.first]).shared.add(uid)

    def _link_leads(self, list added):
        """Record which texts hold the first words of which (as the reference does)."""
        every = list(self.texts.values())
        joined = "\n".join([held.text for held in every])
        starts = list(accumulate((len(held.text) + 1 for held in every), initial=0))
        for new in added:
            at = -1 if new.lead is None else joined.find(new.lead)
            while at >= 0:
                k = bisect_right(starts, at) - 1
                if every[k] is not new:
                    new.continued_in.add(every[k].serial)
                    every[k].leads.add(new.serial)
                at = joined.find(new.lead, starts[k + 1])
        fresh = {new.serial for new in added}
        joined_added = "\n".join([new.text for new in added])
        for other in every:
            if other.lead is None or other.serial in fresh or other.lead not in joined_added:
                continue
            for new in added:
                if other.lead in new.text:
                    other.continued_in.add(new.serial)
                    new.leads.add(other.serial)

    def remove(self, long serial):
        """Forget a text and every mention of it."""
        cdef IndexedText gone = self.texts.pop(serial)
        cdef long j, uid, holder
        cdef size_t p
        cdef vector[Place]* held
        for j in range(<long>gone.ids.size()):
            if gone.marked[j]:
                held = &self._places[gone.ids[j]]
                for p in range(held.size()):
                    if held[0][p].first == serial and held[0][p].second == j:
                        held.erase(held.begin() + p)
                        break
                if held.empty():
                    self._places.erase(gone.ids[j])
        for uid in gone.shared:
            if not self._places.count(uid):
                continue
            holder = -1
            for place in self._places[uid]:
                if holder == -1:
                    holder = place.first
                elif place.first != holder:
                    holder = -2
                    break
            if holder >= 0:
                (<IndexedText>self.texts[holder]).shared.discard(uid)
        equal = self.equal[gone.text]
        equal.remove(serial)
        if not equal:
            del self.equal[gone.text]
        for other in gone.continued_in:
            (<IndexedText>self.texts[other]).leads.discard(serial)
        for other in gone.leads:
            (<IndexedText>self.texts[other]).continued_in.discard(serial)
        seen = set()
        for j in range(<long>gone.ids.size()):
            uid = gone.ids[j]
            if uid in seen:
                continue
            seen.add(uid)
            self._holders[uid] -= 1
            if self._holders[uid] == 0:
                self._holders.erase(uid)
                self._length.erase(uid)
                del self._ids[gone.units[j]]


cdef class Planner:
    """Plans the texts of one context, given as serials of `index` in context order."""

    cdef public dict at
    cdef public list texts
    cdef public list widths
    cdef TextIndex index
    cdef unordered_map[long, long] _at
    cdef unordered_map[long, vector[Place]] _ordered
    cdef object _quotes
    cdef object _rerun
    cdef set _read

    def __init__(self, TextIndex index, order, memos):
        cdef long n
        self.index = index
        self.at = {serial: n for n, serial in enumerate(order)}
        for serial, n in self.at.items():
            self._at[serial] = n
        self.texts = [index.texts[serial] for serial in order]
        self._quotes = memos[_QUOTES]
        self._rerun = memos[_RERUNS]
        self.widths = [(len(str(k)), len(str(k + 1))) for k in range(len(order))]
        self._read = set()

    cdef inline long _place(self, long serial, long n):
        """The place of text `serial` in this context, or `n` when it has none."""
        it = self._at.find(serial)
        return n if it == self._at.end() else deref(it).second

    def plan(self, long n):
        """How text `n` is written after the texts before it, and the places it read."""
        cdef IndexedText mine = self.texts[n]
        cdef long k
        text = mine.text
        read = set()
        for s in self.index.equal[text]:
            k = self._place(s, n)
            if k < n:
                read.add(k)
        self._read = read
        same = min(read, default=None)
        if same is not None and _is_worth(same, text, "", ""):
            return TextPlan([Ref(same, 0, len(text))]), read
        pieces = self._pieces(n, mine)
        base = self._diff_base(n, mine) if same is None else None
        if base is not None:
            diff = diff_plan(self._rerun, base, (<IndexedText>self.texts[base]).text, text)
            cost = rough_tokens(DIFF_LEAD.format(base) + diff.hunks) if diff is not None else 0
            if diff is not None and cost <= DIFF_PREFERENCE * _pieces_cost(pieces):
                return diff, read
        return TextPlan(pieces), read

    def may_read(self, long n, places, units):
        """Whether the plan of text `n` may read a text at one of `places` before it."""
        cdef IndexedText mine = self.texts[n]
        cdef long k
        cdef Place place
        cdef vector[Place] latest
        cdef ordered_map[long, long] shared
        for serial in (*self.index.equal[mine.text], *mine.continued_in):
            k = self._place(serial, n)
            if k < n and k in places:
                return True
        common = mine.shared & units
        for uid in common:
            latest = self._latest(uid, n)
            for place in latest:
                if place.first in places:
                    return True
        self._shared_chars(n, mine, common, &shared)
        half = MIN_DIFF_SHARE * len(mine.text)
        for entry in shared:
            if entry.first in places and entry.second >= half:
                return True
        return False

    cdef vector[Place] _latest(self, long uid, long n):
        """The latest places of unit `uid` in the texts before text `n`, in context order."""
        cdef vector[Place]* ordered = self._ordered_places(uid)
        cdef size_t low = 0, high = ordered.size(), middle, cut, first
        while low < high:  # the first place at or after text n
            middle = (low + high) // 2
            if ordered[0][middle].first < n:
                low = middle + 1
            else:
                high = middle
        cut = low
        first = cut - _MAX_CANDIDATES if cut > <size_t>_MAX_CANDIDATES else 0
        return vector[Place](ordered.begin() + first, ordered.begin() + cut)

    cdef vector[Place]* _ordered_places(self, long uid):
        """The places of unit `uid` among these texts, in context order."""
        cdef vector[Place]* ordered
        cdef Place place
        if self._ordered.count(uid):
            return &self._ordered[uid]
        ordered = &self._ordered[uid]
        if not self.index._places.count(uid):
            return ordered
        for place in self.index._places[uid]:
            it = self._at.find(place.first)
            if it != self._at.end():
                ordered.push_back(Place(deref(it).second, place.second))
        sort(ordered.begin(), ordered.end())
        return ordered

    cdef void _shared_chars(
        self, long n, IndexedText mine, object units, ordered_map[long, long]* shared
    ):
        """For each text before text `n` that holds some of `units`, the characters of text
        `n` in those units (each occurrence counts its length)."""
        cdef long uid, chars, last, k
        cdef Place place
        for unit in units:
            uid = unit
            if not self.index._places.count(uid):
                continue
            chars = mine.occurrences[uid] * self.index._length[uid]
            last = -1
            for place in self.index._places[uid]:
                if place.first != last:
                    last = place.first
                    k = self._place(place.first, n)
                    if k < n:
                        shared[0][k] += chars

    cdef object _diff_base(self, long n, IndexedText mine):
        """The earlier text sharing the most of this one's units (the first on a tie), if it
        shares enough."""
        cdef ordered_map[long, long] shared
        cdef long best = -1, most = -1
        self._shared_chars(n, mine, mine.shared, &shared)
        half = MIN_DIFF_SHARE * len(mine.text)
        for entry in shared:
            if entry.second >= half:
                self._read.add(entry.first)
            if entry.second > most:
                best, most = entry.first, entry.second
        if best < 0 or most < half:
            return None
        return best

    cdef list _pieces(self, long n, IndexedText mine):
        """The text as literal runs and references, left to right."""
        cdef unordered_map[long, vector[long]] own
        cdef long i = 0, j, written = 0, count = mine.ids.size(), uid
        cdef object found
        text, shared = mine.text, mine.shared
        pieces = []
        while i < count:
            found = self._continuation(n, mine) if i == 0 else None
            uid = mine.ids[i]
            if found is None and mine.marked[i] and (uid in shared or own.count(uid)):
                candidates = self._candidates(n, mine, i, &own)
                if not candidates.empty():
                    found = self._reference(n, mine, i, written, &candidates)
            if found is None:
                if mine.marked[i]:
                    own[uid].push_back(i)
                i += 1
                continue
            ref, a, b, end = found
            if a > written:
                pieces.append(text[written:a])
            pieces.append(ref)
            written = b
            for j in range(i, end):
                if mine.marked[j]:
                    own[mine.ids[j]].push_back(j)
            i = end
        if written < len(text):
            pieces.append(text[written:])
        return joined_literals(pieces)

    cdef vector[Place] _candidates(
        self, long n, IndexedText mine, long i, unordered_map[long, vector[long]]* own
    ):
        """The latest places of unit `i` before it (this text's own earlier ones last)."""
        cdef long uid = mine.ids[i]
        cdef vector[Place] earlier
        cdef Place place
        cdef long j
        if uid in mine.shared:
            earlier = self._latest(uid, n)
        for place in earlier:
            self._read.add(place.first)
        if not own.count(uid):
            return earlier
        for j in own[0][uid]:
            earlier.push_back(Place(n, j))
        if earlier.size() > <size_t>_MAX_CANDIDATES:
            earlier.erase(earlier.begin(), earlier.begin() + (earlier.size() - _MAX_CANDIDATES))
        return earlier

    cdef object _continuation(self, long n, IndexedText mine):
        """The reference for a text that starts where an earlier one goes on (an overlapping
        chunk), as the reference planner finds it."""
        cdef long k
        words = mine.lead
        if words is None or not mine.continued_in:
            return None
        earlier = []
        for s in mine.continued_in:
            k = self._place(s, n)
            if k < n:
                earlier.append(k)
        earlier.sort(reverse=True)
        self._read.update(earlier)
        units, starts = mine.units, mine.starts
        first = units[0]
        best = None
        for k in earlier:
            source = (<IndexedText>self.texts[k]).text
            found = source.find(words)
            if not is_word_start(source, found, first):
                continue
            pos, size = found + len(first), 1
            if source.startswith(first, found):
                while size < len(units) and source.startswith(units[size], pos):
                    pos, size = pos + len(units[size]), size + 1
            if best is None or size > best[1]:
                best = k, size
        if best is None:
            return None
        k, size = best
        for first_at, last_at in narrowed(starts, 0, starts[size]):
            if last_at - first_at < MIN_PASSAGE_CHARS:
                break
            quoted = self._quoted(n, k, mine.text, first_at, last_at)
            if quoted is not None:
                return (*quoted, size)
        return None

    cdef object _reference(
        self, long n, IndexedText mine, long i, long written, vector[Place]* candidates
    ):
        """The reference for the longest run of units from unit `i` that also stands earlier,
        with where its passage starts and ends in the text and the unit after it."""
        cdef long k = -1, j = 0, size = 0, end, a, b, chars, best_chars = 0, run, limit
        cdef Place place
        cdef IndexedText theirs
        for place in candidates[0]:
            theirs = mine if place.first == n else self.texts[place.first]
            limit = theirs.ids.size() if place.first != n else i
            run = 1
            while (
                i + run < <long>mine.ids.size()
                and place.second + run < limit
                and theirs.ids[place.second + run] == mine.ids[i + run]
            ):
                run += 1
            chars = mine.start_at[i + run] - mine.start_at[i]
            if chars > best_chars:
                k, j, size, best_chars = place.first, place.second, run, chars
        if k < 0:
            return None
        end = i + size
        a, b = mine.start_at[i], mine.start_at[end]
        if k != n:
            theirs = self.texts[k]
            while (
                i > 0 and j > 0 and mine.start_at[i - 1] >= written
                and mine.ids[i - 1] == theirs.ids[j - 1]
            ):
                i, j, size = i - 1, j - 1, size + 1
            a, b = self._widened(theirs, j, size, mine, i)
            a = max(a, written)
        holders = sorted({place.first for place in candidates[0] if place.first < k})
        for first, last in narrowed(mine.starts, a, b):
            if last - first < MIN_PASSAGE_CHARS:
                break
            quoted = self._quoted(n, k, mine.text, first, last, holders)
            if quoted is not None:
                return (*quoted, end)
        return None

    cdef tuple _widened(self, IndexedText theirs, long j, long size, IndexedText mine, long i):
        """The run's span, taking in its partial first and last units as the reference does."""
        cdef long a = mine.start_at[i], b = mine.start_at[i + size], at
        units, source = mine.units, theirs.text
        if i == 1:
            first = units[0]
            at = theirs.start_at[j] - len(first)
            if at >= 0 and source.startswith(first, at) and is_word_start(source, at, first):
                a = 0
        if i + size == <long>mine.ids.size() - 1:
            last = units[-1]
            at = theirs.start_at[j + size]
            if source.startswith(last, at) and is_word_end(source, at + len(last), last):
                b = mine.start_at[mine.ids.size()]
        return a, b

    cdef object _quoted(self, long n, long k, str text, long a, long b, list holders=None):
        """The reference for text[a:b] without its blanks at either end, if quotes find it and
        it is worth it; naming the first of `holders` that holds it whole."""
        span = text[a:b]
        a += len(span) - len(span.lstrip())
        b = a + len(text[a:b].rstrip())
        passage = text[a:b]
        if len(passage) < MIN_PASSAGE_CHARS:
            return None
        if holders is not None:
            for holder in holders:
                if passage in (<IndexedText>self.texts[holder]).text:
                    quoted = self._quoted(n, holder, text, a, b)
                    if quoted is not None:
                        return quoted
        source = (<IndexedText>self.texts[k]).text if k != n else text[:a]
        if k != n and passage == source:
            return (Ref(k, 0, len(passage)), a, b) if _is_worth(k, passage, "", "") else None
        quotes = self._quotes(source, passage)
        if quotes is None or not _is_worth(k, passage, quotes[0], quotes[1]):
            return None
        head, tail, start = quotes
        return Ref(k, start, len(passage), head, tail), a, b
