assert('Userdata stores are shared by name') do
  a = Userdata.new
  a.count = 1
  assert_equal 1, Userdata.new.count
  assert_nil Userdata.new('other').count
  Userdata.new('other').count = 2
  assert_equal 1, Userdata.new.count
  assert_equal 2, Userdata.new(:other).count
  assert_equal 3, (a.count = 3)
  assert_true a.respond_to?(:anything)
end

assert('Userdata refuses calls that are neither readers nor writers') do
  assert_raise(NoMethodError) { Userdata.new.get(1) }
  assert_raise(NoMethodError) { Userdata.new.send(:'=', 1) }
  assert_raise(NoMethodError) { Userdata.new.send(:'x=') }
end
