"""The backend contract suite: every test runs on each backend in ``conftest.BACKENDS``.

The behaviour checked here is issue 2's spec (items 3, 4, 6 and 9): immutable revisions, kref resolution in
every form, movable tags with a time-travel history, typed edges, deprecation, forgetting, recall, the
export/import round trip, and the async facade.
"""

from __future__ import annotations

import asyncio
import io
import json
import re

import pytest

import kumiho_memory as km

PROJECT = "CognitiveMemory"

# The edge types issue 2 names; any other name matching ^[A-Z][A-Z0-9_]{0,49}$ is allowed as well.
SPEC_EDGE_TYPES = ["SUPERSEDES", "DERIVED_FROM", "DEPENDS_ON", "REFERENCED", "CONTAINS", "CREATED_FROM",
                   "SUPPORTS", "CONTRADICTS", "RELATED_TO", "ABOUT"]

GET_KEYS = {"kref", "item_kref", "revision", "title", "content", "metadata", "tags", "created_at",
            "deprecated"}
RECALL_KEYS = {"kref", "item_kref", "title", "content", "score", "metadata", "tags", "created_at"}
EDGE_KEYS = {"source_kref", "target_kref", "edge_type", "metadata", "created_at"}


# -- helpers ---------------------------------------------------------------------------------------------

def item_of(kref: str) -> str:
    """The bare item kref of a revision kref."""
    return str(km.Kref.parse(kref).item_kref())


def revision_of(kref: str) -> int:
    return km.Kref.parse(kref).revision


def at(item_kref: str, tag: str, instant: str) -> str:
    """``item?t=TAG&time=INSTANT``."""
    return f"{item_kref}?t={tag}&time={instant}"


def export_text(memory: km.Memory) -> str:
    buffer = io.StringIO()
    memory.export_jsonl(buffer)
    return buffer.getvalue()


def snapshot(memory: km.Memory) -> tuple[dict, str]:
    """Everything observable about a store: its counts and its full export."""
    return memory.stats(), export_text(memory)


def counts(memory: km.Memory) -> tuple[int, int, int]:
    stats = memory.stats()
    return stats["items"], stats["revisions"], stats["edges"]


def comparable_stats(memory: km.Memory) -> dict:
    """Stats without the fields that name the store rather than describe its content."""
    return {key: value for key, value in memory.stats().items() if key not in ("path", "backend")}


def recall_krefs(memory: km.Memory, query: str, **options) -> list[str]:
    return [hit["kref"] for hit in memory.recall(query, **options)]


@pytest.fixture
def fresh_memory(backend_name, tmp_path):
    """A factory for further, independent stores of the backend under test, on their own clock.

    The clock starts years after the ``clock`` fixture's, so anything an import carries over visibly comes
    from the export rather than from this store's clock.
    """
    opened: list[km.Memory] = []

    def factory(name: str = "fresh") -> km.Memory:
        clock = km.ManualClock("2030-06-01T00:00:00Z", tick=1.0)
        ids = km.SequentialIds(900_000)
        if backend_name == "sqlite-memory":
            memory = km.Memory(clock=clock, ids=ids)
        elif backend_name == "sqlite-file":
            memory = km.Memory(str(tmp_path / f"{name}.db"), clock=clock, ids=ids)
        elif backend_name == "kumiho":
            from conftest import open_kumiho_memory
            memory = open_kumiho_memory(clock, ids)      # its own stand-in, on this clock; stopped on close
        else:  # pragma: no cover - a new backend must teach this fixture how to open a second store
            pytest.fail(f"fresh_memory does not know how to open a second {backend_name!r} store")
        opened.append(memory)
        return memory

    yield factory
    for memory in opened:
        memory.close()


UNICODE_CONTENT = "raw capture 日本語 🦊 with \"quotes\"\nand a second line"


def build_rich_graph(memory: km.Memory, clock: km.ManualClock) -> dict[str, str]:
    """A store that exercises every record type: keys, tag moves and removals, a forgotten revision (a gap
    in the numbering), nested spaces, edges with metadata, an artifact, deprecations, unicode."""
    a1 = memory.remember("The user prefers dark mode", space="prefs", key="ui.theme",
                         metadata={"nested": {"list": [1, 2.5, None, "ü"]}, "flag": True})
    a2 = memory.remember("The user prefers light mode", space="prefs", key="ui.theme", tags=["published"])
    a3 = memory.remember("The user prefers solarized", space="prefs", key="ui.theme")
    memory.tag(a3, "published")
    memory.tag(a1, "staging")
    memory.untag(a1, "staging")
    b1 = memory.remember("Project kickoff on Monday", space="work/projects/alpha", kind="event",
                         metadata={"event_date": "2025-12-01"}, evidence_level="official", source="calendar")
    # b1 is official: only another official claim revises it (the official pin, belief revision issue)
    b2 = memory.remember("Kickoff moved to Tuesday", item=item_of(b1), evidence_level="official")
    memory.forget(b2)
    c1 = memory.remember(UNICODE_CONTENT, space="notes")
    memory.link(c1, a3, "ABOUT", {"weight": 0.75})
    memory.link(b1, c1, "MY_CUSTOM_EDGE")
    memory.add_artifact(a3, "notes.md", "/tmp/notes.md", {"bytes": 12})
    memory.deprecate(a1)
    d1 = memory.remember("an obsolete memory", space="old")
    memory.deprecate(item_of(d1))
    clock.advance(3600)
    return {"a1": a1, "a2": a2, "a3": a3, "b1": b1, "b2": b2, "c1": c1, "d1": d1}


# -- remember --------------------------------------------------------------------------------------------

def test_remember_returns_the_first_revision_kref(memory):
    kref = memory.remember("The user prefers dark mode")
    assert re.fullmatch(r"kref://CognitiveMemory/notes/[A-Za-z0-9_][A-Za-z0-9_.-]*\.memory\?r=1", kref), kref
    parsed = km.Kref.parse(kref)
    assert (parsed.project, parsed.space, parsed.kind, parsed.revision) == (PROJECT, "notes", "memory", 1)
    assert memory.get(kref)["content"] == "The user prefers dark mode"


def test_remember_honours_space_and_kind(memory):
    kref = memory.remember("Ship on Friday", space="work/team-a", kind="decision")
    parsed = km.Kref.parse(kref)
    assert (parsed.space, parsed.kind, parsed.revision) == ("work/team-a", "decision", 1)
    assert kref.startswith("kref://CognitiveMemory/work/team-a/")


def test_raw_remember_never_merges(memory):
    first = memory.remember("same words exactly")
    second = memory.remember("same words exactly")
    assert first != second
    assert item_of(first) != item_of(second)
    assert revision_of(first) == revision_of(second) == 1
    assert counts(memory) == (2, 2, 0)
    assert memory.edges(first) == [] and memory.edges(second) == []


def test_key_adds_a_revision_that_supersedes_the_previous_one(memory):
    first = memory.remember("The user prefers dark mode", space="prefs", key="ui.theme")
    second = memory.remember("The user prefers light mode", space="prefs", key="ui.theme")
    assert item_of(first) == item_of(second)
    assert (revision_of(first), revision_of(second)) == (1, 2)
    outgoing = memory.edges(second, direction="outgoing")
    assert [(e["source_kref"], e["target_kref"], e["edge_type"]) for e in outgoing] == [
        (second, first, "SUPERSEDES")]
    assert memory.edges(first, direction="outgoing") == []
    assert counts(memory) == (1, 2, 1)
    assert memory.get(item_of(first))["kref"] == second


def test_key_is_scoped_to_its_space(memory):
    first = memory.remember("tabs, not spaces", space="prefs", key="editor.indent")
    other = memory.remember("tabs, not spaces", space="team", key="editor.indent")
    assert item_of(first) != item_of(other)
    assert revision_of(other) == 1
    assert counts(memory) == (2, 2, 0)


def test_key_with_identical_content_adds_nothing(memory):
    first = memory.remember("The user prefers dark mode", space="prefs", key="ui.theme")
    before = snapshot(memory)
    again = memory.remember("The user prefers dark mode", space="prefs", key="ui.theme")
    assert again == first
    assert snapshot(memory) == before
    second = memory.remember("The user prefers light mode", space="prefs", key="ui.theme")
    before = snapshot(memory)
    assert memory.remember("The user prefers light mode", space="prefs", key="ui.theme") == second
    assert snapshot(memory) == before
    assert counts(memory) == (1, 2, 1)


def test_item_adds_a_revision_to_that_item(memory):
    first = memory.remember("first draft")
    item = item_of(first)
    second = memory.remember("second draft", item=item, title="Draft two")
    assert item_of(second) == item and revision_of(second) == 2
    assert memory.get(item)["title"] == "Draft two"
    assert [(e["source_kref"], e["target_kref"], e["edge_type"]) for e in memory.edges(second)] == [
        (second, first, "SUPERSEDES")]
    assert counts(memory) == (1, 2, 1)


def test_item_that_does_not_exist_is_not_found_and_writes_nothing(memory):
    memory.remember("something already here")
    before = snapshot(memory)
    with pytest.raises(km.NotFoundError) as caught:
        memory.remember("orphan", item="kref://CognitiveMemory/notes/nothing-here.memory")
    assert isinstance(caught.value, KeyError)
    assert snapshot(memory) == before


def test_revisions_are_immutable(memory):
    first = memory.remember("original words", metadata={"n": 1}, title="Original")
    before = memory.get(first)
    memory.remember("replacement words", item=item_of(first), metadata={"n": 2}, title="Replacement")
    after = memory.get(first)
    immutable = ("kref", "item_kref", "revision", "title", "content", "metadata", "created_at", "deprecated")
    for field in immutable:
        assert after[field] == before[field], field
    assert after["content"] == "original words" and after["metadata"] == {"n": 1}


# -- get -------------------------------------------------------------------------------------------------

def test_get_resolves_every_kref_form(memory, clock):
    clock.set("2026-01-10T00:00:00Z")
    first = memory.remember("version one of the plan")
    item = item_of(first)
    clock.set("2026-01-20T00:00:00Z")
    second = memory.remember("version two of the plan", item=item)
    clock.set("2026-01-25T00:00:00Z")
    memory.tag(first, "published")
    memory.add_artifact(first, "plan.md", "/files/plan.md", {"size": 3})

    assert memory.get(item)["kref"] == second                       # bare item -> latest
    assert memory.get(f"{item}?r=1")["kref"] == first
    assert memory.get(f"{item}?r=2")["content"] == "version two of the plan"
    assert memory.get(f"{item}?t=published")["kref"] == first
    assert memory.get(f"{item}?t=latest")["kref"] == second
    assert memory.get(at(item, "published", "2026-01-26T00:00:00Z"))["kref"] == first
    assert memory.get(at(item, "latest", "2026-01-15T00:00:00Z"))["kref"] == first
    assert memory.get(at(item, "latest", "2026-01-21T00:00:00Z"))["kref"] == second
    with_artifact = memory.get(f"{item}?r=1&a=plan.md")
    assert with_artifact["kref"] == first
    assert with_artifact["artifact"]["name"] == "plan.md"
    assert with_artifact["artifact"]["location"] == "/files/plan.md"
    assert with_artifact["artifact"]["metadata"] == {"size": 3}


@pytest.mark.parametrize("suffix", ["?r=3", "?t=published", "?r=1&a=missing.md"])
def test_get_of_something_absent_is_not_found(memory, suffix):
    first = memory.remember("only one revision")
    memory.remember("and a second", item=item_of(first))
    with pytest.raises(km.NotFoundError):
        memory.get(item_of(first) + suffix)


def test_get_of_an_unknown_item_is_not_found(memory):
    with pytest.raises(KeyError):
        memory.get("kref://CognitiveMemory/notes/unknown.memory")


def test_get_latest_at_a_time_before_the_first_revision_is_not_found(memory, clock):
    clock.set("2026-01-10T00:00:00Z")
    item = item_of(memory.remember("born on the tenth"))
    with pytest.raises(km.NotFoundError):
        memory.get(at(item, "latest", "2026-01-05T00:00:00Z"))


def test_get_returns_the_documented_shape(memory):
    kref = memory.remember("shape check", title="Shape", metadata={"k": "v"}, tags=["approved"])
    result = memory.get(kref)
    assert GET_KEYS <= set(result)
    assert result["kref"] == kref
    assert result["item_kref"] == item_of(kref)
    assert result["revision"] == 1
    assert (result["title"], result["content"], result["metadata"]) == ("Shape", "shape check", {"k": "v"})
    assert sorted(result["tags"]) == ["approved", "latest"]
    assert result["deprecated"] is False
    assert km.parse_instant(result["created_at"]) == km.parse_instant("2026-01-01T00:00:00Z")


def test_title_defaults_to_the_first_line(memory):
    kref = memory.remember("Headline here\nand the body below")
    assert memory.get(kref)["title"] == "Headline here"


def test_history_is_oldest_first(memory):
    first = memory.remember("one")
    item = item_of(first)
    memory.remember("two", item=item)
    memory.remember("three", item=item)
    history = memory.history(item)
    assert [entry["revision"] for entry in history] == [1, 2, 3]
    assert [entry["content"] for entry in history] == ["one", "two", "three"]
    assert all(GET_KEYS <= set(entry) for entry in history)
    assert [("latest" in entry["tags"]) for entry in history] == [False, False, True]


# -- tags ------------------------------------------------------------------------------------------------

def test_tags_are_unique_per_item_and_move(memory):
    first = memory.remember("draft")
    item = item_of(first)
    second = memory.remember("final", item=item)
    other = memory.remember("another item entirely")
    memory.tag(other, "published")

    tagged = memory.tag(first, "published")
    assert tagged["kref"] == first and "published" in tagged["tags"]
    assert "published" in memory.get(first)["tags"]

    memory.tag(second, "published")
    assert "published" not in memory.get(first)["tags"]
    assert "published" in memory.get(second)["tags"]
    assert memory.get(f"{item}?t=published")["kref"] == second
    assert "published" in memory.get(other)["tags"]        # unique per item, not per store


def test_remember_with_tags_moves_them_to_the_new_revision(memory):
    first = memory.remember("v1", key="doc", tags=["published"])
    second = memory.remember("v2", key="doc", tags=["published"])
    assert "published" not in memory.get(first)["tags"]
    assert "published" in memory.get(second)["tags"]


@pytest.mark.parametrize("write", ["tag", "remember"])
def test_latest_cannot_be_set(memory, write):
    kref = memory.remember("anything")
    before = snapshot(memory)
    with pytest.raises(km.InvalidArgumentError) as caught:
        if write == "tag":
            memory.tag(kref, "latest")
        else:
            memory.remember("more", tags=["latest"])
    assert isinstance(caught.value, ValueError)
    assert snapshot(memory) == before


def test_tag_resolves_as_it_stood_at_any_past_time(memory, clock):
    first = memory.remember("policy one")
    item = item_of(first)
    second = memory.remember("policy two", item=item)
    clock.set("2026-02-01T00:00:00Z")               # T1: published -> r1
    memory.tag(first, "published")
    clock.set("2026-03-01T00:00:00Z")               # T2: published moves to r2
    memory.tag(second, "published")
    clock.set("2026-04-01T00:00:00Z")               # T3: published removed
    assert memory.untag(second, "published") is True

    assert memory.get(at(item, "published", "2026-02-15T00:00:00Z"))["kref"] == first
    assert memory.get(at(item, "published", "2026-02-28T23:59:59Z"))["kref"] == first
    assert memory.get(at(item, "published", "2026-03-15T00:00:00Z"))["kref"] == second
    assert memory.get(at(item, "published", "2026-03-31T23:59:59Z"))["kref"] == second
    with pytest.raises(km.NotFoundError):
        memory.get(at(item, "published", "2026-05-01T00:00:00Z"))
    with pytest.raises(km.NotFoundError):
        memory.get(at(item, "published", "2026-01-15T00:00:00Z"))
    with pytest.raises(km.NotFoundError):
        memory.get(f"{item}?t=published")


def test_untag_returns_false_when_the_revision_does_not_carry_the_tag(memory):
    first = memory.remember("a")
    second = memory.remember("b", item=item_of(first))
    assert memory.untag(first, "published") is False
    memory.tag(second, "published")
    assert memory.untag(first, "published") is False
    assert "published" in memory.get(second)["tags"]
    assert memory.untag(second, "published") is True
    assert memory.untag(second, "published") is False
    assert "published" not in memory.get(second)["tags"]


# -- edges -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("edge_type", SPEC_EDGE_TYPES + ["MY_CUSTOM_EDGE_2", "Z", "A" * 50])
def test_link_accepts_listed_and_custom_edge_types(memory, edge_type):
    source = memory.remember("source memory")
    target = memory.remember("target memory")
    edge = memory.link(source, target, edge_type, {"why": "test"})
    assert EDGE_KEYS <= set(edge)
    assert (edge["source_kref"], edge["target_kref"], edge["edge_type"], edge["metadata"]) == (
        source, target, edge_type, {"why": "test"})
    assert memory.edges(source, direction="outgoing") == [edge]
    assert counts(memory) == (2, 2, 1)


@pytest.mark.parametrize("edge_type", ["lowercase", "A" * 51, "", "1ABC", "BAD-TYPE", "Mixed", "_LEAD", None])
def test_link_rejects_invalid_edge_types(memory, edge_type):
    source = memory.remember("source memory")
    target = memory.remember("target memory")
    before = snapshot(memory)
    with pytest.raises(km.InvalidArgumentError):
        memory.link(source, target, edge_type)
    assert snapshot(memory) == before


def test_link_rejects_a_self_edge(memory):
    kref = memory.remember("lonely")
    before = snapshot(memory)
    with pytest.raises(km.InvalidArgumentError):
        memory.link(kref, kref, "RELATED_TO")
    with pytest.raises(km.InvalidArgumentError):       # the bare item resolves to the same revision
        memory.link(item_of(kref), kref, "RELATED_TO")
    assert snapshot(memory) == before


def test_link_to_a_missing_revision_is_not_found(memory):
    kref = memory.remember("here")
    before = snapshot(memory)
    with pytest.raises(km.NotFoundError):
        memory.link(kref, item_of(kref) + "?r=2", "RELATED_TO")
    assert snapshot(memory) == before


def test_duplicate_link_is_idempotent(memory):
    source = memory.remember("source memory")
    target = memory.remember("target memory")
    edge = memory.link(source, target, "SUPPORTS")
    before = snapshot(memory)
    assert memory.link(source, target, "SUPPORTS") == edge
    assert snapshot(memory) == before
    assert len(memory.edges(source)) == 1
    memory.link(source, target, "REFERENCED")              # another type is another edge
    assert len(memory.edges(source)) == 2


def test_link_with_item_krefs_joins_the_latest_revisions(memory):
    source = memory.remember("s1")
    source2 = memory.remember("s2", item=item_of(source))
    target = memory.remember("t1")
    edge = memory.link(item_of(source), item_of(target), "DERIVED_FROM")
    assert (edge["source_kref"], edge["target_kref"]) == (source2, target)


def test_edges_direction_and_type_filter(memory):
    a = memory.remember("node a")
    b = memory.remember("node b")
    c = memory.remember("node c")
    memory.link(a, b, "DEPENDS_ON", {"weight": 0.5})
    memory.link(c, a, "SUPPORTS")

    def shape(edges):
        return sorted((e["source_kref"], e["target_kref"], e["edge_type"]) for e in edges)

    assert shape(memory.edges(a, direction="outgoing")) == [(a, b, "DEPENDS_ON")]
    assert shape(memory.edges(a, direction="incoming")) == [(c, a, "SUPPORTS")]
    assert shape(memory.edges(a, direction="both")) == sorted([(a, b, "DEPENDS_ON"), (c, a, "SUPPORTS")])
    assert shape(memory.edges(a)) == shape(memory.edges(a, direction="both"))
    assert shape(memory.edges(a, edge_type="SUPPORTS")) == [(c, a, "SUPPORTS")]
    assert shape(memory.edges(a, direction="outgoing", edge_type="SUPPORTS")) == []
    assert memory.edges(b, direction="incoming")[0]["metadata"] == {"weight": 0.5}
    assert memory.edges(b, direction="outgoing") == []
    with pytest.raises(km.InvalidArgumentError):
        memory.edges(a, direction="sideways")


def test_edges_of_a_bare_item_cover_all_its_revisions(memory):
    first = memory.remember("one")
    second = memory.remember("two", item=item_of(first))
    other = memory.remember("other")
    memory.link(other, first, "REFERENCED")
    edges = memory.edges(item_of(first))
    assert sorted((e["source_kref"], e["target_kref"], e["edge_type"]) for e in edges) == sorted(
        [(second, first, "SUPERSEDES"), (other, first, "REFERENCED")])


def test_edges_of_type_meet_each_edge_once_in_the_order_of_the_item_walk(memory, clock):
    """``edges_of_type`` (one query on the embedded engine) gives what the default walk over every item gives:
    each edge once, under the first of its items in the store's order, oldest first within an item; deprecated
    items included. ``contradictions`` lists its pairs in that order."""
    zeta = memory.remember("zeta note", space="zeta")
    alpha = memory.remember("alpha note", space="alpha")
    beta = memory.remember("beta note", space="beta")
    beta_again = memory.remember("beta note again", item=item_of(beta))
    memory.link(zeta, alpha, "CONTRADICTS")
    memory.link(zeta, beta, "CONTRADICTS")
    memory.link(beta_again, zeta, "CONTRADICTS")
    for source, target in ((beta, alpha), (alpha, beta_again)):
        clock.set("2026-03-01T00:00:00Z")                  # two edges at one instant: creation order decides
        memory.link(source, target, "CONTRADICTS")
    memory.link(alpha, zeta, "REFERENCED")
    memory.deprecate(item_of(zeta))

    walk = km.GraphBackend.edges_of_type(memory.backend, memory.project, "CONTRADICTS")
    found = memory.backend.edges_of_type(memory.project, "CONTRADICTS")

    assert found == walk
    pairs = [(str(edge.source_kref), str(edge.target_kref)) for edge in found]
    assert sorted(pairs) == sorted([(zeta, alpha), (zeta, beta), (beta_again, zeta), (beta, alpha),
                                    (alpha, beta_again)])
    assert pairs[0] == (zeta, alpha)                      # under alpha (the first item), oldest first
    assert set(pairs[1:3]) == {(beta, alpha), (alpha, beta_again)}
    assert [(pair["source_kref"], pair["target_kref"]) for pair in memory.contradictions()] == pairs
    assert memory.backend.edges_of_type(memory.project, "SUPPORTS") == []


def test_latest_revisions_are_what_get_gives_for_each_live_item(memory):
    revised = memory.remember("first words", space="notes")
    memory.remember("second words", item=item_of(revised))
    retired = memory.remember("an item deprecated", space="notes")
    memory.deprecate(item_of(retired))
    head_retired = memory.remember("a revision deprecated", space="other", tags=["blue"])
    memory.deprecate(head_retired)
    trimmed = memory.remember("keep this one", space="other", metadata={"nested": {"list": [1, 2]}})
    memory.forget(memory.remember("forget this newer one", item=item_of(trimmed)))

    found = {str(record.kref): record.to_dict() for record in memory.backend.latest_revisions(memory.project)}

    assert found == {revision["kref"]: revision for revision in (memory.get(item["item_kref"])
                                                                 for item in memory.items())}
    assert trimmed in found and found[head_retired]["deprecated"] is True
    assert all(item_of(kref) != item_of(retired) for kref in found)


# -- metadata --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("metadata", [
    {},
    {"nested": {"deeper": {"list": [1, [2, [3, {"x": None}]]]}}},
    {"int": 42, "neg": -7, "big": 2 ** 70, "float": 0.1, "exp": 1.5e300, "zero": 0, "negzero": -1.25},
    {"null": None, "true": True, "false": False, "empty_list": [], "empty_dict": {}, "empty_str": ""},
    {"unicode": "日本語 🦊 café", "ключ": "значение", "quotes": "she said \"hi\"\n\ttab\\slash"},
    {"mixed": [1, "two", 3.0, None, True, {"k": ["v"]}]},
])
def test_metadata_round_trips_any_json(memory, metadata):
    kref = memory.remember("metadata carrier", metadata=metadata)
    assert memory.get(kref)["metadata"] == metadata
    assert memory.history(item_of(kref))[0]["metadata"] == metadata
    assert memory.recall("metadata carrier")[0]["metadata"] == metadata


@pytest.mark.parametrize("metadata", [
    {"a_set": {1, 2}},
    {"nan": float("nan")},
    {"inf": float("inf")},
    {"nested": {"object": object()}},
    {1: "integer key"},
    ["not", "a", "mapping"],
    "a string",
])
def test_non_json_metadata_is_rejected_and_nothing_is_written(memory, metadata):
    memory.remember("existing")
    before = snapshot(memory)
    with pytest.raises(km.InvalidArgumentError):
        memory.remember("new", metadata=metadata)
    assert snapshot(memory) == before


def test_event_date_is_stored_apart_from_created_at(memory):
    kref = memory.remember("We met in Lisbon", metadata={"event_date": "2025-06-14T18:30:00Z"})
    result = memory.get(kref)
    assert result["metadata"]["event_date"] == "2025-06-14T18:30:00Z"
    assert km.parse_instant(result["created_at"]) == km.parse_instant("2026-01-01T00:00:00Z")


def test_event_date_that_is_not_an_instant_is_rejected(memory):
    before = snapshot(memory)
    with pytest.raises(km.InvalidArgumentError):
        memory.remember("sometime", metadata={"event_date": "the day after tomorrow"})
    assert snapshot(memory) == before


# -- deprecation -----------------------------------------------------------------------------------------

def test_deprecating_an_item_hides_it_from_recall_only(memory):
    hidden = memory.remember("zebra crossing near the office")
    shown = memory.remember("zebra stripes are unique")
    memory.deprecate(item_of(hidden))
    assert recall_krefs(memory, "zebra") == [shown]
    assert memory.get(hidden)["deprecated"] is True
    assert memory.get(item_of(hidden))["content"] == "zebra crossing near the office"
    assert memory.history(item_of(hidden))[0]["deprecated"] is True
    assert memory.get(shown)["deprecated"] is False
    memory.deprecate(item_of(hidden), False)
    assert sorted(recall_krefs(memory, "zebra")) == sorted([hidden, shown])
    assert memory.get(hidden)["deprecated"] is False


def test_deprecating_a_revision_hides_it_from_recall_only(memory):
    first = memory.remember("the wombat sleeps")
    second = memory.remember("the wombat and the quokka sleep", item=item_of(first))
    memory.deprecate(second)
    assert recall_krefs(memory, "quokka") == []
    assert memory.get(second)["deprecated"] is True
    assert memory.get(first)["deprecated"] is False
    assert memory.get(second)["content"] == "the wombat and the quokka sleep"
    memory.deprecate(second, deprecated=False)
    assert recall_krefs(memory, "quokka") == [second]
    assert memory.get(second)["deprecated"] is False


# -- forgetting ------------------------------------------------------------------------------------------

def test_forgetting_an_item_removes_everything_of_it(memory):
    a1 = memory.remember("the aardvark digs at night")
    item = item_of(a1)
    a2 = memory.remember("the aardvark digs at dawn", item=item, tags=["published"])
    memory.add_artifact(a2, "burrow.md", "/files/burrow.md")
    keeper = memory.remember("the badger keeps its burrow")
    memory.link(keeper, a2, "REFERENCED")
    memory.link(a1, keeper, "RELATED_TO")
    assert counts(memory) == (2, 3, 3)

    memory.forget(item)

    for kref in (item, a1, a2, f"{item}?t=published", f"{item}?r=2&a=burrow.md"):
        with pytest.raises(km.NotFoundError):
            memory.get(kref)
    with pytest.raises(km.NotFoundError):
        memory.history(item)
    with pytest.raises(km.NotFoundError):
        memory.edges(item)
    with pytest.raises(km.NotFoundError):
        memory.remember("revive", item=item)
    assert memory.edges(keeper) == []
    assert recall_krefs(memory, "aardvark") == []
    assert recall_krefs(memory, "badger") == [keeper]
    assert counts(memory) == (1, 1, 0)
    exported = export_text(memory)
    assert "aardvark" not in exported and "burrow.md" not in exported


def test_forgetting_a_revision_falls_back_and_never_reuses_its_number(memory, clock):
    first = memory.remember("the heron waits")
    item = item_of(first)
    clock.set("2026-02-01T00:00:00Z")
    second = memory.remember("the heron and the kingfisher wait", item=item, tags=["published"])
    other = memory.remember("a kingfisher elsewhere")
    memory.link(other, second, "REFERENCED")
    clock.set("2026-03-01T00:00:00Z")

    memory.forget(second)

    assert memory.get(item)["kref"] == first
    assert "latest" in memory.get(first)["tags"]
    with pytest.raises(km.NotFoundError):
        memory.get(second)
    assert [entry["revision"] for entry in memory.history(item)] == [1]
    assert memory.edges(first) == [] and memory.edges(other) == []
    assert recall_krefs(memory, "kingfisher") == [other]
    assert recall_krefs(memory, "heron") == [first]
    assert counts(memory) == (2, 2, 0)
    with pytest.raises(km.NotFoundError):
        memory.get(f"{item}?t=published")
    with pytest.raises(km.NotFoundError):
        memory.get(at(item, "published", "2026-02-15T00:00:00Z"))

    third = memory.remember("the heron flies", item=item)
    assert revision_of(third) == 3
    assert [entry["revision"] for entry in memory.history(item)] == [1, 3]


def test_forgetting_a_revision_keeps_the_tag_history_of_the_others(memory, clock):
    first = memory.remember("first")
    item = item_of(first)
    second = memory.remember("second", item=item)
    clock.set("2026-02-01T00:00:00Z")
    memory.tag(first, "published")
    clock.set("2026-03-01T00:00:00Z")
    memory.tag(second, "published")
    memory.forget(second)
    assert memory.get(at(item, "published", "2026-02-15T00:00:00Z"))["kref"] == first
    with pytest.raises(km.NotFoundError):
        memory.get(at(item, "published", "2026-03-15T00:00:00Z"))


# -- recall ----------------------------------------------------------------------------------------------

def test_recall_returns_only_the_latest_revision_of_each_item(memory):
    first = memory.remember("apple and banana")
    second = memory.remember("apple and cherry", item=item_of(first))
    other = memory.remember("apple pie recipe")
    hits = memory.recall("apple", limit=10)
    assert sorted(hit["kref"] for hit in hits) == sorted([second, other])
    assert len({hit["item_kref"] for hit in hits}) == len(hits)
    assert recall_krefs(memory, "banana") == []
    for hit in hits:
        assert RECALL_KEYS <= set(hit)
        assert isinstance(hit["score"], float) and hit["score"] > 0
        assert hit["item_kref"] == item_of(hit["kref"])
        assert "latest" in hit["tags"]
    by_kref = {hit["kref"]: hit for hit in hits}
    assert by_kref[second]["content"] == "apple and cherry"
    assert by_kref[second]["title"] == "apple and cherry"


def test_recall_space_filter_includes_subspaces_only(memory):
    krefs = {space: memory.remember(f"lantern stored in {space}", space=space)
             for space in ("a", "a/b", "a/b/c", "ab", "a-b", "a_b", "a0", "b/a")}

    def spaces(**options):
        found = recall_krefs(memory, "lantern", limit=50, **options)
        return sorted(km.Kref.parse(kref).space for kref in found)

    assert spaces(space="a") == ["a", "a/b", "a/b/c"]
    assert spaces(space="a/b") == ["a/b", "a/b/c"]
    assert spaces(space="ab") == ["ab"]
    assert spaces(space="b") == ["b/a"]
    assert spaces() == sorted(krefs)


def test_recall_respects_limit_and_orders_by_score(memory):
    for repeat in range(1, 9):
        memory.remember(" ".join(["otter"] * repeat + ["filler words here"] * (9 - repeat)))
    everything = memory.recall("otter", limit=50)
    assert len(everything) == 8
    scores = [hit["score"] for hit in everything]
    assert scores == sorted(scores, reverse=True)
    assert len(memory.recall("otter", limit=3)) == 3
    assert [hit["kref"] for hit in memory.recall("otter", limit=3)] == [hit["kref"] for hit in everything[:3]]
    assert len(memory.recall("otter", limit=1)) == 1
    assert memory.recall("otter") == everything[:5]                # the default limit is 5


def test_recall_of_an_unknown_word_is_empty(memory):
    memory.remember("something entirely different")
    assert memory.recall("xylophone") == []


# -- evidence --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("level", ["official", "corroborated", "single_source", "unverified"])
def test_evidence_level_and_source_are_stored(memory, level):
    kref = memory.remember("the sky is blue", evidence_level=level, source="https://example.org/sky")
    result = memory.get(kref)
    assert result["metadata"]["evidence_level"] == level
    assert result["metadata"]["source"] == "https://example.org/sky"
    assert f"evidence:{level}" in result["tags"]


def test_unknown_evidence_level_is_rejected(memory):
    memory.remember("existing")
    before = snapshot(memory)
    with pytest.raises(km.InvalidArgumentError):
        memory.remember("the sky is green", evidence_level="rumour")
    assert snapshot(memory) == before


# -- bad inputs ------------------------------------------------------------------------------------------

BAD_CALLS = {
    "empty content": lambda m: m.remember(""),
    "blank content": lambda m: m.remember("   \n\t"),
    "int content": lambda m: m.remember(42),
    "None content": lambda m: m.remember(None),
    "bytes content": lambda m: m.remember(b"bytes"),
    "space a//b": lambda m: m.remember("x", space="a//b"),
    "space with blank": lambda m: m.remember("x", space="a b"),
    "space with ..": lambda m: m.remember("x", space="a/../b"),
    "tags a str": lambda m: m.remember("x", tags="x"),
    "tag with blank": lambda m: m.remember("x", tags=["bad tag"]),
    "kind with a dot": lambda m: m.remember("x", kind="a.b"),
    "empty kind": lambda m: m.remember("x", kind=""),
    "empty title": lambda m: m.remember("x", title=""),
    "empty key": lambda m: m.remember("x", key=""),
    "item and key": lambda m: m.remember("x", item="kref://CognitiveMemory/notes/a.memory", key="k"),
    "item a revision kref": lambda m: m.remember("x", item="kref://CognitiveMemory/notes/a.memory?r=1"),
    "item malformed": lambda m: m.remember("x", item="not a kref"),
    "recall limit 0": lambda m: m.recall("x", limit=0),
    "recall limit -1": lambda m: m.recall("x", limit=-1),
    "recall limit str": lambda m: m.recall("x", limit="5"),
    "recall empty query": lambda m: m.recall(""),
    "recall bad space": lambda m: m.recall("x", space="a//b"),
    "tag bad name": lambda m: m.tag("kref://CognitiveMemory/notes/a.memory?r=1", "bad tag"),
    "get malformed": lambda m: m.get("kref://CognitiveMemory/../a.memory"),
    "deprecate non-bool": lambda m: m.deprecate("kref://CognitiveMemory/notes/a.memory", "yes"),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_bad_input_raises_invalid_argument_and_changes_nothing(memory, name):
    memory.remember("a memory already here", tags=["published"], metadata={"k": [1, 2]})
    before = snapshot(memory)
    with pytest.raises(km.InvalidArgumentError) as caught:
        BAD_CALLS[name](memory)
    assert isinstance(caught.value, ValueError)
    assert snapshot(memory) == before


# -- durability and lifecycle ----------------------------------------------------------------------------

def test_reopening_a_file_store_keeps_everything(make_memory, clock):
    first = make_memory()
    krefs = build_rich_graph(first, clock)
    stats, exported = snapshot(first)
    published_then = first.get(at(item_of(krefs["a1"]), "published", first.get(krefs["a3"])["created_at"]))
    first.close()

    again = make_memory(reopen=True)
    assert snapshot(again) == (stats, exported)
    assert again.get(krefs["c1"])["content"] == UNICODE_CONTENT
    when = again.get(krefs["a3"])["created_at"]
    assert again.get(at(item_of(krefs["a1"]), "published", when)) == published_then
    assert again.remember("The user prefers solarized", space="prefs", key="ui.theme") == krefs["a3"]
    assert revision_of(again.remember("Kickoff moved to Wednesday", item=item_of(krefs["b1"]),
                                      evidence_level="official")) == 3


def test_context_manager_closes_the_store(make_memory):
    with make_memory() as memory:
        memory.remember("inside")
    with pytest.raises(km.StoreClosedError):
        memory.stats()


def test_use_after_close_raises_store_closed(memory):
    kref = memory.remember("before closing")
    memory.close()
    memory.close()                                         # closing twice is harmless
    calls = [
        lambda: memory.remember("after closing"),
        lambda: memory.get(kref),
        lambda: memory.history(item_of(kref)),
        lambda: memory.recall("closing"),
        lambda: memory.tag(kref, "published"),
        lambda: memory.link(kref, kref, "RELATED_TO"),
        lambda: memory.edges(kref),
        lambda: memory.forget(kref),
        lambda: memory.stats(),
        lambda: memory.export_jsonl(io.StringIO()),
    ]
    for call in calls:
        with pytest.raises(km.StoreClosedError):
            call()


# -- export and import -----------------------------------------------------------------------------------

def test_export_import_export_is_byte_identical(memory, clock, fresh_memory):
    krefs = build_rich_graph(memory, clock)
    exported = export_text(memory)
    lines = exported.splitlines()
    kinds = {json.loads(line)["record"] for line in lines}
    assert kinds == {"header", "space", "item", "revision", "artifact", "tag_event", "edge"}

    copy = fresh_memory()
    result = copy.import_jsonl(io.StringIO(exported))
    assert result["records"] == len(lines)
    assert export_text(copy) == exported
    assert comparable_stats(copy) == comparable_stats(memory)

    # The copy behaves like the original, not just looks like it.
    item_a = item_of(krefs["a1"])
    when = memory.get(krefs["a3"])["created_at"]
    assert copy.get(at(item_a, "published", when)) == memory.get(at(item_a, "published", when))
    assert copy.get(f"{item_a}?t=published")["kref"] == krefs["a3"]
    assert copy.get(f"{item_a}?r=3&a=notes.md")["artifact"]["location"] == "/tmp/notes.md"
    assert copy.get(krefs["a1"])["deprecated"] is True
    assert copy.get(krefs["d1"])["deprecated"] is True
    assert copy.get(krefs["b1"])["metadata"]["evidence_level"] == "official"
    with pytest.raises(km.NotFoundError):
        copy.get(krefs["b2"])
    assert copy.remember("The user prefers solarized", space="prefs", key="ui.theme") == krefs["a3"]
    assert revision_of(copy.remember("The user prefers sepia", space="prefs", key="ui.theme")) == 4
    assert revision_of(copy.remember("Kickoff on Thursday", item=item_of(krefs["b1"]), evidence_level="official")) == 3


def test_importing_twice_is_idempotent(memory, clock, fresh_memory):
    build_rich_graph(memory, clock)
    exported = export_text(memory)
    copy = fresh_memory()
    copy.import_jsonl(io.StringIO(exported))
    before = snapshot(copy)
    result = copy.import_jsonl(io.StringIO(exported))
    assert result["added"] == 0
    assert snapshot(copy) == before
    before = snapshot(memory)
    memory.import_jsonl(io.StringIO(exported))                # into the store it came from
    assert snapshot(memory) == before


def test_conflicting_import_raises_and_writes_nothing(memory, clock, fresh_memory):
    krefs = build_rich_graph(memory, clock)
    exported = export_text(memory)
    copy = fresh_memory()
    copy.import_jsonl(io.StringIO(exported))
    before = snapshot(copy)

    records = [json.loads(line) for line in exported.splitlines()]
    brand_new_item = {"record": "item", "item_kref": "kref://CognitiveMemory/extra/new-one.memory",
                      "key": None, "metadata": {}, "created_at": "2026-01-01T00:00:00.000000Z", "deprecated": False,
                      "last_number": 1}
    brand_new_revision = {"record": "revision", "kref": "kref://CognitiveMemory/extra/new-one.memory?r=1",
                          "title": "new", "content": "should never land", "metadata": {},
                          "created_at": "2026-01-01T00:00:00.000000Z", "deprecated": False}
    conflicting = []
    for record in records:
        if record["record"] == "revision" and record["kref"] == krefs["c1"]:
            record = {**record, "content": "tampered content"}
        conflicting.append(record)
    conflicting[1:1] = [brand_new_item, brand_new_revision]      # new records ahead of the conflict
    stream = [km.canonical_json(record) + "\n" for record in conflicting]

    with pytest.raises(km.ConflictError) as caught:
        copy.import_jsonl(stream)
    assert isinstance(caught.value, ValueError)
    assert snapshot(copy) == before
    with pytest.raises(km.NotFoundError):
        copy.get("kref://CognitiveMemory/extra/new-one.memory")


@pytest.mark.parametrize("garbage", [
    "this is not json at all",
    '{"record": "mystery"}',
    "[1, 2, 3]",
])
def test_garbage_import_raises_and_writes_nothing(memory, clock, fresh_memory, garbage):
    build_rich_graph(memory, clock)
    lines = export_text(memory).splitlines(keepends=True)
    copy = fresh_memory()
    copy.remember("the copy's own memory")
    before = snapshot(copy)
    stream = lines[: len(lines) // 2] + [garbage + "\n"] + lines[len(lines) // 2:]
    with pytest.raises(km.ImportFormatError) as caught:
        copy.import_jsonl(stream)
    assert isinstance(caught.value, ValueError)
    assert snapshot(copy) == before


def test_import_without_a_header_is_rejected(memory, fresh_memory):
    memory.remember("something")
    lines = export_text(memory).splitlines(keepends=True)
    copy = fresh_memory()
    before = snapshot(copy)
    with pytest.raises(km.ImportFormatError):
        copy.import_jsonl(lines[1:])
    assert snapshot(copy) == before


# -- mermaid ---------------------------------------------------------------------------------------------

def test_mermaid_draws_each_revision_and_the_supersedes_chain(memory):
    first = memory.remember("Alpha plan")
    item = item_of(first)
    memory.remember("Beta plan", item=item)
    third = memory.remember("Gamma plan", item=item)
    memory.tag(third, "published")
    drawing = memory.mermaid(item)
    assert drawing.startswith("flowchart")
    for title in ("Alpha plan", "Beta plan", "Gamma plan"):
        assert title in drawing
    for number in (1, 2, 3):
        assert re.search(rf"\br{number}\b", drawing), number
    assert drawing.count("SUPERSEDES") == 2
    assert "published" in drawing


# -- the async facade ------------------------------------------------------------------------------------

def test_universal_memory_manager_recall_memories(memory):
    work = memory.remember("coffee preference: strong espresso", space="work",
                           metadata={"memory_type": "preference"})
    kitchen = memory.remember("the coffee machine is on floor two", space="work/kitchen", kind="fact")
    home = memory.remember("coffee at home is decaf", space="home", metadata={"memory_type": "preference"})
    memory.remember("coffee in the workshop", space="workshop", metadata={"memory_type": "preference"})
    manager = km.UniversalMemoryManager(memory=memory)

    hits = asyncio.run(manager.recall_memories("coffee", limit=10, space_paths=["work"]))
    assert sorted(hit["kref"] for hit in hits) == sorted([work, kitchen])
    for hit in hits:
        assert hit["_item_kref"] == item_of(hit["kref"])
        assert hit["summary"] == memory.get(hit["kref"])["content"]
    assert {hit["kref"]: hit["type"] for hit in hits} == {work: "preference", kitchen: "fact"}

    facts = asyncio.run(manager.recall_memories("coffee", limit=10, space_paths=["work"],
                                                memory_types=["fact"]))
    assert [hit["kref"] for hit in facts] == [kitchen]

    prefs = asyncio.run(manager.recall_memories("coffee", limit=10, space_paths=["work", "home"],
                                                memory_types=["preference"]))
    assert sorted(hit["kref"] for hit in prefs) == sorted([work, home])
    scores = [hit["score"] for hit in prefs]
    assert scores == sorted(scores, reverse=True)

    assert len(asyncio.run(manager.recall_memories("coffee", limit=2))) == 2
    asyncio.run(manager.close())
    assert memory.get(work)["content"].startswith("coffee")    # a given memory stays open


# -- recall signals: krefs only ---------------------------------------------------------------------------

def _signal_values(value, path=""):
    """Every (path, leaf) in a signals structure."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _signal_values(inner, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, inner in enumerate(value):
            yield from _signal_values(inner, f"{path}[{index}]")
    else:
        yield path, value


NUMERIC_SIGNALS = {"hop", "when"}      # a hop count; the time boost


def test_recall_signals_carry_krefs_never_an_engine_id(memory):
    # issue 21 item 3: whatever a backend notes about a result (an edge it came over, a neighbour it was
    # lent words by, who contests it) names other memories by kref, the same on every backend
    seed = memory.remember("The deployment pipeline runs canary releases on Fridays", space="ops",
                           metadata={"speaker": "Ana", "event_date": "2025-03-07"})
    linked = memory.remember("Kubernetes quotas were raised in March", space="ops")
    rival = memory.remember("The deployment pipeline never runs releases on Fridays", space="ops")
    memory.link(seed, linked, "DERIVED_FROM")
    memory.link(rival, seed, "CONTRADICTS")
    for number in range(3):
        memory.remember(f"thread turn {number} about the deployment pipeline", space="ops",
                        metadata={"speaker": "Ana", "thread_id": "t1"})

    results = memory.recall("what did Ana say about the deployment pipeline last March?", limit=10)

    assert results and seed in [result["kref"] for result in results]
    seen_kref = False
    for result in results:
        for path, leaf in _signal_values(result.get("signals", {})):
            assert not path.rsplit(".", 1)[-1].endswith("_id"), (path, leaf)
            if isinstance(leaf, str) and leaf.startswith("kref://"):
                assert memory.get(leaf)["kref"] == leaf       # a kref that resolves, on this backend
                seen_kref = True
            elif not isinstance(leaf, (str, bool, type(None))):
                # numbers are measures (a hop count, a weight), never a row of the engine
                assert path.rsplit(".", 1)[-1] in NUMERIC_SIGNALS, (path, leaf)
    assert seen_kref           # the edge (or the contest) was noted, by kref
