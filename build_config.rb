# build_config.rb: the libmruby.a that mod_mruby links (the default build:
# script/build configures --with-mruby-source=DIR with the mruby 3.1 tree of
# Debian's source package, script/mruby-source, patched by patches/mruby).
# The Makefile runs `rake` in DIR with MRUBY_CONFIG pointing here; nothing
# else is downloaded.
#
# The library is built position-independent (it goes into a shared object)
# with the same standard gems as Debian's libmruby, plus this project's
# gem, so a script behaves the same on both build paths.

MRuby::Build.new do |conf|
  # MM_MRUBY_CC=clang: the libmruby of the fuzzing harnesses (tools/fuzz).
  conf.toolchain(ENV['MM_MRUBY_CC'] == 'clang' ? :clang : :gcc)

  # Where the Makefile wants the build (build/mruby in the module's tree).
  conf.build_dir = File.join(ENV['MM_MRUBY_BUILD_DIR'], conf.name) if ENV['MM_MRUBY_BUILD_DIR']

  # -fno-semantic-interposition: libmruby's functions are private to the
  # module (src/exports.map), so none can be replaced from outside, and the
  # compiler may inline one into another of the same file (mrb_str_cat's
  # mrb_str_modify...): 2,600 fewer instructions for the realistic handler
  # (docs/benchmarks.md).
  conf.cc.flags << '-fPIC' << '-O2' << '-g' << '-fno-semantic-interposition'

  # Values are structs of a word and a type (no boxing): every Float keeps
  # its 64 bits and every Integer up to 2**63 - 1 is a plain value. With
  # mruby 3.1's default word boxing (Debian's build) Floats lose their two
  # lowest bits, and two equal Integers of 2**62 or more, made apart, are
  # not == (docs/building.md).
  conf.cc.defines << 'MRB_NO_BOXING'
  # The object heap grows by pages of 128 slots, not 1,024: a VM's start
  # fills a little more than one page of 1,024, and the second stayed
  # almost empty (docs/benchmarks.md: 24 KiB less per hello-world VM with
  # pages of 256, 7 KiB less again with 128).
  conf.cc.defines << 'MRB_HEAP_PAGE_SIZE=128'
  # Each VM's method cache has 128 entries, not 256 (4 KiB instead of 8 in
  # every mrb_state): the realistic handler runs the same instructions per
  # request; with 64 it ran 0.2 % more (docs/benchmarks.md).
  conf.cc.defines << 'MRB_METHOD_CACHE_SIZE=128'

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
  # MM_MRUBY_INTERPRETER_NO_UBSAN=1 (tools/fuzz): mruby's interpreter loop,
  # src/vm.c, is compiled without UBSan (with ASan still). clang 14 spends
  # 4 to 5 minutes optimizing that one function with UBSan's checks in it
  # (its branch probability and block frequency analyses: 81 % of the
  # time), 28 seconds without them; at -O0 with them, 5 seconds, but the
  # Ruby harness then ran 6 times fewer inputs (docs/testing.md).
  if ENV['MM_MRUBY_INTERPRETER_NO_UBSAN'] == '1'
    interpreter = File.expand_path('src/vm.c', MRUBY_ROOT)
    conf.cc.define_singleton_method(:run) do |outfile, infile, defines = [], paths = [], flags = []|
      flags = [flags, '-fno-sanitize=undefined'].flatten if File.expand_path(infile) == interpreter
      super(outfile, infile, defines, paths, flags)
    end
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
