# Regexp's Ruby half (MatchData, $~, the String methods) over a stand-in
# for the C half that matches literal text only (PCRE2 is not here).

class Regexp
  def initialize(source, options = nil)
    @source = source
    @options = options.is_a?(Integer) ? options : 0
  end

  def __offsets(str, pos)
    i = str.index(@source, pos)
    i ? [i, i + @source.size] : nil
  end

  def __group_names
    []
  end

  def self.__set_last_match(m)
    $~ = m
  end
end

# The module's String#split (C) sends a Regexp to __mm_split_re.
class String
  alias __mm_split_own split

  def split(pattern = nil, *rest)
    pattern.is_a?(Regexp) ? __mm_split_re(pattern, *rest) : __mm_split_own(pattern, *rest)
  end
end

assert('Regexp#match, MatchData and $~') do
  m = Regexp.new("lo").match("hello world")
  assert_equal "lo", m[0]
  assert_equal "hel", m.pre_match
  assert_equal " world", m.post_match
  assert_equal [3, 5], m.offset(0)
  assert_equal ["lo"], m.to_a
  assert_equal [], m.captures
  assert_equal m, $~
  assert_nil Regexp.new("zz").match("hello")
  assert_nil $~
  assert_nil Regexp.new("x").match(nil)
  assert_equal 2, "hello" =~ Regexp.new("ll")
  assert_raise(IndexError) { m[:nope] }
  assert_raise(TypeError) { "a" =~ "a" }
end

assert('Regexp#===, match?, escape, inspect, to_s, ==') do
  assert_true Regexp.new("b") === "abc"
  assert_false Regexp.new("b") === 5
  assert_true Regexp.new("b").match?("abc")
  assert_equal "a\\.b\\*\\ c\\n", Regexp.escape("a.b* c\n")
  specials = "\\^$.|?*+()[]{}-/#"
  assert_equal specials.each_char.map { |c| "\\" + c }.join, Regexp.escape(specials)
  assert_equal "\\t\\r\\f\\v", Regexp.escape("\t\r\f\v")
  assert_equal "/x/i", Regexp.new("x", Regexp::IGNORECASE).inspect
  assert_equal "(?i-mx:x)", Regexp.new("x", Regexp::IGNORECASE).to_s
  assert_equal Regexp.new("x"), Regexp.new("x")
  assert_false Regexp.new("x") == Regexp.new("x", 1)
end

assert('String#sub, gsub with a Regexp: text, \\0, Hash, block') do
  re = Regexp.new("o")
  assert_equal "hellO wOrld", "hello world".gsub(re) { |s| s.upcase }
  assert_equal "hell<o> world", "hello world".sub(re, '<\0>')
  assert_equal "hell0 w0rld", "hello world".gsub(re, "o" => "0")
  assert_equal "a\\b", "aob".sub(re, "\\\\")
  assert_equal "abc", "abc".gsub(Regexp.new("z"), "y")
  # String patterns still take the original path
  assert_equal "heLLo", "hello".gsub("l", "L")
  assert_equal "heLlo", "hello".sub("l", "L")
end

assert('String#scan and #split with a Regexp') do
  assert_equal ["ab", "ab"], "xabyabz".scan(Regexp.new("ab"))
  assert_equal ["ab", "ab"], "xabyabz".scan("ab")
  seen = []
  "aXbXc".scan(Regexp.new("X")) { |s| seen << s }
  assert_equal ["X", "X"], seen
  assert_equal ["a", "b", "c"], "a, b, c".split(Regexp.new(", "))
  assert_equal ["a", "b, c"], "a, b, c".split(Regexp.new(", "), 2)
  assert_equal ["a", "b"], "a, b, , ".split(Regexp.new(", "))
  assert_equal ["a", "b"], "a b".split
  assert_equal ["a", "b"], "a,b".split(",")
end
