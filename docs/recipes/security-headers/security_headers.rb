# security_headers.rb: the response header policy, in one place. Sets
# err_headers_out, which httpd sends with every response: pages, error
# pages and redirects alike. Runs in PostReadRequest and again in Fixups
# (see mruby-security-headers.conf): setting a header replaces it, so
# twice is harmless.

POLICY = {
  # HTTPS only, for a day, for this host only: a browser that saw it keeps
  # to HTTPS for max-age seconds whatever the server says next. Raise it,
  # and add includeSubDomains, only once every host is ready (see the page).
  "Strict-Transport-Security" => "max-age=86400",
  "X-Content-Type-Options" => "nosniff",
  "X-Frame-Options" => "DENY",
  "Referrer-Policy" => "strict-origin-when-cross-origin",
  "Permissions-Policy" => "camera=(), microphone=(), geolocation=()",
  "Content-Security-Policy" => "default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'",
}

# Where the policy differs: [path prefix, headers to change (nil: drop)].
EXCEPTIONS = [
  # Pages other sites of ours may show in a frame.
  ["/embed/", {
    "X-Frame-Options" => "SAMEORIGIN",
    "Content-Security-Policy" => "default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'",
  }],
  # Generated API documentation that loads its own inline scripts.
  ["/api-docs/", { "Content-Security-Policy" => nil }],
]

# Where a whole site differs: {host name, in lower case => headers to change}.
HOSTS = {
  # Also served over plain http, for clients that cannot do TLS (apt's
  # mirrors, firmware updaters): a browser that saw HTTPS there must not
  # be kept to it.
  "downloads.example.com" => { "Strict-Transport-Security" => nil },
}

r = Apache::Request.new
# Subrequests (mod_dir, mod_include, ...) do not make the response.
return if r.sub_request?

headers = POLICY.dup
site = HOSTS[r.hostname.to_s]
headers.merge!(site) if site
EXCEPTIONS.each do |prefix, changes|
  headers.merge!(changes) if r.uri.start_with?(prefix)
end
out = r.err_headers_out
headers.each do |name, value|
  # Browsers ignore Strict-Transport-Security over plain http: it is sent
  # anyway, so the same policy holds behind a TLS-terminating proxy.
  # A dropped header is removed, not only left unset: PostReadRequest saw
  # the path as the client spelt it ("/%61pi-docs/"), which may have
  # missed the exception that Fixups, with the decoded path, applies.
  if value.nil?
    out.delete(name)
  else
    out[name] = value
  end
end
