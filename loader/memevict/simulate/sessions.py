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
"""

from __future__ import annotations

import math
import random
import re
import string
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

from memevict.simulate.transcript import START_MS, MemoryTurn, Question, Transcript

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

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


class _Day(date):
    """A date said the way people say it: "June 14"."""

    def __str__(self) -> str:
        return f"{_MONTHS[self.month - 1]} {self.day}"


@dataclass(frozen=True, slots=True)
class _Money:
    dollars: int

    def __str__(self) -> str:
        return f"${self.dollars:,}"


@dataclass(slots=True)
class _Ctx:
    """What slots are drawn from: the user's world and the day it is."""

    rng: random.Random
    people: dict[str, str]  # the user, family, manager, company, ...
    groups: dict[str, tuple[str, ...]]  # friends and coworkers
    today: date


Slot = Callable[[_Ctx, Mapping[str, object]], object]  # (world, slots drawn so far) -> value


def _pick(pool: Sequence[object]) -> Slot:
    return lambda c, s: c.rng.choice(pool)


def _num(low: int, high: int) -> Slot:
    return lambda c, s: c.rng.randint(low, high)


def _usd(low: int, high: int, step: int = 5) -> Slot:
    return lambda c, s: _Money(c.rng.randrange(low, high + 1, step))


def _ahead(low: int, high: int) -> Slot:
    """A day ``low`` to ``high`` days from today."""

    def draw(c: _Ctx, s: Mapping[str, object]) -> object:
        day = c.today + timedelta(days=c.rng.randint(low, high))
        return _Day(day.year, day.month, day.day)

    return draw


def _one_of(group: str) -> Slot:
    return lambda c, s: c.rng.choice(c.groups[group])


def _other(pool: Sequence[object], slot: str) -> Slot:
    """A value from ``pool`` other than the slot ``slot`` drawn before."""
    return lambda c, s: c.rng.choice([x for x in pool if x != s[slot]])


def _keyed(table: Mapping[str, Sequence[object]], key: str) -> Slot:
    """A value for the slot ``key`` drawn before: a price for an item, ..."""
    return lambda c, s: c.rng.choice(table[str(s[key])])


@dataclass(frozen=True, slots=True)
class _Fix:
    """A problem solved in a later session, and the question about the fix."""

    says: tuple[str, ...]
    ask: str
    slots: Mapping[str, Slot] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Kind:
    """A kind of fact the user states, and what is asked about it.

    asks[0] is about the ``value`` slot, the one that ``moves`` change and a
    ``recap`` restates; the other asks are about what never changes."""

    name: str
    says: tuple[str, ...]
    replies: tuple[str, ...]  # never restating what is asked
    asks: tuple[str, ...]
    slots: Mapping[str, Slot] = field(default_factory=dict)
    value: str = ""
    moves: tuple[str, ...] = ()
    rises: bool = False  # a count that only goes up when it moves
    recap: str = ""
    label: str = ""  # names the fact in a question that combines two facts
    combine: str = ""  # "date" or "spend": which combined question it may be in
    unique: str = ""  # the slot whose value makes the fact a new one
    again: int = 1  # facts of this kind in one conversation at most
    early: bool = False  # likelier in the first sessions
    fix: _Fix | None = None
    after: tuple[tuple[str, str], ...] = ()  # (user, assistant) once the date has passed


# -- pools -----------------------------------------------------------------

_NAMES = (
    "Priya", "Diego", "Hana", "Marcus", "Leila", "Tom", "Aiko", "Omar", "Chloe",
    "Jonas", "Ines", "Kwame", "Elena", "Ravi", "Zoe", "Lukas", "Mei", "Nadia",
    "Theo", "Amara", "Felix", "Yara", "Mateo", "Grace", "Tariq", "Isla", "Jamal",
    "Kira", "Paulo", "Saanvi", "Ben", "Clara", "Dev", "Farah", "Hugo", "Ivy",
    "Jin", "Lars", "Mira", "Nico", "Olga", "Rosa", "Sven", "Tess", "Uma", "Wen",
    "Yusuf", "Noor", "Emil", "Alba",
)  # fmt: skip
_WOMEN = ("Maya", "Sofia", "Lena", "Anika", "Ruth", "Keiko", "Bianca", "Hannah", "Fatima", "Julia")
_MEN = ("Leo", "Daniel", "Rafael", "Kenji", "Samir", "Oskar", "Patrick", "Arjun", "Pablo", "Erik")
_MOMS = ("Linda", "Carmen", "Susan", "Farida", "Ingrid", "Yoko", "Margaret", "Helen", "Anita")
_DADS = ("Robert", "Jorge", "Ahmed", "Klaus", "Hiroshi", "Peter", "Raj", "Michael", "Tomas")
_COMPANIES = (
    "Northwind Labs", "Brightpath", "Kestrel Health", "Ouro Logistics", "Fernleaf Studios",
    "Tidewater Bank", "Quillsoft", "Meridian Foods", "Halcyon Energy", "Parcelo",
)  # fmt: skip
_HOMES = ("Chicago", "Toronto", "Manchester", "Berlin", "Austin", "Melbourne", "Dublin", "Denver")
_CITIES = (
    "Lisbon", "Kyoto", "Mexico City", "Reykjavik", "Cape Town", "Hanoi", "Marrakech",
    "Vancouver", "Athens", "Buenos Aires", "Edinburgh", "Seoul", "Copenhagen", "Porto",
)  # fmt: skip
_STREETS = (
    "Maple Street", "Harbor Road", "Elm Avenue", "Kingsley Lane", "Orchard Way",
    "Bellevue Drive", "Cedar Court", "Wharf Street", "Linden Road",
)  # fmt: skip
_TIMES = (
    "8:30 am",
    "9 am",
    "10:15 am",
    "11:45 am",
    "1 pm",
    "2:30 pm",
    "3:45 pm",
    "4 pm",
    "5:30 pm",
)
_WEEKLY = tuple(
    f"{day} at {time}"
    for day in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
    for time in ("9 am", "9:30 am", "10 am", "11 am", "2 pm")
)
_APPOINTMENTS = (
    "dentist appointment", "eye exam", "physio session", "haircut", "annual checkup",
    "car service", "dermatologist appointment", "passport appointment",
    "meeting with the tax advisor", "bank appointment", "vet visit",
)  # fmt: skip
_BANDS = (
    "Khruangbin", "Phoebe Bridgers", "Arctic Monkeys", "Bonobo", "Florence + the Machine",
    "Vampire Weekend", "Hozier", "Little Simz", "Big Thief", "Fleet Foxes",
)  # fmt: skip
_VENUES = ("the Roundhouse", "the Fillmore", "Massey Hall", "the Forum", "the O2 Academy")
_PET_KINDS = ("rescue dog", "tabby cat", "beagle puppy", "greyhound", "kitten")
_PET_NAMES = ("Biscuit", "Mochi", "Pepper", "Olive", "Noodle", "Juniper", "Pickles", "Waffles")
_GIFTS = (
    "a pottery class", "a vintage film camera", "a weekend in the mountains",
    "a cast-iron pan set", "a fancy fountain pen", "a watercolor set", "a smart watch",
)  # fmt: skip
_RACES = ("half marathon", "10K", "sprint triathlon", "charity bike ride", "trail run")
_ROLES = (
    "product manager", "data analyst", "UX designer", "backend engineer", "marketing lead",
    "account manager", "QA engineer", "operations coordinator", "sales engineer",
)  # fmt: skip
_PROJECTS = ("Atlas", "Bluebird", "Copperline", "Driftwood", "Everest", "Falcon", "Granite")
_CLIENTS = (
    "Globex",
    "Initech",
    "Umbrella Health",
    "Stark Freight",
    "Wayfarer Hotels",
    "Acme Retail",
)
_CONFERENCES = ("PyCon", "Web Summit", "DevOpsDays", "Config", "Strata", "LeadDev")
_CARS = (
    "Toyota Corolla hybrid", "Honda Civic", "Kia Niro EV", "VW Golf", "Mazda 3",
    "Hyundai Ioniq 5", "Subaru Outback", "Tesla Model 3",
)  # fmt: skip
_LANGUAGES = ("Spanish", "Japanese", "Portuguese", "Italian", "Korean", "German", "Mandarin")
_GYMS = ("PureGym", "Crunch", "Equinox", "the climbing gym downtown", "Core Collective", "the YMCA")
_COURSES = (
    "pottery", "Python", "UX research", "sourdough baking", "public speaking",
    "watercolor", "data visualization", "first aid",
)  # fmt: skip
_PRICES: Mapping[str, Sequence[object]] = {
    item: tuple(_Money(d) for d in range(low, high + 1, step))
    for item, low, high, step in (
        ("standing desk", 350, 900, 10),
        ("espresso machine", 250, 1200, 10),
        ("road bike", 700, 2500, 50),
        ("couch", 600, 2200, 50),
        ("pair of running shoes", 90, 220, 5),
        ("noise-cancelling headphones", 180, 450, 5),
        ("winter coat", 120, 500, 5),
        ("new phone", 500, 1300, 10),
        ("robot vacuum", 200, 800, 10),
        ("air fryer", 60, 200, 5),
        ("desk chair", 150, 700, 10),
        ("e-reader", 100, 280, 5),
        ("mechanical keyboard", 80, 260, 5),
        ("mattress", 500, 2000, 50),
    )
}
_FAVOURITES: Mapping[str, Sequence[object]] = {
    "cuisine": ("Ethiopian", "Sichuan", "Georgian", "Peruvian", "Lebanese", "Korean"),
    "author": ("Ursula K. Le Guin", "Haruki Murakami", "Toni Morrison", "Terry Pratchett"),
    "movie": ("Spirited Away", "Arrival", "Before Sunrise", "The Grand Budapest Hotel"),
    "coffee order": ("an oat flat white", "a cortado", "a double espresso", "an iced latte"),
    "board game": ("Wingspan", "Catan", "Codenames", "Ticket to Ride", "Azul"),
    "podcast": ("Radiolab", "99% Invisible", "Hard Fork", "Reply All", "Search Engine"),
    "ice cream flavour": ("pistachio", "salted caramel", "mint chocolate chip", "black sesame"),
    "season": ("autumn", "spring", "early summer"),
    "snack": ("salt and vinegar chips", "dried mango", "dark chocolate almonds", "popcorn"),
    "hiking trail": ("the Ridge Loop", "Eagle Falls", "the Old Quarry trail", "Pine Hollow"),
}
_HATES = (
    "cilantro", "open-plan offices", "voice messages", "the sound of chewing",
    "pineapple on pizza", "surprise parties", "group chats that never end",
)  # fmt: skip
_ALLERGIES = ("peanuts", "shellfish", "penicillin", "sesame", "tree nuts", "latex", "kiwi")
_DIETS = ("vegetarian", "pescatarian", "vegan", "gluten-free", "dairy-free")
_NICKNAMES = ("Jay", "Bee", "Sunny", "Kit", "Ace", "Mo", "Pip", "Dee")
_SIGNOFFS = ("Cheers", "Best", "Warmly", "Talk soon", "All the best", "Thanks again")
_CODE = ("Python", "TypeScript", "Go", "Kotlin", "Rust", "Java", "C#")
_TOPICS = ("the election", "crypto", "my ex", "the layoffs", "the housing market", "my weight")
_ZONES = ("Central", "Pacific", "Eastern", "CET", "GMT", "AEST")
_BANNED = ("emojis", "bullet points", "exclamation marks", "tables", "the word 'delve'")
_TOOLS = (
    "Salesforce", "Looker", "Notion", "Jira", "Figma", "HubSpot", "QuickBooks", "Airtable",
    "Tableau", "Asana",
)  # fmt: skip
_ERRORS = ("503", "504", "429", "500", "E-1042", "ERR_TIMEOUT", "413", "E-2210")
_CAUSES = (
    "an expired API token", "a file over the size limit", "a bug in their last release",
    "a permissions change on our workspace", "rate limiting after a bulk import",
)  # fmt: skip
_SERVICES = ("bank", "Google", "Steam", "insurance portal", "Apple ID", "PayPal", "airline")
_WAYS = (
    "calling support and verifying my ID", "resetting 2FA with a backup code",
    "a password reset link that finally arrived", "going to the branch in person",
)  # fmt: skip
_DOCS = (
    "quarterly report", "grant proposal", "board deck", "hiring plan", "security audit",
    "budget forecast", "roadmap review",
)  # fmt: skip
_METRICS = (
    "launch-day signups", "beta testers", "new enterprise deals", "weekly active users",
    "bug reports after the release",
)  # fmt: skip
_RESTAURANTS = ("Sora", "Little Fig", "Casa Amaro", "The Copper Pot", "Bao House", "Nonna's")
_DISHES = (
    "miso black cod", "cacio e pepe", "lamb shawarma", "pork belly bao", "mushroom risotto",
    "butter chicken", "brisket tacos", "tuna tartare",
)  # fmt: skip
_BOOKS = (
    "Project Hail Mary", "Klara and the Sun", "The Overstory", "Piranesi", "Educated",
    "Sea of Tranquility", "The Left Hand of Darkness", "Braiding Sweetgrass",
)  # fmt: skip
_KID_EVENTS = ("school play", "soccer final", "piano recital", "science fair", "swim meet")
_VISITS = ("plumber", "electrician", "internet technician", "boiler inspector", "locksmith")
_ACTIVITIES = (
    "a cooking class", "an escape room", "a day hike", "a pottery workshop", "karaoke",
    "a wine tasting", "a kayaking trip",
)  # fmt: skip
_SUBSCRIPTIONS = ("Netflix", "Spotify", "my meal kit", "the cloud storage plan", "Duolingo")
_GOALS = (
    "run a full marathon", "read 30 books", "learn to swim properly", "save for a sabbatical",
    "finish the novel I started", "get my AWS certification",
)  # fmt: skip
_VOLUNTEER = ("food bank", "animal shelter", "community garden", "public library")
_SHOWS = (
    "The Office", "Severance", "The Bear", "Ted Lasso", "Succession", "Slow Horses",
    "Great British Bake Off", "Only Murders in the Building", "Bluey",
)  # fmt: skip
_MOVIES = ("Paddington 2", "Past Lives", "Dune", "Little Women", "Up", "Everything Everywhere")
_TEAMS = ("Lakers", "Arsenal", "Cubs", "Real Madrid", "Leafs", "Bulls")
_SCORES = ("3-2", "2-1", "112-108", "4-4", "0-3", "98-101")
_FOODS = ("burrito", "poke bowl", "falafel wrap", "pad thai", "ramen", "bánh mì")
_WEATHER = ("freezing", "gorgeous", "so humid", "grey and drizzly", "weirdly warm")
_CLOCKS = ("2 pm", "10 am", "3:30", "4 pm", "11 am", "1:15")
_STORES = ("IKEA", "Uniqlo", "REI", "Target", "Zara", "Best Buy")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# -- the facts -------------------------------------------------------------

_KINDS: tuple[_Kind, ...] = (
    # life events with dates
    _Kind(
        "wedding",
        says=(
            "big news: my friend {who} is getting married in {place} on {date}!",
            "{who} finally set a wedding date: {date}, in {place}. so happy for them",
        ),
        replies=(
            "That's wonderful news, congratulations to {who}! Will you need help planning travel?",
            "How exciting! Are you going to be part of the wedding party?",
        ),
        asks=("When is {who}'s wedding?", "Where is {user}'s friend {who} getting married?"),
        slots={"who": _one_of("friend"), "place": _pick(_CITIES), "date": _ahead(40, 150)},
        value="date",
        moves=(
            "update on {who}'s wedding: it moved to {date}, the venue double-booked",
            "{who} just texted me, the wedding is now on {date} instead",
        ),
        recap="{who}'s wedding is on {date}",
        label="{who}'s wedding",
        combine="date",
        unique="who",
        again=2,
        after=(
            ("{who}'s wedding was beautiful, I cried during the vows", "Aww, that sounds lovely!"),
        ),
    ),
    _Kind(
        "baby",
        says=("my sister {sister} is pregnant!! the due date is {date}",),
        replies=("Congratulations, you're going to be an aunt or uncle! How is {sister} feeling?",),
        asks=("When is {user}'s sister {sister} due?", "Who in {user}'s family is expecting?"),
        slots={"date": _ahead(60, 200)},
        value="date",
        moves=("{sister}'s doctor moved the due date to {date}",),
        recap="{sister}'s due date is {date}",
        label="{sister}'s due date",
        combine="date",
    ),
    _Kind(
        "mom-birthday",
        says=(
            "my mom {mom} turns {age} on {date}, thinking of a surprise party",
            "mom's birthday is coming up, she turns {age} on {date}",
        ),
        replies=(
            "A surprise party sounds like a lovely idea. Want help with a guest list?",
            "That's a big one! Do you know how you want to celebrate?",
        ),
        asks=("When is {user}'s mom's birthday?", "How old is {user}'s mother turning?"),
        slots={"age": _num(55, 72), "date": _ahead(14, 120)},
        value="date",
        recap="your mom's birthday is on {date}",
        label="{user}'s mom's birthday",
        combine="date",
    ),
    _Kind(
        "birthday",
        says=(
            "{who}'s birthday is on {date}, we're doing dinner at {restaurant}",
            "note to self: {who}'s birthday, {date}. booked a table at {restaurant}",
        ),
        replies=(
            "Sounds like a fun night! Do you already have a gift for {who}?",
            "Nice, a birthday dinner is always a good plan.",
        ),
        asks=("When is {who}'s birthday?", "Where is {user} having dinner for {who}'s birthday?"),
        slots={"who": _one_of("friend"), "date": _ahead(7, 90), "restaurant": _pick(_RESTAURANTS)},
        value="date",
        recap="{who}'s birthday dinner is on {date}",
        label="{who}'s birthday",
        combine="date",
        unique="who",
        again=4,
    ),
    _Kind(
        "appointment",
        says=(
            "finally booked the {what} for {date} at {time}",
            "reminder for myself: {what} on {date}, {time}",
            "got a {what} on {date} at {time}, took forever to get a slot",
        ),
        replies=(
            "Good that it's booked! Want me to remind you the day before?",
            "Nice, one less thing on the to-do list.",
        ),
        asks=("When is {user}'s {what}?", "What time is {user}'s {what}?"),
        slots={"what": _pick(_APPOINTMENTS), "date": _ahead(3, 40), "time": _pick(_TIMES)},
        value="date",
        moves=(
            "had to reschedule the {what}, it's now on {date}, same time",
            "the {what} got moved to {date}, they called this morning",
        ),
        recap="your {what} is on {date}",
        label="{user}'s {what}",
        combine="date",
        unique="what",
        again=6,
        after=(
            ("the {what} went fine, nothing to worry about", "That's a relief, glad it went well."),
        ),
    ),
    _Kind(
        "trip",
        says=(
            "we booked it! {partner} and I fly to {place} on {date} for {days} days",
            "trip planned: {place} with {partner}, leaving {date}, {days} days. can't wait",
        ),
        replies=(
            "That sounds amazing! Do you want some ideas for things to do there?",
            "What a great trip to look forward to. Have you sorted out where to stay?",
        ),
        asks=(
            "When does {user} leave for {place}?",
            "How many days is {user}'s trip to {place}?",
            "Who is {user} going to {place} with?",
        ),
        slots={"place": _pick(_CITIES), "date": _ahead(20, 150), "days": _num(3, 12)},
        value="date",
        moves=(
            "flights changed, we now leave for {place} on {date}",
            "we pushed the {place} trip to {date}, work got crazy",
        ),
        recap="you fly to {place} on {date}",
        label="{user}'s trip to {place}",
        combine="date",
        unique="place",
        again=4,
        after=(
            ("back from {place}! jet lag is brutal", "Welcome back! I hope the trip was worth it."),
        ),
    ),
    _Kind(
        "move",
        says=(
            "we signed the lease!! moving to the new place on {street} on {date}. rent is {rent} "
            "a month",
        ),
        replies=("Congratulations on the new place! Moving is a lot, do you need a checklist?",),
        asks=(
            "When is {user} moving to the new apartment?",
            "How much is the rent at {user}'s new apartment?",
            "What street is {user}'s new apartment on?",
        ),
        slots={"street": _pick(_STREETS), "date": _ahead(20, 60), "rent": _usd(1400, 3200, 50)},
        value="date",
        moves=("the move got pushed to {date}, the painters are late",),
        recap="moving day is {date}",
        label="{user}'s move",
        combine="date",
    ),
    _Kind(
        "race",
        says=("signed up for the {place} {race} on {date}, no backing out now",),
        replies=("That's brave! Do you want a training plan?",),
        asks=("When is the {race} {user} signed up for?", "Where is {user}'s {race}?"),
        slots={"race": _pick(_RACES), "place": _pick(_HOMES), "date": _ahead(40, 150)},
        value="date",
        recap="the {race} is on {date}",
        label="{user}'s {race}",
        combine="date",
        after=(
            (
                "I finished the {race}!! legs are jelly",
                "Congratulations, that's a big achievement!",
            ),
        ),
    ),
    _Kind(
        "concert",
        says=(
            "got tickets to see {band} at {venue} on {date}! paid {price} for two",
            "{band} at {venue}, {date}. tickets were {price} for the two of us but worth it",
        ),
        replies=("Great choice, they're supposed to be amazing live!", "Oh fun, enjoy the show!"),
        asks=(
            "How much did {user} pay for the {band} tickets?",
            "When is the {band} concert {user} is going to?",
            "Where is {user} seeing {band}?",
        ),
        slots={
            "band": _pick(_BANDS),
            "venue": _pick(_VENUES),
            "date": _ahead(14, 120),
            "price": _usd(60, 380),
        },
        value="price",
        recap="the {band} tickets cost {price}",
        label="the {band} tickets",
        combine="spend",
        unique="band",
        again=2,
    ),
    _Kind(
        "pet",
        says=("we adopted a {kind}!! her name is {pet}, she's {age} years old",),
        replies=("Welcome to the family! How is she settling in?",),
        asks=(
            "What is the name of {user}'s pet?",
            "What kind of pet did {user} adopt?",
            "How old was {user}'s pet when adopted?",
        ),
        slots={"kind": _pick(_PET_KINDS), "pet": _pick(_PET_NAMES), "age": _num(2, 7)},
        value="pet",
    ),
    _Kind(
        "gift",
        says=("{partner}'s birthday is on {date} and I think I'm getting {gift}",),
        replies=("That's a thoughtful idea, I bet {partner} will love it.",),
        asks=(
            "What is {user} getting {partner} for their birthday?",
            "When is {partner}'s birthday?",
        ),
        slots={"date": _ahead(20, 120), "gift": _pick(_GIFTS)},
        value="gift",
        moves=("changed my mind on {partner}'s present, getting {gift} instead",),
        recap="you're getting {partner} {gift}",
    ),
    _Kind(
        "brother-birthday",
        says=("my brother {brother} turns {age} on {date}",),
        replies=("A milestone! Are you planning anything for him?",),
        asks=("When is {user}'s brother's birthday?", "How old is {user}'s brother turning?"),
        slots={"age": _num(20, 45), "date": _ahead(10, 120)},
        value="date",
        label="{brother}'s birthday",
        combine="date",
    ),
    _Kind(
        "kid-event",
        says=("my nephew {nephew}'s {event} is on {date}, I promised I'd be there",),
        replies=("That's sweet of you, he'll be thrilled you came.",),
        asks=("When is {user}'s nephew's {event}?", "Whose {event} did {user} promise to attend?"),
        slots={"event": _pick(_KID_EVENTS), "date": _ahead(5, 60)},
        value="date",
        label="{nephew}'s {event}",
        combine="date",
        unique="event",
        again=2,
    ),
    _Kind(
        "plans",
        says=(
            "{who} and I are doing {activity} on {date}",
            "booked {activity} with {who} for {date}",
        ),
        replies=("That sounds like a great day out!", "Fun! Have you done that before?"),
        asks=(
            "When are {user} and {who} doing {activity}?",
            "What activity does {user} have planned with {who}?",
        ),
        slots={"who": _one_of("friend"), "activity": _pick(_ACTIVITIES), "date": _ahead(4, 45)},
        value="date",
        moves=("{who} can't make it that day, so {activity} is now on {date}",),
        recap="{activity} with {who} is on {date}",
        label="{activity} with {who}",
        combine="date",
        unique="activity",
        again=4,
    ),
    _Kind(
        "visit",
        says=("the {visit} is coming on {date} between {time} and lunch, ugh",),
        replies=("At least it's getting fixed. Can you work from home that day?",),
        asks=(
            "When is the {visit} coming to {user}'s place?",
            "From what time could the {visit} arrive?",
        ),
        slots={"visit": _pick(_VISITS), "date": _ahead(2, 20), "time": _pick(_TIMES[:4])},
        value="date",
        moves=("the {visit} cancelled, new date is {date}",),
        label="the {visit}'s visit",
        combine="date",
        unique="visit",
        again=2,
    ),
    _Kind(
        "home",
        says=(
            "I live in {city}, moved here {years} years ago",
            "been in {city} for {years} years now and I still get lost",
        ),
        replies=("That's a good stretch of time. Do you like it there?",),
        asks=("Which city does {user} live in?", "How many years has {user} lived in {city}?"),
        slots={"years": _num(2, 12)},
        value="city",
        early=True,
    ),
    _Kind(
        "partner",
        says=("my partner {partner} and I have been together {years} years this spring",),
        replies=("That's lovely! Do you two have anything planned to celebrate?",),
        asks=(
            "What is the name of {user}'s partner?",
            "How long have {user} and {partner} been together?",
        ),
        slots={"years": _num(2, 11)},
        value="partner",
        early=True,
    ),
    # work
    _Kind(
        "job",
        says=(
            "started my new job today! I'm a {role} at {company}",
            "quick intro since we haven't talked much: I work as a {role} at {company}",
        ),
        replies=(
            "Nice to hear! How are you finding it so far?",
            "Thanks for sharing, good to know!",
        ),
        asks=("Where does {user} work?", "What is {user}'s job title?"),
        slots={"role": _pick(_ROLES)},
        value="company",
        early=True,
    ),
    _Kind(
        "manager",
        says=("my manager is {manager}, super nice but always double-books me",),
        replies=("That sounds frustrating, even with a nice manager.",),
        asks=("Who is {user}'s manager?", "Who does {user} say always double-books them?"),
        value="manager",
        early=True,
    ),
    _Kind(
        "launch",
        says=(
            "the {project} launch is set for {date}, we're all stressed",
            "big deadline alert: project {project} goes live on {date}",
        ),
        replies=(
            "That's a big milestone. Is the team on track?",
            "Good luck, launches are intense!",
        ),
        asks=("When is the {project} launch?",),
        slots={"project": _pick(_PROJECTS), "date": _ahead(20, 90)},
        value="date",
        moves=(
            "{project} launch got pushed to {date}, legal needs more time",
            "plot twist, {project} moved to {date}",
        ),
        recap="the {project} launch is on {date}",
        label="the {project} launch",
        combine="date",
        unique="project",
        again=4,
    ),
    _Kind(
        "budget",
        says=("our budget for {project} got approved: {amount} for the quarter",),
        replies=("Congrats on getting it approved! That should make planning easier.",),
        asks=("How much budget was approved for {project}?",),
        slots={"project": _pick(_PROJECTS), "amount": _usd(20_000, 250_000, 5_000)},
        value="amount",
        moves=("finance cut the {project} budget to {amount}, not thrilled",),
        recap="the {project} budget is {amount}",
    ),
    _Kind(
        "hire",
        says=("we just hired {hire} as a {role}, that makes our team {team} people",),
        replies=("Welcome to the team, {hire}! A bigger team should take some load off you.",),
        asks=("How many people are on {user}'s team?", "Who did {user}'s team just hire?"),
        slots={"role": _pick(_ROLES), "team": _num(4, 14)},
        value="team",
    ),
    _Kind(
        "standup",
        says=("I have a standup every {slot} with my team, so I'm never free then",),
        replies=("Good to know, I'll keep that in mind when we plan things.",),
        asks=("When is {user}'s weekly standup?",),
        slots={"slot": _pick(_WEEKLY)},
        value="slot",
        moves=("standup changed, it's every {slot} now",),
        recap="standup is every {slot}",
    ),
    _Kind(
        "review",
        says=("my performance review with {manager} is on {date}, kind of nervous",),
        replies=("Totally normal to be nervous. Want to prepare some talking points together?",),
        asks=("When is {user}'s performance review?", "Who is {user}'s performance review with?"),
        slots={"date": _ahead(5, 40)},
        value="date",
        moves=("{manager} moved my review to {date}, so more waiting",),
        recap="your review is on {date}",
        label="{user}'s performance review",
        combine="date",
    ),
    _Kind(
        "raise",
        says=("I GOT THE RAISE! {pct}% starting next month",),
        replies=("That's fantastic news, you earned it!",),
        asks=("What percentage raise did {user} get?", "When does {user}'s raise take effect?"),
        slots={"pct": _num(3, 12)},
        value="pct",
    ),
    _Kind(
        "client",
        says=("our biggest client is {client}, their contract renews in {month}",),
        replies=("So that renewal is a big deal for the whole company.",),
        asks=(
            "What is the biggest client of {user}'s company?",
            "When does {client}'s contract renew?",
        ),
        slots={"client": _pick(_CLIENTS), "month": _pick(_MONTHS)},
        value="client",
    ),
    _Kind(
        "client-meeting",
        says=("meeting with {client} on {date} at {time} to go over the renewal, wish me luck",),
        replies=("Good luck! Do you want to run through your pitch beforehand?",),
        asks=(
            "When is {user}'s meeting with {client}?",
            "What time is {user}'s meeting with {client}?",
        ),
        slots={"client": _pick(_CLIENTS), "date": _ahead(3, 30), "time": _pick(_TIMES)},
        value="date",
        moves=("{client} asked to move our meeting to {date}",),
        label="the {client} meeting",
        combine="date",
        unique="client",
        again=2,
    ),
    _Kind(
        "on-call",
        says=("I'm on call the week of {date}, don't let me plan anything that week",),
        replies=("Noted. On-call weeks are no time for big plans.",),
        asks=("Which week is {user} on call?",),
        slots={"date": _ahead(10, 60), "coworker": _one_of("coworker")},
        value="date",
        moves=("swapped on-call with {coworker}, so it's now the week of {date}",),
        label="{user}'s on-call week",
        combine="date",
    ),
    _Kind(
        "talk",
        says=("my talk got accepted at {conference} in {place}!! it's on {date}",),
        replies=("Congratulations, that's a big deal! What's the talk about?",),
        asks=("When is {user}'s talk at {conference}?", "Where is {conference} held this year?"),
        slots={"conference": _pick(_CONFERENCES), "place": _pick(_CITIES), "date": _ahead(30, 150)},
        value="date",
        recap="your {conference} talk is on {date}",
        label="{user}'s {conference} talk",
        combine="date",
    ),
    _Kind(
        "deadline",
        says=("the {doc} is due {date} and I haven't started", "{doc} due on {date}, send help"),
        replies=(
            "Want to break it into smaller pieces together?",
            "You've got this, one step at a time.",
        ),
        asks=("When is {user}'s {doc} due?",),
        slots={"doc": _pick(_DOCS), "date": _ahead(3, 30)},
        value="date",
        moves=("got an extension on the {doc}, now due {date}",),
        recap="the {doc} is due {date}",
        label="the {doc} deadline",
        combine="date",
        unique="doc",
        again=5,
    ),
    _Kind(
        "metric",
        says=(
            "we had {n} {metric}, {manager} was thrilled",
            "numbers are in: {n} {metric}, and {manager} is thrilled",
        ),
        replies=(
            "That's a great result, congrats to the team!",
            "Nice, is that above what you expected?",
        ),
        asks=("How many {metric} did {user}'s team report?", "Who was thrilled by the {metric}?"),
        slots={"metric": _pick(_METRICS), "n": _num(14, 940)},
        value="n",
        unique="metric",
        again=4,
    ),
    _Kind(
        "office",
        says=("new policy: we have to be in the office {n} days a week now",),
        replies=("That's a big change. How do you feel about it?",),
        asks=("How many days a week does {user} have to be in the office?",),
        slots={"n": _pick((2, 3, 4))},
        value="n",
        moves=("they changed the office policy again, it's {n} days a week now",),
    ),
    _Kind(
        "work-trip",
        says=("{manager} is sending me to {place} for {days} days in {month} to meet a partner",),
        replies=("A work trip can be a nice change of scene. Have you been there before?",),
        asks=("Where is {user}'s work trip?", "How many days is {user}'s work trip?"),
        slots={"place": _pick(_CITIES), "days": _num(2, 6), "month": _pick(_MONTHS)},
        value="place",
    ),
    # plans and decisions
    _Kind(
        "car",
        says=("ok decision made: going with the {car}, not the {other}",),
        replies=("Sounds like a sensible choice. Was it the price or the test drive?",),
        asks=("Which car did {user} decide to buy?",),
        slots={"car": _pick(_CARS), "other": _other(_CARS, "car")},
        value="car",
        moves=("changed my mind on the car, getting the {car} after all",),
        recap="you're buying the {car}",
    ),
    _Kind(
        "language",
        says=("I've decided to learn {language}. goal is {mins} minutes a day on the app",),
        replies=("That's a great goal! Consistency beats intensity with languages.",),
        asks=(
            "How many minutes a day does {user} want to study {language}?",
            "Which language is {user} learning?",
        ),
        slots={"language": _pick(_LANGUAGES), "mins": _num(10, 45)},
        value="mins",
        moves=("bumping my {language} practice up to {mins} minutes a day",),
        rises=True,
    ),
    _Kind(
        "gym",
        says=("switched gyms, I'm at {gym} now, {price} a month",),
        replies=("A fresh gym can be really motivating!",),
        asks=("Which gym does {user} go to now?", "How much is {user}'s gym membership a month?"),
        slots={"gym": _pick(_GYMS), "price": _usd(25, 140)},
        value="gym",
    ),
    _Kind(
        "course",
        says=("signed up for a {course} course, starts {date}, it cost me {price}",),
        replies=("Learning something new is always a good investment. Excited?",),
        asks=(
            "How much did {user} pay for the {course} course?",
            "When does {user}'s {course} course start?",
        ),
        slots={"course": _pick(_COURSES), "date": _ahead(7, 60), "price": _usd(80, 900)},
        value="price",
        label="the {course} course",
        combine="spend",
    ),
    _Kind(
        "time-off",
        says=("just put in for {days} days off in {month}, fingers crossed",),
        replies=("You deserve a break. Any plans yet?",),
        asks=("How many days off did {user} request?", "In which month is {user} taking time off?"),
        slots={"days": _num(2, 10), "month": _pick(_MONTHS)},
        value="days",
    ),
    _Kind(
        "goal",
        says=("my big goal this year is to {goal}",),
        replies=("I love that. Want to break it down into milestones?",),
        asks=("What is {user}'s big goal for this year?",),
        slots={"goal": _pick(_GOALS)},
        value="goal",
    ),
    _Kind(
        "volunteer",
        says=("I started volunteering at the {place} every {day}",),
        replies=("That's a great way to give back.",),
        asks=("Where does {user} volunteer?", "Which day does {user} volunteer?"),
        slots={"place": _pick(_VOLUNTEER), "day": _pick(_WEEKDAYS)},
        value="place",
    ),
    _Kind(
        "restaurant",
        says=(
            "we tried {restaurant} on {street} last night, I'm still thinking about the {dish}",
            "if you ever need a rec: {restaurant}, get the {dish}",
        ),
        replies=("That sounds delicious!", "Noted, it sounds like a great spot."),
        asks=("Which dish did {user} love at {restaurant}?",),
        slots={
            "restaurant": _pick(_RESTAURANTS),
            "street": _pick(_STREETS),
            "dish": _pick(_DISHES),
        },
        value="dish",
        unique="restaurant",
        again=4,
    ),
    _Kind(
        "book",
        says=("{who} recommended {book} to me, adding it to my list",),
        replies=("It's a good sign when friends recommend books. Will you start it soon?",),
        asks=("Which book did {who} recommend to {user}?",),
        slots={"who": _one_of("friend"), "book": _pick(_BOOKS)},
        value="book",
        unique="who",
        again=2,
    ),
    # amounts and counts
    _Kind(
        "purchase",
        says=(
            "finally bought the {item}, {price} after the discount",
            "treated myself to a {item}. {price}. no regrets",
            "the {item} arrived! cost {price} but it's so worth it",
        ),
        replies=("Enjoy it! Let me know how you like it after a week.", "Nice upgrade!"),
        asks=("How much did {user} pay for the {item}?",),
        slots={"item": _pick(tuple(_PRICES)), "price": _keyed(_PRICES, "item")},
        value="price",
        recap="the {item} cost {price}",
        label="the {item}",
        combine="spend",
        unique="item",
        again=8,
    ),
    _Kind(
        "tires",
        says=("the mechanic says I need {n} new tires, quote was {price}",),
        replies=("Tires are one thing not to skimp on. Did you get a second quote?",),
        asks=(
            "How much was the quote for {user}'s new tires?",
            "How many new tires does {user} need?",
        ),
        slots={"n": _num(2, 4), "price": _usd(240, 900, 10)},
        value="price",
        label="the new tires",
        combine="spend",
    ),
    _Kind(
        "books-read",
        says=("I've read {n} books so far this year, new record for me",),
        replies=("That's impressive! Any favourites so far?",),
        asks=("How many books has {user} read this year?",),
        slots={"n": _num(4, 20)},
        value="n",
        moves=("up to {n} books this year now!",),
        rises=True,
    ),
    _Kind(
        "savings",
        says=("saving up {amount} for a down payment, goal is {month} next year",),
        replies=("That's a solid goal. Do you have an automatic transfer set up?",),
        asks=(
            "How much is {user} saving for the down payment?",
            "By when does {user} want to have it?",
        ),
        slots={"amount": _usd(5_000, 40_000, 500), "month": _pick(_MONTHS)},
        value="amount",
        moves=("bumped my savings goal up to {amount}, prices are insane",),
        rises=True,
    ),
    _Kind(
        "mortgage",
        says=("we locked our mortgage rate at {rate}%",),
        replies=("Good to have that locked in, rates have been all over the place.",),
        asks=("What mortgage rate did {user} lock in?",),
        slots={"rate": _pick(("4.1", "4.6", "5.2", "5.75", "6.05", "6.3"))},
        value="rate",
    ),
    _Kind(
        "subscription",
        says=("{sub} went up to {price} a month, might cancel",),
        replies=("Price hikes add up. Do you use it enough to keep it?",),
        asks=("How much does {sub} cost {user} a month now?",),
        slots={"sub": _pick(_SUBSCRIPTIONS), "price": _usd(8, 70, 1)},
        value="price",
        unique="sub",
        again=3,
    ),
    _Kind(
        "heart-rate",
        says=("my resting heart rate is down to {n} bpm since I started running",),
        replies=("That's a great sign that the running is paying off.",),
        asks=(
            "What is {user}'s resting heart rate?",
            "What does {user} credit for the lower resting heart rate?",
        ),
        slots={"n": _num(52, 68)},
        value="n",
    ),
    # preferences and constraints
    _Kind(
        "allergy",
        says=(
            "btw I'm allergic to {allergen}, keep that in mind for any recipes",
            "heads up, I'm seriously allergic to {allergen}",
        ),
        replies=("Thanks for telling me, I'll keep that in mind.",),
        asks=("What is {user} allergic to?",),
        slots={"allergen": _pick(_ALLERGIES)},
        value="allergen",
        early=True,
    ),
    _Kind(
        "diet",
        says=("I've been {diet} since last year, so no suggestions that break that please",),
        replies=("Understood, I'll stick to that.",),
        asks=("What diet does {user} follow?",),
        slots={"diet": _pick(_DIETS)},
        value="diet",
    ),
    _Kind(
        "favourite",
        says=(
            "my favourite {thing} is {fav}, fight me",
            "fun fact: {fav} is my all-time favourite {thing}",
        ),
        replies=("Ha, I won't argue with that!", "Good taste!"),
        asks=("What is {user}'s favourite {thing}?",),
        slots={"thing": _pick(tuple(_FAVOURITES)), "fav": _keyed(_FAVOURITES, "thing")},
        value="fav",
        unique="thing",
        again=7,
    ),
    _Kind(
        "hate",
        says=("I really can't stand {hate}",),
        replies=("Fair enough, everyone has their thing.",),
        asks=("What does {user} say they can't stand?",),
        slots={"hate": _pick(_HATES)},
        value="hate",
    ),
    _Kind(
        "mornings",
        says=("please never schedule anything for me before {time}, I'm useless in the morning",),
        replies=("Got it, I'll keep mornings free.",),
        asks=("Before what time should nothing be scheduled for {user}?",),
        slots={"time": _pick(("9 am", "9:30 am", "10 am", "10:30 am", "11 am"))},
        value="time",
        moves=("new routine: you can schedule stuff from {time} now",),
    ),
    # instructions to the assistant
    _Kind(
        "short",
        says=("from now on keep your answers short, {n} sentences max",),
        replies=("Will do.",),
        asks=("At most how many sentences should the assistant's answers to {user} be?",),
        slots={"n": _num(2, 4)},
        value="n",
        moves=("ok you can go up to {n} sentences now, the short answers were missing stuff",),
        rises=True,
        early=True,
    ),
    _Kind(
        "units",
        says=("always give me temperatures in {unit}, I can't picture the other one",),
        replies=("Sure thing.",),
        asks=("Which temperature unit does {user} want?",),
        slots={"unit": _pick(("Celsius", "Fahrenheit"))},
        value="unit",
    ),
    _Kind(
        "banned",
        says=("please stop using {banned} in your replies, it bugs me",),
        replies=("Understood, I'll stop.",),
        asks=("What did {user} ask the assistant to stop using?",),
        slots={"banned": _pick(_BANNED)},
        value="banned",
    ),
    _Kind(
        "nickname",
        says=("call me {nick} btw, only my mom calls me {user}",),
        replies=("Sure thing, I'll use that from now on.",),
        asks=("What does {user} want to be called?",),
        slots={"nick": _pick(_NICKNAMES)},
        value="nick",
        early=True,
    ),
    _Kind(
        "signoff",
        says=("when you draft emails for me, sign them '{signoff}'",),
        replies=("Got it, I'll use that from now on.",),
        asks=("How should emails drafted for {user} be signed?",),
        slots={"signoff": _pick(_SIGNOFFS)},
        value="signoff",
    ),
    _Kind(
        "code",
        says=("write any code examples in {code}, that's what we use at work",),
        replies=("Makes sense, I'll do that.",),
        asks=("In which programming language does {user} want code examples?",),
        slots={"code": _pick(_CODE)},
        value="code",
    ),
    _Kind(
        "topic",
        says=("please don't bring up {topic} anymore, it stresses me out",),
        replies=("Of course, I won't mention it.",),
        asks=("Which topic did {user} ask the assistant not to bring up?",),
        slots={"topic": _pick(_TOPICS)},
        value="topic",
    ),
    _Kind(
        "zone",
        says=("I'm on {zone} time, use that for anything with times",),
        replies=("Noted, I'll use that.",),
        asks=("Which time zone is {user} in?",),
        slots={"zone": _pick(_ZONES)},
        value="zone",
        early=True,
    ),
    # tool and account problems
    _Kind(
        "export",
        says=(
            "ugh the export in {tool} failed with error {error} again",
            "{tool} export keeps dying with a {error}, third time this week",
        ),
        replies=(
            "That's annoying. Does it fail on big exports only, or every time?",
            "Sorry, that sounds frustrating. Have you tried a smaller date range?",
        ),
        asks=("What error does {user}'s {tool} export fail with?",),
        slots={"tool": _pick(_TOOLS), "error": _pick(_ERRORS)},
        value="error",
        unique="tool",
        again=3,
        fix=_Fix(
            ("{tool} export works again! support said it was {cause}",),
            "What caused {user}'s {tool} export to fail?",
            {"cause": _pick(_CAUSES)},
        ),
    ),
    _Kind(
        "lockout",
        says=("got locked out of my {service} account, it says to wait {hours} hours",),
        replies=("That's so annoying. Do you have backup codes anywhere?",),
        asks=("How long does {user} have to wait to get back into the {service} account?",),
        slots={"service": _pick(_SERVICES), "hours": _num(2, 48)},
        value="hours",
        unique="service",
        again=2,
        fix=_Fix(
            ("finally back into my {service} account, it took {way}",),
            "How did {user} get back into the {service} account?",
            {"way": _pick(_WAYS)},
        ),
    ),
    _Kind(
        "ticket",
        says=("{tool} keeps logging me out every few minutes, opened IT ticket #{ticket}",),
        replies=("Hopefully IT gets to it quickly.",),
        asks=(
            "What is the number of {user}'s IT ticket?",
            "Which tool keeps logging {user} out?",
        ),
        slots={"tool": _pick(_TOOLS), "ticket": _num(10_000, 99_999)},
        value="ticket",
    ),
    _Kind(
        "vpn",
        says=("the VPN drops every {mins} minutes since the update to version {version}",),
        replies=("That sounds like a regression in the update. Worth reporting to IT.",),
        asks=(
            "Since which version has {user}'s VPN been dropping?",
            "How often does {user}'s VPN drop?",
        ),
        slots={"mins": _num(5, 40), "version": _pick(("4.2.1", "5.0", "5.1.3", "2024.2", "7.3"))},
        value="version",
        fix=_Fix(
            ("VPN is fine again, IT {how}",),
            "How was {user}'s VPN problem fixed?",
            {
                "how": _pick(
                    ("rolled back the client", "reset my profile", "swapped my certificate")
                )
            },
        ),
    ),
    _Kind(
        "bill",
        says=("our {tool} bill jumped to {amount} this month, someone left a job running",),
        replies=("Ouch. Maybe worth setting up a budget alert.",),
        asks=("How much was {user}'s company's {tool} bill?", "Why did the {tool} bill jump?"),
        slots={
            "tool": _pick(("AWS", "Snowflake", "Datadog", "Vercel")),
            "amount": _usd(900, 18_000, 10),
        },
        value="amount",
    ),
    _Kind(
        "battery",
        says=("my laptop battery dies after like {mins} minutes now",),
        replies=("That sounds like the battery is wearing out. Is it still under warranty?",),
        asks=("How long does {user}'s laptop battery last now?",),
        slots={"mins": _num(25, 90)},
        value="mins",
    ),
)

# -- the filler ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Chat:
    """Small talk nobody asks about: the user's turn and the assistant's answer."""

    user: str
    reply: str
    slots: Mapping[str, Slot] = field(default_factory=dict)
    plan: str = ""  # advice: what the assistant's recap of it says


_CHATS = (
    _Chat(
        "haha I watched {n} episodes of {show} last night",
        "{n} episodes of {show} in one night is commitment! Is it holding up?",
        {"n": _num(2, 8), "show": _pick(_SHOWS)},
    ),
    _Chat(
        "it's {clock} here, coffee time",
        "Enjoy it! A {clock} coffee sounds well earned.",
        {"clock": _pick(_CLOCKS)},
    ),
    _Chat(
        "traffic was brutal, took me {n} minutes to get home",
        "{n} minutes is rough. Did you at least have a good podcast on?",
        {"n": _num(40, 95)},
    ),
    _Chat(
        "{friend} sent me the funniest meme this morning lol",
        "Ha, sounds like {friend} knows your sense of humour.",
        {"friend": _one_of("friend")},
    ),
    _Chat(
        "just got back from a run, only {n} km today",
        "{n} km still counts! How did it feel?",
        {"n": _num(3, 9)},
    ),
    _Chat(
        "weather is {weather} today, like {deg} degrees",
        "{deg} degrees and {weather}, sounds like a day for something warm to drink.",
        {"weather": _pick(_WEATHER), "deg": _num(-3, 31)},
    ),
    _Chat(
        "listening to {band} while I work, it really helps",
        "Music that helps you focus is gold, and {band} is a great pick.",
        {"band": _pick(_BANDS)},
    ),
    _Chat(
        "did you catch the {team} game? {score}, unreal",
        "I didn't watch it, but {score} sounds like a wild game!",
        {"team": _pick(_TEAMS), "score": _pick(_SCORES)},
    ),
    _Chat(
        "I have like {n} tabs open right now send help",
        "{n} tabs! Maybe bookmark a few and close the rest?",
        {"n": _num(30, 140)},
    ),
    _Chat(
        "lunch was a {food} from the place on {street}, so good",
        "A {food} sounds perfect. Is the place on {street} your usual spot?",
        {"food": _pick(_FOODS), "street": _pick(_STREETS)},
    ),
    _Chat("ugh, Monday again", "Mondays are tough. Anything you're looking forward to this week?"),
    _Chat(
        "{coworker} brought donuts to the office today",
        "That's nice of {coworker}! Did you get a good one?",
        {"coworker": _one_of("coworker")},
    ),
    _Chat(
        "reading {book} right now, I'm on page {n}",
        "Page {n} of {book}, you're into it now! How do you like it so far?",
        {"book": _pick(_BOOKS), "n": _num(20, 300)},
    ),
    _Chat(
        "it's {partner}'s turn to cook tonight, thank god",
        "A night off! Hope {partner} makes something good.",
    ),
    _Chat(
        "I think I need a vacation",
        "It sounds like you could use a break. Even a long weekend can help.",
    ),
    _Chat(
        "so tired today, slept like {n} hours",
        "Only {n} hours? Be gentle with yourself today.",
        {"n": _num(3, 5)},
    ),
    _Chat(
        "we're getting pizza tonight, can't decide between margherita and pepperoni",
        "Classic dilemma. Why not half and half?",
    ),
    _Chat(
        "{friend} and I went bouldering on {day}, my arms are dead",
        "Sounds like a great session with {friend}. Stretch those arms!",
        {"friend": _one_of("friend"), "day": _pick(_WEEKDAYS)},
    ),
    _Chat(
        "my phone is at {n}% and I forgot my charger",
        "{n}% without a charger, classic. Low power mode time!",
        {"n": _num(3, 15)},
    ),
    _Chat(
        "office wifi died for {n} minutes and everyone just stared at each other",
        "Ha, {n} minutes offline is enough to remember how much we depend on it.",
        {"n": _num(10, 45)},
    ),
    _Chat(
        "finally cleaned out my inbox, {n} emails gone",
        "Deleting {n} emails must feel amazing. Inbox zero!",
        {"n": _num(200, 4000)},
    ),
    _Chat(
        "{cousin} posted like {n} photos from their vacation, so jealous",
        "Ha, {n} photos! Sounds like {cousin} had a great time.",
        {"n": _num(20, 90)},
    ),
    _Chat(
        "tried that {n}-minute yoga video on YouTube",
        "Nice! Even {n} minutes of yoga makes a difference.",
        {"n": _num(10, 30)},
    ),
    _Chat(
        "watched {movie} again, still cried",
        "{movie} gets everyone. Which part gets you?",
        {"movie": _pick(_MOVIES)},
    ),
    _Chat(
        "{manager} said 'quick sync' and it was {n} minutes",
        "{n} minutes for a 'quick sync' is a rite of passage. At least it's done!",
        {"n": _num(45, 90)},
    ),
    _Chat(
        "there's a {n}% sale at {store}, trying very hard not to buy anything",
        "Stay strong! {n}% off is only a deal if you needed it anyway.",
        {"n": _pick((20, 30, 40, 50)), "store": _pick(_STORES)},
    ),
    _Chat(
        "it's raining again, third day in a row",
        "Three days of rain is a lot. Perfect excuse for a cozy evening though.",
    ),
    _Chat(
        "my neighbour is drilling at {clock} on a {day}",
        "Drilling at {clock}? That's a test of patience.",
        {"clock": _pick(("7 am", "8 am", "9 pm")), "day": _pick(("Sunday", "Saturday"))},
    ),
    _Chat(
        "{coworker} is out sick today so I'm covering the {clock} meeting",
        "Hope {coworker} feels better soon. Good of you to cover.",
        {"coworker": _one_of("coworker"), "clock": _pick(_TIMES)},
    ),
    _Chat(
        "{friend} might visit sometime in {month}, nothing planned yet",
        "That would be fun! Let me know if it firms up.",
        {"friend": _one_of("friend"), "month": _pick(_MONTHS)},
    ),
    _Chat(
        "I might repaint the bedroom, maybe green?",
        "Green is calming for a bedroom! Sage or olive?",
    ),
    _Chat(
        "thinking about getting a second monitor at some point",
        "A second monitor can be a real productivity boost.",
    ),
    _Chat(
        "{mom} called for an hour, mostly about the neighbours",
        "Ha, sounds like {mom} had news to share!",
    ),
    _Chat(
        "{company} all-hands today, {n} slides about synergy",
        "{n} slides! Was there at least coffee?",
        {"n": _num(30, 80)},
    ),
    _Chat("can't believe it's only {weekday}", "Hang in there, the weekend will come!"),
    _Chat("just made the best pancakes of my life", "Now I'm jealous! What's the secret?"),
    _Chat(
        "{sister} and I talked for {n} hours last night lol",
        "{n} hours! You two must have had a lot to catch up on.",
        {"n": _num(2, 4)},
    ),
)
_ADVICE = (
    _Chat(
        "any tips for falling asleep faster?",
        "A consistent bedtime, no screens for 30 minutes before bed, and a cool, dark room help "
        "most people.",
        plan="keep a fixed bedtime and put the phone away 30 minutes before",
    ),
    _Chat(
        "how do I stay focused in the afternoon? I crash around {clock}",
        "Try a short walk or some daylight around {clock}, a lighter lunch, and save easy tasks "
        "for that slot.",
        {"clock": _pick(("2 pm", "3 pm", "3:30"))},
        "take a walk at {clock} and keep easy tasks for the afternoon",
    ),
    _Chat(
        "should I learn SQL or Python first for work stuff?",
        "If you mostly pull data, start with SQL; it pays off within weeks. Python is the natural "
        "next step.",
        plan="start with SQL and pick up Python after",
    ),
    _Chat(
        "{coworker} keeps booking meetings at 5 pm. what do you think I should do?",
        "I'd mention it to {coworker} directly and suggest an earlier slot; people often don't "
        "realise.",
        {"coworker": _one_of("coworker")},
        "talk to {coworker} and suggest an earlier slot",
    ),
    _Chat(
        "how do people meal prep without getting bored?",
        "Prep components, not meals: a grain, two proteins, roasted veg and a few sauces to mix "
        "daily.",
        plan="prep components on Sunday and mix them during the week",
    ),
    _Chat(
        "what's a good way to start meditating?",
        "Start tiny: 5 minutes a day with a guided app, same time every day. Consistency beats "
        "length.",
        plan="try 5 minutes of guided meditation every morning",
    ),
    _Chat(
        "my inbox is out of control, how do you handle email?",
        "Check email at set times, say 10 am and 3 pm, and for each one: reply, delegate, "
        "schedule or archive.",
        plan="check email twice a day and triage each message once",
    ),
    _Chat(
        "how do I say no to extra work without sounding lazy?",
        "Frame it around priorities: 'I can take this on if we push X to next week. Which do you "
        "prefer?'",
        plan="answer new requests with the trade-off they cost",
    ),
    _Chat(
        "any ideas for a rainy weekend?",
        "A museum you haven't visited, a long cooking project, or a board game afternoon with "
        "friends.",
    ),
    _Chat(
        "is it weird to ask for feedback after a job interview?",
        "Not at all! A short, polite note asking for feedback is common and usually appreciated.",
    ),
    _Chat(
        "how do I keep houseplants alive, asking for a friend",
        "Most die from overwatering. Water only when the top 2 cm of soil are dry.",
        plan="water only when the top of the soil is dry",
    ),
    _Chat(
        "what should I cook tonight, I have rice, eggs and some spinach",
        "Egg fried rice with spinach! Use day-old rice if you have it and finish with soy sauce.",
    ),
    _Chat(
        "I can't decide whether to go to {friend}'s party or stay in. what do you think I should "
        "do?",
        "If you'd regret missing it, go for an hour; you can always leave early.",
        {"friend": _one_of("friend")},
        "go to {friend}'s party for an hour and leave if you're tired",
    ),
    _Chat(
        "how do I make a budget I'll actually stick to?",
        "Automate savings on payday, then give yourself one weekly spending number instead of ten "
        "categories.",
        plan="automate savings on payday and track one weekly spending number",
    ),
)
_GREETINGS = (
    "hey!", "hi again", "good morning!", "hey, got a minute?", "hello hello", "back again lol",
    "hi! quick one today", "heyy", "morning", "ok I'm back", "happy {weekday}!",
    "hey, it's {weekday} already??", "hi, on my lunch break",
)  # fmt: skip
_INTRODUCTIONS = (
    "hi! I'm {user}, first time using this",
    "hello, {user} here. can I just talk to you about stuff?",
    "hey, I'm {user}. my friend said you're good at planning things",
)
_FIRST_WELCOMES = (
    "Nice to meet you, {user}! Happy to help with anything, big or small.",
    "Hi {user}, welcome! What would you like to talk about?",
)
_WELCOMES = (
    "Hi {user}! How's it going?",
    "Welcome back, {user}. What can I help with today?",
    "Hey {user}! Good to hear from you. How have you been?",
    "Hi {user}, always happy to chat. What's on your mind?",
    "Hello! What are we working on today?",
)
_BYES = (
    "ok gotta run, bye!", "thanks, talk later", "that's all for now", "ok night!",
    "cool, thanks. bye", "I'll let you know how it goes. bye!",
    "ok {partner} is calling me for dinner, bye!", "gotta go, meeting with {manager} in 5",
)  # fmt: skip
_FAREWELLS = (
    "Talk soon, {user}! Enjoy the rest of your day.",
    "Good luck with everything, talk soon!",
    "Bye {user}, take care!",
    "Happy to help. See you next time!",
)
_REACTIONS = (
    "That's awesome!", "Thanks, that helps", "haha true", "lol yes", "right??", "ok cool",
    "makes sense", "good point", "hmm, I'll think about it", "yeah, we'll see",
)  # fmt: skip
_ACKS = (
    "Anytime!", "Glad I could help.", "Let me know how it goes.", "Happy to help!",
    "Of course. Anything else on your mind?",
)  # fmt: skip
_FOLLOW_UPS = (
    "haha yeah", "thanks!", "right??", "I know 😅", "yeah, we'll see", "will keep you posted",
    "totally", "not sure yet tbh",
)  # fmt: skip
_KEEP_POSTED = ("Sounds good!", "Fingers crossed for you.", "I'm here if you need me.", "Ha, fair.")
_HOW_ABOUT_YOU = ("How about you?", "what about you?", "do you ever get tired of all this lol")
_SMALL_TALK = (
    "Ha, being an AI, I mostly get to hear about it from you!",
    "I don't have days off or hobbies, but I enjoy hearing about yours.",
    "Can't complain! What else is going on with you?",
)
_ALSO = ("oh and also, ", "also ", "and ", "")  # before a second fact in a row
_ASIDES = (  # a second turn in a row that adds nothing
    "sorry, typing on my phone",
    "anyway",
    "lol",
    "sorry, long day",
    "also it's raining again here",
    "ok where was I",
)
_NOTED = (
    "Thanks for the update, noted.",
    "Got it, I'll keep that in mind.",
    "Ah, good to know. Does that change any of your other plans?",
    "Thanks for letting me know!",
)
_FIXED = (
    "Glad it's sorted!",
    "Finally! That one was dragging on.",
    "Great news, one less headache.",
)
_NEWS = ("guess what,", "news:", "so,", "ok so", "quick update,", "")
_RECAP_ASKS = ("can you sum up what I told you today?", "ok recap please?", "so what did we cover?")


@dataclass(slots=True)
class _Fact:
    kind: _Kind
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


def generate_sessions(seed: int = 1, sessions: int = 20) -> Transcript:
    """A reproducible conversation of ``sessions`` sessions and its questions.

    The facts last about 25 sessions: later sessions are mostly small talk,
    updates and questions about earlier facts."""
    if isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 2:
        raise ValueError(f"sessions must be a whole number of at least 2, got {sessions!r}")
    rng = random.Random(f"memevict sessions {seed}")
    talk = _Conversation(rng)
    for number, gap in enumerate([0, *_gaps(rng, sessions - 1)], start=1):
        talk.session(number, gap)
    talk.combine(sessions)
    return Transcript(
        tuple(talk.turns),
        f"generated sessions (seed {seed}, {sessions} sessions)",
        talk.questions(sessions),
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


def _persona(rng: random.Random) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    taken: set[str] = set()

    def name(pool: Sequence[str]) -> str:
        chosen = rng.choice([n for n in pool if n not in taken])
        taken.add(chosen)
        return chosen

    people = {"user": name(_NAMES)}
    for role, pool in (
        ("partner", _NAMES),
        ("sister", _WOMEN),
        ("brother", _MEN),
        ("mom", _MOMS),
        ("dad", _DADS),
        ("manager", _NAMES),
        ("cousin", _NAMES),
        ("nephew", _MEN),
        ("hire", _NAMES),
    ):
        people[role] = name(pool)
    people["company"] = rng.choice(_COMPANIES)
    people["city"] = rng.choice(_HOMES)
    groups = {
        "friend": tuple(name(_NAMES) for _ in range(4)),
        "coworker": tuple(name(_NAMES) for _ in range(3)),
    }
    return people, groups


_AN = re.compile(r"\b([Aa]) (?=[aeiou]|[AEIOU][a-z])")


def _when(fact: _Fact) -> date | None:
    """The fact's date, if its value is one."""
    value = fact.slots.get(fact.kind.value)
    return value if isinstance(value, date) else None


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def _day_of(at: int) -> date:
    return datetime.fromtimestamp(at / 1000, tz=timezone.utc).date()


class _Conversation:
    """The turns said so far, the facts in them and the questions about them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        people, groups = _persona(rng)
        self.ctx = _Ctx(rng, people, groups, _day_of(START_MS))
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

    def say(self, role: str, text: str) -> str:
        if self.turn:
            self.now += self.rng.randint(*TURN_GAP_MS)
        self.turn += 1
        turn_id = f"S{self.number}:T{self.turn}"
        speaker = self.ctx.people["user"] if role == "user" else "assistant"
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
        return turn_id

    def render(self, template: str, slots: Mapping[str, object] | None = None) -> str:
        text = template.format_map({**self.ctx.people, **(slots or {})})
        return _AN.sub(r"\1n ", text)  # "a {item}" with an espresso machine

    def address(self, templates: Sequence[str]) -> str:
        """A greeting or goodbye, by the user's name unless they asked for a nickname."""
        return self.render(
            self.rng.choice([t for t in templates if not self.nickname or "{user}" not in t])
        )

    def draw(self, slots: Mapping[str, Slot]) -> dict[str, object]:
        drawn: dict[str, object] = {}
        for slot, draw in slots.items():
            drawn[slot] = draw(self.ctx, drawn)
        return drawn

    # -- sessions

    def session(self, number: int, gap: int) -> None:
        self.number, self.turn, self.now = number, 0, self.now + gap
        self.ctx.today = _day_of(self.now)
        self.ctx.people["weekday"] = _WEEKDAYS[self.ctx.today.weekday()]
        self.chats = set()
        target = round(self.rng.triangular(*SESSION_TURNS, SESSION_MODE))
        news = self.new_fact() if number > 1 and self.rng.random() < NEWS else None
        if number == 1:
            self.say("user", self.render(self.rng.choice(_INTRODUCTIONS)))
            self.say("assistant", self.render(self.rng.choice(_FIRST_WELCOMES)))
        elif news is None:
            self.say("user", self.render(self.rng.choice(_GREETINGS)))
            self.say("assistant", self.address(_WELCOMES))
        else:
            greeting = self.render(self.rng.choice(_GREETINGS))
            if greeting[-1] not in "!?,":
                greeting += ","
            self.state(news, f"{greeting} {self.rng.choice(_NEWS)} ".replace("  ", " "))
            self.say("assistant", self.render(self.rng.choice(news.kind.replies), news.slots))
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
            self.say("user", self.rng.choice(_REACTIONS))
            self.say("assistant", self.rng.choice(_ACKS))
            self.say("user", self.render(self.rng.choice(_BYES)))
            self.say("assistant", self.address(_FAREWELLS))
            return
        told = self.rng.sample(recappable, min(len(recappable), self.rng.randint(1, 3)))
        clauses = [self.render(f.kind.recap, f.slots) for f in told]
        summary = ", ".join(clauses[:-1]) + (" and " if len(clauses) > 1 else "") + clauses[-1]
        if self.rng.random() < 0.5:
            self.say("user", self.rng.choice(_RECAP_ASKS))
            recap = self.say("assistant", f"Sure! So to recap: {summary}.")
            self.say("user", self.render(self.rng.choice(_BYES)))
            self.say("assistant", self.address(_FAREWELLS))
        else:
            self.say("user", self.render(self.rng.choice(_BYES)))
            recap = self.say("assistant", f"Before you go, a quick recap: {summary}.")
            self.say("user", self.rng.choice(("perfect, thanks", "yep that's it", "👍")))
            self.say("assistant", self.rng.choice(("Great. Talk soon!", "Bye for now!")))
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
                self.state(second, self.rng.choice(_ALSO))
                last = second
            else:
                self.say("user", self.rng.choice(_ASIDES))
        self.say("assistant", self.render(self.rng.choice(last.kind.replies), last.slots))
        if self.rng.random() < 0.15:
            self.say("user", self.rng.choice(_FOLLOW_UPS))
            self.say("assistant", self.rng.choice(_KEEP_POSTED))
        return True

    def new_fact(self) -> _Fact | None:
        kinds = [k for k in _KINDS if self.uses[k.name] < k.again]
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
        fact.said = self.say("user", opening + self.render(self.rng.choice(kind.says), slots))
        fact.value.append([fact.said])
        self.facts.append(fact)
        self.stated += 1
        if kind.name == "nickname":
            self.nickname = True
        self.asks.append(_Ask(self.render(kind.asks[0], slots), (fact.value,)))
        others = [a for a in kind.asks[1:] if self.rng.random() < EXTRA_QUESTION]
        if not others and kind.asks[1:] and kind.moves:
            others = [self.rng.choice(kind.asks[1:])]  # the statement stays evidence after a move
        for ask in others:
            self.asks.append(_Ask(self.render(ask, slots), ([[fact.said]],)))

    def movable(self) -> list[_Fact]:
        soon = self.ctx.today + timedelta(days=3)
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
        said = self.say("user", self.render(self.rng.choice(kind.moves), fact.slots))
        fact.value.append([said])
        fact.changes += 1
        self.stated += 1
        self.say("assistant", self.rng.choice(_NOTED))

    def moved(self, fact: _Fact) -> object:
        old = fact.slots[fact.kind.value]
        if isinstance(old, date):
            shift = self.rng.choice((-14, -7, 7, 7, 14, 21))
            new = old + timedelta(days=shift)
            if new <= self.ctx.today + timedelta(days=2):
                new = old + timedelta(days=7)
            return _Day(new.year, new.month, new.day)
        if fact.kind.rises and isinstance(old, int):
            return old + self.rng.randint(1, 3 if old < 10 else 6)
        if fact.kind.rises and isinstance(old, _Money):
            return _Money(old.dollars + self.rng.randrange(1_000, 10_001, 500))
        draw = fact.kind.slots[fact.kind.value]
        for _ in range(20):
            new_value = draw(self.ctx, fact.slots)
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
        said = self.say("user", self.render(self.rng.choice(fix.says), slots))
        self.asks.append(_Ask(self.render(fix.ask, slots), ([[said]],)))
        fact.done = True
        self.stated += 1
        self.say("assistant", self.rng.choice(_FIXED))

    def past(self) -> list[_Fact]:
        return [
            f
            for f in self.facts
            if f.kind.after
            and not f.done
            and (when := _when(f)) is not None
            and when < self.ctx.today
        ]

    def after_beat(self) -> None:
        fact = self.rng.choice(self.past())
        user, reply = self.rng.choice(fact.kind.after)
        self.say("user", self.render(user, fact.slots))
        self.say("assistant", self.render(reply, fact.slots))
        fact.done = True

    def chat_beat(self) -> None:
        known = set(self.ctx.people)
        chats = [
            c
            for c in _CHATS
            if c.user not in self.chats and _fields(c.user + c.reply) <= known | set(c.slots)
        ]
        chat = self.rng.choice(chats)
        self.chats.add(chat.user)
        slots = self.draw(chat.slots)
        self.say("user", self.render(chat.user, slots))
        if self.rng.random() < TWO_IN_A_ROW:
            self.say("user", self.rng.choice(_ASIDES))
        self.say("assistant", self.render(chat.reply, slots))
        if self.rng.random() < 0.25:
            self.say("user", self.rng.choice(_HOW_ABOUT_YOU))
            self.say("assistant", self.rng.choice(_SMALL_TALK))

    def advice_beat(self) -> None:
        advice = self.rng.choice([a for a in _ADVICE if a.user not in self.chats])
        self.chats.add(advice.user)
        slots = self.draw(advice.slots)
        self.say("user", self.render(advice.user, slots))
        self.say("assistant", self.render(advice.reply, slots))
        if self.rng.random() < 0.5:
            self.say("user", self.rng.choice(_REACTIONS))
            if advice.plan and self.rng.random() < 0.5:
                plan = self.render(advice.plan, slots)
                self.say("assistant", f"So to recap, the plan is to {plan}.")
            else:
                self.say("assistant", self.rng.choice(_ACKS))

    # -- questions

    def combine(self, sessions: int) -> None:
        """Questions whose answer needs two facts: which date comes first, and
        what two purchases cost together."""
        for combine, text in (
            ("date", "Which comes first: {a} or {b}?"),
            ("spend", "How much did {user} spend on {a} and {b} together?"),
        ):
            facts = [f for f in self.facts if f.kind.combine == combine]
            pairs = [(a, b) for i, a in enumerate(facts) for b in facts[i + 1 :]]
            for a, b in self.rng.sample(pairs, min(len(pairs), max(1, sessions // 3))):
                labels = {
                    "a": self.render(a.kind.label, a.slots),
                    "b": self.render(b.kind.label, b.slots),
                }
                self.asks.append(_Ask(self.render(text, labels), (a.value, b.value), True))

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
