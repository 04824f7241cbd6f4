# The class tree of the API, declared exactly as the C bindings declare it,
# so that this file and the C side may be loaded in either order.
class Apache
  class HTTPError < StandardError; end
  class Request; end
  class Table; end
  class Headers_in < Table; end
  class Headers_out < Table; end
  class Err_headers_out < Table; end
  class Notes < Table; end
  class Env < Table; end
  class Connection; end
  class Server; end
  class Scoreboard; end
  class Finfo; end
  class Input; end
  module Async; end
  class Filter; end
  class AuthnProvider; end
  class AuthzProvider; end
  class Timeout < Exception; end

  class Cache
    class Error < StandardError; end
  end

  class Socket
    class Error < StandardError; end
    class Timeout < Error; end
    class ConnectError < Error; end
  end

  class Redis
    class Error < StandardError; end
    class Reader; end
  end

  module HTTP
    class Error < StandardError; end
    class Timeout < Error; end
    class ConnectError < Error; end
    class TLSError < Error; end
    class TooLarge < Error; end
  end
end

# Regexp is C (rb_regexp.c, on PCRE2); MatchData is Ruby (regexp.rb).
class Regexp; end
class MatchData; end

# mruby has no LoadError of its own; require raises it.
class LoadError < ScriptError; end unless Object.const_defined?(:LoadError)
