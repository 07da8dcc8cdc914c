"""Property tests for ``kumiho_memory.Kref``: round trips, rejections, and a fuzz of ``Kref.parse``.

Spec (issue 2, item 4): ``kref://project/space/item.kind`` with ``?r=N``, ``?t=TAG``, ``?t=TAG&time=T`` and
``?r=N&a=ARTIFACT``; malformed refs, ``..`` and control characters raise ``InvalidKrefError`` (a ValueError).
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kumiho_memory as km
from kumiho_memory import InvalidKrefError, Kref

UTC = dt.timezone.utc

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- strategies ------------------------------------------------------------------------------------------

SEGMENT = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}", fullmatch=True)
KIND = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,31}", fullmatch=True)
_CHUNK = st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)


@st.composite
def item_names(draw) -> str:
    """Item names: dot-separated chunks (``notes``, ``ui-theme-1a2b``, ``report.v2``), at most 128 chars.

    Names ending in a dot are left to ``test_item_name_ending_in_a_dot_round_trips`` (a known bug).
    """
    head = draw(st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,30}", fullmatch=True))
    tail = draw(st.lists(_CHUNK, max_size=3))
    return ".".join([head, *tail])[:128].rstrip(".")


def _dotted(first_chars: str, other_chars: str, max_length: int) -> st.SearchStrategy[str]:
    return (st.from_regex(rf"[{first_chars}][{other_chars}]{{0,{max_length - 1}}}", fullmatch=True)
            .filter(lambda text: ".." not in text))


TAG = _dotted("A-Za-z0-9_", "A-Za-z0-9_.:-", 64)
ARTIFACT = _dotted("A-Za-z0-9_", "A-Za-z0-9_.-", 128)
SPACE = st.lists(SEGMENT, min_size=1, max_size=3).map("/".join)
# Years before 1000 are left to test_time_before_year_1000_round_trips (a known bug).
TIME = st.datetimes(min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(9999, 12, 30),
                    timezones=st.just(UTC))


@st.composite
def item_krefs(draw, *, space: st.SearchStrategy[str] = SPACE) -> Kref:
    """A valid item kref with no selector, ``r=N``, ``t=TAG`` or ``t=TAG&time=T``, each with an optional
    artifact."""
    fields = {"project": draw(SEGMENT), "space": draw(space), "name": draw(item_names()), "kind": draw(KIND)}
    selector = draw(st.sampled_from(["none", "revision", "tag", "tag+time"]))
    if selector == "revision":
        fields["revision"] = draw(st.integers(min_value=1, max_value=10 ** 12))
    elif selector.startswith("tag"):
        fields["tag"] = draw(TAG)
        if selector == "tag+time":
            fields["time"] = draw(TIME)
    if draw(st.booleans()):
        fields["artifact"] = draw(ARTIFACT)
    return Kref(**fields)


def _insert(text: str, position: int, piece: str) -> str:
    position = min(position, len(text))
    return text[:position] + piece + text[position:]


# -- round trips -----------------------------------------------------------------------------------------

@PROPERTY
@given(item_krefs())
@example(Kref("CognitiveMemory", "notes", "dark-mode-000001", "memory", revision=1))
@example(Kref("p", "a/b/c", "report.v2", "doc", revision=7, artifact="report.pdf"))
@example(Kref("p", "s", "n", "k", tag="published", time=dt.datetime(2026, 1, 31, 12, tzinfo=UTC)))
@example(Kref("p", "s", "n", "k", tag="latest", time=dt.datetime(2026, 1, 31, 12, 0, 0, 1, tzinfo=UTC)))
def test_item_kref_round_trips(kref):
    text = str(kref)
    assert text.startswith("kref://")
    parsed = Kref.parse(text)
    assert parsed == kref
    assert str(parsed) == text
    assert parsed.item_kref() == Kref(kref.project, kref.space, kref.name, kref.kind)


@PROPERTY
@given(item_krefs(space=st.just("")))
def test_item_kref_in_the_project_root_round_trips(kref):
    assert Kref.parse(str(kref)) == kref
    assert str(Kref.parse(str(kref))) == str(kref)


@PROPERTY
@given(SEGMENT, st.lists(SEGMENT, max_size=3).map("/".join))
def test_project_and_space_krefs_round_trip(project, space):
    kref = Kref(project, space)
    parsed = Kref.parse(str(kref))
    assert parsed == kref and not parsed.is_item
    assert str(parsed) == str(kref)


def test_the_documented_forms_parse():
    base = "kref://CognitiveMemory/personal/u1/dark-mode.memory"
    item = Kref.parse(base)
    assert (item.project, item.space, item.name, item.kind) == ("CognitiveMemory", "personal/u1", "dark-mode",
                                                                "memory")
    assert item.is_bare_item and item.revision is None and item.tag is None
    assert Kref.parse(base + "?r=3").revision == 3
    assert Kref.parse(base + "?t=published").tag == "published"
    timed = Kref.parse(base + "?t=published&time=2026-01-31T12:00:00Z")
    assert (timed.tag, timed.time) == ("published", dt.datetime(2026, 1, 31, 12, tzinfo=UTC))
    artifact = Kref.parse(base + "?r=2&a=notes.md")
    assert (artifact.revision, artifact.artifact) == (2, "notes.md")
    assert Kref.parse(Kref.parse(base)) == item                  # a Kref passes through


@pytest.mark.parametrize("time_text", [
    "2026-01-31T12:00:00Z",
    "2026-01-31T12:00:00+00:00",
    "2026-01-31T21:00:00+09:00",
    "2026-01-31T07:00:00-05:00",
    "202601311200",
    "20260131120000",
])
def test_iso_time_forms_normalize_to_utc(time_text):
    kref = Kref.parse(f"kref://p/s/n.k?t=published&time={time_text}")
    assert kref.time == dt.datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert kref.time.utcoffset() == dt.timedelta(0)
    assert str(kref) == "kref://p/s/n.k?t=published&time=2026-01-31T12:00:00Z"


def test_time_keeps_microseconds():
    kref = Kref.parse("kref://p/s/n.k?t=x&time=2026-01-31T12:00:00.000250Z")
    assert kref.time == dt.datetime(2026, 1, 31, 12, 0, 0, 250, tzinfo=UTC)
    assert Kref.parse(str(kref)) == kref


# -- rejections ------------------------------------------------------------------------------------------

def test_invalid_kref_error_is_a_value_error_and_a_kumiho_memory_error():
    assert issubclass(InvalidKrefError, ValueError)
    assert issubclass(InvalidKrefError, km.KumihoMemoryError)
    with pytest.raises(ValueError):
        Kref.parse("nope")
    with pytest.raises(km.KumihoMemoryError):
        Kref.parse("nope")


@pytest.mark.parametrize("text", [
    "CognitiveMemory/notes/a.memory",
    "//CognitiveMemory/notes/a.memory",
    "kref:/CognitiveMemory/notes/a.memory",
    "kref:CognitiveMemory/notes/a.memory",
    "ref://CognitiveMemory/notes/a.memory",
    "http://CognitiveMemory/notes/a.memory",
    " kref://CognitiveMemory/notes/a.memory",
    "",
])
def test_missing_scheme_is_rejected(text):
    with pytest.raises(InvalidKrefError):
        Kref.parse(text)


@pytest.mark.parametrize("text", [
    "kref://",
    "kref:///notes/a.memory",
    "kref://p//a.memory",
    "kref://p/notes//a.memory",
    "kref://p/notes/",
    "kref://p/notes/a.memory/",
    "kref://p/notes//a.memory?r=1",
    "kref://p/?r=1",
])
def test_empty_segments_are_rejected(text):
    with pytest.raises(InvalidKrefError):
        Kref.parse(text)


@pytest.mark.parametrize("text", [
    "kref://p/../a.memory",
    "kref://p/notes/a..b.memory",
    "kref://p/notes/..memory",
    "kref://p/notes/a.memory?t=a..b",
    "kref://p/notes/a.memory?r=1&a=..",
    "kref://p/notes/a.memory?r=1&a=x/../../etc/passwd",
])
def test_double_dot_is_rejected(text):
    with pytest.raises(InvalidKrefError):
        Kref.parse(text)


@PROPERTY
@given(item_krefs(), st.integers(min_value=0, max_value=400))
def test_double_dot_anywhere_is_rejected(kref, position):
    with pytest.raises(InvalidKrefError):
        Kref.parse(_insert(str(kref), position, ".."))


@PROPERTY
@given(item_krefs(), st.integers(min_value=0, max_value=400),
       st.sampled_from([chr(code) for code in range(0x20)] + ["\x7f"]))
def test_control_character_anywhere_is_rejected(kref, position, control):
    with pytest.raises(InvalidKrefError):
        Kref.parse(_insert(str(kref), position, control))


BASE = "kref://p/notes/a.memory"


@pytest.mark.parametrize("query", [
    "x=1", "rev=1", "R=1", "tag=published", "r=1&x=2",               # unknown keys
    "r=1&r=2", "t=a&t=b", "r=1&a=x&a=y", "t=a&time=2026-01-01&time=2026-01-02",   # duplicate keys
    "r=0", "r=-1", "r=abc", "r=", "r=1.5", "r= 1", "r=+1", "r=1e3", "r=\u0663",     # bad revisions
    "r=1&t=published",                                                # r and t together
    "time=2026-01-31T12:00:00Z", "r=1&time=2026-01-31T12:00:00Z",     # time without t
    "t=x&time=garbage", "t=x&time=2026-13-01T00:00:00Z", "t=x&time=", "t=x&time=yesterday",
    "t=", "t=bad tag", "a=", "a=bad name",                            # empty / malformed values
    "&", "r", "r=1&", "=1", "r=1&&t=x",                               # malformed query syntax
])
def test_bad_queries_are_rejected(query):
    with pytest.raises(InvalidKrefError):
        Kref.parse(f"{BASE}?{query}")


@pytest.mark.parametrize("text", [
    "kref://p/notes?r=1",                    # a query on a space kref
    "kref://p?t=published",
    "kref://p/notes/a.",                     # name without kind
    "kref://p/notes/.memory",                # kind without name
    "kref://p/no tes/a.memory",              # a blank in a segment
    "kref://p/notes/a.mem/ory",
    "kref://p/notes/a.memory#frag",
    "kref://p/n.otes/a.memory",              # dots only in the item segment
    "kref://-p/notes/a.memory",              # segments start with a letter, digit or _
])
def test_malformed_paths_are_rejected(text):
    with pytest.raises(InvalidKrefError):
        Kref.parse(text)


@pytest.mark.parametrize("value", [None, 42, b"kref://p/s/a.k", ["kref://p/s/a.k"]])
def test_non_strings_are_rejected(value):
    with pytest.raises(InvalidKrefError):
        Kref.parse(value)


@pytest.mark.parametrize("fields", [
    {"project": "p", "space": "s", "name": "n", "kind": "k", "revision": 0},
    {"project": "p", "space": "s", "name": "n", "kind": "k", "revision": -1},
    {"project": "p", "space": "s", "name": "n", "kind": "k", "revision": True},
    {"project": "p", "space": "s", "name": "n", "kind": "k", "revision": 1, "tag": "published"},
    {"project": "p", "space": "s", "name": "n", "kind": ""},
    {"project": "p", "space": "s", "name": "", "kind": "k"},
    {"project": "p", "space": "s", "revision": 1},
    {"project": "", "space": "s"},
    {"project": "p", "space": "a//b"},
])
def test_constructor_rejects_what_parse_rejects(fields):
    with pytest.raises(InvalidKrefError):
        Kref(**fields)


# -- fuzz ------------------------------------------------------------------------------------------------

_KREF_ALPHABET = "kref:/?&=.-_ prt" + "aAzZ09" + "\x00\x1f\x7f" + "é日"


@PROPERTY
@given(st.one_of(
    st.text(),
    st.text(alphabet=_KREF_ALPHABET).map(lambda tail: "kref://" + tail),
    st.builds(lambda kref, tail: str(kref) + tail, item_krefs(),
              st.text(alphabet=_KREF_ALPHABET, max_size=8)),
))
def test_parse_returns_a_kref_or_raises_invalid_kref_error(text):
    try:
        result = Kref.parse(text)
    except InvalidKrefError:
        return
    assert isinstance(result, Kref)


# -- regressions: bugs found and fixed ---------------------------------------------------------------

def test_item_name_ending_in_a_dot_is_rejected():
    with pytest.raises(InvalidKrefError):
        Kref("p", "s", "a.", "k")


def test_time_without_a_tag_is_rejected_by_the_constructor_too():
    with pytest.raises(InvalidKrefError):
        Kref("p", "s", "n", "k", time=dt.datetime(2026, 1, 31, 12, tzinfo=UTC))


@pytest.mark.parametrize("moment", [dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(476, 9, 4, 12, tzinfo=UTC),
                                    dt.datetime(999, 12, 31, 23, 59, 59, tzinfo=UTC)])
def test_time_before_year_1000_round_trips(moment):
    kref = Kref("p", "s", "n", "k", tag="published", time=moment)
    assert Kref.parse(str(kref)) == kref
