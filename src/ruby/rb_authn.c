/* rb_authn.c: Apache::AuthnProvider, what an mrubyAuthnCheckPassword or
 * mrubyAuthnGetRealmHash script is asked (user, password, realm) and how
 * it answers (rethash=, and the AUTH_* constants, taken from mod_auth.h). */

#include "apr_md5.h"
#include "httpd.h"
#include "mod_auth.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/string.h>

#include "auth.h"
#include "binding.h"
#include "classes.h"

static const mm_kind_class_t authn_class = {"AuthnProvider", "authn provider scripts", &mm_authn_basic_kind,
                                            &mm_authn_digest_kind};

static mm_authn_args_t *args_of(mrb_state *mrb, mrb_value self)
{
    return mm_binding_kind_object_data(mrb, self);
}

static mrb_value authn_user(mrb_state *mrb, mrb_value self)
{
    return mm_binding_str_or_nil(mrb, args_of(mrb, self)->user);
}

static mrb_value authn_password(mrb_state *mrb, mrb_value self)
{
    return mm_binding_str_or_nil(mrb, args_of(mrb, self)->password);
}

static mrb_value authn_realm(mrb_state *mrb, mrb_value self)
{
    return mm_binding_str_or_nil(mrb, args_of(mrb, self)->realm);
}

static mrb_value authn_rethash(mrb_state *mrb, mrb_value self)
{
    return mm_binding_str_or_nil(mrb, args_of(mrb, self)->rethash);
}

/* rethash = hex MD5 of "user:realm:password", as mod_auth_digest expects. */
static mrb_value authn_set_rethash(mrb_state *mrb, mrb_value self)
{
    mm_authn_args_t *args = args_of(mrb, self);
    mrb_value val = mrb_get_arg1(mrb);

    args->rethash = mrb_nil_p(val)
                        ? NULL
                        : mm_binding_pstr(mrb, mm_vm_of(mrb)->run->r->pool, val, "AuthnProvider#rethash");
    return val;
}

/* realm_hash(password): the rethash for this user and realm and the given
 * password, so scripts need no MD5 of their own. */
static mrb_value authn_realm_hash(mrb_state *mrb, mrb_value self)
{
    mm_authn_args_t *args = args_of(mrb, self);
    static const char hex[] = "0123456789abcdef";
    unsigned char digest[APR_MD5_DIGESTSIZE];
    char out[2 * APR_MD5_DIGESTSIZE];
    apr_md5_ctx_t md5;
    mrb_value password;
    size_t i;

    mrb_get_args(mrb, "S", &password);
    if (args->user == NULL || args->realm == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "AuthnProvider#realm_hash needs a user and a realm (Digest only)");
    }
    apr_md5_init(&md5);
    apr_md5_update(&md5, args->user, strlen(args->user));
    apr_md5_update(&md5, ":", 1);
    apr_md5_update(&md5, args->realm, strlen(args->realm));
    apr_md5_update(&md5, ":", 1);
    apr_md5_update(&md5, RSTRING_PTR(password), (apr_size_t)RSTRING_LEN(password));
    apr_md5_final(digest, &md5);
    for (i = 0; i < APR_MD5_DIGESTSIZE; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 0xf];
    }
    return mrb_str_new(mrb, out, sizeof out);
}

void mm_authn_init(mrb_state *mrb)
{
    struct RClass *cls = mm_binding_define_kind_class(mrb, &authn_class);

    mrb_define_method(mrb, cls, "user", authn_user, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "password", authn_password, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "realm", authn_realm, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "rethash", authn_rethash, MRB_ARGS_NONE());
    mrb_define_method(mrb, cls, "rethash=", authn_set_rethash, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, cls, "realm_hash", authn_realm_hash, MRB_ARGS_REQ(1));
#define MM_AUTHN_CONST(name) mrb_define_const(mrb, cls, #name, mrb_int_value(mrb, name))
    MM_AUTHN_CONST(AUTH_DENIED);
    MM_AUTHN_CONST(AUTH_GRANTED);
    MM_AUTHN_CONST(AUTH_USER_FOUND);
    MM_AUTHN_CONST(AUTH_USER_NOT_FOUND);
    MM_AUTHN_CONST(AUTH_GENERAL_ERROR);
#undef MM_AUTHN_CONST
}
