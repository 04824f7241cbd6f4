class Apache
  # Apache.echo(obj): obj.to_s and a newline.
  def self.echo(obj)
    rputs("#{obj}\n")
  end

  class Table
    include Enumerable

    # Yields each [name, value]; a repeated name is yielded once per value.
    def each(&block)
      return to_enum(:each) unless block
      to_a.each { |pair| block.call(*pair) }
      self
    end

    def keys
      to_a.map { |pair| pair[0] }.uniq
    end

    # A Hash of the entries; for a repeated name, its first value (as #[]).
    def to_h
      h = {}
      to_a.each { |k, v| h[k] = v unless h.key?(k) }
      h
    end
    alias all to_h
  end

  class Headers_in
    def user_agent
      self["User-Agent"]
    end

    def referer
      self["Referer"]
    end
  end
end

module Kernel
  # The server's class, as in scripts shared with ngx_mruby.
  def get_server_class
    Apache
  end
end
