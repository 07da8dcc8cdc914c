"""Model-based test of the memory graph (issue 10, item 1).

A hypothesis ``RuleBasedStateMachine`` drives random sequences of remember (raw, keyed, appended to an item,
stacked), revise, tag, untag, link, deprecate, forget, recall, close and reopen against a store ON DISK, and
checks every step against a small reference model kept here: revision numbering (never reused, also after a
forget), latest and tag resolution now and at past instants, ``SUPERSEDES`` chains, forgotten things gone
(``get`` raises ``NotFoundError``), and recall returning exactly the current revisions (never deprecated,
superseded or forgotten ones), now and ``as_of`` a past instant.

Time is a ``ManualClock`` that only this machine moves: every rule runs one second after the previous one,
so the model knows the instant of every revision and tag move.

The backend is a parameter: ``BACKENDS`` maps a name to a class built as ``Backend(folder, clock, ids)`` whose
``open()`` returns a ``Memory`` (called again to reopen) and ``close()`` releases it. It runs on the embedded
engine in a file, and on the Kumiho backend against the loopback stand-in (tests/kumiho_standin.py) through the
real SDK, with that backend's documented difference (``as_of`` recall judges deprecation by today's flags).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import shutil
import tempfile
from typing import Callable

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import kumiho_memory as km

PROJECT = "Model"
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
SPACES = ("alpha", "beta/inner")
KEYS = ("color", "city", "pet")
TAGS = ("published", "approved", "t1")
LINK_TYPES = ("DEPENDS_ON", "DERIVED_FROM", "DEPENDS_ON", "SUPPORTS", "RELATED_TO", "SUPERSEDES", "CONTRADICTS")
COMMON_WORD = "zebra"                 # in every memory, so one query matches them all
WORDS = ("red", "blue", "green", "amber", "violet", "ochre")
STALE = km.GROUNDING_STALE_TAG if hasattr(km, "GROUNDING_STALE_TAG") else "grounding:stale"

class SQLiteFileBackend:
    """The embedded engine in a file; reopening is a new connection to the same file."""

    def __init__(self, folder: str, clock: km.ManualClock, ids: km.SequentialIds) -> None:
        self.path, self.clock, self.ids = os.path.join(folder, "store.db"), clock, ids

    def open(self) -> km.Memory:
        return km.Memory(self.path, project=PROJECT, clock=self.clock, ids=self.ids)

    def close(self) -> None:
        pass


class KumihoStandInBackend:
    """The Kumiho backend against the loopback stand-in (tests/kumiho_standin.py) through the real SDK;
    reopening is a new client of the same server."""

    def __init__(self, folder: str, clock: km.ManualClock, ids: km.SequentialIds) -> None:
        from conftest import kumiho_standin_on
        self.clock, self.ids = clock, ids
        self.server = kumiho_standin_on(clock)
        self.server.start()

    def open(self) -> km.Memory:
        from conftest import open_kumiho_memory
        return open_kumiho_memory(self.clock, self.ids, self.server, project=PROJECT)

    def close(self) -> None:
        self.server.stop()


# name -> backend class: ``Backend(folder, clock, ids)``, then ``open()`` (again to reopen) and ``close()``.
BACKENDS: dict[str, type] = {"sqlite-file": SQLiteFileBackend}
try:
    from conftest import HAVE_KUMIHO
except ImportError:  # pragma: no cover
    HAVE_KUMIHO = False
KUMIHO_PARAM = pytest.param("kumiho", marks=pytest.mark.skipif(
    not HAVE_KUMIHO and os.environ.get("CI", "").lower() not in ("1", "true", "yes"),
    reason="the kumiho SDK (extra 'kumiho') or km.KumihoBackend is missing"))
BACKENDS["kumiho"] = KumihoStandInBackend

MACHINE_SETTINGS = settings(max_examples=60, stateful_step_count=50, deadline=None, derandomize=True,
                            database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.filter_too_much])


def _iso(second: float) -> str:
    return km.format_instant(START + dt.timedelta(seconds=second))


# -- the reference model ------------------------------------------------------------------------------------

class Rev:
    def __init__(self, number: int, content: str, created: int) -> None:
        self.number, self.content, self.created = number, content, created
        self.deprecated, self.deprecated_at = False, None


class Item:
    def __init__(self, kref: str, space: str, key: str | None, created: int) -> None:
        self.kref, self.space, self.key, self.created = kref, space, key, created
        self.deprecated, self.deprecated_at = False, None
        self.last_number = 0
        self.revs: dict[int, Rev] = {}
        self.tags: dict[str, int] = {}                               # tag -> revision number
        self.tag_events: dict[str, list[tuple[int, int | None]]] = {}  # tag -> [(second, number or None)]

    def head(self) -> int | None:
        return max(self.revs) if self.revs else None

    def rev_kref(self, number: int) -> str:
        return f"{self.kref}?r={number}"


class Model:
    """What the store must hold, as plain Python."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.keys: dict[tuple[str, str], str] = {}      # (space, key) -> item kref
        self.retired_keys: set[tuple[str, str]] = set()
        self.edges: list[tuple[tuple[str, int], tuple[str, int], str, int]] = []   # (src, tgt, type, second)
        self.forgotten: list[str] = []                  # krefs that must stay gone
        self.times: list[int] = [0]

    # writing
    def move_tag(self, item: Item, tag: str, number: int, now: int) -> None:
        if item.tags.get(tag) == number:
            return
        item.tags[tag] = number
        item.tag_events.setdefault(tag, []).append((now, number))

    def add_revision(self, item: Item, content: str, tags: tuple[str, ...], now: int) -> int:
        head = item.head()
        number = item.last_number + 1
        item.last_number = number
        item.revs[number] = Rev(number, content, now)
        if head is not None:
            self.edges.append(((item.kref, number), (item.kref, head), "SUPERSEDES", now))
        wanted = list(tags)
        if head is not None and "published" in item.tags:
            wanted.append("published")          # a revised published belief stays published
        for tag in dict.fromkeys(wanted):
            self.move_tag(item, tag, number, now)
        return number

    def new_item(self, kref: str, space: str, key: str | None, now: int) -> Item:
        assert kref not in self.items, f"the store reused the address of a live item: {kref}"
        assert all(not gone.startswith(kref + "?") and gone != kref for gone in self.forgotten), \
            f"the store reused a forgotten address: {kref}"
        item = Item(kref, space, key, now)
        self.items[kref] = item
        if key is not None:
            self.keys[(space, key)] = kref
        return item

    def impact(self, start: tuple[str, int]) -> list[tuple[str, int]]:
        """Memory.analyze_impact: breadth first over incoming DEPENDS_ON / DERIVED_FROM edges."""
        found: dict[tuple[str, int], None] = {}
        frontier = [start]
        for _depth in range(8):
            following = []
            for node in frontier:
                for source, target, edge_type, _ in self.edges:
                    if target == node and edge_type in ("DEPENDS_ON", "DERIVED_FROM") \
                            and source not in found and source != start:
                        found[source] = None
                        following.append(source)
            frontier = following
            if not frontier:
                break
        return list(found)

    def mark_stale(self, previous: tuple[str, int], now: int) -> None:
        for item_kref, number in self.impact(previous)[:20]:
            self.move_tag(self.items[item_kref], STALE, number, now)

    def forget_revisions(self, item: Item, numbers: list[int], whole: bool) -> int:
        gone = {(item.kref, number) for number in numbers}
        before = len(self.edges)
        self.edges = [edge for edge in self.edges if edge[0] not in gone and edge[1] not in gone]
        removed_edges = before - len(self.edges)
        for number in numbers:
            del item.revs[number]
            self.forgotten.append(item.rev_kref(number))
            for tag, pointed in list(item.tags.items()):
                if pointed == number:
                    del item.tags[tag]
            for tag, events in item.tag_events.items():
                item.tag_events[tag] = [(at, None if rev == number else rev) for at, rev in events]
        if whole:
            del self.items[item.kref]
            self.forgotten.append(item.kref)
            if item.key is not None:
                del self.keys[(item.space, item.key)]
                # A keyed item forgotten whole and remembered again gets its old address back (see
                # test_a_forgotten_keyed_item_does_not_lend_its_address_to_a_new_one below): keep it retired.
                self.retired_keys.add((item.space, item.key))
        return removed_edges

    # reading
    def superseded_across_items(self, at: int | None = None) -> set[tuple[str, int]]:
        return {target for source, target, edge_type, created in self.edges
                if edge_type == "SUPERSEDES" and source[0] != target[0] and (at is None or created <= at)}

    def current(self) -> set[str]:
        """Recall's view now: per live item its published revision if live, else its newest live one."""
        chosen = set()
        superseded = self.superseded_across_items()
        for item in self.items.values():
            if item.deprecated:
                continue
            live = [number for number, rev in sorted(item.revs.items()) if not rev.deprecated]
            published = item.tags.get("published")
            choice = published if published in live else (live[-1] if live else None)
            if choice is not None and (item.kref, choice) not in superseded:
                chosen.add(item.rev_kref(choice))
        return chosen

    def live(self) -> set[str]:
        return {item.rev_kref(number) for item in self.items.values() if not item.deprecated
                for number, rev in item.revs.items() if not rev.deprecated}

    def current_at(self, at: float, todays_deprecation: bool = False) -> set[str]:
        """Recall's view ``as_of`` an instant: what was created by then, minus what was deprecated by then
        (or, with ``todays_deprecation``, minus what is deprecated now: a backend that keeps no deprecation
        time, as the Kumiho backend documents)."""
        chosen = set()
        superseded = self.superseded_across_items(at)

        def gone(thing) -> bool:
            return thing.deprecated and (todays_deprecation or thing.deprecated_at <= at)
        for item in self.items.values():
            if item.created > at or gone(item):
                continue
            deprecated = {number for number, rev in item.revs.items() if gone(rev)}
            existing = [number for number, rev in item.revs.items() if rev.created <= at and number not in deprecated]
            events = [rev for when, rev in item.tag_events.get("published", []) if when <= at]
            choice = events[-1] if events else None
            if choice is None or choice in deprecated:
                choice = max(existing) if existing else None
            if choice is not None and (item.kref, choice) not in superseded:
                chosen.add(item.rev_kref(choice))
        return chosen

    def latest_at(self, item: Item, at: float) -> int | None:
        numbers = [number for number, rev in item.revs.items() if rev.created <= at]
        return max(numbers) if numbers else None

    def tag_at(self, item: Item, tag: str, at: float) -> int | None:
        events = [rev for when, rev in item.tag_events.get(tag, []) if when <= at]
        return events[-1] if events else None

    def tags_of(self, item: Item, number: int) -> list[str]:
        own = [tag for tag, pointed in item.tags.items() if pointed == number]
        return sorted(own + (["latest"] if number == item.head() else []))


def _parse(kref: str) -> tuple[str, int]:
    item, _, number = kref.partition("?r=")
    return item, int(number)


# -- the machine --------------------------------------------------------------------------------------------

class GraphMachine(RuleBasedStateMachine):
    """Drives one store and the model side by side; ``backend_name`` picks the backend."""

    backend_name = "sqlite-file"
    todays_deprecation = False      # True: as_of recall judges deprecation by today's flags (documented)

    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="kumiho-model-")
        self.clock = km.ManualClock(START)
        self.ids = km.SequentialIds()
        self.backend = BACKENDS[self.backend_name](self.folder, self.clock, self.ids)
        self.memory = self.backend.open()
        self.model = Model()
        self.now = 0
        self.serial = 0

    def teardown(self) -> None:
        try:
            self.memory.close()
            self.backend.close()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    # helpers
    def tick(self) -> int:
        self.now += 1
        self.clock.set(START + dt.timedelta(seconds=self.now))
        self.model.times.append(self.now)
        return self.now

    def fresh_content(self, word: int) -> str:
        self.serial += 1
        return f"The {COMMON_WORD} {WORDS[word % len(WORDS)]} note number {self.serial}"

    def pick_item(self, pick: int, *, with_revisions: bool = False) -> Item | None:
        items = [item for item in self.model.items.values() if item.revs or not with_revisions]
        return items[pick % len(items)] if items else None

    def pick_revision(self, pick: int) -> tuple[Item, int] | None:
        pairs = [(item, number) for item in self.model.items.values() for number in sorted(item.revs)]
        return pairs[pick % len(pairs)] if pairs else None

    def has_revisions(self) -> bool:
        return any(item.revs for item in self.model.items.values())

    def record_write(self, kref: str, space: str, key: str | None, content: str, tags: tuple[str, ...],
                     now: int) -> tuple[Item, int]:
        """Apply a write the store reports as new (a new item, or the next revision of a known one)."""
        item_kref, number = _parse(kref)
        if item_kref in self.model.items:
            item = self.model.items[item_kref]
            assert number == item.last_number + 1, \
                f"{kref}: expected revision {item.last_number + 1} (numbers are never reused)"
        else:
            assert number == 1, f"a new item must start at r=1: {kref}"
            item = self.model.new_item(item_kref, space, key, now)
        assert item.space == space
        self.model.add_revision(item, content, tags, now)
        return item, number

    # rules: writing
    @rule(space=st.sampled_from(SPACES), word=st.integers(0, 10), tags=st.lists(st.sampled_from(TAGS), max_size=2),
          other_handle=st.booleans())
    def remember_raw(self, space, word, tags, other_handle):
        now = self.tick()
        content = self.fresh_content(word)
        if other_handle:      # a second connection to the same store: the first must catch up
            other = self.backend.open()
            try:
                kref = other.remember(content, space=space, tags=tags)
            finally:
                other.close()
        else:
            kref = self.memory.remember(content, space=space, tags=tags)
        item_kref, number = _parse(kref)
        assert item_kref not in self.model.items and number == 1, f"raw capture merged into {kref}"
        self.record_write(kref, space, None, content, tuple(tags), now)

    @rule(space=st.sampled_from(SPACES), key=st.sampled_from(KEYS), word=st.integers(0, 10),
          repeat=st.booleans(), via_revise=st.booleans())
    def remember_keyed(self, space, key, word, repeat, via_revise):
        if (space, key) in self.model.retired_keys:
            return
        now = self.tick()
        held = self.model.items.get(self.model.keys.get((space, key), ""))
        head = held.head() if held is not None else None
        content = held.revs[head].content if (repeat and head is not None) else self.fresh_content(word)
        if via_revise:
            result = self.memory.revise(key, content, space=space)
            kref = result["kref"]
        else:
            result, kref = None, self.memory.remember(content, space=space, key=key)
        if held is not None and head is not None and held.revs[head].content == content:
            assert kref == held.rev_kref(head), "restating the current value must write nothing"
            assert result is None or result["outcome"] == "vacuous"
            return
        item, _ = self.record_write(kref, space, key, content, (), now)
        assert held is None or item is held, f"key {key!r} moved to another item: {kref}"
        if result is not None:
            assert result["outcome"] == ("revised" if head is not None else "created"), result
        if head is not None:
            self.model.mark_stale((item.kref, head), now)

    @rule(pick=st.integers(0, 10 ** 6), word=st.integers(0, 10), tags=st.lists(st.sampled_from(TAGS), max_size=1))
    def append_to_item(self, pick, word, tags):
        item = self.pick_item(pick)
        if item is None:
            return
        now = self.tick()
        content = self.fresh_content(word)
        head = item.head()
        if head is None:            # every revision forgotten: nothing to append to
            with pytest.raises(km.NotFoundError):
                self.memory.remember(content, space=item.space, item=item.kref, tags=tags)
            return
        kref = self.memory.remember(content, space=item.space, item=item.kref, tags=tags)
        assert _parse(kref)[0] == item.kref
        self.record_write(kref, item.space, item.key, content, tuple(tags), now)
        self.model.mark_stale((item.kref, head), now)

    @precondition(lambda self: self.has_revisions())
    @rule(pick=st.integers(0, 10 ** 6), same=st.booleans(), word=st.integers(0, 10))
    def revise_item(self, pick, same, word):
        item = self.pick_item(pick, with_revisions=True)
        now = self.tick()
        head = item.head()
        content = item.revs[head].content if same else self.fresh_content(word)
        result = self.memory.revise(item.kref, content)
        if same:      # the same statement again, on the item revise() names: a new revision of it, which
            # leaves what was derived from the old one standing (nothing changed: no grounding:stale)
            assert result["outcome"] == "revised" and "same statement again" in result["reason"], result
            assert result["grounding_stale"] == [], result
            written, _ = self.record_write(result["kref"], item.space, item.key, content, (), now)
            assert written is item, result
            return
        assert result["outcome"] in ("revised", "created"), result
        written, _ = self.record_write(result["kref"], item.space, None if result["outcome"] == "created" else
                                       item.key, content, (), now)
        if result["outcome"] == "revised":
            assert written is item, result
            self.model.mark_stale((item.kref, head), now)
        else:
            assert written is not item, result

    @rule(space=st.sampled_from(SPACES), word=st.integers(0, 10))
    def remember_stacked(self, space, word):
        now = self.tick()
        content = self.fresh_content(word)
        current = self.model.current()
        kref = self.memory.remember(content, space=space, stack=True)
        item_kref, number = _parse(kref)
        known = self.model.items.get(item_kref)
        if known is not None:
            assert known.space == space, f"stacked onto another space's belief: {kref}"
            target = [k for k in current if _parse(k)[0] == item_kref]
            assert target, f"stacked onto {item_kref}, which recall would not return"
        self.record_write(kref, space, known.key if known else None, content, (), now)
        if known is not None:
            self.model.mark_stale(_parse(target[0]), now)

    @precondition(lambda self: self.has_revisions())
    @rule(pick=st.integers(0, 10 ** 6), tag=st.sampled_from(TAGS))
    def tag(self, pick, tag):
        item, number = self.pick_revision(pick)
        now = self.tick()
        result = self.memory.tag(item.rev_kref(number), tag)
        assert result["kref"] == item.rev_kref(number) and tag in result["tags"]
        self.model.move_tag(item, tag, number, now)

    @precondition(lambda self: self.has_revisions())
    @rule(pick=st.integers(0, 10 ** 6), tag=st.sampled_from(TAGS + (STALE,)))
    def untag(self, pick, tag):
        item, number = self.pick_revision(pick)
        now = self.tick()
        carried = item.tags.get(tag) == number
        assert self.memory.untag(item.rev_kref(number), tag) is carried
        if carried:
            del item.tags[tag]
            item.tag_events.setdefault(tag, []).append((now, None))

    @precondition(lambda self: self.has_revisions())
    @rule(source=st.integers(0, 10 ** 6), destination=st.integers(0, 10 ** 6), edge_type=st.sampled_from(LINK_TYPES))
    def link(self, source, destination, edge_type):
        source_item, source_number = self.pick_revision(source)
        target_item, target_number = self.pick_revision(destination)
        if edge_type == "SUPERSEDES" and source_item is target_item:
            return        # within an item the store alone writes SUPERSEDES (the chain check relies on it)
        now = self.tick()
        src, tgt = (source_item.kref, source_number), (target_item.kref, target_number)
        if src == tgt:
            with pytest.raises(km.InvalidArgumentError):
                self.memory.link(source_item.rev_kref(source_number), target_item.rev_kref(target_number), edge_type)
            return
        edge = self.memory.link(source_item.rev_kref(source_number), target_item.rev_kref(target_number), edge_type)
        assert (edge["source_kref"], edge["target_kref"], edge["edge_type"]) == \
            (source_item.rev_kref(source_number), target_item.rev_kref(target_number), edge_type)
        if not any(e[0] == src and e[1] == tgt and e[2] == edge_type for e in self.model.edges):
            self.model.edges.append((src, tgt, edge_type, now))

    @rule(pick=st.integers(0, 10 ** 6), whole=st.booleans(), flag=st.booleans())
    def deprecate(self, pick, whole, flag):
        if whole:
            item = self.pick_item(pick)
            if item is None:
                return
            now = self.tick()
            self.memory.deprecate(item.kref, flag)
            target = item
        else:
            picked = self.pick_revision(pick)
            if picked is None:
                return
            item, number = picked
            now = self.tick()
            self.memory.deprecate(item.rev_kref(number), flag)
            target = item.revs[number]
        if flag and not target.deprecated:
            target.deprecated_at = now
        elif not flag:
            target.deprecated_at = None
        target.deprecated = flag

    @rule(pick=st.integers(0, 10 ** 6), whole=st.booleans())
    def forget(self, pick, whole):
        if whole:
            item = self.pick_item(pick)
            if item is None:
                return
            self.tick()
            report = self.memory.forget(item.kref)
            numbers = sorted(item.revs)
        else:
            picked = self.pick_revision(pick)
            if picked is None:
                return
            item, number = picked
            self.tick()
            report = self.memory.forget(item.rev_kref(number))
            numbers = [number]
        edges = self.model.forget_revisions(item, numbers, whole)
        assert (report["items"], report["revisions"], report["edges"]) == (int(whole), len(numbers), edges), report

    @rule()
    def close_and_reopen(self):
        self.memory.close()
        with pytest.raises(km.StoreClosedError):
            self.memory.items()
        self.memory = self.backend.open()

    # rules: reading the past
    @precondition(lambda self: len(self.model.times) > 2)
    @rule(pick=st.integers(0, 10 ** 6), half=st.booleans())
    def check_the_past(self, pick, half):
        at = self.model.times[pick % len(self.model.times)] + (0.5 if half else 0.0)
        moment = START + dt.timedelta(seconds=at)
        recalled = self.memory.recall(COMMON_WORD, limit=km.MAX_RECALL_LIMIT, as_of=moment.isoformat())
        assert {hit["kref"] for hit in recalled} == self.model.current_at(at, self.todays_deprecation), \
            f"recall as_of {_iso(at)}"
        for item in self.model.items.values():
            for tag in ("latest",) + tuple(item.tag_events):
                expected = self.model.latest_at(item, at) if tag == "latest" else self.model.tag_at(item, tag, at)
                kref = str(dataclasses.replace(km.Kref.parse(item.kref), tag=tag, time=moment))
                if expected is None:
                    with pytest.raises(km.NotFoundError):
                        self.memory.get(kref)
                else:
                    assert self.memory.get(kref)["revision"] == expected, f"{kref} at {_iso(at)}"

    # invariants, after every step
    @invariant()
    def revisions_and_tags_match(self):
        model = self.model
        listed = {item["item_kref"]: item for item in self.memory.items(include_deprecated=True)}
        assert set(listed) == set(model.items)
        assert {k for k, item in listed.items() if not item["deprecated"]} == \
            {k for k, item in model.items.items() if not item.deprecated}
        assert {item["item_kref"] for item in self.memory.items()} == \
            {k for k, item in model.items.items() if not item.deprecated}
        for item in model.items.values():
            history = self.memory.history(item.kref)
            assert [(r["revision"], r["content"]) for r in history] == \
                [(number, rev.content) for number, rev in sorted(item.revs.items())], item.kref
            for record in history:
                rev = item.revs[record["revision"]]
                assert record["deprecated"] == (rev.deprecated or item.deprecated), record["kref"]
                assert record["tags"] == model.tags_of(item, rev.number), record["kref"]
                assert record["created_at"] == _iso(rev.created)
            head = item.head()
            if head is None:
                with pytest.raises(km.NotFoundError):
                    self.memory.get(item.kref)
            else:
                assert self.memory.get(item.kref)["revision"] == head
            for tag, number in item.tags.items():
                assert self.memory.get(f"{item.kref}?t={tag}")["revision"] == number
            assert listed[item.kref]["latest_revision"] == head

    @invariant()
    def forgotten_things_are_gone(self):
        for kref in self.model.forgotten[-12:]:
            parsed = km.Kref.parse(kref)
            if parsed.is_bare_item and kref in self.model.items:
                continue          # (never: a forgotten item's address stays retired in this machine)
            with pytest.raises(km.NotFoundError):
                self.memory.get(kref)

    @invariant()
    def edges_match_and_supersedes_chains_are_linear(self):
        model = self.model
        seen = set()
        for item in model.items.values():
            for edge in self.memory.edges(item.kref, direction="outgoing"):
                seen.add((_parse(edge["source_kref"]), _parse(edge["target_kref"]), edge["edge_type"]))
        expected = {(source, target, edge_type) for source, target, edge_type, _ in model.edges}
        assert seen == expected
        within = [(s, t) for s, t, edge_type in seen if edge_type == "SUPERSEDES" and s[0] == t[0]]
        sources = [s for s, _ in within]
        targets = [t for _, t in within]
        assert len(sources) == len(set(sources)) and len(targets) == len(set(targets)), within
        assert all(s[1] > t[1] for s, t in within), within

    @invariant()
    def recall_returns_exactly_the_current_revisions(self):
        hits = self.memory.recall(COMMON_WORD, limit=km.MAX_RECALL_LIMIT)
        found = [hit["kref"] for hit in hits]
        assert len(found) == len(set(found))
        assert set(found) == self.model.current()
        history = self.memory.recall(COMMON_WORD, limit=km.MAX_RECALL_LIMIT, include_superseded=True)
        assert {hit["kref"] for hit in history} == self.model.live()
        for space in SPACES:
            in_space = {hit["kref"] for hit in self.memory.recall(COMMON_WORD, limit=km.MAX_RECALL_LIMIT, space=space)}
            assert in_space == {k for k in self.model.current() if self.model.items[_parse(k)[0]].space == space}


# What each backend documents as different; the Kumiho server keeps no deprecation time.
BACKEND_TRAITS = {"kumiho": {"todays_deprecation": True}}
# The Kumiho machine runs over loopback gRPC, several calls a step: fewer, shorter runs keep it quick.
BACKEND_SETTINGS = {"kumiho": settings(MACHINE_SETTINGS, max_examples=6, stateful_step_count=30)}


def machine_for(backend_name: str) -> type[GraphMachine]:
    """The machine on one backend of ``BACKENDS``."""
    return type(f"GraphMachine_{backend_name.replace('-', '_')}", (GraphMachine,),
                {"backend_name": backend_name, **BACKEND_TRAITS.get(backend_name, {})})


@pytest.mark.parametrize("machine_backend", ["sqlite-file", KUMIHO_PARAM])
def test_graph_matches_the_reference_model(machine_backend):
    machine = machine_for(machine_backend)
    machine.TestCase.settings = BACKEND_SETTINGS.get(machine_backend, MACHINE_SETTINGS)
    machine.TestCase().runTest()


def test_a_forgotten_keyed_item_does_not_lend_its_address_to_a_new_one(tmp_path):
    with km.Memory(str(tmp_path / "store.db")) as memory:
        first = memory.remember("The user's theme is dark", space="prefs", key="ui.theme")
        memory.forget(first.split("?")[0])
        second = memory.remember("The user's theme is light", space="prefs", key="ui.theme")
        assert second != first
        with pytest.raises(km.NotFoundError):
            memory.get(first)
