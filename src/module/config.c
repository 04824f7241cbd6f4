/* config.c: per-section and per-server configuration: create, merge, and
 * the directives, the phase ones generated from the phase table (phase.h).
 *
 * For every phase there are eight directives: mruby<Stem><Order> FILE
 * [cache] and mruby<Stem><Order>Code "ruby", with <Order> First, Middle,
 * Last or nothing (Middle). They are allowed in the server config, virtual
 * hosts and <Directory>/<Location>/<Files>/<If> sections, never in
 * .htaccess: running code from user-writable files is a privilege boundary.
 * Their command_rec lacks every OR_* bit, which keeps them out of .htaccess
 * for AllowOverride, but AllowOverrideList lets a directive it names in
 * regardless: each handler refuses .htaccess itself (NOT_IN_HTACCESS).
 * Scripts repeated in one section add up; a nested section that configures
 * a phase replaces what it inherits for that phase. */

#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "apr_strings.h"
#include "httpd.h"
#include "http_config.h"

#include "cache.h"
#include "code.h"
#include "config.h"
#include "dirwalk.h"
#include "mod_mruby.h"
#include "parse.h"

mm_settings_t mm_settings;

void mm_config_pre_config(apr_pool_t *pconf)
{
    mm_phase_pre_config();
    mm_dirwalk_pre_config();
    memset(&mm_settings, 0, sizeof mm_settings);
    mm_settings.compile_bytes = MM_DEFAULT_COMPILE_BYTES;
    mm_settings.compile_ms = MM_DEFAULT_COMPILE_MS;
}

/* A section without any of the module's directives. Static: its padding
 * is zero, and stays so in the copies made with memcpy. */
static const mm_dir_conf_t empty_conf = {
    .timeout = MM_UNSET,
    .body_limit = MM_UNSET,
    .fields_limit = MM_UNSET,
    .default_ok = MM_UNSET,
    .dirwalk = MM_UNSET,
};

void *mm_config_create_dir(apr_pool_t *p, char *dir)
{
    mm_dir_conf_t *conf = apr_palloc(p, sizeof *conf);

    memcpy(conf, &empty_conf, sizeof *conf);
    return conf;
}

/* Whether a section is as mm_config_create_dir made it, byte for byte:
 * whatever field a directive sets makes it differ. (A merged
 * configuration, whose padding may differ, is never empty anyway.) The
 * phases with scripts, the usual difference, are looked at first. */
static int is_empty(const mm_dir_conf_t *conf)
{
    return conf->phases == 0 && memcmp(conf, &empty_conf, sizeof *conf) == 0;
}

void *mm_config_merge_dir(apr_pool_t *p, void *basev, void *addv)
{
    const mm_dir_conf_t *base = basev, *add = addv;
    mm_dir_conf_t *conf;
    unsigned int set;
    int i;

    /* Runs for each request a section applies to. Most merges have one
     * side without any of the module's directives (a <Location> with
     * scripts over a server without any, a section of other modules'
     * directives): the other side is the result, as it is (configurations
     * are never written once read). Otherwise only the phases the section
     * scripts are looked at. */
    if (is_empty(add)) {
        return basev;
    }
    if (is_empty(base)) {
        return addv;
    }
    conf = apr_palloc(p, sizeof *conf);
    *conf = *base;
    for (set = add->phases; set != 0; set &= set - 1) {
        i = __builtin_ctz(set);
        conf->scripts[i] = add->scripts[i];
    }
    conf->phases = base->phases | add->phases;
    for (i = 0; i < MM_SLOT_COUNT; i++) {
        conf->slots[i] = add->slots[i] ? add->slots[i] : base->slots[i];
    }
    conf->timeout = add->timeout != MM_UNSET ? add->timeout : base->timeout;
    conf->body_limit = add->body_limit != MM_UNSET ? add->body_limit : base->body_limit;
    conf->fields_limit = add->fields_limit != MM_UNSET ? add->fields_limit : base->fields_limit;
    conf->default_ok = add->default_ok != MM_UNSET ? add->default_ok : base->default_ok;
    conf->dirwalk = add->dirwalk != MM_UNSET ? add->dirwalk : base->dirwalk;
    return conf;
}

apr_off_t mm_config_body_limit(const mm_dir_conf_t *dc)
{
    return dc->body_limit != MM_UNSET ? dc->body_limit : MM_DEFAULT_BODY_LIMIT;
}

int mm_config_fields_limit(const mm_dir_conf_t *dc)
{
    return dc->fields_limit != MM_UNSET ? dc->fields_limit : MM_DEFAULT_FIELDS_LIMIT;
}

int mm_config_default_return(const mm_dir_conf_t *dc)
{
    return dc->default_ok == 1 ? OK : DECLINED;
}

void *mm_config_create_server(apr_pool_t *p, server_rec *s)
{
    return apr_pcalloc(p, sizeof(mm_server_conf_t));
}

void *mm_config_merge_server(apr_pool_t *p, void *basev, void *addv)
{
    const mm_server_conf_t *base = basev, *add = addv;
    mm_server_conf_t *conf = apr_palloc(p, sizeof *conf);

    conf->caches = add->caches ? add->caches : base->caches;
    return conf;
}

/* cmd->info packs the phase and order of a directive. */
#define MM_CMD_INFO(phase, order) ((void *)(intptr_t)((phase)*MM_ORDER_COUNT + (order)))

static const char *add_script(cmd_parms *cmd, mm_dir_conf_t *dc, const mm_script_t *s)
{
    int info = (int)(intptr_t)cmd->info;
    int phase = info / MM_ORDER_COUNT, order = info % MM_ORDER_COUNT;
    apr_array_header_t **slot;

    if (dc->scripts[phase] == NULL) {
        dc->scripts[phase] = apr_pcalloc(cmd->pool, sizeof *dc->scripts[phase]);
        dc->phases |= 1u << phase;
    }

    slot = &(*dc->scripts[phase])[order];
    if (*slot == NULL) {
        *slot = apr_array_make(cmd->pool, 1, sizeof(const mm_script_t *));
    }
    APR_ARRAY_PUSH(*slot, const mm_script_t *) = s;
    mm_phase_use(phase, order);

    return NULL;
}

/* TranslateName runs once httpd has applied <Location> and <If>, before
 * <Directory>, <Files> and <Proxy> (the last in MapToStorage). httpd's
 * NOT_IN_FILES would refuse <If> too, and nothing of httpd's refuses
 * <Proxy> in a section: both are looked for here. */
static const char *check_uri_context(cmd_parms *cmd)
{
    static const char *const unseen[] = {"<Files", "<FilesMatch", "<Proxy", "<ProxyMatch"};
    const char *err = ap_check_cmd_context(cmd, NOT_IN_LIMIT | NOT_IN_DIRECTORY | NOT_IN_HTACCESS);
    const ap_directive_t *d;
    size_t i;

    if (err || cmd->directive == NULL) {
        return err;
    }
    for (d = cmd->directive->parent; d; d = d->parent) {
        for (i = 0; i < sizeof unseen / sizeof *unseen; i++) {
            if (strcasecmp(d->directive, unseen[i]) == 0) {
                return apr_pstrcat(cmd->pool, cmd->cmd->name, " cannot occur within ", d->directive,
                                   "> section", NULL);
            }
        }
    }
    return NULL;
}

/* Refuses a directive where its phase cannot see it: PostReadRequest,
 * QuickHandler and MapToStorage see only the server's configuration,
 * TranslateName runs before <Directory>, <Files> and <Proxy> apply, the
 * server phases run before any request. */
static const char *check_context(cmd_parms *cmd)
{
    int phase = (int)(intptr_t)cmd->info / MM_ORDER_COUNT;

    switch (mm_phases[phase].where) {
    case MM_WHERE_GLOBAL:
        return ap_check_cmd_context(cmd, GLOBAL_ONLY | NOT_IN_HTACCESS);
    case MM_WHERE_SERVER:
        return ap_check_cmd_context(cmd, NOT_IN_DIR_CONTEXT | NOT_IN_HTACCESS);
    case MM_WHERE_URI:
        return check_uri_context(cmd);
    default:
        return ap_check_cmd_context(cmd, NOT_IN_LIMIT | NOT_IN_HTACCESS);
    }
}

static const char *cmd_code(cmd_parms *cmd, void *dconf, const char *code)
{
    const char *err = check_context(cmd);
    const mm_script_t *s;

    if (err) {
        return err;
    }
    err = mm_code_inline(cmd, code, &s);
    return err ? err : add_script(cmd, dconf, s);
}

const char *mm_config_script(cmd_parms *cmd, int code, const char *arg, int cache, const mm_script_t **out)
{
    const char *path;

    if (code) {
        return mm_code_inline(cmd, arg, out);
    }
    path = ap_server_root_relative(cmd->pool, arg);
    if (path == NULL) {
        return apr_psprintf(cmd->pool, "%s: invalid path '%s'", cmd->cmd->name, arg);
    }
    return mm_code_file(cmd, path, cache, out);
}

static const char *cmd_file(cmd_parms *cmd, void *dconf, const char *file, const char *option)
{
    const char *err = check_context(cmd);
    const mm_script_t *s;
    int cache = 0;

    if (err) {
        return err;
    }
    if (option) {
        if (strcasecmp(option, "cache") != 0) {
            return apr_psprintf(cmd->pool, "%s: the second argument can only be 'cache', not '%s'",
                                cmd->cmd->name, option);
        }
        cache = 1;
    }
    err = mm_config_script(cmd, 0, file, cache, &s);
    return err ? err : add_script(cmd, dconf, s);
}

/* mrubyHandlerEnable On|Off: has no effect, but like all our directives it
 * is refused in .htaccess, even where AllowOverrideList names it. */
static const char *cmd_compat_flag(cmd_parms *cmd, void *dconf, int on)
{
    return ap_check_cmd_context(cmd, NOT_IN_HTACCESS);
}

/* The message for a directive's number that mm_parse_size or
 * mm_parse_count refused (rv), or NULL. */
static const char *number_error(cmd_parms *cmd, const char *arg, mm_parse_e rv, apr_uint64_t min,
                                apr_uint64_t max)
{
    switch (rv) {
    case MM_PARSE_OK:
        return NULL;
    case MM_PARSE_TOO_SMALL:
        return apr_psprintf(cmd->pool, "%s: %s is below the minimum of %" APR_UINT64_T_FMT, cmd->cmd->name,
                            arg, min);
    case MM_PARSE_TOO_LARGE:
        return apr_psprintf(cmd->pool, "%s: %s is above the maximum of %" APR_UINT64_T_FMT, cmd->cmd->name,
                            arg, max);
    case MM_PARSE_SUFFIX:
        return apr_psprintf(cmd->pool,
                            "%s: '%s' is not a plain number: K, M and G are only for sizes in bytes",
                            cmd->cmd->name, arg);
    default:
        return apr_psprintf(cmd->pool, "%s: '%s' is not a number", cmd->cmd->name, arg);
    }
}

/* A directive's size in bytes (K, M, G allowed), with the error message. */
static const char *parse_size(cmd_parms *cmd, const char *arg, apr_uint64_t min, apr_uint64_t max,
                              apr_uint64_t *out)
{
    return number_error(cmd, arg, mm_parse_size(arg, min, max, out), min, max);
}

/* A directive's count or time: digits only. */
static const char *parse_count(cmd_parms *cmd, const char *arg, apr_uint64_t min, apr_uint64_t max,
                               apr_uint64_t *out)
{
    return number_error(cmd, arg, mm_parse_count(arg, min, max, out), min, max);
}

/* mrubyMemoryLimit BYTES: below about a megabyte a VM cannot even start. */
static const char *cmd_memory_limit(cmd_parms *cmd, void *dconf, const char *arg)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    apr_uint64_t n = 0;

    if (err == NULL && strcasecmp(arg, "off") != 0) {
        err = parse_size(cmd, arg, 1024 * 1024, APR_SIZE_MAX, &n);
    }
    if (err) {
        return err; /* the limit set before, if any, stays */
    }
    mm_settings.memory_limit = (apr_size_t)n;
    return NULL;
}

/* mrubyMaxRequestsPerVM N: a count of runs (0: never), up to the most
 * vm->runs (an apr_uint64_t) can count. */
static const char *cmd_max_requests(cmd_parms *cmd, void *dconf, const char *arg)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);

    return err ? err : parse_count(cmd, arg, 0, APR_UINT64_MAX, &mm_settings.max_requests);
}

/* mrubyCompileLimit BYTES [MILLISECONDS]: how much Ruby one compilation
 * may be given, and how much CPU time its parsing may take (code.c). It
 * bounds the code compiled after it: scripts before it were compiled under
 * the defaults, which bound them too. */
static const char *cmd_compile_limit(cmd_parms *cmd, void *dconf, const char *bytes, const char *ms)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);
    apr_uint64_t n = 0, t = mm_settings.compile_ms;

    if (err == NULL) {
        err = parse_size(cmd, bytes, 1024, MM_MAX_COMPILE_BYTES, &n);
    }
    if (err == NULL && ms) {
        err = parse_count(cmd, ms, 0, MM_MAX_COMPILE_MS, &t);
    }
    if (err) {
        return err;
    }
    mm_settings.compile_bytes = (apr_size_t)n;
    mm_settings.compile_ms = t;
    return NULL;
}

/* mrubyServerToken On|Off: off by default, as the version a server tells
 * every client helps whoever looks for vulnerable ones. */
static const char *cmd_server_token(cmd_parms *cmd, void *dconf, int on)
{
    const char *err = ap_check_cmd_context(cmd, GLOBAL_ONLY);

    if (err) {
        return err;
    }
    mm_settings.server_token = on;
    return NULL;
}

/* A setting of a section applies to all its requests, whatever their method:
 * httpd applies what a <Limit> or <LimitExcept> holds to every method, so a
 * setting there would seem to apply to some methods only. Refused there, as
 * the scripts are. */
#define MM_SECTION_SETTING (NOT_IN_LIMIT | NOT_IN_HTACCESS)

/* mrubyTimeout MS|off: a time, so no K, M or G. Stopping a script needs
 * mruby's instruction hook, which only a libmruby built with
 * MRB_USE_DEBUG_HOOK has. */
static const char *cmd_timeout(cmd_parms *cmd, void *dconf, const char *arg)
{
    mm_dir_conf_t *dc = dconf;
    apr_uint64_t ms = 0;
    const char *err = ap_check_cmd_context(cmd, MM_SECTION_SETTING);

    if (err == NULL && strcasecmp(arg, "off") != 0) {
        /* In microseconds it is added to the time now (timeout.c's deadline,
         * which saturates by itself): half the range, some 146,000 years,
         * keeps that sum well within an apr_time_t all the same. */
        err = parse_count(cmd, arg, 0, APR_INT64_MAX / 2000, &ms);
    }
    if (err) {
        return err;
    }
#ifndef MRB_USE_DEBUG_HOOK
    if (ms > 0) {
        return "mrubyTimeout: this mod_mruby's libmruby was built without MRB_USE_DEBUG_HOOK, which "
               "stopping scripts needs; build mod_mruby with --with-mruby-source (see docs/building.md)";
    }
#endif
    dc->timeout = (apr_interval_time_t)ms * 1000;
    if (ms > 0) {
        mm_settings.timeouts = 1;
    }
    return NULL;
}

/* mrubyRequestBodyLimit BYTES: the most of a request body Ruby may read. */
static const char *cmd_body_limit(cmd_parms *cmd, void *dconf, const char *arg)
{
    mm_dir_conf_t *dc = dconf;
    apr_uint64_t n;
    const char *err = ap_check_cmd_context(cmd, MM_SECTION_SETTING);

    if (err == NULL) {
        err = parse_size(cmd, arg, 0, APR_INT64_MAX, &n); /* an apr_off_t */
    }
    if (err == NULL) {
        dc->body_limit = (apr_off_t)n;
    }
    return err;
}

/* mrubyFormFieldsLimit N: the most fields query_params/form_params return. */
static const char *cmd_fields_limit(cmd_parms *cmd, void *dconf, const char *arg)
{
    mm_dir_conf_t *dc = dconf;
    apr_uint64_t v;
    const char *err = ap_check_cmd_context(cmd, MM_SECTION_SETTING);

    if (err == NULL) {
        err = parse_count(cmd, arg, 1, MM_MAX_FIELDS_LIMIT, &v);
    }
    if (err == NULL) {
        dc->fields_limit = (int)v;
    }
    return err;
}

/* mrubyDefaultReturn OK|DECLINED: what a request phase's script that ends
 * without Apache.return answers. OK is the original mod_mruby's (and
 * mod_lua's) rule; DECLINED, the default, leaves httpd's own work in place
 * and grants nothing in the access phases. Refused in .htaccess with the
 * other settings: OK there would turn an administrator's access script
 * that forgets its answer into one that grants. */
static const char *cmd_default_return(cmd_parms *cmd, void *dconf, const char *arg)
{
    mm_dir_conf_t *dc = dconf;
    const char *err = ap_check_cmd_context(cmd, MM_SECTION_SETTING);

    if (err) {
        return err;
    }
    if (strcasecmp(arg, "OK") == 0) {
        dc->default_ok = 1;
    } else if (strcasecmp(arg, "DECLINED") == 0) {
        dc->default_ok = 0;
    } else {
        return apr_psprintf(cmd->pool, "%s: '%s' is neither OK nor DECLINED", cmd->cmd->name, arg);
    }
    return NULL;
}

/* mrubyDirectoryWalk On|Off: Off, the section's requests are not mapped
 * to the file system (dirwalk.c). httpd knows the <Location> sections (and
 * <If> ones) before it maps a request, not the <Directory> and <Files>
 * ones, which the walk finds: refused there. */
static const char *cmd_dirwalk(cmd_parms *cmd, void *dconf, int on)
{
    mm_dir_conf_t *dc = dconf;
    const char *err = ap_check_cmd_context(cmd, MM_SECTION_SETTING | NOT_IN_DIRECTORY | NOT_IN_FILES);

    if (err) {
        return err;
    }
    dc->dirwalk = on;
    if (!on) {
        mm_dirwalk_use();
    }
    return NULL;
}

/* Where httpd lets each kind of directive appear; check_context narrows. */
#define MM_CONTEXT_DIR    (RSRC_CONF | ACCESS_CONF)
#define MM_CONTEXT_URI    (RSRC_CONF | ACCESS_CONF)
#define MM_CONTEXT_SERVER RSRC_CONF
#define MM_CONTEXT_GLOBAL RSRC_CONF
#define MM_DIR_CONTEXT    MM_CONTEXT_DIR

#define MM_ORDER_CMDS(ID, STEM, WHERE, WORD, ORDER)                                                          \
    AP_INIT_TAKE12("mruby" STEM WORD, cmd_file, MM_CMD_INFO(MM_PHASE_##ID, MM_ORDER_##ORDER),                \
                   MM_CONTEXT_##WHERE,                                                                       \
                   "Ruby script file for the " STEM " phase; 'cache' to never re-read it"),                  \
        AP_INIT_TAKE1("mruby" STEM WORD "Code", cmd_code, MM_CMD_INFO(MM_PHASE_##ID, MM_ORDER_##ORDER),      \
                      MM_CONTEXT_##WHERE, "inline Ruby code for the " STEM " phase"),

#define MM_PHASE_CMDS(ID, STEM, SHAPE, HOOK, WHERE, DEFAULT, ONERROR)                                        \
    MM_ORDER_CMDS(ID, STEM, WHERE, "", MIDDLE)                                                               \
    MM_ORDER_CMDS(ID, STEM, WHERE, "First", FIRST)                                                           \
    MM_ORDER_CMDS(ID, STEM, WHERE, "Middle", MIDDLE)                                                         \
    MM_ORDER_CMDS(ID, STEM, WHERE, "Last", LAST)

/* clang-format off */
const command_rec mm_directives[] = {
    MM_PHASES(MM_PHASE_CMDS)
    MM_SLOT_DIRECTIVES
    AP_INIT_TAKE_ARGV("mrubyCache", mm_cache_cmd, NULL, RSRC_CONF,
                      "[name] [dict[:file][(size)] | provider[:arguments]] [max-value=bytes]: a shared cache for "
                      "Apache::Cache"),
    AP_INIT_FLAG("mrubyHandlerEnable", cmd_compat_flag, NULL, MM_DIR_CONTEXT,
                 "accepted for compatibility with older configurations; has no effect"),
    AP_INIT_TAKE1("mrubyTimeout", cmd_timeout, NULL, MM_DIR_CONTEXT,
                  "longest time, in milliseconds, a script may run; 'off' for no limit"),
    AP_INIT_TAKE1("mrubyMemoryLimit", cmd_memory_limit, NULL, RSRC_CONF,
                  "most memory one VM may use (bytes, or with K, M, G); 'off' for no limit"),
    AP_INIT_TAKE1("mrubyMaxRequestsPerVM", cmd_max_requests, NULL, RSRC_CONF,
                  "runs after which a VM is replaced by a fresh one; 0 for never"),
    AP_INIT_TAKE12("mrubyCompileLimit", cmd_compile_limit, NULL, RSRC_CONF,
                   "most bytes of Ruby compiled at once (K, M allowed), and most milliseconds of CPU "
                   "its parsing may take (0: no time limit)"),
    AP_INIT_FLAG("mrubyServerToken", cmd_server_token, NULL, RSRC_CONF,
                 "On: add mod_mruby/VERSION to the Server header (with ServerTokens Full)"),
    AP_INIT_TAKE1("mrubyRequestBodyLimit", cmd_body_limit, NULL, MM_DIR_CONTEXT,
                  "the most bytes of a request body Ruby may read (0: no limit of our own)"),
    AP_INIT_TAKE1("mrubyFormFieldsLimit", cmd_fields_limit, NULL, MM_DIR_CONTEXT,
                  "the most fields Request#query_params and #form_params return"),
    AP_INIT_TAKE1("mrubyDefaultReturn", cmd_default_return, NULL, MM_DIR_CONTEXT,
                  "OK or DECLINED: the result of a phase script that ends without Apache.return"),
    AP_INIT_FLAG("mrubyDirectoryWalk", cmd_dirwalk, NULL, MM_DIR_CONTEXT,
                 "Off: the section's requests are not mapped to the file system (no <Directory>, "
                 "<Files> or .htaccess), as mod_proxy's are not"),
    {NULL},
};
/* clang-format on */
