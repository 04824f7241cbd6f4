# Userdata: named stores of values that the scripts a VM runs share, as the
# original mod_mruby's (mruby-userdata): Userdata.new.count = 1 in one
# script, Userdata.new.count in a later one. Userdata.new(name) is another
# store. Like a global, a store lives as long as the VM: a thread's, so
# only the requests that thread serves see it.
class Userdata
  def self.__stores
    @__stores ||= {}
  end

  def initialize(name = "mrb_userdata_default_key")
    @store = (Userdata.__stores[name.to_s] ||= {})
  end

  # u.anything = value stores, u.anything reads (nil when never stored).
  def method_missing(name, *args)
    key = name.to_s
    if args.size == 1 && key.end_with?("=") && key.size > 1
      @store[key[0, key.size - 1]] = args[0]
    elsif args.empty? && !key.end_with?("=")
      @store[key]
    else
      super
    end
  end

  def respond_to_missing?(name, include_all = false)
    true
  end
end
