class Apache
  # A shared cache configured with mrubyCache (rb_cache.c has the C half:
  # __open, get, __set, __add, __replace, delete, __incr, ttl, __expire,
  # keys, flush_all, flush_expired, capacity, free_space, synchronize,
  # name, max_value).
  # Apache::Cache[key] and the other class methods use the cache configured
  # without a name; Apache::Cache.named(:name) returns a named one.
  class Cache
    class << self
      # The cache of that name, one object per name in this VM.
      def named(name = :default)
        @caches ||= {}
        @caches[name.to_s] ||= __open(name.to_s)
      end

      def default
        named(:default)
      end

      def [](key)
        default.get(key)
      end

      def []=(key, value)
        default[key] = value
      end

      def get(key)
        default.get(key)
      end

      def set(key, value, ttl: nil)
        default.set(key, value, ttl: ttl)
      end

      def delete(key)
        default.delete(key)
      end

      def fetch(key, ttl: nil, &block)
        default.fetch(key, ttl: ttl, &block)
      end

      def add(key, value, ttl: nil)
        default.add(key, value, ttl: ttl)
      end

      def replace(key, value, ttl: nil)
        default.replace(key, value, ttl: ttl)
      end

      def incr(key, by = 1, init: nil, ttl: nil)
        default.incr(key, by, init: init, ttl: ttl)
      end

      def decr(key, by = 1, init: nil, ttl: nil)
        default.decr(key, by, init: init, ttl: ttl)
      end

      def ttl(key)
        default.ttl(key)
      end

      def expire(key, ttl)
        default.expire(key, ttl)
      end

      def synchronize(key, &block)
        default.synchronize(key, &block)
      end
    end

    def [](key)
      get(key)
    end

    # cache[key] = nil removes the entry, as for the request's tables.
    def []=(key, value)
      if value.nil?
        delete(key)
      else
        __set(key, value, nil)
      end
    end

    def set(key, value, ttl: nil)
      __set(key, value, ttl)
    end

    # Stores only when the key has no entry; whether it stored.
    def add(key, value, ttl: nil)
      __add(key, value, ttl)
    end

    # Stores only when the key has an entry; whether it stored.
    def replace(key, value, ttl: nil)
      __replace(key, value, ttl)
    end

    # A new lifetime for the entry (nil: none); whether there was one.
    def expire(key, ttl)
      __expire(key, ttl)
    end

    # The value at key; when there is none, the block's value, stored with
    # ttl unless it is nil. Without a block, a missing key raises KeyError.
    # Two requests may both compute a missing value: wrap the call in
    # synchronize(key) when it must be computed once.
    def fetch(key, ttl: nil, &block)
      value = get(key)
      return value unless value.nil?
      raise KeyError, "key not found: #{key.inspect}" unless block
      value = block.call(key)
      __set(key, value, ttl) unless value.nil?
      value
    end

    # Adds by to the integer at key (init, else 0, when absent), atomically
    # for every thread and process of this server; returns the new value.
    def incr(key, by = 1, init: nil, ttl: nil)
      __incr(key, by, init, ttl)
    end

    def decr(key, by = 1, init: nil, ttl: nil)
      __incr(key, by.is_a?(Integer) ? -by : by, init, ttl)
    end

    def inspect
      "#<Apache::Cache #{name}>"
    end
  end
end
