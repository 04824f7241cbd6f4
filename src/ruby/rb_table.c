/* rb_table.c: the request's apr tables as Ruby objects: Apache::Headers_in,
 * Headers_out, Err_headers_out, Notes and Env (subprocess_env), all
 * subclasses of Apache::Table.
 * An object holds no pointer: it names its table kind and its request's
 * run, and every call looks the table up afresh. Header names and values
 * are checked before httpd sees them (no CR, LF or NUL: no header
 * injection), and copied into r->pool. */

#include <stddef.h>

#include "apr_lib.h"
#include "apr_strings.h"
#include "apr_tables.h"
#include "httpd.h"
#include "util_script.h"

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/proc.h>
#include <mruby/string.h>

#include <string.h>

#include "binding.h"
#include "classes.h"
#include "mruby_internal.h"
#include "parse.h"

typedef struct {
    const char *cls;    /* class name under Apache */
    const char *reader; /* the Apache::Request method that returns it */
    size_t offset;      /* of the apr_table_t * in request_rec */
    int is_header;      /* names must be tokens, values single-line; 2: a response's */
    const char *value;  /* a value's name in messages */
} mm_table_kind_t;

/* Each table's reader is named as its request_rec field. A header table's
 * class names it in the messages about its values. */
#define TABLE_KIND(cls, field, is_header, value)                                                             \
    {                                                                                                        \
        cls, #field, offsetof(request_rec, field), is_header, value                                          \
    }
#define HEADER_TABLE(cls, field, is_header) TABLE_KIND(cls, field, is_header, "Apache::" cls ": header value")
#define OTHER_TABLE(cls, field)             TABLE_KIND(cls, field, 0, "a table value")

static const mm_table_kind_t kinds[MM_TABLE_COUNT] = {
    [MM_TABLE_HEADERS_IN] = HEADER_TABLE("Headers_in", headers_in, 1),
    [MM_TABLE_HEADERS_OUT] = HEADER_TABLE("Headers_out", headers_out, 2),
    [MM_TABLE_ERR_HEADERS_OUT] = HEADER_TABLE("Err_headers_out", err_headers_out, 2),
    [MM_TABLE_NOTES] = OTHER_TABLE("Notes", notes),
    [MM_TABLE_ENV] = OTHER_TABLE("Env", subprocess_env),
};

static apr_table_t *table_of(mrb_state *mrb, mrb_value self, request_rec **rp, const mm_table_kind_t **kp)
{
    unsigned int tag;
    request_rec *r = mm_binding_unwrap(mrb, self, &tag);

    if (tag >= MM_TABLE_COUNT) {
        mrb_raise(mrb, E_TYPE_ERROR, "not an Apache table");
    }
    if (rp) {
        *rp = r;
    }
    if (kp) {
        *kp = &kinds[tag];
    }
    return *(apr_table_t **)((char *)r + kinds[tag].offset);
}

static const char *key_arg(mrb_state *mrb, request_rec *r, const mm_table_kind_t *k, mrb_value key)
{
    const char *name = mm_binding_pstr(mrb, r->pool, key, "a table key");

    if (k->is_header && !mm_parse_header_name_ok(name)) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::%s: invalid header name", k->cls);
    }
    return name;
}

static mrb_value table_get(mrb_state *mrb, mrb_value self)
{
    request_rec *r;
    const mm_table_kind_t *k;
    apr_table_t *t = table_of(mrb, self, &r, &k);
    mrb_value key = mrb_get_arg1(mrb);
    const char *val;

    if (!mrb_string_p(key)) {
        key = mrb_obj_as_string(mrb, key);
    }
    if (memchr(RSTRING_PTR(key), '\0', RSTRING_LEN(key))) {
        return mrb_nil_value();
    }
    val = apr_table_get(t, mrb_string_cstr(mrb, key));
    return val ? mrb_str_new_cstr(mrb, val) : mrb_nil_value();
}

/* t[name] = value (add: 0) and t.add(name, value) (add: 1). */
static mrb_value table_store(mrb_state *mrb, mrb_value self, int add)
{
    request_rec *r;
    const mm_table_kind_t *k;
    apr_table_t *t = table_of(mrb, self, &r, &k);
    const mrb_value *argv = mm_mi_args_exactly(mrb, 2);
    mrb_value key, val;
    const char *name, *value;
    mm_header_kind_e kind;

    if (argv) {
        key = argv[0];
        val = argv[1];
    } else {
        mrb_get_args(mrb, "oo", &key, &val);
    }
    if (!mrb_string_p(key)) {
        key = mrb_obj_as_string(mrb, key);
    }
    name = key_arg(mrb, r, k, key);
    if (mrb_nil_p(val)) {
        if (!add) {
            apr_table_unset(t, name);
        }
        return val;
    }
    if (!mrb_string_p(val)) {
        val = mrb_obj_as_string(mrb, val);
    }
    /* a header's value: no control character but HTAB, the same check as
     * the Request fields that end up in a header */
    value = k->is_header ? mm_binding_header_str(mrb, r->pool, val, k->value)
                         : mm_binding_pstr(mrb, r->pool, val, k->value);
    kind = k->is_header ? mm_parse_header_kind(name) : MM_HEADER_OTHER;
    if (k->is_header == 2) {
        const char *why = mm_parse_response_header_refused(kind, value);

        if (why) {
            mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::%s: %s %s", k->cls, name, why);
        }
    }
    /* Each Set-Cookie is a header of its own: adding, not replacing. */
    if (add || kind == MM_HEADER_SET_COOKIE) {
        apr_table_addn(t, name, value);
    } else {
        apr_table_setn(t, name, value);
    }
    return val;
}

static mrb_value table_set(mrb_state *mrb, mrb_value self)
{
    return table_store(mrb, self, 0);
}

static mrb_value table_add(mrb_state *mrb, mrb_value self)
{
    return table_store(mrb, self, 1);
}

typedef struct {
    mrb_state *mrb;
    mrb_value result;
} mm_collect_t;

static int collect_value(void *data, const char *key, const char *val)
{
    mm_collect_t *c = data;

    mrb_ary_push(c->mrb, c->result, val ? mrb_str_new_cstr(c->mrb, val) : mrb_nil_value());
    return 1;
}

/* t.get_all(name): every value of name, in order ([] when none). */
static mrb_value table_get_all(mrb_state *mrb, mrb_value self)
{
    apr_table_t *t = table_of(mrb, self, NULL, NULL);
    mrb_value key = mrb_get_arg1(mrb);
    mm_collect_t c;

    c.mrb = mrb;
    c.result = mrb_ary_new(mrb);
    if (!mrb_string_p(key)) {
        key = mrb_obj_as_string(mrb, key);
    }
    if (!memchr(RSTRING_PTR(key), '\0', RSTRING_LEN(key))) {
        apr_table_do(collect_value, &c, t, mrb_string_cstr(mrb, key), NULL);
    }
    return c.result;
}

static mrb_value table_delete(mrb_state *mrb, mrb_value self)
{
    request_rec *r;
    apr_table_t *t = table_of(mrb, self, &r, NULL);
    mrb_value key = mrb_get_arg1(mrb);
    const char *name, *old;
    mrb_value result;

    if (!mrb_string_p(key)) {
        key = mrb_obj_as_string(mrb, key);
    }
    if (memchr(RSTRING_PTR(key), '\0', RSTRING_LEN(key))) {
        return mrb_nil_value();
    }
    name = mrb_string_cstr(mrb, key);
    old = apr_table_get(t, name);
    result = old ? mrb_str_new_cstr(mrb, old) : mrb_nil_value();
    apr_table_unset(t, name);
    return result;
}

/* Every entry as [name, value], in order, repeated names included. */
static mrb_value table_to_a(mrb_state *mrb, mrb_value self)
{
    apr_table_t *t = table_of(mrb, self, NULL, NULL);
    const apr_array_header_t *arr = apr_table_elts(t);
    const apr_table_entry_t *e = (const apr_table_entry_t *)arr->elts;
    mrb_value result = mrb_ary_new_capa(mrb, arr->nelts);
    int i, ai = mrb_gc_arena_save(mrb);

    for (i = 0; i < arr->nelts; i++) {
        mrb_value pair[2];

        if (e[i].key == NULL) {
            continue;
        }
        pair[0] = mrb_str_new_cstr(mrb, e[i].key);
        pair[1] = e[i].val ? mrb_str_new_cstr(mrb, e[i].val) : mrb_nil_value();
        mrb_ary_push(mrb, result, mrb_ary_new_from_values(mrb, 2, pair));
        mrb_gc_arena_restore(mrb, ai);
    }
    return result;
}

static mrb_value table_new(mrb_state *mrb, mrb_value klass, unsigned int kind)
{
    mrb_value obj = mm_binding_wrap(mrb, mrb_class_ptr(klass), kind);

    /* Apache::Env.new means the CGI variables, as mod_mruby had it (r.subprocess_env is the table as it is).
     */
    if (kind == MM_TABLE_ENV) {
        request_rec *r = mm_binding_unwrap(mrb, obj, NULL);

        ap_add_common_vars(r);
        ap_add_cgi_vars(r);
    }
    return obj;
}
MM_INDEXED_FUNCS8(table_new);

void mm_table_init(mrb_state *mrb)
{
    struct RClass *apache = mm_binding_apache(mrb);
    struct RClass *table = mrb_define_class_under(mrb, apache, "Table", mrb->object_class);
    int i;

    MRB_SET_INSTANCE_TT(table, MRB_TT_DATA);
    mrb_define_method(mrb, table, "[]", table_get, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, table, "[]=", table_set, MRB_ARGS_REQ(2));
    mrb_define_method(mrb, table, "delete", table_delete, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, table, "add", table_add, MRB_ARGS_REQ(2));
    mrb_define_method(mrb, table, "get_all", table_get_all, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, table, "to_a", table_to_a, MRB_ARGS_NONE());

    for (i = 0; i < MM_TABLE_COUNT; i++) {
        struct RClass *c = mrb_define_class_under(mrb, apache, kinds[i].cls, table);

        MRB_SET_INSTANCE_TT(c, MRB_TT_DATA);
        mm_binding_define_reader(mrb, kinds[i].reader, c, i);
        mrb_define_class_method(mrb, c, "new", table_new_at[i], MRB_ARGS_ANY());
    }
}
