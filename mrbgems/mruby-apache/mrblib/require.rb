module Kernel
  # Everything mod_mruby offers is built into the VM, so `require` only
  # accepts the names scripts for mod_mruby traditionally require, and
  # those of the libraries built in too (JSON, Digest, OpenSSL, Base64,
  # SecureRandom).
  def require(name)
    feature = name.to_s
    [".rb", ".mrb"].each do |ext|
      feature = feature[0, feature.size - ext.size] if feature.end_with?(ext)
    end
    return false if %w[Apache apache mod_mruby json digest digest/md5 digest/sha1 digest/sha2 openssl base64
                       securerandom].include?(feature)
    raise LoadError, "cannot load such file -- #{name} (mod_mruby has no load path; only built-in features can be required)"
  end
end
