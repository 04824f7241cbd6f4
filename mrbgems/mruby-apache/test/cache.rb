# The Ruby half of Apache::Cache over a stand-in for its C half (rb_cache.c):
# a Hash per cache name, with the same argument checks for what the Ruby
# half relies on.

class Apache::Cache
  attr_reader :name, :calls

  def initialize(name)
    @name = name
    @h = {}
    @calls = []
  end

  def self.__open(name)
    raise ArgumentError, "no cache named '#{name}'" if name == 'missing'
    @opened = (@opened || 0) + 1
    new(name)
  end

  def self.opened
    @opened
  end

  def get(key)
    @h[key.to_s]
  end

  def __set(key, value, ttl)
    raise TypeError, 'a cache value must be a String' unless value.is_a?(String)
    @calls << [:set, key, ttl]
    @h[key.to_s] = value.dup
  end

  def delete(key)
    !@h.delete(key.to_s).nil?
  end

  def __add(key, value, ttl)
    @calls << [:add, key, ttl]
    return false if @h.key?(key.to_s)
    @h[key.to_s] = value.dup
    true
  end

  def __replace(key, value, ttl)
    @calls << [:replace, key, ttl]
    return false unless @h.key?(key.to_s)
    @h[key.to_s] = value.dup
    true
  end

  def __expire(key, ttl)
    @calls << [:expire, key, ttl]
    @h.key?(key.to_s)
  end

  def __incr(key, by, init, ttl)
    raise TypeError, 'by' unless by.is_a?(Integer)
    @calls << [:incr, key, by, init, ttl]
    n = @h.fetch(key.to_s, (init || 0).to_s).to_i + by
    @h[key.to_s] = n.to_s
    n
  end

  def synchronize(key)
    @calls << [:synchronize, key]
    yield
  end
end

assert('Apache::Cache.named keeps one object per name') do
  a = Apache::Cache.named(:sessions)
  assert_true a.equal?(Apache::Cache.named('sessions'))
  assert_equal 'sessions', a.name
  assert_equal 'default', Apache::Cache.default.name
  assert_true Apache::Cache.default.equal?(Apache::Cache.named)
end

assert('Apache::Cache.named raises for an unknown name') do
  assert_raise(ArgumentError) { Apache::Cache.named(:missing) }
end

assert('[] and []= read and write; nil removes') do
  c = Apache::Cache.named(:t1)
  c['a'] = 'x'
  assert_equal 'x', c['a']
  c['a'] = nil
  assert_nil c['a']
  assert_equal [[:set, 'a', nil]], c.calls
end

assert('set passes ttl and returns the value') do
  c = Apache::Cache.named(:t2)
  assert_equal 'v', c.set('k', 'v', ttl: 30)
  assert_equal [:set, 'k', 30], c.calls.last
end

assert('fetch computes a missing value once and stores it with ttl') do
  c = Apache::Cache.named(:t3)
  n = 0
  assert_equal 'computed k', c.fetch('k', ttl: 5) { |key| n += 1; "computed #{key}" }
  assert_equal 'computed k', c.fetch('k', ttl: 5) { n += 1; 'again' }
  assert_equal 1, n
  assert_equal [[:set, 'k', 5]], c.calls
end

assert('fetch does not store nil, and raises KeyError without a block') do
  c = Apache::Cache.named(:t4)
  assert_nil c.fetch('k') { nil }
  assert_equal [], c.calls
  assert_raise(KeyError) { c.fetch('k') }
end

assert('incr and decr') do
  c = Apache::Cache.named(:t5)
  assert_equal 1, c.incr('n')
  assert_equal 11, c.incr('n', 10, ttl: 60)
  assert_equal [:incr, 'n', 10, nil, 60], c.calls.last
  assert_equal 8, c.decr('n', 3)
  assert_raise(TypeError) { c.decr('n', 'x') }
  assert_equal 105, c.incr('m', 5, init: 100)
  assert_equal [:incr, 'm', 5, 100, nil], c.calls.last
  assert_equal 95, c.decr('fresh', 5, init: 100)
end

assert('add, replace and expire pass their ttl and answer whether they did it') do
  c = Apache::Cache.named(:t7)
  assert_true c.add('a', 'first', ttl: 5)
  assert_false c.add('a', 'second')
  assert_equal 'first', c['a']
  assert_true c.replace('a', 'third', ttl: 7)
  assert_false c.replace('absent', 'x')
  assert_equal 'third', c['a']
  assert_true c.expire('a', 9)
  assert_false c.expire('absent', nil)
  assert_equal [[:add, 'a', 5], [:add, 'a', nil], [:replace, 'a', 7], [:replace, 'absent', nil],
                [:expire, 'a', 9], [:expire, 'absent', nil]], c.calls
end

assert('class methods work on the default cache') do
  Apache::Cache['top'] = 'level'
  assert_equal 'level', Apache::Cache['top']
  assert_equal 'level', Apache::Cache.get('top')
  assert_equal 'v', Apache::Cache.set('x', 'v', ttl: 9)
  assert_equal [:set, 'x', 9], Apache::Cache.default.calls.last
  assert_equal 'f', Apache::Cache.fetch('f', ttl: 3) { 'f' }
  assert_equal 2, Apache::Cache.incr('n', 2)
  assert_equal 1, Apache::Cache.decr('n')
  assert_equal 12, Apache::Cache.incr('n2', 2, init: 10, ttl: 4)
  assert_equal [:incr, 'n2', 2, 10, 4], Apache::Cache.default.calls.last
  assert_true Apache::Cache.add('added', 'v')
  assert_true Apache::Cache.replace('added', 'w')
  assert_true Apache::Cache.expire('added', 3)
  assert_equal :done, Apache::Cache.synchronize('k') { :done }
  assert_true Apache::Cache.delete('top')
  assert_false Apache::Cache.delete('top')
end

assert('inspect names the cache') do
  assert_equal '#<Apache::Cache t6>', Apache::Cache.named(:t6).inspect
end

assert('Apache::Cache::Error is a StandardError') do
  assert_true Apache::Cache::Error.ancestors.include?(StandardError)
end
