# access_control.rb: refuses scanners that name themselves in User-Agent,
# everywhere, and keeps some paths to some networks. Runs as an
# AccessChecker: returning HTTP_FORBIDDEN denies the request, and an
# exception denies it too (500), so a bug never opens the door.

# Path prefixes and the networks that may reach them (CIDR, IPv4 or IPv6).
PROTECTED = {
  "/intranet/" => %w[127.0.0.1/32 10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 fd00::/8],
  "/server-status" => %w[127.0.0.1/32 ::1/128],
}

# User-Agents refused everywhere.
BLOCKED_AGENTS = /sqlmap|nikto|masscan|zgrab|nuclei/i

# An address as a list of 16-bit numbers (2 for IPv4, 8 for IPv6), or nil
# when it is not one. mruby 3.1 integers stop at 64 bits: IPv6 addresses
# do not fit in one. (httpd gives an IPv4 client that reached an IPv6
# socket as IPv4, without "::ffff:".)
IPV4 = /\A(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\z/
IPV6_GROUP = /\A[0-9a-f]{1,4}\z/i

def ip_words(text)
  if (m = IPV4.match(text))
    bytes = m.captures.map(&:to_i)
    return nil if bytes.any? { |b| b > 255 }
    return [bytes[0] << 8 | bytes[1], bytes[2] << 8 | bytes[3]]
  end
  halves = text.split("::", -1)
  return nil if halves.size > 2
  parts = halves.map { |h| h.empty? ? [] : h.split(":", -1) }
  groups = parts[0] + (parts[1] || [])
  return nil unless groups.all? { |g| g =~ IPV6_GROUP }
  missing = 8 - groups.size
  return nil if halves.size == 2 ? missing < 1 : missing != 0
  zeros = halves.size == 2 ? ["0"] * missing : []
  (parts[0] + zeros + (parts[1] || [])).map { |g| g.to_i(16) }
end

# Whether the address (ip_words) is inside the network "address/bits".
def in_network?(words, cidr)
  net_text, bits_text = cidr.split("/", 2)
  net = ip_words(net_text)
  return false unless net && words && net.size == words.size
  bits = bits_text ? bits_text.to_i : net.size * 16
  net.each_with_index do |word, i|
    left = bits - i * 16
    break if left <= 0
    shift = left >= 16 ? 0 : 16 - left
    return false unless word >> shift == words[i] >> shift
  end
  true
end

r = Apache::Request.new

agent = r.headers_in["User-Agent"]
if agent && agent =~ BLOCKED_AGENTS
  r.log(Apache::APLOG_INFO, "refused User-Agent: #{agent[0, 100]}")
  Apache.return Apache::HTTP_FORBIDDEN
  return
end

# The longest protected prefix of the path decides; "/intranet" itself is
# inside "/intranet/" (a ProxyPass or Alias of /intranet answers it).
prefix = PROTECTED.keys.select { |p| r.uri.start_with?(p) || r.uri + "/" == p }.max_by(&:size)
if prefix
  client = ip_words(r.connection.useragent_ip)
  unless PROTECTED[prefix].any? { |cidr| in_network?(client, cidr) }
    r.log(Apache::APLOG_INFO, "#{r.connection.useragent_ip} is not allowed into #{prefix}")
    Apache.return Apache::HTTP_FORBIDDEN
  end
end
