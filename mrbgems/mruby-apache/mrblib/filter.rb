class Apache
  # The Ruby half of Apache::Filter (the C half: flatten, cleanup,
  # insert_head, insert_tail, buffered?, ...).
  class Filter
    # mod_mruby's puts: appends the string as it is (no newline).
    def puts(str)
      insert_tail(str)
    end

    # The data this run sees: the whole body in buffer mode, the chunk
    # otherwise.
    def data
      flatten
    end

    # Replaces the data this run sees.
    def data=(str)
      cleanup
      insert_tail(str)
    end

    # The whole response body (output filters in buffer mode only).
    def body
      __whole_body!('body')
      flatten
    end

    # Replaces the whole response body (output filters in buffer mode only).
    def body=(str)
      __whole_body!('body=')
      self.data = str
    end

    # The owner and group of the file the request serves (the original
    # mod_mruby's names), nil when it serves none.
    def uid
      finfo = __served_file
      finfo && finfo.user
    end

    def gid
      finfo = __served_file
      finfo && finfo.group
    end

    private

    def __served_file
      finfo = Request.new.finfo
      finfo unless finfo.filetype == Finfo::APR_NOFILE
    end

    def __whole_body!(name)
      return if buffered?
      raise RuntimeError, "Apache::Filter##{name} needs the whole body, which only an output filter in " \
                          "buffer mode sees; use #data and #data= for the piece this run sees"
    end
  end
end
