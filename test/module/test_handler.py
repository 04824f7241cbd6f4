"""The content handler: inline code, .mrb files, mrubyHandler files, how
Apache.return maps to the response, and which requests the section's
scripts answer."""

from httpd import assert_blocks_keep_their_runs, module_httpd

BODY = r"""
AddHandler mruby-script .mrb
<Location /inline>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'inline'"
</Location>
<Location /two>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'one,'"
    mrubyHandlerCode "Apache.rputs 'two'"
</Location>
<Location /file>
    SetHandler mruby-native-script
    mrubyHandler {root}/scripts/file.rb
</Location>
<Location /nosethandler>
    mrubyHandlerCode "Apache.rputs 'no SetHandler needed'"
</Location>
<Location /nosethandler/status>
    SetHandler default-handler
</Location>
<Location /notfound>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.return Apache::HTTP_NOT_FOUND"
</Location>
<Location /maintenance>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'back soon'; Apache.return Apache::HTTP_SERVICE_UNAVAILABLE"
</Location>
<Location /status>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; r.status = 201; r.content_type = 'text/plain'; Apache.rputs 'created'"
</Location>
<Location /declined>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'dropped'; Apache.return Apache::DECLINED"
</Location>
<Location /bogus>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.return 12345"
</Location>
<Location /empty>
    SetHandler mruby-native-script
</Location>
<Location /order>
    SetHandler mruby-native-script
    mrubyHandlerLastCode "Apache.rputs 'last'"
    mrubyHandlerFirstCode "Apache.rputs 'first,'; Apache.return Apache::DECLINED"
    mrubyHandlerMiddleCode "Apache.rputs 'middle'"
</Location>
<Location /big>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs('x' * 300_000); Apache.rputs('end')"
</Location>
<Location /many>
    SetHandler mruby-native-script
    mrubyHandlerCode "2000.times { |i| Apache.echo i }"
</Location>
<Location /few>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'a'; 30.times { |i| Apache.rputs i.to_s }"
</Location>
<Location /few/declined>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'a'; Apache.rputs 'b'; Apache.return Apache::DECLINED"
</Location>
<Location /small-then-large>
    SetHandler mruby-native-script
    mrubyHandlerCode "Apache.rputs 'head'; Apache.rputs('x' * 20_000); Apache.rputs 'tail'"
</Location>
"""

FILES = {
    "scripts/file.rb": 'Apache.rputs "from file"\n',
    "htdocs/hello.mrb": 'Apache.rputs "hello .mrb"\n',
    "htdocs/declined.mrb": 'Apache.return Apache::DECLINED\n',
    "htdocs/nosethandler/status": "static file\n",
    # A block kept past its run keeps that run's variables.
    "htdocs/keep.mrb": "$kept ||= []\nword = Apache::Request.new.args.to_s\n$kept << proc { word }\n"
                       "GC.start\nApache.rputs $kept.map(&:call).join(',')\n",
}

server = module_httpd("handler", BODY, files=FILES)


def test_inline(server):
    for _ in range(2):
        r = server.get("/inline")
        assert (r.status, r.body) == (200, b"inline")


def test_scripts_of_one_phase_run_in_configuration_order(server):
    r = server.get("/two")
    assert (r.status, r.body) == (200, b"one,two")


def test_mruby_handler_file(server):
    r = server.get("/file")
    assert (r.status, r.body) == (200, b"from file")


def test_mrb_file(server):
    r = server.get("/hello.mrb")
    assert (r.status, r.body) == (200, b"hello .mrb")


def test_missing_mrb_file_is_404(server):
    r = server.get("/nope.mrb")
    assert r.status == 404


def test_section_scripts_answer_without_sethandler(server):
    r = server.get("/nosethandler/anything")
    assert (r.status, r.body) == (200, b"no SetHandler needed")


def test_another_named_handler_wins(server):
    r = server.get("/nosethandler/status")
    assert (r.status, r.body) == (200, b"static file\n")


def test_return_error_status_without_output_is_an_error_page(server):
    r = server.get("/notfound")
    assert r.status == 404
    assert b"Not Found" in r.body


def test_return_status_after_output_keeps_the_body(server):
    r = server.get("/maintenance")
    assert r.status == 503
    assert r.body == b"back soon"


def test_status_and_content_type_setters(server):
    r = server.get("/status")
    assert r.status == 201
    assert r.headers["Content-Type"] == "text/plain"
    assert r.body == b"created"


def test_declined_drops_output_and_falls_through(server):
    r = server.get("/declined")
    assert r.status == 404
    assert b"dropped" not in r.body


def test_declined_mrb_file_never_serves_its_source(server):
    r = server.get("/declined.mrb")
    assert r.status == 404
    assert b"Apache.return" not in r.body


def test_bogus_return_value_is_500_and_logged(server):
    server.expect("/bogus", 500, r"MRB00021: .*Apache.return\(12345\) is not a status")


def test_native_handler_without_code_is_500_and_logged(server):
    server.expect("/empty", 500, r"MRB00041: SetHandler mruby-native-script but no mrubyHandler")


def test_first_middle_last(server):
    # First declines (its output is dropped), Middle answers, Last never runs.
    r = server.get("/order")
    assert (r.status, r.body) == (200, b"middle")


def test_large_output_streams(server):
    r = server.get("/big")
    assert r.status == 200
    assert len(r.body) == 300_003
    assert r.body.endswith(b"xend")


def test_many_small_writes(server):
    r = server.get("/many")
    assert r.status == 200
    assert r.body == "".join("%d\n" % i for i in range(2000)).encode()


def test_a_few_small_writes_are_one_buffered_response(server):
    # Nothing went down the chain before the script ended: httpd computed
    # the Content-Length, and a DECLINED after writes drops them all.
    r = server.get("/few")
    assert r.status == 200
    assert r.body == b"a" + "".join(str(i) for i in range(30)).encode()
    assert r.headers["Content-Length"] == str(len(r.body))
    r = server.get("/few/declined")
    assert r.status == 404
    assert b"ab" not in r.body


def test_small_then_large_writes_keep_their_order(server):
    r = server.get("/small-then-large")
    assert r.status == 200
    assert r.body == b"head" + b"x" * 20_000 + b"tail"


def test_kept_blocks_keep_the_variables_of_their_own_run(server):
    assert_blocks_keep_their_runs(server, "/keep.mrb")
