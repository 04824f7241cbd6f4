class Apache
  class Request
    # Hands the request to mod_proxy as a reverse proxy to url (as
    # mod_mruby's scripts did in the translate_name phase).
    def reverse_proxy(url)
      raise TypeError, "reverse_proxy: the URL must be a String" unless url.is_a?(String)
      self.handler = "proxy-server"
      self.proxyreq = Apache::PROXYREQ_REVERSE
      self.filename = "proxy:" + url
      # The URI is mapped: in TranslateName, httpd must not map it again
      # (scripts written for mod_mruby end here without Apache.return).
      Apache.return Apache::OK
    end

    # A subrequest of this request for uri (a path of this server), run by
    # httpd (handlers, mod_proxy, filters) with its response kept: an
    # Apache::HTTP::Response. Blocks the thread while it runs.
    def subrequest(uri, method: 'GET', headers: {}, body: nil, max_size: 8 * 1024 * 1024)
      flat = []
      headers.each { |k, v| flat << k.to_s << v.to_s }
      status, fields, body, too_large = __subrequest(method.to_s.upcase, uri, flat, body, max_size)
      raise Apache::HTTP::TooLarge, 'subrequest: the response body is larger than max_size' if too_large
      Apache::HTTP::Response.new(status, Apache::HTTP::Headers.new(fields), body)
    end

    # The three methods below keep their result on the object; each calls
    # __check first, which raises for an object of an ended request as the
    # C methods do, so a kept object never answers with an old request's data.

    # The query string as Apache::Params (name => value).
    def query_params
      __check
      @query_params ||= Params.__from_pairs(*__query_pairs)
    end

    # The body of a form POST (urlencoded or multipart) as Apache::Params;
    # empty for other content types. Reading it keeps the body for others.
    def form_params
      __check
      @form_params ||= begin
        ct = headers_in["Content-Type"].to_s
        type = ct.split(";", 2)[0].to_s.strip.downcase
        if type == "application/x-www-form-urlencoded"
          Params.__from_pairs(*__form_pairs)
        elsif type == "multipart/form-data"
          boundary = Multipart.boundary(ct)
          raise Apache::HTTPError.new(400, "multipart/form-data without a boundary") unless boundary
          Multipart.parse(body.to_s, boundary, __fields_limit)
        else
          Params.new
        end
      end
    end

    # The request's cookies, name => value (the first of a repeated name).
    def cookies
      __check
      @cookies ||= Cookie.parse(headers_in.get_all("Cookie").join("; "))
    end

    # Adds a Set-Cookie header (kept on error pages and redirects too).
    # attrs: path, domain, expires (Time or String), max_age, secure,
    # httponly, samesite.
    def set_cookie(name, value, attrs = {})
      err_headers_out.add("Set-Cookie", Cookie.build(name, value, attrs))
    end
  end
end
