/* status.c: the module's counters on mod_status's page (server-status) and
 * in its machine-readable form (server-status?auto), through mod_status's
 * optional status_hook. The numbers are the server's (counters.c): every
 * child's, and those of the children that exited, since httpd started. */

#include "httpd.h"
#include "http_protocol.h"
#include "mod_status.h"
#include "apr_lib.h"
#include "apr_strings.h"

#include <stddef.h>

#include "counters.h"
#include "status.h"

/* The rows of the page and of ?auto besides the counters of counters.h. */
typedef struct {
    const char *key;
    const char *label;
    size_t offset; /* in mm_counters_t */
} mm_status_row_t;

static const mm_status_row_t totals[] = {
    {"MrubyChildren", "children", offsetof(mm_counters_t, children)},
    {"MrubyVMs", "VMs alive", offsetof(mm_counters_t, vms_alive)},
    {"MrubyVMsCreated", "VMs created", offsetof(mm_counters_t, vms_created)},
};

/* A counter's ?auto key: "Mruby" and its name in CamelCase (code_hits:
 * MrubyCodeHits). */
static const char *auto_key(apr_pool_t *p, const char *name)
{
    char *key = apr_pstrcat(p, "Mruby", name, NULL), *out = key + 5;
    const char *in = name;
    int up = 1;

    for (; *in; in++) {
        if (*in == '_') {
            up = 1;
            continue;
        }
        *out++ = up ? apr_toupper(*in) : *in;
        up = 0;
    }
    *out = '\0';
    return key;
}

/* Row i of the page: the totals first, then the counters. */
#define MM_ROWS (sizeof totals / sizeof totals[0] + MM_CTR_COUNT)

static void row(request_rec *r, const mm_counters_t *c, size_t i, const char **key, const char **label,
                apr_uint64_t *value)
{
    size_t n = sizeof totals / sizeof totals[0];

    if (i < n) {
        *key = totals[i].key;
        *label = totals[i].label;
        *value = *(const apr_uint64_t *)((const char *)c + totals[i].offset);
    } else {
        *key = auto_key(r->pool, mm_counter_name((int)(i - n)));
        *label = mm_counter_label((int)(i - n));
        *value = c->v[i - n];
    }
}

static int status_hook(request_rec *r, int flags)
{
    mm_counters_t c;
    const char *key, *label;
    apr_uint64_t value;
    size_t i;

    mm_counters_server(&c);
    if (flags & AP_STATUS_SHORT) {
        for (i = 0; i < MM_ROWS; i++) {
            row(r, &c, i, &key, &label, &value);
            ap_rprintf(r, "%s: %" APR_UINT64_T_FMT "\n", key, value);
        }
        return OK;
    }
    ap_rputs("<hr />\n<h2>mod_mruby (all children, since httpd started)</h2>\n", r);
    ap_rputs((flags & AP_STATUS_NOTABLE) ? "<dl>\n" : "<table border=\"0\">\n", r);
    for (i = 0; i < MM_ROWS; i++) {
        row(r, &c, i, &key, &label, &value);
        ap_rprintf(r,
                   (flags & AP_STATUS_NOTABLE) ? "<dt>%s: %" APR_UINT64_T_FMT "</dt>\n"
                                               : "<tr><td>%s</td><td>%" APR_UINT64_T_FMT "</td></tr>\n",
                   label, value);
    }
    ap_rputs((flags & AP_STATUS_NOTABLE) ? "</dl>\n" : "</table>\n", r);
    return OK;
}

void mm_status_register_hooks(apr_pool_t *p)
{
    /* An optional hook: taken into account whether mod_status is loaded
     * before us, after us, or not at all. */
    APR_OPTIONAL_HOOK(ap, status_hook, status_hook, NULL, NULL, APR_HOOK_MIDDLE);
}
