"""``kumiho-memory list``, ``show`` and ``ui``, run through ``main`` (and ``ui`` as a real process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

import kumiho_memory as km

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "cli.db")
    with km.Memory(path) as memory:
        first = memory.remember("The user prefers dark mode", space="prefs", key="ui.theme")
        memory.tag(first, "reviewed")
        second = memory.remember("The user switched to light mode", space="prefs", key="ui.theme")
        official = memory.remember("Screens dim at night", space="health", evidence_level="official")
        claim = memory.remember("Screens never dim", space="health", source="forum")
        memory.link(claim, official, km.CONTRADICTS)
        memory.link(second, official, km.DERIVED_FROM)
        memory.add_artifact(second, "transcript", "/tmp/t.txt")
        retired = memory.remember("An old note", space="notes")
        memory.deprecate(retired.split("?")[0])
    return path


def cli(capsys, *argv):
    code = km.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_shows_current_revision_space_kind_tags_evidence_and_marks(db, capsys):
    code, out, _ = cli(capsys, "--db", db, "list")
    assert code == 0
    assert "light mode" in out and "space prefs" in out and "r2/2" in out
    assert "evidence official" in out and "(contested)" in out
    assert "An old note" not in out
    code, out, _ = cli(capsys, "--db", db, "list", "--deprecated")
    assert "An old note" in out and "(deprecated)" in out


def test_list_filters_pages_and_prints_json(db, capsys):
    code, out, _ = cli(capsys, "--db", db, "list", "--json", "--space", "health")
    listed = json.loads(out)
    assert code == 0 and {row["space"] for row in listed["memories"]} == {"health"} and listed["total_items"] == 2
    row = next(row for row in listed["memories"] if row["evidence_level"] == "official")
    assert row["contested"] is True and set(row) >= {"item_kref", "kref", "revision", "kind", "tags", "deprecated"}
    assert len(json.loads(cli(capsys, "--db", db, "list", "--json", "--evidence", "official")[1])["memories"]) == 1
    assert json.loads(cli(capsys, "--db", db, "list", "--json", "--tag", "reviewed")[1])["memories"] == []
    assert len(json.loads(cli(capsys, "--db", db, "list", "--json", "--kind", "memory")[1])["memories"]) == 3
    page = json.loads(cli(capsys, "--db", db, "list", "--json", "--limit", "1")[1])
    assert len(page["memories"]) == 1 and page["next_offset"] == 1
    rest = json.loads(cli(capsys, "--db", db, "list", "--json", "--limit", "5", "--offset", "1")[1])
    assert page["memories"][0]["item_kref"] not in {row["item_kref"] for row in rest["memories"]}
    code, _, out = cli(capsys, "--db", db, "list", "--limit", "0")
    assert code == 2 and "limit" in out                  # bad input is a usage error
    assert cli(capsys, "--db", db, "list", "--evidence", "gold")[0] == 2
    assert cli(capsys, "--db", db, "list", "--as-of", "nonsense")[0] == 2


def test_show_prints_the_whole_chain(db, capsys):
    with km.Memory(db) as memory:
        item = next(i["item_kref"] for i in memory.items(space="prefs"))
        first_time = memory.history(item)[0]["created_at"]
    code, out, _ = cli(capsys, "--db", db, "show", item)
    assert code == 0
    assert "r2" in out and "SUPERSEDES r1" in out and "reviewed:" in out and "artifact transcript: /tmp/t.txt" in out
    assert "DERIVED_FROM" in out and "edges in: none" in out
    code, out, _ = cli(capsys, "--db", db, "show", item + "?r=1", "--json", "--as-of", first_time)
    story = json.loads(out)
    assert story["item_kref"] == item and story["current_at_as_of"]["revision"] == 1
    assert [r["revision"] for r in story["revisions"]] == [1, 2] and "reviewed" in story["tags"]
    assert cli(capsys, "--db", db, "show", "kref://CognitiveMemory/prefs/nope.memory")[0] == 3
    assert cli(capsys, "--db", db, "show", "not-a-kref")[0] == 2


def test_ui_serves_the_browser_until_interrupted(db, tmp_path):
    import signal
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    process = subprocess.Popen([sys.executable, "-c",
                                "import sys, kumiho_memory as km; sys.exit(km.main(sys.argv[1:]))",
                                "--db", db, "ui", "--port", str(port)], stderr=subprocess.PIPE, text=True,
                               env=environment)
    try:
        line = process.stderr.readline()
        assert f"http://127.0.0.1:{port}/" in line and "read-only" in line
        deadline = time.monotonic() + 30
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert "light mode" in page and 'id="memories"' in page
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
