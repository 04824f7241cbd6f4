/* rb_params.c: the parsing Request#query_params and #form_params rely on:
 * httpd's ap_args_to_table for the query string, our own parser for an
 * urlencoded body (over the kept body, so it stays available to others).
 * Each returns [[name, value], ...] and whether input was dropped
 * (mrubyFormFieldsLimit); the Ruby half (mrblib/params.rb) makes
 * Apache::Params of them and parses multipart. */

#include "apr_lib.h"
#include "apr_strings.h"
#include "httpd.h"
#include "http_config.h"
#include "util_script.h"

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/string.h>

#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "classes.h"
#include "config.h"
#include "mod_mruby.h"

static int fields_limit(request_rec *r)
{
    return mm_config_fields_limit(ap_get_module_config(r->per_dir_config, &mruby_module));
}

static mrb_value pairs_result(mrb_state *mrb, mrb_value pairs, int truncated)
{
    mrb_value v[2];

    v[0] = pairs;
    v[1] = mrb_bool_value(truncated);
    return mrb_ary_new_from_values(mrb, 2, v);
}

typedef struct {
    mrb_state *mrb;
    mrb_value pairs;
    int left; /* fields still allowed */
    int truncated;
} mm_pairs_t;

static int add_pair(void *data, const char *key, const char *val)
{
    mm_pairs_t *p = data;
    mrb_value kv[2];
    int ai;

    if (p->left-- <= 0) {
        p->truncated = 1;
        return 0;
    }
    ai = mrb_gc_arena_save(p->mrb); /* each pair is kept by p->pairs */
    kv[0] = mrb_str_new_cstr(p->mrb, key);
    kv[1] = mrb_str_new_cstr(p->mrb, val);
    mrb_ary_push(p->mrb, p->pairs, mrb_ary_new_from_values(p->mrb, 2, kv));
    mrb_gc_arena_restore(p->mrb, ai);
    return 1;
}

/* ap_args_to_table decodes %XX but not '+' (it is for paths); forms encode
 * a space as '+', so '+' becomes %20 first. httpd keeps the last value of a
 * repeated name and stops a value at a decoded NUL. */
static mrb_value request_query_pairs(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    char *saved = r->args, *args, *o;
    const char *s;
    apr_table_t *t;
    mm_pairs_t p;

    p.mrb = mrb;
    p.pairs = mrb_ary_new(mrb);
    p.left = fields_limit(r);
    p.truncated = 0;
    if (r->args == NULL || *r->args == '\0') {
        return pairs_result(mrb, p.pairs, 0);
    }
    args = o = apr_palloc(r->pool, strlen(r->args) * 3 + 1);
    for (s = r->args; *s; s++) {
        if (*s == '+') {
            memcpy(o, "%20", 3);
            o += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    r->args = args;
    ap_args_to_table(r, &t);
    r->args = saved;
    apr_table_do(add_pair, &p, t, NULL);
    return pairs_result(mrb, p.pairs, p.truncated);
}

/* A field's name or value of a form: '+' is a space and %XX a byte. A '%'
 * not followed by two hex digits is kept as it is, as in the query string
 * (ap_unescape_url): httpd's form parser took the next two bytes whatever
 * they were, so "a=50%&b=1" lost the field b into a garbage byte. */
static mrb_value form_decode(mrb_state *mrb, const char *s, size_t len)
{
    mrb_value out = mrb_str_new(mrb, NULL, (mrb_int)len);
    char *o = RSTRING_PTR(out);
    size_t i, n = 0;

    for (i = 0; i < len; i++) {
        if (s[i] == '+') {
            o[n++] = ' ';
        } else if (s[i] == '%' && i + 2 < len && apr_isxdigit(s[i + 1]) && apr_isxdigit(s[i + 2])) {
            char hex[3] = {s[i + 1], s[i + 2], '\0'};

            o[n++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            o[n++] = s[i];
        }
    }
    RSTR_SET_LEN(mrb_str_ptr(out), n);
    return out;
}

/* An application/x-www-form-urlencoded body (the caller checked the type),
 * from the kept body: fields separated by '&', names and values binary-safe
 * (NUL included), every value kept; a field without '=' is skipped, as
 * httpd's ap_parse_form_data did. */
static mrb_value request_form_pairs(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mrb_value body = mrb_funcall(mrb, self, "body", 0); /* keeps it all, or raises */
    mrb_value result = mrb_ary_new(mrb);
    int left = fields_limit(r), truncated = 0;
    const char *s, *end;

    if (!mrb_string_p(body)) {
        return pairs_result(mrb, result, 0);
    }
    s = RSTRING_PTR(body);
    end = s + RSTRING_LEN(body);
    while (s < end) {
        const char *amp = memchr(s, '&', (size_t)(end - s));
        const char *stop = amp ? amp : end;
        const char *eq = memchr(s, '=', (size_t)(stop - s));

        if (eq) {
            mrb_value kv[2];
            int ai;

            if (left-- <= 0) {
                truncated = 1;
                break;
            }
            ai = mrb_gc_arena_save(mrb); /* each pair is kept by result */
            kv[0] = form_decode(mrb, s, (size_t)(eq - s));
            kv[1] = form_decode(mrb, eq + 1, (size_t)(stop - eq - 1));
            mrb_ary_push(mrb, result, mrb_ary_new_from_values(mrb, 2, kv));
            mrb_gc_arena_restore(mrb, ai);
        }
        s = amp ? amp + 1 : end;
    }
    return pairs_result(mrb, result, truncated);
}

static mrb_value request_fields_limit(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(fields_limit(mm_binding_unwrap(mrb, self, NULL)));
}

void mm_params_init(mrb_state *mrb)
{
    struct RClass *req = mrb_class_get_under(mrb, mm_binding_apache(mrb), "Request");

    mrb_define_method(mrb, req, "__query_pairs", request_query_pairs, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "__form_pairs", request_form_pairs, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "__fields_limit", request_fields_limit, MRB_ARGS_NONE());
}
