/* slots.h: the scripts of filters and providers, and their directives.
 *
 * A section (<Location>, <Directory>, ...) has at most one script per slot:
 * the `mruby` output and input filters and the two functions of the `mruby`
 * authn provider. Named filters and authz providers have one script per
 * name for the whole server, registered with httpd while the configuration
 * is read. */
#ifndef MM_SLOTS_H
#define MM_SLOTS_H

#include "httpd.h"
#include "http_config.h"

#include "code.h"

typedef enum {
    MM_SLOT_OUTPUT_FILTER, /* mrubyOutputFilter: the `mruby` output filter */
    MM_SLOT_INPUT_FILTER,  /* mrubyInputFilter: the `mruby` input filter */
    MM_SLOT_AUTHN_BASIC,   /* mrubyAuthnCheckPassword */
    MM_SLOT_AUTHN_DIGEST,  /* mrubyAuthnGetRealmHash */
    MM_SLOT_COUNT
} mm_slot_e;

/* Options that may follow a directive's file or code. */
#define MM_SLOT_STREAM 0x1 /* output filter: each chunk as it comes, no buffering */

/* One configured script of a filter or provider. Lives in pconf; read-only
 * once the configuration is read, so every thread may read it. */
typedef struct {
    const mm_script_t *script;
    const char *name;     /* the filter or provider name, for logs */
    unsigned int options; /* MM_SLOT_* */
} mm_slot_script_t;

/* What one directive of this family does: fill a section's slot, or (when
 * register_named is set) define a named filter or provider. */
typedef struct {
    mm_slot_e slot;
    int code;             /* the argument is inline code, not a file */
    unsigned int options; /* MM_SLOT_* options the directive accepts */
    const char *(*register_named)(cmd_parms *cmd, const mm_slot_script_t *s);
} mm_slot_directive_t;

/* The directive handler of the whole family (cmd->info: an
 * mm_slot_directive_t). */
const char *mm_slot_cmd(cmd_parms *cmd, void *dconf, int argc, char *const argv[]);

/* What each directive does; MM_SLOT_DIRECTIVES lists them for config.c. */
typedef enum {
    MM_SD_OUTPUT_FILTER,
    MM_SD_OUTPUT_FILTER_CODE,
    MM_SD_OUTPUT_FILTER_NAMED,
    MM_SD_OUTPUT_FILTER_NAMED_CODE,
    MM_SD_INPUT_FILTER,
    MM_SD_INPUT_FILTER_CODE,
    MM_SD_INPUT_FILTER_NAMED,
    MM_SD_INPUT_FILTER_NAMED_CODE,
    MM_SD_AUTHN_CHECK_PASSWORD,
    MM_SD_AUTHN_CHECK_PASSWORD_CODE,
    MM_SD_AUTHN_GET_REALM_HASH,
    MM_SD_AUTHN_GET_REALM_HASH_CODE,
    MM_SD_AUTHZ_PROVIDER,
    MM_SD_AUTHZ_PROVIDER_CODE,
    MM_SD_COUNT
} mm_slot_directive_e;

extern const mm_slot_directive_t mm_slot_directives[MM_SD_COUNT];

#define MM_SLOT_CMD(name, which, where, help)                                                                \
    AP_INIT_TAKE_ARGV(name, mm_slot_cmd, (void *)&mm_slot_directives[which], where, help),

#define MM_SLOT_DIRECTIVES                                                                                   \
    MM_SLOT_CMD("mrubyOutputFilter", MM_SD_OUTPUT_FILTER, RSRC_CONF | ACCESS_CONF,                           \
                "script file of the `mruby` output filter [cache] [stream]")                                 \
    MM_SLOT_CMD("mrubyOutputFilterCode", MM_SD_OUTPUT_FILTER_CODE, RSRC_CONF | ACCESS_CONF,                  \
                "inline Ruby of the `mruby` output filter [stream]")                                         \
    MM_SLOT_CMD("mrubyOutputFilterNamed", MM_SD_OUTPUT_FILTER_NAMED, RSRC_CONF,                              \
                "NAME FILE [cache] [stream]: an output filter of that name")                                 \
    MM_SLOT_CMD("mrubyOutputFilterNamedCode", MM_SD_OUTPUT_FILTER_NAMED_CODE, RSRC_CONF,                     \
                "NAME CODE [stream]: an output filter of that name")                                         \
    MM_SLOT_CMD("mrubyInputFilter", MM_SD_INPUT_FILTER, RSRC_CONF | ACCESS_CONF,                             \
                "script file of the `mruby` input filter [cache]")                                           \
    MM_SLOT_CMD("mrubyInputFilterCode", MM_SD_INPUT_FILTER_CODE, RSRC_CONF | ACCESS_CONF,                    \
                "inline Ruby of the `mruby` input filter")                                                   \
    MM_SLOT_CMD("mrubyInputFilterNamed", MM_SD_INPUT_FILTER_NAMED, RSRC_CONF,                                \
                "NAME FILE [cache]: an input filter of that name")                                           \
    MM_SLOT_CMD("mrubyInputFilterNamedCode", MM_SD_INPUT_FILTER_NAMED_CODE, RSRC_CONF,                       \
                "NAME CODE: an input filter of that name")                                                   \
    MM_SLOT_CMD("mrubyAuthnCheckPassword", MM_SD_AUTHN_CHECK_PASSWORD, RSRC_CONF | ACCESS_CONF,              \
                "script file checking Basic passwords (AuthBasicProvider mruby) [cache]")                    \
    MM_SLOT_CMD("mrubyAuthnCheckPasswordCode", MM_SD_AUTHN_CHECK_PASSWORD_CODE, RSRC_CONF | ACCESS_CONF,     \
                "inline Ruby checking Basic passwords (AuthBasicProvider mruby)")                            \
    MM_SLOT_CMD("mrubyAuthnGetRealmHash", MM_SD_AUTHN_GET_REALM_HASH, RSRC_CONF | ACCESS_CONF,               \
                "script file giving Digest realm hashes (AuthDigestProvider mruby) [cache]")                 \
    MM_SLOT_CMD("mrubyAuthnGetRealmHashCode", MM_SD_AUTHN_GET_REALM_HASH_CODE, RSRC_CONF | ACCESS_CONF,      \
                "inline Ruby giving Digest realm hashes (AuthDigestProvider mruby)")                         \
    MM_SLOT_CMD("mrubyAuthzProvider", MM_SD_AUTHZ_PROVIDER, RSRC_CONF,                                       \
                "NAME FILE [cache]: `Require NAME args...` runs the script")                                 \
    MM_SLOT_CMD("mrubyAuthzProviderCode", MM_SD_AUTHZ_PROVIDER_CODE, RSRC_CONF,                              \
                "NAME CODE: `Require NAME args...` runs the code")

/* Registered with httpd at directive time (filter_out.c, filter_in.c,
 * authz.c); each refuses a name httpd already knows. */
const char *mm_filter_out_register_named(cmd_parms *cmd, const mm_slot_script_t *s);
const char *mm_filter_in_register_named(cmd_parms *cmd, const mm_slot_script_t *s);
const char *mm_authz_register_named(cmd_parms *cmd, const mm_slot_script_t *s);

/* The fixed `mruby` filters and authn provider (register_hooks), and the
 * reset of the named ones for a new configuration (pre_config). */
void mm_slots_register_hooks(apr_pool_t *p);
void mm_slots_pre_config(apr_pool_t *pconf);

#endif
