/* fiber.h: running a script's code directly or in its fiber (fiber.c),
 * for the harness. */
#ifndef MM_FIBER_H
#define MM_FIBER_H

#include <mruby.h>

#include "run.h"

/* Bodies for mrb_protect_error. Each notes its catch point in the run
 * first (run->escape: where a hard stop of timeout.c jumps to). */
mrb_value mm_fiber_run_direct(mrb_state *mrb, void *proc); /* the script's proc, directly */
mrb_value mm_fiber_run_in(mrb_state *mrb, void *unused);   /* the VM's run, in a new fiber */
mrb_value mm_fiber_resume(mrb_state *mrb, void *run);      /* a sleeping run's fiber, again */

/* Moves the top-level variables blocks captured off the root context's
 * first frame when a run ends; 0 when out of memory. */
int mm_fiber_close_root_frame(mrb_state *mrb);

/* A run ended: frees its fiber's context, or holds a fiber left midway. */
void mm_fiber_release(mm_run_t *run);

/* A fiber stopped midway (asleep): only the harness may resume it. */
void mm_fiber_hold(mm_run_t *run);

/* Whether the run's script is in a fiber that has not ended. */
int mm_fiber_is_sleeping(mm_run_t *run);

/* Clears the marks a fiber's switch back left on the root frame. */
void mm_fiber_clear_root_frame(mrb_state *mrb);

#endif
