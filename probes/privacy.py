"""Probe: how well credential and PII screening works, how fast it is, and whether secrets reach the store.

Usage: python probes/privacy.py [--seed N] [--e2e-messages M]

Writes probes/results/privacy.json. Figures are given for the DEV corpus (what the rules were tuned on) and
the HELD_OUT corpus (frames written first and not tuned on); see probes/privacy_corpus.py.

- detection: a sample counts as caught when none of its secret's characters survive in one run of
  ``redact_credential_text`` (the secret's bytes are gone); ``family_correct`` also needs the right family.
- false positives: a text counts as changed when ``redact_credential_text`` changes it at all.
- PII: caught when ``anonymize_pii_text`` removes the value; look-alikes count as changed on any change.
- speed: ``scan_credentials`` plus ``scan_pii`` on 2 KB chat messages (some holding a secret).
- end to end: secrets sent as chat messages through ``UniversalMemoryManager`` and consolidated into a store
  file; then every byte of the database, -wal and -shm files is searched for each secret.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import tempfile
import time

from _common import km, median, percentile, print_table, write_results

import privacy_corpus as corpus


def _rate(hits: int, total: int) -> float:
    return round(hits / total, 4) if total else 0.0


def credential_figures(split: str, seed: int) -> dict:
    samples = corpus.credential_samples(split, seed)
    per_family: dict[str, dict[str, list[int]]] = collections.defaultdict(
        lambda: {"context": [0, 0], "bare": [0, 0]})
    caught = family_ok = 0
    misses = []
    for sample in samples:
        redacted, _ = km.redact_credential_text(sample.text)
        hit = sample.secret not in redacted
        findings = km.scan_credentials(sample.text)
        right_family = hit and any(f.family == sample.family for f in findings)
        counts = per_family[sample.family][sample.placement]
        counts[0] += hit
        counts[1] += 1
        caught += hit
        family_ok += right_family
        if not hit and len(misses) < 25:
            misses.append({"family": sample.family, "placement": sample.placement, "text": sample.text[:160]})
    by_placement = collections.Counter()
    totals = collections.Counter()
    for family, placements in per_family.items():
        for placement, (hits, total) in placements.items():
            by_placement[placement] += hits
            totals[placement] += total
    return {
        "samples": len(samples),
        "detected": _rate(caught, len(samples)),
        "family_correct": _rate(family_ok, len(samples)),
        "in_context": _rate(by_placement["context"], totals["context"]),
        "bare": _rate(by_placement["bare"], totals["bare"]),
        "families": {family: {placement: _rate(*counts) for placement, counts in placements.items() if counts[1]}
                     for family, placements in sorted(per_family.items())},
        "misses": misses,
    }


def false_positive_figures() -> dict:
    groups: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    changed_examples = []
    for group, text in corpus.credential_false_positives():
        redacted, _ = km.redact_credential_text(text)
        changed = redacted != text
        groups[group][0] += changed
        groups[group][1] += 1
        if changed and len(changed_examples) < 20:
            changed_examples.append(text[:120])
    return {f"{group}_changed": _rate(*counts) for group, counts in groups.items()} | {
        "scanner_texts": groups["scanner"][1], "own_texts": groups["own"][1], "changed_examples": changed_examples}


def pii_figures(split: str, seed: int) -> dict:
    kinds: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    misses = []
    for sample in corpus.pii_samples(split, seed):
        anonymized = km.anonymize_pii_text(sample.text)
        hit = sample.value not in anonymized and f"[{sample.kind}]" in anonymized
        kinds[sample.kind][0] += hit
        kinds[sample.kind][1] += 1
        if not hit and len(misses) < 25:
            misses.append({"kind": sample.kind, "text": sample.text})
    total = sum(counts[1] for counts in kinds.values())
    return {"caught": _rate(sum(counts[0] for counts in kinds.values()), total), "samples": total,
            "kinds": {kind: _rate(*counts) for kind, counts in sorted(kinds.items())}, "misses": misses}


def lookalike_figures() -> dict:
    texts = corpus.pii_lookalikes()
    changed = [text for text in texts if km.anonymize_pii_text(text) != text]
    return {"texts": len(texts), "changed": _rate(len(changed), len(texts)), "changed_examples": changed[:20]}


def _message(rng: random.Random, secret: str | None) -> str:
    words = ("the deploy failed again after we moved the cache to the new cluster, can you look at the logs "
             "and tell me whether the retry policy or the timeout is wrong; numbers: 42, 3.14, v2.1.0, "
             "2026-05-01, order 100234 and ticket ABC-1234 are related").split()
    parts: list[str] = []
    size = 0
    while size < 2048:
        word = rng.choice(words)
        parts.append(word)
        size += len(word) + 1
    if secret is not None:
        parts.insert(rng.randrange(len(parts)), secret)
    return " ".join(parts)[:2048]


def speed_figures(seed: int, messages: int = 400) -> dict:
    rng = random.Random(seed)
    samples = corpus.credential_samples(corpus.DEV, seed)
    texts = [_message(rng, rng.choice(samples).secret if index % 4 == 0 else None) for index in range(messages)]
    for text in texts[:20]:  # warm up caches
        km.scan_credentials(text)
        km.scan_pii(text)
    timings = []
    for text in texts:
        start = time.perf_counter()
        km.scan_credentials(text)
        km.scan_pii(text)
        timings.append((time.perf_counter() - start) * 1000.0)
    worst = {}
    for name, text in (("a*100000", "a" * 100_000), ("sk_live_*", "sk_live_" * 12_500),
                       ("digits+spaces", "1234 " * 20_000), ("@*", "@" * 100_000), (":*", ":" * 100_000),
                       ("password=*", "password=" * 11_000), ("-*", "-" * 100_000)):
        start = time.perf_counter()
        km.scan_credentials(text)
        km.scan_pii(text)
        worst[name] = round((time.perf_counter() - start) * 1000.0, 1)
    return {"messages": messages, "bytes": 2048, "median_ms": round(median(timings), 4),
            "p95_ms": round(percentile(timings, 0.95), 4), "adversarial_100k_ms": worst}


async def _ingest(path: str, chats: list[str], per_session: int) -> dict:
    errors = collections.Counter()
    manager = km.UniversalMemoryManager(memory=km.Memory(path))
    stored = 0
    try:
        for index in range(0, len(chats), per_session):
            session_id = None
            for offset, message in enumerate(chats[index:index + per_session]):
                try:
                    turn = await manager.handle_user_message(user_id=f"user{index}", message=message,
                                                             session_id=session_id)
                    session_id = turn["session_id"]
                except km.KumihoMemoryError as exc:
                    errors[type(exc).__name__] += 1
            if session_id is None:
                continue
            try:
                await manager.consolidate_session(session_id=session_id)
                stored += 1
            except km.KumihoMemoryError as exc:
                errors[type(exc).__name__] += 1
        snapshot = _store_bytes(path)
    finally:
        await manager.close()
    return {"sessions_stored": stored, "errors": dict(errors), "open": snapshot, "closed": _store_bytes(path)}


def _store_bytes(path: str) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            with open(path + suffix, "rb") as stream:
                data += stream.read()
    return data


def end_to_end_figures(seed: int, messages: int) -> dict:
    rng = random.Random(seed)
    samples = corpus.credential_samples(corpus.DEV, seed) + corpus.credential_samples(corpus.HELD_OUT, seed)
    rng.shuffle(samples)
    chosen = samples[:messages]
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "store.db")
        try:
            outcome = asyncio.run(_ingest(path, [sample.text for sample in chosen], per_session=8))
        except Exception as exc:  # the probe reports; a failure here is a finding, not a crash
            return {"error": f"{type(exc).__name__}: {exc}"[:300], "messages": len(chosen)}
    secrets = {sample.secret for sample in chosen if len(sample.secret) >= 8}
    leaked = {name: sorted({s for s in secrets if s.encode() in outcome[name]}) for name in ("open", "closed")}
    leaked_lower = {s for s in secrets if s.lower().encode() in outcome["open"].lower()}
    families = collections.Counter(sample.family for sample in chosen if sample.secret in leaked["open"])
    return {"messages": len(chosen), "distinct_secrets": len(secrets), "sessions_stored": outcome["sessions_stored"],
            "errors": outcome["errors"], "leaked_while_open": len(leaked["open"]),
            "leaked_after_close": len(leaked["closed"]), "leaked_case_insensitive": len(leaked_lower),
            "leaked_rate": _rate(len(leaked["open"]), len(secrets)),
            "leaked_families": dict(families.most_common(15))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--e2e-messages", type=int, default=160)
    args = parser.parse_args()
    started = time.perf_counter()
    figures = {
        "families": len(km.CREDENTIAL_FAMILIES),
        "credentials_dev": credential_figures(corpus.DEV, args.seed),
        "credentials_held_out": credential_figures(corpus.HELD_OUT, args.seed),
        "false_positives": false_positive_figures(),
        "pii_dev": pii_figures(corpus.DEV, args.seed),
        "pii_held_out": pii_figures(corpus.HELD_OUT, args.seed),
        "pii_lookalikes": lookalike_figures(),
        "speed": speed_figures(args.seed),
        "end_to_end": end_to_end_figures(args.seed, args.e2e_messages),
    }
    figures["seconds"] = round(time.perf_counter() - started, 1)
    path = write_results("privacy", {"seed": args.seed, "e2e_messages": args.e2e_messages}, figures)
    dev, held = figures["credentials_dev"], figures["credentials_held_out"]
    e2e = figures["end_to_end"]
    print_table([
        ("credential families", figures["families"]),
        ("secrets detected dev / held-out", f"{dev['detected']:.1%} / {held['detected']:.1%}"),
        ("  in context dev / held-out", f"{dev['in_context']:.1%} / {held['in_context']:.1%}"),
        ("  bare in chat dev / held-out", f"{dev['bare']:.1%} / {held['bare']:.1%}"),
        ("  right family dev / held-out", f"{dev['family_correct']:.1%} / {held['family_correct']:.1%}"),
        ("false positives: scanner-style", f"{figures['false_positives'].get('scanner_changed', 0):.1%}"),
        ("false positives: own placeholders", f"{figures['false_positives'].get('own_changed', 0):.1%}"),
        ("PII caught dev / held-out", f"{figures['pii_dev']['caught']:.1%} / {figures['pii_held_out']['caught']:.1%}"),
        ("PII look-alikes changed", f"{figures['pii_lookalikes']['changed']:.1%}"),
        ("screening 2 KB median / p95 ms", f"{figures['speed']['median_ms']} / {figures['speed']['p95_ms']}"),
        ("end to end: secrets in store files", e2e.get("leaked_while_open", e2e.get("error"))),
        ("seconds", figures["seconds"]),
        ("written", path),
    ])


if __name__ == "__main__":
    main()
