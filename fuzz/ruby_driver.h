/* ruby_driver.h: what the harnesses that run Ruby share (fuzz_ruby,
 * fuzz_json): one VM serves every input, with the harness's Ruby driver
 * loaded, which defines __fuzz; an exception out of __fuzz is a finding. */

#ifndef MM_FUZZ_RUBY_DRIVER_H
#define MM_FUZZ_RUBY_DRIVER_H

#include <stdlib.h>

#include <mruby.h>
#include <mruby/compile.h>

static void driver_check(mrb_state *mrb)
{
    if (mrb->exc) {
        mrb_print_error(mrb);
        abort();
    }
}

/* A VM with what init defines (if any), then the driver's Ruby. */
static mrb_state *driver_open(const char *driver, void (*init)(mrb_state *))
{
    mrb_state *mrb = mrb_open();

    if (mrb == NULL) {
        abort();
    }
    if (init) {
        init(mrb);
    }
    mrb_load_string(mrb, driver);
    driver_check(mrb);
    return mrb;
}

/* __fuzz(*argv) */
static void driver_call(mrb_state *mrb, mrb_int argc, const mrb_value *argv)
{
    mrb_funcall_argv(mrb, mrb_top_self(mrb), mrb_intern_lit(mrb, "__fuzz"), argc, argv);
    driver_check(mrb);
}

#endif
