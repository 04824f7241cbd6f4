class Counter
  attr_reader :n
  def initialize(start = 0, step: 1) @n = start; @step = step end
  def bump(*more, &blk) @n += @step + more.size; blk&.call(@n); self end
end
c = Counter.new(2, step: 3)
begin
  [1, 2, 3].each { |i| c.bump(i) { |n| raise ArgumentError, "big" if n > 100 } }
rescue ArgumentError => e
  $err = e.message
ensure
  $done = true
end
h = { a: 1, "b" => [1, *[2, 3]], c: 1..4 }
x, *rest = h.values
case c.n when 0 then :zero when 1..10 then :small else :big end
def self.helper(a, b = a * 2, *r, k: nil, **o) [a, b, r, k, o] end
helper(1, k: 2)
