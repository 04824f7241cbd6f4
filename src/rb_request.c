/* rb_request.c: Apache::Request, the current request_rec. The string fields
 * are a table: one getter and one setter serve every row, each method
 * finding its row through the index stored in its proc's environment.
 * Strings set from Ruby are copied into r->pool. */

#include <stddef.h>

#include "httpd.h"
#include "http_protocol.h"
#include "util_filter.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/proc.h>
#include <mruby/string.h>

#include "binding.h"

typedef struct {
    const char *name;
    size_t offset;                             /* of the char * in request_rec */
    int nullable;                              /* may be set to nil */
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

#define MM_FIELD(name, nullable, assign)                                                                     \
    {                                                                                                        \
#name, offsetof(request_rec, name), nullable, assign                                                 \
    }

static const mm_field_t fields[] = {
    MM_FIELD(the_request, 0, NULL),  MM_FIELD(protocol, 0, NULL),
    MM_FIELD(hostname, 0, NULL),     MM_FIELD(method, 0, assign_method),
    MM_FIELD(unparsed_uri, 0, NULL), MM_FIELD(uri, 0, NULL),
    MM_FIELD(filename, 0, NULL),     MM_FIELD(path_info, 1, NULL),
    MM_FIELD(args, 1, NULL),         MM_FIELD(content_type, 1, assign_content_type),
    MM_FIELD(handler, 1, NULL),      MM_FIELD(user, 1, NULL),
    MM_FIELD(ap_auth_type, 1, NULL),
};

#define FIELD_COUNT (sizeof fields / sizeof fields[0])

static const mm_field_t *field_of_method(mrb_state *mrb)
{
    return &fields[mrb_fixnum(mrb_cfunc_env_get(mrb, 0))];
}

static mrb_value field_get(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    const mm_field_t *f = field_of_method(mrb);
    const char *val = *(const char **)((char *)r + f->offset);

    return val ? mrb_str_new_cstr(mrb, val) : mrb_nil_value();
}

static mrb_value field_set(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    const mm_field_t *f = field_of_method(mrb);
    mrb_value arg = mrb_get_arg1(mrb);
    char *val = NULL;

    if (mrb_nil_p(arg)) {
        if (!f->nullable) {
            mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::Request#%s cannot be nil", f->name);
        }
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

static void define_with_index(mrb_state *mrb, struct RClass *c, const char *name, mrb_func_t fn, size_t i)
{
    mrb_value idx = mrb_fixnum_value((mrb_int)i);
    struct RProc *p = mrb_proc_new_cfunc_with_env(mrb, fn, 1, &idx);
    mrb_method_t m;

    MRB_METHOD_FROM_PROC(m, p);
    mrb_define_method_raw(mrb, c, mrb_intern_cstr(mrb, name), m);
}

static mrb_value request_new(mrb_state *mrb, mrb_value klass)
{
    return mm_binding_wrap(mrb, mrb_class_ptr(klass), 0);
}

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
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache::Request#status=: %d is not an HTTP status", (int)status);
    }
    r->status = (int)status;
    return mrb_fixnum_value(status);
}

/* add_output_filter(name) / add_input_filter(name): inserts a registered
 * httpd filter (e.g. "DEFLATE") for this request; meant for InsertFilter
 * and earlier phases. */
static mrb_value request_add_filter(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    int input = mrb_fixnum(mrb_cfunc_env_get(mrb, 0));
    const char *name = mm_binding_pstr(mrb, r->pool, mrb_get_arg1(mrb), "a filter name");
    ap_filter_t *f = input ? ap_add_input_filter(name, NULL, r, r->connection)
                           : ap_add_output_filter(name, NULL, r, r->connection);

    if (f == NULL) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "no %s filter named '%s' is registered", input ? "input" : "output",
                   name);
    }
    return self;
}

/* The tables are classes of their own (rb_table.c); each reader returns
 * one bound to this request, its kind stored in the method's environment. */
static mrb_value request_table(mrb_state *mrb, mrb_value self)
{
    mm_binding_unwrap(mrb, self, NULL);
    return mm_table_new(mrb, (mm_table_kind_e)mrb_fixnum(mrb_cfunc_env_get(mrb, 0)));
}

void mm_request_init(mrb_state *mrb)
{
    struct RClass *req = mrb_define_class_under(mrb, mm_binding_apache(mrb), "Request", mrb->object_class);
    size_t i;

    MRB_SET_INSTANCE_TT(req, MRB_TT_DATA);
    mrb_define_class_method(mrb, req, "new", request_new, MRB_ARGS_NONE());
    for (i = 0; i < FIELD_COUNT; i++) {
        char setter[64];

        define_with_index(mrb, req, fields[i].name, field_get, i);
        snprintf(setter, sizeof setter, "%s=", fields[i].name);
        define_with_index(mrb, req, setter, field_set, i);
    }
    mrb_define_method(mrb, req, "status", request_status, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "status=", request_set_status, MRB_ARGS_REQ(1));
    define_with_index(mrb, req, "headers_in", request_table, MM_TABLE_HEADERS_IN);
    define_with_index(mrb, req, "headers_out", request_table, MM_TABLE_HEADERS_OUT);
    define_with_index(mrb, req, "err_headers_out", request_table, MM_TABLE_ERR_HEADERS_OUT);
    define_with_index(mrb, req, "notes", request_table, MM_TABLE_NOTES);
    define_with_index(mrb, req, "add_output_filter", request_add_filter, 0);
    define_with_index(mrb, req, "add_input_filter", request_add_filter, 1);
}
