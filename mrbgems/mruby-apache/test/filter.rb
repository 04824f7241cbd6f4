# Apache::Filter's Ruby half over a stand-in for the C half: a String as
# the data, and a flag for the mode.

class FakeFilter < Apache::Filter
  attr_reader :buf

  def initialize(data, buffered)
    @buf = data.dup
    @buffered = buffered
  end

  def flatten
    @buf.dup
  end

  def cleanup
    @buf = ''
    self
  end

  def insert_tail(str)
    @buf << str.to_s
    self
  end

  def buffered?
    @buffered
  end
end

assert('Filter#body and #body= read and replace the whole body in buffer mode') do
  f = FakeFilter.new('<p>hi</p>', true)
  assert_equal '<p>hi</p>', f.body
  f.body = f.body.upcase
  assert_equal '<P>HI</P>', f.buf
end

assert('Filter#body raises in stream mode and for input filters') do
  f = FakeFilter.new('chunk', false)
  e = assert_raise(RuntimeError) { f.body }
  assert_true e.message.include?('#data')
  assert_raise(RuntimeError) { f.body = 'x' }
  assert_equal 'chunk', f.buf
end

assert('Filter#data and #data= work in either mode') do
  f = FakeFilter.new('abc', false)
  assert_equal 'abc', f.data
  f.data = 'xyz'
  assert_equal 'xyz', f.buf
end

assert('Filter#puts appends without a newline, as in mod_mruby') do
  f = FakeFilter.new('a', true)
  f.puts 'b'
  f.puts 1
  assert_equal 'ab1', f.buf
end
