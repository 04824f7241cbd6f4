class Apache
  # Small parsers and checks of HTTP text shared by the multipart parser and
  # the cookie helpers. Byte-oriented, no Regexp (mruby has none).
  module HTTPText
    TOKEN_EXTRA = "!#$%&'*+-.^_`|~"

    def self.token?(s)
      return false unless s.is_a?(String) && !s.empty?
      s.each_byte do |b|
        next if (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122)
        return false unless TOKEN_EXTRA.include?(b.chr)
      end
      true
    end

    # No control characters (CR, LF, NUL, ...) and no ';'.
    def self.attr_value?(s)
      s.each_byte { |b| return false if b < 32 || b == 127 || b == 59 }
      true
    end

    # Parameters of a header value: 'form-data; name="a"; filename="b"' ->
    # {"name" => "a", "filename" => "b"} (names downcased, quoted strings
    # unquoted; the first of a repeated name wins). In a quoted string a
    # backslash escapes only a quote or another backslash: browsers send
    # names and file names with their backslashes as they are (a Windows
    # path C:\dir\f.txt), and those must arrive whole.
    def self.params(value)
      out = {}
      i = value.index(";")
      return out unless i
      n = value.size
      while i && i < n
        i += 1
        i += 1 while i < n && (value[i] == " " || value[i] == "\t")
        eq = value.index("=", i)
        semi = value.index(";", i)
        if eq.nil? || (semi && semi < eq)
          i = semi
          next
        end
        name = value[i, eq - i].strip.downcase
        i = eq + 1
        if value[i] == '"'
          v = ""
          i += 1
          while i < n && value[i] != '"'
            i += 1 if value[i] == "\\" && (value[i + 1] == '"' || value[i + 1] == "\\")
            v << value[i]
            i += 1
          end
          i = value.index(";", i)
        else
          semi = value.index(";", i)
          v = value[i, (semi || n) - i].strip
          i = semi
        end
        out[name] = v unless name.empty? || out.key?(name)
      end
      out
    end
  end
end
