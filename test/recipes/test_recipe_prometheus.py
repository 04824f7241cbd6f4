"""Recipe docs/recipes/prometheus: /metrics, read by prometheus_client's
parser, has mod_mruby's counters, the scoreboard and the application's
counters of the "metrics" cache, each of its type; its numbers follow the
requests the test makes, whichever child answers the scrape. The page's
example counter (a LogTransaction script) runs as the page shows it."""

import re
import time

from prometheus_client.parser import text_string_to_metric_families

from httpd import MPM_DEFAULTS
from recipes import Recipe, fenced_blocks, recipe_httpd

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# The page's example of an application counter: its configuration and its
# script, the script kept where the test keeps its files.
PAGE = Recipe("prometheus").page
EXAMPLE_CONF, = [t for lang, t in fenced_blocks(PAGE) if lang == "apache" and "count_responses.rb" in t]
EXAMPLE_SCRIPT, = [t for lang, t in fenced_blocks(PAGE) if lang == "ruby" and t.startswith("# count_responses.rb")]

SITE = EXAMPLE_CONF.replace("mruby/count_responses.rb", "{root}/scripts/count_responses.rb") + r"""
<Location /hello>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'hello'"
</Location>
<Location /boom>
    SetHandler mruby-native-script
    mrubyHandlerCode "raise 'boom'"
</Location>
<Location /count>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/count.rb
</Location>
"""

# What the test's clients count with: ?key=K&by=N adds N to counter:K (by
# default 1), ?key=K&set=V stores V there.
COUNT = """\
q = Apache::Request.new.query_params
metrics = Apache::Cache.named(:metrics)
if q["set"]
  metrics["counter:" + q["key"]] = q["set"]
else
  metrics.incr("counter:" + q["key"], (q["by"] || "1").to_i)
end
Apache.rputs "ok"
"""

BIG = b"0123456789abcdef" * 4096  # 64 KB

FILES = {
    "scripts/count_responses.rb": EXAMPLE_SCRIPT,
    "scripts/count.rb": COUNT,
    "htdocs/app/index.html": "app\n",
    "htdocs/big.bin": BIG,
}

srv = recipe_httpd("prometheus", SITE, FILES)

MRUBY_GAUGES = ("children", "vms_alive", "suspended")
MRUBY_COUNTERS = ("vms_created", "runs", "exceptions", "timeouts", "suspends", "wakes", "io_wakes", "code_hits",
                  "code_loads", "code_compiles", "cache_ops", "cache_errors", "timer_runs", "timer_failures")
# Each family's type; a counter's family is named without _total, as the
# parser names it.
TYPES = dict(
    [("mod_mruby_" + n, "gauge") for n in MRUBY_GAUGES]
    + [("mod_mruby_" + n, "counter") for n in MRUBY_COUNTERS]
    + [("apache_workers", "gauge"), ("apache_workers_busy", "gauge"), ("apache_workers_idle", "gauge"),
       ("apache_accesses", "counter"), ("apache_sent_bytes", "counter"), ("apache_uptime_seconds", "gauge")])
STATES = ("dead", "starting", "ready", "busy_read", "busy_write", "busy_keepalive", "busy_log", "busy_dns",
          "closing", "graceful", "idle_kill")

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LINE = re.compile(r"# HELP (%s) .*|# TYPE (%s) (counter|gauge)|(%s)(\{[^}]*\})? (-?[0-9.e+]+)" % (NAME, NAME, NAME))


class Scrape:
    """One GET /metrics, parsed: the families by name, the samples by name
    and labels."""

    def __init__(self, srv):
        r = srv.get("/metrics")
        assert r.status == 200, (r, srv.error_log()[-2000:])
        assert r.headers["Content-Type"] == CONTENT_TYPE
        assert r.headers["Cache-Control"] == "no-store"
        self.text = r.text
        self.families = {f.name: f for f in text_string_to_metric_families(self.text)}
        self.samples = {}
        for f in self.families.values():
            for s in f.samples:
                self.samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def __getitem__(self, name):
        return self.samples[(name, ())]

    def get(self, name, default=None):
        return self.samples.get((name, ()), default)

    def workers(self):
        return {dict(labels)["state"]: v for (name, labels), v in self.samples.items() if name == "apache_workers"}


RUNS, EXCEPTIONS, ACCESSES, BYTES = ("mod_mruby_runs_total", "mod_mruby_exceptions_total", "apache_accesses_total",
                                     "apache_sent_bytes_total")


def quiet(srv, timeout=20):
    """A scrape once the server has counted all it did: httpd counts a
    request, and runs its LogTransaction scripts, after the response is
    sent, and a busy machine may make that wait. Quiet when three scrapes
    in a row, a tenth of a second apart, each show no more than the one
    before's own script run and request."""
    prev = Scrape(srv)
    calm = 0
    deadline = time.time() + timeout
    while calm < 3:
        assert time.time() < deadline, "the counters do not settle:\n" + prev.text
        time.sleep(0.1)
        cur = Scrape(srv)
        calm = calm + 1 if (cur[RUNS] - prev[RUNS], cur[ACCESSES] - prev[ACCESSES]) == (1, 1) else 0
        prev = cur
    return prev


def after(srv, before, runs, accesses, timeout=10):
    """The first scrape that shows exactly `runs` script runs and `accesses`
    requests since the scrape `before` (its own run and request are among
    them: counted once it ended; every scrape here adds one of each): none
    may show more."""
    deadline = time.time() + timeout
    extra = 0
    while True:
        now = Scrape(srv)
        got = (now[RUNS] - before[RUNS], now[ACCESSES] - before[ACCESSES])
        want = (runs + extra, accesses + extra)
        assert got[0] <= want[0] and got[1] <= want[1], (got, want)
        if got == want:
            return now
        assert time.time() < deadline, (got, want)
        extra += 1
        time.sleep(0.05)


def test_the_format(srv):
    """Every line is a HELP, a TYPE or a sample of a valid name; each
    metric has its help and its type, the one of TYPES."""
    m = Scrape(srv)
    assert m.text.endswith("\n")
    helps, types = set(), {}
    for line in m.text.splitlines():
        match = LINE.fullmatch(line)
        assert match, line
        if match.group(1):
            helps.add(match.group(1))
        elif match.group(2):
            types[match.group(2)] = match.group(3)
        else:
            # each sample after its metric's TYPE line
            assert match.group(4) in types, line
    assert set(types) == helps
    for name, kind in TYPES.items():
        family = m.families[name]
        assert family.type == kind, name
        assert family.documentation, name
        # a counter's only sample is NAME_total (the name on its TYPE line)
        assert types[name + "_total" if kind == "counter" else name] == kind
    assert {n for n in m.families if not n.startswith("app_")} == set(TYPES)
    for name in MRUBY_COUNTERS:
        assert [s.name for s in m.families["mod_mruby_" + name].samples] == ["mod_mruby_%s_total" % name]


def test_only_for_the_prometheus_server(srv):
    r, _ = srv.expect("/metrics", 403, source="127.0.0.2", log=r"AH01630: client denied .*metrics")
    assert b"mod_mruby" not in r.body


def test_runs_and_requests_follow_what_was_made(srv):
    """Between two scrapes, mod_mruby_runs_total grows by the script runs
    made (the first scrape's, and one for each /hello; a static file runs
    none) and apache_accesses_total by the requests; the bytes by at least
    the files' bytes. Exactly, whichever child answers each scrape."""
    before = quiet(srv)
    for _ in range(10):
        assert srv.ok("/hello").body == b"hello"
    for _ in range(3):
        assert srv.ok("/big.bin").body == BIG
    now = after(srv, before, runs=1 + 10, accesses=1 + 10 + 3)
    sent = now[BYTES] - before[BYTES]
    # in whole KB: at most 1 KB under; over by no more than the small answers
    assert 3 * len(BIG) - 1024 <= sent <= 3 * len(BIG) + 64 * 1024, sent
    assert sent % 1024 == 0
    assert now[EXCEPTIONS] == before[EXCEPTIONS]
    # each run either a hit or a load of its bytecode, counted as it
    # begins: the last scrape's is in, the first's was in before
    hits = now["mod_mruby_code_hits_total"] - before["mod_mruby_code_hits_total"]
    loads = now["mod_mruby_code_loads_total"] - before["mod_mruby_code_loads_total"]
    assert hits + loads == now[RUNS] - before[RUNS]


def test_an_exception_is_counted(srv):
    before = quiet(srv)
    logged = len(srv.log_lines(r"MRB00030: Handler script .* boom"))
    for i in range(3):
        srv.expect("/boom", 500, log=r"MRB00030: Handler script .* boom", count=logged + i + 1)
    now = after(srv, before, runs=1 + 3, accesses=1 + 3)
    assert now[EXCEPTIONS] - before[EXCEPTIONS] == 3
    assert now["mod_mruby_timeouts_total"] == before["mod_mruby_timeouts_total"]


def test_counters_never_go_down(srv):
    first = Scrape(srv)
    srv.ok("/hello")
    second = Scrape(srv)
    for name, kind in TYPES.items():
        if kind == "counter":
            assert second[name + "_total"] >= first[name + "_total"], name
    assert second[RUNS] > first[RUNS]


def test_application_counters_are_the_increments(srv):
    for _ in range(5):
        srv.ok("/count?key=logins")
    srv.ok("/count?key=logins&by=10")
    srv.ok("/count?key=orders&by=3")
    m = Scrape(srv)
    assert m["app_logins_total"] == 15
    assert m["app_orders_total"] == 3
    assert m.families["app_logins"].type == "counter"
    assert m.families["app_logins"].documentation == "From counter:logins in the metrics cache."
    srv.ok("/count?key=logins")
    assert Scrape(srv)["app_logins_total"] == 16


def test_application_counter_names(srv):
    """Keys are sanitised to the metric-name grammar; keys that give one
    name add up into it; the help names the keys, escaped; values that
    are not counts are left out."""
    srv.ok("/count?key=login-failed&by=2")
    srv.ok("/count?key=login.failed&by=5")
    srv.ok("/count?key=p%C3%A1gina%20vista")  # "página vista"
    srv.ok("/count?key=back%5Cslash")  # "back\slash"
    srv.ok("/count?key=not_a_count&set=12abc")
    srv.ok("/count?key=negative&set=-4")
    srv.ok("/count?key=huge&set=" + "9" * 19)
    srv.ok("/count?key=&set=7")  # "counter:" alone
    m = Scrape(srv)
    assert m["app_login_failed_total"] == 7
    assert m.families["app_login_failed"].documentation == \
        "From counter:login-failed, counter:login.failed in the metrics cache."
    assert m["app_p__gina_vista_total"] == 1  # each byte of the "á"
    assert m.families["app_p__gina_vista"].documentation == "From counter:p??gina vista in the metrics cache."
    assert m["app_back_slash_total"] == 1
    assert m.families["app_back_slash"].documentation == "From counter:back\\slash in the metrics cache."
    assert "app_back_slash_total From counter:back\\\\slash" in m.text  # escaped on the wire
    for name in ("app_not_a_count_total", "app_negative_total", "app_huge_total", "app__total"):
        assert m.get(name) is None, name
    assert all(re.fullmatch(NAME, n) for n in m.families)


def test_the_page_example_counts_responses_by_class(srv):
    """The page's LogTransaction script counts /app's responses (after
    they are sent: the test waits for the counts), not others."""
    for _ in range(3):
        srv.ok("/app/index.html")
    for _ in range(2):
        srv.expect("/app/missing", 404)
    srv.ok("/hello")
    deadline = time.time() + 10
    while True:
        m = Scrape(srv)
        got = (m.get("app_responses_2xx_total"), m.get("app_responses_4xx_total"))
        if got == (3, 2) or time.time() > deadline:
            break
        time.sleep(0.05)
    assert got == (3, 2), m.text
    assert m.families["app_responses_2xx"].type == "counter"
    assert m.get("app_responses_5xx_total") is None
    assert "responses not counted" not in srv.error_log()


def test_scoreboard(srv):
    m = Scrape(srv)
    workers = m.workers()
    assert set(workers) == set(STATES)
    if srv.mpm != "system":
        limits = MPM_DEFAULTS[srv.mpm]
        # every slot of the scoreboard, in one state or another
        assert sum(workers.values()) == limits["ServerLimit"] * limits.get("ThreadLimit", 1)
    # this scrape's worker is busy; the server has idle ones
    assert m["apache_workers_busy"] >= 1 and m["apache_workers_idle"] >= 1
    assert m["apache_workers_busy"] + m["apache_workers_idle"] <= sum(workers.values())
    assert workers["ready"] >= 1
    assert m["mod_mruby_children"] >= 1
    assert 1 <= m["mod_mruby_vms_alive"] <= m["mod_mruby_vms_created_total"]
    assert m["mod_mruby_suspended"] == 0
    assert 0 < m["apache_uptime_seconds"] < 3600
    time.sleep(0.3)
    later = Scrape(srv)["apache_uptime_seconds"]
    assert 0.25 <= later - m["apache_uptime_seconds"] < 30
