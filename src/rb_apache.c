/* rb_apache.c: the Apache class: response output (rputs), the phase result
 * (Apache.return) and the constants from httpd's headers. */

#include "httpd.h"
#include "http_log.h"

#include <mruby.h>
#include <mruby/string.h>

#include "binding.h"

/* Apache.rputs(obj): writes obj.to_s to the response, byte for byte. */
static mrb_value apache_rputs(mrb_state *mrb, mrb_value self)
{
    mrb_value obj = mrb_get_arg1(mrb);
    request_rec *r = mm_binding_request(mrb, "Apache.rputs");

    if (mm_vm_of(mrb)->run->kind->flags & MM_KIND_NO_OUTPUT) {
        mrb_raisef(mrb, E_RUNTIME_ERROR, "Apache.rputs cannot be used in a %s script",
                   mm_vm_of(mrb)->run->kind->stem);
    }
    if (!mrb_string_p(obj)) {
        obj = mrb_obj_as_string(mrb, obj);
    }
    if (mm_run_write(r, RSTRING_PTR(obj), (apr_size_t)RSTRING_LEN(obj)) == APR_EOF) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache.rputs: the response has already been sent");
    }
    return mrb_nil_value();
}

/* Apache.return(status): the phase's result (see docs/ruby-api.md). The
 * script goes on running; the last call wins. */
static mrb_value apache_return(mrb_state *mrb, mrb_value self)
{
    mrb_int status;
    mm_run_t *run = mm_binding_run(mrb, "Apache.return");

    mrb_get_args(mrb, "i", &status);
    if (status < INT_MIN + 1 || status > INT_MAX) {
        mrb_raise(mrb, E_RANGE_ERROR, "Apache.return: status out of range");
    }
    run->status = (int)status;
    return mrb_fixnum_value(status);
}

void mm_apache_init(mrb_state *mrb)
{
    struct RClass *apache = mrb_define_class(mrb, "Apache", mrb->object_class);

    mrb_define_class_method(mrb, apache, "rputs", apache_rputs, MRB_ARGS_REQ(1));
    mrb_define_class_method(mrb, apache, "return", apache_return, MRB_ARGS_REQ(1));
    /* Raised into a script that runs longer than mrubyTimeout. */
    mrb_define_class_under(mrb, apache, "Timeout", mrb->eException_class);

#define MM_CONST(name) mrb_define_const(mrb, apache, #name, mrb_fixnum_value(name));
#include "constants.inc"
#undef MM_CONST
}
