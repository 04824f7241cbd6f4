# The multipart parser on its own: well-formed bodies, every kind of
# damage, and random inputs (it must return, bounded, never raise).

def mp(parts, boundary = "b0undary")
  body = ""
  parts.each { |head, data| body << "--#{boundary}\r\n#{head}\r\n\r\n#{data}\r\n" }
  body + "--#{boundary}--\r\n"
end

assert('Multipart.boundary reads the parameter, quoted or not') do
  assert_equal "abc", Apache::Multipart.boundary("multipart/form-data; boundary=abc")
  assert_equal "a b;c", Apache::Multipart.boundary('multipart/form-data; charset=x; boundary="a b;c"')
  assert_nil Apache::Multipart.boundary("multipart/form-data")
  assert_nil Apache::Multipart.boundary("multipart/form-data; boundary=")
  assert_nil Apache::Multipart.boundary("multipart/form-data; boundary=" + "x" * 71)
  assert_nil Apache::Multipart.boundary("multipart/form-data; boundary=\"a\x01\"")
end

assert('Multipart.parse: fields and files') do
  body = mp([['Content-Disposition: form-data; name="a"', "1"],
             ["Content-Disposition: form-data; name=\"f\"; filename=\"x.txt\"\r\nContent-Type: text/plain", "file\r\ndata"],
             ['Content-Disposition: form-data; name="a"', "2"]])
  p = Apache::Multipart.parse(body, "b0undary", 100)
  assert_equal "2", p["a"]
  assert_equal ["1", "2"], p.values_of("a")
  f = p["f"]
  assert_equal "x.txt", f.filename
  assert_equal "text/plain", f.content_type
  assert_equal "file\r\ndata", f.body
  assert_equal 10, f.size
  assert_false p.truncated?
end

assert('Multipart.parse: binary data with CR, LF, NUL and near-boundaries') do
  data = (0..255).map { |i| i.chr }.join + "\r\n--b0undar\r\n--b0undaryX"
  p = Apache::Multipart.parse(mp([['Content-Disposition: form-data; name="bin"', data]]), "b0undary", 10)
  # "\r\n--b0undaryX" is a delimiter followed by junk: the value stops there
  assert_equal data[0, data.size - 13], p["bin"]
end

assert('Multipart.parse: preamble and a part without headers') do
  body = "preamble\r\n--b\r\n\r\nno headers\r\n--b\r\nContent-Disposition: form-data; name=x\r\n\r\nv\r\n--b--"
  p = Apache::Multipart.parse(body, "b", 10)
  assert_equal({ "x" => "v" }, p.to_h)
  assert_false p.truncated?
end

assert('Multipart.parse: the parts limit truncates') do
  body = mp((1..5).map { |i| ["Content-Disposition: form-data; name=\"f#{i}\"", "v"] })
  p = Apache::Multipart.parse(body, "b0undary", 3)
  assert_equal %w[f1 f2 f3], p.keys
  assert_true p.truncated?
end

assert('Multipart.parse: damaged bodies are truncated, not errors') do
  body = mp([['Content-Disposition: form-data; name="a"', "1"], ['Content-Disposition: form-data; name="b"', "2"]])
  [body[0, body.size - 30], "junk", "--b0undary", "--b0undary\r\n" + "H" * 9000].each do |bad|
    p = Apache::Multipart.parse(bad, "b0undary", 10)
    assert_true p.truncated?, bad.inspect[0, 60]
  end
  assert_false Apache::Multipart.parse("", "b0undary", 10).truncated?
end

assert('Multipart.parse: random damage never raises') do
  rnd = Random.new(7)
  base = mp([['Content-Disposition: form-data; name="a"; filename="q"', "x" * 50],
             ['Content-Disposition: form-data; name="b"', "yy"]])
  400.times do
    s = base.dup
    rnd.rand(6).times { s.setbyte(rnd.rand(s.size), rnd.rand(256)) }
    s = s[0, rnd.rand(s.size + 1)]
    p = Apache::Multipart.parse(s, "b0undary", 5)
    assert_true p.is_a?(Apache::Params)
    assert_true p.size <= 5
  end
  300.times do
    s = (1..rnd.rand(200)).map { ["--b0undary", "\r\n", "\r\n\r\n", "--", "a", "Content-Disposition: form-data; name=\"z\""][rnd.rand(6)] }.join
    assert_true Apache::Multipart.parse(s, "b0undary", 5).is_a?(Apache::Params)
  end
end
