"""Regexp and MatchData on PCRE2 (the library httpd uses), so scripts written for mruby
builds with a Regexp (like mod_mruby's rewrite examples) run unchanged:
Regexp.new(...).match, literals, $~ and $1, =~, sub/gsub/scan/split."""

from httpd import ANY_MPM, SINGLE_WORKER, module_httpd

BODY = r"""
AddHandler mruby-script .mrb
"""

FILES = {
    # mod_mruby's rewrite example, in our words
    "htdocs/rewrite.mrb": r'''
r = Apache::Request.new
m = Regexp.new("^/rewrite.mrb/(.*)").match(r.uri)
if m
  target = "/moved/" + m[1]
  m2 = Regexp.new("^/moved/deeper/(.*)").match(target)
  target = "/final/" + m2[1] if m2
  Apache.rputs target
else
  Apache.rputs "no match"
end
''',
    # String#split is the module's, in C: a Regexp goes to the Ruby
    # implementation, anything else to mruby's own method
    "htdocs/split.mrb": r'''
class Sub < Regexp; end
out = []
out << "a,b,,c,,".split(",").inspect << "a,b,c".split(",", 2).inspect << " a  b ".split.inspect
out << "a b".split(nil).inspect << "abc".split("").inspect << "a,b,,".split(",", -1).inspect
out << "a1b22c".split(/\d+/).inspect << "a1b2c".split(/\d/, 2).inspect << "a1b".split(Sub.new("1")).inspect
out << "x=y=z".send(:split, *["=", 2]).inspect
[-> { "a".split(1) }, -> { "a".split(",", 1, 2) }, -> { "a".split(",", "x") }].each do |f|
  begin; f.call; out << "accepted"; rescue => e; out << e.class.to_s; end
end
Apache.rputs out.join("|")
''',
    "htdocs/regexp.mrb": r'''
out = []
m = /(?<year>\d{4})-(\d\d)/.match("date: 2024-05-17 end")
out << m[0] << m[1] << m["year"] << m[:year] << m.pre_match << m.post_match << m.begin(0).to_s
out << m.captures.inspect << m.names.inspect << m.size.to_s
out << ("abc" =~ /b/).to_s << ("abc" =~ /z/).inspect
"key=value" =~ /(\w+)=(\w+)/
out << $1 << $2 << $~[0]
out << /ABC/i.match?("xabcx").to_s << /a.c/.match?("a\nc").to_s << /a.c/m.match?("a\nc").to_s
out << /^b$/.match?("a\nb\nc").to_s
out << "a1b22c333".gsub(/\d+/, "#") << "a1b22".sub(/(\d+)/, '<\1>') << "x-y_z".gsub(/[-_]/) { |s| s == "-" ? "+" : "=" }
out << "a1b22c333".scan(/\d+/).inspect << "k1=v1;k2=v2".scan(/(\w+)=(\w+)/).inspect
out << "a, b,c ,d".split(/\s*,\s*/).inspect
out << Regexp.escape("a.b*c") << /a\.b/.source << /x/i.inspect << Regexp.new("q", Regexp::IGNORECASE).casefold?.to_s
out << (/foo/ === "xfoox").to_s
out << Regexp.new(" a b # comment\n c", Regexp::EXTENDED).match?("abc").to_s
case "/api/v1/items"
when /^\/api\/v(\d+)/ then out << "api v#{$1}"
end
out << "binary\x00\xffdata".match(/\x00\xff(d)/)[1]
Apache.rputs out.join("|")
''',
    "htdocs/errors.mrb": r'''
out = []
begin; Regexp.new("(unclosed"); rescue RegexpError => e; out << "RegexpError"; end
begin; Regexp.new(nil); rescue TypeError; out << "TypeError"; end
out << (Regexp.new("a\0b") =~ "xa\0b").inspect << Regexp.new("a\0b").match?("a").inspect
out << /x/.match(nil).inspect << /x/.match("y").inspect << $~.inspect
begin; /(a)/.match("a")[:nope]; rescue IndexError; out << "IndexError"; end
Apache.rputs out.join(",")
''',
    "htdocs/groups.mrb": r'''
out = []
"ab" =~ /(a)(x)?(b)/
out << $1.inspect << $2.inspect << $3.inspect << $4.inspect
"zz" =~ /(q)/
out << $1.inspect << $~.inspect
m = Regexp.new("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)(l)(m)(n)(o)(p)(q)(r)(s)(t)").match("xabcdefghijklmnopqrstx")
out << m.size.to_s << m[20] << m.begin(20).to_s << $9 << m.captures.join
re = Regexp.new("(?<first>\\w)(?<second>\\w)")
out << re.names.inspect << re.match("xy")[:second] << re.match("pq")["first"]
re.send(:initialize, "(?<other>z)")
out << re.names.inspect << re.match("z")[:other]
begin; re.__group_names << "x"; rescue => e; out << e.class.to_s; end
Apache.rputs out.join("|")
''',
    # a pattern that backtracks past PCRE's match limit before it finds the
    # "c" that matches
    "htdocs/limit.mrb": r'''
s = "a" * 40 + "c"
out = []
[-> { /(a+)+b|c/ =~ s }, -> { s.match?(/(a+)+b|c/) }, -> { s.gsub(/(a+)+b|c/, "") }].each do |f|
  begin
    out << f.call.inspect
  rescue RegexpError => e
    out << e.class.to_s + ": " + e.message
  end
end
out << (/(a+)+b|c/ =~ "c").inspect
Apache.rputs out.join("\n")
''',
    # matches from a position inside the string (gsub, scan and split
    # search from one on every pass) see the text before it: \b, \B, \A
    # and lookbehind
    "htdocs/position.mrb": r'''
out = []
out << "aaa".gsub(/\ba/, "x")
out << "foo.bar".split(/\b/).inspect
out << "xab".match(/\Ab/, 2).inspect << "xab".match(/b/, 2).begin(0).to_s
out << "abbb".gsub(/(?<=b)b/, "X") << "aab".scan(/(?<!a)a/).size.to_s
out << "abc de".gsub(/\B/, "-")
out << "hello big world".gsub(/\b\w/) { |c| c.upcase }
out << "a.b".match(/(?<=\.)b/, 2).to_a.inspect
Apache.rputs out.join("|")
''',
    # dup and clone: a copy has its own compiled pattern, which lives on
    # after the original is collected
    "htdocs/copy.mrb": r'''
out = []
orig = /(?<word>b+)/i
copies = [orig.dup, orig.clone, Regexp.new(orig)]
copies.each { |re| out << re.match("aBBc")[:word] << re.source << re.casefold?.to_s }
orig = nil
GC.start
copies.each { |re| out << "xbx".gsub(re.dup, "-") }
out << (copies[0] == copies[1]).to_s
Apache.rputs out.join("|")
''',
    "htdocs/cached.mrb": r'''
$cached_re ||= Regexp.new("^/cached.mrb")
Apache.rputs $cached_re.match?(Apache::Request.new.uri).to_s
''',
}

server = module_httpd("regexp", BODY, files=FILES, mpms=ANY_MPM)


def test_rewrite_example(server):
    assert server.get("/rewrite.mrb/deeper/x/y").text == "/final/x/y"
    assert server.get("/rewrite.mrb/plain").text == "/moved/plain"
    assert server.get("/rewrite.mrb").text == "no match"


def test_regexp_and_matchdata(server):
    r = server.get("/regexp.mrb")
    assert r.status == 200, server.error_log()[-2000:]
    assert r.body.split(b"|") == [
        b"2024-05", b"2024", b"2024", b"2024", b"date: ", b"-17 end", b"6",
        b'["2024", "05"]', b'["year"]', b"3", b"1", b"nil",
        b"key", b"value", b"key=value",
        b"true", b"false", b"true", b"true",
        b"a#b#c#", b"a<1>b22", b"x+y=z",
        b'["1", "22", "333"]', b'[["k1", "v1"], ["k2", "v2"]]',
        b'["a", "b", "c", "d"]',
        b"a\\.b\\*c", b"a\\.b", b"/x/i", b"true", b"true", b"true", b"api v1", b"d",
    ]


def test_regexp_errors(server):
    r = server.get("/errors.mrb")
    assert r.body == b"RegexpError,TypeError,1,false,nil,nil,nil,IndexError"


def test_groups_last_match_globals_and_names(server):
    """$1..$9 follow the last match (nil for a group that did not take part,
    a group the pattern lacks, or after a failed match); a pattern of more
    than 16 groups; named groups of a Regexp initialized twice."""
    r = server.get("/groups.mrb")
    assert r.status == 200, server.error_log()[-2000:]
    assert r.body.split(b"|") == [
        b'"a"', b"nil", b'"b"', b"nil",
        b"nil", b"nil",
        b"21", b"t", b"20", b"i", b"abcdefghijklmnopqrst",
        b'["first", "second"]', b"y", b"p",
        b'["other"]', b"z",
        b"FrozenError",
    ]


def test_a_match_pcre_gives_up_on_raises(server):
    """PCRE stops a match that backtracks too much: that is not a failed
    match (it may be there, as here), so it raises instead of answering
    nil, which a script would take for "no match"."""
    r = server.get("/limit.mrb")
    assert r.status == 200, server.error_log()[-2000:]
    parts = r.text.split("\n")
    assert len(parts) == 4
    for part in parts[:3]:
        assert part.startswith("RegexpError: ") and "/(a+)+b|c/" in part, part
    assert parts[3] == "0"


def test_matching_from_a_position_sees_the_text_before_it(server):
    """A match from a position (gsub, scan and split search from one on
    every pass) has the whole string around it: \\b, \\B, \\A and a
    lookbehind see the text before the position, as in Ruby."""
    r = server.get("/position.mrb")
    assert r.status == 200, server.error_log()[-2000:]
    assert r.text.split("|") == [
        "xaa",
        '["foo", ".", "bar"]',
        "nil", "2",
        "abXX", "1",
        "a-b-c d-e",
        "Hello Big World",
        '["b"]',
    ]


def test_dup_and_clone(server):
    """A Regexp's dup and clone match as the original does (mruby copies its
    instance variables but not the compiled pattern, so a copy used to say
    "uninitialized Regexp"), and keep working once the original is gone."""
    r = server.get("/copy.mrb")
    assert r.status == 200, server.error_log()[-2000:]
    assert r.text.split("|") == ["BB", "(?<word>b+)", "true"] * 3 + ["x-x"] * 3 + ["true"]


def test_split_with_strings_and_regexps(server):
    r = server.get("/split.mrb")
    assert r.status == 200, server.error_log()[-2000:]
    assert r.text.split("|") == [
        '["a", "b", "", "c"]', '["a", "b,c"]', '["a", "b"]',
        '["a", "b"]', '["a", "b", "c"]', '["a", "b", "", ""]',
        '["a", "b", "c"]', '["a", "b2c"]', '["a", "b"]',
        '["x", "y=z"]',
        "TypeError", "ArgumentError", "TypeError"]


def test_regexp_kept_across_requests(server):
    for _ in range(5):
        assert server.get("/cached.mrb").body == b"true"


def test_last_match_does_not_outlive_its_request(make_httpd, mpm):
    """$~ and $1..$9 hold what a request's script matched (a token from its
    query string here): the next script run in the VM, another client's
    request, starts without them, as a Ruby script starts with $~ nil."""
    srv = make_httpd("regexp_single", mpm, BODY, mpm_conf=SINGLE_WORKER[mpm], files={
        "htdocs/login.mrb": 'Apache::Request.new.args =~ /token=(\\w+)/\nApache.rputs $1\n',
        "htdocs/peek.mrb": 'Apache.rputs [$~, $1, $2].inspect\n',
    }).start()
    for _ in range(2):
        assert srv.get("/login.mrb?token=s3cret").body == b"s3cret"
        r = srv.get("/peek.mrb")
        assert (r.status, r.body) == (200, b"[nil, nil, nil]")
