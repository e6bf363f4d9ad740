"""The terms of a text, for the lexical index (lua/lib/index.lua).

The scripts do no text processing: the client gives each memory's terms with its
text, and a query's terms with the query (the format, for another language's
client, is in docs/lua-contract.md: terms). This is memevict's one way of making
them, so that a memory and a query meet on the same terms:

- Unicode NFKC, then case-folded ("Straße" and "STRASSE" meet);
- split on anything but letters and digits (underscores and apostrophes too);
- words of one character and common English function words dropped;
- each term at most 64 bytes of UTF-8 (cut at a character), each once;
- at most 256 terms a memory (the first met) and 32 a query;
- at most 256 in one call, its memories' together (remember_many): where a batch's texts
  have more, each is cut to the same most, keeping its longest terms (``fitted``).
"""

from __future__ import annotations

import re
import unicodedata

MAX_TERMS = 256
QUERY_TERMS = 32
MAX_TERM_BYTES = 64
CALL_TERMS = 256  # terms one call indexes, all its memories' (lua/lib/index.lua: its work)

_WORD = re.compile(r"[^\W_]+")

# Function words that match nearly every message, and so tell nothing (a query's
# "what", "did", "you" would otherwise outweigh its one rare word).
_STOP = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing don down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just let me more most my myself no nor not now of off on once only
    or other our ours ourselves out over own re same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves ll ve isn aren wasn weren didn doesn hasn haven hadn won wouldn
    shouldn couldn im ok oh yeah yes also get got go going one really like know think
"""
STOP_WORDS = frozenset(_STOP.split())


def _cut(term: str) -> str:
    """``term`` cut to at most MAX_TERM_BYTES bytes of UTF-8, at a character."""
    data = term.encode()
    if len(data) <= MAX_TERM_BYTES:
        return term
    return data[:MAX_TERM_BYTES].decode(errors="ignore")


def terms(text: str, limit: int = MAX_TERMS) -> list[str]:
    """The distinct terms of ``text``, in the order first met, at most ``limit``."""
    out: list[str] = []
    seen: set[str] = set()
    folded = unicodedata.normalize("NFKC", text).casefold()
    for word in _WORD.findall(folded):
        if len(word) < 2 or word in STOP_WORDS:
            continue
        term = _cut(word)
        if term and term not in seen:
            seen.add(term)
            out.append(term)
            if len(out) >= limit:
                break
    return out


def query_terms(query: str) -> list[str]:
    """The terms of a query (at most QUERY_TERMS)."""
    return terms(query, QUERY_TERMS)


def joined(found: list[str] | tuple[str, ...]) -> bytes:
    """Terms as the scripts take them: joined by single spaces."""
    return " ".join(found).encode("utf-8", "surrogateescape")


def fitted(lists: list[list[str]], room: int) -> list[list[str]]:
    """Term lists cut to at most ``room`` terms in all: each to the same most, the largest
    that fits, keeping its longest terms (a long word is most often a rare one, and a rare
    term tells a memory apart) in the order met."""
    if sum(map(len, lists)) <= room:
        return lists
    most = 0
    while sum(min(len(found), most + 1) for found in lists) <= room:
        most += 1
    out = []
    for found in lists:
        if len(found) > most:
            kept = sorted(range(len(found)), key=lambda i: (-len(found[i].encode()), i))[:most]
            found = [found[i] for i in sorted(kept)]
        out.append(found)
    return out
