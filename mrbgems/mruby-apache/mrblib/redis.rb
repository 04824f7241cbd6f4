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
    def self.new(host: '127.0.0.1', port: 6379, timeout: 1000, connect_timeout: nil, db: nil, password: nil)
      allocate.__open(host, port, timeout, connect_timeout, db, password)
    end

    def __open(host, port, timeout, connect_timeout, db, password)
      @sock = Apache::Socket.tcp(host, port, timeout: timeout, connect_timeout: connect_timeout)
      @reader = Reader.new
      unless @sock.reused?
        call('AUTH', password) if password
        call('SELECT', db) if db
      end
      self
    end

    # One command; its reply. An error reply raises Apache::Redis::Error.
    def call(*args)
      r = __roundtrip([args])[0]
      raise r if r.is_a?(Exception)
      r
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
      @sock.keepalive if @sock
      @sock = nil
    end

    commands.each do |name|
      define_method(name) { |*args| call(name.upcase, *args) }
    end

    def __roundtrip(commands)
      raise Error, 'Apache::Redis: the connection is closed' unless @sock
      data = ''
      commands.each { |c| data << Redis.__format(c.map(&:to_s)) }
      replies = []
      ok = false
      begin
        @sock.write(data)
        while replies.size < commands.size
          got = @reader.gets
          if got
            replies << got[0]
          else
            chunk = @sock.read_some
            raise Error, 'Apache::Redis: the server closed the connection' if chunk.nil?
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
