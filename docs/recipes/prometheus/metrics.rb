# metrics.rb: the server's numbers in Prometheus's text format (0.0.4):
# mod_mruby's counters (mod_mruby_*), httpd's scoreboard (apache_*) and the
# application's counters that scripts keep in the "metrics" cache (app_*).

# Every key of the "metrics" cache that starts with this is a counter of
# the application: "counter:logins" is app_logins_total.
APP_PREFIX = "counter:"

# mod_mruby's numbers (Apache::Status.counters, docs/reliability.md). These
# are "now": gauges. The others only grow: counters, named NAME_total.
MRUBY_GAUGES = %w[children vms_alive suspended]
MRUBY_HELP = {
  "children" => "Child processes now.",
  "vms_alive" => "Ruby VMs alive now.",
  "vms_created" => "Ruby VMs made, replacements included.",
  "runs" => "Script runs.",
  "exceptions" => "Script runs that ended with an uncaught exception, timeouts included.",
  "timeouts" => "Script runs stopped by mrubyTimeout.",
  "suspends" => "Requests put to sleep by Apache::Async.sleep.",
  "suspended" => "Requests asleep now.",
  "wakes" => "Sleeping scripts woken.",
  "io_wakes" => "Sleeping scripts woken early by a socket they waited on.",
  "code_hits" => "Runs whose bytecode the VM had loaded already.",
  "code_loads" => "Bytecode loaded into a VM (a script's first run in it).",
  "code_compiles" => "Script files compiled.",
  "cache_ops" => "Apache::Cache operations that reached the store.",
  "cache_errors" => "Apache::Cache operations the store refused or failed.",
  "timer_runs" => "Calls of timer blocks.",
  "timer_failures" => "Calls of timer blocks that raised.",
}

# A metric name is letters, digits and "_" (the grammar also allows ":",
# which Prometheus keeps for recording rules): any other byte becomes "_".
def metric_name(text)
  text.gsub(/[^a-zA-Z0-9_]/, "_")
end

# HELP text: printable ASCII, with "\" escaped as the format asks.
def help_text(text)
  text.gsub(/[^ -~]/, "?").gsub("\\") { "\\\\" }
end

# One metric: its HELP and TYPE lines, then its value, or its values by
# label ({'state="ready"' => 3, ...}). A counter's name ends in _total.
def metric(out, name, type, help, value)
  name += "_total" if type == "counter"
  out << "# HELP #{name} #{help}\n"
  out << "# TYPE #{name} #{type}\n"
  if value.is_a?(Hash)
    value.each { |labels, v| out << "#{name}{#{labels}} #{v}\n" }
  else
    out << "#{name} #{value}\n"
  end
end

out = []

# mod_mruby: the whole server's, whichever child answers the scrape.
Apache::Status.counters.each do |name, value|
  type = MRUBY_GAUGES.include?(name) ? "gauge" : "counter"
  help = MRUBY_HELP[name] || "mod_mruby's #{name}."
  metric(out, "mod_mruby_" + metric_name(name), type, help, value)
end

# httpd's scoreboard. Accesses and bytes need ExtendedStatus On.
board = Apache::Scoreboard.new
by_state = {}
board.counter.sort.each do |state, n|
  # SERVER_BUSY_WRITE is state="busy_write"
  by_state["state=\"#{state.sub("SERVER_", "").downcase}\""] = n
end
metric(out, "apache_workers", "gauge", "Worker slots of the scoreboard by state (dead: no thread).", by_state)
metric(out, "apache_workers_busy", "gauge", "Workers busy: not idle, dead, starting or stopping.",
       board.busy_worker)
metric(out, "apache_workers_idle", "gauge", "Workers waiting for a connection.", board.idle_worker)
metric(out, "apache_accesses", "counter", "Requests served.", board.total_access)
metric(out, "apache_sent_bytes", "counter", "Bytes sent, counted in whole KB.", board.total_kbyte * 1024)
metric(out, "apache_uptime_seconds", "gauge", "Seconds since httpd started or was last fully restarted.",
       format("%.3f", board.uptime))

# The application's counters. Keys that give one name once sanitised
# ("a-b" and "a.b") add up into it; a value that is not a count (up to 18
# digits) is left out.
app = {}
begin
  cache = Apache::Cache.named(:metrics)
  cache.keys(0).each do |key|
    next unless key.start_with?(APP_PREFIX) && key.size > APP_PREFIX.size
    value = cache[key]               # nil: removed since keys was read
    next unless value && value =~ /\A\d{1,18}\z/
    name = "app_" + metric_name(key[APP_PREFIX.size..-1])
    app[name] ||= [0, []]
    app[name][0] += value.to_i
    app[name][1] << help_text(key)
  end
rescue Apache::Cache::Error => e
  # The store failed (counted in mod_mruby_cache_errors_total): the other
  # numbers are still worth a scrape.
  Apache.errlogger(Apache::APLOG_WARNING, "the application's counters are left out: #{e.message}")
end
app.keys.sort.each do |name|
  total, keys = app[name]
  metric(out, name, "counter", "From #{keys.join(', ')} in the metrics cache.", total)
end

r = Apache::Request.new
r.content_type = "text/plain; version=0.0.4; charset=utf-8"
r.headers_out["Cache-Control"] = "no-store"
Apache.rputs out.join
