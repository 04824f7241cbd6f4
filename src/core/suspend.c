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
 *   are how the MPM accounts for its connections.
 *
 * When a handler returns SUSPENDED, the worker thread is still inside the
 * MPM's code for the connection (ap_process_async_request, then the MPM's
 * process_socket), and it writes to the connection's memory even after
 * the MPM's suspend_connection hooks have run. A script woken before the
 * worker is out (a sleep of 0 or of a few microseconds, or a worker
 * preempted there) completed the request and freed the connection under
 * it: the child crashed. httpd 2.4 tells a module nothing later than those
 * hooks, so the first sleep of a request is handed to the alarm thread by
 * our hook, and the alarm thread wakes it only once the worker thread
 * shows that it has left: its scoreboard slot changed state (it went
 * idle) or it began on another connection (its VM's count, kept by our
 * pre_connection and resume_connection hooks). A later sleep is handed
 * over at the end of the callback that woke the script. */

#include "apr_atomic.h"
#include "apr_thread_proc.h"
#include "httpd.h"
#include "http_connection.h"
#include "http_protocol.h"
#include "http_request.h"
#include "ap_mpm.h"
#include "mpm_common.h"
#include "scoreboard.h"

#include <mruby.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "mod_mruby.h"
#include "suspend.h"
#include "thread.h"
#include "vm.h"

APLOG_USE_MODULE(mruby);

/* A sleeping run; allocated from its request's pool, so it lives as long
 * as the request. */
struct mm_sleeper {
    mm_run_t run;                   /* the run record, moved here from run_one's stack */
    mm_slot_t slot;                 /* the rest of its phase */
    apr_time_t due;                 /* when it wakes */
    struct mm_sleeper *prev, *next; /* in the alarm list while waiting */
    int handed;                     /* given to the alarm thread at least once */
    /* The first sleep, until the thread that suspended the request is out
     * of the MPM's code for it (worker_left). */
    int pending;
    worker_score *ws;   /* that thread's scoreboard slot (NULL: unknown) */
    int status;         /* the slot's state in our suspend_connection hook */
    apr_uint32_t began; /* its VM's count of connections then */
    apr_time_t hooked;  /* when the hook ran */
    /* The sockets of run.io the alarm thread watches for it (see arm). */
    int armed;
    int armed_fd[MM_IO_MAX];
    int by_io; /* woken by one of them (or poked) */
    int poked; /* mm_suspend_poke came while it was not in the alarm list */
};

/* Where a request's sleeper is found (mm_suspend_poke): its pool's data. */
#define MM_SLEEPER_KEY "mm_sleeper"

/* How often the alarm thread looks again at a first sleep whose worker
 * thread has not shown that it left, and for how long at most (a slot whose
 * state did not change because the thread had nothing else to do). */
#define MM_LEFT_RECHECK  apr_time_from_msec(1)
#define MM_LEFT_LIMIT    apr_time_from_sec(1)
#define MM_LEFT_GRACEFUL apr_time_from_msec(100)

/* The child's alarm thread and the sleepers it waits for, by due time.
 * Created in child_init (event MPM only), stopped when the child exits.
 * It waits in epoll_wait: for the first sleeper's time, for an eventfd
 * (an earlier sleeper, or stop), and for the sockets sleepers wait on
 * (mm_run_wait_io), each registered one-shot with its descriptor's number
 * as its data and found again through by_fd. */
static struct {
    apr_thread_t *thread;
    apr_thread_mutex_t *lock;        /* guards all below */
    int epfd;                        /* the epoll instance */
    int evfd;                        /* written for an earlier sleeper, or stop */
    struct mm_sleeper *first, *last; /* waiting sleepers, by due time */
    struct mm_sleeper **by_fd;       /* the sleeper watching each descriptor, or NULL */
    int nby_fd;
    int stop;
} alarms;

/* The eventfd's data in the epoll set (a descriptor's is its number). */
#define MM_ALARM_SIGNAL UINT64_MAX

int mm_suspend_possible(const mm_run_t *run)
{
    const request_rec *r = run->r;

    return mm_vm_async && r && run->kind == &mm_phases[MM_PHASE_HANDLER] && run->outer == NULL &&
           r->main == NULL && r->prev == NULL && r->connection->cs != NULL && r->connection->master == NULL;
}

/* The connection of a request that slept: httpd 2.4's event MPM cannot take
 * it back, so it is closed here. Marking it suspended again makes the
 * cleanup of its pool count it out of the MPM's suspended connections. */
static void schedule(struct mm_sleeper *z);

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

static void schedule(struct mm_sleeper *z);

/* The MPM's timed callback, on a worker thread. The thread that suspended
 * the request is done with it (see schedule's callers); the VM may be in
 * use by its own thread, so this one waits for it. */
static void wake(void *baton)
{
    struct mm_sleeper *z = baton;
    request_rec *r = z->run.r;
    conn_rec *c = r->connection;
    mm_vm_t *vm = z->run.vm, *previous;
    int result;

    previous = mm_vm_enter(vm);
    mm_ctr_add(vm->ctr, MM_CTR_WAKES, 1);
    mm_ctr_add(vm->ctr, MM_CTR_IO_WAKES, z->by_io);
    z->by_io = 0;
    result = mm_run_wake(&z->run, &z->slot);
    mm_vm_leave(vm, previous);
    if (result == SUSPENDED) {
        /* Asleep again: this script, or one run after it in the same phase
         * (a sleeper of its own). Nothing here touches r after this. */
        struct mm_sleeper *next = ap_get_module_config(c->conn_config, &mruby_module);

        ap_set_module_config(c->conn_config, &mruby_module, NULL);
        schedule(next);
    } else {
        complete(r, result);
    }
}

/* Queues z for the alarm thread. From here on the alarm thread may wake it
 * at once: the caller must be done with z and its request. */
/* Inserts z by its due time (under alarms.lock): searched from the end,
 * as most sleepers arrive in order. */
static void insert(struct mm_sleeper *z)
{
    struct mm_sleeper *at;

    if (alarms.first && z->due < alarms.first->due) {
        at = NULL; /* a socket is ready: it goes first */
    } else {
        for (at = alarms.last; at && at->due > z->due; at = at->prev) {
        }
    }
    z->prev = at;
    z->next = at ? at->next : alarms.first;
    *(z->next ? &z->next->prev : &alarms.last) = z;
    *(at ? &at->next : &alarms.first) = z;
}

/* Takes z off the list (under alarms.lock). */
static void unlink_sleeper(struct mm_sleeper *z)
{
    *(z->prev ? &z->prev->next : &alarms.first) = z->next;
    *(z->next ? &z->next->prev : &alarms.last) = z->prev;
    z->next = z->prev = NULL;
}

/* Wakes the alarm thread from its epoll_wait. */
static void signal_alarms(void)
{
    uint64_t one = 1;
    ssize_t n;

    do {
        n = write(alarms.evfd, &one, sizeof one);
    } while (n < 0 && errno == EINTR);
}

/* Room in by_fd for descriptor fd (under alarms.lock). */
static int fd_room(int fd)
{
    struct mm_sleeper **grown;
    int n;

    if (fd < alarms.nby_fd) {
        return 1;
    }
    n = alarms.nby_fd ? alarms.nby_fd : 256;
    while (n <= fd) {
        n *= 2;
    }
    grown = realloc(alarms.by_fd, (size_t)n * sizeof *grown);
    if (grown == NULL) {
        return 0;
    }
    memset(grown + alarms.nby_fd, 0, (size_t)(n - alarms.nby_fd) * sizeof *grown);
    alarms.by_fd = grown;
    alarms.nby_fd = n;
    return 1;
}

/* Watches the sockets z's script waits on (under alarms.lock). A socket
 * another sleeper watches, or that epoll refuses, is skipped: then only
 * the sleep's time ends it (the script's sleeps are short for that).
 * Registrations are one-shot: one whose descriptor was closed and its
 * number reused (a connection closed by another request of the same VM)
 * wakes a sleeper at most once, for nothing. */
static void arm(struct mm_sleeper *z)
{
    const mm_io_t *io = &z->run.io;
    int i;

    z->armed = 0;
    for (i = 0; i < io->n; i++) {
        struct epoll_event ev;
        int fd = io->fd[i];

        if (!fd_room(fd) || alarms.by_fd[fd] != NULL) {
            continue;
        }
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLONESHOT | ((io->events[i] & MM_IO_IN) ? EPOLLIN : 0) |
                    ((io->events[i] & MM_IO_OUT) ? EPOLLOUT : 0);
        ev.data.u64 = (uint64_t)fd;
        if (epoll_ctl(alarms.epfd, EPOLL_CTL_ADD, fd, &ev) != 0 &&
            (errno != EEXIST || epoll_ctl(alarms.epfd, EPOLL_CTL_MOD, fd, &ev) != 0)) {
            continue;
        }
        alarms.by_fd[fd] = z;
        z->armed_fd[z->armed++] = fd;
    }
}

/* Stops watching z's sockets (under alarms.lock). */
static void disarm(struct mm_sleeper *z)
{
    int i;

    for (i = 0; i < z->armed; i++) {
        int fd = z->armed_fd[i];

        if (alarms.by_fd[fd] == z) {
            alarms.by_fd[fd] = NULL;
            epoll_ctl(alarms.epfd, EPOLL_CTL_DEL, fd, NULL); /* ENOENT once closed */
        }
    }
    z->armed = 0;
}

/* What z waits for has come (a socket, or mm_suspend_poke): it is due now,
 * first in the list (under alarms.lock; z is in the list). */
static void hurry(struct mm_sleeper *z)
{
    disarm(z);
    unlink_sleeper(z);
    z->by_io = 1;
    z->run.io_ready = mm_thread_now();
    z->due = apr_time_now();
    insert(z);
}

static void schedule(struct mm_sleeper *z)
{
    z->handed = 1;
    apr_thread_mutex_lock(alarms.lock);
    z->run.io_ready = 0;
    if (z->poked) {
        z->poked = 0;
        z->by_io = 1;
        z->run.io_ready = mm_thread_now();
        z->due = apr_time_now();
    }
    insert(z);
    arm(z);
    if (alarms.first == z) {
        signal_alarms();
    }
    apr_thread_mutex_unlock(alarms.lock);
}

/* Whether the thread that suspended z's request has left the MPM's code
 * for it (see the top of this file). The MPM's last two steps there are to
 * clear the connection's scoreboard handle and to mark it suspended; then
 * the thread goes back to its loop, where its slot's state changes (idle)
 * or it begins on another connection. A graceful restart or stop sets every
 * slot of the child to "graceful" from another thread: that state says
 * nothing of where the thread is, so then only the count, or a long enough
 * wait, will do. */
static int worker_left(const struct mm_sleeper *z, apr_time_t now)
{
    const volatile worker_score *ws = z->ws;
    const conn_rec *volatile c = z->run.r->connection;
    int status;

    if (ws == NULL || now - z->hooked > MM_LEFT_LIMIT) {
        return 1;
    }
    if (((volatile const conn_rec *)c)->sbh != NULL) {
        return 0;
    }
    if (apr_atomic_read32(&z->run.vm->began) != z->began) {
        return 1;
    }
    status = ws->status;
    if (status == SERVER_GRACEFUL || status == SERVER_DEAD) {
        return now - z->hooked > MM_LEFT_GRACEFUL;
    }
    return status != z->status;
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

/* Waits (without alarms.lock) until the first sleeper is due, the eventfd
 * is written or a watched socket is ready; then wakes the sleepers whose
 * sockets are ready (they go first, due now). */
static void await(void)
{
    struct epoll_event ev[64];
    apr_interval_time_t wait = -1;
    int i, n;

    if (alarms.first) {
        wait = alarms.first->due - apr_time_now();
        if (wait < 0) {
            wait = 0;
        }
    }
    apr_thread_mutex_unlock(alarms.lock);
    {
        struct timespec ts;

        ts.tv_sec = (time_t)apr_time_sec(wait);
        ts.tv_nsec = (long)apr_time_usec(wait) * 1000;
        n = epoll_pwait2(alarms.epfd, ev, 64, wait < 0 ? NULL : &ts, NULL);
        if (n < 0 && errno == ENOSYS) { /* a kernel older than 5.11: whole milliseconds */
            n = epoll_wait(alarms.epfd, ev, 64, wait < 0 ? -1 : (int)((wait + 999) / 1000));
        }
    }
    apr_thread_mutex_lock(alarms.lock);
    for (i = 0; i < n; i++) {
        struct mm_sleeper *z;
        uint64_t fd = ev[i].data.u64;

        if (fd == MM_ALARM_SIGNAL) {
            uint64_t count;

            if (read(alarms.evfd, &count, sizeof count) < 0) {
                /* nothing was there (EAGAIN): another look will do */
            }
            continue;
        }
        z = fd < (uint64_t)alarms.nby_fd ? alarms.by_fd[fd] : NULL;
        if (z) {
            hurry(z);
        }
    }
}

static void *APR_THREAD_FUNC alarm_main(apr_thread_t *thread, void *unused)
{
    apr_thread_mutex_lock(alarms.lock);
    while (!alarms.stop) {
        struct mm_sleeper *z;
        apr_time_t now;

        now = apr_time_now();
        if (alarms.first == NULL || alarms.first->due > now) {
            await();
            continue;
        }
        z = unschedule_first();
        disarm(z);
        if (z->pending) {
            if (!worker_left(z, now)) {
                z->due = now + MM_LEFT_RECHECK;
                insert(z);
                continue;
            }
            z->pending = 0;
        }
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
    signal_alarms();
    apr_thread_mutex_unlock(alarms.lock);
    apr_thread_join(&rv, alarms.thread);
    alarms.thread = NULL;
    close(alarms.epfd);
    close(alarms.evfd);
    free(alarms.by_fd);
    alarms.by_fd = NULL;
    alarms.nby_fd = 0;
    return APR_SUCCESS;
}

void mm_suspend_child_init(apr_pool_t *pchild, server_rec *s)
{
    apr_status_t rv;

    memset(&alarms, 0, sizeof alarms);
    alarms.epfd = alarms.evfd = -1;
    if (!mm_vm_async) {
        return;
    }
    rv = apr_thread_mutex_create(&alarms.lock, APR_THREAD_MUTEX_DEFAULT, pchild);
    if (rv == APR_SUCCESS) {
        alarms.epfd = epoll_create1(EPOLL_CLOEXEC);
        alarms.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (alarms.epfd >= 0 && alarms.evfd >= 0) {
            struct epoll_event ev;

            memset(&ev, 0, sizeof ev);
            ev.events = EPOLLIN;
            ev.data.u64 = MM_ALARM_SIGNAL;
            if (epoll_ctl(alarms.epfd, EPOLL_CTL_ADD, alarms.evfd, &ev) != 0) {
                rv = APR_FROM_OS_ERROR(errno);
            }
        } else {
            rv = APR_FROM_OS_ERROR(errno);
        }
    }
    if (rv == APR_SUCCESS) {
        rv = apr_thread_create(&alarms.thread, NULL, alarm_main, NULL, pchild);
    }
    if (rv != APR_SUCCESS) {
        alarms.thread = NULL;
        if (alarms.epfd >= 0) {
            close(alarms.epfd);
        }
        if (alarms.evfd >= 0) {
            close(alarms.evfd);
        }
        ap_log_error(APLOG_MARK, APLOG_ERR, rv, s,
                     MM_LOGNO(00062) "cannot start the alarm thread: Apache::Async.sleep will block");
        return;
    }
    apr_pool_cleanup_register(pchild, NULL, alarms_stop, apr_pool_cleanup_null);
}

/* A request's pool is going: a sleeper still there was never handed to
 * the alarm thread, because httpd closed the connection instead of
 * suspending it (mm_suspend refuses aborted connections, so this is not
 * expected). Its fiber stays registered in its VM: a leak, not a crash. */
static apr_status_t sleeper_gone(void *data)
{
    struct mm_sleeper *z = data;

    if (!z->handed) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, z->run.r,
                      MM_LOGNO(00064) "%s script %s: httpd closed the connection while the script slept; "
                                      "it will not wake",
                      z->run.kind->stem, z->run.script);
    }
    return APR_SUCCESS;
}

apr_status_t mm_suspend(mm_run_t *run, const mm_slot_t *slot)
{
    struct mm_sleeper *z = run->sleeper;
    conn_rec *c = run->r->connection;

    if (alarms.thread == NULL) {
        return APR_ENOTIMPL; /* the caller sleeps in place */
    }
    if (z == NULL) {
        /* First sleep of this run. httpd closes an aborted connection
         * instead of suspending it: the script sleeps in place. */
        if (c->aborted) {
            return APR_ECONNABORTED;
        }
        /* The record moves from run_one's stack to the request's pool,
         * and the fiber is kept from the GC until the script ends. */
        z = apr_pcalloc(run->r->pool, sizeof *z);
        z->run = *run;
        z->run.sleeper = z;
        z->slot = *slot;
        mrb_gc_register(run->vm->mrb, run->fiber);
        run->vm->suspended++;
        mm_ctr_add(run->vm->ctr, MM_CTR_SUSPENDED, 1);
        mm_ctr_add(run->vm->ctr, MM_CTR_SUSPENDS, 1);
        c->keepalive = AP_CONN_CLOSE;
        apr_pool_cleanup_register(run->r->pool, z, sleeper_gone, apr_pool_cleanup_null);
        apr_pool_userdata_setn(z, MM_SLEEPER_KEY, NULL, run->r->pool);
    }
    /* The connection's sleeper, handed to the alarm thread by the MPM's
     * suspend_connection hook (below) when the handler returns SUSPENDED,
     * or by wake() when the callback that resumed a script returns. */
    ap_set_module_config(c->conn_config, &mruby_module, z);
    z->due = apr_time_now() + run->sleep;
    return APR_SUCCESS;
}

void mm_suspend_poke(request_rec *r)
{
    void *p = NULL;
    struct mm_sleeper *z;

    if (alarms.thread == NULL) {
        return;
    }
    apr_pool_userdata_get(&p, MM_SLEEPER_KEY, r->pool);
    if ((z = p) == NULL) {
        return;
    }
    apr_thread_mutex_lock(alarms.lock);
    if (z->prev || z->next || alarms.first == z) {
        hurry(z);
        if (alarms.first == z) {
            signal_alarms();
        }
    } else {
        z->poked = 1; /* not handed over yet, or being woken */
    }
    apr_thread_mutex_unlock(alarms.lock);
}

/* The MPM's suspend_connection hook: the last thing the worker thread does
 * for a connection it suspends. */
static void suspend_connection(conn_rec *c, request_rec *r)
{
    struct mm_sleeper *z = ap_get_module_config(c->conn_config, &mruby_module);

    if (z) {
        ap_set_module_config(c->conn_config, &mruby_module, NULL);
        z->pending = 1;
        z->ws = c->sbh ? ap_get_scoreboard_worker(c->sbh) : NULL;
        z->status = z->ws ? z->ws->status : 0;
        z->began = apr_atomic_read32(&z->run.vm->began);
        z->hooked = apr_time_now();
        schedule(z);
    }
}

/* The calling thread begins on a connection, new or resumed: it has left
 * whatever connection it suspended before (worker_left). */
static void count_connection(void)
{
    mm_vm_t *vm;

    if (mm_vm_async && (vm = mm_vm_of_thread()) != NULL) {
        apr_atomic_inc32(&vm->began);
    }
}

static int pre_connection(conn_rec *c, void *csd)
{
    count_connection();
    return OK;
}

static void resume_connection(conn_rec *c, request_rec *r)
{
    count_connection();
}

void mm_suspend_register_hooks(apr_pool_t *p)
{
    ap_hook_suspend_connection(suspend_connection, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_resume_connection(resume_connection, NULL, NULL, APR_HOOK_MIDDLE);
    ap_hook_pre_connection(pre_connection, NULL, NULL, APR_HOOK_MIDDLE);
}

void mm_suspend_done(mm_run_t *run)
{
    if (run->sleeper) {
        mrb_gc_unregister(run->vm->mrb, run->fiber);
        run->vm->suspended--;
        mm_ctr_add(run->vm->ctr, MM_CTR_SUSPENDED, -1);
    }
}
