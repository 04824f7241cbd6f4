# Apache::Redis: a Redis client on an Apache::Socket, with hiredis's
# encoder and reply reader (rb_redis.c). Connections go back to the
# socket pool of the VM with #close.
class Apache
  class Redis
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

    # The commands that are methods: r.get('k') is r.call('GET', 'k').
    # Plain methods, not define_method in a loop over their names, which
    # made every VM hold a closure, its environment and a name String per
    # command (docs/benchmarks.md, "Where a VM's memory goes").
    def get(*args); call('GET', *args); end
    def set(*args); call('SET', *args); end
    def setex(*args); call('SETEX', *args); end
    def setnx(*args); call('SETNX', *args); end
    def getset(*args); call('GETSET', *args); end
    def mget(*args); call('MGET', *args); end
    def mset(*args); call('MSET', *args); end
    def del(*args); call('DEL', *args); end
    def exists(*args); call('EXISTS', *args); end
    def expire(*args); call('EXPIRE', *args); end
    def pexpire(*args); call('PEXPIRE', *args); end
    def ttl(*args); call('TTL', *args); end
    def pttl(*args); call('PTTL', *args); end
    def persist(*args); call('PERSIST', *args); end
    def incr(*args); call('INCR', *args); end
    def incrby(*args); call('INCRBY', *args); end
    def decr(*args); call('DECR', *args); end
    def decrby(*args); call('DECRBY', *args); end
    def append(*args); call('APPEND', *args); end
    def strlen(*args); call('STRLEN', *args); end
    def type(*args); call('TYPE', *args); end
    def keys(*args); call('KEYS', *args); end
    def hget(*args); call('HGET', *args); end
    def hset(*args); call('HSET', *args); end
    def hdel(*args); call('HDEL', *args); end
    def hgetall(*args); call('HGETALL', *args); end
    def hincrby(*args); call('HINCRBY', *args); end
    def hexists(*args); call('HEXISTS', *args); end
    def hkeys(*args); call('HKEYS', *args); end
    def hvals(*args); call('HVALS', *args); end
    def hlen(*args); call('HLEN', *args); end
    def hmget(*args); call('HMGET', *args); end
    def lpush(*args); call('LPUSH', *args); end
    def rpush(*args); call('RPUSH', *args); end
    def lpop(*args); call('LPOP', *args); end
    def rpop(*args); call('RPOP', *args); end
    def llen(*args); call('LLEN', *args); end
    def lrange(*args); call('LRANGE', *args); end
    def lrem(*args); call('LREM', *args); end
    def ltrim(*args); call('LTRIM', *args); end
    def sadd(*args); call('SADD', *args); end
    def srem(*args); call('SREM', *args); end
    def smembers(*args); call('SMEMBERS', *args); end
    def sismember(*args); call('SISMEMBER', *args); end
    def scard(*args); call('SCARD', *args); end
    def zadd(*args); call('ZADD', *args); end
    def zrem(*args); call('ZREM', *args); end
    def zrange(*args); call('ZRANGE', *args); end
    def zrevrange(*args); call('ZREVRANGE', *args); end
    def zscore(*args); call('ZSCORE', *args); end
    def zincrby(*args); call('ZINCRBY', *args); end
    def zcard(*args); call('ZCARD', *args); end
    def zrangebyscore(*args); call('ZRANGEBYSCORE', *args); end
    def publish(*args); call('PUBLISH', *args); end
    def ping(*args); call('PING', *args); end
    def echo(*args); call('ECHO', *args); end
    def select(*args); call('SELECT', *args); end
    def flushdb(*args); call('FLUSHDB', *args); end
    def dbsize(*args); call('DBSIZE', *args); end

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
