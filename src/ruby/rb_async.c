/* rb_async.c: Apache::Async.sleep(ms). In a content handler under the event
 * MPM it suspends the request and frees the worker thread (suspend.c);
 * everywhere else it blocks, like Apache.sleep. */

#include "httpd.h"
#include "apr_time.h"

#include <string.h>

#include <mruby.h>
#include <mruby/array.h>

#include "binding.h"
#include "classes.h"
#include "mruby_internal.h"
#include "suspend.h"
#include "thread.h"

/* Whether the script runs in its own fiber, where a wait can yield it: not
 * across a C frame (a block called from a method written in C), where the
 * wait has to block. */
static int can_yield(mrb_state *mrb, mm_run_t *run)
{
    return !mrb_nil_p(run->fiber) && mm_mi_fiber_running(mrb, run->fiber) && !mm_mi_crosses_c_frame(mrb);
}

static mrb_value async_sleep(mrb_state *mrb, mrb_value self)
{
    mm_run_t *run = mm_binding_run(mrb, "Apache::Async.sleep");
    mrb_float ms;
    apr_interval_time_t usec;

    mrb_get_args(mrb, "f", &ms);
    if (!(ms >= 0) || ms > 86400000.0) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "Apache::Async.sleep: milliseconds must be from 0 to 86400000");
    }
    usec = (apr_interval_time_t)(ms * 1000.0);
    if (can_yield(mrb, run)) {
        run->sleep = usec;
        return mrb_fiber_yield(mrb, 0, NULL);
    }
    if (mrb_nil_p(run->fiber) && run->loaded && mm_suspend_possible(run)) {
        /* It sleeps through a method defined elsewhere: it could have been
         * suspended. From its next run on, it runs in a fiber. */
        run->loaded->may_suspend = 1;
    }
    apr_sleep(usec);
    return mrb_nil_value();
}

/* Apache::Async.__suspendable?: whether a wait here would suspend the
 * request (Apache::HTTP waits by sleeping then, and blocks otherwise). As
 * for a sleep, a script that could have been suspended runs in a fiber
 * from its next run on. */
int mm_async_suspendable(mrb_state *mrb)
{
    mm_run_t *run = mm_binding_run(mrb, "Apache::Async");

    if (can_yield(mrb, run)) {
        return 1;
    }
    if (mrb_nil_p(run->fiber) && run->loaded && mm_suspend_possible(run)) {
        run->loaded->may_suspend = 1;
    }
    return 0;
}

static mrb_value async_suspendable(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(mm_async_suspendable(mrb));
}

/* How long a call (Apache::HTTP) or a read (Apache::Socket) where the
 * request can be suspended waits in place first: at least MM_SPIN_MS;
 * for a service whose answers usually come within MM_NEAR_MS, three times
 * that usual time, at most MM_SPIN_MAX_MS. A near service answers within
 * a millisecond or two on an idle machine, and within some more under
 * load, when the threads wait for the CPUs: waiting for it holds the
 * thread, not a CPU, where a suspension costs several times the call's
 * CPU and closes the client's connection. A far one (or one not seen yet:
 * usual 0) is waited for the least. */
#define MM_SPIN_MS     2
#define MM_NEAR_MS     10
#define MM_SPIN_MAX_MS 20

apr_interval_time_t mm_async_spin(apr_interval_time_t usual)
{
    apr_interval_time_t least = apr_time_from_msec(MM_SPIN_MS), most = apr_time_from_msec(MM_SPIN_MAX_MS);

    if (usual <= 0 || usual > apr_time_from_msec(MM_NEAR_MS)) {
        return least;
    }
    usual *= 3;
    return usual < least ? least : usual > most ? most : usual;
}

void mm_usual_note(mm_usual_t *u, apr_interval_time_t took)
{
    took = took > 0 ? took : 1; /* (and so is every average of such) */
    if (u->avg > 0) {
        u->avg += (took - u->avg) / 4;
        u->prev = u->last;
    } else {
        u->avg = u->prev = took;
    }
    u->last = took;
}

/* One slow wait does not make the next ones suspend their requests: the
 * first call to an origin, which opens the connection (and the server
 * starts on it: a thread, a TLS session), took two to eight times as long
 * as the next ones in the suite under load, and an average starting there
 * took four calls to come down; a service on a loaded machine answers
 * late now and then (a 4 ms one after 20 and 87 ms, between answers
 * within 10). Two slow waits in a row do. */
apr_interval_time_t mm_usual_time(const mm_usual_t *u)
{
    apr_interval_time_t least = u->last < u->avg ? u->last : u->avg;

    return u->prev < least ? u->prev : least;
}

/* Apache::Socket keeps what it learns of a connection's reads in an Array
 * of three Integers (µs: the fields of mm_usual_t), nil before the first. */
static void usual_from(mrb_state *mrb, mrb_value v, mm_usual_t *u)
{
    memset(u, 0, sizeof *u);
    if (mrb_array_p(v) && RARRAY_LEN(v) == 3) {
        u->avg = (apr_interval_time_t)mrb_as_int(mrb, RARRAY_PTR(v)[0]);
        u->last = (apr_interval_time_t)mrb_as_int(mrb, RARRAY_PTR(v)[1]);
        u->prev = (apr_interval_time_t)mrb_as_int(mrb, RARRAY_PTR(v)[2]);
    }
}

/* Apache::Async.__spin(usual): how long (ms) a read waits in place before
 * the request suspends, for the reads usual says of (nil: none yet). */
static mrb_value async_spin(mrb_state *mrb, mrb_value self)
{
    mm_usual_t u;

    usual_from(mrb, mrb_get_arg1(mrb), &u);
    return mrb_fixnum_value((mrb_int)((mm_async_spin(mm_usual_time(&u)) + 999) / 1000)); /* none yet: 0 */
}

/* Apache::Async.__clock: the monotonic clock (µs), where a wait begins. */
static mrb_value async_clock(mrb_state *mrb, mrb_value self)
{
    return mrb_int_value(mrb, (mrb_int)mm_thread_now());
}

/* Apache::Async.__note(usual, began): usual (as __spin takes it) with a
 * read that began at began (__clock) and has just ended: the same Array,
 * updated (a new one the first time). If the script's
 * last sleep suspended the request and was ended by the socket being
 * ready, the read ended then: how long the request then took to be
 * resumed (a worker thread free, the VM's lock) is not the peer's time. */
static mrb_value async_note(mrb_state *mrb, mrb_value self)
{
    mrb_value usual;
    mrb_int began;
    mm_usual_t u;
    apr_time_t ready = mm_async_io_ready(mrb), end;

    mrb_get_args(mrb, "oi", &usual, &began);
    usual_from(mrb, usual, &u);
    end = ready >= (apr_time_t)began ? ready : mm_thread_now();
    mm_usual_note(&u, end - (apr_time_t)began);
    if (!mrb_array_p(usual) || RARRAY_LEN(usual) != 3) {
        usual = mrb_ary_new_capa(mrb, 3);
    }
    mrb_ary_set(mrb, usual, 0, mrb_int_value(mrb, (mrb_int)u.avg));
    mrb_ary_set(mrb, usual, 1, mrb_int_value(mrb, (mrb_int)u.last));
    mrb_ary_set(mrb, usual, 2, mrb_int_value(mrb, (mrb_int)u.prev));
    return usual;
}

int mm_async_wait_io(mrb_state *mrb, int fd, int events)
{
    mm_run_t *run = mm_binding_run(mrb, "Apache::Async");

    return can_yield(mrb, run) && mm_run_wait_io(run, fd, events);
}

apr_time_t mm_async_io_ready(mrb_state *mrb)
{
    return mm_binding_run(mrb, "Apache::Async")->io_ready;
}

/* Apache::Async.__watching?: whether the script's next sleep ends once a
 * socket it waits on is ready (mm_async_wait_io): then the sleep may be
 * long. */
static mrb_value async_watching(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(mm_binding_run(mrb, "Apache::Async")->io.n > 0);
}

void mm_async_init(mrb_state *mrb)
{
    struct RClass *async = mrb_define_module_under(mrb, mm_binding_apache(mrb), "Async");

    mrb_define_module_function(mrb, async, "sleep", async_sleep, MRB_ARGS_REQ(1));
    mrb_define_module_function(mrb, async, "__suspendable?", async_suspendable, MRB_ARGS_NONE());
    mrb_define_module_function(mrb, async, "__watching?", async_watching, MRB_ARGS_NONE());
    mrb_define_module_function(mrb, async, "__spin", async_spin, MRB_ARGS_REQ(1));
    mrb_define_module_function(mrb, async, "__clock", async_clock, MRB_ARGS_NONE());
    mrb_define_module_function(mrb, async, "__note", async_note, MRB_ARGS_REQ(2));
}
