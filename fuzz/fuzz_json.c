/* fuzz_json.c: libFuzzer harness for JSON (src/rb_json.c). Every input is
 * parsed; what parses must generate (plain, pretty, script-safe) text that parses
 * back to values that generate the same text again (compared as text:
 * mruby 3.1's Integer#== is false for two equal Integers past 2**62).
 * Every input is
 * also generated as a String: what generates must parse back to that
 * String. An exception other than the ones these contracts allow aborts:
 * a finding. */

#include <stdint.h>

#include <mruby.h>
#include <mruby/string.h>

#include "json.h"
#include "ruby_driver.h"

static const char driver[] =
    "def __fuzz(text)\n"
    "  begin\n"
    "    s = JSON.generate(text)\n"
    "    raise 'a String does not read back' unless JSON.parse(s) == text\n"
    "  rescue JSON::GeneratorError\n"
    "  end\n"
    "  begin\n"
    "    v = JSON.parse(text)\n"
    "  rescue JSON::ParserError\n"
    "    return\n"
    "  end\n"
    "  out = JSON.generate(v)\n"
    "  raise 'generate does not read back' unless JSON.generate(JSON.parse(out)) == out\n"
    "  raise 'pretty_generate does not read back' unless JSON.generate(JSON.parse(JSON.pretty_generate(v))) "
    "== out\n"
    "  raise 'script_safe does not read back' unless JSON.generate(JSON.parse(JSON.generate(v, script_safe: "
    "true))) == out\n"
    "end\n";

static mrb_state *mrb;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    mrb = driver_open(driver, mm_json_init);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int ai = mrb_gc_arena_save(mrb);
    mrb_value text = mrb_str_new(mrb, (const char *)data, (mrb_int)size);

    driver_call(mrb, 1, &text);
    mrb_gc_arena_restore(mrb, ai);
    return 0;
}
