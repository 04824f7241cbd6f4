# Apache::HTTP, an HTTP client for scripts: the options, the responses and
# the exceptions. The calls themselves are C (rb_http.c, on libcurl):
# __perform takes specs and gives back, for each, [status, headers, body]
# or [error class name, message].
class Apache
  module HTTP
    # A response's header fields; names compare without case.
    class Headers
      include Enumerable

      def initialize(flat)
        @pairs = []
        @index = {}
        i = 0
        while i < flat.size
          name = flat[i]
          value = flat[i + 1]
          @pairs << [name, value]
          (@index[name.downcase] ||= []) << value
          i += 2
        end
      end

      # The field's value; several fields of that name joined with ", ".
      def [](name)
        values = @index[name.to_s.downcase]
        values && values.join(', ')
      end

      # Every value of the field, in order (Set-Cookie), [] if absent.
      def get_all(name)
        (@index[name.to_s.downcase] || []).dup
      end

      def key?(name)
        @index.key?(name.to_s.downcase)
      end

      # Each [name, value] as received, in order.
      def each(&block)
        @pairs.each(&block)
        self
      end

      # Lower-case names to values (joined as #[] joins them).
      def to_h
        h = {}
        @index.each { |k, v| h[k] = v.join(', ') }
        h
      end
    end

    class Response
      attr_reader :status, :headers, :body

      def initialize(status, headers, body)
        @status = status
        @headers = headers
        @body = body
      end

      # 2xx.
      def ok?
        @status >= 200 && @status < 300
      end
    end

    class << self
      # The defaults, in the singleton class (not constants of the API).
      TIMEOUT = 10_000        # ms, the whole call
      CONNECT_TIMEOUT = 5_000 # ms: name resolution, connection, TLS handshake
      MAX_SIZE = 8 * 1024 * 1024
      OPTIONS = [:headers, :body, :timeout, :connect_timeout, :max_size, :redirects, :ca_file]

      def get(url, **opts)
        request('GET', url, **opts)
      end

      def head(url, **opts)
        request('HEAD', url, **opts)
      end

      def post(url, body: '', **opts)
        request('POST', url, body: body, **opts)
      end

      def put(url, body: '', **opts)
        request('PUT', url, body: body, **opts)
      end

      def delete(url, **opts)
        request('DELETE', url, **opts)
      end

      # One call; its Response, or raises an Apache::HTTP::Error.
      def request(method, url, **opts)
        r = __result(__run([__spec(method, url, opts)])[0])
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
        done = __run(specs) # not in a block: a block called from C cannot sleep
        done.map { |r| __result(r) }
      end

      # In a content handler under the event MPM, the request is suspended
      # while the calls run, and the script looks at them again after
      # short sleeps; elsewhere the calls block the thread.
      def __run(specs)
        return __perform(specs) unless Apache::Async.__suspendable?
        calls = __start(specs)
        while (ms = __step(calls))
          Apache::Async.sleep(ms)
        end
        __finish(calls)
      end

      def __spec(method, url, opts)
        opts.each_key do |k|
          raise ArgumentError, "Apache::HTTP: unknown option #{k.inspect}" unless OPTIONS.include?(k)
        end
        flat = []
        (opts[:headers] || {}).each do |k, v|
          flat << k.to_s << v.to_s
        end
        [method.to_s.upcase, url, flat, opts[:body],
         opts[:timeout] || TIMEOUT,
         opts[:connect_timeout] || CONNECT_TIMEOUT,
         opts[:max_size] || MAX_SIZE,
         opts[:redirects] || 0,
         opts[:ca_file]]
      end

      def __result(r)
        if r[0].is_a?(String)
          HTTP.const_get(r[0]).new(r[1])
        else
          Response.new(r[0], Headers.new(r[1]), r[2])
        end
      end
    end
  end
end
