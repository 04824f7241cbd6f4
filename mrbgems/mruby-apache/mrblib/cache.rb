class Apache
  # A shared cache configured with mrubyCache (rb_cache.c has the C half:
  # __open, get, __set, delete, __incr, synchronize, name, max_value).
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

      def incr(key, by = 1, ttl: nil)
        default.incr(key, by, ttl: ttl)
      end

      def decr(key, by = 1, ttl: nil)
        default.decr(key, by, ttl: ttl)
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

    # Adds by to the integer at key (0 when absent), atomically for every
    # thread and process of this server; returns the new value.
    def incr(key, by = 1, ttl: nil)
      __incr(key, by, ttl)
    end

    def decr(key, by = 1, ttl: nil)
      __incr(key, by.is_a?(Integer) ? -by : by, ttl)
    end

    def inspect
      "#<Apache::Cache #{name}>"
    end
  end
end
