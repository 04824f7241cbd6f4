class Apache
  # The Rack interface: `run app` in a script calls app.call(env) and turns
  # the [status, headers, body] it returns into the response. An invalid
  # response raises (the request gets a 500 and the error log says why).
  module Rack
    SPEC_VERSION = [1, 3].freeze

    # rack.errors: what the app writes goes to the error log.
    class Errors
      def puts(*lines)
        lines.flatten.each { |l| write("#{l}\n") }
        nil
      end

      def write(str)
        str = str.to_s
        str = str[0, str.size - 1] if str.end_with?("\n")
        Apache.errlogger(Apache::APLOG_ERR, str)
        str.size
      end

      def <<(str)
        write(str)
        self
      end

      def print(*s)
        s.each { |x| write(x) }
        nil
      end

      def flush
        self
      end
    end

    def self.env(r = Request.new)
      c = Connection.new
      env = {
        "REQUEST_METHOD" => r.method,
        "SCRIPT_NAME" => "",
        "PATH_INFO" => r.uri.to_s,
        "QUERY_STRING" => r.args.to_s,
        "REQUEST_URI" => r.unparsed_uri.to_s,
        # A request without a Host header (HTTP/1.0) has no hostname: the
        # server's name then, as Rack's SERVER_NAME is never empty.
        "SERVER_NAME" => (r.hostname || r.server.hostname).to_s,
        "SERVER_PORT" => c.local_port.to_s,
        "SERVER_ADDR" => c.local_ip.to_s,
        "SERVER_PROTOCOL" => r.protocol.to_s,
        # The client as httpd's CGI variables name it: behind a proxy that
        # mod_remoteip trusts, the address the proxy says it serves.
        "REMOTE_ADDR" => c.useragent_ip.to_s,
        "REMOTE_PORT" => c.remote_port.to_s,
        "rack.version" => SPEC_VERSION,
        "rack.url_scheme" => r.scheme,
        "rack.input" => r.input,
        "rack.errors" => Errors.new,
        "rack.multithread" => Apache.threaded?,
        "rack.multiprocess" => true,
        "rack.run_once" => false,
        "rack.hijack?" => false,
        "server.name" => server_name,
        "server.version" => Apache.server_version,
      }
      r.headers_in.to_a.each do |name, value|
        # As httpd does for CGI: a name with another byte than a letter, a
        # digit or '-' is left out, or "Content_Length" would be taken for
        # CONTENT_LENGTH and "X_Forwarded_For" would join the variable of
        # X-Forwarded-For.
        next unless env_name?(name)
        key = name.upcase.tr("-", "_")
        key = "HTTP_" + key unless key == "CONTENT_TYPE" || key == "CONTENT_LENGTH"
        if env.key?(key)
          env[key] = env[key] + (key == "HTTP_COOKIE" ? "; " : ", ") + value.to_s
        else
          env[key] = value.to_s
        end
      end
      env
    end

    def self.env_name?(name)
      name.each_byte do |b|
        return false unless (b >= 48 && b <= 57) || (b >= 65 && b <= 90) || (b >= 97 && b <= 122) || b == 45
      end
      true
    end

    # [[name, value], ...] from a Hash or an Array of pairs; a value may be
    # an Array, or a String with several values separated by "\n".
    def self.header_pairs(headers)
      list = []
      if headers.is_a?(Hash)
        headers.each { |k, v| list << [k, v] }
      elsif headers.is_a?(Array)
        headers.each do |pair|
          raise TypeError, "Rack response header #{pair.inspect} is not a [name, value] pair" unless pair.is_a?(Array) && pair.size == 2
          list << pair
        end
      else
        raise TypeError, "Rack response headers must be a Hash or an Array of pairs, not #{headers.class}"
      end
      out = []
      list.each do |name, value|
        raise TypeError, "Rack response header name #{name.inspect} is not a String" unless name.is_a?(String)
        value = value.to_s if value.is_a?(Numeric)
        values = value.is_a?(String) ? value.split("\n") : value
        raise TypeError, "Rack response header #{name} has a #{value.class} value" unless values.is_a?(Array)
        values.each do |v|
          raise TypeError, "Rack response header #{name} has a #{v.class} value" unless v.is_a?(String)
          out << [name, v]
        end
      end
      out
    end

    def self.status_of(status)
      status = status.to_i if status.is_a?(String) && !status.empty? && status.bytes.all? { |b| b >= 48 && b <= 57 }
      valid = status.is_a?(Integer) &&
              ((status >= 200 && status <= 599) || [Apache::OK, Apache::DECLINED, Apache::DONE].include?(status))
      raise ArgumentError, "Rack response status #{status.inspect} is not an HTTP status" unless valid
      status
    end

    def self.respond(res, r = Request.new)
      unless res.is_a?(Array) && res.size == 3
        raise TypeError, "Rack app returned #{res.inspect[0, 100]}, not [status, headers, body]"
      end
      status = status_of(res[0])
      body = res[2]
      begin
        raise TypeError, "Rack response body (#{body.class}) does not respond to each" unless body.respond_to?(:each)
        header_pairs(res[1]).each do |name, value|
          case name.downcase
          when "content-type" then r.content_type = value
          # httpd counts the body itself, and frames it on the connection
          when "content-length", "transfer-encoding", "te", "trailer", "upgrade", "keep-alive",
               "proxy-connection" then nil
          when "connection" then r.headers_out.add(name, value) if value.downcase == "close"
          else r.headers_out.add(name, value)
          end
        end
        if status < 100
          Apache.return(status)
        elsif Apache.phase == "Handler"
          r.status = status
          body.each do |chunk|
            raise TypeError, "Rack response body yielded a #{chunk.class}, not a String" unless chunk.is_a?(String)
            Apache.rputs(chunk)
          end
          Apache.return(Apache::OK)
        else
          Apache.return(status == Apache::HTTP_OK ? Apache::OK : status)
        end
      ensure
        body.close if body.respond_to?(:close)
      end
      nil
    end

    def self.run(app)
      raise TypeError, "run: #{app.class} does not respond to call" unless app.respond_to?(:call)
      r = Request.new
      respond(app.call(env(r)), r)
    end
  end
end

module Kernel
  # `run app` in a script: app is a Rack application (responds to call).
  def run(app)
    Apache::Rack.run(app)
  end
end
