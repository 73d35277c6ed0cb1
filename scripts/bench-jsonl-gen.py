# The JSON-lines input of scripts/bench-parallel and scripts/bench-peers-jsonl: ROWS records
# (default 1,000,000; a smaller ROWS gives a prefix of the same records), 8 fields, `key` with
# PARTS values. Deterministic (seed 5), standard library only; written to OUT.tmp, then renamed.
#
#   python3 scripts/bench-jsonl-gen.py PARTS OUT [ROWS]
import os, random, sys
parts, out = int(sys.argv[1]), sys.argv[2]
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
r = random.Random(5)
with open(out + ".tmp", "w") as f:
    for i in range(rows):
        f.write('{"id":%d,"key":"k%04d","user":"user-%05d","amount":%.2f,"qty":%d,"country":"%s","note":"%s","ts":"2026-11-%02dT%02d:%02d:%02dZ"}\n' % (
            i, r.randrange(parts), r.randrange(100000), r.random() * 10000, r.randrange(1000),
            r.choice(["DE", "FR", "US", "JP", "BR", "IN"]), "x" * r.randrange(5, 25),
            r.randrange(1, 29), r.randrange(24), r.randrange(60), r.randrange(60)))
os.replace(out + ".tmp", out)
