# canary.rb: sends CANARY_PERCENT of the users to the new release of the
# shop and the others to the stable one. The release a user got is kept in
# a cookie, so each user stays on one release; ?release=canary (or
# stable) switches, for testers: clients whose address is in TESTERS.
# Others' ?release= is ignored, so that a link passed around does not
# choose the release of everyone who follows it.
CANARY_PERCENT = 10
COOKIE = "shop_release"
RELEASES = %w[stable canary]
TESTERS = %w[127.0.0.1 ::1]

r = Apache::Request.new
current = r.cookies[COOKIE]
asked = r.query_params["release"] if TESTERS.include?(r.connection.useragent_ip)
release =
  if RELEASES.include?(asked) then asked
  elsif RELEASES.include?(current) then current
  else rand(100) < CANARY_PERCENT ? "canary" : "stable"
  end
if release != current
  r.set_cookie(COOKIE, release, path: "/shop", max_age: 30 * 86400, httponly: true, samesite: "Lax")
end
# Caches must not give one user's release to another.
r.err_headers_out["Vary"] = "Cookie"
# For the access log: LogFormat "... %{release}n".
r.notes["release"] = release
r.reverse_proxy("balancer://shop-#{release}#{r.uri}")
