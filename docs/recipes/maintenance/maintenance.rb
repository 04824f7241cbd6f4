# maintenance.rb: the maintenance switch. `touch maintenance.on` next to
# this script turns it on, `rm maintenance.on` off; no reload needed. The
# file's first line, if any, is shown on the page ("Back at 14:00 UTC").
# Runs as a QuickHandler, before any URI mapping: one stat per request
# when off, and nothing behind it runs when on.
FLAG = File.join(File.dirname(__FILE__), "maintenance.on")
# Clients that still see the site, to check it before switching off.
ADMINS = %w[127.0.0.1 ::1]
RETRY_AFTER = 300

def html_escape(text)
  text.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;").gsub("\"", "&quot;")
end

return unless File.exist?(FLAG)
r = Apache::Request.new
if ADMINS.include?(r.connection.useragent_ip)
  r.err_headers_out["X-Maintenance"] = "on (you are let through)"
  return
end

message =
  begin
    File.open(FLAG) { |f| f.gets }
  rescue StandardError
    # Removed since File.exist? above: maintenance is over, serve the
    # site. (A flag httpd's user cannot read still means maintenance.)
    return unless File.exist?(FLAG)
  end
message = message.to_s.strip
message = "We will be back shortly." if message.empty?
r.status = Apache::HTTP_SERVICE_UNAVAILABLE
r.content_type = "text/html; charset=utf-8"
r.err_headers_out["Retry-After"] = RETRY_AFTER.to_s
r.err_headers_out["Cache-Control"] = "no-store"
Apache.rputs <<HTML
<!DOCTYPE html>
<html><head><title>Down for maintenance</title></head>
<body><h1>Down for maintenance</h1><p>#{html_escape(message)}</p></body></html>
HTML
Apache.return Apache::OK
