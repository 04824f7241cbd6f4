"""A method written in Ruby gets its Proc when it is first looked up, not
when its `def` runs (patches/mruby/method-procs-lazy.patch): a VM's gems
define some 750 methods in Ruby, and their Procs were half of its objects.
What a method does does not change: constants are found where it was
written, `super` goes on from the class it was defined in (a subclass, an
included or prepended module, a class made by Class.new), a copy of a class
or of an object with singleton methods has them, `alias` and
`method_added` see them, a method defined twice is the second one, and an
exception raised in one is reported at its line. On every MPM, each request
checks its worker's VM."""

from httpd import module_httpd

SCRIPT = r'''
def lazy_helper; 'top'; end

module LazyOuter
  SCOPE = 'outer'
  class Base
    def kind; 'base'; end
    def where; SCOPE; end
    def orig; 'orig'; end
    alias_method :copy, :orig
    alias copy2 orig
  end
  class Child < Base
    def kind; 'child<' + super; end
  end
  module Loud
    def kind; super.upcase; end
  end
  class Prepended < Base
    prepend Loud
    def kind; 'pre<' + super; end
  end
  module Greeting
    PREFIX = 'hi '
    def greet(name); PREFIX + name; end
  end
  class Greeter; include Greeting; end
end

class LazyHooked
  @added = []
  def self.method_added(m); @added << m; end
  def self.added; @added; end
  def a; end
  def b; end
end

class LazyRedef
  def v; 1; end
  def v; 2; end
  def gone; end
  remove_method :gone
end

class LazyBoom
  def boom
    raise ArgumentError, 'lazy boom'
  end
end

anon = Class.new(LazyOuter::Base) { def kind; "anon<#{super}"; end }
copied = LazyOuter::Base.dup
single = Object.new
def single.hello; 'hello'; end

if Apache::Request.new.uri == '/lazy/boom'
  LazyBoom.new.boom
end

checks = {
  top: lazy_helper == 'top',
  lexical: LazyOuter::Child.new.where == 'outer',
  super: LazyOuter::Child.new.kind == 'child<base',
  prepend: LazyOuter::Prepended.new.kind == 'PRE<BASE',
  include: LazyOuter::Greeter.new.greet('x') == 'hi x',
  class_new: anon.new.kind == 'anon<base',
  dup: copied.new.where == 'outer' && copied.new.kind == 'base',
  clone: single.clone.hello == 'hello',
  alias: LazyOuter::Base.new.copy == 'orig' && LazyOuter::Base.new.copy2 == 'orig',
  added: LazyHooked.added.last(2) == [:a, :b],
  listed: LazyHooked.instance_methods(false).sort == [:a, :b],
  redef: LazyRedef.new.v == 2 && !LazyRedef.method_defined?(:gone),
  respond: LazyOuter::Greeter.new.respond_to?(:greet),
  owner: LazyOuter::Greeter.instance_method(:greet).owner == LazyOuter::Greeting,
}
failed = checks.reject { |_, ok| ok }.keys
# The gems' methods have no Proc until a script calls them: a VM held
# about 800 Procs after its start when each had one.
procs = ObjectSpace.count_objects[:T_PROC]
Apache.rputs "#{checks.size} #{failed.inspect} #{procs < 400} #{procs}"
'''

server = module_httpd("lazy_methods", r"""
<Location /lazy>
    SetHandler mruby-native-script
    mrubyHandler {root}/lazy.rb
</Location>
""", files={"lazy.rb": SCRIPT})


def test_methods_made_at_their_first_call_behave_as_written(server):
    for _ in range(4):
        r = server.get("/lazy")
        assert r.status == 200, server.error_log()[-1500:]
        n, failed, few, procs = r.text.split(" ")
        assert (n, failed) == ("14", "[]"), r.text
        assert few == "true", procs
    assert ":error]" not in server.error_log()


def test_an_exception_in_such_a_method_is_reported_at_its_line(server):
    server.expect("/lazy/boom", 500, r"raised ArgumentError at \S*lazy\.rb:47: lazy boom \[backtrace: \S*lazy\.rb:47:in boom")
