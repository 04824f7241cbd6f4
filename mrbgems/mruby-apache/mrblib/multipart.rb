class Apache
  # A bounded multipart/form-data parser (RFC 7578) over a body already in
  # memory (itself bounded by mrubyRequestBodyLimit). Parts beyond the
  # fields limit, header blocks over MAX_HEADER_BYTES and a body that ends
  # before its closing delimiter make the result truncated? instead of
  # raising: what could be read is returned.
  module Multipart
    MAX_HEADER_BYTES = 8192
    MAX_BOUNDARY = 70

    # The boundary parameter of a Content-Type, or nil if missing or invalid.
    def self.boundary(content_type)
      b = HTTPText.params(content_type.to_s)["boundary"]
      return nil if b.nil? || b.empty? || b.size > MAX_BOUNDARY
      b.each_byte { |c| return nil if c < 32 || c > 126 }
      b
    end

    def self.parse(body, boundary, max_parts)
      params = Params.new
      delim = "--" + boundary
      pos = body.start_with?(delim) ? 0 : body.index("\r\n" + delim)
      if pos.nil?
        params.__truncated = true unless body.empty?
        return params
      end
      pos += body.start_with?(delim) ? delim.size : delim.size + 2
      count = 0
      loop do
        break if body[pos, 2] == "--" # the closing delimiter: complete
        eol = body.index("\r\n", pos)
        unless eol && eol - pos <= MAX_HEADER_BYTES
          params.__truncated = true
          break
        end
        pos = eol + 2
        if body[pos, 2] == "\r\n"
          head = ""
          data_start = pos + 2
        else
          hend = body.index("\r\n\r\n", pos)
          if hend.nil? || hend - pos > MAX_HEADER_BYTES
            params.__truncated = true
            break
          end
          head = body[pos, hend - pos]
          data_start = hend + 4
        end
        stop = body.index("\r\n" + delim, data_start)
        if stop.nil? || count >= max_parts
          params.__truncated = true
          break
        end
        count += 1
        add_part(params, head, body[data_start, stop - data_start])
        pos = stop + 2 + delim.size
      end
      params
    end

    def self.headers(head)
      h = {}
      head.split("\r\n").each do |line|
        colon = line.index(":")
        next unless colon
        name = line[0, colon].strip.downcase
        h[name] = line[colon + 1, line.size].strip unless h.key?(name)
      end
      h
    end

    def self.add_part(params, head, data)
      h = headers(head)
      disp = HTTPText.params(h["content-disposition"].to_s)
      name = disp["name"]
      return unless name
      if disp.key?("filename")
        params.__add(name, FormFile.new(name, disp["filename"], h["content-type"], h, data))
      else
        params.__add(name, data)
      end
    end
  end
end
