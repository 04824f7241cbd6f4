/* slots.c: the directives that give a filter or a provider its script
 * (mrubyOutputFilter, mrubyInputFilterNamed, mrubyAuthnCheckPassword,
 * mrubyAuthzProvider, ...): one handler for the whole family, driven by the
 * table below. */

#include <strings.h>

#include "apr_lib.h"
#include "apr_strings.h"
#include "httpd.h"
#include "http_config.h"

#include "auth.h"
#include "config.h"
#include "filter.h"
#include "slots.h"

/* clang-format off */
const mm_slot_directive_t mm_slot_directives[MM_SD_COUNT] = {
    [MM_SD_OUTPUT_FILTER]             = {MM_SLOT_OUTPUT_FILTER, 0, MM_SLOT_STREAM, NULL},
    [MM_SD_OUTPUT_FILTER_CODE]        = {MM_SLOT_OUTPUT_FILTER, 1, MM_SLOT_STREAM, NULL},
    [MM_SD_OUTPUT_FILTER_NAMED]       = {MM_SLOT_OUTPUT_FILTER, 0, MM_SLOT_STREAM, mm_filter_out_register_named},
    [MM_SD_OUTPUT_FILTER_NAMED_CODE]  = {MM_SLOT_OUTPUT_FILTER, 1, MM_SLOT_STREAM, mm_filter_out_register_named},
    [MM_SD_INPUT_FILTER]              = {MM_SLOT_INPUT_FILTER, 0, 0, NULL},
    [MM_SD_INPUT_FILTER_CODE]         = {MM_SLOT_INPUT_FILTER, 1, 0, NULL},
    [MM_SD_INPUT_FILTER_NAMED]        = {MM_SLOT_INPUT_FILTER, 0, 0, mm_filter_in_register_named},
    [MM_SD_INPUT_FILTER_NAMED_CODE]   = {MM_SLOT_INPUT_FILTER, 1, 0, mm_filter_in_register_named},
    [MM_SD_AUTHN_CHECK_PASSWORD]      = {MM_SLOT_AUTHN_BASIC, 0, 0, NULL},
    [MM_SD_AUTHN_CHECK_PASSWORD_CODE] = {MM_SLOT_AUTHN_BASIC, 1, 0, NULL},
    [MM_SD_AUTHN_GET_REALM_HASH]      = {MM_SLOT_AUTHN_DIGEST, 0, 0, NULL},
    [MM_SD_AUTHN_GET_REALM_HASH_CODE] = {MM_SLOT_AUTHN_DIGEST, 1, 0, NULL},
    [MM_SD_AUTHZ_PROVIDER]            = {MM_SLOT_COUNT, 0, 0, mm_authz_register_named},
    [MM_SD_AUTHZ_PROVIDER_CODE]       = {MM_SLOT_COUNT, 1, 0, mm_authz_register_named},
};
/* clang-format on */

/* Filter and provider names are one word httpd can parse back out of
 * SetOutputFilter lists (';') and Require lines. */
static const char *check_name(cmd_parms *cmd, const char *name)
{
    const char *c;

    if (*name == '\0') {
        return apr_psprintf(cmd->pool, "%s: the name is empty", cmd->cmd->name);
    }
    for (c = name; *c; c++) {
        if (!apr_isalnum(*c) && *c != '_' && *c != '-' && *c != '.') {
            return apr_psprintf(cmd->pool, "%s: '%s' is not a valid name (letters, digits, '_', '-', '.')",
                                cmd->cmd->name, name);
        }
    }
    if (strcasecmp(name, "mruby") == 0) {
        return apr_psprintf(cmd->pool,
                            "%s: 'mruby' is reserved (the section's own filters and authn provider); "
                            "choose another",
                            cmd->cmd->name);
    }
    return NULL;
}

static const char *usage(cmd_parms *cmd, const mm_slot_directive_t *d)
{
    const char *what = d->code ? "\"ruby code\"" : "file-path [cache]";

    return apr_psprintf(cmd->pool, "%s: usage: %s %s%s%s", cmd->cmd->name, cmd->cmd->name,
                        d->register_named ? "NAME " : "", what,
                        (d->options & MM_SLOT_STREAM) ? " [stream]" : "");
}

const char *mm_slot_cmd(cmd_parms *cmd, void *dconf, int argc, char *const argv[])
{
    const mm_slot_directive_t *d = cmd->info;
    int fixed = d->register_named ? 2 : 1;
    int i, cache = 0;
    mm_slot_script_t *slot;
    const char *err;

    /* Named ones are for the whole server; a section's slots live in any
     * section except <Limit>, and never in .htaccess, even one that
     * AllowOverrideList opens to them (see config.c). */
    err = ap_check_cmd_context(cmd, (d->register_named ? GLOBAL_ONLY : NOT_IN_LIMIT) | NOT_IN_HTACCESS);
    if (err) {
        return err;
    }
    if (argc < fixed) {
        return usage(cmd, d);
    }
    slot = apr_pcalloc(cmd->pool, sizeof *slot);
    slot->name = d->register_named ? argv[0] : "mruby";
    if (d->register_named && (err = check_name(cmd, slot->name)) != NULL) {
        return err;
    }
    for (i = fixed; i < argc; i++) {
        if (!d->code && strcasecmp(argv[i], "cache") == 0) {
            cache = 1;
        } else if ((d->options & MM_SLOT_STREAM) && strcasecmp(argv[i], "stream") == 0) {
            slot->options |= MM_SLOT_STREAM;
        } else {
            return apr_psprintf(cmd->pool, "%s: unknown option '%s'; %s", cmd->cmd->name, argv[i],
                                usage(cmd, d));
        }
    }
    err = mm_config_script(cmd, d->code, argv[fixed - 1], cache, &slot->script);
    if (err) {
        return err;
    }
    if (d->register_named) {
        return d->register_named(cmd, slot);
    }
    /* The last directive of a slot in a section wins, as for httpd's own
     * one-value directives. */
    ((mm_dir_conf_t *)dconf)->slots[d->slot] = slot;
    return NULL;
}

void mm_slots_register_hooks(apr_pool_t *p)
{
    mm_filter_out_register(p);
    mm_filter_in_register(p);
    mm_authn_register(p);
}

void mm_slots_pre_config(apr_pool_t *pconf)
{
    mm_filter_out_pre_config();
    mm_filter_in_pre_config();
    mm_authz_pre_config(pconf);
}
