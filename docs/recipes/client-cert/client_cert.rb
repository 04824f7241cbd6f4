# client_cert.rb: the client's verified certificate names the user. mod_ssl
# checks the certificate against the CA (SSLCACertificateFile and
# SSLVerifyClient optional in the https virtual host); this script maps
# its subject DN to a user name from client-certs.txt (next to it) and
# refuses anyone else with 403: no TLS, no certificate, one mod_ssl could
# not verify, or one whose subject is not in the file.
CLIENT_CERTS_FILE = File.join(File.dirname(__FILE__), "client-certs.txt")

# The table is kept in this thread's VM and read again from the file every
# CLIENT_CERTS_REFRESH seconds: a new partner, or one removed, applies
# within that time, without a reload.
CLIENT_CERTS_REFRESH = 2

# The "USER SUBJECT-DN" lines of the file as {dn => user}.
def client_cert_users
  now = Time.now.to_f
  return $client_cert_users if $client_cert_users && now - $client_cert_users_at < CLIENT_CERTS_REFRESH
  table = {}
  File.read(CLIENT_CERTS_FILE).each_line do |line|
    line = line.strip
    next if line.empty? || line.start_with?("#")
    user, dn = line.split(" ", 2)
    table[dn.strip] = user if dn
  end
  $client_cert_users, $client_cert_users_at = table, now
  table
end

r = Apache::Request.new
verify = r.ssl_var("SSL_CLIENT_VERIFY") # nil without TLS
dn = r.ssl_var("SSL_CLIENT_S_DN")       # nil without a certificate
user = client_cert_users[dn] if verify == "SUCCESS" && dn
unless user
  r.log(Apache::APLOG_WARNING, "#{r.uri}: refused (TLS: #{r.ssl?}, verify: #{verify.inspect}, " +
                               "subject: #{dn.inspect})")
  Apache.return Apache::HTTP_FORBIDDEN
  return
end
r.user = user
r.ap_auth_type = "Certificate"
