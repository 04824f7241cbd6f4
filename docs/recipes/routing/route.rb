# route.rb: which backend serves a request, decided from its host name and
# path in TranslateName, before httpd maps the URI to a file. A request no
# route takes is left to httpd (DocumentRoot, Alias, ...).

# [host (nil: any), path prefix, balancer, what replaces the prefix]
# The first route that matches wins: put specific ones first.
ROUTES = [
  ["api.example.com", "/", "balancer://app", "/api/"],
  [nil, "/app/", "balancer://app", "/"],
  [nil, "/search/", "balancer://search", "/search/"],
]

r = Apache::Request.new
host = r.hostname.to_s.downcase
route = ROUTES.find do |route_host, prefix, _, _|
  (route_host.nil? || route_host == host) && r.uri.start_with?(prefix)
end
return unless route

_, prefix, balancer, replacement = route
# The application can build its links with the prefix the client used.
# The header is ours alone: one the client sent is dropped on every route,
# or it would choose the prefix of the application's links.
r.headers_in.delete("X-Forwarded-Prefix")
mounted = prefix.chomp("/")
r.headers_in["X-Forwarded-Prefix"] = mounted if prefix != replacement && !mounted.empty?
# mod_proxy adds the query string (r.args) and X-Forwarded-For/-Host.
r.reverse_proxy(balancer + replacement + r.uri[prefix.size..-1])
