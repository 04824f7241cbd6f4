/* rb_request.c: Apache::Request, the current request_rec. The string and
 * integer fields are tables: one getter and one setter serve every row, each
 * method finding its row through the index stored in its proc's
 * environment. Strings set from Ruby are copied into r->pool. */

#include <stddef.h>

#include "apr_strings.h"
#include "httpd.h"
#include "http_core.h"
#include "http_protocol.h"
#include "http_request.h"
#include "util_filter.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/proc.h>
#include <mruby/string.h>

#include <string.h>

#include "binding.h"
#include "classes.h"

/* A string field's rules. */
#define MM_F_NULLABLE 1 /* may be set to nil */
#define MM_F_LINE     2 /* ends up in a header or a log line: no CR or LF */

typedef struct {
    const char *name;
    size_t offset;                             /* of the char * in request_rec */
    int flags;                                 /* MM_F_* */
    void (*assign)(request_rec *r, char *val); /* instead of a plain store */
} mm_field_t;

static void assign_method(request_rec *r, char *val)
{
    r->method = val;
    r->method_number = ap_method_number_of(val);
}

static void assign_content_type(request_rec *r, char *val)
{
    if (val) {
        ap_set_content_type(r, val);
    } else {
        r->content_type = NULL;
    }
}

#define MM_FIELD(name, flags, assign)                                                                        \
    {                                                                                                        \
#name, offsetof(request_rec, name), flags, assign                                                    \
    }
#define N MM_F_NULLABLE
#define L MM_F_LINE

static const mm_field_t fields[] = {
    MM_FIELD(the_request, L, NULL),
    MM_FIELD(protocol, L, NULL),
    MM_FIELD(hostname, L, NULL),
    MM_FIELD(method, L, assign_method),
    MM_FIELD(unparsed_uri, L, NULL),
    MM_FIELD(uri, 0, NULL),
    MM_FIELD(filename, 0, NULL),
    MM_FIELD(canonical_filename, N, NULL),
    MM_FIELD(path_info, N, NULL),
    MM_FIELD(args, N | L, NULL), /* a query string, still encoded: a control byte is never one */
    MM_FIELD(content_type, N | L, assign_content_type),
    MM_FIELD(handler, N | L, NULL),
    MM_FIELD(content_encoding, N | L, NULL),
    MM_FIELD(status_line, N | L, NULL),
    MM_FIELD(vlist_validator, N | L, NULL),
    MM_FIELD(user, N | L, NULL),
    MM_FIELD(ap_auth_type, N | L, NULL),
    MM_FIELD(range, N | L, NULL),
};

#undef N
#undef L
#define FIELD_COUNT (sizeof fields / sizeof fields[0])

/* Each method below is one of MM_INDEXED_MAX plain C functions per
 * table (binding.h). */
typedef char mm_fields_fit[FIELD_COUNT <= MM_INDEXED_MAX ? 1 : -1];

static mrb_value field_get(mrb_state *mrb, mrb_value self, size_t i)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    const mm_field_t *f = &fields[i];
    const char *val = *(const char **)((char *)r + f->offset);

    return val ? mrb_str_new_cstr(mrb, val) : mrb_nil_value();
}

MM_INDEXED_FUNCS(field_get);

static mrb_value field_set(mrb_state *mrb, mrb_value self, size_t i)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    const mm_field_t *f = &fields[i];
    mrb_value arg = mrb_get_arg1(mrb);
    char *val = NULL;

    if (mrb_nil_p(arg)) {
        if (!(f->flags & MM_F_NULLABLE)) {
            mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::Request#%s cannot be nil", f->name);
        }
    } else if (f->flags & MM_F_LINE) {
        val = mm_binding_header_str(mrb, r->pool, arg, f->name);
    } else {
        val = mm_binding_pstr(mrb, r->pool, arg, f->name);
    }
    if (f->assign) {
        f->assign(r, val);
    } else {
        *(char **)((char *)r + f->offset) = val;
    }
    return arg;
}
MM_INDEXED_FUNCS(field_set);

/* The integer fields and flags, read-only (proxyreq= is below). */
static const struct {
    const char *name;
    size_t offset; /* of the int in request_rec */
} int_fields[] = {
#define MM_INT(name)                                                                                         \
    {                                                                                                        \
#name, offsetof(request_rec, name)                                                                   \
    }
    MM_INT(assbackwards),   MM_INT(proxyreq), MM_INT(header_only), MM_INT(proto_num),
    MM_INT(method_number),  MM_INT(chunked),  MM_INT(read_body),   MM_INT(read_chunked),
    MM_INT(used_path_info), MM_INT(eos_sent), MM_INT(no_cache),    MM_INT(no_local_copy),
#undef MM_INT
};

typedef char mm_int_fields_fit[sizeof int_fields / sizeof int_fields[0] <= MM_INDEXED_MAX ? 1 : -1];

static mrb_value int_field_get(mrb_state *mrb, mrb_value self, size_t i)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);

    return mrb_fixnum_value(*(int *)((char *)r + int_fields[i].offset));
}
MM_INDEXED_FUNCS(int_field_get);

/* r.proxyreq = Apache::PROXYREQ_REVERSE etc. (what mod_proxy looks at). */
static mrb_value request_set_proxyreq(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mrb_int kind;

    mrb_get_args(mrb, "i", &kind);
    if (kind != PROXYREQ_NONE && kind != PROXYREQ_PROXY && kind != PROXYREQ_REVERSE &&
        kind != PROXYREQ_RESPONSE) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::Request#proxyreq=: %d is not an Apache::PROXYREQ_*",
                   (int)kind);
    }
    r->proxyreq = (int)kind;
    return mrb_fixnum_value(kind);
}

/* Relations with other requests, as mod_mruby named them: main? and
 * sub_request? are true in a subrequest (it has a main request), prev? and
 * internal_redirect? after an internal redirect, next? and
 * external_redirect? once this request has been redirected. */
static mrb_value request_relation(mrb_state *mrb, mrb_value self, size_t i)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    static const size_t offsets[] = {offsetof(request_rec, main), offsetof(request_rec, prev),
                                     offsetof(request_rec, next)};

    return mrb_bool_value(*(request_rec **)((char *)r + offsets[i]) != NULL);
}
MM_INDEXED_FUNCS(request_relation);

static mrb_value request_status(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(mm_binding_unwrap(mrb, self, NULL)->status);
}

static mrb_value request_set_status(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mrb_int status;

    mrb_get_args(mrb, "i", &status);
    if (status < 100 || status > 599) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::Request#status=: %i is not an HTTP status", status);
    }
    if (status < 200) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR,
                   "Apache::Request#status=: %i is not a final status (1xx are httpd's to send)", status);
    }
    r->status = (int)status;
    return mrb_fixnum_value(status);
}

static mrb_value request_content_length(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value((mrb_int)mm_binding_unwrap(mrb, self, NULL)->clength);
}

static mrb_value request_set_content_length(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mrb_int len;

    mrb_get_args(mrb, "i", &len);
    if (len < 0) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "Apache::Request#content_length= must not be negative");
    }
    ap_set_content_length(r, (apr_off_t)len);
    return mrb_fixnum_value(len);
}

static mrb_value request_document_root(mrb_state *mrb, mrb_value self)
{
    const char *root = ap_document_root(mm_binding_unwrap(mrb, self, NULL));

    return root ? mrb_str_new_cstr(mrb, root) : mrb_nil_value();
}

/* For this request only (ap_set_document_root): the server's configuration,
 * shared by every thread, is never written. */
static mrb_value request_set_document_root(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mrb_value root = mrb_get_arg1(mrb);

    ap_set_document_root(r, mm_binding_pstr(mrb, r->pool, root, "document_root"));
    return root;
}

static mrb_value request_scheme(mrb_state *mrb, mrb_value self)
{
    const char *scheme = ap_http_scheme(mm_binding_unwrap(mrb, self, NULL));

    return scheme ? mrb_str_new_cstr(mrb, scheme) : mrb_nil_value();
}

/* Seconds since the request line arrived (a Float). */
static mrb_value request_response_time(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);

    return mrb_float_value(mrb, (mrb_float)(apr_time_now() - r->request_time) / APR_USEC_PER_SEC);
}

/* r.error_log(level, msg), r.log: to the error log with the client's
 * address and the script's file:line. */
static mrb_value request_error_log(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mrb_int level;
    mrb_value msg;

    mrb_get_args(mrb, "io", &level, &msg);
    mm_binding_log(mrb, r, r->server, level, msg);
    return msg;
}

/* r.internal_redirect(uri): httpd serves uri instead, as a new request
 * (ap_internal_redirect); only from the content handler, before anything
 * was sent. What this script writes afterwards is discarded. */
static mrb_value request_internal_redirect(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mm_run_t *run = mm_binding_run(mrb, "Apache::Request#internal_redirect");
    mrb_value uri = mrb_get_arg1(mrb);
    char *target = mm_binding_header_str(mrb, r->pool, uri, "the redirect URI");

    if (run->kind != &mm_phases[MM_PHASE_HANDLER] || run->r != r) {
        mrb_raise(mrb, E_RUNTIME_ERROR,
                  "Apache::Request#internal_redirect works only in the content handler");
    }
    if (target[0] != '/') {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "Apache::Request#internal_redirect: the URI must start with /");
    }
    if (run->forced != MM_STATUS_UNSET) {
        mrb_raise(mrb, E_RUNTIME_ERROR,
                  "Apache::Request#internal_redirect: the response was already produced");
    }
    if (mm_run_discard_output(r)) {
        mrb_raise(mrb, E_RUNTIME_ERROR,
                  "Apache::Request#internal_redirect: part of the response was already sent");
    }
    run->forced = OK;
    ap_internal_redirect(target, r);
    return mrb_nil_value();
}

/* r.__check: raises for an object of an ended request. The Ruby half calls
 * it before handing out what it memoized on the object (query_params, ...),
 * which must not outlive the request either. */
static mrb_value request_check(mrb_state *mrb, mrb_value self)
{
    mm_binding_unwrap(mrb, self, NULL);
    return self;
}

/* add_output_filter(name) / add_input_filter(name): inserts a registered
 * httpd filter (e.g. "DEFLATE") for this request; meant for InsertFilter
 * and earlier phases. */
static mrb_value request_add_filter(mrb_state *mrb, mrb_value self, int input)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    const char *name = mm_binding_pstr(mrb, r->pool, mrb_get_arg1(mrb), "a filter name");
    ap_filter_t *f = input ? ap_add_input_filter(name, NULL, r, r->connection)
                           : ap_add_output_filter(name, NULL, r, r->connection);

    if (f == NULL) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "no %s filter named '%s' is registered", input ? "input" : "output",
                   name);
    }
    return self;
}

static mrb_value request_add_output_filter(mrb_state *mrb, mrb_value self)
{
    return request_add_filter(mrb, self, 0);
}

static mrb_value request_add_input_filter(mrb_state *mrb, mrb_value self)
{
    return request_add_filter(mrb, self, 1);
}

void mm_request_init(mrb_state *mrb)
{
    struct RClass *req = mm_binding_define_wrapper_class(mrb, "Request", 1);
    size_t i;

    for (i = 0; i < FIELD_COUNT; i++) {
        char setter[64];

        mrb_define_method(mrb, req, fields[i].name, field_get_at[i], MRB_ARGS_ANY());
        snprintf(setter, sizeof setter, "%s=", fields[i].name);
        mrb_define_method(mrb, req, setter, field_set_at[i], MRB_ARGS_ANY());
    }
    for (i = 0; i < sizeof int_fields / sizeof int_fields[0]; i++) {
        mrb_define_method(mrb, req, int_fields[i].name, int_field_get_at[i], MRB_ARGS_ANY());
    }
    mrb_define_method(mrb, req, "proxyreq=", request_set_proxyreq, MRB_ARGS_REQ(1));
    for (i = 0; i < 6; i++) {
        static const char *const names[] = {
            "main?", "prev?", "next?", "sub_request?", "internal_redirect?", "external_redirect?"};
        mrb_define_method(mrb, req, names[i], request_relation_at[i % 3], MRB_ARGS_ANY());
    }
    mrb_define_method(mrb, req, "status", request_status, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "status=", request_set_status, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, req, "content_length", request_content_length, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "content_length=", request_set_content_length, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, req, "document_root", request_document_root, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "document_root=", request_set_document_root, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, req, "scheme", request_scheme, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "response_time", request_response_time, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "error_log", request_error_log, MRB_ARGS_REQ(2));
    mrb_define_method(mrb, req, "log", request_error_log, MRB_ARGS_REQ(2));
    mrb_define_method(mrb, req, "internal_redirect", request_internal_redirect, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, req, "__check", request_check, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "add_output_filter", request_add_output_filter, MRB_ARGS_ANY());
    mrb_define_method(mrb, req, "add_input_filter", request_add_input_filter, MRB_ARGS_ANY());
}
