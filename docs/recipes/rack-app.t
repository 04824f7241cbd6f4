Recipe rack-app (rack-app.md), as mod_mruby-test runs it: the link
shortener installed as the page says (links_app.rb in mruby/ under the
ServerRoot, its snippet, with its cache, included at server level).
Run it: tools/mod_mruby-test docs/recipes/rack-app.t

--- file mruby/links_app.rb < rack-app/links_app.rb
--- file conf/mruby-rack-app.conf < rack-app/mruby-rack-app.conf
--- server_config
Include conf/mruby-rack-app.conf

=== the form
--- request
GET /links
--- status
200
--- response_headers
Content-Type: text/html; charset=utf-8
--- response_body_contains
<form method="post" action="/links">
--- request
HEAD /links
--- status
200
--- response_body
--- request
GET /links/
--- status
200

=== a link made, then followed
--- request
POST /links
Content-Type: application/x-www-form-urlencoded

url=https%3A%2F%2Fexample.com%2Fdocs%2Fpage%3Fq%3Da%2Bb%26lang%3Den%23part
--- status
201
--- response_headers_like
Location: (?<link>/links/[A-Za-z0-9]{6})
--- response_headers
Content-Type: text/plain
--- response_body
{link}
--- request
GET {link}
--- status
302
--- response_headers
Location: https://example.com/docs/page?q=a+b&lang=en#part
--- response_body
https://example.com/docs/page?q=a+b&lang=en#part

=== what is not an http or https URL is refused
--- request
POST /links
Content-Type: application/x-www-form-urlencoded

url=javascript%3Aalert(1)
--- status
422
--- response_body
url must be an http or https URL
--- request
POST /links
Content-Type: application/x-www-form-urlencoded

url=ftp%3A%2F%2Fexample.com%2Ff
--- status
422
--- request
POST /links
Content-Type: application/x-www-form-urlencoded

url=https%3A%2F%2Fexa+mple.com%2F
--- status
422
--- request
POST /links
Content-Type: application/x-www-form-urlencoded

url=https%3A%2F%2Fexample.com%2Fa%00b
--- status
422

=== unknown links
--- request
GET /links/zzzzzz
--- status
404
--- response_body
no such link
--- request
GET /links/abcdefg
--- status
404

=== other methods
--- request
PUT /links

x
--- status
405
--- response_headers
Allow: GET, HEAD, POST
--- response_body
method not allowed

=== a form larger than the limit, refused unread
--- raw_request
POST /links HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n
Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 8193\r\n\r\n
--- status
413
--- response_body
the form is larger than 8192 bytes
