/* rb_filter.c: Apache::Filter, the data an output or input filter script
 * works on (mod_mruby's API: flatten, cleanup, insert_head, insert_tail,
 * insert_eos, length, empty?, error_create) and where it is in the body
 * (first?, eos?, buffered?) with its state for the request (ctx). The
 * Ruby half (body, data=, puts, uid, gid) is in
 * mrbgems/mruby-apache/mrblib/filter.rb.
 * Strings are copied into buckets of the connection's allocator: nothing
 * in httpd points at Ruby memory after a call. */

#include "apr_buckets.h"
#include "httpd.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/string.h>

#include "binding.h"
#include "classes.h"
#include "filter.h"

static const mm_kind_class_t filter_class = {"Filter", "filter scripts", &mm_filter_out_kind,
                                             &mm_filter_in_kind};

/* The run of the object's own request and script; raises for an object
 * kept from another run. */
static mm_filter_run_t *run_of(mrb_state *mrb, mrb_value self)
{
    return mm_binding_kind_object_data(mrb, self);
}

static apr_off_t data_length(mrb_state *mrb, mm_filter_run_t *run)
{
    apr_off_t len = 0;

    if (apr_brigade_length(run->bb, 1, &len) != APR_SUCCESS) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Filter: the data cannot be read");
    }
    return len;
}

/* flatten: the data as one binary String (the whole body in buffer mode,
 * this chunk otherwise). */
static mrb_value filter_flatten(mrb_state *mrb, mrb_value self)
{
    mm_filter_run_t *run = run_of(mrb, self);
    apr_off_t len = data_length(mrb, run);
    apr_size_t got = (apr_size_t)len;
    mrb_value str;

    if ((uint64_t)len > (uint64_t)MRB_INT_MAX) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Filter#flatten: the data is too large for a String");
    }
    str = mm_vm_data_string(mrb, (mrb_int)len);
    if (apr_brigade_flatten(run->bb, RSTRING_PTR(str), &got) != APR_SUCCESS || got != (apr_size_t)len) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Filter#flatten: the data cannot be read");
    }
    return str;
}

static mrb_value filter_length(mrb_state *mrb, mrb_value self)
{
    return mrb_int_value(mrb, (mrb_int)data_length(mrb, run_of(mrb, self)));
}

static mrb_value filter_empty_p(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(data_length(mrb, run_of(mrb, self)) == 0);
}

static mrb_value filter_cleanup(mrb_state *mrb, mrb_value self)
{
    mm_filter_run_t *run = run_of(mrb, self);

    apr_brigade_cleanup(run->bb);
    run->changed = 1;
    return self;
}

static mrb_value insert(mrb_state *mrb, mrb_value self, int head)
{
    mm_filter_run_t *run = run_of(mrb, self);
    mrb_value str = mrb_obj_as_string(mrb, mrb_get_arg1(mrb));
    apr_bucket *b;

    /* A heap bucket made without a free function copies the bytes. */
    b = apr_bucket_heap_create(RSTRING_PTR(str), (apr_size_t)RSTRING_LEN(str), NULL, run->f->c->bucket_alloc);
    if (head) {
        APR_BRIGADE_INSERT_HEAD(run->bb, b);
    } else {
        APR_BRIGADE_INSERT_TAIL(run->bb, b);
    }
    run->changed = 1;
    return self;
}

static mrb_value filter_insert_head(mrb_state *mrb, mrb_value self)
{
    return insert(mrb, self, 1);
}

static mrb_value filter_insert_tail(mrb_state *mrb, mrb_value self)
{
    return insert(mrb, self, 0);
}

/* insert_eos: the body ends after this run's data; the filter sends the
 * one EOS itself and drops whatever would follow. */
static mrb_value filter_insert_eos(mrb_state *mrb, mrb_value self)
{
    mm_filter_run_t *run = run_of(mrb, self);

    if (!run->last) {
        run->ended = 1;
        run->changed = 1;
    }
    return self;
}

/* error_create(status): the body fails with an HTTP error status. */
static mrb_value filter_error_create(mrb_state *mrb, mrb_value self)
{
    mm_filter_run_t *run = run_of(mrb, self);
    mrb_int status;

    mrb_get_args(mrb, "i", &status);
    if (status < 400 || status > 599) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR,
                   "Apache::Filter#error_create: %i is not an HTTP error status (400..599)", status);
    }
    apr_brigade_cleanup(run->bb);
    run->error_status = (int)status;
    run->changed = 1;
    return mrb_int_value(mrb, status);
}

/* Where the run is in the body. */
static mrb_value filter_first_p(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(run_of(mrb, self)->first);
}

/* eos?: the body ends after this run's data, because it came to its end
 * or because the script ended it (insert_eos): either way, a tail goes
 * here. */
static mrb_value filter_eos_p(mrb_state *mrb, mrb_value self)
{
    mm_filter_run_t *run = run_of(mrb, self);

    return mrb_bool_value(run->last || run->ended);
}

static mrb_value filter_buffered_p(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(run_of(mrb, self)->buffered);
}

static mrb_value filter_input_p(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(run_of(mrb, self)->input);
}

static mrb_value filter_ctx(mrb_state *mrb, mrb_value self)
{
    return mm_filter_state_load(mrb, run_of(mrb, self));
}

void mm_filter_init(mrb_state *mrb)
{
    struct RClass *cls = mm_binding_define_kind_class(mrb, &filter_class);

    mrb_define_method(mrb, cls, "flatten", filter_flatten, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "length", filter_length, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "empty?", filter_empty_p, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "cleanup", filter_cleanup, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "insert_head", filter_insert_head, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, cls, "insert_tail", filter_insert_tail, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, cls, "insert_eos", filter_insert_eos, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "error_create", filter_error_create, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, cls, "first?", filter_first_p, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "eos?", filter_eos_p, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "buffered?", filter_buffered_p, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "input?", filter_input_p, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "ctx", filter_ctx, MRB_ARGS_NONE());
}
