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

# The two tokens of api-tokens.txt as the recipe ships it. Anyone can read
# them on the recipe's page: they are refused, and said so in the log.
EXAMPLE_TOKENS = %w[
  3f1c9a7e5b2d48c6a0e4f7b19d3c5e8a2b6f0d4c8e1a7b3d5f9c2e6a0b4d8f1c
  9b7d5f3a1c8e6b4d2f0a9c7e5b3d1f8a6c4e2b0d9f7a5c3e1b8d6f4a2c0e9b7d
]

# The "TOKEN NAME" lines of the file as {token => name}, the examples left
# out.
def parse_tokens(r, text)
  table = {}
  number = 0
  text.each_line do |line|
    number += 1
    token, name = line.strip.split(" ", 2)
    next unless name && !token.start_with?("#")
    if EXAMPLE_TOKENS.include?(token)
      r.log(Apache::APLOG_WARNING, "#{TOKENS_FILE}:#{number}: the recipe's example token " +
                                   "(#{name.strip}) is refused: replace it (openssl rand -hex 32)")
    else
      table[token] = name.strip
    end
  end
  table
end

# The table of tokens. A file rewritten in place (emptied, then written) can
# be read empty or cut short, and a file replaced by removing the old one
# first can be missing for a moment: then the tokens read before stay in
# use, with a line in the log, until a read finds the file whole. Only a
# thread that has read no token yet has nothing to keep: for it, a missing
# or unreadable file raises (the request is denied with a 500) and an empty
# one lets no client in. A file with text but no token (comments only) is
# taken as written: every client is refused.
def tokens(r)
  now = Time.now.to_f
  return $api_tokens if $api_tokens && now - $api_tokens_read_at < REFRESH
  known = $api_tokens && !$api_tokens.empty?
  begin
    text = File.read(TOKENS_FILE)
    # Longer or shorter than what was read: it is being written.
    whole = File.size(TOKENS_FILE) == text.bytesize
  rescue StandardError => e
    raise unless known
    $api_tokens_read_at = now
    r.log(Apache::APLOG_ERR, "#{TOKENS_FILE} cannot be read (#{e.message}): " +
                             "keeping the #{$api_tokens.size} token(s) read before")
    return $api_tokens
  end
  $api_tokens_read_at = now
  return $api_tokens if text == $api_tokens_text
  if known && (text.strip.empty? || !whole)
    r.log(Apache::APLOG_WARNING, "#{TOKENS_FILE} is empty or being written: keeping the " +
                                 "#{$api_tokens.size} token(s) read before")
    return $api_tokens
  end
  table = parse_tokens(r, text)
  r.log(Apache::APLOG_WARNING, "#{TOKENS_FILE} has no token: every client is refused") if table.empty?
  $api_tokens, $api_tokens_text = table, text
  table
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
# Every known token is compared with the one given by
# OpenSSL.secure_compare, whose time does not depend on how close a wrong
# token came to a right one (a Hash lookup compares strings byte by byte,
# and stops at the first difference).
given = token.strip
name = nil
tokens(r).each { |known, client| name = client if OpenSSL.secure_compare(known, given) }
unless name
  r.log(Apache::APLOG_WARNING, "invalid bearer token for #{r.uri}")
  refuse(r, "invalid_token")
  return
end
r.user = name
r.ap_auth_type = "Bearer"
