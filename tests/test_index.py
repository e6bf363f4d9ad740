"""The lexical index (issue 39): kept by the same atomic calls that write, move and
delete memories, so a search never returns a memory that is gone and finds one as soon
as the call that wrote it returns; relevance as docs say (BM25, b = 0), checked against
a reference computed here from what the test itself remembered."""

from __future__ import annotations

import asyncio
import itertools
import math
import random

import pytest
import redis

from memevict import BadArgument, BadTerms, Item, MemoryStore, Policy, commands
from memevict.integrations.openai_agents import MemevictSession
from memevict.scripts import key_name, namespace_keys, register
from memevict.terms import CALL_TERMS, fitted, query_terms, terms
from tests.servers import Server

T0 = 1_700_000_000_000
WORDS = [f"w{i}" for i in range(40)]


def live_indexed(client: redis.Redis, ns: str) -> dict[str, str]:
    """id -> entry of every memory the index holds as live (its entries hash)."""
    entries = client.hgetall(key_name(ns, "entries"))
    of = client.hgetall(key_name(ns, "entry_of"))
    assert {v: k for k, v in entries.items()} == of  # the two maps agree
    return {k.decode(): v.hex() for k, v in of.items()}


def test_terms_are_folded_split_and_kept_once() -> None:
    assert terms("The PASSWORD is Swordfish, the password!") == ["password", "swordfish"]
    assert terms("Straße and STRASSE") == ["strasse"]
    assert terms("snake_case it's a-b 1 22") == ["snake", "case", "22"]
    assert terms("x" * 100) == ["x" * 64]
    assert len(terms(" ".join(f"t{i}" for i in range(300)))) == 256
    assert len(query_terms(" ".join(f"t{i}" for i in range(300)))) == 32
    assert terms("") == [] and terms("the and of") == []


@pytest.mark.parametrize("seed", range(6))
def test_the_index_holds_exactly_the_live_memories_with_terms(
    client: redis.Redis, seed: int
) -> None:
    rng = random.Random(seed)
    policy = Policy(max_hot=6, cold_max=5, protect_s=0, index=1)
    store = MemoryStore(client, "ix", policy)
    indexed: dict[str, set[str]] = {}  # id -> its terms, as last remembered with text
    for step in range(120):
        now = T0 + step
        what = rng.random()
        if what < 0.45:
            id = f"m{rng.randrange(30)}"
            if rng.random() < 0.8:
                text = " ".join(rng.sample(WORDS, rng.randint(0, 4)))
                store.remember(id, rng.uniform(0.1, 5), text=text, now=now)
                indexed[id] = set(terms(text))
            else:
                store.remember(id, rng.uniform(0.1, 5), now=now)  # keeps its text and terms
                indexed.setdefault(id, set())
        elif what < 0.65:
            items = []
            for _ in range(rng.randint(1, 5)):
                id = f"m{rng.randrange(30)}"
                text = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
                items.append(Item(id, rng.uniform(0.1, 5), text=text))
            store.remember_many(items, now=now)
            for item in items:  # (the last item of an id wins)
                indexed[item.id] = set(terms(item.text or ""))
        elif what < 0.8 and indexed:
            id = rng.choice(sorted(indexed))
            if store.get(id, now=now) is not None:
                store.forget(id)
        elif what < 0.9 and indexed:
            id = rng.choice(sorted(indexed))
            if store.get(id, now=now) is not None:
                store.recall(id, now=now)
        else:
            store.remember(f"n{step}", 1.0, text="plain words here", terms=[], now=now)
            indexed[f"n{step}"] = set()
        # Deleted memories (forgotten, or trimmed past cold_max) are out of the model.
        meta = {k.decode() for k in client.hkeys(key_name("ix", "meta"))}
        indexed = {id: t for id, t in indexed.items() if id in meta}
        assert set(live_indexed(client, "ix")) == {id for id, t in indexed.items() if t}
        # A search finds only live memories, and each of them by any of its terms.
        for word in rng.sample(WORDS, 3):
            found = {m.memory.id for m in store.search(word, 100, now=now)}
            alive = {id for id, t in indexed.items() if word in t and store.get(id, now=now)}
            assert found == alive, (step, word)


def test_relevance_is_bm25_without_length_normalisation(client: redis.Redis) -> None:
    rng = random.Random(7)
    store = MemoryStore(client, "rank", Policy(max_hot=1000, protect_s=0, index=1))
    docs: dict[str, set[str]] = {}
    for i in range(200):
        words = set(rng.sample(WORDS, rng.randint(1, 6)))
        store.remember(f"d{i}", 1.0, text=" ".join(sorted(words)), now=T0 + i)
        docs[f"d{i}"] = words
    for query in (["w1"], ["w1", "w2"], ["w3", "w17", "w39"]):
        n = len(docs)
        df = {t: sum(t in d for d in docs.values()) for t in query}
        expected = {
            id: sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in query if t in d)
            for id, d in docs.items()
            if any(t in d for t in query)
        }
        found = store.search(" ".join(query), 100)
        best = sorted(expected.values(), reverse=True)[: len(found)]
        assert [m.relevance for m in found] == pytest.approx(best)
        for match in found:
            assert match.relevance == pytest.approx(expected[match.memory.id])
        # Ties: the memory indexed last first.
        for a, b in itertools.pairwise(found):
            if a.relevance == pytest.approx(b.relevance):
                assert int(a.memory.id[1:]) > int(b.memory.id[1:])


def test_search_reads_a_tier_and_returns_the_memory(client: redis.Redis) -> None:
    store = MemoryStore(client, "tiers", Policy(max_hot=1, protect_s=0, index=1))
    store.remember("pw", 1.0, text="the bank password is swordfish", now=T0)
    store.remember("other", 9.0, text="the weather is fine", now=T0 + 1)
    [hit] = store.search("what was the password?")
    assert (hit.memory.id, hit.memory.tier, hit.memory.text) == (
        "pw",
        "cold",
        "the bank password is swordfish",
    )
    assert store.search("password", tier="hot") == []
    assert [m.memory.id for m in store.search("password", tier="cold")] == ["pw"]
    assert store.search("") == [] and store.search("the of and") == []
    assert store.search("password", 0) == []
    store.remember("pw", 1.0, text="changed to hunter2", now=T0 + 2)  # indexed again
    assert store.search("swordfish") == []
    assert [m.memory.id for m in store.search("hunter2")] == ["pw"]


def test_bad_terms_are_refused_before_anything_is_written(client: redis.Redis) -> None:
    store = MemoryStore(client, "bad", Policy(protect_s=0, index=1))
    for bad in (["two words"], ["x" * 65], [""], [f"t{i}" for i in range(257)]):
        with pytest.raises(BadTerms):
            store.remember("a", 1.0, text="t", terms=bad)
    with pytest.raises(BadTerms):
        store.remember("a", 1.0, terms=["t"])  # terms without text
    assert store.get("a") is None
    assert not client.exists(key_name("bad", "terms"))


def test_fitted_cuts_each_list_to_one_most_keeping_its_longest_terms() -> None:
    lists = [["aa", "b", "cccc"], ["dd"], ["e", "ffffff", "gg", "hhh"]]
    assert fitted(lists, 8) is lists  # (8 in all: nothing cut)
    # 6: each to 2 at most (2 + 1 + 2; 3 each would be 3 + 1 + 3 = 7), the longest kept
    # in the order met.
    assert fitted(lists, 6) == [["aa", "cccc"], ["dd"], ["ffffff", "hhh"]]
    assert fitted(lists, 2) == [[], [], []]  # (1 each would be 3)
    assert fitted([["éé", "abc"]], 1) == [["éé"]]  # (longest in bytes: 4 against 3)


def test_a_call_indexes_at_most_call_terms(client: redis.Redis) -> None:
    store = MemoryStore(client, "cap", Policy(protect_s=0, index=1))
    # 100 texts of 20 distinct words each: 2,000 terms, cut to 2 a memory, the longest.
    texts = [" ".join(f"w{i}x{j}" + "z" * (j % 3) for j in range(20)) for i in range(100)]
    store.remember_many([Item(f"m{i}", 1.0, text=t) for i, t in enumerate(texts)], now=T0)
    postings = sum(
        (len(v) - 4) // 4 + 64 * int.from_bytes(v[:4], "big")
        for k, v in client.hgetall(key_name("cap", "terms")).items()
        if k and b"\0" not in k
    )
    assert CALL_TERMS == 256 and postings == 200  # 2 each (3 each would be 300)
    # m7's 2 longest: of its three 7-byte terms (w7x11zz, w7x14zz, w7x17zz) the first met.
    assert [m.memory.id for m in store.search("w7x14zz")] == ["m7"]
    assert store.search("w7x17zz") == [] and store.search("w7x2zz w7x0") == []  # cut
    # Terms given are not cut: more than CALL_TERMS of them are refused, nothing written.
    given = [Item(f"g{i}", 1.0, text="t", terms=[f"t{j}" for j in range(200)]) for i in range(3)]
    with pytest.raises(BadTerms, match="at most 256 terms"):
        store.remember_many(given, now=T0)
    assert store.get("g0") is None
    # The script refuses them too, before any write: 200 + 57.
    call = commands.remember_many(given[:1], now=T0)
    items = list(call.args["items"])
    extra = items[:8]
    extra[7] = b" ".join(f"u{j}".encode() for j in range(57))
    before = client.hgetall(key_name("cap", "terms"))
    with pytest.raises(redis.ResponseError, match="BAD_TERMS a call indexes at most 256"):
        register(client).remember_many("cap", {**call.args, "items": items + extra})
    assert client.hgetall(key_name("cap", "terms")) == before
    assert store.get("g0") is None


def test_the_policy_turns_the_index_on_and_off(client: redis.Redis) -> None:
    store = MemoryStore(client, "onoff", Policy(protect_s=0))  # index=0: the default
    store.remember("a", 1.0, text="the bank password is swordfish", now=T0)
    store.remember_many([Item("b", 1.0, text="swordfish again")], now=T0)
    assert store.search("swordfish") == []
    assert not client.exists(*(key_name("onoff", r) for r in ("terms", "entries", "entry_of")))
    store.set_policy(index=1)  # memories remembered with text from now on
    store.remember("c", 1.0, text="a swordfish too", now=T0 + 1)
    assert [m.memory.id for m in store.search("swordfish")] == ["c"]
    store.remember("a", 1.0, text="the bank password is swordfish", now=T0 + 2)  # again
    assert [m.memory.id for m in store.search("swordfish")] == ["a", "c"]
    store.set_policy(index=0)  # the index goes
    assert not client.exists(*(key_name("onoff", r) for r in ("terms", "entries", "entry_of")))
    assert store.search("swordfish") == []
    assert store.get("c") is not None  # (the memories stay)


@pytest.mark.parametrize(
    "dropped",
    [("index", "protect_memories", "log_max"), ("protect_memories", "log_max"), ("log_max",)],
)
def test_a_policy_packed_before_fields_were_added_reads_their_defaults(
    client: redis.Redis, dropped: tuple[str, ...]
) -> None:
    """A packed copy of the memevict before the index field (the 14 fields before it
    and the revision, 15 values), before protect_memories (15 fields and the revision)
    or before log_max (16 and the revision) reads the fields it lacks as 0 and keeps
    its revision (no false NAMESPACE_CHANGED for the stores that saw it)."""
    policy = Policy(max_hot=7, protect_s=0, protect_memories=0)
    store = MemoryStore(client, "old", policy)
    store.remember("a", 1.0, now=T0)
    key = key_name("old", "policy")
    unpack = "return cmsgpack.unpack(redis.call('HGET', KEYS[1], 'packed'))"
    # index, protect_memories, log_max, revision (Lua: integers)
    assert client.eval(unpack, 1, key)[14:] == [0, 0, 0, 1]
    drop_fields = """
      local n = cmsgpack.unpack(redis.call('HGET', KEYS[1], 'packed'))
      for i = 1, tonumber(ARGV[1]) do table.remove(n, 18 - i) end
      redis.call('HSET', KEYS[1], 'packed', cmsgpack.pack(n))
      return #n"""
    assert client.eval(drop_fields, 1, key, len(dropped)) == 18 - len(dropped)
    client.hdel(key, *dropped)
    # A raw write with the seen the store had: not refused (the revision read as it was).
    call = commands.remember("b", 2.0, text=None, whitelist=False, now=T0)
    assert register(client).remember("old", {**call.args, "seen": store._seen})
    assert MemoryStore(client, "old").policy == policy


def test_search_goes_on_to_lower_relevances_when_the_best_are_filtered(
    client: redis.Redis,
) -> None:
    """The best 80 hold both words and are hot; the one cold memory holds one of them:
    a search of the cold tier reads past the best relevance to find it."""
    store = MemoryStore(client, "lower", Policy(max_hot=80, protect_s=0, index=1))
    store.remember("cold one", 0.1, text="alpha only", now=T0)
    for i in range(80):
        store.remember(f"hot{i}", 5.0, text="alpha beta", now=T0 + 1 + i)
    assert store.get("cold one").tier == "cold"  # type: ignore[union-attr]
    found = store.search("alpha beta", 10, tier="cold")
    assert [m.memory.id for m in found] == ["cold one"]
    assert len(store.search("alpha beta", 100, tier="hot")) == 80


def _context_store(client: redis.Redis, ns: str, **fields: int) -> MemoryStore:
    """A conversation of 31 ten-token messages in a 100-token hot tier: the password,
    said first, is cold by the end; the chat about the weather fills the window."""
    store = MemoryStore(client, ns, Policy(max_tokens=100, protect_s=0, **fields))  # type: ignore[arg-type]
    store.remember("pw", 1.0, text="the bank password is swordfish", tokens=10, now=T0)
    store.remember("tool", 1.0, text="call", tokens=5, group="g", now=T0 + 1)
    store.remember("out", 1.0, text="the vault code is 4711", tokens=5, group="g", now=T0 + 2)
    for i in range(30):
        store.remember(f"m{i}", 2.0, text=f"weather talk {i}", tokens=10, now=T0 + 3 + i)
    return store


def test_a_query_brings_the_best_matches_the_window_left_out(client: redis.Redis) -> None:
    store = _context_store(client, "ctx", index=1)
    plain = store.context(100, now=T0 + 50)
    assert "pw" not in dict(plain.items) and plain.recalled == ()
    got = store.context(100, query="what was the password?", share=0.5, now=T0 + 50)
    assert got.recalled == ("pw",)
    ids = [id for id, _ in got]
    assert ids[0] == "pw" and dict(got.items)["pw"] == "the bank password is swordfish"
    # The rest is the window of what the query left (90 tokens), in time order.
    window = store.context(90, skip=["pw"], now=T0 + 50)
    assert ids[1:] == [id for id, _ in window] and got.tokens == 10 + window.tokens <= 100
    assert store.get("pw", now=T0 + 50).tier == "cold"  # type: ignore[union-attr]  # (not recalled)
    # A group comes whole: the tool call with its output.
    got = store.context(100, query="the vault code", share=0.5, now=T0 + 50)
    assert set(got.recalled) == {"tool", "out"} and [i for i, _ in got][:2] == ["tool", "out"]
    assert got.tokens <= 100
    # Nothing matches, share 0, no budget: the plain window.
    for kwargs in ({"query": "zebra"}, {"query": "password", "share": 0.0}):
        same = store.context(100, now=T0 + 50, **kwargs)  # type: ignore[arg-type]
        assert same.items == plain.items and same.recalled == ()
    assert store.context(query="password", now=T0 + 50).recalled == ()


def test_a_window_with_a_query_takes_what_context_takes(client: redis.Redis) -> None:
    """window(query=...) chooses as context(query=...) does, and returns the memories
    whole: a recalled cold one with its tier and its score as get gives it."""
    store = _context_store(client, "win", index=1)
    for query, share in (("what was the password?", 0.5), ("the vault code", 0.5), ("", 0.5)):
        got = store.window(100, query=query, share=share, now=T0 + 50)
        same = store.context(100, query=query, share=share, now=T0 + 50)
        assert [m.id for m in got] == [id for id, _ in same] and got.recalled == same.recalled
        assert (got.tokens, got.left) == (same.tokens, same.left)
    got = store.window(100, query="what was the password?", share=0.5, now=T0 + 50)
    pw = next(m for m in got if m.id == "pw")
    assert pw == store.get("pw", now=T0 + 50) and pw.tier == "cold"
    assert store.window(100, now=T0 + 50).recalled == ()


def test_a_query_finds_nothing_without_the_index(client: redis.Redis) -> None:
    store = _context_store(client, "noindex")
    plain = store.context(100, now=T0 + 50)
    got = store.context(100, query="password", share=0.5, now=T0 + 50)
    assert got.items == plain.items and got.recalled == ()


def test_the_default_share_is_about_a_thousand_tokens() -> None:
    from memevict.commands import recall_share

    assert recall_share(2000) == 0.5 and recall_share(100) == 0.5
    assert recall_share(5000) == pytest.approx(0.2) and recall_share(10_000) == pytest.approx(0.1)


def test_the_openai_session_brings_back_what_the_question_asks_about(server: Server) -> None:
    """Through MemevictSession with only max_tokens: a message long evicted comes back into
    get_items() when the latest user message asks about it; recall_share=0 turns it off."""

    async def ask(share: float | None) -> list[str]:
        session = MemevictSession(
            f"recall-{share}", url=server.url, max_tokens=150, recall_share=share
        )
        await session.clear_session()
        said = [{"role": "user", "content": "my locker code is 4711, keep it"}]
        said += [{"role": "assistant", "content": "Noted."}]
        for i in range(40):
            said += [{"role": "user", "content": f"let us chat about the weather, part {i}"}]
            said += [{"role": "assistant", "content": f"sunny with clouds, part {i}"}]
        for i in range(0, len(said), 2):
            await session.get_items()
            await session.add_items(said[i : i + 2])
        await session.add_items([{"role": "user", "content": "What is my locker code?"}])
        texts = [str(item.get("content")) for item in await session.get_items()]
        await session.clear_session()
        await session.close()
        return texts

    assert "my locker code is 4711, keep it" in asyncio.run(ask(None))
    assert "my locker code is 4711, keep it" not in asyncio.run(ask(0))
    with pytest.raises(BadArgument):
        MemevictSession("x", url=server.url, recall_share=1.5)


def test_the_adapters_send_a_long_history_in_calls_that_keep_every_term(
    server: Server,
) -> None:
    """30 messages of 60 words each (1,800 terms) added at once: the session sends them in
    calls of at most CALL_TERMS terms, so no text's terms are cut (memevict.terms.fitted)."""

    async def run() -> list[list[str]]:
        session = MemevictSession("long", url=server.url, max_tokens=100_000)
        await session.clear_session()
        said = [
            {"role": "user", "content": " ".join(f"m{i}w{j}" for j in range(60))} for i in range(30)
        ]
        await session.add_items(said)  # type: ignore[arg-type]
        store = MemoryStore(redis.Redis.from_url(server.url), "openai:long")
        found = [[m.memory.id for m in store.search(f"m{i}w59")] for i in range(30)]
        await session.clear_session()
        await session.close()
        return found

    found = asyncio.run(run())
    assert all(len(ids) == 1 for ids in found)  # each text's last word: indexed
    assert len({ids[0] for ids in found}) == 30


def test_every_write_keeps_the_index_alive_with_its_memories(client: redis.Redis) -> None:
    """idle_ttl_s: each write script (decay too) gives every key of the namespace, the
    index's with them, the whole idle_ttl_s again, so the index never expires first."""
    store = MemoryStore(client, "alive", Policy(idle_ttl_s=100, protect_s=0, index=1))
    store.remember("a", 1.0, text="the password is swordfish", now=T0)
    store.remember("b", 2.0, text="a dog named Rex", now=T0)
    index = [key_name("alive", role) for role in ("terms", "entries", "entry_of")]
    keys = [k for k in namespace_keys("alive") if client.exists(k)]
    assert set(index) <= set(keys)
    calls = {
        "decay": lambda: store.decay(0.5),
        "touch": lambda: store.touch("a", now=T0),
        "evict": lambda: store.evict(now=T0),
        "whitelist": lambda: store.whitelist("b", now=T0),
        "demote": lambda: store.demote("b", now=T0),
        "remember": lambda: store.remember("c", 1.0, now=T0),
        "forget": lambda: store.forget("c"),
    }
    for name, call in calls.items():
        for k in keys:
            client.pexpire(k, 5000)  # (as if 95 s had gone by)
        call()
        assert all(client.pttl(k) > 90_000 for k in keys), name
