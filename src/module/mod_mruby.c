/* mod_mruby.c: the module record and its hook registration; the work is
 * done elsewhere (config.c, code.c, vm.c, run.c, phase.c, rb_*.c). */

#include "httpd.h"
#include "ap_mpm.h"
#include "http_core.h"
#include "http_config.h"
#include "http_log.h"

#include <mruby/version.h>

#include "body.h"
#include "cache.h"
#include "code.h"
#include "config.h"
#include "counters.h"
#include "mod_mruby.h"
#include "phase.h"
#include "slots.h"
#include "status.h"
#include "subreq.h"
#include "suspend.h"
#include "timeout.h"
#include "timer.h"
#include "vm.h"

APLOG_USE_MODULE(mruby);

static int mm_pre_config(apr_pool_t *pconf, apr_pool_t *plog, apr_pool_t *ptemp)
{
    mm_config_pre_config(pconf);
    mm_code_pre_config(pconf);
    mm_slots_pre_config(pconf);
    return mm_cache_pre_config(pconf, plog);
}

static int mm_post_config(apr_pool_t *pconf, apr_pool_t *plog, apr_pool_t *ptemp, server_rec *s)
{
    int rv;

    mm_code_post_config();
    mm_counters_post_config(pconf, s);
    /* In every configuration pass: the banner is rebuilt with pconf. */
    if (mm_settings.server_token) {
        ap_add_version_component(pconf, MM_MODULE_NAME "/" MM_MODULE_VERSION);
    }
    if ((rv = mm_cache_post_config(pconf, plog, s)) != OK) {
        return rv;
    }
    if (mm_phase_in_use(MM_PHASE_TIMERS)) {
        mm_timer_post_config(pconf, s);
    }
    /* httpd reads its configuration twice at startup; say it once. */
    if (ap_state_query(AP_SQ_MAIN_STATE) != AP_SQ_MS_CREATE_PRE_CONFIG) {
        int threaded = 0;

        ap_mpm_query(AP_MPMQ_IS_THREADED, &threaded);
        ap_log_error(APLOG_MARK, APLOG_NOTICE, 0, s,
                     MM_LOGNO(00001) MM_MODULE_NAME "/" MM_MODULE_VERSION " mruby/" MRUBY_VERSION
                                                    " ready: %d scripts, one VM per %s",
                     mm_code_script_count(), threaded ? "thread" : "process");
        mm_vm_post_config(pconf, s);
    }
    return OK;
}

static void mm_child_init(apr_pool_t *pchild, server_rec *s)
{
    /* First: its cleanup then runs last, when no VM counts any more. */
    mm_counters_child_init(pchild, s);
    mm_vm_child_init(pchild, s);
    mm_timeout_child_init(pchild, s);
    mm_suspend_child_init(pchild, s);
    mm_cache_child_init(pchild, s);
}

static void mm_register_hooks(apr_pool_t *p)
{
    ap_hook_pre_config(mm_pre_config, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_post_config(mm_post_config, NULL, NULL, APR_HOOK_MIDDLE);
    /* Before any ChildInit script: they need the per-thread VMs and the
     * caches. */
    ap_hook_child_init(mm_child_init, NULL, NULL, APR_HOOK_REALLY_FIRST);
    mm_phase_register_hooks(p);
    mm_body_register_hooks(p);
    mm_slots_register_hooks(p);
    mm_suspend_register_hooks(p);
    mm_subreq_register_hooks(p);
    mm_status_register_hooks(p);
}

/* clang-format off */
module AP_MODULE_DECLARE_DATA mruby_module = {
    STANDARD20_MODULE_STUFF,
    mm_config_create_dir,    /* per-section config */
    mm_config_merge_dir,     /* merge per-section config */
    mm_config_create_server, /* per-server config */
    mm_config_merge_server,  /* merge per-server config */
    mm_directives,           /* directives */
    mm_register_hooks,       /* hooks */
};
/* clang-format on */
