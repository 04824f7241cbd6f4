/* timer.h: Apache::Timer: blocks that the child's timer thread calls, every
 * so often or once, in a VM of its own (mrubyTimers scripts set them). */
#ifndef MM_TIMER_H
#define MM_TIMER_H

#include "httpd.h"

#include <mruby.h>

#include "phase.h"
#include "vm.h"

/* The most timers a child may have at once. */
#define MM_TIMER_MAX 64

/* Runs the mrubyTimers scripts in vm (phase.c, which knows them). */
typedef void mm_timer_scripts_fn(mm_vm_t *vm, server_rec *s, apr_pool_t *p);

/* child_init, when mrubyTimers scripts exist: starts the child's timer
 * thread (once), which runs them in its VM and then the timers they set;
 * arms its stop at the child's exit. */
void mm_timer_child_init(apr_pool_t *pchild, server_rec *s, mm_timer_scripts_fn *scripts);

/* post_config, in the parent, when mrubyTimers scripts exist: makes the
 * lock file of singleton timers in DefaultRuntimeDir, owned by User. */
void mm_timer_post_config(apr_pool_t *pconf, server_rec *s);

/* Stops the timer thread, after the block it is running (if any) ends:
 * no timer runs after this returns. Does nothing when none runs. */
void mm_timer_stop(void);

/* The kind of run of timer scripts and blocks (phase.c's Timers row). */
extern const mm_phase_t *mm_timer_kind;

/* Apache::Timer.every / .after: adds a timer calling block (of the timer
 * thread's VM) after interval, again every interval when repeat. Returns
 * its id (> 0), or 0 when MM_TIMER_MAX timers exist. Timer thread only. */
mrb_int mm_timer_add(mrb_state *mrb, mrb_value block, apr_interval_time_t interval, int repeat, int singleton,
                     const char *where);
/* Apache::Timer.cancel: 1 if the timer was there. Timer thread only. */
int mm_timer_cancel(mrb_state *mrb, mrb_int id);

#endif
