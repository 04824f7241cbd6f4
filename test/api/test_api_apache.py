"""The Apache class: logging (errlogger/log with the script's file:line,
syslogger), sleep, facts about the module and server, get_tid,
remove_global_variable, the constants, Apache.redirect and
Apache::HTTPError."""

import re
import time

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .mrb
LogLevel warn mruby:debug
mrubyPostConfigCode "Apache.errlogger Apache::APLOG_NOTICE, 'post-config on ' + Apache::Server.new.hostname + ' in ' + Apache.phase"
mrubyChildInitCode "Apache.log Apache::APLOG_NOTICE, 'child-init ' + Apache.get_tid.to_s"
<Location /userdata>
    mrubyFixupsCode "Userdata.new.seen = 'fixups saw ' + Apache::Request.new.uri"
    mrubyHandlerCode "u = Userdata.new; Apache.rputs u.seen; u.seen = nil"
</Location>
<Location /phase>
    mrubyFixupsCode "Apache::Request.new.notes['fixups'] = Apache.phase"
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs r.notes['fixups'] + ',' + Apache.phase"
</Location>
"""

FILES = {
    "htdocs/log.mrb": (
        'Apache.errlogger Apache::APLOG_WARNING, "warn-from-script"\n'
        'Apache.log Apache::APLOG_ERR, "bin\\0ary\\nnext"\n'
        'Apache.log Apache::APLOG_DEBUG, 42\n'
        'begin\n'
        '  Apache.log 99, "x"\n'
        'rescue ArgumentError\n'
        '  Apache.rputs "bad level refused"\n'
        'end\n'
    ),
    "htdocs/log_level.mrb": (
        'begin; Apache.log 2**32 + 4, "x"; rescue ArgumentError => e; Apache.echo e.message; end\n'
        'begin; Apache::Request.new.log(-2**40, "x"); rescue ArgumentError => e; Apache.echo e.message; end\n'
    ),
    "htdocs/syslog.mrb": 'Apache.syslogger Apache::LOG_INFO, "mod_mruby syslog test"\nApache.syslog 6, "again"\n'
                     'begin; Apache.syslogger 2**32 + 6, "x"; rescue ArgumentError => e; Apache.rputs e.message + " "; end\n'
                     'Apache.rputs "ok"\n',
    "htdocs/sleep.mrb": 'Apache.sleep 1\nApache.sleep 0.2\nbegin\n  Apache.sleep(-1)\nrescue ArgumentError\n  Apache.rputs "negative refused"\nend\n',
    # mruby-sleep's Kernel#sleep and #usleep, which the original built in
    "htdocs/kernel_sleep.mrb": (
        'slept = sleep(0.6)\n'
        'us = usleep(300_000)\n'
        'out = [slept.inspect, (us >= 300_000 && us < 2_000_000).inspect]\n'
        'begin; sleep(-1); rescue ArgumentError => e; out << e.message; end\n'
        'begin; usleep(86_400_000_001); rescue ArgumentError => e; out << e.message; end\n'
        'begin; sleep("1"); rescue TypeError; out << "string refused"; end\n'
        'Apache.rputs out.join("|")\n'
    ),
    # the original's class methods return the class: calls chain
    "htdocs/chain.mrb": (
        'a = Apache.rputs("a").rputs("b")\n'
        'b = Apache.echo("c").errlogger(Apache::APLOG_NOTICE, "chained log").syslogger(Apache::LOG_INFO, "chained")\n'
        'c = Apache.sleep(0).return(Apache::HTTP_OK)\n'
        'Apache.rputs [a, b, c].map(&:inspect).join(",")\n'
    ),
    "htdocs/facts.mrb": (
        'Apache.echo Apache.module_name\n'
        'Apache.echo Apache.module_version\n'
        'Apache.echo Apache.server_version\n'
        'Apache.echo Apache.server_build\n'
        'Apache.echo Apache.get_tid\n'
        'Apache.echo server_name\n'
        'Apache.echo Apache.mpm\n'
        'Apache.echo Apache.threaded?\n'
        'Apache.echo Apache.phase\n'
        'Apache.echo Apache.count_arena.is_a?(Integer)\n'
    ),
    "htdocs/globals.mrb": (
        '$mm_test_global = 1\n'
        'before = global_variables.include?(:$mm_test_global)\n'
        'left = Apache.remove_global_variable(:$mm_test_global)\n'
        'Apache.echo [before, left.include?(:$mm_test_global), $mm_test_global.inspect].join(",")\n'
        '$mm_other = 2\n'
        'Apache.echo Apache.global_remove(:$mm_other).include?(:$mm_other)\n'
    ),
    "htdocs/constants.mrb": (
        'Apache.echo [Apache::LOG_EMERG, Apache::LOG_WARN, Apache::LOG_WARNING, Apache::LOG_DEBUG,'
        ' Apache::APLOG_WARNING, Apache::PROXYREQ_NONE, Apache::PROXYREQ_PROXY, Apache::PROXYREQ_RESPONSE,'
        ' Apache::HTTP_MOVED_TEMPORARILY, Apache::M_PUT, Apache::APLOG_TRACE8].join(",")\n'
    ),
    "htdocs/redirect.mrb": 'Apache.redirect "/elsewhere?x=1"\n',
    "htdocs/redirect301.mrb": 'Apache.redirect "http://example.test/new", Apache::HTTP_MOVED_PERMANENTLY\n',
    "htdocs/redirect_bad.mrb": (
        'out = []\n'
        'begin; Apache.redirect "/x", 200; rescue ArgumentError; out << "status"; end\n'
        'begin; Apache.redirect "/x\\r\\nSet-Cookie: a=1"; rescue ArgumentError; out << "crlf"; end\n'
        'begin; Apache.redirect nil; rescue TypeError; out << "nil"; end\n'
        'Apache.rputs out.join(",")\n'
    ),
    "htdocs/httperror.mrb": 'raise Apache::HTTPError.new(404, "no such thing")\n',
    "htdocs/httperror_text.mrb": 'raise Apache::HTTPError, "gone fishing"\n',
    "htdocs/httperror_status_text.mrb": 'raise Apache::HTTPError, "404"\n',
    "htdocs/httperror_bad.mrb": (
        'begin\n  Apache::HTTPError.new(200)\nrescue ArgumentError\n  Apache.rputs "200 refused"\nend\n'
    ),
}

server = module_httpd("apache", BODY, files=FILES)


def test_errlogger_logs_with_script_file_and_line(server):
    r = server.get("/log.mrb")
    assert (r.status, r.body) == (200, b"bad level refused")
    script = server.docroot + "/log.mrb"
    warn = server.wait_log(r"MRB00400: .*warn-from-script")[-1]
    assert "[mruby:warn]" in warn and "%s:1: warn-from-script" % script in warn
    err = server.wait_log(r"MRB00400: .*bin")[-1]
    # NUL and control characters are escaped: one line per entry
    assert "%s:2: bin\\\\x00ary\\nnext" % script in err
    dbg = server.wait_log(r"MRB00400: .*:3: 42")[-1]
    assert "[mruby:debug]" in dbg


def test_bad_level_is_named_as_given(server):
    # not cut to 32 bits (which read 4, a valid level, and 0)
    assert server.lines("/log_level.mrb") == [
        "log level 4294967300: use Apache::APLOG_EMERG .. APLOG_TRACE8",
        "log level -1099511627776: use Apache::APLOG_EMERG .. APLOG_TRACE8",
    ]


def test_logging_in_server_phases(server):
    line = server.wait_log(r"MRB00400: .*post-config on 127.0.0.1 in PostConfig")[-1]
    assert "[mruby:notice]" in line and "[client" not in line
    assert server.wait_log(r"MRB00400: .*child-init \d+")


def test_phase_names(server):
    assert server.get("/phase").body == b"Fixups,Handler"


def test_syslogger_accepts_priorities(server):
    r = server.get("/syslog.mrb")
    # an invalid priority is named as given, not cut to 32 bits (which read 6)
    assert (r.status, r.body) == (200, b"Apache.syslogger: invalid priority 4294967302 ok")


def test_sleep_blocks(server):
    t0 = time.time()
    r = server.get("/sleep.mrb")
    assert (r.status, r.body) == (200, b"negative refused")
    assert time.time() - t0 >= 1.2


def test_kernel_sleep_and_usleep_block_and_say_how_long(server):
    t0 = time.time()
    r = server.get("/kernel_sleep.mrb")
    assert time.time() - t0 >= 0.9
    assert r.status == 200
    assert r.text.split("|") == [
        "1", "true",
        "sleep: the time must be between 0 and 86400 seconds",
        "usleep: the time must be between 0 and 86400 seconds",
        "string refused",
    ]


def test_class_methods_return_the_class_so_calls_chain(server):
    r = server.get("/chain.mrb")
    assert (r.status, r.body) == (200, b"abc\nApache,Apache,Apache")
    assert server.wait_log(r"MRB00400: .*chain.mrb:2: chained log")


def test_userdata_carries_values_from_phase_to_phase(server):
    # the original mod_mruby's Userdata: a store the scripts of a VM share
    for _ in range(3):
        assert server.get("/userdata").text == "fixups saw /userdata"


def test_facts(server):
    lines = server.lines("/facts.mrb")
    assert lines[0] == "mod_mruby"
    assert re.match(r"^\d+\.\d+\.\d+$", lines[1])
    assert lines[2].startswith("Apache/2.4")
    assert re.match(r"^\w{3} ", lines[3]) or re.match(r"^\d{4}-", lines[3])
    assert int(lines[4]) > 0
    assert lines[5] == "Apache"
    assert lines[6] == server.mpm
    assert lines[7] == ("false" if server.mpm == "prefork" else "true")
    assert lines[8] == "Handler"
    assert lines[9] == "true"


def test_remove_global_variable(server):
    r = server.get("/globals.mrb")
    assert r.text == "true,false,nil\nfalse\n"


def test_compat_constants(server):
    r = server.get("/constants.mrb")
    assert r.text == "0,4,4,7,4,0,1,3,302,1,15\n"


def test_redirect_default_302(server):
    r = server.get("/redirect.mrb")
    assert r.status == 302
    assert r.headers["Location"].endswith("/elsewhere?x=1")


def test_redirect_with_status(server):
    r = server.get("/redirect301.mrb")
    assert r.status == 301
    assert r.headers["Location"] == "http://example.test/new"


def test_redirect_refuses_bad_arguments(server):
    r = server.get("/redirect_bad.mrb")
    assert (r.status, r.body) == (200, b"status,crlf,nil")
    assert "Set-Cookie" not in r.headers


def test_http_error_sets_the_status(server):
    r, _ = server.expect("/httperror.mrb", 404, r"MRB00030: .*Apache::HTTPError.*no such thing")
    assert b"no such thing" not in r.body


def test_http_error_raised_with_a_message_alone(server):
    # raise Apache::HTTPError, "text": a 500 with that message
    r, _ = server.expect("/httperror_text.mrb", 500, r"MRB00030: .*Apache::HTTPError.*gone fishing")
    assert b"gone fishing" not in r.body
    assert server.get("/httperror_status_text.mrb").status == 404


def test_http_error_needs_an_error_status(server):
    assert server.get("/httperror_bad.mrb").body == b"200 refused"
