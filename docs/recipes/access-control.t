Recipe access-control (access-control.md), as mod_mruby-test runs it:
the recipe's files installed as the page says (its script in mruby/
under the ServerRoot, its snippet included at server level), a
document tree to protect, and mod_remoteip in front so that a request
can come from any address (X-Client-IP), as behind a load balancer.
Run it: tools/mod_mruby-test docs/recipes/access-control.t

--- modules
remoteip
--- file mruby/access_control.rb < access-control/access_control.rb
--- file conf/mruby-access-control.conf < access-control/mruby-access-control.conf
--- file htdocs/index.html
home
--- file htdocs/intranet/page.txt
internal page
--- server_config
Include conf/mruby-access-control.conf
RemoteIPHeader X-Client-IP
RemoteIPInternalProxy 127.0.0.1

=== open paths are open to everyone
--- request
GET /
--- status
200
--- response_body
home
--- request
GET /
X-Client-IP: 8.8.8.8
--- status
200
--- response_body
home

=== the intranet from its networks (IPv4 and IPv6)
--- request
GET /intranet/page.txt
--- status
200
--- response_body
internal page
--- request
GET /intranet/page.txt
X-Client-IP: 10.20.30.40
--- status
200
--- request
GET /intranet/page.txt
X-Client-IP: 172.31.255.255
--- status
200
--- request
GET /intranet/page.txt
X-Client-IP: 192.168.200.7
--- status
200
--- request
GET /intranet/page.txt
X-Client-IP: fd12:3456:789a:1::42
--- status
200

=== the intranet from elsewhere is refused, and logged
--- config
LogLevel warn mruby:info
--- request
GET /intranet/page.txt
X-Client-IP: 172.32.0.1
--- status
403
--- response_body_contains
Forbidden
--- request
GET /intranet/page.txt
X-Client-IP: 2001:db8::1
--- status
403
--- request
GET /intranet
X-Client-IP: 8.8.8.8
--- status
403
--- error_log
MRB00400: .*access_control\.rb:\d+: 172\.32\.0\.1 is not allowed into /intranet/
MRB00400: .*access_control\.rb:\d+: 2001:db8::1 is not allowed into /intranet/
MRB00400: .*access_control\.rb:\d+: 8\.8\.8\.8 is not allowed into /intranet/
--- no_error_log
\[(error|crit|alert|emerg)\]

=== server-status is for the local host only
--- request
GET /server-status
X-Client-IP: 10.0.0.1
--- status
403

=== scanners are refused everywhere, by User-Agent
--- config
LogLevel warn mruby:info
--- request
GET /
User-Agent: sqlmap/1.7.2#stable (https://sqlmap.org)
--- status
403
--- request
GET /intranet/page.txt
User-Agent: Mozilla/5.00 (Nikto/2.1.6)
--- status
403
--- request
GET /
User-Agent: masscan/1.3
--- status
403
--- error_log
MRB00400: .*refused User-Agent: sqlmap/1\.7\.2
MRB00400: .*refused User-Agent: Mozilla/5\.00 \(Nikto/2\.1\.6\)
