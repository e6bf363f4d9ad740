"""A seeded multi-session conversation: a user talks to an AI assistant over
weeks and months, sharing their life and work, and questions ask what a memory
of it should still answer (modelled on LoCoMo and Multi-Session Chat).

What it promises (tests/test_sessions.py checks each):

- ``sessions`` sessions of 10 to 40 turns; turn ids ``S<session>:T<turn>``,
  both counted from 1; every turn unlabelled (no importance or category, not
  critical, not whitelisted) with its role (user or assistant), speaker (the
  user's first name, or ``assistant``) and session (its number as a string);
- the user opens each session (a greeting, sometimes with news) and the
  assistant has the last word; the assistant never speaks twice in a row, the
  user sometimes does;
- time: the first turn at START_MS; turns of a session 15 to 120 s apart;
  sessions 10 minutes to 30 days apart, with at least one gap under 8 hours
  and one of 14 days or more from 4 sessions on; time never goes back;
- facts the user states once (life events with dates, work, plans and
  decisions, amounts and counts, preferences and constraints, instructions to
  the assistant, tool and account problems), and one to three questions about
  each; a question names the turns that answer it, all said before it is
  asked;
- some facts change in a later session ("the wedding moved to June 21"): the
  question about the current value then names the update, not the stale
  statement; some questions combine two facts (two evidence turns); a recap
  by the assistant that restates a fact is evidence too;
- about a quarter of the questions are asked during the conversation, at the
  time of a user turn at least one session after all their evidence; the
  others at the end (``at`` None);
- with 20 sessions: 300 to 600 turns, 20% to 35% of them evidence, 0.3 to 0.5
  questions a turn;
- the rest is filler nobody asks about: greetings, goodbyes, small talk,
  advice, reactions, echoes; at least 10% of it are distractors with names or
  numbers in them ("I watched 3 episodes of The Office last night").

The same seed and sessions give the same transcript; another seed another one.

``style="texting"`` says the same conversation as people text (see
memevict.simulate.texting): the same facts, updates, recaps and questions as the
prose style of the seed, each turn as one to three short messages of its
speaker, with casual dates and times, abbreviations, lowercase, typos and
emoji. Its message ids count messages (``S<session>:T<message>``); a question's
evidence is, of each prose evidence turn, the message that holds the values it
asks about, and a question asked during the conversation is asked after the
last message of the user turn it follows. The prose style's dice are not
touched: texting has its own.

What is said is data: the names, pools and sentence templates are the JSON
files of ``templates/``, read and checked by memevict.simulate.wording.
"""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from memevict.simulate.texting import EVERYTHING, Said, Texter
from memevict.simulate.transcript import START_MS, MemoryTurn, Question, Transcript
from memevict.simulate.wording import Day, Kind, Money, Slot, Templates, World, read

SESSION_TURNS = (10, 40)
SESSION_MODE = 16  # most sessions are short, some long
TURN_GAP_MS = (15_000, 120_000)
_MINUTE = 60_000
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR
# Gaps between sessions, log-uniform within a band: (weight, shortest, longest).
GAP_BANDS = (
    (0.2, 10 * _MINUTE, 8 * _HOUR),  # later the same day
    (0.65, 8 * _HOUR, 14 * _DAY),
    (0.15, 14 * _DAY, 30 * _DAY),  # a quiet spell
)
ASKED_DURING = 0.28  # chance a question is asked in a later session, not at the end
BEATS = {"fact": 0.7, "chat": 0.17, "advice": 0.07, "update": 0.1, "fix": 0.05, "after": 0.04}
MAX_BEAT = 5  # turns in the longest beat
CLOSING = 4  # turns at the end of a session: a recap or a last exchange, and goodbyes
EXTRA_QUESTION = 0.7  # chance of each further question about a fact
TWO_IN_A_ROW = 0.12  # chance the user says a second turn before the assistant answers
RECAP = 0.4  # chance a session ends with the assistant's recap of its facts
NEWS = 0.35  # chance the user opens a session with news
FACT_SHARE = (0.25, 0.32)  # facts, updates and fixes: more fact beats below, fewer above
STYLES = ("prose", "texting")


@dataclass(slots=True)
class _Fact:
    kind: Kind
    slots: dict[str, object]
    session: int
    said: str  # the statement's id
    value: list[list[str]]  # versions of the value, each the ids of turns stating it, oldest first
    changes: int = 0
    done: bool = False  # fixed, or talked about after its date


@dataclass(frozen=True, slots=True)
class _Ask:
    text: str
    chains: tuple[list[list[str]], ...]  # a fact's versions each
    primary: bool = False  # only the turn that first states each fact's current value


def generate_sessions(seed: int = 1, sessions: int = 20, *, style: str = "prose") -> Transcript:
    """A reproducible conversation of ``sessions`` sessions and its questions,
    said in ``style``: "prose" or "texting" (the same conversation, as people text).

    The facts last about 25 sessions: later sessions are mostly small talk,
    updates and questions about earlier facts."""
    if isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 2:
        raise ValueError(f"sessions must be a whole number of at least 2, got {sessions!r}")
    if style not in STYLES:
        raise ValueError(f"style must be one of {', '.join(STYLES)}, got {style!r}")
    rng = random.Random(f"memevict sessions {seed}")
    words = read()
    texter = (
        Texter(random.Random(f"memevict texting {seed}"), words) if style == "texting" else None
    )
    talk = _Conversation(rng, words, texter)
    for number, gap in enumerate([0, *_gaps(rng, sessions - 1)], start=1):
        talk.session(number, gap)
    talk.combine(sessions)
    questions = talk.questions(sessions)
    if texter is None:
        return Transcript(
            tuple(talk.turns), f"generated sessions (seed {seed}, {sessions} sessions)", questions
        )
    return Transcript(
        tuple(talk.messages),
        f"generated sessions (seed {seed}, {sessions} sessions, texting)",
        talk.texted(questions),
    )


def _gaps(rng: random.Random, count: int) -> list[int]:
    """Gaps between sessions in ms, log-uniform within a band of GAP_BANDS;
    from 3 gaps on, the shortest and the longest band each at least once."""
    bands = rng.choices(range(len(GAP_BANDS)), [w for w, _, _ in GAP_BANDS], k=count)
    needed = (0, len(GAP_BANDS) - 1)
    for band in needed if count >= 3 else ():
        if band not in bands:
            # a gap whose band is not the only one of a needed band
            free = [i for i, b in enumerate(bands) if b not in needed or bands.count(b) > 1]
            bands[rng.choice(free)] = band
    gaps = []
    for band in bands:
        _, low, high = GAP_BANDS[band]
        gaps.append(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
    return gaps


def _persona(
    rng: random.Random, words: Templates
) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """The user's people, each a name of their own, and their company and city."""
    taken: set[str] = set()

    def name(pool: Sequence[str]) -> str:
        chosen = rng.choice([n for n in pool if n not in taken])
        taken.add(chosen)
        return chosen

    people = {role: name(pool) for role, pool in words.people.items()}
    people.update({thing: rng.choice(pool) for thing, pool in words.things.items()})
    groups = {g: tuple(name(pool) for _ in range(size)) for g, (pool, size) in words.groups.items()}
    return people, groups


# (a texted value is marked: the mark's head may come between "a" and the word)
_AN = re.compile(r"\b([Aa]) (?=(?:\x01[^\x02]*\x02)?(?:[aeiou]|[AEIOU][a-z]))")


def _when(fact: _Fact) -> date | None:
    """The fact's date, if its value is one."""
    value = fact.slots.get(fact.kind.value)
    return value if isinstance(value, date) else None


def _day_of(at: int) -> date:
    return datetime.fromtimestamp(at / 1000, tz=timezone.utc).date()


class _Conversation:
    """The turns said so far, the facts in them and the questions about them."""

    def __init__(self, rng: random.Random, words: Templates, texter: Texter | None) -> None:
        self.rng = rng
        self.texter = texter
        self.messages: list[MemoryTurn] = []  # texting: the messages of the turns
        self.sent = 0  # texting: messages sent in this session
        self.key: dict[str, str] = {}  # texting: turn -> the message holding its kept values
        self.last: dict[int, int] = {}  # texting: a turn's time -> its last message's
        self.words = words
        self.lines = words.lines
        people, groups = _persona(rng, words)
        self.world = World(rng, people, groups, _day_of(START_MS))
        self.turns: list[MemoryTurn] = []
        self.facts: list[_Fact] = []
        self.asks: list[_Ask] = []
        self.used: set[tuple[str, str]] = set()
        self.uses: Counter[str] = Counter()
        self.number = 0  # the current session
        self.turn = 0  # turns said in it
        self.now = START_MS
        self.chats: set[str] = set()  # small talk used in this session
        # Once the user asked for a nickname, the assistant calls them by no
        # name: a greeting with the nickname would answer the question about it.
        self.nickname = False
        self.stated = 0  # turns that state a fact, an update or a fix

    # -- turns

    def say(self, role: str, text: str, keep: Container[str] | None = None) -> str:
        """Say ``text``; ``keep``: the values a question may ask about (texting keeps
        them in one message)."""
        if self.turn:
            self.now += self.rng.randint(*TURN_GAP_MS)
        self.turn += 1
        turn_id = f"S{self.number}:T{self.turn}"
        speaker = self.world.people["user"] if role == "user" else "assistant"
        self.turns.append(
            MemoryTurn(
                turn_id,
                None,
                self.now,
                text=text,
                role=role,
                speaker=speaker,
                session=str(self.number),
            )
        )
        if self.texter is not None:
            self.send(turn_id, role, speaker, text, keep)
        return turn_id

    def send(
        self, turn_id: str, role: str, speaker: str, text: str, keep: Container[str] | None
    ) -> None:
        """The turn as texted: its messages, from the turn's time ``gap s`` apart."""
        assert self.texter is not None
        if self.turn == 1:
            self.sent = 0
        thought = self.texter.thought(text, keep)
        at = self.now
        ids = []
        for i, message in enumerate(thought.messages):
            if i:
                at += self.texter.gap()
            self.sent += 1
            ids.append(f"S{self.number}:T{self.sent}")
            self.messages.append(
                MemoryTurn(
                    ids[-1],
                    None,
                    at,
                    text=message,
                    role=role,
                    speaker=speaker,
                    session=str(self.number),
                )
            )
        if thought.key is not None:
            self.key[turn_id] = ids[thought.key]
        self.last[self.now] = at

    def render(self, template: str, slots: Mapping[str, object] | None = None) -> str:
        """What is said: in texting, with each value texted and marked."""
        if self.texter is None:
            return self.question(template, slots)
        values = {**self.world.people, **(slots or {})}
        return _AN.sub(r"\1n ", self.texter.render(template, values, self.world.today))

    def question(self, template: str, slots: Mapping[str, object] | None = None) -> str:
        """A question or a fact's label: as the prose style says it."""
        text = template.format_map({**self.world.people, **(slots or {})})
        return _AN.sub(r"\1n ", text)  # "a {item}" with an espresso machine

    def pick(self, templates: Sequence[str], slots: Mapping[str, object] | None = None) -> str:
        """One of ``templates``, rendered."""
        return self.render(self.rng.choice(templates), slots)

    def address(self, templates: Sequence[str]) -> str:
        """A greeting or goodbye, by the user's name unless they asked for a nickname."""
        return self.pick([t for t in templates if not self.nickname or "{user}" not in t])

    def draw(self, slots: Mapping[str, Slot]) -> dict[str, object]:
        drawn: dict[str, object] = {}
        for slot, draw in slots.items():
            drawn[slot] = draw(self.world, drawn)
        return drawn

    # -- sessions

    def session(self, number: int, gap: int) -> None:
        self.number, self.turn, self.now = number, 0, self.now + gap
        self.world.today = _day_of(self.now)
        self.world.people["weekday"] = self.words.weekdays[self.world.today.weekday()]
        self.chats = set()
        target = round(self.rng.triangular(*SESSION_TURNS, SESSION_MODE))
        news = self.new_fact() if number > 1 and self.rng.random() < NEWS else None
        if number == 1:
            self.say("user", self.pick(self.lines.introductions))
            self.say("assistant", self.pick(self.lines.first_welcomes))
        elif news is None:
            self.say("user", self.pick(self.lines.greetings))
            self.say("assistant", self.address(self.lines.welcomes))
        else:
            greeting = self.pick(self.lines.greetings)
            if greeting[-1] not in "!?,":
                greeting += ","
            self.state(news, f"{greeting} {self.pick(self.lines.news)} ".replace("  ", " "))
            self.say("assistant", self.pick(news.kind.replies, news.slots))
        first = len(self.facts)
        while self.turn + CLOSING < target and self.turn + CLOSING + MAX_BEAT <= SESSION_TURNS[1]:
            self.beat()
        self.close(self.facts[first:])

    def beat(self) -> None:
        kinds = {
            "fact": True,
            "chat": True,
            "advice": True,
            "update": bool(self.movable()),
            "fix": bool(self.fixable()),
            "after": bool(self.past()),
        }
        names = [k for k, ok in kinds.items() if ok]
        weights = dict(BEATS)
        share = self.stated / max(1, len(self.turns))
        if share < FACT_SHARE[0]:  # steer towards FACT_SHARE, whatever the dice said so far
            weights["fact"] *= 1.6
        elif share > FACT_SHARE[1]:
            weights["fact"] *= 0.6
        beat = self.rng.choices(names, [weights[k] for k in names])[0]
        if beat == "fact" and self.fact_beat():
            return
        if beat == "update":
            self.update_beat()
        elif beat == "fix":
            self.fix_beat()
        elif beat == "after":
            self.after_beat()
        elif beat == "advice":
            self.advice_beat()
        else:
            self.chat_beat()

    def close(self, facts: list[_Fact]) -> None:
        """The end of a session, 4 turns: a recap of its facts (asked for, or
        the assistant's own when the user says goodbye) or a last exchange,
        and goodbyes."""
        recappable = [f for f in facts if f.kind.recap]
        if not recappable or self.rng.random() >= RECAP:
            self.say("user", self.pick(self.lines.reactions))
            self.say("assistant", self.pick(self.lines.acknowledgements))
            self.say("user", self.pick(self.lines.goodbyes))
            self.say("assistant", self.address(self.lines.farewells))
            return
        told = self.rng.sample(recappable, min(len(recappable), self.rng.randint(1, 3)))
        clauses = [self.render(f.kind.recap, f.slots) for f in told]
        joined = ", ".join(clauses[:-1]) + (" and " if len(clauses) > 1 else "") + clauses[-1]
        summary = {"summary": Said(joined)}
        if self.rng.random() < 0.5:
            self.say("user", self.pick(self.lines.recap_asks))
            recap = self.say(
                "assistant", self.render(self.lines.recap_when_asked, summary), EVERYTHING
            )
            self.say("user", self.pick(self.lines.goodbyes))
            self.say("assistant", self.address(self.lines.farewells))
        else:
            self.say("user", self.pick(self.lines.goodbyes))
            recap = self.say(
                "assistant", self.render(self.lines.recap_at_goodbye, summary), EVERYTHING
            )
            self.say("user", self.pick(self.lines.thanks_for_the_recap))
            self.say("assistant", self.pick(self.lines.last_words))
        for fact in told:
            fact.value[-1].append(recap)

    # -- beats: each starts with the user and ends with the assistant

    def fact_beat(self) -> bool:
        fact = self.new_fact()
        if fact is None:
            return False
        self.state(fact)
        last = fact
        if self.rng.random() < TWO_IN_A_ROW:
            second = self.new_fact() if self.rng.random() < 0.5 else None
            if second is not None:
                self.state(second, self.pick(self.lines.also))
                last = second
            else:
                self.say("user", self.pick(self.lines.asides))
        self.say("assistant", self.pick(last.kind.replies, last.slots))
        if self.rng.random() < 0.15:
            self.say("user", self.pick(self.lines.follow_ups))
            self.say("assistant", self.pick(self.lines.keep_posted))
        return True

    def new_fact(self) -> _Fact | None:
        kinds = [k for k in self.words.kinds if self.uses[k.name] < k.again]
        if not kinds:
            return None
        weights = [8 if k.early and self.number <= 3 else 1 for k in kinds]
        for _ in range(10):
            kind = self.rng.choices(kinds, weights)[0]
            slots = self.draw(kind.slots)
            key = (kind.name, str(slots[kind.unique]) if kind.unique else "")
            if key in self.used:
                continue
            self.used.add(key)
            self.uses[kind.name] += 1
            return _Fact(kind, slots, self.number, "", [])
        return None

    def state(self, fact: _Fact, opening: str = "") -> None:
        kind, slots = fact.kind, fact.slots
        # what its statements name but not every question about it may be an answer:
        # texting keeps that in one message
        named = set.intersection(*(_names(ask) for ask in kind.asks))
        keep = (set().union(*(_names(said) for said in kind.says)) - named) | {kind.value}
        fact.said = self.say("user", opening + self.pick(kind.says, slots), keep)
        fact.value.append([fact.said])
        self.facts.append(fact)
        self.stated += 1
        if kind.name == "nickname":
            self.nickname = True
        self.asks.append(_Ask(self.question(kind.asks[0], slots), (fact.value,)))
        others = [a for a in kind.asks[1:] if self.rng.random() < EXTRA_QUESTION]
        if not others and kind.asks[1:] and kind.moves:
            others = [self.rng.choice(kind.asks[1:])]  # the statement stays evidence after a move
        for ask in others:
            self.asks.append(_Ask(self.question(ask, slots), ([[fact.said]],)))

    def movable(self) -> list[_Fact]:
        soon = self.world.today + timedelta(days=3)
        return [
            f
            for f in self.facts
            if f.kind.moves
            and f.changes < 2
            and f.session < self.number
            and ((when := _when(f)) is None or when > soon)
        ]

    def update_beat(self) -> None:
        fact = self.rng.choice(self.movable())
        kind = fact.kind
        fact.slots[kind.value] = self.moved(fact)
        said = self.say("user", self.pick(kind.moves, fact.slots), {kind.value})
        fact.value.append([said])
        fact.changes += 1
        self.stated += 1
        self.say("assistant", self.pick(self.lines.noted))

    def moved(self, fact: _Fact) -> object:
        old = fact.slots[fact.kind.value]
        if isinstance(old, date):
            shift = self.rng.choice((-14, -7, 7, 7, 14, 21))
            new = old + timedelta(days=shift)
            if new <= self.world.today + timedelta(days=2):
                new = old + timedelta(days=7)
            return Day.of(new)
        if fact.kind.rises and isinstance(old, int):
            return old + self.rng.randint(1, 3 if old < 10 else 6)
        if fact.kind.rises and isinstance(old, Money):
            return Money(old.dollars + self.rng.randrange(1_000, 10_001, 500))
        draw = fact.kind.slots[fact.kind.value]
        for _ in range(20):
            new_value = draw(self.world, fact.slots)
            if str(new_value) != str(old):
                return new_value
        return new_value

    def fixable(self) -> list[_Fact]:
        return [f for f in self.facts if f.kind.fix and not f.done and f.session < self.number]

    def fix_beat(self) -> None:
        fact = self.rng.choice(self.fixable())
        fix = fact.kind.fix
        assert fix is not None
        slots = {**fact.slots, **self.draw(fix.slots)}
        said = self.say("user", self.pick(fix.says, slots), set(fix.slots))
        self.asks.append(_Ask(self.question(fix.ask, slots), ([[said]],)))
        fact.done = True
        self.stated += 1
        self.say("assistant", self.pick(self.lines.fixed))

    def past(self) -> list[_Fact]:
        return [
            f
            for f in self.facts
            if f.kind.after
            and not f.done
            and (when := _when(f)) is not None
            and when < self.world.today
        ]

    def after_beat(self) -> None:
        fact = self.rng.choice(self.past())
        user, reply = self.rng.choice(fact.kind.after)
        self.say("user", self.render(user, fact.slots))
        self.say("assistant", self.render(reply, fact.slots))
        fact.done = True

    def chat_beat(self) -> None:
        chat = self.rng.choice([c for c in self.words.chats if c.user not in self.chats])
        self.chats.add(chat.user)
        slots = self.draw(chat.slots)
        self.say("user", self.render(chat.user, slots))
        if self.rng.random() < TWO_IN_A_ROW:
            self.say("user", self.pick(self.lines.asides))
        self.say("assistant", self.render(chat.reply, slots))
        if self.rng.random() < 0.25:
            self.say("user", self.pick(self.lines.how_about_you))
            self.say("assistant", self.pick(self.lines.small_talk_answers))

    def advice_beat(self) -> None:
        advice = self.rng.choice([a for a in self.words.advice if a.user not in self.chats])
        self.chats.add(advice.user)
        slots = self.draw(advice.slots)
        self.say("user", self.render(advice.user, slots))
        self.say("assistant", self.render(advice.reply, slots))
        if self.rng.random() < 0.5:
            self.say("user", self.pick(self.lines.reactions))
            if advice.plan and self.rng.random() < 0.5:
                plan = {"plan": Said(self.render(advice.plan, slots))}
                self.say("assistant", self.render(self.lines.advice_recap, plan))
            else:
                self.say("assistant", self.pick(self.lines.acknowledgements))

    # -- questions

    def combine(self, sessions: int) -> None:
        """Questions whose answer needs two facts: which date comes first, and
        what two purchases cost together."""
        for combine, text in self.lines.combined_questions.items():
            facts = [f for f in self.facts if f.kind.combine == combine]
            pairs = [(a, b) for i, a in enumerate(facts) for b in facts[i + 1 :]]
            for a, b in self.rng.sample(pairs, min(len(pairs), max(1, sessions // 3))):
                labels = {
                    "a": self.question(a.kind.label, a.slots),
                    "b": self.question(b.kind.label, b.slots),
                }
                self.asks.append(_Ask(self.question(text, labels), (a.value, b.value), True))

    def questions(self, sessions: int) -> tuple[Question, ...]:
        where = {t.id: (t.at, int(t.session or 0)) for t in self.turns}
        user_times: dict[int, list[int]] = {}
        for t in self.turns:
            if t.role == "user":
                user_times.setdefault(int(t.session or 0), []).append(t.at)
        during: list[Question] = []
        end: list[Question] = []
        texts: set[str] = set()
        for ask in self.asks:
            if ask.text in texts:
                continue
            texts.add(ask.text)
            first = max(where[chain[0][0]][1] for chain in ask.chains)
            if first < sessions and self.rng.random() < ASKED_DURING:
                session = self.rng.randint(first + 1, sessions)
                at = self.rng.choice(user_times[session])
                evidence = _evidence(ask, where, at, session)
                if evidence:
                    during.append(Question(ask.text, evidence, at))
                    continue
            end.append(Question(ask.text, _evidence(ask, where, None, None), None))
        during.sort(key=lambda q: q.at or 0)
        return (*during, *end)

    def texted(self, questions: Sequence[Question]) -> tuple[Question, ...]:
        """The questions about the texted messages: each evidence turn's key message,
        asked after the last message of the turn they were asked after."""
        at = {m.id: m.at for m in self.messages}
        found = []
        for q in questions:
            evidence = sorted({self.key[e] for e in q.evidence}, key=lambda e: at[e])
            when = None if q.at is None else self.last[q.at]
            found.append(Question(q.question, tuple(evidence), when))
        return tuple(found)


def _names(template: str) -> set[str]:
    """The slots and people a template names."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def _evidence(
    ask: _Ask, where: Mapping[str, tuple[int, int]], at: int | None, session: int | None
) -> tuple[str, ...]:
    """The turns that say each fact's value as it stands when the question is
    asked (at None: the end); () if that was said in the asking session."""
    ids: list[str] = []
    for chain in ask.chains:
        versions = chain if at is None else [v for v in chain if where[v[0]][0] < at]
        if not versions:
            return ()
        current = [i for i in versions[-1] if at is None or where[i][0] < at]
        if session is not None and any(where[i][1] >= session for i in current):
            return ()
        ids.extend(current[:1] if ask.primary else current)
    return tuple(sorted(dict.fromkeys(ids), key=lambda i: where[i][0]))
