/* rb_subrequest.c: Apache::Request#__subrequest, the C half of
 * Request#subrequest (mrblib/request.rb): a subrequest of the current
 * request (subreq.c), its status, header fields and body. */

#include "httpd.h"
#include "apr_strings.h"

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/string.h>

#include "binding.h"
#include "parse.h"
#include "subreq.h"

static int push_header(void *ctx, const char *k, const char *v)
{
    mrb_value *pair = ctx; /* [mrb as cptr, array] */
    mrb_state *mrb = mrb_cptr(pair[0]);

    mrb_ary_push(mrb, pair[1], mrb_str_new_cstr(mrb, k));
    mrb_ary_push(mrb, pair[1], mrb_str_new_cstr(mrb, v));
    return 1;
}

/* r.__subrequest(method, uri, [name, value, ...], body or nil, max):
 * [status, [name, value, ...], body, too_large]. */
static mrb_value request_subrequest(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mrb_value method, uri, hdrs, body, out, pair[2];
    mrb_int max, i;
    apr_table_t *t;
    apr_pool_t *p;
    const char *m, *u, *data = NULL;
    apr_size_t data_len = 0, len;
    mm_subreq_result_t res;
    int ai = mrb_gc_arena_save(mrb);

    mrb_get_args(mrb, "SSAoi", &method, &uri, &hdrs, &body, &max);
    if (!mrb_nil_p(body) && !mrb_string_p(body)) {
        mrb_raise(mrb, E_TYPE_ERROR, "subrequest: body must be a String or nil");
    }
    m = mm_binding_pstr(mrb, r->pool, method, "the method");
    if (!mm_parse_header_name_ok(m)) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "subrequest: %s is not a method name", m);
    }
    u = mm_binding_header_str(mrb, r->pool, uri, "the URI");
    if (u[0] != '/') {
        mrb_raise(mrb, E_ARGUMENT_ERROR,
                  "subrequest: the URI must be a path of this server (starting with /)");
    }
    if (RARRAY_LEN(hdrs) % 2 || max < 0) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "subrequest: headers must be name, value pairs; max_size >= 0");
    }
    t = apr_table_make(r->pool, (int)(RARRAY_LEN(hdrs) / 2));
    for (i = 0; i < RARRAY_LEN(hdrs); i += 2) {
        const char *k = mm_binding_header_str(mrb, r->pool, mrb_ary_entry(hdrs, i), "a header name");
        const char *v = mm_binding_header_str(mrb, r->pool, mrb_ary_entry(hdrs, i + 1), "a header value");

        if (!mm_parse_header_name_ok(k)) {
            mrb_raise(mrb, E_ARGUMENT_ERROR, "subrequest: a header name is not a token (CR, LF, space, ...)");
        }
        apr_table_set(t, k, v);
    }
    /* The body sent and the one received live in p only as long as this
     * call; the request's pool would keep them until the request ends. */
    apr_pool_create(&p, r->pool);
    if (!mrb_nil_p(body)) {
        data_len = (apr_size_t)RSTRING_LEN(body);
        data = apr_pmemdup(p, RSTRING_PTR(body), data_len ? data_len : 1);
    }
    mm_subreq_run(r, p, m, u, t, data, data_len, (apr_size_t)max, &res);
    out = mrb_ary_new_capa(mrb, 4);
    mrb_ary_push(mrb, out, mrb_fixnum_value(res.status));
    pair[0] = mrb_cptr_value(mrb, mrb);
    pair[1] = mrb_ary_new(mrb);
    apr_table_do(push_header, pair, res.headers, NULL);
    mrb_ary_push(mrb, out, pair[1]);
    pair[1] = mrb_str_new(mrb, NULL, (mrb_int)res.len);
    len = res.len;
    apr_brigade_flatten(res.body, RSTRING_PTR(pair[1]), &len);
    mrb_ary_push(mrb, out, pair[1]);
    mrb_ary_push(mrb, out, mrb_bool_value(res.too_large));
    apr_pool_destroy(p); /* the kept body's buckets go back to the connection's allocator */
    mrb_gc_arena_restore(mrb, ai);
    mrb_gc_protect(mrb, out);
    return out;
}

void mm_subrequest_init(mrb_state *mrb)
{
    struct RClass *req = mrb_class_get_under(mrb, mm_binding_apache(mrb), "Request");

    mrb_define_method(mrb, req, "__subrequest", request_subrequest, MRB_ARGS_REQ(5));
}
