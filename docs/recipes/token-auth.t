Recipe token-auth (token-auth.md), as mod_mruby-test runs it: the
recipe's script and snippet installed as the page says, with a tokens
file of the test's own (the recipe refuses the example tokens it ships:
one is kept here, to check that), and a handler that shows what the
request behind the check looks like.
Run it: tools/mod_mruby-test docs/recipes/token-auth.t

--- file mruby/token_auth.rb < token-auth/token_auth.rb
--- file conf/mruby-token-auth.conf < token-auth/mruby-token-auth.conf
--- file mruby/api-tokens.txt
# the test's clients
d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1 dashboard
e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2 nightly-export
# an example token of the recipe's page
9b7d5f3a1c8e6b4d2f0a9c7e5b3d1f8a6c4e2b0d9f7a5c3e1b8d6f4a2c0e9b7d example
--- file htdocs/index.html
home
--- file htdocs/reports/daily.csv
day,visits
2026-01-01,42
--- server_config
Include conf/mruby-token-auth.conf
<Location /reports/whoami>
    SetHandler mruby-native-script
    mrubyHandlerCode "r = Apache::Request.new; Apache.rputs [r.user, r.ap_auth_type].join(' ')"
</Location>

=== without a token, a challenge; elsewhere, open
--- request
GET /reports/daily.csv
--- status
401
--- response_headers
WWW-Authenticate: Bearer realm="reports"
--- request
GET /reports/daily.csv
Authorization: Basic ZGFzaGJvYXJkOng=
--- status
401
--- response_headers
WWW-Authenticate: Bearer realm="reports"
--- request
GET /index.html
--- response_body
home

=== a known token, its client's name as the user
--- request
GET /reports/daily.csv
Authorization: Bearer d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1
--- status
200
--- response_body
day,visits
2026-01-01,42
--- request
GET /reports/whoami
Authorization: bearer e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2e2
--- response_body chomp
nightly-export Bearer

=== an unknown token, refused and logged
--- request
GET /reports/daily.csv
Authorization: Bearer d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d0
--- status
401
--- response_headers
WWW-Authenticate: Bearer realm="reports", error="invalid_token"
--- error_log
\[mruby:warn\] .*MRB00400: .*invalid bearer token for /reports/daily\.csv

=== the recipe's example tokens are refused
--- request
GET /reports/whoami
Authorization: Bearer 9b7d5f3a1c8e6b4d2f0a9c7e5b3d1f8a6c4e2b0d9f7a5c3e1b8d6f4a2c0e9b7d
--- status
401
--- response_headers
WWW-Authenticate: Bearer realm="reports", error="invalid_token"
--- error_log
invalid bearer token for /reports/whoami
