"""Search queries and relevance: parsing, FTS5 escaping, dates, scoring. Core layer: pure
functions (stdlib only; the clock comes in as `now`). Must not import sqlite3.

Query syntax (whitespace separates parts; every piece of user text is quoted for FTS5, so no
query can raise an FTS5 syntax error):

    auth token          terms: any may match (all must, with match="all"); prefix-matched,
                        as typed and as their stem (`tokens` matches token, tokenizer)
    "token refresh"     a phrase: must appear as written (word order, adjacent)
    -legacy  -"old api" exclusions: items containing them are dropped
    kind:insight        field filters; `a,b` or a repeated field means either value;
    -status:done        a leading `-` negates a filter
    title:parser        a term that must appear in the title
    after:2026-01-01    dates: after/since (on or after), before/until (strictly before),
    before:7d  date:2026-01   date/on (within that year, month, day); `7d`, `2w`, `12h`,
                        `today` and `yesterday` count back from now

`OR` and `AND` in capitals are ignored (terms are alternatives by default) and `NOT x` is
`-x`. A `word:value` whose word is not a known field is searched as text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Generic, NamedTuple, TypeVar

from moss_files.foundation.errors import InvalidRequest

T = TypeVar("T")

# Filters answered from the index's columns and facets. `title` restricts a term to titles.
FIELDS = (
    "kind", "status", "tag", "type", "workspace", "from", "to", "thread", "id", "priority",
    "name", "task", "session", "agent", "box", "outcome", "role", "phase", "section", "link",
    "title", "after", "before", "through", "date",
)  # fmt: skip
ALIASES = {"tags": "tag", "since": "after", "until": "before", "on": "date", "in": "kind"}
DATE_FIELDS = frozenset({"after", "before", "through", "date"})
TEXT_FIELDS = frozenset({"title"})

RECENCY_DAYS = 30
RECENCY_MAX_BOOST = 0.2
# bm25 column weights of the index, in its column order: title well above body.
FIELD_WEIGHTS: Mapping[str, float] = {"id": 3.0, "title": 8.0, "tags": 4.0, "body": 1.0, "extra": 2.0}

_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"'})
_PART = re.compile(
    r"""(?P<neg>-(?=\S))?
        (?:
            (?P<field>[A-Za-z_]+):(?:"(?P<fquoted>[^"]*)"?|(?P<fvalue>[^\s"]+))
          | "(?P<phrase>[^"]*)"?
          | (?P<word>\S+)
        )""",
    re.VERBOSE,
)
_WORDISH = re.compile(r"\w")
_RELATIVE = re.compile(r"^(?P<count>\d{1,5})(?P<unit>[hdw])$")
_PERIOD = re.compile(r"^(?P<y>\d{4})(?:-(?P<m>\d{2})(?:-(?P<d>\d{2}))?)?$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_NORMAL_MOMENT = re.compile(r"^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\dZ$")


class Filter(NamedTuple):
    """`field:value[,value]`: the item's field must equal one of the values (or none, if negated).

    Values are casefolded, except for dates, which are kept as written until `date_bounds`.
    """

    field: str
    values: tuple[str, ...]
    negated: bool = False


class ParsedQuery(NamedTuple):
    """A query split into its parts (the spec's ParsedQuery, with filters that can repeat)."""

    terms: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    exclusions: tuple[str, ...] = ()
    filters: tuple[Filter, ...] = ()
    title_terms: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()  # parts that cannot match anything (punctuation only)

    @property
    def field_filters(self) -> dict[str, str]:
        """`{field: value}` for each non-negated filter (the spec's shape; the last one wins)."""
        return {f.field: ",".join(f.values) for f in self.filters if not f.negated}

    @property
    def has_text(self) -> bool:
        """Whether any part must match text (terms, phrases or title terms)."""
        return bool(self.terms or self.phrases or self.title_terms)

    @property
    def is_empty(self) -> bool:
        return not (self.has_text or self.exclusions or self.filters)


def parse_query(text: str, fields: Sequence[str] = FIELDS) -> ParsedQuery:
    """Split a query into terms, phrases, exclusions and field filters.

    Raises InvalidRequest when a date filter's value is not a date.
    """
    known = {name.lower() for name in fields}
    terms: list[str] = []
    phrases: list[str] = []
    exclusions: list[str] = []
    filters: list[Filter] = []
    title_terms: list[str] = []
    ignored: list[str] = []
    negate_next = False
    # FTS5 reads a query as a C string: a NUL would end it inside a quoted token.
    for match in _PART.finditer(text.replace("\0", " ").translate(_QUOTES)):
        negated = bool(match.group("neg")) or negate_next
        negate_next = False
        name = match.group("field")
        if name is not None:
            key = ALIASES.get(name.lower(), name.lower())
            value = match.group("fquoted") if match.group("fquoted") is not None else match.group("fvalue")
            if key in known and value is not None and value.strip():
                if key in TEXT_FIELDS:
                    words = [w for w in _words(value) if _WORDISH.search(w)]
                    (exclusions if negated else title_terms).extend(words)
                    continue
                values = tuple(_filter_values(key, value))
                if values:
                    filters.append(Filter(key, values, negated))
                    continue
            # Not a field we know (a URL, `note:` in prose): search the whole part as text.
            word = match.group(0)[1:] if match.group("neg") else match.group(0)
            _add_word(word.replace('"', " ").strip(), negated, terms, exclusions, ignored)
            continue
        phrase = match.group("phrase")
        if phrase is not None:
            phrase = " ".join(phrase.split())
            if not _WORDISH.search(phrase):
                if phrase:
                    ignored.append(phrase)
                continue
            (exclusions if negated else phrases).append(phrase)
            continue
        word = match.group("word")
        if word == "NOT" and not negated:
            negate_next = True
            continue
        if word in ("OR", "AND") and not negated:
            continue
        _add_word(word, negated, terms, exclusions, ignored)
    if negate_next:
        terms.append("NOT")  # a NOT with nothing after it is just a word
    return ParsedQuery(
        terms=tuple(_unique(terms)),
        phrases=tuple(_unique(phrases)),
        exclusions=tuple(_unique(exclusions)),
        filters=tuple(filters),
        title_terms=tuple(_unique(title_terms)),
        ignored=tuple(ignored),
    )


def filters_from(mapping: Mapping[str, Sequence[str] | str]) -> tuple[Filter, ...]:
    """Field filters given as data (`{"type": ["process"], "after": "2026-01"}`), as the query
    text would give them. Raises InvalidRequest for an unknown field or a bad date."""
    out: list[Filter] = []
    for name, raw in mapping.items():
        key = ALIASES.get(name.lower(), name.lower())
        if key not in FIELDS or key in TEXT_FIELDS:
            raise InvalidRequest(
                f"unknown filter field {name!r}", details={"field": name}, hint=f"fields: {', '.join(f for f in FIELDS if f not in TEXT_FIELDS)}"
            )
        values = tuple(_filter_values(key, raw if isinstance(raw, str) else ",".join(raw)))
        if values:
            out.append(Filter(key, values))
    return tuple(out)


def _words(text: str) -> list[str]:
    return [part.rstrip("*") for part in text.split() if part.rstrip("*")]


def _add_word(word: str, negated: bool, terms: list[str], exclusions: list[str], ignored: list[str]) -> None:
    word = word.rstrip("*")
    if not word:
        return
    if not _WORDISH.search(word):
        ignored.append(word)
        return
    (exclusions if negated else terms).append(word)


def _filter_values(key: str, raw: str) -> list[str]:
    values = [part.strip() for part in raw.split(",") if part.strip()]
    if key in DATE_FIELDS:
        for value in values:
            _check_date_value(key, value)
        return values
    return [value.casefold() for value in values]


def _unique(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        if item.casefold() not in seen:
            seen.add(item.casefold())
            out.append(item)
    return out


# --------------------------------------------------------------------------- FTS5 expressions


def quote_fts(text: str) -> str:
    """`text` as an FTS5 string: inside double quotes, quotes doubled. FTS5 reads it as a phrase
    of the tokens in it and never as syntax."""
    return '"' + text.replace('"', '""') + '"'


def fts_expression(query: ParsedQuery, *, match_all: bool = False) -> str | None:
    """The FTS5 MATCH expression for the query's text parts; None when it has none.

    Terms are prefix matches of the word as typed or of its stem (`term_alternatives`), joined
    with OR (AND with `match_all`); phrases and title terms are required; exclusions follow as
    NOT. Column names used: `title`.
    """
    parts: list[str] = []
    if query.terms:
        alternatives = [_term_expression(term) for term in query.terms]
        joined = (" AND " if match_all else " OR ").join(alternatives)
        parts.append(f"({joined})" if len(alternatives) > 1 else joined)
    parts.extend(quote_fts(phrase) for phrase in query.phrases)
    parts.extend(f"title : {_term_expression(term)}" for term in query.title_terms)
    if not parts:
        return None
    expression = " AND ".join(parts)
    for excluded in query.exclusions:
        expression += f" NOT {quote_fts(excluded)}"
    return expression


def _term_expression(term: str) -> str:
    forms = [quote_fts(form) + "*" for form in term_alternatives(term)]
    return f"({' OR '.join(forms)})" if len(forms) > 1 else forms[0]


# --------------------------------------------------------------------------- stemming
#
# A term matches the words it is a prefix of (`dep` finds `deploy`) and, through its stem, the
# other forms of its word (`tokens` finds `token`). The stem is taken at query time and used as
# a prefix too, so the index keeps the words as written: an index of stems (FTS5's porter
# tokenizer) would lose prefixes cut inside a suffix (`deployme` no longer finds
# `deployment`, whose stem is `deploy`).

_STEP2 = {
    "ational": "ate", "tional": "tion", "enci": "ence", "anci": "ance", "izer": "ize", "abli": "able",
    "alli": "al", "entli": "ent", "eli": "e", "ousli": "ous", "ization": "ize", "ation": "ate",
    "ator": "ate", "alism": "al", "iveness": "ive", "fulness": "ful", "ousness": "ous", "aliti": "al",
    "iviti": "ive", "biliti": "ble",
}  # fmt: skip
_STEP3 = {"icate": "ic", "ative": "", "alize": "al", "iciti": "ic", "ical": "ic", "ful": "", "ness": ""}
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip
MIN_STEM_PREFIX = 3  # a shorter stem, used as a prefix, would match too many words


def _consonant(word: str, index: int) -> bool:
    letter = word[index]
    if letter in "aeiou":
        return False
    return letter != "y" or index == 0 or not _consonant(word, index - 1)


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in `stem`."""
    forms = "".join("c" if _consonant(stem, index) else "v" for index in range(len(stem)))
    return len(re.findall(r"v+c+", forms))


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, index) for index in range(len(stem)))


def _ends_cvc(stem: str) -> bool:
    n = len(stem)
    return n >= 3 and _consonant(stem, n - 3) and not _consonant(stem, n - 2) and _consonant(stem, n - 1) and stem[-1] not in "wxy"


def _ends_double(stem: str) -> bool:
    return len(stem) >= 2 and stem[-1] == stem[-2] and _consonant(stem, len(stem) - 1)


def _replace(word: str, suffixes: Mapping[str, str] | Sequence[str], minimum: int) -> str:
    """Porter's steps 2-4: the longest suffix the word ends with is replaced when the stem before
    it measures more than `minimum`; shorter suffixes are not tried."""
    for suffix in sorted(suffixes, key=len, reverse=True):
        if word.endswith(suffix):
            stem = word[: -len(suffix)]
            if _measure(stem) > minimum and (suffix != "ion" or stem.endswith(("s", "t"))):
                return stem + (suffixes[suffix] if isinstance(suffixes, Mapping) else "")
            return word
    return word


def porter_stem(word: str) -> str:
    """The stem of an English word by Porter's algorithm (1980; the stemmer of FTS5's porter
    tokenizer): `tokens` -> `token`, `generalizations` -> `gener`. `word` in lower case."""
    if len(word) <= 2:
        return word
    # Step 1a: plurals.
    if word.endswith("sses") or word.endswith("ies"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    # Step 1b: -eed, -ed, -ing.
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
                word = word[: -len(suffix)]
                if word.endswith(("at", "bl", "iz")):
                    word += "e"
                elif _ends_double(word) and word[-1] not in "lsz":
                    word = word[:-1]
                elif _measure(word) == 1 and _ends_cvc(word):
                    word += "e"
                break
    # Step 1c: a final y after a vowel is i.
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    word = _replace(word, _STEP2, 0)
    word = _replace(word, _STEP3, 0)
    word = _replace(word, _STEP4, 1)
    # Step 5: a final e, a double l.
    if word.endswith("e"):
        measure = _measure(word[:-1])
        if measure > 1 or (measure == 1 and not _ends_cvc(word[:-1])):
            word = word[:-1]
    if _measure(word) > 1 and _ends_double(word) and word.endswith("l"):
        word = word[:-1]
    return word


def term_alternatives(term: str) -> tuple[str, ...]:
    """The prefixes a search term matches: the term as typed, then its stem where that finds
    more (`tokens` -> `tokens`, `token`). Only words of ASCII letters are stemmed; a stem's
    final e is dropped (`hoping` -> `hop`, which also finds hoped) unless that leaves it shorter
    than MIN_STEM_PREFIX, where one is added instead (`used` -> `use`), and Porter's -i stands
    for a -y too (`happiness` -> `happi`, `happy`)."""
    word = term.casefold()
    if len(word) < MIN_STEM_PREFIX or not (word.isascii() and word.isalpha()):
        return (term,)
    stem = porter_stem(word)
    if len(stem) < MIN_STEM_PREFIX:
        stem += "e"  # `used` and `using` stem to `us`; `use` finds their forms, `us` every us- word
    forms = [stem[:-1] if stem.endswith("e") and len(stem) > MIN_STEM_PREFIX else stem]
    if stem.endswith("i"):
        forms.append(stem[:-1] + "y")
    found = [term]
    for form in forms:
        # A form the typed word is a prefix of finds nothing the word does not.
        if len(form) >= MIN_STEM_PREFIX and not form.startswith(word) and form not in found:
            found.append(form)
    return tuple(found)


def exclusion_expression(query: ParsedQuery) -> str | None:
    """An FTS5 expression matching any excluded text (for queries with nothing positive)."""
    if not query.exclusions:
        return None
    return " OR ".join(quote_fts(excluded) for excluded in query.exclusions)


# --------------------------------------------------------------------------- dates


def normalize_date(value: Any) -> str | None:
    """A date or time as the index stores it: `YYYY-MM-DDTHH:MM:SSZ` (UTC) for a moment,
    `YYYY-MM-DD` for a calendar day; None when `value` is not a date or time."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, date):
        return value.isoformat()
    if not isinstance(value, str):
        return None
    text = value.strip()
    if _NORMAL_MOMENT.match(text):
        return text  # already in the stored form (the common case; no need to parse)
    if len(text) == 10:
        try:
            return date.fromisoformat(text).isoformat()
        except ValueError:
            return None
    if not _DATETIME.match(text):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return normalize_date(moment)


def timestamp_of(value: str | None) -> float | None:
    """Seconds since the epoch of a normalized date (a day counts from its midnight, UTC)."""
    if not value:
        return None
    try:
        if len(value) == 10:
            return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _check_date_value(key: str, value: str) -> None:
    if period(value, datetime(2000, 1, 1, tzinfo=UTC)) is None:
        raise InvalidRequest(
            f"{key}:{value} is not a date",
            details={"field": key, "value": value},
            hint="use YYYY, YYYY-MM, YYYY-MM-DD, an RFC 3339 time, today, yesterday, or 7d / 2w / 12h",
        )


def period(value: str, now: datetime) -> tuple[str, str] | None:
    """`[start, end)` of the period `value` names, as normalized dates; None if not a date.
    A moment (an RFC 3339 time, or `7d` back from `now`) has start == end."""
    text = value.strip().lower()
    today = now.astimezone(UTC).date()
    if text in ("today", "yesterday"):
        day = today if text == "today" else today - timedelta(days=1)
        return day.isoformat(), (day + timedelta(days=1)).isoformat()
    relative = _RELATIVE.match(text)
    if relative:
        count = int(relative.group("count"))
        unit = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}[relative.group("unit")]
        moment = normalize_date(now - count * unit)
        return (moment, moment) if moment else None
    calendar = _PERIOD.match(text)
    if calendar:
        year = int(calendar.group("y"))
        try:
            if calendar.group("d"):
                day = date(year, int(calendar.group("m")), int(calendar.group("d")))
                return day.isoformat(), (day + timedelta(days=1)).isoformat()
            if calendar.group("m"):
                month = int(calendar.group("m"))
                start = date(year, month, 1)
                end = date(year + (month == 12), month % 12 + 1, 1)
                return start.isoformat(), end.isoformat()
            return date(year, 1, 1).isoformat(), date(year + 1, 1, 1).isoformat()
        except ValueError:
            return None
    moment = normalize_date(value.strip())
    return (moment, moment) if moment else None


def date_bounds(flt: Filter, now: datetime) -> list[tuple[str | None, str | None]]:
    """For a date filter, one `(lowest, below)` range per value: an item's date `d` passes when
    `lowest <= d` and `d < below` (None: unbounded). `after:X` starts at X, `before:X` ends at X,
    `through:X` ends after X (its whole day, month or year; a moment itself included: the
    `to` of LoopFlow's `dateRange`), `date:X` spans X's day, month or year."""
    ranges: list[tuple[str | None, str | None]] = []
    for value in flt.values:
        span = period(value, now)
        if span is None:
            raise InvalidRequest(f"{flt.field}:{value} is not a date", details={"field": flt.field, "value": value})
        start, end = span
        if flt.field == "after":
            ranges.append((start, None))
        elif flt.field == "before":
            ranges.append((None, start))
        elif flt.field == "through":
            moment = datetime.fromisoformat(start.replace("Z", "+00:00")) if end == start else None
            ranges.append((None, normalize_date(moment + timedelta(seconds=1)) if moment else end))
        else:
            ranges.append((start, end if end != start else None))
    return ranges


# --------------------------------------------------------------------------- scoring


def recency_multiplier(age_days: float | None, boost_days: float = RECENCY_DAYS, max_boost: float = RECENCY_MAX_BOOST) -> float:
    """1 + up to `max_boost` for an item `age_days` old: the full boost at age 0, decaying
    linearly to none at `boost_days`. Unknown ages get no boost; future dates get the full one."""
    if age_days is None or boost_days <= 0:
        return 1.0
    return 1.0 + max_boost * max(0.0, min(1.0, 1.0 - age_days / boost_days))


def apply_recency_boost(base_score: float, item_date: str | None, reference_date: str | datetime, boost_days: float = RECENCY_DAYS) -> float:
    """`base_score` raised by up to 20% for an item dated within `boost_days` of the reference."""
    item = timestamp_of(normalize_date(item_date)) if item_date else None
    reference = timestamp_of(normalize_date(reference_date))
    if item is None or reference is None:
        return base_score
    return base_score * recency_multiplier((reference - item) / 86400.0, boost_days)


class Scored(NamedTuple, Generic[T]):
    """An item with its relevance (0-1 after normalizing) and the fields that matched."""

    item: T
    score: float
    matched_fields: tuple[str, ...] = ()


_TOKEN = re.compile(r"\w+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


def term_frequency_score(text: str, terms: Sequence[str]) -> float:
    """How strongly `text` matches `terms`: the sum over terms of log(1 + occurrences), a term
    matching any word it starts (case-insensitive). 0 when nothing matches."""
    words = _tokens(text)
    if not words:
        return 0.0
    total = 0.0
    for term in terms:
        pieces = _tokens(term)
        if not pieces:
            continue
        if len(pieces) == 1:
            count = sum(1 for word in words if word.startswith(pieces[0]))
        else:
            count = _phrase_count(words, pieces)
        total += math.log1p(count)
    return total


def _phrase_count(words: list[str], pieces: list[str]) -> int:
    size = len(pieces)
    return sum(1 for start in range(len(words) - size + 1) if words[start : start + size] == pieces)


def _contains(text: str, phrase: str) -> bool:
    pieces = _tokens(phrase)
    return bool(pieces) and _phrase_count(_tokens(text), pieces) > 0


def score_items(
    items: Sequence[T],
    query: str | ParsedQuery,
    searchable_fields: Sequence[str],
    *,
    field_weights: Mapping[str, float] | None = None,
    reference_date: str | datetime | None = None,
    boost_days: float = RECENCY_DAYS,
    date_of: Callable[[T], str | None] | None = None,
    get: Callable[[T, str], Any] | None = None,
) -> list[Scored[T]]:
    """Score `items` (mappings, or anything `get(item, field)` reads) against a query, best first.

    Every item is returned: non-matching ones (and those containing an exclusion, or lacking a
    phrase) score 0, and an empty query scores everything 0. Scores are normalized to 0-1.
    A phrase found counts double a term. With `reference_date`, recent items get the recency
    boost (`date_of(item)` gives an item's date; default: its `date` field).
    """
    parsed = parse_query(query) if isinstance(query, str) else query
    weights = field_weights or {}
    read = get or (lambda item, name: item.get(name) if isinstance(item, Mapping) else getattr(item, name, None))
    dated = date_of or (lambda item: read(item, "date"))
    results: list[Scored[T]] = []
    for item in items:
        texts = {name: _as_text(read(item, name)) for name in searchable_fields}
        whole = " ".join(texts.values())
        if not parsed.has_text or any(_contains(whole, excluded) for excluded in parsed.exclusions):
            results.append(Scored(item, 0.0))
            continue
        if any(not _contains(whole, phrase) for phrase in parsed.phrases):
            results.append(Scored(item, 0.0))
            continue
        score = 0.0
        matched: list[str] = []
        for name, text in texts.items():
            weight = weights.get(name, 1.0)
            part = term_frequency_score(text, parsed.terms + parsed.title_terms)
            part += 2.0 * sum(1.0 for phrase in parsed.phrases if _contains(text, phrase))
            if part > 0:
                matched.append(name)
                score += weight * part
        if score > 0 and reference_date is not None:
            score = apply_recency_boost(score, dated(item), reference_date, boost_days)
        results.append(Scored(item, score, tuple(matched)))
    ranked = normalize_scores(results)
    return sorted(ranked, key=lambda scored: -scored.score)


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple | set):
        return " ".join(str(part) for part in value)
    return str(value)


def normalize_scores(items: Sequence[Scored[T]]) -> list[Scored[T]]:
    """Scores divided by the highest, so the best is 1.0 (all-zero scores stay 0)."""
    top = max((item.score for item in items), default=0.0)
    if top <= 0:
        return [Scored(item.item, 0.0, item.matched_fields) for item in items]
    return [Scored(item.item, item.score / top, item.matched_fields) for item in items]
