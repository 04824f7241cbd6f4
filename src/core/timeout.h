/* timeout.h: mrubyTimeout. A run with a timeout has a deadline; when it
 * passes, the child's watchdog thread installs mruby's instruction hook in
 * the run's VM, and the hook raises Apache::Timeout at the script's next
 * instruction. Until then no hook is installed, so a script with a timeout
 * runs at the speed of one without. */
#ifndef MM_TIMEOUT_H
#define MM_TIMEOUT_H

#include "apr_pools.h"
#include "apr_time.h"
#include "httpd.h"

#include "run.h"

/* What an outer run's timeout was, kept while a nested run has its own. */
typedef struct {
    void *hook;
    apr_time_t deadline;
    int timed_out;
} mm_timer_t;

/* Before run executes (each stretch between two sleeps): gives it its
 * deadline, if it has a timeout, saving the outer run's in saved. */
void mm_timeout_arm(mm_run_t *run, mm_timer_t *saved);

/* After it: puts back what saved holds; returns whether run's own time
 * ran out. */
int mm_timeout_disarm(mm_run_t *run, const mm_timer_t *saved);

/* For a C method that waited until the run's deadline (an Apache::HTTP
 * call its mrubyTimeout cut short): if the deadline has passed, raises
 * Apache::Timeout as the hook would have at the script's next instruction
 * (the run's time is up: a content handler answers 503); else returns. */
void mm_timeout_expired(mrb_state *mrb);

/* For a C method about to wait on the outside world: the milliseconds
 * left before the running script's mrubyTimeout deadline (at least 1), or
 * 0 when it has none. A wait clamped to it, then mm_timeout_expired. */
long mm_timeout_ms_left(mrb_state *mrb);

/* child_init: starts the watchdog thread when some section sets
 * mrubyTimeout (after mm_vm_child_init: it is stopped before the VMs are
 * closed). */
void mm_timeout_child_init(apr_pool_t *pchild, server_rec *s);

#endif
