# A minimal stand-in for mruby's mrbtest assertions, so gem tests written
# for `rake test` also run with the system `mruby` binary (test_gem.py).
$mm_ok = 0
$mm_failures = []

class MMAssertionFailed < StandardError; end

def assert(name = 'assert')
  yield
  $mm_ok += 1
rescue Exception => e
  $mm_failures << "#{name}: #{e.class}: #{e.message}"
end

def mm_fail(msg)
  raise MMAssertionFailed, msg
end

def assert_true(v, msg = nil)
  mm_fail(msg || "expected true, got #{v.inspect}") unless v == true
end

def assert_false(v, msg = nil)
  mm_fail(msg || "expected false, got #{v.inspect}") unless v == false
end

def assert_equal(expected, actual, msg = nil)
  mm_fail(msg || "expected #{expected.inspect}, got #{actual.inspect}") unless expected == actual
end

def assert_nil(v, msg = nil)
  mm_fail(msg || "expected nil, got #{v.inspect}") unless v.nil?
end

def assert_raise(*classes)
  begin
    yield
  rescue MMAssertionFailed
    raise
  rescue Exception => e
    return e if classes.empty? || classes.any? { |c| e.is_a?(c) }
    mm_fail("expected #{classes.inspect}, got #{e.class}: #{e.message}")
  end
  mm_fail("expected #{classes.inspect} to be raised")
end

def mm_report
  $mm_failures.each { |f| puts "FAIL #{f}" }
  puts "#{$mm_ok} ok, #{$mm_failures.size} failed"
end
