"""The ``kumiho-memory`` command line, run as a user runs it: ``python kumiho_memory.py ...`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "kumiho_memory.py")


@pytest.fixture
def cli(tmp_path):
    """Run the CLI against a store in tmp_path; returns (exit code, stdout, stderr)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("KUMIHO_")}
    env["KUMIHO_MEMORY_PATH"] = str(tmp_path / "cli.db")
    env["HOME"] = str(tmp_path / "home")

    def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        done = subprocess.run([sys.executable, SCRIPT, *args], input=stdin, capture_output=True, text=True,
                              env=env, timeout=60)
        return done.returncode, done.stdout, done.stderr
    run.env = env
    return run


def test_remember_recall_get_history_round_trip(cli):
    code, out, err = cli("remember", "The user prefers dark mode", "--space", "prefs", "--key", "ui.theme")
    assert code == 0, err
    first = out.strip()
    assert first.startswith("kref://CognitiveMemory/prefs/") and first.endswith("?r=1")
    code, out, _ = cli("remember", "The user now prefers light mode", "--space", "prefs", "--key", "ui.theme",
                       "--json")
    second = json.loads(out)["kref"]
    assert code == 0 and second.endswith("?r=2")
    code, out, _ = cli("recall", "light mode", "--json")
    hits = json.loads(out)
    assert code == 0 and [hit["kref"] for hit in hits] == [second]
    item = first.split("?")[0]
    code, out, _ = cli("history", item, "--json")
    assert [entry["revision"] for entry in json.loads(out)] == [1, 2]
    code, out, _ = cli("get", item)
    assert code == 0 and "light mode" in out and "latest" in out


def test_global_options_work_before_and_after_the_command(cli, tmp_path):
    other = str(tmp_path / "other.db")
    assert cli("--db", other, "remember", "alpha beta")[0] == 0
    code, out, _ = cli("recall", "alpha", "--db", other, "--json")
    assert code == 0 and len(json.loads(out)) == 1
    code, out, _ = cli("recall", "alpha", "--json")        # the default store does not have it
    assert code == 0 and json.loads(out) == []


def test_tag_link_edges_deprecate_forget_stats(cli):
    a = cli("remember", "first fact about tea")[1].strip()
    b = cli("remember", "second fact about coffee")[1].strip()
    assert cli("tag", a, "published")[0] == 0
    code, out, _ = cli("get", a.split("?")[0] + "?t=published", "--json")
    assert json.loads(out)["kref"] == a
    code, out, err = cli("link", b, a, "DERIVED_FROM", "--metadata", '{"why": "test"}', "--json")
    assert code == 0, err
    assert json.loads(out)["metadata"] == {"why": "test"}
    code, out, _ = cli("edges", a, "--direction", "incoming", "--json")
    assert [edge["source_kref"] for edge in json.loads(out)] == [b]
    assert cli("deprecate", b.split("?")[0])[0] == 0
    assert [hit["kref"] for hit in json.loads(cli("recall", "coffee", "--json")[1])] == []
    assert cli("deprecate", b.split("?")[0], "--undo")[0] == 0
    hits = json.loads(cli("recall", "coffee", "--json")[1])
    assert hits[0]["kref"] == b
    assert [(hit["kref"], hit.get("graph_augmented")) for hit in hits[1:]] == [(a, True)]   # pulled in over the edge
    code, out, _ = cli("forget", b.split("?")[0], "--json")
    assert code == 0 and json.loads(out)["revisions"] == 1
    stats = json.loads(cli("stats", "--json")[1])
    assert stats["items"] == 1 and stats["revisions"] == 1 and stats["edges"] == 0
    assert cli("untag", a, "published", "--json")[1].strip().startswith("{")


def test_errors_are_one_line_with_exit_codes(cli):
    code, out, err = cli("get", "kref://CognitiveMemory/notes/missing.memory")
    assert code == 3 and out == "" and err.startswith("kumiho-memory: not found:") and err.count("\n") == 1
    code, _, err = cli("get", "not-a-kref")
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1 and "kref" in err
    code, _, err = cli("remember", "x", "--metadata", "[1, 2]")
    assert code == 2 and "--metadata" in err
    code, _, err = cli("frobnicate")
    assert code == 2 and "invalid choice" in err
    code, _, err = cli("link", "kref://CognitiveMemory/a/b.c", "kref://CognitiveMemory/a/d.c", "lower")
    assert code == 2 and "edge type" in err


def test_help_and_version(cli):
    code, out, _ = cli("--help")
    assert code == 0 and "remember" in out and "exit codes" in out
    code, out, _ = cli("--version")
    assert code == 0 and out.startswith("kumiho-memory ")
    for command in ("remember", "recall", "get", "history", "tag", "untag", "link", "edges", "deprecate",
                    "forget", "stats", "export", "import"):
        code, out, _ = cli(command, "--help")
        assert code == 0 and "usage: kumiho-memory " + command in out


def test_remember_reads_stdin(cli):
    code, out, _ = cli("remember", "-", "--title", "from stdin", stdin="piped content about llamas\n")
    assert code == 0
    assert "llamas" in json.loads(cli("get", out.strip(), "--json")[1])["content"]


def test_export_import_export_is_identical(cli, tmp_path):
    first = cli("remember", "one", "--key", "k", "--tag", "published", "--evidence-level", "official",
                "--source", "press-release")[1].strip()
    cli("remember", "two", "--key", "k")
    cli("remember", "three raw", "--metadata", '{"event_date": "2023-05-08", "speaker": "Caroline"}')
    cli("link", first, first.split("?")[0] + "?r=2", "RELATED_TO")
    export_path = str(tmp_path / "dump.jsonl")
    code, _, err = cli("export", "--output", export_path)
    assert code == 0, err
    dumped = open(export_path, encoding="utf-8").read()
    code, out, _ = cli("export")
    assert out == dumped
    copy_db = str(tmp_path / "copy.db")
    code, out, err = cli("--db", copy_db, "import", export_path, "--json")
    assert code == 0, err
    assert json.loads(out)["records"] == len(dumped.splitlines())
    assert cli("--db", copy_db, "export")[1] == dumped
    code, out, _ = cli("--db", copy_db, "import", "-", stdin=dumped)      # again: all skipped
    assert code == 0 and "0 added" in out
    assert cli("--db", copy_db, "export")[1] == dumped


def test_import_rejects_garbage_and_writes_nothing(cli, tmp_path):
    cli("remember", "keep me")
    before = cli("export")[1]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(before.splitlines()[0] + "\n{not json\n", encoding="utf-8")
    code, _, err = cli("import", str(bad))
    assert code == 1 and "line 2" in err
    assert cli("export")[1] == before
    code, _, err = cli("import", str(tmp_path / "missing.jsonl"))
    assert code == 1 and "cannot read" in err


def test_export_mermaid(cli):
    first = cli("remember", "version one", "--key", "doc")[1].strip()
    cli("remember", "version two", "--key", "doc", "--tag", "published")
    code, out, err = cli("export", "--format", "mermaid", "--item", first.split("?")[0])
    assert code == 0, err
    assert out.startswith("flowchart") and "r2 -->|SUPERSEDES| r1" in out and "published" in out
    code, _, err = cli("export", "--format", "mermaid")
    assert code == 2 and "--item" in err


def test_default_store_is_a_per_user_file(cli, tmp_path):
    env = dict(cli.env)
    del env["KUMIHO_MEMORY_PATH"]
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    done = subprocess.run([sys.executable, SCRIPT, "remember", "persisted"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert os.path.exists(tmp_path / "xdg" / "kumiho-memory" / "memory.db")
