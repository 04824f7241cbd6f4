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

/* One script run. Lives on the C stack of run_one (run.c); the VM points at
 * it (vm->run) for exactly the duration of the run. */
typedef struct mm_run {
    request_rec *r; /* the request; NULL in server phases */
    server_rec *s;
    mm_phase_e phase;
    const char *script;   /* its name, for logs */
    int status;           /* set by Apache.return; MM_STATUS_UNSET otherwise */
    int forced;           /* MM_STATUS_UNSET, or the result a method imposed because the
                           * response was already produced (an internal redirect, a 413
                           * sent while reading the body): it wins, and output is dropped */
    uintptr_t serial;     /* objects made during this run carry it */
    struct mm_run *outer; /* the run this one is nested in (subrequests), or NULL */
} mm_run_t;

/* Runs a phase's scripts in configuration order until one returns
 * something other than OK or DECLINED, and returns the phase's result. */
int mm_run_scripts(request_rec *r, mm_phase_e phase, const apr_array_header_t *scripts);

/* Runs the file r->filename as the content handler (mruby-script). */
int mm_run_file(request_rec *r);

/* Buffers response output of r; passes it down in 8 KB pieces. In the
 * content handler the last piece goes down with EOS, so a small response
 * gets a Content-Length. */
apr_status_t mm_run_write(request_rec *r, const char *data, apr_size_t len);

/* Discards r's buffered output; returns 1 when part of the response had
 * already gone down the filter chain (it cannot be taken back). */
int mm_run_discard_output(request_rec *r);

#endif
