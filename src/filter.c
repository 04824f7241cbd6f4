/* filter.c: what input and output filters share: running a script over a
 * piece of a body and reading its verdict, and the Ruby state a filter
 * keeps for a request (Apache::Filter#ctx). */

#include "apr_portable.h"
#include "apr_strings.h"
#include "httpd.h"
#include "http_log.h"

#include <mruby.h>
#include <mruby/hash.h>

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

int mm_filter_run(const mm_phase_t *kind, const mm_slot_script_t *slot, mm_filter_run_t *run)
{
    request_rec *r = run->f->r;
    int rv = mm_run_script(r, kind, slot->script, run);

    if (run->error_status) {
        return run->error_status;
    }
    if (rv == OK || rv == DECLINED || rv == HTTP_OK) {
        return 0;
    }
    if (rv >= 400 && rv <= 599) {
        return rv;
    }
    ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, r,
                  MM_LOGNO(00500) "%s %s (%s): Apache.return(%d) means nothing to a filter; failing with 500",
                  kind->stem, slot->name, slot->script->name, rv);
    return HTTP_INTERNAL_SERVER_ERROR;
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

static void unregister(mm_filter_state_t *st)
{
    mm_vm_t *vm = st->vm;

    /* Under the event MPM another thread may be in the VM, resuming a
     * sleeping script: the VM's lock keeps us apart. */
    mm_vm_lock(vm);
    mrb_gc_unregister(vm->mrb, st->hash);
    mm_vm_unlock(vm);
    st->vm = NULL;
}

void mm_filter_state_release(mm_filter_state_t *st, request_rec *r)
{
    if (st->vm && mm_vm_for_thread(r->server) == st->vm) {
        unregister(st);
    }
}

/* The request's pool is going and the filter never saw the end of the
 * body. Only the thread that made the Hash knows that its VM is still
 * there; when the pool goes in another thread (event MPM write completion)
 * the Hash is left to the VM, which frees it when it closes. */
static apr_status_t state_cleanup(void *data)
{
    mm_filter_state_t *st = data;

    if (st->vm && apr_os_thread_equal(st->thread, apr_os_thread_current())) {
        unregister(st);
    }
    return APR_SUCCESS;
}

mrb_value mm_filter_state_hash(mrb_state *mrb, mm_filter_run_t *run)
{
    mm_filter_state_t *st = run->state;

    if (st->vm == NULL) {
        st->hash = mrb_hash_new(mrb);
        mrb_gc_register(mrb, st->hash);
        st->vm = mm_vm_of(mrb);
        st->thread = apr_os_thread_current();
        if (!st->cleanup_registered) {
            apr_pool_cleanup_register(run->f->r->pool, st, state_cleanup, apr_pool_cleanup_null);
            st->cleanup_registered = 1;
        }
    } else if (st->vm != mm_vm_of(mrb)) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Filter#ctx: this request's filter state is in another VM");
    }
    return st->hash;
}
