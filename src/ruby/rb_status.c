/* rb_status.c: Apache::Status.counters, the module's counters for the
 * whole server (counters.c), as server-status shows them: a Hash of each
 * counter's name and value, read afresh at every call. */

#include "httpd.h"

#include <mruby.h>
#include <mruby/hash.h>
#include <mruby/string.h>

#include "binding.h"
#include "classes.h"
#include "counters.h"

static void put(mrb_state *mrb, mrb_value h, const char *name, apr_uint64_t value)
{
    mrb_int n = value > (apr_uint64_t)MRB_INT_MAX ? MRB_INT_MAX : (mrb_int)value;

    mrb_hash_set(mrb, h, mrb_str_new_cstr(mrb, name), mrb_int_value(mrb, n));
}

static mrb_value status_counters(mrb_state *mrb, mrb_value self)
{
    mm_counters_t c;
    mrb_value h = mrb_hash_new_capa(mrb, MM_CTR_COUNT + 3);
    int i;

    mm_counters_server(&c);
    put(mrb, h, "children", c.children);
    put(mrb, h, "vms_alive", c.vms_alive);
    put(mrb, h, "vms_created", c.vms_created);
    for (i = 0; i < MM_CTR_COUNT; i++) {
        put(mrb, h, mm_counter_name(i), c.v[i]);
    }
    return h;
}

void mm_status_init(mrb_state *mrb)
{
    struct RClass *status = mrb_define_module_under(mrb, mm_binding_apache(mrb), "Status");

    mrb_define_module_function(mrb, status, "counters", status_counters, MRB_ARGS_NONE());
}
