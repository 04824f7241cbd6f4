r = Apache::Request.new
r.content_type = "text/plain; charset=utf-8"
r.headers_out["X-Powered-By"] = "mod_mruby"

name = (r.args || "").split("&").map { |kv| kv.split("=", 2) }.to_h["name"] || "stranger"
Apache.echo "Hello, #{name}!"
Apache.echo ""
Apache.echo "method:     #{r.method}"
Apache.echo "uri:        #{r.uri}"
Apache.echo "args:       #{r.args.inspect}"
Apache.echo "protocol:   #{r.protocol}"
Apache.echo "user agent: #{r.headers_in.user_agent}"
Apache.echo ""
Apache.echo "request headers:"
r.headers_in.each { |k, v| Apache.echo "  #{k}: #{v}" }
