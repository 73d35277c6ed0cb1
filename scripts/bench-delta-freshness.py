# The Delta freshness benchmark, driven by scripts/bench-delta-freshness (read its
# header first). Two subcommands:
#
#   python scripts/bench-delta-freshness.py gen --rate R --duration D --stats FILE
#       the steady stream: JSON lines {"id","p","ts","v"} on stdout, R records/s for D s
#       (`p` = id % 100, so every 1 s checkpoint touches all 100 partitions); at the end it
#       writes {"records","seconds","max_lag_s"} to FILE. Standard library only.
#   python scripts/bench-delta-freshness.py run [options]
#       runs (a) Delta table + a background compaction loop, then (b) the same stream into a
#       plain directory, samples both every 10 s, measures the end state, writes JSON + text.
#   python scripts/bench-delta-freshness.py summary FILE.json
#       prints the summary of a saved run again (the text --save writes beside the JSON).
#
# Needs deltalake and pyarrow (the Python of scripts/bench-delta-freshness) for `run`.
import argparse, json, os, random, statistics, subprocess, sys, threading, time
from datetime import datetime

PARTITIONS = 100
# Bytes per record of the compacted table in Parquet (Snappy), measured on this stream: 160,000
# records in 100 partitions merged into 100 files of 3,240,426 bytes (20.3 B/record); the 1 s
# files of the ingest hold 24.6 B/record (their per-file overhead). Used only to choose the
# default target size.
COMPACTED_BYTES_PER_RECORD = 20.3


def gen(args):
    out = sys.stdout
    r = random.Random(13)
    total = int(args.rate * args.duration)
    sent, max_lag = 0, 0.0
    t0 = time.monotonic()
    while sent < total:
        now = time.monotonic() - t0
        due = min(total, int(args.rate * now))
        if due <= sent:
            time.sleep(0.002)
            continue
        # How far behind the schedule the stream is (a blocked pipe: the sink is behind).
        max_lag = max(max_lag, now - sent / args.rate)
        ts = int(time.time() * 1000)
        out.write("".join('{"id":%d,"p":"p%02d","ts":%d,"v":%.4f}\n'
                          % (i, i % PARTITIONS, ts, r.random() * 1000) for i in range(sent, due)))
        out.flush()
        sent = due
    out.close()
    with open(args.stats, "w") as f:
        json.dump({"records": sent, "seconds": time.monotonic() - t0, "max_lag_s": max_lag}, f)


def parse_size(s):
    units = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "KB": 1000, "MB": 10**6}
    s = s.strip().upper()
    num = s.rstrip("KMGIB")
    return int(float(num) * units[s[len(num):]])


def fmt_size(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return f"{n}B"


def auto_target(rate, duration):
    """The largest power of two (at least 16 KiB) not above a fifth of a partition's bytes."""
    per_partition = rate * duration * COMPACTED_BYTES_PER_RECORD / PARTITIONS
    t = 16 << 10
    while t * 2 <= per_partition / 5:
        t *= 2
    return t


def pct(xs, q):
    """Nearest-rank percentile."""
    if not xs:
        return None
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(-(-q * len(xs) // 100)) - 1))
    return xs[k]


def ts_of(event):
    return datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")).timestamp()


def walk_parquet(root):
    """Visible Parquet files of a directory: names starting with `.` or `_` are skipped."""
    n = b = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "_"))]
        for f in filenames:
            if f.endswith(".parquet") and not f.startswith((".", "_")):
                n += 1
                b += os.path.getsize(os.path.join(dirpath, f))
    return n, b


def table_files(path):
    """The live files of the Delta table as delta-rs sees them: (count, sizes, version, load s)."""
    from deltalake import DeltaTable
    t = time.perf_counter()
    dt = DeltaTable(path)
    sizes = dt.get_add_actions(flatten=True).column("size_bytes").to_pylist()
    return len(sizes), sizes, dt.version(), time.perf_counter() - t


def share_large(sizes, target):
    total = sum(sizes)
    big = sum(s for s in sizes if s >= target // 2)
    return (big / total) if total else None


def parse_log(path):
    """The ingest's JSON log: per checkpoint, the commit latency and where its time went."""
    complete, committed, files_done, table_done = {}, [], {}, {}
    errors = []
    with open(path) as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            msg = e.get("fields", {}).get("message")
            cp = None
            for s in e.get("spans", []) or []:
                if "checkpoint" in s:
                    cp = s["checkpoint"]
            if e.get("level") in ("WARN", "ERROR"):
                errors.append({"level": e["level"], "message": msg, "fields": e.get("fields")})
            if msg == "checkpoint complete":
                complete[cp] = {"t": ts_of(e), "files": e["fields"].get("files"),
                                "manifest_ms": e["fields"].get("duration_ms")}
            elif msg == "commit done":
                files_done[cp] = ts_of(e)
            elif msg == "checkpoint in the table's log":
                table_done[e["fields"]["checkpoint"]] = ts_of(e)
            elif msg == "checkpoint committed":
                fl = e["fields"]
                committed.append({"checkpoint": fl["checkpoint"], "t": ts_of(e),
                                  "files": fl["files"], "table": fl.get("table"),
                                  "duration_ms": fl["duration_ms"]})
    for c in committed:
        start = c["t"] - c["duration_ms"] / 1000
        cp = c["checkpoint"]
        if cp in files_done:
            # The file commit (renames, the data directories' fsyncs), then the log step
            # (refresh, the entry's write, a log checkpoint every so often).
            c["files_ms"] = (files_done[cp] - start) * 1000
            c["log_ms"] = (c["t"] - files_done[cp]) * 1000
        if cp in complete:
            # From the vote's completion point to the commit start: the background commit of
            # the checkpoint before may still be running.
            c["wait_ms"] = (start - complete[cp]["t"]) * 1000
    return committed, errors


def latency_stats(committed, min_files):
    xs = [c["duration_ms"] for c in committed if c["files"] >= min_files]
    out = {"checkpoints": len(committed), "measured": len(xs)}
    if xs:
        out.update(p50_ms=pct(xs, 50), p99_ms=pct(xs, 99), max_ms=max(xs),
                   mean_ms=statistics.fmean(xs),
                   files_per_checkpoint_median=statistics.median(
                       c["files"] for c in committed if c["files"] >= min_files))
    for part in ("files_ms", "log_ms"):
        ys = [c[part] for c in committed if c["files"] >= min_files and part in c]
        if ys:
            out[part] = {"p50": pct(ys, 50), "p99": pct(ys, 99), "max": max(ys)}
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def timed_reads(fn, repeat):
    times, rows = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        tbl = fn()
        times.append(time.perf_counter() - t)
        rows = tbl
    return times, rows


def check_rows(tbl, sent):
    import pyarrow.compute as pc
    ids = tbl.column("id")
    return {"rows": tbl.num_rows, "distinct_ids": pc.count_distinct(ids).as_py(),
            "min_id": pc.min(ids).as_py(), "max_id": pc.max(ids).as_py(),
            "exactly_once": tbl.num_rows == sent and pc.count_distinct(ids).as_py() == sent
            and pc.min(ids).as_py() == 0 and pc.max(ids).as_py() == sent - 1}


def read_table(path, repeat, sent):
    from deltalake import DeltaTable
    times, tbl = timed_reads(lambda: DeltaTable(path).to_pyarrow_table(), repeat)
    return {"seconds": times, "best_s": min(times), "median_s": statistics.median(times),
            **check_rows(tbl, sent)}


def read_dir(path, repeat, sent):
    import pyarrow.dataset as ds
    times, tbl = timed_reads(
        lambda: ds.dataset(path, format="parquet", partitioning="hive").to_table(), repeat)
    return {"seconds": times, "best_s": min(times), "median_s": statistics.median(times),
            **check_rows(tbl, sent)}


class Compactor(threading.Thread):
    """`filesink compact` rounds one after another, `sleep` s apart, until stopped."""

    def __init__(self, bin_, lake, target, sleep, log_path, t0, nice=0):
        super().__init__(daemon=True)
        self.bin, self.lake, self.target, self.sleep = bin_, lake, target, sleep
        # Background work at a lower CPU priority: `nice -n N` (0: the ingest's priority).
        self.prefix = ["nice", "-n", str(nice)] if nice else []
        self.log_path, self.t0 = log_path, t0
        self.stop = threading.Event()
        self.rounds = []

    def one(self):
        started = time.monotonic()
        with open(self.log_path, "a") as err:
            p = subprocess.run(self.prefix + [self.bin, "--log-format", "json", "-v", "compact", self.lake,
                                "--target-size", str(self.target), "--json"],
                               stdout=subprocess.PIPE, stderr=err, text=True)
        r = {"t": started - self.t0, "seconds": time.monotonic() - started, "rc": p.returncode}
        try:
            rep = json.loads(p.stdout)["report"]
            r.update(bins=len(rep["bins"]),
                     input_files=sum(len(b["inputs"]) for b in rep["bins"]),
                     input_bytes=sum(b["input_bytes"] for b in rep["bins"]),
                     output_files=rep.get("output_files"), output_bytes=rep.get("output_bytes"),
                     records=rep.get("records"), version=rep.get("version"),
                     abandoned=rep.get("abandoned"))
        except (ValueError, KeyError, TypeError):
            r["stdout"] = p.stdout[-500:]
        return r

    def run(self):
        while not self.stop.is_set():
            self.rounds.append(self.one())
            self.stop.wait(self.sleep)


def run_case(a, case, work, target, sent_expected):
    lake = os.path.join(work, case)
    subprocess.run(["rm", "-rf", lake], check=True)
    log_path = os.path.join(work, f"{case}-ingest.log")
    gen_stats = os.path.join(work, f"{case}-gen.json")
    compact_log = os.path.join(work, f"{case}-compact.log")
    for p in (log_path, compact_log):
        if os.path.exists(p):
            os.remove(p)
    delta = case == "delta"
    print(f"bench-delta-freshness: case {case}: {a.rate} records/s for {a.duration} s into {lake}"
          + (f", compaction every {a.compact_sleep} s at nice {a.compact_nice} (target {fmt_size(target)})" if delta else ""),
          file=sys.stderr, flush=True)
    env = dict(os.environ, RUST_LOG="warn,filesink=info,filesink::sink::committer=debug")
    cmd = [a.bin, "--log-format", "json", "ingest", "-", "--job", "fresh", "--to", lake,
           "--checkpoint-every", "1s", "--partition-by", "p", "--json"]
    if delta:
        cmd += ["--table", "delta"]
    t0 = time.monotonic()
    g = subprocess.Popen([sys.executable, os.path.abspath(__file__), "gen", "--rate", str(a.rate),
                          "--duration", str(a.duration), "--stats", gen_stats],
                         stdout=subprocess.PIPE)
    with open(log_path, "w") as err:
        ing = subprocess.Popen(cmd, stdin=g.stdout, stdout=subprocess.PIPE, stderr=err, env=env)
    g.stdout.close()
    comp = None
    if delta:
        comp = Compactor(a.bin, lake, target, a.compact_sleep, compact_log, t0, a.compact_nice)
        # The first round once the table exists (the first checkpoint creates it).
        while not os.path.exists(os.path.join(lake, "_delta_log")) and time.monotonic() - t0 < 30:
            time.sleep(0.2)
        comp.start()
    samples = []
    out_chunks = []
    reader = threading.Thread(target=lambda: out_chunks.append(ing.stdout.read()), daemon=True)
    reader.start()
    next_sample = t0 + a.sample_every
    ing_rc, ru = None, None
    while ing_rc is None:
        pid, status, ru = os.wait4(ing.pid, os.WNOHANG)
        if pid:
            ing_rc = os.waitstatus_to_exitcode(status)
            ing.returncode = ing_rc
            break
        now = time.monotonic()
        if now < next_sample:
            time.sleep(min(0.2, next_sample - now))
            continue
        next_sample += a.sample_every
        s = {"t": round(now - t0, 2), "load1": loadavg()}
        try:
            s["dir_files"], s["dir_bytes"] = walk_parquet(lake)
        except FileNotFoundError:
            pass
        if delta and os.path.exists(os.path.join(lake, "_delta_log")):
            try:
                n, sizes, v, load_s = table_files(lake)
                s.update(table_files=n, table_bytes=sum(sizes), table_version=v,
                         table_load_ms=load_s * 1000,
                         share_large=share_large(sizes, target))
            except Exception as e:  # a reader racing the writer: record it, go on
                s["table_error"] = str(e)[:300]
        samples.append(s)
        print("  t=%5.0fs load %.1f dir files %s%s" % (
            s["t"], s["load1"], s.get("dir_files"),
            f", table files {s.get('table_files')} (v{s.get('table_version')}, "
            f"delta-rs load {s.get('table_load_ms', 0):.0f} ms)" if delta else ""),
            file=sys.stderr, flush=True)
    wall = time.monotonic() - t0
    g.wait()
    reader.join()
    if comp:
        comp.stop.set()
        comp.join()
    with open(gen_stats) as f:
        gstats = json.load(f)
    try:
        summary = json.loads(out_chunks[0]) if out_chunks and out_chunks[0] else None
    except ValueError:
        summary = {"raw": out_chunks[0][-2000:].decode(errors="replace")}
    committed, errors = parse_log(log_path)
    # Checkpoints that committed files: those with ~100 are the target's case.
    res = {"case": case, "lake": lake, "ingest_rc": ing_rc, "wall_s": wall,
           "ingest_cmd": " ".join(cmd), "generator": gstats,
           "ingest_cpu_s": {"user": ru.ru_utime, "system": ru.ru_stime},
           "ingest_summary": summary,
           "latency": latency_stats(committed, 1),
           "latency_90plus_files": latency_stats(committed, 90),
           "checkpoints": committed, "log_warnings": errors[:50],
           "log_warning_count": len(errors), "samples": samples}
    if comp:
        rounds = comp.rounds
        res["compaction"] = {"target_bytes": target, "rounds": rounds,
                             "round_count": len(rounds),
                             "failed_rounds": sum(1 for r in rounds if r["rc"] != 0),
                             "abandoned_rounds": sum(1 for r in rounds if r.get("abandoned")),
                             "rewritten_input_bytes": sum(r.get("input_bytes") or 0 for r in rounds),
                             "written_output_bytes": sum(r.get("output_bytes") or 0 for r in rounds)}
    sent = gstats["records"]
    if ing_rc != 0:
        print(f"bench-delta-freshness: ingest ({case}) exited {ing_rc}; see {log_path}",
              file=sys.stderr)
        return res
    subprocess.run(["sync"])
    # End state.
    end = {}
    end["dir_files"], end["dir_bytes"] = walk_parquet(lake)
    if delta:
        n, sizes, v, load_s = table_files(lake)
        end["before_final_compact"] = {"table_files": n, "table_bytes": sum(sizes), "version": v,
                                       "share_large": share_large(sizes, target),
                                       "load_ms": load_s * 1000,
                                       "read": read_table(lake, a.read_repeat, sent)}
        final = Compactor(a.bin, lake, target, 0, compact_log, t0, a.compact_nice).one()
        n, sizes, v, load_s = table_files(lake)
        end["final_compact"] = final
        end["after_final_compact"] = {"table_files": n, "table_bytes": sum(sizes), "version": v,
                                      "share_large": share_large(sizes, target),
                                      "load_ms": load_s * 1000,
                                      "read": read_table(lake, a.read_repeat, sent)}
        end["dir_files_after"], end["dir_bytes_after"] = walk_parquet(lake)
    else:
        sizes = []
        for dirpath, dirnames, filenames in os.walk(lake):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "_"))]
            sizes += [os.path.getsize(os.path.join(dirpath, f)) for f in filenames
                      if f.endswith(".parquet") and not f.startswith((".", "_"))]
        end["share_large"] = share_large(sizes, target)
        end["read"] = read_dir(lake, a.read_repeat, sent)
    res["end"] = end
    return res


def summarize(r, target):
    L = []
    w = L.append
    w(f"bench-delta-freshness  commit {r['commit']}  {r['started']}  rate {r['rate']} records/s  "
      f"duration {r['duration']} s  partitions {PARTITIONS}  target {fmt_size(target)}  "
      f"compaction sleep {r['compact_sleep']} s, nice {r.get('compact_nice', 0)}")
    w(f"load average before {r['load_before']:.2f}, after {r['load_after']:.2f}")
    w("")
    cases = r["cases"]
    names = [c["case"] for c in cases]
    w("%-52s" % "" + "".join("%-26s" % n for n in names))

    def row(label, f):
        vals = []
        for c in cases:
            try:
                v = f(c)
            except (KeyError, TypeError, IndexError):
                v = None
            vals.append("-" if v is None else v)
        w("%-52s" % label + "".join("%-26s" % v for v in vals))

    row("records sent (generator max lag s)",
        lambda c: f"{c['generator']['records']} ({c['generator']['max_lag_s']:.2f})")
    row("ingest exit code, wall s", lambda c: f"{c['ingest_rc']}, {c['wall_s']:.1f}")
    row("checkpoints committed (with >= 90 files)",
        lambda c: f"{c['latency']['checkpoints']} ({c['latency_90plus_files']['measured']})")
    for q in ("p50", "p99", "max"):
        row(f"commit latency {q} ms, checkpoints of >= 90 files",
            lambda c, q=q: "%.1f" % c["latency_90plus_files"][f"{q}_ms"])
    row("  of which file commit p50 / p99 ms",
        lambda c: "%.1f / %.1f" % (c["latency_90plus_files"]["files_ms"]["p50"],
                                   c["latency_90plus_files"]["files_ms"]["p99"]))
    row("  of which log entry p50 / p99 ms",
        lambda c: "%.1f / %.1f" % (c["latency_90plus_files"]["log_ms"]["p50"],
                                   c["latency_90plus_files"]["log_ms"]["p99"]))
    def log_at(c, at_log_checkpoint):
        # Versions that are a multiple of 10 (delta.checkpointInterval's default) start a log
        # checkpoint inside the commit: split the log step by that.
        import re
        ys = []
        for x in c["checkpoints"]:
            m = re.search(r"Committed\((\d+)\)", x.get("table") or "")
            if m and x["files"] >= 90 and "log_ms" in x and (int(m.group(1)) % 10 == 0) == at_log_checkpoint:
                ys.append(x["log_ms"])
        return "%.1f / %.1f (%d)" % (pct(ys, 50), pct(ys, 99), len(ys)) if ys else None

    row("  log entry at versions % 10 == 0 p50 / p99 (n)", lambda c: log_at(c, True))
    row("  log entry at other versions p50 / p99 (n)", lambda c: log_at(c, False))
    row("files per checkpoint (median)",
        lambda c: c["latency_90plus_files"]["files_per_checkpoint_median"])
    row("visible files at the end (table: live)",
        lambda c: (c["end"]["before_final_compact"]["table_files"] if "before_final_compact"
                   in c["end"] else c["end"]["dir_files"]))
    row("Parquet files on disk at the end", lambda c: c["end"]["dir_files"])
    row("bytes in live files at the end",
        lambda c: (c["end"]["before_final_compact"]["table_bytes"] if "before_final_compact"
                   in c["end"] else c["end"]["dir_bytes"]))
    row(f"share of bytes in files >= {fmt_size(target // 2)}",
        lambda c: "%.1f%%" % (100 * (c["end"]["before_final_compact"]["share_large"]
                                     if "before_final_compact" in c["end"]
                                     else c["end"]["share_large"])))
    row("  after a final compact round (live files)",
        lambda c: "%.1f%% (%d)" % (100 * c["end"]["after_final_compact"]["share_large"],
                                   c["end"]["after_final_compact"]["table_files"]))
    row("read s, best / median of 3",
        lambda c: "%.2f / %.2f" % ((c["end"]["before_final_compact"]["read"]["best_s"],
                                    c["end"]["before_final_compact"]["read"]["median_s"])
                                   if "before_final_compact" in c["end"]
                                   else (c["end"]["read"]["best_s"], c["end"]["read"]["median_s"])))
    row("  after the final compact round",
        lambda c: "%.2f / %.2f" % (c["end"]["after_final_compact"]["read"]["best_s"],
                                   c["end"]["after_final_compact"]["read"]["median_s"]))
    row("rows read = records sent, ids unique (exactly once)",
        lambda c: str((c["end"]["after_final_compact"]["read"] if "after_final_compact"
                       in c["end"] else c["end"]["read"])["exactly_once"]))
    row("compaction rounds (failed, abandoned)",
        lambda c: "%d (%d, %d)" % (c["compaction"]["round_count"], c["compaction"]["failed_rounds"],
                                   c["compaction"]["abandoned_rounds"]))
    row("compaction input / output MB rewritten",
        lambda c: "%.1f / %.1f" % (c["compaction"]["rewritten_input_bytes"] / 1e6,
                                   c["compaction"]["written_output_bytes"] / 1e6))
    row("compaction round s, median / max",
        lambda c: "%.2f / %.2f" % (statistics.median(x["seconds"] for x in c["compaction"]["rounds"]),
                                   max(x["seconds"] for x in c["compaction"]["rounds"])))
    row("ingest CPU s (user + system)",
        lambda c: "%.1f + %.1f" % (c["ingest_cpu_s"]["user"], c["ingest_cpu_s"]["system"]))
    row("warnings in the ingest log", lambda c: c["log_warning_count"])
    w("")
    w("files over time (every %s s): t, visible files (a: live in the table; b: in the directory)"
      % r["sample_every"])
    by_t = {}
    for c in cases:
        for s in c["samples"]:
            k = int(round(s["t"] / r["sample_every"]))
            by_t.setdefault(k, {})[c["case"]] = s
    w("%8s %14s %14s %14s %16s %10s" % ("t s", "a live files", "a on disk", "a load ms",
                                         "a share>=T/2", "b files"))
    for k in sorted(by_t):
        d, p = by_t[k].get("delta", {}), by_t[k].get("plain", {})
        sh = d.get("share_large")
        w("%8d %14s %14s %14s %16s %10s" % (
            k * r["sample_every"], d.get("table_files", "-"), d.get("dir_files", "-"),
            "%.0f" % d["table_load_ms"] if "table_load_ms" in d else "-",
            "%.1f%%" % (100 * sh) if sh is not None else "-", p.get("dir_files", "-")))
    return "\n".join(L) + "\n"


def run(a):
    a.target = parse_size(a.target_size) if a.target_size != "auto" else auto_target(a.rate, a.duration)
    # Imported before any run, so the first sample does not pay for it.
    import deltalake, pyarrow.dataset  # noqa: F401
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    res = {"commit": a.commit, "started": datetime.utcnow().isoformat(timespec="seconds") + "Z",
           "rate": a.rate, "duration": a.duration, "partitions": PARTITIONS,
           "target_bytes": a.target, "target_size_arg": a.target_size,
           "compact_sleep": a.compact_sleep, "compact_nice": a.compact_nice,
           "sample_every": a.sample_every,
           "read_repeat": a.read_repeat, "nproc": os.cpu_count(), "load_before": loadavg(),
           "uname": " ".join(os.uname()), "cases": []}
    for case in a.cases.split(","):
        res["cases"].append(run_case(a, case, work, a.target, a.rate * a.duration))
        subprocess.run(["sync"])
        time.sleep(a.pause)
    res["load_after"] = loadavg()
    text = summarize(res, a.target)
    sys.stdout.write(text)
    if a.save:
        with open(a.save, "w") as f:
            json.dump(res, f, indent=1)
        with open(os.path.splitext(a.save)[0] + ".txt", "w") as f:
            f.write(text)
    if not a.keep:
        for case in a.cases.split(","):
            subprocess.run(["rm", "-rf", os.path.join(work, case)])


def main():
    p = argparse.ArgumentParser(prog="bench-delta-freshness")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--rate", type=int, required=True)
    g.add_argument("--duration", type=float, required=True)
    g.add_argument("--stats", required=True)
    sm = sub.add_parser("summary", help="print the summary of a saved run (--save FILE.json)")
    sm.add_argument("json")
    r = sub.add_parser("run")
    r.add_argument("--bin", required=True)
    r.add_argument("--commit", default="unknown")
    r.add_argument("--rate", type=int, default=20_000)
    r.add_argument("--duration", type=int, default=600)
    r.add_argument("--target-size", default="auto")
    r.add_argument("--compact-sleep", type=float, default=10)
    r.add_argument("--compact-nice", type=int, default=19)
    r.add_argument("--sample-every", type=float, default=10)
    r.add_argument("--read-repeat", type=int, default=3)
    r.add_argument("--cases", default="delta,plain")
    r.add_argument("--pause", type=float, default=5)
    r.add_argument("--work", required=True)
    r.add_argument("--save")
    r.add_argument("--keep", action="store_true")
    a = p.parse_args()
    if a.cmd == "gen":
        gen(a)
    elif a.cmd == "summary":
        with open(a.json) as f:
            res = json.load(f)
        sys.stdout.write(summarize(res, res["target_bytes"]))
    else:
        run(a)


if __name__ == "__main__":
    main()
