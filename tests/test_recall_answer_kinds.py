"""Answer kinds (issue 18): a question asks for a kind of answer as well as a topic. A short memory that says when
something happens, names a place or gives a number is also indexed under the question word that asks for it
("when", "where", "how": stopwords, never written as terms), and a question that asks for that kind searches the
word, so among memories on the same topic the one that answers the question comes first. The texts here were
written for these tests, not taken from the benchmarks."""

from __future__ import annotations

import pytest

import kumiho_memory as km


@pytest.mark.parametrize("text, kinds", [
    ("We flew back from the coast last Friday.", ["when", "where"]),
    ("The recital is in March 2024.", ["when"]),
    ("I keep three tanks of guppies.", ["how"]),
    ("We had dinner at the harbour restaurant.", ["where"]),
    ("Thanks, that was lovely.", []),
])
def test_what_kind_of_answer_a_text_says(text, kinds):
    assert km.answer_kinds(text) == kinds


def test_a_short_memory_is_indexed_under_the_question_words_it_answers():
    text = "We flew back from the coast last Friday."
    implied = km.implied_terms(text, dict.fromkeys(km.tokenize(text)))
    assert implied["when"] == km.IMPLIED_WEIGHT and implied["where"] == km.IMPLIED_WEIGHT
    assert not {"when", "where", "how"} & set(km.tokenize(text))         # stopwords: no written word collides
    long_text = "We flew back last Friday. " + "The coast was grey and the sea was cold. " * 20
    assert "when" not in km.implied_terms(long_text, dict.fromkeys(km.tokenize(long_text)))


@pytest.mark.parametrize("query, kinds", [
    ("When did Ann take the pottery class?", ["when"]),
    ("How long ago did Ann start the pottery class?", ["when"]),
    ("How many days passed between the class and the fair?", ["when"]),
    ("Which came first, the class or the fair?", ["when"]),
    ("Where did Ann take the pottery class?", ["where"]),
    ("How many pottery classes has Ann taken?", ["how"]),
    ("What did Ann make in the pottery class?", []),
])
def test_what_kind_of_answer_a_question_asks_for(query, kinds):
    expansions = km.query_expansions(query)
    assert [kind for kind in km.ANSWER_KINDS if kind in expansions] == kinds


@pytest.mark.parametrize("query, answer", [
    ("When did Ann go to her pottery class?", "Ann: I went to my pottery class last Tuesday."),
    ("Where did Ann go to her pottery class?", "Ann: I go to my pottery class at the studio in Hove."),
    ("How many pottery classes did Ann go to?", "Ann: I went to six pottery classes."),
])
def test_the_memory_that_answers_the_kind_comes_first(query, answer):
    others = ["Ann: I love my pottery class, I went again and again.",
              "Ann: My pottery class is such fun, I go whenever I can.",
              "Ann: The pottery class teacher said I went too fast."]
    with km.Memory() as memory:
        for text in [*others, answer]:
            memory.remember(text, space="chat", kind="message", metadata={"speaker": "Ann"})
        assert memory.recall(query, space="chat", limit=1)[0]["content"] == answer
