class Apache
  # Cookie headers (RFC 6265): parsing Cookie, building Set-Cookie.
  module Cookie
    DAYS = %w[Sun Mon Tue Wed Thu Fri Sat].freeze
    MONTHS = %w[Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec].freeze
    SAMESITE = %w[Strict Lax None].freeze

    # "a=1; b=2" -> {"a" => "1", "b" => "2"}; the first of a repeated name.
    # httpd joins repeated Cookie headers with ", " (a cookie value holds no
    # comma), so both separate pairs.
    def self.parse(header)
      out = {}
      header.to_s.split(";").map { |part| part.split(",") }.flatten.each do |pair|
        name, value = pair.split("=", 2)
        name = name.to_s.strip
        next if name.empty? || value.nil? || out.key?(name)
        value = value.strip
        value = value[1, value.size - 2] if value.size >= 2 && value[0] == '"' && value[-1] == '"'
        out[name] = value
      end
      out
    end

    # A cookie value may hold visible ASCII except '"', ',', ';' and '\\';
    # encode anything else (e.g. percent-encoding) before setting it.
    def self.value?(v)
      v.each_byte do |b|
        return false if b < 0x21 || b > 0x7e || b == 0x22 || b == 0x2c || b == 0x3b || b == 0x5c
      end
      true
    end

    def self.httpdate(t)
      t = t.getutc
      format("%s, %02d %s %04d %02d:%02d:%02d GMT", DAYS[t.wday], t.day, MONTHS[t.month - 1], t.year,
             t.hour, t.min, t.sec)
    end

    def self.build(name, value, attrs = {})
      name = name.to_s
      value = value.to_s
      raise ArgumentError, "cookie name #{name.inspect} is not a token" unless HTTPText.token?(name)
      raise ArgumentError, "cookie value for #{name} has characters a cookie cannot hold" unless value?(value)
      attrs ||= {}
      raise ArgumentError, "cookie attributes must be a Hash, not #{attrs.class}" unless attrs.is_a?(Hash)
      out = "#{name}=#{value}"
      attrs.each do |key, v|
        k = key.to_s.downcase.tr("-", "_")
        case k
        when "path", "domain"
          v = v.to_s
          raise ArgumentError, "cookie #{k} #{v.inspect} is not allowed" if v.empty? || !HTTPText.attr_value?(v)
          out << "; #{k == 'path' ? 'Path' : 'Domain'}=#{v}"
        when "expires"
          v = v.is_a?(Time) ? httpdate(v) : v.to_s
          raise ArgumentError, "cookie expires #{v.inspect} is not allowed" unless HTTPText.attr_value?(v)
          out << "; Expires=#{v}"
        when "max_age"
          raise ArgumentError, "cookie max_age must be an Integer" unless v.is_a?(Integer)
          out << "; Max-Age=#{v}"
        when "secure"
          out << "; Secure" if v
        when "httponly", "http_only"
          out << "; HttpOnly" if v
        when "samesite", "same_site"
          s = v.to_s.capitalize
          raise ArgumentError, "cookie samesite must be Strict, Lax or None" unless SAMESITE.include?(s)
          out << "; SameSite=#{s}"
        else
          raise ArgumentError, "unknown cookie attribute #{key.inspect}"
        end
      end
      out
    end
  end
end
