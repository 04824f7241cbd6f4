/* json_generate.c: JSON.generate, JSON.pretty_generate and Object#to_json
 * (rb_json.c says what JSON is here). */

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
    mrb_value out;
    int pretty;
    int script_safe; /* "/" as "\/", U+2028 and U+2029 escaped: for <script> */
    int depth;
    mrb_sym to_json;
} gen_t;

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
        mrb_raisef(g->mrb, mm_json_error(g->mrb, "NestingError"), "nesting of %d is too deep", g->depth);
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
            int n = mm_json_utf8_len(u + i, (size_t)(len - i));

            if (n == 0) {
                mrb_raisef(g->mrb, mm_json_error(g->mrb, "GeneratorError"),
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

    if (!mrb_func_basic_p(mrb, v, g->to_json, mm_json_object_to_json)) {
        /* A generate the #to_json makes goes on at this depth (each level
         * costs C stack): the depth is left on the JSON module meanwhile. */
        mrb_value json = mrb_obj_value(mm_json_module(mrb)), was, text;
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
            mrb_raisef(mrb, mm_json_error(mrb, "GeneratorError"), "%C#to_json returned %T, not a String",
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
            mrb_raisef(g->mrb, mm_json_error(g->mrb, "GeneratorError"), "%v has no JSON", v);
        }
        gen_lit(g, buf, (size_t)mm_json_format_double(mrb_float(v), buf));
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
    outer = mrb_iv_get(mrb, mrb_obj_value(mm_json_module(mrb)), mrb_intern_lit(mrb, MM_JSON_DEPTH_IV));
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
        script_safe |= mm_json_option(mrb, values[i], opts, names[i]);
    }
    return generate(mrb, obj, pretty, script_safe);
}

/* JSON.generate(obj, opts = nil), JSON.dump, JSON.stringify */
mrb_value mm_json_generate_m(mrb_state *mrb, mrb_value self)
{
    return generate_m(mrb, 0);
}

mrb_value mm_json_pretty_generate_m(mrb_state *mrb, mrb_value self)
{
    return generate_m(mrb, 1);
}

/* Object#to_json(*args) */
mrb_value mm_json_object_to_json(mrb_state *mrb, mrb_value self)
{
    return generate(mrb, self, 0, 0);
}
