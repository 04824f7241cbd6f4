# The class tree of the API, declared exactly as the C bindings declare it,
# so that this file and the C side may be loaded in either order.
class Apache
  class Request; end
  class Table; end
  class Headers_in < Table; end
  class Headers_out < Table; end
  class Err_headers_out < Table; end
  class Notes < Table; end
  module Async; end
  class Filter; end
  class AuthnProvider; end
  class AuthzProvider; end
  class Timeout < Exception; end

end

# mruby has no LoadError of its own; require raises it.
class LoadError < ScriptError; end unless Object.const_defined?(:LoadError)
