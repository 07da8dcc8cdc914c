"""Issue 15, extended hostile testing past the listed defects:

- the CLI fuzzed with hypothesis over argv (in process, through ``main``): an exit code of 0-3, never an
  exception escaping, and a failed command changes nothing in the store;
- skill ingest against path traversal and symlinks (files, folders, loops, absolute paths, batch folders);
- a full disk (a real small tmpfs) under a consolidation and under a Dream State run: a clear ``StoreError``,
  nothing acknowledged lost, and the work completes once there is room;
- the Kumiho backend talking through a loopback TCP proxy that drops every connection right after the server
  applied a write (the reply is lost): no duplicate revision, no half-done write left behind, only our errors;
- memory use over many recalls (tracemalloc; ``probes/hostile_memory_growth.py`` runs 100,000);
- Redis with AUTH and TLS stopped and restarted under a running manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import io
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from typing import Any

import pytest

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    from hypothesis import HealthCheck, given, seed, settings, strategies as st
except ImportError:  # pragma: no cover - the dev extra installs it
    given = None


def _export(memory: km.Memory) -> str:
    stream = io.StringIO()
    memory.export_jsonl(stream)
    return stream.getvalue()


def _export_path(path: str) -> str:
    with km.Memory(path) as memory:
        return _export(memory)


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch):
    for name in list(os.environ):
        if name.startswith("KUMIHO_") or name == "REDIS_URL":
            monkeypatch.delenv(name)


# ==========================================================================================================
# CLI fuzzing
# ==========================================================================================================

def _run_main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = km.main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.skipif(given is None, reason="hypothesis is not installed (dev extra)")
def test_cli_fuzz_exit_codes_no_exceptions_and_failed_commands_change_nothing(tmp_path, monkeypatch):
    path = str(tmp_path / "fuzz.db")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with km.Memory(path) as memory:
        first = memory.remember("The user prefers dark mode", space="prefs", key="ui.theme")
        second = memory.remember("The user switched to light mode", space="prefs", key="ui.theme")
        note = memory.remember("Lisbon trip in May 2023", space="travel", metadata={"event_date": "2023-05-08"})
    item = first.split("?")[0]
    files = tmp_path / "files"
    files.mkdir()
    (files / "garbage.jsonl").write_text("not json\n{}\n", encoding="utf-8")
    (files / "deep.jsonl").write_text("[" * 50_000 + "]" * 50_000 + "\n", encoding="utf-8")
    (files / "skill.md").write_text("---\nname: fuzz\ndescription: d\n---\n## One\ntext\n", encoding="utf-8")
    (files / "binary.md").write_bytes(b"\xff\xfe\x00garbage")
    with open(files / "export.jsonl", "w", encoding="utf-8") as handle:
        with km.Memory() as other:
            other.remember("imported memory", space="imported")
            other.export_jsonl(handle)
    paths = [str(files / name) for name in ("garbage.jsonl", "deep.jsonl", "skill.md", "binary.md",
                                             "export.jsonl", "missing.md")] + [str(files), "../escape.md"]
    krefs = [first, second, note, item, item + "?t=published", item + "?r=2&a=transcript", item + "?r=" + "9" * 30,
             item + "?r=" + "9" * 5000, item + "?t=latest&time=9999-12-31T23:59:59Z", "kref://", "kref://x",
             "kref://CognitiveMemory/prefs/missing.memory", "kref://Other/prefs/x.memory", item + "?r=0"]
    words = ["", " ", "-", "0", "-1", "1", "1001", "1e309", "nan", "inf", "9" * 400, "{", "[]", "{}", '{"a": 1}',
             '{"a": {"$gt": 1e999}}', '{"n": ' * 200 + "1" + "}" * 200, "3000 years ago", "31 December 9999",
             "99999999999999999999999 weeks ago", "published", "latest", "SUPPORTS", "not upper", "prefs",
             "../..", "a/b/c", "user", "official", "2026-01-31T12:00:00Z", "99999-01-01", "\u202e", "\ud7ff"]
    text = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=30)
    value = st.one_of(st.sampled_from(words), st.sampled_from(krefs), st.sampled_from(paths), text,
                      st.integers(-10, 10 ** 12).map(str))
    specs = {   # command words: (positional arguments, flags taking a value, switches)
        "remember": (1, ["--space", "--key", "--item", "--tag", "--metadata", "--evidence-level", "--source",
                         "--title", "--kind"], []),
        "recall": (1, ["--limit", "--space", "--type", "--where", "--min-score", "--as-of"],
                   ["--history", "--context"]),
        "get": (1, [], []), "history": (1, [], []), "tag": (2, [], []), "untag": (2, [], []),
        "link": (3, ["--metadata"], []), "edges": (1, ["--direction", "--type"], []),
        "deprecate": (1, [], ["--undo"]), "forget": (1, [], []), "stats": (0, [], []),
        "chat add": (2, ["--role"], []), "chat get": (1, ["--limit"], []), "chat clear": (1, [], []),
        "consolidate": (1, ["--space", "--summary", "--evidence-level", "--source"], []),
        "export --format mermaid --item": (1, [], []), "import": (1, [], []),
        "dream": (0, ["--policy", "--max-deprecation-ratio", "--batch-size"], ["--dry-run",
                                                                              "--allow-published-deprecation"]),
        "profile": (0, ["--window-days"], ["--dry-run"]),
        "ingest-skill": (1, ["--space", "--section", "--item-name", "--evidence-level", "--clear-quarantine"],
                         ["--dry-run", "--list", "--batch"]),
    }

    @st.composite
    def argv_strategy(draw) -> list[str]:
        words_ = draw(st.sampled_from(sorted(specs)))
        positional, valued, switches = specs[words_]
        argv = words_.split()
        count = draw(st.sampled_from([positional] * 6 + [max(0, positional - 1), positional + 1]))
        argv += [draw(value) for _ in range(count)]
        for flag in draw(st.lists(st.sampled_from(valued + switches + ["--json", "--project"]), max_size=3)):
            argv += [flag] if flag in switches or flag == "--json" else [flag, draw(value)]
        return argv

    seen: dict[int, int] = {}

    @seed(15)
    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(argv=argv_strategy())
    def check(argv: list[str]) -> None:
        if "--output" in argv or "-o" in argv or "--report-dir" in argv:
            return
        before = _export_path(path)
        code, _out, err = _run_main(["--db", path, *argv])
        seen[code] = seen.get(code, 0) + 1
        assert code in (0, 1, 2, 3), (argv, code, err[-500:])
        assert "Traceback" not in err, (argv, err[-1500:])
        if code != 0:
            assert err.strip(), (argv, code)
            assert _export_path(path) == before, f"the failed command {argv} (exit {code}) changed the store"

    check()
    print('exit codes seen', seen)
    assert seen.get(0) and seen.get(2), f"the fuzzer never reached both success and usage errors: {seen}"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# ==========================================================================================================
# Skill ingest: path traversal and symlinks
# ==========================================================================================================

SKILL = "---\nname: pdf\ndescription: Work with PDF files.\n---\n# PDF\n\n## Extract\nUse pdftotext.\n"


@pytest.fixture
def skill_tree(tmp_path):
    root = tmp_path / "skills"
    (root / "pdf").mkdir(parents=True)
    (root / "pdf" / "SKILL.md").write_text(SKILL, encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "SKILL.md").write_text(SKILL.replace("pdf", "secret").replace("pdftotext", "the root password is "
                                                                             "hunter2"), encoding="utf-8")
    (outside / "notes.md").write_text("# Private notes\nnot for the agent\n", encoding="utf-8")
    return root, outside


def _refused(call) -> km.KumihoMemoryError:
    with pytest.raises(km.KumihoMemoryError) as raised:
        call()
    assert isinstance(raised.value, (km.InvalidArgumentError, km.NotFoundError)), type(raised.value)
    return raised.value


def _nothing_from_outside(memory: km.Memory) -> None:
    for item in memory.items(include_deprecated=True):
        for revision in memory.history(item["item_kref"]):
            assert "hunter2" not in revision["content"] and "Private notes" not in revision["content"]


@pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32", reason="needs symlinks")
def test_skill_ingest_refuses_every_way_out_of_its_folder(skill_tree):
    root, outside = skill_tree
    os.symlink(outside / "SKILL.md", root / "linked.md")                       # a file link out
    (root / "escape").mkdir()
    os.symlink(outside, root / "escape" / "out")                              # a folder link out
    os.symlink(outside, root / "outlinked")                                   # a skill folder that is a link out
    os.symlink(root / "loop-b", root / "loop-a")
    os.symlink(root / "loop-a", root / "loop-b")                              # a loop
    with km.Memory() as memory:
        before = _export(memory)
        for path in ["../outside/SKILL.md", str(outside / "SKILL.md"), "linked.md", "escape/out/SKILL.md",
                     "outlinked/SKILL.md", "pdf/../../outside/SKILL.md", "loop-a", "pdf\\..\\..\\outside\\SKILL.md",
                     str(root / "pdf" / ".." / ".." / "outside" / "notes.md")]:
            _refused(lambda: km.ingest_skill(memory, path, root=root))
            _refused(lambda: km.ingest_file(memory, path, root=root, item_name="x"))
        _refused(lambda: km.ingest_skill(memory, root / "linked.md"))           # default root: the link's folder
        _refused(lambda: km.ingest_batch(memory, root))                        # the batch holds links out
        _refused(lambda: km.ingest_batch(memory, "../outside", root=root))
        _refused(lambda: km.ingest_batch(memory, root / "outlinked", root=root))
        assert _export(memory) == before, "a refused ingest wrote something"
        _nothing_from_outside(memory)


@pytest.mark.skipif(not hasattr(os, "symlink") or sys.platform == "win32", reason="needs symlinks")
def test_skill_ingest_follows_links_that_stay_inside_and_names_stay_in_their_space(skill_tree):
    root, _outside = skill_tree
    os.symlink(root / "pdf" / "SKILL.md", root / "alias.md")                  # stays inside: allowed
    (root / "evil").mkdir()
    (root / "evil" / "SKILL.md").write_text(SKILL.replace("name: pdf", "name: ../../etc/passwd"),
                                            encoding="utf-8")
    with km.Memory() as memory:
        km.ingest_skill(memory, "alias.md", root=root)
        try:
            km.ingest_skill(memory, "evil/SKILL.md", root=root)
        except km.InvalidArgumentError:
            pass
        for item in memory.items(include_deprecated=True):
            assert item["space"] == "Skills", item
            assert ".." not in item["item_kref"] and "/etc" not in item["item_kref"], item


@pytest.mark.skipif(not hasattr(os, "mkfifo") or sys.platform == "win32", reason="needs FIFOs")
def test_skill_ingest_of_special_files_is_refused_without_blocking(skill_tree):
    root, _outside = skill_tree
    os.mkfifo(root / "pipe.md")                                              # reading it would block forever
    (root / "dir.md").mkdir()
    os.symlink("/dev/zero", root / "zero.md")
    with km.Memory() as memory:
        for name in ("pipe.md", "zero.md"):
            _refused(lambda: km.ingest_skill(memory, name, root=root))
        _refused(lambda: km.ingest_file(memory, "dir.md", root=root, item_name="d"))
        _refused(lambda: km.ingest_batch(memory, root))
        assert memory.items() == []


def test_cli_ingest_skill_refusals_are_one_line_errors(skill_tree, capsys, tmp_path):
    root, outside = skill_tree
    os.symlink(outside / "SKILL.md", root / "linked.md")
    path = str(tmp_path / "store.db")
    for argv in (["ingest-skill", str(root / "linked.md")], ["ingest-skill", str(root) + "/../outside/SKILL.md"],
                 ["ingest-skill", str(root), "--batch"]):
        code, _out, err = _run_main(["--db", path, *argv])
        assert code in (1, 2), (argv, code, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    with km.Memory(path) as memory:
        assert memory.items() == []


# ==========================================================================================================
# A full disk under consolidation and Dream State (a real small tmpfs)
# ==========================================================================================================

MESSAGES = ("The boiler service is booked for April 3 with Nadia.",
            "Nadia asked us to leave the side gate open.",
            "The invoice goes to the facilities budget.")


@pytest.fixture
def small_disk():
    if sys.platform == "win32" or os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root on POSIX; test_faults.py covers a file-size limit")
    folder = tempfile.mkdtemp(prefix="kumiho-hostile-full-")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", folder], capture_output=True)
    if done.returncode != 0:
        os.rmdir(folder)
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", folder], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def _fill(folder: str) -> str:
    """Write ballast until the file system is full; return the ballast's path."""
    ballast = os.path.join(folder, "ballast")
    descriptor = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        chunk = b"\0" * 4096
        while True:
            try:
                os.write(descriptor, chunk)
            except OSError as exc:
                assert exc.errno in (errno.ENOSPC, errno.EDQUOT), exc
                break
    finally:
        os.close(descriptor)
    return ballast


def _disk_error(exc: BaseException, path: str) -> None:
    assert isinstance(exc, km.StoreError), f"{type(exc).__name__}: {exc}"
    text = str(exc)
    assert ("disk is full" in text or "No space left" in text), text
    assert path in text or os.path.dirname(path) in text, text


def test_a_full_disk_during_consolidation_loses_no_message_and_stores_once_after_room(small_disk):
    path = os.path.join(small_disk, "store.db")
    queue_dir = os.path.join(small_disk, "queue")
    memory = km.Memory(path)

    async def scenario() -> dict[str, Any]:
        manager = km.UniversalMemoryManager(memory=memory, retry_queue=km.RetryQueue(queue_dir),
                                            store_max_retries=1)
        try:
            for message in MESSAGES:
                await manager.ingest_message(user_id="ann", message=message, session_id="s-full")
            ballast = _fill(small_disk)
            outcome: dict[str, Any] = {}
            try:
                outcome["first"] = await manager.consolidate_session(session_id="s-full")
            except km.KumihoMemoryError as exc:
                outcome["error"] = exc
            except Exception as exc:                       # noqa: BLE001 - recorded, then failed below
                outcome["error"] = exc
            os.remove(ballast)                            # (reading working memory refreshes its TTL: a write)
            outcome["left_while_full"] = (await manager.buffer.get_messages(
                project=manager.project, session_id="s-full"))["message_count"]
            if outcome["left_while_full"]:
                outcome["second"] = await manager.consolidate_session(session_id="s-full")
            await manager.flush_retry_queue()
            outcome["left"] = (await manager.buffer.get_messages(project=manager.project,
                                                                 session_id="s-full"))["message_count"]
            return outcome
        finally:
            await manager.close()

    try:
        outcome = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
        if "error" in outcome:
            _disk_error(outcome["error"], path)
            assert outcome["left_while_full"] == len(MESSAGES), "messages were consumed by a failed consolidation"
        else:
            stored = outcome["first"]["store_result"]
            assert stored.get("queued") or stored.get("revision_kref"), outcome["first"]
        assert outcome["left"] == 0
        items = memory.items(kind="conversation")
        assert len(items) == 1, f"{len(items)} memories for one session"
        transcript = memory.get(items[0]["item_kref"] + "?t=latest&a=transcript")["artifact"]["metadata"]["text"]
        for message in MESSAGES:
            assert message.split(" with ")[0] in transcript, message
    finally:
        memory.close()


def _dream_store(path: str) -> None:
    with km.Memory(path, clock=km.ManualClock("2025-06-01T00:00:00Z", tick=60.0)) as memory:
        for copy in range(2):
            for index in range(6):
                memory.remember(f"Fact {index}: the staging server is called falcon-{index}." + " pad" * 200,
                                space="ops")
        for index in range(4):
            memory.remember(f"Unrelated note {index} about the garden.", space="home")


def _graph_view(path: str) -> tuple:
    with km.Memory(path) as memory:
        items = [item for item in memory.items(include_deprecated=True) if item["space"] != km.DREAM_SPACE]
        return tuple(sorted((r["kref"], r["deprecated"], tuple(r["tags"]), r["content"])
                            for item in items for r in memory.history(item["item_kref"])))


def test_a_full_disk_during_dream_state_is_a_clear_error_and_the_next_run_finishes_the_work(small_disk, tmp_path):
    path, reference = os.path.join(small_disk, "store.db"), str(tmp_path / "reference.db")
    _dream_store(path)
    shutil.copy(path, reference)
    with km.Memory(reference) as memory:
        km.DreamState(memory, min_age_days=0, batch_size=3, max_deprecation_ratio=0.9).run_sync()
    before = _graph_view(path)
    error: BaseException | None = None
    with km.Memory(path) as memory:
        ballast = _fill(small_disk)
        try:
            result = km.DreamState(memory, min_age_days=0, batch_size=3, max_deprecation_ratio=0.9).run_sync()
        except Exception as exc:                           # noqa: BLE001 - checked below
            error, result = exc, None
    if error is not None:
        _disk_error(error, path)
    else:
        assert not result["success"] or result["errors"], "a Dream State run on a full disk reported success"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert len(_graph_view(path)) == len(before), "revisions were lost on a full disk"
    try:                                                   # opening the store while the disk is full
        km.Memory(path).close()
    except km.KumihoMemoryError as exc:
        opened: BaseException | None = exc
    else:
        opened = None
    os.remove(ballast)
    if opened is not None:
        _disk_error(opened, path)
    with km.Memory(path) as memory:
        km.DreamState(memory, min_age_days=0, batch_size=3, max_deprecation_ratio=0.9).run_sync()
    assert _graph_view(path) == _graph_view(reference)


# ==========================================================================================================
# The Kumiho backend under a server whose connections drop right after a write was applied
# ==========================================================================================================

class DroppingProxy:
    """A loopback TCP proxy to ``upstream``; ``drop_all()`` closes every open connection at once."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        self.drops = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def drop_all(self) -> None:
        with self.lock:
            sockets, self.open = self.open, []
            self.drops += 1
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.listener.close()
        self.drop_all()


WRITES = ("CreateItem", "CreateRevision", "TagRevision", "CreateEdge", "SetDeprecated", "CreateArtifact",
          "UpdateRevisionMetadata", "UpdateItemMetadata", "SetAttribute")


def _drop_after(servicer, proxy: DroppingProxy, armed: dict[str, int]) -> None:
    """Wrap the servicer's write handlers: the n-th call of an armed method is applied, then every connection
    drops before its reply leaves (the client never hears that it succeeded)."""
    for method in WRITES:
        original = getattr(servicer, method, None)
        if original is None:
            continue

        def wrapper(request, context, _original=original, _method=method):
            reply = _original(request, context)
            left = armed.get(_method)
            if left is not None:
                if left <= 0:
                    del armed[_method]
                    proxy.drop_all()
                    time.sleep(0.2)
                else:
                    armed[_method] = left - 1
            return reply
        setattr(servicer, method, wrapper)


def _kumiho():
    try:
        import kumiho  # noqa: F401
        from kumiho_standin import StandIn
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("the kumiho SDK is missing in CI")
        pytest.skip("the kumiho SDK (extra 'kumiho') is not installed")
    if not hasattr(km, "KumihoBackend"):
        pytest.skip("km.KumihoBackend is missing")
    return StandIn


TOKEN = "test-token-5f0c1d"

OPERATIONS = {
    "remember-new": lambda memory, seeds: memory.remember("A brand new memory about the harbour ferry.",
                                                          space="ops", tags=["reviewed"]),
    "remember-keyed": lambda memory, seeds: memory.remember("The ferry now leaves at 07:40.", space="ops",
                                                            key="ferry.time"),
    "remember-artifact": lambda memory, seeds: memory.remember(
        "Minutes of the ferry meeting.", space="ops",
        artifacts=[{"name": "transcript", "location": "memory://t", "metadata": {"text": "words"}}]),
    "tag": lambda memory, seeds: memory.tag(seeds["first"], "published"),
    "link": lambda memory, seeds: memory.link(seeds["second"], seeds["other"], "SUPPORTS"),
    "deprecate": lambda memory, seeds: memory.deprecate(seeds["other"].split("?")[0]),
}


def _server_view(memory: km.Memory) -> list[tuple]:
    rows = []
    for item in memory.items(include_deprecated=True):
        for revision in memory.history(item["item_kref"]):
            rows.append((item["item_kref"], revision["revision"], revision["content"], tuple(revision["tags"]),
                         revision["deprecated"]))
    return sorted(rows)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_kumiho_backend_under_connections_dropped_mid_write(operation):
    StandIn = _kumiho()
    server = StandIn(token=TOKEN)
    armed: dict[str, int] = {}
    server.start()
    proxy = DroppingProxy(("127.0.0.1", server.port))
    _drop_after(server.servicer, proxy, armed)
    server.restart()                                   # serve the wrapped handlers
    direct = km.Memory(backend=km.KumihoBackend(server.address, token=TOKEN, retries=0, timeout=5.0))
    try:
        seeds = {"first": direct.remember("The ferry leaves at 07:30.", space="ops", key="ferry.time"),
                 "other": direct.remember("The harbour office opens at 08:00.", space="ops")}
        seeds["second"] = direct.remember("Tickets are sold on board.", space="ops")
        outcomes = []
        for method in WRITES:
            calls_before = dict(server.servicer.calls)
            baseline = _server_view(direct)
            client = km.Memory(backend=km.KumihoBackend(f"127.0.0.1:{proxy.port}", token=TOKEN, retries=2,
                                                        timeout=5.0))
            armed.clear()
            armed[method] = 0
            try:
                try:
                    result: Any = OPERATIONS[operation](client, seeds)
                    error = None
                except km.KumihoMemoryError as exc:
                    result, error = None, exc
            finally:
                armed.clear()
                with contextlib.suppress(km.KumihoMemoryError):
                    client.close()
            after = _server_view(direct)
            if server.servicer.calls.get(method, 0) != calls_before.get(method, 0):   # the operation called it
                outcomes.append((method, error))
                contents = [row[2] for row in after]
                assert len(contents) - len(set(contents)) <= len(baseline) - len({row[2] for row in baseline}), \
                    f"{operation}: a dropped reply to {method} left a duplicate revision: {after}"
                if error is not None:
                    assert isinstance(error, km.ServiceError), f"{operation}/{method}: {type(error).__name__}: {error}"
                    assert TOKEN not in str(error)
                    if operation.startswith("remember"):
                        assert after == baseline, f"{operation}: a failed write left part of itself behind " \
                                                  f"after {method}'s reply was dropped: {after}"
                elif operation.startswith("remember"):
                    assert direct.get(result)["revision"] >= 1
            # put the seeds back for the next method
            for row in after:
                if row not in baseline and operation.startswith("remember"):
                    with contextlib.suppress(km.KumihoMemoryError):
                        direct.forget(row[0] + f"?r={row[1]}")
            if operation == "deprecate":
                direct.deprecate(seeds["other"].split("?")[0], False)
            if operation == "tag":
                with contextlib.suppress(km.KumihoMemoryError):
                    direct.untag(seeds["first"], "published")
        assert outcomes, f"{operation} called none of the write methods"
        assert proxy.drops >= 1
    finally:
        direct.close()
        proxy.close()
        server.stop()


# ==========================================================================================================
# Memory use over many recalls
# ==========================================================================================================

def test_memory_does_not_grow_over_many_recalls_engages_and_time_words():
    queries = ["dark mode", "what did Ann say about Lisbon", "3 days ago", "in May 2023", "last week",
               "billing roadmap", "ferry 07:30", "who is the CEO", "yesterday's meeting", "invoice rounding"]
    with km.Memory(clock=km.ManualClock("2026-01-01T00:00:00Z", tick=0.001)) as memory:
        for index in range(600):
            memory.remember(f"Memory {index}: {queries[index % len(queries)]} note {index % 97} in space {index % 7}",
                            space=f"s{index % 7}", metadata={"speaker": ["ann", "bob", "cy"][index % 3],
                                                              "event_date": f"2023-05-{1 + index % 28:02d}"})
        for round_ in range(50):                        # warm every cache with each query once
            for query in queries:
                memory.recall(f"{query} {round_}", limit=10, where={"speaker": "ann"} if round_ % 2 else None)
        for query in queries:
            memory.recall(query, limit=10)
            memory.engage(query)
        tracemalloc.start()
        try:
            baseline, _ = tracemalloc.get_traced_memory()
            for round_ in range(100):
                for query in queries:
                    memory.recall(f"{query} {round_ % 50}", limit=10, where={"speaker": "ann"} if round_ % 2 else None)
                if round_ % 10 == 0:
                    memory.engage(queries[round_ % len(queries)])
            after, _peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    # Every bounded cache has seen each text above, so what grows here is per call: about 150 KB over 1,000
    # recalls and 10 engages in 0.8 (the engages store their observations).
    assert after - baseline < 600_000, f"1,000 recalls grew traced memory by {after - baseline} bytes"


# ==========================================================================================================
# Redis with AUTH and TLS while it restarts
# ==========================================================================================================

def test_redis_with_auth_and_tls_restarted_under_the_manager_loses_nothing_and_leaks_no_password(tmp_path, caplog):
    from test_working_memory import RedisServer, redis_py, unavailable

    redis_py()
    openssl = shutil.which("openssl")
    if openssl is None:
        unavailable("openssl is not installed (apt-get install openssl)")
    cert, key = str(tmp_path / "cert.pem"), str(tmp_path / "key.pem")
    made = subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                           "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                           "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    password = "tls-Restart-Pa55word"
    server = RedisServer(tmp_path / "tls", "--requirepass", password, "--appendonly", "yes",
                         "--appendfsync", "always", tls=(cert, key)).start()
    memory = km.Memory(str(tmp_path / "store.db"))
    errors: list[str] = []

    async def scenario() -> dict[str, Any]:
        buffer = km.RedisMemoryBuffer(server.url(password, scheme="rediss"), connection_options={"ssl_ca_certs": cert})
        manager = km.UniversalMemoryManager(memory=memory, redis_buffer=buffer)
        try:
            await manager.ingest_message(user_id="ann", message=MESSAGES[0], session_id="s-tls")
            await manager.ingest_message(user_id="ann", message=MESSAGES[1], session_id="s-tls")
            server.stop()
            for call in (lambda: manager.ingest_message(user_id="ann", message="refused while down",
                                                        session_id="s-tls"),
                         lambda: manager.consolidate_session(session_id="s-tls")):
                with pytest.raises(km.ServiceError) as down:
                    await call()
                assert down.value.transient
                errors.append(f"{down.value!r} {down.value} {down.value.__cause__!r}")
            server.start()                                   # same port, same append-only file
            await manager.ingest_message(user_id="ann", message=MESSAGES[2], session_id="s-tls")
            started = time.monotonic()
            done = await manager.consolidate_session(session_id="s-tls")
            elapsed = time.monotonic() - started
            left = await manager.buffer.get_messages(project=manager.project, session_id="s-tls")
            errors.append(repr(buffer))
            return {"done": done, "left": left, "elapsed": elapsed}
        finally:
            await manager.close()

    try:
        result = asyncio.run(asyncio.wait_for(scenario(), timeout=120))
    finally:
        server.stop()
    try:
        assert result["done"]["success"] is True
        assert result["elapsed"] < 10.0, f"the consolidation after the restart waited {result['elapsed']:.1f} s"
        assert result["left"]["message_count"] == 0
        (item,) = memory.items()
        transcript = memory.get(item["item_kref"] + "?t=latest&a=transcript")["artifact"]["metadata"]["text"]
        for message in MESSAGES:
            assert message.split(" with ")[0] in transcript, message
        assert "refused while down" not in transcript
        for text in errors + [caplog.text]:
            assert password not in text, text[:300]
    finally:
        memory.close()


def test_opening_a_closed_store_on_a_full_disk_says_the_disk_is_full(small_disk):
    path = os.path.join(small_disk, "store.db")
    with km.Memory(path) as memory:
        kref = memory.remember("Written while there was room.", space="s")
    ballast = _fill(small_disk)
    try:
        with km.Memory(path) as memory:                   # reading needs no room; if it fails, say why
            assert memory.get(kref)["content"] == "Written while there was room."
    except km.KumihoMemoryError as exc:
        _disk_error(exc, path)
    finally:
        os.remove(ballast)
    with km.Memory(path) as memory:
        assert memory.get(kref)["content"] == "Written while there was room."


# ==========================================================================================================
# Same class as item 5 elsewhere: numbers from the user that overflow a date
# ==========================================================================================================

@pytest.mark.parametrize("window_days", [999_999_999, 1_000_000_000, 10 ** 30])
def test_a_space_profile_window_no_date_can_hold_is_our_error_or_works(window_days, tmp_path):
    with km.Memory() as memory:
        memory.remember("A memory in a space.", space="s")
        try:
            km.SpaceProfiler(memory, window_days=window_days).run_sync()
        except km.KumihoMemoryError as exc:
            assert isinstance(exc, km.InvalidArgumentError) and "window_days" in str(exc), exc
    path = str(tmp_path / "store.db")
    assert km.main(["--db", path, "remember", "A memory in a space.", "--space", "s"]) == 0
    code, _out, err = _run_main(["--db", path, "profile", "--window-days", str(window_days)])
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err
