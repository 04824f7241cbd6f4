/* suspend.h: scripts that sleep (Apache::Async.sleep) without holding a
 * worker thread, on the event MPM. */
#ifndef MM_SUSPEND_H
#define MM_SUSPEND_H

#include "run.h"

/* True when run's script may sleep by suspending the request: event MPM,
 * content handler, a main request (no subrequest, no internal redirect) on
 * an HTTP/1 connection, and not nested in another run. */
int mm_suspend_possible(const mm_run_t *run);

/* The script of run yielded its fiber to sleep run->sleep microseconds:
 * asks httpd to call back then. On success the run record now lives in the
 * request's pool (run->sleeper) and the handler returns SUSPENDED; the
 * alarm is set once the MPM has suspended the connection (or the callback
 * that woke the script has returned). */
apr_status_t mm_suspend(mm_run_t *run, const mm_slot_t *slot);

/* What the script of request r sleeps for has happened where its sleep
 * could not see it (a call of its VM's ended while another request of the
 * VM drove the calls): if it sleeps suspended, it wakes now, else its next
 * sleep ends at once. Does nothing for a request whose script never slept.
 * The caller holds r's VM, so the script cannot be running. */
void mm_suspend_poke(request_rec *r);

/* The sleeping script of run has ended: releases its fiber. */
void mm_suspend_done(mm_run_t *run);

/* Registers the suspend_connection hook that hands a first sleep to the
 * alarm thread. */
void mm_suspend_register_hooks(apr_pool_t *p);

/* child_init: starts the child's alarm thread (event MPM only). */
void mm_suspend_child_init(apr_pool_t *pchild, server_rec *s);

#endif
