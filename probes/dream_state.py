"""Probe: Dream State -- does it deprecate exactly the clutter, and never a protected memory?

Usage: python probes/dream_state.py [--facts 1000] [--duplicates 260] [--superseded 120] [--acks 120]
                                    [--chat 120] [--protected 160] [--traps 40] [--young 30]
                                    [--ratio 0.9] [--batch-size 50] [--max-runs 12] [--seed 11] [--disk]

Writes probes/results/dream_state.json. The store is generated deterministically from --seed on a manual
clock (one second per reading), across six spaces (people, ops, projects/alpha, projects/beta, facts, chat),
with a known truth for every memory:

  distinct facts       --facts statements that differ from each other ("Alice Moreau lives in Paris", "The
                       billing service runs on port 8443", ...), including one-value-word look-alikes
                       ("Alice Moreau lives in Paris" and "Alice Moreau lives in Lyon", both kept) and copies of
                       a fact in another space (a space is a context: kept). Must stay.
  duplicates           --duplicates groups: a fact written again later (exact copy, or a case, punctuation
                       or whitespace variant; a tenth of the groups get a third copy). The spec's keeper
                       (published, then the better evidence grade, then the older) stays; the others must go.
  superseded leftovers --superseded pairs: an old plan and a newer one in another item with a SUPERSEDES edge
                       to it. The old one must go, the new one stay.
  stale chat           --acks acknowledgement-only chat messages ("ok thanks!", metadata speaker/role), old:
                       must go. --chat substantive chat messages ("I moved to Berlin for a job at Initech"),
                       just as old: must stay.
  protected            --protected memories graded official or tagged published, some of them duplicates of
                       each other or of plain memories, some superseded, some acknowledgement chat; a
                       protected memory is never deprecated, re-graded or unpublished ("touched" counts any).
  traps                --traps pairs of look-alikes that a bag of words cannot tell apart but that say
                       different things: a negation ("Alice likes cats" / "Alice does not like cats"), swapped
                       roles ("Bob owes Alice 50 dollars" / "Alice owes Bob 50 dollars"), and one-word facts
                       in chat ("I am vegan"). Must stay.
  young duplicates     --young duplicate pairs written two days before the first run (under the 7-day
                       minimum age): kept at first; after the first runs the clock moves on 10 days and the
                       runs continue, so they must be gone at the end.

Everything else is written 200 days before the first run (old enough for the 7-day minimum age and the
90-day stale-chat age). DreamState runs by heuristics with max_deprecation_ratio --ratio until a run
processes nothing and deprecates nothing (at most --max-runs), then the clock advances 10 days and it runs
again until quiet. Figures: precision and recall of the set of deprecated memories against the truth
(targets: precision 1.0, recall >= 0.9), protected memories touched (target 0), the same per category, runs,
and runtime; the headline also without the traps and the young duplicates (the cases a bag-of-words
heuristic and a cursor that passes guarded memories get wrong). The probe reports; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

from _common import km, print_table, write_results

FIRST = ("Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Karl Laura Mallory Nina Oscar Peggy Quentin Rita "
         "Sam Trent Uma Victor Wendy Xavier Yara Zoe Liam Maya Noah Olga").split()
LAST = ("Moreau Chen Okafor Silva Novak Larsen Haddad Kowalski Tanaka Rossi Byrne Schmidt Dubois Petrov Nguyen "
        "Alvarez Fischer Kaur Jensen Costa Ibrahim Weber Murphy Sato Varga").split()
CITIES = "Paris Lyon Berlin Munich Oslo Lisbon Madrid Porto Vienna Prague Dublin Cork Turin Milan Krakow".split()
COMPANIES = "Globex Initech Umbrella Hooli Vandelay Stark Wayne Acme Cyberdyne Soylent".split()
ROLES = "engineer designer analyst manager accountant nurse chemist pilot".split()
FOODS = "sushi ramen tacos paella pierogi falafel risotto curry dumplings goulash".split()
SERVICES = "billing search auth gateway reports inventory mailer scheduler ledger metrics".split()
PROJECTS = "Apollo Borealis Cobalt Dynamo Ember Falcon Granite Helix Ion Juniper".split()
MONTHS = "January February March April May June July August September October November December".split()
COLORS = "red blue green black silver white orange".split()
CARS = "Volvo Skoda Fiat Toyota Honda Tesla Mazda".split()
ACKS = ("ok thanks!", "Sure, sounds great", "thanks!!", "ok", "okay cool", "great, thank you", "lol ok",
        "got it, thanks", "yes", "nice", "alright", "ty", "Cool cool", "haha nice", "k")
CHAT = ("I moved to {city} last month for a job at {company}", "My sister {first} is visiting us from {city}",
        "Remind me that the {service} invoice is due in {month}", "We adopted a dog called {first} in {month}",
        "I switched my {car} for a {color} bike to commute in {city}")
TRAPS = (("{p} likes {food}", "{p} does not like {food}"),
         ("{p} owes {q} {n} dollars", "{q} owes {p} {n} dollars"),
         ("The flight goes from {c1} to {c2}", "The flight goes from {c2} to {c1}"),
         ("I am vegan", None), ("Allergic, {food}", None), ("Yes, {c1}", None))
SPACES = ("people", "ops", "projects/alpha", "projects/beta", "facts")


def fact_text(rng: random.Random) -> tuple[str, str]:
    """One random fact and the space it belongs in."""
    person = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    kind = rng.randrange(6)
    if kind == 0:
        return f"{person} lives in {rng.choice(CITIES)}", "people"
    if kind == 1:
        return f"{person} works at {rng.choice(COMPANIES)} as a {rng.choice(ROLES)}", "people"
    if kind == 2:
        return f"{person}'s favorite food is {rng.choice(FOODS)}", "facts"
    if kind == 3:
        return f"The {rng.choice(SERVICES)} service runs on port {rng.randrange(1000, 9999)}", "ops"
    if kind == 4:
        return (f"Project {rng.choice(PROJECTS)} ships in {rng.choice(MONTHS)} with {rng.choice(COMPANIES)}",
                rng.choice(("projects/alpha", "projects/beta")))
    return f"{person} drives a {rng.choice(COLORS)} {rng.choice(CARS)}", "facts"


def variant(text: str, rng: random.Random) -> str:
    """The same words in another case, punctuation or spacing."""
    choice = rng.randrange(5)
    if choice == 0:
        return text
    if choice == 1:
        return text.lower()
    if choice == 2:
        return text + rng.choice(("!", ".", "!!", " ..."))
    if choice == 3:
        return "  " + text.replace(" ", "   ") + " "
    return text.upper() + "."


class Store:
    """Writes the generated memories and remembers what each one is supposed to be."""

    def __init__(self, memory: km.Memory) -> None:
        self.memory = memory
        self.truth: dict[str, dict] = {}         # revision kref -> {category, expect_deprecated, protected, order}
        self.seen: set[tuple[str, frozenset]] = set()

    def write(self, text: str, space: str, category: str, *, published: bool = False, level: str | None = None,
              metadata: dict | None = None, expect: bool = False) -> str:
        kref = self.memory.remember(text, space=space, tags=["published"] if published else None,
                                    evidence_level=level, metadata=metadata)
        self.truth[kref] = {"category": category, "expect": expect, "published": published, "level": level,
                            "protected": published or level == "official", "order": len(self.truth)}
        return kref

    def fresh_fact(self, rng: random.Random) -> tuple[str, str]:
        """A fact whose words no other generated fact in its space has (so only planted copies are duplicates)."""
        while True:
            text, space = fact_text(rng)
            key = (space, frozenset(km.tokenize(text)))
            if key not in self.seen:
                self.seen.add(key)
                return text, space


STRENGTH = {"official": 4, "corroborated": 3, "single_source": 2, "unverified": 1, None: 0}


def plant_group(store: Store, rng: random.Random, category: str, copies: list[dict]) -> None:
    """Write a duplicate group; the spec's keeper stays, every other unprotected copy is expected to go."""
    text, space = store.fresh_fact(rng)
    krefs = [store.write(variant(text, rng) if index else text, space, category, **options)
             for index, options in enumerate(copies)]
    ranked = sorted(krefs, key=lambda kref: (store.truth[kref]["published"], STRENGTH[store.truth[kref]["level"]],
                                             -store.truth[kref]["order"]), reverse=True)
    for kref in ranked[1:]:
        store.truth[kref]["expect"] = not store.truth[kref]["protected"]


def generate(memory: km.Memory, clock: km.ManualClock, args: argparse.Namespace) -> Store:
    rng = random.Random(args.seed)
    store = Store(memory)
    # distinct facts, with one-value-word look-alikes and cross-space copies
    for _ in range(args.facts):
        text, space = store.fresh_fact(rng)
        store.write(text, space, "distinct")
        if rng.random() < 0.15 and " lives in " in text:
            other = text.rsplit(" ", 1)[0] + " " + rng.choice([c for c in CITIES if not text.endswith(c)])
            if ("people", frozenset(km.tokenize(other))) not in store.seen:
                store.seen.add(("people", frozenset(km.tokenize(other))))
                store.write(other, "people", "look-alike")
        if rng.random() < 0.05:
            elsewhere = rng.choice([s for s in SPACES if s != space])
            if (elsewhere, frozenset(km.tokenize(text))) not in store.seen:
                store.seen.add((elsewhere, frozenset(km.tokenize(text))))
                store.write(text, elsewhere, "cross-space copy")
    # plain duplicates (originals first; a tenth with a third copy); some originals graded
    for index in range(args.duplicates):
        copies = [{"level": rng.choice((None, None, "single_source"))}, {}]
        if index % 10 == 0:
            copies.append({})
        plant_group(store, rng, "duplicate", copies)
    # protected memories: alone, duplicated with plain copies, duplicated with each other
    shapes = ([{"published": True}], [{"level": "official"}],
              [{"published": True}, {}], [{}, {"published": True}],          # the published one is kept
              [{"level": "official"}, {}], [{}, {"level": "official"}],      # the official one is kept
              [{"published": True}, {"published": True}],                   # a published loser: guarded
              [{"level": "official"}, {"level": "official"}],               # an official loser: guarded
              [{"level": "corroborated"}, {"level": "official"}])
    for index in range(args.protected):
        shape = shapes[index % len(shapes)]
        if len(shape) == 1:
            text, space = store.fresh_fact(rng)
            store.write(text, space, "protected", **shape[0])
        else:
            plant_group(store, rng, "protected duplicate", shape)
    # superseded leftovers (a few of the old ones published: protected)
    for index in range(args.superseded):
        project, month = rng.choice(PROJECTS), rng.choice(MONTHS)
        space = rng.choice(("projects/alpha", "projects/beta"))
        published = index % 12 == 0
        old = store.write(f"Plan {index}: {project} launches in {month}", space,
                          "protected superseded" if published else "superseded", published=published,
                          expect=not published)
        new = store.write(f"Plan {index} revised: {project} launches in {rng.choice(MONTHS)} after review {index}",
                          space, "superseding")
        memory.link(new, old, "SUPERSEDES")
    # chat: acknowledgements (a few published: protected) and substantive messages
    for index in range(args.acks):
        published = index % 15 == 0
        store.write(rng.choice(ACKS), "chat", "protected chat" if published else "stale ack", published=published,
                    metadata={rng.choice(("speaker", "role")): rng.choice(("user", "assistant"))},
                    expect=not published)
    while sum(truth["category"] == "substantive chat" for truth in store.truth.values()) < args.chat:
        text = rng.choice(CHAT).format(city=rng.choice(CITIES), company=rng.choice(COMPANIES), first=rng.choice(FIRST),
                                       service=rng.choice(SERVICES), month=rng.choice(MONTHS), car=rng.choice(CARS),
                                       color=rng.choice(COLORS))
        if ("chat", frozenset(km.tokenize(text))) in store.seen:
            continue                                 # a repeated message would be a true duplicate
        store.seen.add(("chat", frozenset(km.tokenize(text))))
        store.write(text, "chat", "substantive chat", metadata={"speaker": "user"})
    # traps: look-alikes a bag of words cannot tell apart
    for index in range(args.traps):
        first, second = TRAPS[index % len(TRAPS)]
        names = rng.sample(FIRST, 2)
        values = {"p": f"{names[0]} {LAST[index % len(LAST)]}", "q": f"{names[1]} {LAST[(index + 3) % len(LAST)]}",
                  "food": rng.choice(FOODS), "n": 10 * (index + 1), "c1": CITIES[index % len(CITIES)],
                  "c2": CITIES[(index + 5) % len(CITIES)]}
        if second is None:
            text = first.format(**values)
            if ("chat", text) in store.seen:
                continue                             # a repeat would be a true duplicate, not a trap
            store.seen.add(("chat", text))
            store.write(text, "chat", "trap", metadata={"speaker": "user"})
        else:
            space = "facts" if index % 2 else "people"
            pair = (space, first.format(**values), second.format(**values))
            if pair in store.seen or (space, pair[2], pair[1]) in store.seen:
                continue                             # repeating a pair would plant true duplicates
            store.seen.add(pair)
            store.write(pair[1], space, "trap")
            store.write(pair[2], space, "trap")
    clock.advance(days=198)
    for _ in range(args.young):                      # two days before the first run
        plant_group(store, rng, "young duplicate", [{}, {}])
    clock.advance(days=2)
    return store


def run_until_quiet(memory: km.Memory, args: argparse.Namespace, runs: list[dict]) -> None:
    for _ in range(args.max_runs):
        started = time.perf_counter()
        result = km.DreamState(memory, max_deprecation_ratio=args.ratio, batch_size=args.batch_size).run_sync()
        runs.append({"processed": result["events_processed"], "deprecated": result["deprecated"],
                     "proposed": result["deprecations_proposed"], "guarded": result["guarded_skips"],
                     "errors": len(result["errors"]), "seconds": round(time.perf_counter() - started, 2)})
        if result["events_processed"] == 0 and result["deprecated"] == 0:
            return


def measure(memory: km.Memory, store: Store, exclude: frozenset = frozenset()) -> dict:
    """Precision, recall and protected-touched over the memories whose category is not in ``exclude``."""
    current = {kref: memory.get(kref) for kref, truth in store.truth.items() if truth["category"] not in exclude}
    gone = {kref for kref, record in current.items() if record["deprecated"]}
    expected = {kref for kref in current if store.truth[kref]["expect"]}
    hits = gone & expected
    touched = []
    for kref in current:
        truth = store.truth[kref]
        if not truth["protected"]:
            continue
        record = current[kref]
        level = km.parse_evidence(record["metadata"], record["tags"])
        if record["deprecated"] or (truth["published"] and "published" not in record["tags"]) or \
                (truth["level"] is not None and level != truth["level"]):
            touched.append(kref)
    categories: dict[str, dict] = {}
    for kref in current:
        truth = store.truth[kref]
        row = categories.setdefault(truth["category"], {"memories": 0, "should_go": 0, "deprecated": 0,
                                                        "correct": 0, "wrongly_deprecated": 0, "missed": 0})
        row["memories"] += 1
        row["should_go"] += truth["expect"]
        row["deprecated"] += kref in gone
        row["correct"] += kref in hits
        row["wrongly_deprecated"] += kref in gone and not truth["expect"]
        row["missed"] += truth["expect"] and kref not in gone
    examples = {"wrongly_deprecated": sorted(current[kref]["content"] for kref in gone - expected)[:10],
                "missed": sorted(current[kref]["content"] for kref in expected - gone)[:10]}
    return {"memories": len(current), "should_go": len(expected), "deprecated": len(gone),
            "correct": len(hits), "precision": round(len(hits) / len(gone), 4) if gone else 1.0,
            "recall": round(len(hits) / len(expected), 4) if expected else 1.0,
            "protected": sum(store.truth[kref]["protected"] for kref in current),
            "protected_touched": len(touched), "by_category": categories, "examples": examples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=1000)
    parser.add_argument("--duplicates", type=int, default=260, help="duplicate groups")
    parser.add_argument("--superseded", type=int, default=120, help="superseded pairs")
    parser.add_argument("--acks", type=int, default=120, help="acknowledgement chat messages")
    parser.add_argument("--chat", type=int, default=120, help="substantive chat messages")
    parser.add_argument("--protected", type=int, default=160, help="protected memories or groups")
    parser.add_argument("--traps", type=int, default=40, help="look-alike traps (negation, swapped roles, ...)")
    parser.add_argument("--young", type=int, default=30, help="duplicate pairs under the minimum age at first")
    parser.add_argument("--ratio", type=float, default=0.9, help="max_deprecation_ratio")
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--max-runs", type=int, default=12, help="runs per phase at most")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--disk", action="store_true", help="use a file store instead of an in-memory one")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        clock = km.ManualClock("2025-06-01T00:00:00Z", tick=1)
        memory = km.Memory(os.path.join(folder, "dream.db") if args.disk else None, clock=clock,
                           ids=km.SequentialIds(), project="DreamProbe")
        store = generate(memory, clock, args)
        generated_s = time.perf_counter() - started
        runs: list[dict] = []
        run_until_quiet(memory, args, runs)
        first_phase = measure(memory, store)
        clock.advance(days=10)
        aging_runs: list[dict] = []
        run_until_quiet(memory, args, aging_runs)
        dream_s = sum(run["seconds"] for run in runs + aging_runs)
        figures = measure(memory, store)
        core = measure(memory, store, exclude=frozenset({"trap", "young duplicate"}))
        memory.close()
    figures.update({"without_traps_and_young": {key: core[key] for key in
                                                ("memories", "should_go", "deprecated", "precision", "recall",
                                                 "protected_touched")},
                    "runs": runs, "runs_after_aging": aging_runs, "generate_s": round(generated_s, 1),
                    "dream_s": round(dream_s, 1), "memories_per_second": round(len(store.truth) / dream_s, 1),
                    "after_first_phase": {key: first_phase[key] for key in
                                          ("precision", "recall", "deprecated", "protected_touched")},
                    "elapsed_s": round(time.perf_counter() - started, 1)})
    rows = [("memories", figures["memories"]), ("should be deprecated", figures["should_go"]),
            ("deprecated", figures["deprecated"]), ("precision (target 1.0)", figures["precision"]),
            ("recall (target >= 0.9)", figures["recall"]),
            ("protected touched (target 0)", f"{figures['protected_touched']} of {figures['protected']}"),
            ("without traps and young duplicates: precision / recall",
             f"{core['precision']} / {core['recall']}"),
            ("before the 10-day aging: precision / recall",
             f"{first_phase['precision']} / {first_phase['recall']}"),
            ("runs (first phase, after aging)", f"{len(runs)}, {len(aging_runs)}"),
            ("dream time", f"{figures['dream_s']} s ({figures['memories_per_second']} memories/s)")]
    rows.append(("category", "memories  should-go  deprecated  wrong  missed"))
    for name, row in figures["by_category"].items():
        rows.append((f"  {name}", f"{row['memories']:>8}  {row['should_go']:>9}  {row['deprecated']:>10}  "
                                  f"{row['wrongly_deprecated']:>5}  {row['missed']:>6}"))
    print_table(rows)
    for kind, texts in figures["examples"].items():
        if texts:
            print(f"{kind}: " + "; ".join(repr(text) for text in texts[:5]))
    print("wrote", write_results("dream_state", vars(args), figures))


if __name__ == "__main__":
    main()
