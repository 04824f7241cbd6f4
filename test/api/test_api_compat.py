"""A script in the style of the original mod_mruby's API tour touches
every class the way its users did (class-level calls, X.new meaning the
current request, Hash results walked with each_key): it must run
unchanged and say what it saw."""

from httpd import module_httpd

BODY = r"""
AddHandler mruby-script .rb
ExtendedStatus On
"""

TOUR = r'''
require 'Apache'

class Tour
  def say(s)
    Apache.echo s
  end

  def core
    say "server=#{server_name}"
    say "version=#{Apache::server_version}"
    say "module=#{Apache::module_name}/#{Apache::module_version}"
    Apache.syslogger 4, "tour syslog"
    Apache.errlogger 4, "tour errlogger"
    say "statuses=#{Apache::OK},#{Apache::DECLINED},#{Apache::HTTP_OK},#{Apache::HTTP_SERVICE_UNAVAILABLE}"
  end

  def request
    r = Apache::Request.new()
    say "filename=#{File.basename(r.filename)}"
    r.filename = "/tmp/index.html"
    say "changed=#{r.filename}"
    keep = r.document_root
    r.document_root = "/tmp"
    say "docroot=#{r.document_root}"
    r.document_root = keep
  end

  def server
    s = Apache::Server.new()
    say "server_docroot=#{s.document_root == Apache::Request.new.document_root}"
    say "error_fname=#{s.error_fname.end_with?('error.log')}"
    say "timeout=#{s.timeout}"
  end

  def connection
    c = Apache::Connection.new()
    say "ips=#{c.remote_ip},#{c.local_ip},#{c.keepalives}"
  end

  def notes
    n = Apache::Request.new.notes
    n["memo"] = "hello"
    say "memo=#{n['memo']}"
  end

  def env
    e = Apache::Env.new()
    e["AUTHOR"] = "someone"
    e["AUTHOR"] = "someone else"
    say "author=#{e['AUTHOR']}"
    all = e.all
    count = 0
    all.each_key { |k| count += 1 if all[k] }
    say "env=#{count > 10}"
  end

  def headers
    hi = Apache::Request.new.headers_in
    say "accept=#{hi['Accept-Encoding'].nil? ? 'nil' : hi['Accept-Encoding']}"
    hi["Accept-Encoding"] = "gzip"
    say "accept_now=#{hi['Accept-Encoding']}"
    say "headers_in=#{hi.all.size > 0}"
    say "headers_out=#{Apache::Request.new.headers_out.all.size}"
  end

  def scoreboard
    sb = Apache::Scoreboard.new()
    say "pid=#{sb.pid == Process.pid rescue sb.pid > 0}"
    say "limits=#{sb.thread_limit > 0 && sb.server_limit > 0}"
    say "numbers=#{[sb.cpu_load, sb.total_kbyte, sb.total_access, sb.restart_time, sb.idle_worker, sb.busy_worker, sb.uptime, sb.access_counter(sb.pid)].all? { |x| x.is_a?(Numeric) }}"
    say "loadavg=#{sb.loadavg.size}"
    n = 0
    sb.status.each_key { |k| n += 1 }
    sb.counter.each_key { |k| n += 1 }
    say "hashes=#{n >= 11}"
  end

  def finfo
    f = Apache::Request.new.finfo
    say "regular=#{f.filetype == Apache::Finfo::APR_REG}"
    say "finfo=#{[f.permission, f.user, f.group, f.device, f.inode, f.nlink, f.size, f.csize, f.atime, f.mtime, f.ctime].all? { |x| x.is_a?(Numeric) }}"
  end
end

t = Tour.new
%w[core request server connection notes env headers scoreboard finfo].each { |m| t.send(m) }
Apache.errlogger 4, "arena=#{Apache.count_arena}"
Apache.return(Apache::OK)
'''

server = module_httpd("compat", BODY, files={"htdocs/tour.rb": TOUR})


def test_tour_runs_unchanged(server):
    got = dict(line.split("=", 1) for line in server.lines("/tour.rb"))
    assert got["server"] == "Apache"
    assert got["version"].startswith("Apache/2.4")
    assert got["module"].startswith("mod_mruby/")
    assert got["statuses"] == "0,-1,200,503"
    assert got["filename"] == "tour.rb"
    assert got["changed"] == "/tmp/index.html"
    assert got["docroot"] == "/tmp"
    assert got["server_docroot"] == "true"
    assert got["error_fname"] == "true"
    assert got["timeout"] == "30000000"
    assert got["ips"] == "127.0.0.1,127.0.0.1,0"
    assert got["memo"] == "hello"
    assert got["author"] == "someone else"
    assert got["env"] == "true"
    assert got["accept"] in ("nil", "identity")
    assert got["accept_now"] == "gzip"
    assert got["headers_in"] == "true"
    assert got["headers_out"] == "0"
    assert got["limits"] == "true" and got["numbers"] == "true"
    assert got["loadavg"] == "3" and got["hashes"] == "true"
    assert got["regular"] == "true" and got["finfo"] == "true"
    server.wait_log(r"MRB00400: .*tour.rb:\d+: tour errlogger")
    server.wait_log(r"MRB00400: .*arena=\d+")
