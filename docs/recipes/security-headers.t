Recipe security-headers (security-headers.md), as mod_mruby-test runs
it: the recipe's script in mruby/ under the ServerRoot, its snippet
included at server level, a few pages. "response_headers" is exact: a
header sent twice would not match.
Run it: tools/mod_mruby-test docs/recipes/security-headers.t

--- file mruby/security_headers.rb < security-headers/security_headers.rb
--- file conf/mruby-security-headers.conf < security-headers/mruby-security-headers.conf
--- file htdocs/index.html
home
--- file htdocs/embed/index.html
a widget
--- file htdocs/api-docs/index.html
<script>inline()</script>
--- server_config
Include conf/mruby-security-headers.conf
DirectoryIndex index.html
<Location /private>
    Require all denied
</Location>

=== the policy on pages, error pages, redirects and refusals
--- request
GET /
--- status
200
--- response_body
home
--- response_headers
Strict-Transport-Security: max-age=86400
X-Content-Type-Options: nosniff
X-Frame-Options: DENY
Referrer-Policy: strict-origin-when-cross-origin
Permissions-Policy: camera=(), microphone=(), geolocation=()
Content-Security-Policy: default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'
--- request
GET /no/such/page
--- status
404
--- response_headers
X-Frame-Options: DENY
Content-Security-Policy: default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'
X-Content-Type-Options: nosniff
--- request
GET /embed
--- status
301
--- response_headers_like
Location: http://[^/]+/embed/
--- response_headers
X-Frame-Options: DENY
Strict-Transport-Security: max-age=86400
--- request
GET /private/x
--- status
403
--- response_headers
X-Frame-Options: DENY
Referrer-Policy: strict-origin-when-cross-origin

=== pages other sites may frame
--- request
GET /embed/
--- status
200
--- response_body
a widget
--- response_headers
X-Frame-Options: SAMEORIGIN
Content-Security-Policy: default-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'
X-Content-Type-Options: nosniff

=== API documentation without a Content-Security-Policy
--- request
GET /api-docs/
--- status
200
--- response_headers
!Content-Security-Policy
X-Frame-Options: DENY
--- request
GET /%61pi-docs/
--- status
200
--- response_headers
!Content-Security-Policy

=== a site served over plain http too
--- request
GET /
Host: downloads.example.com
--- status
200
--- response_headers
!Strict-Transport-Security
X-Frame-Options: DENY
