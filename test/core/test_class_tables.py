"""A VM's classes hold what they were given after their tables are shrunk
to what they hold (src/core/vm.c, patches/mruby/class-tables-compact.patch):
every method and constant of every class and module is found by name, and
a script that adds methods and constants to a class whose table is full
grows it as before; the classes that stand for an included module in an
ancestry, which share its tables, see them before and after they grow. On
every MPM, each request checks its worker's VM."""

from httpd import module_httpd

SCRIPT = r'''
missing = []
methods = constants = 0
mods = []
ObjectSpace.each_object(Module) { |m| mods << m }
mods.each do |m|
  m.instance_methods(false).each do |name|
    methods += 1
    missing << "#{m}##{name}" unless m.method_defined?(name)
  end
  m.singleton_class.instance_methods(false).each do |name|
    methods += 1
    missing << "#{m}.#{name}" unless m.respond_to?(name)
  end
  names = begin
    m.constants(false)
  rescue NotImplementedError # Module.constants and Class.constants, in mruby
    []
  end
  names.each do |name|
    constants += 1
    missing << "#{m}::#{name}" unless m.const_defined?(name, false)
  end
end

# A class with one method of its own: its table has one slot.
small = mods.find { |m| m.is_a?(Class) && m.instance_methods(false).size == 1 && m.name }
old = small.instance_methods(false)
40.times { |i| small.send(:define_method, "tables_m#{i}") { i } }
grown = (0...40).all? { |i| small.method_defined?("tables_m#{i}") } && old.all? { |n| small.method_defined?(n) }
40.times { |i| small.send(:remove_method, "tables_m#{i}") }
shrunk = (0...40).none? { |i| small.method_defined?("tables_m#{i}") } && old.all? { |n| small.method_defined?(n) }

# Constants added to a module that has a few.
40.times { |i| Apache::Async.const_set("TABLES_C#{i}", i) unless Apache::Async.const_defined?("TABLES_C#{i}", false) }
consts = (0...40).all? { |i| Apache::Async.const_get("TABLES_C#{i}") == i }

# Included modules: their classes in each ancestry share the module's
# tables, before and after the module's tables grow.
class TablesWithMath
  include Math
  def pi; PI; end
  def e; TABLES_E; end
end
shared = 3.between?(1, 5) && {a: 2, b: 1}.min_by { |_, v| v } == [:b, 1] && TablesWithMath.new.pi == Math::PI
module Comparable; 20.times { |i| define_method("tables_c#{i}") { i } }; end
module Math; TABLES_E = 2; end
shared &&= 3.tables_c19 == 19 && "a".tables_c0 == 0 && TablesWithMath.new.e == 2
s = "hello"
Apache.rputs [mods.size, methods, constants, missing.size, grown, shrunk, consts && shared, s.upcase,
              Apache::Request.new.method].join(" ") + "\n" + missing.first(5).join(",")
'''

server = module_httpd("class_tables", r"""
<Location /tables>
    SetHandler mruby-native-script
    mrubyHandler {root}/tables.rb
</Location>
""", files={"tables.rb": SCRIPT})


def test_every_method_and_constant_is_found(server):
    for _ in range(3):
        r = server.get("/tables")
        assert r.status == 200, server.error_log()[-1500:]
        line, missing = r.text.split("\n")
        mods, methods, constants, nmissing, grown, shrunk, consts, up, method = line.split(" ")
        assert missing == "" and nmissing == "0"
        # the core's, the gems' and the module's classes, thousands of methods
        assert int(mods) > 200 and int(methods) > 1500 and int(constants) > 300
        assert (grown, shrunk, consts) == ("true", "true", "true")
        assert (up, method) == ("HELLO", "GET")
    assert ":error]" not in server.error_log()
