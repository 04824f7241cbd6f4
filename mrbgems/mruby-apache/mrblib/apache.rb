class Apache
  # Apache.echo(obj): obj.to_s and a newline.
  def self.echo(obj)
    rputs("#{obj}\n")
  end

  # Apache.redirect(url, status = 302): answers with a redirect to url (a
  # Location header and the status as the phase's result).
  def self.redirect(url, status = nil)
    raise TypeError, "Apache.redirect: the URL must be a String" unless url.is_a?(String)
    raise ArgumentError, "Apache.redirect: empty URL" if url.empty?
    status ||= HTTP_MOVED_TEMPORARILY
    raise ArgumentError, "Apache.redirect: #{status.inspect} is not a 3xx status" unless status.is_a?(Integer) && status >= 300 && status <= 399
    Request.new.headers_out["Location"] = url
    self.return(status)
  end

  # An exception that gives the request an HTTP status (400..599) when the
  # script does not rescue it: raise Apache::HTTPError.new(404, "no such item").
  class HTTPError
    attr_reader :status

    def initialize(status = 500, message = nil)
      # `raise Apache::HTTPError, "text"` passes the text alone: the message,
      # with the default status ("404" alone is a status).
      status, message = 500, status if message.nil? && status.is_a?(String) && status.to_i.to_s != status.strip
      status = status.to_i
      raise ArgumentError, "Apache::HTTPError: #{status} is not an error status" unless status >= 400 && status <= 599
      @status = status
      super(message || "HTTP status #{status}")
    end
  end

  # The request body as a stream (Request#input, rack.input).
  class Input
    # Yields the body in pieces of at most 16 KB.
    def each
      return to_enum(:each) unless block_given?
      while (chunk = read(16384))
        yield chunk
      end
      self
    end

    # Rack's input has no close; nothing to release here.
    def close; end
  end

  class Table
    include Enumerable

    # Yields each [name, value]; a repeated name is yielded once per value.
    def each(&block)
      return to_enum(:each) unless block
      to_a.each { |pair| block.call(*pair) }
      self
    end

    def keys
      to_a.map { |pair| pair[0] }.uniq
    end

    # A Hash of the entries; for a repeated name, its first value (as #[]).
    def to_h
      h = {}
      to_a.each { |k, v| h[k] = v unless h.key?(k) }
      h
    end
    alias all to_h
  end

  class Headers_in
    def user_agent
      self["User-Agent"]
    end

    def referer
      self["Referer"]
    end
  end
end

module Kernel
  # The server's class, as in scripts shared with ngx_mruby.
  def get_server_class
    Apache
  end
end
