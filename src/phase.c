/* phase.c: the httpd hook functions, made from the phase table (phase.h):
 * three per phase, one per hook position (First, Middle, Last). A hook of a
 * phase that no configuration uses returns DECLINED before doing anything
 * else. */

#include <string.h>

#include "httpd.h"
#include "http_config.h"
#include "http_request.h"

#include "config.h"
#include "mod_mruby.h"
#include "run.h"

APLOG_USE_MODULE(mruby);

const mm_phase_t mm_phases[MM_PHASE_COUNT] = {
#define MM_PHASE_ROW(ID, STEM, SHAPE, HOOK, DEFAULT, ONERROR) {STEM, DEFAULT, ONERROR},
    MM_PHASES(MM_PHASE_ROW)
#undef MM_PHASE_ROW
};

/* ------------------------------------------------------- content handler */

/* True when the request was given a named handler other than ours
 * (SetHandler server-status, AddHandler cgi-script .cgi, ...): that handler
 * answers, not the section's scripts. A MIME type, which httpd puts in
 * r->handler when none was set, names no handler. */
static int other_handler(const char *h)
{
    return h && *h && strcmp(h, MM_HANDLER_NATIVE) != 0 && strchr(h, '/') == NULL;
}

/* AddHandler mruby-script .mrb: the requested file is the script. */
static int run_file_handler(request_rec *r)
{
    if (r->finfo.filetype == APR_NOFILE) {
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r, MM_LOGNO(00040) "script not found: %s", r->filename);
        return HTTP_NOT_FOUND;
    }
    if (r->finfo.filetype != APR_REG) {
        return DECLINED;
    }
    return mm_run_file(r);
}

static int run_handler(request_rec *r, mm_phase_e phase, mm_order_e order)
{
    const mm_dir_conf_t *dc;
    const apr_array_header_t *scripts;
    int native;

    if (r->handler && strcmp(r->handler, MM_HANDLER_FILE) == 0) {
        return order == MM_ORDER_MIDDLE ? run_file_handler(r) : DECLINED;
    }
    native = r->handler && strcmp(r->handler, MM_HANDLER_NATIVE) == 0;
    if (!native && (!mm_config_phase_used(phase) || other_handler(r->handler))) {
        return DECLINED;
    }
    dc = ap_get_module_config(r->per_dir_config, &mruby_module);
    scripts = mm_config_scripts(dc, phase, order);
    if (scripts) {
        return mm_run_scripts(r, phase, scripts);
    }
    if (native && order == MM_ORDER_MIDDLE && dc->scripts[phase] == NULL) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r,
                      MM_LOGNO(00041) "SetHandler " MM_HANDLER_NATIVE
                                      " but no mrubyHandler or mrubyHandlerCode applies to %s",
                      r->uri);
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    return DECLINED;
}

#define MM_HOOKS_HANDLER(ID)                                                                                 \
    static int hook_##ID##_first(request_rec *r)                                                             \
    {                                                                                                        \
        return run_handler(r, MM_PHASE_##ID, MM_ORDER_FIRST);                                                \
    }                                                                                                        \
    static int hook_##ID##_middle(request_rec *r)                                                            \
    {                                                                                                        \
        return run_handler(r, MM_PHASE_##ID, MM_ORDER_MIDDLE);                                               \
    }                                                                                                        \
    static int hook_##ID##_last(request_rec *r)                                                              \
    {                                                                                                        \
        return run_handler(r, MM_PHASE_##ID, MM_ORDER_LAST);                                                 \
    }

#define MM_DEFINE_HOOKS(ID, STEM, SHAPE, HOOK, DEFAULT, ONERROR) MM_HOOKS_##SHAPE(ID)
MM_PHASES(MM_DEFINE_HOOKS)
#undef MM_DEFINE_HOOKS

void mm_phase_register_hooks(apr_pool_t *p)
{
#define MM_REGISTER(ID, STEM, SHAPE, HOOK, DEFAULT, ONERROR)                                                 \
    ap_hook_##HOOK(hook_##ID##_first, NULL, NULL, APR_HOOK_FIRST);                                           \
    ap_hook_##HOOK(hook_##ID##_middle, NULL, NULL, APR_HOOK_MIDDLE);                                         \
    ap_hook_##HOOK(hook_##ID##_last, NULL, NULL, APR_HOOK_LAST);
    MM_PHASES(MM_REGISTER)
#undef MM_REGISTER
}
