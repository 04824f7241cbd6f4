/* binding.c: the init order of the Ruby API and the helpers every class
 * binding uses to reach the current request safely. */

#include "apr_strings.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/irep.h>
#include <mruby/string.h>

#include <string.h>

#include "binding.h"
#include "vm.h"

/* The Ruby half of the API, compiled by mrbc at build time, unless the gem
 * is part of libmruby (the mruby source build). */
#ifndef MM_MRBLIB_IN_LIBMRUBY
extern const uint8_t mm_mrblib_irep[];
#endif

/* Apache first: every other class is nested in it; the tables before
 * Apache::Request, whose readers return them. One line each, so that
 * additions merge cleanly. */
/* clang-format off */
static void (*const class_inits[])(mrb_state *) = {
    mm_apache_init,
    mm_table_init,
    mm_request_init,
    mm_async_init,
    mm_filter_init,
    mm_authn_init,
    mm_authz_init,
};
/* clang-format on */

void mm_binding_init(mrb_state *mrb)
{
    size_t i;

    for (i = 0; i < sizeof class_inits / sizeof class_inits[0]; i++) {
        class_inits[i](mrb);
    }
#ifndef MM_MRBLIB_IN_LIBMRUBY
    mrb_load_irep(mrb, mm_mrblib_irep);
#endif
}

struct RClass *mm_binding_apache(mrb_state *mrb)
{
    return mrb_class_get(mrb, "Apache");
}

mm_run_t *mm_binding_run(mrb_state *mrb, const char *what)
{
    mm_run_t *run = mm_vm_of(mrb)->run;

    if (run == NULL) {
        mrb_raisef(mrb, E_RUNTIME_ERROR, "%s can only be used while a request or phase runs", what);
    }
    return run;
}

request_rec *mm_binding_request(mrb_state *mrb, const char *what)
{
    mm_run_t *run = mm_binding_run(mrb, what);

    if (run->r == NULL) {
        mrb_raisef(mrb, E_RUNTIME_ERROR, "%s needs a request, and the %s phase has none", what,
                   run->kind->stem);
    }
    return run->r;
}

void *mm_binding_kind_data(mrb_state *mrb, const char *what, const char *where, const mm_phase_t *a,
                           const mm_phase_t *b)
{
    mm_run_t *run = mm_binding_run(mrb, what);

    if (run->kind != a && run->kind != b) {
        mrb_raisef(mrb, E_RUNTIME_ERROR, "%s can only be used in %s, not in a %s script", what, where,
                   run->kind->stem);
    }
    return run->data;
}

/* Wrapper objects hold no pointer, only (serial << MM_TAG_BITS | tag). */
static const mrb_data_type wrap_type = {"mod_mruby request object", NULL};

mrb_value mm_binding_wrap(mrb_state *mrb, struct RClass *cls, unsigned int tag)
{
    mm_run_t *run = mm_binding_run(mrb, mrb_class_name(mrb, cls));
    uintptr_t word = ((uintptr_t)run->serial << MM_TAG_BITS) | tag;

    if (run->r == NULL) {
        mm_binding_request(mrb, mrb_class_name(mrb, cls)); /* raises */
    }
    return mrb_obj_value(mrb_data_object_alloc(mrb, cls, (void *)word, &wrap_type));
}

request_rec *mm_binding_unwrap(mrb_state *mrb, mrb_value self, unsigned int *tag)
{
    mm_run_t *run = mm_vm_of(mrb)->run;
    uintptr_t word = (uintptr_t)mrb_data_check_get_ptr(mrb, self, &wrap_type);
    uintptr_t mask = ((uintptr_t)1 << MM_TAG_BITS) - 1;

    if (word == 0) {
        mrb_raise(mrb, E_TYPE_ERROR, "not a mod_mruby request object");
    }
    if (run == NULL || run->r == NULL ||
        (word >> MM_TAG_BITS) != (run->serial & (UINTPTR_MAX >> MM_TAG_BITS))) {
        mrb_raisef(
            mrb, E_RUNTIME_ERROR,
            "%s object used after its request ended (keep data, not request objects, between requests)",
            mrb_obj_classname(mrb, self));
    }
    if (tag) {
        *tag = (unsigned int)(word & mask);
    }
    return run->r;
}

char *mm_binding_pstr(mrb_state *mrb, apr_pool_t *pool, mrb_value str, const char *what)
{
    if (!mrb_string_p(str)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "%s must be a String, not %s", what, mrb_obj_classname(mrb, str));
    }
    if (memchr(RSTRING_PTR(str), '\0', RSTRING_LEN(str))) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "%s must not contain a NUL byte", what);
    }
    return apr_pstrmemdup(pool, RSTRING_PTR(str), RSTRING_LEN(str));
}
