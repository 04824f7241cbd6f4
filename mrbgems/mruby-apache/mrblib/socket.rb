# Apache::Socket, a TCP connection for scripts (the building block of
# Apache::Redis): buffered reads, lines, a pool of idle connections per VM.
# The connection itself is C (rb_socket.c, on libcurl). Where a request can
# be suspended (Apache::Async), a wait sleeps instead of blocking.
class Apache
  class Socket
    class << self
      POOL_IDLE = 30   # seconds an idle connection is kept
      POOL_MAX = 16    # idle connections kept per host and port

      # A connection to host:port: an idle one of the pool if there is one,
      # else a new one. timeout: ms for each read or write (and the
      # connection, unless connect_timeout: says otherwise). pool: a name
      # that keeps these connections apart from others to the same host
      # and port (Apache::Redis: the database and credentials).
      def tcp(host, port, timeout: 5000, connect_timeout: nil, pool: nil)
        raise ArgumentError, 'Apache::Socket: timeout must be 1 to 86400000 ms' unless timeout.is_a?(Integer) && timeout >= 1 && timeout <= 86_400_000
        key = pool ? "#{host}:#{port} #{pool}" : "#{host}:#{port}"
        idle = (@pool ||= {})[key]
        while idle && (entry = idle.pop)
          sock, at = entry
          return sock.__reuse(timeout) if Time.now.to_f - at < POOL_IDLE && sock.__idle_ok?
          sock.__close
        end
        __connect(host.to_s, port.to_i, connect_timeout || timeout).__setup(key, timeout)
      end

      def __checkin(key, sock)
        idle = ((@pool ||= {})[key] ||= [])
        if idle.size >= POOL_MAX
          sock.__close
        else
          idle.push([sock, Time.now.to_f])
        end
      end

      # Idle connections in the pool for host:port, of every pool name
      # (for tests and metrics).
      def pooled(host, port)
        key = "#{host}:#{port}"
        n = 0
        (@pool ||= {}).each { |k, idle| n += idle.size if k == key || k.start_with?(key + ' ') }
        n
      end
    end

    def __setup(key, timeout)
      @key = key
      @timeout = timeout
      @buf = ''
      @reused = false
      self
    end

    def __reuse(timeout)
      @timeout = timeout
      @reused = true
      self
    end

    # Whether this connection came from the pool.
    def reused?
      @reused
    end

    # ms for each read and write from now on.
    attr_reader :timeout

    def timeout=(ms)
      raise ArgumentError, 'Apache::Socket: timeout must be 1 to 86400000 ms' unless ms.is_a?(Integer) && ms >= 1 && ms <= 86_400_000
      @timeout = ms
    end

    # An idle connection is usable if nothing arrived on it (the peer
    # closing it, or bytes nobody asked for).
    def __idle_ok?
      !closed? && @buf.empty? && __recv(1, 0) == ''
    rescue Error
      false
    end

    def write(data)
      data = data.to_s
      deadline = __deadline
      off = 0
      while off < data.bytesize
        rest = off == 0 ? data : data.byteslice(off, data.bytesize - off)
        off += __wait(deadline, 'write') { |ms| n = __send(rest, ms); n == 0 ? :again : n }
      end
      data.bytesize
    end

    # Up to n bytes: exactly n unless the peer closed first; nil at the end.
    def read(n)
      raise ArgumentError, 'Apache::Socket#read: n must be >= 0' unless n.is_a?(Integer) && n >= 0
      deadline = __deadline
      while @buf.bytesize < n
        break unless __fill(deadline)
      end
      return nil if @buf.empty? && n > 0
      __take(n < @buf.bytesize ? n : @buf.bytesize)
    end

    # The bytes up to and including sep; what is left at the end of the
    # stream; nil if nothing is.
    def read_until(sep)
      sep = sep.to_s
      raise ArgumentError, 'Apache::Socket#read_until: an empty separator' if sep.empty?
      deadline = __deadline
      until (i = @buf.index(sep))
        raise Error, "Apache::Socket: no #{sep.inspect} in 1 MB" if @buf.bytesize > 1_048_576
        next if __fill(deadline)
        return nil if @buf.empty?
        return __take(@buf.bytesize)
      end
      __take(i + sep.bytesize)
    end

    def gets
      read_until("\n")
    end

    # What arrives first (buffered bytes, else up to 64 KB from the
    # network); nil at the end of the stream.
    def read_some
      return __take(@buf.bytesize) unless @buf.empty?
      __wait(__deadline, 'read') { |ms| d = __recv(65536, ms); d == '' ? :again : d }
    end

    def close
      __close
      nil
    end

    # Gives the connection back to the pool for the next Apache::Socket.tcp
    # to the same host and port (in this VM); the object must not be used
    # after. A connection with unread bytes is closed instead.
    def keepalive
      if closed? || !@buf.empty?
        __close
      else
        Socket.__checkin(@key, self)
      end
      nil
    end

    private

    def __deadline
      Time.now.to_f * 1000 + @timeout
    end

    def __take(n)
      out = @buf.byteslice(0, n)
      @buf = @buf.byteslice(n, @buf.bytesize - n) || ''
      out
    end

    def __fill(deadline)
      data = __wait(deadline, 'read') { |ms| d = __recv(65536, ms); d == '' ? :again : d }
      return false if data.nil?
      @buf << data
      true
    end

    # Runs the block (given the ms it may wait) until it has an answer other
    # than :again; by sleeping between tries where the request can be
    # suspended (until the socket is ready), else by letting the block wait.
    # Where it suspends, it first waits in place as Apache::HTTP's calls do
    # (Apache::Async.__spin), for the usual time of this connection's reads,
    # by what Apache::Async.__note learnt of them (@usual), as for
    # Apache::HTTP's calls to an origin.
    def __wait(deadline, what)
      suspend = Apache::Async.__suspendable?
      spin = Apache::Async.__spin(@usual) if suspend
      pause = 1
      began = Apache::Async.__clock if suspend
      while true
        now = Time.now.to_f * 1000
        left = (deadline - now).to_i
        if left <= 0
          # An answer may still come: nothing read later would be in step
          # with the peer, so the connection is closed (and never pooled).
          __close
          raise Timeout, "Apache::Socket: #{what} timed out after #{@timeout} ms"
        end
        got = yield(suspend && left > spin ? spin : left) # before a suspension
        unless got == :again
          @usual = Apache::Async.__note(@usual, began) if suspend && what == 'read'
          return got
        end
        next unless suspend
        spin = 2 # (after a wake the socket is mostly ready)
        if Apache::Async.__watching?
          # woken as soon as the socket is ready: the time is a last resort
          Apache::Async.sleep(left < 1000 ? left : 1000)
        else
          Apache::Async.sleep(pause < left ? pause : left)
          pause = pause < 8 ? pause * 2 : 16
        end
      end
    end
  end
end
