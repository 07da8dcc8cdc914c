"""Probe: recall at scale -- warm query p50/p95, cold start in a fresh process, bulk ingest; side by side.

Usage: python probes/scale.py [--sizes 10000,100000] [--queries 200] [--seed 11]
                              [--systems ours,rank-bm25,bm25s] [--disk] [--phases warm,cold,bulk]
                              [--cold-runs 3] [--build-budget-s 600] [--out PATH]

Writes probes/results/scale.json (or --out). The corpus is synthetic and deterministic from --seed: a
vocabulary of 50,000 pseudo-words (lowercase a-z, 4-10 letters, no stopwords, chosen so the Porter stemmer
leaves them alone), word ranks drawn from a Zipf distribution (s = 1.07), 10-30 words a memory; the queries
are 3-6 distinct words drawn from the same distribution, so they mix common and rare words. Every phase runs
for each size; every measurement runs in its own subprocess, so each peak RSS (ru_maxrss) belongs to one
system doing one thing.

WARM (``figures[system][size]``, the keys probes/readme_figures.py reads):

  ours       km.Memory() in memory (with --disk also "ours-disk", a file store in a temp dir): every memory
             written with remember_many() in batches of 1,000 dicts {"content", "space", "kind"} when the
             module has it, else remember() one by one; then recall(q, limit=10).
  rank-bm25  rank_bm25.BM25Okapi over the same words (the pseudo-words need no stemming), top 10 by score.
             Not run above 100,000 memories (every query scores every document).
  bm25s      bm25s.BM25().index(tokens), then retrieve([q], k=10) one query at a time.

  The documents are held as lists of words before the clock starts (the baselines get them pre-tokenized,
  ours gets them joined with spaces). The first query is timed on its own (an index may be built lazily),
  then all queries are timed, including the first again. When the first 10 timed queries average more than
  200 ms only 20 are measured (rank-bm25 at 100,000 always measures 20); ``queries_measured`` says how many.
  ``agreement_vs_bm25s`` is the mean share of top-10 hits (score > 0) shared with bm25s over the first 20
  queries -- a sanity check on the ranking, not a quality metric (the BM25 variants differ a little).
  Building ours is given --build-budget-s: when the first writes project a longer build (a remember() loop at
  1,000,000, say), ours is skipped at that size and ``skipped`` says why.

BULK INGEST (``figures["bulk_ingest"][size]``): the same texts written to a fresh file store.
  ours       Memory(path) opened, remember_many() in batches of 1,000 dicts, close(): ``seconds`` is open to
             closed, ``write_s`` the remember_many calls alone. Without remember_many the store is built with
             a remember() loop (for the cold start) and ours says "missing".
  fts5       sqlite3: a fresh file db, CREATE VIRTUAL TABLE t USING fts5(body), every text inserted with
             executemany in one transaction, commit, close.
  ``ratio_ours_to_fts5`` = ours seconds / fts5 seconds.

COLD START (``figures["cold_start"][size]``): the stores built above (ours, the FTS5 db, and a bm25s index
  saved once with save()) are opened by a FRESH python process that runs one query, the first of the query
  set, and exits. "Cold" means a fresh process with a warm OS file cache: the files were just written and
  dropping the page cache is not possible here. Each child runs --cold-runs times (3), the systems
  interleaved, after one untimed import of each system's module (so a stale .pyc is not timed); each figure
  is the median over the runs (``runs`` holds them all).
  ours       import kumiho_memory; Memory(path); recall(query, limit=10).
  fts5       import sqlite3; connect(path); SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t)
             LIMIT 10, the query's words quoted and joined with OR.
  bm25s      import bm25s; BM25.load(dir, mmap=True); retrieve([tokens], k=10).
  ``first_result_ms`` is from before the import to the first result, in the child; ``first_query_ms`` the
  query alone (ours: the first recall); ``import_ms``, ``open_ms``; ``process_ms`` the parent's clock from
  spawning the child to its exit (interpreter start-up and teardown included); ``peak_rss_mb`` the child's
  ru_maxrss after the first result. ``ratio_ours_to_fts5`` / ``ratio_ours_to_bm25s`` compare
  first_result_ms; ``top10_matches_warm`` says whether ours' cold top 10 equals the warm in-memory top 10 for
  the same query (same texts, same ids; only the write times differ).

WARM ON THE REOPENED STORE (``figures["warm_reopened"][size]``): a fresh process opens ours' file store
  built above and runs every query as WARM does (first query alone, then p50/p95), with its peak RSS --
  the figures of a long-running process over an existing store. ``agreement_vs_in_memory`` is the mean share
  of top-10 krefs shared with the warm in-memory run over the first 20 queries.

rank-bm25 and bm25s are dev-only tools: when one is not importable its entries say "skipped". The probe
reports; it asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from _common import km, percentile, print_table, timed, write_results

VOCABULARY = 50_000
ZIPF_S = 1.07
DOC_WORDS = (10, 30)
QUERY_WORDS = (3, 6)
LIMIT = 10
SLOW_QUERY_MS = 200.0
CAPPED_QUERIES = 20
AGREEMENT_QUERIES = 20
SYSTEMS = ("ours", "ours-disk", "rank-bm25", "bm25s")

# The module's English stopwords plus "also": a superset of what a BM25 tokenizer would drop; no pseudo-word is one.
STOPWORDS = km.STOPWORDS | {"also"}
CONSONANTS = "bdfghjkmnprtvz"
VOWELS = "aeiou"
# Endings the Porter stemmer could strip or rewrite (plus final e/s/y/l/i/u, excluded by the last letter).
_STEMMABLE = re.compile(r"(ed|ing|er|ic|ant|ent|ion|ism|ment|ator|izer|ation|eed|at|bl|iz)$")


# -- corpus ---------------------------------------------------------------------------------------------

def vocabulary(seed: int) -> list[str]:
    """``VOCABULARY`` distinct pseudo-words; index 0 is Zipf rank 1."""
    rng = random.Random(f"vocabulary-{seed}")
    words, seen = [], set()
    while len(words) < VOCABULARY:
        letters = []
        length = rng.randint(4, 10)
        while len(letters) < length:
            letters.append(rng.choice(CONSONANTS))
            if len(letters) < length:
                letters.append(rng.choice(VOWELS))
        word = "".join(letters)
        if (word[-1] not in CONSONANTS + "ao" or _STEMMABLE.search(word) or word in STOPWORDS
                or word in seen):
            continue
        seen.add(word)
        words.append(word)
    return words


def zipf_cdf() -> list[float]:
    return list(itertools.accumulate(1.0 / rank ** ZIPF_S for rank in range(1, VOCABULARY + 1)))


def documents(seed: int, count: int):
    """Yield ``count`` documents, each a list of 10-30 words (shared string objects from the vocabulary)."""
    words, cdf = vocabulary(seed), zipf_cdf()
    rng = random.Random(f"documents-{seed}")
    for _ in range(count):
        yield rng.choices(words, cum_weights=cdf, k=rng.randint(*DOC_WORDS))


def queries(seed: int, count: int) -> list[list[str]]:
    """``count`` queries of 3-6 distinct words from the same Zipf distribution."""
    words, cdf = vocabulary(seed), zipf_cdf()
    rng = random.Random(f"queries-{seed}")
    result = []
    for _ in range(count):
        size, chosen = rng.randint(*QUERY_WORDS), []
        while len(chosen) < size:
            word = rng.choices(words, cum_weights=cdf, k=1)[0]
            if word not in chosen:
                chosen.append(word)
        result.append(chosen)
    return result


# -- child: one system, one size -----------------------------------------------------------------------

def rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (ru_maxrss is KB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure_queries(search, query_list: list, force_cap: bool) -> dict:
    """Time ``search`` (query -> list of doc indices) on the first query alone, then on the queries."""
    first, first_ms = timed(search, query_list[0])
    budget = min(CAPPED_QUERIES, len(query_list)) if force_cap else len(query_list)
    reason = "rank-bm25 at 100,000 measures 20 queries" if force_cap and budget < len(query_list) else None
    times, tops = [], []
    for index, query in enumerate(query_list):
        if index >= budget:
            break
        hits, elapsed = timed(search, query)
        times.append(elapsed)
        if index < AGREEMENT_QUERIES:
            tops.append(hits)
        if index == 9 and budget > CAPPED_QUERIES and sum(times) / len(times) > SLOW_QUERY_MS:
            budget = CAPPED_QUERIES
            reason = f"first 10 queries averaged {sum(times) / len(times):.0f} ms > {SLOW_QUERY_MS:.0f} ms"
    figures = {"first_query_ms": round(first_ms, 3),
               "query_p50_ms": round(percentile(times, 0.5), 3),
               "query_p95_ms": round(percentile(times, 0.95), 3),
               "query_mean_ms": round(sum(times) / len(times), 3),
               "queries_measured": len(times),
               "hits_mean": round(sum(len(hits) for hits in tops) / len(tops), 2),
               "top10": tops}
    if reason:
        figures["queries_capped"] = reason
    return figures


def insert_ours(memory, texts: list[str], batch: bool) -> tuple[list, list[float], str]:
    """Write every text (with remember_many when ``batch``); return (krefs, per-write ms or [], the API used)."""
    spaces = [f"space{index % 7}" for index in range(len(texts))]
    if batch:
        krefs = []
        for start in range(0, len(texts), 1000):
            batch = [{"content": text, "space": space, "kind": "memory"}
                     for text, space in zip(texts[start:start + 1000], spaces[start:start + 1000])]
            returned = memory.remember_many(batch)
            krefs.extend(returned if isinstance(returned, (list, tuple)) else [])
            if start and start % 20000 == 0:
                progress(f"  {start} written")
        return krefs, [], "remember_many (batches of 1000 dicts)"
    krefs, write_ms = [], []
    for index, (text, space) in enumerate(zip(texts, spaces)):
        kref, elapsed = timed(memory.remember, text, space=space, kind="memory")
        krefs.append(kref)
        write_ms.append(elapsed)
        if index and index % 20000 == 0:
            progress(f"  {index} written")
    return krefs, write_ms, "remember"


def child_ours(size: int, seed: int, query_count: int, disk: bool) -> dict:
    texts = [" ".join(words) for words in documents(seed, size)]
    query_list = [" ".join(words) for words in queries(seed, query_count)]
    folder = tempfile.mkdtemp(prefix="kumiho-scale-") if disk else None
    path = os.path.join(folder, "scale.db") if disk else None
    try:
        rss_before = rss_mb()
        memory = km.Memory(path=path, ids=km.SequentialIds())
        name = "ours-disk" if disk else "ours"
        progress(f"{name} N={size}: inserting...")
        start = time.perf_counter()
        try:
            krefs, write_ms, api = insert_ours(memory, texts, batch=hasattr(memory, "remember_many"))
        except (TypeError, km.KumihoMemoryError) as exc:   # remember_many takes another shape: start over
            progress(f"{name} N={size}: remember_many rejected ({exc!r}); using remember")
            memory.close()
            if disk:
                for leftover in os.listdir(folder):
                    os.remove(os.path.join(folder, leftover))
            memory = km.Memory(path=path, ids=km.SequentialIds())
            start = time.perf_counter()
            krefs, write_ms, api = insert_ours(memory, texts, batch=False)
            api += f" (remember_many rejected: {type(exc).__name__})"
        index_s = time.perf_counter() - start
        rss_after_insert = rss_mb()
        position = {}
        for number, kref in enumerate(krefs):
            if isinstance(kref, str):
                position[kref] = number
                position[kref.split("?")[0]] = number

        def search(query: str) -> list[int]:
            return [position.get(hit.get("kref"), position.get(hit.get("item_kref"), -1))
                    for hit in memory.recall(query, limit=LIMIT)]

        progress(f"{name} N={size}: querying...")
        figures = {"insert_api": api, "index_s": round(index_s, 3),
                   "write_mean_ms": round(1000.0 * index_s / size, 4),
                   "rss_before_index_mb": rss_before, "rss_after_insert_mb": rss_after_insert}
        if write_ms:
            figures["write_p50_ms"] = round(percentile(write_ms, 0.5), 4)
            figures["write_p99_ms"] = round(percentile(write_ms, 0.99), 4)
        figures.update(measure_queries(search, query_list, force_cap=False))
        if disk:
            figures["file_bytes"] = sum(os.path.getsize(os.path.join(folder, entry)) for entry in os.listdir(folder))
        memory.close()
        return figures
    finally:
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def child_rank_bm25(size: int, seed: int, query_count: int) -> dict:
    try:
        import numpy
        from rank_bm25 import BM25Okapi
    except ImportError:
        return {"skipped": "not installed"}
    corpus = list(documents(seed, size))
    query_list = queries(seed, query_count)
    rss_before = rss_mb()
    progress(f"rank-bm25 N={size}: indexing...")
    bm25, elapsed = timed(BM25Okapi, corpus)
    rss_after_index = rss_mb()

    def search(query: list[str]) -> list[int]:
        scores = bm25.get_scores(query)
        top = numpy.argpartition(-scores, LIMIT - 1)[:LIMIT] if len(scores) > LIMIT else numpy.arange(len(scores))
        top = top[numpy.argsort(-scores[top])]
        return [int(number) for number in top if scores[number] > 0]

    progress(f"rank-bm25 N={size}: querying...")
    figures = {"index_s": round(elapsed / 1000.0, 3), "rss_before_index_mb": rss_before,
               "rss_after_insert_mb": rss_after_index}
    figures.update(measure_queries(search, query_list, force_cap=size >= 100_000))
    return figures


def child_bm25s(size: int, seed: int, query_count: int) -> dict:
    try:
        import bm25s
    except ImportError:
        return {"skipped": "not installed"}
    corpus = list(documents(seed, size))
    query_list = queries(seed, query_count)
    rss_before = rss_mb()
    progress(f"bm25s N={size}: indexing...")
    retriever = bm25s.BM25()
    _, elapsed = timed(retriever.index, corpus, show_progress=False)
    rss_after_index = rss_mb()
    k = min(LIMIT, size)

    def search(query: list[str]) -> list[int]:
        found, scores = retriever.retrieve([query], k=k, show_progress=False)
        return [int(number) for number, score in zip(found[0], scores[0]) if score > 0]

    progress(f"bm25s N={size}: querying...")
    figures = {"index_s": round(elapsed / 1000.0, 3), "rss_before_index_mb": rss_before,
               "rss_after_insert_mb": rss_after_index, "bm25s_version": getattr(bm25s, "__version__", "?")}
    figures.update(measure_queries(search, query_list, force_cap=False))
    return figures


def child(system: str, size: int, seed: int, query_count: int) -> None:
    rss_start = rss_mb()
    if system in ("ours", "ours-disk"):
        figures = child_ours(size, seed, query_count, disk=system == "ours-disk")
    elif system == "rank-bm25":
        figures = child_rank_bm25(size, seed, query_count)
    elif system == "bm25s":
        figures = child_bm25s(size, seed, query_count)
    else:
        raise SystemExit(f"unknown system {system!r}")
    if "skipped" not in figures:
        figures["rss_start_mb"] = rss_start
        figures["peak_rss_mb"] = rss_mb()
        figures["peak_minus_before_index_mb"] = round(figures["peak_rss_mb"] - figures["rss_before_index_mb"], 1)
    print(json.dumps(figures), flush=True)


# -- parent --------------------------------------------------------------------------------------------

def run_child(system: str, size: int, args: argparse.Namespace) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", system, "--size", str(size),
               "--seed", str(args.seed), "--queries", str(args.queries)]
    start = time.perf_counter()
    completed = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    wall = round(time.perf_counter() - start, 1)
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith("{"):
            figures = json.loads(line)
            break
    else:
        figures = {"error": f"child exited {completed.returncode} without figures (see stderr)"}
    if "skipped" not in figures:
        figures["child_wall_s"] = wall
    progress(f"{system} N={size}: done in {wall} s")
    return figures


def agreement(figures: dict, size_key: str) -> None:
    """Add ``agreement_vs_bm25s`` to each system that has top-10 lists at this size."""
    reference = figures.get("bm25s", {}).get(size_key, {}).get("top10")
    for system, by_size in figures.items():
        entry = by_size.get(size_key, {})
        if not reference or system == "bm25s" or "top10" not in entry:
            continue
        shares = [len(set(ours) & set(theirs)) / max(len(ours), len(theirs))
                  for ours, theirs in zip(entry["top10"], reference) if ours or theirs]
        if shares:
            entry["agreement_vs_bm25s"] = round(sum(shares) / len(shares), 3)


ROWS = ("index_s", "write_mean_ms", "first_query_ms", "query_p50_ms", "query_p95_ms", "queries_measured",
        "rss_before_index_mb", "peak_rss_mb", "peak_minus_before_index_mb", "file_bytes", "agreement_vs_bm25s",
        "child_wall_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--systems", default="ours,rank-bm25,bm25s")
    parser.add_argument("--disk", action="store_true", help="also run ours on a file store in a temp dir")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.size, args.seed, args.queries)
        return
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    systems = [system.strip() for system in args.systems.split(",") if system.strip()]
    if args.disk and "ours-disk" not in systems:
        systems.insert(systems.index("ours") + 1 if "ours" in systems else 0, "ours-disk")
    unknown = set(systems) - set(SYSTEMS)
    if unknown or args.queries < 1 or not sizes:
        parser.error(f"systems must be among {', '.join(SYSTEMS)}; --queries and --sizes must be positive")
    started = time.perf_counter()
    figures: dict = {system: {} for system in systems}
    for size in sizes:
        for system in systems:
            figures[system][str(size)] = run_child(system, size, args)
        agreement(figures, str(size))
    for by_size in figures.values():
        for entry in by_size.values():
            entry.pop("top10", None)
    parameters = {**{key: value for key, value in vars(args).items() if key not in ("child", "size")},
                  "vocabulary": VOCABULARY, "zipf_s": ZIPF_S, "doc_words": list(DOC_WORDS),
                  "query_words": list(QUERY_WORDS), "limit": LIMIT, "total_runtime_s": 0.0}
    if hasattr(km, "tokenize"):
        parameters["vocabulary_words_changed_by_tokenizer"] = sum(
            km.tokenize(word) != [word] for word in vocabulary(args.seed))
    parameters["total_runtime_s"] = round(time.perf_counter() - started, 1)

    width = max(12, *(len(system) + 2 for system in systems))
    rows = []
    for size in sizes:
        rows.append((f"N={size}", "".join(f"{system:>{width}}" for system in systems)))
        for metric in ROWS:
            values = [figures[system][str(size)].get(metric, figures[system][str(size)].get("skipped", "-"))
                      for system in systems]
            if all(value == "-" for value in values):
                continue
            rows.append((f"  {metric}", "".join(f"{str(value):>{width}}" for value in values)))
        for system in systems:
            entry = figures[system][str(size)]
            for note in ("queries_capped", "error", "insert_api"):
                if note in entry:
                    rows.append((f"  {system} {note}", entry[note]))
    print_table(rows)
    print("total runtime", parameters["total_runtime_s"], "s")
    print("wrote", write_results("scale", parameters, figures))


if __name__ == "__main__":
    main()
