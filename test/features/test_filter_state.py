"""Apache::Filter#ctx: the state a filter keeps for one request between its
runs is plain data copied out of each run, so it comes back equal in the
next run whatever VM that run has. Here every VM is replaced after two
runs (mrubyMaxRequestsPerVM), in the middle of the bodies."""

from httpd import module_httpd

BODY = r"""
mrubyMaxRequestsPerVM 2
<Directory {docroot}>
    Require all granted
</Directory>
mrubyOutputFilterNamed keep {root}/scripts/keep.rb stream
mrubyOutputFilterNamedCode object "Apache::Filter.new.ctx[:r] = Apache::Request.new" stream
mrubyOutputFilterNamedCode cycle "c = Apache::Filter.new.ctx; c[:me] = c" stream
mrubyOutputFilterNamedCode huge "Apache::Filter.new.ctx[:s] = 'x' * (16 * 1024 * 1024)" stream
mrubyInputFilterNamed tally {root}/scripts/tally.rb
<Location /keep>
    SetOutputFilter keep
</Location>
<Location /object>
    SetOutputFilter object
</Location>
<Location /cycle>
    SetOutputFilter cycle
</Location>
<Location /huge>
    SetOutputFilter huge
</Location>
<Location /tally>
    SetHandler reflector
    SetInputFilter tally
</Location>
"""

# Every kind of plain data, set in the first run, compared in the last.
KEEP = r"""
f = Apache::Filter.new
c = f.ctx
value = { :s => "str\x00\xff", 'list' => [1, -2**62, 2.5, nil, true, false, :sym, { 'n' => [[]] }], 7 => {} }
if f.first?
  c[:value] = value
  c[:runs] = 0
end
c[:runs] += 1
c[:log] = (c[:log] || '') + f.length.to_s + ','
if f.eos?
  f.insert_tail(c[:value] == value ? "|same after #{c[:runs]} runs" : "|changed: #{c[:value].inspect}")
end
"""

TALLY = r"""
f = Apache::Filter.new
f.ctx[:bytes] = (f.ctx[:bytes] || 0) + f.length
f.ctx[:chunks] = (f.ctx[:chunks] || []) << f.length
f.insert_tail "|#{f.ctx[:bytes]} in #{f.ctx[:chunks].size} reads" if f.eos?
"""

DATA = bytes(range(256)) * 1024  # 256 KB: four 64 KB runs

srv = module_httpd("filterstate", BODY, modules=("reflector",), log_level="warn mruby:debug",
                   files={"scripts/keep.rb": KEEP, "scripts/tally.rb": TALLY,
                          "htdocs/keep/data.bin": DATA, "htdocs/object/a.txt": "x",
                          "htdocs/cycle/a.txt": "x", "htdocs/huge/a.txt": "x"})


def test_state_survives_runs_in_replaced_vms(srv):
    for _ in range(3):
        r = srv.get("/keep/data.bin")
        assert r.status == 200
        assert r.body == DATA + b"|same after 4 runs"
    srv.wait_log(r"MRB00017: an mruby VM served 2 runs: replacing it")


def test_input_filter_state_across_reads(srv):
    # Chunked: mod_reflector would answer with the client's Content-Length.
    r = srv.post_chunked("/tally", [b"z" * 10000] * 5)
    assert r.status == 200
    head, _, tail = r.body.partition(b"|")
    assert head == b"z" * 50000
    assert tail.startswith(b"50000 in ") and tail.endswith(b" reads")
    assert int(tail.split(b" ")[2]) > 1  # the state was carried from read to read


def test_state_that_is_not_plain_data_fails_the_response(srv):
    srv.expect("/object/a.txt", 500,
               r"MRB00501: OutputFilter object .*Apache::Filter#ctx holds an object that is not plain data")


def test_state_that_contains_itself_fails_the_response(srv):
    srv.expect("/cycle/a.txt", 500, r"MRB00501: OutputFilter cycle .*Apache::Filter#ctx nested too deeply")


def test_state_larger_than_16_mb_fails_the_response(srv):
    """The state is copied whole after every run: it has a size limit."""
    srv.expect("/huge/a.txt", 500, r"MRB00501: OutputFilter huge .*Apache::Filter#ctx larger than 16 MB")
    assert srv.get("/keep/data.bin").body == DATA + b"|same after 4 runs"
