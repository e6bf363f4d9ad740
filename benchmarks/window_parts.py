"""Where a window without a budget spends its server time (target T4).

The bench's window store (memevict.bench.window: 10,000 hot memories, 100
whitelisted, half in pairs, tokens 10..500, text 4 bytes per token), and
window.lua run as scripts in variants that each leave a part out (their
replies differ; they only time): all of it; without sending the memories
back; without building them either; without reading their texts as well.
The differences are the parts' costs. Interleaved rounds of 10 calls without
a budget (400 memories each); server µs per call from INFO commandstats,
medians.

    python benchmarks/window_parts.py [URL] [--rounds 12]

Without URL it runs on an embedded Valkey. Given one it FLUSHES that server.
"""

from __future__ import annotations

import argparse
import statistics

from ab import connected, server_version  # benchmarks/ab.py

from memevict.bench.window import fill_window_store
from memevict.scripts import lua_root, parse, specs

TEXTS = "local texts = texts_of(taken)"
BUILD = "for i, m in ipairs(taken) do out[i] = memory_reply(m, m.score, texts[i], imps) end"
SEND = "return {out, total, size - #out, st.epoch}"


def variants(source: str) -> dict[str, str]:
    for line in (TEXTS, BUILD, SEND):
        if line not in source:
            raise SystemExit(f"window.lua no longer has the line {line!r}: update this script")
    unsent = source.replace(SEND, "return {{}, total, size - #out, st.epoch}")
    unbuilt = unsent.replace(BUILD, "")
    return {
        "all": source,
        "not sent": unsent,
        "not built": unbuilt,
        "no texts": unbuilt.replace(TEXTS, "local texts = {}"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", nargs="?", help="the server (default: an embedded Valkey)")
    parser.add_argument("--rounds", type=int, default=12)
    opts = parser.parse_args()
    root = lua_root()
    with connected(opts.url) as client:
        fill_window_store(client, "w", 10_000)
        source = (root / "window.lua").read_text()
        shas = {
            name: client.script_load(parse("window", text, root).source)
            for name, text in variants(source).items()
        }
        keys = specs()["window"].key_names("w")
        us: dict[str, list[float]] = {name: [] for name in shas}
        for r in range(opts.rounds):
            for name in list(shas) if r % 2 == 0 else list(shas)[::-1]:
                client.config_resetstat()
                for _ in range(10):
                    client.evalsha(shas[name], len(keys), *keys, "", "")
                stats = client.info("commandstats")["cmdstat_evalsha"]
                us[name].append(float(stats["usec_per_call"]))
        m = {name: statistics.median(values) for name, values in us.items()}
        print(
            f"server {server_version(client)}: window without a budget at 10,000 hot memories, "
            f"server µs per call, median of {opts.rounds} rounds x 10"
        )
        print(f"  whole call            {m['all']:7.0f}")
        print(f"  sending the reply     {m['all'] - m['not sent']:7.0f}")
        print(f"  building the reply    {m['not sent'] - m['not built']:7.0f}")
        print(f"  reading the texts     {m['not built'] - m['no texts']:7.0f}")
        print(f"  choosing the memories {m['no texts']:7.0f}")


if __name__ == "__main__":
    main()
