"""Helpers shared by the probes: import the module from the repo, time things, write results."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import kumiho_memory as km  # noqa: E402

RESULTS = os.path.join(ROOT, "probes", "results")


def percentile(values: list[float], fraction: float) -> float:
    """The value below which ``fraction`` of ``values`` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def timed(function, *args, **kwargs) -> tuple[object, float]:
    """Run ``function`` and return (result, elapsed milliseconds)."""
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, (time.perf_counter() - start) * 1000.0


def write_results(name: str, parameters: dict, figures: dict, path: str | None = None) -> str:
    """Write ``probes/results/<name>.json`` (or ``path``) with the module version, machine, parameters and
    figures."""
    path = path or os.path.join(RESULTS, f"{name}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    document = {"probe": name, "version": km.__version__, "python": platform.python_version(),
                "sqlite": __import__("sqlite3").sqlite_version, "machine": platform.machine(),
                "cpus": os.cpu_count(), "parameters": parameters, "figures": figures}
    with open(path, "w", encoding="utf-8") as stream:
        json.dump(document, stream, indent=2, sort_keys=True)
        stream.write("\n")
    return path


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB.

    On Linux this is VmHWM from /proc/self/status, the high-water mark of this process's own memory:
    ``ru_maxrss`` there also counts the parent's peak at fork (a child of a 300 MB parent reports 300 MB
    before doing anything), which would charge the probe's parent to each measured child. Elsewhere
    ``ru_maxrss`` (KB on Linux, bytes on macOS).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except (OSError, ValueError, IndexError):
        pass
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0), 1)


def print_table(rows: list[tuple[str, object]]) -> None:
    """Print name/value rows as an aligned two-column table."""
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


median = statistics.median


def bm25_baseline(name: str, module, corpus: list[list[str]]):
    """A baseline index over tokenized documents: rank-bm25's ``BM25Okapi`` or bm25s's ``BM25``."""
    if name == "rank-bm25":
        return module.BM25Okapi(corpus)
    index = module.BM25()
    index.index(corpus, show_progress=False)
    return index


def bm25_baseline_top(name: str, index, query: list[str], count: int, limit: int) -> list[int]:
    """The positions of a baseline's ``limit`` best documents of ``count`` for a tokenized query."""
    if name == "rank-bm25":
        scores = index.get_scores(query)
        return sorted(range(count), key=lambda i: -scores[i])[:limit]
    vocabulary = [token for token in query if token in index.vocab_dict] or query[:1]
    documents, _scores = index.retrieve([vocabulary], k=min(limit, count), show_progress=False)
    return list(documents[0])
