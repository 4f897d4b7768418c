"""Query parsing, FTS5 escaping, dates and scoring: pure functions, the spec's test tables."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moss_files.foundation.errors import InvalidRequest
from moss_files.index.query import (
    Filter,
    ParsedQuery,
    Scored,
    apply_recency_boost,
    date_bounds,
    exclusion_expression,
    fts_expression,
    normalize_date,
    normalize_scores,
    parse_query,
    porter_stem,
    quote_fts,
    recency_multiplier,
    score_items,
    term_alternatives,
    term_frequency_score,
)

NOW = datetime(2026, 3, 15, 12, 0, tzinfo=UTC)


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("auth token", ParsedQuery(terms=("auth", "token"))),
        ('"token refresh"', ParsedQuery(phrases=("token refresh",))),
        ('"unclosed phrase', ParsedQuery(phrases=("unclosed phrase",))),
        ("auth -legacy", ParsedQuery(terms=("auth",), exclusions=("legacy",))),
        ('auth -"old api"', ParsedQuery(terms=("auth",), exclusions=("old api",))),
        ("type:process", ParsedQuery(filters=(Filter("type", ("process",)),))),
        ("kind:insight,message", ParsedQuery(filters=(Filter("kind", ("insight", "message")),))),
        ("-status:done lock", ParsedQuery(terms=("lock",), filters=(Filter("status", ("done",), True),))),
        ("Tag:Cache", ParsedQuery(filters=(Filter("tag", ("cache",)),))),
        ("tags:a since:2026-01", ParsedQuery(filters=(Filter("tag", ("a",)), Filter("after", ("2026-01",))))),
        ('tag:"two words"', ParsedQuery(filters=(Filter("tag", ("two words",)),))),
        ("title:parser", ParsedQuery(title_terms=("parser",))),
        ("http://example.com/x", ParsedQuery(terms=("http://example.com/x",))),
        ("note: remember", ParsedQuery(terms=("note:", "remember"))),
        ("deploy* dep", ParsedQuery(terms=("deploy", "dep"))),
        ("NOT legacy OR api AND x", ParsedQuery(terms=("api", "x"), exclusions=("legacy",))),
        ("*** --", ParsedQuery(ignored=("-",))),
        ("Auth AUTH auth", ParsedQuery(terms=("Auth",))),
        ("\u201csmart quotes\u201d", ParsedQuery(phrases=("smart quotes",))),
        ("", ParsedQuery()),
    ],
)
def test_parse_query(text: str, expected: ParsedQuery) -> None:
    assert parse_query(text) == expected


def test_parsed_query_spec_shape() -> None:
    parsed = parse_query('auth "a b" -c type:process -status:x')
    assert parsed.terms == ("auth",)
    assert parsed.phrases == ("a b",)
    assert parsed.exclusions == ("c",)
    assert parsed.field_filters == {"type": "process"}


def test_date_filter_values_are_checked() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_query("after:someday")
    assert caught.value.code == "INVALID_REQUEST"
    assert caught.value.details == {"field": "after", "value": "someday"}


# --------------------------------------------------------------------------- FTS5 expressions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("auth", '"auth"*'),
        ("auth token", '("auth"* OR "token"*)'),
        ('"a b" -c', '"a b" NOT "c"'),
        ('x"y', '"x""y"*'),
        ("title:parse lock", '"lock"* AND title : ("parse"* OR "pars"*)'),
        ("-only", None),
        ("kind:insight", None),
    ],
)
def test_fts_expression(text: str, expected: str | None) -> None:
    assert fts_expression(parse_query(text)) == expected


# Porter's own examples (M.F. Porter, "An algorithm for suffix stripping", 1980), as words
# and the stems the whole algorithm gives them.
PORTER = {
    "caresses": "caress", "ponies": "poni", "ties": "ti", "caress": "caress", "cats": "cat",
    "feed": "feed", "agreed": "agre", "disabled": "disabl", "matting": "mat", "mating": "mate",
    "meeting": "meet", "milling": "mill", "messing": "mess", "meetings": "meet", "happy": "happi",
    "sky": "sky", "relational": "relat", "conditional": "condit", "rational": "ration",
    "valency": "valenc", "hesitancy": "hesit", "digitizer": "digit", "conformably": "conform",
    "radically": "radic", "differently": "differ", "vilely": "vile", "analogously": "analog",
    "vietnamization": "vietnam", "predication": "predic", "operator": "oper", "feudalism": "feudal",
    "decisiveness": "decis", "hopefulness": "hope", "callousness": "callous", "formality": "formal",
    "sensitivity": "sensit", "sensibility": "sensibl", "triplicate": "triplic", "formative": "form",
    "formalize": "formal", "electricity": "electr", "electrical": "electr", "hopeful": "hope",
    "goodness": "good", "revival": "reviv", "allowance": "allow", "inference": "infer",
    "airliner": "airlin", "gyroscopic": "gyroscop", "adjustable": "adjust", "defensible": "defens",
    "irritant": "irrit", "replacement": "replac", "adjustment": "adjust", "dependent": "depend",
    "adoption": "adopt", "homologous": "homolog", "communism": "commun", "activate": "activ",
    "angularity": "angular", "effective": "effect", "bowdlerize": "bowdler", "probate": "probat",
    "rate": "rate", "cease": "ceas", "controlling": "control", "rolling": "roll",
    "generalizations": "gener", "oscillators": "oscil", "tokens": "token", "refreshed": "refresh",
}  # fmt: skip


@pytest.mark.parametrize(("word", "stem"), sorted(PORTER.items()))
def test_porter_stems(word: str, stem: str) -> None:
    assert porter_stem(word) == stem


@pytest.mark.parametrize(
    ("term", "alternatives"),
    [
        ("tokens", ("tokens", "token")),  # the stem, matched as a prefix: token, tokens, tokenizer
        ("refreshed", ("refreshed", "refresh")),
        ("token", ("token",)),  # a stem already: its prefix matches its other forms
        ("happiness", ("happiness", "happi", "happy")),  # Porter's -i stands for a -y too
        ("hoping", ("hoping", "hop")),  # hoping stems to hope; hop* also finds hoped and hopes
        ("used", ("used", "use")),  # 'us' would be too short a prefix: the stem keeps its e
        ("dep", ("dep",)),  # short words and prefixes are left as typed
        ("INS-1", ("INS-1",)),  # ids and other non-words too
        ("café", ("café",)),
    ],
)
def test_term_alternatives(term: str, alternatives: tuple[str, ...]) -> None:
    assert term_alternatives(term) == alternatives


def test_terms_match_their_stem_too_and_stay_prefixes() -> None:
    assert fts_expression(parse_query("tokens")) == '("tokens"* OR "token"*)'
    assert fts_expression(parse_query("tokens dep"), match_all=True) == '(("tokens"* OR "token"*) AND "dep"*)'
    assert fts_expression(parse_query("title:tokens")) == 'title : ("tokens"* OR "token"*)'
    assert fts_expression(parse_query('"tokens expire" -tokens')) == '"tokens expire" NOT "tokens"'  # phrases and exclusions as written


def test_match_all_joins_terms_with_and() -> None:
    assert fts_expression(parse_query("a b"), match_all=True) == '("a"* AND "b"*)'


def test_exclusion_expression_for_queries_without_positive_text() -> None:
    assert exclusion_expression(parse_query('-a -"b c"')) == '"a" OR "b c"'
    assert exclusion_expression(parse_query("a")) is None


def test_quote_fts_doubles_quotes() -> None:
    assert quote_fts('say "hi"') == '"say ""hi"""'


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(id, title, tags, body, extra, tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3')")
    conn.execute("INSERT INTO t VALUES ('INS-1', 'Token refresh', 'auth', 'the body: NOT a (query) \"quoted\" café', '')")
    yield conn
    conn.close()


@given(st.text(max_size=60))
def test_no_user_text_raises_an_fts5_error(fts: sqlite3.Connection, text: str) -> None:
    try:
        parsed = parse_query(text)
    except InvalidRequest:
        return  # a malformed date filter: reported as a bad request before FTS5 sees anything
    for expression in (fts_expression(parsed), fts_expression(parsed, match_all=True), exclusion_expression(parsed)):
        if expression is not None:
            fts.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expression,)).fetchone()


@given(st.lists(st.sampled_from(['"', "-", "*", "(", ")", ":", "^", "NOT", "OR", "AND", "NEAR", "{", "}", "+", "title:", "a", "é", " "]), max_size=12))
def test_fts5_syntax_characters_are_always_escaped(fts: sqlite3.Connection, pieces: list[str]) -> None:
    test_no_user_text_raises_an_fts5_error.hypothesis.inner_test(fts, "".join(pieces))  # type: ignore[attr-defined]


def test_escaped_text_still_matches(fts: sqlite3.Connection) -> None:
    for text in ("(query)", '"quoted"', "NOT", "cafe", "tok", "title:token", "tokens", "refreshing", "title:tokens", "bodies"):
        expression = fts_expression(parse_query(text))
        assert fts.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expression,)).fetchone()[0] == 1, text


# --------------------------------------------------------------------------- dates


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-21T10:00:00Z", "2026-01-21T10:00:00Z"),
        ("2026-01-21T10:00:00.123Z", "2026-01-21T10:00:00Z"),
        ("2026-01-21T12:00:00+02:00", "2026-01-21T10:00:00Z"),
        ("2026-01-21 10:00", "2026-01-21T10:00:00Z"),
        ("2026-01-21", "2026-01-21"),
        (datetime(2026, 1, 21, 10, tzinfo=UTC), "2026-01-21T10:00:00Z"),
        ("2026-02-30", None),
        ("yesterday", None),
        (None, None),
        (42, None),
    ],
)
def test_normalize_date(value: object, expected: str | None) -> None:
    assert normalize_date(value) == expected


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (Filter("after", ("2026-01-10",)), [("2026-01-10", None)]),
        (Filter("before", ("2026-01",)), [(None, "2026-01-01")]),
        (Filter("date", ("2026-02",)), [("2026-02-01", "2026-03-01")]),
        (Filter("date", ("2026-12",)), [("2026-12-01", "2027-01-01")]),
        (Filter("date", ("2026",)), [("2026-01-01", "2027-01-01")]),
        (Filter("date", ("today",)), [("2026-03-15", "2026-03-16")]),
        (Filter("after", ("7d",)), [("2026-03-08T12:00:00Z", None)]),
        (Filter("after", ("12h", "2w")), [("2026-03-15T00:00:00Z", None), ("2026-03-01T12:00:00Z", None)]),
        (Filter("before", ("2026-03-01T08:00:00Z",)), [(None, "2026-03-01T08:00:00Z")]),
        # through: the end of LoopFlow's dateRange, inclusive: the whole day or month, the moment itself.
        (Filter("through", ("2026-01-21",)), [(None, "2026-01-22")]),
        (Filter("through", ("2026-12",)), [(None, "2027-01-01")]),
        (Filter("through", ("2026-03-01T08:00:00Z",)), [(None, "2026-03-01T08:00:01Z")]),
        (Filter("through", ("7d",)), [(None, "2026-03-08T12:00:01Z")]),
    ],
)
def test_date_bounds(flt: Filter, expected: list[tuple[str | None, str | None]]) -> None:
    assert date_bounds(flt, NOW) == expected


# --------------------------------------------------------------------------- scoring (spec table)

ITEMS = [
    {"id": "a", "title": "Token refresh", "body": "Refresh the token before expiry.", "date": "2026-03-14"},
    {"id": "b", "title": "Cache layout", "body": "The cache keeps one token per user.", "date": "2025-01-01"},
    {"id": "c", "title": "Router", "body": "Routes outbox messages.", "date": "2026-03-14"},
]


def _scores(results: list[Scored]) -> dict[str, float]:
    return {scored.item["id"]: scored.score for scored in results}


def test_single_term_matches_score_above_zero() -> None:
    assert _scores(score_items(ITEMS, "router", ["title", "body"]))["c"] > 0


def test_multiple_term_matches_score_higher() -> None:
    scores = _scores(score_items(ITEMS, "token cache", ["title", "body"]))
    assert scores["b"] > scores["a"] > 0


def test_exact_phrase_match_scores_highest() -> None:
    scores = _scores(score_items(ITEMS, 'token "token refresh"', ["title", "body"]))
    assert scores["a"] == 1.0
    assert scores["b"] == 0.0  # the phrase is required


def test_non_matching_items_score_zero() -> None:
    assert _scores(score_items(ITEMS, "router", ["title", "body"]))["a"] == 0.0


def test_exclusions_score_zero() -> None:
    scores = _scores(score_items(ITEMS, "token -cache", ["title", "body"]))
    assert scores["b"] == 0.0 and scores["a"] > 0


def test_field_weights_affect_scores_proportionally() -> None:
    # a: "token" once in the title and once in the body; b: once in the body.
    plain = _scores(score_items(ITEMS, "token", ["title", "body"]))
    weighted = _scores(score_items(ITEMS, "token", ["title", "body"], field_weights={"title": 10.0}))
    assert plain == {"a": 1.0, "b": pytest.approx(1 / 2), "c": 0.0}
    assert weighted == {"a": 1.0, "b": pytest.approx(1 / 11), "c": 0.0}


def test_recency_boost_increases_recent_item_scores() -> None:
    same = [{"id": "old", "title": "x", "date": "2025-01-01"}, {"id": "new", "title": "x", "date": "2026-03-14"}]
    results = score_items(same, "x", ["title"], reference_date=NOW)
    assert [scored.item["id"] for scored in results] == ["new", "old"]
    assert _scores(results) == {"new": 1.0, "old": pytest.approx(1 / recency_multiplier(1.5))}


@pytest.mark.parametrize(("age", "expected"), [(0, 1.2), (15, 1.1), (30, 1.0), (45, 1.0), (-3, 1.2), (None, 1.0)])
def test_recency_boost_decays_linearly_over_thirty_days(age: float | None, expected: float) -> None:
    assert recency_multiplier(age) == pytest.approx(expected)


def test_apply_recency_boost() -> None:
    assert apply_recency_boost(10.0, "2026-03-15T12:00:00Z", NOW) == pytest.approx(12.0)
    assert apply_recency_boost(10.0, "2026-02-28T12:00:00Z", NOW) == pytest.approx(11.0)
    assert apply_recency_boost(10.0, "not a date", NOW) == 10.0


def test_scores_are_normalized_to_zero_one() -> None:
    results = score_items(ITEMS, "token", ["title", "body"])
    assert max(s.score for s in results) == 1.0
    assert all(0.0 <= s.score <= 1.0 for s in results)
    assert normalize_scores([Scored("x", 0.0)]) == [Scored("x", 0.0)]


def test_empty_query_returns_all_items_with_score_zero() -> None:
    results = score_items(ITEMS, "", ["title", "body"])
    assert len(results) == 3 and all(s.score == 0.0 for s in results)


def test_matching_is_case_insensitive() -> None:
    assert _scores(score_items(ITEMS, "ROUTER", ["title"]))["c"] == 1.0


def test_term_frequency_score() -> None:
    assert term_frequency_score("a token, tokens and a Token", ["token"]) > term_frequency_score("one token", ["token"]) > 0
    assert term_frequency_score("nothing here", ["token"]) == 0.0
    assert term_frequency_score("", ["token"]) == 0.0
