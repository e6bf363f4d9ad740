"""The wording of the multi-session conversation (memevict.simulate.sessions):
its names, pools and sentence templates, read from the JSON files of
``templates/`` and checked as they are read.

  pools.json    named lists of values (cities, bands, ...) and tables (the prices of each item)
  persona.json  the user's people, and the pool each one's name is drawn from
  facts.json    the kinds of fact the user states, by theme, and the questions about them
  chats.json    small talk and advice nobody asks about
  lines.json    greetings, goodbyes, reactions, recaps and the other fixed lines
  texting.json  how the same things are said as people text (``style="texting"``)

``templates/README.md`` says what each field means. A mistake in a file (a
slot a template names that nothing draws, a pool nobody defined, a misspelt
field) raises BadTemplates, naming the file and the place, when the templates
are first read.
"""

from __future__ import annotations

import json
import string
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import date, timedelta
from functools import cache
from importlib.resources import files
from random import Random
from typing import TYPE_CHECKING, Any, NoReturn

from memevict.errors import MemevictError

if TYPE_CHECKING:
    from memevict.scripts import Traversable


class BadTemplates(MemevictError, ValueError):
    """A template file is malformed; the message names the file and the place in it."""


class Day(date):
    """A date said the way people say it: "June 14"."""

    @classmethod
    def of(cls, day: date) -> Day:
        return cls(day.year, day.month, day.day)

    def __str__(self) -> str:
        return f"{read().months[self.month - 1]} {self.day}"  # (the package's month names)


@dataclass(frozen=True, slots=True)
class Money:
    dollars: int

    def __str__(self) -> str:
        return f"${self.dollars:,}"


@dataclass(slots=True)
class World:
    """What slots are drawn from: the user's world and the day it is."""

    rng: Random
    people: dict[str, str]  # the user, family, manager, company, ...
    groups: dict[str, tuple[str, ...]]  # friends and coworkers
    today: date


Slot = Callable[[World, Mapping[str, object]], object]  # (world, slots drawn so far) -> value
Pool = tuple[object, ...]
Table = dict[str, Pool]  # a pool for each row: the prices of each item, ...
_DRAWS = ("pick", "number", "dollars", "days ahead", "one of")  # how a slot is drawn


@dataclass(frozen=True, slots=True)
class Fix:
    """A problem solved in a later session, and the question about the fix."""

    says: tuple[str, ...]
    ask: str
    slots: Mapping[str, Slot]


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of fact the user states, and what is asked about it.

    asks[0] is about the ``value`` slot, the one that ``moves`` change and a
    ``recap`` restates; the other asks are about what never changes."""

    name: str
    says: tuple[str, ...]
    replies: tuple[str, ...]  # never restating what is asked
    asks: tuple[str, ...]
    slots: Mapping[str, Slot]
    value: str
    moves: tuple[str, ...]
    rises: bool  # a count that only goes up when it moves
    recap: str
    label: str  # names the fact in a question that combines two facts
    combine: str  # which combined question it may be in ("date", "spend")
    unique: str  # the slot whose value makes the fact a new one
    again: int  # facts of this kind in one conversation at most
    early: bool  # likelier in the first sessions
    fix: Fix | None
    after: tuple[tuple[str, str], ...]  # (user, assistant) once the date has passed


@dataclass(frozen=True, slots=True)
class Chat:
    """Small talk or advice nobody asks about: the user's turn and the assistant's answer."""

    user: str
    reply: str
    slots: Mapping[str, Slot]
    plan: str  # advice: what the assistant's recap of it says


@dataclass(frozen=True, slots=True)
class Lines:
    """The fixed lines of lines.json (its keys are these names with spaces)."""

    introductions: tuple[str, ...]
    first_welcomes: tuple[str, ...]
    greetings: tuple[str, ...]
    news: tuple[str, ...]
    welcomes: tuple[str, ...]
    also: tuple[str, ...]
    asides: tuple[str, ...]
    follow_ups: tuple[str, ...]
    keep_posted: tuple[str, ...]
    how_about_you: tuple[str, ...]
    small_talk_answers: tuple[str, ...]
    reactions: tuple[str, ...]
    acknowledgements: tuple[str, ...]
    noted: tuple[str, ...]
    fixed: tuple[str, ...]
    advice_recap: str
    recap_asks: tuple[str, ...]
    recap_when_asked: str
    recap_at_goodbye: str
    thanks_for_the_recap: tuple[str, ...]
    last_words: tuple[str, ...]
    goodbyes: tuple[str, ...]
    farewells: tuple[str, ...]
    combined_questions: Mapping[str, str]


# Lines said by the user's name unless they asked for a nickname.
_BY_NAME = ("welcomes", "farewells")
# The lines that are one template, and the slot each fills in.
_ONE_LINE = {"advice_recap": "plan", "recap_when_asked": "summary", "recap_at_goodbye": "summary"}


@dataclass(frozen=True, slots=True)
class Chances:
    """The chances of texting.json (its keys are these names with spaces)."""

    lowercase: float  # a message all in lowercase
    drop_apostrophes: float  # a message's "don't" and "I'm" as "dont" and "Im"
    abbreviate: float  # each word or phrase of ``abbreviations`` abbreviated
    typo: float  # a message with a typo (never in a name, date or number)
    emoji: float  # a message ending with an emoji
    opener: float  # a thought starting with an opener ("omg")
    closer: float  # a thought ending with a closer ("lol")
    tail: float  # a thought followed by a message of its own ("lol", "😭")
    split: float  # a thought over two messages or three
    split_long: float  # the same, for a thought of ``long`` words or more
    third_piece: float  # a split thought over three messages, when it can be


@dataclass(frozen=True, slots=True)
class DateForm:
    """A way a date is texted, and the dates it is for: ``days`` after today (lowest,
    highest), or in the calendar ``week`` (0 this one, 1 the next, 2 the one after), and
    with ``weekend`` only a Saturday or a Sunday. ``bare``: said without "on" before it
    ("tmrw", "next fri")."""

    days: tuple[int, int] | None
    week: int | None
    weekend: bool
    weight: int
    say: tuple[str, ...]  # with {wd} {weekday} {day} {nth} {mon} {month} {m}
    bare: bool


@dataclass(frozen=True, slots=True)
class Texting:
    """texting.json: how the same conversation is said as people text."""

    chances: Chances
    long: int  # words from which a thought is a long one
    split_before: tuple[str, ...]  # words a thought may be split before
    split_before_a_value: tuple[str, ...]  # and words it may be split before if a value follows
    gap_s: tuple[int, int]  # seconds between the messages of one thought
    rewrites: Mapping[str, str]  # phrases said otherwise, always (an assistant's turns of phrase)
    abbreviations: Mapping[str, str]  # words and phrases, whole and in any case
    openers: tuple[str, ...]
    closers: tuple[str, ...]
    tails: tuple[str, ...]
    emojis: tuple[str, ...]
    weekdays: tuple[str, ...]  # Monday first
    months: tuple[str, ...]  # January first
    dates: tuple[DateForm, ...]
    hours: tuple[str, ...]  # a time on the hour: {h} {ap}
    minutes: tuple[str, ...]  # a time with minutes: {h} {mm} {ap}
    dollars: tuple[str, ...]  # under $1,000: {n}
    thousands: tuple[str, ...]  # from $1,000: {n} and {k}, in thousands ("1.25")


@dataclass(frozen=True, slots=True)
class Templates:
    months: tuple[str, ...]
    weekdays: tuple[str, ...]  # Monday first
    people: Mapping[str, tuple[str, ...]]  # each a different name from its pool
    things: Mapping[str, tuple[str, ...]]  # the user's company and city
    groups: Mapping[str, tuple[tuple[str, ...], int]]  # (pool, size): friends, coworkers
    kinds: tuple[Kind, ...]
    chats: tuple[Chat, ...]
    advice: tuple[Chat, ...]
    lines: Lines
    texting: Texting


@cache
def read() -> Templates:
    """The package's templates, checked once."""
    return load(files("memevict.simulate").joinpath("templates"))


def load(folder: Traversable) -> Templates:
    """The templates of ``folder``, checked: BadTemplates if a file is malformed."""

    def json_of(name: str) -> Any:
        try:
            return json.loads(folder.joinpath(name).read_text("utf-8"))
        except json.JSONDecodeError as e:
            _fail(name, f"line {e.lineno} column {e.colno}: {e.msg}")

    pools = _pools(json_of("pools.json"))
    persona = _fields_of(json_of("persona.json"), "persona.json", ("people", "things", "groups"))
    reader = _Reader(pools, persona)
    lines = reader.lines(json_of("lines.json"))
    facts = _object(json_of("facts.json"), "facts.json")
    kinds = tuple(
        reader.kind(raw, lines.combined_questions, f"facts.json: {theme}[{i}]")
        for theme, listed in facts.items()
        for i, raw in enumerate(_list(listed, f"facts.json: {theme}"))
    )
    twice = [name for name, n in Counter(k.name for k in kinds).items() if n > 1]
    if twice:
        _fail("facts.json", f"two kinds of fact are named {twice[0]!r}")
    chats = _fields_of(json_of("chats.json"), "chats.json", ("small talk", "advice"))
    return Templates(
        reader.names("months", "pools.json", 12),
        reader.names("weekdays", "pools.json", 7),
        reader.people,
        reader.things,
        reader.groups,
        kinds,
        reader.chats(chats["small talk"], "chats.json: small talk", ()),
        reader.chats(chats["advice"], "chats.json: advice", ("plan",)),
        lines,
        reader.texting(json_of("texting.json")),
    )


def _fail(where: str, problem: str) -> NoReturn:
    raise BadTemplates(f"templates/{where}: {problem}")


# -- shapes -------------------------------------------------------------------


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _fail(where, "is not an object ({...})")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        _fail(where, "is not a list of one or more entries ([...])")
    return value


def _fields_of(
    value: object, where: str, required: Collection[str], optional: Collection[str] = ()
) -> dict[str, Any]:
    found = _object(value, where)
    for name in required:
        if name not in found:
            _fail(where, f"has no {name!r}")
    for name in found:
        if name not in required and name not in optional:
            _fail(where, f"has {name!r}, which is none of {sorted([*required, *optional])}")
    return found


def _strings(value: object, where: str, count: int = 0) -> tuple[str, ...]:
    found = _list(value, where)
    if not all(isinstance(x, str) for x in found) or (count and len(found) != count):
        _fail(where, f"is not a list of {count or 'one or more'} texts")
    return tuple(found)


def _name(found: Mapping[str, Any], field: str, where: str) -> str:
    """The name of a slot or a combined question; "" if absent."""
    name = found.get(field, "")
    if not isinstance(name, str):
        _fail(f"{where}: {field}", "is not a text")
    return name


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _numbers(value: object, count: int, where: str) -> tuple[int, ...]:
    """[lowest, highest] or [lowest, highest, step]."""
    if not isinstance(value, list) or len(value) != count or not all(map(_whole, value)):
        _fail(where, f"is not a list of {count} whole numbers")
    if value[0] > value[1] or (count == 3 and value[2] < 1):
        _fail(where, f"{value}: the lowest is above the highest, or the step below 1")
    return tuple(value)


def _values(value: object, where: str) -> Pool:
    found = _list(value, where)
    if not all(isinstance(x, str) or _whole(x) for x in found):
        _fail(where, "is not a list of texts and whole numbers")
    return tuple(found)


def _pools(value: object) -> dict[str, Pool | Table]:
    pools: dict[str, Pool | Table] = {}
    for name, pool in _object(value, "pools.json").items():
        where = f"pools.json: {name}"
        if not isinstance(pool, dict):
            pools[name] = _values(pool, where)
            continue
        table: Table = {}
        for row, values in _object(pool, where).items():
            if isinstance(values, dict):
                dollars = _fields_of(values, f"{where}: {row}", ("dollars",))["dollars"]
                low, high, step = _numbers(dollars, 3, f"{where}: {row}: dollars")
                table[row] = tuple(Money(d) for d in range(low, high + 1, step))
            else:
                table[row] = _values(values, f"{where}: {row}")
        if not table:
            _fail(where, "has no rows")
        pools[name] = table
    return pools


# -- templates and slots ------------------------------------------------------


class _Reader:
    """Checks templates against the slots they may name, and slots against the pools."""

    def __init__(self, pools: Mapping[str, Pool | Table], persona: Mapping[str, Any]) -> None:
        self.pools = pools
        people = _object(persona["people"], "persona.json: people")
        things = _object(persona["things"], "persona.json: things")
        self.people = {r: self.names(p, f"persona.json: people: {r}") for r, p in people.items()}
        self.things = {t: self.names(p, f"persona.json: things: {t}") for t, p in things.items()}
        self.groups: dict[str, tuple[tuple[str, ...], int]] = {}
        draws = Counter(people.values())  # pools of names that must differ: how many from each
        for group, raw in _object(persona["groups"], "persona.json: groups").items():
            where = f"persona.json: groups: {group}"
            found = _fields_of(raw, where, ("pool", "size"))
            if not _whole(found["size"]) or found["size"] < 1:
                _fail(f"{where}: size", "is not a whole number of at least 1")
            self.groups[group] = (self.names(found["pool"], f"{where}: pool"), found["size"])
            draws[found["pool"]] += found["size"]
        if "user" not in self.people:
            _fail("persona.json: people", "has no 'user'")
        # a person's name or thing, and the day of the week: what every template may name
        self.known = {*self.people, *self.things, "weekday"}
        if len(self.known) != len(self.people) + len(self.things) + 1:
            _fail("persona.json", "names a person or thing twice, or 'weekday' (said by the day)")
        self.enough_names(draws)

    def names(self, pool: object, where: str, count: int = 0) -> tuple[str, ...]:
        """The texts of the list ``pool`` (of ``count`` texts if not 0)."""
        if not isinstance(pool, str) or not isinstance(self.pools.get(pool), tuple):
            _fail(where, f"{pool!r} is no list of pools.json")
        return _strings(list(self.pools[pool]), f"pools.json: {pool}", count)

    def enough_names(self, draws: Mapping[str, int]) -> None:
        """Everyone gets a name of their own: each pool has enough for its
        people, whatever the other pools' people took from it first."""
        for pool, n in draws.items():
            names = set(self.pools[pool])
            others = sum(
                min(m, len(names & set(self.pools[o]))) for o, m in draws.items() if o != pool
            )
            if n + others > len(names):
                _fail(
                    f"pools.json: {pool}",
                    f"has {len(names)} names: too few for the {n} people drawn from it",
                )

    def template(self, text: object, known: Iterable[str], where: str) -> str:
        if not isinstance(text, str):
            _fail(where, "is not a text")
        allowed = set(known)
        try:
            parts = list(string.Formatter().parse(text))
        except ValueError as e:
            _fail(where, f"{text!r}: {e} (write a brace as {{{{ or }}}})")
        for _, slot, spec, conversion in parts:
            if slot is not None and slot not in allowed:
                _fail(where, f"{text!r} names {{{slot}}}, which is none of {sorted(allowed)}")
            if spec or conversion:
                _fail(where, f"{text!r}: a slot is written {{name}}, without ':' or '!'")
        return text

    def templates(self, value: object, known: Iterable[str], where: str) -> tuple[str, ...]:
        allowed = set(known)
        return tuple(
            self.template(text, allowed, f"{where}[{i}]")
            for i, text in enumerate(_list(value, where))
        )

    def slots(self, value: object, where: str) -> tuple[dict[str, Slot], dict[str, str]]:
        """The slots, in the order they are drawn, and how each is drawn."""
        slots: dict[str, Slot] = {}
        how: dict[str, str] = {}
        for name, spec in _object(value, where).items():
            slots[name], how[name] = self.slot(spec, how, f"{where}: {name}")
        return slots, how

    def slot(self, value: object, earlier: Mapping[str, str], where: str) -> tuple[Slot, str]:
        spec = _object(value, where)
        draws = [d for d in _DRAWS if d in spec]
        if len(draws) != 1:
            _fail(where, f"says how it is drawn with one of {list(_DRAWS)}")
        draw = draws[0]
        _fields_of(spec, where, (draw,), ("not", "for") if draw == "pick" else ())
        arg, at = spec[draw], f"{where}: {draw}"
        if draw == "number":
            low, high = _numbers(arg, 2, at)
            return (lambda w, s: w.rng.randint(low, high)), draw
        if draw == "dollars":
            low, high, step = _numbers(arg, 3, at)
            return (lambda w, s: Money(w.rng.randrange(low, high + 1, step))), draw
        if draw == "days ahead":
            return _days_ahead(*_numbers(arg, 2, at)), draw
        if draw == "one of":
            if arg not in self.groups:
                _fail(at, f"{arg!r} is none of persona.json's groups {sorted(self.groups)}")
            return (lambda w, s: w.rng.choice(w.groups[arg])), draw
        if isinstance(arg, list):
            pool: Pool | Table = _values(arg, at)
        elif isinstance(arg, str) and arg in self.pools:
            pool = self.pools[arg]
        else:
            _fail(at, f"{arg!r} is no pool of pools.json")
        picked = f"pick {arg}"
        if "not" in spec and "for" in spec:
            _fail(where, "has both 'not' and 'for'")
        for modifier in ("not", "for"):
            if modifier in spec and spec[modifier] not in earlier:
                _fail(f"{where}: {modifier}", f"{spec[modifier]!r} is no slot drawn before it")
        if "for" in spec:
            row = spec["for"]
            table = pool
            if not isinstance(table, dict) or earlier[row] != picked:
                _fail(where, f"picks for {row!r}, which is not picked from the table {arg!r}")
            return (lambda w, s: w.rng.choice(table[str(s[row])])), picked
        values = tuple(pool)  # a table's rows
        if "not" in spec:
            other = spec["not"]
            if len(set(values)) < 2:
                _fail(at, f"has one value only, so no value other than {other!r}")
            return (lambda w, s: w.rng.choice([x for x in values if x != s[other]])), picked
        return (lambda w, s: w.rng.choice(values)), picked

    # -- the files

    def kind(self, value: object, combined: Mapping[str, str], at: str) -> Kind:
        required = ("name", "says", "replies", "asks", "value")
        optional = ("slots", "moves", "rises", "recap", "label", "combine", "unique", "again")
        name = _name(_object(value, at), "name", at)
        if not name:
            _fail(at, "has no 'name'")
        where = f"facts.json: {name}"
        found = _fields_of(value, where, required, (*optional, "early", "fix", "after"))
        slots, how = self.slots(found.get("slots", {}), f"{where}: slots")
        known = self.known | set(slots)
        said = {
            field: self.templates(found[field], known, f"{where}: {field}")
            if field in found
            else ()
            for field in ("says", "replies", "asks", "moves")
        }
        recap, label = (
            self.template(found[field], known, f"{where}: {field}") if field in found else ""
            for field in ("recap", "label")
        )
        value_slot, combine, unique = (
            _name(found, f, where) for f in ("value", "combine", "unique")
        )
        rises, early = (found.get(field, False) for field in ("rises", "early"))
        again = found.get("again", 1)
        if not isinstance(rises, bool) or not isinstance(early, bool):
            _fail(where, "has 'rises' or 'early' other than true or false")
        if not _whole(again) or again < 1:
            _fail(f"{where}: again", "is not a whole number of at least 1")
        allowed = slots if said["moves"] else known  # what moves is drawn again
        if value_slot not in allowed:
            _fail(f"{where}: value", f"{value_slot!r} is none of {sorted(allowed)}")
        if unique and unique not in slots:
            _fail(f"{where}: unique", f"{unique!r} is no slot it draws")
        if combine and (combine not in combined or not label):
            _fail(f"{where}: combine", f"is none of {sorted(combined)}, or it has no label")
        if rises and (not said["moves"] or how[value_slot] not in ("number", "dollars")):
            _fail(f"{where}: rises", "is for a number or dollars that moves")
        if "after" in found and how.get(value_slot) != "days ahead":
            _fail(f"{where}: after", "is for a fact whose value is a date (days ahead)")
        return Kind(
            name,
            said["says"],
            said["replies"],
            said["asks"],
            slots,
            value_slot,
            said["moves"],
            rises,
            recap,
            label,
            combine,
            unique,
            again,
            early,
            self.fix(found["fix"], known, f"{where}: fix") if "fix" in found else None,
            self.after(found["after"], known, f"{where}: after") if "after" in found else (),
        )

    def fix(self, value: object, known: set[str], where: str) -> Fix:
        found = _fields_of(value, where, ("says", "ask"), ("slots",))
        slots, _ = self.slots(found.get("slots", {}), f"{where}: slots")
        known = known | set(slots)
        return Fix(
            self.templates(found["says"], known, f"{where}: says"),
            self.template(found["ask"], known, f"{where}: ask"),
            slots,
        )

    def after(self, value: object, known: set[str], where: str) -> tuple[tuple[str, str], ...]:
        pairs = [(f"{where}[{i}]", pair) for i, pair in enumerate(_list(value, where))]
        return tuple(
            self.pair(_fields_of(pair, at, ("user", "reply")), known, at) for at, pair in pairs
        )

    def pair(self, found: Mapping[str, Any], known: set[str], where: str) -> tuple[str, str]:
        """A user's turn and the assistant's reply."""
        return (
            self.template(found.get("user"), known, f"{where}: user"),
            self.template(found.get("reply"), known, f"{where}: reply"),
        )

    def chats(self, value: object, where: str, optional: tuple[str, ...]) -> tuple[Chat, ...]:
        chats = []
        for i, raw in enumerate(_list(value, where)):
            at = f"{where}[{i}]"
            found = _fields_of(raw, at, ("user", "reply"), ("slots", *optional))
            slots, _ = self.slots(found.get("slots", {}), f"{at}: slots")
            known = self.known | set(slots)
            plan = self.template(found["plan"], known, f"{at}: plan") if "plan" in found else ""
            chats.append(Chat(*self.pair(found, known, at), slots, plan))
        return tuple(chats)

    def lines(self, value: object) -> Lines:
        names = [f.name for f in fields(Lines)]
        found = _fields_of(value, "lines.json", [name.replace("_", " ") for name in names])
        lines: dict[str, Any] = {}
        for name in names:
            key = name.replace("_", " ")
            where = f"lines.json: {key}"
            if name in _ONE_LINE:
                lines[name] = self.template(found[key], {*self.known, _ONE_LINE[name]}, where)
            elif name == "combined_questions":
                lines[name] = {
                    combine: self.template(text, {*self.known, "a", "b"}, f"{where}: {combine}")
                    for combine, text in _object(found[key], where).items()
                }
            else:
                lines[name] = self.templates(found[key], self.known, where)
            if name in _BY_NAME and all("{user}" in line for line in lines[name]):
                _fail(where, "has no line without {user}, for a user who asked for a nickname")
        return Lines(**lines)

    def texting(self, value: object) -> Texting:
        where = "texting.json"
        keys = ["chances", "long", "split before", "split before a value", "gap s"]
        keys += ["rewrites", "abbreviations"]
        pools = ("openers", "closers", "tails", "emojis", "weekdays", "months")
        found = _fields_of(value, where, (*keys, *pools, "dates", "times", "dollars"))
        names = [f.name for f in fields(Chances)]
        raw = _fields_of(
            found["chances"], f"{where}: chances", [n.replace("_", " ") for n in names]
        )
        chances: dict[str, float] = {}
        for name in names:
            chance = raw[name.replace("_", " ")]
            if (
                isinstance(chance, bool)
                or not isinstance(chance, int | float)
                or not 0 <= chance <= 1
            ):
                _fail(f"{where}: chances: {name.replace('_', ' ')}", "is not a number from 0 to 1")
            chances[name] = float(chance)
        if not _whole(found["long"]) or found["long"] < 2:
            _fail(f"{where}: long", "is not a whole number of at least 2")
        low, high = _numbers(found["gap s"], 2, f"{where}: gap s")
        if low < 1:
            _fail(f"{where}: gap s", "is not at least 1 second")
        counts = {"weekdays": 7, "months": 12}
        said = {n: _strings(found[n], f"{where}: {n}", counts.get(n, 0)) for n in pools}
        times = _fields_of(found["times"], f"{where}: times", ("on the hour", "with minutes"))
        dollars = _fields_of(found["dollars"], f"{where}: dollars", ("under 1000", "from 1000"))
        return Texting(
            Chances(**chances),
            found["long"],
            _strings(found["split before"], f"{where}: split before"),
            _strings(found["split before a value"], f"{where}: split before a value"),
            (low, high),
            self.phrases(found["rewrites"], f"{where}: rewrites"),
            self.phrases(found["abbreviations"], f"{where}: abbreviations"),
            said["openers"],
            said["closers"],
            said["tails"],
            said["emojis"],
            said["weekdays"],
            said["months"],
            tuple(
                self.date_form(d, f"{where}: dates[{i}]")
                for i, d in enumerate(_list(found["dates"], f"{where}: dates"))
            ),
            self.templates(times["on the hour"], ("h", "ap"), f"{where}: times: on the hour"),
            self.templates(
                times["with minutes"], ("h", "mm", "ap"), f"{where}: times: with minutes"
            ),
            self.templates(dollars["under 1000"], ("n",), f"{where}: dollars: under 1000"),
            self.templates(dollars["from 1000"], ("n", "k"), f"{where}: dollars: from 1000"),
        )

    def phrases(self, value: object, where: str) -> dict[str, str]:
        found = _object(value, where)
        if not found or not all(isinstance(v, str) and k and v for k, v in found.items()):
            _fail(where, "is not an object of one or more phrases and what they become")
        return dict(found)

    def date_form(self, value: object, where: str) -> DateForm:
        found = _fields_of(value, where, ("weight", "say"), ("days", "week", "weekend", "bare"))
        if ("days" in found) == ("week" in found):
            _fail(where, "says which dates it is for with one of 'days' and 'week'")
        days = _numbers(found["days"], 2, f"{where}: days") if "days" in found else None
        if days is not None and days[0] < 1:
            _fail(f"{where}: days", f"{list(days)}: a date is said from 1 day ahead")
        week = found.get("week")
        if week is not None and (not _whole(week) or week not in (0, 1, 2)):
            _fail(f"{where}: week", "is not 0 (this week), 1 (the next) or 2 (the one after)")
        weekend, bare = (found.get(f, False) for f in ("weekend", "bare"))
        if not isinstance(weekend, bool) or not isinstance(bare, bool):
            _fail(where, "has 'weekend' or 'bare' other than true or false")
        if not _whole(found["weight"]) or found["weight"] < 1:
            _fail(f"{where}: weight", "is not a whole number of at least 1")
        known = ("wd", "weekday", "day", "nth", "mon", "month", "m")
        return DateForm(
            (days[0], days[1]) if days else None,
            week,
            weekend,
            found["weight"],
            self.templates(found["say"], known, f"{where}: say"),
            bare,
        )


def _days_ahead(low: int, high: int) -> Slot:
    """A day ``low`` to ``high`` days from today."""
    return lambda w, s: Day.of(w.today + timedelta(days=w.rng.randint(low, high)))
