# Apache::Redis: a Redis client on an Apache::Socket, with hiredis's
# encoder and reply reader (rb_redis.c). Connections go back to the
# socket pool of the VM with #close.
class Apache
  class Redis
    # The commands that are methods: r.get('k') is r.call('GET', 'k').
    commands = %w[get set setex setnx getset mget mset del exists expire pexpire ttl pttl persist
                  incr incrby decr decrby append strlen type keys
                  hget hset hdel hgetall hincrby hexists hkeys hvals hlen hmget
                  lpush rpush lpop rpop llen lrange lrem ltrim
                  sadd srem smembers sismember scard
                  zadd zrem zrange zrevrange zscore zincrby zcard zrangebyscore
                  publish ping echo select flushdb dbsize]

    # mruby 3.1's Class#new (C) hands keywords to initialize as a Hash: new
    # is Ruby here.
    def self.new(host: '127.0.0.1', port: 6379, timeout: 1000, connect_timeout: nil, db: nil, password: nil,
                 max_size: 8 * 1024 * 1024)
      allocate.__open(host, port, timeout, connect_timeout, db, password, max_size)
    end

    # Commands after which a connection's state is no longer the one its
    # pool stands for (another database, other credentials, a transaction
    # or a subscription in progress): it is closed, not pooled.
    def self.__stateful?(command)
      name = command[0].to_s.upcase
      %w[SELECT AUTH MULTI WATCH SUBSCRIBE PSUBSCRIBE SSUBSCRIBE MONITOR HELLO RESET].include?(name) ||
        (name == 'CLIENT' && %w[SETNAME TRACKING REPLY NO-EVICT NO-TOUCH].include?(command[1].to_s.upcase))
    end

    def __open(host, port, timeout, connect_timeout, db, password, max_size)
      # Connections are pooled by database and credentials: one made for
      # another password (another virtual host's) or database is not reused.
      pool = "redis db=#{db.to_i} auth=#{password ? Digest::SHA256.hexdigest(password.to_s) : '-'}"
      @sock = Apache::Socket.tcp(host, port, timeout: timeout, connect_timeout: connect_timeout, pool: pool)
      @reader = Reader.new
      @timeout = timeout
      @max_size = max_size
      unless @sock.reused?
        begin
          __roundtrip([['AUTH', password]], true) if password
          __roundtrip([['SELECT', db]], true) if db
        rescue Exception
          __discard
          raise
        end
      end
      self
    end

    # One command; its reply. An error reply raises Apache::Redis::Error.
    def call(*args)
      r = __roundtrip([args])[0]
      raise r if r.is_a?(Exception)
      r
    end

    # Closes the connection (not pooled).
    def __discard
      @sock.close if @sock
      @sock = nil
    end

    # Commands sent at once, their replies read at once: the block gets an
    # object whose #call (and command methods) queue a command; returns the
    # Array of replies, error replies as Apache::Redis::Error objects.
    def pipeline
      queue = Pipeline.new
      yield queue
      return [] if queue.__commands.empty?
      __roundtrip(queue.__commands)
    end

    # Gives the connection back to the pool (a connection in an unknown
    # state is closed instead).
    def close
      if @stateful
        @sock.close if @sock
      elsif @sock
        @sock.keepalive
      end
      @sock = nil
    end

    commands.each do |name|
      define_method(name) { |*args| call(name.upcase, *args) }
    end

    def __roundtrip(commands, opening = false)
      raise Error, 'Apache::Redis: the connection is closed' unless @sock
      data = ''
      commands.each do |c|
        @stateful = true if !opening && Redis.__stateful?(c)
        data << Redis.__format(c.map(&:to_s))
      end
      replies = []
      ok = false
      fed = 0
      deadline = Time.now.to_f * 1000 + @timeout
      begin
        @sock.write(data)
        while replies.size < commands.size
          got = @reader.gets
          if got
            replies << got[0]
          else
            # The whole exchange within one timeout, and its replies within
            # max_size: a server that trickles or floods is cut off.
            raise Apache::Socket::Timeout, "Apache::Redis: no reply within #{@timeout} ms" if Time.now.to_f * 1000 > deadline
            chunk = @sock.read_some
            raise Error, 'Apache::Redis: the server closed the connection' if chunk.nil?
            fed += chunk.bytesize
            raise Error, "Apache::Redis: replies larger than max_size (#{@max_size} bytes)" if fed > @max_size
            @reader.feed(chunk)
          end
        end
        ok = true
      ensure
        unless ok
          # a half-read exchange: this connection cannot be reused
          @sock.close
          @sock = nil
        end
      end
      replies
    end

    # What a pipeline's block gets: the command methods of Apache::Redis,
    # whose call queues the command.
    class Pipeline < Redis
      def self.new
        allocate.__init
      end

      def __init
        @queue = []
        self
      end

      def __commands
        @queue
      end

      def call(*args)
        @queue << args
        nil
      end
    end
  end
end
