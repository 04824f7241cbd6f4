# Rack on its own: the C methods it relies on are stubbed.

class RackStub
  attr_reader :out, :status, :returned, :headers, :content_type

  def initialize
    @out = []
    @headers = []
    @status = 200
  end

  def rputs(s); @out << s; end
  def ret(v); @returned = v; end
  def set_status(s); @status = s; end
  def set_type(t); @content_type = t; end
  def add(k, v); @headers << [k, v]; end
end

$stub = RackStub.new

class StubHeadersOut
  def add(k, v); $stub.add(k, v); end
end

class StubRequest
  def status=(s); $stub.set_status(s); end
  def content_type=(t); $stub.set_type(t); end
  def headers_out; StubHeadersOut.new; end
end

class Apache
  def self.rputs(s); $stub.rputs(s); end
  def self.return(v); $stub.ret(v); end
  def self.phase; $stub_phase || "Handler"; end
end
Apache.const_set(:OK, 0) unless Apache.const_defined?(:OK)
Apache.const_set(:DECLINED, -1) unless Apache.const_defined?(:DECLINED)
Apache.const_set(:DONE, -2) unless Apache.const_defined?(:DONE)
Apache.const_set(:HTTP_OK, 200) unless Apache.const_defined?(:HTTP_OK)

class ClosableBody
  attr_reader :closed
  def each; yield "a"; yield "b"; end
  def close; @closed = true; end
end

def respond(res)
  $stub = RackStub.new
  Apache::Rack.respond(res, StubRequest.new)
  $stub
end

assert('Rack.respond: Hash headers, Array body') do
  s = respond([201, { "X-A" => "1", "Content-Type" => "text/x", "Content-Length" => "99" }, ["he", "llo"]])
  assert_equal 201, s.status
  assert_equal 0, s.returned
  assert_equal ["he", "llo"], s.out
  assert_equal "text/x", s.content_type
  assert_equal [["X-A", "1"]], s.headers
end

assert('Rack.respond: pair headers, multi-values, each-able body closed') do
  body = ClosableBody.new
  s = respond([200, [["Set-Cookie", "a=1\nb=2"], ["X-L", ["x", "y"]]], body])
  assert_equal [["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"], ["X-L", "x"], ["X-L", "y"]], s.headers
  assert_equal ["a", "b"], s.out
  assert_true body.closed
end

assert('Rack.respond: hook results pass through, other phases return the status') do
  assert_equal(-1, respond([Apache::DECLINED, {}, []]).returned)
  $stub_phase = "AccessChecker"
  assert_equal 0, respond([200, {}, ["ignored"]]).returned
  assert_equal 403, respond([403, {}, []]).returned
  $stub_phase = nil
end

assert('Rack.respond: invalid responses raise, and close is still called') do
  [nil, [200, {}], "x", [99, {}, []], [600, {}, []], ["abc", {}, []], [200, "h", []], [200, [["a"]], []],
   [200, { 1 => "x" }, []], [200, { "a" => nil }, []], [200, { "a" => [1] }, []], [200, {}, 5],
   [200, {}, [1]]].each do |bad|
    assert_raise(TypeError, ArgumentError) { respond(bad) }
  end
  body = ClosableBody.new
  assert_raise(TypeError) { respond([200, "bad headers", body]) }
  assert_true body.closed
  assert_equal 204, respond(["204", {}, []]).status
  assert_equal [["X-N", "5"]], respond([200, { "X-N" => 5 }, []]).headers
end

assert('Rack.run needs something callable') do
  assert_raise(TypeError) { Apache::Rack.run(Object.new) }
end
