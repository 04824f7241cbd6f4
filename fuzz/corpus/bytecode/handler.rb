r = Apache::Request.new
name = (r.args || "").split("&").map { |kv| kv.split("=", 2) }.to_h["name"] || "world"
r.headers_out["X-Name"] = name
Apache.rputs "hello #{name}!\n" if name.size < 64
