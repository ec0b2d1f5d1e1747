"""The Markdown report of bench/profile/run (a module of that script, not
run alone): per-build totals, the machine's load, the groups, the kernel
by purpose and by system call, the top functions and the threads, as
medians over the rounds of CPU µs per claim."""

import re

from profile_samples import GROUPS

def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2.0


def med_of(rs, field):
    names = set()
    for r in rs:
        names.update(r[field])
    return {n: median([r[field].get(n, 0.0) for r in rs]) for n in names}


def group_order(names):
    known = [g for g in GROUPS if g in names]
    kern = sorted(n for n in names if n.startswith("kernel"))
    rest = sorted(n for n in names if n not in GROUPS and not n.startswith("kernel"))
    return known + rest, kern


def report(a, builds, res, started, mode):
    """The whole report: @builds [(label, dir)], @res {label: [round
    result]} as measure() returns them."""
    labels = [l for l, _ in builds]
    out = ["Run %s: leader sampled by `perf record -e %s -F %d -g` over %d s "
           "closed loop (after %d s warmup), %d claims in flight (2 "
           "connections), unique NONCE keys, %d round(s); CPU from "
           "/proc/PID/stat (utime + stime) over the same window."
           % (started, "cpu-clock:u" if a.user_only else "cpu-clock", a.freq,
              a.seconds, a.warmup, a.clients, a.rounds), "",
           "Samples: %s." % mode, ""]
    tot = {l: median([r["cpu_us"] for r in res[l]]) for l in labels}
    out += totals_table(builds, res, tot)
    out += machine_table(a.rounds, labels, res)
    out += groups_table(labels, res, tot)
    out += purpose_table(labels, res, tot)
    out += syscall_table(labels, res)
    out += functions_tables(a.top, labels, res, tot)
    out += threads_table(labels, res, tot)
    return "\n".join(out) + "\n"


def totals_table(builds, res, tot):
    out = ["| build | leader CPU µs per claim, per round | median | of which "
           "user / sys (median) | claims/s, per round |",
           "|---|---|---:|---|---|"]
    for label, b in builds:
        rs = res[label]
        us = median([1e6 * r["utime"] / r["claims"] for r in rs])
        sy = median([1e6 * r["stime"] / r["claims"] for r in rs])
        out.append("| %s `%s` | %s | **%.2f** | %.2f / %.2f | %s |" % (
            label, b, " ".join("%.2f" % r["cpu_us"] for r in rs), tot[label], us, sy,
            " ".join("%.0f" % r["ops_per_sec"] for r in rs)))
    return out + [""]


def machine_table(rounds, labels, res):
    out = ["The machine during each window (CPU seconds; \"rest\" is every "
           "other process on the machine: other work than this run):", "",
           "| run | window s | leader | followers | once-bench | rest | load avg "
           "before → after | samples | perf / proc CPU | errors |",
           "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    warn = []
    for rnd in range(rounds):
        for label in labels:
            r = res[label][rnd]
            out.append("| %s %d | %.2f | %.2f | %.2f | %.2f | %.2f | %s → %s | %d | "
                       "%.0f %% | %d |" % (
                           label, rnd + 1, r["window"], r["utime"] + r["stime"],
                           r["followers_cpu"], r["bench_cpu"], r["other_cpu"],
                           r["load"][0], r["load"][1], r["nsamples"],
                           100 * r["coverage"], r["errors"]))
            if not 0.9 <= r["coverage"] <= 1.1:
                warn.append("%s %d" % (label, rnd + 1))
    if warn:
        out += ["", "**Warning**: perf's samples add up to less than 90 % or more "
                "than 110 % of the CPU /proc counted in " + ", ".join(warn) +
                ": their split is less certain there."]
    if len(labels) == 2:
        out += ["", "build / compare, CPU µs per claim: **%.3f** (per round: %s)" % (
            median([r["cpu_us"] for r in res["build"]]) /
            median([r["cpu_us"] for r in res["compare"]]),
            " ".join("%.3f" % (x["cpu_us"] / y["cpu_us"])
                     for x, y in zip(res["build"], res["compare"])))]
    return out + [""]


def groups_table(labels, res, tot):
    gm = {l: med_of(res[l], "groups") for l in labels}
    names = set()
    for l in labels:
        names.update(gm[l])
    main, kern = group_order(names)
    out = ["Where the leader's CPU goes, µs per claim (exclusive: a "
           "function's own samples, not its callees'; each line the median "
           "over the rounds, so with several rounds the lines add up to "
           "about, not exactly, the total):", ""]
    out += table_rows(labels, gm, main, tot, "group")
    ks = {l: sum(gm[l].get(k, 0) for k in kern) for l in labels}
    if len(labels) == 2:
        out.append("| **kernel, all** | **%.2f** | **%.2f** | **%+.2f** |"
                   % (ks["build"], ks["compare"], ks["build"] - ks["compare"]))
    else:
        out.append("| **kernel, all** | **%.2f** | **%.1f %%** |"
                   % (ks["build"], 100 * ks["build"] / tot["build"]))
    kern = sorted(kern, key=lambda k: -gm[labels[0]].get(k, 0))
    out += table_rows(labels, gm, kern, tot, "group", header=False, indent=True)
    if len(labels) == 2:
        out.append("| **total** | **%.2f** | **%.2f** | **%+.2f** |"
                   % (tot["build"], tot["compare"], tot["build"] - tot["compare"]))
    else:
        out.append("| **total** | **%.2f** | 100 %% |" % tot["build"])
    return out + [""]


def functions_tables(top_n, labels, res, tot):
    fm = {l: med_of(res[l], "funcs") for l in labels}
    top = sorted(fm[labels[0]], key=lambda n: -fm[labels[0]][n])[:top_n]
    out = ["Top %d functions of `build`, µs per claim (exclusive):" % len(top), ""]
    out += table_rows(labels, fm, top, tot, "function", code=True)
    if len(labels) == 2:
        allf = set(fm["build"]) | set(fm["compare"])
        diff = sorted(allf, key=lambda n: -abs(fm["build"].get(n, 0) - fm["compare"].get(n, 0)))
        out += ["", "Largest differences by function (build - compare, µs per claim):",
                ""]
        out += table_rows(labels, fm, diff[:top_n], tot, "function", code=True)
    return out + [""]


def threads_table(labels, res, tot):
    tm = {l: med_of(res[l], "threads") for l in labels}
    th = sorted(set().union(*[set(tm[l]) for l in labels]),
                key=lambda n: -tm[labels[0]].get(n, 0))
    out = ["By thread of the leader (the main thread, then the others by "
           "name, digits as N), µs per claim:", ""]
    return out + table_rows(labels, tm, th, tot, "thread", code=True)


# The kernel lines by what they served, first match wins.
PURPOSES = (
    ("TCP (clients, Raft peers)", lambda k: "(TCP)" in k),
    ("unix sockets (the Raft transport's hop to raft_uv)", lambda k: "(unix socket)" in k),
    ("disk (the log's io_uring, files, fsync)",
     lambda k: "io_uring" in k or "(file)" in k or re.search(
         r": (fdatasync|fsync|fadvise64|pwrite64|pread64|openat|renameat|close|"
         r"fallocate|ftruncate|unlinkat)$", k) is not None),
    ("the event loop (epoll, eventfd)", lambda k: "epoll" in k or "(eventfd)" in k),
    ("preempted (a busy machine)", lambda k: "preempted" in k),
    ("memory (page faults, brk, mmap, madvise)",
     lambda k: "page faults" in k or re.search(r": (brk|mmap|munmap|madvise)$", k) is not None),
    ("this tool (perf stat's counting)", lambda k: "perf stat" in k),
    ("other (syscall entry and exit, interrupts, reads and writes not traced to "
     "a target, ...)", lambda k: True),
)


def purpose_table(labels, res, tot):
    """The kernel lines added up by what they served (medians over the
    rounds of each round's sums)."""
    pm = {}
    for l in labels:
        per_round = []
        for r in res[l]:
            t = {}
            for g, v in r["groups"].items():
                if not g.startswith("kernel: "):
                    continue
                for name, match in PURPOSES:
                    if match(g):
                        t[name] = t.get(name, 0) + v
                        break
            per_round.append(t)
        pm[l] = {n: median([t.get(n, 0.0) for t in per_round]) for n, _ in PURPOSES}
    names = [n for n, _ in PURPOSES if any(pm[l][n] > 0 for l in labels)]
    if not names:
        return []
    rows = ["", "The kernel by what it served, µs per claim (the lines above "
            "added up):", ""]
    return rows + table_rows(labels, pm, names, tot, "kernel, for")


def syscall_table(labels, res):
    """Calls per claim (perf stat) beside the kernel time of that call
    (the samples under it, whatever it went to)."""
    if not any(r.get("syscalls") for l in labels for r in res[l]):
        return []
    cm = {l: med_of(res[l], "syscalls") for l in labels}
    tm = {}
    for l in labels:
        per_round = []
        for r in res[l]:
            t = {}
            for g, v in r["groups"].items():
                m = re.match(r"^kernel: (\w+)", g)
                if m:
                    t[m.group(1)] = t.get(m.group(1), 0) + v
            per_round.append(t)
        names = set().union(*per_round)
        tm[l] = {n: median([t.get(n, 0.0) for t in per_round]) for n in names}
    calls = sorted((c for c in set(cm[labels[0]]) | set(cm[labels[-1]])
                    if any(cm[l].get(c, 0) > 0 for l in labels)),
                   key=lambda c: -cm[labels[0]].get(c, 0))

    def per_call(l, c):
        n = cm[l].get(c, 0)
        return "%.2f" % (tm[l].get(c, 0) / n) if n > 0 else "-"

    rows = ["", "System calls of the leader per 1,000 claims (counted by `perf "
            "stat` on the syscalls tracepoints over the same window), and the "
            "kernel time under each (µs per claim from the samples above, all "
            "targets together; per call = that / calls; rare calls' figures "
            "rest on few samples):", ""]
    if len(labels) == 2:
        rows += ["| call | build calls | compare calls | build µs/call "
                 "| compare µs/call |", "|---|---:|---:|---:|---:|"]
        for c in calls:
            rows.append("| %s | %.2f | %.2f | %s | %s |" % (
                c, 1000 * cm["build"].get(c, 0), 1000 * cm["compare"].get(c, 0),
                per_call("build", c), per_call("compare", c)))
    else:
        rows += ["| call | calls | kernel µs/claim | µs/call |",
                 "|---|---:|---:|---:|"]
        for c in calls:
            rows.append("| %s | %.2f | %.3f | %s |" % (
                c, 1000 * cm["build"].get(c, 0), tm["build"].get(c, 0),
                per_call("build", c)))
    rows.append("")
    return rows


def table_rows(labels, m, names, tot, what, header=True, indent=False, code=False):
    rows = []
    if header and len(labels) == 2:
        rows += ["| %s | build µs/claim | compare µs/claim | difference |" % what,
                 "|---|---:|---:|---:|"]
    elif header:
        rows += ["| %s | µs/claim | share |" % what, "|---|---:|---:|"]
    for n in names:
        shown = ("`%s`" % n.replace("|", "\\|")) if code else n
        if indent:
            shown = "&nbsp;&nbsp;" + shown
        b = m[labels[0]].get(n, 0)
        if len(labels) == 2:
            c = m["compare"].get(n, 0)
            rows.append("| %s | %.3f | %.3f | %+.3f |" % (shown, b, c, b - c))
        else:
            rows.append("| %s | %.3f | %.1f %% |" % (shown, b, 100 * b / tot["build"]))
    return rows
