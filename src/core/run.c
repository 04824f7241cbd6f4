/* run.c: the one harness every phase runs through (output.c buffers what
 * scripts write, fiber.c runs their code directly or in a fiber).
 *
 * run_one takes the thread's VM, installs a run record (how the
 * C methods reach the request: mrb->ud -> vm -> run), loads the script,
 * runs it under mrb_protect_error, maps Apache.return (or an exception) to
 * the phase's result, restores the GC arena and clears the exception, so the
 * VM is clean for the next request whatever the script did. */

#include <string.h>

#include "apr_strings.h"
#include "httpd.h"
#include "http_protocol.h"
#include "http_request.h"
#include "util_filter.h"

#include <mruby.h>
#include <mruby/error.h>

#include "binding.h"
#include "config.h"
#include "error.h"
#include "fiber.h"
#include "mod_mruby.h"
#include "mruby_internal.h"
#include "output.h"
#include "run.h"
#include "suspend.h"
#include "timeout.h"

APLOG_USE_MODULE(mruby);

/* The script raised. Nothing has been sent yet: the phase's error result
 * (httpd then sends its error page, so ErrorDocument applies). Part of the
 * response already went out: the status line cannot change any more, so
 * the connection is cut, and the client sees a truncated response. */
static int result_of_exception(mm_run_t *run, mrb_value exc)
{
    int status;

    if (run->r == NULL || (run->kind->flags & MM_KIND_OWN_RESULT)) {
        return run->kind->error_result;
    }
    mm_output_drop(run->r);
    if (mm_output_began(run->r) && !run->r->eos_sent) {
        run->r->connection->keepalive = AP_CONN_CLOSE;
        run->r->connection->aborted = 1;
        return DONE;
    }
    /* Apache::HTTPError (e.g. a body over the limit: 413) names its status. */
    status = mrb_nil_p(exc) ? 0 : mm_binding_exception_status(run->vm->mrb, exc);
    return status ? status : run->kind->error_result;
}

/* A method imposed the result (the response was produced otherwise: an
 * internal redirect, httpd's own 413): it wins over what the script
 * returned or raised, and the script's output is dropped, never sent. */
static int forced_result(mm_run_t *run)
{
    if (run->r) {
        mm_output_drop(run->r);
    }
    return run->forced;
}

static void log_bad_return(mm_run_t *run)
{
    const char *fmt = MM_LOGNO(00021) "%s script %s: Apache.return(%d) is not a status or hook result";
    const char *stem = run->kind->stem;

    if (run->r) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, run->r, fmt, stem, run->script, run->status);
    } else {
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, run->s, fmt, stem, run->script, run->status);
    }
}

/* The result of a script that ended without Apache.return: its phase's,
 * or where that is DECLINED (the request phases but the content handler),
 * mrubyDefaultReturn's. */
static int result_without_return(const mm_run_t *run)
{
    const mm_phase_t *ph = run->kind;

    if (run->r == NULL || ph->default_result != DECLINED) {
        return ph->default_result;
    }
    return mm_config_default_return(ap_get_module_config(run->r->per_dir_config, &mruby_module));
}

/* Maps what the script asked for with Apache.return to the phase result. */
static int result_of_return(mm_run_t *run)
{
    const mm_phase_t *ph = run->kind;
    request_rec *r = run->r;
    int st = run->status;
    int result;

    if (ph->flags & MM_KIND_OWN_RESULT) {
        return st == MM_STATUS_UNSET ? ph->default_result : st;
    }
    if (st == MM_STATUS_UNSET) {
        result = result_without_return(run);
    } else if (st == HTTP_OK || st == OK) {
        result = OK;
    } else if (st == DECLINED || st == DONE) {
        result = st;
    } else if (st >= 100 && st <= 599) {
        if (r && (run->kind->flags & MM_KIND_CONTENT) && mm_output_pending(r)) {
            /* The script wrote a body and then named the status: it is the
             * response's status, the body its content. */
            r->status = st;
            result = OK;
        } else {
            result = st;
        }
    } else {
        log_bad_return(run);
        if (r) {
            mm_output_drop(r);
        }
        return ph->error_result;
    }
    if (r == NULL) {
        return result;
    }
    if ((run->kind->flags & MM_KIND_CONTENT)) {
        /* The response's output waits for the end of the phase
         * (end_response), to go down with EOS. */
        if (result != OK && result != DONE) {
            mm_output_drop(r); /* an error page or another handler answers */
        }
    } else if (result == OK || result == DONE || result == DECLINED) {
        mm_output_pass(r, 0);
    } else {
        mm_output_drop(r);
    }
    return result;
}

static void log_load_error(mm_run_t *run, apr_pool_t *p, const char *err)
{
    const char *fmt = MM_LOGNO(00020) "%s script %s";
    const char *msg = ap_escape_logitem(p, err);

    if (run->r) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, run->r, fmt, run->kind->stem, msg);
    } else {
        ap_log_error(APLOG_MARK, APLOG_ERR, 0, run->s, fmt, run->kind->stem, msg);
    }
}

/* An Apache::HTTPError out of a script whose request body httpd refused
 * (an input filter's refusal, a chunked body over LimitRequestBody) tells
 * of what was logged where it happened, and answered already: no fault of
 * the script, so not an error entry. Any other exception is. */
static int exception_level(mm_run_t *run, mrb_value exc)
{
    if (run->forced == AP_FILTER_ERROR && mm_binding_exception_status(run->vm->mrb, exc)) {
        return APLOG_INFO;
    }
    return APLOG_ERR;
}

/* Executes (or resumes) the script until it ends or sleeps, and returns the
 * phase result; SUSPENDED when it sleeps and httpd will call us back. */
static int execute(mm_run_t *run, mrb_protect_error_func *body, void *arg, mm_slot_t *slot)
{
    mrb_state *mrb = run->vm->mrb;

    for (;;) {
        mrb_bool raised = FALSE;
        mm_timer_t outer_timer;
        mrb_value exc, pending;
        int timed_out;

        run->sleep = -1;
        run->io.n = 0;
        mm_timeout_arm(run, &outer_timer);
        exc = mrb_protect_error(mrb, body, arg, &raised);
        timed_out = mm_timeout_disarm(run, &outer_timer);
        if (!mrb_nil_p(run->fiber)) {
            mm_fiber_clear_root_frame(mrb);
        }
        /* At top level an uncaught exception comes back in mrb->exc; in a
         * nested run (a subrequest made by a script) it is thrown to us.
         * A top-level `return` that went through an ensure clause leaves
         * mruby's marker of it there, a break object: no exception, the
         * script ended as it asked (it was logged as "raised (null)": 500). */
        pending = mm_mi_take_pending(mrb);
        if (!raised && !mrb_nil_p(pending)) {
            exc = pending;
            raised = TRUE;
        }
        if (raised) {
            int result;

            mm_ctr_add(run->vm->ctr, MM_CTR_EXCEPTIONS, 1);
            mm_ctr_add(run->vm->ctr, MM_CTR_TIMEOUTS, timed_out != 0);
            mm_error_log_exception(run->vm, exc, run->r, run->s, exception_level(run, exc), run->kind->stem,
                                   run->script);
            if (run->vm->stopped) {
                /* Its fiber, if any, is abandoned mid-run: back to the root
                 * context; the VM is replaced before its next request. */
                run->vm->stopped = 0;
                mm_mi_back_to_root_context(mrb);
                run->fiber = mrb_nil_value();
                mm_binding_stopped(run);
                ap_log_error(APLOG_MARK, APLOG_WARNING, 0, run->s,
                             MM_LOGNO(00063) "%s script %s rescued Apache::Timeout and went on: stopped, "
                                             "and its VM replaced",
                             run->kind->stem, run->script);
            }
            if (run->forced != MM_STATUS_UNSET) {
                return forced_result(run);
            }
            result = result_of_exception(run, exc);
            /* A content handler out of time: the server is too busy. */
            return (timed_out && result != DONE && (run->kind->flags & MM_KIND_CONTENT))
                       ? HTTP_SERVICE_UNAVAILABLE
                       : result;
        }
        if (!mm_fiber_is_sleeping(run)) {
            return run->forced != MM_STATUS_UNSET ? forced_result(run) : result_of_return(run);
        }
        mm_fiber_hold(run);
        if (run->sleep < 0) {
            ap_log_rerror(APLOG_MARK, APLOG_ERR, 0, run->r,
                          MM_LOGNO(00060) "%s script %s left its fiber (Fiber.yield, Fiber#transfer): "
                                          "only Apache::Async.sleep may suspend it",
                          run->kind->stem, run->script);
            return result_of_exception(run, mrb_nil_value());
        }
        if (mm_suspend(run, slot) == APR_SUCCESS) {
            return SUSPENDED;
        }
        apr_sleep(run->sleep); /* httpd would not call us back: sleep here */
        body = mm_fiber_resume;
        arg = run;
    }
}

int mm_run_wait_io(mm_run_t *run, int fd, int events)
{
    mm_io_t *io = &run->io;

    if (io->n == MM_IO_MAX || fd < 0) {
        return 0;
    }
    io->fd[io->n] = fd;
    io->events[io->n++] = (unsigned char)events;
    return 1;
}

/* mruby raises the same SystemStackError object every time, and gives an
 * exception a backtrace only if it has none: the first overflow in a VM
 * would be logged as where all later ones happened. And a script that
 * rescued it has mruby's object: what it did to it (its message replaced
 * with #initialize, methods of its own, frozen, a backtrace set) would be
 * in the log entry of every later overflow in the VM; frozen, it refused
 * the removal of its backtrace, raising where nothing catches, which
 * aborted the child. So when an outermost run ends it is put back as mruby
 * made it, its message kept frozen (vm.c); what tells whether it needs it
 * costs one lookup. The NoMemoryError mruby raises is frozen, and never
 * gets a backtrace (it is raised with the collector's out-of-memory mark
 * set): only its message can be replaced. */
static void restore_shared_errors(mm_vm_t *vm)
{
    mrb_state *mrb = vm->mrb;

    if (mm_mi_stack_error_changed(mrb, vm->stack_error_class, vm->sym_backtrace)) {
        /* the message's entry exists: setting it allocates nothing */
        mm_mi_stack_error_reset(mrb, vm->stack_error_class, vm->sym_backtrace, vm->sym_mesg,
                                vm->stack_error_message);
    }
    mm_mi_nomem_error_reset(mrb);
}

/* The collector's settings are the VM's: a script that turned it off
 * (GC.disable) or all but off (a huge GC.interval_ratio) left it so for
 * every later request of its thread, whose garbage then piled up for good;
 * one that left the generational mode off (GC.generational_mode = false)
 * left the VM's memory growing past 1 MB, from about 540 KB (the realistic
 * handler of the bench, worker MPM, 36,000 requests; benchmarks.md). They
 * are put back when an outermost run ends. So is its out-of-memory
 * mark, which a refused allocation sets (a script's 'x' * 2**47, in a VM
 * without mrubyMemoryLimit, which is not replaced) and only the next
 * allocation mruby makes with malloc clears: meanwhile mruby gives no
 * exception a backtrace, and the next stack overflow of the VM, another
 * request's, was logged without its place and backtrace. */
static void restore_gc(mm_vm_t *vm)
{
    mm_mi_gc_reset(vm->mrb, &vm->gc);
}

/* An outermost run ended or sleeps: what it left in the VM that the next
 * run, another client's, must not find. */
static void leave_vm(mm_vm_t *vm, server_rec *s)
{
    mm_binding_leave(vm);
    restore_shared_errors(vm);
    restore_gc(vm);
    mm_vm_collect_big_garbage(vm);
    mm_vm_collect_young_garbage(vm, s);
}

/* Takes vm and installs run in it, a run of kind ph for r (or, NULL, for
 * server s) named name, with the kind's data and mrubyTimeout timeout (0:
 * none); returns the GC arena's index to give leave_run. */
static int enter_run(mm_vm_t *vm, mm_run_t *run, request_rec *r, server_rec *s, const mm_phase_t *ph,
                     const char *name, void *data, apr_interval_time_t timeout)
{
    mm_vm_lock(vm);
    memset(run, 0, sizeof *run);
    run->r = r;
    run->s = s;
    run->kind = ph;
    run->data = data;
    run->script = name;
    run->status = MM_STATUS_UNSET;
    run->forced = MM_STATUS_UNSET;
    run->serial = ++vm->serial;
    run->outer = vm->run;
    run->vm = vm;
    run->fiber = mrb_nil_value();
    run->timeout = timeout;
    vm->run = run;
    return mrb_gc_arena_save(vm->mrb);
}

/* The run ends (or sleeps, kept elsewhere): the arena as it was, the outer
 * run back, the VM cleaned if this was the outermost, and let go. */
static int leave_run(mm_vm_t *vm, mm_run_t *run, int ai, int result)
{
    mrb_gc_arena_restore(vm->mrb, ai);
    vm->run = run->outer;
    if (run->outer == NULL) {
        leave_vm(vm, run->s);
        mm_vm_ran(vm, run->s);
    }
    mm_vm_unlock(vm);
    return result;
}

/* Runs one script (or, with script NULL, the file r->filename) in vm, for
 * request r or, when r is NULL, for server s. p holds what the run
 * allocates. slot, if not NULL, is the rest of the phase, kept should the
 * script sleep. */
static int run_one(mm_vm_t *vm, request_rec *r, server_rec *s, apr_pool_t *p, const mm_phase_t *ph,
                   const mm_script_t *script, void *data, const mm_slot_t *slot)
{
    mm_run_t run;
    mrb_state *mrb;
    const char *err = NULL;
    int ai, result;

    if (vm == NULL) {
        return ph->error_result; /* logged where it failed */
    }
    mrb = vm->mrb;
    ai =
        enter_run(vm, &run, r, s, ph, script ? script->name : r->filename, data,
                  r ? ((mm_dir_conf_t *)ap_get_module_config(r->per_dir_config, &mruby_module))->timeout : 0);

    run.loaded = script ? mm_code_script_proc(vm, s, script, p, &err)
                        : mm_code_file_proc(vm, s, r->filename, &r->finfo, p, &err);
    if (run.loaded == NULL) {
        log_load_error(&run, p, err);
        result = ph->error_result;
    } else if (run.loaded->may_suspend && mm_suspend_possible(&run)) {
        mm_slot_t rest = slot ? *slot : (mm_slot_t){NULL, 0, DECLINED};

        result = execute(&run, mm_fiber_run_in, NULL, &rest);
        if (result != SUSPENDED) {
            mm_fiber_release(&run);
        }

    } else {
        result = execute(&run, mm_fiber_run_direct, run.loaded->proc, NULL);
        if (run.outer == NULL && mm_mi_on_root_context(mrb)) {
            mm_fiber_close_root_frame(mrb);
        }
    }
    return leave_run(vm, &run, ai, result);
}

/* A content phase is done: its output goes down with EOS. */
static int end_response(request_rec *r, int result)
{
    if ((result == OK || result == DONE) && mm_output_pending(r)) {
        mm_output_pass(r, 1);
    }
    return result;
}

/* Runs scripts from index `from` in order until one returns something
 * other than OK or DECLINED: that is the result; else OK if one said OK (or
 * result already was), else DECLINED. */
static int run_list(mm_vm_t *vm, request_rec *r, server_rec *s, apr_pool_t *p, const mm_phase_t *kind,
                    const apr_array_header_t *scripts, int from, int result)
{
    int i;

    for (i = from; i < scripts->nelts; i++) {
        mm_slot_t rest = {scripts, i + 1, result};
        int rv = run_one(vm, r, s, p, kind, APR_ARRAY_IDX(scripts, i, const mm_script_t *), NULL, &rest);

        if (rv == OK) {
            result = OK;
        } else if (rv != DECLINED) {
            return rv;
        }
    }
    return result;
}

int mm_run_scripts(request_rec *r, const mm_phase_t *kind, const apr_array_header_t *scripts)
{
    int result = run_list(mm_vm_for_thread(r->server), r, r->server, r->pool, kind, scripts, 0, DECLINED);

    return (kind->flags & MM_KIND_CONTENT) ? end_response(r, result) : result;
}

/* Calls the block a script gave (a timer's) with no argument. */
static mrb_value run_block_body(mrb_state *mrb, void *block)
{
    mm_vm_of(mrb)->run->escape = mm_mi_catch_point(mrb);
    return mrb_yield_argv(mrb, *(mrb_value *)block, 0, NULL);
}

int mm_run_block(mm_vm_t *vm, server_rec *s, const mm_phase_t *kind, const char *name, mrb_value block,
                 apr_interval_time_t timeout)
{
    mm_run_t run;
    int ai = enter_run(vm, &run, NULL, s, kind, name, NULL, timeout);

    return leave_run(vm, &run, ai, execute(&run, run_block_body, &block, NULL));
}

int mm_run_server_scripts(mm_vm_t *vm, server_rec *s, apr_pool_t *p, const mm_phase_t *kind,
                          const apr_array_header_t *scripts)
{
    return run_list(vm, NULL, s, p, kind, scripts, 0, DECLINED);
}

int mm_run_script(request_rec *r, const mm_phase_t *kind, const mm_script_t *script, void *data)
{
    return run_one(mm_vm_for_thread(r->server), r, r->server, r->pool, kind, script, data, NULL);
}

/* The file is the script: declining would let the default handler send its
 * source. There is nothing else to serve here. */
static int file_result(int result)
{
    return result == DECLINED ? HTTP_NOT_FOUND : result;
}

int mm_run_file(request_rec *r)
{
    mm_vm_t *vm = mm_vm_for_thread(r->server);
    int result = run_one(vm, r, r->server, r->pool, &mm_phases[MM_PHASE_HANDLER], NULL, NULL, NULL);

    return end_response(r, file_result(result));
}

int mm_run_wake(mm_run_t *run, mm_slot_t *slot)
{
    mm_vm_t *vm = run->vm;
    mrb_state *mrb = vm->mrb;
    request_rec *r = run->r;
    int ai = mrb_gc_arena_save(mrb);
    int result;

    run->outer = NULL; /* whoever held the VM when the script fell asleep is gone */
    vm->run = run;
    result = execute(run, mm_fiber_resume, run, slot);
    if (result != SUSPENDED) {
        mm_fiber_release(run);
    }
    mrb_gc_arena_restore(mrb, ai);
    vm->run = NULL;
    leave_vm(vm, run->s);
    if (result == SUSPENDED) {
        return SUSPENDED;
    }
    mm_suspend_done(run);
    if (slot->scripts == NULL) {
        result = file_result(result);
    } else if (result == OK || result == DECLINED) {
        result = run_list(vm, r, r->server, r->pool, run->kind, slot->scripts, slot->next,
                          result == OK ? OK : slot->result);
        if (result == SUSPENDED) {
            return SUSPENDED;
        }
    }
    if (result == DECLINED) {
        /* httpd's other handlers were passed over when the script slept */
        ap_log_rerror(APLOG_MARK, APLOG_INFO, 0, r,
                      MM_LOGNO(00061) "%s script %s declined after sleeping: 404", run->kind->stem,
                      run->script);
        result = HTTP_NOT_FOUND;
    }
    return end_response(r, result);
}
