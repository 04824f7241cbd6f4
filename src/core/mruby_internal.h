/* mruby_internal.h: everything mod_mruby does with mruby's private
 * structures (call frames, fiber contexts, the pending exception, the
 * collector's settings, the instruction hook, procs and their bytecode),
 * behind one small interface. Only mruby_internal.c reads or writes those
 * structures; the rest of the module uses mruby's public API and these
 * functions. Written for mruby 3.1 (configure refuses another release):
 * moving to another mruby is a port of mruby_internal.c, and of the
 * bytecode checker's opcode table (src/lib/verify.c, made from mruby's
 * ops.h). Nothing of httpd. */
#ifndef MM_MRUBY_INTERNAL_H
#define MM_MRUBY_INTERNAL_H

#include <stddef.h>

#include <mruby.h>

struct mrb_irep;

/* ------------------------------------------------------------ runs */

#ifdef MRB_USE_DEBUG_HOOK
/* The instruction hook (a libmruby built with MRB_USE_DEBUG_HOOK): read
 * and written atomically, as the timeout watchdog sets another thread's. */
typedef void (*mm_mi_hook_t)(mrb_state *, const struct mrb_irep *, const mrb_code *, mrb_value *);
void mm_mi_set_hook(mrb_state *mrb, mm_mi_hook_t hook);
mm_mi_hook_t mm_mi_hook(mrb_state *mrb);
#endif

/* The catch point mrb_protect_error set up for the running body: where a
 * hard stop jumps to. */
void *mm_mi_catch_point(mrb_state *mrb);

/* Jumps to catch_point with exc as the pending exception, unwinding
 * mruby's stack without running rescue or ensure clauses. */
mrb_noreturn void mm_mi_throw(mrb_state *mrb, void *catch_point, mrb_value exc);

/* The exception a top-level run left pending (nil when none, or when it is
 * only the marker of a top-level `return` through an ensure clause), which
 * is cleared. */
mrb_value mm_mi_take_pending(mrb_state *mrb);

/* Whether the VM runs on its root context (not in a fiber), and a way
 * back to it for a run whose fiber was abandoned midway. */
int mm_mi_on_root_context(mrb_state *mrb);
void mm_mi_back_to_root_context(mrb_state *mrb);

/* Whether the running code is nested in a method's frame (a C method
 * calling back into Ruby), not in the context's first frame. */
int mm_mi_nested_in_method(mrb_state *mrb);

/* Whether a frame of the running context was entered from C (a block
 * called by a method written in C): a fiber cannot yield across it. */
int mm_mi_crosses_c_frame(mrb_state *mrb);

/* Calls fn with the file and line of each Ruby frame of the running
 * context, innermost first, until fn returns nonzero; returns that value,
 * or 0. Frames of code without a file (mruby's own Ruby) are skipped. */
int mm_mi_each_frame(mrb_state *mrb, int (*fn)(void *ud, const char *file, int line), void *ud);

/* The arguments of the running C method when its caller passed exactly n
 * of them, by position (not spread from an array, no keywords), else NULL:
 * a method called on every request reads them so, without the format
 * parsing of mrb_get_args, which it calls for any other call (and which
 * raises as usual). */
const mrb_value *mm_mi_args_exactly(mrb_state *mrb, int n);

/* ------------------------------------------------------- collector */

/* Every class's and module's method and variable tables shrunk to what
 * they hold (patches/mruby/class-tables-compact.patch); nothing with a
 * libmruby that lacks that patch (Debian's). */
void mm_mi_compact_class_tables(mrb_state *mrb);
/* Shares the VM's method tables that hold the same bytes in every VM with
 * the other VMs of the process: share(slots, bytes, ud) returns the
 * process's copy of those bytes, or NULL to keep the VM's own. Once per VM,
 * after mm_mi_compact_class_tables. Nothing with a libmruby without the
 * patch. */
void mm_mi_share_class_tables(mrb_state *mrb, const void *(*share)(const void *slots, size_t bytes, void *ud),
                              void *ud);

/* The settings a script may change: GC.interval_ratio=, GC.step_ratio=,
 * GC.generational_mode=. */
typedef struct mm_mi_gc_settings {
    int interval_ratio;
    int step_ratio;
    int generational;
} mm_mi_gc_settings_t;

/* The collector's settings, to keep the VM's own. */
void mm_mi_gc_settings(mrb_state *mrb, mm_mi_gc_settings_t *settings);

/* The collector enabled again, with these settings, and its out-of-memory
 * mark cleared. Outside a run only: a change of mode may finish a cycle of
 * the collector. */
void mm_mi_gc_reset(mrb_state *mrb, const mm_mi_gc_settings_t *settings);

/* A minor collection, if the collector is in the generational mode and
 * between collections: returns 1 and the objects then live in *live;
 * else does nothing and returns 0. */
int mm_mi_gc_minor(mrb_state *mrb, size_t *live);

/* ---------------------------------------- the VM's shared exceptions */

/* Whether mruby's SystemStackError object was changed by a script (frozen,
 * its message replaced, its class, a backtrace), as the test for
 * mm_mi_stack_error_reset; sym_backtrace is the ivar of a backtrace. */
int mm_mi_stack_error_changed(mrb_state *mrb, struct RClass *cls, mrb_sym sym_backtrace);

/* mruby's SystemStackError object put back as mruby made it: of class cls,
 * unfrozen, with no backtrace and message as its message. */
void mm_mi_stack_error_reset(mrb_state *mrb, struct RClass *cls, mrb_sym sym_backtrace, mrb_sym sym_mesg,
                             mrb_value message);

/* What an exception object holds as its message (a String, or what
 * Exception.new was given, under the ivar sym_mesg), read from the object
 * itself, never through a method a script could have redefined. */
mrb_value mm_mi_exception_message(mrb_state *mrb, mrb_value exc, mrb_sym sym_mesg);

/* mruby's NoMemoryError object given its own message back. */
void mm_mi_nomem_error_reset(mrb_state *mrb);

/* ------------------------------------------------------------ fibers */

/* Resumes fiber from C on the root context's first frame, marked as a
 * frame that resumed a fiber from C: mruby gives control back to the
 * caller whenever the fiber yields, transfers or ends. */
void mm_mi_resume_on_root(mrb_state *mrb, mrb_value fiber);

/* Clears the marks a fiber's switch back left on the root context's first
 * frame (no target class; resumed from C). */
void mm_mi_clear_root_frame(mrb_state *mrb);

/* Whether fiber is the fiber running now. */
int mm_mi_fiber_running(mrb_state *mrb, mrb_value fiber);

/* Whether fiber was just made, for block, and has not run (a redefined
 * Fiber#initialize may leave it without a context, or with another). */
int mm_mi_fiber_made_for(mrb_value fiber, struct RProc *block);

/* A fiber just made for block, before it first runs: its first frame
 * defines into Object, and its stack has room for the block's registers
 * (mm_mi_fiber_room). */
void mm_mi_fiber_prepare(mrb_state *mrb, mrb_value fiber, struct RProc *block);

/* Every frame's stack has room for one register after its last, which
 * mrbc's code uses (verify.c); mruby makes a new fiber's stack 64
 * registers long, or 64 more than the block's frame when that is longer:
 * a block of exactly 64 would write past it. Gives a fiber just made for
 * a Ruby block (not a C function) that room; nothing for other fibers. */
void mm_mi_fiber_room(mrb_state *mrb, mrb_value fiber);

/* Moves the variables blocks captured off the first frame of the root
 * context, and gives it Object as the class `def` defines into; 0 when out
 * of memory. */
int mm_mi_close_root_frame(mrb_state *mrb);

/* A run's fiber when the run ends: one that has ended gives back its
 * context (stack and frames) at once, its first frame closed first; one
 * left midway is held. */
void mm_mi_fiber_release(mrb_state *mrb, mrb_value fiber);

/* Marks fiber (stopped midway) as resumed, so that Fiber#resume and
 * #transfer refuse it ("double resume"); mm_mi_fiber_unhold makes it
 * resumable again, before the harness resumes it. */
void mm_mi_fiber_hold(mrb_value fiber);
void mm_mi_fiber_unhold(mrb_value fiber);

/* ------------------------------------------------- procs and bytecode */

/* A proc made from bytecode made a top-level script: no enclosing proc,
 * methods it defines go to Object. */
void mm_mi_proc_make_toplevel(mrb_state *mrb, struct RProc *proc);

/* The bytecode of a Ruby proc (NULL for a C function's or an empty one). */
const struct mrb_irep *mm_mi_proc_irep(const struct RProc *proc);

/* Whether a proc made by Kernel#dup or #clone was left without code (a
 * redefined #initialize_copy did not copy it). */
int mm_mi_proc_lacks_code(const struct RProc *proc);

/* True when the bytecode (or a block or method in it) names the symbol. */
int mm_mi_irep_names(const struct mrb_irep *irep, mrb_sym sym);

/* A block of top-level proc's code, whose closed environment holds the
 * top-level self (and an empty block slot) and defines into Object:
 * something a fiber can be made from. mruby has no API that makes a block
 * without a Ruby frame to close over. */
struct RProc *mm_mi_toplevel_block(mrb_state *mrb, struct RProc *proc);

#endif
