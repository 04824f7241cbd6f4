"""The threads of a child share their VMs' method tables
(patches/mruby/method-tables-shared.patch): every VM's start defines the
same methods, so a table that holds the same bytes in each is kept once per
child, and a VM that changes one of its classes gets a copy of its own
first. Shown with two requests that meet (each waits for the other's mark,
so they run in two threads, two VMs, at once): one removes a method of a
module its VM shares (Comparable, included in Integer and String) and
defines others there and in Apache::Request; the other VM keeps what it
had. Under prefork the two requests are two children, and nothing is
shared: the same checks hold. And the methods that the VM's start called,
aliased or made with attr_reader (put back as methods without a Proc
before their tables are shared) and the classes left without a table (an
empty one is freed) behave as written, in every VM."""

import concurrent.futures
import uuid

from httpd import ONE_CHILD, module_httpd

SCRIPT = r'''
me, other, mutate = Apache::Request.new.args.split(',')
dir = File.dirname(__FILE__) + '/meet/'
if mutate == 'mutate'
  module Comparable
    remove_method :between?
    def mm_shared_probe; 'probe'; end
  end
  class Apache::Request
    def mm_request_probe; 'request'; end
  end
end
File.open(dir + me, 'w') { |f| f.write 'here' }
deadline = Time.now + 30
nil until File.exist?(dir + other) || Time.now > deadline
state = [
  File.exist?(dir + other) ? 'met' : 'alone',
  5.respond_to?(:between?) ? 5.between?(1, 9).to_s : 'no-between',
  'a'.respond_to?(:mm_shared_probe) ? 'a'.mm_shared_probe : 'no-probe',
  Apache::Request.new.respond_to?(:mm_request_probe) ? Apache::Request.new.mm_request_probe : 'no-request',
  ([3, 1, 2].sort_by { |x| -x } == [3, 2, 1]).to_s,
  Comparable.instance_methods(false).include?(:clamp).to_s,
]
Apache.rputs state.join(' ')
'''

SETUP_SCRIPT = r'''
m = /(b)(c)/.match('abc')
name = begin
  no_such_method_here
rescue NameError => e
  e.name
end
err = Apache::HTTPError.new(404)
class KeyError
  def mm_keyed; 'keyed'; end
end
checks = {
  alias_in_gem: m.length == 3 && m.size == 3,
  attr_in_gem: m.string == 'abc' && m.regexp.source == '(b)(c)',
  attr_and_super: err.status == 404 && err.message == 'HTTP status 404',
  alias_through_module: (1..3).map { |x| x * 2 } == [2, 4, 6] && (1..4).reduce(:+) == 10,
  alias_in_core: [1, 2].map! { |x| x + 1 } == [2, 3] && [3].entries == [3],
  attr_in_core: name == :no_such_method_here,
  kind_of_empty: !ArgumentError.new.is_a?(IndexError) && KeyError.new.is_a?(IndexError) &&
                 !Class.new(StandardError).new.is_a?(RuntimeError) && ZeroDivisionError.new.is_a?(StandardError) &&
                 !TypeError.new.is_a?(KeyError),
  first_method: KeyError.new.mm_keyed == 'keyed' && KeyError.instance_methods(false).include?(:mm_keyed),
}
# The Procs the start made of aliases and accessors, each with an
# environment, are left to the collector: a VM held 92 environments after
# its start when they were kept, 15 now (and one per such method called).
GC.start
envs = ObjectSpace.count_objects[:T_ENV]
Apache.rputs "#{checks.size} #{checks.reject { |_, ok| ok }.keys.inspect} #{envs < 50} #{envs}"
'''

server = module_httpd("shared_tables", r"""
<Location /shared>
    SetHandler mruby-native-script
    mrubyHandler {root}/shared.rb
</Location>
<Location /setup>
    SetHandler mruby-native-script
    mrubyHandler {root}/setup.rb
</Location>
""", files={"shared.rb": SCRIPT, "setup.rb": SETUP_SCRIPT}, mpm_conf=ONE_CHILD)


def meet(server, first, second):
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    server.shared_dir("meet")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        ra = pool.submit(server.get, "/shared?%s,%s,%s" % (a, b, first))
        rb = pool.submit(server.get, "/shared?%s,%s,%s" % (b, a, second))
        return ra.result(), rb.result()


def test_a_vm_that_changes_a_shared_class_keeps_the_change_to_itself(server):
    changed, kept = meet(server, "mutate", "look")
    assert changed.status == 200 and kept.status == 200, server.error_log()[-1500:]
    assert changed.text == "met no-between probe request true true", changed.text
    assert kept.text == "met true no-probe no-request true true", kept.text
    # and two VMs that changed nothing (the changed one may be one of them)
    for r in meet(server, "look", "look"):
        assert r.status == 200, server.error_log()[-1500:]
        assert r.text.startswith("met ") and r.text.endswith(" true true"), r.text
        assert r.text in ("met true no-probe no-request true true",
                          "met no-between probe request true true"), r.text
    assert ":error]" not in server.error_log()


def test_methods_of_the_vms_start_and_classes_without_a_table_behave_as_written(server):
    # several requests at once: several VMs, each answering on its first
    # request too
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: server.get("/setup"), range(12)))
    for r in answers:
        assert r.status == 200, server.error_log()[-1500:]
        n, failed, few, envs = r.text.split(" ")
        assert (n, failed) == ("8", "[]"), r.text
        assert few == "true", envs
    assert ":error]" not in server.error_log()
