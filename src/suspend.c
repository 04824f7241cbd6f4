/* suspend.c: a content handler script that sleeps with Apache::Async.sleep
 * under the event MPM gives its worker thread back to httpd.
 *
 * The script runs in a fiber (run.c). When it sleeps, its run record moves
 * into the request's pool, the handler returns SUSPENDED, and a timed
 * callback of the MPM resumes the fiber later, on whichever worker thread
 * runs the callback. That thread takes the VM the fiber lives in (its lock;
 * the VM's own thread may be serving other requests with it meanwhile),
 * resumes the script, runs the rest of the phase and completes the request.
 *
 * Two shortcomings of httpd 2.4's event MPM shape this file:
 * - Its listener bounds its poll() by the next timer only once some timer
 *   has expired: a timed callback registered for later fires only when
 *   something else wakes the listener. A callback registered for "now"
 *   wakes it and is due at once. So each child has an alarm thread of ours
 *   that waits until a sleeper is due and then registers a callback for
 *   now; the MPM's worker threads still run the callbacks.
 * - It has no way to take a suspended connection back: the response of a
 *   request that slept says "Connection: close", and once it is complete
 *   this file closes the connection and releases its pool, whose cleanups
 *   are how the MPM accounts for its connections. */

#include "apr_thread_cond.h"
#include "apr_thread_proc.h"
#include "httpd.h"
#include "http_connection.h"
#include "http_protocol.h"
#include "http_request.h"
#include "ap_mpm.h"

#include <mruby.h>

#include <string.h>

#include "mod_mruby.h"
#include "suspend.h"
#include "vm.h"

APLOG_USE_MODULE(mruby);

/* A sleeping run; allocated from its request's pool, so it lives as long
 * as the request. */
struct mm_sleeper {
    mm_run_t run;                   /* the run record, moved here from run_one's stack */
    mm_slot_t slot;                 /* the rest of its phase */
    apr_time_t due;                 /* when it wakes */
    struct mm_sleeper *prev, *next; /* in the alarm list while waiting */
};

/* The child's alarm thread and the sleepers it waits for, by due time.
 * Created in child_init (event MPM only), stopped when the child exits. */
static struct {
    apr_thread_t *thread;
    apr_thread_mutex_t *lock;        /* guards all below */
    apr_thread_cond_t *cond;         /* signalled for an earlier sleeper, or stop */
    struct mm_sleeper *first, *last; /* waiting sleepers, by due time */
    int stop;
} alarms;

int mm_suspend_possible(const mm_run_t *run)
{
    const request_rec *r = run->r;

    return mm_vm_async && r && run->kind == &mm_phases[MM_PHASE_HANDLER] && run->outer == NULL &&
           r->main == NULL && r->prev == NULL && r->connection->cs != NULL && r->connection->master == NULL;
}

/* The connection of a request that slept: httpd 2.4's event MPM cannot take
 * it back, so it is closed here. Marking it suspended again makes the
 * cleanup of its pool count it out of the MPM's suspended connections. */
static void close_connection(conn_rec *c)
{
    ap_lingering_close(c);
    c->cs->state = CONN_STATE_SUSPENDED;
    apr_pool_destroy(c->pool);
}

/* Completes the request as httpd would have after a handler returned
 * result, then closes its connection. */
static void complete(request_rec *r, int result)
{
    conn_rec *c = r->connection;

    if (result == OK || result == DONE) {
        ap_finalize_request_protocol(r);
    } else {
        r->status = HTTP_OK;
        ap_die(result, r);
    }
    ap_process_request_after_handler(r); /* r may be gone from here on */
    close_connection(c);
}

/* The MPM's timed callback, on a worker thread. invoke_mtx (held by httpd
 * while the handler runs) makes sure the handler has returned SUSPENDED
 * before the script resumes. */
static void wake(void *baton)
{
    struct mm_sleeper *z = baton;
    request_rec *r = z->run.r;
    mm_vm_t *vm = z->run.vm, *previous;
    int result;

    apr_thread_mutex_lock(r->invoke_mtx);
    previous = mm_vm_enter(vm);
    result = mm_run_wake(&z->run, &z->slot);
    mm_vm_leave(vm, previous);
    apr_thread_mutex_unlock(r->invoke_mtx);
    if (result != SUSPENDED) {
        complete(r, result);
    }
}

/* Queues z for the alarm thread, in due order (searched from the end: most
 * sleepers arrive in order). */
static void schedule(struct mm_sleeper *z, apr_time_t due)
{
    struct mm_sleeper *at;

    z->due = due;
    apr_thread_mutex_lock(alarms.lock);
    for (at = alarms.last; at && at->due > due; at = at->prev) {
    }
    z->prev = at;
    z->next = at ? at->next : alarms.first;
    *(z->next ? &z->next->prev : &alarms.last) = z;
    *(at ? &at->next : &alarms.first) = z;
    if (alarms.first == z) {
        apr_thread_cond_signal(alarms.cond);
    }
    apr_thread_mutex_unlock(alarms.lock);
}

/* Takes the first sleeper off the list (under alarms.lock). */
static struct mm_sleeper *unschedule_first(void)
{
    struct mm_sleeper *z = alarms.first;

    alarms.first = z->next;
    *(z->next ? &z->next->prev : &alarms.last) = NULL;
    z->next = z->prev = NULL;
    return z;
}

static void *APR_THREAD_FUNC alarm_main(apr_thread_t *thread, void *unused)
{
    apr_thread_mutex_lock(alarms.lock);
    while (!alarms.stop) {
        struct mm_sleeper *z;
        apr_time_t now;

        if (alarms.first == NULL) {
            apr_thread_cond_wait(alarms.cond, alarms.lock);
            continue;
        }
        now = apr_time_now();
        if (alarms.first->due > now) {
            apr_thread_cond_timedwait(alarms.cond, alarms.lock, alarms.first->due - now);
            continue;
        }
        z = unschedule_first();
        apr_thread_mutex_unlock(alarms.lock);
        if (ap_mpm_register_timed_callback(0, wake, z) != APR_SUCCESS) {
            wake(z); /* the MPM would not take it: resume it here */
        }
        apr_thread_mutex_lock(alarms.lock);
    }
    apr_thread_mutex_unlock(alarms.lock);
    apr_thread_exit(thread, APR_SUCCESS);
    return NULL;
}

static apr_status_t alarms_stop(void *unused)
{
    apr_status_t rv;

    apr_thread_mutex_lock(alarms.lock);
    alarms.stop = 1;
    apr_thread_cond_signal(alarms.cond);
    apr_thread_mutex_unlock(alarms.lock);
    apr_thread_join(&rv, alarms.thread);
    alarms.thread = NULL;
    return APR_SUCCESS;
}

void mm_suspend_child_init(apr_pool_t *pchild, server_rec *s)
{
    apr_status_t rv;

    memset(&alarms, 0, sizeof alarms);
    if (!mm_vm_async) {
        return;
    }
    rv = apr_thread_mutex_create(&alarms.lock, APR_THREAD_MUTEX_DEFAULT, pchild);
    if (rv == APR_SUCCESS) {
        rv = apr_thread_cond_create(&alarms.cond, pchild);
    }
    if (rv == APR_SUCCESS) {
        rv = apr_thread_create(&alarms.thread, NULL, alarm_main, NULL, pchild);
    }
    if (rv != APR_SUCCESS) {
        alarms.thread = NULL;
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                     MM_LOGNO(00062) "cannot start the alarm thread: Apache::Async.sleep will block");
        return;
    }
    apr_pool_cleanup_register(pchild, NULL, alarms_stop, apr_pool_cleanup_null);
}

apr_status_t mm_suspend(mm_run_t *run, const mm_slot_t *slot)
{
    struct mm_sleeper *z = run->sleeper;

    if (alarms.thread == NULL) {
        return APR_ENOTIMPL; /* the caller sleeps in place */
    }
    if (z == NULL) {
        /* First sleep of this run: the record moves from run_one's stack
         * to the request's pool, and the fiber is kept from the GC until
         * the script ends. */
        z = apr_pcalloc(run->r->pool, sizeof *z);
        z->run = *run;
        z->run.sleeper = z;
        z->slot = *slot;
        mrb_gc_register(run->vm->mrb, run->fiber);
        run->vm->suspended++;
        run->r->connection->keepalive = AP_CONN_CLOSE;
    }
    /* The callback cannot start before the handler has returned (it waits
     * for invoke_mtx, then for the VM). */
    schedule(z, apr_time_now() + run->sleep);
    return APR_SUCCESS;
}

void mm_suspend_done(mm_run_t *run)
{
    if (run->sleeper) {
        mrb_gc_unregister(run->vm->mrb, run->fiber);
        run->vm->suspended--;
    }
}
