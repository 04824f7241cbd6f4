/* timer.c: the child's timer thread. It makes a VM of its own, runs the
 * mrubyTimers scripts there (they set timers with Apache::Timer.every and
 * .after, whose blocks live in that VM), then sleeps until the next timer
 * is due and calls its block, until the child stops. One thread and one VM
 * per child: blocks never run at the same time as each other, and never in
 * a VM that serves requests. A block's run that leaves the VM to be
 * replaced (stopped hard, a limit of the VM's) has it replaced there: the
 * timers go with the old VM, and the scripts run again in the new one. */

#include "apr_strings.h"
#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "unixd.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "mod_mruby.h"
#include "run.h"
#include "thread.h"
#include "timer.h"

APLOG_USE_MODULE(mruby);

const mm_phase_t *mm_timer_kind;

typedef struct {
    mrb_int id;    /* 0: a free slot */
    int repeat;    /* every (1) or after (0) */
    int singleton; /* runs in one child of the server at a time */
    apr_interval_time_t interval;
    apr_time_t due;  /* monotonic clock */
    mrb_value block; /* registered with the VM's GC while the timer exists */
    char name[160];  /* "timer every 2000 ms (file:line)", for logs */
} mm_timer_t;

/* The child's timer thread and its timers. timers[] and next_id are the
 * timer thread's own (Ruby adds and cancels timers only there); lock guards
 * stop, and is what the thread waits on. */
static struct {
    mm_thread_t t; /* its lock guards the timers */
    server_rec *s;
    mm_timer_scripts_fn *scripts;
    mm_timer_t timers[MM_TIMER_MAX];
    mrb_int next_id;
    /* Singleton timers run in the child that holds the server's timer lock
     * (an flock of the file below, in DefaultRuntimeDir), which it takes
     * at the first singleton timer due and keeps until it exits; the
     * others skip theirs, and try again at their next turn. */
    char lock_path[1024];
    int lock_fd; /* -1 until opened */
    int leader;  /* this child holds the lock */
} tm;

#define MM_TIMER_LOCK_FILE "mruby-timers.lock"

mrb_int mm_timer_add(mrb_state *mrb, mrb_value block, apr_interval_time_t interval, int repeat, int singleton,
                     const char *where)
{
    int i;

    for (i = 0; i < MM_TIMER_MAX; i++) {
        mm_timer_t *t = &tm.timers[i];

        if (t->id == 0) {
            t->id = ++tm.next_id;
            t->repeat = repeat;
            t->singleton = singleton;
            t->interval = interval;
            t->due = mm_thread_now() + interval;
            t->block = block;
            mrb_gc_register(mrb, block);
            apr_snprintf(t->name, sizeof t->name, "%stimer %s %" APR_TIME_T_FMT " ms (%s)",
                         singleton ? "singleton " : "", repeat ? "every" : "after",
                         (apr_time_t)apr_time_as_msec(interval), where);
            return t->id;
        }
    }
    return 0;
}

static void drop(mrb_state *mrb, mm_timer_t *t)
{
    mrb_gc_unregister(mrb, t->block);
    t->id = 0;
    t->block = mrb_nil_value();
}

int mm_timer_cancel(mrb_state *mrb, mrb_int id)
{
    int i;

    for (i = 0; i < MM_TIMER_MAX; i++) {
        if (id > 0 && tm.timers[i].id == id) {
            drop(mrb, &tm.timers[i]);
            return 1;
        }
    }
    return 0;
}

/* The timer due first, or NULL when there is none. */
static mm_timer_t *earliest(void)
{
    mm_timer_t *best = NULL;
    int i;

    for (i = 0; i < MM_TIMER_MAX; i++) {
        if (tm.timers[i].id && (best == NULL || tm.timers[i].due < best->due)) {
            best = &tm.timers[i];
        }
    }
    return best;
}

/* Whether this child holds the server's timer lock (taking it if it is
 * free: its holder exited). */
static int lead(void)
{
    if (!tm.leader) {
        if (tm.lock_fd < 0) {
            tm.lock_fd = open(tm.lock_path, O_RDWR | O_CLOEXEC);
        }
        tm.leader = tm.lock_fd >= 0 && flock(tm.lock_fd, LOCK_EX | LOCK_NB) == 0;
    }
    return tm.leader;
}

/* Calls t's block (a singleton's only in the child holding the lock); a
 * timer that raised is kept (the exception is logged with the block's
 * file:line by the harness). A repeating timer keeps its
 * rate: the next call is one interval after the one due, or, when the block
 * ran past that, one interval from now. */
static void fire(mm_vm_t *vm, mm_timer_t *t, apr_interval_time_t timeout)
{
    mrb_int id = t->id;
    int repeat = t->repeat;
    mrb_value block = t->block;
    char name[sizeof t->name];
    apr_uint64_t exceptions;

    if (t->singleton && !lead()) { /* another child runs it */
        t->due = mm_thread_now() + t->interval;
        return;
    }
    memcpy(name, t->name, sizeof name);
    if (!repeat) { /* once: gone before it runs (its block may reuse the slot) */
        t->id = 0;
    }
    exceptions = vm->ctr[MM_CTR_EXCEPTIONS];
    mm_run_block(vm, tm.s, mm_timer_kind, name, block, timeout);
    mm_ctr_add(vm->ctr, MM_CTR_TIMER_RUNS, 1);
    mm_ctr_add(vm->ctr, MM_CTR_TIMER_FAILURES, vm->ctr[MM_CTR_EXCEPTIONS] != exceptions);
    if (!repeat) {
        mrb_gc_unregister(vm->mrb, block);
    } else if (t->id == id) { /* not cancelled by its own block */
        apr_time_t now = mm_thread_now();

        t->due += t->interval;
        if (t->due <= now) {
            t->due = now + t->interval;
        }
    }
}

/* Runs the mrubyTimers scripts in vm, which set the timers; 0 when they
 * could not run. */
static int set_timers(mm_vm_t *vm)
{
    apr_pool_t *p;

    if (apr_pool_create_unmanaged_ex(&p, NULL, NULL) != APR_SUCCESS) {
        return 0;
    }
    tm.scripts(vm, tm.s, p);
    apr_pool_destroy(p);
    return 1;
}

/* Whether the thread was told to stop (mm_timer_stop). */
static int stopping(void)
{
    int stop;

    pthread_mutex_lock(&tm.t.lock);
    stop = tm.t.stop;
    pthread_mutex_unlock(&tm.t.lock);
    return stop;
}

/* Why the VM was retired, in the words of the log line. */
static const char *retire_reason(mm_retire_e why)
{
    switch (why) {
    case MM_RETIRE_STOPPED:
        return "a block rescued Apache::Timeout and was stopped hard, its ensure clauses skipped";
    case MM_RETIRE_MEMORY:
        return "it reached mrubyMemoryLimit";
    case MM_RETIRE_RUNS:
        return "it ran mrubyMaxRequestsPerVM scripts";
    case MM_RETIRE_FIBER:
        return "Fiber#initialize was redefined";
    default:
        return "it was retired";
    }
}

/* The block just run left old, the thread's VM, to be replaced. A hard
 * stop unwound mruby's stack without its ensure clauses: what they would
 * have put back (a lock, state half updated) is left as it was, so the VM
 * is not run again. The timers' blocks live in it and go with it; the
 * scripts run again in the new VM and set the timers afresh, as at the
 * child's start. Not once the thread is told to stop: no script runs after
 * that, as no block does. Returns the thread's VM, NULL when no new one
 * could be made (the thread ends). */
static mm_vm_t *renew(mm_vm_t *old)
{
    mm_retire_e why = old->retire;
    mm_vm_t *vm;
    int i, dropped = 0;

    if (stopping()) {
        return old; /* the thread's exit closes it */
    }
    /* Closes old and makes the new VM, which may be given old's address:
     * only its mark tells them apart. */
    vm = mm_vm_for_thread(tm.s);
    if (vm && vm->retire) {
        return vm; /* old, kept: a run is in progress in it (not expected here) */
    }
    for (i = 0; i < MM_TIMER_MAX; i++) {
        dropped += tm.timers[i].id != 0;
        tm.timers[i].id = 0; /* its block was freed with old */
        tm.timers[i].block = mrb_nil_value();
    }
    if (vm == NULL) {
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, tm.s,
                     MM_LOGNO(00654) "the timers' VM was retired (%s) and no new one could be made: "
                                     "this child runs no timer any more",
                     retire_reason(why));
        return NULL;
    }
    /* mrubyMaxRequestsPerVM replaces VMs as a matter of course: not a
     * warning. */
    ap_log_error(APLOG_MARK, why == MM_RETIRE_RUNS ? APLOG_INFO : APLOG_WARNING, 0, tm.s,
                 MM_LOGNO(00653) "the timers' VM was replaced (%s): the mrubyTimers scripts run again "
                                 "in the new one (timers of the old one dropped: %d)",
                 retire_reason(why), dropped);
    if (!stopping()) {
        set_timers(vm);
    }
    return vm;
}

static void *timer_main(void *unused)
{
    mm_vm_t *vm = mm_vm_for_thread(tm.s);
    const mm_dir_conf_t *dc = ap_get_module_config(tm.s->lookup_defaults, &mruby_module);
    apr_interval_time_t timeout = dc->timeout > 0 ? dc->timeout : 0;

    if (vm == NULL || !set_timers(vm)) {
        return NULL; /* logged where it failed */
    }
    pthread_mutex_lock(&tm.t.lock);
    while (!tm.t.stop) {
        mm_timer_t *t = earliest();

        if (t == NULL || t->due > mm_thread_now()) {
            mm_thread_wait_until(&tm.t, t ? t->due : MM_NEVER);
        } else {
            pthread_mutex_unlock(&tm.t.lock);
            fire(vm, t, timeout);
            if (vm->retire && (vm = renew(vm)) == NULL) {
                return NULL;
            }
            pthread_mutex_lock(&tm.t.lock);
        }
    }
    pthread_mutex_unlock(&tm.t.lock);
    /* The timers' blocks go with the VM, which the thread's exit closes. */
    return NULL;
}

void mm_timer_stop(void)
{
    mm_thread_stop(&tm.t);
}

static apr_status_t stop_at_exit(void *unused)
{
    mm_timer_stop();
    return APR_SUCCESS;
}

void mm_timer_child_init(apr_pool_t *pchild, server_rec *s, mm_timer_scripts_fn *scripts)
{
    int rv;

    if (tm.t.running) {
        return; /* the hook of another order started it */
    }
    apr_cpystrn(tm.lock_path, ap_runtime_dir_relative(pchild, MM_TIMER_LOCK_FILE), sizeof tm.lock_path);
    tm.lock_fd = -1;
    tm.leader = 0;
    memset(tm.timers, 0, sizeof tm.timers);
    tm.next_id = 0;
    tm.s = s;
    tm.scripts = scripts;
    if ((rv = mm_thread_start(&tm.t, timer_main, 0)) != 0) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                     MM_LOGNO(00650) "cannot start the child's timer thread: no mrubyTimers script runs");
        return;
    }
    /* A pre-cleanup: before the VM registry, the watchdog and the caches
     * the blocks use are taken down. */
    apr_pool_pre_cleanup_register(pchild, NULL, stop_at_exit);
}

void mm_timer_post_config(apr_pool_t *pconf, server_rec *s)
{
    const char *path = ap_runtime_dir_relative(pconf, MM_TIMER_LOCK_FILE);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

    if (fd < 0) {
        ap_log_error(APLOG_MARK, APLOG_ERR, APR_FROM_OS_ERROR(errno), s,
                     MM_LOGNO(00651) "cannot create %s: singleton timers run in no child", path);
        return;
    }
    /* The children, which run as User, open it. */
    if (geteuid() == 0 && fchown(fd, ap_unixd_config.user_id, ap_unixd_config.group_id) != 0) {
        ap_log_error(APLOG_MARK, APLOG_ERR, APR_FROM_OS_ERROR(errno), s,
                     MM_LOGNO(00652) "cannot give %s to User: singleton timers run in no child", path);
    }
    close(fd);
}
