"""Probe: recall at scale -- warm query p50/p95, cold start in a fresh process, bulk ingest; side by side.

Usage: python probes/scale.py [--sizes 10000,100000] [--queries 200] [--seed 11]
                              [--systems ours,rank-bm25,bm25s] [--disk] [--phases warm,cold,bulk]
                              [--cold-runs 3] [--bulk-runs K] [--build-budget-s 600] [--out PATH]

Writes probes/results/scale.json (or --out). The corpus is synthetic and deterministic from --seed: a
vocabulary of 50,000 pseudo-words (lowercase a-z, 4-10 letters, no stopwords, chosen so the Porter stemmer
leaves them alone), word ranks drawn from a Zipf distribution (s = 1.07), 10-30 words a memory; the queries
are 3-6 distinct words drawn from the same distribution, so they mix common and rare words. Every phase runs
for each size; every measurement runs in its own subprocess, so each peak RSS belongs to one system doing
one thing (VmHWM from /proc/self/status: on Linux ru_maxrss also counts the parent's peak at fork).

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
             closed, ``write_s`` the remember_many calls alone, ``close_s`` the close (which builds and
             stores the recall index the writes left behind, so the next process reads it).
             ``ratio_write_to_fts5`` compares write_s. Without remember_many the store is built with
             a remember() loop (for the cold start) and ours says "missing".
  fts5       sqlite3: a fresh file db, CREATE VIRTUAL TABLE t USING fts5(body), every text inserted with
             executemany in one transaction, commit, close.
  ``ratio_ours_to_fts5`` = ours seconds / fts5 seconds. With --bulk-runs K (default 3 up to 100,000
  memories, 1 above), both are built K times, ours and fts5 in turn, each into a fresh file; ``seconds`` is
  then the median of a system's runs and ``runs`` lists every run's seconds and the pairs' ratios (one run of
  each on a shared machine can land 30% apart).

COLD START (``figures["cold_start"][size]``): the stores built above (ours, the FTS5 db, and a bm25s index
  saved once with save()) are opened by a FRESH python process that runs one query, the first of the query
  set, and exits. "Cold" means a fresh process with a warm OS file cache: the files were just written and
  dropping the page cache is not possible here. Each child runs --cold-runs times (3), the systems
  interleaved, after one untimed import of each system's module (so a stale .pyc is not timed; that child runs
  without PYTHONDONTWRITEBYTECODE, so the bytecode cache is written even where the variable is set); each figure
  is the median over the runs (``runs`` holds them all). Before them, one more child per system is the first
  process to open the store after the build; it is kept apart as ``first_open_after_build`` (a store may do
  one-time work there, such as writing a persisted index that the build left out).
  ours       import kumiho_memory; Memory(path); recall(query, limit=10).
  fts5       import sqlite3; connect(path); SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t)
             LIMIT 10, the query's words quoted and joined with OR.
  bm25s      import bm25s; BM25.load(dir, mmap=True); retrieve([tokens], k=10).
  ``first_result_ms`` is from before the import to the first result, in the child; ``first_query_ms`` the
  query alone (ours: the first recall); ``import_ms``, ``open_ms``; ``process_ms`` the parent's clock from
  spawning the child to its exit (interpreter start-up and teardown included); ``peak_rss_mb`` the child's
  peak RSS after the first result. ``ratio_ours_to_fts5`` / ``ratio_ours_to_bm25s`` compare
  first_result_ms; ``top10_matches_warm`` says whether ours' cold top 10 equals the warm in-memory top 10 for
  the same query (same texts, same ids; only the write times differ), for the runs and the first open.

WARM ON THE REOPENED STORE (``figures["warm_reopened"][size]``): a fresh process opens ours' file store
  built above and runs every query as WARM does (first query alone, then p50/p95), with its peak RSS --
  the figures of a long-running process over an existing store. It runs in --cold-runs fresh processes one
  after another; each figure is the median over them and ``runs`` holds every process's (a single process's
  p50 moved from 2.3 to 4.0 ms between runs an hour apart). ``agreement_vs_in_memory`` is the mean share of
  top-10 krefs shared with the warm in-memory run over the first 20 queries, in the first process.

rank-bm25 and bm25s are dev-only tools: when one is not importable its entries say "skipped". The probe
reports; it asserts nothing.

At 1,000,000 memories ours is built twice (in memory for WARM, into a file for BULK and COLD), each given
--build-budget-s; ``--systems bm25s`` leaves the in-memory build out (WARM ON THE REOPENED STORE then gives
ours' warm figures), ``--phases warm`` or ``--phases cold,bulk`` runs a part. The built stores go to
--workdir (default the temp dir; about 1 KB per memory for ours) and are deleted after each size.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

from _common import ROOT, km, median, peak_rss_mb, percentile, print_table, timed, write_results

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


RANK_BM25_MAX = 100_000           # rank-bm25 scores every document per query: not run above this size
BATCH = 1000                      # records per remember_many call
BUDGET_PROBE_AFTER = 5000         # writes before a build's projected time is checked against the budget
COLD_SYSTEMS = ("ours", "fts5", "bm25s")
SPACES_USED = tuple(f"space{index}" for index in range(7))   # memory i goes to space i % 7 (shared strings)
FTS5_QUERY = "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?"


# -- child: one system, one size -----------------------------------------------------------------------

def rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (``_common.peak_rss_mb``: VmHWM on Linux)."""
    return peak_rss_mb()


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


class BuildTooSlow(Exception):
    """Building a store would take longer than --build-budget-s."""


def check_budget(started: float, done: int, total: int, budget_s: float, api: str) -> None:
    """Raise ``BuildTooSlow`` when ``done`` of ``total`` writes took or project more than ``budget_s``."""
    if done >= total or done == 0:
        return
    elapsed = time.perf_counter() - started
    projected = elapsed / done * total
    if elapsed > budget_s or (done >= min(BUDGET_PROBE_AFTER, total // 2) and projected > budget_s):
        raise BuildTooSlow(f"{api} too slow: {done:,} of {total:,} memories written in {elapsed:.0f} s, "
                           f"{projected:.0f} s projected for all > --build-budget-s {budget_s:.0f}")


def insert_ours(memory, texts: list[str], batch: bool, budget_s: float = float("inf")) -> tuple[list, list[float], str]:
    """Write every text (with remember_many when ``batch``); return (krefs, per-write ms or [], the API used).

    Raises ``BuildTooSlow`` when the writes so far project more than ``budget_s`` for all of them."""
    spaces = [SPACES_USED[index % len(SPACES_USED)] for index in range(len(texts))]
    started = time.perf_counter()
    if batch:
        krefs = []
        for start in range(0, len(texts), BATCH):
            records = [{"content": text, "space": space, "kind": "memory"}
                       for text, space in zip(texts[start:start + BATCH], spaces[start:start + BATCH])]
            returned = memory.remember_many(records)
            krefs.extend(returned if isinstance(returned, (list, tuple)) else [])
            done = start + len(records)
            if done % 20000 == 0:
                progress(f"  {done} written")
            check_budget(started, done, len(texts), budget_s, "remember_many")
        return krefs, [], f"remember_many (batches of {BATCH} dicts)"
    krefs, write_ms = [], []
    for index, (text, space) in enumerate(zip(texts, spaces)):
        kref, elapsed = timed(memory.remember, text, space=space, kind="memory")
        krefs.append(kref)
        write_ms.append(elapsed)
        if index and index % 20000 == 0:
            progress(f"  {index} written")
        if (index + 1) % 1000 == 0:
            check_budget(started, index + 1, len(texts), budget_s, "a remember() loop")
    return krefs, write_ms, "remember"


def _remove_store(path: str) -> None:
    """Delete a file store and its companions (-wal, -shm, lock files)."""
    folder, name = os.path.split(path)
    for leftover in os.listdir(folder):
        if leftover.startswith(name):
            os.remove(os.path.join(folder, leftover))


def fill_store(path: str | None, texts: list[str], budget_s: float, label: str):
    """Open a fresh store (in memory when ``path`` is None) and write ``texts``.

    Returns (memory, krefs, write_ms, api, write seconds). Falls back to remember() when remember_many
    rejects the records' shape; raises ``BuildTooSlow`` (the memory closed) when over ``budget_s``."""
    memory = km.Memory(path=path, ids=km.SequentialIds())
    batch = hasattr(memory, "remember_many")
    start = time.perf_counter()
    try:
        try:
            krefs, write_ms, api = insert_ours(memory, texts, batch, budget_s)
        except (TypeError, km.KumihoMemoryError) as exc:   # remember_many takes another shape: start over
            if not batch:
                raise
            progress(f"{label}: remember_many rejected ({exc!r}); using remember")
            memory.close()
            if path:
                _remove_store(path)
            memory = km.Memory(path=path, ids=km.SequentialIds())
            start = time.perf_counter()
            krefs, write_ms, api = insert_ours(memory, texts, False, budget_s)
            api += f" (remember_many rejected: {type(exc).__name__})"
    except BuildTooSlow:
        memory.close()
        raise
    return memory, krefs, write_ms, api, time.perf_counter() - start


def item_of(kref: str) -> str:
    return kref.split("?")[0]


def child_ours(size: int, seed: int, query_count: int, disk: bool, budget_s: float) -> dict:
    texts = [" ".join(words) for words in documents(seed, size)]
    query_list = [" ".join(words) for words in queries(seed, query_count)]
    folder = tempfile.mkdtemp(prefix="kumiho-scale-") if disk else None
    path = os.path.join(folder, "scale.db") if disk else None
    name = "ours-disk" if disk else "ours"
    try:
        rss_before = rss_mb()
        progress(f"{name} N={size}: inserting...")
        try:
            memory, krefs, write_ms, api, index_s = fill_store(path, texts, budget_s, f"{name} N={size}")
        except BuildTooSlow as exc:
            progress(f"{name} N={size}: SKIPPED, {exc}")
            return {"skipped": str(exc)}
        rss_after_insert = rss_mb()
        del texts
        first_top: list[list[str]] = []

        def search(query: str) -> list[str]:
            hits = [hit["item_kref"] for hit in memory.recall(query, limit=LIMIT)]
            if not first_top:
                first_top.append(hits)
            return hits

        progress(f"{name} N={size}: querying...")
        figures = {"insert_api": api, "index_s": round(index_s, 3),
                   "write_mean_ms": round(1000.0 * index_s / size, 4),
                   "rss_before_index_mb": rss_before, "rss_after_insert_mb": rss_after_insert}
        if write_ms:
            figures["write_p50_ms"] = round(percentile(write_ms, 0.5), 4)
            figures["write_p99_ms"] = round(percentile(write_ms, 0.99), 4)
        figures.update(measure_queries(search, query_list, force_cap=False))
        figures["peak_rss_mb"] = rss_mb()               # before the probe's own bookkeeping below
        # hits as krefs -> as positions in the corpus (for agreement_vs_bm25s), only for the krefs needed
        needed = {kref for top in figures["top10"] for kref in top}
        position = {item_of(kref): number for number, kref in enumerate(krefs)
                    if isinstance(kref, str) and item_of(kref) in needed}
        figures["top10_krefs"] = figures["top10"]
        figures["top10"] = [[position.get(kref, -1) for kref in top] for top in figures["top10_krefs"]]
        figures["first_query_top10_krefs"] = first_top[0]
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


# -- children of the bulk and cold phases: build a store once, reopen it --------------------------------

def child_build_ours(size: int, seed: int, path: str, budget_s: float) -> dict:
    """Write the texts to a fresh file store at ``path`` and close it (the bulk-ingest figure of ours)."""
    texts = [" ".join(words) for words in documents(seed, size)]
    rss_before = rss_mb()
    progress(f"build ours N={size}: writing a file store...")
    started = time.perf_counter()
    try:
        memory, _, _, api, write_s = fill_store(path, texts, budget_s, f"build ours N={size}")
    except BuildTooSlow as exc:
        progress(f"build ours N={size}: SKIPPED, {exc}")
        _remove_store(path)
        return {"skipped": str(exc)}
    closing = time.perf_counter()
    memory.close()
    done = time.perf_counter()
    folder, name = os.path.split(path)
    return {"api": api, "seconds": round(done - started, 3), "write_s": round(write_s, 3),
            "close_s": round(done - closing, 3), "memories_per_s": round(size / (done - started), 1),
            "file_bytes": sum(os.path.getsize(os.path.join(folder, entry)) for entry in os.listdir(folder)
                              if entry.startswith(name)),
            "rss_before_mb": rss_before, "peak_rss_mb": rss_mb()}


def child_build_fts5(size: int, seed: int, path: str) -> dict:
    """The same texts into a fresh FTS5 table in a file db, one transaction (executemany)."""
    texts = [" ".join(words) for words in documents(seed, size)]
    rss_before = rss_mb()
    progress(f"build fts5 N={size}: inserting in one transaction...")
    started = time.perf_counter()
    connection = sqlite3.connect(path)
    connection.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    with connection:                                    # one transaction, committed on leaving
        connection.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)",
                               ((number + 1, text) for number, text in enumerate(texts)))
    connection.close()
    seconds = time.perf_counter() - started
    return {"api": "executemany in one transaction", "seconds": round(seconds, 3),
            "memories_per_s": round(size / seconds, 1), "file_bytes": os.path.getsize(path),
            "sqlite": sqlite3.sqlite_version, "rss_before_mb": rss_before, "peak_rss_mb": rss_mb()}


def child_build_bm25s(size: int, seed: int, path: str) -> dict:
    """A bm25s index of the same tokens, saved once with save() into the folder ``path``."""
    try:
        import bm25s
    except ImportError:
        return {"skipped": "not installed"}
    corpus = list(documents(seed, size))
    progress(f"build bm25s N={size}: indexing and saving...")
    retriever = bm25s.BM25()
    _, index_ms = timed(retriever.index, corpus, show_progress=False)
    _, save_ms = timed(retriever.save, path)
    return {"index_s": round(index_ms / 1000.0, 3), "save_s": round(save_ms / 1000.0, 3),
            "file_bytes": sum(os.path.getsize(os.path.join(path, entry)) for entry in os.listdir(path)),
            "bm25s_version": getattr(bm25s, "__version__", "?"), "peak_rss_mb": rss_mb()}


def child_ours_reopened(size: int, seed: int, query_count: int, path: str) -> dict:
    """Open the built file store in this fresh process and time every query (no texts held here)."""
    query_list = [" ".join(words) for words in queries(seed, query_count)]
    rss_before = rss_mb()
    memory, open_ms = timed(km.Memory, path)
    tops: list[list[str]] = []

    def search(query: str) -> list[str]:
        return [hit["item_kref"] for hit in memory.recall(query, limit=LIMIT)]

    progress(f"ours reopened N={size}: querying...")
    figures = {"open_ms": round(open_ms, 3), "rss_before_open_mb": rss_before}
    figures.update(measure_queries(search, query_list, force_cap=False))
    figures["top10_krefs"] = figures.pop("top10")
    source = memory.backend._recall.index._source        # what of peak_rss_mb is the cache of fetched rows
    figures["cache_mb"] = round(source.cache.size / 1048576.0, 1) if source is not None else None
    memory.close()
    return figures


# The cold children: nothing imported before the clock starts but json, sys and time. argv: the repository
# root (for ours), the store, the query as JSON (a list of words), the limit. peak_rss_mb reads VmHWM (see
# _common.peak_rss_mb; the definition is repeated so the child imports nothing of the probe's).
COLD_PRELUDE = """\
import json, sys, time


def peak_rss_mb():
    try:
        with open("/proc/self/status", encoding="ascii") as stream:
            return [int(line.split()[1]) / 1024.0 for line in stream if line.startswith("VmHWM:")][0]
    except (OSError, ValueError, IndexError):
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1048576.0 if sys.platform == "darwin" else 1024.0)


start = time.perf_counter()
"""
COLD_REPORT = """\
done = time.perf_counter()
print(json.dumps({"import_ms": (imported - start) * 1000, "open_ms": (opened - imported) * 1000,
                  "first_query_ms": (done - opened) * 1000, "first_result_ms": (done - start) * 1000,
                  "hits": len(top), "top10": top, "peak_rss_mb": peak_rss_mb()}), flush=True)
"""
COLD_CODE = {
    "ours": COLD_PRELUDE + """\
sys.path.insert(0, sys.argv[1])
import kumiho_memory
imported = time.perf_counter()
memory = kumiho_memory.Memory(sys.argv[2])
opened = time.perf_counter()
top = [hit["item_kref"] for hit in memory.recall(" ".join(json.loads(sys.argv[3])), limit=int(sys.argv[4]))]
""" + COLD_REPORT + "memory.close()\n",
    "fts5": COLD_PRELUDE + """\
import sqlite3
imported = time.perf_counter()
connection = sqlite3.connect(sys.argv[2])
opened = time.perf_counter()
match = " OR ".join('"' + word.replace('"', '""') + '"' for word in json.loads(sys.argv[3]))
top = [row[0] for row in connection.execute(%r, (match, int(sys.argv[4]))).fetchall()]
""" % FTS5_QUERY + COLD_REPORT + "connection.close()\n",
    "bm25s": COLD_PRELUDE + """\
import bm25s
imported = time.perf_counter()
retriever = bm25s.BM25.load(sys.argv[2], mmap=True)
opened = time.perf_counter()
found, scores = retriever.retrieve([json.loads(sys.argv[3])], k=int(sys.argv[4]), show_progress=False)
top = [int(number) for number, score in zip(found[0], scores[0]) if score > 0]
""" + COLD_REPORT,
}
COLD_WARMUP = {"ours": f"import sys; sys.path.insert(0, {ROOT!r}); import kumiho_memory",
               "fts5": "import sqlite3", "bm25s": "import bm25s"}


def child(args: argparse.Namespace) -> None:
    system, size, seed, query_count = args.child, args.size, args.seed, args.queries
    rss_start = rss_mb()
    if system in ("ours", "ours-disk"):
        figures = child_ours(size, seed, query_count, system == "ours-disk", args.build_budget_s)
    elif system == "rank-bm25":
        figures = child_rank_bm25(size, seed, query_count)
    elif system == "bm25s":
        figures = child_bm25s(size, seed, query_count)
    elif system == "build-ours":
        figures = child_build_ours(size, seed, args.path, args.build_budget_s)
    elif system == "build-fts5":
        figures = child_build_fts5(size, seed, args.path)
    elif system == "build-bm25s":
        figures = child_build_bm25s(size, seed, args.path)
    elif system == "ours-reopened":
        figures = child_ours_reopened(size, seed, query_count, args.path)
    else:
        raise SystemExit(f"unknown system {system!r}")
    if "skipped" not in figures:
        figures["rss_start_mb"] = rss_start
        figures.setdefault("peak_rss_mb", rss_mb())
        before = figures.get("rss_before_index_mb", figures.get("rss_before_open_mb"))
        if before is not None:
            figures["peak_minus_before_index_mb"] = round(figures["peak_rss_mb"] - before, 1)
    print(json.dumps(figures), flush=True)


# -- parent --------------------------------------------------------------------------------------------

def last_json(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return None


def run_child(system: str, size: int, args: argparse.Namespace, path: str | None = None) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", system, "--size", str(size),
               "--seed", str(args.seed), "--queries", str(args.queries), "--build-budget-s", str(args.build_budget_s)]
    if path:
        command += ["--path", path]
    start = time.perf_counter()
    completed = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    wall = round(time.perf_counter() - start, 1)
    figures = last_json(completed.stdout) or {
        "error": f"child exited {completed.returncode} without figures (see stderr)"}
    if "skipped" not in figures:
        figures["child_wall_s"] = wall
    progress(f"{system} N={size}: done in {wall} s")
    return figures


def run_cold(system: str, store: str, query: list[str], size: int, timeout_s: float) -> dict:
    """One fresh process: open ``store`` and answer ``query``; the child's figures plus ``process_ms``."""
    command = [sys.executable, "-c", COLD_CODE[system], ROOT, store, json.dumps(query), str(min(LIMIT, size))]
    start = time.perf_counter()
    try:
        completed = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {timeout_s:.0f} s"}
    process_ms = (time.perf_counter() - start) * 1000.0
    figures = last_json(completed.stdout)
    if figures is None:
        return {"error": f"cold child exited {completed.returncode} without figures (see stderr)"}
    figures["process_ms"] = process_ms
    return figures


COLD_FIGURES = ("first_result_ms", "first_query_ms", "import_ms", "open_ms", "process_ms", "peak_rss_mb")


def median_figures(runs: list[dict], keys: tuple[str, ...]) -> dict:
    """Each of ``keys``' median over ``runs`` (MB to 0.1, the rest to 0.001)."""
    return {key: round(median([run[key] for run in runs]), 1 if key == "peak_rss_mb" else 3) for key in keys}


def cold_summary(runs: list[dict]) -> dict:
    """The median of each figure over the runs that finished, and every run."""
    good = [run for run in runs if "error" not in run]
    if not good:
        return {"error": runs[0]["error"] if runs else "no runs", "runs": runs}
    summary = median_figures(good, COLD_FIGURES)
    summary["hits"] = good[0]["hits"]
    summary["top10"] = good[0]["top10"]
    summary["runs_measured"] = len(good)
    summary["runs"] = [{key: round(run[key], 1 if key == "peak_rss_mb" else 3) for key in COLD_FIGURES if key in run}
                       if "error" not in run else run for run in runs]
    return summary


def ratio(numerator, denominator) -> float | None:
    if isinstance(numerator, (int, float)) and isinstance(denominator, (int, float)) and denominator > 0:
        return round(numerator / denominator, 2)
    return None


REOPENED_FIGURES = ("open_ms", "first_query_ms", "query_p50_ms", "query_p95_ms", "query_mean_ms", "peak_rss_mb")


def reopened_runs(size: int, args: argparse.Namespace, path: str) -> dict:
    """Warm recall on the reopened store in --cold-runs fresh processes: the first's figures with each of
    ``REOPENED_FIGURES`` replaced by the median over the processes, and every process's in ``runs``."""
    runs = [run_child("ours-reopened", size, args, path) for _ in range(args.cold_runs)]
    first = dict(runs[0])
    good = [run for run in runs if all(key in run for key in REOPENED_FIGURES)]
    if good and "error" not in first:
        first["runs"] = [{key: run[key] for key in REOPENED_FIGURES} for run in good]
        first.update(median_figures(good, REOPENED_FIGURES))
    return first


def bulk_reruns(size: int, args: argparse.Namespace, workdir: str, bulk: dict) -> None:
    """Build ours and fts5 ``--bulk-runs`` times in all, in turn, each into a fresh file deleted after; make
    each system's ``seconds`` the median of its runs and list the runs (the first is the build kept for the
    cold start)."""
    runs = args.bulk_runs if args.bulk_runs is not None else (3 if size <= 100_000 else 1)
    seconds = {"ours": [bulk["ours"]["seconds"]], "fts5": [bulk["fts5"]["seconds"]]}
    writes, closes = [bulk["ours"]["write_s"]], [bulk["ours"]["close_s"]]
    for number in range(1, runs):
        for system in ("ours", "fts5"):
            path = os.path.join(workdir, f"bulk-{number}-{system}.db")
            figures = run_child(f"build-{system}", size, args, path)
            if "seconds" in figures:
                seconds[system].append(figures["seconds"])
            if "write_s" in figures:
                writes.append(figures["write_s"])
                closes.append(figures["close_s"])
            for leftover in glob.glob(path + "*"):
                os.remove(leftover)
    for system, values in seconds.items():
        bulk[system]["first_run_s"] = bulk[system]["seconds"]
        bulk[system]["seconds"] = round(median(values), 3)
        bulk[system]["memories_per_s"] = round(size / bulk[system]["seconds"], 1)
    bulk["ours"]["write_s"] = round(median(writes), 3)
    bulk["ours"]["close_s"] = round(median(closes), 3)
    bulk["runs"] = {"ours_s": seconds["ours"], "fts5_s": seconds["fts5"], "ours_write_s": writes,
                    "ours_close_s": closes,
                    "pair_ratios": [round(a / b, 2) for a, b in zip(seconds["ours"], seconds["fts5"]) if b],
                    "write_pair_ratios": [round(a / b, 2) for a, b in zip(writes, seconds["fts5"]) if b]}


def stores_phase(size: int, args: argparse.Namespace, phases: set, warm_ours: dict) -> tuple[dict, dict, dict]:
    """Bulk ingest, cold start and warm-on-reopened for one size: (bulk, cold, reopened) figures."""
    workdir = tempfile.mkdtemp(prefix=f"kumiho-scale-{size}-", dir=args.workdir)
    paths = {"ours": os.path.join(workdir, "ours.db"), "fts5": os.path.join(workdir, "fts5.db"),
             "bm25s": os.path.join(workdir, "bm25s-index")}
    try:
        built = {"ours": run_child("build-ours", size, args, paths["ours"]),
                 "fts5": run_child("build-fts5", size, args, paths["fts5"])}
        if "cold" in phases:
            built["bm25s"] = run_child("build-bm25s", size, args, paths["bm25s"])
        bulk: dict = {}
        if "bulk" in phases:
            ours = dict(built["ours"])
            if "skipped" not in ours and not ours.get("api", "").startswith("remember_many ("):
                ours = {"missing": f"Memory has no usable remember_many; the store was built with "
                                   f"{ours.get('api', '?')} in {ours.get('seconds', '?')} s", "built": ours}
            bulk = {"ours": ours, "fts5": dict(built["fts5"])}
            if "seconds" in ours and "missing" not in ours and "seconds" in built["fts5"]:
                bulk_reruns(size, args, workdir, bulk)
            bulk["ratio_ours_to_fts5"] = ratio(bulk["ours"].get("seconds"), bulk["fts5"].get("seconds"))
            bulk["ratio_write_to_fts5"] = ratio(bulk["ours"].get("write_s"), bulk["fts5"].get("seconds"))
        cold: dict = {}
        reopened: dict = {}
        if "cold" in phases:
            query = queries(args.seed, 1)[0]
            ready = [system for system in COLD_SYSTEMS if "skipped" not in built[system]
                     and "error" not in built[system]]
            writes_bytecode = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
            for system in ready:                        # untimed: a stale .pyc is compiled (and written) here
                subprocess.run([sys.executable, "-c", COLD_WARMUP[system]], stdout=subprocess.DEVNULL,
                               env=writes_bytecode)
            runs: dict = {system: [] for system in ready}
            for number in range(args.cold_runs + 1):  # run 0: the first process to open the store after the build
                for system in ready:
                    figures = run_cold(system, paths[system], query, size, args.build_budget_s)
                    runs[system].append(figures)
                    progress(f"cold {system} N={size} {'first open' if number == 0 else f'run {number}'}: " + (
                        f"{figures['first_result_ms']:.1f} ms to the first result" if "error" not in figures
                        else figures["error"]))
            cold = {system: cold_summary(runs[system][1:]) if system in runs else
                    {"skipped": built[system].get("skipped") or built[system].get("error")} for system in COLD_SYSTEMS}
            for system in ready:
                first = runs[system][0]
                cold[system]["first_open_after_build"] = first if "error" in first else {
                    key: round(first[key], 1 if key == "peak_rss_mb" else 3) for key in COLD_FIGURES if key in first}
            cold["query"] = query
            ours_ms = cold["ours"].get("first_result_ms")
            cold["ratio_ours_to_fts5"] = ratio(ours_ms, cold["fts5"].get("first_result_ms"))
            cold["ratio_ours_to_bm25s"] = ratio(ours_ms, cold["bm25s"].get("first_result_ms"))
            cold["rss_ratio_ours_to_fts5"] = ratio(cold["ours"].get("peak_rss_mb"), cold["fts5"].get("peak_rss_mb"))
            warm_first = warm_ours.get("first_query_top10_krefs")
            if "top10" in cold["ours"] and warm_first is not None:
                cold["ours"]["top10_matches_warm"] = cold["ours"]["top10"] == warm_first
                cold["ours"]["first_open_after_build"]["top10_matches_warm"] = (runs["ours"][0].get("top10")
                                                                                == warm_first)
            if "ours" in ready:
                reopened = reopened_runs(size, args, paths["ours"])
                if warm_ours.get("top10_krefs") and reopened.get("top10_krefs"):
                    shares = [len(set(mine) & set(theirs)) / max(len(mine), len(theirs))
                              for mine, theirs in zip(reopened["top10_krefs"], warm_ours["top10_krefs"])
                              if mine or theirs]
                    if shares:
                        reopened["agreement_vs_in_memory"] = round(sum(shares) / len(shares), 3)
            else:
                reopened = {"skipped": cold["ours"].get("skipped", "no store")}
        return bulk, cold, reopened
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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
COLD_ROWS = ("first_result_ms", "first_query_ms", "import_ms", "open_ms", "process_ms", "peak_rss_mb")


def cell(entry: dict, metric: str) -> str:
    if "skipped" in entry:
        return "skipped"
    if "missing" in entry:
        return "missing"
    if "error" in entry:
        return "error"
    value = entry.get(metric, "-")
    return f"{value:.1f}" if (isinstance(value, float) and metric.endswith(("_ms", "_mb"))
                              and value >= 100) else str(value)


def table(figures: dict, sizes: list[int], systems: list[str], phases: set, cold_runs: int) -> list[tuple[str, object]]:
    width = max([12, *(len(system) + 2 for system in systems)])
    rows = []
    for size in sizes:
        key = str(size)
        if "warm" in phases:
            rows.append((f"N={size} warm", "".join(f"{system:>{width}}" for system in systems)))
            for metric in ROWS:
                values = [cell(figures[system][key], metric) for system in systems]
                if all(value == "-" for value in values):
                    continue
                rows.append((f"  {metric}", "".join(f"{value:>{width}}" for value in values)))
            for system in systems:
                entry = figures[system][key]
                for note in ("queries_capped", "error", "insert_api", "skipped"):
                    if note in entry and not (note == "skipped" and entry[note] == "not installed"):
                        rows.append((f"  {system} {note}", entry[note]))
        bulk = figures.get("bulk_ingest", {}).get(key)
        if bulk:
            ours, fts5 = bulk["ours"], bulk["fts5"]
            rows.append((f"N={size} bulk ingest, file store", ""))
            rows.append(("  ours remember_many", f"{ours['seconds']} s ({ours['memories_per_s']:,.0f} memories/s)"
                         if "seconds" in ours and "missing" not in ours else ours.get("missing") or ours.get("skipped")
                         or ours.get("error")))
            rows.append(("  fts5 executemany",
                         f"{fts5.get('seconds')} s ({fts5.get('memories_per_s', 0):,.0f} memories/s)"))
            rows.append(("  ratio ours / fts5", bulk["ratio_ours_to_fts5"]))
        cold = figures.get("cold_start", {}).get(key)
        if cold:
            rows.append((f"N={size} cold start, ms and MB (median of {cold_runs})",
                         "".join(f"{system:>{width}}" for system in COLD_SYSTEMS)))
            for metric in COLD_ROWS:
                rows.append((f"  {metric}",
                             "".join(f"{cell(cold[system], metric):>{width}}" for system in COLD_SYSTEMS)))
            rows.append(("  first open after the build:", ""))
            for metric in ("first_result_ms", "first_query_ms", "peak_rss_mb"):
                rows.append((f"    {metric}", "".join(
                    f"{cell(cold[system].get('first_open_after_build', cold[system]), metric):>{width}}"
                    for system in COLD_SYSTEMS)))
            for system in COLD_SYSTEMS:
                for note in ("skipped", "error"):
                    if note in cold[system]:
                        rows.append((f"  {system} {note}", cold[system][note]))
            rows.append(("  ratio ours / fts5, / bm25s",
                         f"{cold['ratio_ours_to_fts5']}, {cold['ratio_ours_to_bm25s']}"))
            if "top10_matches_warm" in cold["ours"]:
                rows.append(("  ours' cold top 10 = warm top 10 (runs, first open)",
                             f"{cold['ours']['top10_matches_warm']}, "
                             f"{cold['ours']['first_open_after_build'].get('top10_matches_warm')}"))
        reopened = figures.get("warm_reopened", {}).get(key)
        if reopened:
            rows.append((f"N={size} warm on the reopened file store", ""))
            if "skipped" in reopened or "error" in reopened:
                rows.append(("  ours", reopened.get("skipped") or reopened.get("error")))
            else:
                for metric in ("open_ms", "first_query_ms", "query_p50_ms", "query_p95_ms", "peak_rss_mb",
                               "agreement_vs_in_memory"):
                    rows.append((f"  {metric}", reopened.get(metric, "-")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--systems", default="ours,rank-bm25,bm25s", help="the warm phase's systems")
    parser.add_argument("--disk", action="store_true", help="also run ours warm on a file store in a temp dir")
    parser.add_argument("--phases", default="warm,cold,bulk", help="any of warm, cold, bulk")
    parser.add_argument("--cold-runs", type=int, default=3, help="fresh processes per cold system (median)")
    parser.add_argument("--bulk-runs", type=int, default=None,
                        help="builds per system for the bulk figure, in turn (median; 3 up to 100,000, else 1)")
    parser.add_argument("--build-budget-s", type=float, default=600.0,
                        help="skip ours at a size whose build projects longer than this")
    parser.add_argument("--workdir", default=None, help="where the built stores go (default the temp dir)")
    parser.add_argument("--out", default=None, help="results file (default probes/results/scale.json)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    systems = [system.strip() for system in args.systems.split(",") if system.strip()]
    phases = {phase.strip() for phase in args.phases.split(",") if phase.strip()}
    if args.disk and "ours-disk" not in systems:
        systems.insert(systems.index("ours") + 1 if "ours" in systems else 0, "ours-disk")
    unknown = set(systems) - set(SYSTEMS)
    if unknown or args.queries < 1 or not sizes or phases - {"warm", "cold", "bulk"} or not phases \
            or args.cold_runs < 1 or (args.bulk_runs is not None and args.bulk_runs < 1):
        parser.error(f"systems must be among {', '.join(SYSTEMS)}, phases among warm, cold, bulk; "
                     "--queries, --cold-runs, --bulk-runs and --sizes must be positive")
    if "warm" not in phases:
        systems = []
    started = time.perf_counter()
    figures: dict = {system: {} for system in systems}
    for size in sizes:
        for system in systems:
            if system == "rank-bm25" and size > RANK_BM25_MAX:
                figures[system][str(size)] = {"skipped": f"not run above {RANK_BM25_MAX:,} memories "
                                                         "(every query scores every document: too slow)"}
                progress(f"rank-bm25 N={size}: skipped above {RANK_BM25_MAX:,}")
                continue
            figures[system][str(size)] = run_child(system, size, args)
        agreement(figures, str(size))
        if phases & {"cold", "bulk"}:
            bulk, cold, reopened = stores_phase(size, args, phases, figures.get("ours", {}).get(str(size), {}))
            for name, entry in (("bulk_ingest", bulk), ("cold_start", cold), ("warm_reopened", reopened)):
                if entry:
                    figures.setdefault(name, {})[str(size)] = entry
    for system in systems:
        for entry in figures[system].values():
            for key in ("top10", "top10_krefs", "first_query_top10_krefs"):
                entry.pop(key, None)
    for entry in figures.get("warm_reopened", {}).values():
        entry.pop("top10_krefs", None)
    for entry in figures.get("cold_start", {}).values():
        for system in COLD_SYSTEMS:
            entry[system].pop("top10", None)
    parameters = {**{key: value for key, value in vars(args).items() if key not in ("child", "size", "path", "out")},
                  "vocabulary": VOCABULARY, "zipf_s": ZIPF_S, "doc_words": list(DOC_WORDS),
                  "query_words": list(QUERY_WORDS), "limit": LIMIT, "total_runtime_s": 0.0,
                  "remember_many": hasattr(km.Memory, "remember_many")}
    if hasattr(km, "tokenize"):
        parameters["vocabulary_words_changed_by_tokenizer"] = sum(
            km.tokenize(word) != [word] for word in vocabulary(args.seed))
    parameters["total_runtime_s"] = round(time.perf_counter() - started, 1)

    print_table(table(figures, sizes, systems, phases, args.cold_runs))
    print("total runtime", parameters["total_runtime_s"], "s")
    print("wrote", write_results("scale", parameters, figures, args.out))


if __name__ == "__main__":
    main()
