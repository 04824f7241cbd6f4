/* filter.c: what input and output filters share: running a script over a
 * piece of a body and reading its verdict, and the checks of a new named
 * filter. */

#include "apr_strings.h"
#include "httpd.h"
#include "http_log.h"

#include <mruby.h>

#include "filter.h"
#include "mod_mruby.h"
#include "run.h"

APLOG_USE_MODULE(mruby);

/* Filters decide with error_create or Apache.return; their scripts never
 * write a response of their own (Apache.rputs raises). An exception is a
 * 500 (the kinds' error result). */
const mm_phase_t mm_filter_out_kind = {"OutputFilter", MM_WHERE_DIR, OK, HTTP_INTERNAL_SERVER_ERROR,
                                       MM_KIND_NO_OUTPUT | MM_KIND_OWN_RESULT};
const mm_phase_t mm_filter_in_kind = {"InputFilter", MM_WHERE_DIR, OK, HTTP_INTERNAL_SERVER_ERROR,
                                      MM_KIND_NO_OUTPUT | MM_KIND_OWN_RESULT};

/* What the run's result says of the body: 0 (it goes on) or its status. */
static int verdict(const mm_phase_t *kind, const mm_slot_script_t *slot, mm_filter_run_t *run, int rv)
{
    if (run->error_status) {
        return run->error_status;
    }
    if (rv == OK || rv == DECLINED || rv == HTTP_OK) {
        return 0;
    }
    if (rv >= 400 && rv <= 599) {
        return rv;
    }
    ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, run->f->r,
                  MM_LOGNO(00500) "%s %s (%s): Apache.return(%d) means nothing to a filter; failing with 500",
                  kind->stem, slot->name, slot->script->name, rv);
    return HTTP_INTERNAL_SERVER_ERROR;
}

int mm_filter_run(const mm_phase_t *kind, const mm_slot_script_t *slot, mm_filter_run_t *run)
{
    request_rec *r = run->f->r;
    int status = verdict(kind, slot, run, mm_run_script(r, kind, slot->script, run));
    const char *err = mm_filter_state_store(run, r->pool, status == 0);

    if (err) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r,
                      MM_LOGNO(00501) "%s %s (%s): Apache::Filter#ctx %s; failing with 500", kind->stem,
                      slot->name, slot->script->name, err);
        return HTTP_INTERNAL_SERVER_ERROR;
    }
    return status;
}

const char *mm_filter_check_named(cmd_parms *cmd, const mm_slot_script_t *s, int exists, int count,
                                  const char *direction)
{
    if (exists) {
        return apr_psprintf(cmd->pool, "%s: an %s filter named '%s' exists already", cmd->cmd->name,
                            direction, s->name);
    }
    if (count == MM_NAMED_FILTERS_MAX) {
        return apr_psprintf(cmd->pool, "%s: at most %d named %s filters", cmd->cmd->name,
                            MM_NAMED_FILTERS_MAX, direction);
    }
    return NULL;
}
