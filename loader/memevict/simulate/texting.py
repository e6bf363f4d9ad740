"""The multi-session conversation said as people text (``generate_sessions(seed,
sessions, style="texting")``): the same facts, questions and evidence as the prose
style, in messages like those of real chats between people.

A texted turn is a *thought*: the text the prose style would say, with each value
(a slot of the templates, a person's name) marked, so that what happens to the words
around it never garbles it. How it is texted is data (templates/texting.json, read
by memevict.simulate.wording), applied by :class:`Texter` with its own dice:

- a value is said casually: a date from the day it is said ("tmrw", "sat", "next
  wknd", "the 14th", "jun 14", "6/14"; "on" dropped before "tmrw"), a time without
  its minutes or "am" ("at 9", "at 2:30"), dollars without the comma ("1200",
  "1.2k");
- the words around it: an assistant's turns of phrase rewritten ("So to recap:"
  -> "ok so:"), then common words and phrases abbreviated, each with a chance ("you"
  -> "u", "tomorrow" -> "tmrw", "I don't know" -> "idk", "please" -> "pls");
- the thought is split over two or three messages: after a punctuation mark, before
  "and", "but" or "so", or before "on", "at", "for", "to" ... that a value follows
  ("meeting w globex | on the 3rd at 1"); each message three words or more, or ending
  with a punctuation mark. A thought that states a fact (``keep``: the values a
  question about it may ask for) is split only before the first of them, so its
  last message holds them all: that message is the evidence. Other thoughts are
  split wherever they may be;
- each message, with a chance: all lowercase, apostrophes dropped ("dont", "Im"),
  one typo in a word that is no value, an emoji at the end; a thought may start with
  an opener ("omg") and end with a closer ("lol"), or be followed by a message of its
  own ("lol", "😭").

The messages of a thought are ``gap s`` seconds apart, from the prose turn's time.
"""

from __future__ import annotations

import itertools
import re
import string
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from random import Random

from memevict.simulate.wording import DateForm, Money, Templates

_MARK = re.compile("\x01([^\x02]*)\x02([^\x03]*)\x03")
_SPLIT_MARK = re.compile("(\x01[^\x02]*\x02[^\x03]*\x03)")
_TIME = re.compile(r"\b(\d{1,2})(?::(\d\d))? ?([ap]m)\b")
_PUNCTUATION = re.compile(r"[,:;.!?]+ +| +- +")
_APOSTROPHE = re.compile(r"(?:(?<=\w)|^)'(?=(?:s|t|m|re|ve|ll|d)\b)")
_WORD = re.compile(r"[A-Za-z]{4,}")


def mark(name: str, text: str) -> str:
    """``text``, the value of the slot or person ``name``, marked as one."""
    return f"\x01{name}\x02{text}\x03"


def unmarked(text: str) -> str:
    """A marked text as said."""
    return _MARK.sub(r"\2", text)


def values(text: str) -> list[tuple[str, str]]:
    """The marked values of ``text``: (name, value), in order."""
    return [(m[1], m[2]) for m in _MARK.finditer(text)]


class Said(str):
    """Text said already (a recap's clauses): it goes into a template as it is."""

    __slots__ = ()


class Everything:
    """``keep`` of a thought whose values all stay together (a recap)."""

    def __contains__(self, name: object) -> bool:
        return True


EVERYTHING = Everything()


@dataclass(frozen=True, slots=True)
class Thought:
    """What a prose turn is texted as: its ``messages``, and the index of the one that
    holds the values to keep (None if it kept none)."""

    messages: tuple[str, ...]
    key: int | None


class Texter:
    """Says things as people text, with its own dice (``rng``)."""

    def __init__(self, rng: Random, words: Templates) -> None:
        self.rng = rng
        self.words = words.texting
        self.chance = words.texting.chances
        self.day_names = tuple(day.lower() for day in words.weekdays)
        self.month_names = tuple(month.lower() for month in words.months)
        self.weekdays = dict(zip(self.day_names, self.words.weekdays, strict=True))
        self.said = {
            *self.words.abbreviations.values(),
            *self.words.openers,
            *self.words.closers,
            *self.words.tails,
        }
        phrases = sorted(self.words.abbreviations, key=len, reverse=True)
        self.abbreviation = re.compile(
            r"(?<![\w'])(?:" + "|".join(map(re.escape, phrases)) + r")(?![\w'])", re.IGNORECASE
        )
        self.lowered = {k.lower(): v for k, v in self.words.abbreviations.items()}
        self.weekday = re.compile(r"\b(" + "|".join(map(re.escape, words.weekdays)) + r")s?\b")
        self.before = re.compile(
            r" (?=(?:" + "|".join(map(re.escape, self.words.split_before)) + r")\b)"
        )
        self.before_a_value = re.compile(
            r" (?=(?:" + "|".join(map(re.escape, self.words.split_before_a_value)) + r") \x01)"
        )

    def happens(self, chance: float) -> bool:
        return self.rng.random() < chance

    def gap(self) -> int:
        """Milliseconds between two messages of a thought."""
        return self.rng.randint(*self.words.gap_s) * 1000

    # -- values

    def render(self, template: str, slots: Mapping[str, object], today: date) -> str:
        """``template`` with each slot's value texted and marked ("on" dropped before a
        date said bare, "tmrw"); a value :class:`Said` already (a recap's clauses)
        goes in as it is."""
        text = []
        for literal, name, _, _ in string.Formatter().parse(template):
            if name is None:
                text.append(literal)
                continue
            value = slots[name]
            if isinstance(value, Said):
                text.append(literal + value)
                continue
            said, bare = self.value(value, today)
            if bare and literal.endswith("on "):
                literal = literal[:-3]
            text.append(literal + mark(name, said))
        return "".join(text)

    def value(self, value: object, today: date) -> tuple[str, bool]:
        """A value as texted, and whether it is a date said bare ("tmrw")."""
        if isinstance(value, date):
            return self.date(value, today)
        if isinstance(value, Money):
            return self.dollars(value.dollars), False
        return self.casual(str(value)), False

    def date(self, day: date, today: date) -> tuple[str, bool]:
        """``day`` said on ``today`` by a form of ``dates`` that fits it, by weight, and
        whether it is said bare; "jun 14" if none fits."""
        ahead = (day - today).days
        week = (day - (today - timedelta(days=today.weekday()))).days // 7
        fits = [f for f in self.words.dates if ahead >= 1 and _fits(f, ahead, week, day)]
        if not fits:
            return f"{self.words.months[day.month - 1]} {day.day}", False
        form = self.rng.choices(fits, [f.weight for f in fits])[0]
        said = self.rng.choice(form.say).format(
            wd=self.words.weekdays[day.weekday()],
            weekday=self.day_names[day.weekday()],
            day=day.day,
            nth=_ordinal(day.day),
            mon=self.words.months[day.month - 1],
            month=self.month_names[day.month - 1],
            m=day.month,
        )
        return said, form.bare

    def dollars(self, dollars: int) -> str:
        forms = self.words.thousands if dollars >= 1000 else self.words.dollars
        return self.rng.choice(forms).format(n=dollars, k=f"{dollars / 1000:g}")

    def casual(self, text: str) -> str:
        """Times and weekdays in ``text`` as texted: "9 am" -> "9", "Monday" -> "mon"."""
        text = _TIME.sub(self.time, text)
        return self.weekday.sub(
            lambda m: self.weekdays[m[1].lower()] if self.happens(self.chance.abbreviate) else m[0],
            text,
        )

    def time(self, found: re.Match[str]) -> str:
        hour, minutes, ap = found[1], found[2], found[3]
        forms = self.words.minutes if minutes else self.words.hours
        return self.rng.choice(forms).format(h=hour, mm=minutes or "", ap=ap)

    # -- thoughts

    def thought(self, text: str, keep: Container[str] | None = None) -> Thought:
        """The messages a marked text is texted as. With ``keep``, the values it names
        stay in one message, the last of the thought before any tail: the key."""
        text = self.words_of(text)
        kept = [m.start() for m in _MARK.finditer(text) if m[1] in keep] if keep else []
        pieces = self.split(text, kept[0] if kept else (0 if keep is not None else len(text)))
        key = len(pieces) - 1 if keep is not None else None
        if self.happens(self.chance.opener):
            pieces[0] = f"{self.rng.choice(self.words.openers)} {pieces[0]}"
        if self.happens(self.chance.closer) and not pieces[-1].endswith("?"):
            pieces[-1] = f"{pieces[-1].rstrip(',:;. ')} {self.rng.choice(self.words.closers)}"
        if len(pieces) < 3 and self.happens(self.chance.tail):
            pieces.append(self.rng.choice(self.words.tails))
        messages = [self.message(p) for p in pieces]
        if key is not None:
            key -= sum(1 for m in messages[:key] if not m)
        return Thought(tuple(m for m in messages if m), key)

    def words_of(self, text: str) -> str:
        """Rewrites, then abbreviations, times and weekdays, in the words around the values."""

        def said(literal: str) -> str:
            for phrase, rewrite in self.words.rewrites.items():
                literal = literal.replace(phrase, rewrite)
            literal = self.abbreviation.sub(self.abbreviate, literal)
            return self.casual(literal)

        return _literal(text, said)

    def abbreviate(self, found: re.Match[str]) -> str:
        if not self.happens(self.chance.abbreviate):
            return found[0]
        return self.lowered[found[0].lower()]

    def split(self, text: str, before: int) -> list[str]:
        """``text`` in one to three pieces, cut where it may be at or before ``before``."""
        words = len(unmarked(text).split())
        if words < 5:
            return [text]
        chance = self.chance.split_long if words >= self.words.long else self.chance.split
        if not self.happens(chance):
            return [text]
        cuts = [c for c in self.cuts(text) if c <= before]
        options: list[tuple[int, ...]] = [(c,) for c in cuts if _pieces(text, (c,))]
        if options and self.happens(self.chance.third_piece):
            options = [p for p in itertools.combinations(cuts, 2) if _pieces(text, p)] or options
        if not options:
            return [text]
        return _pieces(text, self.rng.choice(options))

    def cuts(self, text: str) -> list[int]:
        """Where ``text`` may be cut, never inside a value: after a punctuation mark,
        before a word of ``split before``, or before one of ``split before a value``
        that a value follows ("... | on jun 14")."""
        inside = [(m.start(), m.end()) for m in _MARK.finditer(text)]
        found = {m.end() for m in _PUNCTUATION.finditer(text)}
        found |= {m.start() + 1 for m in self.before.finditer(text)}
        found |= {m.start() + 1 for m in self.before_a_value.finditer(text)}
        return sorted(
            c for c in found if 0 < c < len(text) and not any(a < c < b for a, b in inside)
        )

    def message(self, piece: str) -> str:
        """One message, as texted: trailing commas and periods dropped, then, each with
        its chance, lowercase, apostrophes dropped, a typo, an emoji."""
        piece = piece.strip().rstrip(",:;.- ").strip()
        if not unmarked(piece).strip():
            return ""
        if self.happens(self.chance.lowercase):
            piece = piece.lower()
        if self.happens(self.chance.drop_apostrophes):
            piece = _literal(piece, lambda s: _APOSTROPHE.sub("", s))
        if self.happens(self.chance.typo):
            piece = self.typo(piece)
        if self.happens(self.chance.emoji):
            piece = f"{piece} {self.rng.choice(self.words.emojis)}"
        return unmarked(piece)

    def typo(self, piece: str) -> str:
        """One letter swapped with the next, dropped or doubled, in a word of four
        letters or more that is no value and nothing texting.json says."""
        found: list[tuple[int, int]] = []
        at = 0
        for part in _SPLIT_MARK.split(piece):
            if not part.startswith("\x01"):
                found += [
                    (at + m.start(), at + m.end())
                    for m in _WORD.finditer(part)
                    if m[0].lower() not in self.said
                ]
            at += len(part)
        if not found:
            return piece
        start, end = self.rng.choice(found)
        i = self.rng.randrange(start + 1, end - 1)  # never the first or last letter
        how = self.rng.choice(("swap", "drop", "double"))
        if how == "swap":
            return piece[:i] + piece[i + 1] + piece[i] + piece[i + 2 :]
        if how == "drop":
            return piece[:i] + piece[i + 1 :]
        return piece[:i] + piece[i] + piece[i:]


def _pieces(text: str, cuts: tuple[int, ...]) -> list[str]:
    """``text`` cut at ``cuts``, if every piece reads as a message ([] if not): three
    words or more, or ending with a punctuation mark; the last one, two words or more."""
    ends = [0, *cuts, len(text)]
    pieces = [text[a:b].strip() for a, b in itertools.pairwise(ends)]
    for i, piece in enumerate(pieces):
        words = len(unmarked(piece).split())
        if not words or words < (2 if i == len(pieces) - 1 else 1 if piece[-1] in ",:;.!?" else 3):
            return []
    return pieces


def _fits(form: DateForm, ahead: int, week: int, day: date) -> bool:
    if form.weekend and day.weekday() < 5:
        return False
    if form.days is not None:
        return form.days[0] <= ahead <= form.days[1]
    return form.week == week


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _literal(text: str, change: Callable[[str], str]) -> str:
    """``text`` with ``change`` applied to the words around its values."""
    return "".join(
        part if part.startswith("\x01") else change(part) for part in _SPLIT_MARK.split(text)
    )
