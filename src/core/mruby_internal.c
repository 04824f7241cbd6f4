/* mruby_internal.c: the one file that reads and writes mruby 3.1's private
 * structures (mruby_internal.h says why each function exists). Each
 * function is a few lines over mruby's own: the reasons for doing these
 * things are with their callers, the way to do them in this mruby here. */

#include <string.h>

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/error.h>
#include <mruby/irep.h>
#include <mruby/debug.h> /* after irep.h, which it needs */
#include <mruby/proc.h>
#include <mruby/throw.h>
#include <mruby/variable.h>

#include "mruby_internal.h"

/* mruby's CINFO_RESUMED and CINFO_NONE (private to its vm.c and fiber.c):
 * a frame whose context resumed a fiber from C, and an ordinary frame. */
#define MM_CINFO_NONE    0
#define MM_CINFO_RESUMED 3

/* ------------------------------------------------------------ runs */

#ifdef MRB_USE_DEBUG_HOOK
void mm_mi_set_hook(mrb_state *mrb, mm_mi_hook_t hook)
{
    __atomic_store_n(&mrb->code_fetch_hook, hook, __ATOMIC_SEQ_CST);
}

mm_mi_hook_t mm_mi_hook(mrb_state *mrb)
{
    return __atomic_load_n(&mrb->code_fetch_hook, __ATOMIC_SEQ_CST);
}
#endif

void *mm_mi_catch_point(mrb_state *mrb)
{
    return mrb->jmp;
}

mrb_noreturn void mm_mi_throw(mrb_state *mrb, void *catch_point, mrb_value exc)
{
    mrb->exc = mrb_obj_ptr(exc);
    MRB_THROW((struct mrb_jmpbuf *)catch_point);
}

mrb_value mm_mi_take_pending(mrb_state *mrb)
{
    mrb_value exc = mrb_nil_value();

    if (mrb->exc && mrb->exc->tt != MRB_TT_BREAK) {
        exc = mrb_obj_value(mrb->exc);
    }
    mrb->exc = NULL;
    return exc;
}

int mm_mi_on_root_context(mrb_state *mrb)
{
    return mrb->c == mrb->root_c;
}

void mm_mi_back_to_root_context(mrb_state *mrb)
{
    mrb->c = mrb->root_c;
}

int mm_mi_nested_in_method(mrb_state *mrb)
{
    return mrb->c->ci != mrb->c->cibase;
}

int mm_mi_crosses_c_frame(mrb_state *mrb)
{
    const mrb_callinfo *ci;

    for (ci = mrb->c->ci; ci >= mrb->c->cibase; ci--) {
        if (ci->cci > MM_CINFO_NONE) {
            return 1;
        }
    }
    return 0;
}

int mm_mi_each_frame(mrb_state *mrb, int (*fn)(void *ud, const char *file, int line), void *ud)
{
    const mrb_callinfo *ci;

    for (ci = mrb->c->ci; ci >= mrb->c->cibase; ci--) {
        const mrb_irep *irep;
        uint32_t idx;
        const char *file;
        int found;

        if (!ci->proc || MRB_PROC_CFUNC_P(ci->proc) || !ci->pc) {
            continue;
        }
        irep = ci->proc->body.irep;
        if (!irep || ci->pc <= irep->iseq) {
            continue;
        }
        /* pc is past the instruction being run */
        idx = (uint32_t)(ci->pc - irep->iseq - 1);
        file = mrb_debug_get_filename(mrb, irep, idx);
        if (file == NULL) {
            continue;
        }
        found = fn(ud, file, mrb_debug_get_line(mrb, irep, idx));
        if (found) {
            return found;
        }
    }
    return 0;
}

const mrb_value *mm_mi_args_exactly(mrb_state *mrb, int n)
{
    const mrb_callinfo *ci = mrb->c->ci;

    /* n is 15 for arguments packed in an array, nk the keywords' count */
    return n < 15 && ci->n == n && ci->nk == 0 ? ci->stack + 1 : NULL;
}

/* ------------------------------------------------------- collector */

void mm_mi_compact_class_tables(mrb_state *mrb)
{
#ifdef MRB_HAVE_CLASS_TABLES_COMPACT
    mrb_class_tables_compact(mrb);
#else
    (void)mrb;
#endif
}

void mm_mi_share_class_tables(mrb_state *mrb, const void *(*share)(const void *slots, size_t bytes, void *ud),
                              void *ud)
{
#ifdef MRB_HAVE_CLASS_TABLES_SHARE
    mrb_class_tables_share(mrb, share, ud);
#else
    (void)mrb;
    (void)share;
    (void)ud;
#endif
}

void mm_mi_gc_settings(mrb_state *mrb, mm_mi_gc_settings_t *settings)
{
    settings->interval_ratio = mrb->gc.interval_ratio;
    settings->step_ratio = mrb->gc.step_ratio;
    settings->generational = mrb->gc.generational;
}

/* mruby's own GC.generational_mode=, which finishes what the mode needs
 * finished (a cycle, or the old objects' marks). */
static mrb_value set_generational(mrb_state *mrb, void *on)
{
    return mrb_funcall(mrb, mrb_obj_value(mrb_module_get(mrb, "GC")), "generational_mode=", 1,
                       mrb_bool_value(*(const int *)on));
}

void mm_mi_gc_reset(mrb_state *mrb, const mm_mi_gc_settings_t *settings)
{
    mrb->gc.disabled = FALSE;
    mrb->gc.out_of_memory = FALSE;
    mrb->gc.interval_ratio = settings->interval_ratio;
    mrb->gc.step_ratio = settings->step_ratio;
    if (!mrb->gc.generational != !settings->generational) {
        mrb_bool raised;

        mrb_protect_error(mrb, set_generational, (void *)&settings->generational, &raised);
        mrb->exc = NULL;
    }
}

int mm_mi_gc_minor(mrb_state *mrb, size_t *live)
{
    if (!mrb->gc.generational || mrb->gc.full || mrb->gc.state != MRB_GC_STATE_ROOT) {
        return 0;
    }
    mrb_incremental_gc(mrb); /* in that state, one whole minor collection */
    *live = mrb->gc.live;
    return 1;
}

/* ---------------------------------------- the VM's shared exceptions */

/* What a script can do to an exception object that mruby keeps in flags. */
#define MM_EXC_CHANGED (MRB_FL_OBJ_IS_FROZEN | MRB_EXC_MESG_STRING_FLAG)

int mm_mi_stack_error_changed(mrb_state *mrb, struct RClass *cls, mrb_sym sym_backtrace)
{
    struct RObject *err = mrb->stack_err;

    return (err->flags & MM_EXC_CHANGED) || err->c != cls || mrb_obj_iv_defined(mrb, err, sym_backtrace);
}

void mm_mi_stack_error_reset(mrb_state *mrb, struct RClass *cls, mrb_sym sym_backtrace, mrb_sym sym_mesg,
                             mrb_value message)
{
    struct RObject *err = mrb->stack_err;

    err->flags &= ~MM_EXC_CHANGED;
    ((struct RException *)err)->mesg = NULL;
    err->c = cls;
    mrb_field_write_barrier(mrb, (struct RBasic *)err, (struct RBasic *)cls);
    mrb_iv_remove(mrb, mrb_obj_value(err), sym_backtrace);
    mrb_obj_iv_set(mrb, err, sym_mesg, message);
}

mrb_value mm_mi_exception_message(mrb_state *mrb, mrb_value exc, mrb_sym sym_mesg)
{
    if (mrb_exc_ptr(exc)->flags & MRB_EXC_MESG_STRING_FLAG) {
        return mrb_obj_value(mrb_exc_ptr(exc)->mesg);
    }
    return mrb_obj_iv_get(mrb, mrb_obj_ptr(exc), sym_mesg);
}

void mm_mi_nomem_error_reset(mrb_state *mrb)
{
    if (mrb->nomem_err->flags & MRB_EXC_MESG_STRING_FLAG) {
        mrb->nomem_err->flags &= ~MRB_EXC_MESG_STRING_FLAG;
        ((struct RException *)mrb->nomem_err)->mesg = NULL;
    }
}

/* ------------------------------------------------------------ fibers */

static struct mrb_context *context_of(mrb_value fiber)
{
    return ((struct RFiber *)mrb_obj_ptr(fiber))->cxt;
}

void mm_mi_resume_on_root(mrb_state *mrb, mrb_value fiber)
{
    mrb->root_c->ci->cci = MM_CINFO_RESUMED;
    mrb_fiber_resume(mrb, fiber, 0, NULL);
}

void mm_mi_clear_root_frame(mrb_state *mrb)
{
    mrb_callinfo *ci = mrb->root_c->ci;

    ci->cci = MM_CINFO_NONE;
    if (mrb_vm_ci_env(ci) == NULL) {
        ci->u.target_class = mrb->object_class;
    }
}

int mm_mi_fiber_running(mrb_state *mrb, mrb_value fiber)
{
    return mrb->c->fib == (struct RFiber *)mrb_obj_ptr(fiber);
}

int mm_mi_fiber_made_for(mrb_value fiber, struct RProc *block)
{
    struct mrb_context *cxt = context_of(fiber);

    return cxt != NULL && cxt->status == MRB_FIBER_CREATED && cxt->cibase->proc == block;
}

/* The fiber has not run yet, so only its first two frames point into the
 * stack. */
static void give_room(mrb_state *mrb, struct mrb_context *cxt, size_t nregs)
{
    size_t have = (size_t)(cxt->stend - cxt->stbase), i;
    mrb_value *stack;

    if (have > nregs) {
        return;
    }
    stack = mrb_realloc(mrb, cxt->stbase, (nregs + 1) * sizeof(mrb_value));
    for (i = have; i <= nregs; i++) {
        stack[i] = mrb_nil_value();
    }
    cxt->stbase = stack;
    cxt->stend = stack + nregs + 1;
    cxt->cibase[0].stack = stack;
    cxt->cibase[1].stack = stack;
}

void mm_mi_fiber_prepare(mrb_state *mrb, mrb_value fiber, struct RProc *block)
{
    struct mrb_context *cxt = context_of(fiber);

    cxt->cibase->u.target_class = mrb->object_class;
    give_room(mrb, cxt, block->body.irep->nregs);
}

void mm_mi_fiber_room(mrb_state *mrb, mrb_value fiber)
{
    struct mrb_context *cxt;

    if (mrb_type(fiber) != MRB_TT_FIBER) {
        return;
    }
    cxt = context_of(fiber);
    if (cxt && cxt->status == MRB_FIBER_CREATED && cxt->cibase->proc &&
        !MRB_PROC_CFUNC_P(cxt->cibase->proc)) {
        give_room(mrb, cxt, cxt->cibase->proc->body.irep->nregs);
    }
}

/* The registers of a context's first frame keep the values of the code
 * that ran there (its variables and temporaries) until code runs there
 * again, and the collector marks them: whatever the last script of a VM's
 * root frame held stayed alive, and, once a collection had found it there,
 * old, left to the next major collection. Register 0 is self. */
static void clear_first_frame(struct mrb_context *c)
{
    const struct RProc *proc = c->cibase->proc;
    mrb_value *regs = c->cibase->stack;
    ptrdiff_t n, i;

    if (proc == NULL || MRB_PROC_CFUNC_P(proc) || proc->body.irep == NULL || regs == NULL) {
        return;
    }
    n = proc->body.irep->nregs;
    if (n > c->stend - regs) {
        n = c->stend - regs;
    }
    for (i = 1; i < n; i++) {
        SET_NIL_VALUE(regs[i]);
    }
}

/* mruby moves a frame's variables off the stack when it pops the frame; a
 * context's first frame is never popped. */
static int close_first_frame(mrb_state *mrb, struct mrb_context *c)
{
    struct REnv *env = mrb_vm_ci_env(c->cibase);
    mrb_int len;
    mrb_value *copy;

    if (env == NULL) {
        return 1;
    }
    if (MRB_ENV_ONSTACK_P(env)) {
        len = MRB_ENV_LEN(env);
        copy = mrb_malloc_simple(mrb, sizeof(mrb_value) * (len > 0 ? len : 1));
        if (copy == NULL) {
            return 0;
        }
        memcpy(copy, env->stack, sizeof(mrb_value) * len);
        env->stack = copy;
        MRB_ENV_CLOSE(env);
        mrb_write_barrier(mrb, (struct RBasic *)env);
    }
    c->cibase->u.target_class = mrb->object_class;
    clear_first_frame(c);
    return 1;
}

int mm_mi_close_root_frame(mrb_state *mrb)
{
    return close_first_frame(mrb, mrb->root_c);
}

void mm_mi_fiber_release(mrb_state *mrb, mrb_value fiber)
{
    struct RFiber *f = (struct RFiber *)mrb_obj_ptr(fiber);

    if (f->cxt && f->cxt->status != MRB_FIBER_TERMINATED) {
        f->cxt->status = MRB_FIBER_RESUMED;
    } else if (f->cxt && f->cxt != mrb->c && close_first_frame(mrb, f->cxt)) {
        mrb_free_context(mrb, f->cxt);
        f->cxt = NULL;
    }
}

void mm_mi_fiber_hold(mrb_value fiber)
{
    context_of(fiber)->status = MRB_FIBER_RESUMED;
}

void mm_mi_fiber_unhold(mrb_value fiber)
{
    context_of(fiber)->status = MRB_FIBER_SUSPENDED;
}

/* ------------------------------------------------- procs and bytecode */

void mm_mi_proc_make_toplevel(mrb_state *mrb, struct RProc *proc)
{
    proc->upper = NULL;
    proc->c = NULL;
    MRB_PROC_SET_TARGET_CLASS(proc, mrb->object_class);
}

const struct mrb_irep *mm_mi_proc_irep(const struct RProc *proc)
{
    return MRB_PROC_CFUNC_P(proc) ? NULL : proc->body.irep;
}

int mm_mi_proc_lacks_code(const struct RProc *proc)
{
    return !MRB_PROC_CFUNC_P(proc) && proc->body.irep == NULL;
}

int mm_mi_irep_names(const struct mrb_irep *irep, mrb_sym sym)
{
    int i;

    for (i = 0; i < irep->slen; i++) {
        if (irep->syms[i] == sym) {
            return 1;
        }
    }
    for (i = 0; i < irep->rlen; i++) {
        if (mm_mi_irep_names(irep->reps[i], sym)) {
            return 1;
        }
    }
    return 0;
}

struct RProc *mm_mi_toplevel_block(mrb_state *mrb, struct RProc *proc)
{
    struct REnv *env = (struct REnv *)mrb_obj_alloc(mrb, MRB_TT_ENV, NULL);
    struct RProc *block;

    env->stack = mrb_malloc(mrb, 2 * sizeof(mrb_value));
    env->stack[0] = mrb_top_self(mrb);
    env->stack[1] = mrb_nil_value();
    env->cxt = NULL;
    env->mid = 0;
    env->c = mrb->object_class; /* where the script's `def`s go */
    MRB_ENV_SET_LEN(env, 2);
    MRB_ENV_SET_BIDX(env, 1);
    MRB_ENV_CLOSE(env);

    block = (struct RProc *)mrb_obj_alloc(mrb, MRB_TT_PROC, mrb->proc_class);
    mrb_irep_incref(mrb, (mrb_irep *)proc->body.irep);
    block->body.irep = proc->body.irep;
    block->upper = NULL;
    block->e.env = env;
    block->flags |= MRB_PROC_ENVSET;
    mrb_field_write_barrier(mrb, (struct RBasic *)block, (struct RBasic *)env);
    return block;
}
