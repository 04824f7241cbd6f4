class Apache
  module Async
    # mod_mruby runs a script that may sleep in a fiber made here: a fiber's
    # block must be a real block, and instance_exec gives the script the
    # top-level self it has when it runs directly.
    def self.__fiber(top, script)
      Fiber.new { top.instance_exec(&script) }
    end
  end
end
