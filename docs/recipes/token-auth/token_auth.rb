# token_auth.rb: "Authorization: Bearer TOKEN" against api-tokens.txt (next
# to this script). A known token lets the request through as its client's
# name (r.user: the access log's %u, REMOTE_USER for CGI and backends);
# anything else gets a 401 with a WWW-Authenticate challenge.
TOKENS_FILE = File.join(File.dirname(__FILE__), "api-tokens.txt")
REALM = "reports"

# The tokens, kept in this thread's VM and read again from the file every
# REFRESH seconds: an edit (a new token, a revoked one) applies within
# that time, without a reload, and other requests touch no file.
REFRESH = 2

def tokens
  now = Time.now.to_f
  unless $api_tokens && now - $api_tokens_read_at < REFRESH
    table = {}
    File.read(TOKENS_FILE).each_line do |line|
      token, name = line.strip.split(" ", 2)
      table[token] = name.strip if name && !token.start_with?("#")
    end
    $api_tokens, $api_tokens_read_at = table, now
  end
  $api_tokens
end

def refuse(r, error = nil)
  challenge = "Bearer realm=\"#{REALM}\""
  challenge += ", error=\"#{error}\"" if error
  r.err_headers_out["WWW-Authenticate"] = challenge
  Apache.return Apache::HTTP_UNAUTHORIZED
end

r = Apache::Request.new
header = r.headers_in["Authorization"].to_s
scheme, token = header.split(" ", 2)
if scheme.to_s.downcase != "bearer" || token.to_s.strip.empty?
  refuse(r)
  return
end
# Every known token is compared with the one given, each over all of its
# bytes: the time taken does not depend on how close a wrong token came to
# a right one (a Hash lookup compares strings byte by byte, and stops at
# the first difference).
def same_secret?(a, b)
  return false unless a.bytesize == b.bytesize
  diff = 0
  a.bytesize.times { |i| diff |= a.getbyte(i) ^ b.getbyte(i) }
  diff == 0
end

given = token.strip
name = nil
tokens.each { |known, client| name = client if same_secret?(known, given) }
unless name
  r.log(Apache::APLOG_WARNING, "invalid bearer token for #{r.uri}")
  refuse(r, "invalid_token")
  return
end
r.user = name
r.ap_auth_type = "Bearer"
