/* rb_input.c: the request body as Ruby sees it: Request#body (all of it)
 * and Apache::Input (Request#input, rack.input): read(n), gets, rewind,
 * each. Reading keeps the bytes for later modules (body.c); at most
 * mrubyRequestBodyLimit bytes may be read, beyond that (or beyond
 * LimitRequestBody) Apache::HTTPError 413 is raised. */

#include "httpd.h"
#include "http_config.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/string.h>

#include "binding.h"
#include "classes.h"
#include "body.h"
#include "config.h"
#include "mod_mruby.h"
#include "vm.h"

#define MM_OFF_MAX ((apr_off_t)(((apr_uint64_t)1 << 62) - 1))

/* Reads until more than upto bytes are kept (or the end); raises on error. */
static mm_body_t *fill(mrb_state *mrb, request_rec *r, apr_off_t upto)
{
    const mm_dir_conf_t *dc = ap_get_module_config(r->per_dir_config, &mruby_module);
    mm_body_t *b = mm_body_of(r);
    const char *why = NULL;
    int rv = mm_body_fill(r, b, upto, mm_config_body_limit(dc), &why);

    if (rv == OK) {
        return b;
    }
    if (rv == AP_FILTER_ERROR) {
        /* httpd has answered the client already (e.g. 413 for a chunked body
         * over LimitRequestBody): the phase must say so, whatever the script
         * does next. */
        mm_binding_run(mrb, "Apache::Input")->forced = AP_FILTER_ERROR;
        rv = HTTP_BAD_REQUEST;
    }
    mm_binding_raise_status(mrb, rv, why ? why : "the request body could not be read");
    return NULL;
}

/* r.body: the whole body as a String (binary), nil when the request has
 * none. */
static mrb_value request_body(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mm_body_t *b;
    mrb_value str;

    if (!ap_request_has_body(r) && mm_body_kept(mm_body_of(r)) == 0) {
        return mrb_nil_value();
    }
    b = fill(mrb, r, MM_OFF_MAX);
    str = mm_vm_data_string(mrb, (mrb_int)mm_body_kept(b));
    mm_body_copy(b, 0, RSTRING_PTR(str), (apr_size_t)mm_body_kept(b), 0);
    return str;
}

/* Apache::Input's position: the run's, so that a script reads the body
 * from its start even after an earlier script (another phase, the request
 * before an internal redirect) read some of it. */
static apr_off_t *cursor_of(mrb_state *mrb)
{
    return &mm_binding_run(mrb, "Apache::Input")->input_pos;
}

/* Takes up to len bytes at the cursor (stopping after LF if lines). */
static mrb_value take(mrb_state *mrb, request_rec *r, apr_off_t len, int lines)
{
    mm_body_t *b = mm_body_of(r);
    apr_off_t *cursor = cursor_of(mrb);
    apr_off_t avail;
    mrb_value str;
    apr_size_t n;

    if (lines) {
        /* A line ends at LF: read on until one is kept, or the end. */
        apr_off_t from = *cursor, lf = -1;

        for (;;) {
            b = fill(mrb, r, from);
            lf = mm_body_find(b, from, '\n');
            if (lf >= 0 || mm_body_complete(b)) {
                break;
            }
            from = mm_body_kept(b);
        }
        len = lf >= 0 ? lf - *cursor + 1 : mm_body_kept(b) - *cursor;
    } else {
        b = fill(mrb, r, len >= MM_OFF_MAX - *cursor ? MM_OFF_MAX : *cursor + len - 1);
    }
    avail = mm_body_kept(b) - *cursor;
    if (len > avail) {
        len = avail;
    }
    str = mm_vm_data_string(mrb, (mrb_int)len);
    n = mm_body_copy(b, *cursor, RSTRING_PTR(str), (apr_size_t)len, lines);
    RSTR_SET_LEN(mrb_str_ptr(str), n);
    *cursor += (apr_off_t)n;
    return str;
}

/* input.read -> the rest ("" at the end); input.read(n) -> up to n bytes,
 * nil at the end (as IO#read and Rack's input). */
static mrb_value input_read(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mrb_value len = mrb_nil_value(), buf = mrb_nil_value(), str;
    mrb_int n;

    mrb_get_args(mrb, "|oo", &len, &buf);
    /* as IO#read: a buffer that is not a String is a mistake, not "no buffer" */
    if (!mrb_nil_p(buf) && !mrb_string_p(buf)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "Apache::Input#read: the buffer must be a String, not %s",
                   mrb_obj_classname(mrb, buf));
    }
    if (mrb_nil_p(len)) {
        str = take(mrb, r, MM_OFF_MAX, 0);
    } else {
        n = mrb_as_int(mrb, len);
        if (n < 0) {
            mrb_raise(mrb, E_ARGUMENT_ERROR, "Apache::Input#read: negative length");
        }
        if (n == 0) {
            str = mrb_str_new_lit(mrb, "");
        } else {
            str = take(mrb, r, n > MM_OFF_MAX ? MM_OFF_MAX : (apr_off_t)n, 0);
            if (RSTRING_LEN(str) == 0) {
                str = mrb_nil_value();
            }
        }
    }
    if (mrb_string_p(buf)) {
        mrb_funcall(mrb, buf, "replace", 1, mrb_nil_p(str) ? mrb_str_new_lit(mrb, "") : str);
        return mrb_nil_p(str) ? str : buf;
    }
    return str;
}

/* input.gets -> the next line with its LF, nil at the end. */
static mrb_value input_gets(mrb_state *mrb, mrb_value self)
{
    mrb_value line = take(mrb, mm_binding_unwrap(mrb, self, NULL), 0, 1);

    return RSTRING_LEN(line) ? line : mrb_nil_value();
}

static mrb_value input_rewind(mrb_state *mrb, mrb_value self)
{
    mm_binding_unwrap(mrb, self, NULL); /* raises for an object of an ended request */
    *cursor_of(mrb) = 0;
    return mrb_fixnum_value(0);
}

static mrb_value input_eof_p(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    apr_off_t cursor = *cursor_of(mrb);

    return mrb_bool_value(cursor >= mm_body_kept(fill(mrb, r, cursor)));
}

void mm_input_init(mrb_state *mrb)
{
    struct RClass *apache = mm_binding_apache(mrb);
    struct RClass *req = mrb_class_get_under(mrb, apache, "Request");
    struct RClass *in = mm_binding_define_wrapper_class(mrb, "Input", 1);

    mrb_define_method(mrb, req, "body", request_body, MRB_ARGS_NONE());
    mm_binding_define_reader(mrb, "input", in, 0);
    mrb_define_method(mrb, in, "read", input_read, MRB_ARGS_OPT(2));
    mrb_define_method(mrb, in, "gets", input_gets, MRB_ARGS_NONE());
    mrb_define_method(mrb, in, "rewind", input_rewind, MRB_ARGS_NONE());
    mrb_define_method(mrb, in, "eof?", input_eof_p, MRB_ARGS_NONE());
}
