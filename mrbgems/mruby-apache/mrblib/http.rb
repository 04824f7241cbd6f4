# Apache::HTTP, an HTTP client for scripts: the responses, the calls that
# follow redirects, and the waits of a suspended script. The calls
# themselves are C (rb_http.c, on libcurl): __one makes a plain call from
# #request's arguments to its Response; __spec turns those arguments into a
# spec, and __perform and __start/__step/__finish run specs and give back,
# for each, a Response or the Apache::HTTP::Error it failed with.
class Apache
  module HTTP
    # A response's header fields; names compare without case. The fields
    # come as [name, value, name, value, ...] or as the header lines
    # received (a String); they are split, paired and indexed by lower-case
    # name when first asked for (many scripts read only the body).
    class Headers
      include Enumerable

      def initialize(fields)
        @fields = fields
        @pairs = nil
        @index = nil
      end

      # The field's value; several fields of that name joined with ", ".
      def [](name)
        values = __index[name.to_s.downcase]
        values && values.join(', ')
      end

      # Every value of the field, in order (Set-Cookie), [] if absent.
      def get_all(name)
        (__index[name.to_s.downcase] || []).dup
      end

      def key?(name)
        __index.key?(name.to_s.downcase)
      end

      # Each [name, value] as received, in order.
      def each(&block)
        __index
        @pairs.each(&block)
        self
      end

      # Lower-case names to values (joined as #[] joins them).
      def to_h
        h = {}
        __index.each { |k, v| h[k] = v.join(', ') }
        h
      end

      def __index
        return @index if @index
        pairs = []
        index = {}
        flat = @fields
        flat = HTTP.__fields(flat) if flat.is_a?(String)
        i = 0
        while i < flat.size
          name = flat[i]
          value = flat[i + 1]
          pairs << [name, value]
          (index[name.downcase] ||= []) << value
          i += 2
        end
        @pairs = pairs
        @index = index
      end
    end

    class Response
      attr_reader :status, :body

      def initialize(status, headers, body)
        @status = status
        @headers = headers
        @body = body
      end

      # A call's Response (made in C) has the header lines received
      # (@lines), made into its Headers when first read.
      def headers
        @headers || (@lines && (@headers = Headers.new(@lines)))
      end

      # 2xx.
      def ok?
        @status >= 200 && @status < 300
      end
    end

    class << self
      # Each ends in C (__one) in the common case, without a Ruby method
      # of its own between the script and the call.
      def get(url, **opts)
        r = __one('GET', url, opts)
        r.is_a?(Response) ? r : __rest(r)
      end

      def head(url, **opts)
        r = __one('HEAD', url, opts)
        r.is_a?(Response) ? r : __rest(r)
      end

      def post(url, body: '', **opts)
        opts[:body] = body
        r = __one('POST', url, opts)
        r.is_a?(Response) ? r : __rest(r)
      end

      def put(url, body: '', **opts)
        opts[:body] = body
        r = __one('PUT', url, opts)
        r.is_a?(Response) ? r : __rest(r)
      end

      def delete(url, **opts)
        r = __one('DELETE', url, opts)
        r.is_a?(Response) ? r : __rest(r)
      end

      # One call; its Response, or raises an Apache::HTTP::Error.
      def request(method, url, **opts)
        r = __one(method, url, opts)
        r.is_a?(Response) ? r : __rest(r)
      end

      # A call that __one left to finish: the spec of one that follows
      # redirects, or a call in progress where the script sleeps.
      def __rest(r)
        r = r.is_a?(Array) ? __run([r])[0] : __wait(r)[0]
        raise r if r.is_a?(Exception)
        r
      end

      # Several calls at once: each a URL (GET) or a Hash with :url and the
      # options of #request (:method too). Returns when all have ended, an
      # Array in the same order of a Response, or the Apache::HTTP::Error a
      # failed call would have raised.
      def all(calls)
        raise TypeError, 'Apache::HTTP.all takes an Array of calls' unless calls.is_a?(Array)
        return [] if calls.empty?
        specs = calls.map do |c|
          if c.is_a?(String)
            __spec('GET', c, {})
          elsif c.is_a?(Hash)
            o = c.dup
            url = o.delete(:url) or raise ArgumentError, 'Apache::HTTP.all: a call without :url'
            __spec(o.delete(:method) || 'GET', url, o)
          else
            raise TypeError, 'Apache::HTTP.all: a call is a URL or a Hash'
          end
        end
        __run(specs) # not in a block: a block called from C cannot sleep
      end

      # The statuses of a redirect that is followed (with redirects: n).
      REDIRECTS = [301, 302, 303, 307, 308]

      # Runs the calls, and follows the redirects of those that ask for them
      # (redirects: n). Each next request is made here, not by libcurl:
      # the header fields a script gave go only to the origin (scheme, host
      # and port) of the URL it gave them for. Each is a round of its own
      # (all the calls that were redirected, at once), with what is left of
      # the call's timeout.
      def __run(specs)
        # No call follows redirects (the common case): one round.
        i = 0
        i += 1 while i < specs.size && specs[i][7] == 0
        return __round(specs) if i == specs.size
        current = specs.map { |s| s.dup }
        current.each { |s| s[7] = 0 } # libcurl follows none
        left = specs.map { |s| s[7] }
        started = Time.now.to_f
        done = __round(current)
        loop do
          again = []
          done.each_with_index do |r, i|
            next unless r.is_a?(Response) && REDIRECTS.include?(r.status) && specs[i][7] > 0
            location = r.headers['location']
            next unless location
            if left[i] == 0
              done[i] = HTTP::Error.new("Apache::HTTP: more than #{specs[i][7]} redirects")
              next
            end
            nxt, failed = __redirected(specs[i], current[i], r.status, location, started)
            if failed
              done[i] = failed
            else
              current[i] = nxt
              left[i] -= 1
              again << i
            end
          end
          break if again.empty?
          more = __round(again.map { |i| current[i] })
          again.each_with_index { |i, k| done[i] = more[k] }
        end
        done
      end

      # [the next request of call (a spec) after a redirect to location,
      # nil], or [nil, the failure to give instead].
      def __redirected(first, call, status, location, started)
        url = __resolve(call[1], location)
        return [nil, HTTP::Error.new("Apache::HTTP: redirected to #{location}: not an http:// or https:// URL")] unless url
        spent = ((Time.now.to_f - started) * 1000).to_i
        return [nil, HTTP::Timeout.new("Apache::HTTP: the redirects took the call's #{first[4]} ms")] if spent >= first[4]
        nxt = call.dup
        nxt[1] = url
        nxt[4] = first[4] - spent
        # 303: GET (HEAD stays HEAD); 301 and 302 make a POST a GET, as
        # browsers do; 307 and 308 keep the method and the body.
        if (status == 303 && call[0] != 'HEAD') || ((status == 301 || status == 302) && call[0] == 'POST')
          nxt[0] = 'GET'
          nxt[3] = nil
        end
        nxt[2] = [] if __origin(url) != __origin(first[1])
        [nxt, nil]
      end

      # "scheme://host:port" of an http(s) URL (the default port said), nil
      # for anything else.
      def __origin(url)
        scheme, rest = url.split('://', 2)
        return nil unless rest
        scheme = scheme.downcase
        return nil unless scheme == 'http' || scheme == 'https'
        authority = rest
        ['/', '?', '#'].each { |c| authority = authority.split(c, 2)[0] || '' }
        authority = authority.split('@').last || ''
        if authority.start_with?('[')
          close = authority.index(']') or return nil
          host = authority[0..close]
          port = authority[close + 1..-1].to_s
          port = port[1..-1] if port.start_with?(':')
        else
          host, port = authority.split(':', 2)
        end
        return nil if host.nil? || host.empty?
        port = (scheme == 'https' ? '443' : '80') if port.nil? || port.empty?
        "#{scheme}://#{host.downcase}:#{port}"
      end

      # location (a Location field's value) made absolute against url, its
      # fragment left out; nil unless it is http(s).
      def __resolve(url, location)
        location = location.split('#', 2)[0].to_s.strip
        scheme, rest = url.split('://', 2)
        if location.index('://') && location.index('://') < (location.index('/') || location.size)
          target = location
        elsif location.start_with?('//')
          target = scheme + ':' + location
        else
          path_at = rest.index('/')
          query_at = rest.index('?')
          path_at = nil if path_at && query_at && query_at < path_at
          authority = path_at ? rest[0, path_at] : rest.split('?', 2)[0]
          path = path_at ? rest[path_at..-1].split('?', 2)[0] : '/'
          if location.start_with?('/')
            target = "#{scheme}://#{authority}#{location}"
          elsif location.start_with?('?')
            target = "#{scheme}://#{authority}#{path}#{location}"
          else
            target = "#{scheme}://#{authority}#{path[0..path.rindex('/')]}#{location}"
          end
        end
        __origin(target) ? target : nil
      end

      # In a content handler under the event MPM, the request is suspended
      # while the calls run, and the script looks at them again after
      # short sleeps (__wait); elsewhere the calls block the thread.
      def __round(specs)
        return __perform(specs) unless Apache::Async.__suspendable?
        __wait(__start(specs))
      end

      # What the calls in progress gave, once they have all ended.
      # Should the script leave the wait by an exception, the calls are
      # taken off the VM's transfers there (their connections closed),
      # rather than go on with later calls' until the collector frees them.
      def __wait(calls)
        finished = nil
        begin
          while (ms = __step(calls))
            Apache::Async.sleep(ms)
          end
          finished = __finish(calls)
        ensure
          __finish(calls) unless finished
        end
      end
    end
  end
end
