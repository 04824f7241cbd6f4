/* rb_json.c: JSON for scripts, as the original mod_mruby built it in
 * (mruby-json): JSON.parse, JSON.generate (also dump and stringify),
 * JSON.pretty_generate, Object#to_json, and the errors JSON::ParserError,
 * JSON::NestingError and JSON::GeneratorError.
 *
 * Strict RFC 8259 both ways, so that what parse accepts generate writes
 * back, and what generate writes parse reads as equal values: Strings must
 * be UTF-8 (an invalid sequence is an error either way, never output that
 * is not JSON), NaN and the infinities have no JSON, nesting stops at
 * MM_JSON_DEPTH_MAX. Floats are read and written exactly (the shortest
 * text that reads back as the same double) and in the "C" locale whatever
 * the process's: mruby 3.1's own conversions are neither exact nor
 * round-trip (its 0.1 is not the double 0.1).
 *
 * This file: the module, its errors, and what parsing and generating share
 * (numbers, UTF-8); json_parse.c and json_generate.c the two directions.
 * Needs mruby alone: fuzz/fuzz_json.c links the three as they are. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strtod_l */
#endif
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/hash.h>
#include <mruby/error.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include "json.h"
#include "json_internal.h"

/* ---- numbers, in the "C" locale ---- */

/* The "C" locale, made once per process (glibc's is a static object). */
static locale_t c_locale(void)
{
    static locale_t made;
    locale_t loc = __atomic_load_n(&made, __ATOMIC_ACQUIRE), none = (locale_t)0;

    if (loc == (locale_t)0) {
        loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
        if (loc != (locale_t)0 &&
            !__atomic_compare_exchange_n(&made, &none, loc, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            freelocale(loc);
            loc = none;
        }
    }
    return loc;
}

/* d as the shortest "%g" text that reads back as d, with ".0" added when it
 * would read as an Integer. buf has room for 40 bytes. */
int mm_json_format_double(double d, char *buf)
{
    locale_t loc = c_locale(), was = loc ? uselocale(loc) : (locale_t)0;
    int precision, n = 0;

    for (precision = 15; precision <= 17; precision++) {
        n = snprintf(buf, 40, "%.*g", precision, d);
        if (strtod(buf, NULL) == d) {
            break;
        }
    }
    if (was) {
        uselocale(was);
    }
    if (strpbrk(buf, ".eE") == NULL) {
        memcpy(buf + n, ".0", 3);
        n += 2;
    }
    return n;
}

double mm_json_read_double(const char *text)
{
    locale_t loc = c_locale();

    return loc ? strtod_l(text, NULL, loc) : strtod(text, NULL);
}

/* ---- UTF-8 ---- */

/* The length of the UTF-8 sequence at s (left bytes there), or 0 when it is
 * not one: a stray or missing continuation byte, an overlong form, a
 * surrogate, past U+10FFFF. */
int mm_json_utf8_len(const unsigned char *s, size_t left)
{
    unsigned char c = s[0];
    uint32_t cp;
    int n, k;

    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2, cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3, cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4, cp = c & 0x07;
    } else {
        return 0;
    }
    if (left < (size_t)n) {
        return 0;
    }
    for (k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80) {
            return 0;
        }
        cp = cp << 6 | (s[k] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return n;
}

struct RClass *mm_json_module(mrb_state *mrb)
{
    return mrb_module_get(mrb, "JSON");
}

struct RClass *mm_json_error(mrb_state *mrb, const char *name)
{
    return mrb_class_get_under(mrb, mm_json_module(mrb), name);
}

/* Whether the option name is on: given a true value as a keyword, or in a
 * Hash as the optional argument (CRuby's older form). */
int mm_json_option(mrb_state *mrb, mrb_value kw_value, mrb_value opts, mrb_sym name)
{
    if (mrb_undef_p(kw_value) && mrb_hash_p(opts)) {
        kw_value = mrb_hash_get(mrb, opts, mrb_symbol_value(name));
    }
    return !mrb_undef_p(kw_value) && mrb_test(kw_value);
}

void mm_json_init(mrb_state *mrb)
{
    struct RClass *json = mrb_define_module(mrb, "JSON");
    struct RClass *base = mrb_define_class_under(mrb, json, "JSONError", mrb->eStandardError_class);
    struct RClass *parser_error = mrb_define_class_under(mrb, json, "ParserError", base);

    mrb_define_class_under(mrb, json, "NestingError", parser_error);
    mrb_define_class_under(mrb, json, "GeneratorError", base);
    mrb_define_class_method(mrb, json, "parse", mm_json_parse_m, MRB_ARGS_ARG(1, 1));
    mrb_define_class_method(mrb, json, "generate", mm_json_generate_m, MRB_ARGS_ARG(1, 1));
    mrb_define_class_method(mrb, json, "dump", mm_json_generate_m, MRB_ARGS_ARG(1, 1));
    mrb_define_class_method(mrb, json, "stringify", mm_json_generate_m, MRB_ARGS_ARG(1, 1));
    mrb_define_class_method(mrb, json, "pretty_generate", mm_json_pretty_generate_m, MRB_ARGS_ARG(1, 1));
    mrb_define_method(mrb, mrb->object_class, "to_json", mm_json_object_to_json, MRB_ARGS_ANY());
}
