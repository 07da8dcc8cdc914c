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

SCALING MODE

Usage: python probes/dream_state.py --scale 2500,10000,40000 [--budget-s 600] [--seed 11] [--disk]
                                    [--ratio 0.9] [--batch-size 50] [--out PATH]

Writes probes/results/dream_state_scale.json (or --out; dream_state.json is left alone). For each N, in its
own subprocess, a store of N memories is generated deterministically from --seed, written with
remember_many() in batches of 1,000 records when the module has it (else remember() one by one), then aged
200 days, and DreamState's offline dry run (heuristics, no LLM, ``dry_run=True``: it assesses everything
and changes nothing) is timed once. The mix, as fractions of N, across five fact spaces (people, ops,
projects/alpha, projects/beta, facts) and five chat spaces (chat, chat/work, chat/home, chat/travel,
chat/health) that all grow with N:

  chat turns       ~46%  user and assistant messages (metadata speaker/role and session) from templates
                         with many slots: distinct within their space.
  acknowledgements ~4%   "ok thanks!", "Cool cool", ... as chat messages: repeated (so some are copies of
                         each other) and stale.
  facts            ~36%  statements about people, services, projects, distinct within their space.
  duplicates       ~6%   a copy of an earlier fact or chat turn in its space (exact, or a case, punctuation
                         or spacing variant).
  superseded pairs ~2%   x2: an old plan and a newer one in another item with a SUPERSEDES edge to it.
  keyed updates    ~2%   a fact written again under the same key= (a new revision of the same item).
  cross-space      ~1%   a fact copied into another space (not a duplicate).
  protected        ~1%   a fact tagged published or graded official, some with a plain copy.

Figures per N: ``dream_s`` (the dry run alone), ``build_s``, ``peak_rss_mb`` (VmHWM, see
_common.peak_rss_mb) and the RSS after the build, the findings (deprecations proposed by category, kept
by guard, contradictions) next to what was planted. ``growth`` gives, for each pair of sizes, the time
ratio and the exponent log(time ratio) / log(size ratio) (1.0 is linear); ``growth_4x`` the pairs where one
size is 4x the other (time(4N) / time(N)). A dry run still going after --budget-s (counted from the end of
the build) is killed; its entry says "did not finish within N s" with how far it got, and a ratio involving
it is a lower bound (">= x").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

from _common import km, peak_rss_mb, print_table, write_results

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

# -- scaling mode -------------------------------------------------------------------------------------------

CHAT_SPACES = ("chat", "chat/work", "chat/home", "chat/travel", "chat/health")
TASKS = ("call the dentist", "renew the passport", "pay the rent", "water the plants", "book the flights",
         "send the slides", "pick up the parcel", "back up the laptop", "cancel the gym", "buy a gift for Olga",
         "file the expense report", "check the smoke alarm", "order new lenses", "feed the neighbours' cat")
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
RELATIVES = "sister brother cousin aunt uncle mother father niece".split()
ACTIVITIES = ("hiking", "climbing", "a museum visit", "a cooking class", "kayaking", "a concert", "cycling",
              "a flea market", "a wine tasting", "yoga in the park")
STREETS = ("Elm", "Oak", "Harbour", "Station", "Mill", "Church", "Bridge", "Market", "Castle", "Garden", "King",
           "Queen", "River", "Park", "Hill", "Lake", "North", "South", "West", "East")
OPINIONS = ("amazing", "a bit salty", "too loud", "worth it", "overpriced", "lovely", "just fine", "slow")
LANGUAGES = "Spanish Italian Japanese Polish Korean Dutch Greek Portuguese".split()
PETS = "cats dogs parrots rabbits goldfish hamsters".split()
USER_TURNS = ("I moved to {city} last {month} for a job at {company}",
              "Can you remind me to {task} on {weekday} at {hour}?",
              "My {relative} {first} is visiting from {city} in {month}",
              "I'm thinking about {activity} this weekend, maybe near {city}",
              "We had {food} at a place on {street} Street, it was {opinion}",
              "My {car} needs a service before the trip to {city} on the {day}th",
              "The {service} invoice for {month} came to {amount} dollars",
              "I started learning {language} with {first}, twice a week",
              "{first} said the {service} meeting moved to {weekday} {hour}",
              "I ran {day} kilometres along {street} Street this morning")
ASSISTANT_TURNS = ("Sure, I will remind you to {task} on {weekday} at {hour}.",
                   "{city} is lovely in {month}; want a list of places for {activity}?",
                   "Noted: {first} prefers {food} over {food2}.",
                   "The {service} incident on {weekday} failed {amount} requests; the summary is in your inbox.",
                   "Your {car} service is booked for {weekday} the {day}th at {hour}.",
                   "{language} lessons with {first}: I added {weekday} {hour} to your calendar.")


def _slots(rng: random.Random) -> dict:
    return {"city": rng.choice(CITIES), "company": rng.choice(COMPANIES), "first": rng.choice(FIRST),
            "month": rng.choice(MONTHS), "task": rng.choice(TASKS), "weekday": rng.choice(WEEKDAYS),
            "hour": f"{rng.randint(1, 12)}{rng.choice(('am', 'pm'))}", "relative": rng.choice(RELATIVES),
            "activity": rng.choice(ACTIVITIES), "food": rng.choice(FOODS), "food2": rng.choice(FOODS),
            "street": rng.choice(STREETS), "opinion": rng.choice(OPINIONS), "car": rng.choice(CARS),
            "day": rng.randint(1, 28), "service": rng.choice(SERVICES), "amount": rng.randint(12, 990),
            "language": rng.choice(LANGUAGES)}


def scale_fact(rng: random.Random) -> tuple[str, str]:
    """A fact from a larger space than ``fact_text`` (numbers and dates added), and its space."""
    person = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
    kind = rng.randrange(10)
    if kind < 6:
        return fact_text(rng)
    if kind == 6:
        return f"{person}'s birthday is {rng.choice(MONTHS)} {rng.randint(1, 28)}", "people"
    if kind == 7:
        return f"{person} has {rng.randint(1, 6)} {rng.choice(PETS)}", "facts"
    if kind == 8:
        return (f"The {rng.choice(SERVICES)} service keeps {rng.randint(2, 400)} days of logs in "
                f"{rng.choice(CITIES)}", "ops")
    return (f"Project {rng.choice(PROJECTS)} needs {rng.randint(2, 40)} {rng.choice(ROLES)}s by "
            f"{rng.choice(MONTHS)}", rng.choice(("projects/alpha", "projects/beta")))


def copy_key(text: str) -> tuple[str, ...]:
    """What Dream State compares for copies: the words in order, casefolded, without punctuation."""
    return tuple(re.findall(r"\w+", text.casefold()))


def scale_records(count: int, seed: int) -> tuple[list[dict], list[tuple[int, int]], dict]:
    """``count`` records for remember/remember_many, the SUPERSEDES pairs (new, old) by position, and what
    was planted (the counts per category)."""
    rng = random.Random(f"dream-scale-{seed}")
    records: list[dict] = []
    pairs: list[tuple[int, int]] = []
    seen: set = set()
    originals: list[int] = []                 # positions a duplicate may copy
    planted = {name: 0 for name in ("chat", "acks", "facts", "duplicate_copies", "superseded_pairs",
                                    "keyed_updates", "cross_space_copies", "protected")}
    keyed: list[tuple[str, str]] = []         # (key, person) of keyed facts written once so far

    def distinct(make) -> tuple[str, str]:
        for _ in range(50):
            text, space = make()
            if (space, copy_key(text)) not in seen:
                seen.add((space, copy_key(text)))
                return text, space
        text, space = make()                  # a crowded corner: make it distinct by construction
        text = f"{text} (note {len(records)})"
        seen.add((space, copy_key(text)))
        return text, space

    def chat_turn(speaker: str) -> tuple[str, str]:
        template = rng.choice(USER_TURNS if speaker == "user" else ASSISTANT_TURNS)
        return template.format(**_slots(rng)), rng.choice(CHAT_SPACES)

    while len(records) < count:
        roll = rng.random()
        session = f"s{len(records) // 40}"
        if roll < 0.46:
            speaker = "user" if rng.random() < 0.6 else "assistant"
            text, space = distinct(lambda: chat_turn(speaker))
            records.append({"content": text, "space": space, "kind": "memory",
                            "metadata": {rng.choice(("speaker", "role")): speaker, "session": session}})
            originals.append(len(records) - 1)
            planted["chat"] += 1
        elif roll < 0.50:
            records.append({"content": rng.choice(ACKS), "space": rng.choice(CHAT_SPACES), "kind": "memory",
                            "metadata": {"speaker": rng.choice(("user", "assistant")), "session": session}})
            planted["acks"] += 1
        elif roll < 0.86:
            text, space = distinct(lambda: scale_fact(rng))
            records.append({"content": text, "space": space, "kind": "fact"})
            originals.append(len(records) - 1)
            planted["facts"] += 1
        elif roll < 0.92 and originals:
            source = records[rng.choice(originals)]
            copy = {**source, "content": variant(source["content"], rng)}
            if "metadata" in copy:
                copy["metadata"] = {**copy["metadata"], "session": session}
            records.append(copy)
            planted["duplicate_copies"] += 1
        elif roll < 0.94 and len(records) + 2 <= count:
            project, space = rng.choice(PROJECTS), rng.choice(("projects/alpha", "projects/beta"))
            number = planted["superseded_pairs"]
            records.append({"content": f"Plan {number}: {project} launches in {rng.choice(MONTHS)}",
                            "space": space, "kind": "decision"})
            records.append({"content": f"Plan {number} revised: {project} launches in {rng.choice(MONTHS)} "
                                       f"after review {number}", "space": space, "kind": "decision"})
            pairs.append((len(records) - 1, len(records) - 2))
            planted["superseded_pairs"] += 1
        elif roll < 0.96:
            if keyed and rng.random() < 0.5:
                key, person = keyed.pop(rng.randrange(len(keyed)))
                planted["keyed_updates"] += 1
            else:
                key, person = f"person.{len(records)}.city", f"{rng.choice(FIRST)} {rng.choice(LAST)}"
                keyed.append((key, person))
            records.append({"content": f"{person} now lives in {rng.choice(CITIES)} (update {len(records)})",
                            "space": "people", "kind": "fact", "key": key})
        elif roll < 0.97 and originals:
            source = records[rng.choice(originals)]
            elsewhere = rng.choice([space for space in SPACES if space != source["space"]])
            if source["kind"] == "fact" and (elsewhere, copy_key(source["content"])) not in seen:
                seen.add((elsewhere, copy_key(source["content"])))
                records.append({**source, "space": elsewhere})
                planted["cross_space_copies"] += 1
        elif roll < 0.98:
            text, space = distinct(lambda: scale_fact(rng))
            grade = {"tags": ["published"]} if rng.random() < 0.5 else {"evidence_level": "official"}
            records.append({"content": text, "space": space, "kind": "fact", **grade})
            planted["protected"] += 1
            if rng.random() < 0.3 and len(records) < count:
                records.append({"content": variant(text, rng), "space": space, "kind": "fact"})
                planted["duplicate_copies"] += 1
        else:
            text, space = distinct(lambda: chat_turn("user"))
            records.append({"content": text, "space": space, "kind": "memory",
                            "metadata": {"speaker": "user", "session": session}})
            originals.append(len(records) - 1)
            planted["chat"] += 1
    del records[count:]
    return records, [(new, old) for new, old in pairs if new < count], planted


def write_records(memory: km.Memory, records: list[dict]) -> tuple[list[str], str]:
    """Write ``records`` in order; return their krefs and the API used."""
    if hasattr(memory, "remember_many"):
        krefs: list[str] = []
        for start in range(0, len(records), 1000):
            krefs.extend(memory.remember_many(records[start:start + 1000]))
        return krefs, "remember_many (batches of 1000 records)"
    return [memory.remember(record["content"], **{key: value for key, value in record.items() if key != "content"})
            for record in records], "remember"


def emit(phase: str, **fields) -> None:
    print(json.dumps({"phase": phase, **fields}), flush=True)


def scale_child(size: int, args: argparse.Namespace) -> None:
    """One N: build the store, then time one heuristic dry run; JSON lines on stdout for the parent."""
    started = time.perf_counter()
    records, pairs, planted = scale_records(size, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        clock = km.ManualClock("2025-06-01T00:00:00Z", tick=1)
        memory = km.Memory(os.path.join(folder, "dream.db") if args.disk else None, clock=clock,
                           ids=km.SequentialIds(), project="DreamProbe")
        krefs, api = write_records(memory, records)
        for new, old in pairs:
            memory.link(krefs[new], krefs[old], "SUPERSEDES")
        clock.advance(days=200)
        build_s = time.perf_counter() - started
        del records
        emit("built", build_s=round(build_s, 2), api=api, records=size, links=len(pairs), planted=planted,
             rss_after_build_mb=peak_rss_mb())
        last = [0.0]
        dream_started = time.perf_counter()

        def progress(done: int, total: int) -> None:
            now = time.perf_counter()
            if now - last[0] >= 2 or done == total:
                last[0] = now
                emit("progress", done=done, total=total, elapsed_s=round(now - dream_started, 1))

        result = km.DreamState(memory, dry_run=True, max_deprecation_ratio=args.ratio, batch_size=args.batch_size,
                               progress=progress).run_sync()
        dream_s = time.perf_counter() - dream_started
        findings: dict = {}
        for action in result["actions"]:
            name = action["action"]
            if name in ("deprecate", "kept"):
                detail = action.get("category", "?") if name == "deprecate" else \
                    f"{action.get('category', '?')}/{action.get('guard', '?')}"
                findings.setdefault(name, {})[detail] = findings.setdefault(name, {}).get(detail, 0) + 1
            else:
                findings[name] = findings.get(name, 0) + 1
        memories = len(memory.items())
        memory.close()
    emit("result", dream_s=round(dream_s, 3), memories_per_s=round(result["events_processed"] / dream_s, 1),
         items=memories, events_processed=result["events_processed"],
         revisions_assessed=result["revisions_assessed"], deprecations_proposed=result["deprecations_proposed"],
         would_deprecate=result["deprecated"], guarded_skips=result["guarded_skips"],
         errors=len(result["errors"]), findings=findings, peak_rss_mb=peak_rss_mb())


def _reader(stream, lines: "queue.Queue") -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def run_scale_child(size: int, args: argparse.Namespace) -> dict:
    """Run one N in a subprocess; kill it when the build or the dry run passes --budget-s."""
    command = [sys.executable, os.path.abspath(__file__), "--scale-child", str(size), "--seed", str(args.seed),
               "--ratio", str(args.ratio), "--batch-size", str(args.batch_size)] + (["--disk"] if args.disk else [])
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(child.stdout, lines), daemon=True).start()
    entry: dict = {}
    phase, deadline = "build", time.perf_counter() + args.budget_s
    while True:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.perf_counter()))
        except queue.Empty:
            line = ""
        if line is None:
            break
        if line.startswith("{"):
            message = json.loads(line)
            kind = message.pop("phase")
            if kind == "built":
                entry.update(message)
                phase, deadline = "dream", time.perf_counter() + args.budget_s
                print(f"N={size}: built in {message['build_s']} s ({message['api']}); dry run...", file=sys.stderr,
                      flush=True)
            elif kind == "progress":
                entry["progress"] = message
            elif kind == "result":
                entry.update(message)
        if time.perf_counter() >= deadline and "dream_s" not in entry:
            child.kill()                          # our own child, by its pid
            child.wait()
            where = entry.get("progress")
            entry["did_not_finish"] = (f"did not finish within {args.budget_s:.0f} s" +
                                       (" (the build)" if phase == "build" else "") +
                                       (f"; batch {where['done']} of {where['total']} after {where['elapsed_s']} s"
                                        if where and phase == "dream" else ""))
            break
    if child.poll() is None:
        child.wait()
    if "dream_s" not in entry and "did_not_finish" not in entry:
        entry["error"] = f"child exited {child.returncode} without a result (see stderr)"
    entry["child_wall_s"] = round(time.perf_counter() - started, 1)
    print(f"N={size}: " + (f"dry run {entry['dream_s']} s" if "dream_s" in entry else
                           entry.get("did_not_finish") or entry["error"]), file=sys.stderr, flush=True)
    return entry


def growth(by_size: dict, budget_s: float) -> tuple[dict, dict]:
    """Time ratios between every pair of sizes (a lower bound when the larger did not finish)."""
    sizes = sorted(by_size)
    pairs, fourfold = {}, {}
    for index, small in enumerate(sizes):
        for large in sizes[index + 1:]:
            low, high = by_size[small].get("dream_s"), by_size[large].get("dream_s")
            if not low:
                continue
            size_ratio = large / small
            if high:
                row = {"size_ratio": round(size_ratio, 2), "time_ratio": round(high / low, 2),
                       "exponent": round(math.log(high / low) / math.log(size_ratio), 2) if high > low else 0.0}
            elif "did_not_finish" in by_size[large]:
                row = {"size_ratio": round(size_ratio, 2), "time_ratio": f">= {budget_s / low:.1f}",
                       "exponent": f">= {math.log(budget_s / low) / math.log(size_ratio):.2f}"}
            else:
                continue
            pairs[f"{large}/{small}"] = row
            if large == 4 * small:
                fourfold[f"{large}/{small}"] = row["time_ratio"]
    return pairs, fourfold


def scale_main(args: argparse.Namespace) -> None:
    sizes = sorted({int(size) for size in args.scale.split(",") if size.strip()})
    if not sizes or sizes[0] < 10:
        raise SystemExit("--scale takes sizes of at least 10 memories, e.g. 2500,10000,40000")
    started = time.perf_counter()
    by_size = {size: run_scale_child(size, args) for size in sizes}
    pairs, fourfold = growth(by_size, args.budget_s)
    figures = {"by_size": {str(size): entry for size, entry in by_size.items()}, "growth": pairs,
               "growth_4x": fourfold, "elapsed_s": round(time.perf_counter() - started, 1)}
    rows = [("N", "dry run s   build s   peak RSS MB   proposed   would deprecate   by category")]
    for size, entry in by_size.items():
        if "dream_s" in entry:
            categories = ", ".join(f"{name} {count}"
                                   for name, count in sorted(entry["findings"].get("deprecate", {}).items()))
            rows.append((f"  {size:,}", f"{entry['dream_s']:>9}   {entry['build_s']:>7}   {entry['peak_rss_mb']:>11}   "
                                        f"{entry['deprecations_proposed']:>8}   {entry['would_deprecate']:>15}   "
                                        f"{categories}"))
        else:
            rows.append((f"  {size:,}", entry.get("did_not_finish") or entry.get("error")))
    for key, row in pairs.items():
        rows.append((f"  time ratio {key}", f"{row['time_ratio']} (exponent {row['exponent']})"))
    print_table(rows)
    for size, entry in by_size.items():
        if "planted" in entry:
            print(f"N={size:,} planted: " + ", ".join(f"{name} {count}" for name, count in entry["planted"].items()))
    parameters = {key: value for key, value in vars(args).items() if key in
                  ("scale", "budget_s", "seed", "disk", "ratio", "batch_size")}
    parameters["remember_many"] = hasattr(km.Memory, "remember_many")
    print("wrote", write_results("dream_state_scale", parameters, figures, args.out))



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
    parser.add_argument("--scale", help="scaling mode: sizes, e.g. 2500,10000,40000 (see the docstring)")
    parser.add_argument("--budget-s", type=float, default=600.0, help="scaling mode: seconds per size's dry run")
    parser.add_argument("--out", help="scaling mode: results file (default probes/results/dream_state_scale.json)")
    parser.add_argument("--scale-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scale_child:
        scale_child(args.scale_child, args)
        return
    if args.scale:
        scale_main(args)
        return
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
