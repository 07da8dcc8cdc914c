"""Regenerate the README's measured figures from probes/results/*.json.

Usage: python probes/readme_figures.py [--check]

Each table lives in README.md between ``<!-- figures:NAME -->`` and ``<!-- /figures:NAME -->``. Without
--check the README is rewritten; with --check it exits 1 when the README differs from the results (the
test suite runs this check, so README numbers cannot drift from the probes).
"""

from __future__ import annotations

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "probes", "results")
README = os.path.join(ROOT, "README.md")


def _load(name: str) -> dict | None:
    path = os.path.join(RESULTS, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as stream:
        return json.load(stream)


def locomo_table(document: dict) -> str:
    names = {"kumiho_memory": "kumiho_memory (lexical + signals, stdlib only)",
             "kumiho_memory+minilm": "kumiho_memory hybrid (+ all-MiniLM-L6-v2)",
             "minilm": "all-MiniLM-L6-v2 dense alone", "rank-bm25": "rank-bm25 (BM25Okapi)", "bm25s": "bm25s"}
    rows = ["| system | recall@5 | recall@10 | recall@20 | hit@10 | query p50 |", "|---|---|---|---|---|---|"]
    for key, label in names.items():
        figures = document["figures"].get(key)
        if not figures:
            continue
        overall = figures["all"]
        rows.append(f"| {label} | {overall['recall@5']:.3f} | {overall['recall@10']:.3f} | {overall['recall@20']:.3f} "
                    f"| {overall['hit@10']:.3f} | {figures['query_p50_ms']:.2f} ms |")
    ours = document["figures"]["kumiho_memory"]
    categories = " · ".join(f"{name} {ours[name]['recall@10']:.3f}"
                            for name in ("single-hop", "temporal", "multi-hop", "open-domain") if name in ours)
    return "\n".join(rows) + f"\n\nrecall@10 by category (ours): {categories}. {ours['questions']} questions."


def _scale_figures(document: dict) -> dict:
    """scale.json's figures, with those of scale_1m.json (a separate --sizes 1000000 --out run) added."""
    extra = _load("scale_1m")
    if extra is None:
        return document["figures"]
    figures = {key: dict(value) if isinstance(value, dict) else value for key, value in document["figures"].items()}
    for key, by_size in extra["figures"].items():
        if isinstance(by_size, dict):
            figures.setdefault(key, {}).update(by_size)
    return figures


def scale_table(document: dict) -> str:
    figures = _scale_figures(document)
    labels = {"ours": "kumiho_memory (in memory)", "ours-disk": "kumiho_memory (file store)",
              "rank-bm25": "rank-bm25", "bm25s": "bm25s"}
    rows = ["| system | N | query p50 | query p95 | index build | peak RSS |", "|---|---|---|---|---|---|"]
    for key, label in labels.items():
        for size, row in sorted(figures.get(key, {}).items(), key=lambda pair: int(pair[0])):
            if "query_p50_ms" not in row:
                continue
            build = row.get("first_query_ms", 0) / 1000.0 if key.startswith("ours") else row.get("index_s", 0)
            rows.append(f"| {label} | {int(size):,} | {row['query_p50_ms']:.2f} ms | {row['query_p95_ms']:.2f} ms "
                        f"| {build:.1f} s | {row['peak_rss_mb']:.0f} MB |")
    return "\n".join(rows)


def store_table(document: dict) -> str:
    memory, disk = document["figures"]["in_memory"], document["figures"]["on_disk"]
    rows = ["| | in memory | on disk (durable) |", "|---|---|---|",
            f"| writes per second (one transaction each) | {memory['writes_per_second']:,.0f} |"
            f" {disk['writes_per_second']:,.0f} |",
            f"| `get` p50 | {memory['get_p50_ms']:.3f} ms | {disk['get_p50_ms']:.3f} ms |",
            f"| `recall` p50 | {memory['recall_p50_ms']:.3f} ms | {disk['recall_p50_ms']:.3f} ms |",
            f"| `forget` p50 (incl. scrub) | {memory['forget_p50_ms']:.3f} ms | {disk['forget_p50_ms']:.3f} ms |"]
    return "\n".join(rows)


def belief_table(document: dict) -> str:
    keyed, stack = document["figures"]["keyed"], document["figures"]["stack"]
    heldout = (_load("belief_updates_heldout") or {}).get("figures", {}).get("stack")
    if heldout is not None:
        rows = ["| | keyed (`key=`) | unkeyed (`stack=True`) | unkeyed, held-out wording | target |",
                "|---|---|---|---|---|"]
    else:
        rows = ["| | keyed (`key=`) | unkeyed (`stack=True`) | target |", "|---|---|---|---|"]
    for label, field, target in (("stale value outranks the current one", "stale_rate_pct", "0%"),
                                 ("unrelated memory stacked onto another belief", "unrelated_stack_rate_pct", "0%"),
                                 ("correction missed (kept as a separate belief)", "missed_revisions_pct", "0%"),
                                 ("point in time, `get(item?t=latest&time=T)`", "point_in_time_get_pct", "100%"),
                                 ("point in time, `recall(question, as_of=T)`", "point_in_time_recall_pct", "100%")):
        extra = f" {heldout[field]:.2f}% |" if heldout is not None else ""
        rows.append(f"| {label} | {keyed[field]:.2f}% | {stack[field]:.2f}% |{extra} {target} |")
    params = document["parameters"]
    text = "\n".join(rows) + (f"\n\n{keyed['statements']:,} statements about {params['people']} people x "
                              f"{params['attributes']} attributes ({keyed['corrections']:,} corrections, "
                              f"{keyed['rephrasings']:,} rephrasings, seed {params['seed']}).")
    for part, who in (("first_person_lookalikes", "a hostile reviewer"),
                      ("first_person_lookalikes2", "a second reviewer, in casual chat style"),
                      ("first_person_lookalikes3",
                       "a third helper, on one-letter labels and settings (read, tuned on)")):
        lookalikes = document["figures"].get(part)
        if lookalikes:
            text += (f"\n\nLook-alikes written blind by {who} (a pair per store): "
                     f"{lookalikes['wrong_merges']} of {lookalikes['lookalikes']} merged wrongly; "
                     f"{lookalikes['caught']} of {lookalikes['corrections']} true corrections in the same style "
                     f"caught.")
    ceilings = document["figures"].get("judge_ceiling") or {}
    shown = [(part, ceilings[part], (document["figures"].get("first_person") or {}).get(part) or {})
             for part in ("fresh10", "fresh11", "fresh12", "fresh13", "fresh14", "issue_tuned", "issue_blind",
                          "issue_final")
             if part in ceilings]
    if shown:
        text += ("\n\nWith an LLM judge that is never wrong (a stand-in that answers for the pair; it measures what "
                 "the rules put before a judge, not a model; the questions are what it costs: the judge's questions "
                 "over every statement stored, controls and distractors too): " + "; ".join(
                     f"{part} {ceiling['missed_with_perfect_judge']} of {ceiling['pairs']} corrections missed "
                     f"({rules.get('missed_corrections', '?')} without a judge; the judge asked for "
                     f"{ceiling['judge_asked']}"
                     + (f", {ceiling['questions_per_statement']} questions a statement"
                        if "questions_per_statement" in ceiling else "") + ")"
                     for part, ceiling, rules in shown) + ".")
    return text + first_person_table(document["figures"].get("first_person") or {})


FIRST_PERSON_COLUMNS = (("design", "design pairs"), ("heldout", "held-out twelve"), ("fresh", "fresh (tuned on)"),
                        ("fresh2", "fresh2 (tuned on)"), ("fresh3", "fresh3 (tuned on)"),
                        ("train", "train (tuned on)"), ("fresh4", "fresh4 (tuned on)"),
                        ("fresh5", "fresh5 (pair per store, tuned on)"),
                        ("fresh6", "fresh6 (pair per store, tuned on)"),
                        ("fresh7", "fresh7 (pair per store, written blind, tuned on in 0.8.7)"),
                        ("fresh8", "fresh8 (pair per store, written blind, tuned on in 0.8.7)"),
                        ("fresh9", "fresh9 (pair per store, written blind, read in 0.8.3)"),
                        ("fresh10", "fresh10 (pair per store, written blind, tuned on in 0.8.7)"),
                        ("issue_tuned", "issue-style sets 1, 2, 4 (written blind, tuned on)"),
                        ("issue_blind", "issue-style sets 3, 5 (written blind, tuned on in 0.8.7)"),
                        ("issue_final", "issue-style sets 6, 7 (written blind, tuned on in 0.8.7)"),
                        ("fresh11", "fresh11 (pair per store, written blind for 0.8.7, totals read: held out)"),
                        ("fresh12", "fresh12 (pair per store, written blind, tuned on in 0.8.8)"),
                        ("fresh13", "fresh13 (pair per store, written blind for 0.8.8; its pairs seen in 0.8.9)"),
                        ("fresh14", "fresh14 (pair per store, written blind for 0.8.9, totals read: held out)"))


def first_person_table(columns: dict) -> str:
    """First-person chat streams, one column per set (``first_person`` in belief_updates.json)."""
    shown = [(key, label) for key, label in FIRST_PERSON_COLUMNS if key in columns]
    if not shown:
        return ""
    rows = ["| first-person chat, `stack=True` | " + " | ".join(label for _, label in shown) + " |",
            "|---|" + "---|" * len(shown)]
    for label, field in (("pairs", "pairs"), ("correction missed", "missed_corrections"),
                         ("unrelated statement merged", "wrong_merges"), ("stale value first", "stale_first"),
                         ("current value first", "current_top1")):
        rows.append(f"| {label} | " + " | ".join(str(columns[key][field]) for key, _ in shown) + " |")
    return "\n\n" + "\n".join(rows)


def prefetch_table(document: dict) -> str:
    f, params = document["figures"], document["parameters"]
    spare_document = _load("prefetch_spare")
    g = spare_document["figures"] if spare_document else None

    def row(label: str, value, target: str = "") -> str:
        cells = [value(f)] + ([value(g)] if g else [])
        return f"| {label} | " + " | ".join(cells) + f" | {target} |"
    header = "| | default (gate p >= 0.4) |" + (f" `spare_probability="
                                                f"{spare_document['parameters']['spare_probability']}` |"
                                                if g else "") + " target |"
    rows = [header, "|---|---|" + ("---|" if g else "") + "---|",
            row("hit rate where the predicted next step has p >= 0.6",
                lambda x: f"{x['hit_rate_when_predicted_p_ge_0_6']:.3f}", ">= 0.7"),
            row("hit rate, all steps", lambda x: f"{x['hit_rate']:.3f}"),
            row("blocking recall per handoff, without -> with prefetch",
                lambda x: f"{x['blocking_ms_per_handoff_without']:.1f} ms "
                          f"-> {x['blocking_ms_per_handoff_with_prefetch']:.1f} ms "
                          f"(-{100 * x['blocking_reduction']:.1f}%)", "-70%"),
            row("blocking reduction where p >= 0.6",
                lambda x: f"-{100 * x['blocking_reduction_when_predicted_p_ge_0_6']:.1f}%", "-70%"),
            row("tokens per handoff (the whole store would be)",
                lambda x: f"{x['tokens_per_handoff']:.0f} ({x['tokens_dump_everything']:,})"),
            row("hit rate per 10 sessions after the workflow changes",
                lambda x: ", ".join(f"{value:.2f}" for value in x["hit_rate_windows_after_change"])),
            row(f"stale context served after {f['revisions_mid_session']} mid-session revisions",
                lambda x: str(x["stale_served"]), "0"),
            row("prepared results never served (wasted) / prepared",
                lambda x: f"{x['prefetch_stats']['wasted_prefetches']:,} / {x['prefetch_stats']['prepared']:,}")]
    return "\n".join(rows) + f"\n\nSimulated recall latency {params.get('latency_ms', '?')} ms per search."


def kumiho_table(document: dict) -> str:
    f = document["figures"]
    rows = ["| operation (p50) | embedded SQLite | Kumiho backend, loopback gRPC |", "|---|---|---|"]
    for operation in ("remember", "get", "recall", "tag", "link"):
        rows.append(f"| {operation} | {f['embedded'][operation]['p50_ms']:.2f} ms | "
                    f"{f['kumiho_loopback'][operation]['p50_ms']:.2f} ms |")
    return "\n".join(rows)


def dream_table(document: dict) -> str:
    f, params = document["figures"], document["parameters"]
    core = f["without_traps_and_young"]
    rows = ["| | all cases | without traps and young duplicates | target |", "|---|---|---|---|",
            f"| precision of the deprecations | {f['precision']:.3f} | {core['precision']:.3f} | 1.0 |",
            f"| recall of the deprecations | {f['recall']:.3f} | {core['recall']:.3f} | >= 0.9 |",
            f"| protected (official, published) memories touched | {f['protected_touched']} of {f['protected']} "
            f"| {core['protected_touched']} | 0 |"]
    categories = " · ".join(f"{name} {row['correct']}/{row['should_go']}"
                            for name, row in f["by_category"].items() if row["should_go"])
    wrong = sum(row["wrongly_deprecated"] for row in f["by_category"].values())
    return "\n".join(rows) + (
        f"\n\n{f['memories']:,} memories, {f['should_go']} that should go; deprecated by category: {categories}; "
        f"{wrong} wrongly deprecated (look-alike traps). Heuristics, max_deprecation_ratio {params['ratio']}, "
        f"{len(f['runs']) + len(f['runs_after_aging'])} runs, {f['dream_s']:.1f} s, seed {params['seed']}.")


def browser_table(document: dict) -> str:
    rows = ["| route | p50 | max |", "|---|---|---|"]
    for name, figures in document["figures"]["routes"].items():
        rows.append(f"| {name} | {figures['p50_ms']:.1f} ms | {figures['max_ms']:.1f} ms |")
    return "\n".join(rows) + f"\n\n{document['parameters']['memories']:,} memories in one file store."


def privacy_table(document: dict) -> str:
    f = document["figures"]
    dev, held = f["credentials_dev"], f["credentials_held_out"]
    rows = ["| measure | dev | held-out |", "|---|---|---|",
            f"| secrets removed, in a line of code or config | {dev['in_context']:.1%} | {held['in_context']:.1%} |",
            f"| secrets removed, bare in a chat sentence | {dev['bare']:.1%} | {held['bare']:.1%} |",
            f"| right family named | {dev['family_correct']:.1%} | {held['family_correct']:.1%} |",
            f"| PII values anonymized | {f['pii_dev']['caught']:.1%} | {f['pii_held_out']['caught']:.1%} |"]
    fp = f["false_positives"]
    return ("\n".join(rows) + f"\n\n{f['families']} credential families, {dev['samples'] + held['samples']:,} samples. "
            f"Known non-secrets changed: {fp['scanner_changed']:.1%} of {fp['scanner_texts']} scanner-style false "
            f"positives, {fp['own_changed']:.1%} of {fp['own_texts']} placeholders; PII look-alikes changed: "
            f"{f['pii_lookalikes']['changed']:.1%} of {f['pii_lookalikes']['texts']}. End to end "
            f"({f['end_to_end']['messages']} messages ingested and consolidated into a file store): "
            f"{f['end_to_end']['leaked_after_close']} of {f['end_to_end']['distinct_secrets']} secrets in the "
            f"store's bytes. Screening a 2 KB message: {f['speed']['median_ms']:.2f} ms median, "
            f"{f['speed']['p95_ms']:.2f} ms p95.")


def redteam_table(document: dict) -> str:
    f = document["figures"]
    rows = ["| measure | result |", "|---|---|"]
    for key, label in (("context", "secrets removed, in a line of code or config"),
                       ("bare", "secrets removed, bare in chat (provider-prefixed)"),
                       ("bare_random", "secrets removed, bare in chat (random-looking, no prefix)"),
                       ("bare_keyword", "passwords in chat sentences")):
        entry = f["placement"].get(key)
        if isinstance(entry, dict) and entry.get("total"):
            rows.append(f"| {label} | {entry['caught']:,} / {entry['total']:,} = {entry['rate']:.1%} |")
    fp, pii = f["false_positives"], f["pii_overall"]
    rows.append(f"| known non-secrets changed | {fp['changed']} / {fp['total']} = {fp['rate']:.1%} |")
    rows.append(f"| PII anonymized | {pii['caught']} / {pii['total']} = {pii['rate']:.1%} |")
    return "\n".join(rows) + f"\n\n{f['credential_samples']:,} credential samples in {f['families']} families."


def longmemeval_table(document: dict) -> str:
    figures = document["figures"]
    rows = ["| system | turns r@5 | turns r@10 | held-out r@5 | held-out r@10 | session r@5 | query p50 |",
            "|---|---|---|---|---|---|---|"]
    for key, label in (("kumiho_memory", "kumiho_memory"), ("rank-bm25", "rank-bm25"), ("bm25s", "bm25s")):
        f = figures.get(key)
        if not f:
            continue
        overall, held = f["all"], f["heldout"]
        rows.append(f"| {label} | {overall['recall@5']:.3f} | {overall['recall@10']:.3f} | {held['recall@5']:.3f} "
                    f"| {held['recall@10']:.3f} | {overall['session@5']:.3f} | {f['query_p50_ms']:.2f} ms |")
    ours = figures["kumiho_memory"]
    types = " · ".join(f"{name} {ours[name]['recall@10']:.3f}" for name in sorted(ours)
                       if isinstance(ours[name], dict) and name not in ("all", "tune", "heldout"))
    return "\n".join(rows) + (f"\n\nrecall@10 of evidence turns by question type (ours): {types}. "
                              f"{ours['questions']} questions.")


def _ms(value) -> str:
    """Milliseconds as the tables show them: 0.42 ms, 12.3 ms, 1.46 s."""
    if not isinstance(value, (int, float)):
        return "–"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"


def _why(entry: dict) -> str:
    return str(entry.get("skipped") or entry.get("missing") or entry.get("error") or "–")


def scale_store_table(document: dict) -> str:
    """Cold start in a fresh process, warm recall on a reopened file store, bulk ingest (probes/scale.py)."""
    figures = _scale_figures(document)
    cold, reopened, bulk = (figures.get(key, {}) for key in ("cold_start", "warm_reopened", "bulk_ingest"))
    parts = []
    if cold:
        rows = ["| N | system | fresh process to first result | first query alone | import | peak RSS |",
                "|---|---|---|---|---|---|"]
        labels = {"ours": "kumiho_memory", "fts5": "SQLite FTS5", "bm25s": "bm25s (mmap)"}
        for size, entry in sorted(cold.items(), key=lambda pair: int(pair[0])):
            for key, label in labels.items():
                row = entry.get(key, {})
                if "first_result_ms" not in row:
                    rows.append(f"| {int(size):,} | {label} | {_why(row)} | | | |")
                    continue
                rows.append(f"| {int(size):,} | {label} | {_ms(row['first_result_ms'])} | {_ms(row['first_query_ms'])} "
                            f"| {_ms(row['import_ms'])} | {row['peak_rss_mb']:.0f} MB |")
        runs = document["parameters"].get("cold_runs", 3)
        ordered = sorted(cold.items(), key=lambda pair: int(pair[0]))
        ratios = "; ".join(f"{int(size):,}: {entry['ratio_ours_to_fts5']}x FTS5, {entry['ratio_ours_to_bm25s']}x bm25s"
                           for size, entry in ordered if entry.get("ratio_ours_to_fts5") is not None)
        first = "; ".join(f"{int(size):,}: {_ms(entry['ours']['first_open_after_build']['first_result_ms'])}"
                          for size, entry in ordered
                          if "first_result_ms" in entry.get("ours", {}).get("first_open_after_build", {}))
        parts.append("\n".join(rows) + f"\n\nMedian of {runs} fresh processes each (warm OS file cache)"
                     + (f"; ours' time to the first result: {ratios}" if ratios else "")
                     + (f". The first process to open ours' store after the build (not in the medians): {first}."
                        if first else "."))
    if reopened:
        rows = ["| N | kumiho_memory, reopened file store: first recall | query p50 | query p95 | peak RSS "
                "| bm25s p50 (same run) |", "|---|---|---|---|---|---|"]
        for size, row in sorted(reopened.items(), key=lambda pair: int(pair[0])):
            if "query_p50_ms" not in row:
                rows.append(f"| {int(size):,} | {_why(row)} | | | | |")
                continue
            reference = figures.get("bm25s", {}).get(size, {}).get("query_p50_ms")
            versus = f"{_ms(reference)} ({row['query_p50_ms'] / reference:.1f}x)" if reference else "–"
            rows.append(f"| {int(size):,} | {_ms(row['first_query_ms'])} | {_ms(row['query_p50_ms'])} "
                        f"| {_ms(row['query_p95_ms'])} | {row['peak_rss_mb']:.0f} MB | {versus} |")
        spread = "; ".join(f"{int(size):,}: " + ", ".join(_ms(run["query_p50_ms"]) for run in row["runs"])
                           for size, row in sorted(reopened.items(), key=lambda pair: int(pair[0]))
                           if len(row.get("runs", ())) > 1)
        parts.append("\n".join(rows) + (f"\n\nMedians over fresh processes, one after another; each one's p50: "
                                        f"{spread}." if spread else ""))
    if bulk:
        rows = ["| N | `remember_many` calls into a fresh file store | then `close()`, which stores the index | "
                "SQLite FTS5, one transaction | ratio: the calls | ratio: with the close |",
                "|---|---|---|---|---|---|"]
        for size, entry in sorted(bulk.items(), key=lambda pair: int(pair[0])):
            ours, fts5 = entry.get("ours", {}), entry.get("fts5", {})
            ok = "seconds" in ours and "missing" not in ours
            calls = f"{_ms(1000 * ours['write_s'])} ({size_rate(size, ours['write_s'])}/s)" if ok else _why(ours)
            closing = _ms(1000 * ours["close_s"]) if ok and "close_s" in ours else "–"
            theirs = (f"{_ms(1000 * fts5['seconds'])} ({fts5['memories_per_s']:,.0f}/s)" if "seconds" in fts5
                      else _why(fts5))
            factors = [f"{entry[key]}x" if entry.get(key) is not None else "–"
                       for key in ("ratio_write_to_fts5", "ratio_ours_to_fts5")]
            rows.append(f"| {int(size):,} | {calls} | {closing} | {theirs} | {factors[0]} | {factors[1]} |")
        parts.append("\n".join(rows))
        repeated = [(size, entry["runs"]) for size, entry in sorted(bulk.items(), key=lambda pair: int(pair[0]))
                    if len(entry.get("runs", {}).get("pair_ratios", ())) > 1]
        if repeated:
            pairs = "; ".join(f"{int(size):,}: " + ", ".join(f"{value}x" for value in runs["pair_ratios"])
                              for size, runs in repeated)
            parts.append(f"Bulk ingest is the median of several builds of each, ours and FTS5 in turn; each pair's "
                         f"ratio: {pairs}.")
    return "\n\n".join(parts)


def size_rate(size: str | int, seconds: float) -> str:
    """Memories a second, with thousands separators."""
    return f"{int(size) / seconds:,.0f}" if seconds else "–"


def dream_scale_table(document: dict) -> str:
    """Dream State's heuristic dry run at growing N (probes/dream_state.py --scale)."""
    figures, params = document["figures"], document["parameters"]
    rows = ["| memories | dry run | memories/s | peak RSS | deprecations proposed (duplicate · stale · superseded) |",
            "|---|---|---|---|---|"]
    for size, entry in sorted(figures["by_size"].items(), key=lambda pair: int(pair[0])):
        if "dream_s" not in entry:
            rows.append(f"| {int(size):,} | {entry.get('did_not_finish') or entry.get('error')} | | | |")
            continue
        found = entry["findings"].get("deprecate", {})
        rows.append(f"| {int(size):,} | {_ms(1000 * entry['dream_s'])} | {entry['memories_per_s']:,.0f} "
                    f"| {entry['peak_rss_mb']:.0f} MB | {entry['deprecations_proposed']:,} "
                    f"({found.get('duplicate', 0):,} · {found.get('stale', 0):,} · {found.get('superseded', 0):,}) |")
    growth = "; ".join(f"time({int(key.split('/')[0]):,}) / time({int(key.split('/')[1]):,}) = {value}"
                       for key, value in figures.get("growth_4x", {}).items())
    return "\n".join(rows) + (f"\n\n{growth}. " if growth else "\n\n") + (
        f"Heuristics, no LLM, one dry run per size in its own process, "
        f"{'file store' if params.get('disk') else 'in memory'}, seed {params['seed']}; "
        f"a run over {params['budget_s']:.0f} s is stopped.")


def agm_table(document: dict) -> str:
    f = document["figures"]
    runs = [name for name in f if name != "scenarios"]
    postulates = next((list(f[name]["by_postulate"]) for name in runs if "by_postulate" in f[name]), [])
    rows = ["| backend / way of writing | passed | " + " | ".join(postulates) + " |",
            "|---|---|" + "---|" * len(postulates)]
    for name in runs:
        entry = f[name]
        if "skipped" in entry:
            rows.append(f"| {name} | skipped: {entry['skipped']} |" + " |" * len(postulates))
            continue
        rows.append(f"| {name} | {entry['passed']} of {entry['total']} | "
                    + " | ".join(entry["by_postulate"][postulate] for postulate in postulates) + " |")
    failed = sorted({scenario for name in runs for scenario in f[name].get("failed", {})})
    return "\n".join(rows) + (f"\n\n{f['scenarios']} scenarios; failed anywhere: "
                              f"{', '.join(failed) if failed else 'none'}.")


TABLES = {"longmemeval": ("longmemeval_retrieval", longmemeval_table), "browser": ("browser", browser_table),
          "privacy": ("privacy", privacy_table),
          "redteam": ("privacy_redteam", redteam_table), "dream": ("dream_state", dream_table),
          "prefetch": ("prefetch", prefetch_table), "kumiho": ("kumiho_backend", kumiho_table),
          "locomo": ("locomo_retrieval", locomo_table), "scale": ("scale", scale_table),
          "scale_store": ("scale", scale_store_table), "dream_scale": ("dream_state_scale", dream_scale_table),
          "store": ("store_basics", store_table), "belief": ("belief_updates", belief_table),
          "agm": ("agm_scenarios", agm_table)}


def render(readme: str) -> str:
    """The README with every figures block regenerated from the results files."""
    for name, (result, build) in TABLES.items():
        document = _load(result)
        if document is None:
            continue
        pattern = re.compile(rf"(<!-- figures:{name} -->\n).*?(\n<!-- /figures:{name} -->)", flags=re.S)
        readme = pattern.sub(lambda match: match.group(1) + build(document) + match.group(2), readme)
    return readme


def main() -> int:
    with open(README, encoding="utf-8") as stream:
        current = stream.read()
    updated = render(current)
    if "--check" in sys.argv[1:]:
        if updated != current:
            print("README figures differ from probes/results; run: python probes/readme_figures.py",
                  file=sys.stderr)
            return 1
        return 0
    with open(README, "w", encoding="utf-8") as stream:
        stream.write(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
