# These tests stand in for httpd: the C methods (Apache.rputs,
# Table#to_a) are replaced by Ruby stubs.

class FakeTable < Apache::Table
  def initialize(pairs)
    @pairs = pairs
  end

  def to_a
    @pairs
  end
end

assert('Apache.echo writes to_s and a newline through rputs') do
  out = []
  Apache.singleton_class.send(:define_method, :rputs) { |s| out << s }
  Apache.echo 'line'
  Apache.echo 42
  assert_equal ["line\n", "42\n"], out
end

assert('Table#each yields every pair, repeated names included') do
  t = FakeTable.new([['Set-Cookie', 'a=1'], ['Set-Cookie', 'b=2'], ['X', 'y']])
  seen = []
  t.each { |k, v| seen << "#{k}:#{v}" }
  assert_equal ['Set-Cookie:a=1', 'Set-Cookie:b=2', 'X:y'], seen
end

assert('Table#keys has each name once') do
  t = FakeTable.new([['A', '1'], ['A', '2'], ['B', '3']])
  assert_equal ['A', 'B'], t.keys
end

assert('Table#to_h and #all keep the first value of a name') do
  t = FakeTable.new([['A', '1'], ['A', '2'], ['B', '3']])
  assert_equal({ 'A' => '1', 'B' => '3' }, t.to_h)
  assert_equal t.to_h, t.all
end

assert('Table is Enumerable') do
  t = FakeTable.new([['A', '1'], ['B', '2']])
  assert_equal ['A', 'B'], t.map { |k, _| k }
end

assert('Headers_in helpers') do
  class Apache::Headers_in
    def [](k)
      { 'User-Agent' => 'ua', 'Referer' => 'ref' }[k]
    end
  end
  h = Apache::Headers_in.allocate
  assert_equal 'ua', h.user_agent
  assert_equal 'ref', h.referer
end

assert('get_server_class is Apache') do
  assert_equal Apache, get_server_class
end

assert('Apache::HTTPError carries a status') do
  e = Apache::HTTPError.new(404, "gone")
  assert_equal 404, e.status
  assert_equal "gone", e.message
  assert_equal 500, Apache::HTTPError.new.status
  assert_raise(ArgumentError) { Apache::HTTPError.new(302) }
  assert_true e.is_a?(StandardError)
end

assert('Apache.redirect checks its arguments') do
  assert_raise(ArgumentError) { Apache.redirect("/x", 200) }
  assert_raise(ArgumentError) { Apache.redirect("/x", "302") }
  assert_raise(TypeError) { Apache.redirect(nil) }
  assert_raise(ArgumentError) { Apache.redirect("") }
end

assert('Apache::Input#each reads in pieces until nil') do
  input = Apache::Input.allocate
  data = ["ab", "c", nil]
  input.define_singleton_method(:read) { |_n| data.shift }
  assert_equal ["ab", "c"], input.each.to_a
end
