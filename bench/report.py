"""Turns the bench's results (the dict bench/run builds and saves as JSON)
into a markdown report with the targets' verdicts, and a PNG bar chart."""

import statistics

import gateway
import micro
from targets import BY_NAME, FLOOR, GROUP_HELLO, GROUP_REALISTIC, INSTRUCTIONS_ONLY, TARGETS

MPMS = ("prefork", "worker", "event")

# The goals of the bench, all measured on the event MPM under the
# keep-alive load (`ab -k -c 100 -n 100000`, as the original mod_mruby's
# published benchmarks).
GOALS = [
    ("inline ≥ 0.97 × C floor", "mruby_inline", "c", 0.97),
    ("file ≥ 0.95 × inline", "mruby_file", "mruby_inline", 0.95),
    ("fiber ≥ 0.95 × inline (a fiber costs ≤ 5 %)", "mruby_fiber", "mruby_inline", 0.95),

    ("inline ≥ mod_lua", "mruby_inline", "lua", 1.0),
    ("realistic ≥ 1.2 × mod_lua", "mruby_realistic", "lua_realistic", 1.2),
]


def ordered(names):
    """Names in the order of TARGETS (a JSON round trip sorts them)."""
    names = set(names)
    return [t.name for t in TARGETS + INSTRUCTIONS_ONLY if t.name in names]


def label(name):
    return BY_NAME[name].label if name in BY_NAME else name


def stats(runs, key="rps"):
    vals = [r[key] for r in runs]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}


def median_of(results, mpm, target, load, key="rps"):
    t = results["mpms"].get(mpm, {}).get("targets", {}).get(target)
    if not t or not t["runs"].get(load):
        return None
    return stats(t["runs"][load], key)["median"]


def fmt(v, spec="%.0f"):
    return "–" if v is None else spec % v


def throughput_table(results, mpm, load, group):
    m = results["mpms"][mpm]
    # Targets measured under this load (none with --rounds 0).
    rows = [n for n in ordered(m["targets"])
            if BY_NAME[n].group == group and m["targets"][n]["runs"].get(load["name"])]
    if not rows:
        return []
    static = median_of(results, mpm, "static", load["name"])
    lines = ["| target | rps median | min | max | × its C floor | × static | CPU µs/req | "
             "CPU − its C floor (µs) | server CPU busy | "
             "real failures | Length (-k artefact) | httpd errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in rows:
        floor = FLOOR[BY_NAME[name].shape]
        c = median_of(results, mpm, floor, load["name"])
        c_cpu = median_of(results, mpm, floor, load["name"], "cpu_us")
        runs = m["targets"][name]["runs"][load["name"]]
        s = stats(runs)
        cpu = stats(runs, "cpu_us")["median"]
        fails = sum(r["real_failures"] for r in runs)
        length = sum(r["length"] for r in runs) if load["keepalive"] else 0
        errors = sum(r.get("log_errors", 0) for r in runs)
        # rps × CPU per request: how busy the server's CPU was. Well under
        # 100 %, the throughput was set by the client or by other load.
        busy = statistics.median(r["rps"] * r["cpu_us"] / 1e4 for r in runs)
        lines.append("| %s | %s | %s | %s | %s | %s | %.1f | %s | %.0f %% | %d | %d | %d |" % (
            label(name), fmt(s["median"]), fmt(s["min"]), fmt(s["max"]),
            fmt(s["median"] / c if c else None, "%.2f"),
            fmt(s["median"] / static if static else None, "%.2f"), cpu,
            fmt(cpu - c_cpu if c_cpu is not None else None, "%+.1f"), busy, fails, length, errors))
    return lines


def client_bound_note(results, load):
    shares = [r["client_cpu_share"] for m in results["mpms"].values() for t in m["targets"].values()
              for r in t["runs"].get(load["name"], [])]
    if shares and max(shares) > 0.9:
        return ["", "ab used up to %.0f %% of its CPU in this load: the fastest targets may be "
                    "limited by the client, which compresses their ratios." % (100 * max(shares))]
    return []


def memory_table(results, mpm):
    m = results["mpms"][mpm]
    lines = ["| target | parent RSS (MiB) | children | RSS per child (MiB) | private per child (MiB) | "
             "private growth per worker (KiB) | mruby VMs | growth per VM (KiB) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in ordered(m["targets"]):
        mem = m["targets"][name].get("memory")
        if not mem:
            continue
        lines.append("| %s | %s | %d | %.1f | %.1f | %.0f | %s | %s |" % (
            label(name), fmt(mem.get("parent_rss_mib"), "%.1f"), mem["children"], mem["rss_mib_per_child"], mem["private_mib_per_child"],
            mem["growth_kib_per_worker"], fmt(mem["vms"], "%d"), fmt(mem["growth_kib_per_vm"])))
    return lines if len(lines) > 2 else []


def flood_table(results):
    m = results["mpms"].get("event", {})
    rows = [(n, m["targets"][n]["flood"]) for n in ordered(m.get("targets", {})) if "flood" in m["targets"][n]]
    if not rows:
        return []
    lines = ["| target | rps | seconds | real failures | connect | receive | exceptions | non-2xx | "
             "fd exhaustion | scoreboard full | MaxRequestWorkers reached | other error-log errors |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, f in rows:
        if "error" in f:
            lines.append("| %s | could not run: %s |||||||||||" % (label(name), f["error"].replace("|", "/")))
            continue
        log = f["log"]
        # httpd logs its "reached MaxRequestWorkers" notice at error level:
        # "errors" counts it too.
        lines.append("| %s | %.0f | %.1f | %d | %d | %d | %d | %d | %d | %d | %d | %d |" % (
            label(name), f["rps"], f["time_taken"], f["real_failures"], f["connect"], f["receive"], f["exceptions"],
            f["non2xx"], log["fd exhaustion"], log["scoreboard full"], log["MaxRequestWorkers reached"],
            log["errors"] - log["MaxRequestWorkers reached"]))
    return lines


def parallel_table(results):
    rows = results.get("parallel", {})
    if not rows:
        return []
    lines = ["| module | loop length | one request (s) | two at once (s) | ratio median | min | max |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for lang, r in sorted(rows.items(), key=lambda kv: (kv[0] != "mruby", kv[0])):  # mod_mruby first
        if "error" in r:
            lines.append("| %s | failed: %s | | | | | |" % (lang, r["error"]))
            continue
        lines.append("| %s | %d | %.3f | %.3f | %.2f | %.2f | %.2f |" % (
            "mod_" + lang, r["loop"], r["one_s"], r["two_s"], r["ratio_median"], r["ratio_min"],
            r["ratio_max"]))
    return lines


def instructions_table(results):
    counts = results.get("instructions") or {}
    if not counts:
        return []
    lines = ["| target | instructions per request | − its C floor |", "|---|---:|---:|"]
    for name in ordered(counts):
        n = counts[name]
        floor = counts.get(FLOOR[BY_NAME[name].shape])
        lines.append("| %s | %s | %s |" % (label(name), fmt(n), fmt(n - floor if n is not None and floor else None,
                                                                       "%+.0f")))
    return lines


def verdicts(results):
    """Each goal: the measured ratio of throughputs, the same ratio
    computed from server CPU time per request (less sensitive to other load
    on the machine), and whether the goal is met (None: not run)."""
    ka = results["loads"][0]["name"]
    out = []
    for text, a, b, want in GOALS:
        va, vb = median_of(results, "event", a, ka), median_of(results, "event", b, ka)
        ca, cb = median_of(results, "event", a, ka, "cpu_us"), median_of(results, "event", b, ka, "cpu_us")
        if not (va and vb):
            out.append((text, "not run", "", None))
            continue
        out.append((text, "%.3f ×" % (va / vb), "%.3f ×" % (cb / ca) if ca and cb else "", va / vb >= want))
    ca, cc = median_of(results, "event", "mruby_inline", ka, "cpu_us"), median_of(results, "event", "c", ka,
                                                                                   "cpu_us")
    counts = results.get("instructions") or {}
    if ca is not None and cc is not None:
        extra = ""
        if counts.get("mruby_inline") and counts.get("c"):
            extra = " (%+d instructions)" % (counts["mruby_inline"] - counts["c"])
        out.append(("inline CPU ≤ C floor + ~1 µs per request", "", "%+.1f µs%s" % (ca - cc, extra),
                    ca - cc <= 1.0))
    par = results.get("parallel", {}).get("mruby", {})
    if "ratio_median" in par:
        out.append(("two CPU-bound requests in one child ≤ 1.3 × one", "%.2f ×" % par["ratio_median"], "",
                    par["ratio_median"] <= 1.3))
    flood = {n: t["flood"] for n, t in results["mpms"].get("event", {}).get("targets", {}).items()
             if "flood" in t and n.startswith("mruby")}
    if flood:
        fails = sum(f.get("real_failures", 0) for f in flood.values())
        broken = sum("error" in f for f in flood.values())
        out.append(("zero real failures at ab -c %d without keep-alive (mod_mruby)"
                    % next(iter(flood.values()))["concurrency"],
                    "%d failures%s" % (fails, ", %d floods could not run" % broken if broken else ""), "",
                    fails == 0 and not broken))
    return out


def markdown(results):
    mach = results["machine"]
    loads = results["loads"]
    lines = ["# mod_mruby benchmark", "",
             "%s · %s CPUs (%s) · Linux %s · %s · commit %s · %s min" % (
                 mach["date"], mach["cpus"], mach["cpu_model"], mach["kernel"], mach["httpd"],
                 mach["commit"], mach.get("minutes", "?")),
             "",
             "httpd pinned to CPU %s, ab to CPU %s; load average %.2f at start, %.2f at end; "
             "%d rounds, targets interleaved in every round; medians over the rounds." % (
                 mach["server_cpu"] or "(any)", mach["client_cpu"] or "(any)", mach["loadavg_start"][0],
                 mach.get("loadavg_end", (0,))[0], results["options"]["rounds"]),
             ""]
    lines += ["## Goals (event MPM, `%s`)" % loads[0]["label"], "",
              "| goal | measured (rps) | from CPU time | met |", "|---|---:|---:|:-:|"]
    for text, measured, by_cpu, ok in verdicts(results):
        lines.append("| %s | %s | %s | %s |" % (text, measured, by_cpu,
                                               {True: "yes", False: "**no**", None: "–"}[ok]))
    for mpm in MPMS:
        if mpm not in results["mpms"]:
            continue
        m = results["mpms"][mpm]
        section = []
        for load in loads:
            for group, title in ((GROUP_HELLO, "hello world"), (GROUP_REALISTIC, "realistic handler")):
                table = throughput_table(results, mpm, load, group)
                if table:
                    section += ["", "### %s: `%s`" % (title, load["label"]), ""] + table
        table = memory_table(results, mpm)
        if table:
            section += ["", "### memory after the runs", ""] + table
        for name, why in m.get("unsupported", {}).items():
            section += ["", "%s could not run on %s: %s" % (label(name), mpm, why)]
        for name, crashes in m.get("crashes", {}).items():
            section += ["", "%s: crashes in the error log: %s" % (label(name), "; ".join(crashes))]
        if section:
            lines += ["", "## %s MPM" % mpm] + section
    for load in loads:
        lines += client_bound_note(results, load)
    table = flood_table(results)
    if table:
        flood_load = next(iter(t["flood"] for t in results["mpms"]["event"]["targets"].values()
                               if "flood" in t))
        lines += ["", "## Flood: `ab -c %d -n %d` without keep-alive, event MPM" % (
            flood_load["concurrency"], flood_load["requests"]), ""] + table
    table = instructions_table(results)
    if table:
        lines += ["", "## Instructions per request (callgrind, `apache2 -X`, prefork, steady state)", ""] + table
    table = parallel_table(results)
    if table:
        lines += ["", "## CPU parallelism: two CPU-bound requests in one child (event, 4 threads, "
                      "no pinning)", ""] + table
    table = micro.table(results)
    if table:
        lines += ["", "## Single operations from Ruby (worker MPM, 2 processes x 8 threads; timed in the handler)",
                  ""] + table
    table = gateway.table(results)
    if table:
        lines += ["", "## Gateway: Apache::HTTP to a backend, event MPM", ""] + table
    if results.get("missing_packages"):
        lines += ["", "Debian packages missing: %s" % ", ".join(results["missing_packages"])]
    for name, why in results.get("skipped", {}).items():
        lines += ["", "%s skipped: %s" % (label(name), why)]
    return "\n".join(lines) + "\n"


def chart(results, path):
    """Grouped bars of every target on every MPM: requests per second, one
    panel per load, and server CPU per request under the first load, which
    other load on the machine disturbs less. Medians, with whiskers from the
    lowest to the highest round. Returns None once drawn, else why there is
    no chart."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is missing"
    loads = results["loads"]
    mpms = [m for m in MPMS if m in results["mpms"]]
    if not any(runs for m in mpms for t in results["mpms"][m]["targets"].values()
               for runs in t["runs"].values()):
        return "no round was run"
    names = ordered(n for m in mpms for n in results["mpms"][m]["targets"])
    panels = [(load, "rps", "requests per second") for load in loads]
    panels.append((loads[0], "cpu_us", "server CPU µs per request (lower is better)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 6.5), squeeze=False)
    width = 0.8 / max(1, len(names))
    colors = plt.get_cmap("tab10")
    for ax, (load, key, ylabel) in zip(axes[0], panels):
        for i, name in enumerate(names):
            xs, meds, lo, hi = [], [], [], []
            for j, mpm in enumerate(mpms):
                t = results["mpms"][mpm]["targets"].get(name)
                if not t or not t["runs"][load["name"]]:
                    continue
                s = stats(t["runs"][load["name"]], key)
                xs.append(j + (i - (len(names) - 1) / 2) * width)
                meds.append(s["median"])
                lo.append(s["median"] - s["min"])
                hi.append(s["max"] - s["median"])
            if xs:
                ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=label(name), color=colors(i % 10))
        ax.set_xticks(range(len(mpms)))
        ax.set_xticklabels(mpms)
        ax.set_ylabel("%s (median, min–max)" % ylabel)
        ax.set_title(load["label"])
        ax.grid(axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize=9)
    fig.suptitle("mod_mruby and its peers, %s (%s CPUs, httpd pinned to one)" % (
        results["machine"]["date"], results["machine"]["cpus"]))
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None
