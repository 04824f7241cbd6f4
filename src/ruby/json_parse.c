/* json_parse.c: JSON.parse (rb_json.c says what JSON is here). */

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

typedef struct {
    mrb_state *mrb;
    const char *start, *p, *end;
    int depth;
    int symbolize;
} parser_t;

static mrb_value parse_value(parser_t *ps);

static mrb_noreturn void parse_error(parser_t *ps, const char *what)
{
    mrb_raisef(ps->mrb, mm_json_error(ps->mrb, "ParserError"), "%s at byte %i", what,
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
        mrb_raisef(ps->mrb, mm_json_error(ps->mrb, "NestingError"), "nesting of %d is too deep at byte %i",
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
        d = mm_json_read_double(text);
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
            int n = mm_json_utf8_len((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));

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
mrb_value mm_json_parse_m(mrb_state *mrb, mrb_value self)
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
    ps.symbolize = mm_json_option(mrb, values[0], opts, names[0]);
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
