"""Issue 19 (speed): ``remember_many`` hands a run of new memories to the embedded engine together
(``SQLiteGraph.hold_new_revisions``: their names checked in the store with one query, not one each), and the
hot paths under it remember what they worked out before (a word's index term, a word's quick credential
tests, a space's normal form). None of it may change what is stored: each test here compares with the
plain path (a ``remember()`` loop, the regular expression, the recursive definition) on varied and hostile
input, so a shortcut that drifts fails."""

from __future__ import annotations

import collections
import datetime as dt
import os
import random
import sqlite3

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import kumiho_memory as km

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SECRET = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
WORDS = "harbor lantern copper meadow violet quarry saffron timber glacier orchard falcon ember".split()


def _tables(path: str) -> list[str]:
    """Every row of a store, as SQL text: all but the recall snapshot (its tables and the meta rows about it,
    laid out by when the index was built; what it serves is compared by recalling)."""
    with sqlite3.connect(path) as conn:
        return [line for line in conn.iterdump() if "recall_snapshot" not in line
                and not line.startswith(('INSERT INTO "meta"', 'INSERT INTO "recall_'))]


class _SameId:
    """An id factory that always hands out the same id (every new name is then taken but the first)."""

    def new_id(self) -> str:
        return "same"


def _hostile_records(count: int) -> list:
    """New memories of every shape ``remember_many`` takes, with keyed, stacked and item-bound ones between
    them (which end a run), secrets, personal data, duplicates, non-ASCII text and punctuation."""
    rng = random.Random(19)
    records: list = []
    for number in range(count):
        words = " ".join(rng.choices(WORDS, k=rng.randint(3, 30)))
        shape = number % 23
        if shape == 0:
            records.append(f"{words} the stripe key is {SECRET}")
        elif shape == 1:
            records.append({"content": f"mail ann.lee{number}@example.com or call +1 415 555 0{number % 1000:03d} "
                                       f"{words}", "space": "personal/u1"})
        elif shape == 2:
            records.append({"content": f"deploy window {number % 5} {words}", "key": f"deploy{number % 4}",
                            "space": "ops"})
        elif shape == 3:
            records.append({"content": "I live in Munich now.", "stack": True})
        elif shape == 4:
            records.append({"content": f"turn {number} {words}", "space": "chat", "kind": "message",
                            "metadata": {"speaker": "Ann" if number % 2 else "Bo", "session": number % 3}})
        elif shape == 5:
            records.append({"content": words, "tags": ["a", "b", "a"], "evidence_level": "unverified"})
        elif shape == 6:
            records.append({"content": words, "source": f"https://example.com/{number % 3}"})
        elif shape == 7:
            records.append("Ελληνικά ΣΟΦΙΑΣ και ﬁne café naïve " + words)
        elif shape == 8:
            records.append(words.replace(" ", "\n", 2) + " -- it's-a co-op/thing_x (ok)! UPPER Case 42")
        elif shape == 9:
            records.append({"content": words, "title": f"deploy key {SECRET}"})
        elif shape == 10:
            records.append(records[-9] if isinstance(records[-9], str) else words)     # a duplicate in the batch
        elif shape == 11:
            records.append({"content": words, "metadata": {"event_date": "2025-03-01", "note": "password: hunter2xyz"}})
        elif shape == 12:
            records.append({"content": words, "artifacts": [{"name": "doc", "location": f"/tmp/doc{number}.txt"}]})
        elif shape == 13:
            records.append({"content": "  " + words + "\t\t  \n\nrest of it", "kind": "fact"})
        elif shape == 14:
            records.append("I adopted a puppy and play guitar " + words)
        elif shape == 15:
            records.append("AKIA" + "IOSFODNN7EXAMPLE is the aws key " + words)
        elif shape == 16:
            records.append({"content": words, "space": "/notes/"})
        else:
            records.append({"content": words, "space": f"space{number % 3}", "kind": "memory"})
    return records


def _loop(memory: km.Memory, records: list) -> list[str]:
    krefs = []
    for record in records:
        arguments = {"content": record} if isinstance(record, str) else dict(record)
        krefs.append(memory.remember(arguments.pop("content"), **arguments))
    return krefs


@pytest.mark.parametrize("credentials", ["redact", "refuse"])
def test_runs_of_new_memories_store_what_a_remember_loop_stores(tmp_path, monkeypatch, credentials):
    """Hostile records in batches that cross progress reports, written three times into each store (the
    second process's sequential ids hit the first's names, the third's hit its own): the krefs, the
    progress reports and every table come out as a remember() loop leaves them, and a reopened store
    recalls the same (an index kept up to date write by write may order equal scores otherwise)."""
    monkeypatch.setattr(km.SQLiteGraph, "RECALL_SNAPSHOT_MIN_DOCS", 10 ** 9)      # every reopen rebuilds
    records = _hostile_records(2600)
    if credentials == "refuse":
        records = [record for record in records if SECRET not in str(record) and "password" not in str(record)]
    stores: dict[str, list] = {}
    for name in ("loop", "many"):
        path = str(tmp_path / f"{name}.db")
        for ids in (km.SequentialIds(), km.SequentialIds(), _SameId()):
            memory = km.Memory(path=path, ids=ids, clock=km.ManualClock(tick=0.25), credentials=credentials)
            reports: list[tuple[int, int]] = []
            if name == "loop":
                krefs = _loop(memory, records)
            else:
                krefs = memory.remember_many(records[:1500], progress=lambda *done: reports.append(done))
                krefs += memory.remember_many(records[1500:], progress=lambda *done: reports.append(done))
                rest = len(records) - 1500
                assert reports == [(1000, 1500), (1500, 1500)] + [(done, rest) for done in range(1000, rest, 1000)] + [
                    (rest, rest)]
            memory.close()
            stores.setdefault(name, []).append(krefs)
        stores[name].append(_tables(path))
        reopened = km.Memory(path=path)
        stores[name].append([[(hit["kref"], hit["score"]) for hit in reopened.recall(query, limit=20)]
                             for query in ("harbor copper deploy", "where do I live", "pets", "café", "ember 42")])
        reopened.close()
    assert stores["many"] == stores["loop"]
    assert any(kref.split("?")[0].endswith("-2.memory") for kref in stores["many"][1])  # a stored name was noticed
    assert any("memory-same-3.memory" in kref for kref in stores["many"][2])           # ... and a held one
    assert SECRET not in "".join(stores["many"][3])


def test_a_progress_report_sees_every_record_before_it(tmp_path):
    """A report comes after exactly the records it counts: what it reads of the store is theirs."""
    memory = km.Memory(path=str(tmp_path / "m.db"))
    seen: list[int] = []
    memory.remember_many([f"{WORDS[n % 12]} note {n}" for n in range(2500)],
                         progress=lambda done, total: seen.append(len(memory.items())))
    assert seen == [1000, 2000, 2500]


def test_a_failing_record_after_held_runs_leaves_nothing(tmp_path):
    """A secret under ``refuse`` in the middle of the third run (after two runs were held and a keyed
    record between them was written): nothing of the batch is kept, and the store goes on as before."""
    memory = km.Memory(path=str(tmp_path / "m.db"), credentials="refuse", ids=km.SequentialIds())
    memory.remember("kept from before the batch")
    records = [f"{WORDS[n % 12]} run one {n}" for n in range(1200)] + [{"content": "keyed", "key": "k"}]
    records += [f"run two {n}" for n in range(50)] + [f"the stripe key is {SECRET}"] + ["never held"]
    with pytest.raises(km.CredentialDetectedError) as caught:
        memory.remember_many(records)
    assert caught.value.written == []
    assert len(memory.items()) == 1
    assert memory.recall("run", limit=5) == []
    memory.close()
    reopened = km.Memory(path=str(tmp_path / "m.db"))
    assert [reopened.get(item["item_kref"])["content"] for item in reopened.items()] == ["kept from before the batch"]
    assert len(reopened.remember_many([f"after {n}" for n in range(30)])) == 30
    assert len(reopened.items()) == 31


def test_held_rows_go_in_as_one_row_a_statement_would(tmp_path, monkeypatch):
    """The held rows are inserted many a statement: with one a statement, a few, or as many as SQLite takes,
    the store holds the same rows (replaced threads, ignored edges and the AUTOINCREMENT sequences too)."""
    records = _hostile_records(700)
    dumps = []
    for parameters in (1, 20, 999):
        monkeypatch.setattr(km._PendingWrites, "PARAMETERS", parameters)
        path = str(tmp_path / f"p{parameters}.db")
        memory = km.Memory(path=path, ids=km.SequentialIds(), clock=km.ManualClock(tick=0.25))
        memory.remember_many(records)
        memory.remember_many(records[:150])
        memory.close()
        dumps.append(_tables(path))
    assert dumps[0] == dumps[1] == dumps[2]
    assert any("sqlite_sequence" in line for line in dumps[0])


def test_hold_new_revisions_outside_bulk_writes_each(tmp_path):
    """Called outside ``bulk``, the backend writes each draft as ``write_revision`` would (a taken name too)."""
    graph = km.SQLiteGraph(str(tmp_path / "g.db"), clock=km.ManualClock(tick=1.0))
    drafts = [("notes", "memory", "same", f"title {n}", f"content {n} harbor", {}, ("x",), ()) for n in range(3)]
    krefs = graph.hold_new_revisions("p", drafts)
    assert krefs == ["kref://p/notes/same.memory?r=1", "kref://p/notes/same-2.memory?r=1",
                     "kref://p/notes/same-3.memory?r=1"]
    with graph.bulk():
        assert graph.hold_new_revisions("p", drafts[:2]) == ["kref://p/notes/same-4.memory?r=1",
                                                             "kref://p/notes/same-5.memory?r=1"]
    assert [graph.resolve(km.Kref.parse(kref)).content for kref in krefs] == [f"content {n} harbor" for n in range(3)]
    graph.close()


# -- the remembered shortcuts against what they stand for ----------------------------------------------------

_ASCII_TEXT = st.lists(st.one_of(
    st.sampled_from(["word", "Word ", " ", "  ", "\n", "\t", "\x0b", "\x1c", "\x1f", "the", "a", "7", "42", "_x",
                     "it's", "co-op", "running", "RUNNING", "A1b2", "yyy", "syzygy", "e.g.", "-", "/", "x" * 20]),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=8)), max_size=40).map("".join)


@PROPERTY
@given(_ASCII_TEXT)
def test_tokenize_splits_ascii_text_as_the_word_regex_does(text):
    lowered = text.lower()
    expected = [km.stem(word) for word in km._ASCII_WORD.findall(lowered) if word not in km._ASCII_DROPPED]
    assert km.tokenize(text) == expected
    assert km.tokenize(text) == expected           # the second time from the remembered terms


@PROPERTY
@given(st.one_of(_ASCII_TEXT, st.text(max_size=60)), st.integers(min_value=0, max_value=90), st.text(max_size=6),
       st.sampled_from(["cut", "title", "other"]))
@example("Caroline went to the LGBTQ support group yesterday and loved it a lot, honestly.", 0, "", "title")
@example("one two", 5, "", "cut")
@example("  leading space", 3, "", "cut")
def test_a_prefix_and_its_text_tokenize_as_each_alone(text, cut, other, how):
    """``_prefixed_term_counts`` reuses the text's words for a prefix it starts with: the terms counted are
    exactly those of ``tokenize(prefix) + tokenize(text)``, in the order each first occurs, for a cut of the
    text, a title made from it, or another string."""
    if how == "title":
        title = km._title_from_content(text) if text.strip() else ""
        prefix = title[:-1] if title.endswith("…") else title
    else:
        prefix = text[:cut] if how == "cut" else other
    terms = km.tokenize(prefix) + km.tokenize(text)
    counts, written = km._prefixed_term_counts(prefix, text)
    assert list(counts.items()) == list(collections.Counter(terms).items()) and written == len(terms)


def test_the_remembered_terms_are_bounded(monkeypatch):
    monkeypatch.setattr(km, "ASCII_TERMS_KEPT", 8)
    km._ASCII_TERMS.clear()
    words = [f"word{n}x" for n in range(30)] + ["the", "a"]
    assert km.tokenize(" ".join(words)) == [km.stem(word) for word in words[:30]]
    assert len(km._ASCII_TERMS) <= 8
    km._ASCII_TERMS.clear()


def _reference_is_consonant(word: str, index: int) -> bool:
    if word[index] in "aeiou":
        return False
    if word[index] == "y":
        return index == 0 or not _reference_is_consonant(word, index - 1)
    return True


@PROPERTY
@given(st.text(alphabet="aeiouybcdlmnrstyyyAYZ", max_size=16))
@example("yy")
@example("ayyay")
def test_porters_measure_and_vowel_test_follow_the_definition(word):
    classes = "".join("c" if _reference_is_consonant(word, i) else "v" for i in range(len(word)))
    measure = 0
    for before, after in zip(classes, classes[1:]):
        measure += before == "v" and after == "c"
    assert km._measure(word) == measure
    assert km._has_vowel(word) == ("v" in classes)


_RULE_ENDINGS = sorted({rule if isinstance(rule, str) else rule[0] for rule in km._STEP2 + km._STEP3 + km._STEP4}
                       | {"s", "ss", "sses", "ies", "eed", "ed", "ing", "ated", "bled", "ized", "hopping", "y", "e",
                          "ll"})


@PROPERTY
@given(st.text(alphabet="aeiouybcdfghjklmnpqrstvwxz", min_size=1, max_size=9), st.sampled_from(_RULE_ENDINGS + [""]))
@example("relat", "ional")
@example("hop", "ping")
def test_a_word_stem_lets_go_by_its_last_letter_is_its_own_stem(base, ending):
    """``stem`` returns a word that ends in none of ``_PORTER_LAST_LETTERS`` at once: Porter's steps (run in
    full here) leave every such word as it is, and stem every other as they do."""
    word = base + ending
    if len(word) > 2:
        assert km.stem(word) == km._porter_steps(word)
        if word[-1] not in km._PORTER_LAST_LETTERS:
            assert km._porter_steps(word) == word


def test_every_ending_a_rule_reads_is_one_stem_looks_at():
    assert {ending[-1] for ending in _RULE_ENDINGS} <= km._PORTER_LAST_LETTERS
    for ending in _RULE_ENDINGS:       # a word made to fit each rule is stemmed as the full steps stem it
        for base in ("relat", "hop", "gener", "rat", "bab", "feel", "happ", "oper", "sy"):
            assert km.stem(base + ending) == km._porter_steps(base + ending)


_IMPLYING_WORDS = st.sampled_from(["puppy", "guitar", "Paris", "in Paris", "visited Rome", "May", "monday",
                                   "yesterday", "three", "42", "1999", "2023", "harbor", "lantern", "Harbor", "x7",
                                   "moved", "the", "a", "running", " ", "\n", ",", "é"])


@PROPERTY
@given(st.lists(st.one_of(_IMPLYING_WORDS, st.text(alphabet="abcdefghijklmnopqrstuvwxyzAZ09 ", max_size=8)),
                max_size=25).map(" ".join))
def test_a_memory_that_implies_nothing_is_told_at_once(text):
    """``implied_terms`` answers a short ASCII text without digits or capitals and without a word of the tables
    at once: what the tables and the answer kinds, read in full, give it (nothing), and the same as before
    for every other text."""
    terms = km.tokenize(text)
    counts = collections.Counter(terms)
    expected = km._table_terms(counts, counts)
    for kind in km.answer_kinds(text, counts):
        expected[kind] = km.IMPLIED_WEIGHT
    assert km.implied_terms(text, counts) == expected


_GATE_WORDS = st.sampled_from([
    "sk-", "ghp_", "AKIA", "pat", "Pat", "pin", "PASS", "key", "-----BEGIN", "://", "-p", "-u", "alue", "/", "earer",
    ":AA", "Q~", "+ACR", "dapi", "xprv", ".", "=", "_", "-", "Zq8Wv4Lp2Rk7Tn3X", "aB3dE5gH7jK9mN1pQ3sT5vW7",
    "password", "token", "secret", "identified", "harbor", "lantern", "x" * 15, "y" * 16, " ", "\n", "\t", "\x1c",
])
_GATE_ASCII = st.lists(st.one_of(_GATE_WORDS, st.text(alphabet=st.characters(max_codepoint=127), max_size=6)),
                       max_size=30).map("".join)


@PROPERTY
@given(_GATE_ASCII, st.lists(_GATE_ASCII, max_size=5))
def test_the_word_by_word_quick_tests_agree_with_the_whole_text(text, seen_before):
    """An ASCII text passes the quick tests exactly when one of its words does, and what is remembered of
    words seen in other texts never changes an outcome."""
    for other in seen_before:
        assert km._may_hold_credentials(other) == km._quick_tests_find(other)
    expected = km._quick_tests_find(text)
    assert expected == any(km._quick_tests_find(word) for word in text.split())
    assert km._may_hold_credentials(text) == expected
    assert km._may_hold_credentials(text) == expected


@PROPERTY
@given(st.lists(_GATE_ASCII, max_size=12), _GATE_ASCII)
def test_the_quick_tests_of_a_batch_are_each_texts_and_remember_each_word_as_alone(texts, text):
    """``_may_hold_credentials_each`` gives each text the quick tests' outcome on it (the new words of the batch
    tested together first), and remembers each new word with the outcome of the tests on it alone."""
    km._CLEAN_WORDS.clear()
    km._FLAGGED_WORDS.clear()
    batch = texts + [text, "Ελληνικά " + text, text]
    expected = [km._quick_tests_find(other if other.isascii() else other.translate(km._ONE_CHAR_FOLDS))
                for other in batch]
    assert km._may_hold_credentials_each(batch) == expected
    for word in km._CLEAN_WORDS | km._FLAGGED_WORDS:
        assert (word in km._FLAGGED_WORDS) == km._quick_tests_find(word)
    assert not km._CLEAN_WORDS & km._FLAGGED_WORDS
    assert km._may_hold_credentials_each(batch) == expected        # the second time from what is remembered


def test_no_quick_test_looks_for_whitespace():
    """What the word-by-word reading stands on: no mark or provider anchor holds whitespace."""
    anchors = [anchor for rule in km._PROVIDER_RULES for anchor in rule.anchors]
    marks = km._LAYER_MARKS + km._HYPHEN_LAYER_MARKS + km._LOWERED_LAYER_MARKS
    assert anchors and not [piece for piece in anchors + list(marks) if any(c.isspace() for c in piece)]
    assert all("-" in mark for mark in km._HYPHEN_LAYER_MARKS)


def test_the_remembered_word_outcomes_are_bounded(monkeypatch):
    monkeypatch.setattr(km, "WORD_OUTCOMES_KEPT", 4)
    km._CLEAN_WORDS.clear()
    assert not km._may_hold_credentials(" ".join(f"calm{n}word" for n in range(20)))
    assert len(km._CLEAN_WORDS) <= 4
    assert km._may_hold_credentials(f"calm1word {SECRET}")
    km._CLEAN_WORDS.clear()
    km._FLAGGED_WORDS.clear()


@PROPERTY
@given(st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)))
def test_instants_are_formatted_with_a_padded_year_and_microseconds(moment):
    moment = moment.replace(tzinfo=km.UTC)
    assert km.format_instant(moment) == (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:{moment.minute:02d}:"
        f"{moment.second:02d}.{moment.microsecond:06d}Z")


@PROPERTY
@given(st.text(alphabet=" \n\t\r\x0b\x1cab\u2028é…", max_size=200))
def test_a_title_made_from_a_content_is_its_first_line_single_spaced(content):
    first_line = " ".join(content.strip().split("\n", 1)[0].split())
    limit = km.TITLE_FROM_CONTENT_CHARS
    expected = first_line if len(first_line) <= limit else first_line[:limit - 1].rstrip() + "…"
    assert km._title_from_content(content) == expected


def test_a_remembered_space_is_normalized_and_a_bad_one_still_refused():
    assert km.normalize_space("/team/notes/") == "team/notes"
    assert km.normalize_space("/team/notes/") == "team/notes"
    for bad in ("a//b", "x y", "../up", 3, None):
        with pytest.raises(km.InvalidArgumentError):
            km.normalize_space(bad)


def test_random_ids_ascend_from_a_random_start_so_new_names_land_together():
    """``RandomIds`` (the default) makes ids in order from a random start (new items then go to one place in
    the store's index of names, not all over it): still ten hex digits, unique, and a new factory starts
    elsewhere; past the last ten-digit id it starts again at random, never growing an eleventh digit."""
    ids = km.RandomIds()
    made = [ids.new_id() for _ in range(5000)]
    assert all(len(made_id) == 10 and set(made_id) <= set("0123456789abcdef") for made_id in made)
    assert made == sorted(made) and len(set(made)) == len(made)
    assert int(made[-1], 16) - int(made[0], 16) <= 16 * len(made)
    assert km.RandomIds().new_id() not in made
    steps = {int(later, 16) - int(earlier, 16) for earlier, later in zip(made, made[1:])}
    assert steps == set(range(1, 17))                   # every step of 1..16 is drawn, from a buffer of them
    ids._next = km.RandomIds._SPAN - 1
    assert [len(ids.new_id()) for _ in range(3)] == [10, 10, 10]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_makes_no_id_its_parent_makes():
    """The steps are drawn in batches: a child forked mid-batch starts from a random point of its own, so it
    never repeats the ids its parent goes on to make."""
    ids = km.RandomIds()
    ids.new_id()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:                                        # the child: its next ids, to the parent, then out
        os.close(reader)
        os.write(writer, " ".join(ids.new_id() for _ in range(50)).encode())
        os._exit(0)
    os.close(writer)
    parents = {ids.new_id() for _ in range(50)}
    with os.fdopen(reader) as stream:
        childs = set(stream.read().split())
    os.waitpid(pid, 0)
    assert len(childs) == 50 and not childs & parents


def test_names_of_ascending_ids_that_collide_get_a_suffix_in_bulk_and_one_by_one(tmp_path):
    path = str(tmp_path / "store.db")
    with km.Memory(path, ids=km.SequentialIds()) as first:
        one_by_one = [first.remember(f"{word} one", space="s") for word in WORDS[:3]]
    with km.Memory(path, ids=km.SequentialIds()) as second:           # the same ids again: every name is taken
        together = second.remember_many([{"content": f"{word} two", "space": "s"} for word in WORDS[:3]])
        assert len(set(one_by_one + together)) == 6
        assert [second.get(kref)["content"] for kref in together] == [f"{word} two" for word in WORDS[:3]]
