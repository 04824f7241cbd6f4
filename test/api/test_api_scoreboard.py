"""Apache::Scoreboard: worker states and counters from the shared
scoreboard (ExtendedStatus On for the access counters)."""

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
ExtendedStatus On
"""

FILES = {
    "htdocs/sb.mrb": (
        'sb = Apache::Scoreboard.new\n'
        'c = sb.counter\n'
        'Apache.echo "keys=#{c.keys.sort.join(",")}"\n'
        'Apache.echo "busy=#{sb.busy_worker}"\n'
        'Apache.echo "idle=#{sb.idle_worker}"\n'
        'Apache.echo "ready_count=#{c["SERVER_READY"] == sb.idle_worker}"\n'
        'Apache.echo "write=#{c["SERVER_BUSY_WRITE"]}"\n'
        'Apache.echo "pid=#{sb.pid}"\n'
        'Apache.echo "limits=#{sb.server_limit},#{sb.thread_limit}"\n'
        'Apache.echo "uptime=#{sb.uptime}"\n'
        'Apache.echo "restart=#{sb.restart_time}"\n'
        'Apache.echo "access=#{sb.total_access}"\n'
        'Apache.echo "mine=#{sb.access_counter(sb.pid)}"\n'
        'Apache.echo "kbyte=#{sb.total_kbyte.is_a?(Integer)}"\n'
        'Apache.echo "cpu=#{sb.cpu_load.is_a?(Float)}"\n'
        'Apache.echo "loadavg=#{sb.loadavg.size},#{sb.loadavg.all? { |x| x.is_a?(Float) }}"\n'
        'me = sb.workers.find { |w| w["request"].include?("/sb.mrb") }\n'
        'Apache.echo "me=#{me && me["pid"] == sb.pid},#{me && me["state"]},#{me && me["client"]}"\n'
        # {client => state}: the workers of one client (every test's is
        # 127.0.0.1) share a key, the last one read giving its state
        'st = sb.status\n'
        'Apache.echo "status=#{st.key?("127.0.0.1")},#{st.values.all? { |v| Apache::Scoreboard.const_defined?(v) }}"\n'
        'Apache.echo "const=#{Apache::Scoreboard::SERVER_READY},#{Apache::Scoreboard::SERVER_DEAD}"\n'
    ),
}

server = module_httpd("scoreboard", BODY, files=FILES)


def fields(server):
    return dict(l.split("=", 1) for l in server.lines("/sb.mrb"))


def test_scoreboard(server):
    f = fields(server)
    assert f["keys"] == ",".join(sorted(
        ["SERVER_DEAD", "SERVER_STARTING", "SERVER_READY", "SERVER_BUSY_READ", "SERVER_BUSY_WRITE",
         "SERVER_BUSY_KEEPALIVE", "SERVER_BUSY_LOG", "SERVER_BUSY_DNS", "SERVER_CLOSING",
         "SERVER_GRACEFUL", "SERVER_IDLE_KILL"]))
    assert int(f["busy"]) >= 1  # this request's worker
    assert int(f["idle"]) >= 0 and f["ready_count"] == "true"
    assert int(f["write"]) >= 1
    assert int(f["pid"]) > 0
    servers, threads = map(int, f["limits"].split(","))
    assert servers >= 1 and threads >= 1
    assert float(f["uptime"]) >= 0
    assert float(f["restart"]) > 1.6e9
    assert f["kbyte"] == "true" and f["cpu"] == "true"
    assert f["loadavg"] == "3,true"
    assert f["me"] == "true,SERVER_BUSY_WRITE,127.0.0.1"
    assert f["status"] == "true,true"
    assert f["const"] == "2,0"


def test_access_counters_grow(server):
    first = int(fields(server)["access"])
    for _ in range(3):
        fields(server)
    assert int(fields(server)["access"]) > first
