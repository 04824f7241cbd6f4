/* guard.h: checks in front of the methods of mruby 3.1 that scripts could
 * crash the process with (guard.c). */
#ifndef MM_GUARD_H
#define MM_GUARD_H

#include <mruby.h>

/* Installs them in a new VM, before any script runs in it. */
void mm_guard_init(mrb_state *mrb);

/* Replaces c#name, a C method, by the C method fn, which calls mruby's own
 * with mm_guard_original(original_of)(mrb, self) (its arguments are still
 * the call's): *original_of, a variable of the process for this method
 * alone, keeps it (the same in every VM). Nothing if c is NULL or has no
 * such C method. For checks and counts elsewhere in the module (vm.c
 * counts the IO objects made). */
void mm_guard_wrap(mrb_state *mrb, struct RClass *c, const char *name, mrb_func_t fn,
                   mrb_func_t *original_of);
mrb_func_t mm_guard_original(mrb_func_t *original_of);

#endif
