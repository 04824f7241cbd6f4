# Regexp's Ruby half (the C half, rb_regexp.c, compiles and matches with
# PCRE2, from a position with the whole string as context): MatchData, $~
# and $1..$9, and the String methods that take a Regexp (=~, match, match?,
# sub, gsub, scan, split).
class Regexp
  IGNORECASE = 1
  EXTENDED = 2
  MULTILINE = 4

  def self.compile(*args)
    new(*args)
  end

  def self.escape(str)
    special = "\\^$.|?*+()[]{}-/#"
    out = ""
    str.to_s.each_char do |c|
      out << case c
             when "\n" then "\\n"
             when "\t" then "\\t"
             when "\r" then "\\r"
             when "\f" then "\\f"
             when "\v" then "\\v"
             when " " then "\\ "
             else special.include?(c) ? "\\" + c : c
             end
    end
    out
  end

  def self.quote(str)
    escape(str)
  end

  def self.last_match(n = nil)
    n.nil? || $~.nil? ? $~ : $~[n]
  end

  def source
    @source
  end

  def options
    @options
  end

  def casefold?
    (@options & IGNORECASE) != 0
  end

  def names
    __group_names.compact.uniq
  end

  def match(str, pos = 0)
    m = nil
    unless str.nil?
      str = str.to_s
      off = __offsets(str, pos)
      m = MatchData.new(self, str, off) if off
    end
    Regexp.__set_last_match(m)
    block_given? && m ? yield(m) : m
  end

  def match?(str, pos = 0)
    !str.nil? && !__offsets(str.to_s, pos).nil?
  end

  def =~(str)
    m = match(str)
    m && m.begin(0)
  end

  # case/when: sets $~ and $1.. as a match does
  def ===(obj)
    (obj.is_a?(String) || obj.is_a?(Symbol)) && !match(obj).nil?
  end

  def ==(other)
    other.is_a?(Regexp) && source == other.source && options == other.options
  end
  alias eql? ==

  def hash
    [@source, @options].hash
  end

  def inspect
    flags = ""
    flags << "m" if (@options & MULTILINE) != 0
    flags << "i" if casefold?
    flags << "x" if (@options & EXTENDED) != 0
    "/#{@source}/#{flags}"
  end

  def to_s
    on = ""
    off = ""
    [[MULTILINE, "m"], [IGNORECASE, "i"], [EXTENDED, "x"]].each do |bit, f|
      (@options & bit) != 0 ? on << f : off << f
    end
    "(?#{on}#{off.empty? ? '' : '-' + off}:#{@source})"
  end
end

class MatchData
  attr_reader :regexp, :string

  def initialize(regexp, string, offsets)
    @regexp = regexp
    @string = string
    @offsets = offsets
  end

  def size
    @offsets.size / 2
  end
  alias length size

  def begin(n)
    b = @offsets[__index_of(n) * 2]
    b < 0 ? nil : b
  end

  def end(n)
    e = @offsets[__index_of(n) * 2 + 1]
    e < 0 ? nil : e
  end

  def offset(n)
    [self.begin(n), self.end(n)]
  end

  def [](n, len = nil)
    return to_a[n, len] if len
    return nil if n.is_a?(Integer) && (n >= size || n < -size)
    i = __index_of(n.is_a?(Integer) && n < 0 ? n + size : n)
    b = @offsets[i * 2]
    b < 0 ? nil : @string[b, @offsets[i * 2 + 1] - b]
  end

  def to_a
    (0...size).map { |i| self[i] }
  end

  def captures
    to_a[1, size - 1]
  end

  def names
    @regexp.names
  end

  def named_captures
    h = {}
    names.each { |name| h[name] = self[name] }
    h
  end

  def values_at(*idx)
    idx.map { |i| self[i] }
  end

  def pre_match
    @string[0, @offsets[0]]
  end

  def post_match
    @string[@offsets[1], @string.size - @offsets[1]]
  end

  def to_s
    self[0]
  end

  def inspect
    "#<MatchData #{self[0].inspect}>"
  end

  private

  def __index_of(n)
    return n if n.is_a?(Integer) && n >= 0 && n < size
    if n.is_a?(String) || n.is_a?(Symbol)
      i = @regexp.__group_names.index(n.to_s)
      return i if i
      raise IndexError, "undefined group name reference: #{n}"
    end
    raise IndexError, "index #{n} out of matches"
  end
end

class String
  alias __mm_sub sub
  alias __mm_gsub gsub

  def =~(re)
    raise TypeError, "wrong argument type String (expected Regexp)" if re.is_a?(String)
    re =~ self
  end

  def match(re, pos = 0, &block)
    re = Regexp.new(Regexp.escape(re)) if re.is_a?(String)
    re.match(self, pos, &block)
  end

  def match?(re, pos = 0)
    re = Regexp.new(Regexp.escape(re)) if re.is_a?(String)
    re.match?(self, pos)
  end

  # "\\0".."\\9" and "\\k<name>" in a replacement refer to the match.
  def self.__mm_expand(repl, m)
    out = ""
    i = 0
    while i < repl.size
      c = repl[i]
      if c == "\\" && i + 1 < repl.size
        d = repl[i + 1]
        if d >= "0" && d <= "9"
          out << m[d.to_i].to_s
          i += 2
          next
        elsif d == "k" && repl[i + 2] == "<" && (close = repl.index(">", i + 3))
          out << m[repl[i + 3, close - i - 3]].to_s
          i = close + 1
          next
        elsif d == "\\"
          out << "\\"
          i += 2
          next
        end
      end
      out << c
      i += 1
    end
    out
  end

  def __mm_replace(re, args, block, once)
    raise ArgumentError, "wrong number of arguments" if args.size > 1 || (args.empty? && !block)
    out = ""
    pos = 0
    last = 0
    while pos <= size && (m = re.match(self, pos))
      b = m.begin(0)
      e = m.end(0)
      out << self[last, b - last]
      if args.empty?
        out << block.call(m[0]).to_s
      elsif args[0].is_a?(Hash)
        out << args[0][m[0]].to_s
      else
        out << String.__mm_expand(args[0].to_s, m)
      end
      last = e
      pos = e == b ? e + 1 : e
      out << self[b, 1].to_s if e == b && b < size
      last = pos if e == b
      break if once
    end
    out << self[last, size - last].to_s if last <= size
    out
  end

  def sub(pattern, *args, &block)
    return __mm_sub(pattern, *args, &block) unless pattern.is_a?(Regexp)
    __mm_replace(pattern, args, block, true)
  end

  def gsub(pattern, *args, &block)
    return __mm_gsub(pattern, *args, &block) unless pattern.is_a?(Regexp)
    __mm_replace(pattern, args, block, false)
  end

  def scan(pattern)
    re = pattern.is_a?(Regexp) ? pattern : Regexp.new(Regexp.escape(pattern.to_s))
    found = []
    pos = 0
    while pos <= size && (m = re.match(self, pos))
      item = m.size > 1 ? m.captures : m[0]
      block_given? ? yield(item) : found << item
      pos = m.end(0) == m.begin(0) ? m.end(0) + 1 : m.end(0)
    end
    block_given? ? self : found
  end

  # String#split with a Regexp: the module's String#split (rb_regexp.c, in
  # C) calls this for a Regexp and mruby's own method for anything else.
  def __mm_split_re(pattern, limit = 0)
    parts = []
    pos = 0
    start = 0
    while (limit <= 0 || parts.size < limit - 1) && pos < size && (m = pattern.match(self, pos))
      if m.end(0) == m.begin(0)
        pos = m.end(0) + 1
        next if m.begin(0) == 0 || m.begin(0) >= size
        parts << self[start, m.begin(0) - start]
        start = m.begin(0)
        next
      end
      parts << self[start, m.begin(0) - start]
      m.captures.each { |c| parts << c if c }
      start = pos = m.end(0)
    end
    parts << self[start, size - start]
    parts.pop while limit == 0 && !parts.empty? && parts[-1].empty?
    parts
  end
end
