assert('HTTPText.params parses header parameters') do
  h = Apache::HTTPText.params('form-data; name="a\\"b"; filename=x.txt ;  Foo=bar; name=dup')
  assert_equal 'a"b', h["name"]
  assert_equal "x.txt", h["filename"]
  assert_equal "bar", h["foo"]
  assert_equal({}, Apache::HTTPText.params("plain"))
  assert_equal({ "a" => "" }, Apache::HTTPText.params('x; a=""; =v; ;'))
  assert_equal({ "a" => "unterminated" }, Apache::HTTPText.params('x; a="unterminated'))
end

assert('HTTPText.token?') do
  assert_true Apache::HTTPText.token?("Set-Cookie_1.x")
  assert_false Apache::HTTPText.token?("a b")
  assert_false Apache::HTTPText.token?("")
  assert_false Apache::HTTPText.token?(nil)
end

assert('Params keeps every value and the last one wins') do
  p = Apache::Params.__from_pairs([["a", "1"], ["b", "2"], ["a", "3"]])
  assert_equal "3", p["a"]
  assert_equal ["1", "3"], p.values_of("a")
  assert_equal [], p.values_of("none")
  assert_nil p["none"]
  assert_false p.truncated?
  assert_true Apache::Params.__from_pairs([], true).truncated?
  assert_true p.is_a?(Hash)
end

assert('Cookie.parse') do
  assert_equal({ "a" => "1", "b" => "x y", "c" => "" }, Apache::Cookie.parse('a=1; b="x y"; a=2; c=; noval, junk'))
  assert_equal({}, Apache::Cookie.parse(nil))
  assert_equal({ "a" => "1", "c" => "3" }, Apache::Cookie.parse("a=1, c=3"))
end

assert('Cookie.build and its checks') do
  assert_equal "a=b", Apache::Cookie.build("a", "b")
  assert_equal "a=b; Domain=example.test; Path=/x; Max-Age=0; Secure; HttpOnly; SameSite=Strict",
               Apache::Cookie.build("a", "b", "domain" => "example.test", :path => "/x", :max_age => 0,
                                    :secure => true, :httponly => true, :samesite => :strict)
  assert_equal "a=b; Expires=Thu, 01 Jan 1970 00:00:10 GMT", Apache::Cookie.build("a", "b", expires: Time.at(10))
  assert_equal "a=b", Apache::Cookie.build("a", "b", secure: false)
  ["a b", "a;b", "", "a=b"].each { |n| assert_raise(ArgumentError) { Apache::Cookie.build(n, "v") } }
  ["a b", "a;b", "a,b", "\"", "\\", "\x00", "\xff"].each { |v| assert_raise(ArgumentError) { Apache::Cookie.build("n", v) } }
  assert_raise(ArgumentError) { Apache::Cookie.build("n", "v", path: "/a;b") }
  assert_raise(ArgumentError) { Apache::Cookie.build("n", "v", path: "/a\nb") }
  assert_raise(ArgumentError) { Apache::Cookie.build("n", "v", max_age: "10") }
  assert_raise(ArgumentError) { Apache::Cookie.build("n", "v", samesite: "often") }
  assert_raise(ArgumentError) { Apache::Cookie.build("n", "v", color: "blue") }
end

assert('HTTPText.params: a backslash escapes only a quote or a backslash') do
  h = Apache::HTTPText.params('form-data; name="a\\b"; filename="C:\\dir\\f.txt"; x="q\\"\\\\"')
  assert_equal "a\\b", h["name"]
  assert_equal "C:\\dir\\f.txt", h["filename"]
  assert_equal "q\"\\", h["x"]
end
