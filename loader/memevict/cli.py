"""The ``memevict`` command line."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click
import redis

from memevict import commands
from memevict.clients import client_from_url, close_client
from memevict.commands import MAX_SCAN, MAX_TOP, check_namespace
from memevict.errors import BadPolicy, MemevictError
from memevict.log import MAX_COUNT as MAX_LOG
from memevict.namespaces import Namespace, drop_namespace
from memevict.namespaces import namespaces as list_namespaces
from memevict.policy import CLOCKS, Policy, field_docs
from memevict.results import (
    Eviction,
    Explanation,
    Memory,
    Remembered,
    ScanPage,
    Stats,
    Tier,
    Window,
)
from memevict.scripts import key_name, namespace_keys, specs
from memevict.store import MemoryStore

if TYPE_CHECKING:  # (the simulate package loads only when simulate runs)
    from memevict.simulate import Transcript

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def connect(url: str | None, *, routed: bool = True) -> Iterator[Any]:
    """A client of ``url``, or of the embedded server when url is None. A URL of
    a cluster node gives a cluster client, which routes each call to the node of
    its slot (``routed``; else a client of that node alone)."""
    if url:
        try:
            chosen = client_from_url(url, routed=routed)
        except ValueError as error:
            raise click.BadParameter(
                f"{url!r}: {error} (for example redis://127.0.0.1:6379/0)", param_hint="--url"
            ) from None
        except redis.ResponseError as error:  # a wrong database index or password: one line
            raise click.ClickException(f"cannot use {url}: {error}") from None
        try:
            yield chosen
        finally:
            close_client(chosen)
    else:
        from memevict.embedded import data_dir, embedded_client

        _say(f"no --url or REDIS_URL: using the embedded server in {data_dir()}")
        with _ended_by_signals(), embedded_client(report=_say) as client:
            yield client


@contextmanager
def _ended_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (a timeout, a service stop, a closed terminal) end the command
    as Ctrl-C does, through its finally blocks, so that it stops its embedded server
    instead of leaving it running. (SIGKILL cannot be caught: the next command stops
    what such a command left.)"""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield  # (only the main thread may set handlers)
        return

    def end(signum: int, _: object) -> None:
        raise SystemExit(128 + signum)

    wanted = (signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, end) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _say(line: str) -> None:
    """A note for the operator, on stderr (stdout keeps what the command prints)."""
    click.echo(f"memevict: {line}", err=True)


# The adapters, by the framework name each gives namespace_for (memevict/integrations),
# which makes every namespace of theirs <name>:...
ADAPTERS = ("openai", "langchain", "pydantic-ai")


def _adapter_of(namespace: str) -> str | None:
    """The adapter whose sessions' namespaces look like ``namespace``, if any (an adapter
    given a namespace= of another shape is not recognised)."""
    return next((a for a in ADAPTERS if namespace.startswith(f"{a}:")), None)


@contextmanager
def _store(
    ctx: click.Context, *, read: bool = False, creates: bool = False
) -> Iterator[MemoryStore]:
    """The namespace's store. For a command that only reads (``read``), one that never
    writes, so reading a namespace that does not exist does not create it. A write
    creates the namespace only if it ``creates`` (remember, policy); any other write on
    a namespace that does not exist is an error, and leaves it absent."""
    name = ctx.obj["namespace"]
    with connect(ctx.obj["url"]) as client:
        if not (read or creates) and not client.exists(key_name(check_namespace(name), "policy")):
            raise click.ClickException(
                f"NoPolicy: namespace {name!r} does not exist (remember creates it)"
            )
        yield MemoryStore(client, name, read_only=read)


def _emit(data: Any, as_json: bool, text: Callable[[], str]) -> None:
    if as_json:
        click.echo(json.dumps(_plain(data), sort_keys=True))
    else:
        click.echo(text())


def _plain(data: Any) -> Any:
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(data).items()}
    if isinstance(data, list | tuple):
        return [_plain(x) for x in data]
    return data


def _memory_line(m: Memory) -> str:
    flags = "whitelisted" if m.whitelisted else ""
    group = f"  group={m.group}" if m.group is not None else ""
    text = f"  {m.text!r}" if m.text is not None else ""
    return (
        f"{m.id}  score={m.score:.6g}  importance={m.importance:g}  tokens={m.tokens}{group}  "
        f"{m.tier} {flags}{text}"
    )


LIBRARY_FILE = "functions.lua"  # (scripts --out; what scripts --source functions prints)
MANIFEST_FILE = "scripts.json"  # (scripts --out; what scripts --json prints)
_MAX_DRAIN_CALLS = 10_000  # memevict evict: 2,000,000 memories moved at most
json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON.",
    # (memevict --json COMMAND too)
    callback=lambda ctx, _, value: bool(value or (ctx.obj or {}).get("json")),
)
now_option = click.option(
    "--now", type=int, default=None, help="Time in ms since the epoch (default: server clock)."
)


class _Group(click.Group):
    """Turns memevict and connection errors into one-line messages."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except MemevictError as error:
            raise click.ClickException(f"{type(error).__name__}: {error}") from None
        except redis.ConnectionError as error:
            raise click.ClickException(f"cannot reach the server: {_hint(error)}") from None
        except redis.RedisError as error:  # anything else the server or redis-py raised
            raise click.ClickException(f"{type(error).__name__}: {error}") from None


def _hint(error: redis.RedisError) -> str:
    """A connection error, with what to do where redis-py's words do not say."""
    text = str(error)
    if "HELLO must be called with the client already authenticated" in text or (
        "NOAUTH" in text or "Authentication required" in text
    ):
        return (
            "the server needs a password: put it in the URL, "
            "redis://:PASSWORD@HOST:PORT (or redis://USER:PASSWORD@HOST:PORT)"
        )
    return text


@click.group(cls=_Group)
@click.option(
    "--url",
    envvar="REDIS_URL",
    help="Redis/Valkey URL, such as redis://127.0.0.1:6379/0 (default: $REDIS_URL, else "
    "the embedded server).",
)
@click.option(
    "--namespace",
    "-n",
    default="default",
    show_default=True,
    envvar="MEMEVICT_NAMESPACE",
    help="The namespace (default: $MEMEVICT_NAMESPACE, else 'default').",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as every command's --json).")
@click.version_option(package_name="memevict")
@click.pass_context
def main(ctx: click.Context, url: str | None, namespace: str, as_json: bool) -> None:
    """memevict: keep what matters in an AI agent's memory, evict the rest.

    Every memory scores importance x recency x whitelist boost; the lowest go first.
    """
    ctx.obj = {"url": url, "namespace": namespace, "json": as_json}


@main.command()
@click.option(
    "--source",
    "source_of",
    metavar="NAME",
    default=None,
    help="Print the text memevict sends for script NAME (helpers inlined), or for "
    "'functions', the Functions library.",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, writable=True),
    default=None,
    help="Write every script as memevict sends it (NAME.lua), the Functions library "
    f"({LIBRARY_FILE}) and the list as JSON ({MANIFEST_FILE}) to this directory, for a "
    "client in another language.",
)
@json_option
def scripts(source_of: str | None, out_dir: str | None, as_json: bool) -> None:
    """List the Lua scripts: name, SHA1, key count (with --json: each one's FCALL
    name, KEYS roles and ARGV names, and the library's name)."""
    from memevict.functions import library

    if source_of is not None and out_dir is not None:
        raise click.UsageError("--source prints one script, --out writes them all: not both")
    if source_of is not None:
        if source_of != "functions" and source_of not in specs():
            raise click.BadParameter(f"no script {source_of!r}", param_hint="--source")
        text = library().source if source_of == "functions" else specs()[source_of].source
        click.echo(text, nl=False)
        return
    contract = _contract()
    if out_dir is not None:
        from pathlib import Path

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        files = {f"{s.name}.lua": s.source for s in specs().values()}
        files[LIBRARY_FILE] = library().source
        files[MANIFEST_FILE] = json.dumps(contract, indent=2, sort_keys=True) + "\n"
        for name, text in files.items():
            (out / name).write_text(text, encoding="utf-8")
        _emit(
            {"directory": str(out), "files": sorted(files)},
            as_json,
            lambda: f"wrote {len(files) - 2} scripts, {LIBRARY_FILE} and {MANIFEST_FILE} to {out}",
        )
        return
    rows = contract["scripts"]
    _emit(
        contract,
        as_json,
        lambda: "\n".join(f"{r['name']:<10} {r['sha']} {len(r['keys'])}" for r in rows),
    )


def _contract() -> dict[str, Any]:
    """What a client in any language needs to call the scripts: the library, how keys
    are named, and each script's file, SHA1, FCALL name, KEYS roles and ARGV names (a
    variadic script's last ARGV repeats per_item values per item)."""
    from memevict.functions import function_name, library

    lib = library()
    return {
        "library": {
            "name": lib.name,
            "version": lib.version,
            "file": LIBRARY_FILE,
            "version_function": lib.version_function,
        },
        "key": key_name("NAMESPACE", "ROLE"),
        "receipt_key": key_name("NAMESPACE", "call:CALL_ID"),
        "scripts": [
            {
                "name": s.name,
                "file": f"{s.name}.lua",
                "sha": s.sha,
                "function": function_name(s.name, lib.name),
                "read_only": s.read_only,
                "keys": list(s.keys),
                "key_types": list(s.key_types),
                "args": list(s.args),
                "per_item": s.group,
                "errors": list(s.errors),
            }
            for s in specs().values()
        ],
    }


@main.command()
@click.option(
    "--functions",
    is_flag=True,
    help="FUNCTION LOAD the memevict library on the primaries instead of the scripts.",
)
@json_option
@click.pass_context
def load(ctx: click.Context, functions: bool, as_json: bool) -> None:
    """Load every script on every node (primaries and replicas; on a cluster, every
    node CLUSTER NODES lists) before traffic; prints name -> SHA1."""
    from memevict.preload import preload

    with connect(ctx.obj["url"], routed=False) as client:
        loaded = preload(client, functions=functions)

    def text() -> str:
        nodes = ", ".join(
            f"{n.address} ({'primary' if n.primary else 'replica'})" for n in loaded.nodes
        )
        what = f"library {loaded.library_version}" if functions else "scripts"
        head = f"loaded {what} on: {nodes}" + (" (replicas by replication)" if functions else "")
        return "\n".join([head, *(f"{k:<14} {v}" for k, v in loaded.names.items())])

    _emit(loaded.to_json(), as_json, text)


@main.command()
@click.argument("user")
@click.option(
    "--password",
    envvar="MEMEVICT_ACL_PASSWORD",
    default=None,
    help="The user's password (default: a new random one, in the printed line).",
)
@click.option(
    "--prefix",
    default=None,
    help="A user of every namespace that starts with this, such as openai: (an adapter's "
    "sessions), instead of --namespace.",
)
@json_option
@click.pass_context
def acl(
    ctx: click.Context, user: str, password: str | None, prefix: str | None, as_json: bool
) -> None:
    """Print the ACL SETUSER line of a least-privilege user of --namespace (or of every
    namespace that starts with --prefix)."""
    import secrets

    from memevict.acl import acl_setuser_line

    if password is None:
        password = secrets.token_urlsafe(24)
    name = ctx.obj["namespace"] if prefix is None else prefix
    line = acl_setuser_line(user, name, password, prefix=prefix is not None)
    shown = {"user": user, "namespace": None if prefix else name, "prefix": prefix, "line": line}
    _emit(shown, as_json, lambda: line)


@main.command()
@click.argument("id")
@click.option("--importance", "-i", type=float, required=True)
@click.option("--text", "-t", default=None)
@click.option("--whitelist", is_flag=True)
@click.option(
    "--tokens",
    default=1,
    show_default=True,
    type=int,
    help="The memory's cost in the token budget (max_tokens, window --tokens).",
)
@click.option(
    "--group",
    default=None,
    help="The group the memory joins, evicted, recalled and forgotten as one "
    "(default: it keeps its group).",
)
@now_option
@json_option
@click.pass_context
def remember(
    ctx: click.Context,
    id: str,
    importance: float,
    text: str | None,
    whitelist: bool,
    tokens: int,
    group: str | None,
    now: int | None,
    as_json: bool,
) -> None:
    """Add or update a memory (creating the namespace if it is new)."""
    # Checked before the store opens: a refused write creates no namespace.
    commands.remember(
        id, importance, text=text, whitelist=whitelist, now=now, tokens=tokens, group=group
    )
    adapter = _adapter_of(ctx.obj["namespace"])
    if adapter is not None and text is not None:
        _say(
            f"warning: {ctx.obj['namespace']!r} is a namespace of the {adapter} adapter, which "
            "reads back only the items it wrote: it leaves this plain text out of the prompt "
            "(it still takes room in the hot tier); to give the agent a note, put it in the "
            "agent's instructions"
        )
    with _store(ctx, creates=True) as store:
        r = store.remember(
            id, importance, text=text, whitelist=whitelist, now=now, tokens=tokens, group=group
        )
    _emit(r, as_json, lambda: _remembered_line(r))


@main.command()
@click.argument("id")
@now_option
@json_option
@click.pass_context
def get(ctx: click.Context, id: str, now: int | None, as_json: bool) -> None:
    """Show one memory."""
    with _store(ctx, read=True) as store:
        m = store.get(id, now=now)
    if as_json:
        _emit(m, True, str)  # (null when there is none)
    elif m is None:
        raise click.ClickException(f"NotFound: no memory {id}")
    else:
        click.echo(_memory_line(m))


@main.command()
@click.option("-k", default=10, show_default=True, type=int, help="How many.")
@now_option
@json_option
@click.pass_context
def top(ctx: click.Context, k: int, now: int | None, as_json: bool) -> None:
    """The k highest-scored hot memories."""
    with _store(ctx, read=True) as store:
        ms = store.top(k, now=now)
        on = store.policy.log_max > 0
    lines = [_memory_line(m) for m in ms] or ["(empty)"]
    _emit(ms, as_json, lambda: "\n".join([*lines, _log_hint(on)]))


@main.command()
@click.argument("query")
@click.option("-k", default=10, show_default=True, type=int, help="How many, at most 100.")
@click.option(
    "--tier",
    default="all",
    show_default=True,
    type=click.Choice(["all", "hot", "cold"]),
    help="Where the memories found may be.",
)
@now_option
@json_option
@click.pass_context
def search(
    ctx: click.Context, query: str, k: int, tier: str, now: int | None, as_json: bool
) -> None:
    """The memories that best match QUERY by their terms, best first, with their
    relevance (a namespace whose policy has index 1; recalls nothing)."""
    with _store(ctx, read=True) as store:
        found = store.search(query, k, tier=tier, now=now)
    _emit(
        found,
        as_json,
        lambda: (
            "\n".join(f"{m.relevance:.4g}  {_memory_line(m.memory)}" for m in found)
            or "(nothing found)"
        ),
    )


@main.command()
@click.option(
    "--tokens",
    default=None,
    type=int,
    help="Token budget: the highest-ranked memories and whole groups that fit "
    "(default: every hot memory).",
)
@click.option(
    "--query",
    default=None,
    help="With --tokens, in a namespace whose policy has index 1: the memories that best "
    "match it that the window would not take (cold ones too) fill --share of the budget.",
)
@click.option(
    "--share",
    default=None,
    type=float,
    help="The part of the budget --query fills, 0 to 1 (default: about 1,000 tokens, "
    "at most half).",
)
@now_option
@json_option
@click.pass_context
def window(
    ctx: click.Context,
    tokens: int | None,
    query: str | None,
    share: float | None,
    now: int | None,
    as_json: bool,
) -> None:
    """The hot memories for a prompt, in the order first remembered, with their
    text (without --tokens, at most 400), then their total tokens and how many were left out;
    with --query, the memories it brought back are marked with a *. Recalls nothing."""
    with _store(ctx, read=True) as store:
        w = store.window(tokens, query=query, share=share, now=now)
    lines = [("* " if m.id in w.recalled else "") + _memory_line(m) for m in w]
    _emit(w, as_json, lambda: "\n".join([*lines, _window_line(w, tokens)]))


@main.command()
@click.argument("id")
@click.option(
    "--tokens",
    default=None,
    type=int,
    help="A token budget: also say whether window --tokens N holds the memory, and if not why.",
)
@now_option
@json_option
@click.pass_context
def explain(
    ctx: click.Context, id: str, tokens: int | None, now: int | None, as_json: bool
) -> None:
    """Why memory ID ranks where it does: its score and the parts that make it, its
    protection, where it is held, its rank as top orders the hot memories and, with
    --tokens, its place in that window."""
    with _store(ctx, read=True) as store:
        e = store.explain(id, tokens, now=now)
        score_min = store.policy.score_min
    if as_json:
        _emit(e, True, str)
    elif e.memory is None:
        raise click.ClickException(f"NotFound: no memory {id}")
    else:
        click.echo("\n".join(_explanation_lines(e, score_min)))


_REASONS = {
    "cold": "it is cold (a window holds hot memories only)",
    "ranked_out": "the memories ranked above it used the whole budget",
    "does_not_fit": "its {cost} tokens do not fit in the {left} left at its turn",
    "group_does_not_fit": "its group's {cost} tokens do not fit in the {left} left at its turn",
    "stopped": "the window stopped before its turn (100 candidates in a row did not fit)",
    "tied": "more than 200 memories tie its score exactly; its turn among them is not known",
}


def _explanation_lines(e: Explanation, score_min: float) -> list[str]:
    m, parts, held = e.memory, e.parts, e.protection
    assert m is not None and parts is not None and held is not None  # (absent: no lines)
    rank = "" if e.rank is None else f", rank {e.rank} (as top orders the hot memories)"
    unit = "memories" if parts.clock == "activity" else "s"
    product = (
        f"(importance {parts.importance:g} x boost {parts.boost:g} + jitter "
        f"{parts.jitter:.3g}) x recency {parts.recency:.6g} x decay {parts.decay:.6g}"
    )
    if parts.floored:
        score = f"score {m.score:.6g} (score_min), above {parts.product:.6g} = {product}"
    else:
        score = f"score {m.score:.6g} = {product}"
    lines = [
        f"{m.id}: {e.tier}{rank}",
        f"  {score}",
        f"  recency: age {parts.age:.6g} {unit} on the {parts.clock} clock, half-life "
        f"{parts.half_life:g} {unit}" + (" (whitelisted: no decay)" if m.whitelisted else ""),
    ]
    ways = [f"until {held.until} ms"] if held.by_time else []
    if held.by_activity:
        ways.append(
            f"until the namespace's order reaches {held.until_order} (now {held.order_now})"
        )
    if ways:
        lines.append(f"  protected {' and '.join(ways)}")
    elif e.tier == "protected":
        lines.append("  not protected any more (the next write makes it evictable)")
    else:
        lines.append("  not protected")
    lines.append(f"  tokens {m.tokens}" + (f", group {m.group}" if m.group is not None else ""))
    if e.window is not None:
        fit = e.window
        if fit.included:
            lines.append(f"  in window({fit.tokens})")
        else:
            why = _REASONS[fit.reason or "ranked_out"].format(cost=fit.cost, left=fit.left)
            lines.append(f"  not in window({fit.tokens}): {why}")
    return lines


def _window_line(w: Window, budget: int | None) -> str:
    of = f" of {budget}" if budget is not None else ""
    brought = f"; {len(w.recalled)} brought by the query" if w.recalled else ""
    return (
        f"window: {len(w)} memories, {w.tokens}{of} tokens; {w.left} hot memories left out{brought}"
    )


@main.command()
@click.option("--tier", type=click.Choice(["hot", "cold"]), default="hot", show_default=True)
@click.option(
    "--cursor", default=0, show_default=True, type=int, help="The cursor a page printed; 0 starts."
)
@click.option(
    "--count",
    default=100,
    show_default=True,
    type=int,
    help=f"Index entries read per page (1 to {MAX_SCAN}); a page may hold fewer memories.",
)
@click.option(
    "--all", "every_page", is_flag=True, help="Read page after page until the cursor is 0."
)
@now_option
@json_option
@click.pass_context
def scan(
    ctx: click.Context,
    tier: Tier,
    cursor: int,
    count: int,
    every_page: bool,
    now: int | None,
    as_json: bool,
) -> None:
    """One page of the memories of a tier and the cursor of the next (0: done),
    or with --all every memory of the tier, each once."""
    with _store(ctx, read=True) as store:
        page = store.scan(tier, cursor, count, now=now)
        if every_page:
            # (HSCAN may return a memory twice: the last one read wins, in first-seen order)
            found = {m.id: m for m in page.memories}
            while page.cursor != 0:
                page = store.scan(tier, page.cursor, count, now=now)
                found.update((m.id, m) for m in page.memories)
            page = ScanPage(0, tuple(found.values()))
    _emit(page, as_json, lambda: "\n".join([*map(_memory_line, page.memories), _scan_line(page)]))


@main.command("log")
@click.option(
    "--since", default=None, help="A log id an earlier page printed: the entries after it."
)
@click.option(
    "--count",
    default=20,
    show_default=True,
    type=int,
    help=f"Entries, at most {MAX_LOG}: the newest, or the first after --since.",
)
@json_option
@click.pass_context
def log(ctx: click.Context, since: str | None, count: int, as_json: bool) -> None:
    """What left a tier, when and why: the namespace's eviction log, oldest first
    (a policy with --log-max N keeps one; the default keeps none)."""
    with _store(ctx, read=True) as store:
        found = store.evictions(since=since, count=count)
        on = store.policy.log_max > 0
    _emit(found, as_json, lambda: "\n".join(map(_eviction_line, found)) or _no_log(on))


def _eviction_line(e: Eviction) -> str:
    group = f" group={e.group}" if e.group else ""
    return (
        f"{e.log_id}  at={e.at} {e.id} {e.from_tier}->{e.to_tier} {e.reason} "
        f"score={e.score:.6g} importance={e.importance:.6g}{group}"
    )


def _no_log(on: bool) -> str:
    if on:
        return "(nothing has left a tier since the log began)"
    return "(no eviction log: memevict policy --log-max 1000 keeps one)"


def _log_hint(on: bool) -> str:
    """What top and stats add: where to see what left."""
    return "what left, and why: memevict log" if on else _no_log(False)


def _scan_line(page: ScanPage) -> str:
    found = f"{len(page.memories)} memories"
    return f"{found}; next page: --cursor {page.cursor}" if page.cursor else f"{found}; done"


def _remembered_line(r: Remembered) -> str:
    return (
        f"{r.id} score={r.score:.6g} evicted={list(r.evicted)} "
        f"demoted={list(r.demoted)} over={r.over}"
    )


def _done(as_json: bool, id: str, verb: str, ok: bool) -> None:
    _emit({"id": id, verb: ok}, as_json, lambda: f"{id}: {verb} {'done' if ok else 'no change'}")


@main.command()
@click.argument("id")
@now_option
@json_option
@click.pass_context
def touch(ctx: click.Context, id: str, now: int | None, as_json: bool) -> None:
    """Mark a hot memory as used now."""
    with _store(ctx) as store:
        r = store.touch(id, now=now)
    if r is None:
        _done(as_json, id, "touch", False)
    else:
        _emit(r, as_json, lambda: _remembered_line(r))


@main.command()
@click.argument("id")
@now_option
@json_option
@click.pass_context
def demote(ctx: click.Context, id: str, now: int | None, as_json: bool) -> None:
    """Make a whitelisted memory ordinary."""
    with _store(ctx) as store:
        r = store.demote(id, now=now)
    _emit(r, as_json, lambda: _remembered_line(r))


@main.command()
@click.argument("id")
@json_option
@click.pass_context
def forget(ctx: click.Context, id: str, as_json: bool) -> None:
    """Delete a memory everywhere."""
    with _store(ctx) as store:
        store.forget(id)
    _done(as_json, id, "forget", True)


@main.command()
@click.option("--yes", "-y", is_flag=True, help="Drop without asking.")
@json_option
@click.pass_context
def drop(ctx: click.Context, yes: bool, as_json: bool) -> None:
    """Delete the whole namespace: its policy, every memory, hot and cold, and
    every index, in one atomic call. Asks first unless --yes (which --json
    needs). A namespace that does not exist is an error and stays absent."""
    name = check_namespace(ctx.obj["namespace"])
    if as_json and not yes:  # (JSON is for scripts, which cannot answer a prompt)
        raise click.ClickException(f"drop --json does not ask: pass --yes to drop {name!r}")
    # A damaged namespace must go too, whatever its damage: so no store is opened (that
    # configures it, and fails on a policy damaged past reading) and a namespace exists
    # while any of its keys does (its policy may be the damage). drop_namespace reads
    # nothing: it UNLINKs every key the namespace has.
    with connect(ctx.obj["url"]) as client:
        present = client.exists(*namespace_keys(name))
        if not present:
            raise click.ClickException(
                f"NoPolicy: namespace {name!r} does not exist (remember creates it)"
            )
        if not yes:
            click.confirm(
                f"Drop namespace {name!r}: {_contents(client, name)}?", abort=True, err=True
            )
        keys = drop_namespace(client, name)
    _emit(
        {"namespace": name, "keys": keys},
        as_json,
        lambda: f"dropped namespace {name!r} ({keys} keys)",
    )


def _contents(client: Any, name: str) -> str:
    """What a drop of a namespace deletes, as its prompt says it."""
    try:
        s = MemoryStore(client, name, read_only=True).stats()
    except MemevictError as error:
        keys = client.exists(*namespace_keys(name))
        return f"{keys} keys, which cannot be read ({type(error).__name__}: {error})"
    return f"{s.hot} hot and {s.cold} cold memories, its policy and indexes"


@main.command()
@click.argument("id")
@now_option
@json_option
@click.pass_context
def whitelist(ctx: click.Context, id: str, now: int | None, as_json: bool) -> None:
    """Whitelist a memory (recalling it if cold)."""
    with _store(ctx) as store:
        r = store.whitelist(id, now=now)
    _emit(r, as_json, lambda: _remembered_line(r))


@main.command()
@click.argument("id")
@now_option
@json_option
@click.pass_context
def recall(ctx: click.Context, id: str, now: int | None, as_json: bool) -> None:
    """Bring a cold memory back to the hot tier."""
    with _store(ctx) as store:
        r = store.recall(id, now=now)
    _emit(r, as_json, lambda: _remembered_line(r))


@main.command()
@click.argument("rate", type=float)
@json_option
@click.pass_context
def decay(ctx: click.Context, rate: float, as_json: bool) -> None:
    """Multiply every non-whitelisted hot score by RATE (0 < RATE <= 1)."""
    with _store(ctx) as store:
        store.decay(rate)
    _emit({"decayed": rate}, as_json, lambda: f"decayed by {rate:g}")


@main.command()
@now_option
@json_option
@click.pass_context
def evict(ctx: click.Context, now: int | None, as_json: bool) -> None:
    """Bring the namespace back to its policy: evict down to max_hot, demote down to
    whitelist_cap, trim the cold tier. Each call's work is bounded, so this calls
    evict until no backlog is left; other clients run in between."""
    evicted: list[str] = []
    demoted: list[str] = []
    with _store(ctx) as store:
        for _ in range(_MAX_DRAIN_CALLS):  # (writers adding backlog as fast as it drains)
            e = store.evict(now=now)
            evicted += e.evicted
            demoted += e.demoted
            if e.backlog == 0:
                break
    done = dataclasses.replace(e, evicted=tuple(evicted), demoted=tuple(demoted))
    _emit(
        done,
        as_json,
        lambda: f"evicted={list(done.evicted)} demoted={list(done.demoted)} over={done.over}",
    )


@main.command()
@now_option
@json_option
@click.pass_context
def stats(ctx: click.Context, now: int | None, as_json: bool) -> None:
    """Counts of hot, cold, whitelisted and protected memories."""
    with _store(ctx, read=True) as store:
        s = store.stats(now=now)
        budget = store.policy.max_tokens > 0
        on = store.policy.log_max > 0
    _emit(s, as_json, lambda: f"{_stats_line(s, budget)}\n{_log_hint(on)}")


def _stats_line(s: Stats, budget: bool) -> str:
    """over_tokens only with a token budget (max_tokens), without one it is always 0."""
    over = f" over_tokens={s.over_tokens}" if budget else ""
    return (
        f"hot={s.hot} cold={s.cold} whitelisted={s.whitelisted} protected={s.protected} "
        f"over={s.over} backlog={s.backlog} tokens={s.tokens}{over}"
    )


@main.command()
@click.option(
    "--prefix",
    default="",
    help="Only the namespaces that start with it, such as openai: (an adapter's sessions).",
)
@now_option
@json_option
@click.pass_context
def namespaces(ctx: click.Context, prefix: str, now: int | None, as_json: bool) -> None:
    """Every namespace on the server (every primary of a cluster) with its
    counts and tokens, sorted by name; creates and changes nothing."""
    with connect(ctx.obj["url"]) as client:
        found = list_namespaces(client, now=now, prefix=prefix)
    _emit(found, as_json, lambda: "\n".join(_namespace_line(n) for n in found) or "(none)")


def _namespace_line(n: Namespace) -> str:
    s = n.stats
    if s is None:
        return f"{n.name}  cannot be read: {n.error}"
    return (
        f"{n.name}  hot={s.hot} cold={s.cold} whitelisted={s.whitelisted} "
        f"protected={s.protected} over={s.over} backlog={s.backlog} tokens={s.tokens}"
    )


@main.command("namespace-of")
@click.option("--adapter", type=click.Choice(ADAPTERS), required=True, help="The adapter.")
@click.argument("session_id")
@json_option
def namespace_of(adapter: str, session_id: str, as_json: bool) -> None:
    """The namespace in which ADAPTER keeps session SESSION_ID (its thread_id for
    langchain): pass it to -n. Connects to nothing."""
    from memevict.integrations._conversation import namespace_for

    name = namespace_for(adapter, session_id)
    _emit({"adapter": adapter, "session_id": session_id, "namespace": name}, as_json, lambda: name)


def _policy_options(command: F) -> F:
    docs = field_docs()
    for field in reversed(dataclasses.fields(Policy)):
        kind: Any = {"int": int, "float": float, "str": click.Choice(CLOCKS)}[str(field.type)]
        command = click.option(
            "--" + field.name.replace("_", "-"),
            field.name,
            type=kind,
            default=None,
            help=f"{docs[field.name][:1].upper()}{docs[field.name][1:]}",
        )(command)
    return command


@main.command()
@_policy_options
@json_option
@click.pass_context
def policy(ctx: click.Context, /, as_json: bool, **changes: Any) -> None:
    """Show the namespace's policy, or set fields of it (e.g. --max-hot 50)."""
    updates = {k: v for k, v in changes.items() if v is not None}
    Policy(**updates)  # (checked before the store opens: a refused change creates nothing)
    if updates:
        with connect(ctx.obj["url"]) as client:
            current = _set_policy(client, ctx.obj["namespace"], updates)
    else:
        with _store(ctx, read=True) as store:
            current = store.policy
    _emit(
        current,
        as_json,
        lambda: "\n".join(f"{k} = {v}" for k, v in dataclasses.asdict(current).items()),
    )


def _set_policy(client: Any, name: str, updates: dict[str, Any]) -> Policy:
    """Sets fields of the namespace's policy, creating the namespace if it is new. A
    policy whose field was edited by hand while its packed copy is damaged cannot be
    opened (BadPolicy: nothing sound to restore the field from), and its error says to set
    that field with this command: the stored fields, the given ones in their place,
    replace the policy then, if they make one."""
    try:
        store = MemoryStore(client, name)
    except BadPolicy as refused:
        stored = client.hgetall(key_name(check_namespace(name), "policy"))
        merged = Policy().to_args()
        merged.update((k, v) for k, v in map(_texts, stored.items()) if k in merged)
        merged.update((k, v) for k, v in Policy(**updates).to_args().items() if k in updates)
        try:
            whole = Policy.from_strings(merged)
        except BadPolicy:
            raise refused from None  # (another field is broken too: the first error says)
        return MemoryStore(client, name, whole, replace_policy=True).policy
    return store.set_policy(**updates)


def _texts(pair: tuple[Any, Any]) -> tuple[str, str]:
    return commands.as_text(pair[0]), commands.as_text(pair[1])


@main.command()
@click.option("--workers", default=16, show_default=True, help="Worker processes.")
@click.option("--threads", default=3, show_default=True, help="Threads in every other worker.")
@click.option("--ops", default=500, show_default=True, help="Calls per thread.")
@click.option("--ids", default=60, show_default=True, help="Distinct memory ids in the workload.")
@click.option("--seed", default=1, show_default=True, help="Random seed of the workload.")
@click.option(
    "--namespace",
    "stress_namespace",
    default="stress",
    show_default=True,
    help="Namespace to hammer (cleared first).",
)
@click.option(
    "--target",
    default="memevict.stress:MemevictTarget",
    show_default=True,
    help="What to hammer, as module:Class (e.g. tests.seed:SeedTarget, the seed peer).",
)
@json_option
@click.pass_context
def stress(
    ctx: click.Context,
    workers: int,
    threads: int,
    ops: int,
    ids: int,
    seed: int,
    stress_namespace: str,
    target: str,
    as_json: bool,
) -> None:
    """Hammer one namespace from many processes and check every rule.

    Exits 1 if any rule was broken.
    """
    from memevict.stress import StressConfig, run

    with connect(ctx.obj["url"], routed=False) as client:
        if client.info("cluster").get("cluster_enabled") == 1:
            raise click.ClickException(
                "stress checks one server's snapshots (MULTI over every key); "
                "give it the URL of a single server, not of a cluster node"
            )
        kwargs = client.connection_pool.connection_kwargs
        url = ctx.obj["url"] or f"unix://{kwargs['path']}"
        config = StressConfig(
            url=url, namespace=stress_namespace, workers=workers, threads=threads, ops=ops,
            ids=ids, seed=seed, target=target,
        )  # fmt: skip
        report = run(config)
    data = {
        "processes": report.processes,
        "threads": report.threads,
        "calls": report.calls,
        "seconds": round(report.seconds, 3),
        "errors": dict(report.errors),
        "snapshots": report.snapshots,
        "checks": report.checks,
        "violations": dict(report.violations),
        "ok": report.ok,
    }
    _emit(data, as_json, lambda: "\n".join(report.lines()))
    if not report.ok:
        ctx.exit(1)


@main.command()
@json_option
@click.pass_context
def demo(ctx: click.Context, as_json: bool) -> None:
    """A walkthrough: a conversation longer than the window, with critical facts."""
    from memevict.demo import run_demo
    from memevict.simulate.report import to_json

    with connect(ctx.obj["url"]) as client:
        result = run_demo(client, (lambda _: None) if as_json else click.echo)
    if as_json:
        _emit(to_json(result), True, str)


def _simulated_policy_options(command: F) -> F:
    """An option per Policy field but max_hot, which is the --window."""
    from memevict.simulate.policies import field_kind

    defaults = Policy()
    for field in reversed(dataclasses.fields(Policy)):
        if field.name != "max_hot":
            default = getattr(defaults, field.name)
            shown = default if isinstance(default, str) else f"{default:g}"
            command = click.option(
                "--" + field.name.replace("_", "-"),
                field.name,
                type=field_kind(field.name),
                default=None,
                help=f"memevict's {field.name} (default {shown}).",
            )(command)
    return command


def _transcript_paths(patterns: tuple[str, ...]) -> list[str]:
    """Each --transcript: a file, a directory (its *.jsonl and *.json, sorted) or a glob."""
    import glob
    from pathlib import Path

    found: dict[str, None] = {}
    for pattern in patterns:
        path = Path(pattern)
        if path.is_dir():
            matches = sorted(
                str(p) for p in (*path.glob("*.jsonl"), *path.glob("*.json")) if p.is_file()
            )
        elif path.is_file():
            matches = [pattern]
        else:
            matches = sorted(p for p in glob.glob(pattern) if Path(p).is_file())
        if not matches:
            what = "*.jsonl or *.json in directory" if path.is_dir() else "file matches"
            raise click.UsageError(f"--transcript {pattern}: no {what} {pattern}")
        found.update(dict.fromkeys(matches))
    return list(found)


@main.command()
@click.option(
    "--transcript",
    "transcript_patterns",
    multiple=True,
    metavar="FILE|DIR|GLOB",
    help="Replay this JSONL log (see docs/simulate.md), or a LoCoMo file (*.json: locomo10.json, "
    "or one sample), instead of a generated transcript; a directory means its *.jsonl and "
    "*.json, a glob its matches (repeatable).",
)
@click.option(
    "--generator",
    type=click.Choice(["single", "sessions", "tool-heavy"]),
    default="single",
    show_default=True,
    help="The generated transcript: one session of --turns turns, --sessions sessions "
    "of user and assistant with questions, or an agent's --turns turns of one tool call "
    "each with questions (the last two unlabelled: need --label).",
)
@click.option(
    "--style",
    type=click.Choice(["prose", "texting"]),
    default="prose",
    show_default=True,
    help="How --generator sessions says it: as written, or as people text (short "
    "lowercase lines, abbreviations, typos, casual dates; the same facts and questions).",
)
@click.option("--seed", default=1, show_default=True, help="Seed of the generated transcript.")
@click.option(
    "--seeds",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Generate this many transcripts, seeds --seed, --seed + 1, ...",
)
@click.option(
    "--turns",
    default=400,
    show_default=True,
    type=click.IntRange(min=10),
    help="Memory turns of the generated transcript (--generator single), or user turns "
    "(--generator tool-heavy: four memories each).",
)
@click.option(
    "--sessions",
    default=20,
    show_default=True,
    type=click.IntRange(min=1),
    help="Sessions of the generated transcript (--generator sessions).",
)
@click.option(
    "--turn-s",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help='Mean seconds between generated turns; with --transcript, between lines without "at".',
)
@click.option(
    "--window",
    default=40,
    show_default=True,
    type=click.IntRange(min=1, max=MAX_TOP),
    help="Memories every policy keeps (memevict's max_hot; top() reads at most 200).",
)
@_simulated_policy_options
@click.option(
    "--grid",
    multiple=True,
    metavar="FIELD=V1,V2,...",
    help="Run memevict once per combination of these Policy values (repeatable).",
)
@click.option(
    "--policies",
    "policy_list",
    default=None,
    metavar="LIST",
    help="Which to run, comma-separated, of fifo, lru, memevict (every --grid policy) and "
    "hindsight (the best window knowing the questions). Default: all; hindsight when the "
    "transcript has questions.",
)
@click.option(
    "--label",
    "labeler_spec",
    default=None,
    metavar="SPEC",
    help="Give the memory turns without importance or category an importance: 'rules', or "
    "the dotted path of your labeler (module.function).",
)
@click.option(
    "--per-question",
    is_flag=True,
    help="Instead: per question, within each of --budgets tokens, the share of questions "
    "an evidence turn of which is in FIFO, FIFO + slice, search alone, memevict's window and "
    "the window with recall; the question as the query, then the user message before it.",
)
@click.option(
    "--recall-on-read",
    is_flag=True,
    help="With --per-question, instead: the window with recall read-only (A) against it "
    "recalling what each read's query brought (B), side by side, the questions asked during "
    "the conversation and at the end; coverage, recency and server time (docs/simulate.md).",
)
@click.option(
    "--budgets",
    default="2000,5000,10000",
    show_default=True,
    metavar="N,N,...",
    help="Token budgets of --per-question.",
)
@json_option
@click.option(
    "--plot",
    "plot_file",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Draw critical facts kept over turns, per policy, to FILE.png (needs matplotlib).",
)
@click.option(
    "--timeline",
    is_flag=True,
    help="Also print what left memevict's tiers, turn by turn, and why (one transcript).",
)
@click.pass_context
def simulate(
    ctx: click.Context,
    /,
    transcript_patterns: tuple[str, ...],
    generator: str,
    style: str,
    seed: int,
    seeds: int,
    turns: int,
    sessions: int,
    turn_s: float,
    window: int,
    grid: tuple[str, ...],
    policy_list: str | None,
    labeler_spec: str | None,
    per_question: bool,
    recall_on_read: bool,
    budgets: str,
    as_json: bool,
    plot_file: str | None,
    timeline: bool,
    **fields: Any,
) -> None:
    """Replay a conversation longer than the window through FIFO, LRU and
    memevict, on one server, and report what each kept and which of the
    transcript's questions its window could answer; with --timeline, also what
    left memevict's tiers after each turn and why (its eviction log).

    Each policy runs in its own namespace, memevict-simulate-<random>-<n>
    (cleared before and after), on the server of --url or the embedded one.
    With several transcripts (--transcript DIR or GLOB, or --seeds N) the
    table shows each measure's mean, min and max over them.
    """
    import sys

    from click.core import ParameterSource

    from memevict.simulate import generate, memevict_policies
    from memevict.simulate import simulate as replay_all
    from memevict.simulate.plot import draw, matplotlib_missing
    from memevict.simulate.replay import POLICIES
    from memevict.simulate.report import summary_json, summary_table, table, to_json
    from memevict.simulate.report import timeline as timeline_text

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE

    if transcript_patterns:
        for name in ("seed", "seeds", "turns", "generator", "sessions", "style"):
            if given(name):
                raise click.UsageError(
                    f"--{name} is for the generated transcript, not --transcript"
                )
    elif generator in ("single", "tool-heavy") and (given("sessions") or given("style")):
        option = "--sessions" if given("sessions") else "--style"
        raise click.UsageError(f"{option} is for --generator sessions")
    elif generator == "tool-heavy" and given("turn_s"):
        raise click.UsageError("--turn-s is for --generator single or --transcript")
    elif generator == "sessions":
        for name in ("turns", "turn_s"):
            if given(name):
                option = "--" + name.replace("_", "-")
                raise click.UsageError(f"{option} is for --generator single or --transcript")

    chosen = _chosen_policies(policy_list, POLICIES)
    fields = {k: v for k, v in fields.items() if v is not None}
    if per_question:
        budget_list = _per_question_budgets(budgets, given, fields)
    elif given("budgets"):
        raise click.UsageError("--budgets is for --per-question")
    if recall_on_read and not per_question:
        raise click.UsageError("--recall-on-read is for --per-question")
    if "memevict" not in chosen and (grid or fields):
        raise click.UsageError("--grid and memevict's fields need memevict in --policies")
    try:
        policies = memevict_policies(window, fields, grid)
    except ValueError as error:
        raise click.UsageError(str(error)) from None
    labeler = None
    if labeler_spec is not None:
        from memevict.errors import BadArgument
        from memevict.importance import load_labeler

        try:
            labeler = load_labeler(labeler_spec)
        except BadArgument as error:
            raise click.BadParameter(str(error), param_hint="--label") from None

    turn_ms = round(turn_s * 1000)
    transcripts: list[Transcript] = []
    if transcript_patterns:
        transcripts = [
            t for path in _transcript_paths(transcript_patterns) for t in _read(path, turn_ms)
        ]
    elif generator == "sessions":
        from memevict.simulate.sessions import generate_sessions

        transcripts = [
            generate_sessions(s, sessions, style=style) for s in range(seed, seed + seeds)
        ]
    elif generator == "tool-heavy":
        from memevict.simulate.tool_heavy import tool_heavy_transcript

        transcripts = [tool_heavy_transcript(turns, s) for s in range(seed, seed + seeds)]
    else:
        transcripts = [generate(s, turns, turn_ms) for s in range(seed, seed + seeds)]
    if labeler is not None:
        from memevict.simulate.labels import label_transcript

        transcripts = [label_transcript(t, labeler) for t in transcripts]
    for t in transcripts:
        if t.unlabelled:
            where = f"{t.source}: " if len(transcripts) > 1 or transcript_patterns else ""
            raise click.UsageError(
                f"{where}{t.unlabelled} memory turns have no importance or category: "
                "pass --label rules or a labeler's dotted path"
            )
    if per_question:
        _emit_per_question(
            ctx.obj["url"], transcripts, budget_list, fields, as_json, recall_on_read
        )
        return
    if (
        policy_list is not None
        and "hindsight" in chosen
        and not any(t.questions for t in transcripts)
    ):
        raise click.UsageError("hindsight needs questions: no transcript asks any")
    if plot_file and len(transcripts) > 1:
        raise click.UsageError("--plot draws one transcript: give one --transcript or --seeds 1")
    if timeline and (len(transcripts) > 1 or "memevict" not in chosen):
        raise click.UsageError(
            "--timeline follows memevict through one transcript: give one --transcript or "
            "--seeds 1, and memevict in --policies"
        )
    if plot_file and matplotlib_missing():
        click.echo(
            "matplotlib is not installed (pip install 'memevict[plot]'): skipping the plot",
            err=True,
        )
        plot_file = None

    runners = sum(name in chosen for name in ("fifo", "lru"))
    runners += len(policies) if "memevict" in chosen else 0
    events = sum(len(t.events) for t in transcripts) * runners
    results = []
    with connect(ctx.obj["url"]) as client:
        if not as_json and sys.stderr.isatty() and events >= 2000:
            with click.progressbar(length=events, label="replaying", file=sys.stderr) as bar:
                for t in transcripts:
                    results.append(
                        replay_all(
                            client,
                            t,
                            window,
                            policies,
                            policies=chosen,
                            advance=bar.update,
                            timeline=timeline,
                        )
                    )
        else:
            results = [
                replay_all(client, t, window, policies, policies=chosen, timeline=timeline)
                for t in transcripts
            ]
    if len(results) == 1:
        result = results[0]
        shown = [table(result), *([timeline_text(result)] if timeline else [])]
        _emit(to_json(result), as_json, lambda: "\n\n".join(shown))
        if plot_file:
            draw(result, plot_file)
    else:
        _emit({**summary_json(results), "window": window}, as_json, lambda: summary_table(results))


def _per_question_budgets(
    budgets: str, given: Callable[[str], bool], fields: dict[str, Any]
) -> list[int]:
    """--budgets, checked, and the options --per-question does not take refused."""
    for name in ("window", "grid", "policy_list", "plot_file"):
        if given(name):
            option = {"policy_list": "policies", "plot_file": "plot"}.get(name, name)
            raise click.UsageError(f"--{option} is not for --per-question (it uses --budgets)")
    for name in ("max_tokens", "index"):
        if name in fields:
            option = "--" + name.replace("_", "-")
            raise click.UsageError(f"{option}: --per-question sets it (--budgets, an index)")
    try:
        found = [int(x) for x in budgets.split(",") if x.strip()]
    except ValueError:
        found = []
    if not found or min(found) <= 0:
        raise click.UsageError(f"--budgets {budgets!r}: positive token counts, comma-separated")
    return found


def _emit_per_question(
    url: str | None,
    transcripts: list[Transcript],
    budgets: list[int],
    fields: dict[str, Any],
    as_json: bool,
    recall_on_read: bool,
) -> None:
    """--per-question (with --recall-on-read: A against B): every transcript measured on
    the server, the table or JSON."""
    from pathlib import Path

    from memevict.simulate import per_question as pq
    from memevict.simulate import recall_on_read as ror

    if not any(t.questions for t in transcripts):
        raise click.UsageError("--per-question needs questions: no transcript asks any")
    measure = ror.recall_on_read if recall_on_read else pq.per_question
    try:
        with connect(url) as client:
            results: list[Any] = [
                r for t in transcripts for r in measure(client, t, budgets, fields)
            ]
    except BadPolicy as error:
        raise click.UsageError(str(error)) from None
    if recall_on_read:
        data = {"budgets": budgets, "recall_on_read": ror.recall_on_read_json(results)}
        _emit(data, as_json, lambda: ror.recall_on_read_table(results))
    else:
        data = {"budgets": budgets, "per_question": pq.per_question_json(results)}
        _emit(data, as_json, lambda: pq.per_question_table(results, lambda s: Path(s).name))


def _read(path: str, turn_ms: int) -> list[Transcript]:
    """A --transcript file's transcripts: a LoCoMo file (*.json) holds one per sample."""
    from memevict.simulate import read_jsonl
    from memevict.simulate.locomo import read_locomo

    if path.endswith(".json"):
        return read_locomo(path, turn_ms)
    return [read_jsonl(path, turn_ms)]


def _chosen_policies(listed: str | None, known: tuple[str, ...]) -> tuple[str, ...]:
    """--policies: names from ``known``, comma-separated (default: all)."""
    if listed is None:
        return known
    names = [name.strip() for name in listed.split(",")]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise click.UsageError(
            f"--policies {listed!r}: choose from {', '.join(known)}, comma-separated"
        )
    return tuple(dict.fromkeys(names))


@main.command()
@click.option("--quick", is_flag=True, help="Tiny sizes, a few seconds: the CI smoke run.")
@click.option(
    "--url",
    "bench_url",
    default=None,
    help="Server to measure (default: the global --url, else a fresh embedded Valkey).",
)
@click.option(
    "--json",
    "json_file",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write the results to FILE as JSON.",
)
@click.option(
    "--plot",
    "plot_file",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Draw time per call against store size to FILE.png (needs memevict[bench]).",
)
@click.pass_context
def bench(
    ctx: click.Context,
    quick: bool,
    bench_url: str | None,
    json_file: str | None,
    plot_file: str | None,
) -> None:
    """Benchmark memevict against its peers on one server, in one run.

    Peers: raw ZADD, the seed article's client-side functions, a do-nothing
    script and memevict; prints a table of ops/s, latencies, ratios and the
    performance targets met or not. The full run fills stores of up to
    1,000,000 memories and takes several minutes.

    Without a URL it starts a fresh embedded Valkey server of its own. Given a
    URL it WRITES to that server: keys under memevict:{bench-*} and
    memevict-bench:{*} (deleted at the end), and it runs CONFIG RESETSTAT,
    SLOWLOG RESET and changes slowlog settings for a while (restored). Use a
    server of its own, never a production one.
    """
    from memevict.bench import BenchConfig, run_bench, table, to_json
    from memevict.bench.plot import draw, matplotlib_missing

    if plot_file and matplotlib_missing():
        click.echo(
            "matplotlib is not installed (pip install 'memevict[bench]'): skipping the plot",
            err=True,
        )
        plot_file = None
    config = BenchConfig.quick_run() if quick else BenchConfig.full()
    url = bench_url or ctx.obj["url"]
    results = run_bench(url, config, lambda line: click.echo(line, err=True))
    click.echo(table(results))
    if json_file:
        with open(json_file, "w", encoding="utf-8") as out:
            json.dump(to_json(results), out, indent=2)
            out.write("\n")
    if plot_file:
        env = results.environment
        draw(results.sizes, plot_file, f"memevict vs the seed article, {env['server']} "
             f"{env['server_version']}, {env['date'][:10]}")  # fmt: skip
