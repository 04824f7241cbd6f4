# jwt_auth.rb: "Authorization: Bearer JWT" checked against the identity
# provider's keys in jwks.json (next to this script): the signature, by
# the one algorithm its key is for, then the issuer, the audience and the
# time the token is valid in. A valid token lets the request through as
# its subject (r.user); anything else gets a 401 with a challenge.
module JwtAuth
  KEYS_FILE = File.join(File.dirname(__FILE__), "jwks.json")
  ISSUER = "https://id.example.com/"
  AUDIENCE = "orders-api"
  # Seconds the provider's clock and ours may differ by.
  LEEWAY = 30
  # jwks.json is read again every REFRESH seconds; its keys are parsed
  # only when its text changed, and kept in this thread's VM.
  REFRESH = 60
  # What each key's "alg" may be. Never "none"; the HS algorithms only
  # for a key of kty "oct" (a shared secret, "k"), the others only for a
  # public key, so a token cannot pick how its signature is checked.
  PUBLIC_ALGS = %w[RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384 ES512 EdDSA]
  HMAC_ALGS = {"HS256" => "SHA256", "HS384" => "SHA384", "HS512" => "SHA512"}

  class Invalid < StandardError; end

  # {kid => [alg, key]}: an OpenSSL::PKey, or the secret of an HS key.
  def self.parse_keys(text)
    table = {}
    JSON.parse(text)["keys"].each do |jwk|
      kid, alg = jwk["kid"], jwk["alg"]
      raise "#{KEYS_FILE}: every key needs a \"kid\"" unless kid.is_a?(String)
      if HMAC_ALGS[alg] && jwk["kty"] == "oct"
        secret = Base64.urlsafe_decode64(jwk["k"].to_s)
        raise "#{KEYS_FILE}: #{kid}: a secret of #{secret.bytesize} bytes (32 at least)" if secret.bytesize < 32
        table[kid] = [alg, secret]
      elsif PUBLIC_ALGS.include?(alg) && jwk["kty"] != "oct"
        table[kid] = [alg, OpenSSL::PKey.from_jwk(jwk)]
      else
        raise "#{KEYS_FILE}: #{kid}: \"alg\" #{alg.inspect} is not one for a key of kty #{jwk["kty"].inspect}"
      end
    end
    table
  end

  def self.keys
    now = Time.now.to_f
    return @keys if @keys && now - @read_at < REFRESH
    @read_at = now
    text = File.read(KEYS_FILE)
    @keys, @text = parse_keys(text), text unless text == @text
    @keys
  end

  def self.decode(part)
    raise Invalid, "a part that is not base64url" unless part =~ /\A[A-Za-z0-9_-]*\z/
    Base64.urlsafe_decode64(part)
  end

  def self.object(part)
    value = JSON.parse(decode(part))
    raise Invalid, "a part that is not a JSON object" unless value.is_a?(Hash)
    value
  end

  # The token's claims, once every check passed; Invalid otherwise.
  def self.verify(token, now)
    parts = token.split(".", -1)
    raise Invalid, "not three parts" unless parts.size == 3
    header = object(parts[0])
    alg, kid = header["alg"], header["kid"]
    raise Invalid, "a \"crit\" header" if header.key?("crit")
    key_alg, key = keys[kid]
    raise Invalid, "no key #{kid.inspect}" unless key
    raise Invalid, "alg #{alg.inspect} for the #{key_alg} key #{kid.inspect}" unless alg == key_alg
    input = "#{parts[0]}.#{parts[1]}"
    signature = decode(parts[2])
    ok = if HMAC_ALGS[alg]
           OpenSSL.secure_compare(OpenSSL::HMAC.digest(HMAC_ALGS[alg], key, input), signature)
         else
           key.verify_jws(alg, signature, input)
         end
    raise Invalid, "a wrong signature" unless ok
    claims = object(parts[1])
    exp, nbf, aud = claims["exp"], claims["nbf"], claims["aud"]
    raise Invalid, "no \"exp\"" unless exp.is_a?(Numeric)
    raise Invalid, "expired" if now >= exp + LEEWAY
    raise Invalid, "not valid yet" if nbf && !(nbf.is_a?(Numeric) && now >= nbf - LEEWAY)
    raise Invalid, "issuer #{claims["iss"].inspect}" unless claims["iss"] == ISSUER
    raise Invalid, "audience #{aud.inspect}" unless aud == AUDIENCE || (aud.is_a?(Array) && aud.include?(AUDIENCE))
    raise Invalid, "no \"sub\"" unless claims["sub"].is_a?(String) && !claims["sub"].empty?
    claims
  end

  def self.refuse(r, error = nil)
    challenge = 'Bearer realm="orders"'
    challenge += ", error=\"#{error}\"" if error
    r.err_headers_out["WWW-Authenticate"] = challenge
    Apache.return Apache::HTTP_UNAUTHORIZED
  end
end

r = Apache::Request.new
scheme, token = r.headers_in["Authorization"].to_s.split(" ", 2)
if scheme.to_s.downcase != "bearer" || token.to_s.strip.empty?
  JwtAuth.refuse(r)
  return
end
begin
  claims = JwtAuth.verify(token.strip, Time.now.to_i)
rescue JwtAuth::Invalid, JSON::ParserError, ArgumentError => e
  r.log(Apache::APLOG_WARNING, "JWT refused for #{r.uri}: #{e.message}")
  JwtAuth.refuse(r, "invalid_token")
  return
end
r.user = claims["sub"]
r.ap_auth_type = "Bearer"
# For the application behind: the token's scopes, if it has any.
r.subprocess_env["JWT_SCOPE"] = claims["scope"].to_s
