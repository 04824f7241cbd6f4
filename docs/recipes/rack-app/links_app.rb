# links_app.rb: a link shortener written as a Rack application (call(env)
# returning [status, headers, body]), the way it would be for any Rack
# server. GET /links shows a form; POST /links with url=... makes a short
# link /links/CODE, which redirects there. Links live in the "links"
# Apache::Cache: every process and thread sees them; a restart of httpd
# forgets them (use a memcache or redis cache to keep them).
# Anyone may make links, within bounds: LINKS_PER_CLIENT an hour from one
# address (429 past it), LINKS_PER_DAY from all of them together (507),
# each kept LINK_DAYS days, so that at most LINKS_PER_DAY * LINK_DAYS
# links are stored at once; a form of more than MAX_BODY bytes is refused
# unread (413).
class LinkShortener
  ALPHABET = [*"a".."z", *"A".."Z", *"0".."9"]
  CODE = /\A\/links\/([a-zA-Z0-9]{6})\z/
  MAX_URL = 2000
  # A form with a URL of MAX_URL bytes, every one of them escaped (%XX).
  MAX_BODY = 8192
  LINKS_PER_CLIENT = 20
  LINKS_PER_DAY = 500
  LINK_DAYS = 30
  HOUR = 3600
  DAY = 86400

  def initialize(store)
    @store = store
  end

  def call(env)
    method, path = env["REQUEST_METHOD"], env["PATH_INFO"]
    if path == "/links" || path == "/links/"
      return form if method == "GET" || method == "HEAD"
      return shorten(env) if method == "POST"
      return [405, { "Allow" => "GET, HEAD, POST", "Content-Type" => "text/plain" }, ["method not allowed\n"]]
    end
    m = CODE.match(path)
    target = m && @store[m[1]]
    return [404, { "Content-Type" => "text/plain" }, ["no such link\n"]] unless target
    [302, { "Location" => target, "Content-Type" => "text/plain" }, ["#{target}\n"]]
  end

  private

  def shorten(env)
    # A body without a length (chunked) is read no further than the limit.
    body = env["CONTENT_LENGTH"].to_i > MAX_BODY ? nil : env["rack.input"].read(MAX_BODY + 1).to_s
    if body.nil? || body.size > MAX_BODY
      return [413, { "Content-Type" => "text/plain" }, ["the form is larger than #{MAX_BODY} bytes\n"]]
    end
    url = form_fields(body)["url"].to_s.strip
    # No spaces nor control characters: the link's Location header could
    # not carry them (following the link would fail with a 500).
    unless url.size <= MAX_URL && url =~ /\Ahttps?:\/\/[^[:space:][:cntrl:]\/]+[^[:space:][:cntrl:]]*\z/i
      return [422, { "Content-Type" => "text/plain" }, ["url must be an http or https URL\n"]]
    end
    now = Time.now.to_i
    # Counted in fixed windows, as in the rate-limit recipe: one counter
    # per address and hour, one per day; the keys have a ":", which codes
    # have not.
    if @store.incr("made:#{env["REMOTE_ADDR"]}:#{now / HOUR}", ttl: HOUR) > LINKS_PER_CLIENT
      return [429, { "Retry-After" => (HOUR - now % HOUR).to_s, "Content-Type" => "text/plain" },
              ["no more than #{LINKS_PER_CLIENT} links an hour from one address\n"]]
    end
    today = "made:#{now / DAY}"
    code = nil
    # Locked, so that two requests never take the same code, nor the last
    # link of the day.
    @store.synchronize("new-code") do
      next if @store[today].to_i >= LINKS_PER_DAY
      code = random_code while code.nil? || @store[code]
      @store.set(code, url, ttl: LINK_DAYS * DAY)
      @store.incr(today, ttl: DAY)
    end
    unless code
      return [507, { "Retry-After" => (DAY - now % DAY).to_s, "Content-Type" => "text/plain" },
              ["no more links today\n"]]
    end
    link = "/links/#{code}"
    [201, { "Location" => link, "Content-Type" => "text/plain" }, ["#{link}\n"]]
  end

  # From the kernel's generator: rand is not for secrets (a small generator
  # whose next numbers follow from the codes it gave), and codes others can
  # guess would let them list the links.
  # Bytes of 248 and more are skipped: 248 = 4 * 62 keeps every letter
  # equally likely.
  def random_code
    code = ""
    File.open("/dev/urandom", "rb") do |f|
      f.read(16).each_byte { |b| code << ALPHABET[b % 62] if b < 248 } while code.size < 6
    end
    code[0, 6]
  end

  # application/x-www-form-urlencoded, as browsers send forms.
  def form_fields(body)
    body.split("&").map do |pair|
      name, value = pair.split("=", 2).map do |part|
        part.tr("+", " ").gsub(/%[0-9a-fA-F]{2}/) { |hex| hex[1, 2].to_i(16).chr }
      end
      [name, value.to_s]
    end.to_h
  end

  def form
    page = <<HTML
<!DOCTYPE html>
<html><head><title>Links</title></head><body>
<form method="post" action="/links"><input name="url" size="60"> <button>Shorten</button></form>
</body></html>
HTML
    [200, { "Content-Type" => "text/html; charset=utf-8" }, [page]]
  end
end

run LinkShortener.new(Apache::Cache.named(:links))
