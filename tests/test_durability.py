"""Durability of the on-disk store, with real processes: SIGKILL mid-write, two writers on one file, forget
leaving no bytes behind, and damaged or foreign store files refused at open.

Every child is a fresh ``sys.executable`` running a script from this file, with the repo root on its path.
"""

from __future__ import annotations

import io
import json
import os
import random
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import kumiho_memory as km  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals and processes")

CHILD_TIMEOUT = 60.0


# -- helpers ------------------------------------------------------------------------------------------------

def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("KUMIHO_MEMORY_PATH", None)
    return env


def _write_script(folder, name: str, text: str) -> str:
    path = os.path.join(str(folder), name)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def _integrity(path: str) -> str:
    """``PRAGMA integrity_check`` on the file, through a plain sqlite3 connection (not the module)."""
    conn = sqlite3.connect(path)
    try:
        return "\n".join(row[0] for row in conn.execute("PRAGMA integrity_check").fetchall())
    finally:
        conn.close()


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _item_of(kref: str) -> str:
    return kref.split("?", 1)[0]


def _number_of(kref: str) -> int:
    return int(kref.rsplit("?r=", 1)[1])


# ==========================================================================================================
# 1. Crash: SIGKILL while a process remembers in a loop
# ==========================================================================================================

# Prints {"begin": seq, ...} before each call and {"ack": seq, ...} once it has returned, flushing each line,
# so every "ack" the parent reads is a write the store acknowledged. Runs until killed.
CRASH_CHILD = r'''
import json, random, sys
sys.path.insert(0, sys.argv[1])
import kumiho_memory as km

path, round_no, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
KEYS = ("alpha", "beta", "gamma", "delta", "epsilon")

def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()

memory = km.Memory(path)
written, keyed_written = [], []
seq = 0
while True:
    seq += 1
    stamp = "round %d step %d %016x" % (round_no, seq, rng.getrandbits(64))
    pick = rng.random()
    if pick < 0.35 or len(written) < 2:
        tags = ["t%d-%d" % (round_no, seq)] if rng.random() < 0.3 else []
        op = {"op": "raw", "content": "raw note " + stamp, "tags": tags}
        emit({"begin": seq, **op})
        op["kref"] = memory.remember(op["content"], space="crash/raw", tags=tags,
                                     metadata={"round": round_no, "seq": seq})
        written.append(op["kref"])
    elif pick < 0.75 or not keyed_written:
        key = rng.choice(KEYS)
        op = {"op": "keyed", "key": key, "content": "value of %s at %s" % (key, stamp)}
        emit({"begin": seq, **op})
        op["kref"] = memory.remember(op["content"], space="crash/keyed", key=key,
                                     metadata={"round": round_no, "seq": seq})
        written.append(op["kref"])
        keyed_written.append(op["kref"])
    elif pick < 0.85:
        op = {"op": "mark", "kref": rng.choice(written), "tag": "mark%d-%d" % (round_no, seq)}
        emit({"begin": seq, **op})
        memory.tag(op["kref"], op["tag"])
    elif pick < 0.92:
        op = {"op": "publish", "kref": rng.choice(keyed_written)}
        emit({"begin": seq, **op})
        memory.tag(op["kref"], "published")
    else:
        source, target = rng.sample(written, 2)
        op = {"op": "link", "source": source, "target": target}
        emit({"begin": seq, **op})
        memory.link(source, target, "RELATED_TO", metadata={"round": round_no, "seq": seq})
    emit({"ack": seq, **op})
'''


def _run_until_acks(script: str, path: str, round_no: int, seed: int, kill_after: int, delay: float,
                    stderr_path: str) -> tuple[list[dict], list[dict]]:
    """Start the crash child, SIGKILL it ``delay`` seconds after the ``kill_after``-th ack; return (acks,
    in-flight ops). Killed the instant the ack is read, the child is nearly always between calls; a short
    delay lets it run on, so the kill lands inside a write."""
    with open(stderr_path, "wb") as stderr:
        child = subprocess.Popen([sys.executable, script, ROOT, path, str(round_no), str(seed)],
                                 stdout=subprocess.PIPE, stderr=stderr, env=_child_env())
    watchdog = threading.Timer(CHILD_TIMEOUT, child.kill)
    watchdog.start()
    lines: list[bytes] = []
    acks_seen = 0
    try:
        while acks_seen < kill_after:
            line = child.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith(b'{"ack"'):
                acks_seen += 1
        if delay:
            time.sleep(delay)
        still_running = child.poll() is None
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        lines.extend(child.stdout.read().splitlines(keepends=True))  # acks already in the pipe count too
    finally:
        watchdog.cancel()
        child.stdout.close()
    errors = _read_bytes(stderr_path).decode("utf-8", "replace")
    assert still_running and acks_seen == kill_after, (
        f"round {round_no} (seed {seed}): the child stopped after {acks_seen} acks, exit "
        f"{child.returncode}:\n{errors}")
    assert child.returncode == -signal.SIGKILL
    assert errors == "", f"round {round_no} (seed {seed}): the child wrote to stderr:\n{errors}"
    begun: dict[int, dict] = {}
    acks: list[dict] = []
    for line in lines:
        if not line.endswith(b"\n"):
            continue  # cut by the kill: the parent never saw this line complete
        record = json.loads(line)
        if "begin" in record:
            begun[record.pop("begin")] = record
        else:
            seq = record.pop("ack")
            announced = dict(record)
            if record["op"] in ("raw", "keyed"):
                del announced["kref"]                # the kref is what the call returned
            assert begun.pop(seq) == announced
            acks.append(record)
    assert len(begun) <= 1, f"more than one call in flight at the kill: {begun}"
    return acks, list(begun.values())


def _check_store_after_crash(path: str, rounds: list[tuple[list[dict], list[dict]]]) -> None:
    """Everything acknowledged in every round so far is there, exactly once, and the chains are whole."""
    assert _integrity(path) == "ok"
    all_acks = [ack for acks, _ in rounds for ack in acks]
    in_flight = [op for _, ops in rounds for op in ops]
    with km.Memory(path) as memory:
        # every acknowledged revision reads back with what was written
        for ack in all_acks:
            if ack["op"] in ("raw", "keyed"):
                got = memory.get(ack["kref"])
                assert got["content"] == ack["content"], ack
                assert got["kref"] == ack["kref"]
                assert set(ack.get("tags", ())) <= set(got["tags"]), (ack, got["tags"])
            elif ack["op"] == "mark":
                assert ack["tag"] in memory.get(ack["kref"])["tags"], ack
            elif ack["op"] == "link":
                outgoing = memory.edges(ack["source"], direction="outgoing", edge_type="RELATED_TO")
                assert ack["target"] in {edge["target_kref"] for edge in outgoing}, ack

        # keyed items: one item per key, revisions 1..n without gaps, each n>1 superseding exactly n-1
        for key in {ack["key"] for ack in all_acks if ack["op"] == "keyed"}:
            acked = {ack["kref"]: ack["content"] for ack in all_acks if ack["op"] == "keyed" and ack["key"] == key}
            items = {_item_of(kref) for kref in acked}
            assert len(items) == 1, f"key {key!r} forked into several items: {items}"
            item = items.pop()
            history = memory.history(item)
            numbers = [revision["revision"] for revision in history]
            assert numbers == list(range(1, len(numbers) + 1)), f"{key}: revision numbers {numbers}"
            assert memory.get(item)["revision"] == len(numbers)
            by_kref = {revision["kref"]: revision["content"] for revision in history}
            for kref, content in acked.items():
                assert by_kref.get(kref) == content, f"{kref}: acknowledged {content!r}, store has " \
                                                     f"{by_kref.get(kref)!r}"
            unacknowledged = {kref: content for kref, content in by_kref.items() if kref not in acked}
            possible = [op["content"] for op in in_flight if op["op"] == "keyed" and op["key"] == key]
            assert len(unacknowledged) <= len(possible), f"{key}: phantom revisions {unacknowledged}"
            assert set(unacknowledged.values()) <= set(possible), f"{key}: phantom revisions {unacknowledged}"
            for number in numbers:
                revision = f"{item}?r={number}"
                out = memory.edges(revision, direction="outgoing", edge_type="SUPERSEDES")
                incoming = memory.edges(revision, direction="incoming", edge_type="SUPERSEDES")
                previous = [f"{item}?r={number - 1}"] if number > 1 else []
                following = [f"{item}?r={number + 1}"] if number < len(numbers) else []
                assert [edge["target_kref"] for edge in out] == previous, f"{revision} supersedes {out}"
                assert [edge["source_kref"] for edge in incoming] == following, f"{revision} superseded by {incoming}"

        # "published" moves: where it stands now is the last acknowledged move, or the move in flight after it.
        # A keyed revision of an item that has "published" takes it (a revised published belief stays published).
        possible_published: dict[str, set] = {}
        item_of_key: dict[str, str] = {}
        for acks, ops in rounds:
            for ack in acks:
                item = _item_of(ack["kref"]) if "kref" in ack else None
                if ack["op"] == "publish":
                    possible_published[item] = {ack["kref"]}
                elif ack["op"] == "keyed":
                    item_of_key[ack["key"]] = item
                    if item in possible_published:
                        possible_published[item] = {ack["kref"]}
            for op in ops:
                if op["op"] == "publish":
                    possible_published.setdefault(_item_of(op["kref"]), {None}).add(op["kref"])
                elif op["op"] == "keyed" and item_of_key.get(op["key"]) in possible_published:
                    item = item_of_key[op["key"]]
                    possible_published[item].add(memory.get(item)["kref"])   # the in-flight revision, if it landed
        for item, possible in possible_published.items():
            try:
                now = memory.get(f"{item}?t=published")["kref"]
            except km.NotFoundError:
                now = None
            assert now in possible, f"{item}: published is at {now}, expected one of {possible}"

        # raw capture never merges, never supersedes; the counts add up
        raw_items = memory.items(space="crash/raw")
        assert all(item["revision_count"] == 1 and item["latest_revision"] == 1 for item in raw_items)
        acked_raw = {_item_of(ack["kref"]) for ack in all_acks if ack["op"] == "raw"}
        assert acked_raw <= {item["item_kref"] for item in raw_items}
        assert len(raw_items) - len(acked_raw) <= sum(op["op"] == "raw" for op in in_flight)
        for item in raw_items:
            assert memory.edges(item["item_kref"], edge_type="SUPERSEDES") == []
        stats = memory.stats()
        all_items = memory.items(include_deprecated=True)
        assert stats["items"] == len(all_items)
        assert stats["revisions"] == sum(len(memory.history(item["item_kref"])) for item in all_items)
    assert _integrity(path) == "ok"


def test_sigkill_mid_write_loses_no_acknowledged_write_and_leaves_store_intact(tmp_path):
    script = _write_script(tmp_path, "crash_child.py", CRASH_CHILD)
    path = str(tmp_path / "crash.db")
    base_seed = secrets.randbits(32)
    rounds: list[tuple[list[dict], list[dict]]] = []
    kill_points = ((150, 0.0), (83, 0.002), (227, 0.004), (150, 0.001), (120, 0.003))   # (acks, then seconds)
    for round_no, (kill_after, delay) in enumerate(kill_points, start=1):
        seed = base_seed + round_no
        acks, in_flight = _run_until_acks(script, path, round_no, seed, kill_after, delay,
                                          str(tmp_path / f"stderr-{round_no}.txt"))
        assert len(acks) >= kill_after
        rounds.append((acks, in_flight))
        _check_store_after_crash(path, rounds)
    assert sum(len(acks) for acks, _ in rounds) >= sum(kill_after for kill_after, _ in kill_points)


# ==========================================================================================================
# 2. Two processes writing one file (and one reading it) at the same time
# ==========================================================================================================

WRITER_CHILD = r'''
import json, os, random, sys, time
sys.path.insert(0, sys.argv[1])
import kumiho_memory as km

path, writer, count, go_file = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
open(go_file + ".ready." + writer, "w").close()
deadline = time.monotonic() + 30
while not os.path.exists(go_file):
    if time.monotonic() > deadline:
        sys.exit("never saw the go file")
    time.sleep(0.001)
memory = km.Memory(path)
for step in range(count):
    content = "shared value from writer %s step %d" % (writer, step)
    kref = memory.remember(content, space="shared", key="the-shared-key", tags=["by-" + writer])
    print(json.dumps({"op": "keyed", "kref": kref, "content": content}), flush=True)
    if step % 5 == 0:
        content = "raw note from writer %s step %d" % (writer, step)
        kref = memory.remember(content, space="raw/" + writer, tags=["raw"])
        print(json.dumps({"op": "raw", "kref": kref, "content": content}), flush=True)
    time.sleep(random.random() * 0.002)   # a moment off the lock, so the writers interleave instead of taking turns
memory.close()
'''

READER_CHILD = r'''
import os, sys, time
sys.path.insert(0, sys.argv[1])
import kumiho_memory as km

path, go_file, stop_file = sys.argv[2], sys.argv[3], sys.argv[4]
open(go_file + ".ready.reader", "w").close()
deadline = time.monotonic() + 30
while not os.path.exists(go_file):
    if time.monotonic() > deadline:
        sys.exit("never saw the go file")
    time.sleep(0.001)
memory = km.Memory(path)
loops = 0
while True:
    stopping = os.path.exists(stop_file)
    for hit in memory.recall("shared value writer", limit=5):
        memory.get(hit["kref"])
    for item in memory.items(space="shared"):
        numbers = [revision["revision"] for revision in memory.history(item["item_kref"])]
        if numbers != list(range(1, len(numbers) + 1)):
            sys.exit("a reader saw revision numbers %r" % numbers)
    memory.stats()
    loops += 1
    if stopping:
        break
memory.close()
print(loops)
'''


def test_two_processes_revising_one_item_in_one_file(tmp_path):
    writers, per_writer = ("w0", "w1"), 150
    path = str(tmp_path / "shared.db")
    go_file, stop_file = str(tmp_path / "go"), str(tmp_path / "stop")
    writer_script = _write_script(tmp_path, "writer.py", WRITER_CHILD)
    reader_script = _write_script(tmp_path, "reader.py", READER_CHILD)
    env = _child_env()
    children = [subprocess.Popen([sys.executable, writer_script, ROOT, path, name, str(per_writer), go_file],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) for name in writers]
    reader = subprocess.Popen([sys.executable, reader_script, ROOT, path, go_file, stop_file],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT   # all three at the barrier, then go: they start together
        while not all(os.path.exists(f"{go_file}.ready.{name}") for name in (*writers, "reader")):
            assert time.monotonic() < deadline and all(child.poll() is None for child in (*children, reader))
            time.sleep(0.005)
        open(go_file, "w").close()
        outputs = [child.communicate(timeout=CHILD_TIMEOUT) for child in children]
        open(stop_file, "w").close()
        reader_out, reader_err = reader.communicate(timeout=CHILD_TIMEOUT)
    finally:
        for child in (*children, reader):
            if child.poll() is None:
                child.kill()
                child.wait()
    for name, child, (out, err) in zip(writers, children, outputs):
        assert b"locked" not in err.lower(), f"writer {name}: {err.decode()}"
        assert child.returncode == 0 and err == b"", f"writer {name} exit {child.returncode}: {err.decode()}"
    assert reader.returncode == 0 and reader_err == b"", f"reader exit {reader.returncode}: {reader_err.decode()}"
    assert int(reader_out) >= 1

    acks = {name: [json.loads(line) for line in out.splitlines()] for name, (out, _) in zip(writers, outputs)}
    keyed = {name: [ack for ack in records if ack["op"] == "keyed"] for name, records in acks.items()}
    raw = [ack for records in acks.values() for ack in records if ack["op"] == "raw"]
    assert all(len(records) == per_writer for records in keyed.values())
    assert _integrity(path) == "ok"
    with km.Memory(path) as memory:
        items = {_item_of(ack["kref"]) for records in keyed.values() for ack in records}
        assert len(items) == 1, f"one key, several items: {items}"
        item = items.pop()
        history = memory.history(item)
        total = per_writer * len(writers)
        assert [revision["revision"] for revision in history] == list(range(1, total + 1))
        contents = {revision["kref"]: revision["content"] for revision in history}
        assert sorted(contents.values()) == sorted(ack["content"] for records in keyed.values() for ack in records)
        for name, records in keyed.items():
            numbers = [_number_of(ack["kref"]) for ack in records]
            assert numbers == sorted(numbers), f"{name}'s writes are out of order in the history: {numbers}"
            for ack in records:
                assert contents[ack["kref"]] == ack["content"], ack
            # the writer's tag followed it to its last revision
            assert memory.get(f"{item}?t=by-{name}")["kref"] == records[-1]["kref"]

        owners = [revision["content"].split()[4] for revision in history]     # "... from writer w0 step 7"
        switches = sum(1 for before, after in zip(owners, owners[1:]) if before != after)
        assert switches >= 2, f"the writers ran one after the other ({switches} switches): nothing was tested"
        supersedes = memory.edges(item, edge_type="SUPERSEDES")
        assert sorted((_number_of(edge["source_kref"]), _number_of(edge["target_kref"])) for edge in supersedes) \
            == [(number, number - 1) for number in range(2, total + 1)], "the SUPERSEDES chain is not linear"

        for ack in raw:
            got = memory.get(ack["kref"])
            assert got["content"] == ack["content"] and "raw" in got["tags"]
            assert memory.history(_item_of(ack["kref"]))[-1]["revision"] == 1
        assert len({_item_of(ack["kref"]) for ack in raw}) == len(raw) == len(writers) * len(range(0, per_writer, 5))

        stats = memory.stats()
        assert stats["items"] == 1 + len(raw) == len(memory.items(include_deprecated=True))
        assert stats["revisions"] == total + len(raw)
        assert stats["edges"] == total - 1
        assert stats["tags"] == len(raw) + len(writers)
    assert _integrity(path) == "ok"


# ==========================================================================================================
# 3. Forget leaves no trace: not in the API, not in an export, not in the bytes of any file
# ==========================================================================================================

WORDS = ("tea coffee mode dark light editor trip paris berlin meeting budget deadline python rust garden dog "
         "cat piano guitar novel painting marathon recipe pasta bread camera hiking beach museum project launch "
         "review design memory graph agent session user prefers likes visited planned").split()


def _fill(memory: km.Memory, count: int, rng: random.Random, label: str) -> None:
    """Remember ``count`` ordinary memories with revisions, tags, links and artifacts in every table."""
    previous: list[str] = []
    for index in range(count):
        text = f"{label} {index} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
        key = f"{label}-key-{index % 60}" if index % 4 == 0 else None
        kref = memory.remember(text, space=f"filler/s{index % 7}", key=key, tags=["seen"] if index % 3 else None,
                               metadata={"index": index, "label": label})
        if previous and index % 2:
            memory.link(kref, rng.choice(previous), "RELATED_TO", metadata={"why": text[:40]})
        if index % 5 == 0:
            memory.add_artifact(kref, f"file{index}", f"/data/{label}/{index}.txt", {"size": index})
        previous.append(kref)


@pytest.fixture(scope="module")
def filler_store(tmp_path_factory) -> str:
    """A closed store of ~1500 ordinary memories, copied by each forget test (built once: it takes a while)."""
    path = str(tmp_path_factory.mktemp("filler") / "filler.db")
    with km.Memory(path, ids=km.SequentialIds()) as memory:
        _fill(memory, 1500, random.Random(1), "before")
    return path


_WORDS = ("amber", "quokka", "fjord", "lantern", "marmot", "velvet", "cobalt", "thistle", "walrus", "saffron",
          "juniper", "pebble", "harbor", "meadow", "falcon", "zephyr", "orchid", "tundra", "gallop", "quill")


def _token() -> str:
    # a needle rare enough to find in the files' bytes, made of words: a random-looking one would now be
    # redacted as a credential before it ever reached the store
    return "Zqx" + "".join(secrets.choice(_WORDS) for _ in range(5))


def _needles(token: str) -> list[bytes]:
    core = token[4:]
    return sorted({text.encode("utf-8") for text in (token, token.lower(), token.upper(), core, core.lower())})


def _files_containing(path: str, needles: list[bytes]) -> list[str]:
    found = []
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            data = _read_bytes(path + suffix)
            found += [f"{os.path.basename(path + suffix)}: {needle!r}" for needle in needles if needle in data]
    return found


def _internal_pages(path: str) -> dict[str, int]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT name, count(*) FROM dbstat WHERE pagetype = 'internal' GROUP BY name"))
    finally:
        conn.close()


# Which revision carries the token, and what is forgotten:
#   item        a raw memory, forgotten whole (bare item kref)
#   newest      revision 2 of a keyed item (its head), forgotten alone
#   oldest      revision 1 of a keyed item, forgotten alone
#   oldest-raw  revision 1 of a raw item that got a revision 2 with item=, forgotten alone
FORGET_CASES = [
    "item", "newest", "oldest",
    "oldest-raw",   # regression: raw item names once carried revision 1's title
]


@pytest.mark.parametrize("case", FORGET_CASES)
def test_forget_leaves_no_trace(case, tmp_path, filler_store):
    path = str(tmp_path / "forget.db")
    shutil.copyfile(filler_store, path)
    token = _token()
    needles = _needles(token)
    rng = random.Random(2)
    secret_text = f"{token} the secret line\n" + f"padding {token} words " * 400   # > a page: overflow pages
    memory = km.Memory(path, ids=km.SequentialIds(start=100_000))
    try:
        other = memory.remember("an unrelated neighbour memory about tea", space="neighbours")
        secret_args = dict(title=f"{token} title", metadata={"note": f"about {token}", "nested": [token]})
        if case == "item":
            secret = memory.remember(secret_text, space="secrets", tags=[f"label-{token.lower()}"], **secret_args)
            forget_kref, survivor = _item_of(secret), None
        elif case == "newest":
            survivor = memory.remember("plain first version", space="secrets", key="a plain key")
            secret = memory.remember(secret_text, space="secrets", key="a plain key", tags=["reviewed"],
                                     **secret_args)
            forget_kref = secret
        elif case == "oldest":
            secret = memory.remember(secret_text, space="secrets", key="a plain key", tags=["reviewed"],
                                     **secret_args)
            survivor = memory.remember("plain second version", space="secrets", key="a plain key")
            forget_kref = secret
        else:
            secret = memory.remember(secret_text, space="secrets", tags=["reviewed"], **secret_args)
            survivor = memory.remember("plain second version", item=_item_of(secret))
            forget_kref = secret
        memory.link(secret, other, "RELATED_TO", metadata={"why": token})
        memory.link(other, secret, "SUPPORTS", metadata={"note": token.lower()})
        memory.add_artifact(secret, f"doc-{token}", f"/files/{token}.txt", {"about": token})
        _fill(memory, 300, rng, "after")                 # more splits after the secret is written

        assert memory.get(secret)["content"] == secret_text                 # the premise holds
        if case in ("item", "newest"):                                     # recall sees only latest revisions
            assert [hit["kref"] for hit in memory.recall(token) if not hit.get("graph_augmented")] == [secret]
        pages = _internal_pages(path)
        for tree in ("revisions", "doc_terms", "items", "edges"):
            assert pages.get(tree, 0) >= 1, f"{tree} is a single-level b-tree: {pages}"
        assert _files_containing(path, needles), "the token should be on disk before forget"
        stats_before = memory.stats()

        report = memory.forget(forget_kref)

        expected_revisions = 1
        expected_edges = 2 + (0 if case == "item" else 1)   # the two links, plus the SUPERSEDES between r1, r2
        assert report["scrubbed"] is True
        assert report["revisions"] == expected_revisions and report["edges"] == expected_edges, report
        assert report["items"] == (1 if case == "item" else 0)
        with pytest.raises(km.NotFoundError):
            memory.get(secret)
        with pytest.raises(km.NotFoundError):
            memory.get(f"{secret}&a=doc-{token}")
        if case == "item":
            with pytest.raises(km.NotFoundError):
                memory.get(_item_of(secret))
            with pytest.raises(km.NotFoundError):
                memory.edges(_item_of(secret))
        else:
            assert [revision["kref"] for revision in memory.history(_item_of(secret))] == [survivor]
            assert memory.get(_item_of(secret))["kref"] == survivor
            assert memory.edges(_item_of(secret)) == []
        assert memory.recall(token) == [] and memory.recall(token.lower()) == []
        for hit in memory.recall("the secret line padding words title about", limit=50):
            assert token[4:].lower() not in json.dumps(hit).lower(), hit
        assert [edge for edge in memory.edges(other) if secret in (edge["source_kref"], edge["target_kref"])] == []
        stats_after = memory.stats()
        assert stats_after["revisions"] == stats_before["revisions"] - expected_revisions
        assert stats_after["edges"] == stats_before["edges"] - expected_edges

        export = io.StringIO()
        memory.export_jsonl(export)
        assert token.lower() not in export.getvalue().lower()
        assert token[4:].lower() not in export.getvalue().lower()

        assert _files_containing(path, needles) == [], "forgotten bytes remain while the store is open"
    finally:
        memory.close()
    assert _files_containing(path, needles) == [], "forgotten bytes remain after close"
    assert _integrity(path) == "ok"


# ==========================================================================================================
# 4. Damaged, foreign and read-only store files
# ==========================================================================================================

def _real_store(path: str, memories: int = 400) -> None:
    with km.Memory(path, ids=km.SequentialIds()) as memory:
        _fill(memory, memories, random.Random(3), "store")


def test_random_bytes_file_is_refused_unchanged(tmp_path):
    path = str(tmp_path / "noise.db")
    noise = b"not sqlite" + os.urandom(4 * 4096)
    with open(path, "wb") as handle:
        handle.write(noise)
    with pytest.raises(km.CorruptStoreError) as caught:
        km.Memory(path)
    assert isinstance(caught.value, km.StoreError) and isinstance(caught.value, OSError)
    assert path in str(caught.value)
    assert _read_bytes(path) == noise


@pytest.mark.parametrize("cut", ["half", "half-mid-page"])
def test_truncated_store_is_refused_not_opened_empty(cut, tmp_path):
    path = str(tmp_path / "cut.db")
    _real_store(path)
    assert not os.path.exists(path + "-wal") or os.path.getsize(path + "-wal") == 0
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.truncate(size // 2 + (1234 if cut == "half-mid-page" else 0))
    damaged = _read_bytes(path)
    with pytest.raises(km.StoreError) as caught:
        memory = km.Memory(path)
        memory.close()
    assert type(caught.value) is not km.StoreError, f"expected a specific StoreError, got {caught.value!r}"
    assert isinstance(caught.value, km.CorruptStoreError)
    assert path in str(caught.value)
    assert _read_bytes(path) == damaged


_SHRUNK_UNDER_A_READER = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
import kumiho_memory as km
path = sys.argv[2]
memory = km.Memory(path)
krefs = memory.remember_many([{"content": f"note {n} " + "word " * 400, "space": "notes"} for n in range(3000)])
memory.get(krefs[-1])
memory.backend._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
os.truncate(path, os.path.getsize(path) // 2)      # a sync tool or a bad restore shortens the open file
try:
    for kref in krefs:
        memory.get(kref)
    print("no error")
except km.StoreError as exc:
    print(type(exc).__name__)
"""


def test_a_store_shrunk_under_an_open_memory_raises_not_crashes(tmp_path):
    """A store file shortened by another program while it is open: the next reads raise a StoreError naming
    the damage, never a crash of the process nor a memory silently missing. (Reads are never memory-mapped: a
    mapped read past a file's new end can kill the process with SIGBUS, which no handler catches.)"""
    path = str(tmp_path / "shrunk.db")
    proc = subprocess.run([sys.executable, "-c", _SHRUNK_UNDER_A_READER, ROOT, path], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() in {"CorruptStoreError", "StoreError"}, proc.stdout


def test_newer_schema_version_is_refused_unchanged(tmp_path):
    path = str(tmp_path / "future.db")
    _real_store(path, memories=20)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    conn.close()
    before = _read_bytes(path)
    with pytest.raises(km.SchemaVersionError) as caught:
        km.Memory(path)
    assert isinstance(caught.value, km.StoreError)
    assert path in str(caught.value) and "999" in str(caught.value)
    assert _read_bytes(path) == before


def _foreign_database(path: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, customer TEXT, total REAL)")
        conn.executemany("INSERT INTO invoices (customer, total) VALUES (?, ?)", [("acme", 12.5), ("globex", 99.0)])
    conn.close()


def test_sqlite_database_of_another_program_is_refused(tmp_path):
    path = str(tmp_path / "invoices.db")
    _foreign_database(path)
    with pytest.raises(km.CorruptStoreError) as caught:
        km.Memory(path)
    assert path in str(caught.value)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("SELECT customer, total FROM invoices ORDER BY id").fetchall() == \
            [("acme", 12.5), ("globex", 99.0)]
        assert [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["invoices"]
    finally:
        conn.close()


def test_sqlite_database_of_another_program_is_left_unchanged(tmp_path):
    path = str(tmp_path / "invoices.db")
    _foreign_database(path)
    before = _read_bytes(path)
    with pytest.raises(km.CorruptStoreError):
        km.Memory(path)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    finally:
        conn.close()
    assert _read_bytes(path) == before


# Runs the writes against a read-only store; as root it first drops to an unprivileged user (root ignores
# file modes). Prints one JSON object: {"skip": reason} or what each call did.
READ_ONLY_CHILD = r'''
import json, os, sys
sys.path.insert(0, sys.argv[1])
import kumiho_memory as km

path, kref = sys.argv[2], sys.argv[3]
if os.geteuid() == 0:
    try:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    except OSError as exc:
        print(json.dumps({"skip": "cannot drop root privileges: %s" % exc}))
        sys.exit(0)
try:
    open(path, "r+b").close()
except PermissionError:
    pass
else:
    print(json.dumps({"skip": "this user can write a 0o444 file (permissions are not enforced)"}))
    sys.exit(0)

def attempt(call):
    try:
        return {"ok": repr(call())}
    except Exception as exc:
        return {"error": type(exc).__name__, "store_error": isinstance(exc, km.StoreError), "message": str(exc)}

result = {}
try:
    memory = km.Memory(path)
except km.StoreError as exc:
    result["open"] = {"error": type(exc).__name__, "store_error": True, "message": str(exc)}
else:
    result["open"] = {"ok": "opened"}
    result["remember"] = attempt(lambda: memory.remember("a new thought", space="notes"))
    result["remember_key"] = attempt(lambda: memory.remember("revised", key="k", space="notes"))
    result["tag"] = attempt(lambda: memory.tag(kref, "published"))
    result["forget"] = attempt(lambda: memory.forget(kref))
    memory.close()
print(json.dumps(result))
'''


def test_read_only_store_file_raises_store_error_on_write(tmp_path):
    # A folder any user can enter: as root the check runs as 'nobody', who cannot enter pytest's tmp_path.
    folder = tempfile.mkdtemp(prefix="kumiho-ro-")
    try:
        os.chmod(folder, 0o777)                       # the folder stays writable; only the file is read-only
        path = os.path.join(folder, "ro.db")
        with km.Memory(path) as memory:
            kref = memory.remember("a thought written before the file became read-only", space="notes")
        os.chmod(path, 0o444)
        before = _read_bytes(path)
        script = _write_script(tmp_path, "read_only.py", READ_ONLY_CHILD)
        done = subprocess.run([sys.executable, script, ROOT, path, kref], capture_output=True, env=_child_env(),
                              timeout=CHILD_TIMEOUT)
        assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()
        result = json.loads(done.stdout)
        if "skip" in result:
            pytest.skip(result["skip"])
        writes = [result["open"]] if "error" in result["open"] else \
            [result[name] for name in ("remember", "remember_key", "tag", "forget")]
        for outcome in writes:
            assert "error" in outcome, f"a write to a read-only store succeeded silently: {result}"
            assert outcome["store_error"], f"a write to a read-only store raised a non-StoreError: {result}"
            assert path in outcome["message"], outcome
        assert _read_bytes(path) == before
        os.chmod(path, 0o644)
        with km.Memory(path) as memory:
            assert [item["item_kref"] for item in memory.items()] == [_item_of(kref)]
            assert memory.get(kref)["content"] == "a thought written before the file became read-only"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
