/* rb_timer.c: Apache::Timer.every, .after and .cancel: timers of the
 * child's timer thread (timer.c), set by mrubyTimers scripts and by timer
 * blocks, the only runs of that thread's VM. */

#include "apr_strings.h"

#include <mruby.h>
#include <mruby/class.h>

#include "binding.h"
#include "timer.h"

/* Timers are the timer thread's: its runs are of the Timers kind. */
static void check_where(mrb_state *mrb, const char *what)
{
    mm_run_t *run = mm_binding_run(mrb, what);

    if (mm_timer_kind == NULL || run->kind != mm_timer_kind) {
        mrb_raisef(mrb, E_RUNTIME_ERROR,
                   "%s can only be used in mrubyTimers scripts and timer blocks, not in a %s script", what,
                   run->kind->stem);
    }
}

/* Seconds (an Integer or a Float) from 0.01 to a year, as microseconds. */
static apr_interval_time_t interval_of(mrb_state *mrb, mrb_value secs)
{
    mrb_float f;

    if (mrb_integer_p(secs)) {
        f = (mrb_float)mrb_integer(secs);
    } else if (mrb_float_p(secs)) {
        f = mrb_float(secs);
    } else {
        mrb_raise(mrb, E_TYPE_ERROR, "the interval must be a number of seconds");
    }
    if (!(f >= 0.01 && f <= 366.0 * 86400)) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "the interval must be from 0.01 to 31622400 seconds");
    }
    return (apr_interval_time_t)(f * APR_USEC_PER_SEC);
}

static mrb_value add(mrb_state *mrb, int repeat)
{
    const char *what = repeat ? "Apache::Timer.every" : "Apache::Timer.after";
    mrb_value secs, block;
    const char *file = NULL;
    int line = 0;
    mrb_int id;
    char where[128];

    mrb_sym names[1];
    mrb_value values[1];
    mrb_kwargs kw;

    names[0] = mrb_intern_lit(mrb, "singleton");
    kw.num = 1;
    kw.required = 0;
    kw.table = names;
    kw.values = values;
    kw.rest = NULL;
    mrb_get_args(mrb, "o:&", &secs, &kw, &block);
    check_where(mrb, what);
    if (mrb_nil_p(block)) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "%s needs a block", what);
    }
    if (mm_binding_caller(mrb, &file, &line) && file) {
        apr_snprintf(where, sizeof where, "%s:%d", file, line);
    } else {
        apr_cpystrn(where, "?", sizeof where);
    }
    id = mm_timer_add(mrb, block, interval_of(mrb, secs), repeat,
                      !mrb_undef_p(values[0]) && mrb_test(values[0]), where);
    if (id == 0) {
        mrb_raisef(mrb, E_RUNTIME_ERROR, "%s: a child has at most %d timers", what, MM_TIMER_MAX);
    }
    return mrb_int_value(mrb, id);
}

static mrb_value timer_every(mrb_state *mrb, mrb_value self)
{
    return add(mrb, 1);
}

static mrb_value timer_after(mrb_state *mrb, mrb_value self)
{
    return add(mrb, 0);
}

static mrb_value timer_cancel(mrb_state *mrb, mrb_value self)
{
    mrb_int id;

    mrb_get_args(mrb, "i", &id);
    check_where(mrb, "Apache::Timer.cancel");
    return mrb_bool_value(mm_timer_cancel(mrb, id));
}

void mm_timer_init(mrb_state *mrb)
{
    struct RClass *c = mrb_define_module_under(mrb, mm_binding_apache(mrb), "Timer");

    mrb_define_module_function(mrb, c, "every", timer_every,
                               MRB_ARGS_REQ(1) | MRB_ARGS_KEY(1, 0) | MRB_ARGS_BLOCK());
    mrb_define_module_function(mrb, c, "after", timer_after,
                               MRB_ARGS_REQ(1) | MRB_ARGS_KEY(1, 0) | MRB_ARGS_BLOCK());
    mrb_define_module_function(mrb, c, "cancel", timer_cancel, MRB_ARGS_REQ(1));
}
