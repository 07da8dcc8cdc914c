"""Probe: retrieval quality on LoCoMo conversations, our recall beside rank-bm25 and bm25s.

Usage: python probes/locomo_retrieval.py [--data DIR] [--limit 20]

Every turn of a conversation is stored as one memory, in order, in a space of its own: text
"<speaker>: <text>" (+ " [shares a photo: <caption>]"), metadata speaker, dia_id, session and event_date
(the session's date). Each question of categories 1-4 is asked with ``Memory.recall(question, limit=20,
space=...)``; recall@k is the share of its evidence turns in the top k, averaged over questions; hit@10 is
the share of questions with at least one evidence turn in the top 10. Dataset annotations (observations,
summaries) are never read. rank-bm25 and bm25s run on the same turns when installed (dev tools only).

Writes probes/results/locomo_retrieval.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import os
import re
import sys
import time

from _common import ROOT, km, percentile, print_table, write_results

DEFAULT_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "locomo")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)


def session_date(text: str) -> str:
    """'1:56 pm on 8 May, 2023' -> '2023-05-08T13:56:00Z'."""
    moment = dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.strftime("%Y-%m-%dT%H:%M:00Z")


def load_conversation(path: str) -> tuple[list[dict], list[dict]]:
    """Return (turns in order, scored questions) of one LoCoMo conversation file."""
    with open(path, encoding="utf-8") as stream:
        data = json.load(stream)
    conversation = data.get("conversation", data)
    turns = []
    numbers = sorted(int(match.group(1)) for key in conversation
                     if (match := re.fullmatch(r"session_(\d+)", key)))
    for number in numbers:
        date = session_date(conversation[f"session_{number}_date_time"])
        for turn in conversation[f"session_{number}"]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares a photo: {turn['blip_caption']}]"
            turns.append({"dia_id": normalize_dia_id(turn["dia_id"]), "speaker": turn["speaker"], "text": text,
                          "session": number, "event_date": date})
    known = {turn["dia_id"] for turn in turns}
    questions = []
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = {normalize_dia_id(part) for item in qa.get("evidence", [])
                    for part in re.split(r"[\s,;]+", item) if part}
        evidence &= known
        if evidence:
            questions.append({"question": qa["question"], "category": qa["category"], "evidence": evidence})
    return turns, questions


def normalize_dia_id(text: str) -> str:
    match = re.fullmatch(r"D(\d+):(\d+)", text.strip())
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else text.strip()


def score(ranked: list[str], evidence: set[str]) -> dict[str, float]:
    figures = {f"recall@{k}": len(evidence & set(ranked[:k])) / len(evidence) for k in KS}
    figures["hit@10"] = float(bool(evidence & set(ranked[:10])))
    return figures


def average(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(sum(row[key] for row in rows) / len(rows), 4) for key in rows[0]} if rows else {}


def word_tokens(text: str) -> list[str]:
    """The baselines' tokens: lowercase words, stopwords removed (as in the data's README)."""
    return [word for word in re.findall(r"[a-z0-9]+", text.lower()) if word not in km.STOPWORDS]


def run_ours(conversations, limit: int) -> tuple[list[tuple[int, dict]], list[float], float]:
    rows, latencies = [], []
    started = time.perf_counter()
    with km.Memory(ids=km.SequentialIds()) as memory:
        for index, (name, turns, _questions) in enumerate(conversations):
            space = f"locomo/{name}"
            for turn in turns:
                memory.remember(turn["text"], space=space, kind="message",
                                metadata={"speaker": turn["speaker"], "dia_id": turn["dia_id"],
                                          "session": turn["session"], "event_date": turn["event_date"]})
        ingest_seconds = time.perf_counter() - started
        for name, _turns, questions in conversations:
            space = f"locomo/{name}"
            for qa in questions:
                start = time.perf_counter()
                hits = memory.recall(qa["question"], limit=limit, space=space)
                latencies.append((time.perf_counter() - start) * 1000.0)
                rows.append((qa["category"], score([hit["metadata"]["dia_id"] for hit in hits], qa["evidence"])))
    return rows, latencies, ingest_seconds


def run_baseline(name: str, conversations, limit: int):
    """rank-bm25 or bm25s over the same turns; None when the package is not installed."""
    try:
        module = __import__("rank_bm25" if name == "rank-bm25" else "bm25s")
    except ImportError:
        return None
    rows, latencies = [], []
    for _conv, turns, questions in conversations:
        corpus = [word_tokens(turn["text"]) for turn in turns]
        ids = [turn["dia_id"] for turn in turns]
        if name == "rank-bm25":
            index = module.BM25Okapi(corpus)
        else:
            index = module.BM25()
            index.index(corpus, show_progress=False)
        for qa in questions:
            query = word_tokens(qa["question"])
            start = time.perf_counter()
            if name == "rank-bm25":
                scores = index.get_scores(query)
                order = sorted(range(len(ids)), key=lambda i: -scores[i])[:limit]
            else:
                vocabulary = [token for token in query if token in index.vocab_dict] or query[:1]
                documents, _scores = index.retrieve([vocabulary], k=min(limit, len(ids)), show_progress=False)
                order = list(documents[0])
            latencies.append((time.perf_counter() - start) * 1000.0)
            rows.append((qa["category"], score([ids[i] for i in order], qa["evidence"])))
    return rows, latencies


def summarize(rows, latencies) -> dict:
    result = {"all": average([figures for _, figures in rows]),
              "query_p50_ms": round(percentile(latencies, 0.5), 3),
              "query_p95_ms": round(percentile(latencies, 0.95), 3),
              "questions": len(rows)}
    for category, label in CATEGORIES.items():
        result[label] = average([figures for cat, figures in rows if cat == category])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="folder of LoCoMo conversation JSON files")
    parser.add_argument("--limit", type=int, default=20)
    args = parser.parse_args()
    files = sorted(glob.glob(os.path.join(args.data, "*.json")))
    if not files:
        print(f"no LoCoMo files in {args.data}; pass --data DIR", file=sys.stderr)
        return 2
    conversations = []
    for path in files:
        turns, questions = load_conversation(path)
        conversations.append((os.path.splitext(os.path.basename(path))[0], turns, questions))
    print(f"{len(conversations)} conversations, {sum(len(t) for _, t, _ in conversations)} turns, "
          f"{sum(len(q) for _, _, q in conversations)} questions", file=sys.stderr)
    systems = {}
    rows, latencies, ingest = run_ours(conversations, args.limit)
    systems["kumiho_memory"] = {**summarize(rows, latencies), "ingest_seconds": round(ingest, 2)}
    for name in ("rank-bm25", "bm25s"):
        outcome = run_baseline(name, conversations, args.limit)
        if outcome is not None:
            systems[name] = summarize(*outcome)
    table = [(f"{name:14} r@5 / r@10 / r@20 / hit@10 / p50",
              f"{f['all']['recall@5']:.3f} / {f['all']['recall@10']:.3f} / {f['all']['recall@20']:.3f} / "
              f"{f['all']['hit@10']:.3f} / {f['query_p50_ms']} ms") for name, f in systems.items()]
    print_table(table)
    print("wrote", write_results("locomo_retrieval", {"data": os.path.relpath(args.data, ROOT),
                                                      "files": [os.path.basename(f) for f in files],
                                                      "limit": args.limit}, systems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
