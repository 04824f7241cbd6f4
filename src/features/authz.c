/* authz.c: authz providers written in Ruby. `mrubyAuthzProvider NAME
 * FILE` registers NAME with mod_authz_core; every `Require NAME args...`
 * line is parsed on its own when the configuration is read and keeps its
 * own arguments (one provider used by several lines with different
 * arguments must never see another line's: mod_lua's CVE-2014-8109). The
 * script answers with Apache.return(Apache::AuthzProvider::AUTHZ_...);
 * anything else, an exception included, is AUTHZ_GENERAL_ERROR. */

#include <strings.h>

#include "apr_hash.h"
#include "apr_strings.h"
#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_request.h"
#include "ap_provider.h"
#include "mod_auth.h"

#include "auth.h"
#include "mod_mruby.h"
#include "run.h"

APLOG_USE_MODULE(mruby);

/* Without Apache.return the answer is no. */
const mm_phase_t mm_authz_kind = {"AuthzProvider", MM_WHERE_DIR, AUTHZ_DENIED, AUTHZ_GENERAL_ERROR,
                                  MM_KIND_NO_OUTPUT | MM_KIND_OWN_RESULT};

/* NAME -> its mm_slot_script_t, for parsing Require lines; pconf, written only
 * while the configuration is read. */
static apr_hash_t *providers;

void mm_authz_pre_config(apr_pool_t *pconf)
{
    providers = apr_hash_make(pconf);
}

static authz_status check_authorization(request_rec *r, const char *require_line, const void *parsed)
{
    const mm_authz_line_t *line = parsed;
    int rv = mm_run_script(r, &mm_authz_kind, line->slot->script, (void *)line);

    switch (rv) {
    case AUTHZ_DENIED:
    case AUTHZ_GRANTED:
    case AUTHZ_NEUTRAL:
    case AUTHZ_GENERAL_ERROR:
    case AUTHZ_DENIED_NO_USER:
        return rv;
    default:
        ap_log_rerror(
            APLOG_MARK, APLOG_ERR, 0, r,
            MM_LOGNO(00540) "authz provider %s (%s): Apache.return(%d) is not an answer it can give "
                            "(see Apache::AuthzProvider): general error",
            line->slot->name, line->slot->script->name, rv);
        return AUTHZ_GENERAL_ERROR;
    }
}

/* Which provider a line is for: mod_authz_core names it in the command's
 * temporary pool for `Require` (and leaves it there for the rest of the
 * configuration); an <AuthzProviderAlias> names it as its first argument.
 * mod_authz_core asks about an alias once it has read the directives
 * inside it, and httpd leaves cmd->directive on the last of them: the
 * alias is the section the directive is in, not necessarily the directive
 * itself, and the note would name the provider of an earlier Require. */
static const char *provider_name(cmd_parms *cmd)
{
    const ap_directive_t *d;
    const char *name = NULL;

    if (cmd->directive && strcasecmp(cmd->directive->directive, "Require") != 0) {
        for (d = cmd->directive; d; d = d->parent) {
            if (strcasecmp(d->directive, "<AuthzProviderAlias") == 0) {
                const char *args = d->args;

                return ap_getword_conf(cmd->temp_pool, &args);
            }
        }
    }
    apr_pool_userdata_get((void **)&name, AUTHZ_PROVIDER_NAME_NOTE, cmd->temp_pool);
    return name;
}

static const char *parse_require_line(cmd_parms *cmd, const char *require_line, const void **parsed)
{
    const char *name = provider_name(cmd);
    const mm_slot_script_t *slot = name ? apr_hash_get(providers, name, APR_HASH_KEY_STRING) : NULL;
    mm_authz_line_t *line;
    const char *rest = require_line;

    if (slot == NULL) {
        return apr_psprintf(cmd->pool, "mod_mruby: cannot tell which mrubyAuthzProvider the line '%s' is for",
                            require_line);
    }
    line = apr_pcalloc(cmd->pool, sizeof *line);
    line->slot = slot;
    line->line = apr_pstrdup(cmd->pool, require_line);
    line->args = apr_array_make(cmd->pool, 4, sizeof(const char *));
    while (*rest) {
        const char *word = ap_getword_conf(cmd->pool, &rest);

        if (*word == '\0') {
            break;
        }
        APR_ARRAY_PUSH(line->args, const char *) = word;
    }
    *parsed = line;
    return NULL;
}

static const authz_provider provider = {check_authorization, parse_require_line};

const char *mm_authz_register_named(cmd_parms *cmd, const mm_slot_script_t *s)
{
    if (ap_lookup_provider(AUTHZ_PROVIDER_GROUP, s->name, AUTHZ_PROVIDER_VERSION)) {
        return apr_psprintf(cmd->pool, "%s: an authz provider named '%s' exists already", cmd->cmd->name,
                            s->name);
    }
    apr_hash_set(providers, s->name, APR_HASH_KEY_STRING, s);
    return ap_register_auth_provider(cmd->pool, AUTHZ_PROVIDER_GROUP, s->name, AUTHZ_PROVIDER_VERSION,
                                     &provider, AP_AUTH_INTERNAL_PER_CONF) == APR_SUCCESS
               ? NULL
               : apr_psprintf(cmd->pool, "%s: cannot register the authz provider '%s'", cmd->cmd->name,
                              s->name);
}
