"""Importance for every message: the built-in rule-based labeler, and the hook for your own.

memevict ranks memories by importance x recency, so every message needs an importance.
:func:`label` gives a message a category and names the rule that decided it; :func:`rules` is
the same as a bare number, ready to pass as ``importance``. The rules are deterministic (no
state, no randomness, no locale), English-only, and use nothing but precompiled standard
``re`` patterns. They are written for two kinds of traffic: an agent's exchanges with its
user and its tools, and long personal conversations between people (or a person and an
assistant) where what matters later is who did what, when.

Categories
----------
:data:`CATEGORIES` is the "Reference importances" table of docs/rules.md, and its one source. A
message of business, conclusion, context or chitchat gets its category's importance times
1 +/- up to 10% by its *detail* (below), so messages of one category are ranked among
themselves and no category reaches the next::

    instruction  10  user instruction / configuration
    tool_error    8  tool error / alert
    business      7  key business data; a personal fact with a date, number or name
    conclusion    5  agent conclusion; a personal statement, preference or plan without one
    context       3  general context
    chitchat      1  greeting / chit-chat

What the rules read
-------------------
``Message.text``, and ``role``, ``kind`` and ``tool_status`` compared case-insensitively.

- *From a tool*: role "tool" or "function", or kind "tool_result" or ending in "_output"
  ("function_call_output"), or any ``tool_status`` at all.
- *From the agent*: role "assistant" or "model", or kind "reasoning".
- *A question*: the text ends with "?".
- Only the first and last 1,000 characters of a longer text are read, so a megabyte of tool
  output costs what two pages do, and a traceback's last lines are still seen.
- Texting forms are read as what they stand for: "im", "dont", "u", "ur", "pls", "bc",
  "tmrw", "tonite", "wknd", "next wed" as "i'm", "don't", "you", "your", "please",
  "because", "tomorrow", "tonight", "weekend", "next wednesday" (whole words only, and
  none that is also an English word: "wed", "sat" and "sun" only after next, this, last,
  on, by, until, till, from or every).

Rules
-----
In this order; the first that applies decides, and ``Label.rule`` is its name.

 1. ``tool_failed`` -> tool_error: ``tool_status`` is "error", "failed" or "failure".
 2. ``system_prompt`` -> instruction: role "system" or "developer".
 3. ``tool_call`` -> context: kind "tool_use" or ending in "_call" ("function_call"): the
    agent asking for a tool. The answer is what matters.
 4. ``tool_error_text`` -> tool_error: from a tool, with a strong or a weak error signature
    (below). A status "ok"/"success"/"completed" does not overrule the text: a call that
    completed may have run a command that failed.
 5. ``tool_output`` -> context: any other tool output, key data or not. A routine lookup
    ("order 86 shipped; tracking T86-0") is context: the agent's answer that tells the
    user what it found carries the value on, and is ranked by rule 10 (key data); an
    error, a refusal or nothing found (rule 4) is what later turns need. Tool outputs
    never reach the rules below, so a fetched page saying "from now on ..." is data, not
    an order.
 6. ``standing_order`` -> instruction: not from the agent; an order meant to last. Anywhere:
    "from now on", "going forward", "from here on", "for all future", "in (the) future,
    please/always/never/use ...", "I want/I'd like/I need you to", "address me as",
    "call me <Name>", "remind me", "keep/make (your) answers/replies/responses ...", "I
    prefer/like/want ... answers/replies/responses", "you must/should always/never/not",
    "please/can you/could you/... remind me".
    At the start of a sentence (after an optional "please"), and only in a message that
    addresses nobody by name (between people, "Make sure yours stands out, Jon" is advice):
    "always ...", "never ...", "do not/don't ...", "remember to/that", "remind me",
    "make sure", "don't forget", "stop <doing>", "avoid ...", "use ...", "only use/answer/
    reply/...", "answer/reply/respond/write in <language or format>". Idioms and stories are
    not orders: "never mind", "never give up", "never saw it coming", "don't worry",
    "always happy to help", "they remind me why ...".
 7. ``credential`` -> instruction: "my/our/the/your <API key, password, token, secret, PIN,
    passphrase, username, (deploy) key, ...> is/are/=/: <value>" (not "... is wrong/expired/
    too weak", nor "the key is to ...").
 8. ``setting`` -> instruction: not from the agent; a sentence opening with "set/change/
    switch/update ... to", "enable", "disable", "turn on/off", or an ``ENV_VAR=value``.
 9. ``error_signature`` -> tool_error: a strong error signature (below), from anyone.
10. ``key_data`` -> business: key data (below).
11. ``personal_fact`` -> business: a personal signal and a time, number or name signal:
    "yesterday I went to Lisbon", "my sister turns 30", "I'm moving in June".
12. ``dated_event`` -> business: not a question; a time signal with a number or a name:
    "Anna's wedding is on June 12", "the certificate expires on 2024-07-01".
13. ``conclusion`` -> conclusion: not a question; "root cause", "in summary", "to sum up",
    "in conclusion", "I/we conclude", "the fix/solution/cause/culprit/problem/issue/answer/
    reason is/was", "therefore", "which means", "this means/shows/confirms/suggests", "(it)
    turns out", "TL;DR", "in short", "bottom line", "all in all", "overall,", "I've found
    that".
14. ``personal_statement`` -> conclusion: a personal signal alone: "I love hiking", "my
    sister is visiting", "we decided to sell the house". Later questions ask about these,
    so they rank above context and below a fact anchored by a date or a name.
15. ``named_or_timed`` -> conclusion: not a question; a time or a name signal without a
    personal one: "The concert in Portland was unreal", "the block party is next
    weekend". Who and when are what later questions ask; such a turn is evidence about as
    often as a personal statement (32% against 10% for the rest of context, on real
    conversations: benchmarks/HISTORY.md).
16. ``chitchat`` -> chitchat: no personal signal, and one of: at most 15 words with at
    least one social phrase per five words and no time or number ("That's awesome!",
    "Haha yes", "Sounds great, take care, Mel": a name is allowed, it is usually the person
    addressed); a question of at most 8 words with no number or name ("How about you?",
    "What do you think?"); at most 3 words with no time, number or name ("go ahead").
17. ``context`` -> context: everything else, such as a long turn with no concrete signal.

Signals
-------
Looked for by rules 10-16, each at most once per message and only when a rule asks:

- *time*: yesterday, today, tonight, tomorrow; this/last/next/past/coming morning, night,
  week(end), month, year, season or weekday; "... minutes/hours/days/weeks/months/years
  ago/later/from now"; weekday names; month names ("march" and "may" only after
  in/on/of/since/until/by/early/late/mid); clock times ("5pm", "17:30"); dates
  ("2024-05-07", "5/7", "May 7th", "7 May", "on/to/until/by/before/after/from the 7th");
  "in/since/until/by/of/from 2019".
- *number*: digits or a number word (two..twelve, twenty..ninety, hundred, thousand,
  million, billion, dozen). The digits of a date count too: "on 2024-07-01" alone is a
  dated event.
- *name*: a capitalised word (a capital then lowercase letters) after a space that does
  not open a sentence or a line and is not a month or weekday: "Lisbon" in "we flew to
  Lisbon", not "Sure" in "Sure, see you" nor "I'm". Not a name addressing the other person
  (after a comma or a greeting, before punctuation: "Thanks, Gina!", "Hey Jon!", "I won't
  quit, Gina."): that is no fact about anyone.
- *personal*: a personal fact, preference, life event, plan or decision:

  - "my/our <family member, friend, partner, pet, job, company, home, car, birthday,
    wedding, name, school, hobby, favourite, trip, class, project, team, ...>", and "I/we
    have/had/got (a/two ...) <one of those>";
  - "I'm a/an <noun>" (not "a bit/little/lot"), "I'm from/allergic/vegan/married/retired/
    learning/...", "I work/live/grew up/study/teach ...";
  - "I/we love/like/enjoy/hate/prefer/can't stand X" unless X is it/that/this/them/you;
  - "I/we (have) (just) moved/adopted/started/finished/bought/graduated/got married/joined/
    quit/retired/visited/went/met/won/lost/failed/...", "I've been <doing>";
  - "I'm/we're going to/gonna/planning/thinking of/hoping to/about to/moving/visiting/
    flying/leaving/starting ...", "I/we (have) decided/plan/booked/scheduled/signed up/
    applied ...", "I/we (always) want(ed) to/hope to/would love to", "I'd love/like to",
    "my/our plan/goal/decision", "I'm off to/heading to ...";
  - what the speaker cares about: "I'm (so) keen on/passionate about/into/interested in/
    proud of/excited about ...", "... means a lot to me", "my fave/main ...";
  - what the speaker did or does: "I/we (just) <any verb in -ed>" or a common irregular
    past (made, did, saw, took, found, went, got, ...), "I play/paint/volunteer/teach/...",
    "I'm (currently) <doing>", and the same with the subject dropped, as chat does, at a
    sentence start: "Just started aerial yoga", "Been busy volunteering", "Gonna ...",
    "treated myself to ...", "changed my mind", "been in Denver for six years".
    Not when the verb's object is only it/that/this/you ("I found it", "I did it").
- *detail* (grades the importance within a category, in [-1, 1]): +0.5 per doubling of
  the word count past 12 (-0.5 per halving); +0.25 for each of up to two things the
  speaker did (above); +0.1 for each of up to four first-person words (I, my, we, ...);
  -0.1 for each of up to four second-person words (you, your, ...); -0.4 for a question
  mark; +0.2 for a time. Later questions ask about what a person told of their own life,
  at length; reactions to the other person and questions back tell little.
- *social*: greetings, thanks, goodbyes and reactions: hi, hello, good morning, thanks,
  appreciate, take care, see you, cheers, haha, lol, wow, awesome, great, cool, nice,
  amazing, congrats, sounds, glad, sorry to hear, good luck, me too, sure, ok, yes, yeah,
  exactly, got it, makes sense, never mind, don't worry, love it, ...

Key data: a money amount ("$1,200", "50 euros"), an email address, a phone number, a
reference ("order #4521", "invoice INV-2024-17", "account_id: 99812", "#1234"), or a
business term (budget, price, cost, revenue, deadline, quote, salary, rent, payment, refund,
discount, sales, profit, contract, invoice, fee, deposit, loan, quota, forecast, ...)
together with a number or a time.

Error signatures are looked for after removing the phrases that deny or clear an error: "no
(new) errors (found)", "zero failures", "0 failed", "errors: 0", "error-free", "without
errors", "didn't fail", "fixed the (500) error", and "I/we/you failed to" (a person's
failure, not a system's).

- *strong* (any message): "Traceback"; "error:", "fatal:", "panic:", "alert:",
  "exception:"; a class name ending in Error or Exception, and ERROR, ERR, FATAL, CRITICAL,
  ALERT, FAILED in capitals (these two are read as written, denials and all); an HTTP
  4xx/5xx code after "HTTP", "status", "error", "code" or "got a", or before its reason
  ("503 Service Unavailable", "404 error"); permission/access denied; connection
  refused/reset; timed out; timeout error/exceeded; deadline exceeded;
  out of memory; OOMKilled; segmentation fault; core dumped; no space left; exit code/status
  1-9...; non-zero exit; rate limited/rate limit exceeded; quota exceeded; "<build, test(s),
  job, deploy(ment), pipeline, migration, request, query, command, task, step, check,
  backup, upload, download, install(ation), login, authentication, payment, transaction,
  run> (has) failed"; "failed to <verb>"; "<site/server/service/api/database/app/cluster/
  node/host/network/prod/system> is/are/went down"; outage; alert(s) fired/triggered.
- *weak* (tool outputs only): error(s), fail(s/ed/ing/ure), denied, refused, forbidden,
  unauthorized, not found, no such, invalid, cannot, can't, could not, unable to,
  unavailable, timeout, crash(ed), abort(ed), killed, panic, fatal, exception(s); a
  refusal (declined, rejected, insufficient) and nothing found ("does not exist", "nothing
  found", "no orders/results/records/... found", "0 results").

Your own labeler
----------------
A :class:`Labeler` is any callable taking a :class:`Message` and returning its importance,
or an awaitable of it (a model call, say). :func:`importance_of` calls a synchronous one and
:func:`aimportance_of` any one, and both check the answer is a finite number > 0
(:class:`~memevict.errors.BadImportance` otherwise). A labeler object may also define
``async def aimportance(message)``, which :func:`aimportance_of` awaits instead of calling
the labeler: :class:`~memevict.labelers.CachedLabeler` does, so that a labeler waiting on
a model runs in a worker thread rather than stalling the event loop. :func:`load_labeler`
turns a string (from a command line or a config file) into a labeler: "rules" is
:func:`rules`; "package.module:name" or "package.module.name" imports that callable.

A model as the labeler: :mod:`memevict.labelers` (``chat_labeler`` makes one of any
chat-completion call, and rates each message once).
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Final, Protocol, cast

from memevict.commands import finite_number
from memevict.errors import BadArgument, BadImportance

__all__ = [
    "CATEGORIES",
    "Label",
    "Labeler",
    "Message",
    "aimportance_of",
    "importance_of",
    "label",
    "load_labeler",
    "rules",
]

CATEGORIES: Final[Mapping[str, float]] = MappingProxyType(
    {
        "instruction": 10.0,
        "tool_error": 8.0,
        "business": 7.0,
        "conclusion": 5.0,
        "context": 3.0,
        "chitchat": 1.0,
    }
)


@dataclass(frozen=True, slots=True)
class Message:
    """One message, tool call or tool result to label."""

    text: str
    role: str | None = None
    kind: str | None = None
    tool_status: str | None = None


@dataclass(frozen=True, slots=True)
class Label:
    """The category of a message, its importance and the rule that decided it."""

    category: str
    importance: float
    rule: str


class Labeler(Protocol):
    """Gives a message its importance, directly or as an awaitable."""

    def __call__(self, message: Message, /) -> float | Awaitable[float]: ...


# --- what the rules look for --------------------------------------------------------------
# Patterns named *_CASED run on the text as written; the others on "\n" + the lowercased
# text, and most of them start with _B: a word start, like \b but a character set, which
# lets the regex engine jump from candidate to candidate (several times faster than \b).
# The "\n" makes the first word both a word start and a sentence start.

_READ = 1000  # characters read from each end of a long text

_FAILED_STATUS = frozenset({"error", "failed", "failure"})
_TOOL_ROLES = frozenset({"tool", "function"})
_AGENT_ROLES = frozenset({"assistant", "model"})
_SYSTEM_ROLES = frozenset({"system", "developer"})
_CALL_KINDS = ("_call", "tool_use")
_OUTPUT_KINDS = ("_output", "tool_result")


def _any(words: str) -> str:
    """A non-capturing alternation of space-separated words ("_" stands for a space)."""
    return "(?:" + "|".join(w.replace("_", " ") for w in words.split()) + ")"


_B = r"[\s\"'(\[{/*#@,.;:!?<>|=+&-]"
_SENTENCE_START = r"[.!?;\n]\s*"
_LANGUAGES = _any(
    "english french spanish german italian portuguese dutch chinese japanese korean russian"
    " arabic hindi polish swedish turkish greek plain_text markdown json bullet_points"
)

_STANDING_ORDER = re.compile(
    rf"{_B}(?:from now on|going forward|from here on|for all future"
    r"|in (?:the )?future,? (?:please|always|never|don't|do not|use|only)\b"
    r"|i want you to|i'd like you to|i need you to|address me as"
    r"|(?:please|can you|could you|would you|will you|don't forget to) remind me\b"
    r"|(?:keep|make) (?:your |the |all )?(?:answers|replies|responses)\b"
    r"|i (?:prefer|like|want|'d like|would like) (?:\w+ ){0,3}(?:answers|replies|responses)\b"
    r"|you (?:must|should|shall) (?:always|never|not)\b)"
)
_IMPERATIVE = re.compile(  # a standing order that opens a sentence
    rf"{_SENTENCE_START}(?:please\s+)?(?:"
    r"always (?!" + _any("happy glad good great nice fun a the so been was is") + r"\b)"
    r"|never (?!"
    + _any("mind give_up ever again a the been was is")
    + r"\b|\w+ed\b|"
    + _any("saw had thought knew felt got went did made took expected")
    + r"\b)"
    r"|(?:do not|don't) (?!" + _any("worry mention_it be feel know think") + r"\b)"
    r"|remember (?:to|that)|make sure|don't forget|stop \w+ing|avoid \w|use \w|remind me\b"
    r"|only (?:use|answer|reply|respond|write|include|show|send) "
    rf"|(?:answer|reply|respond|write|talk|speak)(?: to me)?(?: only)? in {_LANGUAGES}\b)"
)
_ORDER_CASED = re.compile(r"[Cc]all me [A-Z][a-z]")
_CREDENTIAL = re.compile(
    rf"{_B}(?:my|our|the|your) (?:\w+ )?"
    + _any(
        "api_key api-key apikey access_key secret_key private_key ssh_key key password"
        " passphrase passcode pin token secret username"
    )
    + r"s?\s*(?:is|are|=|:)\s*(?!"
    + _any(
        "too not wrong incorrect invalid expired broken missing correct weak strong required"
        " still also the a an to that in on at"
    )
    + r"\b)\S"
)
_SETTING = re.compile(
    rf"{_SENTENCE_START}(?:please\s+)?(?:"
    r"(?:set|change|switch|update) (?:the |my |our |your )?[\w .-]{1,40}? to\b"
    r"|enable \w|disable \w|turn (?:on|off) \w|turn \w+ (?:on|off)\b)"
)
_SETTING_CASED = re.compile(r"[A-Z][A-Z0-9_]{2,}=\S")  # ENV_VAR=value

_DENIED_ERRORS = re.compile(
    rf"{_B}(?:(?:no|zero|0|without|never|free of) (?:\w+ )?"
    + _any("errors? exceptions? failures? failed failing alerts? timeouts? crash(?:es)?")
    + r"\b(?: (?:found|detected|reported|occurred|were found))?"
    r"|(?:errors?|failures?|failed|exceptions?)\s*[:=]\s*0\b"
    r"|(?:error|crash|failure)[- ]free\b"
    r"|(?:didn't|didnt|did not|never|not|won't|doesn't|does not) (?:\w+ )?fail(?:ed|ing|s)?\b"
    r"|(?:fix|fixed|fixing|resolve[ds]?|resolving|solved?|solving) (?:the |that |this |an? )?"
    r"(?:[\w-]+ ){0,2}(?:error|bug|issue|crash|failure|exception|outage)s?\b"
    r"|(?:i|we|you) (?:\w+ )?failed to\b)"
)
_STRONG_ERROR = re.compile(
    rf"{_B}(?:traceback\b|(?:error|fatal|panic|alert|exception)\s*:"
    r"|(?:http(?:/\d(?:\.\d)?)?|status(?: code)?|error(?: code)?|code|got an?)"
    r"\s*[:=]?\s*[45]\d\d\b"
    r"|[45]\d\d\s+"
    + _any(
        "bad_request unauthori[sz]ed forbidden not_found method_not_allowed conflict gone"
        " too_many_requests internal_server_error bad_gateway service_unavailable"
        " gateway_time-?out error"
    )
    + r"\b|(?:permission|access) denied|connection (?:refused|reset)|timed out\b"
    r"|timeout (?:error|exceeded)|deadline exceeded|out of memory|oomkilled\b"
    r"|segmentation fault|core dumped|no space left|exit (?:code|status) [1-9]"
    r"|non-zero exit|rate limit(?:ed| exceeded)|quota exceeded"
    r"|"
    + _any(
        "build tests? job deploy(?:ment)? pipeline migration request query command task step"
        " check backup upload download install(?:ation)? login authentication payment"
        " transaction run"
    )
    + r" (?:has |have )?failed\b|failed to \w"
    r"|(?:site|server|service|api|database|db|app|website|cluster|node|host|network|prod"
    r"|production|system)s? (?:is|are|went) down\b|outage|alerts? (?:fired|triggered))"
)
_STRONG_ERROR_CASED = re.compile(  # KeyError, SomeException (not a bare "Error"), ERROR, ...
    r"(?:Error(?<=[A-Za-z]Error)|Exception(?<=[A-Za-z]Exception)"
    r"|ERROR|ERR|FATAL|CRITICAL|ALERT|FAILED)\b"
)
_WEAK_ERROR = re.compile(
    rf"{_B}(?:errors?|fail(?:ed|ure|ures|s|ing)?|denied|refused|forbidden|unauthori[sz]ed"
    r"|not found|no such|invalid|cannot|can'?t|could not|couldn'?t|unable to|unavailable"
    r"|timeout|crash(?:ed|es)?|abort(?:ed)?|killed|panic|fatal|exceptions?"
    r"|declined|rejected|insufficient|(?:does ?n[o']?t|did ?n[o']?t|not) exist|nothing found"
    r"|(?:no|zero|0) (?:results?|matches|records?|rows?|orders?|items?|entries|users?"
    r"|accounts?|customers?|files?|data) (?:were |was )?(?:found|returned|matched))\b"
)

_DIGIT = re.compile(r"\d")
_EMAIL = re.compile(r"\w@[\w-]+\.[a-z]")
_KEY_SYMBOL = re.compile(  # money, a phone number, a "#1234" reference
    r"\$ ?\d|€ ?\d|£ ?\d|¥ ?\d|₹ ?\d|\+\d[\d ()-]{7,}\d|\(\d{3}\) ?\d{3}-\d{4}|#\d{3,}\b"
)
_KEY_WORD = re.compile(  # money in words, a reference number, a phone number
    rf"{_B}(?:\d[\d,.]*\s?(?:k|m|bn)?\s?(?:usd|eur|gbp|dollars?|euros?|pounds?|bucks)\b"
    r"|"
    + _any(
        "order invoice account acct ticket case po customer client contract booking"
        " reservation confirmation tracking iban sku claim shipment"
    )
    + r"(?:[ _-]?(?:id|no|number|num|ref))?\b[\"']?\s*[:#=]?\s*[\"']?(?:[a-z]{1,5}-?)?\d[\w-]+"
    r"|\d{3}[-.]\d{3}[-.]\d{4}\b)"
)
_BUSINESS_TERM = re.compile(
    rf"{_B}"
    + _any(
        "budget price pricing costs? revenue deadline due_date quote salary rent payment"
        " refund discount sales profit margin contract renewal invoice fee deposit mortgage"
        " loan quota headcount forecast arr mrr"
    )
    + r"\b"
)

_CONCLUSION = re.compile(
    rf"{_B}(?:root cause|in summary|to sum(?:marize| up)|to summarise|in conclusion|to conclude"
    r"|(?:i|we) (?:can )?conclude|the (?:fix|solution|cause|culprit|problem|issue|answer|reason)"
    r" (?:is|was)|therefore|which means|this (?:means|shows|confirms|suggests) (?:that)?"
    r"|it turns out|turns out|tl;?dr|in short|bottom line|all in all|overall,"
    r"|(?:i|we)(?:'ve| have)? found that)"
)

_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?"
_PERIOD = (  # what "last/next/this ..." can name
    r"(?:few |couple of )?(?:morning|afternoon|evening|night|weekends?|weeks?|months?"
    rf"|years?|summer|winter|spring|fall|autumn|{_WEEKDAY})"
)
_TIME_WORDS = re.compile(
    rf"{_B}(?:yesterday|today|tonight|tomorrow|this {_PERIOD}|last {_PERIOD}|next {_PERIOD}"
    rf"|past {_PERIOD}|coming {_PERIOD}|upcoming {_PERIOD}|{_WEEKDAY}"
    r"|(?:minutes?|hours?|days?|weeks?|months?|years?|decades?) (?:ago|later|from now)"
    r"|january|february|april|june|july|august|september|october|november|december"
    r"|(?:in|on|of|since|until|by|early|late|mid) (?:march|may))\b"
)
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t|tember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?\b"
_TIME_DIGITS = re.compile(  # only tried when the text has a digit
    rf"{_B}(?:\d{{1,2}}(?::\d\d)? ?[ap]\.?m\b|\d{{1,2}}:\d\d|\d{{4}}-\d\d-\d\d"
    r"|\d{1,2}/\d{1,2}(?:/\d{2,4})?|(?:in|since|until|by|of|from) (?:19|20)\d\d\b"
    rf"|(?:on|to|until|till|by|before|after|from) the {_DAY}|{_MONTH} {_DAY}"
    rf"|{_DAY} (?:of )?{_MONTH})"
)
_NUMBER_WORD = re.compile(
    rf"{_B}"
    + _any(
        "two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty"
        " sixty seventy eighty ninety hundreds? thousands? millions? billions? dozens?"
    )
    + r"\b"
)
_CAPITALISED_CASED = re.compile(r"[ \t]+([A-Z][a-z]+)")
# A name addressing the other person ("Thanks, Gina!", "Hey Jon!", "I won't quit, Gina."):
# after a comma or a greeting, before punctuation or the end. Not a fact about anyone.
_VOCATIVE_CASED = re.compile(
    r"(?:,|\b(?:[Hh]e+y|[Hh]i|[Hh]ello|[Hh]iya|[Tt]hanks|[Tt]hank you|[Ww]ow|[Ww]oah|[Cc]ongrats"
    r"|[Bb]ye|[Dd]ear|[Yy]o|[Oo]h|[Yy]eah|[Yy]es|[Yy]ep|[Ss]orry|[Ss]ure|[Aa]w+)),?[ \t]+"
    r"([A-Z][a-z]+)(?=\s*[,!.?;:)]|\s*$|\s+[-\u2013\u2014])"
)
_FIRST_PERSON = re.compile(
    rf"{_B}(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|us)\b"
)
_SECOND_PERSON = re.compile(rf"{_B}(?:you|you're|you've|your|yours|yourself)\b")
_NARRATIVE = re.compile(  # the speaker telling what they did or do
    rf"{_B}(?:i|we)(?: just| finally| recently| also| actually| even| really| still)? (?:\w{{2,}}ed"
    r"|made|did|saw|took|gave|found|felt|heard|spent|kept|brought|taught|built|set up|came"
    r"|left|began|wrote|ran|won|met|went|got|bought|sold|told|read|had"
    r"|play|paint|write|swim|cook|bake|volunteer|collect|practi[cs]e|watch|sing|dance|draw"
    r"|knit|hike|ride|teach|coach|mentor|run|read|own)\b(?! (?:it|that|this|you)\b)"
    r"|(?:i'm|i am|we're|we are) (?:currently |now |still |really |also )?\w{3,}ing\b"
    # subject dropped, as chat does: "Just started yoga", "Been busy volunteering"
    rf"|{_SENTENCE_START}(?:just |recently |finally |also )?(?:started|began|finished|joined"
    r"|got|took up|picked up|been \w+ing|been busy|gonna|going to|signed up|moved"
    r"|\w{3,}ed (?:my|myself|our|ourselves)|been (?:in|at|living|working))\b"
)
_NOT_BEFORE_A_NAME = frozenset('.!?:;"“([—-\n')  # a word after these opens a sentence
_NOT_NAMES = frozenset(
    {
        "January", "February", "March", "April", "May", "June", "July", "August",
        "September", "October", "November", "December",
        "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
    }
)  # fmt: skip

_RELATIONS = _any(  # what "my ..." is about when it is personal
    "sisters? brothers? siblings? mom mum mother dad father parents? wife husband partner"
    " spouse fianc\\w* boyfriend girlfriend sons? daughters? kids? children baby family"
    " grand\\w+ aunt uncle cousins? niece nephew friends? roommate neighbou?r boss manager"
    " coworkers? colleagues? dogs? cats? pets? puppy kitten horse job career company business"
    " house home apartment flat car bike birthday anniversary wedding name hometown degree"
    " school college university major thesis hobby hobbies favou?rite trip vacation holiday"
    " class course exam project garden team band"
)
_FACT = (  # personal facts, preferences and life events
    rf"(?:my|our) (?:[\w-]+ )?{_RELATIONS}\b"
    rf"|(?:i|we) (?:have|had|got) (?:an? |\w+ ){{0,2}}{_RELATIONS}\b"
    r"|i(?:'m| am) an? (?!" + _any("bit little lot") + r"\b)\w"
    r"|i(?:'m| am) (?:originally )?"
    + _any(
        "from allergic vegan vegetarian married engaged divorced single pregnant retired"
        " learning studying training volunteering"
    )
    + r"\b|i (?:work|worked|live|lived|grew up|study|studied|teach|taught)\b"
    r"|(?:i|we) (?:really |absolutely |totally |just |also )?"
    r"(?:love|like|enjoy|hate|prefer|adore|dislike|can't stand)s? (?!"
    + _any("it that this those these them you yours? the_idea")
    + r"\b)\w"
    # what the speaker cares about: "I'm passionate about education", "it means a lot to me"
    r"|(?:i|we)(?:'m| am|'re| are) (?:so |really |super |very |pretty )?(?:keen on"
    r"|passionate about|into|interested in|obsessed with|proud of|excited (?:about|for|to))"
    r" (?!(?:it|that|this|them|you)\b)"
    r"|means? (?:a lot|so much|the world) to (?:me|us)\b|(?:my|our) (?:fave|main)\b"
    r"|(?:i|we)(?:'ve| have| had)?(?: just| finally| recently| also)? "
    + _any(
        "moved adopted started finished bought graduated got_married got_engaged got_divorced"
        " got_promoted got_hired got_a got_an got_my joined quit retired visited went"
        " traveled travelled met won lost signed_up volunteered ran painted wrote published"
        " launched opened sold built began completed passed failed took_up learned learnt"
        " married celebrated hosted attended"
    )
    + r"\b|i(?:'ve| have) been \w+ing\b"
)
_PLAN = (  # plans and decisions
    r"(?:i|we)(?:'m| am|'re| are) (?:going to|gonna|planning|thinking (?:of|about)"
    r"|hoping to|about to|considering|dreaming of|saving (?:up )?for|moving|visiting|flying"
    r"|traveling|travelling|leaving|hosting|attending|joining|starting|getting married)\b"
    r"|(?:i|we)(?:'ve| have)? (?:decided|plan|planned|intend|booked|scheduled|registered"
    r"|signed up|enrolled|applied|chose|picked)\b"
    r"|(?:i|we)(?:'ve| have)?(?: always| really)? (?:want(?:ed)? to|wanna|hope to|hoped to"
    r"|would love to)\b|(?:i|we)'d (?:love|like) to\b|(?:my|our) (?:plan|goal|decision)\b"
    # where the speaker is going next: "I'm off to do some taekwondo"
    r"|(?:i|we)(?:'m| am|'re| are) (?:just )?(?:off to|heading (?:to|out|off)|headed to)\b"
)
_PERSONAL = re.compile(rf"{_B}(?:{_FACT}|{_PLAN})")
_SOCIAL = re.compile(
    rf"{_B}"
    + _any(
        "hi hey hello hiya howdy good_morning good_afternoon good_evening good_night bye"
        " goodbye see_you see_ya take_care talk_soon talk_later cheers thanks? thx ty"
        " appreciate(?:d)? no_worries no_problem np haha\\w* hehe\\w* lol lmao wow whoa omg"
        " awesome great cool nice amazing wonderful fantastic lovely sweet perfect brilliant"
        " congrat\\w* sounds glad happy_for_you sorry_to_hear good_luck fingers_crossed"
        " happy_birthday me_too same_here of_course sure ok okay yes yeah yep yup nope absolutely"
        " definitely totally exactly indeed agreed oh aw+ yay woo\\w* got_it makes_sense"
        " fair_enough never_mind don't_worry i_see fun proud beautiful love_it love_that"
        " love_this enjoy(?:ed)?_it welcome"
    )
    + r"\b"
)


# How people text, read as what it stands for before any rule looks: "im" as "i'm", "u"
# as "you", "tmrw" as "tomorrow", "next wed" as "next wednesday". Whole words only, and
# none that is also an English word (not "ill", "wed" or "sat" alone).
_TEXTING_WORDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "im": "i'm", "ive": "i've", "youre": "you're", "dont": "don't",
        "didnt": "didn't", "doesnt": "doesn't", "cant": "can't", "couldnt": "couldn't",
        "isnt": "isn't", "wasnt": "wasn't", "havent": "haven't", "wouldnt": "wouldn't",
        "u": "you", "ur": "your", "pls": "please", "plz": "please",
        "thx": "thanks", "ty": "thank you", "bc": "because", "cuz": "because",
        "b4": "before", "idk": "i don't know", "tbh": "to be honest", "rn": "right now",
        "tmrw": "tomorrow", "tmr": "tomorrow", "tmrrw": "tomorrow", "2moro": "tomorrow",
        "tomoz": "tomorrow", "tonite": "tonight", "2nite": "tonight", "yday": "yesterday",
        "wknd": "weekend", "wkend": "weekend", "mins": "minutes", "hrs": "hours",
    }
)  # fmt: skip
_TEXTING = re.compile(r"(?<![\w'])(?:" + "|".join(_TEXTING_WORDS) + r")(?![\w'])")
_DAY_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday",
        "thu": "thursday", "thur": "thursday", "thurs": "thursday", "fri": "friday",
        "sat": "saturday", "sun": "sunday",
    }
)  # fmt: skip
_SHORT_DAY = re.compile(
    r"\b(next|this|last|on|by|until|till|from|every) (" + "|".join(_DAY_NAMES) + r")\b"
)


def _untexted(low: str) -> str:
    """Lowercased text with its texting forms written out (see _TEXTING_WORDS)."""
    low = _TEXTING.sub(lambda m: _TEXTING_WORDS[m.group(0)], low)
    return _SHORT_DAY.sub(lambda m: f"{m.group(1)} {_DAY_NAMES[m.group(2)]}", low)


# --- one message, as the rules see it ----------------------------------------------------


def _lower(value: str | None) -> str:
    return value.strip().lower() if value else ""


class _Seen:
    """A message as the rules read it. Each reading past the metadata is computed on first
    use and kept, so a message decided by an early rule costs little."""

    def __init__(self, message: Message) -> None:
        text = message.text
        if len(text) > 2 * _READ:
            text = text[:_READ] + "\n" + text[-_READ:]
        self.text = text = text.replace("\u2019", "'")  # curly apostrophes
        self.low = "\n" + _untexted(text.lower())
        role, kind, self.status = (
            _lower(message.role),
            _lower(message.kind),
            _lower(message.tool_status),
        )
        self.system = role in _SYSTEM_ROLES
        self.call = kind.endswith(_CALL_KINDS)
        self.from_tool = role in _TOOL_ROLES or kind.endswith(_OUTPUT_KINDS) or bool(self.status)
        self.from_agent = role in _AGENT_ROLES or kind == "reasoning"
        self.question = text.rstrip().endswith("?")

    @cached_property
    def undenied(self) -> str:
        """The lowercased text without the phrases that deny an error."""
        return _DENIED_ERRORS.sub(" ", self.low)

    @cached_property
    def strong_error(self) -> bool:
        # Removing denials only removes matches, so the cheap search on the raw text goes first.
        return bool(
            (_STRONG_ERROR.search(self.low) and _STRONG_ERROR.search(self.undenied))
            or _STRONG_ERROR_CASED.search(self.text)
        )

    @cached_property
    def weak_error(self) -> bool:
        return bool(_WEAK_ERROR.search(self.low) and _WEAK_ERROR.search(self.undenied))

    @cached_property
    def digit(self) -> bool:
        return _DIGIT.search(self.low) is not None

    @cached_property
    def key_data(self) -> bool:
        low = self.low
        if "@" in low and _EMAIL.search(low):
            return True
        if self.digit and (_KEY_SYMBOL.search(low) or _KEY_WORD.search(low)):
            return True
        return (self.digit or self.time) and _BUSINESS_TERM.search(low) is not None

    @cached_property
    def time(self) -> bool:
        low = self.low
        return bool(_TIME_WORDS.search(low) or (self.digit and _TIME_DIGITS.search(low)))

    @cached_property
    def number(self) -> bool:
        return self.digit or _NUMBER_WORD.search(self.low) is not None

    @cached_property
    def name(self) -> bool:
        text = self.text
        vocatives: set[int] | None = None
        for found in _CAPITALISED_CASED.finditer(text):
            start = found.start()
            if (
                start
                and text[start - 1] not in _NOT_BEFORE_A_NAME
                and found.group(1) not in _NOT_NAMES
            ):
                if vocatives is None:
                    vocatives = {v.start(1) for v in _VOCATIVE_CASED.finditer(text)}
                if found.start(1) not in vocatives:
                    return True
        return False

    @cached_property
    def vocative(self) -> bool:
        """Whether it addresses someone by name: a message between people."""
        return _VOCATIVE_CASED.search(self.text) is not None

    @cached_property
    def detail(self) -> float:
        """How much the message tells about its speaker, in [-1, 1]: longer, in the first
        person, telling what they did, with a time: more; about the other person ("you"),
        or asking: less. It orders messages within a category (see :func:`label`)."""
        low = self.low
        d = 0.5 * math.log2(max(self.words, 1) / 12)  # 12 words: 0; 48: +1
        d += 0.25 * min(len(_NARRATIVE.findall(low)), 2)
        d += 0.1 * min(len(_FIRST_PERSON.findall(low)), 4)
        d -= 0.1 * min(len(_SECOND_PERSON.findall(low)), 4)
        d -= 0.4 * ("?" in low)
        d += 0.2 * self.time
        return max(-1.0, min(1.0, d))

    @cached_property
    def personal(self) -> bool:
        return _PERSONAL.search(self.low) is not None or _NARRATIVE.search(self.low) is not None

    @cached_property
    def words(self) -> int:
        return len(self.low.split())

    @cached_property
    def social(self) -> int:
        """How many social phrases."""
        return len(_SOCIAL.findall(self.low))


def _standing_order(m: _Seen) -> bool:
    low = m.low
    if m.from_agent:
        return False
    if _STANDING_ORDER.search(low) or _ORDER_CASED.search(m.text):
        return True
    # A bare imperative ("make sure ...", "don't forget ...") is advice, not an order to the
    # assistant, in a message that addresses a person by name.
    return _IMPERATIVE.search(low) is not None and not m.vocative


def _setting(m: _Seen) -> bool:
    return not m.from_agent and bool(_SETTING.search(m.low) or _SETTING_CASED.search(m.text))


def _chitchat(m: _Seen) -> bool:
    if m.personal:
        return False
    if m.words <= 15 and m.social * 5 >= m.words and not (m.time or m.number):
        return True
    if m.question and m.words <= 8 and not (m.number or m.name):
        return True
    return m.words <= 3 and not (m.time or m.number or m.name)


_Rule = tuple[str, Callable[[_Seen], bool], str]

# (name, applies, category), tried in order: the module docstring explains each.
_RULES: Final[tuple[_Rule, ...]] = (
    ("tool_failed", lambda m: m.status in _FAILED_STATUS, "tool_error"),
    ("system_prompt", lambda m: m.system, "instruction"),
    ("tool_call", lambda m: m.call, "context"),
    ("tool_error_text", lambda m: m.from_tool and (m.strong_error or m.weak_error), "tool_error"),
    ("tool_output", lambda m: m.from_tool, "context"),
    ("standing_order", _standing_order, "instruction"),
    ("credential", lambda m: _CREDENTIAL.search(m.low) is not None, "instruction"),
    ("setting", _setting, "instruction"),
    ("error_signature", lambda m: m.strong_error, "tool_error"),
    ("key_data", lambda m: m.key_data, "business"),
    ("personal_fact", lambda m: m.personal and (m.time or m.number or m.name), "business"),
    ("dated_event", lambda m: not m.question and m.time and (m.number or m.name), "business"),
    ("conclusion", lambda m: not m.question and bool(_CONCLUSION.search(m.low)), "conclusion"),
    ("personal_statement", lambda m: m.personal, "conclusion"),
    ("named_or_timed", lambda m: not m.question and (m.time or m.name), "conclusion"),
    ("chitchat", _chitchat, "chitchat"),
)


# --- the API ------------------------------------------------------------------------------


# The categories a message's detail moves within: its importance is the category's times
# (1 + GRADED * detail), so a category never reaches the next (8 and 7 are closest).
_GRADED_CATEGORIES = frozenset({"business", "conclusion", "context", "chitchat"})
GRADED = 0.1


def category_of(importance: float) -> str | None:
    """The category :func:`label` gives ``importance`` to (a graded category's band, or an
    ungraded one's exact value); None for an importance the rules never give."""
    for category, anchor in CATEGORIES.items():
        if category in _GRADED_CATEGORIES:
            if anchor * (1 - GRADED) <= importance <= anchor * (1 + GRADED):
                return category
        elif importance == anchor:
            return category
    return None


def label(message: Message) -> Label:
    """The category of ``message`` by the built-in rules, the rule that decided it, and its
    importance: the category's, or for business, conclusion, context and chitchat, that
    times 1 +/- up to 10% by the message's detail (:attr:`_Seen.detail`)."""
    if not isinstance(message, Message):
        raise BadArgument(f"label() takes a Message, not {type(message).__name__}")
    seen = _Seen(message)
    found = next(((n, c) for n, applies, c in _RULES if applies(seen)), ("context", "context"))
    name, category = found
    importance = CATEGORIES[category]
    if category in _GRADED_CATEGORIES:
        importance *= 1 + GRADED * seen.detail
    return Label(category, importance, name)


def rules(message: Message) -> float:
    """The built-in labeler: the importance :func:`label` gives ``message``."""
    return label(message).importance


def _checked(value: object, labeler: object) -> float:
    x = finite_number(value)
    if x is None or x <= 0:
        raise BadImportance(f"labeler {labeler!r} returned {value!r}; need a finite number > 0")
    return x


def importance_of(labeler: Labeler, message: Message) -> float:
    """Call a synchronous ``labeler`` on ``message`` and check its answer.

    Raises BadImportance unless the answer is a finite number > 0, and BadArgument if the
    labeler returned an awaitable (use :func:`aimportance_of` for that one).
    """
    value = labeler(message)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # never awaited; closing it avoids a RuntimeWarning
        raise BadArgument(f"labeler {labeler!r} returned an awaitable; call aimportance_of for it")
    return _checked(value, labeler)


async def aimportance_of(labeler: Labeler, message: Message) -> float:
    """Call ``labeler`` on ``message``, awaiting its answer if it returned an awaitable,
    and check it as :func:`importance_of` does. A labeler with an ``aimportance`` coroutine
    method is awaited through that instead (a blocking
    :class:`~memevict.labelers.CachedLabeler` runs its labeler in a worker thread there)."""
    awaited = getattr(labeler, "aimportance", None)
    if awaited is not None and inspect.iscoroutinefunction(awaited):
        return _checked(await awaited(message), labeler)
    value = labeler(message)
    if inspect.isawaitable(value):
        value = await value
    return _checked(value, labeler)


def load_labeler(spec: str) -> Labeler:
    """The labeler named by ``spec``: "rules" (the built-in rules), or a callable to import
    as "package.module:name" or "package.module.name".

    Raises BadArgument when the module or the name cannot be imported or is not callable.
    """
    spec = spec.strip()
    if spec == "rules":
        return rules
    module_name, colon, attr = spec.partition(":")
    if not colon:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise BadArgument(
            f"labeler {spec!r}: expected 'rules', 'package.module:name' or 'package.module.name'"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an import can fail any way; say which labeler and why
        raise BadArgument(f"labeler {spec!r}: cannot import module {module_name!r}: {exc}") from exc
    found: object = module
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError as exc:
            raise BadArgument(f"labeler {spec!r}: {module_name!r} has no {attr!r}") from exc
    if not callable(found):
        raise BadArgument(f"labeler {spec!r}: {found!r} is not callable")
    return cast(Labeler, found)
