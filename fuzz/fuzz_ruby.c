/* fuzz_ruby.c: libFuzzer harness for the parsers of the Ruby half of the
 * API (mrbgems/mruby-apache/mrblib): multipart bodies, Cookie headers and
 * the Set-Cookie builder, header parameters. The gem is compiled into the
 * libmruby that tools/fuzz builds; the Ruby driver below feeds one parser
 * per input and checks what it returns. An exception the parser's contract
 * does not allow, or a failed check, aborts: that is a finding.
 *
 * Input: one byte choosing the parser, one byte giving the length of the
 * second argument, that argument, then the first argument (the rest). */

#include <stdint.h>

#include <mruby.h>
#include <mruby/string.h>

#include "ruby_driver.h"

static const char driver[] =
    "def __fuzz_count(params)\n"
    "  params.keys.inject(0) { |n, k| n + params.values_of(k).size }\n"
    "end\n"
    "def __fuzz(which, a, b)\n"
    "  case which % 5\n"
    "  when 0\n"
    "    boundary = Apache::Multipart.boundary('multipart/form-data; boundary=' + b) || 'x'\n"
    "    params = Apache::Multipart.parse(a, boundary, 8)\n"
    "    raise 'not Params' unless params.is_a?(Apache::Params)\n"
    "    raise 'more fields than allowed' if __fuzz_count(params) > 8\n"
    "    params.each do |k, v|\n"
    "      raise 'bad field' unless k.is_a?(String) && (v.is_a?(String) || v.is_a?(Apache::FormFile))\n"
    "    end\n"
    "  when 1\n"
    "    Apache::Cookie.parse(a).each do |k, v|\n"
    "      raise 'bad cookie' unless k.is_a?(String) && !k.empty? && v.is_a?(String)\n"
    "    end\n"
    "  when 2\n"
    "    Apache::HTTPText.params(a).each do |k, v|\n"
    "      raise 'bad parameter' unless k.is_a?(String) && v.is_a?(String)\n"
    "    end\n"
    "  when 3\n"
    "    boundary = Apache::Multipart.boundary(a)\n"
    "    raise 'bad boundary' unless boundary.nil? || (1..70).include?(boundary.size)\n"
    "  else\n"
    "    begin\n"
    "      header = Apache::Cookie.build(a, b)\n"
    "    rescue ArgumentError\n"
    "      return\n"
    "    end\n"
    "    raise 'Cookie.parse does not read back Cookie.build' unless Apache::Cookie.parse(header) == { a => "
    "b }\n"
    "  end\n"
    "end\n";

static mrb_state *mrb;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    mrb = driver_open(driver, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mrb_value args[3];
    size_t blen;
    int ai;

    if (size < 2) {
        return 0;
    }
    blen = data[1] <= size - 2 ? data[1] : size - 2;
    ai = mrb_gc_arena_save(mrb);
    args[0] = mrb_fixnum_value(data[0]);
    args[1] = mrb_str_new(mrb, (const char *)data + 2 + blen, (mrb_int)(size - 2 - blen));
    args[2] = mrb_str_new(mrb, (const char *)data + 2, (mrb_int)blen);
    driver_call(mrb, 3, args);
    mrb_gc_arena_restore(mrb, ai);
    return 0;
}
