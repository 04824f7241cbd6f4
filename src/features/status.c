/* status.c: the module's counters on mod_status's page (server-status) and
 * in its machine-readable form (server-status?auto), through mod_status's
 * optional status_hook. The numbers are the answering child's own
 * (mm_vm_stats): per process, like the VMs they count. */

#include "httpd.h"
#include "http_protocol.h"
#include "mod_status.h"

#include <stddef.h>
#include <unistd.h>

#include "status.h"
#include "timer.h"
#include "vm.h"

/* One row per counter: its ?auto key and its label on the page. */
typedef struct {
    const char *key;
    const char *label;
    size_t offset; /* in mm_vm_stats_t */
} mm_status_row_t;

#define MM_ROW(field, key, label)                                                                            \
    {                                                                                                        \
        key, label, offsetof(mm_vm_stats_t, field)                                                           \
    }
static const mm_status_row_t rows[] = {
    MM_ROW(vms_alive, "MrubyVMs", "VMs alive"),
    MM_ROW(vms_created, "MrubyVMsCreated", "VMs created"),
    MM_ROW(runs, "MrubyRuns", "script runs"),
    MM_ROW(exceptions, "MrubyExceptions", "runs ended by an exception"),
    MM_ROW(timeouts, "MrubyTimeouts", "runs stopped by mrubyTimeout"),
    MM_ROW(suspended, "MrubySuspended", "requests asleep now"),
    MM_ROW(suspends, "MrubySuspends", "requests put to sleep, in all"),
    MM_ROW(timer_runs, "MrubyTimerRuns", "timer blocks called"),
    MM_ROW(timer_failures, "MrubyTimerFailures", "timer blocks ended by an exception"),
};
#undef MM_ROW

static int status_hook(request_rec *r, int flags)
{
    mm_vm_stats_t st;
    size_t i;

    mm_vm_stats(&st);
    mm_timer_counts(&st.timer_runs, &st.timer_failures);
    if (flags & AP_STATUS_SHORT) {
        for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            ap_rprintf(r, "%s: %" APR_UINT64_T_FMT "\n", rows[i].key,
                       *(const apr_uint64_t *)((const char *)&st + rows[i].offset));
        }
        return OK;
    }
    ap_rprintf(r, "<hr />\n<h2>mod_mruby (process %" APR_PID_T_FMT ")</h2>\n", getpid());
    if (flags & AP_STATUS_NOTABLE) {
        ap_rputs("<dl>\n", r);
        for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            ap_rprintf(r, "<dt>%s: %" APR_UINT64_T_FMT "</dt>\n", rows[i].label,
                       *(const apr_uint64_t *)((const char *)&st + rows[i].offset));
        }
        ap_rputs("</dl>\n", r);
        return OK;
    }
    ap_rputs("<table border=\"0\">\n", r);
    for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ap_rprintf(r, "<tr><td>%s</td><td>%" APR_UINT64_T_FMT "</td></tr>\n", rows[i].label,
                   *(const apr_uint64_t *)((const char *)&st + rows[i].offset));
    }
    ap_rputs("</table>\n", r);
    return OK;
}

void mm_status_register_hooks(apr_pool_t *p)
{
    /* An optional hook: taken into account whether mod_status is loaded
     * before us, after us, or not at all. */
    APR_OPTIONAL_HOOK(ap, status_hook, status_hook, NULL, NULL, APR_HOOK_MIDDLE);
}
