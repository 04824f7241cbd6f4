# build_config.rb: the libmruby.a that mod_mruby links when configured with
# --with-mruby-source=DIR (an mruby 3.1 source tree, e.g. from
# `apt-get source mruby`). The Makefile runs `rake` in DIR with
# MRUBY_CONFIG pointing here; nothing is downloaded.
#
# The library is built position-independent (it goes into a shared object)
# with the same standard gems as Debian's libmruby, plus this project's
# gem, so a script behaves the same on both build paths.

MRuby::Build.new do |conf|
  # MM_MRUBY_CC=clang: the libmruby of the fuzzing harnesses (tools/fuzz).
  conf.toolchain(ENV['MM_MRUBY_CC'] == 'clang' ? :clang : :gcc)

  # Where the Makefile wants the build (build/mruby in the module's tree).
  conf.build_dir = File.join(ENV['MM_MRUBY_BUILD_DIR'], conf.name) if ENV['MM_MRUBY_BUILD_DIR']

  conf.cc.flags << '-fPIC' << '-O2' << '-g'

  # mruby calls a hook before every instruction: mrubyTimeout uses it to stop
  # scripts that run too long. (Debian's libmruby has no such hook.)
  conf.cc.defines << 'MRB_USE_DEBUG_HOOK'

  # Variants for the reliability checks (script/build-source VARIANT sets
  # these); the normal build has none of them.
  # MM_MRUBY_SANITIZE=address,undefined: libmruby instrumented like the module.
  if (sanitize = ENV['MM_MRUBY_SANITIZE']) && !sanitize.empty?
    conf.cc.flags << "-fsanitize=#{sanitize}" << '-fno-omit-frame-pointer'
    conf.linker.flags << "-fsanitize=#{sanitize}"
  end
  # MM_MRUBY_GC_STRESS=1: a full collection before every allocation, which
  # finds objects that C code keeps without protecting them from the GC.
  conf.cc.defines << 'MRB_GC_STRESS' if ENV['MM_MRUBY_GC_STRESS'] == '1'
  # The variants compile the Ruby parts with the system's mrbc (the same
  # mruby 3.1), not with an mrbc built, and slowed down, like the library.
  conf.mrbcfile = ENV['MM_MRUBY_MRBC'] if ENV['MM_MRUBY_MRBC'] && !ENV['MM_MRUBY_MRBC'].empty?

  conf.gembox 'stdlib'
  conf.gembox 'stdlib-ext'
  conf.gembox 'stdlib-io'
  conf.gembox 'math'
  conf.gembox 'metaprog' # includes mruby-compiler: scripts are compiled at run time

  # The Ruby half of mod_mruby's API.
  gem_dir = ENV['MM_GEM_DIR'] || File.join(File.dirname(File.expand_path(__FILE__)), 'mrbgems')
  conf.gem File.join(gem_dir, 'mruby-apache')
end
