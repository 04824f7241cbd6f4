assert('require accepts the built-in feature names') do
  assert_false require('Apache')
  assert_false require('apache')
  assert_false require('mod_mruby')
  assert_false require('Apache.rb')
  assert_false require('json')
  %w[digest digest/md5 digest/sha1 digest/sha2 openssl base64 securerandom].each do |f|
    assert_false require(f)
  end
end

assert('require of anything else raises LoadError') do
  e = assert_raise(LoadError) { require 'yaml' }
  assert_true e.message.start_with?('cannot load such file -- yaml')
  assert_raise(LoadError) { require 'Apache/extra' }
end

assert('LoadError is a ScriptError') do
  assert_true LoadError.ancestors.include?(ScriptError)
end
