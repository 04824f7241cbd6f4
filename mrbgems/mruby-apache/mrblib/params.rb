class Apache
  # Parsed query or form fields: a Hash of name => value (the last value of
  # a repeated name; values_of(name) has them all). A multipart file field's
  # value is an Apache::FormFile. truncated? is true when input was dropped
  # (mrubyFormFieldsLimit, or a malformed multipart body).
  class Params < Hash
    def self.__from_pairs(pairs, truncated = false)
      params = new
      pairs.each { |name, value| params.__add(name, value) }
      params.__truncated = true if truncated
      params
    end

    def __add(name, value)
      (@all ||= {})[name] ||= []
      @all[name] << value
      self[name] = value
    end

    def values_of(name)
      @all && @all[name] ? @all[name].dup : []
    end

    def truncated?
      @truncated == true
    end

    def __truncated=(flag)
      @truncated = flag ? true : false
    end
  end

  # A file sent in a multipart form.
  class FormFile
    attr_reader :name, :filename, :content_type, :headers, :body

    def initialize(name, filename, content_type, headers, body)
      @name = name
      @filename = filename
      @content_type = content_type
      @headers = headers
      @body = body
    end

    def size
      @body.size
    end

    def to_s
      @body
    end
  end
end
