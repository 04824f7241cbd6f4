/* fiber.c: the ways into a script for the harness (run.c): run directly,
 * in a fiber of its own (a script that may sleep), or resumed after a
 * sleep; and what keeps the VM sound when a fiber stops or ends. What it
 * does to mruby's fibers and frames, mruby_internal.c does; nothing of
 * httpd. */

#include "httpd.h"

#include <mruby.h>

#include "fiber.h"
#include "mruby_internal.h"
#include "vm.h"

/* The three ways into a script, each a body for mrb_protect_error. */

/* The harness resumes a script's fiber from C, on the root context's first
 * frame. A fiber that goes back to a context not resumed from C expects to
 * find it in a Ruby call of Fiber#resume or #transfer, and goes on with the
 * caller's frame, the one below: the root context's first frame has none,
 * and the child crashed when a fiber the script had started with #transfer
 * yielded, or when the script transferred to the root fiber (kept with
 * Fiber.current by a script run directly). Marked as resumed from C, the
 * frame makes mruby give control back to the harness, as a sleep does; the
 * script left its fiber otherwise than by sleeping: a 500 (execute). */
static void resume_from_root(mrb_state *mrb, mrb_value fiber)
{
    mm_mi_resume_on_root(mrb, fiber);
}

/* Each body first notes its catch point, the one mrb_protect_error set up:
 * where a hard stop (timeout.c) jumps to. */
mrb_value mm_fiber_run_direct(mrb_state *mrb, void *proc)
{
    mm_vm_of(mrb)->run->escape = mm_mi_catch_point(mrb);
    /* Nested in a C method (a filter under Apache.rputs, whose output goes
     * down the chain): mrb_top_run would start the script's registers on
     * the method's own and clear them, its arguments with them (the String
     * being written, which the GC then frees). Yielding puts the script's
     * frame above the method's. */
    if (mm_mi_nested_in_method(mrb)) {
        return mrb_yield_with_class(mrb, mrb_obj_value((struct RProc *)proc), 0, NULL, mrb_top_self(mrb),
                                    mrb->object_class);
    }
    return mrb_top_run(mrb, proc, mrb_top_self(mrb), 0);
}

/* A script that may sleep runs in a fiber, made from the script's block
 * (mm_code_fiber_block): Fiber.new's work without the method call, which
 * costs as much as the fiber. The fiber is what the body returns, so
 * mrb_protect_error keeps it in the GC arena. */
mrb_value mm_fiber_run_in(mrb_state *mrb, void *unused)
{
    mm_run_t *run = mm_vm_of(mrb)->run;
    struct RProc *block = mm_code_fiber_block(run->vm, run->loaded);
    struct RBasic *fiber = mrb_obj_alloc(mrb, MRB_TT_FIBER, run->vm->fiber_class);

    run->escape = mm_mi_catch_point(mrb);
    run->fiber = mrb_obj_value(fiber);
    mrb_funcall_with_block(mrb, run->fiber, run->vm->sym_initialize, 0, NULL, mrb_obj_value(block));
    /* initialize is looked up like any method: a script may have redefined
     * it (in any phase; it lasts as long as the VM), and one that does not
     * give the block to mruby's own leaves the fiber without a context, or
     * running something else. Nothing can be run in such a fiber, nor in
     * the fibers of the VM's later runs: it is replaced. */
    if (!mm_mi_fiber_made_for(run->fiber, block)) {
        run->vm->retire = MM_RETIRE_FIBER;
        mrb_raise(mrb, E_RUNTIME_ERROR,
                  "Fiber#initialize was redefined: a script that may sleep cannot run in a fiber of this VM, "
                  "which is replaced");
    }
    /* Fiber#initialize leaves the fiber's first frame without a target
     * class (it sets one only over an existing value): `def` would fail,
     * and the VM takes a frame without one for a frame whose fiber was
     * switched, so a C method's return would look like a yield. The
     * script's top level defines into Object. Its stack gets the room
     * every fiber gets (mm_mi_fiber_room). */
    mm_mi_fiber_prepare(mrb, run->fiber, block);
    resume_from_root(mrb, run->fiber);

    return run->fiber;
}

/* The variables of a script's top level that blocks captured stay on the
 * stack of the frame it ran in: mruby moves a frame's variables off the
 * stack when it pops the frame, but a script runs in a first frame, which
 * is never popped (the VM's root frame, or an ended fiber's). Left there,
 * a block a script kept (in a global, a constant, a method it defined)
 * would see the variables of whatever script next runs in that frame, and
 * an ended fiber would stay alive for them. So when a run ends, they are
 * moved into the block's own memory, and the frame forgets them; 0 when
 * out of memory. */
int mm_fiber_close_root_frame(mrb_state *mrb)
{
    return mm_mi_close_root_frame(mrb);
}

/* A fiber that has ended gives back its context (stack and call frames)
 * at once. That memory is malloc'd, which the GC does not count: left to
 * the GC, the contexts of finished runs pile up between collections,
 * hundreds of KB per VM under load. A run can also end with its fiber
 * left in the middle: an exception out of a fiber the script had started
 * with #transfer ends the run, not the script's fiber. That one is held
 * (hold_fiber, below) for good: a script of a later request that kept it
 * would run the rest of the old script in its own request with #transfer,
 * and its own script would end there. */
void mm_fiber_release(mm_run_t *run)
{
    if (!mrb_nil_p(run->fiber)) {
        mm_mi_fiber_release(run->vm->mrb, run->fiber);
    }
}

/* A script's fiber that stopped in the middle (asleep, or it yielded it
 * itself) is the harness's to resume, nobody else's: a script of another
 * request that kept it (Fiber.current in a global) and resumed it would
 * run the rest of the sleeper in its own run, and the child crashed when
 * the sleeper woke. Marked as resumed (as it is, by the harness), it is
 * refused by Fiber#resume and #transfer ("double resume"). */
void mm_fiber_hold(mm_run_t *run)
{
    mm_mi_fiber_hold(run->fiber);
}

mrb_value mm_fiber_resume(mrb_state *mrb, void *ud)

{
    mm_run_t *run = ud;

    run->escape = mm_mi_catch_point(mrb);
    mm_mi_fiber_unhold(run->fiber);
    resume_from_root(mrb, run->fiber);
    return run->fiber;
}

int mm_fiber_is_sleeping(mm_run_t *run)
{
    return !mrb_nil_p(run->fiber) && mrb_test(mrb_fiber_alive_p(run->vm->mrb, run->fiber));
}

/* A fiber that switches back to the context it came from leaves marks on
 * that context's frame: no target class (how mruby's VM tells a return from
 * a method that switched contexts), and, for a fiber resumed from C, a
 * frame resumed from C (resume_from_root sets that one too). The harness
 * resumes a script's fiber on the root context's first frame, where later
 * scripts run directly: the marks a sleep left there made their top-level
 * `def` and `class` raise ("no target class or module") and their
 * Fiber#transfer too ("can't cross C function boundary"), for the rest of
 * the VM's life. They are cleared whenever the fiber gives control back. */
void mm_fiber_clear_root_frame(mrb_state *mrb)
{
    mm_mi_clear_root_frame(mrb);
}
