"""ENV, a read-only view of httpd's environment, and Process.pid: the
variables httpd started with (binary-safe values, names checked), writes
refused with FrozenError, and each child's own pid."""

import json

import pytest

from httpd import MPMS, Httpd

BODY = r"""
AddHandler mruby-script .mrb
"""

READ = r"""
out = {}
out["get"] = [ENV["MM_TEST_VAR"], ENV["MM_TEST_EMPTY"], ENV["MM_TEST_NOT_SET"]]
out["fetch"] = [ENV.fetch("MM_TEST_VAR"), ENV.fetch("MM_TEST_NOT_SET", "dflt"),
                ENV.fetch("MM_TEST_NOT_SET") { |k| "block #{k}" }]
begin
  ENV.fetch("MM_TEST_NOT_SET")
rescue KeyError => e
  out["fetch_error"] = e.message
end
out["key"] = [ENV.key?("MM_TEST_VAR"), ENV.has_key?("MM_TEST_EMPTY"), ENV.include?("MM_TEST_NOT_SET"),
              ENV.member?("PATH")]
h = ENV.to_h
h["MM_TEST_VAR"] = "changed"
out["copy"] = [ENV["MM_TEST_VAR"], ENV.to_hash["MM_TEST_VAR"]]
pairs = []
ENV.each { |k, v| pairs << [k, v] if k.start_with?("MM_TEST_") }
ENV.each_pair { |k, v| pairs << [k, v] if k == "MM_TEST_VAR" }
out["each"] = pairs.sort
out["keys"] = ENV.keys.select { |k| k.start_with?("MM_TEST_") }.sort
out["values"] = ENV.values.include?("a value = with = signs")
out["size"] = [ENV.size == ENV.keys.size, ENV.length == ENV.size, ENV.size > 2, ENV.empty?]
out["names"] = [ENV.to_s, ENV.inspect.include?('"MM_TEST_VAR"=>"a value = with = signs"'), ENV.frozen?]
out["pid"] = [Process.pid.class.to_s, Process.pid]
Apache.rputs JSON.generate(out)
"""

WRITE = r"""
calls = [
  -> { ENV["MM_TEST_VAR"] = "x" },
  -> { ENV.store("A", "b") },
  -> { ENV.delete("MM_TEST_VAR") },
  -> { ENV.clear },
  -> { ENV.update("A" => "b") },
  -> { ENV.merge!("A" => "b") },
  -> { ENV.replace({}) },
  -> { ENV[1] },
  -> { ENV["A\0B"] },
  -> { ENV.fetch(nil) },
  -> { ENV.each },
]
out = calls.map do |c|
  begin
    c.call.inspect
  rescue Exception => e
    "#{e.class}: #{e.message}"
  end
end
out << ENV["MM_TEST_VAR"]
Apache.rputs out.join("\n")
"""

PID = "Apache.rputs Process.pid.to_s"


@pytest.fixture(scope="module", params=MPMS)
def server(request):
    srv = Httpd("env", request.param, BODY)
    srv.env.update(MM_TEST_VAR="a value = with = signs", MM_TEST_EMPTY="")
    for name, text in (("read", READ), ("write", WRITE), ("pid", PID)):
        srv.write("htdocs/%s.mrb" % name, text)
    srv.start()
    yield srv
    srv.stop()
    srv.cleanup()


def test_env_reads_httpds_environment(server):
    r = server.get("/read.mrb")
    assert r.status == 200, r.body
    out = json.loads(r.body)
    assert out["get"] == ["a value = with = signs", "", None]
    assert out["fetch"] == ["a value = with = signs", "dflt", "block MM_TEST_NOT_SET"]
    assert out["fetch_error"] == 'key not found: "MM_TEST_NOT_SET"'
    assert out["key"] == [True, True, False, True]
    assert out["copy"] == ["a value = with = signs"] * 2
    assert out["each"] == [["MM_TEST_EMPTY", ""], ["MM_TEST_VAR", "a value = with = signs"],
                           ["MM_TEST_VAR", "a value = with = signs"]]
    assert out["keys"] == ["MM_TEST_EMPTY", "MM_TEST_VAR"]
    assert out["values"] is True
    assert out["size"] == [True, True, True, False]
    assert out["names"] == ["ENV", True, True]
    assert out["pid"][0] == "Integer" and out["pid"][1] != server.pid


def test_env_is_read_only(server):
    for _ in range(2):  # and stays as it was
        r = server.get("/write.mrb")
        assert r.status == 200, r.body
        refused = ("FrozenError: ENV is read-only in mod_mruby: httpd's threads share it (a request's "
                   "variables are r.subprocess_env)")
        assert r.text.split("\n") == [refused] * 7 + [
            "TypeError: Integer cannot be converted to String",
            "ArgumentError: bad environment variable name: contains null byte",
            "TypeError: nil cannot be converted to String",
            "ArgumentError: no block given",
            "a value = with = signs",
        ]
    server.check_log()


def test_process_pid_is_the_childs(server):
    """Each child answers with its own pid, never the parent's."""
    pids = {int(server.get("/pid.mrb").text) for _ in range(30)}
    assert server.pid not in pids
    for pid in pids:
        with open("/proc/%d/status" % pid) as f:
            assert ("PPid:\t%d\n" % server.pid) in f.read()
