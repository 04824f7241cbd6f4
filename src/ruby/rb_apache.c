/* rb_apache.c: the Apache class: response output (rputs), the phase result
 * (Apache.return), logging, facts about the module and the server, and the
 * constants from httpd's headers. */

#include "httpd.h"
#include "ap_mpm.h"
#include "http_config.h"
#include "http_log.h"

#include <mruby.h>
#include <mruby/string.h>
#include <mruby/variable.h>

#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include "binding.h"
#include "classes.h"
#include "mod_mruby.h"

/* Apache.rputs(obj): writes obj.to_s to the response, byte for byte. */
static mrb_value apache_rputs(mrb_state *mrb, mrb_value self)
{
    mrb_value obj = mrb_get_arg1(mrb);
    request_rec *r = mm_binding_request(mrb, "Apache.rputs");

    if (mm_vm_of(mrb)->run->kind->flags & MM_KIND_NO_OUTPUT) {
        mrb_raisef(mrb, E_RUNTIME_ERROR, "Apache.rputs cannot be used in a %s script",
                   mm_vm_of(mrb)->run->kind->stem);
    }
    if (!mrb_string_p(obj)) {
        obj = mrb_obj_as_string(mrb, obj);
    }
    /* After an internal redirect the response is another request's: what
     * the script writes now is dropped, never sent after it. */
    if (mm_vm_of(mrb)->run->forced == MM_STATUS_UNSET &&
        mm_run_write(r, RSTRING_PTR(obj), (apr_size_t)RSTRING_LEN(obj)) == APR_EOF) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache.rputs: the response has already been sent");
    }
    return self;
}

/* Apache.return(status): the phase's result (see docs/ruby-api.md). The
 * script goes on running; the last call wins. */
static mrb_value apache_return(mrb_state *mrb, mrb_value self)
{
    mrb_int status;
    mm_run_t *run = mm_binding_run(mrb, "Apache.return");

    mrb_get_args(mrb, "i", &status);
    if (status < INT_MIN + 1 || status > INT_MAX) {
        mrb_raise(mrb, E_RANGE_ERROR, "Apache.return: status out of range");
    }
    if (status >= 100 && status <= 199) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache.return: %i is not a final status (1xx are httpd's to send)",
                   status);
    }
    run->status = (int)status;
    return self;
}

/* Apache.errlogger(level, msg), Apache.log: to the error log of the request
 * (or of the server in a server phase), with the script's file:line. */
static mrb_value apache_errlogger(mrb_state *mrb, mrb_value self)
{
    mm_run_t *run = mm_binding_run(mrb, "Apache.errlogger");
    mrb_int level;
    mrb_value msg;

    mrb_get_args(mrb, "io", &level, &msg);
    mm_binding_log(mrb, run->r, run->s, level, msg);
    return self;
}

/* Apache.syslogger(priority, msg), Apache.syslog: to syslog(3), which is
 * thread-safe; openlog is left alone (it is process-wide). */
static mrb_value apache_syslogger(mrb_state *mrb, mrb_value self)
{
    mrb_int pri;
    mrb_value msg;
    apr_pool_t *p;

    mrb_get_args(mrb, "iS", &pri, &msg);
    if (pri < 0 || pri > (LOG_LOCAL7 | LOG_DEBUG)) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "Apache.syslogger: invalid priority %i", pri);
    }
    apr_pool_create(&p, NULL);
    syslog((int)pri, "%s", mm_binding_log_text(p, RSTRING_PTR(msg), (size_t)RSTRING_LEN(msg), 1));
    apr_pool_destroy(p);
    return self;
}

/* Blocks this thread (and so its request) for usec microseconds, at most a
 * day; returns how long it slept, in microseconds. Apache.sleep and
 * Kernel#sleep take seconds, Kernel#usleep microseconds (mruby-sleep's
 * names, which the original mod_mruby's scripts use). */
static apr_interval_time_t block_for(mrb_state *mrb, mrb_float usec, const char *what)
{
    apr_time_t began = apr_time_now();

    if (!(usec >= 0) || usec > 86400.0 * APR_USEC_PER_SEC) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "%s: the time must be between 0 and 86400 seconds", what);
    }
    apr_sleep((apr_interval_time_t)usec);
    return apr_time_now() - began;
}

/* Apache.sleep(seconds) */
static mrb_value apache_sleep(mrb_state *mrb, mrb_value self)
{
    mrb_float sec;

    mrb_get_args(mrb, "f", &sec);
    block_for(mrb, sec * APR_USEC_PER_SEC, "Apache.sleep");
    return self;
}

/* Kernel#sleep(seconds): the whole seconds slept, rounded. */
static mrb_value kernel_sleep(mrb_state *mrb, mrb_value self)
{
    mrb_float sec;
    apr_interval_time_t slept;

    mrb_get_args(mrb, "f", &sec);
    slept = block_for(mrb, sec * APR_USEC_PER_SEC, "sleep");
    return mrb_int_value(mrb, (mrb_int)((slept + APR_USEC_PER_SEC / 2) / APR_USEC_PER_SEC));
}

/* Kernel#usleep(microseconds): the microseconds slept. */
static mrb_value kernel_usleep(mrb_state *mrb, mrb_value self)
{
    mrb_int usec;

    mrb_get_args(mrb, "i", &usec);
    return mrb_int_value(mrb, (mrb_int)block_for(mrb, (mrb_float)usec, "usleep"));
}

static mrb_value apache_module_name(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_lit(mrb, MM_MODULE_NAME);
}

static mrb_value apache_module_version(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_lit(mrb, MM_MODULE_VERSION);
}

static mrb_value apache_server_version(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_cstr(mrb, ap_get_server_description());
}

static mrb_value apache_server_build(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_cstr(mrb, ap_get_server_built());
}

static mrb_value apache_get_tid(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value((mrb_int)syscall(SYS_gettid));
}

/* The MPM's name ("event", ...) and whether it runs threads. */
static mrb_value apache_mpm(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_cstr(mrb, ap_show_mpm());
}

static mrb_value apache_threaded_p(mrb_state *mrb, mrb_value self)
{
    int threaded = 0;

    ap_mpm_query(AP_MPMQ_IS_THREADED, &threaded);
    return mrb_bool_value(threaded != AP_MPMQ_NOT_SUPPORTED);
}

/* The phase that runs the current script ("Handler", ...). */
static mrb_value apache_phase(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_cstr(mrb, mm_binding_run(mrb, "Apache.phase")->kind->stem);
}

/* Apache.remove_global_variable(:$name): this VM's globals are shared by the
 * requests its thread serves; returns the remaining names. */
static mrb_value apache_remove_global(mrb_state *mrb, mrb_value self)
{
    mrb_sym sym;

    mrb_get_args(mrb, "n", &sym);
    mrb_gv_remove(mrb, sym);
    return mrb_f_global_variables(mrb, self);
}

static mrb_value apache_count_arena(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(mrb_gc_arena_save(mrb));
}

/* Kernel#server_name: "Apache", for scripts shared with ngx_mruby. */
static mrb_value kernel_server_name(mrb_state *mrb, mrb_value self)
{
    return mrb_str_new_lit(mrb, AP_SERVER_BASEPRODUCT);
}

void mm_apache_init(mrb_state *mrb)
{
    struct RClass *apache = mrb_define_class(mrb, "Apache", mrb->object_class);

    mrb_define_class_method(mrb, apache, "rputs", apache_rputs, MRB_ARGS_REQ(1));
    mrb_define_class_method(mrb, apache, "return", apache_return, MRB_ARGS_REQ(1));
    /* Raised into a script that runs longer than mrubyTimeout. */
    mrb_define_class_under(mrb, apache, "Timeout", mrb->eException_class);
    mrb_define_class_method(mrb, apache, "errlogger", apache_errlogger, MRB_ARGS_REQ(2));
    mrb_define_class_method(mrb, apache, "log", apache_errlogger, MRB_ARGS_REQ(2));
    mrb_define_class_method(mrb, apache, "syslogger", apache_syslogger, MRB_ARGS_REQ(2));
    mrb_define_class_method(mrb, apache, "syslog", apache_syslogger, MRB_ARGS_REQ(2));
    mrb_define_class_method(mrb, apache, "sleep", apache_sleep, MRB_ARGS_REQ(1));
    mrb_define_class_method(mrb, apache, "module_name", apache_module_name, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, apache, "module_version", apache_module_version, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, apache, "server_version", apache_server_version, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, apache, "server_build", apache_server_build, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, apache, "get_tid", apache_get_tid, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, apache, "mpm", apache_mpm, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, apache, "threaded?", apache_threaded_p, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, apache, "phase", apache_phase, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, apache, "remove_global_variable", apache_remove_global, MRB_ARGS_REQ(1));
    mrb_define_class_method(mrb, apache, "global_remove", apache_remove_global, MRB_ARGS_REQ(1));
    mrb_define_class_method(mrb, apache, "count_arena", apache_count_arena, MRB_ARGS_NONE());
    mrb_define_method(mrb, mrb->kernel_module, "server_name", kernel_server_name, MRB_ARGS_NONE());
    mrb_define_method(mrb, mrb->kernel_module, "sleep", kernel_sleep, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, mrb->kernel_module, "usleep", kernel_usleep, MRB_ARGS_REQ(1));

    /* Raised with an HTTP status the request gets when it is not rescued. */
    mrb_define_class_under(mrb, apache, "HTTPError", mrb->eStandardError_class);

#define MM_CONST(name) mrb_define_const(mrb, apache, #name, mrb_fixnum_value(name));
#include "constants.inc"
    /* mod_mruby's syslog-style names for the log levels. */
    MM_CONST(LOG_EMERG)
    MM_CONST(LOG_ALERT)
    MM_CONST(LOG_CRIT)
    MM_CONST(LOG_ERR)
    MM_CONST(LOG_WARNING)
    MM_CONST(LOG_NOTICE)
    MM_CONST(LOG_INFO)
    MM_CONST(LOG_DEBUG)
#undef MM_CONST
    mrb_define_const(mrb, apache, "LOG_WARN", mrb_fixnum_value(APLOG_WARNING));
}
