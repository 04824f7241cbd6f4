# session.rb: sessions in a cookie signed with HMAC-SHA256, with the keys
# of session-keys.txt (next to this script). The Handler of /login, where
# httpd has checked the password, gives the user a cookie saying who they
# are and until when; the Handler of /logout takes it back; as an
# AccessChecker (/account) a valid cookie lets the request through as its
# user (r.user), and anything else is sent to /login.
module SignedSession
  KEYS_FILE = File.join(File.dirname(__FILE__), "session-keys.txt")
  COOKIE = "session"
  LOGIN = "/login"
  LOGOUT = "/logout"
  # Where a user goes once logged in (and once logged out: "/").
  HOME = "/account/"
  # How long a session lasts from the login, in seconds.
  MAX_AGE = 8 * 3600
  # The cookie goes over https only. false only to try the recipe on http.
  SECURE = true
  # session-keys.txt is read again every REFRESH seconds: a new key or a
  # removed one applies within that time, without a reload.
  REFRESH = 2

  # {id => key}, and the id of the first key, the one that signs.
  def self.parse_keys(text)
    keys, signer = {}, nil
    text.each_line do |line|
      id, hex = line.split(" ", 2)
      next if id.nil? || id.start_with?("#")
      raise "#{KEYS_FILE}: #{id}: an ID is letters, digits, - and _" unless id =~ /\A[A-Za-z0-9_-]+\z/
      hex = hex.to_s.strip
      raise "#{KEYS_FILE}: #{id}: a key is 64 hex digits or more" unless hex =~ /\A([0-9a-fA-F]{2}){32,}\z/
      keys[id] = [hex].pack("H*")
      signer ||= id
    end
    raise "#{KEYS_FILE} has no key: add one (the file says how)" unless signer
    [keys, signer]
  end

  # The keys, kept in this thread's VM. A file that cannot be read or has
  # no valid key leaves the keys read before in use (and says so in the
  # log); a thread that has none yet raises: the request gets a 500.
  def self.keys(r)
    now = Time.now.to_f
    return @keys if @keys && now - @read_at < REFRESH
    @read_at = now
    begin
      text = File.read(KEYS_FILE)
      @keys, @text = parse_keys(text), text unless text == @text
    rescue StandardError => e
      raise e unless @keys
      r.log(Apache::APLOG_ERR, "#{e.message}: keeping the keys read before")
    end
    @keys
  end

  def self.mac(key, data)
    Base64.urlsafe_encode64(OpenSSL::HMAC.digest("SHA256", key, data), padding: false)
  end

  # "USER.EXPIRES.ID.MAC": the user in base64url, when the session ends
  # (Unix time), the id of the key, and the HMAC of the three.
  def self.issue(r, user, now)
    keys, signer = keys(r)
    data = [Base64.urlsafe_encode64(user, padding: false), (now + MAX_AGE).to_s, signer].join(".")
    data + "." + mac(keys[signer], data)
  end

  # [user, nil] for a valid cookie, else [nil, why].
  def self.check(r, value, now)
    return [nil, nil] if value.nil? || value.empty?
    parts = value.split(".", -1)
    return [nil, "a session cookie that is not signed"] unless parts.size == 4
    key = keys(r)[0][parts[2]]
    return [nil, "a session cookie of an unknown key"] unless key
    # Compared in a time that says nothing of how much of it was right.
    unless OpenSSL.secure_compare(mac(key, parts[0, 3].join(".")), parts[3])
      return [nil, "a session cookie whose signature does not match"]
    end
    return [nil, "an expired session cookie"] unless parts[1].to_i > now
    [Base64.urlsafe_decode64(parts[0]), nil]
  end

  def self.set(r, value, max_age)
    r.set_cookie(COOKIE, value, path: "/", max_age: max_age, secure: SECURE, httponly: true, samesite: "Lax")
  end
end

r = Apache::Request.new
now = Time.now.to_i
if Apache.phase == "AccessChecker"
  value = r.cookies[SignedSession::COOKIE]
  user, why = SignedSession.check(r, value, now)
  if user
    r.user = user
    r.ap_auth_type = "session"
  else
    r.log(Apache::APLOG_WARNING, "#{why} for #{r.uri}: sent to #{SignedSession::LOGIN}") if why
    SignedSession.set(r, "", 0) if value
    Apache.redirect(SignedSession::LOGIN)
  end
elsif r.uri == SignedSession::LOGOUT
  SignedSession.set(r, "", 0)
  Apache.redirect("/", 303)
else
  raise "#{r.uri}: no user (the section needs Require valid-user)" unless r.user
  SignedSession.set(r, SignedSession.issue(r, r.user, now), SignedSession::MAX_AGE)
  Apache.redirect(SignedSession::HOME, 303)
end
