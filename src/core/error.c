/* error.c: writes a Ruby exception to the error log as one entry: where
 * (phase, script), what (class, message), the file:line that raised it and
 * the backtrace. Everything that came from Ruby is escaped, since a message
 * may carry client data; nothing of it is ever sent to the client. */

#include "apr_strings.h"
#include "httpd.h"

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/error.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include <string.h>

#include "binding.h"
#include "error.h"
#include "mod_mruby.h"
#include "mruby_internal.h"

APLOG_USE_MODULE(mruby);

#define MM_BACKTRACE_MAX 16

typedef struct {
    mrb_value exc;
    apr_pool_t *p;
    const char *cls;
    const char *message;
    const char *where;
    const char *backtrace;
} mm_exc_text_t;

/* Only the start of a long text is copied: the entry holds no more. */
static const char *escaped(apr_pool_t *p, mrb_state *mrb, mrb_value str)
{
    apr_size_t len = (apr_size_t)RSTRING_LEN(str);

    return ap_escape_logitem(
        p, apr_pstrmemdup(p, RSTRING_PTR(str), len > MM_LOG_TEXT_MAX ? MM_LOG_TEXT_MAX : len));
}

/* The message an exception was made with, as mruby's own Exception#to_s
 * answers it: the String given to it, else the class's name. Read from the
 * object, never through #message or #to_s: a script may have redefined
 * them (on its class, on Exception, on the VM's one SystemStackError), and
 * the log entry is written after the script's time is up, where nothing
 * would stop a `loop {}` there and the thread hung for good. */
static mrb_value message_of(mrb_state *mrb, mm_vm_t *vm, mrb_value exc)
{
    if (mrb_type(exc) != MRB_TT_EXCEPTION) {
        return mrb_nil_value();
    }
    return mm_mi_exception_message(mrb, exc, vm->sym_mesg);
}

/* Text that is not a String (an object a script put into a backtrace's
 * Array after set_backtrace checked it) is named by its class: its #to_s
 * is the script's code. */
static const char *text_of(mm_exc_text_t *t, mrb_state *mrb, mrb_value v)
{
    if (mrb_string_p(v)) {
        return escaped(t->p, mrb, v);
    }
    return apr_pstrcat(t->p, "#<", ap_escape_logitem(t->p, mrb_obj_classname(mrb, v)), ">", NULL);
}

/* The two readers below run no Ruby method, but they may allocate (the
 * name of an anonymous class), which raises when the VM is out of memory:
 * each is protected on its own, so that an exception whose message cannot
 * be read is still logged with where it was raised. */
static mrb_value describe_message(mrb_state *mrb, void *ud)
{
    mm_exc_text_t *t = ud;
    mrb_value msg;

    t->cls = ap_escape_logitem(t->p, mrb_obj_classname(mrb, t->exc));
    msg = message_of(mrb, mm_vm_of(mrb), t->exc);
    t->message = mrb_string_p(msg) ? escaped(t->p, mrb, msg) : t->cls;
    return mrb_nil_value();
}

/* mrb_exc_backtrace is mruby's C reader of the backtrace kept in the
 * exception, not the #backtrace a script may have redefined. */
static mrb_value describe_backtrace(mrb_state *mrb, void *ud)
{
    mm_exc_text_t *t = ud;
    mrb_value bt = mrb_exc_backtrace(mrb, t->exc);

    if (mrb_array_p(bt) && RARRAY_LEN(bt) > 0) {
        mrb_int i, n = RARRAY_LEN(bt);
        char *where = NULL;
        const char *list = NULL;

        /* The lines are read from a copy: the backtrace is the script's
         * Array (set_backtrace keeps it as given, and the script may add
         * any object to it later). */
        bt = mrb_ary_new_from_values(mrb, n < MM_BACKTRACE_MAX ? n : MM_BACKTRACE_MAX, RARRAY_PTR(bt));
        for (i = 0; i < RARRAY_LEN(bt); i++) {
            const char *text = text_of(t, mrb, RARRAY_PTR(bt)[i]);

            if (where == NULL) {
                where = apr_pstrdup(t->p, text);
            }
            list = list ? apr_pstrcat(t->p, list, ", ", text, NULL) : text;
        }
        if (n > MM_BACKTRACE_MAX) {
            list = apr_psprintf(t->p, "%s, ... %d more", list, (int)(n - MM_BACKTRACE_MAX));
        }
        t->backtrace = list;
        /* "file:line:in method" -> "file:line" */
        if (strstr(where, ":in ")) {
            *strstr(where, ":in ") = '\0';
        }
        t->where = where;
    }
    return mrb_nil_value();
}

void mm_error_log_exception(mm_vm_t *vm, mrb_value exc, request_rec *r, server_rec *s, int level,
                            const char *phase, const char *script)
{
    mrb_state *mrb = vm->mrb;
    apr_pool_t *tmp = NULL;
    mm_exc_text_t t;
    mrb_bool raised = FALSE;
    int ai = mrb_gc_arena_save(mrb);

    /* Reading the message allocates, and may run the GC: nothing else may
     * still refer to exc (an exception that ended a fiber, mrb->exc
     * cleared), so it is kept in the arena until the entry is written. */
    mrb_gc_protect(mrb, exc);
    memset(&t, 0, sizeof t);
    if (r) {
        t.p = r->pool;
    } else {
        apr_pool_create(&tmp, NULL);
        t.p = tmp;
    }
    t.exc = exc;
    mrb_protect_error(mrb, describe_message, &t, &raised);
    mrb_protect_error(mrb, describe_backtrace, &t, &raised);
    (void)mm_mi_take_pending(mrb); /* what reading them raised */
    if (t.cls == NULL) {
        t.cls = "(an exception of a class whose name could not be read)";
    }
    if (t.message == NULL) {
        t.message = "(its message could not be read)";
    }
    if (t.where == NULL) {
        t.where = script;
    }
    if (r) {
        ap_log_rerror(APLOG_MARK, level, 0, r,
                      MM_LOGNO(00030) "%s script %s raised %s at %s: %s [backtrace: %s]", phase, script,
                      t.cls, t.where, t.message, t.backtrace ? t.backtrace : "none");
    } else {
        ap_log_error(APLOG_MARK, level, 0, s,
                     MM_LOGNO(00031) "%s script %s raised %s at %s: %s [backtrace: %s]", phase, script, t.cls,
                     t.where, t.message, t.backtrace ? t.backtrace : "none");
    }
    if (tmp) {
        apr_pool_destroy(tmp);
    }
    mrb_gc_arena_restore(mrb, ai);
}
