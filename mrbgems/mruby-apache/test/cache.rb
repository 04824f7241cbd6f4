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

  def __incr(key, by, ttl)
    raise TypeError, 'by' unless by.is_a?(Integer)
    @calls << [:incr, key, by, ttl]
    n = @h.fetch(key.to_s, '0').to_i + by
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
  assert_equal [:incr, 'n', 10, 60], c.calls.last
  assert_equal 8, c.decr('n', 3)
  assert_raise(TypeError) { c.decr('n', 'x') }
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
