"""Issue 19: ``remember_many`` (one transaction per call), the recall snapshot kept in the store (read by a
fresh process instead of a rebuild), and a Dream State whose duplicate search is one pass.

The snapshot tests compare a process that starts from the snapshot with the truth computed by brute force
from what was written (which items are current, live and contain the query's word), and with a process
that rebuilt its index from the tables; kills and damaged bytes are real (SIGKILL, bytes changed in the
file through SQLite)."""

from __future__ import annotations

import array
import collections
import dataclasses
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "data", "store_0_2_0.db")
WORDS = "harbor lantern copper meadow violet quarry saffron timber glacier orchard falcon ember".split()


def child(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python process that imports this checkout's module."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


@pytest.fixture
def small_snapshots(monkeypatch):
    """Snapshots for stores of any size (the default skips stores under 2,000 memories)."""
    monkeypatch.setattr(km.SQLiteGraph, "RECALL_SNAPSHOT_MIN_DOCS", 1)
    monkeypatch.setattr(km.SQLiteGraph, "RECALL_SNAPSHOT_REFRESH", 0.0)


def manifest(path: str) -> dict | None:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'recall_snapshot'").fetchone()
    return json.loads(row[0]) if row else None


# -- remember_many ------------------------------------------------------------------------------------------

def test_remember_many_stores_what_remember_would(tmp_path):
    records = ["I live in Berlin.", {"content": "Actually I moved to Munich last month.", "stack": True},
               {"content": "The deploy window is Friday.", "key": "deploy", "space": "ops"},
               {"content": "The deploy window is Thursday.", "key": "deploy", "space": "ops"},
               {"content": "Ann likes tea", "metadata": {"speaker": "Ann"}, "tags": ["drink"], "kind": "fact"}]
    one = km.Memory(path=str(tmp_path / "one.db"), ids=km.SequentialIds(),
                    clock=km.ManualClock("2026-01-01T00:00:00Z", tick=1.0))
    many = km.Memory(path=str(tmp_path / "many.db"), ids=km.SequentialIds(),
                     clock=km.ManualClock("2026-01-01T00:00:00Z", tick=1.0))
    looped = []
    for record in records:
        arguments = {"content": record} if isinstance(record, str) else dict(record)
        looped.append(one.remember(arguments.pop("content"), **arguments))
    assert many.remember_many(records) == looped
    assert looped[1].endswith("?r=2") and looped[3].endswith("?r=2")    # stacked and keyed like remember
    assert list(one.backend.export_records()) == list(many.backend.export_records())
    assert many.recall("where do I live", limit=1)[0]["content"].startswith("Actually I moved to Munich")


def _tables(path: str) -> list[str]:
    """Every row of a store (the recall snapshot and the meta rows about it aside), as SQL text."""
    with sqlite3.connect(path) as conn:
        return [line for line in conn.iterdump() if "recall_snapshot" not in line and 'INSERT INTO "meta"' not in line]


class _SameId:
    """An id factory that always hands out the same id (every new name is then taken but the first)."""

    def new_id(self) -> str:
        return "same"


def test_remember_many_leaves_the_same_rows_as_a_remember_loop(tmp_path):
    """remember_many holds a new item's rows and inserts them together: the tables must come out exactly as
    a remember() loop leaves them (ids, names taken by an earlier process, threads, tags, the change log)."""
    records = [f"{WORDS[n % 12]} note {n}" for n in range(30)]
    records += [{"content": f"turn {n} about {WORDS[n % 5]}", "space": "chat", "kind": "message",
                 "metadata": {"speaker": "Ann" if n % 2 else "Bo", "session": n % 3}} for n in range(12)]
    records += [{"content": "tagged harbor", "tags": ["a", "b", "a"], "evidence_level": "unverified"},
                {"content": "sourced harbor", "source": "https://example.com/a"},
                {"content": "with a file", "artifacts": [{"name": "doc", "location": "/tmp/doc.txt"}]},
                {"content": "keyed harbor", "key": "k1"}, {"content": "keyed harbor again", "key": "k1"},
                {"content": "I live in Berlin."}, {"content": "I live in Munich now.", "stack": True},
                f"{WORDS[0]} note 0", "the password is hunter2-secret!"]
    stores = {}
    for name in ("loop", "many"):
        path = str(tmp_path / f"{name}.db")
        # the second process's sequential ids collide with the first's names; the third's with its own
        for ids in (km.SequentialIds(), km.SequentialIds(), _SameId()):
            memory = km.Memory(path=path, ids=ids, clock=km.ManualClock(tick=0.5))
            memory.recall("harbor")          # an index in memory, kept up to date by the writes
            if name == "loop":
                krefs = []
                for record in records:
                    arguments = {"content": record} if isinstance(record, str) else dict(record)
                    krefs.append(memory.remember(arguments.pop("content"), **arguments))
            else:
                krefs = memory.remember_many(records[:25]) + memory.remember_many(records[25:])
            hits = [hit["kref"] for hit in memory.recall("harbor turn note", limit=50)]
            memory.close()
            stores.setdefault(name, []).append((krefs, hits))
        stores[name].append(_tables(path))
    assert stores["many"] == stores["loop"]
    assert any("-2.memory" in kref for kref in stores["many"][1][0])      # a taken name was noticed
    assert any("memory-same-3.memory" in kref for kref in stores["many"][2][0])
    assert any("FOLLOWS" in line for line in stores["many"][3])


def test_a_failing_record_leaves_nothing_of_the_batch(tmp_path):
    memory = km.Memory(path=str(tmp_path / "m.db"), credentials="refuse")
    memory.remember("kept from before the batch")
    secret = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    with pytest.raises(km.CredentialDetectedError) as caught:
        memory.remember_many(["batch one harbor", "batch two harbor", f"the stripe key is {secret}"])
    assert caught.value.written == []
    assert [hit["content"] for hit in memory.recall("harbor", limit=10)] == []
    assert len(memory.items()) == 1
    memory.close()
    reopened = km.Memory(path=str(tmp_path / "m.db"))
    assert [reopened.get(item["item_kref"])["content"] for item in reopened.items()] == ["kept from before the batch"]
    assert reopened.remember_many(["batch one harbor"])    # the store is usable afterwards
    assert len(reopened.recall("harbor", limit=5)) == 1


def test_remember_many_checks_every_record_before_writing(tmp_path):
    memory = km.Memory(path=str(tmp_path / "m.db"))
    cases = [(["fine", {"content": 3}], "record 1"), (["fine", {"text": "x"}], "record 1 has unknown field"),
             ([{"content": "x", "space": "../up"}], "record 0"), (["fine", 7], "record 1 must be a string"),
             (["a", {"content": "b", "metadata": {"event_date": "not a date"}}], "record 1")]
    for records, message in cases:
        with pytest.raises(km.InvalidArgumentError, match=message):
            memory.remember_many(records)
    with pytest.raises(km.InvalidArgumentError):
        memory.remember_many("one string is not a list of records")
    with pytest.raises(km.NotFoundError, match="record 0"):
        memory.remember_many([{"content": "x", "item": "kref://other/notes/a.memory"}])
    assert memory.items() == []
    assert memory.remember_many([]) == []


def test_remember_many_progress_and_a_second_process_at_the_same_time(tmp_path):
    path = str(tmp_path / "shared.db")
    seen = []
    km.Memory(path=path).remember_many([f"parent {n} orchard" for n in range(2500)],
                                       progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1000, 2500), (2000, 2500), (2500, 2500)]
    code = """
        import sys, kumiho_memory as km
        m = km.Memory(path=sys.argv[1])
        for start in range(0, 600, 200):
            m.remember_many([f"child {n} meadow" for n in range(start, start + 200)])
        m.close()
    """
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), path],
                               env={**os.environ, "PYTHONPATH": ROOT})
    memory = km.Memory(path=path)
    for start in range(0, 600, 200):
        memory.remember_many([f"parent again {n} quarry" for n in range(start, start + 200)])
    assert process.wait(timeout=120) == 0
    contents = [memory.get(item["item_kref"])["content"] for item in memory.items()]
    assert len(contents) == len(set(contents)) == 2500 + 600 + 600
    assert len(memory.recall("meadow", limit=1000)) == 600          # this process's index caught up


def test_the_manager_and_the_cli_store_many(tmp_path):
    import asyncio

    path = str(tmp_path / "m.db")
    manager = km.UniversalMemoryManager(memory=km.Memory(path=path))
    krefs = asyncio.run(manager.remember_many(["manager one copper", {"content": "manager two copper"}]))
    assert len(krefs) == 2
    lines = tmp_path / "records.jsonl"
    lines.write_text('"cli one falcon"\n{"content": "cli two falcon", "space": "birds"}\n\n'
                     '{"content": "cli three falcon", "tags": ["x"]}\n')
    done = subprocess.run([sys.executable, os.path.join(ROOT, "kumiho_memory.py"), "--db", path, "--json",
                           "remember-many", str(lines), "--batch-size", "2"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stored"] == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text('"good one ember"\n{"content": 5}\n')
    failed = subprocess.run([sys.executable, os.path.join(ROOT, "kumiho_memory.py"), "--db", path,
                             "remember-many", str(bad)], capture_output=True, text=True, timeout=120)
    assert failed.returncode == 2 and "record 1" in failed.stderr
    memory = km.Memory(path=path)
    assert len(memory.recall("falcon", limit=10)) == 3
    assert memory.recall("ember", limit=10) == []                 # the failing batch stored nothing


# -- the recall snapshot ----------------------------------------------------------------------------------

def brute_force(truth: dict[str, dict], word: str) -> set[str]:
    """Items whose current text holds ``word`` and that are neither deprecated nor forgotten."""
    return {item for item, state in truth.items() if state["live"] and word in state["text"].split()}


def recalled(memory: km.Memory, word: str) -> set[str]:
    return {hit["item_kref"] for hit in memory.recall(word, limit=1000)}


def test_a_fresh_process_starts_from_the_snapshot_and_agrees_with_a_rebuild(tmp_path, small_snapshots):
    path = str(tmp_path / "m.db")
    memory = km.Memory(path=path)
    memory.remember_many([" ".join(random.Random(n).choices(WORDS, k=6)) for n in range(300)])
    before = {word: [hit["kref"] for hit in memory.recall(word, limit=20)] for word in WORDS}
    assert manifest(path) is not None and manifest(path)["seq"] > 0        # written after the first build
    memory.close()
    fresh = km.Memory(path=path)
    assert {word: [hit["kref"] for hit in fresh.recall(word, limit=20)] for word in WORDS} == before
    assert fresh.backend._snapshot_seq == manifest(path)["seq"]             # it was read, not rebuilt
    rebuilt = km.Memory(path=path)
    rebuilt.backend.rebuild_recall_index()
    assert {word: [hit["kref"] for hit in rebuilt.recall(word, limit=20)] for word in WORDS} == before
    run = child("""
        import sys, json, kumiho_memory as km
        m = km.Memory(path=sys.argv[1])
        print(json.dumps([h["kref"] for h in m.recall("harbor", limit=20)]))
    """, path)
    assert json.loads(run.stdout) == before["harbor"], run.stderr


def test_random_changes_across_two_processes_and_reopens_match_brute_force(tmp_path, small_snapshots):
    """Writes, revisions, forgets, deprecations and tag moves by two writers; each check opens the store
    afresh (snapshot + change log) and compares every word's recall with the truth."""
    path = str(tmp_path / "m.db")
    rng = random.Random(19)
    writers = [km.Memory(path=path), km.Memory(path=path)]
    truth: dict[str, dict] = {}
    for step in range(240):
        memory = rng.choice(writers)
        live = [item for item, state in truth.items() if state["live"]]
        action = rng.random()
        if action < 0.5 or not live:
            text = " ".join(rng.choices(WORDS, k=rng.randint(2, 6)))
            kref = memory.remember(text, space=rng.choice(["a", "b/c"]))
            truth[km.Kref.parse(kref).item_kref().__str__()] = {"text": text, "live": True}
        elif action < 0.65:
            item = rng.choice(live)
            text = " ".join(rng.choices(WORDS, k=3))
            memory.remember(text, item=item)
            truth[item]["text"] = text
        elif action < 0.75:
            item = rng.choice(live)
            memory.forget(item)
            truth[item]["live"] = False
        elif action < 0.85:
            item = rng.choice(live)
            memory.deprecate(item)
            truth[item]["live"] = False
        else:
            memory.tag(rng.choice(live), "published")    # the newest revision: what recall shows anyway
        if step % 60 == 59:
            if step == 119:
                writers[0].backend.save_recall_snapshot(wait=True)
            reopened = km.Memory(path=path)
            for word in WORDS:
                assert recalled(reopened, word) == brute_force(truth, word), (step, word)
            reopened.close()
    run = child("""
        import sys, json, kumiho_memory as km
        km.SQLiteGraph.RECALL_SNAPSHOT_MIN_DOCS = 1
        m = km.Memory(path=sys.argv[1])
        print(json.dumps({w: sorted(h["item_kref"] for h in m.recall(w, limit=1000)) for w in sys.argv[2:]}))
    """, path, *WORDS)
    assert json.loads(run.stdout) == {word: sorted(brute_force(truth, word)) for word in WORDS}, run.stderr


def made_up_words(count: int, seed: int) -> list[str]:
    """Distinct three-syllable words whose stems are distinct too (so each is its own index term)."""
    rng, words, stems = random.Random(seed), [], set()
    while len(words) < count:
        word = "".join(rng.choice("bdfgkmnprtvz") + rng.choice("aiou") for _ in range(3))
        if km.stem(word) not in stems:
            stems.add(km.stem(word))
            words.append(word)
    return words


def test_a_vocabulary_of_many_dictionary_rows_is_looked_up_exactly_across_processes(tmp_path, small_snapshots):
    """1,500 words fill a dozen rows of the stored term dictionary: a fresh process finds every word, the first
    and last of each row included, and none that is not there; another process adds words and forgets
    memories, and the dictionary it stores whole again is read exactly by the next."""
    path = str(tmp_path / "m.db")
    vocabulary, rng = made_up_words(1_600, seed=5), random.Random(6)
    old, new = vocabulary[:1_500], vocabulary[1_500:]
    memory = km.Memory(path=path)
    texts = [" ".join(rng.sample(old, 5)) for _ in range(800)] + [" ".join(old[start:start + 5])
                                                                   for start in range(0, 1_500, 5)]
    krefs = memory.remember_many(texts)
    truth = {str(km.Kref.parse(kref).item_kref()): {"text": text, "live": True} for kref, text in zip(krefs, texts)}
    memory.recall(old[0])                    # builds the index and stores it
    memory.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM recall_terms").fetchone()[0] >= 12
    ordered = sorted(old)
    probes = sorted(set(ordered[::7]) | set(ordered[127::128]) | set(ordered[::128]) | set(ordered[-3:]))
    code = """
        import json, sys, kumiho_memory as km
        km.SQLiteGraph.RECALL_SNAPSHOT_MIN_DOCS = 1
        m = km.Memory(path=sys.argv[1])
        found = {word: sorted(hit["item_kref"] for hit in m.recall(word, limit=1000)) for word in sys.argv[2:]}
        print(type(m.backend._recall.index._source).__name__, json.dumps(found))
    """
    absent = ["aaaa", "zzzzzz", ordered[0][:-1], ordered[-1] + "x"]
    run = child(code, path, *probes, *absent)
    assert run.returncode == 0, run.stderr
    source, text = run.stdout.split(" ", 1)
    assert source == "_SnapshotRows"
    assert json.loads(text) == {word: sorted(brute_force(truth, word)) for word in probes + absent}
    writer = child("""
        import json, sys, kumiho_memory as km
        km.SQLiteGraph.RECALL_SNAPSHOT_MIN_DOCS, km.SQLiteGraph.RECALL_SNAPSHOT_REFRESH = 1, 0.0
        m = km.Memory(path=sys.argv[1])
        for kref in json.loads(sys.argv[-1]):
            m.forget(kref)                       # (drops the stored index: it may name the forgotten words)
        m.close()                                # ... and stores a new one
        m = km.Memory(path=sys.argv[1])
        m.recall(sys.argv[2])                    # read from the stored index, which it then rewrites in part
        added = m.remember_many([" ".join(sys.argv[2 + n:7 + n]) for n in range(0, 100, 5)])
        print(json.dumps(added), m.backend.save_recall_snapshot(wait=True))
    """, path, *new, json.dumps([str(km.Kref.parse(kref).item_kref()) for kref in krefs[:40]]))
    assert writer.returncode == 0, writer.stderr
    added, stored = writer.stdout.rsplit(" ", 1)
    assert stored.strip() == "True"
    for kref in krefs[:40]:
        truth[str(km.Kref.parse(kref).item_kref())]["live"] = False
    for n, kref in enumerate(json.loads(added)):
        truth[str(km.Kref.parse(kref).item_kref())] = {"text": " ".join(new[5 * n:5 * n + 5]), "live": True}
    everything = probes + new[::3] + absent
    run = child(code, path, *everything)
    source, text = run.stdout.split(" ", 1)
    assert source == "_SnapshotRows", run.stderr
    assert json.loads(text) == {word: sorted(brute_force(truth, word)) for word in everything}


def test_a_damaged_snapshot_is_rebuilt_never_served(tmp_path, small_snapshots):
    path = str(tmp_path / "m.db")
    memory = km.Memory(path=path)
    texts = [" ".join(random.Random(n).choices(WORDS, k=5)) for n in range(200)]
    memory.remember_many(texts)
    expected = {word: recalled(memory, word) for word in WORDS}
    memory.close()
    for part in ("index.term_blocks", "index.block_ends", "index.slot_doc", "doc_item", "state"):
        with sqlite3.connect(path) as conn:
            data = bytearray(conn.execute("SELECT data FROM recall_snapshot WHERE name = ?", (part,)).fetchone()[0])
            data[len(data) // 2] ^= 0xFF
            conn.execute("UPDATE recall_snapshot SET data = ? WHERE name = ?", (bytes(data), part))
        reopened = km.Memory(path=path)
        assert {word: recalled(reopened, word) for word in WORDS} == expected, part
        assert reopened.backend._snapshot_seq is not None       # rebuilt and stored again
        reopened.close()
        fresh = km.Memory(path=path)
        fresh.recall("harbor")
        assert fresh.backend._snapshot_unusable is False       # the rewritten one passes its checks
        fresh.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '{not json' WHERE key = 'recall_snapshot'")
    assert {word: recalled(km.Memory(path=path), word) for word in WORDS} == expected


def term_id(path: str, word: str) -> int:
    """A word's term id, read from the stored term dictionary: rows of terms in alphabetical order, each their
    4-byte ids, then their names one a line."""
    with sqlite3.connect(path) as conn:
        shape = conn.execute("SELECT data FROM recall_snapshot WHERE name = 'index.term_blocks'").fetchone()[0]
        shape = json.loads(shape)
        rows = conn.execute("SELECT id, data FROM recall_terms ORDER BY id").fetchall()
    for block, data in rows:
        size = min(shape["block"], shape["terms"] - block * shape["block"])
        names, ids = data[4 * size:].decode().split("\n"), array.array("i", data[:4 * size])
        if km.stem(word) in names:
            return ids[names.index(km.stem(word))]
    raise KeyError(word)


@pytest.mark.parametrize("damage", ["flip a postings byte", "drop a postings row", "flip a forward byte",
                                    "forward row from elsewhere", "drop the postings table", "flip a terms byte",
                                    "drop a terms row", "flip a term heads byte"])
def test_a_damaged_row_read_on_demand_is_rebuilt_never_served(tmp_path, small_snapshots, damage):
    """Postings and forward blocks are fetched when a query needs them, so the damage is found mid-query: that
    query and every later one are answered from a rebuild, and the snapshot is stored again."""
    path = str(tmp_path / "m.db")
    memory = km.Memory(path=path)
    texts = [" ".join(random.Random(n).sample(WORDS, 5)) for n in range(600)]     # blocks of one size
    krefs = memory.remember_many(texts)
    pairs = [f"{one} {other}" for one in WORDS for other in WORDS if one < other]   # scored from the forward index
    expected = {query: [hit["kref"] for hit in memory.recall(query, limit=5)] for query in WORDS + pairs}
    memory.close()
    table, key = ("recall_postings", term_id(path, "harbor")) if "postings" in damage else \
        ("recall_terms", 0) if "terms" in damage else ("recall_term_heads", 0) if "heads" in damage else \
        ("recall_forward", 2)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM recall_forward").fetchone()[0] >= 4   # 32 slots a block
        if damage.startswith("flip"):
            data = bytearray(conn.execute(f"SELECT data FROM {table} WHERE id = ?", (key,)).fetchone()[0])
            data[len(data) // 3] ^= 0x10
            conn.execute(f"UPDATE {table} SET data = ? WHERE id = ?", (bytes(data), key))
        elif damage.startswith("drop a"):
            conn.execute(f"DELETE FROM {table} WHERE id = ?", (key,))
        elif damage.startswith("forward row"):         # a whole row of the right size and CRC, but block 1's
            conn.execute("UPDATE recall_forward SET (crc, data) = (SELECT crc, data FROM recall_forward WHERE id = 1) "
                         "WHERE id = 2")
        else:
            conn.execute("DROP TABLE recall_postings")
    reopened = km.Memory(path=path)
    assert {query: [hit["kref"] for hit in reopened.recall(query, limit=5)] for query in expected} == expected
    reopened.forget(krefs[70])              # unindexing it reads its slot's forward entries: block 2
    truth = {str(km.Kref.parse(kref).item_kref()): {"text": text, "live": n != 70}
             for n, (kref, text) in enumerate(zip(krefs, texts))}
    assert {word: recalled(reopened, word) for word in WORDS} == {word: brute_force(truth, word) for word in WORDS}
    assert reopened.backend._recall.index._source is None          # rebuilt from the tables
    reopened.close()
    fresh = km.Memory(path=path)
    assert {word: recalled(fresh, word) for word in WORDS} == {word: brute_force(truth, word) for word in WORDS}
    assert fresh.backend._recall.index._source is not None         # the stored one is whole again
    fresh.close()


@pytest.mark.parametrize("rewrite", ["save", "rebuild"])
def test_a_snapshot_rewritten_by_another_process_between_two_queries(tmp_path, small_snapshots, rewrite):
    """A reader fetches postings on demand from the snapshot it started from; another process writes and stores
    a new snapshot (its changed rows only, or every row renumbered by a rebuild); the reader's next query,
    on words it has not fetched yet, must see the new writes and none of the other snapshot's rows."""
    path = str(tmp_path / "m.db")
    first = WORDS[:6]
    writer = km.Memory(path=path)
    texts = [" ".join(random.Random(n).choices(first, k=4)) for n in range(400)]
    writer.remember_many(texts)
    writer.recall("harbor")                       # builds the index and stores the snapshot
    writer.close()
    reader = km.Memory(path=path)
    truth = {km.Kref.parse(hit["kref"]).item_kref().__str__(): {"text": hit["content"], "live": True}
             for hit in reader.recall(" ".join(first), limit=1000)}
    assert len(truth) == 400 and reader.backend._recall.index._source is not None
    reader.backend._recall.index._source.cache.clear()     # nothing fetched yet, as in a fresh reader
    generation = manifest(path)["generation"]
    run = child("""
        import sys, random, kumiho_memory as km
        km.SQLiteGraph.RECALL_SNAPSHOT_MIN_DOCS = 1
        m = km.Memory(path=sys.argv[1])
        m.recall("harbor")
        words = sys.argv[3:]
        for n in range(300):
            kref = m.remember(" ".join(random.Random(1000 + n).choices(words, k=4)))
            print(kref, flush=True)
        if sys.argv[2] == "save":
            assert m.backend.save_recall_snapshot(wait=True)
        else:
            m.backend.rebuild_recall_index()
        m.close()
    """, path, rewrite, *WORDS[4:])
    assert run.returncode == 0, run.stderr
    for n, kref in enumerate(run.stdout.split()):
        truth[km.Kref.parse(kref).item_kref().__str__()] = {
            "text": " ".join(random.Random(1000 + n).choices(WORDS[4:], k=4)), "live": True}
    assert manifest(path)["generation"] > generation
    for word in WORDS:
        assert recalled(reader, word) == brute_force(truth, word), (rewrite, word)
    assert reader.backend._snapshot_seq == manifest(path)["seq"]    # it noticed, and read the new snapshot
    kref = reader.remember("harbor lantern copper ember")        # and the reader can still write and store
    truth[km.Kref.parse(kref).item_kref().__str__()] = {"text": "harbor lantern copper ember", "live": True}
    assert reader.backend.save_recall_snapshot(wait=True)       # only the rows that changed
    reader.close()
    fresh = km.Memory(path=path)
    for word in WORDS:
        assert recalled(fresh, word) == brute_force(truth, word), (rewrite, word)
    assert fresh.backend._recall.index._source is not None


def test_a_process_over_the_snapshot_keeps_a_bounded_cache(tmp_path, small_snapshots, monkeypatch):
    """Postings and forward blocks fetched from the snapshot are kept up to a budget, the least recently used
    dropped first; dropped ones are fetched again and give the same results."""
    path = str(tmp_path / "m.db")
    memory = km.Memory(path=path)
    memory.remember_many([" ".join(random.Random(n).choices(WORDS, k=6)) for n in range(1500)])
    expected = {word: recalled(memory, word) for word in WORDS}
    memory.close()
    monkeypatch.setattr(km.RecallIndex, "CACHE_BYTES", 20_000)
    small = km.Memory(path=path)
    for _ in range(2):
        assert {word: recalled(small, word) for word in WORDS} == expected
        cache = small.backend._recall.index._source.cache
        assert 0 < cache.size <= 20_000 + max(entry[1] for entry in cache._entries.values())
    small.close()


_FLAG_OPERATION = st.tuples(st.sampled_from(["add", "discard", "update"]),
                            st.lists(st.one_of(st.integers(0, 300), st.integers(-5, -1),
                                               st.integers(10**6, 3 * 10**6)),
                                     max_size=8))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(first=st.lists(_FLAG_OPERATION, max_size=25), second=st.lists(_FLAG_OPERATION, max_size=10),
       start=st.lists(st.integers(0, 2000), max_size=40))
def test_the_current_sets_behave_as_the_sets_they_replace(first, second, start):
    """Recall's current and live sets hold a byte per revision id (``_DocFlags``); against Python sets under
    random adds, discards and updates (ids past the flags, negative ones, a snapshot's sorted start), and
    their union."""
    flags, truth = [km._DocFlags(start), km._DocFlags()], [set(start), set()]
    for which, operations in enumerate((first, second)):
        for name, docs in operations:
            for target in (flags[which], truth[which]):
                if name == "update":
                    target.update(docs)
                else:
                    for doc in docs:
                        getattr(target, name)(doc)
    for one, expected in zip(flags, truth):
        assert len(one) == len(expected) and list(one) == sorted(expected)
        assert all((doc in one) == (doc in expected) for doc in range(-6, 2100))
        assert all(doc in one for doc in expected) and "1" not in one
        # the parts a search loop tests membership with, inline (``_DocFlags.parts``), say the same
        for members in (one, expected):
            bits, top, rest = km._DocFlags.parts(members)
            probes = [*range(-6, 2100), *expected, 10**6, 3 * 10**6 + 1]
            assert [(bits[doc] == 1 if 0 <= doc < top else doc in rest) for doc in probes] == \
                [doc in expected for doc in probes]
    joined = km._DocFlags.union(*flags)
    assert list(joined) == sorted(truth[0] | truth[1]) and len(joined) == len(truth[0] | truth[1])


_KEY = st.one_of(st.integers(0, 400), st.integers(-3, -1), st.integers(5_000, 10**7))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(start=st.dictionaries(st.integers(0, 3000), st.integers(-10**12, 10**12), max_size=40),
       operations=st.lists(st.tuples(st.sampled_from(["set", "pop", "del"]), _KEY, st.integers(0, 99)),
                           max_size=40))
def test_the_per_revision_maps_behave_as_the_dicts_they_replace(start, operations):
    """Recall's per-revision and per-item columns (``_DenseMap``) against a dict: a snapshot's start, sets,
    pops and deletes of ids inside, far past and before the array; floats as well as ints."""
    keys = sorted(start)
    for code, cast in (("q", int), ("d", float)):
        table = km._DenseMap(code, keys, [cast(start[key]) for key in keys])
        truth = {key: cast(value) for key, value in start.items()}
        for name, key, value in operations:
            for target in (table, truth):
                if name == "set":
                    target[key] = cast(value)
                elif name == "pop":
                    assert table.pop(key, "none") == truth.pop(key, "none") if target is table else True
                elif key in truth:
                    del target[key]
                else:
                    with pytest.raises(KeyError):
                        del target[key]
        assert dict(table) == truth and len(table) == len(truth) and sorted(table) == list(table)
        assert all((key in table) == (key in truth) and table.get(key) == truth.get(key)
                   for key in range(-4, 3100))


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(operations=st.lists(st.tuples(st.sampled_from(["touch", "append", "pop"]), st.integers(0, 30),
                                     st.integers(1, 500)), max_size=60))
def test_the_revisions_of_each_item_behave_as_a_dict_of_lists(operations):
    """``_ItemDocs`` (one revision held in a column, lists only for items with more) against a dict of
    lists, and through the snapshot's group layout and back."""
    table, truth = km._ItemDocs(), {}
    for name, item, doc in operations:
        if name == "touch":
            table.touch(item)
            truth.setdefault(item, [])
        elif name == "append":
            table.append(item, doc)
            truth.setdefault(item, []).append(doc)
        else:
            assert table.pop(item, None) == truth.pop(item, None)
    assert {item: table.get(item) for item in table} == truth and len(table) == len(truth)
    layout = km.array.array("q", km._RecallState._group_bytes(table))
    again = km._RecallState._groups(layout, km._ItemDocs)
    assert {item: again[item] for item in again} == truth


def stored_snapshot_of_20_000(tmp_path, seed: int, spaces: int = 3) -> str:
    """A file store of 20,000 random eight-word memories over ``spaces`` spaces (s0, s1, ... each under
    ``all``), its recall snapshot stored."""
    path = str(tmp_path / "m.db")
    memory = km.Memory(path=path)
    rng = random.Random(seed)
    for start in range(0, 20_000, 2_000):
        memory.remember_many([{"content": " ".join(rng.choices(WORDS, k=8)), "space": f"all/s{n % spaces}"}
                              for n in range(start, start + 2_000)])
    memory.recall("harbor", limit=5)                       # builds and stores the snapshot
    memory.close()
    return path


def test_a_sparse_current_set_stays_a_set_and_a_dense_one_becomes_flags():
    """Flags cost a byte per id up to the largest: a set of a few ids spread over a large store (a space among
    thousands) keeps them as a set; ids added in order (a busy space) move into flags, at most ``DENSITY``
    bytes a member."""
    spread = km._DocFlags()
    for doc in range(0, 1_000_000, 5_000):
        spread.add(doc)
    assert len(spread) == 200 and len(spread.flags) == 0 and list(spread) == list(range(0, 1_000_000, 5_000))
    busy = km._DocFlags()
    for doc in range(0, 100_000, 3):
        busy.add(doc)
    assert len(busy) == 33_334 and len(busy.sparse) < 64 and len(busy.flags) <= km._DocFlags.DENSITY * len(busy)
    joined = km._DocFlags.union(spread, busy)
    assert list(joined) == sorted(set(range(0, 1_000_000, 5_000)) | set(range(0, 100_000, 3)))
    assert len(km._DocFlags(range(0, 1_000_000, 5_000)).flags) == 0


def test_vector_ties_keep_the_newest(tmp_path):
    """More memories than the search depth with the same embedding: the newest are kept, as the final ranking
    orders ties."""
    memory = km.Memory(path=str(tmp_path / "m.db"), clock=km.ManualClock(tick=1.0), ids=km.SequentialIds(),
                       embedder=lambda texts: [[1.0, 0.0, 0.0] for _ in texts])
    memory.remember_many([{"content": f"filler {n}", "space": "other"} for n in range(300)])
    memory.remember_many([{"content": f"same thing {n}", "space": "a"} for n in range(300)])
    found = [hit["content"] for hit in memory.recall("unrelated words", limit=5, space="a")]
    assert found and all(int(text.split()[-1]) >= 250 for text in found), found
    memory.close()


@pytest.mark.parametrize("spaces, bound", [(3, 100), (2_000, 420)])
def test_a_writing_process_holds_a_bounded_share_a_memory(tmp_path, spaces, bound):
    """A fresh process that writes once to a stored snapshot's store and recalls, in one space and over all
    of them, holds per memory the index's slot column and recall's maps as arrays (dicts and lists held several
    hundred bytes more: 0.6 held about 750 and 780, 0.7 about 110 and 340); with a space per ten memories, each
    space's current set stays a small set (flags up to the store's largest id in each would cost 2,000 x 20,000
    bytes)."""
    path = stored_snapshot_of_20_000(tmp_path, seed=8, spaces=spaces)
    run = child("""
        import sys, tracemalloc
        import kumiho_memory as km
        memory = km.Memory(path=sys.argv[1])
        memory.recall("copper", limit=3)
        tracemalloc.start()
        memory.remember("a zeppelin over the quarry", space="all/s1")
        assert memory.recall("zeppelin", limit=1)[0]["content"] == "a zeppelin over the quarry"
        assert memory.recall("zeppelin quarry", limit=1, space="all")[0]["content"] == "a zeppelin over the quarry"
        assert memory.recall("zeppelin", limit=1, space="all/s1")[0]["content"] == "a zeppelin over the quarry"
        cache = memory.backend._recall.index._source.cache.size
        print(tracemalloc.get_traced_memory()[0] - cache)
    """, path)
    assert run.returncode == 0, run.stderr
    held = int(run.stdout.split()[-1])
    assert held / 20_000 < bound, f"{held / 20_000:.0f} bytes a memory"


def test_a_reading_process_holds_a_few_bytes_a_memory_beyond_the_cache(tmp_path):
    """A fresh process that recalls over a stored snapshot keeps per memory the index's slot-to-document column
    and a byte of the current set, measured by tracemalloc in that process (a set of ints held about 70 bytes
    more; 0.7, which also held each slot's length, shortness and forward offset, about 50 in all)."""
    path = stored_snapshot_of_20_000(tmp_path, seed=7)
    run = child("""
        import sys, tracemalloc
        import kumiho_memory as km
        memory = km.Memory(path=sys.argv[1])
        tracemalloc.start()
        memory.recall("copper meadow", limit=10)
        memory.recall("lantern", limit=10, space="all/s1")
        cache = memory.backend._recall.index._source.cache.size
        print(tracemalloc.get_traced_memory()[0] - cache)
    """, path)
    assert run.returncode == 0, run.stderr
    held = int(run.stdout.split()[-1])
    assert held / 20_000 < 36, f"{held / 20_000:.0f} bytes a memory"


def test_a_reader_behind_the_snapshot_does_not_hold_the_vocabulary(tmp_path):
    """A store of 20,000 memories over 8,000 words, one memory written after its snapshot (so a fresh process
    replays the change log, which reads recall's per-revision maps): the reader holds those maps but not the
    vocabulary (0.7 read the whole vocabulary into a dict to replay a change, and held about 150 bytes a
    memory here; this release about 70)."""
    path, vocabulary, rng = str(tmp_path / "m.db"), made_up_words(8_000, seed=3), random.Random(4)
    memory = km.Memory(path=path)
    for start in range(0, 20_000, 4_000):
        memory.remember_many([" ".join(rng.sample(vocabulary, 8)) for _ in range(4_000)])
    memory.recall(vocabulary[0], limit=5)                   # builds and stores the snapshot
    memory.close()
    later = km.Memory(path=path)
    later.remember("a zeppelin over the quarry")
    later.close()
    run = child("""
        import sys, tracemalloc
        import kumiho_memory as km
        memory = km.Memory(path=sys.argv[1])
        tracemalloc.start()
        assert memory.recall("zeppelin", limit=1)[0]["content"] == "a zeppelin over the quarry"
        for word in sys.argv[2:]:
            assert memory.recall(word, limit=10)
        index = memory.backend._recall.index
        print(type(index.term_ids).__name__, tracemalloc.get_traced_memory()[0] - index._source.cache.size)
    """, path, *rng.sample(vocabulary, 40))
    assert run.returncode == 0, run.stderr
    kind, held = run.stdout.split()
    assert kind == "_StoredTerms" and int(held) / 20_000 < 100, f"{int(held) / 20_000:.0f} bytes a memory"


def test_the_bounded_cache_drops_the_least_recently_used_and_empties_the_slots_holding_them():
    """The row cache's order of leaving: a value read by key moves to the back, one read from the slot that
    holds it does not; what leaves takes its size with it and empties its slot; many drops stay cheap."""
    cache = km._BoundedCache(30)
    held: list = [None, None]
    cache.put("a", "A", 10)
    cache.put("b", "B", 10, held_in=(held, 0))
    cache.put("c", "C", 10)
    assert cache.get("a") == "A" and held[0] == "B"      # "a" is now the most recently used, "b" the least
    cache.put("d", "D", 10)
    assert cache.get("b") is None and held == [None, None] and cache.size == 30
    assert [cache.get(key) for key in "acd"] == ["A", "C", "D"]
    cache.put("e", "E", 10, held_in=(held, 1))
    assert cache.get("a") is None and held[1] == "E"     # "a" was read first of the three: it left first
    cache.put("c", "C2", 5)                              # replacing a value replaces its size
    assert cache.size == 25 and cache.get("c") == "C2"
    cache.pop("e")
    assert held[1] is None and cache.size == 15
    for number in range(20_000):                         # the front of the order is never walked over
        cache.put(number, number, 10)
    assert cache.size == 30 and [cache.get(key) for key in (19_997, 19_998, 19_999)] == [19_997, 19_998, 19_999]
    cache.clear()
    assert cache.size == 0 and cache.get(19_999) is None


def test_a_kill_while_the_snapshot_is_written_keeps_the_store_whole(tmp_path, small_snapshots):
    path = str(tmp_path / "m.db")
    memory = km.Memory(path=path)
    memory.remember_many([" ".join(random.Random(n).choices(WORDS, k=8)) for n in range(3000)])
    expected = {word: recalled(memory, word) for word in WORDS[:4]}
    memory.close()
    code = """
        import sys, kumiho_memory as km
        m = km.Memory(path=sys.argv[1])
        print("ready", flush=True)
        while True:
            m.backend.rebuild_recall_index()
    """
    for delay in (0.05, 0.2, 0.45):
        process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), path], stdout=subprocess.PIPE,
                                   env={**os.environ, "PYTHONPATH": ROOT})
        assert process.stdout.readline().strip() == b"ready"
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        reopened = km.Memory(path=path)
        assert {word: recalled(reopened, word) for word in WORDS[:4]} == expected, delay
        reopened.close()


def test_a_store_written_by_the_0_2_release_is_migrated_once(tmp_path, small_snapshots):
    path = str(tmp_path / "old.db")
    with open(FIXTURE, "rb") as source, open(path, "wb") as target:
        target.write(source.read())
    assert manifest(path) is None
    memory = km.Memory(path=path)
    hits = memory.recall("harbor lantern", limit=50)
    assert len(hits) == 50 and all(not hit["deprecated"] for hit in hits)
    assert manifest(path) is not None                      # built once, stored for the next process
    memory.close()
    run = child("""
        import sys, kumiho_memory as km
        km.SQLiteGraph.RECALL_SNAPSHOT_MIN_DOCS = 1
        m = km.Memory(path=sys.argv[1])
        m.recall("harbor")
        print(m.backend._snapshot_seq is not None)
    """, path)
    assert run.stdout.strip() == "True", run.stderr
    done = subprocess.run([sys.executable, os.path.join(ROOT, "kumiho_memory.py"), "--db", path, "--json", "index"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["indexed"] >= 250, done.stderr
    assert "memories indexed" in done.stderr


def test_a_store_written_by_the_0_7_release_is_rebuilt_once_in_this_format(tmp_path, small_snapshots):
    """0.7 kept each slot's length and shortness in snapshot parts (format 3); this release keeps them in the
    forward blocks (format 4). A 0.7 store's snapshot is never misread: the first process rebuilds the index,
    finds what a rebuild from the tables finds, and stores it in this format, which the next process reads."""
    fixture = os.path.join(ROOT, "tests", "data", "store_0_7_0.db")
    paths = [str(tmp_path / f"old{n}.db") for n in range(2)]
    for path in paths:
        with open(fixture, "rb") as source, open(path, "wb") as target:
            target.write(source.read())
    assert manifest(paths[0])["format"] == 3 and manifest(paths[0])["written_by"] == "0.7.0"
    queries = WORDS + ["lantern dark", "harbor lantern relit", "copper meadow violet"]
    migrated = km.Memory(path=paths[0])
    found = {query: recalled(migrated, query) for query in queries}
    assert migrated.backend._recall.index._source is None          # rebuilt, not read
    migrated.close()
    rebuilt = km.Memory(path=paths[1])
    assert rebuilt.backend.rebuild_recall_index()["indexed"] >= 290
    assert {query: recalled(rebuilt, query) for query in queries} == found
    assert len(found["harbor"]) > 50 and any("went dark" in hit["content"] for hit in rebuilt.recall("lantern dark"))
    rebuilt.close()
    assert manifest(paths[0])["format"] == km.SQLiteGraph.RECALL_SNAPSHOT_FORMAT == 4
    run = child("""
        import json, sys, kumiho_memory as km
        km.SQLiteGraph.RECALL_SNAPSHOT_MIN_DOCS = 1
        m = km.Memory(path=sys.argv[1])
        found = {query: sorted(hit["item_kref"] for hit in m.recall(query, limit=1000)) for query in sys.argv[2:]}
        print(type(m.backend._recall.index._source).__name__, json.dumps(found))
    """, paths[0], *queries)
    assert run.returncode == 0, run.stderr
    source, text = run.stdout.split(" ", 1)
    assert source == "_SnapshotRows" and json.loads(text) == {query: sorted(hits) for query, hits in found.items()}


def test_small_and_in_memory_stores_keep_no_snapshot(tmp_path):
    path = str(tmp_path / "small.db")
    memory = km.Memory(path=path)
    memory.remember_many(["a little harbor", "a little lantern"])
    memory.recall("harbor")
    memory.close()
    assert manifest(path) is None
    assert km.Memory().backend.save_recall_snapshot() is False


def test_warm_recall_index_after_a_bulk_load_spares_the_next_process_the_rebuild(tmp_path, small_snapshots):
    """``warm_recall_index`` (which the command line's remember-many runs) stores the recall index a bulk load
    left unbuilt, so a fresh process reads it instead of rebuilding; once stored it has nothing to do."""
    path = str(tmp_path / "bulk.db")
    texts = [f"note {number} about harbor lantern {number % 17}" for number in range(300)]
    with km.Memory(path, ids=km.SequentialIds()) as memory:
        memory.remember_many(texts)
        assert manifest(path) is None                    # the bulk load wrote no snapshot
        assert memory.backend.warm_recall_index() is True
        assert manifest(path) is not None
        assert memory.backend.warm_recall_index() is False
        expected = [hit["kref"] for hit in memory.recall("harbor lantern 5", limit=5)]
    with km.Memory(path) as reopened:
        assert [hit["kref"] for hit in reopened.recall("harbor lantern 5", limit=5)] == expected
        assert reopened.backend._recall.index._source is not None     # read from the stored snapshot
    with km.Memory() as in_memory:
        assert in_memory.backend.warm_recall_index() is False            # nothing to store in memory


def test_a_writer_that_never_recalled_stores_the_index_at_close(tmp_path, small_snapshots):
    """A process that loads memories and exits without recalling (an import script, ``remember_many`` through the
    API) builds and stores the recall index at ``close``, so the next process's first recall reads it instead
    of rebuilding it, and serves what a rebuild serves."""
    path = str(tmp_path / "bulk.db")
    texts = [" ".join(random.Random(n).choices(WORDS, k=6)) for n in range(400)]
    with km.Memory(path, ids=km.SequentialIds()) as memory:
        memory.remember_many(texts)
        assert manifest(path) is None                    # nothing stored while it writes
    with sqlite3.connect(path) as conn:
        newest = conn.execute("SELECT max(seq) FROM changes").fetchone()[0]
    assert manifest(path) is not None and manifest(path)["seq"] == newest
    run = child("""
        import sys, json, kumiho_memory as km
        m = km.Memory(path=sys.argv[1])
        hits = [h["kref"] for h in m.recall("harbor lantern", limit=20)]
        print(json.dumps([hits, m.backend._recall.index._source is not None]))
    """, path)
    hits, from_snapshot = json.loads(run.stdout)
    assert from_snapshot, run.stderr                      # read from the stored index, not rebuilt
    rebuilt = km.Memory(path=path)
    rebuilt.backend.rebuild_recall_index()
    assert [hit["kref"] for hit in rebuilt.recall("harbor lantern", limit=20)] == hits
    rebuilt.close()


def test_a_writer_may_leave_the_index_to_the_next_process(tmp_path, small_snapshots):
    """``store_index_at_close = False`` (a service that must stop fast): close stores nothing, and the next
    process's first recall builds the index and serves what it would have."""
    path = str(tmp_path / "bulk.db")
    with km.Memory(path) as memory:
        memory.backend.store_index_at_close = False
        memory.remember_many([f"note {number} about the harbor" for number in range(80)])
    assert manifest(path) is None
    with km.Memory(path) as fresh:
        assert len(fresh.recall("harbor", limit=100)) == 80
        assert fresh.backend._recall.index._source is None                  # built, not read
    assert manifest(path) is not None                                       # ... and stored by that reader


def test_a_forgotten_word_leaves_the_stored_index_too(tmp_path, small_snapshots):
    """The stored recall index names every word in its term dictionary: ``forget`` deletes it with the memory
    (the next close stores a new one without the word), and a process that built its index before the forget
    and stores it after writes no forgotten word (a term no live memory holds is stored under no name)."""
    path = str(tmp_path / "m.db")
    secret = "zqxcanarypassword"

    def on_disk() -> int:
        return sum(open(name, "rb").read().count(secret.encode())
                   for name in (path, path + "-wal") if os.path.exists(name))

    with km.Memory(path) as memory:
        memory.remember_many([f"note {number} about the harbor" for number in range(300)])
        kref = memory.remember(f"the vault word is {secret}")
    assert manifest(path) is not None and on_disk() > 0          # stored by the writer's close
    with km.Memory(path) as forgetting:
        assert forgetting.forget(kref.split("?")[0])["scrubbed"]
        assert on_disk() == 0 and manifest(path) is None
    assert manifest(path) is not None and on_disk() == 0          # stored again at close, without the word
    with km.Memory(path) as memory:
        assert memory.recall("harbor", limit=5)                # built in memory (no snapshot was read) ...
        kref = memory.remember(f"the vault word is {secret}")
        memory.backend.rebuild_recall_index()                  # ... this one is, with the word in it
        assert on_disk() > 0
        memory.forget(kref.split("?")[0])
        memory.remember_many([f"note {number} about the lantern" for number in range(300)])
        assert memory.recall(secret, limit=5) == []
    assert manifest(path) is not None and on_disk() == 0
    with km.Memory(path) as fresh:
        assert fresh.recall(secret, limit=5) == [] and len(fresh.recall("lantern", limit=500)) == 300


def test_close_with_a_busy_timeout_of_any_size(tmp_path, small_snapshots):
    """``close`` stores the index with any ``busy_timeout`` (it is set to 0 for the attempt and put back as it
    was): an endless one included; a NaN is refused."""
    path = str(tmp_path / "m.db")
    with km.Memory(path) as memory:
        memory.backend.store_index_at_close = False
        memory.remember_many([f"note {number} about the harbor" for number in range(100)])
    memory = km.Memory(path, busy_timeout=float("inf"))
    assert len(memory.recall("harbor", limit=200)) == 100
    memory.remember("one more about the harbor")
    assert len(memory.recall("harbor", limit=200)) == 101
    memory.close()
    assert manifest(path) is not None
    with pytest.raises(km.InvalidArgumentError):
        km.Memory(path, busy_timeout=float("nan"))


def test_close_stores_the_index_only_after_writes_that_left_it_behind(tmp_path, small_snapshots):
    """A reader that never recalled stores nothing at close; nor does a writer whose few writes the next process
    replays from the change log at once (less than ``_snapshot_stale``'s share); a damaged manifest is no
    index, so a writer's close stores a new one."""
    path = str(tmp_path / "m.db")
    with km.Memory(path) as memory:
        memory.remember_many([f"note {number} about the harbor" for number in range(50)])
    stored = manifest(path)
    assert stored is not None
    with km.Memory(path) as reader:                       # reads, never recalls, never writes
        assert len(km.list_memories(reader, limit=5)["memories"]) == 5
    assert manifest(path) == stored
    with km.Memory(path) as writer:                       # a few writes: the next process replays them
        writer.remember("one more note about the lantern")
    assert manifest(path) == stored
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = 'not json' WHERE key = 'recall_snapshot'")
    with km.Memory(path) as writer:
        writer.remember("and another about the copper kettle")
    assert manifest(path) is not None and manifest(path)["seq"] > stored["seq"]
    with km.Memory(path) as fresh:
        assert [hit["content"] for hit in fresh.recall("copper kettle", limit=1)] == \
            ["and another about the copper kettle"]


def test_close_gives_way_to_another_writer_and_the_next_closer_stores_the_index(tmp_path, small_snapshots):
    """While another connection holds the write lock, ``close`` leaves the index unstored rather than wait
    (``save_recall_snapshot(wait=False)``) and still closes; nothing written is lost, and a later writer's close
    stores it."""
    path = str(tmp_path / "m.db")
    memory = km.Memory(path)                              # busy_timeout 30 s: what a write would wait
    memory.remember_many([f"note {number} about the harbor" for number in range(60)])
    blocker = sqlite3.connect(path, timeout=0)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        memory.close()
        assert time.monotonic() - started < 10            # gave way (a busy wait would take 30 s)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert manifest(path) is None
    with km.Memory(path) as writer:
        writer.remember("one more note about the lantern")
    assert manifest(path) is not None
    with km.Memory(path) as fresh:
        assert len(fresh.recall("harbor", limit=100)) == 60


def test_two_writers_closing_at_once_leave_one_index_that_agrees_with_a_rebuild(tmp_path):
    """Two processes load memories into one store at the same time and close together: each may build the
    index, at most one stores it at a time, nothing written is lost, and the stored index serves what a rebuild
    serves (with the default thresholds: 2,400 memories, over ``RECALL_SNAPSHOT_MIN_DOCS``)."""
    path = str(tmp_path / "m.db")
    km.Memory(path).close()                               # the file exists before either writer opens it
    code = """
        import sys, kumiho_memory as km
        memory = km.Memory(path=sys.argv[1])
        for start in range(0, 1200, 200):
            memory.remember_many([f"{sys.argv[2]} note {number} about harbor lantern {number % 13}"
                                  for number in range(start, start + 200)])
        memory.close()
        print("closed")
    """
    writers = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), path, name], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": ROOT})
               for name in ("first", "second")]
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0 and out.strip() == "closed", err
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        newest = conn.execute("SELECT max(seq) FROM changes").fetchone()[0]
    stored = manifest(path)
    assert stored is not None and stored["seq"] <= newest
    fresh = km.Memory(path)
    assert km.list_memories(fresh, limit=1)["total_items"] == 2400          # nothing written is lost
    assert [hit["content"] for hit in fresh.recall("second note 1199", limit=1)] == \
        ["second note 1199 about harbor lantern 3"]
    hits = {word: [hit["kref"] for hit in fresh.recall(f"{word} note harbor lantern 7", limit=30)]
            for word in ("first", "second")}
    assert fresh.backend._snapshot_seq == stored["seq"]    # it read the stored index (then caught up)
    fresh.close()
    rebuilt = km.Memory(path)
    rebuilt.backend.rebuild_recall_index()
    assert {word: [hit["kref"] for hit in rebuilt.recall(f"{word} note harbor lantern 7", limit=30)]
            for word in ("first", "second")} == hits
    rebuilt.close()


def test_recall_in_one_small_space_of_a_large_store_scores_its_documents_and_agrees(tmp_path, small_snapshots,
                                                                                     monkeypatch):
    """Many spaces share their words, so a query's postings are mostly other spaces' documents: a recall in one
    small space scores that space's documents from the forward index (``RecallIndex._search_eligible``),
    in this process and in a fresh one that reads the stored snapshot, and ranks exactly as the postings do
    (the same memories, the same scores, the same order)."""
    rnd = random.Random(7)
    common = ["harbor", "lantern", "meadow", "copper", "willow", "falcon"]
    rare = [f"word{number}" for number in range(400)]
    records = []
    for number in range(3000):
        words = rnd.choices(common, k=rnd.randint(3, 8)) + rnd.sample(rare, rnd.randint(0, 3))
        records.append({"content": " ".join(words), "space": f"user{number % 60}", "kind": "memory"})
    path = str(tmp_path / "spaces.db")
    queries = ["harbor lantern meadow", "copper willow falcon word3", "meadow falcon word17 word250"]
    taken = []
    scored = km.RecallIndex._search_eligible
    monkeypatch.setattr(km.RecallIndex, "_search_eligible",
                        lambda self, *args: taken.append(1) or scored(self, *args))

    def answers(memory):
        return [[(hit["kref"], hit["score"]) for hit in memory.recall(query, limit=10, space=space)]
                for query in queries for space in ("user3", "user41")]

    with km.Memory(path, ids=km.SequentialIds()) as memory:
        memory.remember_many(records)
        here = answers(memory)
        assert taken, "no recall scored the eligible documents in full: the test no longer covers it"
        with monkeypatch.context() as patch:
            patch.setattr(km.RecallIndex, "ELIGIBLE_COST", math.inf)
            assert answers(memory) == here
    assert all(len(ranked) == 10 for ranked in here)
    taken.clear()
    with km.Memory(path) as reopened:
        assert answers(reopened) == here
        assert taken and reopened.backend._recall.index._source is not None     # read from the snapshot
    with km.Memory(path) as reopened, monkeypatch.context() as patch:
        patch.setattr(km.RecallIndex, "ELIGIBLE_COST", math.inf)
        assert answers(reopened) == here


# -- Dream State in one pass --------------------------------------------------------------------------------

def test_dream_state_finds_every_copy_not_only_a_recall_page(tmp_path):
    clock = km.ManualClock("2026-01-01T00:00:00Z", tick=1.0)
    memory = km.Memory(path=str(tmp_path / "m.db"), clock=clock)
    memory.remember_many(["The billing service runs on port 8443."] * 15 +
                         ["The billing service runs on port 8444.", "the BILLING service runs on port 8443!"] +
                         [{"content": "The billing service runs on port 8443.", "space": "elsewhere"}])
    clock.advance(days=30)                # older than the 7-day minimum age
    result = km.DreamState(memory, dry_run=True, max_deprecation_ratio=0.9).run_sync()
    duplicates = [action for action in result["actions"] if action.get("action") == "deprecate"]
    assert len(duplicates) == 15          # 16 copies in one space keep one; the other value and space stay
    keeper = {action["reason"] for action in duplicates}
    assert len(keeper) == 1


def test_remember_many_on_every_backend(memory):
    """The same records give the same memories on each backend; a bad record stops the call."""
    krefs = memory.remember_many(["Ann lives in Lisbon.", {"content": "The deploy window is Friday.", "key": "deploy"},
                                  {"content": "The deploy window is Monday.", "key": "deploy"}])
    assert len(krefs) == 3 and krefs[2].endswith("?r=2")
    assert memory.get(krefs[2].split("?")[0])["content"] == "The deploy window is Monday."
    assert memory.recall("where does Ann live", limit=1)[0]["kref"] == krefs[0]
    with pytest.raises(km.InvalidArgumentError, match="record 1"):
        memory.remember_many(["fine", {"content": ""}])
    assert len(memory.items()) == 2
    atomic = memory.backend.atomic_batches
    forgotten = krefs[0].split("?")[0]
    memory.forget(forgotten)
    with pytest.raises(km.NotFoundError) as caught:
        memory.remember_many(["before the failure", {"content": "revise a forgotten item", "item": forgotten}])
    if atomic:
        assert caught.value.written == [] and len(memory.items()) == 1
    else:                                   # the Kumiho server: written one by one, and said so
        assert len(caught.value.written) == 1 and len(memory.items()) == 2
        assert memory.get(caught.value.written[0])["content"] == "before the failure"


def test_reflect_stores_its_captures_and_edges_together_or_not_at_all(tmp_path):
    import asyncio

    memory = km.Memory(path=str(tmp_path / "m.db"))
    source = memory.remember("The source conversation about the deploy window")
    toolbox = km.MemoryToolbox(km.UniversalMemoryManager(memory=memory))
    captures = [{"type": "decision", "title": "Deploy on Fridays", "content": "We deploy on Fridays."},
                {"type": "fact", "title": "Window", "content": "The deploy window is two hours."}]
    done = asyncio.run(toolbox.call("kumiho_memory_reflect", {"response": "noted", "captures": captures,
                                                              "source_krefs": [source]}))
    assert done["captures_stored"] == 2
    assert all(memory.edges(kref, edge_type="DERIVED_FROM") for kref in done["stored_krefs"])
    before = len(memory.items())
    missing = source.replace(source.split("/")[-1].split(".")[0], "memory-0000000000")
    with pytest.raises(km.NotFoundError):
        asyncio.run(toolbox.call("kumiho_memory_reflect", {"response": "noted", "captures": captures,
                                                           "source_krefs": [missing]}))
    assert len(memory.items()) == before          # the captures written before the bad edge are gone too

_OPERATION = st.one_of(
    st.tuples(st.just("remember"), st.integers(0, 1), st.lists(st.sampled_from(WORDS[:6]), min_size=1, max_size=4)),
    st.tuples(st.just("revise"), st.integers(0, 1), st.lists(st.sampled_from(WORDS[:6]), min_size=1, max_size=3)),
    st.tuples(st.just("forget"), st.integers(0, 1), st.integers(0, 50)),
    st.tuples(st.just("deprecate"), st.integers(0, 1), st.integers(0, 50)),
    st.tuples(st.just("publish"), st.integers(0, 1), st.integers(0, 50)),
    st.tuples(st.just("snapshot"), st.integers(0, 1), st.just(0)),
    st.tuples(st.just("reopen"), st.integers(0, 1), st.just(0)))


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(operations=st.lists(_OPERATION, min_size=1, max_size=30))
def test_the_snapshot_and_its_replay_agree_with_brute_force(tmp_path_factory, small_snapshots, operations):
    """Random writes, revisions, forgets, deprecations, tag moves, snapshot writes and reopens by two
    connections to one file; after each step a third, fresh connection (snapshot plus change log) must
    find exactly the live items holding each word."""
    path = str(tmp_path_factory.mktemp("snap") / "m.db")
    writers = [km.Memory(path=path), km.Memory(path=path)]
    truth: dict[str, dict] = {}
    for action, who, argument in operations:
        memory = writers[who]
        live = sorted(item for item, state in truth.items() if state["live"])
        if action == "remember":
            kref = memory.remember(" ".join(argument))
            truth[str(km.Kref.parse(kref).item_kref())] = {"text": " ".join(argument), "live": True}
        elif action == "revise" and live:
            item = live[len(argument) % len(live)]
            memory.remember(" ".join(argument), item=item)
            truth[item]["text"] = " ".join(argument)
        elif action in ("forget", "deprecate", "publish") and live:
            item = live[argument % len(live)]
            if action == "publish":
                memory.tag(item, "published")
            else:
                (memory.forget if action == "forget" else memory.deprecate)(item)
                truth[item]["live"] = False
        elif action == "snapshot":
            memory.recall("harbor")                  # loads (or builds) its index
            memory.backend.save_recall_snapshot(wait=True)
        elif action == "reopen":
            memory.close()
            writers[who] = km.Memory(path=path)
        fresh = km.Memory(path=path)
        for word in WORDS[:6]:
            assert recalled(fresh, word) == brute_force(truth, word), (action, word)
        fresh.close()
    for memory in writers:
        memory.close()


# -- found by a hostile review ------------------------------------------------------------------------------

def test_a_nested_batch_that_fails_keeps_nothing_of_its_own(tmp_path):
    memory = km.Memory(path=str(tmp_path / "m.db"), credentials="refuse")
    with memory.backend.batch():
        memory.remember("outer record harbor")
        with pytest.raises(km.CredentialDetectedError) as caught:
            memory.remember_many(["many one harbor", "the key is sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"])
        assert caught.value.written == []
        with pytest.raises(RuntimeError):
            with memory.backend.batch():
                memory.remember("inner record harbor")
                raise RuntimeError("inner block fails")
    assert [hit["content"] for hit in memory.recall("harbor", limit=10)] == ["outer record harbor"]
    assert len(km.Memory(path=str(tmp_path / "m.db")).items()) == 1


def test_a_snapshot_of_another_format_is_rebuilt_never_misread(tmp_path, small_snapshots):
    """A format-2 snapshot (every column in one part, no row tables) or one that claims a newer format: its
    parts are never read, the index is rebuilt and stored in this format, the old parts gone."""
    path = str(tmp_path / "m.db")
    memory = km.Memory(path=path)
    memory.remember_many([" ".join(random.Random(n).choices(WORDS, k=5)) for n in range(300)])
    expected = {word: recalled(memory, word) for word in WORDS}
    memory.close()
    for claimed in (2, km.SQLiteGraph.RECALL_SNAPSHOT_FORMAT + 1):
        with sqlite3.connect(path) as conn:
            old = manifest(path)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'recall_snapshot'",
                         (km.canonical_json({**old, "format": claimed}),))
            conn.execute("INSERT INTO recall_snapshot VALUES ('index.impacts', x'00')")    # as format 2 had
            conn.execute("DROP TABLE recall_postings")
        reopened = km.Memory(path=path)
        assert {word: recalled(reopened, word) for word in WORDS} == expected, claimed
        assert reopened.backend._recall.index._source is None
        reopened.close()
        assert manifest(path)["format"] == km.SQLiteGraph.RECALL_SNAPSHOT_FORMAT
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT count(*) FROM recall_snapshot WHERE name = 'index.impacts'").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM recall_postings").fetchone()[0] > 0


def test_a_snapshot_is_labelled_with_the_signals_it_was_built_with(tmp_path, small_snapshots):
    path = str(tmp_path / "m.db")
    memory = km.Memory(path=path)
    memory.remember_many([f"{word} and harbor" for word in WORDS] + ["a thread turn", "lantern reply"])
    memory.recall("harbor")                                 # built and stored with the default signals
    memory.backend.signals = km.RecallSignals(neighbour_terms=0.9)
    memory.backend.save_recall_snapshot(wait=True, replace=True)   # the index in memory is still the old one
    assert manifest(path)["signals"] == km.canonical_json(dataclasses.asdict(km.RecallSignals()))
    memory.close()


def test_after_replay_what_a_process_serves_is_what_a_rebuild_serves(tmp_path, small_snapshots):
    """A turn that stops being a message lends its words no more; forgetting a space's newest event moves the
    space's "now" back (relative times read against it)."""
    path = str(tmp_path / "m.db")
    memory = km.Memory(path=path)
    thread = {"speaker": "Ann", "session_id": "s1"}
    first = memory.remember("we talked about the quarry", metadata=thread)
    middle = memory.remember("saffron is the answer", metadata={**thread, "event_date": "2024-03-01"})
    memory.remember("and then lunch", metadata=thread)
    typo = memory.remember("a typo from the far future", metadata={"event_date": "2099-01-01"})
    memory.recall("quarry")                                 # index built; snapshot stored
    other = km.Memory(path=path)
    other.remember("saffron is the answer", item=middle.split("?")[0], metadata={"event_date": "2024-03-01"})
    other.forget(typo.split("?")[0])
    other.close()
    replayed = km.Memory(path=path)
    rebuilt = km.Memory(path=path)
    rebuilt.backend.rebuild_recall_index()
    for query in ("saffron", "quarry", "lunch"):
        assert [hit["kref"] for hit in replayed.recall(query, limit=5)] == \
            [hit["kref"] for hit in rebuilt.recall(query, limit=5)], query
    state = replayed.backend._recall
    assert max(state.space_newest.values()) < km.parse_instant("2030-01-01T00:00:00Z").timestamp()
    assert first


def test_forget_inside_a_batch_scrubs_after_the_commit(tmp_path):
    memory = km.Memory(path=str(tmp_path / "m.db"))
    kref = memory.remember("a secret number 4471")
    with memory.backend.batch():
        assert memory.forget(kref.split("?")[0])["scrubbed"] is False    # not yet: the batch is open
        memory.remember("something else")
    for suffix in ("", "-wal"):
        data = open(str(tmp_path / "m.db") + suffix, "rb").read() \
            if os.path.exists(str(tmp_path / "m.db") + suffix) else b""
        assert b"4471" not in data


def _reference_terms(title: str, content: str) -> tuple[str, int]:
    """A revision's doc_terms row and token count as the store wrote them before issue 19 (one tokenize), with
    the words it implies (issue 18)."""
    terms = km.tokenize(content) * 2 if title == content else km.tokenize(title + "\n" + content)
    counts = dict(collections.Counter(terms))
    if terms:
        counts.update(km.implied_terms(content, counts))
    return km.canonical_json(counts), len(terms)


def test_remember_many_stores_the_titles_terms_and_redactions_of_the_full_scan(tmp_path, monkeypatch):
    """A batch of long, multi-line, non-ASCII and secret-bearing memories (a secret cut by the title, a title
    given with a secret, keys and supersession): remember_many and a remember() loop leave the same tables,
    and both store what the full scan and the one-pass tokenizer of before would (a clean content and the
    title made from it skip the scan; the title's terms are tokenized apart from the content's)."""
    secret = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
    long_words = " ".join(WORDS * 3)
    records = [long_words, f"{long_words}\nsecond line about {WORDS[2]}", f"  {WORDS[1]}\t\t{WORDS[3]}  \n\nrest",
               "x" * 70 + " pattern of the day", f"{'y' * 60} the key is {secret} and more words after it",
               f"the stripe key is {secret} " + long_words, "Ελληνικά ΣΟΦΙΑΣ και ﬁne café naïve " + long_words,
               "ends with an ellipsis… " + long_words, "数据 库 " * 20, "short line",
               {"content": long_words, "title": f"deploy key {secret}"},
               {"content": f"keyed {long_words}", "key": "k1", "space": "ops"},
               {"content": f"keyed again {long_words}", "key": "k1", "space": "ops"},
               {"content": "I live in Berlin. " + long_words}, {"content": "I live in Munich now.", "stack": True}]
    stores = {}
    for name in ("loop", "many"):
        path = str(tmp_path / f"{name}.db")
        memory = km.Memory(path=path, ids=km.SequentialIds(), clock=km.ManualClock(tick=0.5))
        if name == "loop":
            for record in records:
                arguments = {"content": record} if isinstance(record, str) else dict(record)
                memory.remember(arguments.pop("content"), **arguments)
        else:
            memory.remember_many(records)
        memory.close()
        stores[name] = _tables(path)
    assert stores["many"] == stores["loop"]
    with sqlite3.connect(str(tmp_path / "many.db")) as conn:
        rows = conn.execute("SELECT r.title, r.content, r.token_count, d.terms FROM revisions r "
                            "JOIN doc_terms d ON d.revision_id = r.id ORDER BY r.id").fetchall()
    assert len(rows) == len(records)
    with monkeypatch.context() as patched:          # the full scan: every quick test off
        patched.setattr(km, "_may_hold_credentials", lambda _text: True)
        patched.setattr(km, "_SECRET_WORD_PARTS", ("",))
        for (title, content, token_count, terms), record in zip(rows, records):
            given = {"content": record} if isinstance(record, str) else record
            assert content == km.screen_for_store(given["content"], field="content")
            derived = km._title_from_content(content)       # made from the screened content: a cut secret is gone
            assert title == km.screen_for_store(given.get("title", derived), field="title")
            assert (terms, token_count) == _reference_terms(title, content)
    assert secret not in "".join(row[0] + row[1] for row in rows)
    assert not any("sk_live" in row[0] for row in rows)            # not even the part a title cut leaves
    assert any(row[0].endswith("…") for row in rows) and any("pattern" in row[1] for row in rows)


_TERM_TEXT = st.lists(st.one_of(st.sampled_from(["word", "Word ", " ", "\n", "\t", "…", "ﬁ", "é", "e\u0301", "Σ",
                                                 "İ", "数据", "the", "a", "7", "\u0301", "\u00a0", "running"]),
                                st.text(max_size=8)), max_size=40).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TERM_TEXT, _TERM_TEXT, st.booleans())
def test_the_terms_of_a_revision_are_those_of_its_title_and_content_together(content, title, derived):
    """``doc_terms`` holds the terms of ``title + "\\n" + content`` in canonical JSON, however the title
    and content are tokenized (apart, a derived title's "…" dropped, a one-line memory once)."""
    title = km._title_from_content(content) if derived else title
    for pair in ((title, content), (content, content)):
        assert km.SQLiteGraph._doc_terms(*pair, "memory") == _reference_terms(*pair)


def test_a_handle_that_only_read_builds_nothing_at_close(tmp_path, small_snapshots):
    """Creating a store's tables, or the index that paging adds to an old store, is no memory written: a handle
    that only did that and listed leaves the stored index as it was at close (another process's writes are
    the next closer-that-wrote's to index)."""
    path = str(tmp_path / "m.db")
    fresh = km.Memory(path)                                          # creates the schema
    fresh.close()
    assert manifest(path) is None
    with km.Memory(path) as writer:
        writer.backend.store_index_at_close = False
        writer.remember_many([f"note {number} about the harbor" for number in range(50)])
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX IF EXISTS items_by_created")     # as a store made before paging had it
    with km.Memory(path) as reader:
        assert km.list_memories(reader, limit=5)["total_items"] == 50   # pages: adds the index
        assert not reader.backend._wrote
    assert manifest(path) is None
