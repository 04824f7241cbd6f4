# The Ruby half of mod_mruby's API: helpers that need no httpd headers.
# With the system libmruby, the module compiles mrblib/ with mrbc and loads
# it into every VM; with the mruby source build, build_config.rb adds this gem
# to libmruby.a. test/ holds its tests (mrbtest format; see test/gem_test.py
# for running them with the system mruby).
MRuby::Gem::Specification.new('mruby-apache') do |spec|
  spec.license = 'MIT'
  spec.authors = 'mod_mruby developers'
  spec.summary = 'Ruby helpers of the mod_mruby API (Apache, Apache::Request, tables, require)'
end
