"""Probe: retrieval quality on LongMemEval_s haystacks, our recall beside rank-bm25 and bm25s.

Usage: python probes/longmemeval_retrieval.py [--data FILE] [--limit 10] [--query-time]

Every turn of a question's haystack (about 50 sessions, ~500 turns) is stored as one memory, in order, in a
space of its own: text "<role>: <content>", metadata speaker (the role), session (its id) and event_date (the
session's date). The question is asked with ``Memory.recall(question, limit=..., space=...)``, without
``query_time`` unless ``--query-time`` passes the question's date, so relative times ("last Saturday")
resolve against the default anchor (the newest event in the space). recall@k is the share of the turns
labelled ``has_answer`` in the top k (the label is never stored), averaged over questions; session@k is the
share of the answer sessions with a turn in the top k. Figures are given per question type and for two
halves: "tune" (even positions in the file) and "heldout" (odd positions, never used to choose anything).
rank-bm25 and bm25s run on the same turns in the same run when installed (dev tools only).

The data is not shipped: pass ``--data`` (default ../shared/data/longmemeval/dev_s.jsonl.gz beside the
repository); the probe skips with a message when it is absent. Writes probes/results/longmemeval_retrieval.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import re
import sys
import time

from _common import ROOT, bm25_baseline, bm25_baseline_top, km, percentile, print_table, write_results

DEFAULT_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "longmemeval", "dev_s.jsonl.gz")
KS = (5, 10)


def haystack_date(text: str) -> str:
    """'2023/05/20 (Sat) 02:21' -> '2023-05-20T02:21:00Z'."""
    moment = dt.datetime.strptime(re.sub(r"\s*\(\w+\)\s*", " ", text.strip()), "%Y/%m/%d %H:%M")
    return moment.strftime("%Y-%m-%dT%H:%M:00Z")


def load_questions(path: str) -> list[dict]:
    """Each question with its turns in order: ``{id, type, question, date, turns, evidence, sessions, split}``."""
    opener = gzip.open if path.endswith(".gz") else open
    questions = []
    with opener(path, "rt", encoding="utf-8") as stream:
        for position, line in enumerate(line for line in stream if line.strip()):
            record = json.loads(line)
            turns, evidence = [], set()
            for session_id, date, session in zip(record["haystack_session_ids"], record["haystack_dates"],
                                                 record["haystack_sessions"]):
                for number, turn in enumerate(session):
                    turn_id = f"{session_id}#{number}"
                    turns.append({"id": turn_id, "role": turn["role"], "session": session_id,
                                  "text": f"{turn['role']}: {turn['content']}", "event_date": haystack_date(date)})
                    if turn.get("has_answer"):
                        evidence.add(turn_id)
            questions.append({"id": record["question_id"], "type": record["question_type"],
                              "question": record["question"], "date": haystack_date(record["question_date"]),
                              "turns": turns, "evidence": evidence,
                              "sessions": set(record["answer_session_ids"]),
                              "split": "heldout" if position % 2 else "tune"})
    return questions


def score(ranked: list[str], question: dict) -> dict[str, float]:
    figures = {}
    for k in KS:
        top = ranked[:k]
        if question["evidence"]:
            figures[f"recall@{k}"] = len(question["evidence"] & set(top)) / len(question["evidence"])
        sessions = {turn_id.rsplit("#", 1)[0] for turn_id in top}
        figures[f"session@{k}"] = len(question["sessions"] & sessions) / len(question["sessions"])
    return figures


def average(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = sorted({key for row in rows for key in row})
    return {key: round(sum(row[key] for row in rows if key in row) / max(1, sum(key in row for row in rows)), 4)
            for key in keys}


def word_tokens(text: str) -> list[str]:
    """The baselines' tokens: lowercase words, stopwords removed."""
    return [word for word in re.findall(r"[a-z0-9]+", text.lower()) if word not in km.STOPWORDS]


def run_ours(questions: list[dict], limit: int, query_time: bool) -> tuple[list[tuple[dict, dict]], list[float], float]:
    rows, latencies = [], []
    started = time.perf_counter()
    with km.Memory(ids=km.SequentialIds()) as memory:
        for question in questions:
            space = f"longmemeval/{question['id']}"
            for turn in question["turns"]:
                memory.remember(turn["text"], space=space, kind="message",
                                metadata={"speaker": turn["role"], "session": turn["session"],
                                          "event_date": turn["event_date"], "turn": turn["id"]})
        ingest_seconds = time.perf_counter() - started
        for question in questions:
            options = {"query_time": question["date"]} if query_time else {}
            start = time.perf_counter()
            hits = memory.recall(question["question"], limit=limit, space=f"longmemeval/{question['id']}", **options)
            latencies.append((time.perf_counter() - start) * 1000.0)
            rows.append((question, score([hit["metadata"]["turn"] for hit in hits], question)))
    return rows, latencies, ingest_seconds


def run_baseline(name: str, questions: list[dict], limit: int):
    """rank-bm25 or bm25s over the same turns; None when the package is not installed."""
    try:
        module = __import__("rank_bm25" if name == "rank-bm25" else "bm25s")
    except ImportError:
        return None
    rows, latencies = [], []
    for question in questions:
        corpus = [word_tokens(turn["text"]) for turn in question["turns"]]
        ids = [turn["id"] for turn in question["turns"]]
        query = word_tokens(question["question"])
        index = bm25_baseline(name, module, corpus)
        start = time.perf_counter()
        order = bm25_baseline_top(name, index, query, len(ids), limit)
        latencies.append((time.perf_counter() - start) * 1000.0)
        rows.append((question, score([ids[i] for i in order], question)))
    return rows, latencies


def summarize(rows, latencies) -> dict:
    result = {"all": average([figures for _, figures in rows]),
              "query_p50_ms": round(percentile(latencies, 0.5), 3),
              "questions": len(rows)}
    for split in ("tune", "heldout"):
        result[split] = average([figures for question, figures in rows if question["split"] == split])
    for kind in sorted({question["type"] for question, _ in rows}):
        result[kind] = average([figures for question, figures in rows if question["type"] == kind])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="LongMemEval_s questions, JSON lines (.gz or plain)")
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--query-time", action="store_true", help="pass each question's date as query_time")
    args = parser.parse_args()
    if not os.path.exists(args.data):
        print(f"skipped: no LongMemEval data at {args.data}; pass --data FILE (dev_s.jsonl.gz)", file=sys.stderr)
        return 0
    questions = load_questions(args.data)
    print(f"{len(questions)} questions, {sum(len(q['turns']) for q in questions)} turns", file=sys.stderr)
    systems = {}
    rows, latencies, ingest = run_ours(questions, max(args.limit, max(KS)), args.query_time)
    systems["kumiho_memory"] = {**summarize(rows, latencies), "ingest_seconds": round(ingest, 2)}
    for name in ("rank-bm25", "bm25s"):
        outcome = run_baseline(name, questions, max(args.limit, max(KS)))
        if outcome is not None:
            systems[name] = summarize(*outcome)
    table = []
    for name, figures in systems.items():
        for part in ("all", "tune", "heldout"):
            f = figures[part]
            table.append((f"{name:14} {part:8} r@5 / r@10 / s@5 / s@10",
                          f"{f['recall@5']:.3f} / {f['recall@10']:.3f} / {f['session@5']:.3f} / {f['session@10']:.3f}"))
        table.append((f"{name:14} p50", f"{figures['query_p50_ms']} ms"))
    print_table(table)
    parameters = {"data": os.path.basename(args.data), "limit": args.limit, "query_time": args.query_time,
                  "split": "tune = even positions in the file, heldout = odd positions"}
    print("wrote", write_results("longmemeval_retrieval", parameters, systems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
