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

#include <string.h>

#include "binding.h"
#include "error.h"
#include "mod_mruby.h"

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

/* The two readers below call into Ruby (#message, #to_s of what the
 * backtrace holds), hence each is protected; each on its own, so that an
 * exception whose #message raises is still logged with where it was
 * raised. */
static mrb_value describe_message(mrb_state *mrb, void *ud)
{
    mm_exc_text_t *t = ud;
    mrb_value msg = mrb_funcall(mrb, t->exc, "message", 0);

    t->message = escaped(t->p, mrb, mrb_obj_as_string(mrb, msg));
    return mrb_nil_value();
}

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
         * any object to it later), and the #to_s of one of its objects may
         * empty it while this loop reads it. */
        bt = mrb_ary_new_from_values(mrb, n < MM_BACKTRACE_MAX ? n : MM_BACKTRACE_MAX, RARRAY_PTR(bt));
        for (i = 0; i < RARRAY_LEN(bt); i++) {
            mrb_value line = mrb_obj_as_string(mrb, RARRAY_PTR(bt)[i]);
            const char *text = escaped(t->p, mrb, line);

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
    t.cls = mrb_obj_classname(mrb, exc);
    mrb_protect_error(mrb, describe_message, &t, &raised);
    mrb_protect_error(mrb, describe_backtrace, &t, &raised);
    mrb->exc = NULL;
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
