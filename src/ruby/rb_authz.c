/* rb_authz.c: Apache::AuthzProvider, what an mrubyAuthzProvider script is
 * asked: the provider's name, the arguments of the Require line being
 * checked (that line's own), the user if one is authenticated; and the
 * AUTHZ_* answers, taken from mod_auth.h. */

#include "httpd.h"
#include "mod_auth.h"

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/string.h>

#include "auth.h"
#include "binding.h"
#include "classes.h"

static const mm_kind_class_t authz_class = {"AuthzProvider", "authz provider scripts", &mm_authz_kind,
                                            &mm_authz_kind};

static const mm_authz_line_t *line_of(mrb_state *mrb, mrb_value self)
{
    return mm_binding_kind_object_data(mrb, self);
}

static mrb_value authz_name(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_cstr(mrb, line_of(mrb, self)->slot->name);
}

static mrb_value authz_require_line(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_cstr(mrb, line_of(mrb, self)->line);
}

/* args: a new Array of new Strings on each call, so a script cannot
 * change what the next request sees. */
static mrb_value authz_args(mrb_state *mrb, mrb_value self)
{
    const apr_array_header_t *args = line_of(mrb, self)->args;
    mrb_value ary = mrb_ary_new_capa(mrb, args->nelts);
    int i;

    for (i = 0; i < args->nelts; i++) {
        mrb_ary_push(mrb, ary, mrb_str_new_cstr(mrb, APR_ARRAY_IDX(args, i, const char *)));
    }
    return ary;
}

static mrb_value authz_user(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);

    return r->user ? mrb_str_new_cstr(mrb, r->user) : mrb_nil_value();
}

void mm_authz_init(mrb_state *mrb)
{
    struct RClass *cls = mm_binding_define_kind_class(mrb, &authz_class);

    mrb_define_method(mrb, cls, "name", authz_name, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "require_line", authz_require_line, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "args", authz_args, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "user", authz_user, MRB_ARGS_NONE());
#define MM_AUTHZ_CONST(name) mrb_define_const(mrb, cls, #name, mrb_int_value(mrb, name))
    MM_AUTHZ_CONST(AUTHZ_DENIED);
    MM_AUTHZ_CONST(AUTHZ_GRANTED);
    MM_AUTHZ_CONST(AUTHZ_NEUTRAL);
    MM_AUTHZ_CONST(AUTHZ_GENERAL_ERROR);
    MM_AUTHZ_CONST(AUTHZ_DENIED_NO_USER);
#undef MM_AUTHZ_CONST
}
