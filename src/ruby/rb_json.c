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
 * Needs mruby alone: fuzz/fuzz_json.c links this file as it is. */

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

/* As CRuby's JSON: deeper is an error (and the end of a cycle). */
#define MM_JSON_DEPTH_MAX 100

/* The JSON module's hidden instance variable (no "@": Ruby cannot name
 * it) that holds the depth of a generate while a #to_json runs. */
#define MM_JSON_DEPTH_IV "mm_json_depth"

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
static int format_double(double d, char *buf)
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

static double read_double(const char *text)
{
    locale_t loc = c_locale();

    return loc ? strtod_l(text, NULL, loc) : strtod(text, NULL);
}

/* ---- UTF-8 ---- */

/* The length of the UTF-8 sequence at s (left bytes there), or 0 when it is
 * not one: a stray or missing continuation byte, an overlong form, a
 * surrogate, past U+10FFFF. */
static int utf8_len(const unsigned char *s, size_t left)
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

static struct RClass *json_module(mrb_state *mrb)
{
    return mrb_module_get(mrb, "JSON");
}

static struct RClass *json_error(mrb_state *mrb, const char *name)
{
    return mrb_class_get_under(mrb, json_module(mrb), name);
}

/* Whether the option name is on: given a true value as a keyword, or in a
 * Hash as the optional argument (CRuby's older form). */
static int option(mrb_state *mrb, mrb_value kw_value, mrb_value opts, mrb_sym name)
{
    if (mrb_undef_p(kw_value) && mrb_hash_p(opts)) {
        kw_value = mrb_hash_get(mrb, opts, mrb_symbol_value(name));
    }
    return !mrb_undef_p(kw_value) && mrb_test(kw_value);
}

/* ---- generate ---- */

typedef struct {
    mrb_state *mrb;
    mrb_value out;
    int pretty;
    int script_safe; /* "/" as "\/", U+2028 and U+2029 escaped: for <script> */
    int depth;
    mrb_sym to_json;
} gen_t;

static mrb_value object_to_json(mrb_state *mrb, mrb_value self);
static void gen_value(gen_t *g, mrb_value v);

static void gen_lit(gen_t *g, const char *s, size_t len)
{
    mrb_str_cat(g->mrb, g->out, s, len);
}

static void gen_newline(gen_t *g)
{
    int i;

    if (g->pretty) {
        gen_lit(g, "\n", 1);
        for (i = 0; i < g->depth; i++) {
            gen_lit(g, "  ", 2);
        }
    }
}

static void gen_nest(gen_t *g)
{
    if (++g->depth > MM_JSON_DEPTH_MAX) {
        mrb_raisef(g->mrb, json_error(g->mrb, "NestingError"), "nesting of %d is too deep", g->depth);
    }
}

/* Before the member number n of an array or object. */
static void gen_member(gen_t *g, mrb_int n)
{
    if (n > 0) {
        gen_lit(g, ",", 1);
    }
    gen_newline(g);
}

/* The end of an array or object of n members. */
static void gen_close(gen_t *g, mrb_int n, const char *bracket)
{
    g->depth--;
    if (n > 0) {
        gen_newline(g);
    }
    gen_lit(g, bracket, 1);
}

static void gen_string(gen_t *g, const char *s, mrb_int len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    mrb_int i = 0, from = 0;

    gen_lit(g, "\"", 1);
    while (i < len) {
        unsigned char c = u[i];
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t esc_len = 2;

        if (c >= 0x80) {
            int n = utf8_len(u + i, (size_t)(len - i));

            if (n == 0) {
                mrb_raisef(g->mrb, json_error(g->mrb, "GeneratorError"),
                           "a String that is not UTF-8 (byte %i) has no JSON", i);
            }
            if (g->script_safe && n == 3 && c == 0xe2 && u[i + 1] == 0x80 && (u[i + 2] | 1) == 0xa9) {
                gen_lit(g, s + from, (size_t)(i - from));
                gen_lit(g, u[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6);
                from = i + n;
            }
            i += n;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\' && !(c == '/' && g->script_safe)) {
            i++;
            continue;
        }
        switch (c) {
        case '/':
        case '"':
        case '\\':
            esc[1] = (char)c;
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            esc[1] = 'u';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 0xf];
            esc_len = 6;
            break;
        }
        gen_lit(g, s + from, (size_t)(i - from));
        gen_lit(g, esc, esc_len);
        from = ++i;
    }
    gen_lit(g, s + from, (size_t)(i - from));
    gen_lit(g, "\"", 1);
}

static void gen_str_value(gen_t *g, mrb_value s)
{
    gen_string(g, RSTRING_PTR(s), RSTRING_LEN(s));
}

/* A Symbol as the string of its name. */
static void gen_symbol(gen_t *g, mrb_value sym)
{
    mrb_int len;
    const char *name = mrb_sym_name_len(g->mrb, mrb_symbol(sym), &len);

    gen_string(g, name, len);
}

static void gen_array(gen_t *g, mrb_value ary)
{
    mrb_int i;

    gen_nest(g);
    gen_lit(g, "[", 1);
    /* the length is read again each time: a #to_json may change it */
    for (i = 0; i < RARRAY_LEN(ary); i++) {
        int ai = mrb_gc_arena_save(g->mrb);

        gen_member(g, i);
        gen_value(g, mrb_ary_ref(g->mrb, ary, i));
        mrb_gc_arena_restore(g->mrb, ai);
    }
    gen_close(g, i, "]");
}

static void gen_hash(gen_t *g, mrb_value hash)
{
    mrb_state *mrb = g->mrb;
    mrb_value keys = mrb_hash_keys(mrb, hash);
    mrb_int i, n = 0;

    gen_nest(g);
    gen_lit(g, "{", 1);
    for (i = 0; i < RARRAY_LEN(keys); i++) {
        int ai = mrb_gc_arena_save(mrb);
        mrb_value key = mrb_ary_ref(mrb, keys, i);

        if (!mrb_hash_key_p(mrb, hash, key)) {
            mrb_gc_arena_restore(mrb, ai);
            continue; /* removed by a #to_json on the way */
        }
        gen_member(g, n++);
        if (mrb_symbol_p(key)) {
            gen_symbol(g, key);
        } else {
            gen_str_value(g, mrb_string_p(key) ? key : mrb_obj_as_string(mrb, key));
        }
        gen_lit(g, g->pretty ? ": " : ":", g->pretty ? 2 : 1);
        gen_value(g, mrb_hash_get(mrb, hash, key));
        mrb_gc_arena_restore(mrb, ai);
    }
    gen_close(g, n, "}");
}

/* obj.to_json, as mrb_protect_error calls it */
static mrb_value call_to_json(mrb_state *mrb, void *obj)
{
    return mrb_funcall_id(mrb, *(mrb_value *)obj, mrb_intern_lit(mrb, "to_json"), 0);
}

/* Anything else: its own #to_json when its class has one (its text is
 * taken as it is), else its to_s as a String, as CRuby's JSON does. */
static void gen_other(gen_t *g, mrb_value v)
{
    mrb_state *mrb = g->mrb;

    if (!mrb_func_basic_p(mrb, v, g->to_json, object_to_json)) {
        /* A generate the #to_json makes goes on at this depth (each level
         * costs C stack): the depth is left on the JSON module meanwhile. */
        mrb_value json = mrb_obj_value(json_module(mrb)), was, text;
        mrb_sym depth = mrb_intern_lit(mrb, MM_JSON_DEPTH_IV);
        mrb_bool raised = FALSE;

        was = mrb_iv_get(mrb, json, depth);
        mrb_iv_set(mrb, json, depth, mrb_int_value(mrb, g->depth));
        text = mrb_protect_error(mrb, call_to_json, &v, &raised);
        mrb_iv_set(mrb, json, depth, was);
        if (raised) {
            mrb_exc_raise(mrb, text);
        }
        if (!mrb_string_p(text)) {
            mrb_raisef(mrb, json_error(mrb, "GeneratorError"), "%C#to_json returned %T, not a String",
                       mrb_obj_class(mrb, v), text);
        }
        gen_lit(g, RSTRING_PTR(text), (size_t)RSTRING_LEN(text));
        return;
    }
    gen_str_value(g, mrb_obj_as_string(mrb, v));
}

static void gen_value(gen_t *g, mrb_value v)
{
    char buf[40];
    int n;

    if (mrb_nil_p(v)) {
        gen_lit(g, "null", 4);
        return;
    }
    switch (mrb_type(v)) {
    case MRB_TT_FALSE:
        gen_lit(g, "false", 5);
        break;
    case MRB_TT_TRUE:
        gen_lit(g, "true", 4);
        break;
    case MRB_TT_INTEGER:
        n = snprintf(buf, sizeof buf, "%lld", (long long)mrb_integer(v));
        gen_lit(g, buf, (size_t)n);
        break;
    case MRB_TT_FLOAT:
        if (!isfinite(mrb_float(v))) {
            mrb_raisef(g->mrb, json_error(g->mrb, "GeneratorError"), "%v has no JSON", v);
        }
        gen_lit(g, buf, (size_t)format_double(mrb_float(v), buf));
        break;
    case MRB_TT_STRING:
        gen_str_value(g, v);
        break;
    case MRB_TT_SYMBOL:
        gen_symbol(g, v);
        break;
    /* A #to_json or #to_s met inside may take the container from its
     * parent and collect it: it stays in the arena while it is walked
     * (until the parent's loop restores the arena). */
    case MRB_TT_ARRAY:
        mrb_gc_protect(g->mrb, v);
        gen_array(g, v);
        break;
    case MRB_TT_HASH:
        mrb_gc_protect(g->mrb, v);
        gen_hash(g, v);
        break;
    default:
        gen_other(g, v);
        break;
    }
}

static mrb_value generate(mrb_state *mrb, mrb_value obj, int pretty, int script_safe)
{
    gen_t g;
    mrb_value outer;

    g.mrb = mrb;
    g.out = mrb_str_new_capa(mrb, 64);
    g.pretty = pretty;
    g.script_safe = script_safe;
    g.to_json = mrb_intern_lit(mrb, "to_json");
    /* called by a #to_json (gen_other): go on at its depth */
    outer = mrb_iv_get(mrb, mrb_obj_value(json_module(mrb)), mrb_intern_lit(mrb, MM_JSON_DEPTH_IV));
    g.depth = mrb_integer_p(outer) ? (int)mrb_integer(outer) : 0;
    gen_value(&g, obj);
    return g.out;
}

/* The arguments of generate and pretty_generate: the object, then options
 * as keywords or in a Hash (CRuby's). script_safe (or escape_slash) is
 * taken; the others CRuby has are accepted and have no effect. */
static mrb_value generate_m(mrb_state *mrb, int pretty)
{
    mrb_sym names[2];
    mrb_value values[2], rest, obj, opts = mrb_nil_value();
    mrb_kwargs kw;
    int i, script_safe = 0;

    names[0] = mrb_intern_lit(mrb, "script_safe");
    names[1] = mrb_intern_lit(mrb, "escape_slash");
    kw.num = 2;
    kw.required = 0;
    kw.table = names;
    kw.values = values;
    kw.rest = &rest;
    obj = mrb_undef_value();
    mrb_get_args(mrb, "|oo:", &obj, &opts, &kw);
    if (mrb_undef_p(obj)) {
        /* JSON.generate(a: 1): the keywords are the Hash to write */
        if ((!mrb_hash_p(rest) || mrb_hash_empty_p(mrb, rest)) && mrb_undef_p(values[0]) &&
            mrb_undef_p(values[1])) {
            mrb_raise(mrb, E_ARGUMENT_ERROR, "wrong number of arguments (given 0, expected 1..2)");
        }
        obj = mrb_hash_p(rest) ? mrb_hash_dup(mrb, rest) : mrb_hash_new(mrb);
        for (i = 0; i < 2; i++) {
            if (!mrb_undef_p(values[i])) {
                mrb_hash_set(mrb, obj, mrb_symbol_value(names[i]), values[i]);
            }
        }
        return generate(mrb, obj, pretty, 0);
    }
    for (i = 0; i < 2; i++) {
        script_safe |= option(mrb, values[i], opts, names[i]);
    }
    return generate(mrb, obj, pretty, script_safe);
}

/* JSON.generate(obj, opts = nil), JSON.dump, JSON.stringify */
static mrb_value json_generate(mrb_state *mrb, mrb_value self)
{
    return generate_m(mrb, 0);
}

static mrb_value json_pretty_generate(mrb_state *mrb, mrb_value self)
{
    return generate_m(mrb, 1);
}

/* Object#to_json(*args) */
static mrb_value object_to_json(mrb_state *mrb, mrb_value self)
{
    return generate(mrb, self, 0, 0);
}

/* ---- parse ---- */

typedef struct {
    mrb_state *mrb;
    const char *start, *p, *end;
    int depth;
    int symbolize;
} parser_t;

static mrb_value parse_value(parser_t *ps);

static mrb_noreturn void parse_error(parser_t *ps, const char *what)
{
    mrb_raisef(ps->mrb, json_error(ps->mrb, "ParserError"), "%s at byte %i", what,
               (mrb_int)(ps->p - ps->start));
}

static mrb_noreturn void unexpected(parser_t *ps)
{
    unsigned char c;
    char what[48];

    if (ps->p >= ps->end) {
        parse_error(ps, "unexpected end of input");
    }
    c = (unsigned char)*ps->p;
    if (c > 0x20 && c < 0x7f) {
        snprintf(what, sizeof what, "unexpected character '%c'", c);
    } else {
        snprintf(what, sizeof what, "unexpected byte 0x%02x", c);
    }
    parse_error(ps, what);
}

static void skip_space(parser_t *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) {
        ps->p++;
    }
}

static void nest(parser_t *ps)
{
    if (++ps->depth > MM_JSON_DEPTH_MAX) {
        mrb_raisef(ps->mrb, json_error(ps->mrb, "NestingError"), "nesting of %d is too deep at byte %i",
                   ps->depth, (mrb_int)(ps->p - ps->start));
    }
}

static int is_digit(parser_t *ps)
{
    return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9';
}

/* One digit or more, else the error missing. */
static void digits(parser_t *ps, const char *missing)
{
    if (!is_digit(ps)) {
        parse_error(ps, missing);
    }
    while (is_digit(ps)) {
        ps->p++;
    }
}

static mrb_value parse_literal(parser_t *ps, const char *word, size_t len, mrb_value v)
{
    if ((size_t)(ps->end - ps->p) < len || memcmp(ps->p, word, len) != 0) {
        unexpected(ps);
    }
    ps->p += len;
    return v;
}

static mrb_value parse_number(parser_t *ps)
{
    mrb_state *mrb = ps->mrb;
    const char *from = ps->p;
    int fraction = 0;
    size_t len;
    double d;

    if (*ps->p == '-') {
        ps->p++;
    }
    if (ps->p < ps->end && *ps->p == '0') {
        ps->p++;
    } else if (is_digit(ps)) {
        while (is_digit(ps)) {
            ps->p++;
        }
    } else {
        unexpected(ps);
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        digits(ps, "a number's decimal point without a digit after it");
        fraction = 1;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) {
            ps->p++;
        }
        digits(ps, "a number's exponent without digits");
        fraction = 1;
    }
    len = (size_t)(ps->p - from);
    if (!fraction) {
        /* accumulated negative, so that the most negative Integer fits */
        const char *q = from + (*from == '-');
        mrb_int v = 0;

        for (; q < ps->p; q++) {
            int digit = *q - '0';

            if (v < (MRB_INT_MIN + digit) / 10) {
                break; /* too large for an Integer: a Float */
            }
            v = v * 10 - digit;
        }
        if (q == ps->p && (*from == '-' || v != MRB_INT_MIN)) {
            return mrb_int_value(mrb, *from == '-' ? v : -v);
        }
    }
    {
        /* strtod wants the text NUL-terminated */
        char small[64];
        mrb_value big = mrb_nil_value();
        char *text = small;

        if (len >= sizeof small) {
            big = mrb_str_new(mrb, from, (mrb_int)len);
            text = (char *)mrb_string_value_cstr(mrb, &big);
        } else {
            memcpy(small, from, len);
            small[len] = '\0';
        }
        d = read_double(text);
    }
    if (!isfinite(d)) {
        ps->p = from;
        parse_error(ps, "a number too large for a Float");
    }
    return mrb_float_value(mrb, d);
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* The 4 hex digits after "\u" at ps->p. */
static uint32_t parse_hex4(parser_t *ps)
{
    uint32_t v = 0;
    int i;

    if (ps->end - ps->p < 4) {
        parse_error(ps, "a \\u escape without 4 hex digits");
    }
    for (i = 0; i < 4; i++) {
        int d = hex_digit(ps->p[i]);

        if (d < 0) {
            parse_error(ps, "a \\u escape without 4 hex digits");
        }
        v = v << 4 | (uint32_t)d;
    }
    ps->p += 4;
    return v;
}

/* One escape, ps->p just after its backslash, appended to s as UTF-8. */
static void parse_escape(parser_t *ps, mrb_value s)
{
    char out[4];
    size_t n = 1;
    uint32_t cp;

    if (ps->p >= ps->end) {
        parse_error(ps, "unterminated string");
    }
    switch (*ps->p++) {
    case '"':
        out[0] = '"';
        break;
    case '\\':
        out[0] = '\\';
        break;
    case '/':
        out[0] = '/';
        break;
    case 'b':
        out[0] = '\b';
        break;
    case 'f':
        out[0] = '\f';
        break;
    case 'n':
        out[0] = '\n';
        break;
    case 'r':
        out[0] = '\r';
        break;
    case 't':
        out[0] = '\t';
        break;
    case 'u':
        cp = parse_hex4(ps);
        if (cp >= 0xdc00 && cp <= 0xdfff) {
            ps->p -= 6;
            parse_error(ps, "a \\u escape of a low surrogate without a high one before it");
        }
        if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t low;

            if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                parse_error(ps, "a \\u escape of a high surrogate without a low one after it");
            }
            ps->p += 2;
            low = parse_hex4(ps);
            if (low < 0xdc00 || low > 0xdfff) {
                ps->p -= 6;
                parse_error(ps, "a \\u escape of a high surrogate without a low one after it");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
        }
        if (cp < 0x80) {
            out[0] = (char)cp;
        } else if (cp < 0x800) {
            out[0] = (char)(0xc0 | cp >> 6);
            out[1] = (char)(0x80 | (cp & 0x3f));
            n = 2;
        } else if (cp < 0x10000) {
            out[0] = (char)(0xe0 | cp >> 12);
            out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
            out[2] = (char)(0x80 | (cp & 0x3f));
            n = 3;
        } else {
            out[0] = (char)(0xf0 | cp >> 18);
            out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
            out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
            out[3] = (char)(0x80 | (cp & 0x3f));
            n = 4;
        }
        break;
    default:
        ps->p -= 2;
        parse_error(ps, "an invalid escape in a string");
    }
    mrb_str_cat(ps->mrb, s, out, n);
}

/* s (nil before anything) with the bytes from..to after it. */
static mrb_value append(mrb_state *mrb, mrb_value s, const char *from, const char *to)
{
    if (mrb_nil_p(s)) {
        return mrb_str_new(mrb, from, to - from);
    }
    return mrb_str_cat(mrb, s, from, (size_t)(to - from));
}

/* A string, ps->p at its opening quote. Without escapes it is copied in
 * one piece. */
static mrb_value parse_string(parser_t *ps)
{
    mrb_state *mrb = ps->mrb;
    mrb_value s = mrb_nil_value();
    const char *run;

    run = ++ps->p;
    for (;;) {
        unsigned char c;

        if (ps->p >= ps->end) {
            parse_error(ps, "unterminated string");
        }
        c = (unsigned char)*ps->p;
        if (c == '"') {
            break;
        }
        if (c < 0x20) {
            parse_error(ps, "a control character in a string");
        }
        if (c == '\\') {
            s = append(mrb, s, run, ps->p);
            ps->p++;
            parse_escape(ps, s);
            run = ps->p;
            continue;
        }
        if (c >= 0x80) {
            int n = utf8_len((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));

            if (n == 0) {
                parse_error(ps, "a string that is not UTF-8");
            }
            ps->p += n;
            continue;
        }
        ps->p++;
    }
    s = append(mrb, s, run, ps->p);
    ps->p++;
    return s;
}

/* An array or object opens, ps->p at its bracket: false when it is empty
 * (and closed already). */
static int open_container(parser_t *ps, char close)
{
    nest(ps);
    ps->p++;
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return 0;
    }
    return 1;
}

/* After a member: true when a comma announces another, false when the
 * container closed. */
static int next_member(parser_t *ps, char close)
{
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        return 1;
    }
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return 0;
    }
    unexpected(ps);
}

static mrb_value parse_array(parser_t *ps)
{
    mrb_state *mrb = ps->mrb;
    mrb_value ary = mrb_ary_new(mrb);
    int more = open_container(ps, ']');

    while (more) {
        int ai = mrb_gc_arena_save(mrb);

        mrb_ary_push(mrb, ary, parse_value(ps));
        mrb_gc_arena_restore(mrb, ai);
        more = next_member(ps, ']');
    }
    return ary;
}

static mrb_value parse_object(parser_t *ps)
{
    mrb_state *mrb = ps->mrb;
    mrb_value hash = mrb_hash_new(mrb);
    int more = open_container(ps, '}');

    while (more) {
        int ai = mrb_gc_arena_save(mrb);
        mrb_value key;

        skip_space(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
            if (ps->p < ps->end) {
                parse_error(ps, "an object's key that is not a string");
            }
            unexpected(ps);
        }
        key = parse_string(ps);
        if (ps->symbolize) {
            key = mrb_symbol_value(mrb_intern_str(mrb, key));
        }
        skip_space(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            unexpected(ps);
        }
        ps->p++;
        mrb_hash_set(mrb, hash, key, parse_value(ps));
        mrb_gc_arena_restore(mrb, ai);
        more = next_member(ps, '}');
    }
    return hash;
}

static mrb_value parse_value(parser_t *ps)
{
    skip_space(ps);
    if (ps->p >= ps->end) {
        unexpected(ps);
    }
    switch (*ps->p) {
    case '{':
        return parse_object(ps);
    case '[':
        return parse_array(ps);
    case '"':
        return parse_string(ps);
    case 't':
        return parse_literal(ps, "true", 4, mrb_true_value());
    case 'f':
        return parse_literal(ps, "false", 5, mrb_false_value());
    case 'n':
        return parse_literal(ps, "null", 4, mrb_nil_value());
    default:
        if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9')) {
            return parse_number(ps);
        }
        unexpected(ps);
    }
}

/* JSON.parse(text, symbolize_names: false): any JSON value; other options
 * CRuby takes are accepted and have no effect. */
static mrb_value json_parse(mrb_state *mrb, mrb_value self)
{
    mrb_sym names[1];
    mrb_value values[1], rest, text, v, opts = mrb_nil_value();
    mrb_kwargs kw;
    parser_t ps;

    names[0] = mrb_intern_lit(mrb, "symbolize_names");
    kw.num = 1;
    kw.required = 0;
    kw.table = names;
    kw.values = values;
    kw.rest = &rest;
    mrb_get_args(mrb, "S|o:", &text, &opts, &kw);
    /* first: a Hash's default proc may run Ruby, which may change text;
     * from here on nothing runs Ruby until the parse ends */
    ps.symbolize = option(mrb, values[0], opts, names[0]);
    ps.mrb = mrb;
    ps.start = ps.p = RSTRING_PTR(text);
    ps.end = ps.start + RSTRING_LEN(text);
    ps.depth = 0;
    v = parse_value(&ps);
    skip_space(&ps);
    if (ps.p < ps.end) {
        parse_error(&ps, "more after the value");
    }
    return v;
}

void mm_json_init(mrb_state *mrb)
{
    struct RClass *json = mrb_define_module(mrb, "JSON");
    struct RClass *base = mrb_define_class_under(mrb, json, "JSONError", mrb->eStandardError_class);
    struct RClass *parser_error = mrb_define_class_under(mrb, json, "ParserError", base);

    mrb_define_class_under(mrb, json, "NestingError", parser_error);
    mrb_define_class_under(mrb, json, "GeneratorError", base);
    mrb_define_class_method(mrb, json, "parse", json_parse, MRB_ARGS_ARG(1, 1));
    mrb_define_class_method(mrb, json, "generate", json_generate, MRB_ARGS_ARG(1, 1));
    mrb_define_class_method(mrb, json, "dump", json_generate, MRB_ARGS_ARG(1, 1));
    mrb_define_class_method(mrb, json, "stringify", json_generate, MRB_ARGS_ARG(1, 1));
    mrb_define_class_method(mrb, json, "pretty_generate", json_pretty_generate, MRB_ARGS_ARG(1, 1));
    mrb_define_method(mrb, mrb->object_class, "to_json", object_to_json, MRB_ARGS_ANY());
}
