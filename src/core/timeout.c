/* timeout.c: mrubyTimeout, stopping a script that runs too long.
 *
 * mruby calls its instruction hook (mrb->code_fetch_hook, in a libmruby
 * built with MRB_USE_DEBUG_HOOK) before every instruction when one is
 * installed. A hook installed for the whole run cost the realistic handler
 * of the bench 10 % more instructions (the call, a count, a look at the
 * clock every 1024 instructions). So a run only publishes its deadline in
 * its VM; one watchdog thread per child sleeps until the earliest deadline
 * of the child's VMs and, when a run's has passed, installs the hook in
 * that VM. The VM's thread calls it at the script's next instruction, and
 * the hook raises Apache::Timeout there. The run takes the hook out when
 * it ends.
 *
 * Why the watchdog may write another thread's mrb->code_fetch_hook: mruby's
 * VM reads the field from memory before each instruction (the field of the
 * mrb_state, not a copy: patches/mruby/hook-load.patch makes that read an
 * atomic one, so that no compiler may keep it in a register), and a
 * pointer store is atomic: the running thread sees either no hook or the
 * whole pointer, at its next instruction or within a few. The watchdog
 * reaches the VMs through the child's registry (vm.c), under its lock, so
 * a VM cannot be closed under it.
 *
 * Races, and why each is harmless:
 * - The watchdog reads a deadline, the run ends (or another begins) and
 *   then the hook is installed: the hook finds no deadline, or one not yet
 *   passed, and takes itself out (is_due).
 * - The hook takes itself out just as the watchdog installs it for the run
 *   in progress: the watchdog writes the time it saw (vm->passed) before
 *   the hook, and the hook looks at it again after taking itself out; one
 *   of the two sees the other's write.
 * - A nested run (a subrequest) replaces the outer run's deadline while it
 *   runs and puts it back after: the outer deadline comes back like a new
 *   one (notify), and the watchdog looks at it again.
 *
 * Without the watchdog (its thread could not start), the hook is installed
 * for the whole run as it was before, counting instructions. */

#include "apr_time.h"
#include "httpd.h"
#include "http_log.h"

#include <mruby.h>
#include <mruby/error.h>

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "config.h"
#include "mod_mruby.h"
#include "mruby_internal.h"
#include "thread.h"
#include "timeout.h"
#include "vm.h"

APLOG_USE_MODULE(mruby);

#ifdef MRB_USE_DEBUG_HOOK

/* The child's watchdog. */
static struct {
    mm_thread_t t;    /* running: hooks are installed when due; its lock guards
                         pending, its cond is signalled for an earlier deadline */
    int pending;      /* a deadline came that may be earlier than until */
    apr_time_t until; /* when it wakes at the latest (atomic); MM_NEVER while it
                         scans, or has nothing to wait for: runs tell it then */
} watch;

/* The time now plus timeout (> 0), or the largest apr_time_t where the sum
 * would not fit 64 bits: a deadline never wraps into the past, whatever
 * maximum config.c gives mrubyTimeout. */
static apr_time_t deadline_after(apr_interval_time_t timeout)
{
    apr_time_t now = mm_thread_now();

    return timeout > APR_INT64_MAX - now ? APR_INT64_MAX : now + timeout;
}

static void timeout_hook(mrb_state *mrb, const struct mrb_irep *irep, const mrb_code *pc, mrb_value *regs);

/* Whether the watchdog saw the running script's deadline pass. */
static int passed(const mm_vm_t *vm)
{
    return vm->deadline != 0 && vm->deadline <= __atomic_load_n(&vm->passed, __ATOMIC_SEQ_CST);
}

/* Called from the hook until the script's time is up: whether it is. With
 * the watchdog, the hook is there because the watchdog saw a deadline of
 * this VM pass, maybe an earlier run's: then it takes itself out. Without
 * the watchdog, the clock is read every 1024 instructions. */
static int is_due(mm_vm_t *vm)
{
    if (!watch.t.running) {
        return (++vm->ticks & 1023) == 0 && mm_thread_now() >= vm->deadline;
    }
    if (passed(vm)) {
        return 1;
    }
    mm_mi_set_hook(vm->mrb, NULL);
    if (!passed(vm)) {
        return 0;
    }
    mm_mi_set_hook(vm->mrb, timeout_hook); /* the watchdog's, just taken out */
    return 1;
}

/* Once the time is up, the hook raises Apache::Timeout (not a
 * StandardError: a plain rescue does not catch it), at once and again
 * every 1024 instructions while the script goes on, so loops and ensure
 * clauses end and the VM goes on serving. (Raising before every
 * instruction would not do: mruby would raise again at the first
 * instruction of each rescue clause, forever.) A script still running when
 * the grace time is over as well rescues Exception itself: it is stopped by
 * jumping straight to its run's own catch point, which unwinds mruby's
 * stack without running rescue clauses, and the VM is replaced. */
static void timeout_hook(mrb_state *mrb, const struct mrb_irep *irep, const mrb_code *pc, mrb_value *regs)
{
    mm_vm_t *vm = mm_vm_of(mrb);
    struct RClass *timeout = vm->timeout_class;

    if (!vm->timed_out) {
        if (!is_due(vm)) {
            return;
        }
        vm->timed_out = 1;
        vm->ticks = 0;
    } else if ((++vm->ticks & 1023) != 0) {
        return;
    } else if (mm_thread_now() - vm->deadline >= vm->grace && vm->run && vm->run->escape) {
        /* (past the deadline: the difference cannot overflow, where
         * deadline + grace could) */
        mrb_value stop = mrb_exc_new_lit(mrb, timeout, "the script ignored Apache::Timeout: stopped");

        vm->stopped = 1;
        vm->retire = MM_RETIRE_STOPPED;
        mm_mi_throw(mrb, vm->run->escape, stop);
    }
    mrb_raise(mrb, timeout, "the script ran longer than mrubyTimeout allows");
}

/* A VM has a new deadline (a run began, or a nested one gave the outer
 * run's back): the watchdog is told when it may wake too late for it. */
static void notify(apr_time_t deadline)
{
    if (deadline < __atomic_load_n(&watch.until, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&watch.t.lock);
        watch.pending = 1;
        pthread_cond_signal(&watch.t.cond);
        pthread_mutex_unlock(&watch.t.lock);
    }
}

/* One look at the VMs, under the registry's lock: the hook goes into those
 * whose deadline has passed (again, should one have been taken out by a
 * nested run); the earliest deadline to come is the next wake-up. */
typedef struct {
    apr_time_t now;
    apr_time_t next;
    apr_time_t latest; /* the latest deadline any run was given */
} mm_scan_t;

static void scan_vm(mm_vm_t *vm, void *ctx)
{
    mm_scan_t *scan = ctx;
    apr_time_t deadline = __atomic_load_n(&vm->deadline, __ATOMIC_SEQ_CST);
    apr_time_t latest = __atomic_load_n(&vm->latest, __ATOMIC_RELAXED);

    if (latest > scan->latest) {
        scan->latest = latest;
    }
    if (deadline == 0) {
        return;
    }
    if (deadline <= scan->now) {
        __atomic_store_n(&vm->passed, scan->now, __ATOMIC_SEQ_CST);
        mm_mi_set_hook(vm->mrb, timeout_hook);
    } else if (deadline < scan->next) {
        scan->next = deadline;
    }
}

/* While it scans, `until` is MM_NEVER: a run that begins then tells it
 * (pending), and it scans again. Once it has published the time it will
 * wake, a run whose deadline is earlier tells it; one whose deadline is
 * later is seen at that wake-up. With no run in progress, it wakes at the
 * latest deadline given (runs that begin meanwhile with the same timeout
 * need not tell it), and waits for a run to tell it only once that has
 * passed with none begun since: short runs one after another, each over
 * before the watchdog looks, would each wake it. */
static void *watch_main(void *unused)
{
    pthread_mutex_lock(&watch.t.lock);
    while (!watch.t.stop) {
        mm_scan_t scan;

        __atomic_store_n(&watch.until, MM_NEVER, __ATOMIC_SEQ_CST);
        watch.pending = 0;
        pthread_mutex_unlock(&watch.t.lock);
        scan.now = mm_thread_now();
        scan.next = MM_NEVER;
        scan.latest = 0;
        mm_vm_each(scan_vm, &scan);
        if (scan.next == MM_NEVER && scan.latest > scan.now) {
            scan.next = scan.latest;
        }
        pthread_mutex_lock(&watch.t.lock);
        if (watch.pending || watch.t.stop) {
            continue;
        }
        __atomic_store_n(&watch.until, scan.next, __ATOMIC_SEQ_CST);
        mm_thread_wait_until(&watch.t, scan.next);
    }
    pthread_mutex_unlock(&watch.t.lock);
    return NULL;
}

static apr_status_t watch_stop(void *unused)
{
    mm_thread_stop(&watch.t);
    return APR_SUCCESS;
}

/* The watchdog needs little stack: it calls nothing deep. */
#define MM_WATCH_STACK (64 * 1024)

void mm_timeout_child_init(apr_pool_t *pchild, server_rec *s)
{
    int rv;

    watch.t.running = 0;
    watch.pending = 0;
    watch.until = MM_NEVER;
    if (!mm_settings.timeouts) {
        return; /* no section sets mrubyTimeout: no thread */
    }
    if ((rv = mm_thread_start(&watch.t, watch_main, MM_WATCH_STACK)) != 0) {
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                     MM_LOGNO(00280) "cannot start the mrubyTimeout watchdog: scripts with a timeout run "
                                     "with mruby's instruction hook installed, and slower");
        return;
    }
    apr_pool_cleanup_register(pchild, NULL, watch_stop, apr_pool_cleanup_null);
}

void mm_timeout_arm(mm_run_t *run, mm_timer_t *saved)
{
    mm_vm_t *vm = run->vm;
    mrb_state *mrb = vm->mrb;

    saved->hook = (void *)mm_mi_hook(mrb);
    saved->deadline = vm->deadline;
    saved->timed_out = vm->timed_out;
    if (run->timeout > 0) {
        apr_time_t deadline = deadline_after(run->timeout);

        vm->grace = run->timeout > apr_time_from_msec(100) ? run->timeout : apr_time_from_msec(100);
        vm->timed_out = 0;
        vm->ticks = 0;
        mm_mi_set_hook(mrb, watch.t.running ? NULL : timeout_hook);
        __atomic_store_n(&vm->latest, deadline, __ATOMIC_RELAXED);
        __atomic_store_n(&vm->deadline, deadline, __ATOMIC_SEQ_CST);
        if (watch.t.running) {
            notify(deadline);
        }
    }
}

void mm_timeout_expired(mrb_state *mrb)
{
    mm_vm_t *vm = mm_vm_of(mrb);
    apr_time_t deadline = __atomic_load_n(&vm->deadline, __ATOMIC_SEQ_CST);

    if (deadline == 0 || mm_thread_now() < deadline) {
        return;
    }
    if (!vm->timed_out) {
        vm->timed_out = 1;
        vm->ticks = 0;
    }
    mm_mi_set_hook(mrb, timeout_hook); /* raises again while the script goes on */
    mrb_raise(mrb, vm->timeout_class, "the script ran longer than mrubyTimeout allows");
}

long mm_timeout_ms_left(mrb_state *mrb)
{
    apr_time_t deadline = __atomic_load_n(&mm_vm_of(mrb)->deadline, __ATOMIC_SEQ_CST);
    apr_time_t now;

    if (deadline == 0) {
        return 0;
    }
    now = mm_thread_now();
    return deadline > now + 1000 ? (long)((deadline - now) / 1000) : 1;
}

int mm_timeout_disarm(mm_run_t *run, const mm_timer_t *saved)
{
    mm_vm_t *vm = run->vm;
    int timed_out;

    if (run->timeout <= 0) {
        return 0;
    }
    timed_out = vm->timed_out;
    __atomic_store_n(&vm->deadline, saved->deadline, __ATOMIC_SEQ_CST);
    mm_mi_set_hook(vm->mrb, (mm_mi_hook_t)saved->hook);
    vm->timed_out = saved->timed_out;
    if (saved->deadline != 0 && watch.t.running) {
        notify(saved->deadline);
    }
    return timed_out;
}

#else /* a libmruby without the hook: config.c refuses mrubyTimeout */

void mm_timeout_child_init(apr_pool_t *pchild, server_rec *s)
{
}

void mm_timeout_arm(mm_run_t *run, mm_timer_t *saved)
{
}

int mm_timeout_disarm(mm_run_t *run, const mm_timer_t *saved)
{
    return 0;
}

void mm_timeout_expired(mrb_state *mrb)
{
}

long mm_timeout_ms_left(mrb_state *mrb)
{
    return 0;
}

#endif
