/* authn.c: the `mruby` authn provider: AuthBasicProvider mruby runs the
 * section's mrubyAuthnCheckPassword script, AuthDigestProvider mruby its
 * mrubyAuthnGetRealmHash script. A script answers with
 * Apache.return(Apache::AuthnProvider::AUTH_...); anything else, an
 * exception included, is AUTH_GENERAL_ERROR: never a grant. */

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_request.h"
#include "mod_auth.h"

#include "auth.h"
#include "config.h"
#include "mod_mruby.h"
#include "run.h"

APLOG_USE_MODULE(mruby);

/* Without Apache.return a script has found nothing: Basic is denied,
 * Digest knows no such user. */
const mm_phase_t mm_authn_basic_kind = {"AuthnCheckPassword", MM_WHERE_DIR, AUTH_DENIED, AUTH_GENERAL_ERROR,
                                        MM_KIND_NO_OUTPUT | MM_KIND_OWN_RESULT};
const mm_phase_t mm_authn_digest_kind = {"AuthnGetRealmHash", MM_WHERE_DIR, AUTH_USER_NOT_FOUND,
                                         AUTH_GENERAL_ERROR, MM_KIND_NO_OUTPUT | MM_KIND_OWN_RESULT};

static int run_authn(request_rec *r, mm_slot_e which, const mm_phase_t *kind, mm_authn_args_t *args)
{
    const mm_dir_conf_t *dc = ap_get_module_config(r->per_dir_config, &mruby_module);
    const mm_slot_script_t *slot = dc->slots[which];

    if (slot == NULL) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r,
                      MM_LOGNO(00530) "the mruby authn provider is used for %s, but no mruby%s applies there",
                      r->uri, kind->stem);
        return AUTH_GENERAL_ERROR;
    }
    return mm_run_script(r, kind, slot->script, args);
}

static authn_status bad_result(request_rec *r, const mm_phase_t *kind, int rv)
{
    ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r,
                  MM_LOGNO(00531) "mruby%s script for %s: Apache.return(%d) is not an answer it can give "
                                  "(see Apache::AuthnProvider): general error",
                  kind->stem, r->uri, rv);
    return AUTH_GENERAL_ERROR;
}

static authn_status check_password(request_rec *r, const char *user, const char *password)
{
    mm_authn_args_t args = {user, password, NULL, NULL};
    int rv = run_authn(r, MM_SLOT_AUTHN_BASIC, &mm_authn_basic_kind, &args);

    switch (rv) {
    case AUTH_GRANTED:
    case AUTH_DENIED:
    case AUTH_USER_NOT_FOUND:
    case AUTH_GENERAL_ERROR:
        return rv;
    default:
        return bad_result(r, &mm_authn_basic_kind, rv);
    }
}

static authn_status get_realm_hash(request_rec *r, const char *user, const char *realm, char **rethash)
{
    mm_authn_args_t args = {user, NULL, realm, NULL};
    int rv = run_authn(r, MM_SLOT_AUTHN_DIGEST, &mm_authn_digest_kind, &args);

    switch (rv) {
    case AUTH_USER_FOUND:
        if (args.rethash == NULL) {
            ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r,
                          MM_LOGNO(00532) "mrubyAuthnGetRealmHash script for %s returned AUTH_USER_FOUND "
                                          "without setting rethash: general error",
                          r->uri);
            return AUTH_GENERAL_ERROR;
        }
        *rethash = (char *)args.rethash;
        return rv;
    case AUTH_DENIED:
    case AUTH_USER_NOT_FOUND:
    case AUTH_GENERAL_ERROR:
        return rv;
    default:
        return bad_result(r, &mm_authn_digest_kind, rv);
    }
}

static const authn_provider provider = {check_password, get_realm_hash};

void mm_authn_register(apr_pool_t *p)
{
    ap_register_auth_provider(p, AUTHN_PROVIDER_GROUP, "mruby", AUTHN_PROVIDER_VERSION, &provider,
                              AP_AUTH_INTERNAL_PER_CONF);
}
