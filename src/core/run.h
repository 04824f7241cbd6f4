/* run.h: the harness that runs one script for one phase. Every phase goes
 * through run_one (run.c): acquire the thread's VM, save the GC arena, run,
 * map the result, report an exception, restore the arena. */
#ifndef MM_RUN_H
#define MM_RUN_H

#include <limits.h>

#include "apr_buckets.h"
#include "code.h"
#include "phase.h"

#define MM_STATUS_UNSET INT_MIN

/* Sockets whose readiness ends the script's next sleep early, as well as
 * its time (suspend.c): Apache::HTTP and Apache::Socket set them just
 * before they sleep, waiting for a backend; the sleep consumes them. */
#define MM_IO_MAX 8
#define MM_IO_IN  1
#define MM_IO_OUT 2
typedef struct {
    int n;
    int fd[MM_IO_MAX];
    unsigned char events[MM_IO_MAX]; /* MM_IO_IN, MM_IO_OUT */
} mm_io_t;

/* One script run. Lives on the C stack of run_one (run.c), or, once the
 * script sleeps in its fiber, in the request's pool (suspend.c); the VM
 * points at it (vm->run) exactly while the script executes. */
typedef struct mm_run {
    request_rec *r; /* the request; NULL in server phases */
    server_rec *s;
    const mm_phase_t *kind;      /* the phase, or another kind of run */
    void *data;                  /* what the kind's own API needs (a filter's context,
                                    a provider's arguments), or NULL */
    const char *script;          /* its name, for logs */
    int status;                  /* set by Apache.return; MM_STATUS_UNSET otherwise */
    int forced;                  /* MM_STATUS_UNSET, or the result a method imposed because
                                    the response was already produced (an internal redirect,
                                    a 413 sent while reading the body): it wins, and the
                                    output is dropped */
    uintptr_t serial;            /* objects made during this run carry it */
    struct mm_run *outer;        /* the run this one is nested in (subrequests), or NULL */
    mm_vm_t *vm;                 /* the VM the script runs in */
    mm_loaded_t *loaded;         /* the script, as loaded in vm */
    mrb_value fiber;             /* the fiber the script runs in, or nil (run directly) */
    apr_interval_time_t sleep;   /* set by Apache::Async.sleep before it yields; else -1 */
    mm_io_t io;                  /* what else ends that sleep (mm_run_wait_io) */
    apr_time_t io_ready;         /* when one of those sockets was seen ready (or the request
                                    poked: mm_suspend_poke) and so ended the sleep that
                                    suspended the request, by mm_thread_now's clock; 0 when
                                    its time ended it, or it did not suspend */
    apr_interval_time_t timeout; /* mrubyTimeout for each stretch it runs; 0: none */
    void *escape;                /* the catch point (struct mrb_jmpbuf) of the
                                    stretch running now, for a hard stop */
    struct mm_sleeper *sleeper;  /* where the record lives while the script sleeps */
    apr_off_t input_pos;         /* Apache::Input's position in the body (rb_input.c): each
                                    run reads the body from its start, whatever the runs
                                    before it (an earlier phase, the request before an
                                    internal redirect) read */
    struct mm_cache_held *held;  /* the cache locks its synchronize blocks hold now
                                    (rb_cache.c); empty whenever it sleeps */
} mm_run_t;

/* The rest of a phase, for a script that sleeps in the middle of it: the
 * scripts after it and the result so far. */
typedef struct {
    const apr_array_header_t *scripts; /* NULL for a .mrb file */
    int next;
    int result;
} mm_slot_t;

/* The script's next sleep also ends once fd is ready for events (MM_IO_IN,
 * MM_IO_OUT), if the sleep suspends the request; at most MM_IO_MAX sockets
 * (0 when there is no room: then only the sleep's time ends it). */
int mm_run_wait_io(mm_run_t *run, int fd, int events);

/* Runs a request phase's scripts in configuration order until one returns
 * something other than OK or DECLINED, and returns the phase's result
 * (SUSPENDED when a content handler script sleeps: see suspend.c). */
int mm_run_scripts(request_rec *r, const mm_phase_t *kind, const apr_array_header_t *scripts);

/* The same for a server phase (no request): in vm, allocating from p. */
int mm_run_server_scripts(mm_vm_t *vm, server_rec *s, apr_pool_t *p, const mm_phase_t *kind,
                          const apr_array_header_t *scripts);

/* Calls block, a Proc of vm kept by a script (a timer's), as a run of
 * kind named name for server s, with mrubyTimeout timeout (0: none). */
int mm_run_block(mm_vm_t *vm, server_rec *s, const mm_phase_t *kind, const char *name, mrb_value block,
                 apr_interval_time_t timeout);

/* Runs one script of another kind than a phase (filters, providers) for r,
 * in the thread's VM; data is reachable as mm_vm_of(mrb)->run->data. */
int mm_run_script(request_rec *r, const mm_phase_t *kind, const mm_script_t *script, void *data);

/* Runs the file r->filename as the content handler (mruby-script). */
int mm_run_file(request_rec *r);

/* For suspend.c, on the thread that resumes a sleeping script (its VM
 * entered): resumes the run; when it ends, runs the rest of its phase and
 * ends the response. Returns the phase's result, or SUSPENDED if a script
 * sleeps again. */
int mm_run_wake(mm_run_t *run, mm_slot_t *slot);

/* Buffers response output of r; passes it down in 8 KB pieces. In the
 * content handler the last piece goes down with EOS, so a small response
 * gets a Content-Length. APR_EOF once the response is complete. */
apr_status_t mm_run_write(request_rec *r, const char *data, apr_size_t len);

/* Discards r's buffered output; returns 1 when part of the response had
 * already been sent, headers first (it cannot be taken back); output a
 * filter still holds has not. */
int mm_run_discard_output(request_rec *r);

#endif
